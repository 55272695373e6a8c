"""GPU check (skipped without a GPU): the Triton tutorial's autotuned fp16 matmul, recorded on an
H200, through speed_of_light.py with its run step's times (--kernel-run), and torch.matmul of its
operand shapes timed beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "recorded_h200" / "triton_tutorials" / "autotune_kernels" / "matmul_kernel.py"


@pytest.mark.gpu
@pytest.mark.slow
def test_the_tutorial_matmul_against_the_library_gemm_of_its_shapes(tmp_path, run_script):
    run = run_script("run_captured_kernel.py", MATMUL, "--all-configs", "--timer", "do_bench,profiler_flushed",
                     "--json-out", tmp_path / "run.json", timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    sol = run_script("speed_of_light.py", MATMUL, "--kernel-run", tmp_path / "run.json", "--json-out",
                     tmp_path / "sol.json", "--twin-out", tmp_path / "twin.py", timeout=600)
    assert sol.returncode == 0, sol.stderr[-2000:]
    doc = json.loads((tmp_path / "sol.json").read_text())
    print(json.dumps({"numbers": doc["classification"]["numbers"], "library": doc["runs"]["library_gemm"],
                      "notes": doc["notes"]}, default=str)[:3000])
    assert doc["runs"]["kernel"]["source"] == str(tmp_path / "run.json")      # not timed a second time
    lib = doc["runs"]["library_gemm"]
    assert lib["shapes"]["m"] == lib["shapes"]["n"] == lib["shapes"]["k"] == 4096 and lib["ms"] > 0
    assert doc["classification"]["class"] == "matmul_bound"
    assert 0.2 < doc["classification"]["numbers"]["kernel_over_library"] < 5
