"""Search strategies: which configs the measured stage measures, in which order.

A strategy is a generator ``strategy(candidates, measured)``: ``candidates`` is a list of
(config_id, predicted_us or None) for the configs that passed the gated stages, ``measured``
a dict config_id -> measured µs that the driver fills as results come in. It yields batches
(lists of config ids) to measure; the driver measures a batch, records it, and resumes the
strategy. Each is a few lines, one signature, independent of the store and the executors.

>>> cands = [("a", 3.0), ("b", 1.0), ("c", 2.0), ("d", None)]
>>> list(exhaustive(cands, {}))
[['a', 'b', 'c', 'd']]
>>> measured = {}
>>> g = model_guided(cands, measured, k=1)
>>> batch = next(g); measured.update(b=1.1); batch
['b']
>>> batch = next(g); measured.update(c=2.2); batch
['c']
>>> list(g)          # c did not beat b: the best stopped moving
[]
"""
from __future__ import annotations

import random as _random


def exhaustive(candidates, measured):
    """Every candidate, in space order."""
    yield [cid for cid, _ in candidates]


def random(candidates, measured, *, budget: int | None = None, seed: int = 0):
    """``budget`` candidates (default all) in a random order, one at a time."""
    order = [cid for cid, _ in candidates]
    _random.Random(seed).shuffle(order)
    for cid in order[:budget if budget is not None else len(order)]:
        yield [cid]


def model_guided(candidates, measured, *, k: int = 4, budget: int | None = None):
    """Rank by simulated time (unpredicted configs last), measure the top ``k``, then widen by
    ``k`` at a time until a batch finds nothing faster than the best so far."""
    ranked = sorted(candidates, key=lambda c: (c[1] is None, c[1] if c[1] is not None else 0.0))
    order = [cid for cid, _ in ranked]
    limit = len(order) if budget is None else min(budget, len(order))
    best = None
    for start in range(0, limit, k):
        batch = order[start:min(start + k, limit)]
        yield batch
        got = [measured[c] for c in batch if measured.get(c) is not None]
        if best is not None and (not got or min(got) >= best):
            return
        if got:
            best = min(got) if best is None else min(best, min(got))


STRATEGIES = {"exhaustive": exhaustive, "random": random, "model": model_guided}


def rank_score(sim, static) -> float | None:
    """What model-guided search ranks a config by, from its simulated and static rows: the simulated
    time; a config that ptxas flags (wgmma serialized, spills) ranks after every config without (the
    cost model does not see register pressure). None without a prediction."""
    pred = sim.metrics.get("predicted_us") if sim is not None and sim.ok else None
    if pred is None:
        return None
    from .stages import SERIALIZING
    adv = static.metrics.get("advisories") or [] if static is not None else []
    flagged = any(a.get("code") in SERIALIZING or a.get("code") == "spills" for a in adv)
    return pred + (1e9 if flagged else 0.0)


def strategy(name, **options):
    """The strategy called ``name`` ("exhaustive", "random", "model") with its options bound."""
    import functools
    from ..errors import TLXWorkbenchError
    if callable(name):
        return functools.partial(name, **options) if options else name
    if name not in STRATEGIES:
        raise TLXWorkbenchError(f"unknown search {name!r}", hint=f"use one of {sorted(STRATEGIES)}")
    return functools.partial(STRATEGIES[name], **options)


def replay(name, candidates, times: dict, **options) -> list[str]:
    """The configs strategy ``name`` would measure, in order, if each measurement gave
    ``times[config_id]`` (a stored exhaustive sweep): no GPU needed."""
    measured: dict = {}
    order: list[str] = []
    for batch in strategy(name, **options)(candidates, measured):
        for cid in batch:
            order.append(cid)
            measured[cid] = times.get(cid)
    return order
