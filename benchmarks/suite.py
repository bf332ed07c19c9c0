"""The GPU experiments of the kernel work and the correctness suite, over one harness: an experiment is an
explorer run.

The GPU scripts that compared the library's kernels with the vendors on 2026-11-30 (deleted since; their figures stay
in ``RESULTS.md`` with the commit each ran at) were named configs of library kernels at given cells (shape, dtype,
causal or not), compared side by side with the vendor (cuBLAS / SDPA) and, in ``ws_switches``, a TLX tutorial loaded
unchanged. Here each is a :class:`Round` (one experiment) of :class:`Part` s, and running one
(``benchmarks/rounds.py NAME``) is:

1. the explorer over each part's configs (a :class:`tlx_workbench.explore.Space`) at its shapes,
   one sweep per dtype: static -> simulated -> measured (the last only where a GPU is);
2. on a GPU, the float64 check of every config at the experiment's check shapes (ragged ones
   included, outputs NaN-poisoned), the same checks ``benchmarks/validate.py`` runs: a config that
   fails, or that a gate stage dropped, is not timed;
3. on a GPU, interleaved rounds over every cell (do_bench median, L2 flushed, warmup 100 ms, rep
   300 ms, each round over all cells before the next; ``ws_switches`` finished one cell's rounds before
   the next), best round shown, every round listed.

A config is a flat dict of the kernel's constexprs; ``num_sms`` and ``balance`` (lower case) are
GEMM launch options (``persistent`` and ``validate`` varied the persistent CTA count), taken out of
the config before the kernel's own ``launch``.

"Ran at" in each experiment is the last commit to ``benchmarks/`` or ``tlx_workbench/kernels/`` at
or before the time its JSON's ``device`` line gives (the scripts ran in a copy of the working
tree, so that is the code they ran); its raw JSON is in ``benchmarks/results/``.

>>> import suite
>>> r = suite.ROUNDS["ws_switches"]()
>>> [p.name for p in r.parts], sorted(r.parts[0].configs)[:2]
(['gemm', 'attention D=128', 'attention D=64'], ['default', 'epi128'])
"""
from __future__ import annotations

import dataclasses
import math
import time

from _harness import (attn_flops, bench_ms, check_attn, check_gemm, check_row, load_tutorial, rel_error,
                      rounds_text, try_call)

LAUNCH_KEYS = ("num_sms", "balance")          # GEMM launch options a config may carry
VENDOR = {"gemm": "cublas", "attention": "sdpa"}
SANITY = {"gemm": 1e-2, "attention": 2e-2}    # a subject further than this from the vendor is not timed


@dataclasses.dataclass
class Part:
    """Named configs of one library kernel, each timed at every cell (``(shape, dtype)``) of the part.

    ``dtypes``: config name -> the dtypes it is timed (and checked) in, where not all of the
    part's (a switch for one dtype only). ``tutorials``: (label, dtypes) of TLX tutorial baselines
    (:data:`TUTORIALS`) timed beside the configs. ``rounds``: interleaved rounds of this part's
    cells (default the round's)."""
    name: str
    kernel: str                              # "gemm_ws", "gemm_streamk", "attention", ...
    configs: dict
    cells: tuple
    causal: bool = False
    dtypes: dict = dataclasses.field(default_factory=dict)
    tutorials: tuple = ()
    rounds: int | None = None

    @property
    def kind(self) -> str:
        return "attention" if self.kernel == "attention" else "gemm"

    def space(self):
        """The part's configs as the explorer's Space, in the round's order."""
        import tlx_workbench.explore as tx
        return tx.Space(list(self.configs.values()))

    def dtypes_of(self, name) -> tuple:
        own = tuple(dict.fromkeys(d for _, d in self.cells))
        return tuple(d for d in own if d in self.dtypes.get(name, own))

    def shapes(self, dtype) -> list:
        return [tuple(s) for s, d in self.cells if d == dtype]


@dataclasses.dataclass
class Round:
    """One GPU experiment: its parts, the check shapes per kind, and how it ran then.

    ``ran_as``: [(how it ran, commit, raw JSON)] of each call that produced the experiment's figures."""
    name: str
    title: str
    parts: list
    checks: dict
    ran_as: list
    rounds: int = 3
    cast_ref: bool = False                   # ws_switches rounded the float64 reference to the dtype first

    def configs(self) -> dict:
        """name -> config over every part (a name names one config throughout a round)."""
        out = {}
        for p in self.parts:
            out.update(p.configs)
        return out


# ---- problems: the library's, GEMMs with launch options -------------------------------------

def split_launch(cfg):
    """(kernel config, launch options) of a config that may carry ``num_sms`` / ``balance``."""
    return {k: v for k, v in cfg.items() if k not in LAUNCH_KEYS}, {k: cfg[k] for k in LAUNCH_KEYS if k in cfg}


def _gemm_launch(kernel):
    import importlib
    mod = importlib.import_module(f"tlx_workbench.kernels.{kernel}")

    def launch(a, b, cfg):
        import torch
        kcfg, opts = split_launch(cfg)
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        return mod.launch(a, b, c, kcfg, **opts)

    launch.__qualname__ = launch.__name__ = f"{kernel}_launch_with_options"
    return launch


def problem(kernel, dtype="float16", causal=False):
    """The explorer's Problem of library kernel ``kernel``; a GEMM's launch takes ``num_sms`` /
    ``balance`` from the config. Rebuilt in worker processes as ``suite:problem`` (``rounds.py``
    puts ``benchmarks/`` on their path)."""
    from tlx_workbench.explore import library
    p = library.problem(kernel, dtype=dtype, causal=causal)
    if kernel not in library.GEMMS:
        return p
    return dataclasses.replace(p, launch=_gemm_launch(kernel),
                               ref=("suite:problem", (kernel,), {"dtype": dtype, "causal": causal}))


def launch_into(kernel, cfg, causal=False):
    """The config's launch into a given output: GEMMs ``f(a, b, c)``, attention ``f(q, k, v, o, scale)``
    (what the checks poison and the timed rounds reuse, as the old scripts did)."""
    import importlib
    kcfg, opts = split_launch(cfg)
    mod = importlib.import_module(f"tlx_workbench.kernels.{kernel}")
    if kernel == "attention":
        return lambda q, k, v, o, scale: mod.launch(q, k, v, o, causal, scale, kcfg)
    return lambda a, b, c: mod.launch(a, b, c, kcfg, **opts)


# ---- tutorial baselines (loaded unchanged from the installed wheel) ---------------------------

#: the config ``c0`` of TLX's ``hopper_gemm_ws`` tutorial, as ws_switches launched it
TUT_GEMM_WS_C0 = dict(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=4, NUM_MMA_WARPS=8, NUM_MMA_GROUPS=2,
                      EPILOGUE_SUBTILE=True, NUM_CTAS=1, USE_WARP_BARRIER=False)


def _tut_gemm_ws_c0(mod, inputs):
    a, b = inputs
    return lambda: mod.matmul(a, b, config=TUT_GEMM_WS_C0)


#: label -> (tutorial file stem, make(module, inputs) -> a call)
TUTORIALS = {"tlx_tut_gemm_ws[c0]": ("hopper_gemm_ws", _tut_gemm_ws_c0)}


# ---- the experiments ----------------------------------------------------------------------------

FP = ("float16",)
BOTH = ("float16", "bfloat16")
G4096, G8192 = (4096, 4096, 4096), (8192, 8192, 8192)
A4096, A8192, A4096_64, A8192_64 = (4, 32, 4096, 128), (2, 32, 8192, 128), (4, 32, 4096, 64), (2, 32, 8192, 64)
GEMM_CHECK_FIRST = [(1000, 1032, 520), (64, 264, 40), (4104, 136, 1024)]
GEMM_CHECK_PERSISTENT = [(1000, 1032, 520), (4104, 136, 1024)]
GEMM_CHECK_LATER = [(1000, 1032, 520), (4104, 136, 1024), (4096, 4096, 4096)]
ATTN_CHECK_FIRST = [(1, 2, 200, 64), (2, 2, 1000, 128), (1, 4, 1024, 64), (1, 2, 130, 128)]
# ragged N, N < one tile, and several tiles per persistent CTA (2x16x2048: 8 each)
ATTN_CHECK_PERSISTENT = [(1, 2, 200, 64), (2, 2, 1000, 128), (1, 2, 130, 128), (1, 1, 77, 128), (2, 16, 2048, 128),
                 (1, 8, 1024, 64)]


#: the kernels' config builders as the experiments called them (``gemm_ws._config``, ``attention._config`` of those
#: commits), pinned here so that an experiment names the configs that ran even after a kernel drops a switch: a
#: switch appears in an attention config only when it is not at its default, as then
_ATTN_DEFAULTS = dict(LAZY=False, P_LATE=False, GROUPS=2, WARP1_LOADER=False, PIN_SOFTMAX=False, ZIGZAG=False)


def attention_config(BN, NUM_BUFS, BM=128, LOADER_REGS=24, MMA_REGS=240, PERSISTENT=False, Q_BUFS=1, **switches):
    """An attention config as the experiments wrote it.

    >>> attention_config(128, 2, PERSISTENT=True, Q_BUFS=2, ZIGZAG=True)["ZIGZAG"]
    True
    """
    unknown = set(switches) - set(_ATTN_DEFAULTS)
    if unknown:
        raise TypeError(f"no such switch in the experiments: {sorted(unknown)}")
    cfg = dict(BM=BM, BN=BN, NUM_BUFS=NUM_BUFS, LOADER_REGS=LOADER_REGS, MMA_REGS=MMA_REGS)
    if PERSISTENT:
        cfg.update(PERSISTENT=True, Q_BUFS=Q_BUFS)
    cfg.update({k: v for k, v in switches.items() if v != _ATTN_DEFAULTS[k]})
    return cfg


def gemm_ws_config(BM, BN, BK, STAGES, EPI_N, GROUP_M=8, EPI_BUFS=2, WARP_BARRIER=False, MMA_REGS=232,
                   LOADER_REGS=40, SPLIT_FULL=False, DOT_WAIT0=False):
    """A gemm_ws config as the experiments wrote it (``MMA_REGS``/``LOADER_REGS`` None: no setmaxnreg)."""
    return dict(BM=BM, BN=BN, BK=BK, STAGES=STAGES, EPI_N=EPI_N, GROUP_M=GROUP_M, EPI_BUFS=EPI_BUFS,
                WARP_BARRIER=WARP_BARRIER, MMA_REGS=MMA_REGS, LOADER_REGS=LOADER_REGS,
                SPLIT_FULL=SPLIT_FULL, DOT_WAIT0=DOT_WAIT0)


def cells(shapes, dtypes):
    return tuple((s, d) for s in shapes for d in dtypes)


def ws_switches():
    A, G = attention_config, gemm_ws_config
    gemm = {
        "default": G(128, 256, 64, 4, 64),      # the first default
        "epi128": G(128, 256, 64, 4, 128, EPI_BUFS=1),
        "split": G(128, 256, 64, 4, 64, SPLIT_FULL=True),
        "wait0": G(128, 256, 64, 4, 64, DOT_WAIT0=True),
        "noregs": G(128, 256, 64, 4, 64, MMA_REGS=None, LOADER_REGS=None),
        "split_w0": G(128, 256, 64, 4, 64, SPLIT_FULL=True, DOT_WAIT0=True),     # won: CONFIGS[0] since
        "tutlike": G(128, 256, 64, 4, 128, EPI_BUFS=1, SPLIT_FULL=True, DOT_WAIT0=True, MMA_REGS=None,
                     LOADER_REGS=None),
        "split_e128": G(128, 256, 64, 4, 128, EPI_BUFS=1, SPLIT_FULL=True),
    }
    # attention.CONFIGS as it was then (every config of ours; BM=256 suits D=64 only)
    attn = {"ours_cfg0": A(128, 2), "ours_cfg1": A(128, 3), "ours_cfg2": A(64, 3),
            "ours_cfg3": A(128, 2, LOADER_REGS=40, MMA_REGS=232)}
    return Round(
        "ws_switches", "gemm_ws switches vs cuBLAS and the tutorial; attention configs vs SDPA",
        [Part("gemm", "gemm_ws", gemm, cells([G4096, G8192], BOTH), tutorials=(("tlx_tut_gemm_ws[c0]", FP),)),
         Part("attention D=128", "attention", attn, cells([A4096, A8192], BOTH), rounds=2),
         Part("attention D=64", "attention", dict(attn, ours_cfg4=A(64, 2, BM=256)), cells([A4096_64], BOTH),
              rounds=2)],
        {"gemm": GEMM_CHECK_FIRST, "attention": ATTN_CHECK_FIRST},
        [("the GPU script of its commit", "c21212b", "ws_switches_h200_2026-11-30.json")], cast_ref=True)


def persistent():
    from tlx_workbench.kernels import gemm_ws
    A = attention_config
    attn = {"plain_bn128_b2": A(128, 2), "plain_bn128_b3": A(128, 3),
            "pers_bn128_b2_q2": A(128, 2, PERSISTENT=True, Q_BUFS=2),
            "pers_bn128_b2_q1": A(128, 2, PERSISTENT=True, Q_BUFS=1),
            "pers_bn64_b3_q2": A(64, 3, PERSISTENT=True, Q_BUFS=2)}
    ws = gemm_ws.CONFIGS[0]
    return Round(
        "persistent", "persistent attention; 132 vs 128 persistent GEMM CTAs",
        [Part("attention D=128", "attention", attn, cells([A4096, A8192], BOTH)),
         Part("attention causal", "attention", attn, cells([A4096], FP), causal=True),
         Part("attention D=64", "attention", attn, cells([A4096_64], FP)),
         Part("gemm", "gemm_ws", {"ws_132ctas": dict(ws, num_sms=132, balance=False),
                                  "ws_128ctas": dict(ws, num_sms=128, balance=False)}, cells([G4096], BOTH))],
        {"gemm": GEMM_CHECK_PERSISTENT, "attention": ATTN_CHECK_PERSISTENT},
        [("the GPU script of its commit", "2a99098",
          "persistent_h200_2026-11-30.json")])


def _gemm_parts(streamk=True):
    from tlx_workbench.kernels import gemm_streamk, gemm_ws
    parts = [Part("gemm", "gemm_ws", {"ws_default": gemm_ws.CONFIGS[0]}, cells([G4096, G8192], BOTH))]
    if streamk:     # the stream-K subject as first timed: 132 CTAs, one per H200 SM
        parts.append(Part("gemm stream-K", "gemm_streamk", {"streamk_g132": dict(gemm_streamk.CONFIGS[0], num_sms=132)},
                          cells([G4096, G8192], BOTH)))
    return parts


def _experiment(name, title, parts, command, commit, raw):
    return Round(name, title, parts, {"gemm": GEMM_CHECK_LATER, "attention": ATTN_CHECK_PERSISTENT},
                 [(command, commit, raw)])


def _noncausal(configs, d64_extra=None):
    """The non-causal cells of the attention switch experiments: D=128 at N=4096 and 8192 (fp16, bf16), D=64 at N=4096 (fp16)."""
    d64 = dict(configs, **(d64_extra or {}))
    return [Part("attention D=128", "attention", configs, cells([A4096, A8192], BOTH)),
            Part("attention D=64", "attention", d64, cells([A4096_64], FP))]


def _switches():
    A = attention_config
    P = dict(PERSISTENT=True, Q_BUFS=2)
    Z = dict(P, ZIGZAG=True)
    W = dict(P, WARP1_LOADER=True)
    G3 = dict(BM=192, GROUPS=3, MMA_REGS=160)
    PIN = dict(PIN_SOFTMAX=True, P_LATE=True)
    return A, P, Z, W, G3, PIN


def lazy_rescale():
    A, P, *_ = _switches()
    return _experiment("lazy_rescale", "LAZY rescale; stream-K GEMM",
               _noncausal({"pers": A(128, 2, **P), "pers_lazy": A(128, 2, LAZY=True, **P)})
               + [Part("attention causal", "attention", {"plain": A(128, 2), "plain_lazy": A(128, 2, LAZY=True)},
                       cells([A4096], FP), causal=True)] + _gemm_parts(),
               "the GPU script of its commit", "3f829d2", "lazy_rescale_h200_2026-11-30.json")


def late_p():
    A, P, *_ = _switches()
    return _experiment("late_p", "P_LATE (and with LAZY); stream-K GEMM",
               _noncausal({"pers": A(128, 2, **P), "pers_plate": A(128, 2, P_LATE=True, **P),
                           "pers_plate_lazy": A(128, 2, P_LATE=True, LAZY=True, **P)})
               + [Part("attention causal", "attention", {"plain": A(128, 2), "plain_plate": A(128, 2, P_LATE=True)},
                       cells([A4096], FP), causal=True)] + _gemm_parts(),
               "the GPU script of its commit", "2b29725", "late_p_h200_2026-11-30.json")


def three_groups():
    A, P, _, _, G3, *_ = _switches()
    return _experiment("three_groups", "D=64: three consumer groups",
               [Part("attention D=64", "attention",
                     {"pers": A(128, 2, **P), "g3_pers_bn128": A(128, 2, **P, **G3),
                      "g3_pers_bn64": A(64, 2, **P, **G3), "g3_plain_bn64": A(64, 3, **G3)},
                     cells([A4096_64], BOTH) + cells([A8192_64], FP)),
                Part("attention causal D=64", "attention", {"plain": A(128, 2), "g3_plain_bn64": A(64, 3, **G3)},
                     cells([A4096_64], BOTH), causal=True)],
               "the GPU script of its commit", "29bc49e", "three_groups_h200_2026-11-30.json")


def zigzag():
    A, _, Z, _, G3, *_ = _switches()
    zz = {"plain": A(128, 2), "pers_zigzag": A(128, 2, **Z)}
    return _experiment("zigzag", "causal: zig-zag pairs of query tiles",
               [Part("attention causal D=128", "attention", zz, cells([A4096], BOTH) + cells([A8192], FP),
                     causal=True),
                Part("attention causal D=64", "attention", dict(zz, g3_pers_zigzag=A(128, 2, **G3, **Z)),
                     cells([A4096_64], FP), causal=True)],
               "the GPU script of its commit", "35a2282", "zigzag_h200_2026-11-30.json")


def pinned_softmax():
    A, P, Z, W, G3, PIN = _switches()
    G3P = dict(G3, **P)
    return _experiment("pinned_softmax", "the softmax pinned under P V, the one-warp loader",
               _noncausal({"pers": A(128, 2, **P), "pers_plate": A(128, 2, P_LATE=True, **P),
                           "pers_pin": A(128, 2, PIN_SOFTMAX=True, **P), "pers_pin_plate": A(128, 2, **PIN, **P),
                           "pers_warp1": A(128, 2, **W), "pers_warp1_pin_plate": A(128, 2, **PIN, **W)},
                          d64_extra={"g3": A(128, 2, **G3P), "g3_pin_plate": A(128, 2, **PIN, **G3P)})
               + [Part("attention causal D=128", "attention",
                       {"pers_zigzag": A(128, 2, **Z), "pers_zigzag_pin_plate": A(128, 2, **PIN, **Z)},
                       cells([A4096], BOTH), causal=True),
                  Part("attention causal D=64", "attention",
                       {"pers_zigzag": A(128, 2, **Z), "pers_zigzag_pin_plate": A(128, 2, **PIN, **Z),
                        "g3_zigzag": A(128, 2, ZIGZAG=True, **G3P),
                        "g3_zigzag_pin_plate": A(128, 2, ZIGZAG=True, **PIN, **G3P)},
                       cells([A4096_64], FP), causal=True)],
               "the GPU script of its commit", "0b4fb36", "pinned_softmax_h200_2026-11-30.json")


def validate():
    from tlx_workbench.kernels import gemm_ws
    ws = gemm_ws.CONFIGS[0]
    return Round("validate", "gemm_ws at 8192^3, 128 balanced CTAs vs 132 vs cuBLAS",
                 [Part("gemm", "gemm_ws", {"ws_128ctas_balanced": ws, "ws_132ctas": dict(ws, num_sms=132, balance=False)},
                       cells([G8192], BOTH))],
                 {"gemm": [G8192], "attention": []},
                 [("the GPU script of its commit", "299929c", "validate_h200_2026-11-30.json")])


#: experiment name -> its builder (a builder imports the kernels, so listing the names costs nothing)
ROUNDS = {f.__name__: f for f in (ws_switches, persistent, lazy_rescale, late_p, three_groups, zigzag, pinned_softmax,
                                  validate)}


def get(name) -> Round:
    if name not in ROUNDS:
        raise SystemExit(f"no experiment named {name!r}; the experiments are: {', '.join(ROUNDS)}")
    return ROUNDS[name]()


def describe(rnd: Round) -> str:
    """What an experiment compares, as text: its parts, cells, configs (canonical JSON) and checks."""
    from tlx_workbench.explore.space import config_json
    lines = [f"{rnd.name}: {rnd.title}"]
    for cmd, commit, raw in rnd.ran_as:
        lines.append(f"  ran as `{cmd}`" + (f" at commit {commit}, raw {raw}" if commit else " (no raw file of its own)"))
    for p in rnd.parts:
        cs = ", ".join(f"{'x'.join(map(str, s))} {d}" for s, d in p.cells)
        lines.append(f"  part {p.name!r}: {p.kernel}{' causal' if p.causal else ''}, {len(p.space())} configs "
                     f"vs {VENDOR[p.kind]}{''.join(', ' + t for t, _ in p.tutorials)}; cells: {cs}")
        for n, c in p.configs.items():
            only = f" [{', '.join(p.dtypes[n])} only]" if n in p.dtypes else ""
            lines.append(f"    {n}: {config_json(c)}{only}")
    for kind, shapes in rnd.checks.items():
        if shapes:
            lines.append(f"  float64 checks ({kind}): {', '.join('x'.join(map(str, s)) for s in shapes)}")
    return "\n".join(lines)


# ---- the checks (float64, NaN-poisoned): the suite --------------------------------------------

GEMM_TOL = {"float16": 2e-3, "bfloat16": 1.2e-2}
ATTN_TOL = {"float16": 3e-3, "bfloat16": 2e-2}


def check_jobs(part: Part, shapes) -> list:
    """(config name, shape, dtype) of every check of ``part``: each config in each of its dtypes at
    each check shape of its kind (attention: those of a head dim the part times, with the part's
    masking)."""
    if part.kind == "attention":
        dims = {s[-1] for s, _ in part.cells}
        shapes = [s for s in shapes if s[-1] in dims]
    return [(n, tuple(s), d) for n in part.configs for d in part.dtypes_of(n) for s in shapes]


def run_checks(part: Part, shapes, log, cast_ref=False) -> tuple[list, set]:
    """Every check of :func:`check_jobs` on the GPU: rows (config, shape, dtype, rel_err, ok) and
    the set of (config name, dtype) that failed one."""
    import torch
    rows, bad = [], set()
    for name, shape, dname in check_jobs(part, shapes):
        dt = getattr(torch, dname)
        fn = launch_into(part.kernel, part.configs[name], part.causal)
        label = f"{part.kernel} {name} {shape}{' causal' if part.causal else ''} {dname}"
        if part.kind == "attention":
            err = check_attn(f"check {label}", fn, shape, part.causal, dt, log, sync=True)
            tol = ATTN_TOL[dname]
        else:
            err = check_gemm(f"check {label}", fn, *shape, dt, log, cast_ref=cast_ref)
            tol = GEMM_TOL[dname]
        if not check_row(rows, err, tol, f"{label}:", part=part.name, kernel=part.kernel, config=name,
                         dtype=dname, shape="x".join(map(str, shape)), causal=part.causal):
            bad.add((name, dname))
    return rows, bad


# ---- side by side: interleaved rounds over every cell -------------------------------------------

def cell_label(kind, shape, dtype, causal):
    return f"{'x'.join(map(str, shape))}{' causal' if causal else ''} {dtype}"


def _inputs(kind, shape, dtype, device="cuda"):
    import torch
    dt = getattr(torch, dtype)
    if kind == "gemm":
        M, N, K = shape
        return torch.randn(M, K, device=device, dtype=dt), torch.randn(K, N, device=device, dtype=dt)
    return tuple(torch.randn(shape, device=device, dtype=dt) for _ in range(3))


def _flops(kind, shape, causal):
    if kind == "gemm":
        M, N, K = shape
        return 2.0 * M * N * K
    return attn_flops(shape, causal)


def _vendor_call(kind, x, causal):
    import torch
    if kind == "gemm":
        a, b = x
        return lambda: torch.matmul(a, b)
    q, k, v = x
    scale = 1.0 / math.sqrt(q.shape[-1])
    return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def _config_call(kind, kernel, cfg, x, causal):
    """One config's call on the cell's inputs, into an output allocated once (as the old rounds timed)."""
    import torch
    fn = launch_into(kernel, cfg, causal)
    if kind == "gemm":
        a, b = x
        c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        return lambda: fn(a, b, c)
    q, k, v = x
    o, scale = torch.empty_like(q), 1.0 / math.sqrt(q.shape[-1])
    return lambda: fn(q, k, v, o, scale)


def side_by_side_groups(rnd: Round, keep, log, parts=None, device="cuda"):
    """[(kind, label, flops, {subject: fn}, vendor, rounds)] per cell (parts of one kind, shape,
    dtype and masking share a cell): the vendor first, then every config ``keep(part, name,
    dtype)`` allows, then the part's tutorials. Inputs are drawn once per cell."""
    import torch
    by = {}
    for p in parts or rnd.parts:
        for shape, dname in p.cells:
            by.setdefault((p.kind, tuple(shape), dname, p.causal), []).append(p)
    groups = []
    torch.manual_seed(0)
    for (kind, shape, dname, causal), ps in by.items():
        x = _inputs(kind, shape, dname, device)
        subj = {VENDOR[kind]: _vendor_call(kind, x, causal)}
        for p in ps:
            for name, cfg in p.configs.items():
                if dname in p.dtypes_of(name) and keep(p, name, dname) and name not in subj:
                    subj[name] = _config_call(kind, p.kernel, cfg, x, causal)
            for label, dts in p.tutorials:
                if dname in dts and label not in subj:
                    stem, make = TUTORIALS[label]
                    mod = try_call(f"import {stem}", lambda: load_tutorial(stem), log)
                    if mod is not None:
                        subj[label] = make(mod, x)
        n = max(p.rounds or rnd.rounds for p in ps)
        groups.append((kind, cell_label(kind, shape, dname, causal), _flops(kind, shape, causal), subj,
                       VENDOR[kind], n))
    return groups


def timed(groups, log, deadline_s=None):
    """Interleaved rounds over every cell and subject (do_bench median each; a round is started only
    before ``deadline_s``). A subject whose untimed run differs from the vendor's output by more than
    :data:`SANITY` is not timed. Returns (rows, rounds run): one row per timed subject with its best
    round's ms and TFLOP/s, the speed relative to the vendor and every round's TFLOP/s."""
    import triton
    from tlx_workbench.kernels._common import torch_alloc
    t0 = time.time()
    times = {(g[1], s): [] for g in groups for s in g[3]}
    errs, ok = {}, {}
    for kind, label, _, subj, base, _ in groups:     # one untimed run each: sanity vs the vendor output
        ref = subj[base]()
        for s, fn in subj.items():
            out = try_call(f"run {s} {label}", fn, log)
            triton.set_allocator(torch_alloc)        # a tutorial launcher may have set its own
            errs[(label, s)] = err = float("inf") if out is None else rel_error(out, ref)
            ok[(label, s)] = err <= SANITY[kind]
            if not ok[(label, s)]:
                print(f"  {s} {label}: differs from {base} by {err:.3g}, not timed", flush=True)
    done = 0
    for r in range(max((g[5] for g in groups), default=0)):
        if r > 0 and deadline_s is not None and time.time() - t0 > deadline_s:
            print(f"deadline: stopping after {r} round(s)", flush=True)
            break
        for _, label, _, subj, _, n in groups:
            if r >= n:
                continue
            for s, fn in subj.items():
                if ok[(label, s)]:
                    ms = try_call(f"bench {s} {label}", lambda: bench_ms(fn), log)
                    if ms is not None:
                        times[(label, s)].append(ms)
        done += 1
        print(f"round {r + 1} done ({time.time() - t0:.0f} s)", flush=True)
    rows = []
    for kind, label, fl, subj, base, _ in groups:
        bt = times[(label, base)]
        bms = min(bt) if bt else float("nan")
        for s in subj:
            ts = times[(label, s)]
            if ts:
                ms = min(ts)
                rows.append(dict(kind=kind, cell=label, subject=s, ms=ms, tflops=fl / ms * 1e-9, vs_vendor=bms / ms,
                                 rounds=rounds_text(fl, ts), err_vs_vendor=errs[(label, s)]))
    return rows, done
