"""make_investigation_report.py on artifacts the other scripts produce from real H200 captures."""

from __future__ import annotations

import json

import pytest

from tko.base import contracts

H200 = "inductor_h200"


def pipeline(run_script, fixtures_dir, tmp_path, example):
    """profile -> summarize -> collect -> inspect -> scan, as a user would run them."""
    src = fixtures_dir / H200 / example
    steps = [
        ("profile_kernels.py", "--trace", src / "trace.json.gz", "--json-out", "profile.json",
         "--markdown-out", "profile.md"),
        ("summarize_autotune_log.py", src / "log_profile.txt", "--json-out", "summary.json",
         "--markdown-out", "summary.md"),
        ("collect_inductor_artifacts.py", "--log", src / "log_profile.txt", "--cache-root",
         src / "inductor_cache", "--out", "arts"),
    ]
    for script, *args in steps:
        proc = run_script(script, *args, cwd=tmp_path)
        assert proc.returncode == 0, (script, proc.stderr)
    profile = json.loads((tmp_path / "profile.json").read_text())
    kernel = next(k["name"] for k in profile["kernels"] if k["origin"] == "triton")
    module = next((tmp_path / "arts" / kernel / "kernel_module").glob("*.py"))
    for script, *args in [("inspect_triton_meta.py", module, "--json-out", "meta.json"),
                          ("scan_amdgcn.py", "arts", "--kernel", kernel, "--json-out", "isa.json")]:
        proc = run_script(script, *args, cwd=tmp_path)
        assert proc.returncode == 0, (script, proc.stderr)
    return kernel


def report(run_script, tmp_path, kernel, *extra):
    proc = run_script("make_investigation_report.py", "--kernel", kernel, "--autotune-summary", "summary.json",
                      "--meta", "meta.json", "--isa", "isa.json", "--profile", "profile.json",
                      "--out", "report.md", *extra, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp_path / "report.json").read_text()), (tmp_path / "report.md").read_text()


def test_scatter_kernel_gets_rewrite_decision_with_evidence(run_script, fixtures_dir, tmp_path):
    kernel = pipeline(run_script, fixtures_dir, tmp_path, "scatter_index_add")
    assert kernel == "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1"
    doc, md = report(run_script, tmp_path, kernel, "--peak-gbps", "4246")
    assert contracts.contract_problems(doc) == []
    assert doc["decision"]["verdict"] == "rewrite_model"
    assert doc["decision"]["rule"] == "atomic_or_scatter_heavy"
    fired = next(f for f in doc["decision"]["fired"] if f["rule"] == "atomic_or_scatter_heavy")
    assert {e["fact"] for e in fired["evidence"]} & {"atomics", "scatter"}
    # The profile says 93.8 % of kernel time (checked against profile.json by hand).
    assert doc["facts"]["share"]["value"] == pytest.approx(0.938, abs=0.001)
    assert "rewrite the model code" in md and "## Unresolved gaps" in md
    for heading in ("## Inputs and best config", "## Pointer arguments and hints", "## Load/store instructions",
                    "## Tuning attempts and results", "## Decision and evidence", "## Final impact"):
        assert heading in md


def test_hot_pointwise_without_bandwidth_is_tuned_and_lists_gaps(run_script, fixtures_dir, tmp_path):
    kernel = pipeline(run_script, fixtures_dir, tmp_path, "pointwise_chain")
    doc, md = report(run_script, tmp_path, kernel)
    assert doc["decision"]["verdict"] == "tune_triton"
    assert doc["decision"]["rule"] == "hot_without_bandwidth_number"
    assert doc["facts"]["memory_verdict"]["value"] == "global"     # PTX ld.global on the H200
    assert any("no standalone run" in g for g in doc["gaps"])
    assert any("no environment record" in g for g in doc["gaps"])
    # Autotune table of the real log: XBLOCK=1024/num_warps=4 beat XBLOCK=512/num_warps=8 by 1.224x.
    assert "`XBLOCK=1024, num_warps=4, num_stages=1` | 0.0858" in md
    assert "`in_ptr0` | *fp16 | 16 | —" in md


def test_missing_inputs_become_gaps_not_crashes(run_script, tmp_path):
    proc = run_script("make_investigation_report.py", "--kernel", "triton_poi_x", "--out", "r.md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["decision"]["verdict"] is None
    assert len(doc["gaps"]) >= 8


def test_wrong_artifact_is_one_line_exit_2(run_script, tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"schema": "isa_scan/1", "kernels": []}))
    proc = run_script("make_investigation_report.py", "--kernel", "k", "--meta", "x.json", "--out", "r.md",
                      cwd=tmp_path)
    assert proc.returncode == 2
    assert "is a isa_scan/1 artifact, expected triton_meta" in proc.stderr
    assert not (tmp_path / "r.md").exists()


def test_measured_variants_table_and_impact_from_a_benchmark_run(run_script, tmp_path):
    # The benchmark template in the interpreter with the host-clock timer: real checks, CPU times.
    proc = run_script("triton_benchmark_template.py", "--size", "4096", "--cpu-timer", "--json-out", "bench.json",
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    bench = json.loads((tmp_path / "bench.json").read_text())
    proc = run_script("make_investigation_report.py", "--kernel", "silu_mul", "--benchmark", "bench.json",
                      "--out", "report.md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "report.json").read_text())
    md = (tmp_path / "report.md").read_text()
    case = bench["cases"][0]
    names = [r["name"] for r in case["results"]]
    rows = doc["sections"]["tuning_runs"]["rows"]
    assert [r["name"] for r in rows] == names
    best = case["ranking"]["best"]
    assert doc["sections"]["tuning_runs"]["best"] == best
    assert f"| {best} (best) | passed |" in md
    # CPU times of the interpreter rank nothing: no best speed-up, no headroom from them
    assert doc["sections"]["tuning_runs"]["interpreter"] is True and doc["sections"]["tuning_runs"]["best_x"] is None
    assert f"{len(names)} variants checked in Triton's interpreter (bench.json): correct or not" in doc["impact"]
    assert "Best measured variant" not in doc["impact"]
    skipped = [r for r in case["results"] if r["status"] == "skipped"]
    for r in skipped:  # never ranked, reason shown
        assert r["reason"] in md


def test_a_measured_ab_decides_over_inference(run_script, tmp_path):
    """An A/B that measured the eager fallback 1.25x faster (spread 1.05, outputs equal) decides
    'disable the compiled region', citing the A/B file; a slower fallback only adds advice."""
    from tko.base.artifact import write_artifact

    def ab(speedup, passed=True):
        path = tmp_path / f"ab_{speedup}.json"
        write_artifact(path, "fallback_ab/1", "eager_fallback_ab.py", {
            "command": ["python", "repro.py"], "script": "repro.py", "disable": ["__main__:f"],
            "arms": [], "speedup_fallback_over_compiled": speedup, "noise_spread": 1.05,
            "verdict": "fallback faster" if speedup > 1 else "compiled faster",
            "output_check": {"checked": True, "passed": passed, "reason": "equal" if passed else "differ"}})
        return path

    rep = run_script("make_investigation_report.py", "--kernel", "k", "--out", tmp_path / "a.md", "--ab", ab(1.25),
                     cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads((tmp_path / "a.json").read_text())
    assert (doc["decision"]["verdict"], doc["decision"]["rule"]) == ("disable_compiled_region", "fallback_measured_faster")
    ev = {e["fact"]: e["source"] for e in doc["decision"]["fired"][0]["evidence"]}
    assert ev["fallback_speedup"] == "ab_1.25.json: speedup_fallback_over_compiled"
    rep = run_script("make_investigation_report.py", "--kernel", "k", "--out", tmp_path / "b.md", "--ab", ab(0.8),
                     cwd=tmp_path)
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["decision"]["rule"] != "fallback_measured_faster"
    assert "fallback_measured_slower" in {f["rule"] for f in doc["decision"]["fired"]}


def test_real_h200_ab_inside_its_spread_decides_nothing(run_script, tmp_path):
    # eager_fallback_ab.py on an H200 (examples/recorded_h200/dynamic_shapes): the fallback's median
    # is 0.666x the compiled run's, but its own runs spread 2.36x (0.052-0.123 ms/step at 50 steps):
    # neither the disable rule nor the "slower" advice may fire on that
    from conftest import ROOT

    ab = ROOT / "examples" / "recorded_h200" / "dynamic_shapes" / "fallback_ab.json"
    doc = json.loads(ab.read_text())
    assert doc["verdict"] == "no difference beyond run-to-run spread" and doc["output_check"]["passed"]
    rep = run_script("make_investigation_report.py", "--kernel", "k", "--out", tmp_path / "r.md", "--ab", ab,
                     cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    out = json.loads((tmp_path / "r.json").read_text())
    fired = {f["rule"] for f in out["decision"]["fired"]}
    assert not fired & {"fallback_measured_faster", "fallback_measured_slower", "fallback_outputs_differ"}
    assert out["facts"]["fallback_beyond_noise"]["value"] is False
    assert out["facts"]["fallback_speedup"]["value"] == pytest.approx(0.666, abs=0.001)


def test_bandwidth_from_the_device_time_when_the_run_has_it(run_script, tmp_path):
    # a real H200 standalone run of a 6.6 us LayerNorm kernel with every timer: do_bench's events
    # say 1700 GB/s, its device time with L2 flushed 2722 GB/s; the report's GB/s is the latter
    from conftest import ROOT

    run = ROOT / "tests" / "fixtures" / "kernel_runs_h200" / "run_triton_per_fused_native_layer_norm_0.json"
    rep = run_script("make_investigation_report.py", "--kernel", "triton_per_fused_native_layer_norm_0",
                     "--out", tmp_path / "r.md", "--run", run, cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    t = doc["sections"]["timing"]
    assert t["standalone_ms"] == pytest.approx(0.009888, abs=1e-6)           # do_bench, as before
    assert t["standalone_device_ms"] == pytest.approx(0.006176, abs=1e-6)
    assert doc["facts"]["gb_per_s"]["value"] == pytest.approx(2721.8, abs=0.1)
    assert "L2 flushed" in doc["facts"]["gb_per_s"]["source"]
    md = (tmp_path / "r.md").read_text()
    assert "device time 0.0062 ms (profiler, L2 flushed): do_bench is 1.6x the device time" in md


def test_launch_latency_cut_comes_from_the_rules(run_script, tmp_path):
    # the same 1.6x run against rules whose launch_latency_ratio is 2.0: no launch-latency line
    import yaml

    from conftest import ROOT

    rules = yaml.safe_load((ROOT / "references" / "decision_rules.yaml").read_text(encoding="utf-8"))
    rules["thresholds"]["launch_latency_ratio"]["value"] = 2.0
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    run = ROOT / "tests" / "fixtures" / "kernel_runs_h200" / "run_triton_per_fused_native_layer_norm_0.json"
    rep = run_script("make_investigation_report.py", "--kernel", "triton_per_fused_native_layer_norm_0",
                     "--out", tmp_path / "r.md", "--run", run, "--rules", tmp_path / "rules.yaml", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    md = (tmp_path / "r.md").read_text()
    assert "device time 0.0062 ms (profiler, L2 flushed) |" in md
    assert "launch latency" not in md


# ----------------------------------------------------------------------------- wrong-typed fields

def _good_inputs(fixtures_dir) -> tuple[str, dict]:
    """One well-formed document per input of the report, all naming the same kernel."""
    from conftest import ROOT

    from tko.read.isa import scan_path

    kernel = "triton_poi_fused_x_0"

    def load(path):
        return json.loads((ROOT / path).read_text())

    isa = [{**r, "name": kernel} for r in scan_path(fixtures_dir / "isa" / "gfx90a-nopr" / "matmul_spill.amdgcn")]
    profile = load("examples/recorded_h200/pointwise_chain/profile/profile.json")
    profile["kernels"][0]["name"] = kernel
    return kernel, {
        "profile": profile,
        "autotune_summary": {"kernels": [{
            "kernel": kernel, "kind": "pointwise", "winner": {"ms": 0.01, "gb_per_s": 100.0, "label": "XBLOCK=1024",
                                                                "config": {"num_warps": 4}},
            "configs": [{"ms": 0.01, "label": "XBLOCK=1024"}, {"ms": 0.02, "label": "XBLOCK=512"}], "spread": 2.0,
            "flags": ["wide_spread"], "statistic": "min", "from_cache": False, "num_bytes": 10, "winner_from": "log",
            "launch": {"args": [{"name": "in_ptr0", "shape": [4]}], "grid": [1], "num_bytes": 10, "bytes_source": "x"}}]},
        "meta": {"source": "k.py", "entry_kernel": kernel, "kernels": [{
            "name": kernel, "kind": "pointwise",
            "memory_ops": [{"op": "load", "kind": "gather", "indirect": False, "bases": ["in_ptr0"]},
                           {"op": "load", "kind": "contiguous", "indirect": False, "bases": ["in_ptr0"]},
                           {"op": "store", "kind": "scatter", "indirect": True, "bases": ["out_ptr0"]}],
            "atomics": [{"kind": "scatter", "indirect": True}],
            "params": [{"name": "in_ptr0", "kind": "pointer", "dtype": "fp32"}, {"name": "ks0", "kind": "scalar"}],
            "pointer_hints": {"in_ptr0": {"tt.divisibility": 16, "tt.pointer_range": 32}},
            "hint_calls": [{"text": "tl.assume(x >= 0)"}], "reductions": [{"op": "sum"}], "findings": ["f"],
            "inductor_facts": {"num_load": 2}}]},
        "isa": {"kernels": isa},
        "run": load("tests/fixtures/kernel_runs_h200/run_triton_per_fused_native_layer_norm_0.json"),
        "probe": load("tests/fixtures/sweep/tiny_inductor_probe.json"),
        "benchmark": load("tests/fixtures/sweep_h200/long_row_softmax_sweep_1gpu.json"),
        "ab": load("examples/recorded_h200/dynamic_shapes/fallback_ab.json"),
        "artifacts": {"kernels": [{"kernel": kernel, "missing": [{"kind": "model_code_frames", "reason": "r"}],
                                   "model_code": {"aten_ops": ["aten.add"], "source_nodes": ["add"],
                                                  "frames": [{"file": "m.py", "line": 3, "qualname": "f"}],
                                                  "unmapped_nodes": []}}]},
        "trials": load("examples/recorded_h200/trials/row_reduction/trials.json"),
        "sol": load("tests/fixtures/sol_h200/table/transposed_add_rep1.json"),
        "env": load("examples/recorded_h200/scatter_index_add/triton_env.json"),
    }


WRONG = ("x", 7, -1.5, True, None, [], {}, [1, "a"], {"a": 1})


def _mutations(value, path=(), depth=0):
    """(path, wrong-typed value) for every field of ``value`` down to depth 4 (first two list items)."""
    children = (list(value.items()) if isinstance(value, dict)
                else list(enumerate(value[:2])) if isinstance(value, list) else [])
    for n, (key, child) in enumerate(children):
        wrong = [w for w in WRONG if type(w) is not type(child)]
        yield path + (key,), wrong[(len(path) + n) % len(wrong)]
        if depth < 4:
            yield from _mutations(child, path + (key,), depth + 1)


def _with(doc, path, value):
    import copy

    out = copy.deepcopy(doc)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


@pytest.mark.slow
def test_a_wrong_typed_field_in_any_input_reads_as_missing_never_an_exception(fixtures_dir):
    from tko.base import decide
    from tko.verdict import report

    kernel, docs = _good_inputs(fixtures_dir)
    rules = decide.load_rules()
    labels = {k: f"{k}.json" for k in docs}
    full = report.build(kernel, docs, labels, peak_override=4000.0, rules=rules)
    assert {"profile", "autotune", "meta", "isa", "probe", "tuning_runs", "fallback_ab", "model_code", "trials",
            "speed_of_light", "env"} <= set(full["sections"])
    checked = 0
    for key, doc in docs.items():
        for n, (path, wrong) in enumerate(_mutations(doc)):
            bad = {**docs, key: _with(doc, path, wrong)}
            try:
                result = report.build(kernel, bad, labels, peak_override=4000.0, rules=rules)
                if n % 25 == 0:
                    report.render_markdown(result, rules)
            except Exception as exc:  # noqa: BLE001 - the test names the field that broke
                raise AssertionError(f"{key}: {'.'.join(map(str, path))} = {wrong!r}: {exc!r}") from exc
            checked += 1
    assert checked > 500


RECORDED_PC = __import__("conftest").ROOT / "examples" / "recorded_h200" / "pointwise_chain"
PC_KERNEL = "triton_poi_fused_add_gelu_mul_0"


@pytest.mark.parametrize("device_from", ["profile", "isa", "peaks_file"])
def test_peaks_file_without_env_judges_the_shown_bandwidth(run_script, fixtures_dir, tmp_path, device_from):
    # no check_env record: the device comes from the profile (name and arch), else the ISA scan
    # (arch only), else the peaks file named on the command line (its one device); the file is read
    extra = []
    if device_from == "profile":
        extra = ["--profile", RECORDED_PC / "profile" / "profile.json"]
    elif device_from == "isa":
        kernel = pipeline(run_script, fixtures_dir, tmp_path, "pointwise_chain")
        assert kernel == PC_KERNEL
        extra = ["--isa", "isa.json"]
    proc = run_script("make_investigation_report.py", "--kernel", PC_KERNEL, *extra,
                      "--run", RECORDED_PC / "runs" / f"{PC_KERNEL}.json",
                      "--peaks", RECORDED_PC / "device_peaks.json", "--out", "report.md", cwd=tmp_path,
                      env={"HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["sections"]["timing"]["standalone_gb_per_s"] == pytest.approx(3714.1, abs=0.1)
    # the recorded copy peak of that H200: 4222 GB/s (examples/recorded_h200/pointwise_chain/device_peaks.json)
    assert doc["facts"]["pct_copy_peak"]["value"] == pytest.approx(3714.1 / 4222.0, abs=0.001)
    assert doc["sections"]["timing"]["peak"]["source"] == "store"
    assert (doc["decision"]["verdict"], doc["decision"]["rule"]) == ("leave_as_is", "at_copy_bandwidth")
    assert not any("no peak bandwidth known" in g for g in doc["gaps"])


def test_a_shown_bandwidth_without_a_peak_is_never_called_missing():
    from tko.base import decide

    facts = {"share": decide.Fact(0.876, "profile.json"), "gb_per_s": decide.Fact(3714.1, "run.json")}
    d = decide.decide(facts)
    says = next(f.says for f in d.fired if f.rule == d.rule)
    assert d.rule != "hot_without_bandwidth_number" and "no bandwidth measurement" not in says
    assert "3714 GB/s" in says and "peak" in says
    d = decide.decide({"share": decide.Fact(0.876, "profile.json")})
    assert d.rule == "hot_without_bandwidth_number"


def recorded_pc_report(run_script, tmp_path, *extra):
    """The report of the recorded H200 pointwise_chain capture from its own files, as investigate.py
    --from-capture makes it (summary and manifest made here from the recorded log and cache)."""
    cap = RECORDED_PC
    for script, *args in [("summarize_autotune_log.py", cap / "autotune_kernels" / "autotune.log",
                           "--json-out", "summary.json"),
                          ("collect_inductor_artifacts.py", "--log", cap / "log_profile.txt", "--capture-dir",
                           cap / "autotune_kernels", "--cache-root", cap / "inductor_cache", "--out", "arts")]:
        proc = run_script(script, *args, cwd=tmp_path)
        assert proc.returncode == 0, (script, proc.stderr)
    proc = run_script("make_investigation_report.py", "--kernel", PC_KERNEL, "--autotune-summary", "summary.json",
                      "--profile", cap / "profile" / "profile.json", "--env", cap / "triton_env.json",
                      "--run", cap / "runs" / f"{PC_KERNEL}.json", "--artifacts", tmp_path / "arts" / "manifest.json",
                      "--out", "report.md", *extra, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp_path / "report.json").read_text()), (tmp_path / "report.md").read_text()


def test_the_report_says_which_of_the_kernels_times_decides(run_script, tmp_path):
    doc, md = recorded_pc_report(run_script, tmp_path)
    timing, profile = doc["sections"]["timing"], doc["sections"]["profile"]
    # three real times of one kernel: in the program, alone, and in Inductor's autotuning
    assert profile["mean_us"] and timing["standalone_ms"] and timing["autotune_winner_ms"]
    note = md.split("**Which time decides:**", 1)[1].split("\n\n", 1)[0]
    assert "the standalone time" in note and "bandwidth" in note and "share" in note
    assert "autotune" in note and "ranks" in note


def test_model_code_paths_are_shown_from_the_recording_root(run_script, tmp_path):
    repro = json.loads((RECORDED_PC / "repro_command.json").read_text())["command"]
    doc, md = recorded_pc_report(run_script, tmp_path, "--repro", " ".join(repro))
    frames = doc["sections"]["model_code"]["frames"]
    assert frames and all(f["file"].startswith("/") for f in frames)          # the recording machine's paths
    table = [ln for ln in md.split("## Model code behind the kernel", 1)[1].splitlines() if ln.startswith("| `")]
    assert len(table) == len(frames)
    for line, frame in zip(table, frames):
        assert line.startswith(f"| `{repro[1]}:{frame['line']}` |"), line
    # without the repro command: relative to the folder the frames share
    doc, md = recorded_pc_report(run_script, tmp_path)
    assert "| `pointwise_chain.py:12` |" in md and "`/" not in md.split("## Model code behind the kernel", 1)[1]


def test_the_kernel_report_says_what_to_change_without_trials(run_script, tmp_path):
    doc, md = recorded_pc_report(run_script, tmp_path)
    section = md.split("## What to change\n", 1)[1].split("\n## ", 1)[0]
    assert doc["decision_text"] in section and "nothing was measured end to end" in section.lower()
    assert "try_remedies.py" in section
