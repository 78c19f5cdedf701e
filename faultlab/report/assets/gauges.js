// report.html's gauges: what a run's records plot (view.series, faultlab.report.sequence.Series:
// a client's audio stats), a strip each under timeline.js's lanes, on its clock. Each strip runs
// from 0 (its foot) to a round number over its largest reading (written at its head); each
// reading is a dot, joined by a line, and a box the pointer can touch (kind "point").
"use strict";

function gaugeStrips(series, esc, num) {
  const STRIP_H = 50;
  const strips = (series || []).map((s, si) => {
    const points = s.points.map(([t, value], pi) => ({t, value, i: `${si}:${pi}`, name: s.name, unit: s.unit}));
    const top = points.reduce((m, p) => Math.max(m, p.value), 0);
    const step = top > 0 ? 10 ** Math.floor(Math.log10(top)) : 1;
    return {...s, si, points, max: +(Math.ceil(top / step) * step).toPrecision(12) || 1};
  });

  return {
    height: strips.length * STRIP_H,
    lastT: strips.flatMap((s) => s.points.map((p) => p.t)).reduce((a, b) => Math.max(a, b), 0),
    // Their rows' backgrounds, from `top`, across `width`.
    rows: (top, width) => strips.map((s) =>
      `<rect class="series-bg" x="0" y="${top + s.si * STRIP_H}" width="${width}" height="${STRIP_H}"/>`),
    // The readings between v0 and v1 (and one each side, so the line runs to the edges) on the
    // x scale X, from `left` to `right`; their boxes pushed onto `hits`.
    draw(top, X, v0, v1, left, right, hits) {
      const out = [];
      for (const s of strips) {
        const y0 = top + s.si * STRIP_H;
        const Y = (value) => y0 + STRIP_H - 6 - (value / s.max) * (STRIP_H - 16);
        const after = s.points.findIndex((p) => p.t >= v0);
        const first = after < 0 ? s.points.length - 1 : Math.max(after - 1, 0);
        let last = s.points.findIndex((p) => p.t > v1);
        last = last < 0 ? s.points.length - 1 : last;
        const shown = s.points.slice(first, last + 1);
        const dots = shown.length * 5 <= right - left;
        out.push(`<g class="series" data-series="${esc(s.name)}">`,
          `<line class="series-foot" x1="${left}" x2="${right}" y1="${num(Y(0))}" y2="${num(Y(0))}"/>`,
          `<polyline class="series-line" points="${shown.map((p) => `${num(X(p.t))},${num(Y(p.value))}`).join(" ")}"/>`);
        for (const p of shown) {
          const x = X(p.t), y = Y(p.value);
          if (dots) out.push(`<circle class="series-point" data-p="${p.i}" cx="${num(x)}" cy="${num(y)}" r="2.2"/>`);
          hits.push({kind: "point", ref: p, x0: x - 4, x1: x + 4, y0, y1: y0 + STRIP_H, rank: 4});
        }
        out.push(`<text class="series-max" x="${left + 4}" y="${y0 + 10}">${esc(`${s.max} ${s.unit}`)}</text></g>`);
      }
      return out;
    },
    // Their names and units in the left margin, right-aligned at `x`.
    names(top, x) {
      const out = strips.length ? [`<rect x="0" y="${top}" width="${x + 6}" height="${strips.length * STRIP_H}" class="margin"/>`] : [];
      for (const s of strips) {
        const y = top + s.si * STRIP_H + STRIP_H / 2;
        out.push(`<text class="strip-name" x="${x}" y="${y}" text-anchor="end">${esc(s.name)}</text>`,
          `<text class="strip-name" x="${x}" y="${y + 12}" text-anchor="end">${esc(s.unit)}</text>`);
      }
      return out;
    },
  };
}
