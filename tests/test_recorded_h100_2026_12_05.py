"""The H100 recordings of 2026-12-05 (torch 2.11.0+cu130, Triton 3.6.0, the repo at 3f7f96d), read with
the project's own readers (examples/recorded_h100/README.md):

- default_investigation/gated_mlp_train and default_investigation/large_vocab_ce: investigate.py at its
  defaults, done in 543.4 s and 495.3 s of the 600 s deadline; both library-dominated;
- rewrites/attention_sdpa_mask_s4096: the sdpa arm on a program that gives SDPA a causal attn_mask."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from tko.base.artifact import read_artifact
from tko.verdict import program_evidence
from tko.verdict.trial_evidence import trial_outcome

H100 = ROOT / "examples" / "recorded_h100"
DI = H100 / "default_investigation"
GATED, CE = DI / "gated_mlp_train", DI / "large_vocab_ce"
SDPA_MASK = H100 / "rewrites" / "attention_sdpa_mask_s4096"

CE_RULES = {"triton_red_fused__log_softmax_prepare_softmax_online_0": "library_dominated_small_kernel",
            "triton_red_fused__log_softmax__log_softmax_backward_data_arange_eq_expand_nll_loss_backward_"
            "nll_loss_forward_scalar_tensor_view_where_0": "ceiling_under_cut",
            "triton_red_fused__log_softmax_nll_loss_forward_sub_1": "not_hot"}
GATED_RULES = {"triton_poi_fused_mul_silu_silu_backward_0": "ceiling_under_cut",
               "triton_poi_fused_mul_silu_0": "not_hot"}


@pytest.mark.parametrize("folder, rules, wall_s", [(GATED, GATED_RULES, 543.4), (CE, CE_RULES, 495.3)])
def test_the_default_investigation_ends_inside_its_deadline_and_leaves_every_triton_kernel(folder, rules, wall_s):
    doc = read_artifact(folder / "investigation.json", "investigation")
    assert doc["mode"] == "online" and doc["versions"]["torch"] == "2.11.0"
    assert doc["wall_s"] == wall_s and doc["deadline_s"] == 600.0 and doc["wall_s"] < doc["deadline_s"]
    assert not [s for s in doc["steps"] if s["status"] == "failed"]
    assert doc["program"]["rule"] == "library_dominated"
    assert {k["kernel"]: k["rule"] for k in doc["kernels"]} == rules
    assert {k["verdict"] for k in doc["kernels"]} == {"leave_as_is"}
    trials = read_artifact(folder / "trials" / "trials.json", "remedy_trials")
    assert "H100" in trials["device"]["name"]
    outcome = trial_outcome(trials)
    assert outcome["winner"] is None and not outcome["faster"]     # nothing beat the baseline beyond noise
    assert outcome["what_to_change"].startswith("nothing tried beat the baseline beyond run-to-run noise")


def test_the_gated_mlp_plan_fit_and_every_arm_read_its_caches():
    trials = read_artifact(GATED / "trials" / "trials.json", "remedy_trials")
    assert trials["budget_s"] == 440.0 and not trials["plan"]["dropped"]
    ran = {a["name"]: a for a in trials["arms"] if a["status"] == "ok"}
    assert set(ran) == {"baseline", "coordinate_descent", "max_autotune_no_cudagraphs", "cudagraphs",
                        "eager_fallback", "gate_up_fused"}
    base = ran["baseline"]["first_step_cached_s"]
    for name in ("coordinate_descent", "max_autotune_no_cudagraphs", "cudagraphs", "gate_up_fused"):
        # a later run reads the arm's compile cache: its first step near the baseline's, far from its cold one
        a = ran[name]
        assert a["first_step_cached_s"] < 1.2 * base and a["first_step_cached_s"] < 0.5 * a["first_step_s"], a


def test_the_cross_entropy_plan_ran_the_arms_the_step_s_facts_proposed():
    trials = read_artifact(CE / "trials" / "trials.json", "remedy_trials")
    plan = trials["plan"]
    assert plan["estimate_s"] > trials["budget_s"] == 428.0
    assert {"max_autotune_no_cudagraphs", "eager_fallback", "ce_chunked"} <= set(plan["kept"])
    arms = {a["name"]: a for a in trials["arms"]}
    ce = arms["ce_chunked"]
    assert ce["status"] == "ok" and ce["x_baseline"] == pytest.approx(0.564, abs=0.001) and ce["beyond_noise"]
    # the memory remedy: 28 % less peak memory
    assert ce["peak_memory_mb"] / arms["baseline"]["peak_memory_mb"] == pytest.approx(0.718, abs=0.001)
    # recorded before the tail fix: the whole tensor's worst difference sat inside the bound
    assert "not a tail (trial_outputs_tail): worst |diff| 1.19e-07" in ce["outputs"]["reason"]
    assert "164 / 262668288" in ce["outputs"]["reason"] and "2.0489096641540527e-08" in ce["outputs"]["reason"]


def test_the_recorded_profile_gives_the_program_verdict_again():
    for folder, share in ((GATED, 0.789), (CE, 0.843)):
        profile = json.loads((folder / "capture" / "profile" / "profile.json").read_text())
        trials = read_artifact(folder / "trials" / "trials.json", "remedy_trials")
        program = program_evidence.program_decision(profile, "profile.json", trials=trials)
        assert program["rule"] == "library_dominated", program["fired"]
        assert program["facts"]["library_share"]["value"] == pytest.approx(share, abs=0.001)


def test_the_sdpa_mask_row_took_is_causal_and_won_with_outputs_equal():
    trials = read_artifact(SDPA_MASK / "trials.json", "remedy_trials")
    arms = {a["name"]: a for a in trials["arms"]}
    sdpa = arms["sdpa"]
    assert sdpa["replaced"][-1].endswith("1 with is_causal=True (the causal mask asserted on every call)")
    assert sdpa["outputs"]["result"] == "equal" and sdpa["beyond_noise"]
    assert sdpa["x_baseline"] == pytest.approx(1.193, abs=0.001)
    assert sdpa["peak_memory_mb"] < arms["baseline"]["peak_memory_mb"]
    # its later runs read the compile cache: first step within 10 % of the baseline's
    assert sdpa["first_step_cached_s"] < 1.1 * arms["baseline"]["first_step_cached_s"]
    assert trial_outcome(trials)["winner"].name == "sdpa"
