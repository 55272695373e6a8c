"""summarize_autotune_log.py and tko.read.autotune_log on real logs (see tests/fixtures/autotune_logs/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tko.base import artifact
from tko.read.autotune_summary import HEADLINE_SHARED, _label, full_tuning, summarize
from tko.read.autotune_records import _same_config, config_key, config_label, parse_config_str
from tko.read.autotune_log import parse_files
from tko.base.contracts import contract_problems
from tko.base.errors import InputError

LOGS = Path(__file__).resolve().parent / "fixtures" / "autotune_logs"
ROOT_EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "recorded_h200"
INTERP = LOGS / "triton_print_autotuning_interp.log"
ONE_LINE = LOGS / "triton_print_autotuning_3_2_from_source.log"


def _kernel(summary: dict, name: str) -> dict:
    return next(k for k in summary["kernels"] if k["kernel"] == name)


def test_config_str_all_triton_eras():
    # 3.9 (ir_override), 3.2 (warp-spec fields), Inductor HIP kwargs
    c39 = parse_config_str("BLOCK: 1024, num_warps: 4, num_ctas: 1, num_stages: 1, maxnreg: None, "
                           "ir_override: None")
    assert c39 == {"kwargs": {"BLOCK": 1024}, "num_warps": 4, "num_stages": 1,
                   "extras": {"num_ctas": 1, "maxnreg": None, "ir_override": None}}
    c32 = parse_config_str("BLOCK: 1024, num_warps: 4, num_ctas: 1, num_stages: 1, "
                           "num_buffers_warp_spec: 0, num_consumer_groups: 0, reg_dec_producer: 0, "
                           "reg_inc_consumer: 0, maxnreg: None")
    assert config_key(c32) == config_key(c39)  # defaults do not change a config's identity
    hip = parse_config_str("XBLOCK: 256, waves_per_eu: 2, num_warps: 4, num_ctas: 1, "
                           "num_stages: 1, maxnreg: None")
    assert hip["kwargs"] == {"XBLOCK": 256} and hip["extras"]["waves_per_eu"] == 2
    assert config_key(hip) != config_key(parse_config_str(
        "XBLOCK: 256, num_warps: 4, num_ctas: 1, num_stages: 1, maxnreg: None"))
    # cut short before num_stages: not a whole config
    assert parse_config_str("XBLOCK: 256, num_warps: 4, num_ct") is None
    assert parse_config_str("hello world") is None


def test_triton_four_line_form_real_interpreter_output():
    summary = summarize(parse_files([INTERP]))
    (k,) = summary["kernels"]
    assert k["kernel"] == "add_one_kernel"
    # two shapes tuned (the third launch was a cache hit and printed nothing)
    assert len(k["tunings"]) == 2
    assert [t["duration_s"] for t in k["tunings"]] == [0.55, 0.90]
    assert k["winner"]["label"] == "BLOCK=1024, num_warps=4, num_stages=1"
    assert len(k["configs"]) == 3 and all(c["ms"] is None for c in k["configs"])
    assert k["statistic"] == "median"
    assert set(k["flags"]) == {"no_timings", "retuned"}
    assert any("8192" in n for n in k["notes"])
    assert summary["skipped"] == []


def test_triton_one_line_form():
    summary = summarize(parse_files([ONE_LINE]))
    names = {k["kernel"]: k for k in summary["kernels"]}
    assert set(names) == {"_fwd_kernel", "matmul_kernel"}
    fwd = names["_fwd_kernel"]
    assert fwd["winner"]["config"]["kwargs"] == {"BLOCK_M": 128, "BLOCK_N": 64}
    assert fwd["winner"]["config"]["num_stages"] == 2
    assert fwd["tunings"][0]["duration_s"] == 2.41
    assert names["matmul_kernel"]["winner"]["config"]["kwargs"]["GROUP_SIZE_M"] == 8
    assert summary["skipped"] == []  # the '#' header quoting the print statement is a comment


def test_four_line_message_cut_off_is_skipped_not_fatal(tmp_path):
    lines = INTERP.read_text().splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("Triton autotuning for function"))
    # drop the 'finished after' line of the first message: the block no longer continues
    cut = lines[:head + 2] + lines[head + 3:]
    log = tmp_path / "cut.log"
    log.write_text("\n".join(cut) + "\n")
    summary = summarize(parse_files([log]))
    assert len(summary["skipped"]) == 1
    assert summary["skipped"][0]["where"] == f"{log}:{head + 1}"
    assert "cut off" in summary["skipped"][0]["reason"]
    (k,) = summary["kernels"]
    assert len(k["tunings"]) == 2  # the second message is still read


def test_cli_writes_contract_conforming_outputs(run_script, tmp_path):
    out_json, out_md = tmp_path / "s.json", tmp_path / "s.md"
    res = run_script("summarize_autotune_log.py", INTERP, ONE_LINE, "--json-out", out_json,
                     "--markdown-out", out_md, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out_json.read_text())
    assert doc["schema"] == "autotune_summary/2"
    assert contract_problems(doc) == []
    assert {k["kernel"] for k in doc["kernels"]} == {"add_one_kernel", "_fwd_kernel",
                                                     "matmul_kernel"}
    md = out_md.read_text()
    assert "## `add_one_kernel`" in md and "no_timings" in md


def test_the_script_exits_without_teardown_yet_everything_reaches_the_pipe_and_the_files(run_script, tmp_path):
    # the script leaves its parsed logs and summary to the process exit (errors.exit_now): stdout
    # is flushed first, so a pipe still gets the whole Markdown, and the files are complete
    logs = sorted(Path(__file__).resolve().parents[1].glob("examples/recorded_h200/*/autotune_kernels/autotune.log"))
    from tko.read.autotune_summary import render_markdown
    summary = summarize(parse_files(logs))
    res = run_script("summarize_autotune_log.py", *logs)
    assert res.returncode == 0, res.stderr
    assert res.stdout == render_markdown(summary)
    assert res.stdout.count("\n## `") > 5 and "kernels" in res.stderr
    out = tmp_path / "s.json"
    res = run_script("summarize_autotune_log.py", *logs, "--json-out", out)
    assert res.returncode == 0 and res.stdout == ""
    assert len(json.loads(out.read_text())["kernels"]) == len(summary["kernels"])


@pytest.mark.parametrize("content", [b"", b"   \n\n", b"just some program output\nloss 0.1\n"])
def test_empty_or_unrecognisable_file_exits_2(run_script, tmp_path, content):
    log = tmp_path / "x.log"
    log.write_bytes(content)
    res = run_script("summarize_autotune_log.py", log, "--json-out", tmp_path / "o.json")
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "o.json").exists()


def test_missing_file_and_bad_threshold_exit_2(run_script, tmp_path):
    res = run_script("summarize_autotune_log.py", tmp_path / "nope.log")
    assert res.returncode == 2 and "no such file" in res.stderr
    res = run_script("summarize_autotune_log.py", INTERP, "--spread-threshold", "0.5")
    assert res.returncode == 2 and "--spread-threshold" in res.stderr
    with pytest.raises(InputError):
        parse_files([tmp_path])


# --- real TorchInductor output from an H200 (torch 2.11 / triton 3.6) -------------------------

H200 = Path(__file__).resolve().parent / "fixtures" / "inductor_h200"
ROW_KERNEL = "triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online_sub_0"


def test_inductor_debug_log_and_metric_table_of_one_run_merge():
    log = H200 / "row_reduction" / "log_profile.txt"
    csv_table = H200 / "row_reduction" / "metric_table_kernel_autotune.csv"
    summary = summarize(parse_files([log, csv_table]))
    assert summary["skipped"] == []
    formats = {Path(i["path"]).name: i["formats"] for i in summary["inputs"]}
    assert formats["metric_table_kernel_autotune.csv"] == {"kernel_autotune_csv": 4}
    (k,) = summary["kernels"]
    assert k["kernel"] == ROW_KERNEL
    (tuning,) = k["tunings"]  # one benchmarking, reported by both files
    assert [Path(o).name.split(":")[0] for o in tuning["origins"]] == [
        "log_profile.txt", "metric_table_kernel_autotune.csv"]
    # two declared configs; dynamic R0_BLOCK scaling added two more before benchmarking
    assert k["declared_configs"] == 2 and len(k["configs"]) == 4
    ranked = [(c["config"]["kwargs"]["R0_BLOCK"], c["ms"], c["n_regs"]) for c in k["configs"]]
    assert ranked == [(2048, 0.106016, 40), (1024, 0.114368, 32), (8192, 0.126912, 64),
                      (4096, 0.20752, 88)]
    assert k["winner"]["config"]["kwargs"] == {"XBLOCK": 1, "R0_BLOCK": 2048}
    assert k["winner"]["ms"] == 0.106016 and k["winner_from"] == "autotune"
    assert k["spread"] == round(0.207520 / 0.106016, 4)
    assert k["statistic"] == "min"
    assert k["configs"][0]["shared"] == 192 and k["configs"][0]["n_spills"] == 0
    assert k["source_files"][0].endswith("cklkmrnwoukbftsf2xfw7f3aypxxqxitbiyipyqt5rvd4v7o2bwk.py")
    assert k["flags"] == []


def test_each_real_source_alone_gives_the_same_ranking():
    log = H200 / "row_reduction" / "log_profile.txt"
    csv_table = H200 / "row_reduction" / "metric_table_kernel_autotune.csv"
    from_log = summarize(parse_files([log]))["kernels"][0]
    from_csv = summarize(parse_files([csv_table]))["kernels"][0]
    assert [c["label"] for c in from_log["configs"]] == [c["label"] for c in from_csv["configs"]]
    assert from_csv["configs"][0]["n_regs"] is None  # the table has no registers
    assert from_log["winner"]["label"] == from_csv["winner"]["label"]


def test_single_config_kernels_and_flat_spread_threshold():
    mlp = summarize(parse_files([H200 / "mlp_train_step" / "log_profile.txt"]))
    single = {k["kernel"] for k in mlp["kernels"] if "single_config" in k["flags"]}
    assert "triton_per_fused_native_layer_norm_0" in single and len(single) == 6
    assert all(k["declared_configs"] == 1 and not k["configs"]
               for k in mlp["kernels"] if k["kernel"] in single)
    scatter = [H200 / "scatter_index_add" / "log_profile.txt"]
    default = {k["kernel"]: k for k in summarize(parse_files(scatter))["kernels"]}
    zeros = default["triton_poi_fused_zeros_like_0"]
    assert zeros["spread"] < 1.05 and "flat_spread" in zeros["flags"]
    big = default["triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1"]
    assert big["spread"] > 10 and "flat_spread" not in big["flags"]
    strict = {k["kernel"]: k for k in summarize(parse_files(scatter), 1.01)["kernels"]}
    assert "flat_spread" not in strict["triton_poi_fused_zeros_like_0"]["flags"]


def test_many_kernels_all_merged_across_log_and_table():
    d = H200 / "tiny_launches"
    summary = summarize(parse_files([d / "log_profile.txt", d / "metric_table_kernel_autotune.csv"]))
    rows = len((d / "metric_table_kernel_autotune.csv").read_text().splitlines()) - 1
    tuned = [k for k in summary["kernels"] if k["tunings"]]
    assert sum(len(k["configs"]) for k in tuned) == rows
    assert all(len(t["origins"]) == 2 for k in tuned for t in k["tunings"])
    # slowest winner first
    times = [k["winner"]["ms"] for k in tuned]
    assert times == sorted(times, reverse=True)


def test_real_triton_36_print_autotuning_output():
    summary = summarize(parse_files([H200 / "user_autotune_kernel" / "log_profile.txt"]))
    (k,) = summary["kernels"]
    assert k["kernel"] == "scale_bias_relu_kernel"
    assert [c["config"]["kwargs"]["BLOCK"] for c in k["configs"]] == [256, 1024, 4096]
    assert k["winner"]["config"] == {"kwargs": {"BLOCK": 1024}, "num_warps": 4, "num_stages": 3,
                                     "extras": {"num_ctas": 1, "maxnreg": None}}
    assert k["tunings"][0]["duration_s"] == 1.37


def _cut(src: Path, dst: Path, match: str, keep: int) -> int:
    """Copy src to dst with the first line containing `match` cut to `keep` characters."""
    lines = src.read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if match in line)
    lines[i] = lines[i][:keep]
    dst.write_text("\n".join(lines) + "\n")
    return i + 1


@pytest.mark.parametrize("match,keep", [("nreg 88", -40), ("nreg 88", 140), ("Best config for", -30)])
def test_truncated_real_debug_line_is_skipped_and_reported(tmp_path, match, keep):
    src = H200 / "row_reduction" / "log_profile.txt"
    log = tmp_path / "log.txt"
    lineno = _cut(src, log, match, keep)
    summary = summarize(parse_files([log]))
    assert [s["where"] for s in summary["skipped"]] == [f"{log}:{lineno}"]
    (k,) = summary["kernels"]
    assert k["winner"] is not None


def test_truncated_real_metric_table_row(tmp_path, run_script):
    src = H200 / "row_reduction" / "metric_table_kernel_autotune.csv"
    table = tmp_path / "t.csv"
    lineno = _cut(src, table, "R0_BLOCK: 4096", -30)  # inside the quoted config
    res = run_script("summarize_autotune_log.py", table, "--json-out", tmp_path / "s.json")
    assert res.returncode == 0
    assert "1 unreadable lines skipped" in res.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["skipped"] == [{"where": f"{table}:{lineno}",
                               "reason": "metric table row with 4 of 5 columns"}]
    assert len(doc["kernels"][0]["configs"]) == 3


EVENTS = LOGS / "autotune_events_contract.jsonl"


def test_capture_log_events_to_the_contract():
    summary = summarize(parse_files([EVENTS]))
    ks = {k["kernel"]: k for k in summary["kernels"]}
    add = ks["triton_poi_fused_add_gelu_mul_0"]
    assert add["statistic"] == "min" and add["statistic_basis"] == "recorded by the capture patch"
    assert add["num_bytes"] == 33558528 and add["bytes_source"] == "get_num_bytes"
    # GB/s = bytes per launch / time
    assert add["configs"][0]["gb_per_s"] == round(33558528 / 1e9 / (0.0247 / 1e3), 2)
    assert add["standalone_file"].endswith("triton_poi_fused_add_gelu_mul_0.py")
    assert add["declared_configs"] == 2 and add["flags"] == ["flat_spread"]
    cached = ks["triton_red_fused_sum_0"]
    assert set(cached["flags"]) == {"single_config", "from_cache"}
    scatter = ks["triton_per_fused_scatter_2"]
    assert scatter["winner_from"] == "coordesc" and scatter["winner"]["ms"] == 0.27
    assert {"spills", "failed_configs", "coordesc_improved"} <= set(scatter["flags"])
    assert "winner_spills" not in scatter["flags"]  # the coordesc winner does not spill
    assert scatter["configs"][1]["ms"] is None and scatter["configs"][1]["rank"] is None
    assert scatter["notes"] == ["index tensor saved: values are data-dependent"]
    skipped = {s["where"].rsplit(":", 1)[1]: s["reason"] for s in summary["skipped"]}
    assert skipped.keys() == {"9", "10"}
    assert "truncated" in skipped["9"] and "autotune_event/2" in skipped["10"]
    # the cut-off autotune line of pid 4102 did not become a second tuning
    assert len(add["tunings"]) == 1


def test_noise_in_a_text_log_is_ignored_but_garbage_in_a_capture_log_is_reported(tmp_path):
    text = tmp_path / "run.log"
    text.write_text('{"loss": 0.25, "step": 3}\n' + ONE_LINE.read_text())
    summary = summarize(parse_files([text]))
    assert summary["skipped"] == [] and len(summary["kernels"]) == 2
    events = tmp_path / "autotune.log"
    lines = EVENTS.read_text().splitlines()[:3]
    events.write_text("\n".join(lines[:2] + ["\x00\x00 torn write", '{"loss": 0.25}'] + lines[2:])
                      + "\n")
    summary = summarize(parse_files([events]))
    reasons = {s["where"].rsplit(":", 1)[1]: s["reason"] for s in summary["skipped"]}
    assert reasons == {"3": "not a JSON line in a JSON Lines capture log",
                       "4": "JSON line with schema 'missing', expected autotune_event/1"}
    (k,) = summary["kernels"]
    assert k["num_bytes"] == 33558528  # the launch line after the garbage is still read


# --- real capture logs of autotune_capture_patch.py on the H200 ------------------------------

CAPTURE = Path(__file__).resolve().parent / "fixtures" / "capture_h200"


def test_real_capture_log_row_reduction():
    summary = summarize(parse_files([CAPTURE / "row_reduction" / "autotune.log"]))
    assert summary["skipped"] == []
    (k,) = summary["kernels"]
    assert k["kernel"] == ROW_KERNEL and k["kind"] == "reduction"
    assert k["statistic"] == "min" and "InductorBenchmarker" in k["statistic_basis"]
    assert [c["config"]["kwargs"]["R0_BLOCK"] for c in k["configs"]] == [2048, 1024, 8192, 4096]
    assert [c["rank"] for c in k["configs"]] == [1, 2, 3, 4]
    assert k["configs"][0]["n_regs"] == 40 and k["configs"][0]["shared"] == 192
    for c in k["configs"]:  # GB/s is bytes moved per launch over the time
        assert c["gb_per_s"] == pytest.approx(k["num_bytes"] / 1e9 / (c["ms"] / 1e3), rel=1e-3)
    assert k["standalone_file"].endswith(f"{ROW_KERNEL}.py")
    # input shapes of the first launch, for the report
    launch = k["launches"][0]
    assert launch["grid"] == [4096, 1, 1] and launch["num_bytes"] == k["num_bytes"]
    x = launch["args"][0]
    assert (x["name"], x["shape"], x["stride"], x["dtype"]) == (
        "in_ptr0", [4096, 8192], [8192, 1], "float32")
    assert len(k["launches"]) == 1
    # the same ranking as the separate +inductor run of the same model
    debug = summarize(parse_files([H200 / "row_reduction" / "log_profile.txt"]))["kernels"][0]
    assert [c["label"] for c in debug["configs"]] == [c["label"] for c in k["configs"]]


def test_capture_and_debug_log_of_different_runs_stay_two_tunings():
    summary = summarize(parse_files([CAPTURE / "row_reduction" / "autotune.log",
                                     H200 / "row_reduction" / "log_profile.txt"]))
    (k,) = summary["kernels"]
    assert len(k["tunings"]) == 2
    assert "retuned" in k["flags"] and "winners_disagree" not in k["flags"]
    assert len(k["source_files"]) == 1  # both runs compiled the same module (same hash)
    with_table = summarize(parse_files([CAPTURE / "row_reduction" / "autotune.log",
                                        H200 / "row_reduction" / "metric_table_kernel_autotune.csv"]))
    (k,) = with_table["kernels"]
    # the same module (its name is a content hash) in the two runs' cache folders
    assert len(k["source_files"]) == 2 and len({Path(f).name for f in k["source_files"]}) == 1
    assert "several_source_files" not in k["flags"]


def test_real_capture_single_config_kernels_show_their_only_config():
    summary = summarize(parse_files([CAPTURE / "mlp_train_step" / "autotune.log"]))
    ks = {k["kernel"]: k for k in summary["kernels"]}
    single = [k for k in ks.values() if "single_config" in k["flags"]]
    assert len(single) == 6
    ln = ks["triton_per_fused_native_layer_norm_0"]
    assert ln["winner_from"] == "only_config" and ln["winner"]["ms"] is None
    assert ln["winner"]["config"]["num_warps"] == 1
    assert not ln["from_cache"]
    addmm = ks["triton_poi_fused_add_addmm_2"]
    assert addmm["spread"] < 1.05 and "flat_spread" in addmm["flags"]


def test_real_capture_of_a_hand_written_autotune_kernel_adds_the_times_triton_does_not_print():
    cap = CAPTURE / "user_autotune_kernel" / "autotune.log"
    printed = H200 / "user_autotune_kernel" / "log_profile.txt"
    summary = summarize(parse_files([printed, cap]))
    (k,) = summary["kernels"]
    assert k["statistic"] == "median"  # Triton's Autotuner compares do_bench medians
    assert len(k["configs"]) == 3 and all(c["ms"] is not None for c in k["configs"])
    assert k["winner"]["config"]["kwargs"] == {"BLOCK": 1024}
    assert {t["format"] for t in k["tunings"]} == {"autotune_event", "triton_print_autotuning"}
    assert "no_timings" not in k["flags"]


def test_real_capture_dynamic_shapes_has_one_standalone_per_signature():
    parsed = parse_files([CAPTURE / "dynamic_shapes" / "autotune.log"])
    (fact,) = parsed.facts.values()
    stem = "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0"
    launches = [json.loads(line) for line in
                (CAPTURE / "dynamic_shapes" / "autotune.log").read_text().splitlines()
                if '"event": "launch"' in line]
    assert len(launches) > 1
    assert [Path(f).name for f in fact.standalone_files] == [
        f"{stem}.py"] + [f"{stem}__s{n}.py" for n in range(2, len(launches) + 1)]


def test_truncated_real_capture_line(tmp_path):
    log = tmp_path / "autotune.log"
    lineno = _cut(CAPTURE / "row_reduction" / "autotune.log", log, '"event": "autotune"', 300)
    summary = summarize(parse_files([log]))
    assert [s["where"] for s in summary["skipped"]] == [f"{log}:{lineno}"]
    (k,) = summary["kernels"]
    assert k["tunings"] == [] and k["declared_configs"] == 4


def test_capture_and_debug_lines_of_one_benchmarking_merge_at_full_precision(tmp_path):
    """The debug lines are printed here from the real capture record with torch's own format
    strings (triton_heuristics.py: "%s: %f, nreg %d, nspill %d, #shared-mem %s"), as the same
    run would log them; the capture keeps full precision, the log 6 decimals."""
    cap = CAPTURE / "row_reduction" / "autotune.log"
    event = next(json.loads(line) for line in cap.read_text().splitlines()
                 if '"event": "autotune"' in line)
    prefix = "V1130 03:22:05.191000 659 torch/_inductor/runtime/triton_heuristics.py:{}] "
    lines = [prefix.format(1147) + f"Benchmark all input configs for {event['kernel']}, get:"]
    for t in event["timings"]:
        c = t["config"]
        cfg = ", ".join([f"{k}: {v}" for k, v in c["kwargs"].items()]
                        + [f"num_warps: {c['num_warps']}", "num_ctas: 1",
                           f"num_stages: {c['num_stages']}", "maxnreg: None"])
        lines.append(prefix.format(1149) + "%s: %f, nreg %d, nspill %d, #shared-mem %s"
                     % (cfg, t["ms"], t["n_regs"], t["n_spills"], t["shared"]))
    log = tmp_path / "log_profile.txt"
    log.write_text("\n".join(lines) + "\n")
    assert any(len(repr(t["ms"])) > 10 for t in event["timings"])  # really more than 6 decimals
    summary = summarize(parse_files([cap, log]))
    (k,) = summary["kernels"]
    (tuning,) = k["tunings"]
    assert [o.rsplit(":", 1)[0] for o in tuning["origins"]] == [str(cap), str(log)]
    assert "retuned" not in k["flags"]
    assert k["statistic"] == "min" and "InductorBenchmarker" in k["statistic_basis"]


def test_a_file_without_records_among_several_is_listed_not_fatal(run_script, tmp_path):
    plain = tmp_path / "stdout.txt"
    plain.write_text("training...\nstep 1 loss 0.3\n")
    res = run_script("summarize_autotune_log.py", EVENTS, plain, "--json-out", tmp_path / "s.json")
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert {"where": str(plain), "reason": doc["skipped"][-1]["reason"]} == doc["skipped"][-1]
    assert "no autotune records" in doc["skipped"][-1]["reason"]
    assert doc["inputs"][-1] == {"path": str(plain), "formats": {}, "skipped": 1, "overlong_lines": 0}
    # none of them readable: still an error
    empty = tmp_path / "empty.log"
    empty.write_text("")
    res = run_script("summarize_autotune_log.py", plain, empty)
    assert res.returncode == 2 and "no autotune records" in res.stderr


# --------------------------------------------------------------------------- fast paths
# The large-log fast paths must give what the general code gives, value for value and byte for
# byte (tests/bench/bench_parsers.py times them).

_VALUE = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, -0.0, 0.0, 2.5]) \
    | st.sampled_from(["1", "a", ""])
_RECORD = st.fixed_dictionaries(
    {"kwargs": st.dictionaries(st.sampled_from(["XBLOCK", "YBLOCK", "waves_per_eu"]), _VALUE,
                               max_size=2)},
    optional={"num_warps": _VALUE, "num_stages": _VALUE,
              "extras": st.none() | st.dictionaries(st.sampled_from(["num_ctas", "maxnreg"]), _VALUE,
                                                    max_size=2)})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=_RECORD, b=_RECORD)
def test_config_match_and_label_fast_paths_agree_with_config_key_and_label(a, b):
    assert _same_config(a, b) == (config_key(a) == config_key(b))
    assert _label(a) == config_label(a) and _label(b) == config_label(b)


def _summaries():
    logs = sorted(Path(__file__).resolve().parents[1].glob(
        "examples/recorded_h200/*/autotune_kernels/autotune.log"))
    return [summarize(parse_files([log])) for log in logs] + [summarize(parse_files([EVENTS]))]


def test_the_headline_tuning_holds_only_what_the_kernel_does_not():
    seen = 0
    for summary in _summaries():
        for k in summary["kernels"]:
            heads = [t for t in k["tunings"] if t["headline"]]
            assert len(heads) == (1 if k["tunings"] else 0)
            if not heads:
                continue
            seen += 1
            (head,) = heads
            assert not set(HEADLINE_SHARED) & set(head) and "configs" in k
            full = full_tuning(k, head)
            assert full["configs"] is k["configs"] and full["spread"] == k["spread"]
            assert full["winner"] == (k["winner"] if k["winner_from"] == "autotune" else head["winner"])
            assert "launch" not in k  # launches[0] is the first launch
            other = [t for t in k["tunings"] if not t["headline"]]
            assert all(full_tuning(k, t) is t and "configs" in t for t in other)
    assert seen > 10


def test_a_large_summary_is_written_compact_with_the_same_content(tmp_path, monkeypatch):
    summary = _summaries()[0]
    small = artifact.write_artifact(tmp_path / "a.json", "autotune_summary/2", "t", summary)
    monkeypatch.setattr(artifact, "COMPACT_ABOVE", 100)
    artifact.write_artifact(tmp_path / "b.json", "autotune_summary/2", "t", summary)
    a, b = ((tmp_path / n).read_text() for n in ("a.json", "b.json"))
    assert a.count("\n") > 100 and b.count("\n") == 1  # indented, then compact
    # "created" is stamped to the second at each write: two writes may straddle a second
    docs = [json.loads(t) for t in (a, b, artifact.dumps(small))]
    assert all(d.pop("created") for d in docs)
    assert docs[0] == docs[1] == docs[2]


def test_compact_encoding_is_json_dumps_and_falls_back_on_what_json_lacks():
    for summary in _summaries():
        for k in summary["kernels"]:
            assert artifact._compact(k) == json.dumps(k, separators=(",", ":"))
    odd = {"x": float("nan"), "p": Path("/a"), "t": (1, 2), "s": {3}}
    assert json.loads(artifact._compact(odd)) == {"x": "nan", "p": "/a", "t": [1, 2], "s": [3]}


def test_the_report_reads_the_first_launch_of_either_version():
    from tko.verdict.evidence import AutotuneKernel
    k = next(k for s in _summaries() for k in s["kernels"] if len(k["launches"]) > 1)
    assert AutotuneKernel.read(k).launch == k["launches"][0]
    v1 = {key: v for key, v in k.items() if key != "launches"} | {"launch": k["launches"][1]}
    assert AutotuneKernel.read(v1).launch == k["launches"][1]
    assert AutotuneKernel.read(dict(k, launches=[])).launch is None


def test_an_over_long_line_is_skipped_unread_counted_and_memory_stays_under_the_cap(tmp_path, monkeypatch, capsys):
    """A runaway line (a torn write that glued records, binary junk) among real capture records:
    it is read past in bounded blocks, never held whole, and the summary counts it."""
    import tracemalloc

    from fuzzing import run_script
    from tko.base import inputs

    cap = 1 << 20
    monkeypatch.setattr(inputs, "MAX_LINE_BYTES", cap)
    real = (ROOT_EXAMPLES / "mlp_train_step" / "autotune_kernels" / "autotune.log").read_bytes()
    n_real = real.count(b"\n")
    log = tmp_path / "autotune.log"
    with open(log, "wb") as fh:  # the line is 8x the cap: holding it would show in the peak
        fh.write(real + b'{"schema": "autotune_event/1", "kernel": "' + b"x" * (8 * cap) + b'"}\n' + real)
    expected = summarize(parse_files([ROOT_EXAMPLES / "mlp_train_step" / "autotune_kernels" / "autotune.log"]))

    tracemalloc.start()
    try:
        parsed = parse_files([log])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * cap, f"peak {peak} bytes for a {8 * cap}-byte line under a {cap}-byte cap"
    summary = summarize(parsed)
    assert [k["kernel"] for k in summary["kernels"]] == [k["kernel"] for k in expected["kernels"]]
    assert summary["inputs"][0]["overlong_lines"] == 1
    assert [s["where"] for s in summary["skipped"]] == [f"{log}:{n_real + 1}"]
    assert "line cap" in summary["skipped"][0]["reason"]

    rc, err = run_script("summarize_autotune_log", [str(log), "--json-out", str(tmp_path / "s.json")], capsys)
    assert rc == 0 and "1 over-long line skipped unread" in err[-1], err
    assert json.loads((tmp_path / "s.json").read_text())["inputs"][0]["overlong_lines"] == 1
