"""A real IPython InteractiveShell with the TLX magics loaded, and cells run as a notebook runs them."""
import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output


@pytest.fixture
def shell():
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "tlx_magic")
    sh.run_line_magic("tlx_config", "--reset")
    yield sh
    sh.run_line_magic("tlx_config", "--reset")


class Ran:
    """One cell as the notebook ran it: did it succeed, what it displayed, what it printed."""

    def __init__(self, result, cap):
        self.result, self.outputs, self.stdout = result, cap.outputs, cap.stdout
        self.error = result.error_in_exec or result.error_before_exec

    @property
    def ok(self) -> bool:
        return self.result.success

    @property
    def html(self) -> str:
        return "".join(o.data.get("text/html", "") for o in self.outputs)

    @property
    def text(self) -> str:
        return "".join(o.data.get("text/plain", "") for o in self.outputs)

    def bundles_with(self, needle: str) -> list:
        return [o for o in self.outputs if needle in o.data.get("text/html", "")]


@pytest.fixture
def run_cell(shell):
    def run(source: str, **ns) -> Ran:
        shell.user_ns.update(ns)
        with capture_output() as cap:
            res = shell.run_cell(source, store_history=True)
        return Ran(res, cap)
    return run


@pytest.fixture
def rng():
    return torch.Generator().manual_seed(7)
