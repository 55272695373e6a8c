#!/usr/bin/env bash
# Device checks of the whole-step, multi-process and hand-written-kernel work, each under its own
# timeout, one archive back:  bash tests/gpu/drivers/run_round_checks.sh OUT STEP...
# Steps: sdpa (the sdpa trial arm on examples/attention_by_hand), ranks (investigate.py under
# torchrun, two ranks on one GPU), handwritten (tests/gpu/test_handwritten_gpu.py), tutorials (its
# investigation of examples/triton_tutorials),
# liger (the Liger-Kernel tests; needs the liger_kernel wheel in .whl/, carried), rewrites (each
# catalog rewrite arm on its example: tests/gpu/drivers/run_rewrite_table.py), default_inv (investigate.py
# at its defaults on DEFAULT_INV_CMD, for its wall time),
# default_inv_each (investigate.py at its defaults on each ';'-separated command of DEFAULT_INV_CMDS, one per
# GPU at once: on a machine of N GPUs, N programs in the wall time of one),
# default_inv_start (investigate.py at its defaults on DEFAULT_INV_CMD, detached from the call: a run of
# up to its 600 s deadline outlasts a device call's limit; the call waits DEFAULT_INV_WAIT_S, 560 s),
# default_inv_collect (in the next call, made inside the machine's warm window: waits for that run's
# end, up to DEFAULT_INV_WAIT_S, and archives it; investigation.json's wall_s is its own wall time),
# gpu_fast (the GPU tests not marked slow).
set -u
out="${1:?usage: run_round_checks.sh OUT STEP...}"
shift
work=/tmp/round
mkdir -p "$work"
export PYTHONUNBUFFERED=1
step() {  # step NAME TIMEOUT_S CMD...: stdout+stderr to $work/NAME.log, one status line
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout -k 10 "$limit" "$@" > "$work/$name.log" 2>&1
  echo "== $name rc=$? ($((SECONDS - t0)) s)" | tee -a "$work/steps.txt"
}
for s in "$@"; do
  case "$s" in
    sdpa) step sdpa 260 python -m pytest -m "gpu and slow" -q -s -p no:cacheprovider -o addopts="-ra" \
            tests/gpu/test_attention_by_hand_gpu.py -k sdpa_arm ;;
    ranks) step ranks 300 python scripts/investigate.py --out "$work/inv_ddp" --top 1 --no-sweep \
             --trials-runs 2 --trials-budget-s 120 -- torchrun --standalone --nproc_per_node 2 \
             examples/ddp_two_ranks/train.py --steps 20 ;;
    handwritten) step handwritten "${HANDWRITTEN_S:-330}" python -m pytest -m "slow or not slow" -q -s -p no:cacheprovider \
                   -o addopts="-ra" --basetemp "$work/pt_hand" tests/gpu/test_handwritten_gpu.py -k "${HANDWRITTEN_TESTS:-not nothing}" ;;
    tutorials) step tutorials "${TUTORIALS_S:-330}" python -m pytest -m "slow or not slow" -q -s -p no:cacheprovider \
                 -o addopts="-ra" --basetemp "$work/pt_tut" tests/gpu/test_handwritten_gpu.py -k tutorial ;;
    liger) python -m pip install --no-deps -q .whl/liger_kernel-*.whl > "$work/liger_install.log" 2>&1
           step liger "${LIGER_S:-160}" python -m pytest -m "slow or not slow" -q -s -p no:cacheprovider -o addopts="-ra" \
             --basetemp "$work/pt_liger" tests/gpu/test_liger_gpu.py -k "${LIGER_TESTS:-captured}" ;;
    rewrites) step rewrites "${REWRITES_S:-420}" python tests/gpu/drivers/run_rewrite_table.py --out "$work/rewrites" \
                --only "${REWRITES_ONLY:-}" ;;
    default_inv) step default_inv "${DEFAULT_INV_S:-560}" python scripts/investigate.py --out "$work/inv_default" \
                   -- python ${DEFAULT_INV_CMD:-examples/attention_by_hand/step.py --train --steps 20} ;;
    default_inv_each)
      IFS=';' read -r -a cmds <<< "${DEFAULT_INV_CMDS:-examples/gated_mlp.py --train;examples/large_vocab_ce.py}"
      ngpu=$(nvidia-smi -L 2>/dev/null | wc -l); ngpu=$((ngpu > 0 ? ngpu : 1))
      i=0
      for c in "${cmds[@]}"; do
        ( export CUDA_VISIBLE_DEVICES=$((i % ngpu))
          step "default_inv_$i" "${DEFAULT_INV_S:-590}" \
            python scripts/investigate.py --out "$work/inv_default_$i" -- python $c ) &
        i=$((i + 1))
        if [ $((i % ngpu)) -eq 0 ]; then wait; fi
      done
      wait ;;
    default_inv_start)
      setsid nohup bash -c "t0=\$SECONDS; python scripts/investigate.py --out $work/inv_bg -- python \
        ${DEFAULT_INV_CMD:-examples/gated_mlp.py --train} > $work/inv_bg.log 2>&1; \
        echo \"== default_inv_bg rc=\$? (\$((SECONDS - t0)) s)\" >> $work/steps.txt; touch $work/inv_bg.done" \
        > /dev/null 2>&1 < /dev/null &
      for _ in $(seq "${DEFAULT_INV_WAIT_S:-560}"); do [ -f "$work/inv_bg.done" ] && break; sleep 1; done ;;
    default_inv_collect)
      for _ in $(seq "${DEFAULT_INV_WAIT_S:-560}"); do [ -f "$work/inv_bg.done" ] && break; sleep 1; done
      [ -f "$work/inv_bg.done" ] || echo "== default_inv_bg still running" | tee -a "$work/steps.txt" ;;
    gpu_fast) step gpu_fast 240 python -m pytest -m "gpu and not slow" -q -p no:cacheprovider -o addopts="-ra" tests ;;
  esac
done
find "$work" \( -name "*.pt" -o -name "*.so" -o -name "*.cubin" \) -delete
tar czf "$out/round.tar.gz" -C /tmp round
cat "$work/steps.txt"
for s in "$@"; do echo "---- $s"; tail -25 "$work/$s.log" 2>/dev/null; done
for f in "$work"/default_inv_*.log; do [ -f "$f" ] && { echo "---- $f"; tail -15 "$f"; }; done
