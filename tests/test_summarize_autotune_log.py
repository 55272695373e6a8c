"""summarize_autotune_log.py and tko.autotune_log on real logs (see tests/fixtures/autotune_logs/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tko.autotune_log import config_key, parse_config_str, parse_files, summarize
from tko.contracts import contract_problems
from tko.errors import InputError

LOGS = Path(__file__).resolve().parent / "fixtures" / "autotune_logs"
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
    assert doc["schema"] == "autotune_summary/1"
    assert contract_problems(doc) == []
    assert {k["kernel"] for k in doc["kernels"]} == {"add_one_kernel", "_fwd_kernel",
                                                     "matmul_kernel"}
    md = out_md.read_text()
    assert "## `add_one_kernel`" in md and "no_timings" in md


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
