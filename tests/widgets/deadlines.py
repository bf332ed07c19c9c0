"""How long a browser test lets the page take to draw, and the guard for a wait on the kernel.

A browser test waits for events: the kernel idle, a cell's execution count, a view's own "drawn" mark
(``data-rendered`` on its root). Two kinds of deadline stop a test whose event never comes:

- ``HANG_MS`` for the kernel's work (starting, running cells): a busy machine may take many minutes, and
  that is not a failure;
- ``paint_ms()`` for what the page does on its own (laying out, drawing a view once its data is there):
  generous, and longer the busier the machine's cores are when the wait starts.

>>> paint_ms(10) >= 10_000
True
"""
from __future__ import annotations

import os

HANG_MS = 30 * 60_000
PAINT_S = 120


def load_factor() -> float:
    """How many times over the machine's cores are asked for (1.0 when they are not all busy): the larger of
    the 1- and 5-minute load averages per core."""
    cores = os.cpu_count() or 1
    return max(1.0, *(x / cores for x in os.getloadavg()[:2]))


def paint_ms(base_s: float = PAINT_S) -> int:
    """A deadline in ms for the page to draw what it has: ``base_s`` on a quiet machine, scaled by ``load_factor``."""
    return int(base_s * 1000 * load_factor())
