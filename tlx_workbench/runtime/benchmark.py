"""``bench``: time a kernel (``timing.time_call``: do_bench, optionally its CUDA-graph replay) against baselines and
the GPU's ceilings.

>>> r = bench(matmul, a, b, flops=2 * M * N * K,
...           baselines={"cuBLAS": lambda: torch.matmul(a, b)})   # doctest: +SKIP
>>> r                                                            # doctest: +SKIP
name     median ms  ...  TFLOP/s  % of bf16 matmul ceiling
"""
from __future__ import annotations

import base64
import dataclasses
import html
import io
import math
from typing import Callable

from .launch import dispatch, install_launch_hook, launch_name, make_call, require_gpu
from .timing import time_call
from .watchdog import DEFAULT_COMPILE_TIMEOUT, DEFAULT_TIMEOUT, report_phase

_CEILINGS: dict | None = None


def ceilings(refresh: bool = False) -> dict:
    """The GPU's measured ceilings, once per process: device-copy GB/s and bf16-matmul TFLOP/s.

    >>> ceilings()["copy_gbps"]     # doctest: +SKIP
    4270.0
    """
    global _CEILINGS
    if _CEILINGS is not None and not refresh:
        return _CEILINGS
    require_gpu("measuring the GPU's ceilings")
    import torch
    n = 2 ** 28                                    # 1 GiB of fp32: far beyond L2
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms = time_call(lambda: dst.copy_(src), name="device copy", warmup=10, rep=100).median_ms
    copy_gbps = 2 * src.numel() * src.element_size() / (ms * 1e-3) / 1e9
    del src, dst
    s = 8192
    a = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
    ms = time_call(lambda: torch.matmul(a, b), name="bf16 matmul", warmup=25, rep=200).median_ms
    mm_tflops = 2 * s ** 3 / (ms * 1e-3) / 1e12
    del a, b
    torch.cuda.empty_cache()
    _CEILINGS = {"copy_gbps": copy_gbps, "matmul_bf16_tflops": mm_tflops, "device": torch.cuda.get_device_name()}
    return _CEILINGS


def cublas_matmul(a, b) -> Callable[[], object]:
    """A baseline: ``torch.matmul(a, b)`` (cuBLAS), as a no-argument callable."""
    import torch
    return lambda: torch.matmul(a, b)


def torch_sdpa(q, k, v, *, causal: bool = False, scale: float | None = None) -> Callable[[], object]:
    """A baseline: ``torch.nn.functional.scaled_dot_product_attention`` (flash / cuDNN), no-argument callable."""
    import torch
    return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def _tensor_bytes(args) -> int:
    import torch
    total = 0
    for a in args:
        t = a if isinstance(a, torch.Tensor) else getattr(a, "base", None)
        if isinstance(t, torch.Tensor):
            total += t.numel() * t.element_size()
    return total


def _copy_args(args):
    import copy

    import torch
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a.clone())
        elif isinstance(getattr(a, "base", None), torch.Tensor):
            d = copy.copy(a)                           # a TensorDescriptor over a fresh copy
            d.base = a.base.clone()
            out.append(d)
        else:
            out.append(a)
    return tuple(out)


def bench_job(spec, args, kwargs, grid, warmup, rep, repeats, rotate, l2_bytes, graph=False):
    """Worker job: compile + first launch, then :func:`~.timing.time_call` (rotating input copies when they fit
    in L2; with ``graph``, the CUDA-graph replay too)."""
    import torch
    from .transport import resolve
    install_launch_hook()
    report_phase("compile")
    fn = resolve(spec)
    make_call(fn, args, kwargs, grid)()              # compiles; a hang here is caught like any other
    report_phase("run")
    torch.cuda.synchronize()
    size = _tensor_bytes(args)
    copies = 1
    if rotate and 0 < size and 2 * size <= l2_bytes:
        # inputs that fit in L2 would be served from it on every call after the first;
        # cycling through copies makes each call read what the previous ones did not touch
        copies = max(2, min(16, math.ceil(2 * l2_bytes / size)))
    calls = [make_call(fn, args if i == 0 else _copy_args(args), kwargs, grid) for i in range(copies)]
    state = [0]

    def call():
        state[0] = (state[0] + 1) % copies
        return calls[state[0]]()
    result = time_call(call, name=launch_name(fn), warmup=warmup, rep=rep, repeats=repeats, graph=graph).summary()
    result["copies"] = copies
    return result


# -- the result --------------------------------------------------------------------------
@dataclasses.dataclass
class BenchRow:
    name: str
    median_ms: float
    p20_ms: float
    p80_ms: float
    min_ms: float
    spread: float                  # (max − min) / median of the repeats' medians
    tflops: float | None = None
    gbps: float | None = None
    flops_share: float | None = None   # of the measured bf16 matmul ceiling
    bw_share: float | None = None      # of the measured device-copy bandwidth
    baseline: bool = False
    graph_ms: float | None = None      # CUDA-graph replay per call (bench(..., graph=True))
    launch_bound: bool | None = None   # do_bench well above the graph replay: the launch's time, not the kernel's


@dataclasses.dataclass
class BenchResult:
    """Timings of a kernel and its baselines, with throughput and share of the GPU's ceilings."""
    name: str
    rows: list[BenchRow]
    flops: float | None = None
    bytes: float | None = None
    ceilings: dict | None = None
    copies: int = 1
    device: str = ""

    @property
    def main(self) -> BenchRow:
        return self.rows[0]

    @property
    def median_ms(self) -> float:
        return self.rows[0].median_ms

    def speedup_over(self, baseline: str) -> float:
        """How many times faster the kernel is than ``baseline`` (by median)."""
        row = next(r for r in self.rows if r.name == baseline)
        return row.median_ms / self.main.median_ms

    def table(self) -> list[dict]:
        return [dataclasses.asdict(r) for r in self.rows]

    def _columns(self):
        cols = [("name", lambda r: r.name + (" (baseline)" if r.baseline else "")),
                ("median ms", lambda r: f"{r.median_ms:.4f}"),
                ("p20–p80 ms", lambda r: f"{r.p20_ms:.4f}–{r.p80_ms:.4f}"),
                ("spread", lambda r: f"{100 * r.spread:.1f}%")]
        if self.flops:
            cols.append(("TFLOP/s", lambda r: f"{r.tflops:.1f}"))
            if self.ceilings:
                cols.append(("% of matmul ceiling", lambda r: f"{100 * r.flops_share:.0f}%"))
        if self.bytes:
            cols.append(("GB/s", lambda r: f"{r.gbps:.0f}"))
            if self.ceilings:
                cols.append(("% of copy bandwidth", lambda r: f"{100 * r.bw_share:.0f}%"))
        if any(r.graph_ms is not None for r in self.rows):
            cols.append(("graph ms", lambda r: "n/a" if r.graph_ms is None else f"{r.graph_ms:.4f}"))
            cols.append(("launch-bound", lambda r: {True: "yes", False: "no"}.get(r.launch_bound, "n/a")))
        return cols

    def __repr__(self) -> str:
        cols = self._columns()
        cells = [[h for h, _ in cols]] + [[f(r) for _, f in cols] for r in self.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
        foot = []
        if self.ceilings:
            foot.append(f"ceilings measured here: copy {self.ceilings['copy_gbps']:.0f} GB/s, "
                        f"bf16 matmul {self.ceilings['matmul_bf16_tflops']:.0f} TFLOP/s")
        if self.copies > 1:
            foot.append(f"inputs rotated over {self.copies} copies (they fit in L2)")
        return f"BenchResult({self.name}, {self.device})\n" + "\n".join(lines + foot)

    def plot_png(self) -> bytes:
        """A bar plot (matplotlib, PNG bytes): TFLOP/s, else GB/s, else median ms per row."""
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        if self.flops:
            vals, label = [r.tflops for r in self.rows], "TFLOP/s"
            ceil = self.ceilings and self.ceilings.get("matmul_bf16_tflops")
        elif self.bytes:
            vals, label = [r.gbps for r in self.rows], "GB/s"
            ceil = self.ceilings and self.ceilings.get("copy_gbps")
        else:
            vals, label, ceil = [r.median_ms for r in self.rows], "median ms (lower is better)", None
        fig, ax = plt.subplots(figsize=(5.5, 0.5 + 0.45 * len(self.rows)), dpi=100)
        names = [r.name for r in self.rows]
        colours = ["#7f8c8d" if r.baseline else "#2980b9" for r in self.rows]
        ax.barh(names[::-1], vals[::-1], color=colours[::-1])
        if ceil:
            ax.axvline(ceil, color="#c0392b", linestyle="--", linewidth=1, label="measured ceiling")
            ax.legend(loc="lower right", fontsize=8)
        ax.set_xlabel(label)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        return buf.getvalue()

    def _repr_html_(self) -> str:
        cols = self._columns()
        head = "".join(f"<th>{html.escape(h)}</th>" for h, _ in cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(f(r))}</td>" for _, f in cols) + "</tr>"
                       for r in self.rows)
        png = base64.b64encode(self.plot_png()).decode()
        foot = html.escape(repr(self).split("\n", 1)[1].split("\n", len(self.rows) + 1)[-1]) \
            if (self.ceilings or self.copies > 1) else ""
        return (f"<div class='tlxwb-bench'><b>{html.escape(self.name)}</b> on {html.escape(self.device)}"
                f"<table>{'<tr>' + head + '</tr>'}{body}</table><small>{foot}</small><br>"
                f"<img src='data:image/png;base64,{png}'/></div>")


def make_row(name, t: dict, flops, nbytes, ceil, baseline=False) -> BenchRow:
    med = t["median_ms"]
    reps = t["repeat_medians_ms"]
    row = BenchRow(name, med, t["p20_ms"], t["p80_ms"], t["min_ms"],
                   (max(reps) - min(reps)) / med if med else 0.0, baseline=baseline,
                   graph_ms=t.get("graph_ms"), launch_bound=t.get("launch_bound"))
    if flops:
        row.tflops = flops / (med * 1e-3) / 1e12
        if ceil:
            row.flops_share = row.tflops / ceil["matmul_bf16_tflops"]
    if nbytes:
        row.gbps = nbytes / (med * 1e-3) / 1e9
        if ceil:
            row.bw_share = row.gbps / ceil["copy_gbps"]
    return row


def bench(fn, *args, grid=None, flops: float | None = None, bytes: float | None = None,
          baselines: dict | None = None, warmup: int = 25, rep: int = 100, repeats: int = 3,
          rotate: bool = True, with_ceilings: bool = True, graph: bool = False, timeout: float = DEFAULT_TIMEOUT,
          compile_timeout: float = DEFAULT_COMPILE_TIMEOUT, isolate: bool = True, source: str | None = None,
          **kwargs) -> BenchResult:
    """Time ``fn`` (a kernel with ``grid=``, or a host function) and ``baselines`` in the same run.

    Timed by :func:`~.timing.time_call`: ``triton.testing.do_bench`` runs ``repeats`` times
    (warm-up, L2 flush, ``rep`` ms each); the table gives the median, the p20–p80 range and
    the spread of the repeats. ``graph`` adds each row's CUDA-graph replay and whether the
    do_bench time is launch-bound (the launch, not the kernel, fills it). ``flops``/``bytes``
    (per call) turn times into TFLOP/s and GB/s and a share of the ceilings measured once per
    process (a device copy, a bf16 matmul).
    ``baselines`` maps names to no-argument callables (:func:`cublas_matmul`,
    :func:`torch_sdpa`). The kernel runs in the watchdog worker (``timeout``).

    >>> bench(matmul, a, b, flops=2*M*N*K, baselines={"cuBLAS": cublas_matmul(a, b)})  # doctest: +SKIP
    """
    import torch
    name = launch_name(fn)
    require_gpu(f"tlx_workbench.bench({name})")
    from .transport import callable_spec
    spec = callable_spec(fn, source=source, name=name if source else None) if isolate else ("pickle", fn)
    ceil = ceilings() if with_ceilings else None
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    t = dispatch(bench_job, dict(spec=spec, args=tuple(args), kwargs=kwargs, grid=grid, warmup=warmup, rep=rep,
                                 repeats=repeats, rotate=rotate, l2_bytes=l2, graph=graph),
                 isolate=isolate, timeout=timeout, compile_timeout=compile_timeout, what=f"benchmarking {name}")
    rows = [make_row(name, t, flops, bytes, ceil)]
    for bname, bfn in (baselines or {}).items():
        bfn()
        torch.cuda.synchronize()
        t_b = time_call(bfn, name=bname, warmup=warmup, rep=rep, repeats=repeats, graph=graph).summary()
        rows.append(make_row(bname, t_b, flops, bytes, ceil, baseline=True))
    return BenchResult(name, rows, flops, bytes, ceil, t.get("copies", 1), torch.cuda.get_device_name())
