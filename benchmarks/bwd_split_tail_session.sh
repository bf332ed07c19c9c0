#!/bin/bash
# One H200 call (tenth session): the backward's SPLIT_TAIL against the default, checked then timed in the
# non-causal D=128 cells over three runs. Usage (device machine): bash benchmarks/bwd_split_tail_session.sh
mkdir -p "$OUT/bwd"
timeout 400 python3 benchmarks/attention_bwd_variants_h200.py --configs default,split_tail --runs 3 --causal no \
    --jobs 4 --out "$OUT/bwd" > "$OUT/bwd/log.txt" 2>&1
echo "rc=$?" >> "$OUT/bwd/log.txt"
tail -40 "$OUT/bwd/log.txt"
