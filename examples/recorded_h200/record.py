"""Record (on a GPU) and prune (anywhere) the real captures bundled in this folder.

On the GPU machine, for each example, the online investigation records a capture directory:

    python examples/recorded_h200/record.py run --work /tmp/rec [--examples pointwise_chain,...] [--budget-s S]

It prints, last, one line per investigated kernel: example, kernel, share of GPU time, decision, rule.

Then, wherever the result was copied to, keep what ``investigate.py --from-capture`` needs:

    python examples/recorded_h200/record.py prune /tmp/rec examples/recorded_h200 [--slim tiny_launches]

Pruning keeps each ``<example>/capture/`` except Inductor's FX-graph and AOT-autograd caches,
launcher .so files, LLVM IR and cubins, and saved input tensors; gzip-compresses the profiler
trace; and copies each kernel's standalone timing (``kernels/<k>/run.json``) to ``runs/<k>.json``
so the offline run can cite GPU timings it cannot make. Nothing else is edited.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["pointwise_chain", "scatter_index_add", "row_reduction", "tiny_launches", "mlp_train_step",
            "dynamic_shapes", "user_autotune_kernel"]
DROP_DIRS = {"fxgraph", "aotautograd"}
DROP_SUFFIXES = {".so", ".llir", ".cubin", ".pt", ".lock"}


def run(work: Path, examples: list[str], budget_s: float) -> int:
    rc, start, done = 0, time.time(), []
    for name in examples:
        if time.time() - start > budget_s:
            print(f"{name}: skipped (time budget)")
            continue
        t0 = time.time()
        cmd = [sys.executable, str(ROOT / "scripts" / "investigate.py"), "--out", str(work / name), "--top", "2",
               "--probe-arch", "none", *(["--smoke"] if name == "pointwise_chain" else []),
               "--", sys.executable, str(ROOT / "examples" / f"{name}.py"), "--steps", "20"]
        code = subprocess.call(cmd)
        rc |= code
        done.append((name, code, time.time() - t0))
    print("\n== investigate.py online, per example ==")
    print(f"{'example':22} {'rc':>3} {'s':>6}  {'kernel':48} {'share':>6}  {'verdict':24} rule")
    for name, code, secs in done:
        index = work / name / "investigation.json"
        kernels = json.loads(index.read_text()).get("kernels", []) if index.is_file() else []
        for k in kernels or [{}]:
            share = f"{100 * k['share']:.1f}%" if isinstance(k.get("share"), (int, float)) else "-"
            print(f"{name:22} {code:>3} {secs:6.1f}  {str(k.get('kernel', '-'))[:48]:48} {share:>6}  "
                  f"{str(k.get('verdict')):24} {k.get('rule')}")
    return rc


def _slim_keep(rel: Path, investigated: set[str]) -> bool:
    """What a slim copy keeps: the ranked profile (not the trace), the capture log, the standalone
    files and Triton cache entries of the investigated kernels, the environment and peak records."""
    parts = rel.parts
    if parts[0] == "inductor_cache":
        return "triton" in parts and rel.name.split(".")[0].removeprefix("__grp__") in investigated
    if parts[0] == "profile":
        return rel.name in ("profile.json", "profile.md")
    if parts[0] == "autotune_kernels":
        return rel.name == "autotune.log" or (len(parts) == 2 and rel.stem in investigated)
    return len(parts) == 1 and rel.name in ("triton_env.json", "device_peaks.json", "repro_command.json")


def prune(src: Path, dst: Path, slim: set[str] = frozenset()) -> int:
    for example in sorted(p for p in src.iterdir() if (p / "capture").is_dir()):
        out = dst / example.name
        if out.exists():
            shutil.rmtree(out)
        investigated = {p.parent.name for p in (example / "kernels").glob("*/run.json")}
        for path in sorted((example / "capture").rglob("*")):
            rel = path.relative_to(example / "capture")
            if not path.is_file() or path.suffix in DROP_SUFFIXES or DROP_DIRS & set(rel.parts):
                continue
            if example.name in slim and not _slim_keep(rel, investigated):
                continue
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.name.endswith(".trace.json"):
                with open(path, "rb") as fi, gzip.GzipFile(str(target) + ".gz", "wb", mtime=0) as fo:
                    shutil.copyfileobj(fi, fo)
            else:
                shutil.copy2(path, target)
        for run_json in sorted((example / "kernels").glob("*/run.json")):
            target = out / "runs" / f"{run_json.parent.name}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(run_json, target)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--work", type=Path, required=True)
    r.add_argument("--examples", default=",".join(EXAMPLES), help="comma-separated example names")
    r.add_argument("--budget-s", type=float, default=1e9, help="start no new example after this many seconds")
    q = sub.add_parser("prune")
    q.add_argument("src", type=Path)
    q.add_argument("dst", type=Path)
    q.add_argument("--slim", default="", help="comma-separated examples to keep only the ranked profile, the "
                   "capture log and the investigated kernels of (no trace, Inductor cache or compile log)")
    a = p.parse_args()
    if a.cmd == "run":
        return run(a.work, [n for n in a.examples.split(",") if n], a.budget_s)
    return prune(a.src, a.dst, {n for n in a.slim.split(",") if n})


if __name__ == "__main__":
    sys.exit(main())
