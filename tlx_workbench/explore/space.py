"""The space of an exploration: the configs to try, each a plain dict.

A space is a list of ``triton.Config`` (an autotuned kernel's own ``configs``), a list of
dicts, or a dict of knob -> values (their product) with constraint predicates that keep
only the configs a kernel can take. A config is a flat dict: constexprs and launch
options (``num_warps``, ``num_stages``, ...) side by side, as ``triton.Config.all_kwargs()``
gives them; its identity is the canonical JSON of that dict.

>>> s = Space({"BM": [64, 128], "STAGES": [2, 3, 4]}, constraints=[lambda c: c["BM"] * c["STAGES"] <= 384])
>>> len(s), s[0]
(5, {'BM': 64, 'STAGES': 2})
"""
from __future__ import annotations

import hashlib
import itertools
import json
import random
from typing import Callable, Iterable, Sequence

from ..errors import TLXWorkbenchError


def _plain(v):
    """A knob value as JSON can hold it (None, bools, numbers and strings stay; the rest by name)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return getattr(v, "__name__", None) or str(v)


def config_json(cfg: dict) -> str:
    """The canonical text of a config: sorted keys, no spaces. Two equal configs have one text."""
    return json.dumps({k: _plain(v) for k, v in cfg.items()}, sort_keys=True, separators=(",", ":"))


def config_id(cfg: dict) -> str:
    """A short stable name of a config (12 hex digits of its canonical text's SHA-256).

    >>> config_id({"BM": 128, "BN": 256}) == config_id({"BN": 256, "BM": 128})
    True
    """
    return hashlib.sha256(config_json(cfg).encode()).hexdigest()[:12]


def from_triton_config(c) -> dict:
    """A ``triton.Config`` as one flat dict (its kwargs and the launch options it sets)."""
    return dict(c.all_kwargs())


class Space:
    """The configs an exploration tries, in a fixed order (the first is the default).

    ``configs``: a list of dicts or ``triton.Config``s, or a dict knob -> list of values
    (every combination). ``constraints``: predicates ``cfg -> bool``; a config for which one
    is False is not part of the space (``excluded`` counts them, per predicate).
    ``fixed``: values added to every config of ``configs``. ``seeds``: extra configs appended
    exactly as given (e.g. a config known to deadlock, to see the explorer drop it): neither
    ``fixed`` nor the constraints touch them.
    """

    def __init__(self, configs, *, constraints: Sequence[Callable[[dict], bool]] = (), fixed: dict | None = None,
                 seeds: Iterable = ()):
        if isinstance(configs, dict):
            knobs = {k: list(v) if isinstance(v, (list, tuple, range)) else [v] for k, v in configs.items()}
            empty = [k for k, v in knobs.items() if not v]
            if empty:
                raise TLXWorkbenchError(f"knob {empty[0]!r} of the space has no values",
                                        hint="give every knob at least one value")
            raw = [dict(zip(knobs, vals)) for vals in itertools.product(*knobs.values())]
            self.knobs = knobs
        else:
            raw = [from_triton_config(c) if hasattr(c, "all_kwargs") else dict(c) for c in configs]
            self.knobs = _knobs_of(raw)
        fixed = dict(fixed or {})
        self.excluded: dict[str, int] = {}
        out, seen = [], set()
        for cfg in raw:
            cfg = {**cfg, **fixed}
            failed = next((p for p in constraints if not p(cfg)), None)
            if failed is not None:
                name = getattr(failed, "__name__", "constraint")
                self.excluded[name] = self.excluded.get(name, 0) + 1
                continue
            key = config_json(cfg)
            if key not in seen:
                seen.add(key)
                out.append(cfg)
        for s in seeds:
            cfg = from_triton_config(s) if hasattr(s, "all_kwargs") else dict(s)
            if config_json(cfg) not in seen:
                seen.add(config_json(cfg))
                out.append(cfg)
        if not out:
            raise TLXWorkbenchError("the space is empty: every config was excluded by a constraint",
                                    hint=f"excluded per constraint: {self.excluded}; loosen a constraint")
        self.configs = out

    @classmethod
    def of(cls, space) -> "Space":
        """``space`` as a Space (a Space, a list of configs, a dict of knobs, or an autotuned kernel)."""
        if isinstance(space, Space):
            return space
        if hasattr(space, "configs") and hasattr(space, "fn") and not isinstance(space, (dict, list, tuple)):
            return cls(space.configs)
        return cls(space)

    def __len__(self):
        return len(self.configs)

    def __iter__(self):
        return iter(self.configs)

    def __getitem__(self, i):
        return self.configs[i]

    def sample(self, n: int, seed: int = 0) -> list[dict]:
        """``n`` configs drawn without replacement (all of them when ``n >= len``), in space order."""
        idx = sorted(random.Random(seed).sample(range(len(self)), min(n, len(self))))
        return [self.configs[i] for i in idx]

    def __repr__(self):
        knobs = ", ".join(f"{k}={v}" for k, v in self.knobs.items())
        return f"Space({len(self)} configs; {knobs})"


def _knobs_of(configs: list[dict]) -> dict:
    """The values each knob takes over a list of configs, in first-seen order."""
    knobs: dict = {}
    for c in configs:
        for k, v in c.items():
            vals = knobs.setdefault(k, [])
            if v not in vals:
                vals.append(v)
    return knobs
