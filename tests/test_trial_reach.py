"""The trials' plan runs first what can move the step, and compares each run's outputs once.

Both found by an H200 investigation of a large-vocabulary cross entropy (85 % of GPU time in library
GEMMs; examples/recorded_h200/default_investigation/large_vocab_ce_deadline540): its plan ran four reduction arms for a 6.9 %
kernel whose ceiling was 1.3 % of the step while the budget dropped the chunked cross entropy and
max-autotune, and its trials ran 46 s past their budget comparing 560 MB of outputs per run twice."""

from __future__ import annotations

import json
import time

import pytest
import torch

from tko.base.artifact import write_artifact
from tko.chains import pipeline, trial_compare
from tko.chains import trials
from tko.chains.trial_plan import ArmSpec, Facts, plan_arms
from tko.read.rewrite_catalog import bundled, by_kernel_names

CE_BWD = ("triton_red_fused__log_softmax__log_softmax_backward_data_arange_eq_expand_nll_loss_backward_"
          "nll_loss_forward_scalar_tensor_view_where_0")
CE_FWD = "triton_red_fused__log_softmax_prepare_softmax_online_0"


def _ce_facts(ceiling: float) -> Facts:
    # the recorded step's facts: library_dominated; the backward kernel multi-pass, its ceiling measured
    return Facts(kernels={CE_BWD: {"multi_pass": True, "share": 0.0685, "ceiling": ceiling, "headroom_measured": True},
                          CE_FWD: {"multi_pass": False, "share": 0.0795, "ceiling": 0.05, "headroom_measured": True}},
                 program={"library_share": 0.85, "library_detail": "library GEMM 85.0% in 3 kernel(s)"},
                 program_rules=["library_dominated"], disable_targets=["__main__:f"],
                 rewrites={"ce_chunked": "large_vocab_ce.py:12"}, given=True)


def _plan(facts: Facts, budget_s: float) -> dict:
    arms = [trials.Arm(spec=s) for s in plan_arms(facts, {"gpu": True, "hip": False}) if not s.skip]
    arms[0].runs.append({"wall_s": 21.5})
    return trials.plan_estimate(arms, 2, budget_s, elapsed_s=21.5, max_runs=4)


def test_a_library_dominated_step_runs_its_rewrite_and_max_autotune_before_small_kernels_arms():
    plan = _plan(_ce_facts(0.0134), 352.0)   # the recorded run's budget and run time
    assert plan["priority"]["ce_chunked"] == "step" and plan["priority"]["max_autotune_no_cudagraphs"] == "step"
    for name in ("multi_kernel", "mix_order_reduction", "cooperative_reductions", "static_shapes"):
        assert plan["priority"][name] == "low" and name in plan["dropped"]
    assert {"ce_chunked", "max_autotune_no_cudagraphs", "eager_fallback"} <= set(plan["kept"])
    # the small kernels' arms are dropped last of all: the late rounds reach them last
    assert plan["dropped"][-4:] == ["multi_kernel", "mix_order_reduction", "cooperative_reductions", "static_shapes"]


def test_the_reduction_arms_say_the_ceiling_that_put_them_last_and_keep_their_rank_above_the_cut():
    low = {s.name: s for s in plan_arms(_ce_facts(0.0134), {"gpu": True, "hip": False})}
    assert "(at most 1.3% of the step end to end, under the 2% cut (min_end_to_end_gain))" in low["multi_kernel"].proposed_by
    assert trials.arm_priority(low["coordinate_descent"]) == "always"
    # a ceiling at the cut, or one not measured on a kernel whose share is over it, leaves them proposed by a
    # kernel's fact
    for facts in (_ce_facts(0.02), _ce_facts(0.0134)):
        if facts.kernels[CE_BWD]["ceiling"] == 0.0134:
            facts.kernels[CE_BWD]["headroom_measured"] = False
        arms = {s.name: s for s in plan_arms(facts, {"gpu": True, "hip": False})}
        assert trials.arm_priority(arms["multi_kernel"]) == "facts" and "at most" not in arms["multi_kernel"].proposed_by
    # a kernel not timed (under the hot cut on a GPU) is bounded by its share
    facts = _ce_facts(0.0134)
    facts.kernels[CE_BWD].update(headroom_measured=False, share=0.012)
    arms = {s.name: s for s in plan_arms(facts, {"gpu": True, "hip": False})}
    assert trials.arm_priority(arms["multi_kernel"]) == "low" and "(at most 1.2% of the step" in arms["multi_kernel"].proposed_by


def test_without_library_dominance_max_autotune_stays_a_one_flag_remedy():
    facts = _ce_facts(0.0134)
    facts.program_rules = []
    arms = {s.name: s for s in plan_arms(facts, {"gpu": True, "hip": False})}
    assert trials.arm_priority(arms["max_autotune_no_cudagraphs"]) == "always"
    assert arms["max_autotune_no_cudagraphs"].proposed_by == "one-flag remedy (always tried)"
    lib = {s.name: s for s in plan_arms(_ce_facts(0.0134), {"gpu": True, "hip": False})}
    assert lib["max_autotune_no_cudagraphs"].proposed_by.startswith("program.library_dominated (library GEMM 85.0%")


def test_a_cross_entropy_kernel_is_not_read_as_attention_by_hand():
    entries = {e["id"]: e for e in bundled()}
    assert by_kernel_names(entries["attention_by_hand"], [(CE_BWD, None), (CE_FWD, None)]) == []
    assert [f["kernel"] for f in by_kernel_names(entries["large_vocab_cross_entropy"], [(CE_BWD, None)])] == [CE_BWD]
    # attention by hand still matches, forward and backward
    for name in ("triton_per_fused__softmax_div_masked_fill_0",
                 "triton_per_fused__softmax__softmax_backward_data_div_masked_fill_1"):
        assert by_kernel_names(entries["attention_by_hand"], [(name, None)]), name


def test_the_trials_facts_carry_each_kernel_s_reach_from_its_report(tmp_path):
    kd = tmp_path / "kernels" / CE_BWD
    kd.mkdir(parents=True)
    write_artifact(kd / "report.json", "investigation_report/1", "make_investigation_report.py",
                   {"kernel": CE_BWD, "facts": {"share": {"value": 0.0685, "source": "profile"},
                                                "ceiling": {"value": 0.0134, "source": "sol"},
                                                "headroom_measured": {"value": True, "source": "sol"},
                                                "loads": {"value": 8, "source": "meta"}}})
    facts = json.loads(pipeline.trial_facts_file(tmp_path, {CE_BWD: {}, "other": {}}, None).read_text())
    assert facts["kernels"][CE_BWD] == {"share": 0.0685, "ceiling": 0.0134, "headroom_measured": True}
    assert facts["kernels"]["other"] == {}
    (kd / "report.json").write_text("{not json")
    assert json.loads(pipeline.trial_facts_file(tmp_path, {CE_BWD: {}}, None).read_text())["kernels"][CE_BWD] == {}


def _arm(name, runs):
    return trials.Arm(spec=ArmSpec(name), runs=runs)


def _save(path, t):
    torch.save({"f": (t,)}, path)
    return [str(path)]


def test_each_run_s_outputs_are_loaded_and_judged_once(tmp_path, monkeypatch):
    ref = torch.randn(4096)
    base = _arm("baseline", [{"run": 0, "status": "ok", "outputs": _save(tmp_path / "b0.pt", ref)},
                             {"run": 1, "status": "ok", "outputs": _save(tmp_path / "b1.pt", ref.clone())}])
    same = _arm("a", [{"run": 1, "status": "ok", "outputs": _save(tmp_path / "a1.pt", ref.clone())}])
    off = _arm("b", [{"run": 1, "status": "ok", "outputs": _save(tmp_path / "c1.pt", ref + 1.0)}])
    loads = []
    real = trial_compare.load_outputs
    monkeypatch.setattr(trial_compare, "load_outputs", lambda paths: loads.append(tuple(paths)) or real(paths))
    check = trial_compare.OutputCheck()
    notes = check.compare([base, same, off])
    assert notes == ["baseline run-to-run max |diff| 0 over 1 re-runs"]
    assert same.outputs["result"] == "equal" and off.outputs["result"] == "different"
    assert len(loads) == 4 and len(set(loads)) == 4       # the reference, b1, a1 and c1, each once
    check.compare([base, same, off])
    assert len(loads) == 4 and check.seconds > 0           # again: nothing loaded, verdicts kept
    # a later baseline run that differs widens the slack: only the different verdict is judged again
    base.runs.append({"run": 2, "status": "ok", "outputs": _save(tmp_path / "b2.pt", ref + 0.5)})
    check.compare([base, same, off])
    assert loads[4:] == [(str(tmp_path / "b2.pt"),), (str(tmp_path / "c1.pt"),)]
    assert off.outputs["result"] == "equal" and "slack 2" in off.outputs["reason"]


def test_max_difference_in_chunks_matches_one_pass(monkeypatch):
    torch.manual_seed(0)
    r = torch.randn(10_000, dtype=torch.bfloat16)
    o = (r.float() + torch.randn(10_000) * 1e-2).to(torch.bfloat16)
    o[17] = float("nan")
    whole = float((o.double() - r.double()).abs().nan_to_num(0.0).max())
    monkeypatch.setattr(trial_compare, "CHUNK", 999)
    assert trial_compare.max_difference({"y": o}, {"y": r}) == pytest.approx(whole)
    assert trial_compare.max_difference({"y": r.clone()}, {"y": r}) == 0.0
    assert trial_compare.max_difference({"y": torch.arange(3)}, {"y": torch.arange(3) + 1}) == float("inf")


def test_a_run_s_output_check_counts_in_the_next_run_s_estimate():
    base = trials.Arm(spec=ArmSpec("baseline"), runs=[{"run": 0, "wall_s": 20.0}])
    arm = trials.Arm(spec=ArmSpec("a"), runs=[{"run": 1, "wall_s": 30.0, "check_s": 6.0},
                                               {"run": 2, "wall_s": 21.0, "check_s": 6.5}])
    assert trials._estimate(arm, base) == pytest.approx(27.5)   # its warm run and its check
    assert trials._estimate(base, base) == 20.0                  # the reference run is not checked


def test_on_a_gpu_a_kernel_under_the_hot_cut_is_not_timed_and_the_trials_get_its_time(tmp_path, monkeypatch):
    # the H200 gated-MLP step: its two Triton kernels held 4.1 % and 2.4 %, not hot, and their runs and
    # speeds of light took 80 s of the 153 s before the trials
    timed, skipped = [], {}

    class FakeChain:
        def skip(self, name, reason):
            skipped[name] = reason

    monkeypatch.setattr(pipeline, "_static", lambda chain, ctx, kernel, profile, jobs: ({}, None))
    monkeypatch.setattr(pipeline, "_run", lambda chain, ctx, kernel, sa, kd: timed.append(kernel) or kd / "run.json")
    monkeypatch.setattr(pipeline, "_sol", lambda chain, ctx, kernel, sa, kd, run: kd / "sol.json")
    for gpu in (True, False):
        timed.clear(), skipped.clear()
        ctx = pipeline.KernelCtx(tmp_path, tmp_path, tmp_path, [], None, True, gpu, None,
                                 shares={"hot": 0.30, "cold": 0.041})
        gathered = pipeline._gather_all(FakeChain(), ctx, ["hot", "cold"], tmp_path / "p.json")
        assert gathered["hot"] == {"--run": tmp_path / "kernels" / "hot" / "run.json",
                                   "--sol": tmp_path / "kernels" / "hot" / "sol.json"}
        if gpu:
            assert timed == ["hot"] and gathered["cold"] == {}
            assert skipped == {f"{s} cold": "not hot: 4.1% of GPU time, under the 5% cut (hot_share): the trials get its time"
                               for s in ("run", "speed_of_light")}
        else:   # offline nothing is timed on a GPU: the recorded runs and offline speeds of light still read
            assert timed == ["hot", "cold"] and skipped == {}


def _fake_run_once(order):
    def run_once(arm, index, ctx, limit_s=None):
        order.append(f"{arm.name}#{index}")
        return {"run": index, "status": "ok", "error": None, "ms": 1.0, "wall_s": 1.0, "log": "x.log", "counted": True}
    return run_once


def test_a_baseline_run_of_an_extra_round_after_a_late_round_gets_a_number_of_its_own(tmp_path, monkeypatch):
    # the H200 gated-MLP trials: the late round's baseline runs were 3 and 4 by count, the extra round's
    # then 3 by round, and its log and measurements overwrote the late round's run 3
    order = []
    monkeypatch.setattr(trials, "run_once", _fake_run_once(order))
    base = trials.Arm(spec=ArmSpec("baseline"), runs=[{"run": i, "wall_s": 1.0} for i in range(5)])
    arm = trials.Arm(spec=ArmSpec("a"), runs=[{"run": 1, "wall_s": 1.0}])
    ctx = trials.Context("repro.py", [], tmp_path, tmp_path, None, 10.0)
    notes = []
    trials._run_in_budget(base, base, 3, 100.0, ctx, time.perf_counter(), notes)
    trials._run_in_budget(arm, base, 2, 100.0, ctx, time.perf_counter(), notes)
    assert order == ["baseline#5", "a#2"] and [r["run"] for r in base.runs] == [0, 1, 2, 3, 4, 5]


def test_the_stacked_round_is_not_announced_when_the_budget_left_cannot_run_it(tmp_path, monkeypatch):
    # the H200 gated-MLP trials printed "stacked round: max_autotune_no_cudagraphs+gate_up_fused" with the
    # budget spent, and no run of it could start
    order = []
    monkeypatch.setattr(trials, "run_once", _fake_run_once(order))
    monkeypatch.setattr(trials, "stacked_spec", lambda arms: ArmSpec("w+r", proposed_by="stacked: w won"))
    base = trials.Arm(spec=ArmSpec("baseline"), runs=[{"run": 0, "wall_s": 24.0}, {"run": 1, "wall_s": 24.0}])
    ctx = trials.Context("repro.py", [], tmp_path, tmp_path, None, 100.0)
    arm, notes = trials.stack_round([base], 2, 417.0, ctx, time.perf_counter() - 400.0)
    assert arm is None and order == []
    assert notes == ["stacked round: w+r not run (stacked: w won): 17 s of the budget left, about 48 s needed"]


def test_a_long_kernel_name_finds_its_artifacts_in_the_folder_collect_made(tmp_path):
    # the H200 cross-entropy backward kernel: 135 characters, its PTX in a folder cut to 120, the scan skipped
    from tko.base.artifact import write_artifact as write

    (tmp_path / "artifacts" / CE_BWD[:120] / "kernel_module").mkdir(parents=True)
    (tmp_path / "artifacts" / CE_BWD[:120] / "kernel_module" / "c.py").write_text("# kernel\n")
    (tmp_path / "artifacts" / CE_BWD[:120] / "k.ptx").write_text("// ptx\n")
    assert pipeline.artifact_dir(tmp_path, CE_BWD) == tmp_path / "artifacts" / CE_BWD[:120]   # no manifest
    assert pipeline.has_listing(pipeline.artifact_dir(tmp_path, CE_BWD))
    assert pipeline.kernel_source(tmp_path, tmp_path, CE_BWD).name == "c.py"
    # the manifest's folder wins (a clash numbered -2), and one that leaves the folder is not followed
    write(tmp_path / "artifacts" / "manifest.json", "artifact_manifest/1", "collect_inductor_artifacts.py",
          {"kernels": [{"kernel": CE_BWD, "dir": CE_BWD[:120] + "-2"}, {"kernel": "x", "dir": "../../etc"}]})
    assert pipeline.artifact_dir(tmp_path, CE_BWD).name == CE_BWD[:120] + "-2"
    assert pipeline.artifact_dir(tmp_path, "x") == tmp_path / "artifacts" / "x"


def test_the_recorded_cross_entropy_investigation_now_plans_its_rewrite_and_max_autotune_first():
    # the facts the trials read from the recorded investigation (its kernels' reports carry the ceilings)
    from conftest import ROOT
    from tko.chains.trial_plan import load_facts

    rec = ROOT / "examples" / "recorded_h200" / "default_investigation" / "large_vocab_ce_deadline540"
    facts = load_facts([str(rec / "investigation.json")])
    assert facts.kernels[CE_BWD]["ceiling"] == pytest.approx(0.0134, abs=1e-4) and "library_dominated" in facts.program_rules
    facts.rewrites = json.loads((rec / "trials" / "facts.json").read_text())["rewrites"]
    specs = {s.name: s for s in plan_arms(facts, {"gpu": True, "hip": False})}
    assert specs["sdpa"].skip and not specs["ce_chunked"].skip          # no attention read into the cross entropy
    plan = _plan(facts, 352.0)   # the recorded budget and baseline run
    assert {"max_autotune_no_cudagraphs", "ce_chunked", "eager_fallback"} <= set(plan["kept"])
    assert plan["dropped"][-4:] == ["multi_kernel", "mix_order_reduction", "cooperative_reductions", "static_shapes"]


def test_the_plan_counts_each_run_s_output_check(tmp_path):
    arms = [trials.Arm(spec=ArmSpec(n)) for n in ("baseline", "a")]
    arms[0].runs.append({"run": 0, "wall_s": 20.0})
    plain = trials.plan_estimate(arms, 2, 1000.0, elapsed_s=20.0)
    checked = trials.plan_estimate(arms, 2, 1000.0, elapsed_s=20.0, check_s=6.0)
    assert checked["estimate_s"] - plain["estimate_s"] == pytest.approx(2 * 2 * 6.0)   # 2 arms x 2 runs
    assert "a run about 20 s and its output check about 6 s" in checked["text"] and checked["check_s"] == 6.0
    # the reference's outputs are loaded once, timed; a baseline that saved none costs nothing
    torch.save({"f": (torch.randn(1000),)}, tmp_path / "r.pt")
    ctx = trials.Context("repro.py", [], tmp_path, tmp_path, None, 10.0)
    arms[0].runs[0]["outputs"] = [str(tmp_path / "r.pt")]
    assert trials.reference_load_s(arms[0], ctx) > 0 and ctx.check.ref_paths == (str(tmp_path / "r.pt"),)
    arms[0].runs[0]["outputs"] = []
    assert trials.reference_load_s(arms[0], ctx) == 0.0


def test_an_arm_that_did_not_apply_is_not_compared_and_says_so(tmp_path):
    # the H200 cross-entropy trials: the sdpa arm replaced nothing; its outputs read "the arm did not
    # finish a run", which it had
    base = _arm("baseline", [{"run": 0, "status": "ok", "outputs": _save(tmp_path / "b0.pt", torch.ones(4))}])
    idle = _arm("sdpa", [{"run": 1, "status": "not applied", "outputs": _save(tmp_path / "s1.pt", torch.ones(4))}])
    idle.status = "not applied"
    broken = _arm("multi_kernel", [{"run": 1, "status": "failed", "outputs": []}])
    unrun = _arm("ce_chunked", [])
    trial_compare.OutputCheck().compare([base, idle, broken, unrun])
    assert idle.outputs == {"result": "unknown", "reason": "not compared: the arm did not apply"}
    assert broken.outputs["reason"] == "the arm did not finish a run" and unrun.outputs["reason"] == "not run"


def test_cache_notes_flag_runs_that_compiled_again():
    """The H200 default investigation of the attention step: coordinate_descent's later runs took 7.32 s
    to their first step against the baseline's 1.29 s (they tuned again); the other arms read their
    caches. A baseline whose later runs start as slowly as its first compiles in every run; CUDA
    graphs record in every process, so a slower first step there is not flagged."""
    import json

    from conftest import ROOT
    from tko.chains.trials import cache_notes

    doc = json.loads((ROOT / "examples/recorded_h200/default_investigation/attention_by_hand_train/trials/trials.json")
                     .read_text())
    notes = cache_notes(doc["arms"])
    assert len(notes) == 1 and notes[0].startswith("coordinate_descent: its later runs' first step took 7.32 s "
                                                   "against the baseline's 1.29 s") and "about 6.0 s more" in notes[0]
    rows = [{"name": "baseline", "first_step_s": 30.0, "first_step_cached_s": 29.0},
            {"name": "cudagraphs", "first_step_cached_s": 90.0, "settings": {"config": {"inductor.triton.cudagraphs": True}}},
            {"name": "sdpa", "first_step_cached_s": 31.0}]
    notes = cache_notes(rows)
    assert len(notes) == 1 and notes[0].startswith("baseline: its later runs' first step took 29.00 s against 30.00 s")
    rows[0].update(first_step_s=1.5, first_step_cached_s=1.4)      # too short a compile to judge the baseline
    assert [n.split(":")[0] for n in cache_notes(rows)] == ["sdpa"]
