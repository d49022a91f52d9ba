/* Small inline-SVG line charts for the overview (no library). */
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2952cc", "#e07a1f", "#2f9e44", "#c0362c", "#7048e8", "#0c8599", "#a61e4d", "#5c940d"];
  const W = 480, H = 190, L = 48, R = 10, T = 10, B = 24;

  function svgEl(tag, attrs) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  function fmtTime(t, span) {
    const d = new Date(t * 1000).toISOString();
    return span > 12 * 3600 ? d.slice(5, 10) + " " + d.slice(11, 16) : d.slice(11, 16);
  }

  /**
   * lineChart({title, times: [t...], series: [{name, values: [v...]}], format(v)})
   * -> a div.chart holding a title, an <svg> and a legend. `values[i]` belongs to `times[i]`.
   */
  function lineChart(opts) {
    const box = document.createElement("div");
    box.className = "chart";
    box.dataset.chart = opts.id || opts.title;
    const h = document.createElement("h3");
    h.textContent = opts.title;
    box.append(h);
    const fmt = opts.format ||
      ((v) => (Number.isInteger(v) ? String(v) : v < 10 ? v.toFixed(1) : String(Math.round(v))));
    const times = opts.times;
    const all = opts.series.flatMap((s) => s.values);
    const max = Math.max(opts.minMax || 0, ...all, 0) || 1;
    const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": opts.title });
    const x = (i) => L + (times.length <= 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (times.length - 1));
    const y = (v) => T + (H - T - B) * (1 - v / max);
    for (const frac of [0, 0.5, 1]) {
      const yy = y(max * frac);
      svg.append(svgEl("line", { x1: L, x2: W - R, y1: yy, y2: yy, class: "axis" }));
      const label = svgEl("text", { x: L - 6, y: yy + 3, "text-anchor": "end" });
      label.textContent = fmt(max * frac);
      svg.append(label);
    }
    if (times.length) {
      const span = times[times.length - 1] - times[0];
      const last = times.length - 1;
      for (const i of new Set([0, Math.floor(last / 2), last])) {
        const anchor = i === 0 && last > 0 ? "start" : i === last && last > 0 ? "end" : "middle";
        const label = svgEl("text", { x: x(i), y: H - 6, "text-anchor": anchor });
        label.textContent = fmtTime(times[i], span);
        svg.append(label);
      }
    }
    opts.series.forEach((s, si) => {
      const color = COLORS[si % COLORS.length];
      const pts = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
      svg.append(svgEl("polyline", { points: pts, fill: "none", stroke: color, "stroke-width": 1.8,
        "stroke-linejoin": "round", "data-series": s.name }));
      s.values.forEach((v, i) => {
        if (v > 0) svg.append(svgEl("circle", { cx: x(i), cy: y(v), r: 2.2, fill: color }));
      });
    });
    box.append(svg);
    const legend = document.createElement("div");
    legend.className = "legend";
    opts.series.forEach((s, si) => {
      const item = document.createElement("span");
      const sw = document.createElement("span");
      sw.className = "sw s" + (si % COLORS.length);
      item.append(sw, s.name);
      legend.append(item);
    });
    if (!opts.series.length) legend.textContent = "no requests in this window";
    box.append(legend);
    return box;
  }

  window.Charts = { lineChart };
})();
