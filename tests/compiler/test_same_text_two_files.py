"""The same kernel text in two files (a copied or generated variant) reports each file's own lines."""
import importlib.util

import torch

import tlx_workbench as wb

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 3, mask=offs < n)
'''


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_second_file_gets_its_own_lines(tmp_path):
    first = tmp_path / "first.py"
    second = tmp_path / "second.py"
    first.write_text(KERNEL)
    second.write_text("\n" * 7 + KERNEL)          # same text, 7 lines lower
    x, out = torch.randn(1000), torch.empty(1000)
    reports = [wb.compile(_load(p, p.stem).scale_kernel, x, out, 1000, BLOCK=128) for p in (first, second)]
    store_line = [l for l, t in enumerate(KERNEL.splitlines(), 1) if "tl.store" in t][0]
    for report, path, shift in zip(reports, (first, second), (0, 7)):
        assert report.source.file == str(path)
        assert report.source_map.lines_for("ttgir", store_line + shift), (path, report.source_map.forward["ttgir"])
        assert not report.source_map.lines_for("ttgir", store_line + (7 - shift))
