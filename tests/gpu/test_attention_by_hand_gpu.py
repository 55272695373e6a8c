"""GPU check of the step breakdown and the attention rewrite (skipped without a GPU), on
examples/attention_by_hand: the investigation finds the hand-written attention, and the sdpa arm
measures F.scaled_dot_product_attention inside the unchanged program."""

from __future__ import annotations

import json

import pytest


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("script", ["step.py", "hf_step.py"])   # model.py's form; Hugging Face's eager form
def test_sdpa_arm_replaces_and_measures_hand_written_attention(run_script, tmp_path, script):
    from conftest import ROOT

    out = tmp_path / "trials"
    proc = run_script("try_remedies.py", "--out", out, "--runs", "2", "--timeout", "600", "--arms", "sdpa",
                      "--", "python", ROOT / "examples" / "attention_by_hand" / script, "--train", "--steps", "20",
                      cwd=tmp_path, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "trials.json").read_text())
    arms = {a["name"]: a for a in doc["arms"]}
    sdpa = arms["sdpa"]
    print(json.dumps({n: {k: a.get(k) for k in ("status", "median_ms", "x_baseline", "outputs", "peak_memory_mb",
                                                 "replaced")} for n, a in arms.items()}, indent=1))
    assert sdpa["status"] == "ok", sdpa
    assert all(r and r.startswith("replaced ") and not r.startswith("replaced 0") for r in sdpa["replaced"])
    assert sdpa["outputs"]["result"] == "equal", sdpa["outputs"]
    # the L x L scores are gone: the H200 run of 2026-12-04 went from 732 to 349 MiB. Its step time did
    # not move (0.998x): at b8 s1024 the step is host-bound (GPU busy 29 % of the window, CUDA graphs
    # 1.37x), so no speed is asserted here; a verdict must still not call it a win unless it is one
    assert sdpa["peak_memory_mb"] < 0.75 * arms["baseline"]["peak_memory_mb"]
    if not (sdpa["x_baseline"] > 1.0 and sdpa["beyond_noise"]):
        assert doc.get("winner") != "sdpa"


@pytest.mark.gpu
@pytest.mark.slow
def test_investigation_leads_with_the_step_and_shows_the_attention_rewrite(run_script, tmp_path):
    from conftest import ROOT

    inv = tmp_path / "inv"
    proc = run_script("investigate.py", "--out", inv, "--trials-runs", "2", "--trials-budget-s", "300", "--top", "2",
                      "--", "python", ROOT / "examples" / "attention_by_hand" / "step.py", "--steps", "20",
                      cwd=tmp_path, timeout=3000)
    print(proc.stdout[-6000:])
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    index = json.loads((inv / "investigation.json").read_text())
    step = index["step"]
    assert sum(c["share"] for c in step["classes"]) == pytest.approx(1.0, abs=1e-3)
    assert step["timeline"] and 0 < step["timeline"]["busy_share"] <= 1.0
    found = {r["id"]: r for r in index["rewrites"]}
    att = found["attention_by_hand"]
    assert any(f["how"] == "model_code" and f["file"].endswith("model.py") for f in att["found_by"])
    md = (inv / "investigation.md").read_text()
    assert md.index("## Where the step's time goes") < md.index("## Model-level rewrites")
    assert "F.scaled_dot_product_attention" in md
    arms = {a["name"]: a for a in index["trials"]["arms"]}
    assert "sdpa" in arms and arms["sdpa"]["status"] != "skipped"
    # a measured sdpa win decides the program; no kernel is told to tune the softmax it removes
    if index["trials"]["winner"] == "sdpa":
        assert index["program"]["rule"] == "remedy_measured_faster_program"
        assert att["measured"]["x_baseline"] > 1.0
