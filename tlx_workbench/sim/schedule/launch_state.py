"""The launch being simulated, for the builder ops that need it: the CTA running now, the LaunchRun, the
wrapped builtins and the semantic. One namespace at the bottom of the sim package, so that modules below
``tlx_ops`` (``threads``) read it without importing ``tlx_ops``."""
import types

# rec: the batch.Tape recording the running wave leader; replay: the batch replay running now, with the
# (file, line) and lane of the op it replays (what kernel_frame_line and the write log see)
_state = types.SimpleNamespace(cta=None, run=None, wrapped=None, semantic=None, rec=None, replay=None,
                               replay_where=None, replay_lane=None, batching=False,
                               hostmem=None, ranges=None)
