#!/usr/bin/env bash
# How far apart do Inductor's tuned modes land on a fresh cache? Each draw runs the RMSNorm of
# l2_rows_probe.py (the bundled guarded kernel beside Inductor's coordinate descent and max-autotune)
# in a process of its own with an empty Inductor cache, so that each mode tunes anew, and keeps the
# .best_config files the tuning wrote. Needs a GPU; not a pytest test.
#
#   DRAWS=4 DTYPE=fp16 COLS=65536 bash tests/gpu/drivers/tuning_draws.sh OUT
set -u
out=${1:?usage: tuning_draws.sh OUT}
draws=${DRAWS:-4}
variants=${VARIANTS:-guarded,coordinate_descent,max_autotune}
here=$(cd "$(dirname "$0")" && pwd)
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$(mktemp -d)}   # shared: compiled binaries only
for i in $(seq 1 "$draws"); do
  d="$out/draw$i"
  mkdir -p "$d/best_config"
  cache=$(mktemp -d)
  TORCHINDUCTOR_CACHE_DIR=$cache python "$here/l2_rows_probe.py" --out-dir "$d" --dtype "${DTYPE:-fp16}" \
    --cols "${COLS:-65536}" --variants "$variants" --repeat "${REPEAT:-3}" 2>&1 | grep -v Warn | tail -4
  find "$cache" -name '*.best_config' | while read -r f; do
    cp "$f" "$d/best_config/$(basename "$(dirname "$f")")_$(basename "$f")"
  done
  rm -rf "$cache"
done
