"""catch_launches: the one place a program's ``kernel[grid](...)`` launches are caught, and the one mapping of
their options; real kernels under the real simulator, fresh random inputs, torch references."""
import pathlib

import pytest
import torch
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction

import launch_kernels as lk
import tlx_workbench as wb
from tlx_workbench.compiler.launch_options import compile_kwargs, launch_options, split_options
from tlx_workbench.compiler.launches import catch_launches


def _line(marker: str) -> int:
    lines = pathlib.Path(lk.__file__).read_text().splitlines()
    return next(i + 1 for i, text in enumerate(lines) if marker in text)


def _runs():
    return JITFunction.__dict__["run"], Autotuner.__dict__["run"]


def test_a_block_records_each_launch_with_its_line_and_runs_nothing():
    before = _runs()
    n = int(torch.randint(40, 200, (1,)))
    x, tmp, out = torch.randn(n), torch.zeros(n), torch.zeros(n)
    with catch_launches() as caught:
        lk.host_scale_shift(x, tmp, out, 2.0, 0.5)
    assert _runs() == before                              # Triton's own runs are back
    assert not out.any() and not tmp.any()                # recorded, not run
    first, second = caught.launches
    assert (first.kernel, second.kernel) == ("scale", "shift")
    assert first.caller == (lk.__file__, _line("# the first launch"))
    assert first.grid == ((n + 31) // 32,) and first.args[2] == n
    assert first.options == {"num_warps": 2} and second.options == {}
    assert first.parameters == {"x_ptr": x, "out_ptr": tmp, "n": n, "alpha": 2.0, "BLOCK": 32}
    assert first.file == lk.__file__ and first.def_line == lk.scale.def_file_line_number


def test_catchers_nest_the_innermost_first_and_hand_on_to_the_simulator():
    before = _runs()
    n = int(torch.randint(40, 200, (1,)))
    x, tmp, out = torch.randn(n), torch.empty(n), torch.empty(n)
    alpha, beta = float(torch.randn(())), float(torch.randn(()))
    with wb.simulate() as sim:
        with catch_launches(lambda la: la.proceed(), kernels=[lk.shift]) as shifts:
            lk.host_scale_shift(x, tmp, out, alpha, beta)
    # the inner catcher took only shift, and handed it on: the simulator ran both launches
    assert [la.kernel for la in shifts.launches] == ["shift"]
    assert [r.kernel for r in sim.results] == ["scale", "shift"]
    torch.testing.assert_close(out, x.double().mul(alpha).add(beta).float())
    assert _runs() == before


def test_stop_ends_the_block_at_its_first_launch():
    lk.AFTER_FIRST.clear()
    x = torch.randn(64)
    with catch_launches(stop=True) as caught:
        lk.host_scale_shift(x, torch.zeros(64), torch.zeros(64), 3.0, 1.0)
        raise AssertionError("the block goes on after its first launch")
    assert caught.first.kernel == "scale" and lk.AFTER_FIRST == []


def test_a_warmup_goes_on_past_a_catcher_that_leaves_warmups():
    x = torch.randn(64)
    with catch_launches() as outer:
        with catch_launches(warmups=False) as inner:
            lk.scale.warmup(x, x, 64, 1.0, BLOCK=64, grid=(1,))
            lk.scale[(1,)](x, x, 64, 1.0, BLOCK=64)
    assert [la.warmup for la in inner.launches] == [False]
    assert [la.warmup for la in outer.launches] == [True]


def test_an_autotuned_launch_is_caught_with_its_config_or_before_one_is_chosen():
    n = int(torch.randint(100, 300, (1,)))
    x, out = torch.randn(n), torch.empty(n)
    alpha = float(torch.randn(()))
    with wb.simulate(config={"BLOCK": 64}):
        with catch_launches(lambda la: la.proceed(), warmups=False) as tuned:
            lk.host_tuned(x, out, alpha)
    la = tuned.first
    assert la.jit is lk.scale_tuned.fn and la.kwargs["BLOCK"] == 64 and la.options["num_warps"] == 2
    assert la.caller == (lk.__file__, _line("# the tuned launch"))
    torch.testing.assert_close(out, x * alpha)
    # named in kernels=, the autotuner itself is caught, before it picks a config: what %%tlx compiles
    with catch_launches(kernels=[lk.scale_tuned], stop=True) as before_tuning:
        lk.host_tuned(x, out, alpha)
    assert before_tuning.first.jit is lk.scale_tuned and "BLOCK" not in before_tuning.first.kwargs


def test_imposing_a_config_leaves_jit_dispatch_to_triton():
    before = _runs()
    from tlx_workbench.explore.problem import imposed_config
    from tlx_workbench.runtime.triton_launch import dispatch_is_triton
    n = int(torch.randint(100, 300, (1,)))
    x, out = torch.randn(n), torch.empty(n)
    alpha = float(torch.randn(()))
    with imposed_config({"BLOCK": 32, "num_warps": 1}):
        # a library launcher's bound launch may still launch (and be timed) as without the block
        assert dispatch_is_triton(lk.scale)
        assert Autotuner.__dict__["run"].__module__ == "tlx_workbench.compiler.launches"
    assert dispatch_is_triton(lk.scale) and _runs() == before
    with wb.simulate() as sim, imposed_config({"BLOCK": 32, "num_warps": 1}):
        lk.host_tuned(x, out, alpha)
    assert sim.result.launch[2]["BLOCK"] == 32 and sim.result.grid == ((n + 31) // 32, 1, 1)
    torch.testing.assert_close(out, x * alpha)


def test_unbound_says_which_parameter_the_launch_leaves_out():
    x = torch.randn(8)
    with catch_launches() as caught:
        lk.scale[(1,)](x, x, 8, BLOCK=8)
    assert "alpha" in caught.first.unbound()
    with pytest.raises(TypeError, match="alpha"):
        caught.first.parameters


def test_one_mapping_of_launch_options():
    assert split_options({"BLOCK": 64, "num_warps": 4, "stream": 0}, ["x", "BLOCK"]) == \
        ({"BLOCK": 64}, {"num_warps": 4, "stream": 0})
    assert split_options({"BLOCK": 64, "num_warps": 4}) == ({"BLOCK": 64}, {"num_warps": 4})
    opts = launch_options({"num_warps": 8, "ctas_per_cga": (2, 1)})
    assert (opts.num_warps, opts.cluster_dims) == (8, (2, 1, 1))
    assert launch_options({"cluster_dims": (1, 2, 1)}).cluster == (1, 2, 1)
    assert launch_options({"num_ctas": 2}).cluster is None and launch_options({}).cluster_dims == (1, 1, 1)
    # what compile() takes: defaults, the stream and a config's pre_hook dropped, num_ctas as a TLX cluster
    assert compile_kwargs({"BM": 128, "num_warps": 4, "num_ctas": 2, "stream": 0, "maxnreg": 128,
                           "pre_hook": print, "enable_fp_fusion": True}) == \
        {"BM": 128, "num_warps": 4, "maxnreg": 128, "ctas_per_cga": (2, 1, 1)}
    assert compile_kwargs({"num_ctas": 2, "ctas_per_cga": (4, 1, 1)}) == {"ctas_per_cga": (4, 1, 1)}
    assert compile_kwargs({"num_ctas": None, "num_warps": None}) == {"num_warps": None}
