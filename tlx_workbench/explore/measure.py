"""The measured stage: a config on a real GPU, in a watchdog worker, one worker per GPU.

Correctness against the reference first (a wrong result is dropped, not timed), then the timing
runner (``runtime.timing.time_call``: ``triton.testing.do_bench`` median, warm-up, L2 flushed). A
config that hangs is killed at its deadline and recorded as ``hung``; a worker that dies is
``crashed``; either way the worker is started again, the device checked healthy with a small job,
and the sweep goes on.

Measurers (each ``measure(calls)`` yields ``(index, Outcome)`` as results arrive):
:class:`GPUMeasurer` (one watchdog worker per visible GPU, on this host),
:class:`RayGPUMeasurer` (one Ray actor per GPU, ``num_gpus=1``, each with its own watchdog
worker), and :class:`ReplayMeasurer` (the measured rows of a stored sweep, played back, so
searches can be compared on a CPU against real GPU numbers).
"""
from __future__ import annotations

import dataclasses
import json
import os
import queue
import subprocess
import threading
import time

from .stages import Outcome, _compare, inputs_for
from .problem import arrive
from .space import config_id

_REFS: dict = {}


def device_state() -> dict:
    """The GPU's clocks, power and temperature now, where nvidia-smi can read them."""
    q = "name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,pstate"
    try:
        dev = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-i", dev],
                             capture_output=True, text=True, timeout=10).stdout.strip().splitlines()
        vals = [v.strip() for v in out[0].split(",")]
        keys = ["name", "sm_clock_mhz", "mem_clock_mhz", "power_w", "power_limit_w", "temperature_c", "pstate"]
        d = dict(zip(keys, vals))
        for k in keys[1:6]:
            try:
                d[k] = float(d[k])
            except (KeyError, ValueError):
                pass
        return d
    except Exception:   # noqa: BLE001 - no nvidia-smi: the row just lacks clocks
        return {}


def versions() -> dict:
    import triton
    import torch
    from importlib.metadata import version, PackageNotFoundError
    try:
        utlx = version("triton-utlx")
    except PackageNotFoundError:
        utlx = None
    return dict(triton=triton.__version__, utlx=utlx, torch=torch.__version__, cuda=torch.version.cuda)


def measure_job(travelled, cfg: dict, shape, warmup: int = 25, rep: int = 100, seed: int = 0) -> dict:
    """Worker job: one config on this worker's GPU. Returns an Outcome as a dict.

    The first launch (at the problem's verify shape) is the one a protocol bug hangs: it runs
    under the launch deadline. Computing the reference runs under the longer preparation
    deadline (the "compile" phase), so a float64 reference on the CPU is no hang."""
    import torch
    from ..runtime.timing import time_call
    from ..runtime.watchdog import report_phase
    from ..target import gpu_model
    t0 = time.perf_counter()
    report_phase("compile")
    problem = arrive(travelled)
    vshape = problem.verify_shape_for(shape, cfg)
    vin = inputs_for(problem, vshape, "cuda", seed=seed)
    out = problem.call(vin, cfg)
    report_phase("run")
    torch.cuda.synchronize()
    device = torch.cuda.get_device_name()
    metrics = {"verify_shape": list(vshape)}
    if problem.reference is not None:
        report_phase("compile")
        key = (problem.name, tuple(vshape), problem.dtype)
        if key not in _REFS:
            _REFS[key] = problem.reference(*vin)
        ok, err = (True, None) if _REFS[key] is None else _compare(out, _REFS[key], problem.dtype, problem.tolerance)
        metrics["max_rel_err"] = err
        if not ok:
            return dataclasses.asdict(Outcome("dropped", reason=f"wrong result on the GPU at shape {list(vshape)}: "
                                              f"max relative error {err:.3g}",
                                              metrics=dict(metrics, verdict="wrong result"), device=device,
                                              seconds=time.perf_counter() - t0))
    del out
    report_phase("compile")
    inputs = inputs_for(problem, shape, "cuda", seed=seed)
    problem.call(inputs, cfg)
    report_phase("run")
    torch.cuda.synchronize()
    timing = time_call(lambda: problem.call(inputs, cfg), name=problem.name, warmup=warmup, rep=rep)
    ms, p20, p80 = timing.median_ms, timing.p20_ms, timing.p80_ms
    state = device_state()
    metrics.update(ms=ms, p20_ms=p20, p80_ms=p80, us=ms * 1e3)
    if problem.flops is not None:
        metrics["tflops"] = problem.flops(tuple(shape)) / (ms * 1e-3) / 1e12
        metrics["roofline"] = metrics["tflops"] / gpu_model("H200").dense_fp16_tflops
    if problem.bytes is not None:
        metrics["gbps"] = problem.bytes(tuple(shape)) / (ms * 1e-3) / 1e9
    return dataclasses.asdict(Outcome("ok", metrics=metrics, device=device,
                                      env=dict(versions(), **{f"gpu_{k}": v for k, v in state.items()}),
                                      seconds=time.perf_counter() - t0))


def health_job() -> str:
    """Worker job: a small op on the GPU, synchronized: the device is usable after a kill."""
    import torch
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    assert float((x * 2).sum()) == 1024 * 1023.0
    return torch.cuda.get_device_name()


def visible_gpus() -> list[str]:
    """The GPU ids this process may use (CUDA_VISIBLE_DEVICES, or every device torch sees)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d for d in env.split(",") if d.strip() != ""]
    import torch
    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def _guarded(worker, call, timeout: float, compile_timeout: float) -> Outcome:
    """Run one measurement in ``worker``; a hang or crash is an Outcome, and the worker is
    restarted and checked before this returns."""
    from ..runtime.watchdog import KernelTimeoutError, WorkerCrashedError
    travelled, cfg, shape, opts = call
    t0 = time.perf_counter()
    try:
        d = worker.call("tlx_workbench.explore.measure:measure_job",
                        dict(travelled=travelled, cfg=cfg, shape=list(shape), **opts), timeout=timeout,
                        compile_timeout=compile_timeout, what=f"config {config_id(cfg)}")
        return Outcome(**d)
    except (KernelTimeoutError, WorkerCrashedError) as e:
        status = "hung" if isinstance(e, KernelTimeoutError) else "crashed"
        t_fail = time.perf_counter()
        health = _restart_and_check(worker)
        return Outcome(status, reason=e.message if hasattr(e, "message") else str(e).splitlines()[0],
                       metrics=dict(timeout_s=timeout, failed_after_s=t_fail - t0,
                                    respawn_s=time.perf_counter() - t_fail, device_healthy=health is not None),
                       device=health, seconds=time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 - the job raised in the worker: a row, not the end of the sweep
        from .stages import _error_outcome
        return _error_outcome(e, t0, "measured")


def _restart_and_check(worker) -> str | None:
    try:
        worker.kill()
        return worker.call("tlx_workbench.explore.measure:health_job", {}, timeout=60, compile_timeout=120,
                           what="the device health check")
    except Exception:   # noqa: BLE001
        return None


class GPUMeasurer:
    """One watchdog worker per visible GPU on this host; calls are spread over them."""

    def __init__(self, gpus: list[str] | None = None, *, timeout: float = 20.0, compile_timeout: float = 600.0):
        from ..runtime.watchdog import Worker
        self.gpus = gpus if gpus is not None else visible_gpus()
        if not self.gpus:
            from ..errors import NoGPUError
            raise NoGPUError("the measured stage needs a GPU, and none is visible",
                             hint="leave 'measured' out of stages=, or measure=ReplayMeasurer(store) to replay one")
        self.workers = [Worker(env={"CUDA_VISIBLE_DEVICES": g}) for g in self.gpus]
        self.timeout, self.compile_timeout = timeout, compile_timeout

    def measure(self, calls):
        todo: queue.Queue = queue.Queue()
        for i, c in enumerate(calls):
            todo.put((i, c))
        done: queue.Queue = queue.Queue()

        def serve(worker, gpu):
            while True:
                try:
                    i, c = todo.get_nowait()
                except queue.Empty:
                    return
                out = _guarded(worker, c, self.timeout, self.compile_timeout)
                out.env = dict(out.env, gpu_index=gpu)
                done.put((i, out))

        threads = [threading.Thread(target=serve, args=(w, g), daemon=True) for w, g in zip(self.workers, self.gpus)]
        for t in threads:
            t.start()
        for _ in range(len(calls)):
            yield done.get()

    def close(self):
        for w in self.workers:
            w.close()


class RayGPUMeasurer:
    """One Ray actor per GPU of the cluster (``num_gpus=1``), each with its own watchdog worker:
    a hung config costs its actor's worker, never the actor or the other GPUs."""

    def __init__(self, *, timeout: float = 20.0, compile_timeout: float = 600.0, actors: int | None = None):
        import ray
        n = actors or int(ray.cluster_resources().get("GPU", 0))
        if n < 1:
            from ..errors import NoGPUError
            raise NoGPUError("the Ray cluster has no GPUs for the measured stage",
                             hint="start Ray workers with GPUs, or leave 'measured' out of stages=")
        self.actors = [_ray_actor_class().remote(timeout, compile_timeout) for _ in range(n)]

    def measure(self, calls):
        import ray
        pending = {}
        todo = list(enumerate(calls))
        free = list(self.actors)
        while todo or pending:
            while todo and free:
                a = free.pop()
                i, c = todo.pop(0)
                pending[a.measure.remote(c)] = (i, a)
            ready, _ = ray.wait(list(pending), num_returns=1)
            i, a = pending.pop(ready[0])
            free.append(a)
            yield i, Outcome(**ray.get(ready[0]))

    def close(self):
        import ray
        for a in self.actors:
            ray.kill(a)


_RAY_ACTOR = None


def _ray_actor_class():
    global _RAY_ACTOR
    if _RAY_ACTOR is None:
        import ray

        @ray.remote(num_gpus=1)
        class GPUActor:
            def __init__(self, timeout, compile_timeout):
                from ..runtime.watchdog import Worker
                self.gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "0")
                self.worker = Worker(env={"CUDA_VISIBLE_DEVICES": self.gpu})
                self.timeout, self.compile_timeout = timeout, compile_timeout

            def measure(self, call):
                out = _guarded(self.worker, call, self.timeout, self.compile_timeout)
                out.env = dict(out.env, gpu_index=self.gpu)
                return dataclasses.asdict(out)

        _RAY_ACTOR = GPUActor
    return _RAY_ACTOR


class ReplayMeasurer:
    """Plays back the measured rows of a stored sweep (another store file) for the same problem:
    the searches run on a CPU against real GPU numbers. A config the store never measured
    comes back as ``skipped``."""

    def __init__(self, store, kernel: str | None = None):
        from .store import Store
        self.store = store if isinstance(store, Store) else Store(store, readonly=True)
        self.kernel = kernel
        self._by = {}
        for r in self.store.rows(stage="measured"):
            if kernel is None or r.kernel == kernel:
                self._by[(r.config_id, json.dumps(list(r.shape)))] = r

    def measure(self, calls):
        from .space import config_id
        for i, (_, cfg, shape, _) in enumerate(calls):
            r = self._by.get((config_id(cfg), json.dumps(list(shape))))
            if r is None:
                yield i, Outcome("skipped", reason="the replayed store has no measurement of this config")
            else:
                yield i, Outcome(r.status, reason=r.reason, file=r.file, line=r.line, diagnosis=r.diagnosis,
                                 metrics=dict(r.metrics, replayed_from=self.store.path), device=r.device,
                                 env=r.env, seconds=r.seconds)

    def close(self):
        pass
