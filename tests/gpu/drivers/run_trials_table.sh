#!/usr/bin/env bash
# Remedy trials on the H200 for the recorded examples in examples/recorded_h200/trials/:
#   bash tests/gpu/drivers/run_trials_table.sh /tmp/trials [SET ...]
# SET: first (layernorm_fwd_bwd, tiny_launches, row_reduction, softmax_long_rows), rows (the
# replace arm on long-row softmax and RMS norm), more (exact-erf GELU, dynamic-shape reduction,
# embedding forward+backward), gemm (GEMM with a fused epilogue), pinned (capture long-row softmax,
# sweep its kernel, trial the sweep's best config as the pinned arm), again1 / again2 (the second
# table of the repros that have one, with budgets that give the baseline two counted runs and
# without the arms measured slower twice; about 9.5 minutes each), rows64k (the replace arm on a
# 2048 x 65536 fp16 softmax, past the one-pass limit: the chunked kernels), long (embedding,
# dynamic shapes and RMS norm at 500 timed steps instead of 50: does a longer window narrow the
# 1.4-2x baseline spread of again/?), rms64k (F.rms_norm over 2048 x 65536, fp16 and bf16, the
# replace arm at 500 timed steps: the chunked RMSNorm end to end), rms64k_cd (the same on fp16
# with coordinate descent beside: the one Inductor mode whose kernel came near the bundled one
# there). STEPS sets the timed steps
# (default 50). Default: first.
# Arms are restricted to what each class needs, so one set fits one 10-minute device call.
set -uo pipefail
out="${1:-/tmp/trials}"
shift || true
sets="${*:-first}"
mkdir -p "$out"
trial() {  # trial [LABEL:]EXAMPLE ARMS BUDGET_S [try_remedies flags]
  local name=${1%%:*} example=${1##*:} arms=$2 budget=$3
  shift 3
  python scripts/try_remedies.py --out "$out/$name" --runs 2 --budget-s "$budget" --timeout 150 \
    --arms "$arms" "$@" -- python "examples/$example.py" --steps "${STEPS:-50}" ${REPRO_ARGS:-} > "$out/$name.log" 2>&1
  echo "== $name rc=$?"
  tail -14 "$out/$name/trials.md"
}
pinned() {
  local cap="$out/pinned_capture"
  python scripts/autotune_capture_patch.py --dir "$cap" --force-retune examples/softmax_long_rows.py -- --steps 5 \
    > "$out/pinned_capture.log" 2>&1
  local kernel
  kernel=$(ls "$cap"/triton_red_*softmax*.py | head -1)
  echo "== pinned: sweeping $kernel"
  python scripts/sweep_captured_kernel.py "$kernel" --max-variants 16 --rep 50 --json-out "$out/pinned_sweep.json" \
    --markdown-out "$out/pinned_sweep.md" --best-out "$out/pinned_best.py" > "$out/pinned_sweep.log" 2>&1
  echo "== sweep rc=$?"; head -12 "$out/pinned_sweep.md"
  trial softmax_long_rows_pinned:softmax_long_rows baseline,pinned,coordinate_descent 150 \
    --pins-from-sweep "$out/pinned_sweep.json" --kernel-file "$kernel"
}
for set in $sets; do
  case $set in
    first)
      trial layernorm_fwd_bwd baseline,eager_fallback,coordinate_descent,max_autotune_no_cudagraphs 160
      trial tiny_launches baseline,cudagraphs,coordinate_descent 160
      trial row_reduction baseline,coordinate_descent 160
      trial softmax_long_rows baseline,coordinate_descent,max_autotune_no_cudagraphs 190 ;;
    rows)
      trial softmax_long_rows_replace:softmax_long_rows baseline,coordinate_descent,replace 100
      trial rms_norm baseline,coordinate_descent,replace 80 ;;
    more)
      trial gelu_erf baseline,coordinate_descent,max_autotune_no_cudagraphs 85
      trial dynamic_shapes baseline,static_shapes,multi_kernel,cudagraphs 85
      trial embedding_fwd_bwd baseline,eager_fallback,coordinate_descent 80 ;;
    rows64k)  # rows past the one-pass limit: the chunked two-pass kernels against Inductor's loop
      REPRO_ARGS="--rows 2048 --cols 65536" trial softmax_64k_replace:softmax_long_rows \
        baseline,coordinate_descent,replace 150 ;;
    rms64k)  # 0.15-0.2 ms steps: 500 timed steps and 20 warm-up, a window of 0.1 s
      for dt in fp16 bf16; do
        STEPS=500 REPRO_ARGS="--warmup 20 --functional --rows 2048 --cols 65536 --dtype $dt" \
          trial "rms_norm_64k_$dt:rms_norm" baseline,replace 110
      done ;;
    rms64k_cd)
      STEPS=500 REPRO_ARGS="--warmup 20 --functional --rows 2048 --cols 65536 --dtype fp16" \
        trial "rms_norm_64k_fp16_cd:rms_norm" baseline,coordinate_descent,replace 220 ;;
    long)  # the short programs whose baselines moved 1.4-2x between processes, 10x the timed steps
      STEPS=500 trial embedding_long:embedding_fwd_bwd baseline,eager_fallback 170
      STEPS=500 trial dynamic_long:dynamic_shapes baseline,multi_kernel 170
      STEPS=500 trial rms_norm_long:rms_norm baseline,coordinate_descent 150 ;;
    gemm)
      trial gemm_epilogue baseline,max_autotune_no_cudagraphs,coordinate_descent 100 ;;
    pinned) pinned ;;
    again1)
      trial gemm_epilogue baseline,max_autotune_no_cudagraphs,coordinate_descent 190
      trial embedding_fwd_bwd baseline,eager_fallback,coordinate_descent 190
      trial rms_norm baseline,coordinate_descent,replace 170 ;;
    again2)
      trial tiny_launches baseline,cudagraphs 150
      trial gelu_erf baseline,coordinate_descent 140
      trial row_reduction baseline,coordinate_descent 130
      trial dynamic_shapes baseline,static_shapes,multi_kernel 150 ;;
    *) echo "unknown set $set"; exit 2 ;;
  esac
done
