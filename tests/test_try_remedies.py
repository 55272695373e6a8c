"""try_remedies.py: arm planning from facts, and real trials of a tiny torch.compile repro on the CPU."""

from __future__ import annotations

import json
import re
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
    # reference 25 s + 2 rounds x (baseline 20, its run after the cold reference; cudagraphs 30, its only
    # run; coordinate_descent 25, not run yet: a cold compile, as the baseline's first run)
    assert "1 counted run(s) in 100 s" in note and f"--budget-s {(25 + 2 * (20 + 30 + 25)) * 1.1:.0f}" in note
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

    def run_once(arm, index, ctx, limit_s=None):
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


def test_a_float32_output_of_a_bfloat16_graph_is_held_to_bfloat16():
    # The ce_chunked arm on an H200 (bf16 projection, fp32 softmax of its logits): 164 of 262M
    # elements of a float32 output differed by 3e-5 x rms, from logits rounded to bf16 by GEMMs of
    # other tile sizes. The graph computes in bf16: a float32 bound reads that rounding as a change.
    import torch

    from tko.chains import trial_compare

    g = torch.Generator().manual_seed(0)
    h, w = torch.randn(64, 32, generator=g), torch.randn(128, 32, generator=g) / 32 ** 0.5
    logits_a = (h.bfloat16() @ w.bfloat16().T).float()
    logits_b = torch.cat([(h[:32].bfloat16() @ w.bfloat16().T), (h[32:].bfloat16() @ w.bfloat16().T)]).float()
    logits_b += (torch.rand(logits_b.shape, generator=g) < 0.05) * logits_b.abs() * 2 ** -9  # bf16 rounding
    p_a, p_b = torch.softmax(logits_a, -1), torch.softmax(logits_b, -1)
    ref = {"compiled callables/f/0": h.bfloat16(), "compiled callables/f/1": p_a}
    out = {"compiled callables/f/0": h.bfloat16(), "compiled callables/f/1": p_b}
    assert trial_compare.check(out, ref, 0.0)[0] == "equal"
    # the same float32 difference from a graph that is float32 throughout is a change
    ref32 = {"compiled callables/g/0": h, "compiled callables/g/1": p_a}
    out32 = {"compiled callables/g/0": h, "compiled callables/g/1": p_b}
    assert trial_compare.check(out32, ref32, 0.0)[0] == "different"
    wrong = dict(out, **{"compiled callables/f/1": p_a * 1.2})   # 20 % off: beyond bf16 too
    assert trial_compare.check(wrong, ref, 0.0)[0] == "different"


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
    # the reference run (33 s) and 13 arms x 2 runs
    assert plan["estimate_s"] == pytest.approx(33.3 * 27, rel=1e-3) and not plan["fits"]
    assert "about 899 s in all (33 s spent so far included) against --budget-s 120" in plan["text"]
    assert "0 arm(s) besides the baseline fit" in plan["text"] and plan["kept"] == ["baseline"]
    assert len(plan["dropped"]) == 12 and "--budget-s 989 would run them all" in plan["text"]
    assert trials.plan_estimate(arms[:2], 2, 1800.0)["fits"]


def test_a_plan_over_budget_keeps_the_arms_facts_or_flags_proposed_and_says_why_the_rest_are_dropped():
    from tko.chains import trials
    from tko.chains.trial_plan import ArmSpec

    facts = Facts(kernels={"triton_red_0": {"multi_pass": True}}, program_rules=["many_tiny_launches"], given=True)
    plan = [s for s in plan_arms(facts, {"gpu": True, "hip": False}, pins="pins.json") if not s.skip]
    arms = [trials.Arm(spec=s) for s in plan]
    # tiny launches are a step's fact: graphs rank ahead of a kernel's fact
    assert [trials.arm_priority(a.spec) for a in arms[1:5]] == ["always", "always", "step", "facts"]
    assert trials.arm_priority(by_name(plan)["pinned"]) == "user"
    assert trials.arm_priority(ArmSpec("x", proposed_by="one-flag remedy (always tried)", priority="facts")) == "facts"
    arms[0].runs.append({"wall_s": 20.0})
    # 20 s spent, a run 20 s, 2 runs: the baseline 40 s, each arm 40 s; 200 s holds 3 arms besides it
    est = trials.plan_estimate(arms, 2, 200.0, elapsed_s=20.0, max_runs=4)
    # max-autotune's first run costs 5 runs, coordinate descent's 1.5 (trial_first_run_x): +80 s, +10 s
    assert est["estimate_s"] == pytest.approx(20 + len(arms) * 40 + 80 + 10)
    assert "(a first run: coordinate_descent x1.5, max_autotune_no_cudagraphs x5)" in est["text"]
    assert est["kept"] == ["baseline", "cudagraphs", "multi_kernel", "pinned"], est
    # the other facts-proposed arms first, then the ones always tried, each in plan order
    assert est["dropped"][-3:] == ["coordinate_descent", "max_autotune_no_cudagraphs", "eager_fallback"]
    assert est["dropped"][0] == "mix_order_reduction" and "static_shapes" in est["dropped"]
    kept = trials.apply_plan(arms, est)
    assert [a.name for a in kept] == est["kept"]
    cd = next(a for a in arms if a.name == "coordinate_descent")
    assert cd.status == "skipped" and cd.reason.startswith(
        f"budget: {len(arms)} arms x 2 runs x 20 s (first runs of compile-heavy arms longer) = "
        f"{len(arms) * 40 + 80 + 10} s (+ 20 s spent) > --budget-s 200; "
        "kept first: cudagraphs (proposed by the step's facts), multi_kernel (proposed by the facts), "
        "pinned (proposed by a user flag); its 50 s did not fit the 20 s left") and cd.reason.endswith(
        "this arm is always tried")
    assert all(a.status == "ok" for a in kept)


def test_later_runs_estimate_from_their_warm_cache_walls():
    from tko.chains import trials as tr

    base = tr.Arm(spec=trial_plan.ArmSpec(name="baseline"))
    base.runs = [{"run": 0, "wall_s": 30.0}]
    arm = tr.Arm(spec=trial_plan.ArmSpec(name="coordinate_descent"))
    assert tr._estimate(arm, base) == 30.0          # not run: a cold compile, as the baseline's first run
    arm.runs = [{"run": 1, "wall_s": 45.0}]
    assert tr._estimate(arm, base) == 45.0          # its own cold run
    arm.runs.append({"run": 2, "wall_s": 12.0})
    assert tr._estimate(arm, base) == 12.0          # its caches warm: the run after the first


def _arm(name, *ms):
    from tko.chains import trials as tr

    a = tr.Arm(spec=trial_plan.ArmSpec(name=name))
    a.runs = [{"run": i + 1, "ms": m, "counted": True, "wall_s": 1.0} for i, m in enumerate(ms)]
    return a


def test_sequential_rule_needs_a_large_effect_at_two_runs_and_separation_at_three():
    from tko.chains import trials as tr

    base = _arm("baseline", 1.00, 1.01)
    # 2 and 2 runs: p = 1/6, so only a large effect (>= 1.5x and the noise squared) decides
    assert tr.sequential(_arm("a", 2.0, 2.02), base)["decision"] == "behind"
    assert tr.sequential(_arm("a", 0.5, 0.51), base)["decision"] == "ahead"
    two = tr.sequential(_arm("a", 1.2, 1.21), base)
    assert two["decision"] is None and two["p"] == pytest.approx(1 / 6, rel=1e-3) and two["separated"]
    # 3 and 3 runs, every one apart: p = 1/20 <= 0.05 decides an effect beyond the noise
    three = tr.sequential(_arm("a", 1.2, 1.21, 1.2), _arm("baseline", 1.0, 1.01, 1.0))
    assert three["decision"] == "behind" and three["p"] == pytest.approx(1 / 20, rel=1e-3) and not three["large_effect"]
    # inside the noise or overlapping: never decided, however many runs
    assert tr.sequential(_arm("a", 1.0, 1.02, 1.01), _arm("baseline", 1.0, 1.01, 1.0))["decision"] is None
    # a noisy baseline (1.5x spread): 2x is not large against its square (2.25x)
    assert tr.sequential(_arm("a", 2.0, 2.02), _arm("baseline", 1.0, 1.5))["decision"] is None
    assert tr.sequential(_arm("a", 2.0), base) is None    # one run: nothing to test


def test_an_arm_stopped_ahead_that_later_baseline_runs_unsettle_loses_the_claim(monkeypatch, tmp_path):
    from tko.chains import trials as tr

    arms = _scripted_arms(monkeypatch, {"baseline": [1.0, 1.01, 0.6], "cudagraphs": [0.5, 0.51, 0.5],
                                        "coordinate_descent": [1.0, 1.02, 1.01]})
    ctx = _ctx(tmp_path, 3)
    notes = tr.run_rounds(arms, 3, 100.0, ctx, time.perf_counter())
    # cudagraphs sat round 3 out (2x ahead after two runs); the baseline's third run (0.6) undoes that
    assert "cudagraphs#3" not in ctx.order and any("cudagraphs: stopped after 2 run(s)" in n for n in notes)
    tr.stop_records(arms, notes)
    assert arms[1].stopped is None and "no longer decide it" in notes[-1]
    assert tr._rows(arms)[1]["stopped_early"] is None


STEPS = "repros/trial_steps.sh"   # a shell repro: its ms/step set by the arm's settings, a run in milliseconds


def _steps_env(tmp_path, **factors):
    import torch

    out = tmp_path / "out.pt"
    torch.save({"y": torch.arange(4.0)}, out)
    return {"STEP_MS": "10", "STEP_OUTPUT": str(out), **{k: str(v) for k, v in factors.items()}}


def test_trials_stop_an_arm_clearly_behind_or_ahead_and_keep_one_inside_the_noise(run_script, fixtures_dir, tmp_path):
    # coordinate descent 2x slower, multi-kernel 3x faster, max-autotune within the +-0.4 % jitter
    env = _steps_env(tmp_path, STEP_X_CD=2.0, STEP_X_MK=1 / 3, STEP_X_MAT=1.001)
    proc = run_script("try_remedies.py", *ON_THIS_MACHINE, "--out", tmp_path / "t", "--runs", "3",
                      "--arms", "coordinate_descent,max_autotune_no_cudagraphs,multi_kernel",
                      "--", "sh", fixtures_dir / STEPS, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "t" / "trials.json").read_text())
    assert contracts.contract_problems(doc) == []
    arms = {a["name"]: a for a in doc["arms"]}
    runs = {n: sum(o.startswith(n + "#") for o in doc["order"]) for n in arms}
    slow, fast, level = arms["coordinate_descent"], arms["multi_kernel"], arms["max_autotune_no_cudagraphs"]
    # clearly behind after two runs: no third; status stays measured, the table still shows it
    assert runs["coordinate_descent"] == 2 and slow["status"] == "ok" and slow["stopped_early"] == "behind"
    # stopped at 2 runs of each (p = 1/6 with a 2x effect); the record reads all runs (the baseline's 3)
    assert slow["x_baseline"] == pytest.approx(0.5, rel=0.02) and "p = 1/10" in slow["stop_reason"]
    assert slow["sequential"]["decision"] == "behind"
    # clearly ahead after two runs: no third round, and no extra round (--max-runs defaults to 5)
    assert runs["multi_kernel"] == 2 and fast["stopped_early"] == "ahead" and doc["max_runs"] == 5
    assert fast["x_baseline"] == pytest.approx(3.0, rel=0.02)
    # inside the noise: every round, never stopped, and no extra round (it is not faster)
    assert runs["max_autotune_no_cudagraphs"] == 3 and level["stopped_early"] is None
    assert level["beyond_noise"] is False and level["sequential"]["decision"] is None
    assert runs["baseline"] == 4 and len(doc["order"]) == 11
    assert doc["winner"] == "multi_kernel" and "3.0" in doc["what_to_change"]
    _check_winner(doc)
    err = proc.stderr
    # the plan is said after the baseline's first run, before any arm runs
    assert err.index("plan: 4 arm(s)") < err.index("coordinate_descent run 1:")
    assert "coordinate_descent: stopped after 2 run(s), clearly behind the baseline (2 runs against the " \
           "baseline's 2, every one slower: 0.50x" in err and "p = 1/6 = 0.167 with a large effect" in err
    md = (tmp_path / "t" / "trials.md").read_text()
    assert "ok, stopped early: behind" in md and "Plan (said before the rounds): plan: 4 arm(s)" in md


def test_a_budget_too_small_drops_the_arms_always_tried_up_front(fixtures_dir, tmp_path):
    from tko.chains import trials

    facts = Facts(kernels={"triton_red_0": {"multi_pass": True}}, given=True)
    specs = trial_plan.restrict(plan_arms(facts, CPU), ["coordinate_descent", "max_autotune_no_cudagraphs",
                                                          "multi_kernel"])
    env = _steps_env(tmp_path, STEP_SLEEP_S=1.5, STEP_X_MK=0.5)
    mp = pytest.MonkeyPatch()
    for k, v in env.items():
        mp.setenv(k, v)
    try:
        # a run about 1.5 s, 2 runs: the baseline's rounds 3 s, each arm 3 s, after 1.5 s spent: 9.3 s
        # holds one arm (6 runs x 1.5 = 9 s), the whole plan (13.5 s) does not
        doc = trials.run_trials(["sh", str(fixtures_dir / STEPS)], tmp_path / "t", specs, runs=2, max_runs=2,
                                budget_s=9.3)
    finally:
        mp.undo()
    arms = {a["name"]: a for a in doc["arms"]}
    plan = doc["plan"]
    assert not plan["fits"] and plan["kept"] == ["baseline", "multi_kernel"], plan
    assert plan["dropped"] == ["coordinate_descent", "max_autotune_no_cudagraphs"]
    assert plan["priority"]["multi_kernel"] == "facts" and plan["priority"]["coordinate_descent"] == "always"
    for name in plan["dropped"]:
        assert arms[name]["status"] == "skipped" and not arms[name]["ms"]
        assert arms[name]["reason"].startswith("budget: 4 arms x 2 runs x ")
        assert "> --budget-s 9.3; kept first: multi_kernel (proposed by the facts); its " in arms[name]["reason"]
    assert doc["order"] == ["baseline#0", "baseline#1", "multi_kernel#1", "baseline#2", "multi_kernel#2"]
    assert arms["multi_kernel"]["status"] == "ok" and len(arms["multi_kernel"]["ms"]) == 2
    assert doc["winner"] == "multi_kernel"


def test_each_arm_compiles_into_caches_of_its_own_kept_across_its_runs(fixtures_dir, tmp_path, monkeypatch):
    from tko.chains import trials

    for k, v in _steps_env(tmp_path, STEP_X_CD=1.5).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    specs = trial_plan.restrict(plan_arms(None, CPU), ["coordinate_descent", "multi_kernel"])
    out = tmp_path / "t"

    def trial():
        doc = trials.run_trials(["sh", str(fixtures_dir / STEPS)], out, specs, runs=2, max_runs=2)
        seen = {}
        for arm in doc["arms"]:
            for log in arm["logs"]:
                line = next(ln for ln in open(log) if ln.startswith("cache: "))
                seen.setdefault(arm["name"], []).append(line.split())
        return doc, seen

    doc, seen = trial()
    dirs = {name: {words[1] for words in lines} for name, lines in seen.items()}
    assert all(len(d) == 1 for d in dirs.values()) and len({d.pop() for d in dirs.values()}) == 3
    for name, lines in seen.items():
        assert lines[0][1] == str(out / "caches" / name) and lines[0][3] == str(out / "caches" / name / "triton")
        assert [words[5] for words in lines] == [str(i + 1) for i in range(len(lines))]   # the cache persisted
    assert doc["caches"]["source"] == "the trials' output folder"
    for arm in doc["arms"]:
        # the first run compiled (2 s in the fake), the later ones read the cache (0.2 s)
        assert arm["first_step_s"] == 2.0 and arm["first_step_cached_s"] == 0.2
        assert arm["first_step_run"] == (0 if arm["name"] == "baseline" else 1)
        assert arm["cache_dir"] == str(out / "caches" / arm["name"])
    # a second trial in the same folder starts from empty caches again: its first runs compile
    doc, seen = trial()
    assert all(lines[0][5] == "1" for lines in seen.values()) and doc["arms"][1]["first_step_s"] == 2.0
    # a cache folder the user set stays where caches go: one folder per arm inside it, theirs untouched
    user = tmp_path / "my_cache"
    (user / "mine").mkdir(parents=True)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(user))
    doc, seen = trial()
    places = {name: lines[0][1] for name, lines in seen.items()}
    assert all(p.startswith(str(user / "tko_trials")) and p.endswith("/" + n) for n, p in places.items())
    assert len(set(places.values())) == 3 and (user / "mine").is_dir()
    assert doc["caches"]["source"] == "inside the user's TORCHINDUCTOR_CACHE_DIR"


def test_the_default_investigation_gives_the_trials_what_is_left_of_its_deadline(monkeypatch):
    from tko.chains import pipeline

    now = [1000.0]
    monkeypatch.setattr(pipeline.time, "perf_counter", lambda: now[0])
    opts = pipeline.TrialOptions(["python", "r.py"], started=1000.0 - 200.0)   # 200 s of steps before the trials
    assert opts.runs == 2 and opts.deadline_s == 600.0
    budget, why = opts.budget()
    assert budget == 600 - 200 - pipeline.REPORTS_S and "what is left of --deadline-s 600 after 200 s" in why
    opts.started = 1000.0 - 590.0                                             # the deadline is nearly spent
    assert opts.budget()[0] == pipeline.TRIALS_MIN_BUDGET_S and "at least 180 s" in opts.budget()[1]
    opts.budget_s = 900.0                                                     # --trials-budget-s as before
    assert opts.budget() == (900.0, "--trials-budget-s")


def test_a_steps_plan_line_reaches_the_console(tmp_path, capsys):
    import sys

    from tko.chains import chain_steps

    chain = chain_steps.Chain(tmp_path, timeout=30)
    code = "import sys; print('[1/3] baseline run 0'); print('plan: 3 arm(s) ...', file=sys.stderr); print('done')"
    assert chain.run("trials", [sys.executable, "-c", code], log=tmp_path / "t.log", echo="plan: ")
    out = capsys.readouterr().out
    assert "[investigate] trials: plan: 3 arm(s) ..." in out.splitlines()
    assert not any(line.endswith("baseline run 0") for line in out.splitlines())   # the rest: the log only
    assert "baseline run 0" in (tmp_path / "t.log").read_text()


@pytest.mark.parametrize("flags,needle", [(["--deadline-s", "0"], "--deadline-s 0"),
                                          (["--deadline-s", "nan"], "--deadline-s nan"),
                                          (["--trials-budget-s", "-1"], "--trials-budget-s positive")])
def test_bad_deadline_or_budget_is_one_line_exit_2(run_script, tmp_path, flags, needle):
    proc = run_script("investigate.py", "--out", tmp_path / "inv", *flags, "--", "python", "r.py", cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr
    proc = run_script("try_remedies.py", "--out", tmp_path / "t", "--budget-s", "nan", "--", "python", "r.py")
    assert proc.returncode == 2 and "--budget-s and --timeout must be positive" in proc.stderr


def test_the_investigation_shows_the_trials_plan_line(tmp_path):
    """investigation.json carries the trials' plan text and investigation.md says it above the table."""
    from tko.chains import investigation_index, pipeline

    doc = json.loads((RECORDED / "handwritten" / "trials.json").read_text())
    path = tmp_path / "trials" / "trials.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    summary = pipeline.trials_summary(path, tmp_path, recorded=False)
    assert summary["plan"] == doc["plan"]["text"] and summary["plan"].startswith("plan: 2 arm(s)")
    text = "\n".join(investigation_index.trials_markdown(summary))
    assert "Plan, said before the rounds: plan: 2 arm(s)" in text
    assert text.index("Plan, said") < text.index("| arm |")


def test_every_arm_has_a_change_class():
    """An arm missing from remedy_change_classes would rank as the largest change of all."""
    from tko.base.decide import threshold

    classed = {name for names in threshold("remedy_change_classes").values() for name in names}
    names = {a.name for a in plan_arms(None, {})} - {"baseline"}
    assert names and names <= classed, names - classed


def test_a_winning_setting_is_stacked_with_a_rewrite_that_kept_outputs_equal(fixtures_dir, tmp_path, monkeypatch):
    """The H200 default investigation of examples/attention_by_hand: CUDA graphs won (1.37x) while the
    sdpa rewrite halved memory at 0.998x in a host-bound step. The trials then run the two together
    (`cudagraphs+sdpa`), interleaved with the baseline, and the stack wins only by a clear lead."""
    from tko.chains import trials

    for k, v in _steps_env(tmp_path, STEP_X_CG=0.5, STEP_X_SDPA=0.8).items():
        monkeypatch.setenv(k, v)
    specs = trial_plan.restrict(plan_arms(None, {"gpu": True, "hip": False}), ["cudagraphs", "sdpa"])
    doc = trials.run_trials(["sh", str(fixtures_dir / STEPS)], tmp_path / "t", specs, runs=2, max_runs=2)
    arms = {a["name"]: a for a in doc["arms"]}
    stack = arms["cudagraphs+sdpa"]
    assert stack["status"] == "ok" and len(stack["ms"]) == 2 and stack["outputs"]["result"] == "equal"
    assert stack["settings"]["env"] == {"TKO_SDPA_REWRITE": "1"}
    assert stack["settings"]["config"] == {"inductor.triton.cudagraphs": True}
    assert stack["x_baseline"] == pytest.approx(1 / 0.4, rel=0.02) and stack["replaced"][0].startswith("replaced 1")
    assert doc["winner"] == "cudagraphs+sdpa"
    assert any(n.startswith("stacked round: cudagraphs+sdpa (stacked: cudagraphs won at 2.0") for n in doc["notes"])
    assert doc["order"][-4:] == ["baseline#3", "cudagraphs+sdpa#1", "baseline#4", "cudagraphs+sdpa#2"]
    # a rewrite measurably slower is not stacked; nor is anything when no setting won
    for k, v in _steps_env(tmp_path, STEP_X_CG=0.5, STEP_X_SDPA=1.5).items():
        monkeypatch.setenv(k, v)
    doc = trials.run_trials(["sh", str(fixtures_dir / STEPS)], tmp_path / "t2", specs, runs=2, max_runs=2)
    assert [a["name"] for a in doc["arms"]] == ["baseline", "cudagraphs", "sdpa"] and doc["winner"] == "cudagraphs"


def test_a_plan_keeps_a_cheaper_arm_after_a_costly_one_that_does_not_fit():
    from tko.chains import trials
    from tko.chains.trial_plan import ArmSpec

    # the H200 default investigation: a run 29 s, 375 s; max-autotune (5x) did not fit and the
    # cudagraphs arm after it, which did, was dropped with it
    names = ["baseline", "eager_fallback", "sdpa", "coordinate_descent", "max_autotune_no_cudagraphs", "cudagraphs"]
    arms = [trials.Arm(spec=ArmSpec(name=n, proposed_by="facts: x" if n in ("eager_fallback", "sdpa") else
                                    "one-flag remedy (always tried)")) for n in names]
    arms[0].runs.append({"wall_s": 28.6})
    est = trials.plan_estimate(arms, 2, 375.0, elapsed_s=28.6, max_runs=4)
    assert not est["fits"] and est["dropped"] == ["max_autotune_no_cudagraphs"], est
    assert est["kept"] == ["baseline", "eager_fallback", "sdpa", "coordinate_descent", "cudagraphs"]
    assert "(run after the rounds if the budget left fits them)" in est["text"]


def test_a_host_bound_step_proposes_cuda_graphs_by_its_facts():
    from tko.chains import trials

    facts = Facts(program={"host_bound": True, "gpu_busy_share": 0.35}, given=True)
    graphs = by_name(plan_arms(facts, {"gpu": True, "hip": False}))["cudagraphs"]
    assert graphs.proposed_by == "program.host_bound (the GPU busy 35% of the step)"
    assert trials.arm_priority(graphs) == "step"
    plain = by_name(plan_arms(Facts(program={"host_bound": False}, given=True), {"gpu": True, "hip": False}))
    assert trials.arm_priority(plain["cudagraphs"]) == "always"


def test_an_arm_dropped_up_front_runs_late_when_the_rounds_leave_budget(run_script, fixtures_dir, tmp_path):
    # each cache's first run "compiles" for 1.5 s, later runs take milliseconds: the plan, costed at
    # the baseline's cold run, drops multi_kernel and max-autotune (5x); the rounds leave room for
    # multi_kernel, not for max-autotune
    env = _steps_env(tmp_path, STEP_COLD_S=1.5, STEP_X_MK=0.5)
    proc = run_script("try_remedies.py", *ON_THIS_MACHINE, "--out", tmp_path / "t", "--runs", "2",
                      "--max-runs", "2", "--budget-s", "9",
                      "--arms", "coordinate_descent,max_autotune_no_cudagraphs,multi_kernel",
                      "--", "sh", fixtures_dir / STEPS, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "t" / "trials.json").read_text())
    assert doc["plan"]["dropped"] == ["max_autotune_no_cudagraphs", "multi_kernel"], doc["plan"]
    arms = {a["name"]: a for a in doc["arms"]}
    assert arms["multi_kernel"]["status"] == "ok" and len(arms["multi_kernel"]["ms"]) == 2
    assert arms["max_autotune_no_cudagraphs"]["status"] == "skipped"
    # its row says why the late round did not take it either, in the budget's numbers
    assert re.search(r"; after the rounds \d+ s were left, about \d+ s needed$",
                     arms["max_autotune_no_cudagraphs"]["reason"]), arms["max_autotune_no_cudagraphs"]["reason"]
    assert any(n.startswith("late round: multi_kernel (dropped up front;") for n in doc["notes"]), doc["notes"]
    # interleaved with baseline runs of its own
    assert doc["order"][-4:] == ["baseline#3", "multi_kernel#1", "baseline#4", "multi_kernel#2"], doc["order"]
    assert doc["winner"] == "multi_kernel"


def test_a_run_still_going_when_the_budget_ends_is_killed_so_the_deadline_holds(run_script, fixtures_dir, tmp_path):
    """max-autotune's run overruns its estimate (a 60 s compile): it is killed 5 % of the budget past
    the budget's end (at most 15 s), not at --timeout, and says so; the baseline's runs stand."""
    import time

    env = _steps_env(tmp_path, STEP_MAT_SLEEP_S=60)
    t0 = time.perf_counter()
    proc = run_script("try_remedies.py", *ON_THIS_MACHINE, "--out", tmp_path / "t", "--runs", "2",
                      "--budget-s", "6", "--timeout", "300", "--arms", "max_autotune_no_cudagraphs",
                      "--", "sh", fixtures_dir / STEPS, cwd=tmp_path, env=env)
    took = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "t" / "trials.json").read_text())
    arm = {a["name"]: a for a in doc["arms"]}["max_autotune_no_cudagraphs"]
    assert arm["status"] == "timeout", arm
    assert "(the trials' budget ended; process group killed)" in arm["reason"], arm["reason"]
    assert took < 30, took                                    # 6 s of budget, 0.3 s past it, startup


def test_the_change_an_sdpa_arm_measured_is_the_one_its_pass_made(fixtures_dir, tmp_path, monkeypatch):
    """A program that already calls SDPA with a causal attn_mask: the pass took is_causal=True, so the
    arm's change and the trials' what-to-change say is_causal=True, not the catalog's explicit mask."""
    from tko.chains import trials

    took = ", 1 with is_causal=True (the causal mask asserted on every call)"
    for k, v in _steps_env(tmp_path, STEP_X_SDPA=0.8, STEP_SDPA_SAID=took).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TKO_SDPA_CAUSAL", raising=False)
    specs = trial_plan.restrict(plan_arms(None, {"gpu": True, "hip": False}), ["sdpa"])
    doc = trials.run_trials(["sh", str(fixtures_dir / STEPS)], tmp_path / "t", specs, runs=2, max_runs=2)
    sdpa = {a["name"]: a for a in doc["arms"]}["sdpa"]
    assert sdpa["replaced"][-1].endswith(took)
    assert sdpa["change"].startswith("F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale) with no "
                                     "attn_mask"), sdpa["change"]
    assert doc["winner"] == "sdpa" and doc["what_to_change"].startswith(sdpa["change"] + ": 1.2"), doc["what_to_change"]


def test_an_sdpa_run_that_fails_its_causal_guard_is_retried_with_the_mask_explicit(fixtures_dir, tmp_path, monkeypatch):
    """The sdpa arm took is_causal=True from the first call's mask and a later call's mask was not
    causal (a padded batch): the guard fails the run. That run is not counted; the arm's later runs
    keep the mask explicit (TKO_SDPA_CAUSAL=0) and are measured; trials.json says so."""
    from tko.chains import trials

    for k, v in _steps_env(tmp_path, STEP_X_SDPA=0.8, STEP_SDPA_GUARD=1).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TKO_SDPA_CAUSAL", raising=False)
    specs = trial_plan.restrict(plan_arms(None, {"gpu": True, "hip": False}), ["sdpa"])
    doc = trials.run_trials(["sh", str(fixtures_dir / STEPS)], tmp_path / "t", specs, runs=2, max_runs=2)
    sdpa = {a["name"]: a for a in doc["arms"]}["sdpa"]
    assert sdpa["status"] == "ok" and len(sdpa["ms"]) == 2 and len(sdpa["logs"]) == 3
    assert sdpa["settings"]["env"] == {"TKO_SDPA_REWRITE": "1", "TKO_SDPA_CAUSAL": "0"}
    assert sdpa["x_baseline"] == pytest.approx(1 / 0.8, rel=0.02) and sdpa["outputs"]["result"] == "equal"
    note = next(n for n in doc["notes"] if n.startswith("sdpa: run 1 failed its rewrite's guard"))
    assert "no longer causal" in note and note.endswith("add TKO_SDPA_CAUSAL=0")
    assert doc["order"] == ["baseline#0", "baseline#1", "sdpa#1", "sdpa#2", "baseline#2", "sdpa#3"]
    assert sdpa["change"].startswith("torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=~mask")
    # an arm already run with the mask explicit fails for good: no retry loop
    monkeypatch.setenv("TKO_SDPA_CAUSAL", "0")
    monkeypatch.setenv("STEP_SDPA_GUARD", "1")
    from tko.remedies import graph_rewrites
    assert graph_rewrites.retry_env({"TKO_SDPA_REWRITE": "1"}, "RuntimeError: TKO_SDPA: the attention mask is "
                                    "no longer causal") is None
    monkeypatch.delenv("TKO_SDPA_CAUSAL")
    assert graph_rewrites.retry_env({"TKO_SDPA_REWRITE": "1"}, "CUDA error: device-side assert triggered") == \
        {"TKO_SDPA_CAUSAL": "0"}
    assert graph_rewrites.retry_env({"TKO_GATE_REWRITE": "1"}, "CUDA error: device-side assert triggered") is None
    # where the assert is compiled out the guard's NaN output shows it: only a run whose pass took is_causal
    took = "replaced 1 attention pattern(s) in 1 graph(s), 1 with is_causal=True (the causal mask asserted on every call)"
    assert graph_rewrites.retry_env({"TKO_SDPA_REWRITE": "1"}, took, nan_outputs=True) == {"TKO_SDPA_CAUSAL": "0"}
    assert graph_rewrites.retry_env({"TKO_SDPA_REWRITE": "1"}, took) is None
    assert graph_rewrites.retry_env({"TKO_SDPA_REWRITE": "1"}, "replaced 1 attention pattern(s) in 1 graph(s)",
                                    nan_outputs=True) is None
