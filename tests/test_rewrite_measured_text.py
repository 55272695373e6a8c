"""The investigation's "Measured" line of a rewrite on the H200 recording of examples/attention_by_hand:
the sdpa arm halved peak memory and left the step at 0.998x, because the step is host-bound."""

from __future__ import annotations

import json

from conftest import ROOT
from tko.chains import rewrites
from tko.verdict import step_breakdown

REC = ROOT / "examples" / "recorded_h200" / "rewrites" / "attention_by_hand"


def _found(trials_path) -> dict:
    return {"id": "attention_by_hand", "pattern": "p", "found_by": [], "replacement": "r", "after": "a",
            "conditions": "c", "arm": "sdpa", "source": "s", "measured": rewrites._measured("sdpa", trials_path)}


def test_a_rewrite_that_cuts_memory_in_a_host_bound_step_says_why_the_step_did_not_move():
    step = step_breakdown.summarize(json.loads((REC / "default_investigation_profile.json").read_text()), "profile.json")
    assert step["host_bound"] and 0.25 < step["timeline"]["busy_share"] < 0.32
    found = _found(REC / "trials.json")
    text = "\n".join(rewrites.markdown([found], "python step.py", step))
    assert "0.998x (2.23 -> 2.235 ms/step, inside run-to-run noise)" in text
    assert "outputs equal; peak memory 732 -> 349 MiB" in text and found["measured"]["outputs"] == "equal"
    assert "The step is host-bound (the GPU busy 29% of the window)" in text
    # without the step, or when the arm is a measured win, no such sentence
    assert "host-bound" not in "\n".join(rewrites.markdown([found], "python step.py"))
    found["measured"].update(x_baseline=1.4, beyond_noise=True)
    assert "host-bound" not in "\n".join(rewrites.markdown([found], "python step.py", step))


def test_a_stacked_arm_of_the_rewrite_is_reported_beside_it(tmp_path):
    doc = json.loads((REC / "trials.json").read_text())
    doc["arms"].append({"name": "cudagraphs+sdpa", "status": "ok", "x_baseline": 1.62, "beyond_noise": True,
                        "outputs": {"result": "equal", "reason": "r"}})
    path = tmp_path / "trials.json"
    path.write_text(json.dumps(doc))
    text = rewrites._measured_text(_found(path), "python step.py")
    assert "Stacked with the winning setting, arm `cudagraphs+sdpa`: 1.620x (beyond run-to-run noise), outputs equal." in text


def test_a_stacked_winner_decides_as_its_rewrite():
    from tko.verdict import program_evidence  # noqa: F401  (the rules' reader)
    from tko.verdict.trial_evidence import trial_facts

    doc = json.loads((REC / "trials.json").read_text())
    base = doc["arms"][0]
    doc["arms"].append({**doc["arms"][1], "name": "cudagraphs+sdpa", "median_ms": base["median_ms"] / 1.6,
                        "x_baseline": 1.6, "beyond_noise": True, "change": "set cudagraphs; and sdpa",
                        "outputs": {"result": "equal", "reason": "r"}})
    facts = trial_facts(doc, "trials.json")
    assert facts["remedy_winner"].value == "sdpa" and "cudagraphs+sdpa" in facts["remedy_winner"].source
    assert facts["remedy_change"].value == "set cudagraphs; and sdpa"


def test_an_arm_that_did_not_apply_says_so_and_no_speed(tmp_path):
    # the H200 cross-entropy step: the sdpa arm replaced nothing and its run read 0.991x, the unchanged
    # program again; the report gave that as a measured speed
    doc = json.loads((REC / "trials.json").read_text())
    sdpa = next(a for a in doc["arms"] if a["name"] == "sdpa")
    sdpa.update(status="not applied", x_baseline=0.991, beyond_noise=True,
                reason="no attention pattern was replaced: replaced 0 attention pattern(s) in 1 graph(s)")
    path = tmp_path / "trials.json"
    path.write_text(json.dumps(doc))
    text = rewrites._measured_text(_found(path), "python step.py")
    assert text == ("arm `sdpa`: not applied (no attention pattern was replaced: replaced 0 attention pattern(s) "
                    "in 1 graph(s)).")
