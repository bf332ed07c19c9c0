"""A GPU test file as a TLX project writes it: CUDA tensors, torch references, an IR check."""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def _add(n, block=256):
    x = torch.randn(n, device="cuda")
    y = torch.randn(n).cuda()
    out = torch.empty_like(x)
    kernel = add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    return x, y, out, kernel


def test_add_matches_torch():
    x, y, out, _ = _add(1000)
    torch.testing.assert_close(out, x + y)


def test_add_ir_and_metadata():
    _, _, _, kernel = _add(512)
    assert "ttg.blocked" in kernel.asm["ttgir"]
    major, minor = torch.cuda.get_device_capability()
    assert f".target sm_{major}{minor}a" in kernel.asm["ptx"]
    assert kernel.metadata.num_warps == 4


def test_device_answers_for_the_gpu():
    assert torch.cuda.is_available()
    major, minor = torch.cuda.get_device_capability()
    props = torch.cuda.get_device_properties(0)
    assert (props.major, props.minor) == (major, minor) and major in (9, 10)
    assert props.multi_processor_count == {9: 132, 10: 148}[major]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.ones(8, device=torch.device("cuda", 0))
    torch.cuda.synchronize()
    assert x.sum().item() == 8


def test_wrong_reference_fails():
    x, y, out, _ = _add(300)
    torch.testing.assert_close(out, x - y)     # deliberately wrong: the failure must be reported


def test_short_grid_passes_with_a_warning():
    # the grid rounds the tile count down: the tail is never written, and the test only looks at the head
    n = 1000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.zeros_like(x)
    add_kernel[(n // 256,)](x, y, out, n, BLOCK=256)
    torch.testing.assert_close(out[:768], (x + y)[:768])
