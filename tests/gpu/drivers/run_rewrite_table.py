"""On a GPU: each model-level rewrite of references/rewrite_catalog.yaml measured on the example
that has its pattern, as try_remedies.py measures it (baseline and the rewrite's arm, interleaved,
in the unchanged program), then one table: detected (the pass's stderr line), ms/step of both,
x baseline, noise, outputs, peak memory of both.

    python tests/gpu/drivers/run_rewrite_table.py --out OUT [--only sdpa,norm] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EX = ROOT / "examples"
# (label, arm, the example's command line[, environment added to the trials'])
CASES = [
    ("attention_by_hand", "sdpa", [EX / "attention_by_hand" / "step.py", "--train", "--steps", "20"]),
    # the same at a sequence where the GPU, not the host, sets the step (b8 s1024 was host-bound on an H200)
    ("attention_by_hand_s4096", "sdpa", [EX / "attention_by_hand" / "step.py", "--train", "--steps", "10",
                                         "--batch", "2", "--seq", "4096"]),
    # the same with the causal mask kept explicit: what is_causal=True adds (flash kernels, no mask read)
    ("attention_by_hand_s4096_explicit_mask", "sdpa", [EX / "attention_by_hand" / "step.py", "--train", "--steps",
                                                       "10", "--batch", "2", "--seq", "4096"], {"TKO_SDPA_CAUSAL": "0"}),
    # SDPA already, given the causal mask as attn_mask (no FlashAttention): the arm's is_causal swap
    ("attention_sdpa_mask_s4096", "sdpa", [EX / "attention_by_hand" / "sdpa_mask_step.py", "--train", "--steps",
                                           "10", "--batch", "2", "--seq", "4096"]),
    # Hugging Face's eager form (transpose(2, 3), additive mask, fp32-upcast softmax), at the GPU-bound size
    ("attention_hf_eager_s4096", "sdpa", [EX / "attention_by_hand" / "hf_step.py", "--train", "--steps", "10",
                                          "--batch", "2", "--seq", "4096"]),
    ("rms_norm", "rms_norm_fn", [EX / "rms_norm.py", "--dtype", "bf16", "--train", "--steps", "50"]),
    ("gated_mlp", "gate_up_fused", [EX / "gated_mlp.py", "--train", "--steps", "20"]),
    ("large_vocab_ce", "ce_chunked", [EX / "large_vocab_ce.py", "--steps", "10"]),
    ("scatter_index_add", "segment_reduce", [EX / "scatter_index_add.py", "--steps", "20"]),
]


def run_case(label: str, arm: str, cmd: list, out: Path, runs: int, timeout: int, env: dict | None = None) -> dict:
    t0 = time.perf_counter()
    tdir = out / label
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "try_remedies.py"), "--out", str(tdir),
                           "--runs", str(runs), "--timeout", str(timeout), "--arms", arm, "--",
                           sys.executable, *map(str, cmd)], capture_output=True, text=True, timeout=timeout * 4,
                          env={**os.environ, **(env or {})})
    (out / f"{label}.log").write_text(proc.stdout + proc.stderr)
    row = {"example": label, "arm": arm, "rc": proc.returncode, "wall_s": round(time.perf_counter() - t0, 1)}
    try:
        doc = json.loads((tdir / "trials.json").read_text())
    except (OSError, ValueError):
        return dict(row, error=(proc.stderr.strip().splitlines() or ["no trials.json"])[-1])
    arms = {a["name"]: a for a in doc["arms"]}
    base, got = arms.get("baseline") or {}, arms.get(arm) or {}
    replaced = got.get("replaced") or []
    return dict(row, detected=replaced[-1] if replaced else None, status=got.get("status"),
                reason=got.get("reason"), base_ms=base.get("median_ms"), arm_ms=got.get("median_ms"),
                x=got.get("x_baseline"), noise=doc.get("noise"), beyond=got.get("beyond_noise"),
                outputs=got.get("outputs"), base_mb=base.get("peak_memory_mb"), arm_mb=got.get("peak_memory_mb"))


def _f(v, fmt="{:.4g}"):
    return fmt.format(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else "n/a"


def table(rows: list[dict]) -> str:
    lines = ["| example | arm | detected | baseline ms | arm ms | x | outputs | peak MiB (base -> arm) | status | s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['example']} | {r['arm']} | {r.get('detected') or r.get('error') or 'no'} | "
                     f"{_f(r.get('base_ms'))} | {_f(r.get('arm_ms'))} | {_f(r.get('x'), '{:.3f}')} | "
                     f"{r.get('outputs')} | {_f(r.get('base_mb'), '{:.0f}')} -> {_f(r.get('arm_mb'), '{:.0f}')} | "
                     f"{r.get('status')} {r.get('reason') or ''} | {r['wall_s']} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", default="", help="comma-separated labels or arms")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--timeout", type=int, default=240, help="seconds for one run of the example")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    only = {s for s in a.only.split(",") if s}
    rows = []
    for label, arm, cmd, *env in CASES:
        if only and label not in only and arm not in only:
            continue
        rows.append(run_case(label, arm, cmd, a.out, a.runs, a.timeout, *env))
        print(json.dumps(rows[-1]), flush=True)
    (a.out / "rewrite_table.json").write_text(json.dumps(rows, indent=1) + "\n")
    text = table(rows)
    (a.out / "rewrite_table.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
