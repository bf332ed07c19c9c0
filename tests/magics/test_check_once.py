"""``%%tlx --sim --check`` simulates its launch once: the checker's per-phase rules read the cell's own run."""
import sys

import torch

from magic_cells import ADD_ONE, HANDSHAKE
from tlx_workbench.sim.api import Simulation


class _Simulations:
    """Counts the simulator's launches through the interpreter's profile hook: calls of the real
    ``Simulation.launch`` (one per simulated launch; a repair search's own re-runs are inside it)."""

    def __enter__(self):
        self.count = 0
        self._before = sys.getprofile()

        def hook(frame, event, arg):
            if event == "call" and frame.f_code is Simulation.launch.__code__:
                self.count += 1
        sys.setprofile(hook)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._before)
        return False


def test_check_and_the_cells_run_share_one_simulation(run_cell, shell):
    n = 64
    x, y = torch.randn(n), torch.empty(n)
    with _Simulations() as sims:
        ran = run_cell('%%tlx --sim --check --outputs y --ref "lambda x, y: x + 1" -o r\n' + ADD_ONE
                       + f"add_one[(1,)](x, y, BLOCK={n})\n", x=x, y=y)
    assert ran.ok, ran.error
    assert sims.count == 1
    r = shell.user_ns["r"]
    assert r.findings is not None and r.findings.sim is r.sim          # the checker read the cell's run
    assert all(c.ok for c in r.check)
    torch.testing.assert_close(y, x + 1)


def test_a_deadlock_is_simulated_once_and_the_checker_still_names_it(run_cell, shell):
    with _Simulations() as sims:
        ran = run_cell("%%tlx --sim --check --no-raise -o r\n" + HANDSHAKE + "handshake[(1,)](z, ARRIVE_COUNT=2)\n",
                       z=torch.zeros(4))
    assert ran.ok and sims.count == 1
    r = shell.user_ns["r"]
    assert r.sim.deadlock is not None and r.findings.sim is r.sim
    assert any(f.rule_id == "deadlock" for f in r.findings)
