"""On a GPU with liger-kernel installed (examples/liger/README.md): Liger's hand-written Triton
kernels are captured as triton_jit with their launch sites in liger_kernel/ops, each reproducer runs,
and the investigation ranks them Triton.

    pip install --no-deps .whl/liger_kernel-0.8.5-py3-none-any.whl
    python -m pytest -q -p no:cacheprovider tests/gpu/test_liger_gpu.py -m "slow or not slow" -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_investigation import investigate

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
pytest.importorskip("liger_kernel")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "liger" / "liger_ops.py"


def test_liger_kernels_are_captured_and_reproduced(run_script, tmp_path):
    cap = tmp_path / "cap"
    env = dict(os.environ, TRITON_CAPTURE_DIR=str(cap))
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "autotune_capture_patch.py"), str(EXAMPLE),
                           "--", "--steps", "3"], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = cap / "capture_errors.log"
    assert not errors.exists(), errors.read_text()[-3000:]
    events = [json.loads(line) for line in (cap / "autotune.log").read_text().splitlines()]
    launches = [e for e in events if e["event"] == "launch" and e.get("kind") == "triton_jit"]
    names = sorted({e["kernel"] for e in launches})
    print(names)
    assert any("rms_norm" in n for n in names) and any("swiglu" in n for n in names)
    assert any("cross_entropy" in n for n in names)
    for e in launches:
        assert "liger_kernel" in e["launch_site"]["file"], e["launch_site"]
    failed = []
    for e in launches:
        out = tmp_path / f"{Path(e['standalone_file']).stem}.json"
        run = run_script("run_captured_kernel.py", e["standalone_file"], "--json-out", out, timeout=600)
        if run.returncode != 0:
            failed.append((e["kernel"], run.stderr[-800:]))
    assert failed == [], failed


def test_liger_investigation(run_script, tmp_path):
    inv, index = investigate(run_script, tmp_path, EXAMPLE, top=3, steps=10, budget_s=200)
    profile = json.loads((inv / "capture" / "profile" / "profile.json").read_text())
    log = inv / "capture" / "autotune_kernels" / "autotune.log"
    captured = {e["kernel"] for e in map(json.loads, log.read_text().splitlines()) if e.get("kind") == "triton_jit"}
    liger = [k for k in profile["kernels"] if k["name"] in captured]
    print([(k["name"], k["origin"], k["share"]) for k in profile["kernels"][:10]])
    assert liger and all(k["origin"] == "triton" for k in liger)
    assert index["kernels"] and all(s["status"] in ("ok", "skipped") for s in index["steps"]), index["steps"]
