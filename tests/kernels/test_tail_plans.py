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


def test_backward_plans_leave_whole_heads_to_the_parts_in_one_wave():
    """The backward's plan: the main launch takes whole heads (its 2-D grid), the parts every leftover block once in
    one wave, each part non-empty, and a plan is made only when it ends a quarter of a wave sooner by whole waves."""
    cfg = attention_bwd.VARIANT_CONFIGS["split_tail"]
    cdiv = lambda a, b: -(-a // b)  # noqa: E731
    made = 0
    for Z, H in ((1, 17), (2, 9), (4, 32), (2, 32), (3, 5), (1, 1), (8, 16)):
        for N in (200, 1000, 2115, 4096, 8192):
            for sms in (7, 66, 132):
                heads, n_kv, n_q = Z * H, cdiv(N, cfg["BN"]), cdiv(N, cfg["BM"])
                plan = attention_bwd.tail_split(Z, H, N, cfg, False, sms)
                assert attention_bwd.tail_split(Z, H, N, cfg, True, sms) is None
                if plan is None:
                    continue
                made += 1
                main, left, splits, per = plan
                assert main + left == heads * n_kv and main % n_kv == 0 and 0 < main and left % n_kv == 0
                assert left * splits <= sms and (splits - 1) * per < n_q <= splits * per
                assert cdiv(main, sms) + per / n_q <= cdiv(heads * n_kv, sms) - 0.25
    assert made >= 10
