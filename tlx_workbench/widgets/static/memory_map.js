// MemoryMapWidget: the SVG address bar Python drew (the same one the static output
// shows), made live: hover details, aliased space lit up, click -> source line.
function render({ model, el }) {
  const root = tlxEl("div", "tlxwb tlxwb-memmap", el);
  const head = tlxEl("div", "tlxwb-head", root);
  tlxEl("span", "tlxwb-title", head, model.get("title") || "memory map");
  const holder = tlxEl("div", null, root);
  holder.innerHTML = model.get("_svg");
  const status = tlxEl("div", "tlxwb-status", root, "hover a buffer for details; click to select its source line");
  const table = tlxEl("div", null, root);
  table.innerHTML = model.get("_table");
  const tip = tlxTooltip(root);
  const allocs = model.get("_allocs");
  // the SVG's own <title>s would pop up beside our tooltip
  holder.querySelectorAll(".tlxwb-alloc > title").forEach(t => t.remove());
  const groups = Array.from(holder.querySelectorAll(".tlxwb-alloc"));
  const fmt = (a, v) => (a.unit === "bytes" ? (v >= 1024 ? (v / 1024).toFixed(1) + " KiB" : v + " B") : v + " columns");
  groups.forEach((g) => {
    const a = allocs[+g.dataset.index];
    g.addEventListener("mousemove", (ev) => {
      const rows = [[a.name, "(" + a.kind + ", " + a.storage + ")"],
        ["buffers", a.stages + " x " + a.shape.join("x") + " " + a.dtype],
        ["each", fmt(a, a.stage_size)], ["total", fmt(a, a.size)],
        ["address", "0x" + a.offset.toString(16) + " .. 0x" + (a.offset + a.size).toString(16)]];
      if (a.aliases.length) rows.push(["shares space with", a.aliases.join(", ")]);
      if (a.line) rows.push(["line", a.line + (a.text ? ": " + a.text : "")]);
      const rr = root.getBoundingClientRect();
      tip.show(rows, ev.clientX - rr.left, ev.clientY - rr.top);
      groups.forEach(o => o.classList.toggle("tlxwb-hl", o === g || a.aliases.includes(o.dataset.name)));
    });
    g.addEventListener("mouseleave", () => { tip.hide(); groups.forEach(o => o.classList.remove("tlxwb-hl")); });
    g.addEventListener("click", () => {
      model.set("selected_name", a.name);
      model.set("selected_line", a.line == null ? null : a.line);
      model.save_changes();
      status.textContent = "selected: " + a.name + (a.line ? " at line " + a.line + (a.text ? ": " + a.text : "") : "");
    });
  });
  tlxRendered(root);
}

export default { render };
