"""On a GPU: investigate.py online on the example repros gives a report whose decision matches
what was recorded on an H200 (examples/recorded_h200), and sweeps what it says to tune."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.mark.parametrize("example,verdicts", [
    ("pointwise_chain", {"leave_as_is", "tune_triton"}),   # at or near copy bandwidth
    ("scatter_index_add", {"rewrite_model"}),
    ("row_reduction", {"leave_as_is", "tune_triton", "disable_compiled_region"}),
    ("tiny_launches", {"rewrite_model", "leave_as_is"}),
])
def test_online_investigation(run_script, tmp_path, example, verdicts):
    from conftest import ROOT

    proc = run_script("investigate.py", "--out", tmp_path / "inv", "--top", "2", "--probe-arch", "none",
                      "--", "python", ROOT / "examples" / f"{example}.py", "--steps", "20",
                      cwd=tmp_path, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    index = json.loads((tmp_path / "inv" / "investigation.json").read_text())
    assert [s["status"] for s in index["steps"]] == ["ok"] * len(index["steps"]), index["steps"]
    assert index["kernels"][0]["verdict"] in verdicts
    print(example, [(k["kernel"], k["verdict"], k["rule"], k["share"]) for k in index["kernels"]])
