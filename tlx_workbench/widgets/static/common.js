// Shared helpers of the TLX Workbench views. Python prepends this file to each
// view's ESM (anywidget loads one module per view and cannot resolve relative
// imports), so everything here is plain top-level functions.

// A synced bytes traitlet arrives as a DataView (anywidget), an ArrayBuffer or a
// typed array (our standalone pages); typed arrays need aligned offsets, so copy if not.
function tlxArray(v, Type) {
  if (v == null) return new Type(0);
  let buf, off = 0, len;
  if (v instanceof ArrayBuffer) { buf = v; len = v.byteLength; }
  else if (ArrayBuffer.isView(v)) { buf = v.buffer; off = v.byteOffset; len = v.byteLength; }
  else return new Type(v);
  if (off % Type.BYTES_PER_ELEMENT) { buf = buf.slice(off, off + len); off = 0; }
  return new Type(buf, off, Math.floor(len / Type.BYTES_PER_ELEMENT));
}

function tlxEl(tag, cls, parent, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

// The view's own "drawn" mark, set as the last step of render (everything it shows is in the page by then):
// a notebook page or a test waits for this event, not for a time; a render that threw halfway leaves it unset.
function tlxRendered(root) { root.dataset.rendered = "1"; }

// A canvas sized in CSS pixels, drawn at device resolution.
function tlxCanvas(parent, w, h) {
  const c = tlxEl("canvas", "tlxwb-canvas", parent);
  tlxResize(c, w, h);
  return c;
}
function tlxResize(c, w, h) {
  const r = window.devicePixelRatio || 1;
  c.width = Math.max(1, Math.round(w * r)); c.height = Math.max(1, Math.round(h * r));
  c.style.width = w + "px"; c.style.height = h + "px";
  const g = c.getContext("2d"); g.setTransform(r, 0, 0, r, 0, 0);
  return g;
}

// Round tick steps (1, 2, 5 x 10^k) for a time axis.
function tlxTicks(t0, t1, n) {
  const span = Math.max(t1 - t0, 1e-12), raw = span / Math.max(n, 1);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * p).find(s => s >= raw) || 10 * p;
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1 + 1e-9 * span; t += step) out.push(t);
  return out;
}
function tlxFmt(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 1 : 2) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
  if (a >= 100 || Number.isInteger(v)) return Math.round(v).toString();
  return v.toPrecision(3);
}

// The visible time window [t0, t1] of a view, with wheel zoom around the cursor and
// drag pan; `onChange` redraws, `onSettle` (debounced) reports the range to Python.
class TlxViewport {
  constructor(t0, t1, x0, width) {
    this.full = [t0, t1 > t0 ? t1 : t0 + 1];
    this.t0 = this.full[0]; this.t1 = this.full[1];
    this.x0 = x0; this.width = width;
  }
  x(t) { return this.x0 + (t - this.t0) / (this.t1 - this.t0) * this.width; }
  t(x) { return this.t0 + (x - this.x0) / this.width * (this.t1 - this.t0); }
  set(t0, t1) {
    const minSpan = (this.full[1] - this.full[0]) * 1e-6;
    if (t1 - t0 < minSpan) { const m = (t0 + t1) / 2; t0 = m - minSpan / 2; t1 = m + minSpan / 2; }
    this.t0 = t0; this.t1 = t1;
  }
  zoom(factor, x) {
    const tm = this.t(x);
    this.set(tm - (tm - this.t0) * factor, tm + (this.t1 - tm) * factor);
  }
  pan(dx) { const dt = dx / this.width * (this.t1 - this.t0); this.set(this.t0 - dt, this.t1 - dt); }
  reset() { this.t0 = this.full[0]; this.t1 = this.full[1]; }
}

function tlxAttachZoomPan(canvas, vp, onChange, onSettle, onClick) {
  let drag = null, timer = null;
  const settle = () => { clearTimeout(timer); timer = setTimeout(onSettle, 150); };
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    if (x < vp.x0) return;
    vp.zoom(Math.pow(1.0015, ev.deltaY), x);
    onChange(); settle();
  }, { passive: false });
  canvas.addEventListener("mousedown", (ev) => {
    drag = { x: ev.clientX, y: ev.clientY, moved: false };
  });
  window.addEventListener("mousemove", (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x;
    if (Math.abs(dx) > 2 || drag.moved) {
      drag.moved = true; vp.pan(dx); drag.x = ev.clientX; onChange();
    }
  });
  window.addEventListener("mouseup", (ev) => {
    if (!drag) return;
    const d = drag; drag = null;
    if (d.moved) settle();
    else if (onClick) { const r = canvas.getBoundingClientRect(); onClick(ev.clientX - r.left, ev.clientY - r.top); }
  });
  canvas.addEventListener("dblclick", () => { vp.reset(); onChange(); settle(); });
}

// One floating tooltip per view.
function tlxTooltip(root) {
  const tip = tlxEl("div", "tlxwb-tooltip", root);
  tip.style.display = "none";
  return {
    el: tip,
    show(rows, x, y) {
      tip.replaceChildren();
      for (const [k, v] of rows) {
        const row = tlxEl("div", "tlxwb-tip-row", tip);
        if (k) tlxEl("b", null, row, k + " ");
        tlxEl("span", null, row, String(v));
      }
      tip.style.display = "block";
      const rw = root.clientWidth || 800;
      tip.style.left = Math.min(x + 14, rw - 260) + "px";
      tip.style.top = (y + 14) + "px";
    },
    hide() { tip.style.display = "none"; },
  };
}

function tlxLegend(parent, items) {
  const lg = tlxEl("div", "tlxwb-legend", parent);
  for (const [label, color] of items) {
    const it = tlxEl("span", "tlxwb-legend-item", lg);
    const sw = tlxEl("span", "tlxwb-swatch", it); sw.style.background = color;
    tlxEl("span", null, it, label);
  }
  return lg;
}

// Time axis along the top of a canvas.
function tlxDrawAxis(g, vp, y, h, unit) {
  g.fillStyle = "#555"; g.strokeStyle = "#e4e4e4"; g.font = "10px sans-serif"; g.textBaseline = "top";
  const ticks = tlxTicks(vp.t0, vp.t1, Math.max(2, Math.floor(vp.width / 90)));
  for (const t of ticks) {
    const x = Math.round(vp.x(t)) + 0.5;
    g.beginPath(); g.moveTo(x, y + 14); g.lineTo(x, y + h); g.stroke();
    g.fillText(tlxFmt(t), x + 2, y + 2);
  }
  g.fillStyle = "#888"; g.fillText(unit, 4, y + 2);
}

// Binary search: first index i in [lo, hi) with arr[i] >= v.
function tlxLowerBound(arr, v, lo, hi) {
  while (lo < hi) { const m = (lo + hi) >> 1; if (arr[m] < v) lo = m + 1; else hi = m; }
  return lo;
}

function tlxArrow(g, x0, y0, x1, y1) {
  g.beginPath(); g.moveTo(x0, y0);
  const mx = (x0 + x1) / 2;
  g.bezierCurveTo(mx, y0, mx, y1, x1, y1); g.stroke();
  const a = Math.atan2(y1 - y0, Math.max(x1 - mx, 0.01) * 2);
  g.beginPath(); g.moveTo(x1, y1);
  g.lineTo(x1 - 6 * Math.cos(a - 0.4), y1 - 6 * Math.sin(a - 0.4));
  g.lineTo(x1 - 6 * Math.cos(a + 0.4), y1 - 6 * Math.sin(a + 0.4));
  g.closePath(); g.fill();
}
