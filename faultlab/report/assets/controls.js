// report.html's timeline, moved and explained: zoom (wheel, buttons, keys), pan (drag, the
// overview strip), a tooltip per mark (hover; click pins it), links from the expectations table
// and from the URL (#t=5.440) to the moment each was judged on. timeline.js draws.
"use strict";
(() => {
  const started = performance.now();
  const view = JSON.parse(document.getElementById("view-data").textContent);
  const svg = document.getElementById("timeline");
  const overview = document.getElementById("overview");
  const box = document.getElementById("timeline-box");
  const tip = document.getElementById("tooltip");
  const tl = drawTimeline(view, {svg, overview, box, windowLabel: document.getElementById("window-label")});
  const {FULL, lastT, judgements, fmt, setWindow} = tl;
  let hovered = null, pinned = null;
  tl.afterRender = () => {
    for (const target of [hovered, pinned]) if (target) mark(target, true);
  };

  function zoomAround(t, factor) {
    setWindow(t - (t - tl.v0) * factor, t + (tl.v1 - t) * factor);
  }

  let animation = 0;
  function animateTo(a, b) {
    const from = [tl.v0, tl.v1], began = performance.now(), id = ++animation;
    const frame = (now) => {
      if (id !== animation) return;
      const p = Math.min((now - began) / 280, 1);
      const e = p * (2 - p);
      setWindow(from[0] + (a - from[0]) * e, from[1] + (b - from[1]) * e);
      if (p < 1) requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
  }

  const timeAt = (clientX) => {
    const r = svg.getBoundingClientRect();
    const plotW = tl.plotWidth(r.width);
    return tl.v0 + (clientX - r.left - tl.left) / plotW * (tl.v1 - tl.v0);
  };

  // Shows the moment an expectation was judged on: a window around it, its line emphasised,
  // and the marks at that very moment (what it was judged on) outlined.
  function focusJudgement(index, scroll) {
    const j = judgements.find((x) => x.i === index);
    if (!j) return;
    tl.focus(j);
    const half = Math.min(Math.max(lastT / 16, 0.5), 15);
    for (const row of document.querySelectorAll("tr.expectation")) {
      row.classList.toggle("focus", Number(row.dataset.index) === index);
    }
    animateTo(j.at - half, j.at + half);
    if (scroll) document.getElementById("timeline-section").scrollIntoView({block: "nearest", behavior: "smooth"});
  }

  // Hover and pin.
  const targetKey = (h) => h && `${h.kind}:${h.ref.i}`;

  function elementsOf(h) {
    if (h.kind === "item") return svg.querySelectorAll(`[data-i="${h.ref.i}"]`);
    if (h.kind === "judgement") return svg.querySelectorAll(`.judgement[data-index="${h.ref.i}"]`);
    if (h.kind === "point") return svg.querySelectorAll(`.series-point[data-p="${h.ref.i}"]`);
    return [...svg.querySelectorAll(".fault-band")].filter((el) => el.dataset.step === h.ref.step);
  }

  function mark(h, on) {
    for (const el of elementsOf(h)) el.classList.toggle("hover", on);
  }

  function describe(h) {
    const rows = [];
    const r = h.ref;
    let title;
    if (h.kind === "item") {
      title = r.label;
      rows.push(["event", r.name]);
      rows.push(["t", r.t_end != null ? `${fmt(r.t)} to ${fmt(r.t_end)} (${(r.t_end - r.t).toFixed(3)} s)` : fmt(r.t)]);
      rows.push(["lane", r.to ? `${r.lane} → ${r.to}` : r.lane]);
      if (r.conn != null) rows.push(["conn", r.conn]);
      if (r.count > 1) rows.push(["count", r.count]);
      if (r.audio_s) rows.push(["audio", `${r.audio_s} s`]);
    } else if (h.kind === "point") {
      title = `${r.name}: ${Number(r.value.toFixed(2))} ${r.unit}`;
      rows.push(["t", fmt(r.t)]);
    } else if (h.kind === "band") {
      title = r.label || `${r.step}: ${r.fault}`;
      rows.push(["t", `${fmt(r.t)} to ${fmt(r.t_end)}${r.reverted ? "" : " (never reverted)"}`]);
      rows.push(["lane", r.lane]);
    } else {
      title = `${r.held ? "✓ held" : "✗ failed"}: ${r.expectation}`;
      rows.push(["seen", r.seen]);
      rows.push(["judged at", fmt(r.at)]);
    }
    // The fields, less those the rows above already show.
    const shown = h.kind === "band" ? ["step", "fault"] : h.kind === "item" && r.conn != null ? ["conn", "k"] : [];
    return {title, rows: [...rows, ...Object.entries(r.fields || {}).filter(([key]) => !shown.includes(key))
      .map(([key, value]) => [key, typeof value === "object" && value !== null ? JSON.stringify(value) : String(value)])]};
  }

  function show(h, event) {
    const {title, rows} = describe(h);
    tip.replaceChildren();
    const head = document.createElement("div");
    head.className = "tip-title";
    head.textContent = title;
    const list = document.createElement("dl");
    for (const [key, value] of rows) {
      const dt = document.createElement("dt");
      dt.textContent = key;
      const dd = document.createElement("dd");
      dd.textContent = String(value);
      list.append(dt, dd);
    }
    tip.append(head, list);
    tip.classList.toggle("pinned", pinned !== null && targetKey(pinned) === targetKey(h));
    tip.hidden = false;
    // Fixed to the viewport, beside the pointer, on whichever side has room.
    const x = event.clientX, y = event.clientY;
    const w = tip.offsetWidth, hgt = tip.offsetHeight;
    tip.style.left = `${Math.max(4, x + 16 + w > innerWidth ? x - 16 - w : x + 16)}px`;
    tip.style.top = `${Math.max(4, y + 16 + hgt > innerHeight ? y - 12 - hgt : y + 16)}px`;
  }

  function hover(h, event) {
    if (targetKey(h) !== targetKey(hovered)) {
      if (hovered) mark(hovered, false);
      hovered = h;
      if (hovered) mark(hovered, true);
    }
    if (pinned) return;
    if (h) show(h, event);
    else tip.hidden = true;
  }

  let drag = null;
  svg.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    drag = {x: event.clientX, v0: tl.v0, v1: tl.v1, moved: false};
    svg.setPointerCapture(event.pointerId);
  });
  svg.addEventListener("pointermove", (event) => {
    if (drag) {
      const dx = event.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (drag.moved) {
        animation++;
        const dt = dx / tl.plotWidth(svg.getBoundingClientRect().width) * (drag.v1 - drag.v0);
        setWindow(drag.v0 - dt, drag.v1 - dt);
        svg.classList.add("dragging");
        return;
      }
    }
    hover(tl.find(event), event);
  });
  svg.addEventListener("pointerup", (event) => {
    const wasDrag = drag && drag.moved;
    drag = null;
    svg.classList.remove("dragging");
    if (wasDrag) return;
    const h = tl.find(event);
    if (pinned && (!h || targetKey(h) === targetKey(pinned))) {
      mark(pinned, false);
      pinned = null;
      hover(h, event);
      return;
    }
    if (!h) return;
    if (pinned) mark(pinned, false);
    pinned = h;
    mark(pinned, true);
    show(h, event);
    if (h.kind === "judgement") {
      for (const row of document.querySelectorAll("tr.expectation")) {
        row.classList.toggle("focus", Number(row.dataset.index) === h.ref.i);
      }
    }
  });
  svg.addEventListener("pointerleave", () => {
    if (!drag) hover(null, null);
  });
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    animation++;
    const scale = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? 400 : 1;
    if (Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
      const dt = event.deltaX * scale / tl.plotWidth(svg.getBoundingClientRect().width) * (tl.v1 - tl.v0);
      setWindow(tl.v0 + dt, tl.v1 + dt);
      return;
    }
    zoomAround(timeAt(event.clientX), Math.exp(event.deltaY * scale * 0.0015));
  }, {passive: false});

  let overviewDrag = false;
  const moveTo = (event) => {
    const r = overview.getBoundingClientRect();
    const t = FULL[0] + (event.clientX - r.left - tl.left) / tl.plotWidth(r.width) * (FULL[1] - FULL[0]);
    animation++;
    setWindow(t - (tl.v1 - tl.v0) / 2, t + (tl.v1 - tl.v0) / 2);
  };
  overview.addEventListener("pointerdown", (event) => {
    overviewDrag = true;
    overview.setPointerCapture(event.pointerId);
    moveTo(event);
  });
  overview.addEventListener("pointermove", (event) => {
    if (overviewDrag) moveTo(event);
  });
  overview.addEventListener("pointerup", () => {
    overviewDrag = false;
  });

  const centre = () => (tl.v0 + tl.v1) / 2;
  const fit = () => {
    tl.focus(null);
    for (const row of document.querySelectorAll("tr.expectation.focus")) row.classList.remove("focus");
    animateTo(FULL[0], FULL[1]);
  };
  document.getElementById("zoom-in").addEventListener("click", () => animateTo(centre() - (tl.v1 - tl.v0) / 4, centre() + (tl.v1 - tl.v0) / 4));
  document.getElementById("zoom-out").addEventListener("click", () => animateTo(centre() - (tl.v1 - tl.v0), centre() + (tl.v1 - tl.v0)));
  document.getElementById("fit").addEventListener("click", fit);
  box.addEventListener("keydown", (event) => {
    const span = tl.v1 - tl.v0;
    const keys = {
      "+": () => zoomAround(centre(), 0.7), "=": () => zoomAround(centre(), 0.7),
      "-": () => zoomAround(centre(), 1 / 0.7), "0": fit,
      "ArrowLeft": () => setWindow(tl.v0 - span / 8, tl.v1 - span / 8),
      "ArrowRight": () => setWindow(tl.v0 + span / 8, tl.v1 + span / 8),
      "Escape": () => {
        if (pinned) mark(pinned, false);
        pinned = null;
        tip.hidden = true;
      },
    };
    if (keys[event.key]) {
      event.preventDefault();
      keys[event.key]();
    }
  });

  for (const link of document.querySelectorAll("a.goto")) {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      history.replaceState(null, "", link.getAttribute("href"));
      focusJudgement(Number(link.dataset.index), true);
    });
  }

  new ResizeObserver(() => {
    tl.resized();
  }).observe(box);

  tl.render();
  // A link to a moment (#t=5.440): the expectation judged there, or a window around it.
  const wanted = /^#t=(-?[\d.]+)$/.exec(location.hash);
  if (wanted) {
    const t = Number(wanted[1]);
    const j = judgements.find((x) => Math.abs(x.at - t) < 0.0005);
    if (j) focusJudgement(j.i, false);
    else setWindow(t - 1, t + 1);
  }
  const done = performance.now();
  document.body.dataset.rendered = (done - started).toFixed(1);
  document.body.dataset.renderedAt = done.toFixed(1);
})();
