"""compare_profiles.py: before/after of two ranked profiles, per step, on real H200 profiles."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, ROOT
from tko.read import profile_compare
from tko.base.errors import InputError

RECORDED = ROOT / "examples" / "recorded_h200"


def doc(kernels, kernel_time, dispatches, by_origin=None, device="NVIDIA H200"):
    return {"schema": "kernel_profile/1", "device": [{"name": device}],
            "summary": {"kernel_time_us": kernel_time, "dispatches": dispatches,
                        "time_by_origin_us": by_origin or {}},
            "ranking": [{"name": n, "origin": o, "calls": c, "total_us": t} for n, o, c, t in kernels]}


def test_a_rewrite_that_fuses_launches_shows_as_gone_new_and_per_step_time():
    # 64 tiny kernels over 10 steps replaced by one batched kernel over 20 steps
    before = doc([(f"triton_poi_fused_abs_{i}", "triton", 10, 11.0) for i in range(64)], 64 * 11.0, 640,
                 {"triton": 704.0})
    after = doc([("triton_poi_fused_abs_cat_0", "triton", 20, 60.0)], 60.0, 20, {"triton": 60.0})
    cmp = profile_compare.compare(before, after, steps_before=10, steps_after=20)
    assert cmp["basis"] == "per step"
    assert cmp["totals"]["kernel_time_us"] == {"before": 70.4, "after": 3.0, "ratio": pytest.approx(3.0 / 70.4)}
    assert cmp["totals"]["dispatches"] == {"before": 64, "after": 1}
    assert cmp["counts"] == {"both": 0, "removed": 64, "added": 1}
    first = cmp["kernels"][0]
    assert first["status"] == "added" and first["after_us"] == 3.0 and first["delta_us"] == 3.0
    assert all(r["delta_us"] == -1.1 for r in cmp["kernels"][1:])
    assert cmp["summary"].startswith("GPU kernel time (per step) 70.4 -> 3.0 us (0.043x); launches 64 -> 1")
    assert cmp["totals"]["by_origin_us"]["triton"] == {"before_us": 70.4, "after_us": 3.0}


def test_totals_without_steps_and_a_device_mismatch_are_said():
    cmp = profile_compare.compare(doc([("k", "triton", 1, 5.0)], 5.0, 1),
                                  doc([("k", "triton", 1, 4.0)], 4.0, 1, device="BW1000"))
    assert cmp["basis"] == "total" and cmp["kernels"][0]["ratio"] == pytest.approx(0.8)
    assert any("different devices" in n for n in cmp["notes"])
    assert any("no step counts given" in n for n in cmp["notes"])
    with pytest.raises(InputError):
        profile_compare.compare(doc([], 0, 0), doc([], 0, 0), steps_before=0)


def test_two_h200_runs_of_the_same_program_agree_per_launch(run_script, tmp_path):
    """pointwise_chain profiled on two days (13 and 23 launches of its kernel): per launch the Triton
    kernel time agrees within 3 % (49.4 vs 50.2 us)."""
    fixture = tmp_path / "fixture.json"
    proc = run_script("profile_kernels.py", "--trace", FIXTURES / "inductor_h200" / "pointwise_chain" / "trace.json.gz",
                      "--json-out", fixture)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "cmp.json"
    proc = run_script("compare_profiles.py", fixture, RECORDED / "pointwise_chain" / "profile" / "profile.json",
                      "--steps-before", "13", "--steps-after", "23", "--json-out", out,
                      "--markdown-out", tmp_path / "cmp.md")
    assert proc.returncode == 0, proc.stderr
    cmp = json.loads(out.read_text())
    assert cmp["schema"] == "profile_comparison/1" and cmp["counts"] == {"both": 2, "removed": 0, "added": 0}
    (triton,) = [r for r in cmp["kernels"] if r["origin"] == "triton"]
    assert triton["name"] == "triton_poi_fused_add_gelu_mul_0" and triton["before_calls"] == triton["after_calls"] == 1
    assert triton["ratio"] == pytest.approx(1.0, abs=0.03)
    assert "triton_poi_fused_add_gelu_mul_0" in (tmp_path / "cmp.md").read_text()
    from tko.base.contracts import contract_problems

    assert contract_problems(cmp) == []


def test_bad_inputs_are_one_line_exit_2(run_script, tmp_path):
    prof = RECORDED / "pointwise_chain" / "profile" / "profile.json"
    wrong = RECORDED / "pointwise_chain" / "triton_env.json"
    proc = run_script("compare_profiles.py", prof, wrong, "--json-out", tmp_path / "x.json")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    proc = run_script("compare_profiles.py", prof, prof, "--steps-after", "0", "--json-out", tmp_path / "x.json")
    assert proc.returncode == 2 and "at least 1" in proc.stderr
    assert not (tmp_path / "x.json").exists()
