"""Round 4 GEMM subjects for ``gpu_round4.py``: the stream-K kernel and the cooperative kernel it extends.

``gemm_jobs()`` returns ``[(label, launch(a, b, c))]``; each launch writes ``c`` = ``a @ b`` with its
kernel's default config (CONFIGS[0], the same tile config in both):

* ``streamk_g132``: ``gemm_streamk`` on 132 CTAs, one per H200 SM; at 4096^3, 3 data-parallel waves
  of 128 x 256 tiles, then the last 116 tiles split into equal k-ranges over all 132 CTAs.
* ``ws_default``: ``gemm_ws`` as it launches by default (128 balanced CTAs x 4 tiles at 4096^3).

The stream-K workspace (fp32 partials + flags) is allocated on the first launch and reused, as
``matmul`` does; time after one warm-up launch.

    >>> from round4_gemm import gemm_jobs
    >>> [label for label, _ in gemm_jobs()]
    ['streamk_g132', 'ws_default']
"""
from __future__ import annotations


def gemm_jobs():
    """[(label, launch(a, b, c))]: stream-K at G=132, and the default cooperative kernel."""
    from tlx_workbench.kernels import gemm_streamk, gemm_ws

    def streamk(a, b, c):
        return gemm_streamk.launch(a, b, c, gemm_streamk.CONFIGS[0], num_sms=132)

    def ws_default(a, b, c):
        return gemm_ws.launch(a, b, c, gemm_ws.CONFIGS[0])

    return [("streamk_g132", streamk), ("ws_default", ws_default)]
