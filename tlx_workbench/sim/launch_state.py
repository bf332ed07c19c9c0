"""The launch being simulated, for the builder ops that need it: the CTA running now, the LaunchRun, the
wrapped builtins and the semantic. One namespace at the bottom of the sim package, so that modules below
``tlx_ops`` (``threads``) read it without importing ``tlx_ops``."""
import types

_state = types.SimpleNamespace(cta=None, run=None, wrapped=None, semantic=None)
