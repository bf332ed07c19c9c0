// ExplorerWidget: a sweep's entries as a sortable table, time against a resource or knob with
// its Pareto front, the best time over two knobs, and a roofline. Every plot is SVG (one
// element per config). Dropped configs are red crosses with their reason on hover. A click
// on a point, a cell or a row sends {type: "select", config_id, shape} to Python, which fills
// the `detail` traitlet (report, timeline, diff) shown below the plots.
const SVGNS = "http://www.w3.org/2000/svg";
const ALIVE = new Set(["measured", "simulated", "static", "pending"]);
const RES_LABEL = { smem_bytes: "SMEM per CTA (KiB)", registers: "registers per thread", ctas_per_sm: "CTAs per SM",
  spills: "spilled bytes", num_warps: "warps", tmem_columns: "TMEM columns", advisories: "ptxas advisories" };
const TIME_LABEL = { us: "measured µs", predicted_us: "simulated µs" };
const COLOR = { us: "#2e86de", predicted_us: "#8e44ad", front: "#e67e22", drop: "#c0392b", none: "#95a5a6" };

function exSvg(tag, attrs, parent, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text != null) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function exVal(e, key) {
  if (key !== "config" && Object.prototype.hasOwnProperty.call(e, key)) return e[key];
  return (e.config || {})[key];
}
function exNum(v) {
  if (typeof v === "boolean") return v ? 1 : 0;
  return (typeof v === "number" && isFinite(v)) ? v : null;
}
function exAxisVal(e, key) {
  const v = exNum(exVal(e, key));
  return v != null && key === "smem_bytes" ? v / 1024 : v;
}
function exFmt(v, d) {
  if (v == null) return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(d || 4);
  return String(v);
}
// the time that ranks a shape's entries: measured where any was measured (as Exploration.pareto)
function exTimeKey(es) { return es.some(e => ALIVE.has(e.status) && e.us != null) ? "us" : "predicted_us"; }
function exFront(es, res, by) {
  const pts = es.filter(e => ["measured", "simulated", "static"].includes(e.status) && e[by] != null && exNum(exVal(e, res)) != null);
  pts.sort((a, b) => (exNum(exVal(a, res)) - exNum(exVal(b, res))) || (a[by] - b[by]));
  const front = []; let best = Infinity;
  for (const e of pts) if (e[by] < best) { front.push(e); best = e[by]; }
  return front;
}
// a scale over numbers (linear or log) or, for other values, evenly spaced categories
function exScale(values, a, b, log) {
  if (!values.length) values = [0, 1];
  const nums = values.map(v => (typeof v === "number" && isFinite(v) && (!log || v > 0)) ? v : null);
  if (nums.every(v => v != null)) {
    let lo = Math.min(...nums), hi = Math.max(...nums);
    if (log) { lo = Math.log10(lo); hi = Math.log10(hi); }
    if (!(hi > lo)) { lo -= 0.5; hi += 0.5; }
    const pad = (hi - lo) * 0.06; lo -= pad; hi += pad;
    const f = v => { let x = exNum(v); if (log) x = Math.log10(x); return a + (x - lo) / (hi - lo) * (b - a); };
    f.ticks = () => log ? exLogTicks(Math.pow(10, lo), Math.pow(10, hi)) : tlxTicks(lo, hi, 5);
    f.numeric = true;
    return f;
  }
  const cats = Array.from(new Set(values.map(v => JSON.stringify(v))));
  const f = v => a + (cats.indexOf(JSON.stringify(v)) + 0.5) / cats.length * (b - a);
  f.ticks = () => cats.map(c => JSON.parse(c));
  f.numeric = false;
  return f;
}
function exLogTicks(lo, hi) {
  const out = [];
  for (let p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi)); p++)
    for (const m of [1, 2, 5]) { const v = m * Math.pow(10, p); if (v >= lo && v <= hi) out.push(v); }
  return out;
}
// viridis-like ramp, fast (0) -> slow (1)
const RAMP = [[253, 231, 37], [94, 201, 98], [33, 145, 140], [59, 82, 139], [68, 1, 84]];
function exRamp(t) {
  t = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
  const i = Math.min(Math.floor(t), RAMP.length - 2), f = t - i, a = RAMP[i], b = RAMP[i + 1];
  return "rgb(" + a.map((v, k) => Math.round(v + (b[k] - v) * f)).join(",") + ")";
}
function exCross(g, x, y, r, cls) {
  return exSvg("path", { d: `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}`,
    stroke: COLOR.drop, "stroke-width": 2.2, class: cls }, g);
}
function exSelect(parent, label, options, value, onChange) {
  const lab = tlxEl("label", "tlxwb-ex-ctl", parent, label + " ");
  const s = tlxEl("select", null, lab);
  for (const o of options) { const op = tlxEl("option", null, s, String(o)); op.value = String(o); }
  s.value = String(value);
  s.addEventListener("change", () => onChange(s.value));
  return s;
}

function render({ model, el }) {
  const root = tlxEl("div", "tlxwb tlxwb-explorer", el);
  // EXPLORER_CSS: static/explorer.css, appended to this module by Python
  if (typeof EXPLORER_CSS === "string") tlxEl("style", null, root, EXPLORER_CSS);
  const head = tlxEl("div", "tlxwb-head", root);
  tlxEl("span", "tlxwb-title", head, model.get("title") || "exploration");
  const live = tlxEl("span", "tlxwb-ex-live", head);
  const shapeBox = tlxEl("span", "tlxwb-controls", head);
  const summary = tlxEl("pre", "tlxwb-ex-summary", root);
  const tableBox = tlxEl("div", "tlxwb-ex-tablebox", root);
  const plots = tlxEl("div", "tlxwb-ex-plots", root);
  const scatterBox = tlxEl("div", "tlxwb-ex-plot tlxwb-ex-scatter", plots);
  const heatBox = tlxEl("div", "tlxwb-ex-plot tlxwb-ex-heatmap", plots);
  const roofBox = tlxEl("div", "tlxwb-ex-plot tlxwb-ex-roofline", plots);
  const status = tlxEl("div", "tlxwb-status", root, "click a point, a cell or a row to open that config");
  const detail = tlxEl("div", "tlxwb-ex-detail", root);
  const tip = tlxTooltip(root);
  let sortKey = "time", sortDir = 1;

  const shapes = () => model.get("_shapes") || [];
  const shape = () => shapes()[Math.min(model.get("shape_index") || 0, Math.max(shapes().length - 1, 0))];
  const entries = () => {
    const s = JSON.stringify(shape());
    return (model.get("_entries") || []).filter(e => JSON.stringify(e.shape) === s);
  };
  const setTrait = (k, v) => { model.set(k, v); model.save_changes(); };

  function describe(e, extra) {
    const rows = [["config", e.config_id], ["", Object.entries(e.config || {}).map(([k, v]) => k + "=" + v).join(", ")],
      ["status", e.status + (e.dropped_at && !ALIVE.has(e.status) ? " at " + e.dropped_at : "")]];
    if (e.time != null) rows.push([TIME_LABEL[e.time_by] || "time", exFmt(e.time)]);
    if (e.tflops_eff != null) rows.push(["TFLOP/s", exFmt(e.tflops_eff, 3) + (e.time_by === "us" ? "" : " (simulated)")]);
    if (e.smem_bytes != null) rows.push(["SMEM", (e.smem_bytes / 1024).toFixed(1) + " KiB"]);
    if (e.registers != null) rows.push(["registers", e.registers]);
    for (const [k, v] of extra || []) rows.push([k, v]);
    if (e.reason) rows.push(["reason", e.reason + (e.line ? " (line " + e.line + ")" : "")]);
    return rows;
  }
  function hover(node, e, extra) {
    node.addEventListener("mousemove", (ev) => {
      const rr = root.getBoundingClientRect();
      tip.show(describe(e, extra), ev.clientX - rr.left, ev.clientY - rr.top);
    });
    node.addEventListener("mouseleave", () => tip.hide());
    node.addEventListener("click", () => select(e));
  }
  function select(e) {
    status.textContent = "opening " + e.config_id + " (compile report, simulated timeline, diff against the best)…";
    model.send({ type: "select", config_id: e.config_id, shape: e.shape });
    markSelected(e.config_id);
  }
  function markSelected(cid) {
    root.querySelectorAll("[data-config-id]").forEach(n => n.classList.toggle("tlxwb-ex-sel", n.dataset.configId === cid));
  }

  // -- the table --------------------------------------------------------------------------
  function drawTable(es) {
    tableBox.replaceChildren();
    const knobs = (model.get("_knobs") || []).filter(k => new Set(es.map(e => JSON.stringify(exVal(e, k)))).size > 1);
    const cols = [{ key: "config_id", label: "config" }]
      .concat(knobs.map(k => ({ key: k, label: k })))
      .concat([{ key: "status", label: "status" }, { key: "smem_bytes", label: "SMEM KiB", get: e => e.smem_bytes == null ? null : e.smem_bytes / 1024 },
        { key: "registers", label: "regs" }, { key: "spills", label: "spills" }, { key: "ctas_per_sm", label: "CTAs/SM" },
        { key: "time", label: TIME_LABEL[exTimeKey(es)] }, { key: "tflops_eff", label: "TFLOP/s" },
        { key: "reason", label: "reason" }]);
    const get = (c, e) => c.get ? c.get(e) : exVal(e, c.key);
    const rows = es.slice().sort((a, b) => {
      const fa = !ALIVE.has(a.status), fb = !ALIVE.has(b.status);
      if (sortKey === "time" && fa !== fb) return fa - fb;        // dropped last under the default order
      const c = cols.find(c => c.key === sortKey) || cols[0];
      const va = get(c, a), vb = get(c, b);
      if (va == null && vb == null) return 0;
      if (va == null) return 1;
      if (vb == null) return -1;
      return (typeof va === "number" && typeof vb === "number" ? va - vb : String(va).localeCompare(String(vb))) * sortDir;
    });
    const t = tlxEl("table", "tlxwb-ex-table", tableBox);
    const hr = tlxEl("tr", null, tlxEl("thead", null, t));
    for (const c of cols) {
      const th = tlxEl("th", null, hr, c.label + (c.key === sortKey ? (sortDir > 0 ? " ▲" : " ▼") : ""));
      th.dataset.key = c.key;
      th.addEventListener("click", () => { if (sortKey === c.key) sortDir = -sortDir; else { sortKey = c.key; sortDir = 1; } drawTable(entries()); markSelected(model.get("selected")); });
    }
    const body = tlxEl("tbody", null, t);
    for (const e of rows) {
      const tr = tlxEl("tr", "tlxwb-ex-row" + (ALIVE.has(e.status) ? "" : " tlxwb-ex-dropped"), body);
      tr.dataset.configId = e.config_id;
      tr.dataset.status = e.status;
      for (const c of cols) {
        const v = get(c, e);
        if (c.key === "reason") {   // a block inside the cell: a table squeezed by its output area keeps the text readable
          tlxEl("div", null, tlxEl("td", "tlxwb-ex-reason", tr), v ? v + (e.line ? " (line " + e.line + ")" : "") : "");
          continue;
        }
        tlxEl("td", null, tr, c.key === "tflops_eff" && v != null && e.time_by !== "us" ? exFmt(v, 3) + " (sim)" : exFmt(v));
      }
      if (!ALIVE.has(e.status)) tr.title = (e.reason || e.status) + (e.line ? " (line " + e.line + ")" : "");
      tr.addEventListener("click", () => select(e));
    }
  }

  // -- time against a resource or knob, with the Pareto front ---------------------------------------
  function drawScatter(es) {
    scatterBox.replaceChildren();
    const res = model.get("resource") || "smem_bytes";
    const ctl = tlxEl("div", "tlxwb-ex-ctls", scatterBox);
    exSelect(ctl, "time vs", model.get("_resources") || [], res, v => setTrait("resource", v));
    const by = exTimeKey(es);
    const W = 440, H = 310, L = 58, R = 40, T = 36, B = 40;
    const svg = exSvg("svg", { width: W, height: H, class: "tlxwb-ex-svg", "font-size": 10, "font-family": "sans-serif" }, scatterBox);
    const withX = es.filter(e => exVal(e, res) != null), noX = es.filter(e => exVal(e, res) == null);
    const timed = withX.filter(e => ALIVE.has(e.status) && e.time != null);
    const xs = exScale(withX.map(e => res === "smem_bytes" ? exAxisVal(e, res) : exVal(e, res)), L, W - R);
    const ys = exScale(timed.length ? timed.map(e => e.time) : [0, 1], H - B, T);
    const xv = e => xs(res === "smem_bytes" ? exAxisVal(e, res) : exVal(e, res));
    exSvg("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fff", stroke: "#ccc" }, svg);
    for (const v of xs.ticks()) {
      const x = xs(v);
      exSvg("line", { x1: x, y1: T, x2: x, y2: H - B, stroke: "#eee" }, svg);
      exSvg("text", { x, y: H - B + 13, "text-anchor": "middle", fill: "#555" }, svg, exFmt(v, 3));
    }
    if (timed.length) for (const v of ys.ticks()) {
      const y = ys(v);
      exSvg("line", { x1: L, y1: y, x2: W - R, y2: y, stroke: "#eee" }, svg);
      exSvg("text", { x: L - 4, y: y + 3, "text-anchor": "end", fill: "#555" }, svg, exFmt(v, 4));
    }
    exSvg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, svg, RES_LABEL[res] || res);
    exSvg("text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(T + H - B) / 2})` }, svg, TIME_LABEL[by]);
    // the front: a staircase (no config below-left of it)
    const front = exFront(es, res, by), onFront = new Set(front.map(e => e.config_id));
    if (front.length) {
      let d = "";
      front.forEach((e, k) => { const x = xv(e), y = ys(e[by]); d += (k ? `H${x}V${y}` : `M${x},${y}`); });
      d += `H${W - R}`;
      exSvg("path", { d, fill: "none", stroke: COLOR.front, "stroke-width": 1.6, class: "tlxwb-ex-front" }, svg);
    }
    // what has no time (dropped, or not yet timed) sits in a band above the plot
    const bandY = T - 12, naX = W - R + 20;
    exSvg("line", { x1: L, y1: bandY, x2: W - R, y2: bandY, stroke: "#f1c4bd", "stroke-dasharray": "2 3" }, svg);
    exSvg("text", { x: L, y: bandY - 9, fill: "#888" }, svg, "dropped, or no time yet:");
    if (noX.length) exSvg("text", { x: naX, y: H - B + 13, "text-anchor": "middle", fill: "#888" }, svg, "n/a");
    const dropped = es.filter(e => !ALIVE.has(e.status));
    let k = 0;
    for (const e of es) {
      const hasX = exVal(e, res) != null, x = hasX ? xv(e) : naX;
      const extra = [[RES_LABEL[res] || res, exFmt(exVal(e, res))]];
      if (!ALIVE.has(e.status)) {
        const node = exCross(svg, x, bandY, 4.5, "tlxwb-ex-drop");
        node.dataset.configId = e.config_id; hover(node, e, extra);
        continue;
      }
      const y = e.time != null ? ys(e.time) : bandY;
      const fill = e.time == null ? "#fff" : (e.time_by !== by ? "#fff" : (onFront.has(e.config_id) ? COLOR.front : COLOR[e.time_by] || COLOR.none));
      const stroke = e.time == null ? COLOR.none : (e.time_by !== by ? COLOR[e.time_by] : "#222");
      const c = exSvg("circle", { cx: hasX ? x : naX - 6 + 3 * (k++ % 5), cy: y, r: 5, fill, stroke, "stroke-width": 1,
        class: "tlxwb-ex-pt" + (onFront.has(e.config_id) ? " tlxwb-ex-onfront" : "") }, svg);
      c.dataset.configId = e.config_id;
      hover(c, e, extra.concat(onFront.has(e.config_id) ? [["Pareto", "on the front"]] : []));
    }
    tlxLegend(scatterBox, [["Pareto front", COLOR.front], [TIME_LABEL[by], COLOR[by]], ["dropped (" + dropped.length + ")", COLOR.drop]]);
  }

  // -- best time over two knobs ------------------------------------------------------------------
  function drawHeatmap(es) {
    heatBox.replaceChildren();
    const knobs = model.get("_knobs") || [];
    const hx = model.get("heat_x") || knobs[0], hy = model.get("heat_y") || knobs[1] || knobs[0];
    const ctl = tlxEl("div", "tlxwb-ex-ctls", heatBox);
    exSelect(ctl, "x", knobs, hx, v => setTrait("heat_x", v));
    exSelect(ctl, "y", knobs, hy, v => setTrait("heat_y", v));
    if (!hx) { tlxEl("div", null, heatBox, "no knobs"); return; }
    const by = exTimeKey(es);
    const key = v => (exNum(v) != null ? [0, exNum(v)] : [1, String(v)]);
    const cmp = (a, b) => { const ka = key(a), kb = key(b); return ka[0] - kb[0] || (ka[0] ? ka[1].localeCompare(kb[1]) : ka[1] - kb[1]); };
    const uniq = k => Array.from(new Map(es.map(e => [JSON.stringify(exVal(e, k)), exVal(e, k)])).values()).sort(cmp);
    const xv = uniq(hx), yv = uniq(hy);
    const cw = Math.max(34, Math.min(70, 360 / Math.max(xv.length, 1))), ch = Math.max(20, Math.min(34, 220 / Math.max(yv.length, 1)));
    const L = 70, T = 10, W = L + cw * xv.length + 10, H = T + ch * yv.length + 40;
    const svg = exSvg("svg", { width: W, height: H, class: "tlxwb-ex-svg", "font-size": 10, "font-family": "sans-serif" }, heatBox);
    const cells = new Map();
    for (const e of es) {
      const kk = JSON.stringify([exVal(e, hx), exVal(e, hy)]);
      if (!cells.has(kk)) cells.set(kk, { best: null, all: [] });
      const c = cells.get(kk); c.all.push(e);
      if (ALIVE.has(e.status) && e[by] != null && (c.best == null || e[by] < c.best[by])) c.best = e;
    }
    const times = Array.from(cells.values()).filter(c => c.best).map(c => c.best[by]);
    const lo = Math.min(...times), hi = Math.max(...times);
    xv.forEach((x, i) => exSvg("text", { x: L + (i + 0.5) * cw, y: T + ch * yv.length + 13, "text-anchor": "middle", fill: "#555" }, svg, String(x)));
    yv.forEach((y, j) => exSvg("text", { x: L - 4, y: T + (yv.length - j - 0.5) * ch + 3, "text-anchor": "end", fill: "#555" }, svg, String(y)));
    exSvg("text", { x: L + cw * xv.length / 2, y: H - 6, "text-anchor": "middle" }, svg, hx);
    exSvg("text", { x: 10, y: T + ch * yv.length / 2, "text-anchor": "middle", transform: `rotate(-90 10 ${T + ch * yv.length / 2})` }, svg, hy);
    xv.forEach((x, i) => yv.forEach((y, j) => {
      const c = cells.get(JSON.stringify([x, y]));
      const rx = L + i * cw, ry = T + (yv.length - j - 1) * ch;
      if (!c) { exSvg("rect", { x: rx, y: ry, width: cw - 1, height: ch - 1, fill: "#f7f7f7" }, svg); return; }
      if (c.best) {
        const t = hi > lo ? (c.best[by] - lo) / (hi - lo) : 0;
        const r = exSvg("rect", { x: rx, y: ry, width: cw - 1, height: ch - 1, fill: exRamp(t), class: "tlxwb-ex-cell" }, svg);
        r.dataset.configId = c.best.config_id;
        exSvg("text", { x: rx + cw / 2, y: ry + ch / 2 + 3, "text-anchor": "middle", fill: t > 0.45 ? "#fff" : "#111", "pointer-events": "none" }, svg, exFmt(c.best[by], 4));
        hover(r, c.best, [["cell", hx + "=" + x + ", " + hy + "=" + y], ["configs in cell", c.all.length]]);
      } else {
        const e = c.all[0];
        const r = exSvg("rect", { x: rx, y: ry, width: cw - 1, height: ch - 1, fill: "#fdf0ee", stroke: COLOR.drop, "stroke-dasharray": "3 2", class: "tlxwb-ex-cell tlxwb-ex-cell-dropped" }, svg);
        r.dataset.configId = e.config_id;
        exSvg("text", { x: rx + cw / 2, y: ry + ch / 2 + 3, "text-anchor": "middle", fill: COLOR.drop, "pointer-events": "none" }, svg, ALIVE.has(e.status) ? "–" : "✕");
        hover(r, e, [["cell", hx + "=" + x + ", " + hy + "=" + y], ["configs in cell", c.all.length]]);
      }
    }));
    tlxEl("div", "tlxwb-ex-caption", heatBox, "best " + TIME_LABEL[by] + " per cell (other knobs: their fastest)");
  }

  // -- roofline --------------------------------------------------------------------------------------
  function drawRoofline(es) {
    roofBox.replaceChildren();
    const ceil = model.get("_ceilings") || {};
    const pts = es.filter(e => ALIVE.has(e.status) && e.intensity && e.tflops_eff);
    tlxEl("div", "tlxwb-ex-ctls", roofBox, "roofline, " + (ceil.gpu || "") + ": " + exFmt(ceil.peak_tflops) + " TFLOP/s, " + exFmt(ceil.dram_gbps) + " GB/s");
    if (!es.some(e => e.intensity)) { tlxEl("div", "tlxwb-ex-caption", roofBox, "the problem gives no flops/bytes: no roofline"); return; }
    const W = 380, H = 300, L = 52, R = 12, T = 14, B = 40;
    const ais = es.filter(e => e.intensity).map(e => e.intensity);
    const ridge = ceil.peak_tflops * 1e12 / (ceil.dram_gbps * 1e9);
    const xlo = Math.min(...ais, ridge) / 8, xhi = Math.max(...ais, ridge) * 8;
    const tf = pts.map(e => e.tflops_eff);
    const ylo = Math.min(...tf, xlo * ceil.dram_gbps / 1e3, ceil.peak_tflops) / 2, yhi = ceil.peak_tflops * 2;
    const xs = exScale([xlo, xhi], L, W - R, true), ys = exScale([ylo, yhi], H - B, T, true);
    const svg = exSvg("svg", { width: W, height: H, class: "tlxwb-ex-svg", "font-size": 10, "font-family": "sans-serif" }, roofBox);
    exSvg("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fff", stroke: "#ccc" }, svg);
    for (const v of exLogTicks(xlo, xhi).filter((v, i, a) => a.length < 8 || String(v)[0] === "1")) {
      exSvg("line", { x1: xs(v), y1: T, x2: xs(v), y2: H - B, stroke: "#eee" }, svg);
      exSvg("text", { x: xs(v), y: H - B + 13, "text-anchor": "middle", fill: "#555" }, svg, exFmt(v, 2));
    }
    for (const v of exLogTicks(ylo, yhi).filter((v, i, a) => a.length < 8 || String(v)[0] === "1")) {
      exSvg("line", { x1: L, y1: ys(v), x2: W - R, y2: ys(v), stroke: "#eee" }, svg);
      exSvg("text", { x: L - 4, y: ys(v) + 3, "text-anchor": "end", fill: "#555" }, svg, exFmt(v, 2));
    }
    const roof = a => Math.min(ceil.peak_tflops, a * ceil.dram_gbps / 1e3);
    exSvg("path", { d: `M${xs(xlo)},${ys(roof(xlo))}L${xs(ridge)},${ys(roof(ridge))}L${xs(xhi)},${ys(roof(xhi))}`, fill: "none", stroke: "#444", "stroke-width": 1.6, class: "tlxwb-ex-roof" }, svg);
    exSvg("text", { x: W - R - 4, y: ys(ceil.peak_tflops) - 4, "text-anchor": "end", fill: "#444" }, svg, exFmt(ceil.peak_tflops) + " TFLOP/s");
    exSvg("text", { x: L + 6, y: ys(roof(xlo)) - 6, fill: "#444" }, svg, exFmt(ceil.dram_gbps) + " GB/s");
    exSvg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, svg, "arithmetic intensity (flop / byte)");
    exSvg("text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(T + H - B) / 2})` }, svg, "TFLOP/s");
    for (const e of pts) {
      const c = exSvg("circle", { cx: xs(e.intensity), cy: ys(e.tflops_eff), r: 4.5, fill: COLOR[e.time_by] || COLOR.none, "fill-opacity": 0.75, stroke: "#222", class: "tlxwb-ex-rpt" }, svg);
      c.dataset.configId = e.config_id;
      hover(c, e, [["intensity", exFmt(e.intensity, 3) + " flop/B"], ["of the roof", (100 * e.tflops_eff / roof(e.intensity)).toFixed(1) + "%"]]);
    }
    const nd = es.filter(e => !ALIVE.has(e.status)).length;
    tlxEl("div", "tlxwb-ex-caption", roofBox, pts.length + " configs" + (nd ? ", " + nd + " dropped (no time)" : "") +
      (pts.some(e => e.time_by !== "us") ? "; purple: simulated time" : ""));
  }

  function drawHead() {
    const n = (model.get("_entries") || []).length;
    live.textContent = model.get("running") ? "● sweep running: " + n + " entries so far (refreshing)" : n + " entries";
    live.classList.toggle("tlxwb-ex-running", !!model.get("running"));
    summary.textContent = model.get("summary") || "";
    shapeBox.replaceChildren();
    const sh = shapes();
    if (sh.length > 1) exSelect(shapeBox, "shape", sh.map(s => JSON.stringify(s)), JSON.stringify(shape()),
      v => setTrait("shape_index", sh.findIndex(s => JSON.stringify(s) === v)));
  }
  function drawAll() {
    const es = entries();
    drawHead();
    for (const [fn, box] of [[drawTable, tableBox], [drawScatter, scatterBox], [drawHeatmap, heatBox], [drawRoofline, roofBox]]) {
      try { fn(es); } catch (err) { box.replaceChildren(); tlxEl("div", "tlxwb-ex-error", box, "could not draw: " + err); }
    }
    markSelected(model.get("selected"));
  }
  function drawDetail() {
    detail.innerHTML = model.get("detail") || "";
    const sel = model.get("selected");
    if (model.get("detail") && sel) status.textContent = "opened " + sel;
  }

  const onData = () => drawAll();
  const onDetail = () => drawDetail();
  const names = ["_entries", "_shapes", "running", "summary", "shape_index", "resource", "heat_x", "heat_y", "selected"];
  for (const k of names) model.on("change:" + k, onData);
  model.on("change:detail", onDetail);
  drawAll();
  drawDetail();
  tlxRendered(root);
  el.tlxwb = { points: () => scatterBox.querySelectorAll(".tlxwb-ex-pt").length, redraw: drawAll };
  return () => { for (const k of names) model.off("change:" + k, onData); model.off("change:detail", onDetail); };
}

export default { render };
