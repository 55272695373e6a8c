"""The speed-of-light table on a real GPU: kernel vs memory twin vs copy floor, per example, twice.

    python tests/gpu/drivers/run_speed_of_light_table.py --work /tmp/soltable --out "$OUT" [--budget-s 450]

1. measure the copy peak once (measure_peak_bandwidth.py into a store under --work; --no-measure
   uses references/device_peaks.yaml);
2. per example repro (exact-erf GELU, long-row softmax, RMS norm, transposed add, embedding
   forward+backward, LayerNorm forward+backward, GEMM epilogue, tanh-GELU pointwise chain,
   index_add), capture it with autotune_capture_patch.py (--steps 5, private Inductor cache,
   forced re-tune) and pick the hot kernel: the largest autotuned winner ms x launches recorded in
   the capture log (the log has no call counts: one launch event per argument signature);
3. run speed_of_light.py on it twice (repetition 1 and 2, same settings).
Prints the table last (example / kernel / kernel ms / twin ms / copy floor ms / one-pass floor /
% of copy / class, per repetition) and writes results.json with every number, plus each
speed_of_light JSON and Markdown, under --out. Not a pytest test: it needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "scripts"
EXAMPLES = ("gelu_erf", "softmax_long_rows", "rms_norm", "transposed_add", "embedding_fwd_bwd",
            "layernorm_fwd_bwd", "gemm_epilogue", "pointwise_chain", "scatter_index_add")


def run(cmd: list[str], env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    print("+", " ".join(map(str, cmd)), flush=True)
    try:
        return subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})}, cwd=str(ROOT))
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, 124, exc.stdout or "", f"timed out after {timeout} s")


def capture(example: str, work: Path) -> Path | None:
    """Capture one example; returns its capture dir (None when the capture failed)."""
    folder = work / example
    shutil.rmtree(folder, ignore_errors=True)
    cap = folder / "autotune_kernels"
    proc = run([sys.executable, SCRIPTS / "autotune_capture_patch.py", "--dir", cap, "--force-retune",
                ROOT / "examples" / f"{example}.py", "--", "--steps", "5"],
               env={"TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor_cache")}, timeout=240)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "capture_stderr.txt").write_text(proc.stderr[-20000:])
    if proc.returncode != 0 or not (cap / "autotune.log").is_file():
        print(f"{example}: capture failed (rc {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
        return None
    return cap


def hot_kernel(cap: Path, only: str | None = None) -> tuple[Path | None, dict]:
    """The standalone file of the kernel with the largest winner ms x launches in the capture log
    (among the kernels whose name contains ``only``, when given)."""
    best_ms: dict[str, float] = {}
    launches: dict[str, int] = {}
    files: dict[str, str] = {}
    for line in (cap / "autotune.log").read_text(errors="replace").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        name = ev.get("kernel")
        if ev.get("event") == "autotune":
            times = [t.get("ms") for t in ev.get("timings") or [] if isinstance(t.get("ms"), (int, float))]
            if times:
                best_ms[name] = min(times + ([best_ms[name]] if name in best_ms else []))
        elif ev.get("event") == "launch":
            launches[name] = launches.get(name, 0) + 1
            if ev.get("standalone_file"):
                files.setdefault(name, ev["standalone_file"])
    candidates = [n for n in files if Path(files[n]).is_file() and (only is None or only in n)]
    if not candidates:
        return None, {}
    # kernels with one config are not autotuned: no ms; they rank below any timed kernel
    score = {n: best_ms.get(n, 0.0) * launches.get(n, 1) for n in candidates}
    chosen = max(candidates, key=lambda n: score[n])
    return Path(files[chosen]), {"kernel": chosen, "winner_ms": best_ms.get(chosen),
                                 "launches": launches.get(chosen), "candidates": len(candidates)}


def speed_of_light(kernel: Path, out_dir: Path, tag: str, peaks: Path | None) -> dict:
    js, md = out_dir / f"{tag}.json", out_dir / f"{tag}.md"
    cmd = [sys.executable, SCRIPTS / "speed_of_light.py", kernel, "--json-out", js, "--markdown-out", md,
           "--twin-out", out_dir / f"{tag}.twin.py", "--timeout", "120"]
    if peaks and peaks.is_file():
        cmd += ["--peaks", peaks]
    proc = run(cmd, timeout=300)
    if proc.returncode != 0 or not js.is_file():
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    doc = json.loads(js.read_text())
    n = doc["classification"]["numbers"]
    return {"class": doc["classification"]["class"], "says": doc["classification"]["says"],
            "twin_valid": doc["validity"]["valid"], "twin_invalid_on": doc["validity"]["invalid_on"],
            "timers": {k: (v or {}).get("timer") for k, v in doc["runs"].items()}, **n}


def _f(v, fmt=".4f"):
    return "-" if not isinstance(v, (int, float)) else f"{v:{fmt}}"


def table(rows: list[dict]) -> str:
    head = "| example | kernel | rep | kernel ms | twin ms | copy floor ms | one-pass floor ms | % of copy | class |"
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        lines.append(f"| {r['example']} | {str(r.get('kernel'))[:48]} | {r.get('rep', '-')} | {_f(r.get('kernel_ms'))} | "
                     f"{_f(r.get('twin_ms'))} | {_f(r.get('copy_floor_ms'))} | {_f(r.get('one_pass_floor_ms'))} | "
                     f"{_f(r.get('kernel_pct_of_copy'), '.1f')} | {r.get('class') or r.get('error')} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", default="/tmp/soltable", help="captures and twins go here")
    p.add_argument("--out", required=True, help="results.json and the per-kernel reports")
    p.add_argument("--budget-s", type=float, default=450.0, help="stop starting new examples after this")
    p.add_argument("--no-measure", action="store_true", help="use the peak table instead of measuring")
    p.add_argument("--examples", default=",".join(EXAMPLES), help="comma list (default: all)")
    p.add_argument("--kernel", action="append", default=[], metavar="EXAMPLE=PART",
                   help="measure the kernel whose name contains PART instead of the hot one, e.g. "
                        "embedding_fwd_bwd=fused_embedding_0 (the forward gather)")
    opts = p.parse_args()
    only = dict(k.split("=", 1) for k in opts.kernel if "=" in k)
    work, out = Path(opts.work), Path(opts.out)
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    peaks = None
    if not opts.no_measure:
        peaks = work / "device_peaks.json"
        proc = run([sys.executable, SCRIPTS / "measure_peak_bandwidth.py", "--out", peaks], timeout=120)
        print(proc.stdout.strip()[-400:] or proc.stderr.strip()[-400:])
    rows = []
    for example in [e for e in opts.examples.split(",") if e]:
        if time.time() - start > opts.budget_s:
            rows.append({"example": example, "error": "skipped: over --budget-s"})
            continue
        cap = capture(example, work)
        kernel, pick = hot_kernel(cap, only.get(example)) if cap else (None, {})
        if kernel is None:
            rows.append({"example": example, "error": "no captured standalone kernel"})
            continue
        for rep in (1, 2):
            res = speed_of_light(kernel, out, f"{example}_rep{rep}", peaks)
            rows.append({"example": example, "kernel": pick.get("kernel"), "rep": rep, "pick": pick, **res})
            print(table(rows[-1:]), flush=True)
    (out / "results.json").write_text(json.dumps({"rows": rows, "wall_s": round(time.time() - start, 1),
                                                  "peaks_store": str(peaks) if peaks else None}, indent=2))
    print()
    print(table(rows))
    return 0 if any(r.get("class") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
