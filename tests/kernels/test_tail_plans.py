"""The split-tail plans' worked examples (their docstrings) hold: the arithmetic both SPLIT_TAIL launchers run on."""
import doctest

import pytest

from tlx_workbench.kernels import attention_bwd, attention_configs


@pytest.mark.parametrize("fn", [attention_configs.tail_plan, attention_bwd.tail_split], ids=lambda f: f.__name__)
def test_docstring_examples(fn):
    finder = doctest.DocTestFinder()
    tests = finder.find(fn, fn.__name__, globs=vars(__import__(fn.__module__, fromlist=["_"])))
    assert tests and tests[0].examples, f"{fn.__name__} lost its examples"
    runner = doctest.DocTestRunner()
    for t in tests:
        runner.run(t)
    assert runner.summarize(verbose=False).failed == 0


def test_every_split_covers_every_block_once_and_fits_a_wave():
    for tiles in (133, 200, 4096, 4100, 8196):
        for ctas in (7, 132):
            for n, unit in ((1000, 64), (4096, 64), (4096, 64), (300, 128)):
                main, left, splits, per = attention_configs.tail_plan(tiles, ctas, n, unit)
                assert main + left == tiles
                if left:
                    assert left <= ctas // 2 and left * splits <= ctas and per % unit == 0
                    assert (splits - 1) * per < n <= splits * per          # every split non-empty, all rows covered
