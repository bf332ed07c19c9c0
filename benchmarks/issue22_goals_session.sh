#!/bin/bash
# Issue 22's goals on the H200 (twelfth and thirteenth sessions), one device call per part, each part's subjects side by side in
# interleaved rounds (medians), its store under $OUT/<part>:
#   bwd  attention backward D=128 vs SDPA's backward, causal and not, N=4096 and 8192: three runs of the default
#        (split_tail non-causal, handoff causal), lean_pingpong (the causal default until 2026-12-04) and
#        attention_backward() as users call it (tuned)   (~3-4 min)
#   fwd  the restated forward goals: attention D=128 vs SDPA and the GEMMs vs cuBLAS, 5 rounds (~2-3 min)
#   fp8  FP8 GEMM's default config vs torch._scaled_mm at 4096^3 and 8192^3, per-tensor and row-wise, 9 rounds
#        (~1 min)
# Usage (device machine): bash benchmarks/issue22_goals_session.sh bwd|fwd|fp8 ...
for part in "$@"; do
  mkdir -p "$OUT/$part"
  case "$part" in
    bwd) timeout 540 python3 benchmarks/attention_bwd_variants_h200.py --only time --runs 3 --configs default,lean_pingpong \
           --tuned --out "$OUT/bwd" > "$OUT/bwd/log.txt" 2>&1 ;;
    fwd) OUT="$OUT/fwd" timeout 400 python3 benchmarks/restated_goals_h200.py --rounds 5 > "$OUT/fwd/log.txt" 2>&1 ;;
    fp8) timeout 300 python3 benchmarks/gemm_fp8_h200.py --parts time --configs 0 --rounds 9 --out "$OUT/fp8" \
           > "$OUT/fp8/log.txt" 2>&1 ;;
    *) echo "unknown part $part"; continue ;;
  esac
  echo "$part rc=$?"
  tail -45 "$OUT/$part/log.txt"
done
