"""The Trace model: Chrome-trace round trips, what Perfetto needs, Proton import, flows, summaries."""
import json
import math
import pathlib

import numpy as np
import pytest

from tlx_workbench.trace import BarrierEvent, Counter, Span, Trace
from tlx_workbench.widgets.sample import sample_trace

PROTON = pathlib.Path(__file__).parent / "widgets" / "data" / "proton_instrumentation.json"


def _through_json(tr: Trace) -> Trace:
    # through text, as a file would be: catches anything json cannot carry
    return Trace.from_chrome(json.loads(json.dumps(tr.to_chrome(), allow_nan=False)))


def _key(s: Span):
    return (s.cta, s.task, s.replica, s.kind, s.name, round(s.start, 6), round(s.end, 6), s.line, s.file,
            s.barrier, s.slot, s.phase, tuple(sorted(s.args.items())))


@pytest.mark.parametrize("seed", [1, 2])
def test_chrome_round_trip_keeps_everything(seed):
    tr = sample_trace(iters=9, ctas=2, consumers=2, stages=3, seed=seed)
    back = _through_json(tr)
    assert back.time_unit == "cycles" and back.source == "sample"
    assert back.lanes() == tr.lanes()
    assert sorted(map(_key, back.spans)) == sorted(map(_key, tr.spans))
    ev = lambda t: sorted((e.cta, round(e.time, 6), e.barrier, e.slot, e.kind, e.task, e.replica, e.count,
                           e.bytes, e.phase, e.line, e.pending_arrivals, e.pending_bytes)
                          for e in t.barrier_events)
    assert ev(back) == ev(tr)
    assert sorted((c.name, c.time, c.value, c.cta) for c in back.counters) == \
        sorted((c.name, c.time, c.value, c.cta) for c in tr.counters)
    fl = lambda t: sorted((f.cta, f.barrier, f.slot, f.phase, round(f.time, 6), str(f.src), f.dst)
                          for f in t.flows())
    assert fl(back) == fl(tr) and len(fl(tr)) > 10


def test_a_gzipped_trace_file_round_trips(tmp_path):
    tr = sample_trace(iters=5, ctas=1, consumers=2, stages=2, seed=3)
    path = tr.save(str(tmp_path / "t.json.gz"))
    assert pathlib.Path(path).read_bytes()[:2] == b"\x1f\x8b"           # gzip's magic
    back = Trace.load(path)
    assert sorted(map(_key, back.spans)) == sorted(map(_key, tr.spans)) and len(back.barrier_events) == \
        len(tr.barrier_events)


def test_ns_traces_are_written_in_microseconds_and_read_back_in_ns():
    tr = Trace(time_unit="ns", source="gpu")
    tr.add_span(Span(0, "default", 0, "mma", 1500.0, 4000.0, name="wgmma"))
    doc = tr.to_chrome()
    x = [e for e in doc["traceEvents"] if e["ph"] == "X"][0]
    assert (x["ts"], x["dur"]) == (1.5, 2.5)
    back = Trace.from_chrome(doc)
    assert back.time_unit == "ns" and (back.spans[0].start, back.spans[0].end) == (1500.0, 4000.0)


def test_exported_file_has_what_perfetto_needs(tmp_path):
    tr = sample_trace(iters=7, ctas=2)
    path = tr.save(str(tmp_path / "t.json"))
    doc = json.loads(pathlib.Path(path).read_text())
    events = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert procs == {0: "CTA 0", 1: "CTA 1"}                      # a process per CTA
    assert sorted(threads.values()) == sorted(["producer[0]", "consumer[0]", "consumer[1]"] * 2)
    for e in events:
        assert isinstance(e["ph"], str) and "pid" in e and "name" in e
        if e["ph"] == "X":
            assert isinstance(e["tid"], int) and (e["pid"], e["tid"]) in threads
            assert math.isfinite(e["ts"]) and e["dur"] >= 0
        elif e["ph"] == "C":
            assert all(isinstance(v, (int, float)) for v in e["args"].values())
        elif e["ph"] == "i":
            assert e["s"] in ("t", "p", "g")
        else:
            assert e["ph"] == "M"
    # each arrow: one slice that starts it, one that ends it, bound by id
    outs = {e["bind_id"]: e for e in events if e.get("flow_out")}
    ins = {e["bind_id"]: e for e in events if e.get("flow_in")}
    assert outs and set(outs) == set(ins)
    for i, o in outs.items():
        assert o["ts"] <= ins[i]["ts"] and o["dur"] == 0
        assert threads[(ins[i]["pid"], ins[i]["tid"])] in ("producer[0]", "consumer[0]", "consumer[1]")
    assert any(e["ph"] == "C" and e["name"] == "smem slots full" for e in events)
    assert Trace.load(path).lanes() == tr.lanes()


def test_flows_go_from_the_completing_arrival_to_each_released_wait():
    tr = sample_trace(iters=10, consumers=2, stages=2, seed=3)
    flows = tr.flows()
    blocked = [s for s in tr.spans if s.kind == "wait" and s.end > s.start]
    assert len(flows) == len(blocked)
    flips = {(e.barrier, e.slot, e.phase, e.time): e for e in tr.barrier_events if e.kind == "flip"}
    for f in flows:
        flip = flips[(f.barrier, f.slot, f.phase, f.time)]
        if f.barrier == "empty_bars":
            # the slot is freed by the consumer that arrived last, and it releases the producer
            (last,) = [e for e in tr.barrier_events if e.kind == "arrive" and e.barrier == "empty_bars"
                       and e.slot == f.slot and e.time == f.time and e.pending_arrivals == 0]
            assert f.src == (0, "consumer", last.replica) and f.dst == (0, "producer", 0)
        else:
            assert f.src is None and flip.task is None           # TMA bytes completed the phase
            assert f.dst[1] == "consumer"
        assert f.dst_time >= f.time


def test_a_wait_on_another_phase_is_not_released_by_a_flip():
    tr = Trace()
    tr.add_span(Span(0, "consumer", 0, "wait", 0, 100, barrier="bar", slot=0, phase=1))
    tr.add_barrier_event(BarrierEvent(0, 50, "bar", 0, "flip", task="producer", replica=0, phase=0))
    assert tr.flows() == []
    tr.add_barrier_event(BarrierEvent(0, 100, "bar", 0, "flip", task="producer", replica=0, phase=1))
    (f,) = tr.flows()
    assert (f.src, f.dst, f.time, f.phase) == ((0, "producer", 0), (0, "consumer", 0), 100, 1)


def test_summary_busy_waiting_by_barrier_and_mma_share():
    tr = Trace()
    lane = (0, "consumer", 1)
    tr.add_span(Span(*lane, "wait", 0, 30, barrier="full", slot=0, phase=0))
    tr.add_span(Span(*lane, "mma", 30, 80, name="wgmma"))
    tr.add_span(Span(*lane, "wait", 80, 90, barrier="acc_empty", slot=0, phase=0))
    tr.add_span(Span(*lane, "wait", 90, 100, barrier="full", slot=1, phase=0))
    tr.add_span(Span(*lane, "store", 100, 120, name="store"))
    tr.add_span(Span(0, "producer", 0, "tma", 10, 20, name="tma"))
    summ = tr.summary()
    by = {(s.task, s.replica): s for s in summ}
    c = by[("consumer", 1)]
    assert (c.busy, c.waiting, c.span, c.mma) == (70, 50, 120, 50)
    assert c.waiting_by_barrier == {"full": 40, "acc_empty": 10}
    assert c.mma_share == pytest.approx(50 / 120) and c.wait_share == pytest.approx(50 / 120)
    assert by[("producer", 0)].busy_share == 1.0
    text = str(summ)
    assert "CTA 0 consumer[1]" in text and "42%" in text and "full 40" in text
    html = summ._repr_html_()
    assert "<table" in html and "consumer[1]" in html and "acc_empty 10" in html


def test_proton_instrumentation_trace_imports():
    tr = Trace.from_chrome(str(PROTON), clock_ghz=1.0)       # at 1 GHz a cycle is a ns: Proton's own numbers
    raw = json.loads(PROTON.read_text())["traceEvents"]
    assert tr.source == "gpu" and tr.time_unit == "ns" and tr.meta["clock_source"] == "given"
    assert tr.meta["kernel"] == "matmul_kernel_tma_ws"
    # a lane per (CTA, warp); Proton's nested second row keeps its own lane; no call-path or flow slices
    assert tr.lanes() == [(cta, task, 0) for cta in (0, 1)
                          for task in ("warp 0", "warp 4", "warp 4 (line 1)", "warp 8", "warp 8 (line 1)")]
    scopes = [e for e in raw if e["cat"] == "matmul_kernel_tma_ws"]
    assert len(tr.spans) == len(scopes)
    first = min((e for e in scopes if e["pid"].endswith("CTA1")), key=lambda e: e["ts"])
    s = min(tr.spans_of(cta=1), key=lambda s: s.start)
    assert s.start == pytest.approx(first["ts"] * 1000) and s.duration == pytest.approx(first["dur"] * 1000)
    assert s.args["sm"] == 17 and "call_stack" not in s.args
    kinds = {s.name: s.kind for s in tr.spans}
    assert kinds == {"wait_empty": "wait", "tma_load": "tma", "wait_full": "wait", "wgmma": "mma",
                     "wgmma_wait": "wait"}
    warp4 = [x for x in tr.summary() if x.task == "warp 4" and x.cta == 0][0]
    assert 0.5 < warp4.mma_share < 0.7 and warp4.waiting_by_barrier == {"wait_full": pytest.approx(warp4.waiting)}
    # and out again: our own export of the imported trace round-trips
    assert sorted(map(_key, _through_json(tr).spans)) == sorted(map(_key, tr.spans))


def test_trace_shows_as_a_static_timeline_with_its_summary():
    tr = sample_trace(iters=5, ctas=1)
    html = tr._repr_html_()
    assert "<svg" in html and "<script" not in html and "tlxwb-summary" in html
    assert html.count("class='tlxwb-lane'") == len(tr.lanes())


def test_remote_arrival_flows_from_the_sending_cta():
    # CTA 1's consumer arrives on CTA 0's barrier (2-CTA: software arrivals go to the leader)
    t = Trace()
    t.add_span(Span(cta=0, task="producer", replica=0, kind="wait", start=0, end=50, barrier="empty", slot=0,
                    phase=0))
    t.add_span(Span(cta=1, task="consumer", replica=0, kind="compute", start=0, end=40))
    t.add_barrier_event(BarrierEvent(cta=0, time=40, barrier="empty", slot=0, kind="arrive", task="consumer",
                                     replica=0, count=1, src_cta=1))
    t.add_barrier_event(BarrierEvent(cta=0, time=40, barrier="empty", slot=0, kind="flip", task="consumer",
                                     replica=0, phase=0, src_cta=1))
    (f,) = t.flows()
    assert f.src == (1, "consumer", 0) and f.dst == (0, "producer", 0)
    assert (0, "consumer", 0) not in t.lanes()
    back = Trace.from_chrome(t.to_chrome())
    assert [e.src_cta for e in back.barrier_events] == [1, 1]
    assert back.flows()[0].src == (1, "consumer", 0)


# --- Proton at the real clock, warps grouped into tasks ------------------------------------------
def _proton_like(blocks, kernel="gemm_ws_coop_kernel"):
    """A trace the way Proton's StreamChromeTraceWriter lays one out: per CTA (SM, init ns, clock GHz,
    [(warp, scope, first cycle, last cycle)]), each CTA's cycles from its first event, offset by its init
    time after the first CTA's, written as µs at a nominal 1 GHz; finalization starts when its last
    scope ends."""
    min_init = min(b["init"] for b in blocks)
    ev = []
    for cta, b in enumerate(blocks):
        c0 = min(e[2] for e in b["events"])
        last = max(e[3] for e in b["events"])
        pre_final = b["init"] + (last - c0) / b["ghz"]
        for warp, name, t0, t1 in b["events"]:
            ev.append({"name": name, "cat": kernel, "ph": "X", "pid": f"{kernel} Core{b['sm']} CTA{cta}",
                       "tid": f"warp {warp} (line 0)", "ts": (t0 - c0 + b["init"] - min_init) / 1000.0,
                       "dur": (t1 - t0) / 1000.0,
                       "args": {"Init Time (ns)": b["init"], "Post Final Time (ns)": pre_final + 400,
                                "Finalization Time (ns)": 400, "Frequency (MHz)": 1000.0, "call_stack": ["x.py:1"]}})
    return {"displayTimeUnit": "ns", "traceEvents": ev}


@pytest.fixture(scope="module")
def gemm_ws_tasks():
    import torch

    import tlx_workbench as wb
    from tlx_workbench.kernels import gemm_ws
    a, b, c = (torch.empty(256, 256, dtype=torch.float16) for _ in range(3))
    args, options = gemm_ws._kernel_call(a, b, c, gemm_ws.SIM_CONFIGS["two_strips"])
    return wb.compile(gemm_ws.gemm_ws_coop_kernel, *args, target="sm_90", sass="lazy", **options).tasks


def test_proton_trace_comes_back_in_ns_at_each_ctas_clock_with_warps_as_tasks(gemm_ws_tasks):
    rng = np.random.default_rng()
    blocks = []
    for cta, ghz in enumerate((1.5, 1.62)):
        t, evs = int(rng.integers(1000, 5000)), []
        for warp in (0, 4, 8):                    # gemm_ws's warp groups: loader, two consumers
            w = t + int(rng.integers(0, 50))
            for k in range(6):
                d = int(rng.integers(50, 400))
                evs.append((warp, "barrier_wait" if k % 2 else "async_dot", w, w + d))
                w += d + int(rng.integers(0, 30))
        blocks.append({"sm": 3 + 14 * cta, "init": 10**9 + 700 * cta + int(rng.integers(0, 50)), "ghz": ghz,
                       "events": evs})
    tr = Trace.from_chrome(_proton_like(blocks), tasks=gemm_ws_tasks)
    assert tr.time_unit == "ns" and "estimated" in tr.meta["clock_source"]
    assert tr.meta["sm_clock_ghz"] == pytest.approx(1.5, rel=1e-3) or tr.meta["sm_clock_ghz"] == pytest.approx(1.62, rel=1e-3)
    # lanes are the compile report's tasks: the warp group's first warp names it
    assert {l[1:] for l in tr.lanes()} == {("default", 0), ("task1", 0), ("task1", 1)}
    min_init = min(b["init"] for b in blocks)
    for cta, b in enumerate(blocks):
        c0 = min(e[2] for e in b["events"])
        spans = sorted(tr.spans_of(cta=cta), key=lambda s: (s.args["warp"], s.start))
        want = sorted(b["events"], key=lambda e: (e[0], e[2]))
        assert len(spans) == len(want)
        for s, (warp, name, t0, t1) in zip(spans, want):
            assert s.args["warp"] == warp and s.args["sm"] == b["sm"] and s.name == name
            assert s.start == pytest.approx(b["init"] - min_init + (t0 - c0) / b["ghz"], abs=1e-6)
            assert s.duration == pytest.approx((t1 - t0) / b["ghz"], abs=1e-6)
    # a clock given (say the one our recorder measured) wins over the estimate
    given = Trace.from_chrome(_proton_like(blocks), clock_ghz=1.55)
    assert given.meta["clock_source"] == "given" and given.lanes()[0][1] == "warp 0"
    s0 = min(given.spans_of(cta=1), key=lambda s: s.start)
    assert s0.start == pytest.approx(blocks[1]["init"] - min_init, abs=1e-6)
    # warps of a group other than its first keep lanes of their own (warp granularity)
    by_warp = Trace.from_chrome(_proton_like([dict(blocks[0], events=[(5, "x", 10, 20), (4, "y", 10, 30)])]),
                                tasks=gemm_ws_tasks)
    assert sorted(by_warp.lanes()) == [(0, "task1", 0), (0, "task1 w1", 0)]
