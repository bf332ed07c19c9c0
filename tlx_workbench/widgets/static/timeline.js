// TimelineWidget: one lane per (CTA, task, replica); spans coloured by kind.
// Data (from Python): _times = Float64 [starts..., ends...], _ints = Int32 columns
// [lane, kind, source, name, barrier, slot, phase] x _n, spans sorted by (lane, start);
// _flows = Float64 rows [src lane (-1: TMA bytes), time, dst lane, dst time];
// _stuck = [{lane, since, label}]: where each task stopped in a deadlock.
// Filters (synced traits): hide_waits, fold_ctas (a task replica's lanes of every CTA on one row),
// lane_per_task (a task's replicas on one row); a row draws every trace lane mapped to it.
const LANE_H = 22, CTA_H = 16, AXIS_H = 20, GUTTER = 220, BAR_X = 110, BAR_W = 50;

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
  const stuck = model.get("_stuck") || [];
  if (stuck.length) {            // room after the last event for the stuck-here bars
    if (!(tMin <= tMax)) { tMin = 0; tMax = 0; }
    for (const st of stuck) { if (st.since > tMax) tMax = st.since; if (st.since < tMin) tMin = st.since; }
    tMax += 0.08 * ((tMax - tMin) || 1);
  }
  if (!(tMin < tMax)) { tMin = 0; tMax = 1; }

  const ctaList = Array.from(new Set(lanes.map(ln => ln.cta))).sort((a, b) => a - b);
  // display rows (after the filters): a header per CTA (one when folded), then its rows
  let rowOf = new Int32Array(L), rowY = [], rowInfo = [], heads = [], height = 0;
  function layout() {
    const fold = model.get("fold_ctas"), perTask = model.get("lane_per_task");
    const index = new Map();
    rowInfo = []; heads = []; rowY = [];
    lanes.forEach((ln, l) => {
      const key = (fold ? "*" : ln.cta) + "|" + ln.task + "|" + (perTask ? "*" : ln.replica);
      if (!index.has(key)) {
        index.set(key, rowInfo.length);
        rowInfo.push({ head: fold ? (ctaList.length > 1 ? "CTAs " + ctaList[0] + "-" + ctaList[ctaList.length - 1] + " folded" : "CTA " + ctaList[0]) : "CTA " + ln.cta,
          label: perTask ? ln.task : ln.label, members: [], busy: 0, wait: 0, reps: new Set() });
      }
      const r = rowInfo[index.get(key)];
      r.members.push(l); r.reps.add(ln.replica);
      r.busy += (ln.busy_share - r.busy) / r.members.length; r.wait += (ln.wait_share - r.wait) / r.members.length;
      rowOf[l] = index.get(key);
    });
    let y = AXIS_H, last = null;
    rowInfo.forEach((r) => {
      if (perTask && r.reps.size > 1) r.label += " \u00d7" + r.reps.size;
      if (r.head !== last) { heads.push({ head: r.head, y }); y += CTA_H; last = r.head; }
      rowY.push(y); y += LANE_H;
    });
    height = y + 4;
  }
  layout();
  const laneYOf = (l) => rowY[rowOf[l]];

  // header: title, legend, controls
  const head = tlxEl("div", "tlxwb-head", root);
  tlxEl("span", "tlxwb-title", head, model.get("title") || "timeline");
  const present = new Set(kindOf);
  tlxLegend(head, kinds.map((k, i) => [k, colors[k]]).filter((_, i) => present.has(i)));
  const controls = tlxEl("span", "tlxwb-controls", head);
  const reset = tlxEl("button", "tlxwb-btn", controls, "reset zoom");
  const box = (label, cls, checked) => {
    const lbl = tlxEl("label", cls, controls);
    const b = tlxEl("input", null, lbl); b.type = "checkbox"; b.checked = !!checked;
    tlxEl("span", null, lbl, " " + label);
    return b;
  };
  const arrowsBox = box("barrier arrows", "tlxwb-opt-arrows", true);
  const waitsBox = box("hide waits", "tlxwb-opt-hide-waits", model.get("hide_waits"));
  const foldBox = ctaList.length > 1 ? box("fold CTAs", "tlxwb-opt-fold-ctas", model.get("fold_ctas")) : null;
  const perTaskBox = lanes.some(ln => ln.replica > 0) ? box("lane per task", "tlxwb-opt-lane-per-task", model.get("lane_per_task")) : null;
  const scroller = tlxEl("div", "tlxwb-scroll", root);
  const width0 = Math.max(400, (el.clientWidth || root.clientWidth || 960) - 4);
  const canvas = tlxCanvas(scroller, width0, height);
  // where each task stopped (a deadlock), also as text under the canvas
  const stuckList = stuck.length ? tlxEl("div", "tlxwb-stuck-list", root) : null;
  for (const st of stuck) {
    const ln = lanes[st.lane];
    const d = tlxEl("div", "tlxwb-stuck", stuckList, "\u25b6 CTA " + ln.cta + " " + ln.label + " " + st.label);
    d.dataset.lane = "CTA " + ln.cta + " " + ln.label;
  }
  const status = tlxEl("div", "tlxwb-status", root, "click a span to show its source line");
  // the source pane: the kernel's lines around the spans, the clicked span's line scrolled into view, highlighted
  const files = model.get("_files") || [];
  const srcPane = tlxEl("pre", "tlxwb-source", root);
  srcPane.style.display = "none";
  function showSource(s) {
    const f = s ? files.find((x) => x.file === s.file) : null;
    if (!f || s.line < f.first || s.line >= f.first + f.lines.length) { srcPane.style.display = "none"; return; }
    srcPane.style.display = "";
    srcPane.textContent = "";
    let hit = null;
    f.lines.forEach((text, k) => {
      const n = f.first + k, row = tlxEl("div", n === s.line ? "tlxwb-src-line tlxwb-src-sel" : "tlxwb-src-line", srcPane);
      tlxEl("span", "tlxwb-src-no", row, String(n));
      tlxEl("span", null, row, text || " ");
      if (n === s.line) hit = row;
    });
    // scroll the pane (not the page) so the line sits in its middle
    srcPane.scrollTop = Math.max(0, hit.offsetTop - (srcPane.clientHeight - hit.offsetHeight) / 2);
  }
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
    for (const r of heads) {
      g.fillStyle = "#f2f4f7"; g.fillRect(0, r.y, width, CTA_H);
      g.fillStyle = "#333"; g.font = "bold 11px sans-serif"; g.fillText(r.head, 4, r.y + CTA_H / 2);
    }
    g.font = "11px sans-serif";
    rowInfo.forEach((ln, k) => {
      const yy = rowY[k];
      if (k % 2) { g.fillStyle = "#fafafa"; g.fillRect(GUTTER, yy, width - GUTTER, LANE_H); }
      let label = ln.label;                 // a long label gives way to the bars: cut, with an ellipsis
      while (label.length > 3 && g.measureText(label).width > BAR_X - 14) label = label.slice(0, -2) + "\u2026";
      g.fillStyle = "#222"; g.fillText(label, 8, yy + LANE_H / 2);
      // busy over wait, each a bar of the full width: async copies and MMAs overlap the lane's own work
      // and waits, so the two can add up past 100 % (a side-by-side pair would then run into the text)
      const bx = BAR_X, bw = BAR_W;
      g.fillStyle = "#eee"; g.fillRect(bx, yy + 6, bw, 10);
      g.fillStyle = colors.compute || "#2e86de"; g.fillRect(bx, yy + 6, bw * Math.min(ln.busy, 1), 5);
      g.fillStyle = colors.wait || "#e74c3c"; g.fillRect(bx, yy + 11, bw * Math.min(ln.wait, 1), 5);
      g.fillStyle = "#666"; g.font = "10px sans-serif";
      g.fillText(Math.round(100 * ln.busy) + "%/" + Math.round(100 * ln.wait) + "%", bx + bw + 4, yy + LANE_H / 2);
      g.font = "11px sans-serif";
    });
    // spans: one Path2D per kind, filled once; sub-pixel spans collapse to one column per pixel
    g.save(); g.beginPath(); g.rect(GUTTER, AXIS_H, width - GUTTER, height - AXIS_H); g.clip();
    const paths = kinds.map(() => new Path2D());
    const xr = vp.x0 + vp.width, waitKind = kinds.indexOf("wait"), hideWaits = waitsBox.checked;
    for (let l = 0; l < L; l++) {
      const y0 = laneYOf(l) + 3, h = LANE_H - 6;
      let i = tlxLowerBound(starts, vp.t0 - maxDur[l], lo[l], hi[l]), lastPx = -1;
      for (; i < hi[l] && starts[i] <= vp.t1; i++) {
        let x0 = vp.x(starts[i]), x1 = vp.x(ends[i]);
        if (x1 < vp.x0 || (hideWaits && kindOf[i] === waitKind)) continue;
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
      g.strokeRect(x0, laneYOf(l) + 2, x1 - x0, LANE_H - 4); g.lineWidth = 1;
    }
    // stuck here: a hatched bar from where the task stopped to the end of the view, and its label
    const labelled = new Set();
    for (const st of stuck) {
      const yy = laneYOf(st.lane), x0 = Math.max(vp.x(st.since), vp.x0);
      if (x0 > xr) continue;
      g.fillStyle = "#fdecea"; g.fillRect(x0, yy + 1, xr - x0, LANE_H - 2);
      g.save(); g.beginPath(); g.rect(x0, yy + 1, xr - x0, LANE_H - 2); g.clip();
      g.strokeStyle = "#e6a59d"; g.lineWidth = 2; g.beginPath();
      for (let x = x0 - LANE_H; x < xr; x += 7) { g.moveTo(x, yy + LANE_H); g.lineTo(x + LANE_H, yy); }
      g.stroke(); g.restore(); g.lineWidth = 1;
      g.strokeStyle = "#c0392b"; g.strokeRect(x0, yy + 1, xr - x0, LANE_H - 2);
      g.fillStyle = "#c0392b"; g.beginPath(); g.moveTo(x0, yy + 1); g.lineTo(x0 + 6, yy + LANE_H / 2); g.lineTo(x0, yy + LANE_H - 1); g.closePath(); g.fill();
      if (!labelled.has(rowOf[st.lane])) {
        labelled.add(rowOf[st.lane]);
        g.fillStyle = "#922b21"; g.font = "10px sans-serif"; g.textBaseline = "middle"; g.fillText(st.label, x0 + 10, yy + LANE_H / 2);
      }
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
          const x1 = vp.x(flows[4 * k + 1]), x2 = vp.x(flows[4 * k + 3]), y2 = laneYOf(d) + LANE_H / 2;
          if (s >= 0) tlxArrow(g, x1, laneYOf(s) + LANE_H / 2, x2, y2);
          else { g.setLineDash([3, 2]); tlxArrow(g, x1, laneYOf(d) - 2, x2, y2); g.setLineDash([]); }
        }
      }
    }
    g.restore();
    canvas.dataset.t0 = vp.t0; canvas.dataset.t1 = vp.t1;
  }

  function spanAt(x, yy) {
    if (x < vp.x0) return -1;
    let row = -1;
    for (let k = 0; k < rowY.length; k++) if (yy >= rowY[k] && yy < rowY[k] + LANE_H) { row = k; break; }
    if (row < 0) return -1;
    const t = vp.t(x), tol = 3 * (vp.t1 - vp.t0) / vp.width, waitKind = kinds.indexOf("wait");
    let best = -1, bestD = Infinity;
    for (const l of rowInfo[row].members) {
      for (let i = tlxLowerBound(starts, t - maxDur[l] - tol, lo[l], hi[l]); i < hi[l] && starts[i] <= t + tol; i++) {
        if (waitsBox.checked && kindOf[i] === waitKind) continue;
        const d = t < starts[i] ? starts[i] - t : (t > ends[i] ? t - ends[i] : 0);
        // prefer the shortest span under the cursor (a zero-length wait beside a long MMA)
        if (d < bestD || (d === bestD && best >= 0 && ends[i] - starts[i] < ends[best] - starts[best])) { best = i; bestD = d; }
      }
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
    // a wait names the parity it waits for; an arrive, the phase it counts toward (docs/phases.md)
    if (phaseOf[i] >= 0) rows.push(kinds[kindOf[i]] === "wait" ? ["parity", phaseOf[i]] : ["phase", phaseOf[i]]);
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
    showSource(s);
    draw();
  }

  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect(), x = ev.clientX - r.left, yy = ev.clientY - r.top;
    const i = spanAt(x, yy);
    const row = x < GUTTER ? rowY.findIndex((y0) => yy >= y0 && yy < y0 + LANE_H) : -1;
    if (i < 0 && row >= 0 && x >= BAR_X) {
      // the lane's busy/wait bars: what the two shares are, and why they can add up past 100 %
      const ln = rowInfo[row], rr = root.getBoundingClientRect();
      tip.show([["busy", Math.round(100 * ln.busy) + "% of the lane's time"],
                ["waiting", Math.round(100 * ln.wait) + "%"],
                ["why > 100 %", "busy counts every span that is not a wait, async copies and MMAs included, " +
                                "which run on while the lane goes on or waits"]], ev.clientX - rr.left, ev.clientY - rr.top);
      return;
    }
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
  const relayout = () => { layout(); g = tlxResize(canvas, width, height); draw(); };
  const sync = (b, name) => { if (b) b.addEventListener("change", () => { model.set(name, b.checked); model.save_changes(); relayout(); }); };
  sync(waitsBox, "hide_waits"); sync(foldBox, "fold_ctas"); sync(perTaskBox, "lane_per_task");
  const onOpts = () => {
    waitsBox.checked = model.get("hide_waits");
    if (foldBox) foldBox.checked = model.get("fold_ctas");
    if (perTaskBox) perTaskBox.checked = model.get("lane_per_task");
    relayout();
  };
  for (const name of ["hide_waits", "fold_ctas", "lane_per_task"]) model.on("change:" + name, onOpts);
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
  tlxRendered(root);
  // for tests and benchmarks: where span i is drawn (canvas coordinates), what is visible
  el.tlxwb = {
    locate(i) { const x0 = Math.max(vp.x(starts[i]), vp.x0), x1 = Math.min(vp.x(ends[i]), vp.x0 + vp.width); return { x: (x0 + x1) / 2, y: laneYOf(laneOf[i]) + LANE_H / 2 }; },
    range() { return [vp.t0, vp.t1]; },
    get laneY() { return Array.from({ length: L }, (_, l) => laneYOf(l)); },
    rows() { return rowInfo.map((r, k) => ({ label: r.label, head: r.head, y: rowY[k], lanes: r.members.slice() })); },
    stuck() { return stuck.map(st => ({ lane: st.lane, label: st.label, x: Math.max(vp.x(st.since), vp.x0), y: laneYOf(st.lane) + LANE_H / 2 })); },
    laneHeight: LANE_H,
  };
  requestAnimationFrame(() => { el.dataset.framePaintMs = (performance.now() - tStart).toFixed(1); });
  return () => {
    if (ro) ro.disconnect(); model.off("change:view_range", onRange); model.off("change:selected_index", onSel);
    for (const name of ["hide_waits", "fold_ctas", "lane_per_task"]) model.off("change:" + name, onOpts);
  };
}

export default { render };
