"""Fix and message texts never read "line None": when the IR lost a barrier's allocation line (a kernel
defined in a notebook cell), the checker finds it in the source; when even that fails it names the barrier."""
import copy
import dataclasses

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

import tlx_workbench as wb
from tlx_workbench.checker.advisor import Advice, AdviceResult
from tlx_workbench.checker.facts import slot_facts
from tlx_workbench.checker.findings import at_line
from tlx_workbench.checker.rules import ALL_RULES, Context

from check_helpers import seed_line

BLOCK, N_TILES, STAGES = 64, 4, 2


def _checked(kernel, simulate=True):
    x = torch.randn(N_TILES * BLOCK, BLOCK).half()
    d = TensorDescriptor(x, [N_TILES * BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    return wb.check(kernel, d, torch.zeros(2 * N_TILES * BLOCK, BLOCK).half(), N_TILES, grid=(1,), BLOCK=BLOCK,
                    STAGES=STAGES, simulate=simulate)


def _without_lines(report, rename=False):
    rep = copy.copy(report)
    rep.barriers = [dataclasses.replace(b, line=None, name=b.name + "_x" if rename else b.name)
                    for b in report.barriers]
    return rep


def _findings(report, sim=None, suffix=""):
    facts = {(name + suffix, slot): v for (name, slot), v in slot_facts(sim.trace).items()} if sim else None
    ctx = Context(report, facts)
    return [f for rule in ALL_RULES for f in rule(ctx)]


def test_lost_ir_line_is_found_in_the_source(seeded):
    for kernel, rule, simulated in [("ws_copy_release_count", "release-count", True),
                                    ("ws_copy_full_count", "tma-full-count", False),
                                    ("ws_copy_warp_on_tma", "warp-barrier-on-tma", False)]:
        res = _checked(getattr(seeded, kernel), simulated)
        found = [f for f in _findings(_without_lines(res.report), res.sim if simulated else None)
                 if f.rule_id == rule]
        line = seed_line(rule, kernel)
        assert found and all(f"at line {line}" in f.fix and f.line == line for f in found), (kernel, found)
        assert not any("None" in f.text() for f in found), found


def test_no_line_at_all_names_the_barrier(seeded):
    res = _checked(seeded.ws_copy_release_count)
    found = [f for f in _findings(_without_lines(res.report, rename=True), res.sim, "_x")
             if f.rule_id == "release-count"]
    assert found, res
    for f in found:
        assert "None" not in f.text() and "None" not in f.fix and "line" not in f.fix.split(":")[0], f.fix
        assert "where `empty_x` is allocated" in f.fix and "arrive_count=2" in f.fix
    adv = AdviceResult("k", [Advice("bars_x", None, "TMA full")])
    assert "None" not in repr(adv) and "None" not in adv._repr_html_()
    assert at_line(7) == "at line 7" and at_line(None) == ""
