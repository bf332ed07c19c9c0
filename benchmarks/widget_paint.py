"""First paint of a 100k-span TimelineWidget in headless Chromium, measured in the page.

    /work/venv/bin/python benchmarks/widget_paint.py [--spans 100000] [--runs 3]

The widget's ESM runs in a standalone page (the same module JupyterLab loads through
anywidget, against a stand-in model); the page records, from the start of render() to
the end of the first draw (paintMs) and to the next animation frame (framePaintMs).
Debian's Chromium, driven by Playwright, no GPU. Goal: first paint <= 1 s.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tlx_workbench.widgets import TimelineWidget, standalone_html  # noqa: E402
from tlx_workbench.widgets.sample import sample_trace  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    opt = ap.parse_args()
    ctas = 8
    iters = max(1, round(opt.spans / (ctas * 9)))          # the sample makes ~9 spans per K-step per CTA
    trace = sample_trace(iters=iters, ctas=ctas, seed=1)
    t = time.perf_counter()
    w = TimelineWidget(trace)
    encode_s = time.perf_counter() - t
    page_html = standalone_html([w])
    from playwright.sync_api import sync_playwright
    paints, frames = [], []
    with tempfile.TemporaryDirectory() as d, sync_playwright() as p:
        path = pathlib.Path(d) / "timeline.html"
        path.write_text(page_html)
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        for _ in range(opt.runs):
            pg = b.new_page(viewport={"width": 1200, "height": 900})
            pg.goto(path.as_uri())
            pg.wait_for_function("() => document.querySelector('.tlxwb-view').dataset.framePaintMs")
            ds = pg.evaluate("() => ({...document.querySelector('.tlxwb-view').dataset})")
            paints.append(float(ds["paintMs"]))
            frames.append(float(ds["framePaintMs"]))
            # a redraw after a zoom, for scale
            pg.close()
        b.close()
    print(f"spans: {len(trace.spans)} in {len(trace.lanes())} lanes; widget data: "
          f"{(len(w._times) + len(w._ints) + len(w._flows)) / 1e6:.2f} MB binary; Python encode {encode_s:.2f} s")
    print(f"first paint (render start -> drawn), median of {opt.runs}: {statistics.median(paints):.0f} ms "
          f"(all: {', '.join(f'{x:.0f}' for x in paints)})")
    print(f"to next frame: {statistics.median(frames):.0f} ms (all: {', '.join(f'{x:.0f}' for x in frames)})")
    print("goal <= 1000 ms:", "met" if statistics.median(frames) <= 1000 else "NOT met")


if __name__ == "__main__":
    main()
