"""One phase numbering in every view (docs/phases.md): phases of a barrier slot count from 0, an arrive
counts toward phase k, the flip completes phase k, a wait names the parity it waits for."""
import re

from magic_cells import TMA_REF, TMA_RELU


def test_the_timeline_and_the_barrier_view_number_the_same_phases_alike(run_cell, shell):
    ran = run_cell(f"%%tlx --sim --check {TMA_REF} --timeline --barriers -o r\n" + TMA_RELU)
    assert ran.ok, ran.error
    trace = shell.user_ns["r"].trace
    flips = {(e.barrier, e.slot, e.time): e.phase for e in trace.barrier_events if e.kind == "flip"}
    arrives = [s for s in trace.spans if s.kind == "arrive" and s.name == "barrier_arrive"]
    assert len(arrives) == 4                       # the consumer frees empty[0] and empty[1], twice each
    for s in arrives:
        # each of these arrivals completes its phase: the flip at its end is the phase the span names
        assert flips[(s.barrier, s.slot, s.end)] == s.phase, s
    assert sorted(s.phase for s in arrives if s.slot == 0) == [0, 1]
    from tlx_workbench.widgets import barrier_svg, timeline_svg
    tl, bars = timeline_svg(trace), barrier_svg(trace)
    # the consumer's arrives on empty[0]: phase 0 and phase 1 in the timeline, completed as such in the barrier view
    assert re.findall(r"barrier_arrive \(arrive\)[^<]*empty\[0\] phase (\d)", tl) == ["0", "1"]
    assert re.findall(r"flip empty\[0\][^<]*phase (\d) completed", bars) == ["0", "1"]
    # a wait says parity, in both views
    assert re.search(r"barrier_wait \(wait\)[^<]*full\[0\] parity 0", tl)
    assert "waits for parity" in bars and " phase " not in " ".join(re.findall(r"<title>[^<]*waits[^<]*</title>", bars))
