"""The investigation's "Measured" line of a rewrite on the H200 recording of examples/attention_by_hand:
the sdpa arm halved peak memory and left the step at 0.998x, because the step is host-bound."""

from __future__ import annotations

import json

from conftest import ROOT
from tko.chains import rewrites
from tko.verdict import step_breakdown

REC = ROOT / "examples" / "recorded_h200" / "rewrites" / "attention_by_hand"


def _found(trials: dict) -> dict:
    arms = {a["name"]: a for a in trials["arms"]}
    sdpa, base = arms["sdpa"], arms["baseline"]
    return {"id": "attention_by_hand", "pattern": "p", "found_by": [], "replacement": "r", "after": "a",
            "conditions": "c", "arm": "sdpa", "source": "s",
            "measured": {"arm": "sdpa", "status": sdpa["status"], "x_baseline": sdpa["x_baseline"],
                         "beyond_noise": sdpa["beyond_noise"], "outputs": sdpa["outputs"]["result"],
                         "median_ms": sdpa["median_ms"], "baseline_ms": base["median_ms"],
                         "peak_memory_mb": sdpa["peak_memory_mb"], "baseline_peak_memory_mb": base["peak_memory_mb"]}}


def test_a_rewrite_that_cuts_memory_in_a_host_bound_step_says_why_the_step_did_not_move():
    step = step_breakdown.summarize(json.loads((REC / "default_investigation_profile.json").read_text()), "profile.json")
    assert step["host_bound"] and 0.25 < step["timeline"]["busy_share"] < 0.32
    found = _found(json.loads((REC / "trials.json").read_text()))
    text = "\n".join(rewrites.markdown([found], "python step.py", step))
    assert "0.998x (2.23 -> 2.235 ms/step, inside run-to-run noise)" in text
    assert "peak memory 732 -> 349 MiB" in text
    assert "The step is host-bound (the GPU busy 29% of the window)" in text
    # without the step, or when the arm is a measured win, no such sentence
    assert "host-bound" not in "\n".join(rewrites.markdown([found], "python step.py"))
    found["measured"].update(x_baseline=1.4, beyond_noise=True)
    assert "host-bound" not in "\n".join(rewrites.markdown([found], "python step.py", step))
