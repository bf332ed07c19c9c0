// IRExplorer: source | TTGIR | PTX | SASS panes. A click on a source line lights up the
// IR lines it became; a click on an IR line lights up its source line and, through it,
// the sibling lines of every stage. Each pane scrolls itself (never the page).
function render({ model, el }) {
  const root = tlxEl("div", "tlxwb tlxwb-ir", el);
  const head = tlxEl("div", "tlxwb-head", root);
  tlxEl("span", "tlxwb-title", head, model.get("title") || "source and IR");
  const panes = model.get("_panes"), fwd = model.get("_forward"), back = model.get("_backward");
  const grid = tlxEl("div", "tlxwb-ir-grid", root);
  grid.style.gridTemplateColumns = panes.map((p, i) => (i === 0 ? "1.1fr" : "1fr")).join(" ");
  const status = tlxEl("div", "tlxwb-status", root, "click a line: its counterparts light up in the other panes");
  const views = panes.map((p) => {
    const box = tlxEl("div", "tlxwb-ir-pane", grid);
    box.dataset.stage = p.stage;
    const h = tlxEl("div", "tlxwb-ir-pane-head", box);
    tlxEl("span", null, h, p.title);
    const count = tlxEl("span", "tlxwb-ir-count", h, p.lines.length + " lines");
    const list = tlxEl("div", "tlxwb-ir-lines", box);
    const frag = document.createDocumentFragment(), rows = [];
    p.lines.forEach((text, i) => {
      const n = p.first + i;
      const row = tlxEl("div", "tlxwb-ir-line", frag);
      row.dataset.line = n;
      tlxEl("span", "tlxwb-ir-no", row, String(n));
      row.appendChild(document.createTextNode(text));
      if (p.stage === "source" ? false : !(String(n) in back[p.stage])) row.classList.add("tlxwb-unmapped");
      rows.push(row);
    });
    list.appendChild(frag);
    return { p, list, rows, count };
  });
  let lit = [];

  function row(v, n) { return v.rows[n - v.p.first]; }
  function scrollTo(v, r) { v.list.scrollTop = Math.max(0, r.offsetTop - v.list.offsetTop - v.list.clientHeight / 3); }

  function select(src, fromStage, fromLine, notify) {
    lit.forEach(r => r.classList.remove("tlxwb-hl", "tlxwb-hl-main"));
    lit = [];
    const counts = [];
    for (const v of views) {
      let targets = [];
      if (v.p.stage === "source") targets = src == null ? [] : [src];
      else if (src != null) targets = fwd[v.p.stage][String(src)] || [];
      if (v.p.stage === fromStage && !targets.includes(fromLine)) targets = targets.concat([fromLine]);
      let first = null;
      for (const n of targets) {
        const r = row(v, n);
        if (!r) continue;
        r.classList.add((v.p.stage === fromStage && n === fromLine) || (v.p.stage === "source" && fromStage === "source") ? "tlxwb-hl-main" : "tlxwb-hl");
        lit.push(r);
        if (first === null) first = r;
      }
      if (first && v.p.stage !== fromStage) scrollTo(v, first);
      v.count.textContent = v.p.stage === "source" ? v.p.lines.length + " lines" : targets.length + " of " + v.p.lines.length + " lines";
      if (v.p.stage !== "source") counts.push(v.p.title + " " + targets.length);
    }
    status.textContent = src == null ? "this line maps to no source line" : "line " + src + " \u2192 " + counts.join(", ");
    if (notify) { model.set("selected_line", src); model.save_changes(); }
  }

  views.forEach((v) => {
    v.list.addEventListener("click", (ev) => {
      const r = ev.target.closest(".tlxwb-ir-line");
      if (!r) return;
      const n = +r.dataset.line;
      if (v.p.stage === "source") select(n, "source", n, true);
      else { const s = back[v.p.stage][String(n)]; select(s == null ? null : s, v.p.stage, n, s != null); }
    });
  });
  const onSel = () => { const s = model.get("selected_line"); if (s != null) select(s, "source", s, false); };
  model.on("change:selected_line", onSel);
  if (model.get("selected_line") != null) onSel();
  tlxRendered(root);
  return () => model.off("change:selected_line", onSel);
}

export default { render };
