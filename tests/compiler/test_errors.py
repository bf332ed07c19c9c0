"""compile() failures: one CompileError naming the kernel file and line, showing it, saying what to do."""
import pathlib

import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

import tlx_workbench as wb

HERE = pathlib.Path(__file__).parent
PATH = str(HERE / "error_kernels.py")


def line_of(marker, path=PATH):
    return next(i for i, text in enumerate(open(path).read().splitlines(), 1) if marker in text)


@pytest.fixture(scope="module")
def m():
    return wb.load_module(PATH, target="sm_90")


def _x():
    return torch.empty(1024)


def _check(err, line, words=(), path=PATH):
    assert err.file == path and err.line == line, (err.file, err.line, str(err))
    text = str(err)
    assert f"{path}:{line}" in text
    assert open(path).read().splitlines()[line - 1].strip() in text       # the line is shown
    assert "what to do:" in text and err.hint
    for w in words:
        assert w in text, text
    assert "#loc" not in text and "module attributes" not in text       # no MLIR dump in the message


def test_syntax_error_in_module(tmp_path):
    p = tmp_path / "broken.py"
    p.write_text("import triton\n\n@triton.jit\ndef k(x):\n    y = (x +\n\n")
    with pytest.raises(wb.CompileError) as e:
        wb.load_module(p)
    assert e.value.file == str(p) and e.value.line in (5, 6, 7) and "syntax" in str(e.value)


def test_non_power_of_two_block_names_the_arange(m):
    with pytest.raises(wb.CompileError) as e:
        wb.compile(m.copy_kernel, _x(), _x(), 1024, BLOCK=100)
    _check(e.value, line_of("MARK:arange"), ["power of 2"])


def test_missing_and_unknown_constexprs_name_the_def_line(m):
    with pytest.raises(wb.CompileError) as e:
        wb.compile(m.copy_kernel, _x(), _x(), 1024)
    _check(e.value, line_of("def copy_kernel"), ["BLOCK"])
    with pytest.raises(wb.CompileError) as e:
        wb.compile(m.copy_kernel, _x(), _x(), 1024, BLOCK=128, BLOK=64)
    _check(e.value, line_of("def copy_kernel"), ["BLOK"])


def test_shape_error(m):
    with pytest.raises(wb.CompileError) as e:
        wb.compile(m.shape_error_kernel, _x(), BLOCK=128)
    _check(e.value, line_of("MARK:reshape"))


def test_error_inside_a_jit_helper_points_into_the_helper(m):
    with pytest.raises(wb.CompileError) as e:
        wb.compile(m.helper_error_kernel, _x(), BLOCK=128)
    _check(e.value, line_of("undefined_name"), ["undefined_name"])


def test_tmem_on_hopper_says_use_sm_100(m):
    with pytest.raises(wb.CompileError) as e:
        wb.compile(m.tmem_kernel, _x(), BLOCK=128, target="sm_90")
    _check(e.value, line_of("MARK:tmem"), ["sm_100"])
    ok = wb.compile(m.tmem_kernel, _x(), BLOCK=128, target="sm_100")    # the same kernel is fine on Blackwell
    assert ok.resources.tmem_columns >= 128 and ok.allocation("acc").storage == "tmem"


def test_smem_over_the_limit_names_the_biggest_buffer(m):
    with pytest.raises(wb.CompileError) as e:
        wb.compile(m.big_smem_kernel, _x(), BLOCK=128, NBUF=8)
    _check(e.value, line_of("MARK:bigalloc"), ["232448", "bufs"])
    assert e.value.report.resources.smem_bytes > 232448        # the report is still there to look at


def test_mlir_pass_failure_maps_back_to_the_line(m):
    a = torch.empty(256, 256).half()
    desc = TensorDescriptor(a, [256, 256], [256, 1], [64, 128])   # block does not match the 64x64 buffer
    with pytest.raises(wb.CompileError) as e:
        wb.compile(m.tma_mismatch_kernel, desc, torch.empty(64).half(), BM=64, BK=64)
    _check(e.value, line_of("MARK:tma"), ["descriptor", "block_shape"])
    assert "error:" in e.value.detail and "#loc" in e.value.detail     # the MLIR dump, on request


def test_signature_instead_of_example_arguments(m):
    r = wb.compile(m.copy_kernel, signature={"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "n": "i32"}, BLOCK=256)
    assert r.signature["x_ptr"] == "*fp32" and r.constexprs == {"BLOCK": 256}
    assert "ld.global" in r.ir("ptx", line=line_of("tl.load(x_ptr + offs"))
    with pytest.raises(wb.CompileError) as e:
        wb.compile(m.copy_kernel, signature={"x_ptr": "*fp32"}, BLOCK=256)
    _check(e.value, line_of("def copy_kernel"), ["y_ptr"])
