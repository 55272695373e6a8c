"""eager_fallback_ab.py on a real torch.compile repro (dynamo with the eager backend, on the CPU)."""

from __future__ import annotations

import json

import pytest

from tko.base import contracts



@pytest.mark.slow
def test_ab_runs_both_arms_checks_outputs_and_conforms(run_script, fixtures_dir, tmp_path):
    repro = fixtures_dir / "repros" / "ab_repro.py"
    out = tmp_path / "ab.json"
    proc = run_script("eager_fallback_ab.py", "--disable", "__main__:region", "--runs", "2",
                      "--json-out", out, "--markdown-out", tmp_path / "ab.md",
                      "--", "python", repro, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert contracts.contract_problems(doc) == []
    compiled, fallback = doc["arms"]
    assert (compiled["name"], fallback["name"]) == ("compiled", "fallback")
    assert compiled["runs"] == fallback["runs"] == 2
    assert compiled["metric_from"] == "repro" and all(ms > 0 for ms in compiled["ms"] + fallback["ms"])
    assert doc["output_check"] == {"checked": True, "passed": True,
                                   "reason": "outputs equal within torch.testing tolerances"}
    assert doc["speedup_fallback_over_compiled"] == pytest.approx(
        compiled["median_ms"] / fallback["median_ms"])
    assert "Speedup of the fallback" in (tmp_path / "ab.md").read_text()


@pytest.mark.slow
def test_ab_catches_a_fallback_that_changes_results(run_script, fixtures_dir, tmp_path):
    repro = fixtures_dir / "repros" / "ab_repro.py"
    out = tmp_path / "ab.json"
    proc = run_script("eager_fallback_ab.py", "--disable", "__main__:region", "--runs", "1",
                      "--json-out", out, "--", "python", repro, cwd=tmp_path, env={"AB_BREAK": "1"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["output_check"]["passed"] is False
    assert "OUTPUTS DIFFER" in doc["verdict"]


def test_ab_without_metric_line_uses_wall_time_and_says_so(run_script, fixtures_dir, tmp_path):
    repro = fixtures_dir / "repros" / "ab_repro.py"
    out = tmp_path / "ab.json"
    proc = run_script("eager_fallback_ab.py", "--disable", "__main__:region", "--runs", "1",
                      "--json-out", out, "--", "python", repro, cwd=tmp_path, env={"AB_NO_METRIC": "1"})
    assert proc.returncode == 0, proc.stderr
    arms = json.loads(out.read_text())["arms"]
    assert all(a["metric_from"] == "process wall time (includes compile)" for a in arms)


@pytest.mark.slow
@pytest.mark.parametrize("args,msg", [
    (["--disable", "__main__:nope"], "defines or imports no top-level function or class 'nope'"),
    (["--disable", "no_such_module_xyz:f"], "No module named 'no_such_module_xyz'"),
    (["--disable", "justaname"], "expected module:Name"),
    ([], "name at least one region"),
])
def test_bad_targets_are_one_line_exit_2(run_script, fixtures_dir, tmp_path, args, msg):
    repro = fixtures_dir / "repros" / "ab_repro.py"
    proc = run_script("eager_fallback_ab.py", *args, "--runs", "1", "--json-out", tmp_path / "ab.json",
                      "--", "python", repro, cwd=tmp_path)
    assert proc.returncode == 2
    assert msg in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ab.json").exists()


def test_missing_repro_is_exit_2(run_script, tmp_path):
    proc = run_script("eager_fallback_ab.py", "--disable", "__main__:f", "--json-out", tmp_path / "a.json",
                      "--", "python", tmp_path / "nope.py", cwd=tmp_path)
    assert proc.returncode == 2 and "not a Python script file" in proc.stderr


def test_a_wide_spread_says_the_ab_cannot_decide():
    from tko.remedies.fallback_ab import spread_advice

    # the H200 A/B of examples/recorded_h200/dynamic_shapes: 0.666x inside a 2.36x spread
    assert "too wide to decide" in spread_advice("no difference beyond run-to-run spread", 2.364)
    assert spread_advice("no difference beyond run-to-run spread", 1.05) is None
    assert spread_advice("fallback faster", 2.0) is None


def test_a_main_target_imported_from_the_scripts_own_module_is_disabled(tmp_path):
    """The model code's frames name ``HandAttention.forward`` of examples/attention_by_hand, a
    class the script imports from its model.py: ``__main__:HandAttention.forward`` patches it there."""
    import subprocess
    import sys

    from conftest import ROOT

    (tmp_path / "model.py").write_text("class Block:\n    def forward(self, x):\n        return x + 1\n")
    (tmp_path / "step.py").write_text(
        "import sys\nfrom model import Block as Block\n"
        "print(getattr(Block.forward, '_torchdynamo_disable', False), Block().forward(1))\n")
    bootstrap = ROOT / "scripts" / "tko" / "remedies" / "fallback_bootstrap.py"
    proc = subprocess.run([sys.executable, str(bootstrap), "--disable", "__main__:Block.forward",
                           str(tmp_path / "step.py")], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "2"]
    proc = subprocess.run([sys.executable, str(bootstrap), "--disable", "__main__:Other.forward",
                           str(tmp_path / "step.py")], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 3 and "defines or imports no top-level function or class 'Other'" in proc.stderr
