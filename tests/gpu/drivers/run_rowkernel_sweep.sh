#!/usr/bin/env bash
# Bundled row kernels vs Inductor on one GPU (H200: about 5 minutes with the defaults):
#   bash tests/gpu/drivers/run_rowkernel_sweep.sh /tmp/rowsweep
#   OPS=softmax,log_softmax,layer_norm,rms_norm COLS=1024,2048,4096,8192,16384,32768,65536 \
#     bash tests/gpu/drivers/run_rowkernel_sweep.sh /tmp/rowsweep      # the full sweep: several device calls
#   DIRECTIONS=fwd,bwd bash tests/gpu/drivers/run_rowkernel_sweep.sh /tmp/rowsweep   # also the backward
# Measures the copy peak into a store in the folder first, then sweeps; writes rowkernel_sweep.{json,md,svg}
# and the logs there. max-autotune of a reduction compiles slowly, hence the small defaults and
# the budget: cases that would start after BUDGET_S seconds are recorded as skipped, not lost.
set -uo pipefail
out="${1:-/tmp/rowkernel_sweep}"
OPS="${OPS:-softmax,rms_norm}"
COLS="${COLS:-1024,4096,16384,32768,65536}"
DTYPES="${DTYPES:-fp16,bf16}"
MODES="${MODES:-bundled,inductor_default,max_autotune,coordinate_descent}"
DIRECTIONS="${DIRECTIONS:-fwd}"          # fwd, bwd or fwd,bwd: bwd times the backward call alone
REP_MS="${REP_MS:-30}"
WARMUP_MS="${WARMUP_MS:-10}"
BUDGET_S="${BUDGET_S:-300}"
PYTHON="${PYTHON:-python}"
mkdir -p "$out"
store="$out/device_peaks.json"
"$PYTHON" scripts/measure_peak_bandwidth.py --out "$store" --rep-ms 200 > "$out/peak.log" 2>&1
echo "== peak rc=$?"; cat "$out/peak.log"
# Without a measured store the front falls back to references/device_peaks.yaml.
peak_args=()
[ -f "$store" ] && peak_args=(--peaks "$store")
"$PYTHON" scripts/rowkernel_sweep.py ${peak_args[@]+"${peak_args[@]}"} --ops "$OPS" --dtypes "$DTYPES" --cols "$COLS" \
  --modes "$MODES" --direction "$DIRECTIONS" --warmup-ms "$WARMUP_MS" --rep-ms "$REP_MS" --budget-s "$BUDGET_S" \
  --json-out "$out/rowkernel_sweep.json" --markdown-out "$out/rowkernel_sweep.md" \
  --svg-out "$out/rowkernel_sweep.svg" > "$out/sweep.out" 2> "$out/sweep.log"
rc=$?
echo "== sweep rc=$rc"
tail -25 "$out/sweep.log"
cat "$out/sweep.out"
exit $rc
