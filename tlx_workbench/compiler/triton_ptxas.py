"""Every tie to how Triton runs ptxas, in one place (tests/compiler/test_ptxas_advisories.py
fails loudly when Triton changes it).

Triton's ``CUDABackend.make_cubin`` (triton/backends/nvidia/compiler.py) runs
``ptxas -v ...`` with its stderr sent to a temporary log file, and deletes that file
(printing it only under ``knobs.nvidia.dump_ptxas_log``). To keep the log without running
ptxas again, the ``subprocess`` name of that module is swapped once for a pass-through
stand-in that, for a thread inside :func:`capture`, reads the log file after ptxas exits.
Other threads and other commands go straight through; nothing global (stdout, knobs) is
redirected, so compiles in other threads are unaffected.

The log is stored beside the cubin in Triton's cache (same key, ``<kernel>.ptxas.log``),
so a later compile served from Triton's disk cache finds it. A cache entry made without
us (a plain launch, an older workbench) has none: then :func:`rerun` runs Triton's own
``make_cubin`` on the cached PTX once, when the report's log is first asked for.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
import warnings

_STATE = threading.local()
_INSTALL_LOCK = threading.Lock()
_MARK = "_tlxwb_ptxas_capture"


@dataclasses.dataclass
class Capture:
    """What ptxas runs the current thread saw inside :func:`capture`."""
    logs: list = dataclasses.field(default_factory=list)
    cubin_stages: int = 0           # make_cubin calls (ptxas runs Triton made)

    @property
    def log(self) -> str | None:
        """The log of the last ptxas run (the cubin the report describes), or None."""
        return self.logs[-1] if self.logs else None


def _is_ptxas(cmd) -> bool:
    try:
        return os.path.basename(str(cmd[0])).startswith("ptxas") and "-v" in cmd
    except (TypeError, IndexError):
        return False


class _SubprocessShim:
    """Stands in for the ``subprocess`` module inside Triton's NVIDIA compiler module: passes
    everything through, and keeps the ``-v`` log of a ptxas run for a capturing thread."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def run(self, cmd, *args, **kwargs):
        cap = getattr(_STATE, "capture", None)
        if cap is None or not _is_ptxas(cmd):
            return self._real.run(cmd, *args, **kwargs)
        path = getattr(kwargs.get("stderr"), "name", None)
        try:
            return self._real.run(cmd, *args, **kwargs)
        finally:
            if isinstance(path, str):
                try:
                    with open(path, errors="replace") as f:
                        cap.logs.append(f.read())
                except OSError:
                    pass


def install() -> None:
    """Put the pass-through stand-in in place (once per process; idempotent, thread-safe)."""
    from triton.backends.nvidia import compiler as nv
    if getattr(nv.CUDABackend.make_cubin, _MARK, False):
        return
    with _INSTALL_LOCK:
        if getattr(nv.CUDABackend.make_cubin, _MARK, False):
            return
        if not isinstance(nv.subprocess, _SubprocessShim):
            nv.subprocess = _SubprocessShim(nv.subprocess)
        original = nv.CUDABackend.make_cubin

        @functools.wraps(original)
        def make_cubin(self, *args, **kwargs):
            cap = getattr(_STATE, "capture", None)
            if cap is not None:
                cap.cubin_stages += 1
            return original(self, *args, **kwargs)

        setattr(make_cubin, _MARK, True)
        nv.CUDABackend.make_cubin = make_cubin


@contextlib.contextmanager
def capture():
    """Keep the ptxas logs of the Triton compiles this thread runs inside the block.

    >>> with capture() as cap:                                            # doctest: +SKIP
    ...     compiled = triton.compile(src, target=target, options=opts)
    >>> cap.log                                                           # doctest: +SKIP
    'ptxas info    : 0 bytes gmem\\n...'
    """
    install()
    cap = Capture()
    outer = getattr(_STATE, "capture", None)
    _STATE.capture = cap
    try:
        yield cap
    finally:
        _STATE.capture = outer
        if outer is not None:
            outer.logs.extend(cap.logs)
            outer.cubin_stages += cap.cubin_stages


# ---- the log beside the cubin in Triton's cache ---------------------------------------------
def _log_name(compiled) -> str:
    # Triton names a kernel's cache files after src.name, cut at 150 characters
    return f"{compiled.src.name[:150]}.ptxas.log"


def _store(compiled_hash: str, name: str, log: str) -> None:
    from triton.runtime.cache import get_cache_manager
    try:
        get_cache_manager(compiled_hash).put(log, name, binary=False)
    except Exception:   # a read-only or remote cache must not sink the report
        pass


def _stored(compiled) -> str | None:
    from triton.runtime.cache import get_cache_manager
    try:
        path = get_cache_manager(compiled.hash).get_file(_log_name(compiled))
        if path:
            with open(path, errors="replace") as f:
                return f.read()
    except Exception:
        pass
    return None


_WARNED = False


def log_for(compiled, cap: Capture) -> str | None:
    """The ptxas log of `compiled`: the one captured while it was built (then stored beside
    its cubin), else the stored one (a Triton disk-cache hit), else None (see :func:`rerun`)."""
    global _WARNED
    if cap.log is not None:
        _store(compiled.hash, _log_name(compiled), cap.log)
        return cap.log
    if cap.cubin_stages and not _WARNED:
        _WARNED = True
        warnings.warn("tlx_workbench: Triton ran ptxas but its log was not captured (Triton's make_cubin changed?); "
                      "ptxas advisories will come from a second ptxas run when asked for", RuntimeWarning,
                      stacklevel=3)
    return _stored(compiled)


def stored_log_key(compiled) -> tuple[str, str]:
    """(cache key, file name) under which `compiled`'s ptxas log is kept in Triton's cache."""
    return compiled.hash, _log_name(compiled)


def rerun(ptx: str, options, arch: int, key: "tuple[str, str] | None" = None) -> str:
    """Run Triton's own ``make_cubin`` (the same ptxas flags) on `ptx` and return the log;
    with `key` (:func:`stored_log_key`) it is stored beside the cubin, so this runs once per
    cache entry."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    backend = make_backend(GPUTarget("cuda", arch, 32))
    with capture() as cap:
        backend.make_cubin(ptx, {}, options, backend.target.arch)
    if cap.log is None:
        raise RuntimeError("ptxas ran but its log could not be read (Triton's make_cubin changed?)")
    if key is not None:
        _store(key[0], key[1], cap.log)
    return cap.log
