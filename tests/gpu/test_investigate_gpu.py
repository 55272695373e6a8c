"""On an H200: investigate.py online on the example repros gives the decision that the H200
recordings pin (examples/recorded_h200/<example>, its remedy trials in examples/recorded_h200/trials,
the speed-of-light table in tests/fixtures/sol_h200/table), and sweeps what it says to tune.

The online run also runs the remedy trials (try_remedies.py) and speed_of_light.py on the GPU, and
the reports decide from those first (references/decision_rules.yaml):

* a trial arm that beats the baseline beyond noise decides a hot kernel and the program
  (remedy_measured_faster*, priorities 1-3); where the recordings hold trials of the example, the
  winner they found is asserted; where they hold none, the kernel's expectation is the recorded
  per-kernel decision when the trials find no winner, and the winner's remedy rule when they do;
* speed_of_light.py timed on the GPU and "at_floor" gives sol_at_floor (priority 28) before
  at_copy_bandwidth (30), which the offline replay of the recordings gives (tests/test_investigate.py).
"""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

ANY = object()   # the recordings hold no trials of this example: the run's own trials decide

# example: (verdict, rule) of the hottest kernel without a trial winner, the trial winner the
# recordings pin (None: nothing won; ANY: not recorded), the program's (verdict, rule) without a winner
EXPECTED = {
    # 3714 GB/s standalone of a 4222 GB/s copy peak; speed of light 0.0525 ms against a copy floor of
    # 0.0474 ms (1.11x, at_floor in both repetitions: tests/fixtures/sol_h200/table/call2). No trials.
    "pointwise_chain": (("leave_as_is", "sol_at_floor"), ANY, (None, None)),
    # atomic index_add at skewed indices (rule priority 40, before the speed of light's
    # access_pattern_bound at 85: sol_h200/table/call2 measured it 8.9x its copy floor). No trials.
    "scatter_index_add": (("rewrite_model", "atomic_or_scatter_heavy"), ANY, (None, None)),
    # 0.108 ms standalone against the byte model's copy floor of 0.095 ms (1.14x: at_floor); the trials
    # (trials/row_reduction) found nothing beyond the baseline's +-0.4 % (coordinate_descent 1.000x).
    "row_reduction": (("leave_as_is", "sol_at_floor"), None, (None, None)),
    # each of the 64 kernels is ~1.5 % of GPU time (not hot); the trials (trials/tiny_launches) found
    # CUDA graphs 4.76x, 3.4x past the baseline's spread: that decides the program.
    "tiny_launches": (("leave_as_is", "not_hot"), "cudagraphs", ("rewrite_model", "many_tiny_launches")),
}


def _remedy_decision(arm: str) -> tuple[str, str]:
    """(verdict, rule) that a winning remedy arm gives, from the rules file's remedy_verdicts."""
    import yaml
    from conftest import ROOT

    rules = yaml.safe_load((ROOT / "references" / "decision_rules.yaml").read_text(encoding="utf-8"))
    rule = {"tune_triton": "remedy_measured_faster", "disable_compiled_region": "remedy_measured_faster_eager",
            "rewrite_model": "remedy_measured_faster_program"}
    (verdict,) = [v for v, arms in rules["remedy_verdicts"].items() if arm in arms]
    return verdict, rule[verdict]


@pytest.fixture(scope="module")
def h200():
    import torch
    name = torch.cuda.get_device_name(0)
    if "H200" not in name:
        pytest.skip(f"the expectations are the H200 recordings; this GPU is {name}")


@pytest.mark.parametrize("example", list(EXPECTED))
def test_online_investigation(run_script, tmp_path, h200, example):
    from conftest import ROOT

    kernel_expected, winner_expected, program_expected = EXPECTED[example]
    # trials of 2 runs within 200 s: one example fits a 10-minute device call (the defaults, 3 runs
    # in 900 s, did not finish 2 examples in 185 s or 1 in 230 s on the H200)
    proc = run_script("investigate.py", "--out", tmp_path / "inv", "--top", "2", "--probe-arch", "none",
                      "--trials-runs", "2", "--trials-budget-s", "200",
                      "--", "python", ROOT / "examples" / f"{example}.py", "--steps", "20",
                      cwd=tmp_path, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    index = json.loads((tmp_path / "inv" / "investigation.json").read_text())
    print(example, [(k["kernel"], k["verdict"], k["rule"], k["share"]) for k in index["kernels"]], index["program"])
    assert [s["status"] for s in index["steps"]] == ["ok"] * len(index["steps"]), index["steps"]
    winner = json.loads((tmp_path / "inv" / "trials" / "trials.json").read_text())["winner"]
    if winner_expected is not ANY:
        assert winner == winner_expected
    first = index["kernels"][0]
    hot = kernel_expected[1] != "not_hot"
    remedy = _remedy_decision(winner) if winner else None
    assert (first["verdict"], first["rule"]) == (remedy if remedy and hot else kernel_expected)
    program = index["program"]
    assert (program["verdict"], program["rule"]) == (remedy or program_expected)
