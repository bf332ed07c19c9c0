#!/bin/bash
# One H200 call (eleventh session): is the backward's split form slow for its 1-D grid or for its code? The probe
# times split_form_2d and split_tail_2d beside the plain kernel; only when the 2-D split tail beats the default by
# more than 0.3 % in it, three runs of the goal's cells (non-causal D=128) follow, checked first.
# Usage (device machine): bash benchmarks/bwd_split_tail_2d_session.sh
mkdir -p "$OUT/probe" "$OUT/bwd"
OUT="$OUT/probe" timeout 150 python3 benchmarks/bwd_split_tail_probe_h200.py > "$OUT/probe/log.txt" 2>&1
echo "probe rc=$?"
python3 - "$OUT/probe/bwd_split_tail_probe.json" <<'PY' || exit 0
import json, sys
m = json.load(open(sys.argv[1]))["median_ms"]
for k, v in m.items():
    print(f"{k:14s} {v:.4f} ms")
sys.exit(0 if m["split_tail_2d"] < 0.997 * m["default"] else 1)
PY
timeout 430 python3 benchmarks/attention_bwd_variants_h200.py --configs default,split_tail_2d --runs 3 --causal no \
    --jobs 4 --out "$OUT/bwd" > "$OUT/bwd/log.txt" 2>&1
echo "variants rc=$?"
tail -30 "$OUT/bwd/log.txt"
