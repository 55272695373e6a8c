"""try_remedies.py: arm planning from facts, and real trials of a tiny torch.compile repro on the CPU."""

from __future__ import annotations

import json
import time

import pytest

from tko.base import contracts
from tko.chains import trial_plan
from tko.base.errors import InputError
from tko.chains.trial_plan import Facts, plan_arms

REPRO = "repros/trial_repro.py"
CPU = {"gpu": False, "hip": False}
# the real trials below time this machine, GPU or not: the tool refuses that unless told
ON_THIS_MACHINE = ("--allow-device-mismatch",)


def by_name(plan):
    return {a.name: a for a in plan}


def test_without_facts_every_knob_runs_and_gpu_only_arms_are_skipped():
    plan = by_name(plan_arms(None, CPU))
    assert list(plan) == trial_plan.ARM_NAMES and list(plan)[:3] == [
        "baseline", "coordinate_descent", "max_autotune_no_cudagraphs"]
    assert plan["multi_kernel"].skip is None and plan["multi_kernel"].proposed_by == "no facts given"
    assert plan["static_shapes"].bootstrap == ["--static-shapes"]
    assert "no GPU" in plan["cudagraphs"].skip
    assert "not a HIP build" in plan["buffer_ops"].skip
    assert "no pins file" in plan["pinned"].skip
    assert plan["eager_fallback"].bootstrap == ["--eager-compile"]


def test_facts_decide_reduction_knobs_cudagraphs_buffer_ops_and_regions():
    facts = Facts(kernels={"triton_red_0": {"multi_pass": True, "dynamic_sizes": False}},
                  program_rules=["many_tiny_launches"], disable_targets=["__main__:f"],
                  buffer_ops_smoke_ok=True, given=True)
    plan = by_name(plan_arms(facts, {"gpu": True, "hip": True}))
    assert plan["multi_kernel"].skip is None and plan["multi_kernel"].proposed_by == "triton_red_0: multi_pass"
    assert plan["cudagraphs"].skip is None and plan["cudagraphs"].proposed_by == "program.many_tiny_launches"
    assert plan["buffer_ops"].skip is None and plan["buffer_ops"].env["AMDGCN_USE_BUFFER_OPS"] == "1"
    assert plan["eager_fallback"].bootstrap == ["--disable", "__main__:f"]
    plain = by_name(plan_arms(Facts(kernels={"k": {"multi_pass": False}}, given=True), {"gpu": True, "hip": True}))
    assert "no kernel is a multi-pass" in plain["static_shapes"].skip
    assert plain["cudagraphs"].proposed_by == "always tried on a GPU"
    assert "no check_env.py --smoke record" in plain["buffer_ops"].skip


def test_facts_are_read_from_an_investigation_directory(tmp_path):
    (tmp_path / "kernels" / "k0").mkdir(parents=True)
    (tmp_path / "capture").mkdir()
    (tmp_path / "kernels" / "k0" / "report.json").write_text(json.dumps({
        "schema": "investigation_report/1", "kernel": "k0",
        "facts": {"dynamic_sizes": {"value": True, "source": "meta.json"}},
        "decision": {"fired": [{"rule": "launch_bound"}]}}))
    (tmp_path / "capture" / "triton_env.json").write_text(json.dumps({
        "schema": "triton_env/1", "smoke": {"runs": [{"variants": {"unset": {"ok": True}, "1": {"ok": False}}}]}}))
    (tmp_path / "investigation.json").write_text(json.dumps({
        "schema": "investigation/1", "program": None,
        "kernels": [{"kernel": "k0", "dir": "kernels/k0", "disable_targets": ["__main__:g"]}]}))
    facts = trial_plan.load_facts([str(tmp_path / "investigation.json")])
    assert facts.kernels == {"k0": {"dynamic_sizes": True}} and facts.disable_targets == ["__main__:g"]
    assert facts.buffer_ops_smoke_ok is False
    plan = by_name(plan_arms(facts, {"gpu": True, "hip": True}))
    assert plan["static_shapes"].proposed_by == "k0: dynamic_sizes"
    assert plan["cudagraphs"].proposed_by == "k0: launch_bound"
    assert "failed to compile" in plan["buffer_ops"].skip


def test_restrict_keeps_baseline_and_rejects_unknown_arms():
    plan = plan_arms(None, CPU)
    assert [a.name for a in trial_plan.restrict(plan, ["pinned"])] == ["baseline", "pinned"]
    with pytest.raises(InputError, match="unknown arm nope"):
        trial_plan.restrict(plan, ["nope"])


def _check_winner(doc):
    arms = {a["name"]: a for a in doc["arms"]}
    good = [a for a in arms.values() if a["name"] != "baseline" and a["status"] == "ok" and a["beyond_noise"]
            and a["x_baseline"] > 1 and a["outputs"]["result"] == "equal"]
    assert doc["winner"] == (max(good, key=lambda a: a["x_baseline"])["name"] if good else None)


@pytest.mark.slow
def test_trial_with_printed_step_time_crash_hang_and_changed_outputs(run_script, fixtures_dir, tmp_path):
    env = {"TRIAL_PRINT": "1", "TRIAL_BREAK": "1", "TRIAL_CRASH": "1", "TRIAL_HANG": "1"}
    proc = run_script("try_remedies.py", *ON_THIS_MACHINE, "--out", tmp_path / "t", "--runs", "2", "--timeout", "12",
                      "--arms", "coordinate_descent,max_autotune_no_cudagraphs,multi_kernel,eager_fallback",
                      "--", "python", fixtures_dir / REPRO, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "t" / "trials.json").read_text())
    assert contracts.contract_problems(doc) == []
    assert doc["order"][:6] == ["baseline#0", "baseline#1", "coordinate_descent#1", "max_autotune_no_cudagraphs#1",
                                "multi_kernel#1", "eager_fallback#1"]
    arms = {a["name"]: a for a in doc["arms"]}
    # the second round: the baseline, then the arms still ok, fastest first in the first round
    second = sorted(["coordinate_descent", "eager_fallback"], key=lambda n: arms[n]["ms"][0])
    assert doc["order"][6:9] == ["baseline#2"] + [f"{n}#2" for n in second]
    # extra rounds (CPU timings are noisy) run the baseline and the arms still undecided only
    assert all(o.split("#")[0] in ("baseline", "coordinate_descent", "eager_fallback") for o in doc["order"][9:])
    # every baseline run counts but the reference run #0, extra rounds included, up to --max-runs (2 + 2)
    baseline_runs = [o for o in doc["order"] if o.startswith("baseline#")]
    assert doc["metric_from"] == "repro" and len(arms["baseline"]["ms"]) == len(baseline_runs) - 1
    assert 2 <= len(arms["baseline"]["ms"]) <= 4
    assert arms["max_autotune_no_cudagraphs"]["status"] == "failed"
    assert "crashed under max_autotune" in arms["max_autotune_no_cudagraphs"]["reason"]
    assert arms["multi_kernel"]["status"] == "timeout"
    assert arms["multi_kernel"]["settings"]["config"] == {"inductor.triton.multi_kernel": 1}
    assert arms["coordinate_descent"]["outputs"]["result"] == "different"
    assert arms["eager_fallback"]["outputs"]["result"] == "equal"
    base = arms["baseline"]["median_ms"]
    for arm in arms.values():
        if arm["median_ms"]:
            assert arm["x_baseline"] == pytest.approx(base / arm["median_ms"])
    _check_winner(doc)
    assert doc["winner"] != "coordinate_descent"  # outputs differ: never the winner
    assert (tmp_path / "t" / "logs" / "multi_kernel_1.log").is_file()
    assert "What to change:" in (tmp_path / "t" / "trials.md").read_text()
    assert "[9/" in proc.stderr and "coordinate_descent run 2:" in proc.stderr


@pytest.mark.slow
def test_trial_without_printed_line_times_compiled_calls_and_tolerates_noise(run_script, fixtures_dir, tmp_path):
    proc = run_script("try_remedies.py", *ON_THIS_MACHINE, "--out", tmp_path, "--runs", "1", "--arms", "eager_fallback",
                      "--", "python", fixtures_dir / REPRO, cwd=tmp_path, env={"TRIAL_NOISE": "1"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "trials.json").read_text())
    arms = {a["name"]: a for a in doc["arms"]}
    assert doc["metric_from"].startswith("bootstrap")
    # the reference run counts here (the bootstrap's own timing), and so does every extra round
    # (--max-runs, default --runs + 2) a noisy CPU run may add for an undecided arm
    assert len(arms["baseline"]["ms"]) == sum(o.startswith("baseline#") for o in doc["order"]) >= 2
    assert all(ms > 0 for ms in arms["baseline"]["ms"])
    assert arms["baseline"]["first_step_s"] > 0 and arms["eager_fallback"]["median_ms"] > 0
    # unseeded noise of 1e-6 on the input: the baseline differs from itself, and that is the slack
    assert arms["eager_fallback"]["outputs"]["result"] == "equal"
    assert "widened" in arms["eager_fallback"]["outputs"]["reason"]
    assert "max |diff| 0 " not in doc["notes"][-1]
    _check_winner(doc)


@pytest.mark.slow
def test_failing_baseline_is_one_line_exit_1_and_leaves_the_previous_result(run_script, fixtures_dir, tmp_path):
    (tmp_path / "trials.json").write_text("previous\n")
    proc = run_script("try_remedies.py", *ON_THIS_MACHINE, "--out", tmp_path, "--runs", "1",
                      "--arms", "coordinate_descent",
                      "--", "python", fixtures_dir / REPRO, cwd=tmp_path, env={"TRIAL_FAIL": "1"})
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("try_remedies.py: error: the baseline failed")
    assert "the repro broke on purpose" in last and str(tmp_path / "logs" / "baseline_0.log") in last
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "trials.json").read_text() == "previous\n" and not (tmp_path / "trials.md").exists()


def test_repro_without_step_time_or_compiled_call_says_no_step_time(run_script, tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("print('hello')\n")
    proc = run_script("try_remedies.py", *ON_THIS_MACHINE, "--out", tmp_path / "o", "--runs", "1",
                      "--arms", "eager_fallback",
                      "--", "python", script, cwd=tmp_path)
    assert proc.returncode == 1 and "no step time" in proc.stderr.strip().splitlines()[-1]


def test_bad_arms_and_missing_command_are_exit_2(run_script, fixtures_dir, tmp_path):
    proc = run_script("try_remedies.py", "--out", tmp_path, "--arms", "bogus", "--", "python", fixtures_dir / REPRO)
    assert proc.returncode == 2 and "unknown arm bogus" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_script("try_remedies.py", "--out", tmp_path)
    assert proc.returncode == 2 and "no repro command" in proc.stderr


def test_later_rounds_run_the_baseline_then_the_fastest_arms_first():
    from tko.chains import trials as tr

    def arm(name, *ms):
        a = tr.Arm(spec=trial_plan.ArmSpec(name=name), settings={}, absent=[])
        a.runs = [{"run": i + 1, "ms": m, "counted": True} for i, m in enumerate(ms)]
        return a

    base, slow, fast, none = arm("baseline", 1.0), arm("coordinate_descent", 1.4), arm("cudagraphs", 0.2), arm("pinned")
    assert [a.name for a in tr.round_order([base, slow, none, fast])] == ["baseline", "cudagraphs",
                                                                         "coordinate_descent", "pinned"]


def test_a_budget_that_leaves_one_baseline_run_says_what_budget_would_do():
    from tko.chains import trials as tr

    base = tr.Arm(spec=trial_plan.ArmSpec(name="baseline"))
    base.runs = [{"run": 0, "ms": 1.2, "counted": False, "wall_s": 25.0}, {"run": 1, "ms": 1.0, "counted": True, "wall_s": 20.0}]
    arm = tr.Arm(spec=trial_plan.ArmSpec(name="cudagraphs"))
    arm.runs = [{"run": 1, "ms": 0.2, "counted": True, "wall_s": 30.0}]
    late = tr.Arm(spec=trial_plan.ArmSpec(name="coordinate_descent"), status="skipped")  # never fit
    (note,) = tr.budget_advice([base, arm, late], 2, 100)
    # reference 25 s + 2 rounds x (baseline 25 + cudagraphs 30 + coordinate_descent ~25, the baseline's walls)
    assert "1 counted run(s) in 100 s" in note and f"--budget-s {(25 + 2 * (25 + 30 + 25)) * 1.1:.0f}" in note
    base.runs.append({"run": 2, "ms": 1.01, "counted": True, "wall_s": 21.0})
    assert tr.budget_advice([base, arm, late], 2, 100) == []


def test_one_run_per_arm_says_that_no_arm_can_be_judged():
    from tko.chains import trials as tr

    base = tr.Arm(spec=trial_plan.ArmSpec(name="baseline"))
    base.runs = [{"run": 0, "ms": 1.2, "counted": False, "wall_s": 25.0}, {"run": 1, "ms": 1.0, "counted": True, "wall_s": 20.0}]
    (note,) = tr.budget_advice([base], 1, 100)
    assert "--runs 1 gives the baseline 1 counted run(s)" in note and "--runs 2" in note


def _scripted_arms(monkeypatch, script: dict):
    """Arms whose runs return the next ms of ``script[name]``; every run takes 1 s of wall time."""
    from tko.chains import trials as tr

    def run_once(arm, index, ctx):
        ctx.order.append(f"{arm.name}#{index}")
        return {"run": index, "status": "ok", "error": None, "ms": script[arm.name].pop(0), "wall_s": 1.0, "log": "x.log",
                "counted": True}

    monkeypatch.setattr(tr, "run_once", run_once)
    arms = [tr.Arm(spec=trial_plan.ArmSpec(name=n)) for n in script]
    # the uncounted reference run that run_trials makes first
    arms[0].runs = [{"run": 0, "status": "ok", "ms": 9.9, "wall_s": 1.0, "counted": False, "log": "x.log"}]
    return arms


def _ctx(tmp_path, max_runs):
    from tko.chains import trials as tr

    return tr.Context("repro.py", [], tmp_path, tmp_path, None, 10.0, max_runs=max_runs)


def test_extra_rounds_settle_an_arm_inside_a_noisy_baseline(monkeypatch, tmp_path):
    # the H200 dynamic_shapes table: baseline 0.104 and 0.053 ms/step, multi_kernel 0.059 and 0.056:
    # 1.36x inside the 1.97x spread. A third baseline run (0.052) shows multi_kernel is not faster.
    from tko.chains import trials as tr

    arms = _scripted_arms(monkeypatch, {"baseline": [0.104, 0.053, 0.052, 0.05], "multi_kernel": [0.059, 0.056, 0.057],
                                        "static_shapes": [7.4, 1.7]})
    ctx = _ctx(tmp_path, 4)
    tr.run_rounds(arms, 2, 100.0, ctx, time.perf_counter())
    assert [a.name for a in tr.undecided_arms(arms)] == ["multi_kernel"]
    notes = tr.extra_rounds(arms, 2, 4, 100.0, ctx, time.perf_counter())
    # one extra round of the baseline and the candidate only; then nothing is left undecided
    assert ctx.order[-2:] == ["baseline#3", "multi_kernel#3"] and len(ctx.order) == 8
    assert notes == ["extra round 3: baseline and multi_kernel (not decided after 2 runs)"]
    assert tr.undecided_arms(arms) == []


def test_extra_rounds_stop_at_a_winner_at_max_runs_and_at_the_budget(monkeypatch, tmp_path):
    from tko.chains import trials as tr

    # a clear winner after two rounds: no extra round
    arms = _scripted_arms(monkeypatch, {"baseline": [1.0, 1.01], "cudagraphs": [0.3, 0.31]})
    ctx = _ctx(tmp_path, 4)
    tr.run_rounds(arms, 2, 100.0, ctx, time.perf_counter())
    assert tr.extra_rounds(arms, 2, 4, 100.0, ctx, time.perf_counter()) == [] and len(ctx.order) == 4
    # an arm that stays inside the noise gets rounds up to max_runs, no more
    arms = _scripted_arms(monkeypatch, {"baseline": [1.0, 1.6, 1.0, 1.6, 1.0], "coordinate_descent": [0.9] * 5})
    ctx = _ctx(tmp_path, 4)
    tr.run_rounds(arms, 2, 100.0, ctx, time.perf_counter())
    notes = tr.extra_rounds(arms, 2, 4, 100.0, ctx, time.perf_counter())
    assert len(arms[0].ms()) == 4 and len(arms[1].ms()) == 4 and len(notes) == 2
    assert [a.name for a in tr.undecided_arms(arms)] == ["coordinate_descent"]
    # max_runs equal to runs: none; a spent budget: the round is noted, nothing runs
    assert tr.extra_rounds(arms, 4, 4, 100.0, ctx, time.perf_counter()) == []
    notes = tr.extra_rounds(arms, 4, 5, 1.0, ctx, time.perf_counter() - 10)
    assert len(arms[0].ms()) == 4 and any("budget 1 s spent" in n for n in notes)


def test_max_runs_below_runs_is_an_input_error(tmp_path):
    from tko.chains import trials as tr
    from tko.base.errors import InputError

    with pytest.raises(InputError, match="--max-runs 1 is below --runs 2"):
        tr.run_trials(["python", "x.py"], tmp_path, [trial_plan.ArmSpec(name="baseline")], runs=2, max_runs=1)


def test_two_correct_float16_softmaxes_of_long_rows_compare_equal(monkeypatch):
    # A float16 softmax over 65536 columns writes most outputs as subnormals (under 6.1e-5); two
    # correct kernels round them one subnormal step apart (an H200 trial of 2048 x 65536 saw 52
    # such elements against the replace arm and 6 against coordinate descent). That is no change;
    # a wrong value still is.
    import torch

    from tko.chains import trial_compare

    g = torch.Generator().manual_seed(0)
    ref = torch.softmax(torch.randn(4, 65536, generator=g), -1).half()
    assert (ref.float() < torch.finfo(torch.float16).smallest_normal).float().mean() > 0.5
    bits = ref.view(torch.int16).clone()
    tiny = (ref > 0) & (ref.float() < 2e-6)
    bits[tiny] += 1                                   # one step up, where it is sure to be subnormal
    nudged = bits.view(torch.float16)
    assert int(tiny.sum()) > 1000 and not torch.equal(nudged, ref)
    assert trial_compare.check({"y": nudged}, {"y": ref}, 0.0)[0] == "equal"
    monkeypatch.setattr(trial_compare, "QUANTA_ALLOWED", 0)   # the relative bound alone fails them
    verdict, why = trial_compare.check({"y": nudged}, {"y": ref}, 0.0)
    assert verdict == "different" and "Mismatched elements" in why and "Greatest absolute difference" in why
    monkeypatch.undo()
    wrong = ref.clone()
    wrong[0, ref[0].argmax()] *= 1.05                 # 5 % off on the largest output
    assert trial_compare.check({"y": wrong}, {"y": ref}, 0.0)[0] == "different"
    far = bits.clone()
    far[tiny] += 9                                    # ten steps: more than rounding
    assert trial_compare.check({"y": far.view(torch.float16)}, {"y": ref}, 0.0)[0] == "different"


RECORDED = __import__("conftest").ROOT / "examples" / "recorded_h200"
NO_GPU = pytest.mark.skipif(__import__("conftest")._gpu_present(), reason="checks a machine without a GPU")


def test_replace_arm_given_facts_never_says_no_facts_were_given():
    # the H200 capture's check_env record is a facts file: the arms were planned from facts
    facts = trial_plan.load_facts([str(RECORDED / "pointwise_chain" / "triton_env.json")])
    assert facts.given and facts.kernels == {}
    for env in (CPU, {"gpu": True, "hip": False}):
        replace = by_name(plan_arms(facts, env))["replace"]
        assert "no facts given" not in replace.proposed_by, replace.proposed_by
        assert replace.skip


def test_the_captures_device_is_read_from_the_facts(tmp_path):
    facts = trial_plan.load_facts([str(RECORDED / "pointwise_chain" / "triton_env.json")])
    assert facts.device == "NVIDIA H200"
    report = json.loads((RECORDED / "pointwise_chain" / "runs" / "triton_poi_fused_add_gelu_mul_0.json").read_text())
    assert report["schema"] == "kernel_run/1"   # holds no facts: refused, not read as empty
    with pytest.raises(InputError):
        trial_plan.load_facts([str(RECORDED / "pointwise_chain" / "runs" / "triton_poi_fused_add_gelu_mul_0.json")])


@NO_GPU
def test_the_trial_device_of_this_machine_against_recorded_ones():
    from tko.verdict import trial_evidence
    from tko.chains import trials

    here = trials.device_env()                      # this machine: no GPU
    assert "cpu" in trial_evidence.trial_device_mismatch(here, "NVIDIA H200")
    assert "cpu" in trial_evidence.trial_device_mismatch(here, None)      # the capture's device unknown: still no GPU
    h200 = json.loads((RECORDED / "trials" / "row_reduction" / "trials.json").read_text())["device"]
    assert trial_evidence.trial_device_mismatch(h200, "NVIDIA H200") is None
    assert trial_evidence.trial_device_mismatch(h200, None) is None
    assert "NVIDIA H200" in trial_evidence.trial_device_mismatch(h200, "AMD Instinct MI300X")


@NO_GPU
@pytest.mark.parametrize("facts", [[], ["--facts", RECORDED / "pointwise_chain" / "triton_env.json"]],
                         ids=["no_facts", "h200_capture"])
def test_trials_on_a_machine_without_the_programs_gpu_are_refused(run_script, fixtures_dir, tmp_path, facts):
    t0 = time.perf_counter()
    proc = run_script("try_remedies.py", "--out", tmp_path / "t", *facts, "--runs", "1", "--arms", "eager_fallback",
                      "--", "python", fixtures_dir / REPRO, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--allow-device-mismatch" in lines[0] and "cpu" in lines[0], lines
    assert ("NVIDIA H200" in lines[0]) == bool(facts)
    assert not (tmp_path / "t" / "trials.json").exists() and time.perf_counter() - t0 < 20


def test_the_plan_says_what_it_costs_before_its_rounds():
    from tko.chains import trials
    from tko.chains.trial_plan import ArmSpec

    # the two-rank H200 trial: a run about 33 s, 13 arms x 2 runs against a 120 s budget
    arms = [trials.Arm(spec=ArmSpec(name=n)) for n in ["baseline"] + [f"arm{i}" for i in range(12)]]
    arms[0].runs.append({"wall_s": 33.3})
    plan = trials.plan_estimate(arms, 2, 120.0)
    assert plan["estimate_s"] == pytest.approx(33.3 * 26, rel=1e-3) and not plan["fits"]
    assert "about 866 s in all against --budget-s 120" in plan["text"] and "about 1 arm(s) fit" in plan["text"]
    assert trials.plan_estimate(arms[:2], 2, 1800.0)["fits"]
