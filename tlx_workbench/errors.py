"""The one error family of the workbench.

Every error a user can cause names the kernel file and line, shows that line,
and says in one sentence what to do.
"""
from __future__ import annotations

import linecache


class TLXWorkbenchError(Exception):
    """Base class of every error the workbench raises on purpose.

    >>> raise TLXWorkbenchError("SMEM over the limit", file="k.py", line=12, hint="use fewer stages")
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 hint: str | None = None, detail: str | None = None):
        self.message = message
        self.file = file
        self.line = line
        self.hint = hint
        # the long form (an MLIR dump, a traceback) only on request: err.detail
        self.detail = detail
        super().__init__(self._format())

    @property
    def source_line(self) -> str | None:
        if self.file and self.line:
            text = linecache.getline(self.file, self.line)
            return text.rstrip("\n") or None
        return None

    def _format(self) -> str:
        parts = []
        if self.file:
            parts.append(f"{self.file}:{self.line}" if self.line else self.file)
        parts.append(self.message)
        text = ": ".join(parts) if len(parts) == 2 else parts[0]
        src = self.source_line
        if src is not None:
            text += f"\n    {self.line:>5} | {src.strip()}"
        if self.hint:
            text += f"\n  what to do: {self.hint}"
        fix = self.verified_fix
        if fix is not None and fix.diff() not in self.message:
            text += f"\n  the fix, verified by simulation (%tlx_fix applies it in a notebook):\n{fix.diff()}"
        return text

    #: the verified repair (sim/diagnosis/repair.py: Repair) a simulator error leads with, set after the error is made
    fix = None

    @property
    def verified_fix(self):
        """The verified repair of this error, its own or its deadlock report's, or None."""
        return self.fix if self.fix is not None else getattr(getattr(self, "report", None), "fix", None)

    def __str__(self) -> str:
        # formatted when shown, not when raised: a verified fix may be attached after the error is made
        return self._format()

    def _repr_html_(self) -> str:
        import html
        src = self.source_line
        # escaped once, here: a file name like "<tlx cell>" must read as itself, not "&lt;tlx cell&gt;"
        loc = (f"{self.file}:{self.line}" if self.line else self.file) if self.file else ""
        # pre-wrap: a message of several lines (a deadlock's) keeps its line breaks in JupyterLab
        out = ["<div class='tlxwb-error' style='border-left:4px solid #c0392b;padding:4px 8px'>",
               f"<b>{html.escape(type(self).__name__)}</b> {html.escape(loc)}"
               f"<div style='white-space:pre-wrap'>{html.escape(self.message)}</div>"]
        if src:
            out.append(f"<pre style='margin:4px 0'>{self.line:>5} | {html.escape(src.strip())}</pre>")
        if self.hint:
            out.append(f"<i>what to do:</i> {html.escape(self.hint)}")
        if self.verified_fix is not None:
            out.append(self.verified_fix._repr_html_())
        out.append("</div>")
        return "".join(out)


class CompileError(TLXWorkbenchError):
    """The TLX compiler rejected the kernel."""


class SimulationError(TLXWorkbenchError):
    """The simulated kernel did something the hardware would not allow."""


class DeadlockError(SimulationError):
    """Every live task of a simulated CTA is blocked."""


class GPUError(TLXWorkbenchError):
    """A GPU run failed, hung or gave a wrong answer."""


class NoGPUError(GPUError):
    """The operation needs a CUDA GPU and none is present."""
