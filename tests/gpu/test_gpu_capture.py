"""GPU check of the capture path (skipped without a GPU): one compiled example under capture,
then its standalone kernel file through run_captured_kernel.py.  The full measurement with the
table (all examples, overhead ratio, standalone vs profiler) is tests/gpu/drivers/run_gpu_suite.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
@pytest.mark.slow
def test_pointwise_chain_capture_and_standalone(tmp_path, run_script):
    cap = tmp_path / "cap"
    env = dict(os.environ, TRITON_CAPTURE_DIR=str(cap), TRITON_CAPTURE_FORCE_RETUNE="1",
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "autotune_capture_patch.py"), "--",
                           str(ROOT / "examples" / "pointwise_chain.py"), "--steps", "5", "--device", "cuda"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (cap / "capture_errors.log").exists()
    events = [json.loads(line) for line in (cap / "autotune.log").read_text().splitlines()]
    launches = [e for e in events if e["event"] == "launch"]
    assert launches and {"kernel", "autotune", "launch"} <= {e["event"] for e in events}
    for launch in launches:
        out = tmp_path / f"{launch['kernel']}.json"
        run = run_script("run_captured_kernel.py", launch["standalone_file"], "--all-configs", "--timer", "all",
                         "--json-out", out, timeout=600)
        assert run.returncode == 0, run.stderr
        doc = json.loads(out.read_text())
        assert doc["status"] == "ok" and doc["best"]["ms"] > 0
        graph = [r for r in doc["results"] if r["timer"].endswith("cudagraph")]
        # launched on the current stream, a CUDA graph replays the kernel: same order of time
        assert all(r["ms"] > 0.25 * doc["best"]["ms"] for r in graph if r["best"])
        by_timer = {r["timer"]: r["ms"] for r in doc["results"] if r["best"] and r["ok"]}
        assert set(by_timer) == {"triton.testing.do_bench", "triton.testing.do_bench_cudagraph",
                                 "torch.profiler", "torch.profiler.l2_flushed"}
        # a 200 MB streaming kernel does not fit in L2: warm and flushed device times agree, and
        # the device time is at most the event-timed one (which adds launch latency)
        warm, cold = by_timer["torch.profiler"], by_timer["torch.profiler.l2_flushed"]
        if doc["best"]["bytes"] and doc["best"]["bytes"] > 100e6:
            assert abs(warm / cold - 1) < 0.1
            assert warm <= 1.05 * by_timer["triton.testing.do_bench"]
