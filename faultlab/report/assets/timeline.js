// report.html's timeline, drawn: the run's view (#view-data, faultlab.report.sequence.View) as
// lanes over the run clock, a window of it at a time, with what the pointer can touch there.
// controls.js moves the window and explains what is touched. Plain ES2020, no library, nothing
// fetched: the page opens from a file or an e-mail.
"use strict";

// Draws `view` into elements.svg (the window), elements.overview (the whole run) and
// elements.windowLabel (with gauges.js's strips under the lanes); returns the handle controls.js
// drives it by.
function drawTimeline(view, elements) {
  const {svg, overview, box, windowLabel} = elements;

  // Geometry (px). Each lane has label rows ("slots") above and below its line.
  const AXIS_H = 24, BAND_ROW_H = 17, JUDGE_ROW_H = 17, JUDGE_ROWS = 2, LANE_H = 88;
  const LEFT = 78, RIGHT = 14, BOTTOM = 4, SLOT_H = 13, SLOTS = 2, OVERVIEW_H = 30;
  const FONT_PX = 11, LABEL_GAP = 6, HIT_PX = 7, TICK_PX = 96;
  const FAULT = "#D55E00", HELD = "#009E73", FAILED = "#C00000", OTHER = "#888888";
  // Which labels win a crowded spot: what a reader looks for first (a loss, a refusal, a
  // recovery), then the conversation, then the plumbing.
  const PRIORITY = ["refused", "loss", "recovered", "attempt", "close", "audio", "tool_call",
    "tool_response", "conversation", "setup", "turn_complete", "resumption", "tcp", "content",
    "process", "note"];
  const MINOR = new Set(["note", "process", "content"]);
  const TELLING = new Set(["refused", "loss", "recovered", "attempt", "close", "tool_call",
    "tool_response", "setup"]);
  const CROWDED_PX = 4; // a mark per this many pixels or fewer: the rest are drawn faint
  const rank = (category) => {
    const i = PRIORITY.indexOf(category);
    return i < 0 ? PRIORITY.length : i;
  };

  const esc = (s) => String(s).replace(/[&<>"']/g,
    (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"})[c]);
  const num = (x) => Math.round(x * 10) / 10;
  const lanes = view.lanes;
  const gauges = gaugeStrips(view.series, esc, num);
  const laneIndex = new Map(lanes.map((lane, i) => [lane.id, i]));
  const colour = (category) => (/^#[0-9a-f]{6}$/i.test(view.palette[category]) ? view.palette[category] : OTHER);
  const items = view.items.map((item, i) => ({
    ...item, i, end: item.t_end ?? item.t, text: item.label,
    from: laneIndex.get(item.lane) ?? 0,
    into: item.to == null ? null : (laneIndex.get(item.to) ?? null),
  }));
  const bands = view.bands.map((band, i) => ({...band, i, row: 0}));
  const judgements = view.judgements
    .map((j, i) => ({...j, i, number: i + 1}))
    .filter((j) => typeof j.at === "number");

  // Bands that overlap in time take separate label rows.
  const rowEnds = [];
  for (const band of [...bands].sort((a, b) => a.t - b.t)) {
    let row = rowEnds.findIndex((end) => end < band.t);
    if (row < 0) row = rowEnds.push(0) - 1;
    rowEnds[row] = band.t_end;
    band.row = row;
  }
  const bandRows = rowEnds.length;

  const lastT = [...items.map((it) => it.end), ...bands.map((b) => b.t_end),
    ...judgements.map((j) => j.at), gauges.lastT].reduce((a, b) => Math.max(a, b), Math.max(view.t_end, 0.5));
  const pad = lastT * 0.015;
  const FULL = [-pad, lastT + pad];
  const MIN_SPAN = 0.002;
  let v0 = FULL[0], v1 = FULL[1];

  const bandsTop = AXIS_H;
  const judgeTop = bandsTop + bandRows * BAND_ROW_H;
  const lanesTop = judgeTop + JUDGE_ROWS * JUDGE_ROW_H;
  const gaugesTop = lanesTop + lanes.length * LANE_H;
  const height = gaugesTop + gauges.height + BOTTOM;
  const laneY = (index) => lanesTop + index * LANE_H + LANE_H / 2;


  // Text widths, measured once per label with the font the SVG uses.
  const measure = (() => {
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = `${FONT_PX}px ${getComputedStyle(svg).fontFamily}`;
    const cache = new Map();
    return (text) => {
      let w = cache.get(text);
      if (w === undefined) {
        w = ctx.measureText(text).width;
        cache.set(text, w);
      }
      return w;
    };
  })();

  // A darker shade of a colour, for text on white.
  const ink = (() => {
    const cache = new Map();
    return (hex) => {
      if (!cache.has(hex)) {
        const n = parseInt(hex.slice(1), 16);
        const dark = (v) => Math.round(v * 0.62).toString(16).padStart(2, "0");
        cache.set(hex, `#${dark(n >> 16)}${dark((n >> 8) & 255)}${dark(n & 255)}`);
      }
      return cache.get(hex);
    };
  })();

  function niceStep(span, px) {
    const raw = span * TICK_PX / Math.max(px, 1);
    if (raw >= 1) {
      for (const s of [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600]) if (s >= raw) return s;
      return 7200;
    }
    const decade = 10 ** Math.floor(Math.log10(raw));
    for (const m of [1, 2, 5]) if (m * decade >= raw) return m * decade;
    return 10 * decade;
  }

  function tickText(t, step, clock) {
    if (clock) {
      const sign = t < 0 ? "-" : "";
      const s = Math.round(Math.abs(t));
      return `${sign}${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
    }
    const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
    return t.toFixed(decimals);
  }

  const fmt = (t) => `${t.toFixed(3)} s`;

  // Marks on a lane's line, by what they stand for.
  function symbol(item, x, y, c) {
    const a = `class="mark" fill="${c}" stroke="${c}"`;
    switch (item.name === "tcp.connect" ? "syn" : item.name === "tcp.rst" ? "rst" :
      item.name === "tcp.fin" ? "fin" : item.category) {
      case "loss":
        return `<path ${a} d="M${num(x - 7)} ${num(y - 6)}h14l-7 12z"/>`;
      case "refused":
        return `<circle ${a} cx="${num(x)}" cy="${num(y)}" r="6.5"/>` +
          `<path class="mark-x" d="M${num(x - 3)} ${num(y - 3)}l6 6m0 -6l-6 6"/>`;
      case "recovered":
        return `<circle ${a} cx="${num(x)}" cy="${num(y)}" r="6"/>` +
          `<path class="mark-x" d="M${num(x - 3.2)} ${num(y + 0.2)}l2.2 2.4l4.2 -5"/>`;
      case "attempt":
        return `<path ${a} d="M${num(x - 4)} ${num(y - 6)}l10 6l-10 6z"/>`;
      case "conversation":
        return `<path ${a} d="M${num(x)} ${num(y - 6)}l6 6l-6 6l-6 -6z"/>`;
      case "tool_call": case "tool_response":
        return `<rect ${a} x="${num(x - 5)}" y="${num(y - 5)}" width="10" height="10"/>`;
      case "syn":
        return `<path ${a} d="M${num(x)} ${num(y - 6)}l4.5 6l-4.5 6l-4.5 -6z"/>`;
      case "fin":
        return `<rect ${a} fill="#fff" x="${num(x - 1.5)}" y="${num(y - 6)}" width="3" height="12"/>`;
      case "rst":
        return `<path ${a} fill="none" stroke-width="2.5" d="M${num(x - 4)} ${num(y - 4)}l8 8m0 -8l-8 8"/>`;
      case "note": case "process":
        return `<circle ${a} fill="#fff" stroke-width="1.5" cx="${num(x)}" cy="${num(y)}" r="3.5"/>`;
      default:
        return `<circle ${a} cx="${num(x)}" cy="${num(y)}" r="4.5"/>`;
    }
  }

  // What the pointer can touch, redrawn with the rest: boxes with a rank (lower wins where
  // they overlap: a mark over the arrow through it, an arrow over a span, anything over a band).
  let hits = [];
  let focused = null, focusedAt = null; // the judgement the table asked for, and its moment
  let afterRender = () => {};

  function render() {
    const began = performance.now();
    const width = Math.max(box.clientWidth, 360);
    const right = width - RIGHT;
    const plotW = right - LEFT;
    const k = plotW / (v1 - v0);
    const X = (t) => LEFT + (t - v0) * k;
    const seen = (a, b) => b >= v0 && a <= v1;
    const clampX = (x) => Math.min(Math.max(x, LEFT - 2), right + 2);
    const out = [];
    hits = [];

    out.push(`<defs><clipPath id="plot-clip"><rect x="${LEFT}" y="0" width="${plotW}" height="${height}"/></clipPath>`,
      `<pattern id="hatch" width="7" height="7" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">`,
      `<rect width="7" height="7" fill="${FAULT}" fill-opacity="0.07"/><line x1="0" y1="0" x2="0" y2="7" stroke="${FAULT}" stroke-opacity="0.22" stroke-width="2.5"/></pattern></defs>`);

    // Lane rows and the axis's grid.
    lanes.forEach((lane, i) => {
      out.push(`<rect class="lane-bg${i % 2 ? " odd" : ""}" x="0" y="${lanesTop + i * LANE_H}" width="${width}" height="${LANE_H}"/>`);
    });
    out.push(...gauges.rows(gaugesTop, width));
    const step = niceStep(v1 - v0, plotW);
    const clock = step >= 60 || v1 - v0 >= 180;
    out.push(`<g class="axis">`,
      `<text class="axis-name" x="${LEFT - 8}" y="15" text-anchor="end">${clock ? "m:ss" : "t (s)"}</text>`);
    for (let n = Math.ceil(v0 / step); n * step <= v1; n++) {
      const t = n * step || 0; // never "-0"
      const x = num(X(t));
      out.push(`<line class="grid" x1="${x}" x2="${x}" y1="${AXIS_H - 5}" y2="${height - BOTTOM}"/>`,
        `<text x="${x}" y="15" text-anchor="middle">${esc(tickText(t, step, clock))}</text>`);
    }
    out.push(`<line class="axis-line" x1="${LEFT}" x2="${right}" y1="${AXIS_H - 5}" y2="${AXIS_H - 5}"/></g>`);

    out.push(`<g clip-path="url(#plot-clip)">`);

    // Faults: a shaded band across the lanes, hatched on its own lane; an instant is a line.
    for (const band of bands) {
      if (!seen(band.t, band.t_end)) continue;
      const x0 = clampX(X(band.t)), x1 = clampX(X(band.t_end));
      const w = Math.max(x1 - x0, 0);
      const own = laneIndex.get(band.lane) ?? 0;
      const labelY = bandsTop + band.row * BAND_ROW_H;
      const title = `${band.label || `${band.step}: ${band.fault}`}${band.reverted ? "" : " (never reverted)"}`;
      out.push(`<g class="fault-band" data-step="${esc(band.step)}" data-fault="${esc(band.fault)}" data-lane="${esc(band.lane)}">`);
      if (w >= 1.5) {
        out.push(`<rect class="band-all" x="${num(x0)}" y="${labelY}" width="${num(w)}" height="${height - BOTTOM - labelY}"/>`,
          `<rect fill="url(#hatch)" x="${num(x0)}" y="${lanesTop + own * LANE_H}" width="${num(w)}" height="${LANE_H}"/>`);
      }
      out.push(`<line class="band-edge" x1="${num(X(band.t))}" x2="${num(X(band.t))}" y1="${labelY}" y2="${height - BOTTOM}"/>`);
      if (band.reverted && band.t_end > band.t) {
        out.push(`<line class="band-edge end" x1="${num(X(band.t_end))}" x2="${num(X(band.t_end))}" y1="${labelY}" y2="${height - BOTTOM}"/>`);
      }
      const lx = Math.max(X(band.t), LEFT) + 4;
      out.push(`<text class="band-label" x="${num(lx)}" y="${labelY + 12}">${esc(title)}</text></g>`);
      hits.push({kind: "band", ref: band, x0: x0 - 2, x1: Math.max(x1, x0 + Math.max(measure(title), 4)) + 2,
        y0: labelY, y1: labelY + BAND_ROW_H, rank: 2});
      hits.push({kind: "band", ref: band, x0: x0 - 2, x1: x1 + 2, y0: lanesTop + own * LANE_H,
        y1: lanesTop + (own + 1) * LANE_H, rank: 9});
    }

    // Messages first (arrows between lanes), then each lane's line and marks over them, so a
    // refusal is never hidden under a stream. Crowded (more than a mark per few pixels), only
    // the telling marks keep their full strength.
    const shown = items.filter((item) => seen(item.t, item.end));
    const crowded = shown.length * CROWDED_PX > plotW;
    const labelCandidates = [];
    const messages = [];
    const marks = lanes.map(() => []);
    for (const item of shown) {
      const c = colour(item.category);
      const x = X(item.t);
      const y = laneY(item.from);
      const judged = focusedAt !== null && Math.abs(item.t - focusedAt) < 0.0005;
      const quiet = crowded && !TELLING.has(item.category);
      const attrs = `class="item${item.into == null ? " marker" : " message"}${item.t_end != null ? " span" : ""}${quiet ? " quiet" : ""}${judged ? " focus" : ""}" data-i="${item.i}" data-name="${esc(item.name)}" data-category="${esc(item.category)}" data-lane="${esc(item.lane)}"`;
      if (item.into == null) {
        if (item.t_end != null) {
          const xe = X(item.end);
          marks[item.from].push(`<g ${attrs}><rect class="run" fill="${c}" x="${num(x)}" y="${y - 3}" width="${num(Math.max(xe - x, 1))}" height="6"/>`,
            symbol(item, x, y, c), `</g>`);
          hits.push({kind: "item", ref: item, x0: x - HIT_PX, x1: xe + HIT_PX, y0: y - HIT_PX, y1: y + HIT_PX, rank: 1});
        } else {
          marks[item.from].push(`<g ${attrs}>${symbol(item, x, y, c)}</g>`);
          hits.push({kind: "item", ref: item, x0: x - HIT_PX, x1: x + HIT_PX, y0: y - HIT_PX, y1: y + HIT_PX, rank: 0});
        }
        labelCandidates.push({item, x: x + 9, lane: item.from,
          sides: item.from === lanes.length - 1 ? ["down", "up"] : ["up", "down"]});
        continue;
      }
      // A message: an arrow from the sender's line to the receiver's; a run of them, a
      // translucent span with a solid bar on the sender's side.
      const yTo = laneY(item.into);
      const dir = yTo > y ? 1 : -1;
      const ya = y + dir * 4, yb = yTo - dir * 2;
      const head = quiet ? "" : `<path class="head" fill="${c}" d="M${num(x)} ${num(yb)}l-3.6 ${-dir * 7}h7.2z"/>`;
      const shaftEnd = quiet ? yb : yb - dir * 6;
      if (item.t_end != null) {
        const xe = Math.max(X(item.end), x + 1.5);
        messages.push(`<g ${attrs}><rect class="flow" fill="${c}" x="${num(x)}" y="${num(Math.min(ya, yb))}" width="${num(xe - x)}" height="${num(Math.abs(yb - ya))}"/>`,
          `<rect class="bar" fill="${c}" x="${num(x)}" y="${num(dir > 0 ? y : y - 4)}" width="${num(xe - x)}" height="4"/>`,
          `<line class="arrow" stroke="${c}" x1="${num(x)}" x2="${num(x)}" y1="${num(ya)}" y2="${num(shaftEnd)}"/>${head}</g>`);
        hits.push({kind: "item", ref: item, x0: x - 3, x1: xe + 3, y0: Math.min(y, yTo), y1: Math.max(y, yTo), rank: 5});
      } else {
        messages.push(`<g ${attrs}><line class="arrow" stroke="${c}" x1="${num(x)}" x2="${num(x)}" y1="${num(ya)}" y2="${num(shaftEnd)}"/>${head}</g>`);
        hits.push({kind: "item", ref: item, x0: x - 4, x1: x + 4, y0: Math.min(y, yTo), y1: Math.max(y, yTo), rank: 3});
      }
      labelCandidates.push({item, x: x + 5, lane: item.from, sides: [dir > 0 ? "down" : "up"],
        alt: {lane: item.into, side: dir > 0 ? "up" : "down"}});
    }
    out.push(`<g class="messages">`, ...messages, `</g>`);
    lanes.forEach((lane, li) => {
      const emphasised = bands.some((b) => b.lane === lane.id && seen(b.t, b.t_end));
      out.push(`<g class="lane${emphasised ? " faulted" : ""}" data-lane="${esc(lane.id)}">`,
        `<line class="lane-line" x1="${LEFT}" x2="${right}" y1="${laneY(li)}" y2="${laneY(li)}"/>`,
        ...marks[li], `</g>`);
    });
    out.push(...gauges.draw(gaugesTop, X, v0, v1, LEFT, right, hits));

    // Expectations: a dashed line at the moment each was judged on, its number and glyph above.
    const glyphEnds = new Array(JUDGE_ROWS).fill(-Infinity);
    for (const j of [...judgements].sort((a, b) => a.at - b.at)) {
      if (!seen(j.at, j.at)) continue;
      const x = X(j.at);
      const text = `${j.held ? "✓" : "✗"}${j.number}`;
      const w = measure(text) + 6;
      let row = glyphEnds.findIndex((end) => end <= x - w / 2);
      if (row < 0) row = glyphEnds.indexOf(Math.min(...glyphEnds));
      glyphEnds[row] = x + w / 2 + 2;
      const gy = judgeTop + row * JUDGE_ROW_H;
      const c = j.held ? HELD : FAILED;
      out.push(`<g class="judgement${focused === j.i ? " focus" : ""}" data-held="${j.held}" data-index="${j.i}" data-at="${j.at}">`,
        `<line stroke="${c}" x1="${num(x)}" x2="${num(x)}" y1="${gy + JUDGE_ROW_H - 2}" y2="${height - BOTTOM}"/>`,
        `<rect class="glyph-bg" stroke="${c}" x="${num(x - w / 2)}" y="${gy + 1}" width="${num(w)}" height="${JUDGE_ROW_H - 3}" rx="3"/>`,
        `<text fill="${c}" x="${num(x)}" y="${gy + 12}" text-anchor="middle">${text}</text></g>`);
      hits.push({kind: "judgement", ref: j, x0: x - w / 2, x1: x + w / 2, y0: gy, y1: gy + JUDGE_ROW_H, rank: 0});
      hits.push({kind: "judgement", ref: j, x0: x - 3, x1: x + 3, y0: lanesTop, y1: height, rank: 6});
    }

    // Labels, most telling first, each where it fits at this zoom; the rest wait for the tooltip.
    const taken = new Map();
    const fits = (key, a, b) => !(taken.get(key) || []).some(([p, q]) => a < q && b > p);
    const take = (key, a, b) => {
      if (!taken.has(key)) taken.set(key, []);
      taken.get(key).push([a, b]);
    };
    const slotY = (lane, side, slot) => laneY(lane) + (side === "up" ? -9 - slot * SLOT_H : 17 + slot * SLOT_H);
    labelCandidates.sort((a, b) => rank(a.item.category) - rank(b.item.category) || a.item.t - b.item.t);
    const labels = [];
    for (const {item, x, lane, sides, alt} of labelCandidates) {
      const w = measure(item.text);
      let x0 = Math.max(x, LEFT + 2);
      if (x0 + w > right) x0 = Math.max(X(item.t) - 7 - w, LEFT + 2);
      const spots = sides.flatMap((side) => Array.from({length: SLOTS}, (_, s) => [lane, side, s]));
      if (alt) spots.push(...Array.from({length: SLOTS}, (_, s) => [alt.lane, alt.side, s]));
      for (const [ln, side, s] of spots) {
        const key = `${ln}${side}${s}`;
        if (!fits(key, x0 - LABEL_GAP / 2, x0 + w + LABEL_GAP / 2)) continue;
        take(key, x0 - LABEL_GAP / 2, x0 + w + LABEL_GAP / 2);
        labels.push(`<text class="label${MINOR.has(item.category) || item.name === "tcp.fin" ? " minor" : ""}" data-i="${item.i}" fill="${ink(colour(item.category))}" x="${num(x0)}" y="${num(slotY(ln, side, s))}">${esc(item.text)}</text>`);
        break;
      }
    }
    out.push(`<g class="labels">`, ...labels, `</g>`, `</g>`);

    // Lane names over the left margin.
    out.push(`<g class="lane-names">`, `<rect x="0" y="${lanesTop}" width="${LEFT - 4}" height="${lanes.length * LANE_H}" class="margin"/>`);
    lanes.forEach((lane, li) => {
      out.push(`<text class="lane-name" x="${LEFT - 10}" y="${laneY(li) + 4}" text-anchor="end">${esc(lane.label)}</text>`);
    });
    out.push(...gauges.names(gaugesTop, LEFT - 10));
    if (bandRows) out.push(`<text class="strip-name" x="${LEFT - 10}" y="${bandsTop + 12}" text-anchor="end">faults</text>`);
    if (judgements.length) out.push(`<text class="strip-name" x="${LEFT - 10}" y="${judgeTop + 12 + (JUDGE_ROWS - 1) * JUDGE_ROW_H / 2}" text-anchor="end">judged</text>`);
    out.push(`</g>`);

    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.innerHTML = out.join("");
    renderOverview(width);
    windowLabel.textContent = `${fmt(Math.max(v0, 0))} to ${fmt(Math.min(v1, lastT))} of ${fmt(view.t_end)}`;
    afterRender();
    // How long a redraw takes (ms), for bench/report_bench.py's zoom figures.
    svg.dataset.renderMs = (performance.now() - began).toFixed(1);
  }

  // The whole run in a strip: where the marks are, the faults, and the window shown above.
  let overviewWidth = 0, overviewStatic = "";
  function renderOverview(width) {
    const plotW = width - RIGHT - LEFT;
    const X = (t) => LEFT + (t - FULL[0]) / (FULL[1] - FULL[0]) * plotW;
    if (width !== overviewWidth) {
      overviewWidth = width;
      const rowH = (OVERVIEW_H - 6) / lanes.length;
      const parts = [`<rect class="overview-bg" x="${LEFT}" y="0" width="${plotW}" height="${OVERVIEW_H}"/>`];
      for (const band of bands) {
        parts.push(`<rect fill="${FAULT}" fill-opacity="0.22" x="${num(X(band.t))}" y="0" width="${num(Math.max(X(band.t_end) - X(band.t), 1.5))}" height="${OVERVIEW_H}"/>`);
      }
      // One tick per pixel column and lane: the most telling mark there.
      const best = new Map();
      for (const item of items) {
        const lane = item.into == null ? item.from : Math.min(item.from, item.into);
        for (let px = Math.floor(X(item.t)); px <= Math.floor(X(item.end)); px++) {
          const key = `${lane}:${px}`;
          const had = best.get(key);
          if (!had || rank(item.category) < rank(had.category)) best.set(key, item);
        }
      }
      for (const [key, item] of best) {
        const [lane, px] = key.split(":").map(Number);
        parts.push(`<rect fill="${colour(item.category)}" x="${px}" y="${num(3 + lane * rowH)}" width="1" height="${num(rowH - 1)}"/>`);
      }
      for (const j of judgements) {
        parts.push(`<rect fill="${j.held ? HELD : FAILED}" x="${num(X(j.at) - 0.75)}" y="0" width="1.5" height="${OVERVIEW_H}"/>`);
      }
      parts.push(`<text class="strip-name" x="${LEFT - 10}" y="${OVERVIEW_H / 2 + 4}" text-anchor="end">whole run</text>`);
      overviewStatic = parts.join("");
      overview.setAttribute("width", width);
      overview.setAttribute("height", OVERVIEW_H);
      overview.setAttribute("viewBox", `0 0 ${width} ${OVERVIEW_H}`);
    }
    const a = Math.max(X(v0), LEFT), b = Math.min(X(v1), LEFT + plotW);
    const whole = v0 <= FULL[0] && v1 >= FULL[1];
    overview.innerHTML = overviewStatic + (whole ? "" :
      `<rect class="outside" x="${LEFT}" y="0" width="${num(a - LEFT)}" height="${OVERVIEW_H}"/>` +
      `<rect class="outside" x="${num(b)}" y="0" width="${num(LEFT + plotW - b)}" height="${OVERVIEW_H}"/>` +
      `<rect class="window" x="${num(a)}" y="0.5" width="${num(Math.max(b - a, 2))}" height="${OVERVIEW_H - 1}"/>`);
  }

  // Redraws at most once a frame, however many wheel and pointer events arrive.
  let queued = false;
  function redraw() {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      render();
    });
  }

  function setWindow(a, b) {
    const fullSpan = FULL[1] - FULL[0];
    const span = Math.min(Math.max(b - a, MIN_SPAN), fullSpan);
    let start = a + (b - a - span) / 2;
    start = Math.min(Math.max(start, FULL[0]), FULL[1] - span);
    v0 = start;
    v1 = start + span;
    redraw();
  }

  // The box the pointer is over, if any: the lowest rank, then the nearest centre.
  function find(event) {
    const r = svg.getBoundingClientRect();
    const x = event.clientX - r.left, y = event.clientY - r.top;
    let best = null, bestScore = Infinity;
    for (const h of hits) {
      if (x < h.x0 || x > h.x1 || y < h.y0 || y > h.y1) continue;
      const cx = (h.x0 + h.x1) / 2;
      const score = h.rank * 100 + Math.min(Math.abs(x - cx), 99);
      if (score < bestScore) {
        best = h;
        bestScore = score;
      }
    }
    return best;
  }

  return {
    FULL, lastT, judgements, fmt,
    get v0() { return v0; },
    get v1() { return v1; },
    // The plot's width in px for a box of this width (the margins are the lane names').
    plotWidth: (width) => width - LEFT - RIGHT,
    // Where the plot starts in a box, in px from its left.
    left: LEFT,
    setWindow, render, find,
    // The judgement to emphasise (its line and the marks at its moment), or none.
    focus(j) {
      focused = j ? j.i : null;
      focusedAt = j ? j.at : null;
    },
    // What to do after each draw (the controls re-mark what is hovered and pinned).
    set afterRender(f) { afterRender = f; },
    resized() {
      overviewWidth = 0;
      redraw();
    },
  };
}
