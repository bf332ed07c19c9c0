"""The kernels a call runs through torch beside its TLX launches (``sim/torch_kernels.py``): a wrapper that zeroes
its output or casts its input runs a kernel of its own on a GPU, inside any timer around the call, and
``wb.predict`` charges it (its bytes through DRAM, plus a launch)."""
from __future__ import annotations

import random
import warnings

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench import json_schema as js
from tlx_workbench.kernels import gemm_ws
from tlx_workbench.sim.timing.cost import cost_model
from tlx_workbench.sim.torch_kernels import TorchKernelRecorder


def _shape():
    r = random.Random()
    return 128 * r.randint(1, 2), 64 * r.randint(1, 3), 64 * r.randint(2, 4)


def _predict(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wb.predict(fn, gpu="H100", compile=False)


def test_a_wrapper_that_zeroes_its_output_and_casts_its_input_is_charged_for_both():
    M, N, K = _shape()
    a32, b = torch.randn(M, K), torch.randn(K, N).half()
    cfg = dict(gemm_ws.SIM_CONFIGS["tiny"])

    def matmul(a32, b):
        a = a32.half()                                                      # a cast: read fp32, write fp16
        c = torch.zeros((M, N), dtype=torch.float16, device=a.device)         # a fill: write C
        gemm_ws.launch(a, b, c, cfg)
        return c

    def plain(a, b):
        c = torch.empty((M, N), dtype=torch.float16, device=a.device)         # an allocation: no kernel
        gemm_ws.launch(a, b, c, cfg)
        return c

    a16 = a32.half()
    with wb.offline("H100"):
        call = _predict(lambda: matmul(a32, b))
        alone = _predict(lambda: plain(a16, b))
    assert isinstance(alone, wb.Prediction) and not isinstance(alone, wb.CallPrediction)
    assert isinstance(call, wb.CallPrediction) and len(call.parts) == 1
    cast, fill = call.torch_kernels
    assert (cast.op, cast.bytes_read, cast.bytes_written) == ("aten._to_copy", M * K * 4, M * K * 2)
    assert (fill.op, fill.bytes_read, fill.bytes_written) == ("aten.zeros", 0, M * N * 2)
    line = matmul.__code__.co_firstlineno
    assert cast.where.endswith(f":{line + 1}") and fill.where.endswith(f":{line + 2}")
    assert cast.after_launches == fill.after_launches == 0
    # the launch is the one a plain wrapper makes; each torch kernel its bytes at the calibrated DRAM rate + a launch
    assert call.parts[0].us == pytest.approx(alone.us, rel=1e-9)
    cm = cost_model("H100")
    assert call.dram_gbps == pytest.approx(cm.hbm_gbps)
    each = [k.nbytes / (cm.hbm_gbps * 1e3) + alone.launch_us for k in (cast, fill)]
    assert call.torch_us == pytest.approx(sum(each))
    assert call.us == pytest.approx(alone.us + sum(each))
    assert "aten.zeros" in repr(call) and "aten._to_copy" in call._repr_html_()
    import jsonschema
    d = js.prediction(call)
    jsonschema.validate(d, js._PREDICTION)
    assert [x["op"] for x in d["torch_kernels"]] == ["aten._to_copy", "aten.zeros"]
    assert d["us"] == pytest.approx(call.us)


def test_the_simulators_own_work_and_views_are_not_torch_kernels():
    """A full simulation (numerics: the simulator's own torch work inside the launch) notes only what the host code
    ran; views, allocations and 0-d scalars are no kernels; an op after the launch says so."""
    M, N, K = _shape()
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    cfg = dict(gemm_ws.SIM_CONFIGS["tiny"])

    def call():
        c = torch.empty((M, N), dtype=torch.float16, device=a.device)
        bt = b.T                                # a view
        scale = torch.tensor(2.0)               # a host scalar
        gemm_ws.launch(a, bt.T, c, cfg)
        return c.float() * scale                # after the launch: a cast, then a multiply

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = wb.simulate(call, gpu="H100", torch_kernels=True)
    assert res.ok
    torch.testing.assert_close(res.value, 2 * (a.float() @ b.float()), atol=0.5, rtol=2e-2)
    assert [(k.op, k.after_launches) for k in res.torch_kernels] == [("aten._to_copy", 1), ("aten.mul", 1)]
    assert res.torch_kernels[1].bytes_read == M * N * 4 and res.torch_kernels[1].bytes_written == M * N * 4
    assert wb.simulate(call, gpu="H100").__dict__.get("torch_kernels") == []     # not asked: none noted


def test_the_recorder_pauses_and_counts_in_place_writes_once():
    x = torch.randn(64, 32)
    with TorchKernelRecorder() as rec:
        x.add_(x)                   # reads x (once), writes x
        with rec.paused():
            x.mul_(2)
        x.zero_()                   # writes x, reads nothing
    (add, zero) = rec.kernels
    assert (add.op, add.bytes_read, add.bytes_written) == ("aten.add_", x.nbytes, x.nbytes)
    assert (zero.op, zero.bytes_read, zero.bytes_written) == ("aten.zero_", 0, x.nbytes)


def test_the_explorers_proof_does_not_stand_for_a_call_with_torch_kernels():
    """The simulated stage predicts from its proof's CTAs when the proof ran at the real shape
    (``stages.predict_whole``); a call that also zeroes its output is left to ``wb.predict``, which charges the fill."""
    from tlx_workbench.explore.stages import predict_whole
    M, N, K = _shape()
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    cfg = dict(gemm_ws.SIM_CONFIGS["tiny"])

    def call(zero):
        c = (torch.zeros if zero else torch.empty)((M, N), dtype=torch.float16, device=a.device)
        gemm_ws.launch(a, b, c, cfg)
        return c

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = wb.simulate(lambda: call(False), gpu="H100", torch_kernels=True)
        zeroed = wb.simulate(lambda: call(True), gpu="H100", torch_kernels=True)
    assert plain.torch_kernels == [] and [k.op for k in zeroed.torch_kernels] == ["aten.zeros"]
    assert predict_whole(plain, "H100")["predicted_us"] > 0
    assert predict_whole(zeroed, "H100") is None


def test_an_op_the_recorder_cannot_size_runs_unnoted():
    """A sparse tensor has no ``nbytes``: its op runs as it would, and is not noted (the call goes on)."""
    n = random.randint(8, 32)
    dense = torch.randn(n, n)
    with TorchKernelRecorder() as rec:
        sparse = dense.to_sparse()
        back = sparse.to_dense()
        zeros = torch.zeros(n, n)
    torch.testing.assert_close(back, dense)
    assert zeros.abs().sum() == 0
    assert "aten.zeros" in [k.op for k in rec.kernels]
