"""The wheel's Hopper warp-specialized GEMM tutorial, unchanged, called at a small shape and checked against
torch: a program as its author would write it, for `tlx-workbench run`."""
import importlib

import torch

tutorial = importlib.import_module("tlx.tutorials.hopper_gemm_ws")

if __name__ == "__main__":
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 256, device="cuda", dtype=torch.float16)
    c = tutorial.matmul(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)
    print("tutorial GEMM matches torch")
