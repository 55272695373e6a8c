"""The offline main job against a bare ``import torch, triton``, in interleaved pairs.

    python tests/bench/bench_investigate.py [--repeat N] [--capture DIR] [--before SCRIPTS_DIR]

Each round runs, each in a fresh process timed from its start to its exit: a bare import, then
``investigate.py --from-capture DIR`` with an empty compile store (cold), then again with the
store that run left (warm), then (with ``--before``) the ``investigate.py`` of another checkout,
e.g. an older commit unpacked with ``git archive``, then a second bare import. A round's ratio is
an arm's time over the mean of its two bare imports; the verdict is the median of the rounds'
ratios (the machine may be shared: one figure is not to be trusted).

Target (issue 34): the cold offline main job within 6x of a bare import.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET_RATIO = 6.0


def timed(cmd: list[str], env: dict | None = None) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr[-500:]}")
    return time.perf_counter() - t


def one_round(work: Path, capture: str, before: str | None) -> dict:
    bare = [sys.executable, "-c", "import torch, triton"]
    row = {"bare": timed(bare)}
    store = work / "store"
    shutil.rmtree(store, ignore_errors=True)
    env = dict(os.environ, TKO_CACHE_DIR=str(store))
    arms = [("cold", ROOT / "scripts"), ("warm", ROOT / "scripts")] + ([("before", Path(before))] if before else [])
    for arm, scripts in arms:
        out = work / arm
        shutil.rmtree(out, ignore_errors=True)
        row[arm] = timed([sys.executable, str(scripts / "investigate.py"), "--from-capture", capture,
                          "--out", str(out)], env)
    row["bare2"] = timed(bare)
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--capture", default=str(ROOT / "examples" / "recorded_h200" / "pointwise_chain"))
    p.add_argument("--before", help="the scripts/ folder of another checkout to time beside this one")
    a = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tko_bench_inv_") as tmp:
        for _ in range(a.repeat):
            row = one_round(Path(tmp), a.capture, a.before)
            base = (row["bare"] + row["bare2"]) / 2
            row.update({f"{k}_x": row[k] / base for k in ("cold", "warm", "before") if k in row})
            rows.append(row)
            print(json.dumps({k: round(v, 2) for k, v in row.items()}), flush=True)
    medians = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(json.dumps({"median": {k: round(v, 2) for k, v in medians.items()}}))
    ok = medians["cold_x"] <= TARGET_RATIO
    print(f"cold offline main job: {medians['cold_x']:.1f}x a bare import (target <= {TARGET_RATIO:g}x): "
          + ("met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
