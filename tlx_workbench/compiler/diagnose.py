"""Turn whatever the compiler raised into one CompileError at the kernel line that caused it.

Three sources of failure, three ways to find the line:
- the front end (Python AST -> TTIR) raises ``CompilationError`` with the AST node,
  whose line is relative to the ``@jit`` function that failed;
- MLIR passes emit diagnostics ``loc("file":line:col): error: ...`` (captured from
  the C++ stderr while compiling) and then fail with "PassManager::run failed";
- ``ptxas`` reports PTX lines, which the PTX's own ``.loc`` directives map back.
After a successful compile, :func:`check_limits` rejects kernels that exceed the
target's SMEM / TMEM, naming the largest allocation.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile

from ..errors import CompileError


@contextlib.contextmanager
def captured_output():
    """Capture what native code writes to fds 1 and 2 (MLIR diagnostics, IR dumps on failure)
    while the block runs; yields a dict that holds {"stdout": ..., "stderr": ...} afterwards."""
    out: dict[str, str] = {}
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    saved, tmps = {}, {}
    try:
        for fd in (1, 2):
            saved[fd] = os.dup(fd)
            tmps[fd] = tempfile.TemporaryFile(mode="w+b")
            os.dup2(tmps[fd].fileno(), fd)
    except OSError:   # no real fds (some embedded interpreters): capture nothing
        for fd, keep in saved.items():
            os.dup2(keep, fd)
            os.close(keep)
        yield out
        return
    # native code may also print through Python's sys.stdout (pybind's py::print), which in
    # Jupyter and pytest is not fd 1: swap the Python streams as well
    py_out, py_err = io.StringIO(), io.StringIO()
    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = py_out, py_err
    try:
        yield out
    finally:
        sys.stdout, sys.stderr = real_out, real_err
        _flush_c_streams()
        for fd, name in ((1, "stdout"), (2, "stderr")):
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
            tmps[fd].seek(0)
            out[name] = tmps[fd].read().decode(errors="replace")
            tmps[fd].close()
        out["stdout"] = py_out.getvalue() + out["stdout"]
        out["stderr"] = py_err.getvalue() + out["stderr"]


def _flush_c_streams() -> None:
    """Flush C stdio buffers, so what native code printed lands in the capture, not after it."""
    try:
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except Exception:
        pass


def replay(captured: dict) -> None:
    """Pass captured compiler output on to Python's streams (so a notebook shows warnings)."""
    if captured.get("stdout"):
        sys.stdout.write(captured["stdout"])
    if captured.get("stderr"):
        sys.stderr.write(captured["stderr"])


def _jit_functions(jit):
    """The kernel and the @jit functions its module can see (where a nested error may point)."""
    from triton.runtime.jit import JITCallable
    seen = [jit]
    for v in list(getattr(jit.fn, "__globals__", {}).values()):
        v = getattr(v, "fn", v) if not isinstance(v, JITCallable) else v
        if isinstance(v, JITCallable) and v not in seen:
            seen.append(v)
    return seen


def _clean(msg: str) -> str:
    msg = (msg or "").strip()
    m = re.match(r"^(\w+)\((['\"])(.*)\2\)$", msg, re.S)
    if m:
        kind, text = m.group(1), m.group(3).replace("\\n", "\n").replace("\\'", "'")
        return text if kind in ("AssertionError", "CompilationError") else f"{kind}: {text}"
    return msg


def _hint_for(message: str, model) -> str:
    low = message.lower()
    if model.arch < 100 and any(k in low for k in ("tmem", "tensor memory", "tcgen05", "tc_gen5", "storage_kind.tmem",
                                                   "async_dot_scaled", "blackwell")):
        return (f"this op needs Blackwell tensor memory, which {model.name} (sm_{model.arch}) does not have: "
                "compile with target='sm_100' or use SMEM + wgmma on Hopper")
    if "power of 2" in low or "power of two" in low:
        return "use a power-of-two value here (block sizes and tensor shapes must be powers of 2)"
    if "descriptor" in low and ("block" in low or "shape" in low or "elements" in low):
        return ("make the TensorDescriptor's block_shape match the SMEM buffer (set it in the host code or the "
                "config's pre_hook)")
    if "shape" in low or "block" in low:
        return "check the shapes (block sizes, buffer shapes) at this line"
    if "not 'tensor'" in low:       # int()/bool() of a runtime value where a constant is needed
        return ("this argument must be known at compile time, and it is a runtime value (a program id, a cluster "
                "rank, a loaded value): branch on the value (`if rank == 0: ...`) and give each branch a constant, "
                "or pass it as a constexpr")
    if "is not defined" in low or "undefined" in low:
        return "define the name, or pass it as a constexpr argument"
    if "constexpr" in low:
        return "pass compile-time values as constexprs by name (e.g. BLOCK=128) and check their types"
    return "fix the kernel at this line"


def compile_error(e: BaseException, jit, model, output: "dict | str" = "") -> CompileError:
    """One CompileError for an exception raised by ``triton.compile``; `output` is what the
    compiler printed meanwhile (diagnostics first, IR dumps after), kept in ``.detail``."""
    if isinstance(output, dict):
        stderr_text = (output.get("stderr", "") + "\n" + output.get("stdout", "")).strip()
    else:
        stderr_text = output
    from triton.compiler.errors import CompilationError
    chain, x = [], e
    while x is not None and len(chain) < 16:
        chain.append(x)
        x = x.__cause__ or x.__context__
    front = [c for c in chain if isinstance(c, CompilationError)]
    if front:
        return _blame_tmem_alloc(_front_end_error(front, jit, model), jit, model)
    # before the MLIR diagnostics: PTXASError reads "PTXAS error: ...", which looks like one
    if type(e).__name__ == "PTXASError":
        from .ptxas_log import parse
        # the error carries ptxas's log: its first error, explained when it is a known one
        err = next((a for a in parse(str(e)).advisories if a.severity == "error"), None)
        if err is not None:
            first = f"[{err.code}] {err.message}" if err.code else err.message
        else:
            first = next((ln.strip() for ln in str(e).splitlines() if "error" in ln.lower()
                          and "ptxas" in ln.lower()), str(e).splitlines()[0] if str(e) else "ptxas failed")
        hint = err.hint if err is not None and err.hint else "simplify or split the kernel; see err.detail"
        return CompileError(f"ptxas rejected the generated code: {first}", file=jit.file_name,
                            line=jit.def_file_line_number, hint=hint, detail=str(e))
    text = f"{e}\n{stderr_text}"
    diag = _mlir_diagnostic(text, jit)
    if diag is not None:
        file, line, message = diag
        block = _block_mismatch(message)
        if block is not None:
            # the MLIR wording stays in .detail; the sentence says what is wrong and where to change it
            err = CompileError(f"the TMA copy at this line moves the descriptor's block of {block['block']} elements "
                               f"into a buffer of {block['buffer']} elements: the TensorDescriptor's block_shape "
                               "is not the buffer's shape", file=file, line=line,
                               hint="make the TensorDescriptor's block_shape the SMEM buffer's shape, where the host "
                                    "code (or the config's pre_hook) makes the descriptor",
                               detail=stderr_text or str(e))
            err.block_shape_mismatch = block
            return err
        return _blame_tmem_alloc(CompileError(message, file=file, line=line, hint=_hint_for(message, model),
                                              detail=stderr_text or str(e)), jit, model)
    message = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return CompileError(f"the compiler failed: {message}", file=jit.file_name, line=jit.def_file_line_number,
                        hint=_hint_for(message, model), detail=(stderr_text + "\n" + str(e)).strip())


def _block_mismatch(message: str) -> dict | None:
    """The element counts of MLIR's "descriptor block and tensor must have the same number of elements".

    >>> _block_mismatch("op descriptor block and tensor must have the same number of elements, but got "
    ...                 "descriptor block with 1024 elements tensor with 2048 elements")
    {'block': 1024, 'buffer': 2048}
    """
    m = re.search(r"descriptor block with (\d+) elements,? tensor with (\d+) elements", message)
    return {"block": int(m.group(1)), "buffer": int(m.group(2))} if m else None


def _front_end_error(errs, jit, model) -> CompileError:
    candidates = _jit_functions(jit)
    # innermost first: the deepest frame whose @jit source we can place in a file
    for err in reversed(errs):
        lineno = getattr(err.node, "lineno", None)
        fn = next((c for c in candidates if c.src == err.src), None)
        if fn is None or lineno is None:
            continue
        message = _clean(err.error_message) or "the kernel does not compile here"
        line = fn.def_file_line_number + lineno - 1
        return CompileError(message, file=fn.file_name, line=line, hint=_hint_for(message, model),
                            detail=str(errs[0]))
    err = errs[-1]
    message = _clean(err.error_message) or str(err)
    return CompileError(message, file=jit.file_name, line=jit.def_file_line_number, hint=_hint_for(message, model),
                        detail=str(errs[0]))


_TMEM_WORDS = ("tmem", "tensor memory", "storage_kind.tmem")


def _tmem_allocs(fn) -> list[tuple[str, int]]:
    """(name, file line) of each ``x = tlx.local_alloc(..., tlx.storage_kind.tmem ...)`` in a @jit function."""
    import ast
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(fn.src))
    except (SyntaxError, AttributeError, TypeError):
        return []
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if name != "local_alloc" or "tmem" not in ast.unparse(call):
            continue
        for t in node.targets:
            if isinstance(t, ast.Name):
                out.append((t.id, fn.def_file_line_number + node.lineno - 1))
    return out


def _blame_tmem_alloc(err: CompileError, jit, model) -> CompileError:
    """On a GPU without tensor memory the compiler fails at a TMEM buffer's first use; the fix is at
    the ``local_alloc`` that put it there, so the error names that line (and the use it failed at)."""
    low = err.message.lower()
    if model.arch >= 100 or not any(w in low for w in _TMEM_WORDS):
        return err
    import linecache
    used = linecache.getline(err.file, err.line) if err.file and err.line else ""
    for fn in _jit_functions(jit):
        if fn.file_name != err.file:
            continue
        allocs = _tmem_allocs(fn)
        if not allocs:
            continue
        hit = next(((n, ln) for n, ln in allocs if re.search(rf"\b{re.escape(n)}\b", used)), allocs[0])
        name, line = hit
        if line == err.line:
            return err
        new = CompileError(f"{name} is allocated in tensor memory (tlx.storage_kind.tmem), which {model.name} "
                           f"(sm_{model.arch}) does not have; the compiler stopped at its first use, line "
                           f"{err.line}: {err.message}", file=err.file, line=line,
                           hint=f"allocate {name} in SMEM (drop tlx.storage_kind.tmem) and use wgmma on Hopper, "
                                "or compile with target='sm_100'", detail=err.detail)
        new.__dict__.update({k: v for k, v in err.__dict__.items() if k not in new.__dict__})
        return new
    return err


# `file:line:col: error: msg` (MLIR's printed diagnostic) or `loc("file":line:col): error: msg`
_DIAG_RE = re.compile(r'(?:^|\n)\s*(?:loc\((?:callsite\()?"([^"]+)":(\d+):(\d+)[^\n]*?|([^\s:"][^:\n]*):(\d+):(\d+)):'
                      r'\s*error:\s*(.*)')


def _mlir_diagnostic(text: str, jit):
    """(file, line, message) of the first MLIR error diagnostic, preferring the kernel's file."""
    found = []
    for m in _DIAG_RE.finditer(text):
        file = m.group(1) or m.group(4)
        line = m.group(2) or m.group(5)
        found.append((file.strip(), int(line), m.group(7).strip()))
    if not found:
        m = re.search(r"error:\s*(.*)", text)
        if m and "PassManager" not in m.group(1):
            return jit.file_name, jit.def_file_line_number, m.group(1).strip()
        return None
    for f in found:
        if f[0] == jit.file_name:
            return f
    return found[0]


def check_limits(report) -> None:
    """Raise CompileError when the kernel cannot launch on the target: SMEM or TMEM over the limit."""
    res = report.resources
    if res.smem_limit and res.smem_bytes > res.smem_limit:
        big = max((a for a in report.allocations if a.storage == "smem"), key=lambda a: a.size, default=None)
        where = f"; the largest buffer is {big.name!r} ({big.size} B)" if big else ""
        err = CompileError(
            f"{report.kernel} needs {res.smem_bytes} B of shared memory, more than the {res.smem_limit} B "
            f"a CTA can have on {report.gpu}{where}",
            file=report.source.file, line=big.line if big and big.line else report.source.first_line,
            hint="use fewer pipeline stages / buffers or smaller blocks",
            detail=report.summary())
        err.report = report
        raise err
    if res.tmem_limit and res.tmem_columns > res.tmem_limit:
        big = max((a for a in report.allocations if a.storage == "tmem"), key=lambda a: a.size, default=None)
        err = CompileError(
            f"{report.kernel} needs {res.tmem_columns} tensor-memory columns, more than the {res.tmem_limit} "
            f"of {report.gpu}",
            file=report.source.file, line=big.line if big and big.line else report.source.first_line,
            hint="use fewer or narrower TMEM buffers (accumulators)", detail=report.summary())
        err.report = report
        raise err
