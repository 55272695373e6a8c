#!/usr/bin/env bash
# Remedy trials on the H200 for the recorded examples in examples/recorded_h200/trials/:
#   bash tests/gpu/run_trials_table.sh /tmp/trials
# Arms are restricted to what each class needs, so four repros fit one 10-minute device call.
set -uo pipefail
out="${1:-/tmp/trials}"
mkdir -p "$out"
trial() {
  local name=$1 arms=$2 budget=$3
  python scripts/try_remedies.py --out "$out/$name" --runs 2 --budget-s "$budget" --timeout 150 \
    --arms "$arms" -- python "examples/$name.py" --steps 50 > "$out/$name/../$name.log" 2>&1
  echo "== $name rc=$?"
  tail -14 "$out/$name/trials.md"
}
trial layernorm_fwd_bwd baseline,eager_fallback,coordinate_descent,max_autotune_no_cudagraphs 160
trial tiny_launches baseline,cudagraphs,coordinate_descent 160
trial row_reduction baseline,coordinate_descent 160
trial softmax_long_rows baseline,coordinate_descent,max_autotune_no_cudagraphs 190
