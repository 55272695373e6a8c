#!/usr/bin/env bash
# One device call of checks (H200, 2026-12-01: pinned 199 s, GPU tests 172 s, validate_dcu 42 s, recorder 37 s), each step under its own timeout, one archive back:
#   bash tests/gpu/drivers/run_checks.sh "$OUT"
# 1. the pinned trial arm (capture long-row softmax, sweep it, trial the sweep's best config in the program);
# 2. the GPU tests that are not marked slow; 3. validate_dcu.py (DCU checks skipped with reasons here);
# 4. the recorder's Inductor run of pointwise_chain (compared with tests/fixtures/inductor_h200 here).
set -u
out="${1:?usage: run_checks.sh OUT}"
work=/tmp/checks
mkdir -p "$work"
export PYTHONUNBUFFERED=1
step() {  # step NAME TIMEOUT_S CMD...: stdout+stderr to $work/NAME.log, one status line
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout -k 10 "$limit" "$@" > "$work/$name.log" 2>&1
  echo "== $name rc=$? ($((SECONDS - t0)) s)" | tee -a "$work/steps.txt"
}
step pinned 260 bash tests/gpu/drivers/run_trials_table.sh "$work/trials" pinned
step pytest_gpu 200 python -m pytest -m "gpu and not slow" -q -p no:cacheprovider tests
step validate_dcu 70 python scripts/validate_dcu.py --out "$work/dv" --timeout 50
step recorder 60 python tests/gpu/recorder.py run inductor --work /tmp/rec --out "$work/rec" --examples pointwise_chain
tar czf "$out/checks.tar.gz" -C /tmp checks
cat "$work/steps.txt"
tail -5 "$work/pytest_gpu.log"
cat "$work/pinned.log" | tail -30
sed -n '/^check /,$p' "$work/validate_dcu.log" | head -20
