// Runs a view's ESM in a plain page: a small stand-in for anywidget's model
// (get / set / on / off / save_changes / send), fed with the state Python embedded.
function tlxwbDecode(v) {
  if (v && typeof v === "object" && !Array.isArray(v) && "__b64__" in v) {
    const s = atob(v.__b64__), b = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
    return new DataView(b.buffer);
  }
  return v;
}

function tlxwbModel(state) {
  const handlers = {}, log = { saved: [], sent: [] };
  const emit = (ev, ...a) => (handlers[ev] || []).slice().forEach(h => h(...a));
  return {
    log,
    get(k) { return state[k]; },
    set(k, v) { const old = state[k]; state[k] = v; if (old !== v) emit("change:" + k, v); emit("change"); },
    on(ev, h) { (handlers[ev] = handlers[ev] || []).push(h); },
    off(ev, h) { if (!ev) { for (const k in handlers) delete handlers[k]; return; }
      handlers[ev] = (handlers[ev] || []).filter(x => x !== h && h != null); },
    save_changes() { log.saved.push(JSON.parse(JSON.stringify(state, (k, v) => (v instanceof DataView ? undefined : v)))); },
    send(msg) { log.sent.push(msg); },
    widget_manager: {},
  };
}

async function tlxwbMountAll(count) {
  window.tlxwbViews = [];
  for (let k = 0; k < count; k++) {
    const raw = JSON.parse(document.getElementById("tlxwb-state-" + k).textContent);
    const state = {};
    for (const [key, v] of Object.entries(raw)) state[key] = tlxwbDecode(v);
    const model = tlxwbModel(state);
    const src = document.getElementById("tlxwb-esm-" + k).textContent;
    const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
    const mod = (await import(url)).default;
    const el = document.getElementById("tlxwb-view-" + k);
    if (mod.initialize) await mod.initialize({ model });
    await mod.render({ model, el });
    window.tlxwbViews.push({ model, el });
  }
  document.body.dataset.ready = "1";
}
