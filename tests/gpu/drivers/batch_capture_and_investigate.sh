#!/usr/bin/env bash
# One device call, two GPUs side by side: the capture suite (issue "capture": standalone vs program,
# CUDA-graph timer) on GPU 0 and investigate.py online on the examples on GPU 1.  Results under $OUT.
set -u
export PYTHONUNBUFFERED=1
EXAMPLES=${EXAMPLES:-row_reduction,tiny_launches,mlp_train_step,dynamic_shapes,user_autotune_kernel}
LIMIT=${LIMIT:-470}
mkdir -p "$OUT/suite" /tmp/ab
AB=${AB:-dynamic_shapes}   # examples whose compiled f is A/B-ed against eager (eager_fallback_ab.py)
( CUDA_VISIBLE_DEVICES=1 timeout "$LIMIT" python tests/gpu/recorder.py run investigate --work /tmp/rec --out "$OUT" \
    --examples "$EXAMPLES" --budget-s $((LIMIT - 240)) > "$OUT/investigate_log.txt" 2>&1
  for ex in ${AB//,/ }; do
    CUDA_VISIBLE_DEVICES=1 timeout 150 python scripts/eager_fallback_ab.py --disable __main__:f --runs 3 \
        --json-out "/tmp/ab/ab_$ex.json" --markdown-out "/tmp/ab/ab_$ex.md" \
        -- python examples/$ex.py --steps 50 >> /tmp/ab/ab_log.txt 2>&1
  done ) &
inv=$!
CUDA_VISIBLE_DEVICES=0 timeout "$LIMIT" python tests/gpu/drivers/run_gpu_suite.py --work /tmp/gs --out "$OUT/suite" \
    --examples "${SUITE_EXAMPLES:-tiny_launches,mlp_train_step,dynamic_shapes,pointwise_chain,row_reduction,scatter_index_add,user_autotune_kernel}" \
    --timer all --budget-s $((LIMIT - 120)) > "$OUT/suite/stdout.txt" 2>&1
wait $inv
# the reports and indexes of each online run (not the capture, which the pruned copy holds)
(cd /tmp/rec && tar czf "$OUT/investigations.tar.gz" --exclude='*/capture' --exclude='*.pt' --exclude='*.so' \
    --exclude='*.cubin' --exclude='*.llir' .)
ls -la "$OUT" "$OUT/suite"
sed -n '/== capture per example ==/,$p' "$OUT/suite/stdout.txt"
sed -n '/== investigate.py online/,$p' "$OUT/investigate_log.txt"
tar czf "$OUT/ab.tar.gz" -C /tmp ab
cat /tmp/ab/ab_*.md 2>/dev/null | head -40
