"""The H200 recordings of 2026-12-05 (torch 2.11.0+cu130, Triton 3.6.0, the repo at bf47971), read
with the project's own readers:

- examples/recorded_h200/default_investigation/large_vocab_ce_deadline540: investigate.py
  --deadline-s 540 on examples/large_vocab_ce.py, done in 558.3 s; library GEMMs 85 %;
- examples/recorded_h200/default_investigation/gated_mlp_train_cut: investigate.py at its defaults on
  examples/gated_mlp.py --train, cut at 583 s by the device's time limit (no investigation.json);
- examples/recorded_h200/rewrites/third_call_hf_eager: the sdpa arm on the hand-written attention
  and on Hugging Face's eager form, train, b2 s4096."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from conftest import ROOT
from tko.base.artifact import read_artifact
from tko.chains.trial_plan import load_facts
from tko.remedies.fallback_ab import DEFAULT_METRIC
from tko.verdict import program_evidence
from tko.verdict.trial_evidence import trial_outcome

DI = ROOT / "examples" / "recorded_h200" / "default_investigation"
CE = DI / "large_vocab_ce_deadline540"
GATED = DI / "gated_mlp_train_cut"
RW = ROOT / "examples" / "recorded_h200" / "rewrites" / "third_call_hf_eager"

CE_FWD = "triton_red_fused__log_softmax_prepare_softmax_online_0"
CE_BWD = ("triton_red_fused__log_softmax__log_softmax_backward_data_arange_eq_expand_nll_loss_backward_"
          "nll_loss_forward_scalar_tensor_view_where_0")
CE_NLL = "triton_red_fused__log_softmax_nll_loss_forward_sub_1"
CE_RULES = {CE_FWD: "library_dominated_small_kernel", CE_BWD: "ceiling_under_cut", CE_NLL: "not_hot"}
GATED_KERNELS = ("triton_poi_fused_mul_silu_silu_backward_0", "triton_poi_fused_mul_silu_0")


def _json(path):
    return json.loads(path.read_text())


# ----------------------------------------------------------------------------- large_vocab_ce_deadline540

def test_the_cross_entropy_investigation_is_library_dominated_and_tunes_no_kernel():
    doc = read_artifact(CE / "investigation.json", "investigation")
    assert doc["mode"] == "online" and doc["versions"]["torch"] == "2.11.0" and doc["versions"]["triton"] == "3.6.0"
    program = doc["program"]
    assert program["rule"] == "library_dominated" and program["verdict"] == "rewrite_model"
    assert program["facts"]["library_share"]["value"] == pytest.approx(0.85, abs=0.005)
    assert program["facts"]["triton_share"]["value"] == pytest.approx(0.149, abs=0.001)
    assert program["facts"]["host_bound"]["value"] is False
    # every Triton kernel left, none told to tune, in the index and in its own report
    assert "tune_triton" not in {k["verdict"] for k in doc["kernels"]}
    assert {k["kernel"]: k["rule"] for k in doc["kernels"]} == CE_RULES
    for kernel in doc["kernels"]:
        assert kernel["verdict"] == "leave_as_is"
        report = read_artifact(CE / kernel["dir"] / "report.json", "investigation_report")
        assert report["decision"]["verdict"] == "leave_as_is"
        assert report["decision"]["rule"] == CE_RULES[kernel["kernel"]]
        assert report["program"]["rule"] == "library_dominated"
    # the run: 558.3 s against its 540 s deadline, the trials 398 s of it
    assert doc["wall_s"] == 558.3 and doc["deadline_s"] == 540.0 and doc["wall_s"] > doc["deadline_s"]
    trials_step = next(s for s in doc["steps"] if s["name"] == "trials")
    assert trials_step["status"] == "ok" and trials_step["seconds"] == pytest.approx(398.03)
    assert not [s for s in doc["steps"] if s["status"] == "failed"]


def test_the_recorded_profile_and_trials_give_the_same_program_verdict_again():
    profile = _json(CE / "capture" / "profile" / "profile.json")
    trials = read_artifact(CE / "trials" / "trials.json", "remedy_trials")
    program = program_evidence.program_decision(profile, "profile.json", trials=trials)
    assert program["rule"] == "library_dominated", program["fired"]
    assert program["facts"]["library_share"]["value"] == pytest.approx(0.8499, abs=1e-4)
    assert program["facts"]["gpu_busy_share"]["value"] == pytest.approx(0.997, abs=0.001)
    assert "host_bound_step" not in [f["rule"] for f in program["fired"]]
    outcome = trial_outcome(trials)
    assert outcome["winner"] is None and not outcome["faster"]
    assert {a.name for a in outcome["ran"]} == {"mix_order_reduction", "cooperative_reductions", "static_shapes",
                                                "eager_fallback"}


def test_the_recorded_trials_show_what_this_recording_found():
    trials = read_artifact(CE / "trials" / "trials.json", "remedy_trials")
    arms = {a["name"]: a for a in trials["arms"]}
    # the plan ran reduction arms for the 6.9 % kernel and dropped the rewrite and max-autotune
    plan = trials["plan"]
    assert trials["budget_s"] == 352.0 and plan["estimate_s"] > plan["budget_s"]
    assert {"ce_chunked", "max_autotune_no_cudagraphs"} <= set(plan["dropped"])
    assert {"multi_kernel", "mix_order_reduction", "cooperative_reductions", "static_shapes"} <= set(plan["kept"])
    for name in ("ce_chunked", "max_autotune_no_cudagraphs"):
        assert arms[name]["status"] == "skipped" and arms[name]["reason"].startswith("budget:")
    assert CE_BWD in arms["multi_kernel"]["proposed_by"] and "multi_pass" in arms["multi_kernel"]["proposed_by"]
    # the runs took 314 s of the trials' 398 s: the rest went past the runs (the outputs compared, twice)
    run_s = sum(w for a in trials["arms"] for w in a.get("wall_s") or [])
    assert run_s == pytest.approx(314.1, abs=0.2) and len(trials["order"]) == 14
    # the attention pattern matched a cross-entropy kernel: sdpa ran and replaced nothing
    assert arms["sdpa"]["status"] == "not applied" and CE_BWD in arms["sdpa"]["proposed_by"]


def test_the_plan_reads_the_recorded_kernels_reach():
    facts = load_facts([str(CE / "kernels" / k / "report.json") for k in CE_RULES])
    assert "library_dominated" in facts.program_rules
    bwd, fwd = facts.kernels[CE_BWD], facts.kernels[CE_FWD]
    assert bwd["multi_pass"] is True and bwd["headroom_measured"] is True
    assert bwd["share"] == pytest.approx(0.0685, abs=1e-4) and bwd["ceiling"] == pytest.approx(0.0134, abs=1e-4)
    assert fwd["multi_pass"] is False and fwd["ceiling"] == pytest.approx(0.0498, abs=1e-4)
    assert facts.program["library_share"] == pytest.approx(0.85, abs=0.005)


@pytest.mark.parametrize("kernel", sorted(CE_RULES))
def test_make_investigation_report_renders_the_recorded_kernel_again_offline(run_script, tmp_path, kernel):
    kd = CE / "kernels" / kernel
    proc = run_script("make_investigation_report.py", "--kernel", kernel, "--out", tmp_path / "report.md",
                      "--profile", CE / "capture" / "profile" / "profile.json",
                      "--trials", CE / "trials" / "trials.json", "--run", kd / "run.json", "--sol", kd / "sol.json",
                      cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = read_artifact(tmp_path / "report.json", "investigation_report")
    assert doc["decision"]["verdict"] == "leave_as_is" and doc["decision"]["rule"] == CE_RULES[kernel]
    assert doc["program"]["rule"] == "library_dominated"
    head = (tmp_path / "report.md").read_text().split("\n## ")[0]
    assert "**Decision: leave the kernel as it is (no tuning)**" in head
    assert "**Whole program: rewrite the model code** (rule `library_dominated`): 85% of GPU kernel time" in head


# ----------------------------------------------------------------------------- gated_mlp_train_cut

def test_the_cut_gated_mlp_run_left_its_profile_and_kernel_reports():
    assert not (GATED / "investigation.json").exists() and not (GATED / "trials" / "trials.json").exists()
    profile = _json(GATED / "capture" / "profile" / "profile.json")
    program = program_evidence.program_decision(profile, "profile.json")
    assert program["rule"] == "library_dominated", program["fired"]
    assert program["facts"]["library_share"]["value"] == pytest.approx(0.835, abs=0.001)
    assert program["facts"]["host_bound"]["value"] is False
    for kernel in GATED_KERNELS:
        report = read_artifact(GATED / "kernels" / kernel / "report.json", "investigation_report")
        assert (report["decision"]["verdict"], report["decision"]["rule"]) == ("leave_as_is", "not_hot")
    facts = load_facts([str(GATED / "trials" / "facts.json")])
    assert facts.program_rules == ["library_dominated"] and "gate_up_fused" in facts.rewrites


def test_the_gated_mlp_trials_log_and_run_logs_agree():
    lines = (GATED / "trials" / "trials.log").read_text().splitlines()
    runs = [(m[1], int(m[2]), float(m[3])) for m in
            (re.match(r"\[\d+/\d+\] (\S+) run (\d+): ([\d.]+) ms/step", ln) for ln in lines) if m]
    assert len(runs) == 16
    ms = {}
    for arm, _, value in runs:
        ms.setdefault(arm, []).append(value)
    assert statistics.median(ms["max_autotune_no_cudagraphs"]) == pytest.approx(2.66695)
    assert statistics.median(ms["baseline"][1:]) == pytest.approx(2.7338)   # run 0 is the reference run
    # each run's log holds the program's own step line, read with the trials' metric
    metric = re.compile(DEFAULT_METRIC)
    for arm, index, value in runs:
        found = metric.findall((GATED / "trials" / "logs" / f"{arm}_{index}.log").read_text())
        logged = float(found[-1][0] if isinstance(found[-1], tuple) else found[-1])
        if (arm, index) == ("baseline", 3):
            # two runs were numbered baseline 3 (the late round's and the extra round's): the log
            # kept is the extra round's, the last line of that name in trials.log
            assert logged == [v for a, i, v in runs if (a, i) == ("baseline", 3)][-1] == 2.7154
        else:
            assert logged == value, (arm, index)
    assert [v for a, i, v in runs if (a, i) == ("baseline", 3)] == [2.7345, 2.7154]
    assert lines[-1].startswith("stacked round: max_autotune_no_cudagraphs+gate_up_fused")


# ----------------------------------------------------------------------------- rewrites/third_call_hf_eager

def test_the_sdpa_rewrite_table_rows_are_faster_smaller_and_equal():
    rows = {r["example"]: r for r in _json(RW / "rewrite_table.json")}
    assert set(rows) == {"attention_by_hand_s4096", "attention_hf_eager_s4096"}
    for row in rows.values():
        assert row["arm"] == "sdpa" and row["rc"] == 0 and row["status"] == "ok"
        assert row["detected"] == "replaced 1 attention pattern(s) in 1 graph(s)"
        assert row["outputs"]["result"] == "equal"
        assert row["x"] > 1.5 and row["beyond"] is True
        assert row["arm_mb"] < row["base_mb"]
    assert rows["attention_hf_eager_s4096"]["x"] == pytest.approx(2.235, abs=0.001)
    assert rows["attention_by_hand_s4096"]["x"] == pytest.approx(1.924, abs=0.001)


def test_the_recorded_trials_behind_the_table_agree_with_it():
    rows = {r["example"]: r for r in _json(RW / "rewrite_table.json")}
    trials = read_artifact(RW / "attention_by_hand_s4096" / "trials.json", "remedy_trials")
    outcome = trial_outcome(trials)
    assert outcome["winner"].name == "sdpa" and outcome["winner"].outputs == "equal"
    assert outcome["winner"].x_baseline == pytest.approx(rows["attention_by_hand_s4096"]["x"])
    # the eager case's trials.json is not kept: its log's run lines give the table's medians
    for label in rows:
        text = (RW / f"{label}.log").read_text()
        runs = re.findall(r"\] (baseline|sdpa) run (\d+): ([\d.]+) ms/step", text)
        base = [float(v) for a, i, v in runs if a == "baseline" and i != "0"]
        arm = [float(v) for a, i, v in runs if a == "sdpa"]
        assert statistics.median(base) == pytest.approx(rows[label]["base_ms"])
        assert statistics.median(arm) == pytest.approx(rows[label]["arm_ms"])
