"""Proton instrumentation scopes inside TLX async tasks: does the kernel compile for sm_90?

A minimal reproducer for upstream (triton-utlx on triton 3.8.0). Compiles offline (no GPU needed):
Proton's compile-side hook (the passes ``InstrumentationHook.activate`` installs) is installed under
the workbench's offline sm_90 target, then two kernels are compiled:

  plain   one task, a scope around a load/store: compiles
  ws      the same scope inside each of two ``tlx.async_task`` bodies

    python benchmarks/proton_repro/repro.py [--granularity warp|warp_group] [--out result.json]

Prints, per kernel and granularity, "compiles" or the compiler's error (first lines).
"""
import argparse
import json
import sys
import traceback

import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
import triton.profiler.language as pl


@triton.jit
def plain_scoped(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    pl.enter_scope("plain")
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x + 1)
    pl.exit_scope("plain")


@triton.jit
def ws_scoped(x_ptr, y_ptr, BLOCK: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pl.enter_scope("producer")
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.store(x_ptr + offs, x + 1)
            pl.exit_scope("producer")
        with tlx.async_task(num_warps=4):
            pl.enter_scope("consumer")
            offs = tl.arange(0, BLOCK)
            y = tl.load(y_ptr + offs)
            tl.store(y_ptr + offs, y * 2)
            pl.exit_scope("consumer")


@triton.jit
def ws_unscoped(x_ptr, y_ptr, BLOCK: tl.constexpr):
    # the control: the same tasks without scopes
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.store(x_ptr + offs, x + 1)
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            y = tl.load(y_ptr + offs)
            tl.store(y_ptr + offs, y * 2)


@triton.jit
def ws_scoped_outside(x_ptr, y_ptr, BLOCK: tl.constexpr):
    # the scope around the whole async_tasks region instead (task level from the outside)
    pl.enter_scope("tasks")
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.store(x_ptr + offs, x + 1)
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            y = tl.load(y_ptr + offs)
            tl.store(y_ptr + offs, y * 2)
    pl.exit_scope("tasks")


@triton.jit
def ws_scoped_loop(x_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    # scopes inside a loop of each task, around an mbarrier handshake (the shape of a WS pipeline)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            for i in range(N):
                pl.enter_scope("store")
                tl.store(x_ptr + offs, i)
                pl.exit_scope("store")
                pl.enter_scope("arrive")
                tlx.barrier_arrive(bars[0])
                pl.exit_scope("arrive")
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            for i in range(N):
                pl.enter_scope("wait")
                tlx.barrier_wait(bars[0], i & 1)
                pl.exit_scope("wait")
                tl.store(y_ptr + offs, i)


@triton.jit
def plain_scoped_while(x_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    # a while loop with a scope inside, no async tasks
    offs = tl.arange(0, BLOCK)
    i = 0
    while i < N:
        pl.enter_scope("store")
        tl.store(x_ptr + offs, i)
        pl.exit_scope("store")
        i += 1


@triton.jit
def ws_scoped_while(x_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    # the same while loop inside an async task (the shape of TLX's persistent tutorials' tile loops)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            i = 0
            while i < N:
                pl.enter_scope("store")
                tl.store(x_ptr + offs, i)
                pl.exit_scope("store")
                i += 1
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, 1.0)


@triton.jit
def ws_scoped_around_while(x_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    # one scope per task, around its whole while loop (task-level scopes)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pl.enter_scope("task0")
            offs = tl.arange(0, BLOCK)
            i = 0
            while i < N:
                tl.store(x_ptr + offs, i)
                i += 1
            pl.exit_scope("task0")
        with tlx.async_task(num_warps=4):
            pl.enter_scope("task1")
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, 1.0)
            pl.exit_scope("task1")


@triton.jit
def ws_scoped_while_replicated(x_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    # the scoped while loop in a replicated task (replicate=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0)
        with tlx.async_task(num_warps=4, replicate=2):
            offs = tl.arange(0, BLOCK)
            i = 0
            while i < N:
                pl.enter_scope("store")
                tl.store(y_ptr + offs, i)
                pl.exit_scope("store")
                i += 1


@triton.jit
def ws_scoped_for_replicated(x_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    # a scoped for loop in a replicated task
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0)
        with tlx.async_task(num_warps=4, replicate=2):
            offs = tl.arange(0, BLOCK)
            for i in range(N):
                pl.enter_scope("store")
                tl.store(y_ptr + offs, i)
                pl.exit_scope("store")


@triton.jit
def ws_scoped_replicated(x_ptr, y_ptr, BLOCK: tl.constexpr):
    # a scope in a replicated task, no loop
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0)
        with tlx.async_task(num_warps=4, replicate=2):
            pl.enter_scope("store")
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, 2.0)
            pl.exit_scope("store")


@triton.jit
def two_tasks_loops(x_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    # scoped loops in two ordinary (not replicated) non-default tasks
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0)
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            for i in range(N):
                pl.enter_scope("a")
                tl.store(y_ptr + offs, i)
                pl.exit_scope("a")
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            for i in range(N):
                pl.enter_scope("b")
                tl.store(y_ptr + offs, i)
                pl.exit_scope("b")

@triton.jit
def second_task_loop(x_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    # two non-default tasks, a scoped loop in the second only
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0)
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, 1.0)
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            for i in range(N):
                pl.enter_scope("b")
                tl.store(y_ptr + offs, i)
                pl.exit_scope("b")

@triton.jit
def default_and_task_loops(x_ptr, y_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    # scoped loops in the default task and in one other
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            for i in range(N):
                pl.enter_scope("a")
                tl.store(x_ptr + offs, i)
                pl.exit_scope("a")
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            for i in range(N):
                pl.enter_scope("b")
                tl.store(y_ptr + offs, i)
                pl.exit_scope("b")


def _install_proton_passes(granularity: str):
    """What InstrumentationHook.activate() does to the compiler (its passes), without a device."""
    import types

    from triton.profiler.hooks.instrumentation import InstrumentationHook
    drv = triton.runtime.driver.active
    if not hasattr(drv, "utils"):          # the workbench's offline driver: answer the one query activate() makes
        drv.utils = types.SimpleNamespace(get_device_properties=lambda dev: {"max_shared_mem": 232448})
    hook = InstrumentationHook(f"default:granularity={granularity}")
    hook.activate()
    return hook


class _Stderr:
    """The MLIR diagnostics the compiler prints to fd 2 while compiling (they are not in the exception)."""

    def __enter__(self):
        import os
        import tempfile
        sys.stderr.flush()
        self.file = tempfile.TemporaryFile(mode="w+b")
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        import os
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        self.text = self.file.read().decode(errors="replace")
        self.file.close()
        return False


def try_compile(kernel, nargs: int, granularity: str) -> dict:
    err = _Stderr()
    with err:
        r = _try_compile(kernel, nargs, granularity)
    if not r["compiles"]:
        lines = [ln for ln in err.text.splitlines() if "error:" in ln]
        r["diagnostics"] = lines[:6]
        if lines:
            r["error"] = lines[0].split("error:", 1)[1].strip() + "\n" + r["error"]
    return r


def _try_compile(kernel, nargs: int, granularity: str) -> dict:
    from tlx_workbench.target import offline
    with offline("sm_90"):
        pl.enable_semantic("triton")
        hook = _install_proton_passes(granularity)
        try:
            xs = [torch.empty(128, dtype=torch.float32) for _ in range(nargs)]
            extra = {"N": 4} if "N" in kernel.arg_names else {}
            ck = kernel.warmup(*xs, BLOCK=128, grid=(1,), **extra)
            ptx = ck.asm["ptx"]
            return {"kernel": kernel.__name__, "granularity": granularity, "compiles": True,
                    "clock_reads": ptx.count("%clock") + ptx.count("globaltimer")}
        except Exception as e:  # the compiler's refusal is the result
            msg = str(e)
            return {"kernel": kernel.__name__, "granularity": granularity, "compiles": False,
                    "error_type": type(e).__name__, "error": msg[:3000],
                    "traceback": traceback.format_exc()[-1500:]}
        finally:
            hook.deactivate()
            pl.disable_semantic("triton")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--granularity", action="append", choices=["warp", "warp_group", "cta"])
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    results = []
    for g in a.granularity or ["warp", "warp_group"]:
        for k, n in ((plain_scoped, 1), (ws_unscoped, 2), (ws_scoped, 2), (ws_scoped_outside, 2), (ws_scoped_loop, 2),
                     (plain_scoped_while, 1), (ws_scoped_while, 2), (ws_scoped_around_while, 2),
                     (ws_scoped_replicated, 2), (ws_scoped_for_replicated, 2), (ws_scoped_while_replicated, 2),
                     (second_task_loop, 2), (default_and_task_loops, 2), (two_tasks_loops, 2)):
            r = try_compile(k, n, g)
            results.append(r)
            head = "compiles" if r["compiles"] else f"FAILS: {r['error_type']}: {r['error'].splitlines()[0][:300]}"
            print(f"{r['kernel']:<20} granularity={g:<10} {head}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"triton": triton.__version__, "results": results}, f, indent=1)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
