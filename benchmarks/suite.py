"""The GPU rounds and the correctness suite over one harness: a round is an explorer run.

What the per-round scripts of rounds 2-4 (``gpu_round2.py``, ``gpu_round3.py``,
``gpu_round4.py --set ...``, ``round4_gemm.py``, ``gpu_validate.py``; gone since, their figures
stay in ``RESULTS.md`` with the commit each ran at) really were: named configs of library kernels
at given cells (shape, dtype, causal or not), compared side by side with the vendor (cuBLAS /
SDPA) and, in round 2, a TLX tutorial loaded unchanged. Here each is a :class:`Round` of
:class:`Part` s, and running one (``benchmarks/rounds.py ROUND``) is:

1. the explorer over each part's configs (a :class:`tlx_workbench.explore.Space`) at its shapes,
   one sweep per dtype: static -> simulated -> measured (the last only where a GPU is);
2. on a GPU, the float64 check of every config at the round's check shapes (ragged ones
   included, outputs NaN-poisoned), the same checks ``benchmarks/validate.py`` runs: a config that
   fails, or that a gate stage dropped, is not timed;
3. on a GPU, interleaved rounds over every cell (do_bench median, L2 flushed, warmup 100 ms, rep
   300 ms, each round over all cells before the next, as rounds 3 and 4 did; round 2 finished one
   cell's rounds before the next), best round shown, every round listed.

A config is a flat dict of the kernel's constexprs; ``num_sms`` and ``balance`` (lower case) are
GEMM launch options (rounds 3-4 and the final check varied the persistent CTA count), taken out of
the config before the kernel's own ``launch``.

"Ran at" in each round is the last commit to ``benchmarks/`` or ``tlx_workbench/kernels/`` at
or before the time its JSON's ``device`` line gives (the scripts ran in a copy of the working
tree, so that is the code they ran).

>>> import suite
>>> r = suite.ROUNDS["round2"]()
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
    part's (``EX2_F16`` is fp16 only). ``tutorials``: (label, dtypes) of TLX tutorial baselines
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
    """One old round: its parts, the check shapes per kind, and how it ran then.

    ``ran_as``: [(old command, commit, raw JSON)] of each call that produced the round's figures."""
    name: str
    title: str
    parts: list
    checks: dict
    ran_as: list
    rounds: int = 3
    cast_ref: bool = False                   # round 2 rounded the float64 reference to the dtype first

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

#: the config ``c0`` of TLX's ``hopper_gemm_ws`` tutorial, as round 2 launched it
TUT_GEMM_WS_C0 = dict(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=4, NUM_MMA_WARPS=8, NUM_MMA_GROUPS=2,
                      EPILOGUE_SUBTILE=True, NUM_CTAS=1, USE_WARP_BARRIER=False)


def _tut_gemm_ws_c0(mod, inputs):
    a, b = inputs
    return lambda: mod.matmul(a, b, config=TUT_GEMM_WS_C0)


#: label -> (tutorial file stem, make(module, inputs) -> a call)
TUTORIALS = {"tlx_tut_gemm_ws[c0]": ("hopper_gemm_ws", _tut_gemm_ws_c0)}


# ---- the rounds -------------------------------------------------------------------------------

FP = ("float16",)
BOTH = ("float16", "bfloat16")
G4096, G8192 = (4096, 4096, 4096), (8192, 8192, 8192)
A4096, A8192, A4096_64, A8192_64 = (4, 32, 4096, 128), (2, 32, 8192, 128), (4, 32, 4096, 64), (2, 32, 8192, 64)
GEMM_CHECK_R2 = [(1000, 1032, 520), (64, 264, 40), (4104, 136, 1024)]
GEMM_CHECK_R3 = [(1000, 1032, 520), (4104, 136, 1024)]
GEMM_CHECK_R4 = [(1000, 1032, 520), (4104, 136, 1024), (4096, 4096, 4096)]
ATTN_CHECK_R2 = [(1, 2, 200, 64), (2, 2, 1000, 128), (1, 4, 1024, 64), (1, 2, 130, 128)]
# ragged N, N < one tile, and several tiles per persistent CTA (2x16x2048: 8 each)
ATTN_CHECK_R3 = [(1, 2, 200, 64), (2, 2, 1000, 128), (1, 2, 130, 128), (1, 1, 77, 128), (2, 16, 2048, 128),
                 (1, 8, 1024, 64)]


def cells(shapes, dtypes):
    return tuple((s, d) for s in shapes for d in dtypes)


def round2():
    from tlx_workbench.kernels.attention import _config as A
    from tlx_workbench.kernels.gemm_ws import _config as G
    gemm = {
        "default": G(128, 256, 64, 4, 64),      # round 1's default
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
        "round2", "round 2: gemm_ws switches vs cuBLAS and the tutorial; attention configs vs SDPA",
        [Part("gemm", "gemm_ws", gemm, cells([G4096, G8192], BOTH), tutorials=(("tlx_tut_gemm_ws[c0]", FP),)),
         Part("attention D=128", "attention", attn, cells([A4096, A8192], BOTH), rounds=2),
         Part("attention D=64", "attention", dict(attn, ours_cfg4=A(64, 2, BM=256)), cells([A4096_64], BOTH),
              rounds=2)],
        {"gemm": GEMM_CHECK_R2, "attention": ATTN_CHECK_R2},
        [("source .gpu/env.sh && python3 benchmarks/gpu_round2.py", "c21212b", "round2.json")], cast_ref=True)


def round3():
    from tlx_workbench.kernels import gemm_ws
    from tlx_workbench.kernels.attention import _config as A
    attn = {"plain_bn128_b2": A(128, 2), "plain_bn128_b3": A(128, 3),
            "pers_bn128_b2_q2": A(128, 2, PERSISTENT=True, Q_BUFS=2),
            "pers_bn128_b2_q1": A(128, 2, PERSISTENT=True, Q_BUFS=1),
            "pers_bn64_b3_q2": A(64, 3, PERSISTENT=True, Q_BUFS=2)}
    ws = gemm_ws.CONFIGS[0]
    return Round(
        "round3", "round 3: persistent attention; 132 vs 128 persistent GEMM CTAs",
        [Part("attention D=128", "attention", attn, cells([A4096, A8192], BOTH)),
         Part("attention causal", "attention", attn, cells([A4096], FP), causal=True),
         Part("attention D=64", "attention", attn, cells([A4096_64], FP)),
         Part("gemm", "gemm_ws", {"ws_132ctas": dict(ws, num_sms=132, balance=False),
                                  "ws_128ctas": dict(ws, num_sms=128, balance=False)}, cells([G4096], BOTH))],
        {"gemm": GEMM_CHECK_R3, "attention": ATTN_CHECK_R3},
        [("source .gpu/env.sh && ROUND3_DEADLINE_S=160 python3 benchmarks/gpu_round3.py", "2a99098",
          "round3.json")])


def _gemm_parts(streamk=True):
    from tlx_workbench.kernels import gemm_streamk, gemm_ws
    parts = [Part("gemm", "gemm_ws", {"ws_default": gemm_ws.CONFIGS[0]}, cells([G4096, G8192], BOTH))]
    if streamk:     # round4_gemm.py's stream-K subject: 132 CTAs, one per H200 SM
        parts.append(Part("gemm stream-K", "gemm_streamk", {"streamk_g132": dict(gemm_streamk.CONFIGS[0], num_sms=132)},
                          cells([G4096, G8192], BOTH)))
    return parts


def _r4(name, title, parts, command, commit, raw):
    return Round(name, title, parts, {"gemm": GEMM_CHECK_R4, "attention": ATTN_CHECK_R3},
                 [(f"source .gpu/env.sh && {command}", commit, raw)])


def _noncausal(configs, d64_extra=None, dtypes=None):
    """The non-causal cells of round 4: D=128 at N=4096 and 8192 (fp16, bf16), D=64 at N=4096 (fp16)."""
    d64 = dict(configs, **(d64_extra or {}))
    return [Part("attention D=128", "attention", configs, cells([A4096, A8192], BOTH), dtypes=dtypes or {}),
            Part("attention D=64", "attention", d64, cells([A4096_64], FP), dtypes=dtypes or {})]


def _switches():
    from tlx_workbench.kernels.attention import _config as A
    P = dict(PERSISTENT=True, Q_BUFS=2)
    Z = dict(P, ZIGZAG=True)
    W = dict(P, WARP1_LOADER=True)
    G3 = dict(BM=192, GROUPS=3, MMA_REGS=160)
    PIN = dict(PIN_SOFTMAX=True, P_LATE=True)
    QR = dict(Q_REGS=True, P_LATE=True)
    return A, P, Z, W, G3, PIN, QR


def round4():
    A, P, *_ = _switches()
    return _r4("round4", "round 4, call A: P_EARLY / WARP_BAR / EX2_F16; the GEMM default vs cuBLAS",
               _noncausal({"pers": A(128, 2, **P), "pers_pe": A(128, 2, P_EARLY=True, **P),
                           "pers_wb": A(128, 2, WARP_BAR=True, **P),
                           "pers_pe_wb": A(128, 2, P_EARLY=True, WARP_BAR=True, **P),
                           "pers_ex2h_wb": A(128, 2, EX2_F16=True, WARP_BAR=True, **P)},
                          dtypes={"pers_ex2h_wb": FP})
               + [Part("attention causal", "attention", {"plain": A(128, 2), "plain_pe_wb": A(128, 2, P_EARLY=True,
                                                                                              WARP_BAR=True)},
                       cells([A4096], FP), causal=True)]
               + _gemm_parts(streamk=False),
               "python3 benchmarks/gpu_round4.py", "a665bcf", "round4.json")


def round4_lazy():
    A, P, *_ = _switches()
    return _r4("round4_lazy", "round 4, call B: LAZY rescale; stream-K GEMM",
               _noncausal({"pers": A(128, 2, **P), "pers_lazy": A(128, 2, LAZY=True, **P)})
               + [Part("attention causal", "attention", {"plain": A(128, 2), "plain_lazy": A(128, 2, LAZY=True)},
                       cells([A4096], FP), causal=True)] + _gemm_parts(),
               "python3 benchmarks/gpu_round4.py --set lazy", "3f829d2", "round4_lazy.json")


def round4_plate():
    A, P, *_ = _switches()
    return _r4("round4_plate", "round 4, call C: P_LATE (and with LAZY); stream-K GEMM",
               _noncausal({"pers": A(128, 2, **P), "pers_plate": A(128, 2, P_LATE=True, **P),
                           "pers_plate_lazy": A(128, 2, P_LATE=True, LAZY=True, **P)})
               + [Part("attention causal", "attention", {"plain": A(128, 2), "plain_plate": A(128, 2, P_LATE=True)},
                       cells([A4096], FP), causal=True)] + _gemm_parts(),
               "python3 benchmarks/gpu_round4.py --set plate", "2b29725", "round4_plate.json")


def round4_g3():
    A, P, _, _, G3, *_ = _switches()
    return _r4("round4_g3", "round 4, D=64: three consumer groups",
               [Part("attention D=64", "attention",
                     {"pers": A(128, 2, **P), "g3_pers_bn128": A(128, 2, **P, **G3),
                      "g3_pers_bn64": A(64, 2, **P, **G3), "g3_plain_bn64": A(64, 3, **G3)},
                     cells([A4096_64], BOTH) + cells([A8192_64], FP)),
                Part("attention causal D=64", "attention", {"plain": A(128, 2), "g3_plain_bn64": A(64, 3, **G3)},
                     cells([A4096_64], BOTH), causal=True)],
               "python3 benchmarks/gpu_round4.py --set g3", "29bc49e", "round4_g3.json")


def round4_zigzag():
    A, _, Z, _, G3, *_ = _switches()
    zz = {"plain": A(128, 2), "pers_zigzag": A(128, 2, **Z)}
    return _r4("round4_zigzag", "round 4, causal: zig-zag pairs of query tiles",
               [Part("attention causal D=128", "attention", zz, cells([A4096], BOTH) + cells([A8192], FP),
                     causal=True),
                Part("attention causal D=64", "attention", dict(zz, g3_pers_zigzag=A(128, 2, **G3, **Z)),
                     cells([A4096_64], FP), causal=True)],
               "ROUND4_DEADLINE_S=90 python3 benchmarks/gpu_round4.py --set zigzag", "35a2282", "round4_zigzag.json")


def round4_warp1():
    A, P, Z, W, *_ = _switches()
    return _r4("round4_warp1", "round 5: the one-warp loader (its variants were timed in round4_pin)",
               [Part("attention D=128", "attention", {"pers": A(128, 2, **P), "pers_warp1": A(128, 2, **W)},
                     cells([A4096, A8192], BOTH)),
                Part("attention causal", "attention", {"pers_zigzag": A(128, 2, **Z),
                                                       "pers_zigzag_warp1": A(128, 2, ZIGZAG=True, **W)},
                     cells([A4096], FP), causal=True)],
               "python3 benchmarks/gpu_round4.py --set warp1", None, None)


def round4_pin():
    A, P, Z, W, G3, PIN, _ = _switches()
    G3P = dict(G3, **P)
    return _r4("round4_pin", "round 5: the softmax pinned under P V, the one-warp loader",
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
               "python3 benchmarks/gpu_round4.py --set pin", "0b4fb36", "round4_pin.json")


def round4_qregs():
    A, P, Z, _, G3, PIN, QR = _switches()
    G3P = dict(G3, **P)
    zz = {"pers_zigzag": A(128, 2, **Z), "pers_zigzag_qregs": A(128, 2, **QR, **Z),
          "pers_zigzag_pin": A(128, 2, **PIN, **Z), "pers_zigzag_qregs_pin": A(128, 2, PIN_SOFTMAX=True, **QR, **Z)}
    return _r4("round4_qregs", "round 5: Q in registers",
               _noncausal({"pers": A(128, 2, **P), "pers_plate": A(128, 2, P_LATE=True, **P),
                           "pers_qregs": A(128, 2, **QR, **P), "pers_qregs_pin": A(128, 2, PIN_SOFTMAX=True, **QR, **P)},
                          d64_extra={"g3": A(128, 2, **G3P)})
               + [Part("attention causal D=128", "attention", zz, cells([A4096], BOTH), causal=True),
                  Part("attention causal D=64", "attention", dict(zz, g3_zigzag=A(128, 2, ZIGZAG=True, **G3P)),
                       cells([A4096_64], BOTH), causal=True)],
               "python3 benchmarks/gpu_round4.py --set qregs", "ee4e936", "round4_qregs.json")


def validate():
    from tlx_workbench.kernels import gemm_ws
    ws = gemm_ws.CONFIGS[0]
    return Round("validate", "final check: gemm_ws at 8192^3, 128 balanced CTAs vs 132 vs cuBLAS",
                 [Part("gemm", "gemm_ws", {"ws_128ctas_balanced": ws, "ws_132ctas": dict(ws, num_sms=132, balance=False)},
                       cells([G8192], BOTH))],
                 {"gemm": [G8192], "attention": []},
                 [("source .gpu/env.sh && python3 benchmarks/gpu_validate.py", "299929c", "validate.json")])


#: round name -> its builder (a builder imports the kernels, so listing the names costs nothing)
ROUNDS = {f.__name__: f for f in (round2, round3, round4, round4_lazy, round4_plate, round4_g3, round4_zigzag,
                                  round4_warp1, round4_pin, round4_qregs, validate)}


def get(name) -> Round:
    if name not in ROUNDS:
        raise SystemExit(f"no round named {name!r}; the rounds are: {', '.join(ROUNDS)}")
    return ROUNDS[name]()


def describe(rnd: Round) -> str:
    """What a round compares, as text: its parts, cells, configs (canonical JSON) and checks."""
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
