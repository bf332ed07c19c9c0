// BarrierPhaseWidget: a row per (CTA, barrier, slot). The row's top band shows the
// barrier's life (phase bands, arrivals, expected bytes, TMA bytes landing, phase
// flips); beneath it, a thin sub-row per waiter with its waiting intervals, and arrows
// from the arrival that completed a phase to each wait that phase released.
// Data: _ev_t Float64 [time]; _ev_i Int32 columns [row, kind, who, count, bytes, phase,
// source, pending_arrivals, pending_bytes]; _w_t Float64 [starts..., ends...]; _w_i
// Int32 columns [row, sub, phase, source, who]; _fl Float64 rows [row, sub, time, dst time, who];
// _stuck [[row, sub, since, label]]: waits a deadlock left open; _legend [[label, colour]]
// (Python's, so the legend is the markers' colours: an arrival is drawn in its arriver's colour).
const BAND = 30, SUB = 14, AX = 20, GUT = 230, EV_KINDS = ["init", "expect", "arrive", "tx", "flip"];

function render({ model, el }) {
  const root = tlxEl("div", "tlxwb tlxwb-barriers", el);
  const rows = model.get("_rows"), who = model.get("_who"), sources = model.get("_sources");
  const unit = model.get("time_unit"), palette = model.get("_palette");
  const evT = tlxArray(model.get("_ev_t"), Float64Array), E = evT.length;
  const evI = tlxArray(model.get("_ev_i"), Int32Array);
  const ec = (c) => evI.subarray(c * E, (c + 1) * E);
  const eRow = ec(0), eKind = ec(1), eWho = ec(2), eCount = ec(3), eBytes = ec(4), ePhase = ec(5), eSrc = ec(6), ePA = ec(7), ePB = ec(8);
  const wT = tlxArray(model.get("_w_t"), Float64Array), W = wT.length / 2;
  const wS = wT.subarray(0, W), wE = wT.subarray(W, 2 * W);
  const wI = tlxArray(model.get("_w_i"), Int32Array);
  const wc = (c) => wI.subarray(c * W, (c + 1) * W);
  const wRow = wc(0), wSub = wc(1), wPhase = wc(2), wSrc = wc(3), wWho = wc(4);
  const fl = tlxArray(model.get("_fl"), Float64Array), F = fl.length / 5;

  // row geometry
  const rowY = [], subY = [];
  let y = AX, lastCta = null;
  rows.forEach((r) => {
    if (r.cta !== lastCta) { y += 4; lastCta = r.cta; }
    rowY.push(y);
    subY.push(r.waiters.map((_, k) => y + BAND + k * SUB));
    y += BAND + r.waiters.length * SUB + 6;
  });
  const height = y + 4;
  let tMin = Infinity, tMax = -Infinity;
  for (let i = 0; i < E; i++) { if (evT[i] < tMin) tMin = evT[i]; if (evT[i] > tMax) tMax = evT[i]; }
  for (let i = 0; i < W; i++) { if (wS[i] < tMin) tMin = wS[i]; if (wE[i] > tMax) tMax = wE[i]; }
  const stuck = model.get("_stuck") || [];
  if (stuck.length) {            // room after the last event for the stuck-here bars
    if (!(tMin <= tMax)) { tMin = 0; tMax = 0; }
    for (const st of stuck) { if (st[2] > tMax) tMax = st[2]; if (st[2] < tMin) tMin = st[2]; }
    tMax += 0.08 * ((tMax - tMin) || 1);
  }
  if (!(tMin < tMax)) { tMin = 0; tMax = 1; }
  // per-row index ranges (data is sorted by row, then time)
  const range = (arr, N) => { const lo = new Int32Array(rows.length).fill(N), hi = new Int32Array(rows.length);
    for (let i = 0; i < N; i++) { const r = arr[i]; if (i < lo[r]) lo[r] = i; hi[r] = i + 1; } return [lo, hi]; };
  const [eLo, eHi] = range(eRow, E), [wLo, wHi] = range(wRow, W);

  const head = tlxEl("div", "tlxwb-head", root);
  tlxEl("span", "tlxwb-title", head, model.get("title") || "barrier phases");
  tlxLegend(head, model.get("_legend"));
  const controls = tlxEl("span", "tlxwb-controls", head);
  const reset = tlxEl("button", "tlxwb-btn", controls, "reset zoom");
  const scroller = tlxEl("div", "tlxwb-scroll", root);
  let width = Math.max(400, (el.clientWidth || 960) - 4);
  const canvas = tlxCanvas(scroller, width, height);
  let g = canvas.getContext("2d");
  const stuckList = stuck.length ? tlxEl("div", "tlxwb-stuck-list", root) : null;
  for (const st of stuck) tlxEl("div", "tlxwb-stuck", stuckList, "\u25b6 CTA " + rows[st[0]].cta + " " + st[3]);
  const status = tlxEl("div", "tlxwb-status", root, "hover an event or a wait; click to select its source line");
  const tip = tlxTooltip(root);
  const vp = new TlxViewport(tMin, tMax, GUT, width - GUT - 8);
  const colorOf = (w) => (w >= 0 ? palette[w % palette.length] : "#16a085");

  function draw() {
    g.fillStyle = "#fff"; g.fillRect(0, 0, width, height);
    tlxDrawAxis(g, vp, 0, height, unit);
    g.save(); g.beginPath(); g.rect(GUT, AX, width - GUT, height - AX); g.clip();
    rows.forEach((r, ri) => {
      const y0 = rowY[ri];
      // phase bands: the stretch of time each phase was the current one
      let prev = tMin, k = 0;
      for (let i = eLo[ri]; i < eHi[ri]; i++) {
        if (EV_KINDS[eKind[i]] !== "flip") continue;
        g.fillStyle = k % 2 ? "#fdf6e3" : "#eef4fb";
        g.fillRect(vp.x(prev), y0, vp.x(evT[i]) - vp.x(prev), BAND - 4);
        prev = evT[i]; k++;
      }
      g.fillStyle = k % 2 ? "#fdf6e3" : "#eef4fb";
      g.fillRect(vp.x(prev), y0, vp.x(tMax) - vp.x(prev), BAND - 4);
      const ly = y0 + BAND / 2;
      g.strokeStyle = "#bbb"; g.beginPath(); g.moveTo(GUT, ly); g.lineTo(width, ly); g.stroke();
      // waits
      for (let i = wLo[ri]; i < wHi[ri]; i++) {
        if (wE[i] < vp.t0 || wS[i] > vp.t1) continue;
        const x0 = vp.x(wS[i]), x1 = Math.max(vp.x(wE[i]), x0 + 1.5), sy = subY[ri][wSub[i]];
        g.fillStyle = "rgba(231,76,60,0.75)"; g.fillRect(x0, sy + 3, x1 - x0, SUB - 6);
      }
      // events, at most one marker per pixel and kind
      const lastPx = [-1, -1, -1, -1, -1];
      for (let i = tlxLowerBound(evT, vp.t0, eLo[ri], eHi[ri]); i < eHi[ri] && evT[i] <= vp.t1; i++) {
        const kd = eKind[i], x = vp.x(evT[i]), px = Math.round(x);
        if (px === lastPx[kd]) continue;
        lastPx[kd] = px;
        const kind = EV_KINDS[kd];
        if (kind === "flip") {
          g.strokeStyle = "#111"; g.lineWidth = 2; g.beginPath(); g.moveTo(x, y0); g.lineTo(x, y0 + BAND - 4); g.stroke(); g.lineWidth = 1;
          g.fillStyle = "#111"; g.font = "9px sans-serif"; g.textBaseline = "top";
          if (vp.width / (vp.t1 - vp.t0) * 30 > 1) g.fillText("\u03c6" + ePhase[i], x + 2, y0 + 1);
        } else if (kind === "arrive") {
          g.fillStyle = colorOf(eWho[i]);
          g.beginPath(); g.moveTo(x - 4, ly - 9); g.lineTo(x + 4, ly - 9); g.lineTo(x, ly - 1); g.closePath(); g.fill();
        } else if (kind === "expect") {
          g.fillStyle = "#f39c12";
          g.beginPath(); g.moveTo(x, ly - 5); g.lineTo(x + 4, ly); g.lineTo(x, ly + 5); g.lineTo(x - 4, ly); g.closePath(); g.fill();
        } else if (kind === "tx") {
          g.fillStyle = "#16a085"; g.fillRect(x - 3, ly + 1, 6, 6);
        } else {
          g.fillStyle = "#999"; g.beginPath(); g.arc(x, ly, 3, 0, 7); g.fill();
        }
      }
    });
    // arrows: the completing arrival (on the barrier line) -> the released waiter
    g.strokeStyle = "rgba(60,60,60,0.6)"; g.fillStyle = "rgba(60,60,60,0.8)";
    let drawn = 0;
    for (let k = 0; k < F && drawn < 800; k++) {
      const r = fl[5 * k], s = fl[5 * k + 1], t = fl[5 * k + 2], td = fl[5 * k + 3];
      if (td < vp.t0 || t > vp.t1) continue;
      tlxArrow(g, vp.x(t), rowY[r] + BAND / 2, Math.max(vp.x(td), vp.x(t) + 0.01), subY[r][s] + SUB / 2);
      drawn++;
    }
    // stuck here: the waits a deadlock left open, to the end of the view
    for (const [r, sb, since, label] of stuck) {
      const x0 = Math.max(vp.x(since), vp.x0), x1 = vp.x0 + vp.width, sy = subY[r][sb];
      if (x0 > x1) continue;
      g.fillStyle = "#fdecea"; g.fillRect(x0, sy + 1, x1 - x0, SUB - 2);
      g.strokeStyle = "#c0392b"; g.strokeRect(x0, sy + 1, x1 - x0, SUB - 2);
      g.fillStyle = "#922b21"; g.font = "9px sans-serif"; g.textBaseline = "middle"; g.fillText(label, x0 + 4, sy + SUB / 2);
    }
    g.restore();
    // gutter
    g.fillStyle = "#fff"; g.fillRect(0, AX, GUT - 2, height - AX);
    g.textBaseline = "middle";
    rows.forEach((r, ri) => {
      g.fillStyle = "#111"; g.font = "bold 11px sans-serif";
      g.fillText("CTA " + r.cta + "  " + r.barrier + "[" + r.slot + "]", 6, rowY[ri] + BAND / 2 - 5);
      g.font = "10px sans-serif"; g.fillStyle = "#666";
      g.fillText(r.info, 6, rowY[ri] + BAND / 2 + 8);
      r.waiters.forEach((w, k) => { g.fillStyle = "#444"; g.fillText("\u21b3 waits: " + w, 18, subY[ri][k] + SUB / 2); });
    });
    canvas.dataset.t0 = vp.t0; canvas.dataset.t1 = vp.t1;
  }

  function hit(x, yy) {
    if (x < GUT) return null;
    const tol = 5 * (vp.t1 - vp.t0) / vp.width, t = vp.t(x);
    for (let ri = 0; ri < rows.length; ri++) {
      if (yy >= rowY[ri] && yy < rowY[ri] + BAND) {
        let best = -1, bd = Infinity;
        for (let i = tlxLowerBound(evT, t - tol, eLo[ri], eHi[ri]); i < eHi[ri] && evT[i] <= t + tol; i++) {
          // on a tie (a flip lands with the bytes or arrival that caused it) the flip wins
          const d = Math.abs(evT[i] - t) - (EV_KINDS[eKind[i]] === "flip" ? 1e-9 * tol : 0);
          if (d < bd) { bd = d; best = i; }
        }
        return best >= 0 ? { ev: best } : null;
      }
      for (let k = 0; k < subY[ri].length; k++) {
        if (yy >= subY[ri][k] && yy < subY[ri][k] + SUB) {
          for (let i = wLo[ri]; i < wHi[ri]; i++)
            if (wSub[i] === k && wS[i] - tol <= t && t <= wE[i] + tol) return { wait: i };
          return null;
        }
      }
    }
    return null;
  }

  const srcText = (s) => (s >= 0 ? sources[s].line + (sources[s].text ? ": " + sources[s].text.trim() : "") : null);
  function describe(h) {
    if (h.ev != null) {
      const i = h.ev, r = rows[eRow[i]], kind = EV_KINDS[eKind[i]];
      const out = [[kind, "CTA " + r.cta + " " + r.barrier + "[" + r.slot + "]"], ["time", tlxFmt(evT[i]) + " " + unit]];
      if (eWho[i] >= 0) out.push(["by", who[eWho[i]]]);
      else if (kind === "tx" || kind === "flip") out.push(["by", kind === "tx" ? "TMA (bytes landed)" : "the last arrival / TMA bytes"]);
      if (kind === "arrive" || kind === "init") out.push(["count", eCount[i]]);
      if (eBytes[i] > 0) out.push(["bytes", eBytes[i]]);
      // phases are numbered from 0 (an arrive counts toward phase k, the flip completes it); a wait names a parity
      if (ePhase[i] >= 0) out.push(kind.startsWith("wait") ? ["parity", ePhase[i]]
        : ["phase", kind === "flip" ? ePhase[i] + " completed" : ePhase[i]]);
      if (ePA[i] >= 0 || ePB[i] >= 0) out.push(["pending", Math.max(ePA[i], 0) + " arrivals, " + Math.max(ePB[i], 0) + " bytes"]);
      if (srcText(eSrc[i])) out.push(["line", srcText(eSrc[i])]);
      return out;
    }
    const i = h.wait, r = rows[wRow[i]];
    const out = [["wait", who[wWho[i]] + " on " + r.barrier + "[" + r.slot + "]"], ["parity", wPhase[i]],
      ["waited", tlxFmt(wE[i] - wS[i]) + " " + unit + " (" + tlxFmt(wS[i]) + " \u2192 " + tlxFmt(wE[i]) + ")"]];
    for (let k = 0; k < F; k++)
      if (fl[5 * k] === wRow[i] && fl[5 * k + 1] === wSub[i] && Math.abs(fl[5 * k + 3] - wE[i]) < 1e-6 * Math.max(1, Math.abs(wE[i])))
        out.push(["released by", (fl[5 * k + 4] >= 0 ? who[fl[5 * k + 4]] : "TMA bytes") + " at " + tlxFmt(fl[5 * k + 2])]);
    if (srcText(wSrc[i])) out.push(["line", srcText(wSrc[i])]);
    return out;
  }

  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect(), h = hit(ev.clientX - r.left, ev.clientY - r.top);
    if (!h) { tip.hide(); return; }
    const rr = root.getBoundingClientRect();
    tip.show(describe(h), ev.clientX - rr.left, ev.clientY - rr.top);
  });
  canvas.addEventListener("mouseleave", () => tip.hide());
  tlxAttachZoomPan(canvas, vp, draw, () => { model.set("view_range", [vp.t0, vp.t1]); model.save_changes(); }, (x, yy) => {
    const h = hit(x, yy);
    if (!h) return;
    const s = h.ev != null ? eSrc[h.ev] : wSrc[h.wait];
    model.set("selected_line", s >= 0 ? sources[s].line : null);
    model.set("selected_file", s >= 0 ? sources[s].file : "");
    model.save_changes();
    status.textContent = "selected: " + describe(h)[0].join(" ") + (s >= 0 ? " at line " + srcText(s) : "");
  });
  reset.addEventListener("click", () => { vp.reset(); draw(); });
  const onRange = () => { const v = model.get("view_range"); if (v && v.length === 2 && v[1] > v[0]) { vp.set(v[0], v[1]); draw(); } };
  model.on("change:view_range", onRange);
  draw();
  tlxRendered(root);
  el.tlxwb = {
    event(i) { return { x: vp.x(evT[i]), y: rowY[eRow[i]] + BAND / 2 }; },
    wait(i) { return { x: (Math.max(vp.x(wS[i]), vp.x0) + Math.min(vp.x(wE[i]), vp.x0 + vp.width)) / 2, y: subY[wRow[i]][wSub[i]] + SUB / 2 }; },
    rowY, subY, band: BAND, sub: SUB,
    stuck() { return stuck.map(([r, sb, since, label]) => ({ label, x: Math.max(vp.x(since), vp.x0), y: subY[r][sb] + SUB / 2 })); },
  };
  return () => model.off("change:view_range", onRange);
}

export default { render };
