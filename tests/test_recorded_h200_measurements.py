"""Decisions from the measurements recorded on the H200: remedy trials end to end
(examples/recorded_h200/trials) and the speed-of-light table (tests/fixtures/sol_h200/table)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tko.base import decide
from tko.verdict import program_evidence, trial_evidence

ROOT = Path(__file__).resolve().parents[1]
TRIALS = ROOT / "examples" / "recorded_h200" / "trials"
SOL = ROOT / "tests" / "fixtures" / "sol_h200" / "table"


def trials(name: str) -> dict:
    return json.loads((TRIALS / name / "trials.json").read_text())


@pytest.mark.parametrize("name, verdict, change", [
    ("layernorm_fwd_bwd", "disable_compiled_region", "drop torch.compile"),
    ("tiny_launches", "rewrite_model", "cudagraphs = True"),
    ("softmax_long_rows", "tune_triton", "coordinate_descent_tuning = True"),
    # the same repros in a later device call (trials/repeat): the same decisions
    ("repeat/layernorm_fwd_bwd", "disable_compiled_region", "drop torch.compile"),
    ("repeat/softmax_long_rows", "tune_triton", "coordinate_descent_tuning = True"),
    ("repeat/softmax_long_rows_pinned", "tune_triton", "pin the kernel configs"),
    # the second tables with two counted baseline runs (trials/again)
    ("again/tiny_launches", "rewrite_model", "cudagraphs = True"),
    ("again/gelu_erf", "tune_triton", "coordinate_descent_tuning = True"),
    ("again/gemm_epilogue", "tune_triton", "max-autotune-no-cudagraphs"),
])
def test_a_measured_remedy_decides_and_names_the_change(name, verdict, change):
    doc = trials(name)
    decision = program_evidence.program_decision(None, "trials.json", trials=doc)
    assert decision["verdict"] == verdict
    assert change in decision["says"]
    winner = next(a for a in doc["arms"] if a["name"] == doc["winner"])
    # the decision is the fastest arm that is beyond noise with equal outputs: check it from the numbers
    best = max((a for a in doc["arms"] if a["name"] != "baseline" and a["status"] == "ok"
                and a["beyond_noise"] and a["outputs"]["result"] == "equal"), key=lambda a: a["x_baseline"])
    assert best["name"] == winner["name"] and f"{winner['x_baseline']:.2f}x" in decision["says"]


def test_nothing_faster_is_said_plainly_and_tuning_is_not_advised():
    doc = trials("row_reduction")
    assert doc["winner"] is None
    outcome = trial_evidence.trial_outcome(doc)
    assert outcome["what_to_change"].startswith("nothing tried beat the baseline")
    facts = trial_evidence.trial_facts(doc, "trials.json")
    assert facts["tuning_measured_no_faster"].value is True


@pytest.mark.slow
def test_investigation_of_a_recorded_capture_leads_with_its_trials(tmp_path):
    cap = tmp_path / "row_reduction"
    shutil.copytree(ROOT / "examples" / "recorded_h200" / "row_reduction", cap)
    (cap / "trials").mkdir()
    shutil.copy(TRIALS / "row_reduction" / "trials.json", cap / "trials" / "trials.json")
    out = tmp_path / "inv"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "investigate.py"), "--from-capture", str(cap),
                           "--out", str(out), "--probe-arch", "none", "--top", "1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (out / "investigation.md").read_text()
    # the step's breakdown comes first (issue #32); the trials' table is the first after it
    assert md.split("\n## ")[1].startswith("Where the step's time goes\n")
    after_step = md.split("\n## Measured end to end\n", 1)[1]
    first_table = after_step[after_step.index("|"):].split("\n\n")[0]
    assert "coordinate_descent" in first_table and "baseline" in first_table
    assert "nothing tried beat the baseline" in md
    doc = json.loads((out / "investigation.json").read_text())
    for kernel in doc["kernels"]:
        assert kernel["verdict"] != "tune_triton", kernel  # tuning was measured no faster end to end


def sol_rows() -> list[dict]:
    rows = json.loads((SOL / "results.json").read_text())["rows"]
    return rows + json.loads((SOL / "call2" / "results.json").read_text())["rows"]


@pytest.mark.parametrize("example, expected", [
    ("gelu_erf", "arithmetic_bound"), ("softmax_long_rows", "access_pattern_bound"),
    ("rms_norm", "at_floor"), ("transposed_add", "at_floor"), ("pointwise_chain", "at_floor"),
    ("scatter_index_add", "access_pattern_bound"), ("embedding_fwd_bwd", "access_pattern_bound"),
])
def test_speed_of_light_classes_on_the_h200_repeat(example, expected):
    rows = [r for r in sol_rows() if r["example"] == example and r.get("class")]
    assert len(rows) == 2, rows
    assert {r["class"] for r in rows} == {expected}
    if example == "softmax_long_rows":
        assert all("pass" in r["says"] for r in rows)  # the cause named is the second pass over the row
    if example == "gelu_erf":
        assert all("erf" in r["says"] for r in rows)


def test_the_embedding_gather_counts_the_rows_it_reads_and_sits_at_its_floor():
    # Timed on the H200: the forward gather reads 9751 of 32000 table rows (from its saved index).
    where = SOL.parent / "embedding_fwd_gather"
    rows = json.loads((where / "results.json").read_text())["rows"]
    assert len(rows) == 2 and {r["class"] for r in rows} == {"at_floor"}
    for rep in (1, 2):
        doc = json.loads((where / f"embedding_fwd_bwd_rep{rep}.json").read_text())
        model, numbers = doc["byte_model"], doc["classification"]["numbers"]
        table = next(a for a in model["args"] if a.get("gather"))
        assert table["touched_bytes"] == table["gather"]["unique_rows"] * table["gather"]["row_bytes"]
        assert table["touched_bytes"] < table["view_bytes"] / 3
        assert model["inductor_bytes"] > 1.8 * model["unique_bytes"]
        assert 50 < numbers["kernel_pct_of_copy"] < 100  # the whole-table estimate gave 187 %


def test_the_replace_arm_decides_where_the_row_is_long_and_not_where_it_did_nothing():
    doc = trials("softmax_long_rows_replace")
    decision = program_evidence.program_decision(None, "trials.json", trials=doc)
    arms = {a["name"]: a for a in doc["arms"]}
    assert doc["winner"] == "replace" and decision["verdict"] == "rewrite_model"
    assert f"{arms['replace']['x_baseline']:.2f}x" in decision["says"] and "one-pass row kernels" in decision["says"]
    assert arms["replace"]["x_baseline"] > arms["coordinate_descent"]["x_baseline"] > 1
    rms = {a["name"]: a for a in trials("rms_norm")["arms"]}
    assert trials("rms_norm")["winner"] is None and rms["replace"]["x_baseline"] < 1.01


@pytest.mark.parametrize("name", ["gelu_erf", "dynamic_shapes", "embedding_fwd_bwd", "rms_norm"])
def test_one_run_arms_never_win_whatever_their_ratio(name):
    doc = trials(name)
    base = next(a for a in doc["arms"] if a["name"] == "baseline")
    assert len(base["ms"]) == 1 and base["spread"] is None
    assert doc["winner"] is None and doc["what_to_change"].startswith("nothing beat the baseline")
    assert all(a["beyond_noise"] is None for a in doc["arms"])
    # read now, such a file says what it could not judge instead of "nothing beat the baseline"
    outcome = trial_evidence.trial_outcome(doc)
    faster = [a for a in doc["arms"] if a["name"] != "baseline" and (a["x_baseline"] or 0) > 1]
    assert outcome["what_to_change"].startswith("not decided" if faster else "nothing tried was faster")
    assert "+-0.0 %" not in outcome["what_to_change"]


@pytest.mark.parametrize("name, candidate", [("repeat/tiny_launches", "cudagraphs 4.94x"),
                                             ("gelu_erf", "coordinate_descent 1.32x"),
                                             ("repeat/gemm_epilogue", "coordinate_descent 1.05x"),
                                             # its file says "winner", judged from the arm's own 1.3 % spread
                                             # with one baseline run; read now it is a candidate
                                             ("repeat/gelu_erf", "coordinate_descent 1.15x")])
def test_a_faster_arm_on_one_run_is_a_candidate_not_a_conclusion(name, candidate):
    # One counted run of the arm and of the baseline: the tool may neither pick it nor say that
    # tuning "did not help" (the tuning_measured_no_gain rules would contradict the ratio it measured).
    doc = trials(name)
    facts = trial_evidence.trial_facts(doc, "trials.json")
    assert facts["remedy_undecided"].value.startswith(candidate)
    assert "remedy_none_faster" not in facts and "remedy_winner" not in facts
    tuning = [a for a in doc["arms"] if a["name"] in trial_evidence.TUNING_ARMS and a["status"] == "ok"]
    if any(a["x_baseline"] > 1 for a in tuning):
        assert "tuning_measured_no_faster" not in facts
    decision = program_evidence.program_decision(None, "trials.json", trials=doc)
    assert decision["verdict"] is None
    said = " ".join(f["says"] for f in decision["fired"])
    assert "not decided" in said and candidate in said and "nothing tried beat" not in said


def test_one_run_of_every_arm_and_nothing_faster_claims_no_noise_figure():
    doc = trials("embedding_fwd_bwd")
    facts = trial_evidence.trial_facts(doc, "trials.json")
    assert facts["remedy_none_faster"].value is True and "trials_noise_pct" not in facts
    fired = {f["rule"]: f for f in program_evidence.program_decision(None, "trials.json", trials=doc)["fired"]}
    assert "remedy_nothing_faster_one_run" in fired and "remedy_nothing_faster" not in fired
    assert "noise is unknown" in fired["remedy_nothing_faster_one_run"]["says"]


def test_the_pinned_arm_reproduces_the_sweeps_gain_end_to_end():
    # After the reload_kernel fix: the sweep's best config of the long-row softmax kernel, pinned inside
    # the real program, gives the sweep's standalone gain end to end (1.129x and 1.129x).
    where = TRIALS / "repeat" / "softmax_long_rows_pinned"
    doc, sweep = trials("repeat/softmax_long_rows_pinned"), json.loads((where / "pinned_sweep.json").read_text())
    pins = json.loads((where / "pins.json").read_text())["pins"]
    arms = {a["name"]: a for a in doc["arms"]}
    best = max(sweep["variants"], key=lambda v: v["x_vs_baseline"] or 0)
    assert [p["source"]["variant"] for p in pins] == [best["name"]]
    assert arms["pinned"]["status"] == "ok" and arms["pinned"]["beyond_noise"] is True
    assert arms["pinned"]["x_baseline"] == pytest.approx(best["x_vs_baseline"], rel=0.02)
    assert doc["winner"] == "pinned" and arms["pinned"]["x_baseline"] > arms["coordinate_descent"]["x_baseline"]


def test_the_pinned_failure_is_reported_and_the_other_arms_decide():
    doc = trials("softmax_long_rows_pinned")
    arms = {a["name"]: a for a in doc["arms"]}
    assert arms["pinned"]["status"] == "failed" and "BackendCompilerFailed" in arms["pinned"]["reason"]
    assert doc["winner"] == "coordinate_descent" and arms["coordinate_descent"]["beyond_noise"] is True


ROWSWEEP = ROOT / "tests" / "fixtures" / "rowkernel_sweep_h200" / "rowkernel_sweep.json"


def test_row_kernel_sweep_bundled_beats_every_inductor_mode_only_on_long_softmax_rows():
    doc = json.loads(ROWSWEEP.read_text())
    rows = {(r["op"], r["dtype"], r["n_cols"], r["mode"]): r for r in doc["rows"]}
    assert all(r["correct"] for r in doc["rows"] if r["status"] == "ok")
    for c in doc["comparison"]:
        key = (c["op"], c["dtype"], c["n_cols"])
        inductor = [rows[(*key, m)]["ms"] for m in ("inductor_default", "max_autotune", "coordinate_descent")]
        bundled = rows[(*key, "bundled")]
        if bundled["status"] != "ok":
            assert c["bundled_beats_inductor"] is False and "exceeds" in bundled["reason"]
            continue
        # the flag agrees with the numbers it was made from
        assert c["bundled_beats_inductor"] == (bundled["ms"] * 1.02 < min(inductor))
        long_softmax = c["op"] == "softmax" and 4096 <= c["n_cols"] <= 32768
        assert c["bundled_beats_inductor"] == long_softmax, c
        if long_softmax:
            assert min(inductor) / bundled["ms"] > 1.4


def test_row_kernel_sweep_of_log_softmax_and_layer_norm():
    # H200, second call: the one-pass log_softmax beats every Inductor mode tried where Inductor
    # splits the row (4k-32k); Inductor's LayerNorm is one pass up to 16k and the bundled one loses there.
    doc = json.loads((ROWSWEEP.parent / "call2" / "rowkernel_sweep.json").read_text())
    assert all(r["correct"] for r in doc["rows"] if r["status"] == "ok")
    beats = {(c["op"], c["n_cols"]): c["bundled_beats_inductor"] for c in doc["comparison"]}
    assert [beats[("log_softmax", n)] for n in (1024, 4096, 16384, 32768)] == [False, True, True, True]
    assert [beats[("layer_norm", n)] for n in (1024, 4096, 16384)] == [False, False, False]
    for c in doc["comparison"]:
        speedup = c["best_inductor_ms"] / c["bundled_ms"]
        assert c["bundled_speedup"] == pytest.approx(speedup)
        assert c["bundled_beats_inductor"] == (speedup > 1.02)  # "more than 2 % faster", as the sweep says


@pytest.mark.parametrize("name, candidate", [("again/dynamic_shapes", "multi_kernel 1.36x"),
                                             ("again/embedding_fwd_bwd", "eager_fallback 1.19x")])
def test_a_faster_arm_inside_a_noisy_baseline_is_a_candidate_not_a_no(name, candidate):
    # Two counted baseline runs that differ by 1.97x (dynamic_shapes) and 1.38x (embedding): an arm
    # 1.36x / 1.19x faster is inside that noise. Neither a winner nor "nothing helped": re-measure.
    doc = trials(name)
    base = next(a for a in doc["arms"] if a["name"] == "baseline")
    assert len(base["ms"]) == 2 and base["spread"] > 1.3
    arm = next(a for a in doc["arms"] if candidate.startswith(a["name"] + " "))
    assert arm["beyond_noise"] is False and arm["x_baseline"] > 1.05
    facts = trial_evidence.trial_facts(doc, "trials.json")
    assert facts["remedy_inside_noise"].value.startswith(candidate)
    assert "remedy_none_faster" not in facts and "remedy_winner" not in facts
    if arm["name"] in trial_evidence.TUNING_ARMS:
        assert "tuning_measured_no_faster" not in facts
    decision = program_evidence.program_decision(None, "trials.json", trials=doc)
    assert decision["verdict"] is None
    fired = {f["rule"]: f for f in decision["fired"]}
    assert "remedy_inside_noise" in fired and "remedy_nothing_faster" not in fired
    assert candidate in fired["remedy_inside_noise"]["says"]
    assert trial_evidence.trial_outcome(doc)["what_to_change"].startswith(f"not decided: {candidate}")


def test_the_noise_figure_is_never_a_slow_arms_spread():
    # dynamic_shapes' static_shapes arm ran 58x slower with a 4.32x spread; the file as written
    # then quoted +-332 % as the trial's noise. The noise that decides is the fastest arm's.
    doc = trials("again/dynamic_shapes")
    slow = next(a for a in doc["arms"] if a["name"] == "static_shapes")
    assert slow["x_baseline"] < 0.1 and slow["spread"] > 4
    outcome = trial_evidence.trial_outcome(doc)
    multi = next(a for a in doc["arms"] if a["name"] == "multi_kernel")
    assert outcome["noise"] == pytest.approx(multi["noise"]) and outcome["noise"] < 2.0
    assert "332" not in outcome["what_to_change"]


def test_with_a_noisy_baseline_and_nothing_faster_the_noise_quoted_is_the_baselines():
    doc = trials("again/rms_norm")
    base = next(a for a in doc["arms"] if a["name"] == "baseline")
    assert all(a["x_baseline"] is None or a["x_baseline"] <= 1.0 for a in doc["arms"] if a["name"] != "baseline")
    outcome = trial_evidence.trial_outcome(doc)
    assert outcome["noise"] == pytest.approx(base["spread"])
    assert outcome["what_to_change"] == f"nothing tried beat the baseline beyond run-to-run noise (+-{(base['spread'] - 1) * 100:.1f} %)"


@pytest.mark.parametrize("first, second", [("layernorm_fwd_bwd", "repeat/layernorm_fwd_bwd"),
                                           ("softmax_long_rows", "repeat/softmax_long_rows"),
                                           ("tiny_launches", "again/tiny_launches"),
                                           ("row_reduction", "again/row_reduction"),
                                           ("repeat/gelu_erf", "again/gelu_erf")])
def test_tables_taken_in_two_device_calls_agree_where_both_decide(first, second):
    # Each pair was measured in different device calls; a table that could not decide (one
    # baseline run) is not a disagreement.
    a, b = (trial_evidence.trial_outcome(trials(n)) for n in (first, second))
    if a["winner"] and b["winner"]:
        assert a["winner"].name == b["winner"].name
    elif not a["undecided"] and not b["undecided"]:
        assert bool(a["winner"]) == bool(b["winner"])
    if a["undecided"] and b["winner"]:  # the candidate of the first is the winner of the second
        assert b["winner"].name == max(a["undecided"], key=lambda x: x.x_baseline).name


def test_the_copy_size_curve_behind_the_size_matched_floor():
    # the shares the speed-of-light note cites come from this H200 curve
    from tko.measure import speed_of_light

    doc = json.loads((ROOT / "tests" / "fixtures" / "sol_h200" / "copy_size_curve" / "copy_size_curve.json").read_text())
    rows = {round(r["bytes_moved"] / 1e6): r for r in doc["rows"]}
    ref = next(r for r in doc["rows"] if r["buffer_bytes"] == 1 << 30)["copy_gbps"]
    shares = {mb: r["copy_gbps"] / ref for mb, r in rows.items()}
    assert shares == pytest.approx({mb: r["share_of_1gib"] for mb, r in rows.items()})
    assert [round(shares[mb] * 100) for mb in (34, 134, 268)] == [60, 86, 93]
    gbps = [r["copy_gbps"] for r in doc["rows"]]
    assert gbps[:-1] == sorted(gbps[:-1])  # the rate rises with size up to 1 GiB
    note = speed_of_light.peak_floor_note({"copy_rate_basis": "peak", "unique_bytes": 100e6, "peak_gbps": ref})
    assert "34 MB copy runs at 60 %" in note and "134 MB copy at 86 %" in note and "268 MB at 93 %" in note


def test_row_kernel_sweep_call3_bf16_and_64k():
    # H200, third call: fp16 and bf16, 1k-64k. log_softmax wins 4k-32k in both dtypes (and
    # repeats call2's fp16 figures within 1 %); 64k is refused on sm_90 with its reason; the
    # 8-warp LayerNorm plan at 16k moved from 58.8 % (call2) to about 90 % of copy.
    doc = json.loads((ROWSWEEP.parent / "call3" / "rowkernel_sweep.json").read_text())
    assert all(r["correct"] for r in doc["rows"] if r["status"] == "ok")
    comp = {(c["op"], c["dtype"], c["n_cols"]): c for c in doc["comparison"]}
    for dtype in ("fp16", "bf16"):
        assert [comp[("log_softmax", dtype, n)]["bundled_beats_inductor"] for n in (1024, 4096, 16384, 32768)] \
            == [False, True, True, True]
        for op in ("log_softmax", "layer_norm"):
            c = comp[(op, dtype, 65536)]
            assert c["bundled_status"] == "refused" and not c["bundled_beats_inductor"]
            assert "exceeds" in c["verdict"] and c["best_inductor_pct_of_copy"] < 65
    call2 = {(c["op"], c["n_cols"]): c for c in
             json.loads((ROWSWEEP.parent / "call2" / "rowkernel_sweep.json").read_text())["comparison"]}
    for n in (4096, 16384, 32768):
        assert comp[("log_softmax", "fp16", n)]["bundled_speedup"] == pytest.approx(
            call2[("log_softmax", n)]["bundled_speedup"], rel=0.02)
    assert call2[("layer_norm", 16384)]["bundled_pct_of_copy"] < 60
    assert comp[("layer_norm", "fp16", 16384)]["bundled_pct_of_copy"] > 85
    assert comp[("layer_norm", "bf16", 16384)]["bundled_pct_of_copy"] > 85


def test_row_kernel_backward_sweeps_the_one_pass_backward_loses_everywhere():
    # Two H200 calls timing the backward call alone: the one-pass backward kernel is slower than
    # Inductor's compiled backward at every measured size, which is why the ops' autograd runs
    # the torch formulas by default (Inductor compiles them inside a compiled region).
    seen = 0
    for call in ("call3_bwd", "call4_bwd"):
        doc = json.loads((ROWSWEEP.parent / call / "rowkernel_sweep.json").read_text())
        assert all(r["correct"] for r in doc["rows"] if r["status"] == "ok")
        for c in doc["comparison"]:
            assert c["direction"] == "bwd"
            if c["bundled_status"] == "ok" and c["best_inductor_ms"]:
                assert c["bundled_speedup"] < 0.9 and not c["bundled_beats_inductor"]
                seen += 1
    assert seen == 9  # softmax 4k/16k/32k, layer_norm 4k/16k (call3), rms_norm and layer_norm 4k/32k (call4)


def test_row_kernel_sweep_chunked_form_at_64k_before_and_after_the_eviction_hints():
    # H200, 2048 x 65536: the chunked form (CHUNK 4096, 16 warps) beats every Inductor mode timed on
    # softmax and log-softmax, ties LayerNorm, and loses to Inductor's RMSNorm (90 % of copy, its
    # pass 2 from L2); the eviction hints moved every chunked kernel up by 1-3 points of copy
    calls = {c: json.loads((ROWSWEEP.parent / c / "rowkernel_sweep.json").read_text())
             for c in ("call5_chunked", "call6_chunked_evict")}
    for doc in calls.values():
        assert all(r["correct"] for r in doc["rows"] if r["status"] == "ok")
        for r in doc["rows"]:
            if r["mode"] == "bundled" and r["n_cols"] == 65536:
                assert (r["plan"]["form"], r["plan"]["chunk"], r["plan"]["num_warps"]) == ("chunked", 4096, 16)
    comp = {c: {(r["op"], r["dtype"]): r for r in doc["comparison"] if r["n_cols"] == 65536}
            for c, doc in calls.items()}
    for dtype in ("fp16", "bf16"):
        for op in ("softmax", "log_softmax"):
            c = comp["call6_chunked_evict"][(op, dtype)]
            assert c["bundled_beats_inductor"] and c["bundled_speedup"] > 1.15, c
        rms = comp["call6_chunked_evict"][("rms_norm", dtype)]
        assert not rms["bundled_beats_inductor"] and rms["bundled_speedup"] < 0.85
        assert rms["best_inductor_pct_of_copy"] > 75
        for op in ("softmax", "log_softmax", "layer_norm", "rms_norm"):
            before, after = comp["call5_chunked"][(op, dtype)], comp["call6_chunked_evict"][(op, dtype)]
            # near the 67 % that two DRAM reads of the row allow, hints or not
            assert 58 < before["bundled_pct_of_copy"] < after["bundled_pct_of_copy"] < 67


# The sm_90 plans of call7 (CHUNK, warps, per-row stats), before call10 took the norms to 16384 / 32
# with their loops unrolled: the launches chunk_probe's call7_repeat picked, which call7 timed.
CALL7_PLANS = {"softmax": (16384, 16, True), "log_softmax": (16384, 16, True),
               "layer_norm": (8192, 32, False), "rms_norm": (8192, 32, False)}


def test_chunk_probe_picks_the_call7_launches_and_repeats():
    # chunk_probe (fp16, 2048 x 65536) run twice in one process: the rounds agree within 1 %, and
    # the call7 plans took the fastest launch (within 1 %) of each op's form
    doc = json.loads((ROWSWEEP.parent / "chunk_probe" / "call7_repeat.json").read_text())
    runs = {}
    for r in doc["runs"]:
        assert "error" not in r and r["max_abs_err"] < 1e-2
        runs.setdefault((r["op"], r["chunk"], r["num_warps"]), []).append(r["pct_of_copy"])
    assert all(len(v) == 2 and abs(v[0] - v[1]) < 1.0 for v in runs.values())
    pct = {k: sum(v) / 2 for k, v in runs.items()}
    for op, probed in (("softmax", "softmax_scalar"), ("layer_norm", "layer_norm"), ("rms_norm", "rms_norm")):
        chunk, warps, row_stats = CALL7_PLANS[op]
        assert row_stats == (probed == "softmax_scalar")
        best = max(v for (o, _, _), v in pct.items() if o == probed)
        assert pct[(probed, chunk, warps)] > best - 1.0, (op, chunk, warps, best)
        # the plan before (4096 / 16, per-lane) was 10-16 points of copy behind on every op
        assert pct[(probed, chunk, warps)] - pct[(op, 4096, 16)] > 9


def test_the_call7_plans_beat_every_inductor_mode_at_64k_except_rms_norm():
    # H200, call7: the chunked kernels at the call7 plans (per-row softmax stats, runtime loops)
    doc = json.loads((ROWSWEEP.parent / "call7_chunked_plans" / "rowkernel_sweep.json").read_text())
    assert all(r["correct"] for r in doc["rows"] if r["status"] == "ok")
    for r in doc["rows"]:
        if r["mode"] == "bundled":
            assert (r["plan"]["form"], r["plan"]["chunk"], r["plan"]["num_warps"], r["plan"]["row_stats"]) == \
                ("chunked", *CALL7_PLANS[r["op"]])
    before = {(c["op"], c["dtype"]): c for c in
              json.loads((ROWSWEEP.parent / "call5_chunked" / "rowkernel_sweep.json").read_text())["comparison"]}
    for c in doc["comparison"]:
        key = (c["op"], c["dtype"])
        assert c["bundled_pct_of_copy"] > before[key]["bundled_pct_of_copy"] + 9   # 10-19 points up
        if c["op"] == "rms_norm":
            assert not c["bundled_beats_inductor"]     # fp16 0.88x, bf16 within 2 %
        else:
            assert c["bundled_beats_inductor"] and c["bundled_speedup"] > 1.15, c


def _probe(name: str, cols: int = 65536) -> dict:
    """{(op, variant, chunk, warps): (pct_of_copy, rounds in us)} of a pass2_probe payload."""
    doc = json.loads((ROWSWEEP.parent / name).read_text())
    assert doc["schema"] == "pass2_probe/1" and doc["cols"] == cols
    out = {}
    for r in doc["runs"]:
        assert "error" not in r and r["correct"], r
        out[(r["op"], r["variant"], r["chunk"], r["num_warps"])] = (r["pct_of_copy"], r["us"])
    return out


def test_the_pass2_probe_finds_inductors_rms_norm_ahead_of_every_runtime_loop_form():
    # call9 (fp16): pass 2 backwards, unmasked loads with a runtime bound, the weight evict_last,
    # loop_unroll_factor 4: none beats the bundled loop's best launch of its op by more than a
    # point; Inductor's coordinate-descent RMSNorm (a static 65536-column loop) stays 10 points ahead
    runs = _probe("call9_pass2_probe/pass2_probe.json")
    library = {}
    for (op, variant, _, _), (pct, rounds) in runs.items():
        assert max(rounds) / min(rounds) < 1.02               # two rounds in one process
        if variant == "library":
            library[op] = max(library.get(op, 0), pct)
    for (op, variant, chunk, warps), (pct, _) in runs.items():
        if variant not in ("library", "inductor_default", "coordinate_descent"):
            assert pct < library[op] + 1.0, (op, variant, chunk, warps)
    assert runs[("rms_norm", "coordinate_descent", None, None)][0] - library["rms_norm"] > 9


def test_unrolled_loops_win_for_the_norms_and_lose_for_softmax():
    # call10 (fp16 and bf16): the chunked kernels compiled for the row's chunk count (unrolled,
    # no masks) against the runtime loop, at each launch; CHUNK_PLANS takes the best of each op
    from tko.remedies import row_plan

    sm90 = row_plan.ROW_LIMITS["sm_90"]
    for dtype in ("fp16", "bf16"):
        runs = _probe(f"call10_unrolled/{dtype}/pass2_probe.json")
        best = {}
        for (op, variant, chunk, warps), (pct, _) in runs.items():
            if variant in ("loop", "unrolled") and pct > best.get(op, (0,))[0]:
                best[op] = (pct, variant, chunk, warps)
        for op in row_plan.OPS:
            plan = row_plan.chunk_plan(sm90, op)
            _, variant, chunk, warps = best[op]
            assert (plan.chunk, plan.num_warps, plan.unroll) == (chunk, warps, variant == "unrolled"), (dtype, op)
        # the norms: unrolled at 16384 / 32 is 5-18 points over the loop there (LayerNorm's loop
        # at 16384 / 32 was the worst launch, 58-61 %)
        for op in ("layer_norm", "rms_norm"):
            gain = runs[(op, "unrolled", 16384, 32)][0] - runs[(op, "loop", 16384, 32)][0]
            assert gain > 4.5, (dtype, op, gain)
        # softmax with per-row stats at 16384 / 16: unrolled loses 14-20 points
        for op in ("softmax", "log_softmax"):
            assert runs[(op, "loop", 16384, 16)][0] - runs[(op, "unrolled", 16384, 16)][0] > 10


def test_the_unrolled_plans_at_64k_against_every_inductor_mode():
    # call11: every op at 2048 x 65536, fp16 and bf16, bundled (the current CHUNK_PLANS) against
    # Inductor default, max-autotune and coordinate descent: 1.26-1.48x on softmax, log-softmax and
    # LayerNorm, 1.07x on bf16 RMSNorm; fp16 RMSNorm stays behind max-autotune (0.94x)
    from tko.remedies import row_plan

    doc = json.loads((ROWSWEEP.parent / "call11_unrolled_plans" / "rowkernel_sweep.json").read_text())
    assert all(r["correct"] for r in doc["rows"] if r["status"] == "ok")
    modes = {(r["op"], r["dtype"], r["mode"]) for r in doc["rows"] if r["status"] == "ok"}
    assert len(modes) == 32
    for r in doc["rows"]:
        if r["mode"] == "bundled":
            plan = row_plan.chunk_plan(row_plan.ROW_LIMITS["sm_90"], r["op"])
            n_chunks = 65536 // plan.chunk if plan.unroll else 0
            assert (r["plan"]["chunk"], r["plan"]["num_warps"], r["plan"]["n_chunks"]) == \
                (plan.chunk, plan.num_warps, n_chunks)
    cmp = {(c["op"], c["dtype"]): c for c in doc["comparison"]}
    for (op, dtype), c in cmp.items():
        if (op, dtype) == ("rms_norm", "fp16"):
            assert not c["bundled_beats_inductor"] and 0.9 < c["bundled_speedup"] < 1.0
        else:
            assert c["bundled_beats_inductor"] and c["bundled_speedup"] > 1.05, c
    # the norms moved up from call7 (runtime loops at 8192 / 32): 4-5 points of copy each
    call7 = {(c["op"], c["dtype"]): c for c in
             json.loads((ROWSWEEP.parent / "call7_chunked_plans" / "rowkernel_sweep.json").read_text())["comparison"]}
    for key in (("layer_norm", "fp16"), ("layer_norm", "bf16"), ("rms_norm", "fp16"), ("rms_norm", "bf16")):
        assert cmp[key]["bundled_pct_of_copy"] > call7[key]["bundled_pct_of_copy"] + 2.5, key


def test_max_autotune_on_log_softmax_and_layer_norm():
    # call8: max-autotune was never faster than the bundled log-softmax (1.13-1.48x at 4k-64k); on
    # LayerNorm it keeps the row in one pass at 4k (and 16k-32k in bf16) and wins there, and
    # splits it at 64k, where the bundled kernel wins
    doc = json.loads((ROWSWEEP.parent / "call8_max_autotune" / "rowkernel_sweep.json").read_text())
    assert all(r["correct"] for r in doc["rows"] if r["status"] == "ok")
    cmp = {(c["op"], c["dtype"], c["n_cols"]): c for c in doc["comparison"]}
    assert len(cmp) == 16 and {c["best_inductor_mode"] for c in cmp.values()} == {"max_autotune"}
    for (op, dtype, cols), c in cmp.items():
        if op == "log_softmax" or cols == 65536:
            assert c["bundled_beats_inductor"] and c["bundled_speedup"] > 1.1, c
    assert not cmp[("layer_norm", "fp16", 4096)]["bundled_beats_inductor"]
    assert not cmp[("layer_norm", "bf16", 32768)]["bundled_beats_inductor"]


def test_the_rms_norm_replace_trial_is_not_chosen_where_it_loses_end_to_end():
    # F.rms_norm over 2048 x 65536 (Inductor default as the baseline): the replace arm runs the
    # chunked kernel in every step, yet is slower end to end (bf16 0.84x, fp16 0.78x with a 1.34x
    # spread), and the trial names no winner
    for dtype, most in (("bf16", 0.9), ("fp16", 0.9)):
        doc = json.loads((TRIALS / "rms_norm_64k_replace" / f"rms_{dtype}" / "trials.json").read_text())
        arms = {a["name"]: a for a in doc["arms"]}
        rep = arms["replace"]
        assert rep["status"] == "ok" and rep["outputs"]["result"] == "equal"
        assert set(rep["replaced"]) == {"rms_norm (chunked): kernel 53"}
        assert rep["x_baseline"] < most and doc["winner"] is None
        assert "nothing tried beat the baseline" in doc["what_to_change"]


def test_the_chunked_softmax_wins_its_trial_end_to_end_with_outputs_equal():
    doc = trials("softmax_64k_replace")
    arms = {a["name"]: a for a in doc["arms"]}
    assert doc["winner"] == "replace" and arms["replace"]["beyond_noise"] is True
    assert arms["replace"]["outputs"]["result"] == "equal" and arms["replace"]["x_baseline"] > 1.4
    assert arms["replace"]["replaced"] == ["softmax (chunked): kernel 53"] * 2
    log = (ROOT / "examples" / "recorded_h200" / "trials" / "softmax_64k_replace" / "logs" / "replace_1.log").read_text()
    assert "TKO_REPLACE: softmax (chunked): kernel 53" in log
    decision = program_evidence.program_decision(None, "trials.json", trials=doc)
    assert decision["verdict"] == "rewrite_model" and "1.47x" in decision["says"]
    # the try before: one counted run each, and fp16 subnormals one step apart read as "different"
    first = (ROOT / "examples" / "recorded_h200" / "trials" / "softmax_64k_replace" / "first_try_150s.log").read_text()
    assert "Mismatched elements: 52 / 134217728" in first and "got 1 counted run" in first


def test_the_weight_evict_last_hint_loses_on_the_unrolled_norms():
    # call13 (fp16 and bf16, the plan's 16384 / 32, three rounds): the hint Inductor puts on the
    # RMSNorm weight costs the bundled norms 1-4 points, so the kernels keep the default
    for dtype in ("fp16", "bf16"):
        runs = _probe(f"call13_weight_evict_last/{dtype}/pass2_probe.json")
        for op in ("rms_norm", "layer_norm"):
            plain, hinted = runs[(op, "unrolled", 16384, 32)], runs[(op, "unrolled_w_evict_last", 16384, 32)]
            assert max(plain[1]) / min(plain[1]) < 1.02
            assert plain[0] > hinted[0] + 1.0, (dtype, op, plain, hinted)


def _host_cost(name: str) -> dict:
    doc = json.loads((ROWSWEEP.parent / name).read_text())
    assert doc["schema"] == "replace_host_cost/1"
    return {(r["arm"], r["op"], r["dtype"]): r for r in doc["runs"]}


def test_the_custom_op_route_left_the_replaced_step_at_the_hosts_pace():
    # call12: the replaced RMSNorm step enqueued in 0.13 ms of host time against 0.146 ms of kernel
    # (the baseline: under a third); as a triton op (call14) Inductor launches the kernel and the
    # compiled step costs the host under half of what it did
    runs = _host_cost("call12_custom_op_host_cost/host_cost.json")
    base, rep = runs[("baseline", "rms_norm", "fp16")], runs[("replace", "rms_norm", "fp16")]
    assert max(base["host_ms"]) < 0.35 * min(base["step_ms"])
    assert min(rep["host_ms"]) > 0.85 * min(rep["step_ms"])
    assert rep["profile"]["kernels"][0]["name"] == "_rms_norm_chunked_kernel"
    layers = {x["layer"]: x["host_us"] for x in rep["layers"]}
    after = {x["layer"]: x["host_us"] for x in _host_cost(
        "call14_triton_op_fp64_eps/host_cost_rms_norm.json")[("replace", "rms_norm", "fp16")]["layers"]}
    key = "compiled step (replaced)"
    assert after[key] < 0.5 * layers[key] and layers[key] > layers["torch.ops.tko.rms_norm"]


def _triton_op_probe(name: str) -> dict:
    doc = json.loads((ROWSWEEP.parent / name / "triton_op_probe.json").read_text())
    assert doc["schema"] == "triton_op_probe/1" and all(r["correct"] for r in doc["runs"])
    return {(r["op"], r["cols"]): r["compiled_us"] / r["direct_us"] for r in doc["runs"]}


def test_inductors_launch_of_the_triton_ops_matches_the_direct_launch_once_eps_is_cast():
    import tarfile

    # call14: eps typed fp64 by Inductor made the norms' statistics fp64 (slower compiled);
    # softmax, with no eps, was not touched
    fp64 = _triton_op_probe("call14_triton_op_fp64_eps")
    assert fp64[("rms_norm", 65536)] > 1.2 and fp64[("layer_norm", 65536)] > 1.4
    assert all(abs(fp64[(op, c)] - 1) < 0.01 for op in ("softmax", "log_softmax") for c in (4096, 65536))
    with tarfile.open(ROWSWEEP.parent / "call14_triton_op_fp64_eps" / "inductor_code.tar.gz") as tar:
        code = tar.extractfile("rms_norm_65536.py").read().decode()
    assert "'eps': 'fp64'" in code and "_rms_norm_chunked_kernel" in code
    # call15: eps.to() failed Inductor's mutation analysis, which then copied the input each call
    copied = _triton_op_probe("call15_triton_op_input_copied")
    assert all(copied[(op, c)] > 1.8 for op in ("rms_norm", "layer_norm") for c in (4096, 65536))
    assert "has no attribute 'to'" in (ROWSWEEP.parent / "call15_triton_op_input_copied" /
                                       "mutation_analysis_error.txt").read_text()
    # call16: tl.cast(eps, tl.float32): within 1 % for every op and form
    fixed = _triton_op_probe("call16_triton_op")
    assert len(fixed) == 8 and all(abs(r - 1) < 0.01 for r in fixed.values()), fixed


def test_the_rms_norm_replace_as_a_triton_op_wins_its_trial_and_the_copying_one_did_not():
    from types import SimpleNamespace

    from tko.chains import trials as trial_runs

    base = TRIALS / "rms_norm_64k_replace"
    for dtype in ("fp16", "bf16"):
        doc = json.loads((base / "triton_op" / dtype / "trials.json").read_text())
        rep = {a["name"]: a for a in doc["arms"]}["replace"]
        assert doc["winner"] == "replace" and rep["beyond_noise"] is True
        assert rep["outputs"]["result"] == "equal" and 1.3 < rep["x_baseline"] < 1.35
        assert rep["replaced"] == ["rms_norm (chunked, traced into a compiled graph): kernel 3"]
        decision = program_evidence.program_decision(None, "trials.json", trials=doc)
        assert decision["verdict"] == "rewrite_model" and "1.32x" in decision["says"]
        # the count of traces still reads as "the kernels ran"
        stderr = (base / "triton_op" / dtype / "logs" / "replace_1.log").read_text()
        record = {"status": "ok", "error": None}
        trial_runs._check_replaced(record, SimpleNamespace(spec=SimpleNamespace(bootstrap=["--replace-rows", "rms_norm"])),
                                   stderr.split("--- stderr ---", 1)[-1])
        assert record["status"] == "ok", record
        # one commit earlier the input was copied before each launch: slower, and not chosen
        copied = json.loads((base / "triton_op_input_copied" / dtype / "trials.json").read_text())
        slow = {a["name"]: a for a in copied["arms"]}["replace"]
        assert copied["winner"] is None and slow["x_baseline"] < 0.75 and slow["beyond_noise"] is True


def _guard(call: str, case: str) -> dict:
    """{variant or mode: % of copy} of one RMSNorm pass2_probe run of call17_row_guard, the
    bundled launches at the plan's 16384 / 32."""
    cols = int(case.split("_")[1])
    runs = _probe(f"call17_row_guard/{call}/{case}/pass2_probe.json", cols)
    return {v: pct for (op, v, chunk, warps), (pct, _) in runs.items()
            if op == "rms_norm" and chunk in (16384, None) and warps in (32, None)}


def test_inductors_rms_norm_form_was_found_trait_by_trait_and_the_guarded_kernel_takes_it():
    from tko.remedies import row_plan

    # call17: Inductor's coordinate-descent RMSNorm copied runs as fast as Inductor's (fp16 64k);
    # a 64-bit row base or no row mask each cost it 8 points, its loop form and stages nothing
    fp16 = _guard("call17_inductor_copy", "fp16_65536")
    assert abs(fp16["inductor_copy"] - fp16["coordinate_descent"]) < 1.0, fp16
    assert fp16["inductor_copy"] - max(fp16["inductor_copy_i64"], fp16["inductor_copy_nomask"]) > 5, fp16
    assert abs(fp16["inductor_copy_while"] - fp16["inductor_copy"]) < 1.0 > abs(fp16["inductor_copy_ns3"] - fp16["inductor_copy"])
    # call18: in the bundled kernel only the three together (offsets from X, int32, the row mask)
    # gain at 64k, in both dtypes; at 32k (rows L2 holds) every form is the same
    for dtype in ("fp16", "bf16"):
        r = _guard("call18_switches", f"{dtype}_65536")
        best = r["bundled_vec_i32_rowmask"]
        others = [v for k, v in r.items() if k.startswith("bundled_") and k != "bundled_vec_i32_rowmask"]
        assert best > max(others) + 1.5, (dtype, r)
        short = _guard("call18_switches", f"{dtype}_32768")
        forms = [v for k, v in short.items() if k.startswith("bundled_")]
        assert max(forms) - min(forms) < 1.0, (dtype, short)
        # call19: the weight evict_last adds to it
        w = _guard("call19_weight_and_where", f"{dtype}_65536")
        assert w["bundled_vec_i32_rowmask_wlast"] > w["bundled_vec_i32_rowmask"] + 0.5, (dtype, w)
    # call20: the same traits as constexpr switches inside the chunked kernel lost 8 points
    inside = _guard("call20_switches_inside_chunked", "fp16_65536")
    assert inside["unrolled_row_guard"] < inside["unrolled"] - 5, inside
    # call21: as a kernel of its own (_rms_norm_guarded_kernel) it is the probe's form again
    for dtype in ("fp16", "bf16"):
        r = _guard("call21_guarded_kernel", f"{dtype}_65536")
        assert abs(r["unrolled_row_guard"] - r["bundled_vec_i32_rowmask_wlast"]) < 0.5, (dtype, r)
        assert r["unrolled_row_guard"] > r["unrolled"] + 2, (dtype, r)
    # fp16: level with coordinate descent (within 1 %); bf16: 10 % ahead of it
    fp16 = _guard("call21_guarded_kernel", "fp16_65536")
    bf16 = _guard("call21_guarded_kernel", "bf16_65536")
    assert fp16["unrolled_row_guard"] > 0.985 * fp16["coordinate_descent"], fp16
    assert bf16["unrolled_row_guard"] > 1.08 * bf16["coordinate_descent"], bf16
    # at 131072 columns (8 chunks) it lost 14 points: the plan takes it up to 4 chunks only
    long = _guard("call21_guarded_kernel", "fp16_131072")
    assert long["unrolled_row_guard"] < long["unrolled"] - 10, long
    assert row_plan.CHUNK_PLANS[("sm_90", "rms_norm")].row_guard == 4
    # call22: of the launches around the plan's, the plan's (16384 / 32) is the guarded kernel's best
    for dtype in ("fp16", "bf16"):
        runs = _probe(f"call17_row_guard/call22_guarded_launches/{dtype}_65536/pass2_probe.json")
        guarded = {(c, w): pct for (op, v, c, w), (pct, _) in runs.items() if v == "unrolled_row_guard"}
        assert max(guarded, key=guarded.get) == (16384, 32), (dtype, guarded)


def test_the_eager_launch_cost_did_not_change_once_inductor_compiled_the_kernel():
    # call17: _launch per call on 8 rows fresh, after an Inductor compile, after the triton op's
    # compile: 27-30 us each (the 66 us read once before was not a property of the process)
    doc = json.loads((ROWSWEEP.parent / "call17_row_guard" / "call17_eager_launch_cost" /
                      "eager_launch_cost.json").read_text())
    assert doc["schema"] == "eager_launch_cost/1" and doc["use_triton_op"]
    stages = {s["stage"]: min(s["host_us"]) for s in doc["stages"]}
    assert list(stages) == ["fresh", "after_inductor_baseline", "after_triton_op_compiled"]
    assert max(stages.values()) < 1.15 * min(stages.values()) and max(stages.values()) < 40, stages


def test_the_guarded_rms_norm_replace_wins_over_the_default_and_the_trial_keeps_coordinate_descent():
    # fp16 2048 x 65536, 500 steps: replace 1.39x (1.32x before the guarded kernel), coordinate
    # descent 1.40x; the trial names the faster, and neither is within the other's noise
    doc = json.loads((TRIALS / "rms_norm_64k_replace" / "guarded_vs_coordinate_descent" / "fp16" /
                      "trials.json").read_text())
    arms = {a["name"]: a for a in doc["arms"]}
    rep, cd = arms["replace"], arms["coordinate_descent"]
    assert doc["winner"] == "coordinate_descent" and "coordinate_descent_tuning" in doc["what_to_change"]
    assert rep["beyond_noise"] and rep["outputs"]["result"] == "equal" and 1.37 < rep["x_baseline"] < 1.40
    assert rep["replaced"] and all(r.startswith("rms_norm (chunked, traced into a compiled graph): kernel ")
                                   for r in rep["replaced"]), rep["replaced"]
    assert 0.98 < rep["x_baseline"] / cd["x_baseline"] < 1.0
    assert max(rep["ms"]) < 0.75 * min(arms["baseline"]["ms"])
    # the program's decision follows the trial: tune (one Inductor flag), not rewrite
    decision = program_evidence.program_decision(None, "trials.json", trials=doc)
    assert decision["verdict"] == "tune_triton" and "coordinate_descent_tuning" in decision["says"]


def test_a_replacement_that_ties_coordinate_descent_gives_way_to_the_one_flag():
    # the guarded kernel with streamed stores: replace 1.404x, coordinate descent 1.402x (spreads
    # 1.001 / 1.000: "beyond" a two-run noise, far inside the 1-2.5 % the same kernels moved between
    # device calls); the run's trials.json (written before the tie rule) names replace, read again
    # the trial keeps the smaller change and says what tied with it
    doc = json.loads((TRIALS / "rms_norm_64k_replace" / "guarded_cs_vs_coordinate_descent" / "fp16" /
                      "trials.json").read_text())
    arms = {a["name"]: a for a in doc["arms"]}
    rep, cd = arms["replace"], arms["coordinate_descent"]
    assert doc["winner"] == "replace"
    assert rep["beyond_noise"] and cd["beyond_noise"] and rep["outputs"]["result"] == cd["outputs"]["result"] == "equal"
    lead = decide.threshold("clear_lead_x")
    assert max(rep["noise"], cd["noise"]) < rep["x_baseline"] / cd["x_baseline"] < 1.002 < lead
    outcome = trial_evidence.trial_outcome(doc)
    assert outcome["winner"].name == "coordinate_descent"
    assert "(replace 1.40x tied with it, under the clear lead of 2 %" in outcome["what_to_change"]
    decision = program_evidence.program_decision(None, "trials.json", trials=doc)
    assert decision["verdict"] == "tune_triton" and "coordinate_descent_tuning" in decision["says"]
    # a lead beyond the noise still goes to the fastest arm
    ahead = json.loads(json.dumps(doc))
    for a in ahead["arms"]:
        if a["name"] == "replace":
            a["x_baseline"] = cd["x_baseline"] * lead * 1.001
    assert trial_evidence.trial_outcome(ahead)["winner"].name == "replace"


L2ROWS = ROWSWEEP.parent / "call23_l2_rows"
MIB = 1 << 20


def _l2(path: str) -> dict:
    """{variant: % of copy} of an l2_rows_probe run, every output correct."""
    doc = json.loads((L2ROWS / path).read_text())
    assert doc["schema"] == "l2_rows_probe/1"
    assert all("error" not in r and r["correct"] for r in doc["runs"]), doc["runs"]
    return {r["variant"]: r["pct_of_copy"] for r in doc["runs"]}


def _ncu_dram(call: str) -> dict:
    """{variant: (DRAM MiB read, written)} of an ``l2_rows_probe.py --once`` run under ncu: one
    profiled launch per variant inside the profiler range (call24), or, without it (call23),
    the check and the timed launch of each variant (the second kept) and coordinate descent's
    tuning launches (left out: not the config the timing run kept)."""
    import csv

    folder = L2ROWS / call
    names = [ln.split()[1] for ln in (folder / "ncu64.log").read_text().splitlines() if ln.startswith("ONCE ")]
    lines = (folder / "ncu64.csv").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID"'))
    kernels: dict = {}
    for row in csv.DictReader(lines[start:]):
        kernels.setdefault(int(row["ID"]), {})[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    ids = sorted(kernels)
    if len(ids) != len(names):
        names = [n for n in names if n != "coordinate_descent"]
        ids = ids[1:2 * len(names):2]
    return {n: (kernels[i]["dram__bytes_read.sum"] / MIB, kernels[i]["dram__bytes_write.sum"] / MIB)
            for n, i in zip(names, ids)}


def test_the_guarded_rms_norm_reads_its_input_from_dram_once_and_the_chunked_one_does_not():
    # 2048 x 65536 fp16: 256 MiB in, 256 MiB out; pass 2 of the guarded kernel finds the whole
    # row in L2, the chunked kernel's (two programs per SM) rereads ~19 % from DRAM
    for call in ("call23_probe", "call24_pipelined"):
        dram = _ncu_dram(call)
        for name in ("guarded", "probe-plain-rows-auto", "probe-cs-rows-auto"):
            read, written = dram[name]
            assert 256 <= read < 258 and 225 < written <= 256, (call, name, dram[name])
        assert dram["chunked"][0] > 1.15 * 256, dram["chunked"]
    assert _ncu_dram("call23_probe")["probe-plain-rows-32"][0] > 1.35 * 256   # spilled at maxnreg 32
    assert all(r > 1.1 * 256 for n, (r, _) in _ncu_dram("call24_pipelined").items() if "pipe" in n)


def test_streamed_stores_gain_and_every_other_lever_on_the_guarded_rms_norm_loses():
    t64 = _l2("call23_probe/fp16_65536/l2_rows_probe.json")
    cs, plain = t64["probe-cs-rows-auto"], t64["probe-plain-rows-auto"]
    assert cs > plain + 1.0 and abs(plain - t64["guarded"]) < 0.5, t64
    assert cs > t64["coordinate_descent"] and cs > t64["chunked"] + 5
    assert all(v < cs for k, v in t64.items() if k.startswith("probe-") and k != "probe-cs-rows-auto"
               and not k.startswith("probe-cs-sm2")), t64
    t128 = _l2("call23_probe/fp16_131072/l2_rows_probe.json")   # the 4-chunk limit stands at 128k
    assert all(v < t128["chunked"] - 3 for k, v in t128.items() if k not in ("chunked", "coordinate_descent"))
    for case in ("fp16_65536", "bf16_65536"):
        pipe = _l2(f"call24_pipelined/{case}/l2_rows_probe.json")
        assert max(v for k, v in pipe.items() if "pipe" in k) < pipe["guarded"] - 5, pipe
    launches = _l2("call26_cs_launches/launches_fp16/l2_rows_probe.json")
    assert max(launches, key=launches.get) in ("guarded", "probe-cs-rows-auto"), launches


def test_the_streamed_guarded_rms_norm_is_level_with_tuned_inductor_in_fp16_and_beats_it_in_bf16():
    doc = json.loads((L2ROWS / "call25_guarded_cs" / "sweep" / "rowkernel_sweep.json").read_text())
    cmp = {c["dtype"]: c for c in doc["comparison"] if c["op"] == "rms_norm" and c["n_cols"] == 65536}
    fp16, bf16 = cmp["fp16"], cmp["bf16"]
    assert fp16["bundled_correct"] and bf16["bundled_correct"]
    assert 1.0 < fp16["bundled_speedup"] < 1.02 and not fp16["bundled_beats_inductor"]
    assert fp16["verdict"].startswith("within 2 %")
    assert bf16["bundled_speedup"] > 1.08 and bf16["bundled_beats_inductor"]
    rows = {(r["dtype"], r["mode"]): r for r in doc["rows"]}
    for dt in ("fp16", "bf16"):
        assert rows[(dt, "bundled")]["x_vs_inductor_default"] > 1.35
    probe = _l2("call25_guarded_cs/probe_fp16/l2_rows_probe.json")
    assert probe["guarded"] > probe["probe-plain-rows-auto"] + 1.0    # the library now stores .cs


def _stream(call: str, cols: int = 65536) -> dict:
    """{(op, variant): % of copy} of a call23_l2_rows pass2_probe run at the plans' launches."""
    folder = {"call29_chunked_cs": "cs", "call30_stream_constexpr_off": "st", "call31_stream_plan": "st2"}[call]
    runs = _probe(f"call23_l2_rows/{call}/{folder}_fp16_{cols}/pass2_probe.json", cols)
    return {(op, v): pct for (op, v, _, _), (pct, _) in runs.items()}


def test_streamed_stores_gain_on_every_plans_chunked_form_at_64k_and_the_plan_says_where():
    cs = _stream("call29_chunked_cs")
    plan_form = {"softmax": "loop", "log_softmax": "loop", "layer_norm": "unrolled", "rms_norm": "unrolled"}
    gains = {op: cs[(op, f"{form}_y_cs")] - cs[(op, form)] for op, form in plan_form.items()}
    assert all(g > 0.3 for g in gains.values()) and gains["layer_norm"] > 3 and gains["rms_norm"] > 3, gains
    long = _stream("call29_chunked_cs", 131072)
    assert long[("softmax", "loop_y_cs")] > long[("softmax", "loop")] + 1
    assert all(long[(op, "unrolled_y_cs")] < long[(op, "unrolled")] for op in ("layer_norm", "rms_norm"))
    # the constexpr switch off reads as the plain copy; on (the plan's stream_out) as the .cs copy
    off = _stream("call30_stream_constexpr_off")
    assert all(abs(off[(op, f)] - off[(op, f + "_y_plain")]) < 0.5 for op in plan_form for f in ("loop", "unrolled"))
    on = _stream("call31_stream_plan")
    for op, form in plan_form.items():
        assert on[(op, form)] - on[(op, form + "_y_plain")] > 0.3, (op, on)
        assert abs(on[(op, form)] - cs[(op, form + "_y_cs")]) < 1.0, (op, on, cs)
    assert on[("layer_norm", "loop")] < on[("layer_norm", "loop_y_plain")]   # the one form it costs
    from tko.remedies import row_plan

    plans = {op: row_plan.CHUNK_PLANS[("sm_90", op)].stream_out for op in plan_form}
    assert plans == {"softmax": 64, "log_softmax": 64, "layer_norm": 4, "rms_norm": 4}


def test_keeping_the_row_in_registers_between_the_passes_does_not_beat_the_guarded_kernel():
    for dt in ("fp16", "bf16"):
        t = _l2(f"call32_held_rows/{dt}/l2_rows_probe.json")
        guarded = t["guarded"]
        # two chunks held (no spill) read as the guarded kernel does, bf16 up to 1.8 points above
        assert all(v < guarded + 2.0 for k, v in t.items() if k.startswith(("held", "split"))), t
        assert t["held4@16384x32"] < guarded - 10       # the whole row held: ptxas spills
        assert abs(t["held2@16384x32"] - guarded) < 1.5
        assert t["split4@8192x16"] < guarded - 5          # split4 runs since its launch was fixed


def _draws() -> list[dict]:
    return [_l2(f"call33_tuning_draws/draw{i}/l2_rows_probe.json") for i in range(1, 5)]


def test_fresh_tunings_land_on_the_guarded_launch_and_the_guarded_kernel_leads_within_the_clear_lead():
    from tko.remedies.rowkernel_sweep import beat_margin

    for i, t in enumerate(_draws(), 1):
        best = max(t["coordinate_descent"], t["max_autotune"])
        assert 1.0 < t["guarded"] / best < 1 + beat_margin(), (i, t)     # level: ahead, not clearly
        configs = [json.loads(p.read_text()) for p in (L2ROWS / "call33_tuning_draws" / f"draw{i}" / "best_config").iterdir()]
        assert len(configs) == 2 and all(c["found_by_coordesc"] for c in configs)
        assert {(c["XBLOCK"], c["R0_BLOCK"], c["num_warps"]) for c in configs} == {(1, 16384, 32)}
    from tko.remedies import row_plan

    plan = row_plan.CHUNK_PLANS[("sm_90", "rms_norm")]
    assert (plan.chunk, plan.num_warps) == (16384, 32)          # the launch the tunings found


def test_inductors_tuned_rms_norm_reads_its_input_from_dram_once_as_the_guarded_kernel_does():
    dram = _ncu_dram("call33_tuning_draws")
    for name in ("guarded", "coordinate_descent"):
        read, written = dram[name]
        assert 256 <= read < 258 and 225 < written <= 256, (name, dram)


FULL_SWEEP = ROWSWEEP.parent / "call34_full_sweep"


def _full_sweep() -> dict:
    cmp = {}
    for part in ("softmax_log_softmax", "norms"):
        doc = json.loads((FULL_SWEEP / part / "rowkernel_sweep.json").read_text())
        assert all(r["status"] == "ok" and r["correct"] for r in doc["rows"]), part
        cmp.update({(c["op"], c["dtype"], c["n_cols"]): c for c in doc["comparison"]})
    return cmp


def test_the_full_sweep_the_bundled_kernels_beat_every_inductor_mode_where_inductor_splits_the_row():
    from tko.remedies.rowkernel_sweep import beat_margin

    cmp = _full_sweep()
    assert len(cmp) == 4 * 2 * 5
    for key, c in cmp.items():      # the verdict agrees with the numbers it stands on
        assert c["bundled_beats_inductor"] == (c["bundled_speedup"] > 1 + beat_margin()), key
    for op in ("softmax", "log_softmax"):
        for dt in ("fp16", "bf16"):
            assert not cmp[(op, dt, 1024)]["bundled_beats_inductor"]    # Inductor's persistent kernel
            assert all(cmp[(op, dt, n)]["bundled_beats_inductor"] for n in (4096, 16384, 32768, 65536))
            assert cmp[(op, dt, 65536)]["bundled_speedup"] > 1.4
    for op in ("layer_norm", "rms_norm"):    # Inductor keeps these rows in one pass up to 16k
        assert not any(cmp[(op, dt, n)]["bundled_beats_inductor"] for dt in ("fp16", "bf16") for n in (1024, 4096, 16384))
    assert all(cmp[k]["bundled_beats_inductor"] and cmp[k]["bundled_speedup"] > 1.1
               for k in (("layer_norm", "fp16", 65536), ("layer_norm", "bf16", 65536), ("rms_norm", "bf16", 65536)))
    level = cmp[("rms_norm", "fp16", 65536)]      # Inductor's tuned kernel is at the DRAM floor too
    assert 1.0 < level["bundled_speedup"] < 1 + beat_margin() and level["verdict"].startswith("within 2 %")


def test_the_slow_bf16_softmax_at_32k_of_the_full_sweep_did_not_come_back():
    for run in ("run1", "run2"):
        doc = json.loads((FULL_SWEEP / "softmax_recheck" / run / "rowkernel_sweep.json").read_text())
        cmp = {(c["dtype"], c["n_cols"]): c for c in doc["comparison"]}
        for dt in ("fp16", "bf16"):
            c = cmp[(dt, 32768)]
            assert c["bundled_correct"] and c["bundled_pct_of_copy"] > 70 and c["bundled_speedup"] > 1.4, (run, c)
    first = _full_sweep()[("softmax", "bf16", 32768)]
    assert first["bundled_pct_of_copy"] < 55      # the record keeps the slow figure it measured
