"""What each TLX and ``tl`` operation means on the CPU: the builder the TLX builtins run on while simulating
(``tlx_ops``) and the op families it hands to (barriers, memory, MMA, clusters, bulk copies, thread values)."""
