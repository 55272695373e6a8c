"""GPU check of try_remedies.py (skipped without a GPU): the one-flag remedies on pointwise_chain."""

from __future__ import annotations

import json

import pytest


@pytest.mark.gpu
@pytest.mark.slow
def test_pointwise_chain_trials_name_a_consistent_winner(run_script, tmp_path):
    from conftest import ROOT

    out = tmp_path / "trials"
    proc = run_script("try_remedies.py", "--out", out, "--runs", "2", "--timeout", "600",
                      "--arms", "coordinate_descent,max_autotune_no_cudagraphs,cudagraphs,eager_fallback",
                      "--", "python", ROOT / "examples" / "pointwise_chain.py", "--steps", "20",
                      cwd=tmp_path, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "trials.json").read_text())
    arms = {a["name"]: a for a in doc["arms"]}
    assert list(arms) == ["baseline", "coordinate_descent", "max_autotune_no_cudagraphs", "cudagraphs",
                          "eager_fallback"]
    # --runs 2 each; extra rounds (--max-runs) may add runs of the baseline and of undecided arms
    runs = {n: sum(o.split("#")[0] == n and not o.endswith("#0") for o in doc["order"]) for n in arms}
    assert doc["metric_from"] == "repro" and all(len(a["ms"]) == runs[n] >= 2 for n, a in arms.items()
                                                 if a["status"] == "ok")
    assert arms["baseline"]["status"] == "ok" and arms["cudagraphs"]["status"] != "skipped"
    good = [a for a in arms.values() if a["name"] != "baseline" and a["status"] == "ok" and a["beyond_noise"]
            and a["x_baseline"] > 1 and a["outputs"]["result"] == "equal"]
    assert doc["winner"] == (max(good, key=lambda a: a["x_baseline"])["name"] if good else None)
    if doc["winner"]:
        assert f"{arms[doc['winner']]['x_baseline']:.2f}x" in doc["what_to_change"]
    else:
        assert doc["what_to_change"].startswith("nothing beat the baseline")
    assert doc["what_to_change"] in proc.stdout
