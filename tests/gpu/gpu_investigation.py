"""The online investigation the GPU tests run on an example: its index, its steps printed, and the
check that every step is ok (the compile probes these runs turn off with --probe-arch none aside)."""

from __future__ import annotations

import json
from pathlib import Path


def investigate(run_script, tmp_path: Path, program: Path, top: int, steps: int, budget_s: int) -> tuple[Path, dict]:
    inv = tmp_path / "inv"
    proc = run_script("investigate.py", "--out", inv, "--top", str(top), "--probe-arch", "none",
                      "--trials-runs", "2", "--trials-budget-s", str(budget_s),
                      "--", "python", program, "--steps", str(steps), cwd=tmp_path, timeout=1500)
    index = json.loads((inv / "investigation.json").read_text()) if (inv / "investigation.json").is_file() else {}
    print(json.dumps([(s.get("name"), s.get("status"), s.get("error")) for s in index.get("steps", [])], indent=1))
    print(json.dumps([(k["kernel"], k.get("share"), k.get("verdict"), k.get("rule")) for k in index.get("kernels", [])]))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return inv, index


def every_step_ok(index: dict) -> bool:
    return all(s["status"] == "ok" or (s["name"].startswith("probe ") and s["status"] == "skipped")
               for s in index["steps"])
