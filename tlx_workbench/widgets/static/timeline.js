// TimelineWidget: one lane per (CTA, task, replica); spans coloured by kind.
// Data (from Python): _times = Float64 [starts..., ends...], _ints = Int32 columns
// [lane, kind, source, name, barrier, slot, phase] x _n, spans sorted by (lane, start);
// _flows = Float64 rows [src lane (-1: TMA bytes), time, dst lane, dst time].
const LANE_H = 22, CTA_H = 16, AXIS_H = 20, GUTTER = 220;

function render({ model, el }) {
  const tStart = performance.now();
  const root = tlxEl("div", "tlxwb tlxwb-timeline", el);
  const n = model.get("_n");
  const times = tlxArray(model.get("_times"), Float64Array);
  const ints = tlxArray(model.get("_ints"), Int32Array);
  const starts = times.subarray(0, n), ends = times.subarray(n, 2 * n);
  const col = (c) => ints.subarray(c * n, (c + 1) * n);
  const laneOf = col(0), kindOf = col(1), srcOf = col(2), nameOf = col(3), barOf = col(4), slotOf = col(5), phaseOf = col(6);
  const lanes = model.get("_lanes"), kinds = model.get("_kinds"), colors = model.get("_colors");
  const strings = model.get("_strings"), sources = model.get("_sources"), unit = model.get("time_unit");
  const flows = tlxArray(model.get("_flows"), Float64Array);

  // where each lane's spans are, and its longest span (to start the visible search early enough)
  const L = lanes.length, lo = new Int32Array(L).fill(n), hi = new Int32Array(L), maxDur = new Float64Array(L);
  let tMin = Infinity, tMax = -Infinity;
  for (let i = 0; i < n; i++) {
    const l = laneOf[i];
    if (i < lo[l]) lo[l] = i;
    hi[l] = i + 1;
    const d = ends[i] - starts[i];
    if (d > maxDur[l]) maxDur[l] = d;
    if (starts[i] < tMin) tMin = starts[i];
    if (ends[i] > tMax) tMax = ends[i];
  }
  if (!(tMin < tMax)) { tMin = 0; tMax = 1; }

  // rows: a header per CTA, then its lanes
  const laneY = new Float64Array(L), rows = [];
  let y = AXIS_H, lastCta = null;
  lanes.forEach((ln, l) => {
    if (ln.cta !== lastCta) { rows.push({ cta: ln.cta, y }); y += CTA_H; lastCta = ln.cta; }
    laneY[l] = y; y += LANE_H;
  });
  const height = y + 4;

  // header: title, legend, controls
  const head = tlxEl("div", "tlxwb-head", root);
  tlxEl("span", "tlxwb-title", head, model.get("title") || "timeline");
  const present = new Set(kindOf);
  tlxLegend(head, kinds.map((k, i) => [k, colors[k]]).filter((_, i) => present.has(i)));
  const controls = tlxEl("span", "tlxwb-controls", head);
  const reset = tlxEl("button", "tlxwb-btn", controls, "reset zoom");
  const arrowsLbl = tlxEl("label", null, controls);
  const arrowsBox = tlxEl("input", null, arrowsLbl); arrowsBox.type = "checkbox"; arrowsBox.checked = true;
  tlxEl("span", null, arrowsLbl, " barrier arrows");
  const scroller = tlxEl("div", "tlxwb-scroll", root);
  const width0 = Math.max(400, (el.clientWidth || root.clientWidth || 960) - 4);
  const canvas = tlxCanvas(scroller, width0, height);
  const status = tlxEl("div", "tlxwb-status", root, "click a span to select its source line");
  const tip = tlxTooltip(root);

  const vp = new TlxViewport(tMin, tMax, GUTTER, width0 - GUTTER - 8);
  const vr = model.get("view_range");
  if (vr && vr.length === 2 && vr[1] > vr[0]) vp.set(vr[0], vr[1]);
  let g = canvas.getContext("2d"), width = width0, selected = model.get("selected_index");
  if (selected == null) selected = -1;

  function draw() {
    g.clearRect(0, 0, width, height);
    g.fillStyle = "#fff"; g.fillRect(0, 0, width, height);
    tlxDrawAxis(g, vp, 0, height, unit);
    // gutter: CTA headers, lane names, busy/wait bars
    g.textBaseline = "middle";
    for (const r of rows) {
      g.fillStyle = "#f2f4f7"; g.fillRect(0, r.y, width, CTA_H);
      g.fillStyle = "#333"; g.font = "bold 11px sans-serif"; g.fillText("CTA " + r.cta, 4, r.y + CTA_H / 2);
    }
    g.font = "11px sans-serif";
    lanes.forEach((ln, l) => {
      const yy = laneY[l];
      if (l % 2) { g.fillStyle = "#fafafa"; g.fillRect(GUTTER, yy, width - GUTTER, LANE_H); }
      g.fillStyle = "#222"; g.fillText(ln.label, 8, yy + LANE_H / 2);
      const bx = 120, bw = 50;
      g.fillStyle = "#eee"; g.fillRect(bx, yy + 7, bw, 8);
      g.fillStyle = colors.compute || "#2e86de"; g.fillRect(bx, yy + 7, bw * ln.busy_share, 8);
      g.fillStyle = colors.wait || "#e74c3c"; g.fillRect(bx + bw * ln.busy_share, yy + 7, bw * ln.wait_share, 8);
      g.fillStyle = "#666"; g.fillText(Math.round(100 * ln.busy_share) + "%/" + Math.round(100 * ln.wait_share) + "%", bx + bw + 4, yy + LANE_H / 2);
    });
    // spans: one Path2D per kind, filled once; sub-pixel spans collapse to one column per pixel
    g.save(); g.beginPath(); g.rect(GUTTER, AXIS_H, width - GUTTER, height - AXIS_H); g.clip();
    const paths = kinds.map(() => new Path2D());
    const xr = vp.x0 + vp.width;
    for (let l = 0; l < L; l++) {
      const y0 = laneY[l] + 3, h = LANE_H - 6;
      let i = tlxLowerBound(starts, vp.t0 - maxDur[l], lo[l], hi[l]), lastPx = -1;
      for (; i < hi[l] && starts[i] <= vp.t1; i++) {
        let x0 = vp.x(starts[i]), x1 = vp.x(ends[i]);
        if (x1 < vp.x0) continue;
        if (x0 < vp.x0) x0 = vp.x0;
        if (x1 > xr) x1 = xr;
        if (x1 - x0 < 1) {
          const px = Math.floor(x0);
          if (px === lastPx) continue;
          lastPx = px; x1 = x0 + 1;
        }
        paths[kindOf[i]].rect(x0, y0, x1 - x0, h);
      }
    }
    kinds.forEach((k, j) => { g.fillStyle = colors[k] || "#999"; g.fill(paths[j]); });
    if (selected >= 0 && selected < n) {
      const l = laneOf[selected];
      g.strokeStyle = "#000"; g.lineWidth = 2;
      const x0 = vp.x(starts[selected]), x1 = Math.max(vp.x(ends[selected]), x0 + 2);
      g.strokeRect(x0, laneY[l] + 2, x1 - x0, LANE_H - 4); g.lineWidth = 1;
    }
    // arrows: completing arrival -> released wait (only when few enough to read)
    if (arrowsBox.checked && flows.length) {
      const m = flows.length / 4, vis = [];
      for (let k = 0; k < m; k++) {
        const t1 = flows[4 * k + 1], t2 = flows[4 * k + 3];
        if (t2 >= vp.t0 && t1 <= vp.t1) vis.push(k);
        if (vis.length > 600) break;
      }
      if (vis.length <= 600) {
        g.strokeStyle = "rgba(40,40,40,0.55)"; g.fillStyle = "rgba(40,40,40,0.7)";
        for (const k of vis) {
          const s = flows[4 * k], d = flows[4 * k + 2];
          const x1 = vp.x(flows[4 * k + 1]), x2 = vp.x(flows[4 * k + 3]), y2 = laneY[d] + LANE_H / 2;
          if (s >= 0) tlxArrow(g, x1, laneY[s] + LANE_H / 2, x2, y2);
          else { g.setLineDash([3, 2]); tlxArrow(g, x1, laneY[d] - 2, x2, y2); g.setLineDash([]); }
        }
      }
    }
    g.restore();
    canvas.dataset.t0 = vp.t0; canvas.dataset.t1 = vp.t1;
  }

  function spanAt(x, yy) {
    if (x < vp.x0) return -1;
    let l = -1;
    for (let k = 0; k < L; k++) if (yy >= laneY[k] && yy < laneY[k] + LANE_H) { l = k; break; }
    if (l < 0) return -1;
    const t = vp.t(x), tol = 3 * (vp.t1 - vp.t0) / vp.width;
    let best = -1, bestD = Infinity;
    for (let i = tlxLowerBound(starts, t - maxDur[l] - tol, lo[l], hi[l]); i < hi[l] && starts[i] <= t + tol; i++) {
      const d = t < starts[i] ? starts[i] - t : (t > ends[i] ? t - ends[i] : 0);
      // prefer the shortest span under the cursor (a zero-length wait beside a long MMA)
      if (d < bestD || (d === bestD && best >= 0 && ends[i] - starts[i] < ends[best] - starts[best])) { best = i; bestD = d; }
    }
    return bestD <= tol ? best : -1;
  }

  function describe(i) {
    const ln = lanes[laneOf[i]], rows = [[strings[nameOf[i]] || kinds[kindOf[i]], "(" + kinds[kindOf[i]] + ")"]];
    rows.push(["lane", "CTA " + ln.cta + " " + ln.label]);
    rows.push(["time", tlxFmt(starts[i]) + " \u2192 " + tlxFmt(ends[i]) + " " + unit]);
    rows.push(["duration", tlxFmt(ends[i] - starts[i]) + " " + unit]);
    if (barOf[i] >= 0) rows.push(["barrier", strings[barOf[i]] + (slotOf[i] >= 0 ? "[" + slotOf[i] + "]" : "")]);
    else if (slotOf[i] >= 0) rows.push(["slot", slotOf[i]]);
    if (phaseOf[i] >= 0) rows.push(["phase", phaseOf[i]]);
    if (srcOf[i] >= 0) {
      const s = sources[srcOf[i]];
      rows.push(["line", s.line + (s.text ? ": " + s.text.trim() : "")]);
    }
    return rows;
  }

  function select(i) {
    selected = i;
    const s = srcOf[i] >= 0 ? sources[srcOf[i]] : null;
    model.set("selected_index", i);
    model.set("selected_line", s ? s.line : null);
    model.set("selected_file", s ? s.file : "");
    model.save_changes();
    status.textContent = "selected: " + (strings[nameOf[i]] || kinds[kindOf[i]]) + (s ? " at line " + s.line + (s.text ? ": " + s.text.trim() : "") : " (no source line)");
    draw();
  }

  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect(), x = ev.clientX - r.left, yy = ev.clientY - r.top;
    const i = spanAt(x, yy);
    if (i < 0) { tip.hide(); canvas.style.cursor = "default"; return; }
    canvas.style.cursor = "pointer";
    const rr = root.getBoundingClientRect();
    tip.show(describe(i), ev.clientX - rr.left, ev.clientY - rr.top);
  });
  canvas.addEventListener("mouseleave", () => tip.hide());
  tlxAttachZoomPan(canvas, vp, draw, () => { model.set("view_range", [vp.t0, vp.t1]); model.save_changes(); },
    (x, yy) => { const i = spanAt(x, yy); if (i >= 0) select(i); });
  reset.addEventListener("click", () => { vp.reset(); draw(); model.set("view_range", [vp.t0, vp.t1]); model.save_changes(); });
  arrowsBox.addEventListener("change", draw);
  const onRange = () => { const v = model.get("view_range"); if (v && v.length === 2 && v[1] > v[0]) { vp.set(v[0], v[1]); draw(); } };
  const onSel = () => { const v = model.get("selected_index"); selected = v == null ? -1 : v; draw(); };
  model.on("change:view_range", onRange);
  model.on("change:selected_index", onSel);

  // follow the notebook's width
  const ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => {
    const w = Math.max(400, (el.clientWidth || width) - 4);
    if (Math.abs(w - width) < 2) return;
    width = w; g = tlxResize(canvas, width, height); vp.width = width - GUTTER - 8; draw();
  }) : null;
  if (ro) ro.observe(el);

  draw();
  el.dataset.paintMs = (performance.now() - tStart).toFixed(1);
  // for tests and benchmarks: where span i is drawn (canvas coordinates), what is visible
  el.tlxwb = {
    locate(i) { const x0 = Math.max(vp.x(starts[i]), vp.x0), x1 = Math.min(vp.x(ends[i]), vp.x0 + vp.width); return { x: (x0 + x1) / 2, y: laneY[laneOf[i]] + LANE_H / 2 }; },
    range() { return [vp.t0, vp.t1]; },
    laneY: Array.from(laneY), laneHeight: LANE_H,
  };
  requestAnimationFrame(() => { el.dataset.framePaintMs = (performance.now() - tStart).toFixed(1); });
  return () => { if (ro) ro.disconnect(); model.off("change:view_range", onRange); model.off("change:selected_index", onSel); };
}

export default { render };
