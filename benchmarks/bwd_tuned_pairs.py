"""What the backward's goal runs say beyond their medians (CPU, reads stores): for each timed cell of
``attention_bwd_variants_h200.py --tuned`` stores, which config the tuner picked; where it picked the default's own
config, the "default" and "tuned" rows are one kernel timed as two subjects in the same interleaved rounds, so their
ratio is the timing's own spread; and, from the tuner's one-shot timings, how often each config was fastest.

    python benchmarks/bwd_tuned_pairs.py benchmarks/kernels_h200/bwd_split_tail_r11/goal_{B,C}/attention_bwd_variants_h200.json
"""
import collections
import json
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def _name(cfg, named):
    key = json.dumps(cfg, sort_keys=True)
    if key in named:
        return named[key]
    with_tail = json.dumps(dict(cfg, SPLIT_TAIL=True), sort_keys=True)    # a causal cell's form of a SPLIT_TAIL config
    return named.get(with_tail, key)


def main(paths):
    from attention_bwd_variants_h200 import configs          # the names the goal runs were made with
    named = {json.dumps(c, sort_keys=True): n for n, c in configs().items()}
    same, wins = [], collections.Counter()
    lines = ["| store | cell | run | tuner's pick | default ms | tuned ms | default / tuned |", "|---|---|---|---|---|---|---|"]
    for path in paths:
        rows = json.loads(pathlib.Path(path).read_text())["time"]
        cells = collections.defaultdict(dict)
        for r in rows:
            if r.get("ms"):
                cells[(tuple(r["shape"]), r["causal"], r["run"])][r["kernel"]] = r
        for (shape, causal, run), by in sorted(cells.items()):
            if "default" not in by or "tuned" not in by:
                continue
            d, t = by["default"], by["tuned"]
            dcfg = {k: v for k, v in d["cfg"].items() if not (causal and k == "SPLIT_TAIL")}
            pick = _name(t["cfg"], named)
            if t["cfg"] == dcfg:
                same.append(d["ms"] / t["ms"])
                pick = pick if pick == "default" else f"{pick} (the default)"
            cell = f"{shape[0]}x{shape[1]}x{shape[2]} {'causal' if causal else 'non-causal'}"
            lines.append(f"| {pathlib.Path(path).parent.name} | {cell} | {run + 1} | {pick} | {d['ms']:.3f} | "
                         f"{t['ms']:.3f} | {d['ms'] / t['ms']:.3f} |")
            fastest = min(t.get("tuned_ms") or [], key=lambda cm: cm[1], default=None)
            if fastest:
                wins[(causal, _name(fastest[0], named))] += 1
    print("\n".join(lines))
    if same:
        dev = [abs(x - 1) for x in same]
        print(f"\none kernel as two subjects: {len(same)} cells, |default / tuned - 1| median {statistics.median(dev):.2%},"
              f" max {max(dev):.2%}")
    print("fastest in the tuner's one-shot timings:", ", ".join(
        f"{'causal' if c else 'non-causal'} {n}: {k}" for (c, n), k in sorted(wins.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
