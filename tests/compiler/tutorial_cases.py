"""How to call each TLX tutorial kernel (the file itself stays unchanged): example
arguments as its host code builds them, and a representative config."""
import torch
import triton

from compile_helpers import desc, tutorial


def _gemm_descs(M, N, K, dtype=torch.float16):
    a, b, c = torch.randn(M, K).to(dtype), torch.randn(K, N).to(dtype), torch.empty(M, N, dtype=dtype)
    return desc(a), desc(b), desc(c)


def _attention_args(mod, kernel, Z=2, H=4, N_CTX=1024, HEAD_DIM=128):
    q, k, v = (torch.randn(Z, H, N_CTX, HEAD_DIM).half() for _ in range(3))
    o = torch.empty_like(q)
    M = torch.empty((Z, H, N_CTX), dtype=torch.float32)
    y = Z * H * N_CTX
    dq, dk, dv, do = (desc(t.reshape(y, HEAD_DIM)) for t in (q, k, v, o))
    return (0.5, M, Z, H, dq, dk, dv, do), dict(N_CTX=N_CTX, HEAD_DIM=HEAD_DIM, FP8_OUTPUT=False)


def case(name):
    """(kernel, args, compile kwargs, target) for tutorial `name`."""
    if name == "hopper_gemm_ws":
        mod = tutorial("hopper_gemm_ws.py")
        M = N = K = 1024
        cfg = triton.Config(dict(BM=128, BN=128, BK=64, GROUP_SIZE_M=8, NUM_STAGES=3, NUM_MMA_WARPS=8,
                                 NUM_MMA_GROUPS=2, EPILOGUE_SUBTILE=False, NUM_CTAS=1, USE_WARP_BARRIER=False),
                            num_warps=4, num_stages=1, pre_hook=mod.matmul_tma_set_block_size_hook)
        return mod.matmul_kernel_tlx_ws, (*_gemm_descs(M, N, K), M, N, K), dict(config=cfg), "sm_90"
    if name == "hopper_gemm_pipelined":
        mod = tutorial("hopper_gemm_pipelined.py")
        M, N, K = 512, 512, 256
        a, b, c = torch.randn(M, K).half(), torch.randn(K, N).half(), torch.empty(M, N).half()
        args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        return mod.matmul_kernel_pipelined_hopper, args, dict(config=0), "sm_90"
    if name in ("hopper-persistent-gemm-ws-cooperative", "hopper-persistent-gemm-ws-pingpong"):
        mod = tutorial(name + ".py")
        M = N = K = 1024
        extra = dict(USE_NAMED_BARRIER=True) if name.endswith("pingpong") else {}
        return (mod.matmul_kernel_tlx_ws_persistent, (*_gemm_descs(M, N, K), M, N, K),
                dict(config=0, NUM_SMS=132, **extra), "sm_90")
    if name.startswith("hopper_fa"):
        mod = tutorial(name + ".py")
        kernel = next(v for k, v in vars(mod).items() if k.startswith("_attn_fwd") and hasattr(v, "configs"))
        args, kw = _attention_args(mod, kernel)
        return kernel, args, dict(config=len(kernel.configs) - 1, **kw), "sm_90"
    if name == "vector-add2":
        mod = tutorial("vector-add2.py")
        n = 4096
        x, y, a, b = (torch.randn(n) for _ in range(4))
        z, c = torch.empty(n), torch.empty(n)
        return mod.add2_warp_specialized_kernel, (x, y, z, a, b, c, n), dict(BLOCK_SIZE=1024), "sm_90"
    if name == "blackwell_gemm_ws":
        mod = tutorial("blackwell_gemm_ws.py", "sm_100")
        M = N = K = 4096
        a, b, c = _gemm_descs(M, N, K)
        cfg = dict(mod.get_heuristic_config(M, N, K))
        return (mod.matmul_kernel_tma_ws_blackwell, (a, b, c, desc(torch.empty(M, N).half()), M, N, K),
                dict(config=cfg, NUM_SMS=148), "sm_100")
    raise KeyError(name)


HOPPER = ["hopper_gemm_ws", "hopper_gemm_pipelined", "hopper-persistent-gemm-ws-cooperative",
          "hopper-persistent-gemm-ws-pingpong", "hopper_fa_ws", "hopper_fa_ws_pipelined",
          "hopper_fa_ws_pipelined_pingpong", "hopper_fa_ws_pipelined_pingpong_persistent", "vector-add2"]
