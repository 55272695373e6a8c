"""Decisions from measurement first: remedy trials and speed-of-light classes ahead of the inferred rules.

Two kinds of input. Real outputs: ``speed_of_light.py --offline`` on the H200 captures of
tests/fixtures/sol_h200, ``try_remedies.py`` on tests/fixtures/repros/trial_repro.py on this CPU,
the recorded H200 capture of examples/recorded_h200/pointwise_chain. Hand-made ``remedy_trials/1``
documents (labelled HAND-MADE below) carry realistic H200 numbers for the outcomes a CPU run cannot
force (a config arm 1.13x faster beyond noise); their arms have exactly the fields try_remedies.py
writes. A hand-given kernel time on a real byte model goes through the real classifier
(tko.measure.speed_of_light.classify) and bandwidth check (tko.measure.byte_model.bandwidth_check).
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import ROOT
from tko.measure import byte_model
from tko.base import contracts, decide
from tko.verdict import evidence, report, sol_evidence, trial_evidence
from tko.measure import speed_of_light as sol_mod
from tko.base.artifact import make_artifact

RULES = decide.load_rules()
PC = ROOT / "examples" / "recorded_h200" / "pointwise_chain"
PC_KERNEL = "triton_poi_fused_add_gelu_mul_0"
SOL = Path(__file__).resolve().parent / "fixtures" / "sol_h200"
GELU = SOL / "gelu_erf" / "autotune_kernels" / "triton_poi_fused_add_gelu_0.py"
GELU_RUN = SOL / "gelu_erf" / "run_triton_poi_fused_add_gelu_0.json"
PEAK = 4246.0
SVG = "{http://www.w3.org/2000/svg}"


def arm(name, ms, base_ms, noise, outputs="equal", change=None, status="ok"):
    x = base_ms / ms if ms else None
    return {"name": name, "status": status, "reason": None, "settings": {}, "proposed_by": "",
            "change": change or f"set {name}", "ms": [ms, ms], "median_ms": ms, "spread": noise,
            "x_baseline": x, "beyond_noise": None if name == "baseline" or x is None else max(x, 1 / x) > noise,
            "noise": noise, "first_step_s": 1.0, "wall_s": [2.0, 2.0],
            "outputs": {"result": outputs, "reason": "hand-made"}, "metric_from": "repro", "logs": []}


def trials_doc(arms, noise):
    """HAND-MADE remedy_trials/1 document (realistic H200 step times)."""
    return make_artifact("remedy_trials/1", "try_remedies.py", {
        "command": ["python", "examples/pointwise_chain.py"], "script": "examples/pointwise_chain.py", "runs": 3,
        "budget_s": 900.0, "timeout_s": 1800.0, "device": {"gpu": True, "hip": False, "name": "NVIDIA H200"},
        "metric_from": "repro", "order": [], "arms": arms, "noise": noise, "winner": None,
        "what_to_change": "", "notes": []})


CD = "set torch._inductor.config.coordinate_descent_tuning = True"
MAT = "set torch._inductor.config.max_autotune = True"


def pc_docs(**extra):
    """The recorded H200 pointwise_chain capture: profile, standalone run, peaks (a real hot kernel
    at 88 % of the measured copy peak)."""
    docs = report.load_inputs({"profile": str(PC / "profile" / "profile.json"),
                               "run": str(PC / "runs" / f"{PC_KERNEL}.json"), "env": str(PC / "triton_env.json")})
    docs.update(extra)
    return docs


def build(kernel, docs, peak=None, allow_device_mismatch=False):
    labels = {k: f"{k}.json" for k in docs}
    return report.build(kernel, docs, labels, peak_override=peak, rules=RULES,
                        allow_device_mismatch=allow_device_mismatch)


def fired(rep):
    return {f["rule"]: f for f in rep["decision"]["fired"]}


def test_faster_equal_arm_decides_with_the_concrete_change_named():
    base = 0.0912
    doc = trials_doc([arm("baseline", base, base, 1.02), arm("coordinate_descent", base / 1.13, base, 1.02, change=CD),
                      arm("max_autotune_no_cudagraphs", base / 1.01, base, 1.02, change=MAT)], 1.02)
    rep = build(PC_KERNEL, pc_docs(trials=doc), peak=4222.0)
    assert (rep["decision"]["verdict"], rep["decision"]["rule"]) == ("tune_triton", "remedy_measured_faster")
    says = fired(rep)["remedy_measured_faster"]["says"]
    assert f"{CD}: 1.13x end to end, outputs equal" in says
    # measured end to end beats the inferred "at copy bandwidth" of the same kernel
    assert "at_copy_bandwidth" in fired(rep)
    assert rep["program"]["rule"] == "remedy_measured_faster" and CD in rep["program"]["says"]
    assert rep["decision_text"] == "continue Triton tuning: apply the measured change"
    md = report.render_markdown(rep)
    assert "## Measured end to end (remedy trials)" in md and "| coordinate_descent (winner) | ok | 0.0807 | 1.130 |" in md
    assert f"What to change: {report.md_text(CD)}: 1.13x end to end, outputs equal." in md


def test_a_winner_that_moves_peak_memory_says_by_how_much():
    """The cross entropy's max-autotune on an H100 took peak memory from 3670 to 7728 MiB: a winner's
    gain is said with its memory when that moves by peak_memory_change or more, and not otherwise."""
    base = 20.4413

    def doc(peak):
        arms = [dict(arm("baseline", base, base, 1.01), peak_memory_mb=3670.064),
                dict(arm("max_autotune_no_cudagraphs", base / 1.08, base, 1.01, change=MAT), peak_memory_mb=peak)]
        return trials_doc(arms, 1.01)

    said = trial_evidence.trial_outcome(doc(7728.126))["what_to_change"]
    assert said == f"{MAT}: 1.08x end to end, outputs equal; peak memory 3670 -> 7728 MiB (+111 %)"
    assert trial_evidence.trial_outcome(doc(3700.0))["what_to_change"] == f"{MAT}: 1.08x end to end, outputs equal"
    assert trial_evidence.trial_outcome(doc(2636.8))["what_to_change"].endswith("(-28 %)")
    assert trial_evidence.trial_outcome(doc(7728.126))["memory_change"] is None


def test_an_arm_that_cuts_peak_memory_is_named_whether_or_not_it_wins():
    """The H100 cross entropy: ce_chunked at 0.564x, peak memory 3670 -> 2637 MiB, outputs equal (a tail):
    no winner on time, and the memory remedy said with its cost in speed. Different outputs: not said."""
    base = 20.4413
    ce = "chunked linear + cross entropy"

    def doc(outputs):
        arms = [dict(arm("baseline", base, base, 1.01), peak_memory_mb=3670.064),
                dict(arm("ce_chunked", 36.2309, base, 1.01, outputs=outputs, change=ce), peak_memory_mb=2636.828),
                dict(arm("eager_fallback", 20.4217, base, 1.01), peak_memory_mb=3670.064)]
        return trials_doc(arms, 1.01)

    outcome = trial_evidence.trial_outcome(doc("equal"))
    assert outcome["winner"] is None
    assert outcome["memory_change"] == (f"{ce}: peak memory 3670 -> 2637 MiB (-28 %) at 0.56x the baseline's speed "
                                        "(beyond run-to-run noise), outputs equal")
    assert trial_evidence.trials_section(doc("equal"), "t")["memory_change"] == outcome["memory_change"]
    assert trial_evidence.trial_outcome(doc("different"))["memory_change"] is None


def test_the_trial_tables_show_peak_memory():
    base = 20.4413
    doc = trials_doc([dict(arm("baseline", base, base, 1.01), peak_memory_mb=3670.064),
                      dict(arm("max_autotune_no_cudagraphs", base / 1.08, base, 1.01, change=MAT),
                           peak_memory_mb=7728.126)], 1.01)
    rows = trial_evidence.trials_section(doc, "trials.json")["rows"]
    from tko.chains import trial_report

    text = trial_report.markdown(dict(doc, memory_change="ce_chunked: peak memory 3670 -> 2637 MiB (-28 %)"))
    assert "| outputs | peak MiB | first step s |" in text and "| equal | 7728 | 1.00 |" in text
    assert "\nLess memory: ce_chunked: peak memory 3670 -&gt; 2637 MiB (-28 %)\n" in text, text[-400:]
    assert [r["peak_memory_mb"] for r in rows] == [3670.064, 7728.126]


@pytest.mark.parametrize("winner,verdict,rule", [
    ("eager_fallback", "disable_compiled_region", "remedy_measured_faster_eager"),
    ("cudagraphs", "rewrite_model", "remedy_measured_faster_program"),
    ("static_shapes", "rewrite_model", "remedy_measured_faster_program"),
    ("pinned", "tune_triton", "remedy_measured_faster"),
])
def test_each_arm_maps_to_its_verdict(winner, verdict, rule):
    base = 0.5
    doc = trials_doc([arm("baseline", base, base, 1.03), arm(winner, 0.4, base, 1.03)], 1.03)
    rep = build(PC_KERNEL, pc_docs(trials=doc), peak=4222.0)
    assert (rep["decision"]["verdict"], rep["decision"]["rule"]) == (verdict, rule)
    assert "1.25x end to end, outputs equal" in fired(rep)[rule]["says"]


@pytest.mark.parametrize("big,big_x,small,small_x,winner", [
    ("replace", 1.404, "coordinate_descent", 1.402, "coordinate_descent"),        # 0.1 %: a tie
    ("replace", 1.45, "coordinate_descent", 1.40, "replace"),                     # 3.6 %: a clear lead
    ("eager_fallback", 1.30, "max_autotune_no_cudagraphs", 1.29, "max_autotune_no_cudagraphs"),
    ("replace", 1.31, "eager_fallback", 1.30, "eager_fallback"),
    ("max_autotune_no_cudagraphs", 1.05, "coordinate_descent", 1.04, "max_autotune_no_cudagraphs"),  # one class
])
def test_a_bigger_change_wins_only_by_a_clear_lead(big, big_x, small, small_x, winner):
    base = 0.1949
    doc = trials_doc([arm("baseline", base, base, 1.001), arm(small, base / small_x, base, 1.001),
                      arm(big, base / big_x, base, 1.001)], 1.001)
    rep = build(PC_KERNEL, pc_docs(trials=doc), peak=4222.0)
    assert rep["sections"]["trials"]["winner"] == winner
    what = rep["sections"]["trials"]["what_to_change"]
    assert what.startswith(f"set {winner}: ")
    tied = winner == small and big_x > small_x
    assert (f"({big} {big_x:.2f}x tied with it, under the clear lead of 2 %" in what) == tied
    assert trial_evidence.trial_facts(doc, "t")["remedy_winner"].value == winner


def test_a_not_hot_kernel_does_not_take_the_programs_remedy():
    base = 0.5
    doc = trials_doc([arm("baseline", base, base, 1.03), arm("coordinate_descent", 0.4, base, 1.03)], 1.03)
    facts = {**trial_evidence.trial_facts(doc, "trials.json"), "share": decide.Fact(0.01, "hand")}
    d = decide.decide(facts, RULES)
    assert d.rule == "not_hot"


def test_a_faster_arm_with_different_outputs_never_decides():
    base = 0.0912
    doc = trials_doc([arm("baseline", base, base, 1.02),
                      arm("coordinate_descent", base / 1.2, base, 1.02, outputs="different", change=CD),
                      arm("max_autotune_no_cudagraphs", base / 1.005, base, 1.02, change=MAT)], 1.02)
    rep = build(PC_KERNEL, pc_docs(trials=doc), peak=4222.0)
    assert not str(rep["decision"]["rule"]).startswith("remedy_measured")
    assert rep["decision"]["rule"] == "at_copy_bandwidth"          # the kernel's own evidence decides
    differ = fired(rep)["remedy_faster_outputs_differ"]
    assert differ["verdict"] == "advice" and "coordinate_descent 1.20x (outputs different)" in differ["says"]
    assert rep["program"]["verdict"] is None and "remedy_faster_outputs_differ" in {
        f["rule"] for f in rep["program"]["fired"]}
    assert rep["sections"]["trials"]["winner"] is None
    assert "(winner)" not in report.render_markdown(rep)


def test_nothing_faster_says_so_and_no_verdict_claims_tuning_helps():
    base = 0.262
    doc = trials_doc([arm("baseline", base, base, 1.021), arm("coordinate_descent", base / 1.008, base, 1.021, change=CD),
                      arm("max_autotune_no_cudagraphs", base / 0.995, base, 1.021, change=MAT),
                      arm("eager_fallback", base / 0.62, base, 1.021)], 1.021)
    # a hot reduction at 48 % of copy: the inferred rule alone would say "continue Triton tuning"
    facts = {"share": decide.Fact(0.71, "hand"), "pct_copy_peak": decide.Fact(0.48, "hand"),
             "calls": decide.Fact(20, "hand"), "mean_us": decide.Fact(265.0, "hand")}
    before = decide.decide(facts, RULES)
    assert (before.verdict, before.rule) == ("tune_triton", "memory_inefficient")
    after = decide.decide({**facts, **trial_evidence.trial_facts(doc, "trials.json")}, RULES)
    says = {f.rule: f.says for f in after.fired}
    assert ("nothing tried beat the baseline beyond run-to-run noise (+-2.1 %): coordinate_descent 1.01x, "
            "max_autotune_no_cudagraphs 0.99x, eager_fallback 0.62x") in says["remedy_nothing_faster"]
    assert after.verdict != "tune_triton" and after.rule == "tuning_measured_no_gain"
    assert "tuning was tried end to end and did not help (coordinate_descent 1.01x" in says[after.rule]
    assert not any("Sweep configs" in s or "before tuning" in s for s in says.values())
    assert trial_evidence.trial_outcome(doc)["what_to_change"] == (
        "nothing tried beat the baseline beyond run-to-run noise (+-2.1 %)")
    # without a bandwidth number: no further tuning either
    del facts["pct_copy_peak"]
    d = decide.decide({**facts, **trial_evidence.trial_facts(doc, "trials.json")}, RULES)
    assert (d.verdict, d.rule) == ("leave_as_is", "tuning_measured_no_gain_unmeasured")


@pytest.fixture(scope="module")
def gelu_sol(tmp_path_factory):
    """Real: speed_of_light.py --offline on the captured H200 exact-erf GELU."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("sol") / "sol.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "speed_of_light.py"), str(GELU), "--offline",
                           "--arch", "gfx942", "--peak-gbps", str(PEAK), "--json-out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def timed(doc, kernel_ms, twin_ms):
    """The real offline document with hand-given kernel and twin times, classified by the real code."""
    th = sol_mod.thresholds_from_rules(RULES)
    fl, model = doc["floors"], doc["byte_model"]
    numbers = sol_mod.measured_numbers(kernel_ms, twin_ms, fl, model)
    bw = byte_model.bandwidth_check(model, kernel_ms, fl["peak_gbps"], th["sol_above_peak_noise"])
    cls = sol_mod.classify(numbers, th, twin_valid=True, facts=doc["facts"],
                           costly=sol_mod.costly_ops(doc["twin"], doc["validity"]), above_peak=bw["unique"]["above_peak"])
    return {**doc, "offline": False, "bandwidth": bw, "classification": cls}


@pytest.mark.slow
def test_above_peak_kernel_never_gets_at_copy_bandwidth(gelu_sol):
    # 268 MB in 0.050 ms is 5369 GB/s, 126 % of the 4246 GB/s copy peak: not HBM
    doc = timed(gelu_sol, 0.050, 0.049)
    assert doc["bandwidth"]["unique"]["above_peak"]
    run = report.load_inputs({"run": str(GELU_RUN)})["run"]
    rep = build("triton_poi_fused_add_gelu_0", {"run": run, "sol": doc}, peak=PEAK)
    assert rep["facts"]["pct_copy_peak"]["value"] >= 0.8           # the run alone would say "at copy bandwidth"
    assert "at_copy_bandwidth" not in fired(rep) and rep["facts"]["bytes_above_peak"]["value"] is True
    flag = fired(rep)["bandwidth_above_peak"]["says"]
    assert "L2-resident or over-counted" in flag and "unique bytes 268451840, Inductor's estimate 268451840" in flag
    md = report.render_markdown(rep)
    assert "Bytes: unique 268451840" in md and "Inductor's estimate 268451840" in md
    # % of copy over 100 + noise without a speed-of-light run: a flag, not "at copy bandwidth"
    rep = build("triton_poi_fused_add_gelu_0", {"run": run}, peak=3500.0)
    assert rep["facts"]["pct_copy_peak"]["value"] > 1.05
    assert "at_copy_bandwidth" not in fired(rep) and "bandwidth_above_peak" in fired(rep)


def test_measured_arithmetic_bound_decides_ahead_of_the_static_cut(gelu_sol):
    # kernel 3x its twin, twin at the floor (0.0632 ms): arithmetic-bound by the real classifier
    doc = timed(gelu_sol, 0.19, 0.066)
    assert doc["classification"]["class"] == "arithmetic_bound"
    static = {"share": decide.Fact(0.9, "hand"), "pct_copy_peak": decide.Fact(0.33, "hand"),
              "valu_per_byte": decide.Fact(11.0, "hand")}
    ev = evidence.Evidence("triton_poi_fused_add_gelu_0")
    sol_evidence.from_sol(ev, doc, "sol.json")
    d = decide.decide({**static, **ev.facts}, RULES)
    assert (d.verdict, d.rule) == ("rewrite_model", "sol_arithmetic_bound")
    says = {f.rule: f.says for f in d.fired}
    assert "arithmetic_bound" not in says                            # the static cut stands down
    assert "2.88x its memory twin" in says["sol_arithmetic_bound"] and "libdevice.erf" in says["sol_arithmetic_bound"]
    # alone (nothing timed: the real offline document), the static cut decides and says it is inferred
    ev = evidence.Evidence("triton_poi_fused_add_gelu_0")
    sol_evidence.from_sol(ev, gelu_sol, "sol.json")
    assert ev.facts["sol_class"].value == "unmeasured" and "bytes_above_peak" not in ev.facts
    d = decide.decide({**static, **ev.facts}, RULES)
    assert d.rule == "arithmetic_bound"
    assert "inferred from the ISA mix, not measured" in {f.rule: f.says for f in d.fired}["arithmetic_bound"]


def test_measured_at_floor_and_access_bound(gelu_sol):
    at = timed(gelu_sol, 0.0700, 0.0690)
    ev = evidence.Evidence("k")
    sol_evidence.from_sol(ev, at, "sol.json")
    d = decide.decide({"share": decide.Fact(0.9, "hand"), "pct_copy_peak": decide.Fact(0.5, "hand"), **ev.facts}, RULES)
    assert (d.verdict, d.rule) == ("leave_as_is", "sol_at_floor") and "1.11x its copy floor" in d.fired[0].says
    slow = timed(gelu_sol, 0.20, 0.19)
    ev = evidence.Evidence("k")
    sol_evidence.from_sol(ev, slow, "sol.json")
    d = decide.decide({"share": decide.Fact(0.9, "hand"), "pct_copy_peak": decide.Fact(0.9, "hand"), **ev.facts}, RULES)
    # a measured 3x over the floor contradicts "at copy bandwidth" from Inductor's byte count; the
    # GELU source has no multi-pass, stride, gather or atomics: configs first, not a model rewrite
    assert ev.facts["sol_cause_known"].value is False
    assert (d.verdict, d.rule) == ("tune_triton", "sol_access_unexplained")
    assert "at_copy_bandwidth" not in {f.rule for f in d.fired} and "sol_access_pattern_bound" not in {f.rule for f in d.fired}
    tuned = {**ev.facts, "tuning_measured_no_faster": decide.Fact(True, "hand"), "tuning_arms": decide.Fact("x", "hand"),
             "trials_noise_pct": decide.Fact(1.0, "hand")}
    d = decide.decide({"share": decide.Fact(0.9, "hand"), "pct_copy_peak": decide.Fact(0.5, "hand"), **tuned}, RULES)
    assert (d.verdict, d.rule) == ("rewrite_model", "tuning_measured_no_gain")  # configs tried: structural


@pytest.mark.slow
@pytest.mark.parametrize("kernel", sorted(SOL.glob("*/autotune_kernels/*.py")), ids=lambda p: p.parent.parent.name + "/" + p.stem)
def test_real_offline_sol_reaches_the_report(kernel, tmp_path, run_script):
    out = tmp_path / "sol.json"
    proc = run_script("speed_of_light.py", kernel, "--offline", "--json-out", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    proc = run_script("make_investigation_report.py", "--kernel", kernel.stem, "--sol", out,
                      "--out", tmp_path / "r.md")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert contracts.contract_problems(rep) == []
    assert rep["facts"]["sol_class"]["value"] == doc["classification"]["class"] == "unmeasured"
    assert not {f["rule"] for f in rep["decision"]["fired"]} & {"sol_at_floor", "sol_arithmetic_bound",
                                                               "sol_access_pattern_bound"}
    md = (tmp_path / "r.md").read_text()
    svg = md[md.index("<svg"):md.index("</svg>") + 6]
    labels = [r.get("data-label") for r in ET.fromstring(svg).iter(f"{SVG}rect")]
    # offline: no kernel or twin bar, only the floors (the one-pass floors of a multi-pass reduction too)
    expected = [name for name, v in sol_mod.chart_bars(doc["classification"]["numbers"]) if v]
    assert labels == expected and "kernel" not in labels and "copy floor" in labels
    assert "| kernel ms | memory twin ms | copy floor ms |" in md


@pytest.fixture(scope="module")
def cpu_trials(tmp_path_factory):
    """Real: try_remedies.py on the tiny repro on this CPU (eager fallback vs two config arms)."""
    import os
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("trials")
    env = dict(os.environ, TRIAL_PRINT="1")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "try_remedies.py"), "--out", str(out),
                           "--allow-device-mismatch", "--runs", "2",
                           "--arms", "coordinate_descent,max_autotune_no_cudagraphs,eager_fallback", "--", "python",
                           str(ROOT / "tests" / "fixtures" / "repros" / "trial_repro.py")],
                          capture_output=True, text=True, timeout=600, env=env, cwd=out)
    assert proc.returncode == 0, proc.stderr
    return out / "trials.json"


@pytest.mark.slow
def test_real_cpu_trials_decide_consistently_with_their_numbers(cpu_trials):
    doc = json.loads(cpu_trials.read_text())
    # CPU numbers against the H200 capture: allowed here, to check the decision follows the numbers
    rep = build(PC_KERNEL, pc_docs(trials=doc), peak=4222.0, allow_device_mismatch=True)
    rules = fired(rep)
    if doc["winner"]:
        winner = next(a for a in doc["arms"] if a["name"] == doc["winner"])
        assert rep["decision"]["rule"].startswith("remedy_measured_faster")
        assert (f"{winner['change']}: {winner['x_baseline']:.2f}x end to end, outputs equal"
                in rules[rep["decision"]["rule"]]["says"])
    # a faster arm inside the noise (x >= inside_noise_candidate_x) is a candidate to re-measure
    inside = [a for a in doc["arms"] if a["name"] != "baseline" and a["status"] == "ok" and a["beyond_noise"] is False
              and a["x_baseline"] >= 1.05 and a["outputs"]["result"] != "different"]
    if not doc["winner"] and inside:
        assert "remedy_inside_noise" in rules and "remedy_nothing_faster" not in rules
        assert doc["what_to_change"].startswith("not decided: ")
    elif not doc["winner"]:
        assert "remedy_nothing_faster" in rules and not rep["decision"]["rule"].startswith("remedy_measured")
    tuned = [a for a in doc["arms"] if a["name"] in ("coordinate_descent", "max_autotune_no_cudagraphs")]
    if all(a["status"] == "ok" and not (a["beyond_noise"] and a["x_baseline"] > 1) and a not in inside for a in tuned):
        assert rep["facts"]["tuning_measured_no_faster"]["value"] is True
        assert rep["decision"]["verdict"] != "tune_triton"


@pytest.mark.slow
def test_cpu_trials_are_refused_for_an_h200_capture_unless_allowed(cpu_trials, tmp_path, run_script):
    doc = json.loads(cpu_trials.read_text())
    assert doc["device"]["gpu"] is False and "cpu" in doc["device"]["mismatch"]   # try_remedies said so
    args = ["--kernel", PC_KERNEL, "--env", PC / "triton_env.json", "--profile", PC / "profile" / "profile.json",
            "--run", PC / "runs" / f"{PC_KERNEL}.json", "--trials", cpu_trials, "--out", tmp_path / "r.md"]
    proc = run_script("make_investigation_report.py", *args)
    assert proc.returncode == 2 and not (tmp_path / "r.md").exists()
    (line,) = proc.stderr.strip().splitlines()
    assert "timed on cpu (no GPU), not on the capture's NVIDIA H200" in line and "--allow-device-mismatch" in line
    proc = run_script("make_investigation_report.py", *args, "--allow-device-mismatch")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads((tmp_path / "r.json").read_text())
    assert contracts.contract_problems(rep) == []
    assert rep["sections"]["trials"]["device_mismatch"].startswith("on cpu (no GPU)")
    assert any("--allow-device-mismatch" in g for g in rep["gaps"])
    assert "**Timed on another device:** on cpu" in (tmp_path / "r.md").read_text()


@pytest.mark.slow
def test_from_capture_with_recorded_trials_leads_with_the_trial_table(tmp_path, run_script):
    # the H200 trials of the row_reduction program, laid into its H200 capture
    cap = tmp_path / "capture"
    shutil.copytree(ROOT / "examples" / "recorded_h200" / "row_reduction", cap)
    recorded = ROOT / "examples" / "recorded_h200" / "trials" / "row_reduction" / "trials.json"
    (cap / "trials").mkdir()
    shutil.copy(recorded, cap / "trials" / "trials.json")
    proc = run_script("investigate.py", "--from-capture", cap, "--out", tmp_path / "inv", "--probe-arch", "none",
                      cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    index = json.loads((tmp_path / "inv" / "investigation.json").read_text())
    assert contracts.contract_problems(index) == []
    doc = json.loads(recorded.read_text())
    assert index["trials"]["winner"] == doc["winner"] and index["trials"]["recorded"] is True
    assert index["trials"]["device"] == "NVIDIA H200"
    assert [a["name"] for a in index["trials"]["arms"]] == [a["name"] for a in doc["arms"]]
    first = index["kernels"][0]
    assert first["sol_class"] == "unmeasured"
    md = (tmp_path / "inv" / "investigation.md").read_text()
    # the step's breakdown comes first (issue #32), then the trials, before any kernel
    assert md.split("\n## ")[1].startswith("Where the step's time goes\n")
    body = md.split("\n## Measured end to end\n", 1)[1]
    assert "| arm | ms/step | x baseline | noise | outputs | peak MiB | status |" in body.split("| kernel |")[0]
    assert "**What to change:** " in body.split("| kernel |")[0]
    table = md.index("| kernel | share of GPU time")
    assert md.index("## Measured end to end") < table < md.index("<svg", table)   # the hot-kernel chart
    kernel_md = (tmp_path / "inv" / first["dir"] / "report.md").read_text()
    assert "## Measured end to end (remedy trials)" in kernel_md and "## Speed of light" in kernel_md
    steps = {s["name"]: s["status"] for s in index["steps"]}
    assert steps[f"speed_of_light {first['kernel']}"] == "ok" and "trials" not in steps


@pytest.mark.slow
def test_recorded_trials_of_another_device_are_not_used(cpu_trials, tmp_path, run_script):
    cap = tmp_path / "capture"
    shutil.copytree(PC, cap)
    (cap / "trials").mkdir()
    shutil.copy(cpu_trials, cap / "trials" / "trials.json")
    proc = run_script("investigate.py", "--from-capture", cap, "--out", tmp_path / "inv", "--probe-arch", "none",
                      cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    index = json.loads((tmp_path / "inv" / "investigation.json").read_text())
    assert index["trials"] is None
    (step,) = [s for s in index["steps"] if s["name"] == "trials"]
    assert step["status"] == "skipped" and "timed on cpu (no GPU), not on the capture's NVIDIA H200" in step["error"]
    kernel = json.loads((tmp_path / "inv" / index["kernels"][0]["dir"] / "report.json").read_text())
    assert "trials" not in kernel["sections"]


@pytest.mark.parametrize("outputs", ["unknown", "different"])
def test_a_faster_arm_without_equal_outputs_is_named_not_hidden(outputs):
    """An arm 1.25x beyond noise whose outputs were not shown equal is not taken, and the trials do
    not say that nothing beat the baseline: they name it and what to check."""
    base = 0.262
    doc = trials_doc([arm("baseline", base, base, 1.021), arm("coordinate_descent", base / 1.25, base, 1.021,
                                                             outputs=outputs, change=CD)], 1.021)
    outcome = trial_evidence.trial_outcome(doc)
    assert outcome["winner"] is None
    said = outcome["what_to_change"]
    assert said.startswith("not taken: coordinate_descent 1.25x") and outputs in said
    assert "nothing tried beat" not in said
    facts = trial_evidence.trial_facts(doc, "trials.json")
    says = " ".join(f.says for f in decide.decide({"share": decide.Fact(0.71, "hand"), **facts}, RULES).fired)
    assert "nothing tried beat" not in says
