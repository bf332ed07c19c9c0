#!/bin/bash
# One H200 call (eleventh session): the backward's SPLIT_TAIL in its two-launch form (the plain kernel on the first
# heads, the last heads' blocks in parts) against the default: the probe (where the time goes), then the check vs
# float64 and three runs of the non-causal D=128 cells (run on 2026-12-03 as --configs default,split_tail, before
# split_tail became the default; lean_pingpong is the old default now).
# Usage (device machine): bash benchmarks/bwd_split_tail_session.sh
mkdir -p "$OUT/probe" "$OUT/bwd"
OUT="$OUT/probe" timeout 150 python3 benchmarks/bwd_split_tail_probe_h200.py > "$OUT/probe/log.txt" 2>&1
echo "probe rc=$?"
python3 -c "import json,sys; [print(f'{k:14s} {v:.4f} ms') for k, v in json.load(open(sys.argv[1]))['median_ms'].items()]" \
    "$OUT/probe/bwd_split_tail_probe_4096.json" || tail -20 "$OUT/probe/log.txt"
timeout 400 python3 benchmarks/attention_bwd_variants_h200.py --configs default,lean_pingpong --runs 3 --causal no \
    --jobs 4 --out "$OUT/bwd" > "$OUT/bwd/log.txt" 2>&1
echo "variants rc=$?"
tail -30 "$OUT/bwd/log.txt"
