"""Fail loudly when Triton's private interpreter (or the TLX frontend) changes under the simulator."""
import inspect

import numpy as np
import triton
from triton.runtime import interpreter

from tlx_workbench.sim import interp_adapter as ia
from tlx_workbench.sim.ops import tlx_ops


def test_triton_version_is_the_pinned_one():
    assert triton.__version__.startswith(ia.PINNED_TRITON), (
        f"the simulator's interpreter adapter is pinned to triton {ia.PINNED_TRITON}x, found {triton.__version__}: "
        "re-check every name in interp_adapter.USED_NAMES")


def test_private_names_exist_with_the_expected_kind():
    for name, kind in ia.USED_NAMES.items():
        assert hasattr(interpreter, name), f"triton.runtime.interpreter.{name} is gone"
        obj = getattr(interpreter, name)
        if kind == "class":
            assert inspect.isclass(obj), name
        elif kind == "function":
            assert inspect.isfunction(obj), name


def test_signatures_the_adapter_calls():
    sig = lambda f: list(inspect.signature(f).parameters)  # noqa: E731
    B = interpreter.InterpreterBuilder
    assert sig(B.create_masked_load) == ["self", "ptrs", "mask", "other", "cache_modifier", "eviction_policy",
                                         "is_volatile"]
    assert sig(B.create_masked_store) == ["self", "ptrs", "value", "mask", "cache_modifier", "eviction_policy"]
    assert sig(B.create_descriptor_load)[:3] == ["self", "desc", "indices"]
    assert sig(B.create_descriptor_store) == ["self", "desc", "value", "indices"]
    assert sig(B.create_dot) == ["self", "a", "b", "d", "input_precision", "max_num_imprecise_acc"]
    assert sig(B.set_grid_idx) == ["self", "x", "y", "z"]
    assert sig(interpreter.TensorDescHandle.materialize_pointers) == ["self", "offsets"]
    assert sig(interpreter._patch_lang) == ["fn"]
    assert hasattr(interpreter.ASTTransformer, "visit_Assign")


def test_every_tlx_builder_call_of_the_frontend_is_implemented():
    """Each ``builder.utlx_*`` the uTLX frontend calls has a simulator meaning (or is listed unsupported)."""
    import re
    import utlx_plugin
    import pathlib
    called = set()
    for f in pathlib.Path(utlx_plugin.__file__).parent.glob("*.py"):
        called |= set(re.findall(r"builder\.(utlx_[a-z0-9_]+)", f.read_text()))
    missing = {c for c in called if not hasattr(tlx_ops.SimBuilder, c)}
    # vote_ballot_sync has its meaning at the builtin (tlx_ops.OVERRIDES: it needs the predicate's type)
    allowed = {"utlx_vote_ballot_sync"}
    assert missing <= allowed, f"uTLX builder calls with no simulator meaning: {sorted(missing - allowed)}"


def test_patching_is_undone():
    import triton.language.extra.tlx as tlx
    before = tlx.barrier_wait
    undo = tlx_ops.patch_tlx(ia.new_semantic(tlx_ops.SimBuilder()))
    assert tlx.barrier_wait is not before
    undo()
    assert tlx.barrier_wait is before


def test_signatures_the_bf16_numerics_wrap():
    sig = lambda f: list(inspect.signature(f).parameters)
    B = interpreter.InterpreterBuilder
    assert sig(B.binary_op) == ["self", "lhs", "rhs", "op"]
    assert sig(B.unary_op) == ["self", "arg", "op"]
    assert sig(B.ternary_op) == ["self", "lhs", "rhs", "other", "op"]
    assert sig(B.create_fma) == ["self", "x", "y", "z"]
    assert sig(B.cast_impl) == ["self", "src", "dst_type"]
    assert sig(interpreter.ReduceOps.sum) == ["self", "input"]
    assert sig(interpreter.ReduceOps.min_max) == ["self", "input", "val_reduce_op", "idx_reduce_op"]
    assert sig(interpreter.ScanOps.cumsum) == ["self", "input"] and sig(interpreter.ScanOps.cumprod) == ["self", "input"]
    # bf16 is stored as its bits in uint16 (what install_bf16_numerics decodes)
    import triton.language as tl
    assert ia.np_dtype(tl.bfloat16) == np.uint16


def test_block_types_check_their_shape_where_waves_lift_it():
    # sim/schedule/batch.py replays a reduction over a wave's CTAs as one op, the CTA axis in front: its size need not be a
    # power of two, so interp_adapter.wave_shapes swaps the check Triton's block types call for one that allows it
    import triton.language as tl
    assert callable(tl.core.validate_block_shape), "re-check interp_adapter.wave_shapes against this Triton"
    with ia.wave_shapes():
        assert tl.block_type(tl.float32, [3, 64]).numel == 192
    import pytest
    with pytest.raises(ValueError):
        tl.block_type(tl.float32, [3, 64])
