"""Record (on a GPU) and prune (anywhere) the real captures bundled in this folder.

On the GPU machine, for each example, the online investigation records a capture directory:

    python examples/recorded_h200/record.py run --work /tmp/rec

Then, wherever the result was copied to, keep what ``investigate.py --from-capture`` needs:

    python examples/recorded_h200/record.py prune /tmp/rec examples/recorded_h200

Pruning keeps each ``<example>/capture/`` except Inductor's FX-graph and AOT-autograd caches,
launcher .so files, LLVM IR and cubins, and saved input tensors; gzip-compresses the profiler
trace; and copies each kernel's standalone timing (``kernels/<k>/run.json``) to ``runs/<k>.json``
so the offline run can cite GPU timings it cannot make. Nothing else is edited.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["pointwise_chain", "scatter_index_add"]
DROP_DIRS = {"fxgraph", "aotautograd"}
DROP_SUFFIXES = {".so", ".llir", ".cubin", ".pt", ".lock"}


def run(work: Path) -> int:
    rc = 0
    for name in EXAMPLES:
        cmd = [sys.executable, str(ROOT / "scripts" / "investigate.py"), "--out", str(work / name), "--top", "2",
               "--probe-arch", "none", *(["--smoke"] if name == "pointwise_chain" else []),
               "--", sys.executable, str(ROOT / "examples" / f"{name}.py"), "--steps", "20"]
        rc |= subprocess.call(cmd)
    return rc


def prune(src: Path, dst: Path) -> int:
    for example in sorted(p for p in src.iterdir() if (p / "capture").is_dir()):
        out = dst / example.name
        if out.exists():
            shutil.rmtree(out)
        for path in sorted((example / "capture").rglob("*")):
            rel = path.relative_to(example / "capture")
            if not path.is_file() or path.suffix in DROP_SUFFIXES or DROP_DIRS & set(rel.parts):
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
    q = sub.add_parser("prune")
    q.add_argument("src", type=Path)
    q.add_argument("dst", type=Path)
    a = p.parse_args()
    return run(a.work) if a.cmd == "run" else prune(a.src, a.dst)


if __name__ == "__main__":
    sys.exit(main())
