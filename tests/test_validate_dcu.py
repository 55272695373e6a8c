"""validate_dcu.py: each check's judging function on the public DCU samples (tests/fixtures/dcu/,
tests/fixtures/profiles/, sources in each file's header) and on damaged copies of them; the whole
command on this machine (a CPU: every DCU check skipped with a reason)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tko.base import artifact, contracts
from tko.env import dcu_validate as dv

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "validate_dcu.py"


def body(fixtures_dir, name: str) -> str:
    """A fixture without its '#' source header (real tool output has none)."""
    text = (fixtures_dir / name).read_text(encoding="utf-8")
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


# --------------------------------------------------------------------------- arch

def test_arch_string_of_the_bw1000_device_props_passes(fixtures_dir):
    rec = json.loads(body(fixtures_dir, "dcu/hip_device_props_bw1000_gfx936_1.jsonl"))
    v = dv.judge_arch_string(rec["gcnArchName"], rec["cu_count"])
    assert v["status"] == dv.PASS, v
    assert v["details"]["arch"] == "gfx936" and v["details"]["compute_units"] == 80


@pytest.mark.parametrize("arch_full,cus,words", [
    ("gfx90a:sramecc+:xnack-", 104, "not a Hygon DCU arch"),
    ("BW200, UBB BW1000", 80, "not of the form"),
    ("", 80, "no gcnArchName"),
    ("gfx936:sramecc+:xnack-", 0, "no positive compute-unit count"),
])
def test_arch_string_damaged_fails_with_a_line(arch_full, cus, words):
    v = dv.judge_arch_string(arch_full, cus)
    assert v["status"] == dv.FAIL and words in v["reason"], v


@pytest.mark.parametrize("name,arch", [("dcu/rocminfo_gfx936_bw_1.txt", "gfx936"),
                                       ("dcu/rocminfo_gfx938_derived_from_gfx936.txt", "gfx938")])
def test_rocminfo_samples_pass(fixtures_dir, name, arch):
    v = dv.judge_rocminfo(body(fixtures_dir, name), f"{arch}:sramecc+:xnack-", 80)
    assert v["status"] == dv.PASS, v
    assert v["details"]["device"]["arch"] == arch


def test_rocminfo_damaged_samples_fail(fixtures_dir):
    text = body(fixtures_dir, "dcu/rocminfo_gfx936_bw_1.txt")
    truncated = dv.judge_rocminfo(text[: len(text) // 3])
    assert truncated["status"] == dv.FAIL and "no GPU agent" in truncated["reason"]
    wrong = dv.judge_rocminfo(text.replace("gfx936", "gfx942"))
    assert wrong["status"] == dv.FAIL and "gfx942" in wrong["reason"] and "not a Hygon" in wrong["reason"]
    disagree = dv.judge_rocminfo(text, "gfx936:sramecc+:xnack-", 64)
    assert disagree["status"] == dv.FAIL and "torch says 64 CUs, rocminfo 80" in disagree["reason"]
    # the public gfx906 paste lacks its GPU agent header: incomplete, so it cannot pass
    assert dv.judge_rocminfo(body(fixtures_dir, "dcu/rocminfo_gfx906_z100l_1.txt"))["status"] == dv.FAIL


# --------------------------------------------------------------------------- tools

def test_hipcc_version_sample_passes_and_damaged_fails(fixtures_dir):
    text = body(fixtures_dir, "dcu/hipcc_version_dtk2510_gfx936_1.txt")
    v = dv.judge_tool_version("hipcc", text)
    assert v["status"] == dv.PASS and v["details"]["version"] == "25.10.0-0", v
    bad = dv.judge_tool_version("hipcc", text.replace("25.10.0-0", "unknown"))
    assert bad["status"] == dv.FAIL and "no version line parsed" in bad["reason"]


def test_other_tool_versions():
    assert dv.judge_tool_version("rocprofv3", "rocprofv3 version 1.0.0\n")["status"] == dv.PASS
    bad = dv.judge_tool_version("hipprof", "hipprof: option not recognised\n")
    assert bad["status"] == dv.FAIL and "no version parsed" in bad["reason"]
    assert "empty version output" in dv.judge_tool_version("dccobjdump", "")["reason"]


@pytest.mark.parametrize("name,cards,style", [("dcu/hysmi_bw1000_gfx936_1.txt", 8, "HCU"),
                                              ("dcu/hysmi_k100lc_gfx926_1.txt", 1, "DCU")])
def test_hysmi_tables_pass(fixtures_dir, name, cards, style):
    v = dv.judge_tool_version("hy-smi", body(fixtures_dir, name))
    assert v["status"] == dv.PASS and v["details"]["cards"] == cards and v["details"]["style"] == style


def test_hysmi_cut_off_fails(fixtures_dir):
    v = dv.judge_hysmi(body(fixtures_dir, "dcu/hysmi_fragment_cuda_torch_on_dcu_1.txt"))
    assert v["status"] == dv.FAIL and "no card rows" in v["reason"]
    assert "no HCU/DCU table header" in dv.judge_hysmi("command not found\n")["reason"]


# --------------------------------------------------------------------------- profiles

def test_hipprof_kernel_csv_passes_and_truncated_fails(fixtures_dir):
    text = body(fixtures_dir, "profiles/hipprof_kernel_stats_gfx936_1.csv")
    v = dv.judge_profile(text, "chunk_fwd_kernel_o")
    assert v["status"] == dv.PASS and v["details"]["format"] == "stats_csv", v
    header_only = dv.judge_profile(text.splitlines()[0] + "\n")
    assert header_only["status"] == dv.FAIL and "no kernel rows" in header_only["reason"]
    missing = dv.judge_profile(text, "triton_poi_fused_add_relu_0")
    assert missing["status"] == dv.FAIL and "not among" in missing["reason"]
    assert dv.judge_profile("")["status"] == dv.FAIL


def test_rocprofv3_docs_trace_passes(fixtures_dir):
    v = dv.judge_profile(body(fixtures_dir, "profiles/rocprofv3_kernel_trace_docs_1.csv"))
    assert v["status"] == dv.PASS and v["details"]["format"] == "dispatch_csv", v


# --------------------------------------------------------------------------- ISA

def test_hygon_listing_passes_and_damaged_fails(fixtures_dir):
    text = (fixtures_dir / "isa" / "hygon" / "hygon_constructed_gfx936.amdgcn").read_text(encoding="utf-8")
    v = dv.judge_isa(text)
    assert v["status"] == dv.PASS and v["details"]["dcu"]["families"]["mmac"] > 0, v
    wrong = dv.judge_isa(text.replace("gfx936", "gfx942"))
    assert wrong["status"] == dv.FAIL and "not a Hygon arch" in wrong["reason"]
    cut = dv.judge_isa(text[:300])
    assert cut["status"] == dv.FAIL and "not an AMDGCN listing" in cut["reason"]


def test_dcu_listing_compared_with_the_gfx942_proxy(fixtures_dir):
    proxy = (fixtures_dir / "isa" / "gfx942-pr32" / "add_fp32.amdgcn").read_text(encoding="utf-8")
    as_dcu = proxy.replace("gfx942", "gfx936")   # same families on the DCU: what the check expects
    same = dv.judge_isa(as_dcu, proxy)
    assert same["status"] == dv.PASS and "agree" in same["reason"], same
    globalised = as_dcu.replace("buffer_load", "global_load").replace("buffer_store", "global_store")
    differ = dv.judge_isa(globalised, proxy)
    assert differ["status"] == dv.FAIL and "memory families differ" in differ["reason"]
    mfma = dv.judge_isa(as_dcu.replace("s_endpgm", "v_mfma_f32_16x16x16_f16 v[0:3], v[4:5], v[6:7], v[0:3]\n\ts_endpgm", 1))
    assert mfma["status"] == dv.FAIL and "v_mfma" in mfma["reason"]


# --------------------------------------------------------------------------- smoke, run, peak

def test_smoke_judging():
    ok = {"unset": {"ok": True, "memory_ops": {"buffer_load": 1}},
          "AMDGCN_USE_BUFFER_OPS=1": {"ok": True, "memory_ops": {"global_load": 1, "global_store": 1}}}
    v = dv.judge_smoke(ok)
    assert v["status"] == dv.PASS and v["details"]["ops"] == {"unset": "buffer", "AMDGCN_USE_BUFFER_OPS=1": "global"}
    bad = dict(ok, **{"HCUGCN_USE_BUFFER_OPS=1": {"ok": False, "stage": "compile",
                                                  "error": "PassManager::run failed"}})
    v = dv.judge_smoke(bad)
    assert v["status"] == dv.FAIL and "HCUGCN_USE_BUFFER_OPS=1: failed at compile" in v["reason"]


def test_kernel_run_judging(fixtures_dir):
    doc = json.loads((fixtures_dir / "kernel_runs_h200" / "run_triton_red_fused_sum_3.json").read_text())
    assert dv.judge_kernel_run(doc)["status"] == dv.PASS
    assert dv.judge_kernel_run(dict(doc, status="timeout", error="timed out"))["status"] == dv.FAIL
    assert dv.judge_kernel_run(dict(doc, best=None))["status"] == dv.FAIL


def test_copy_peak_against_the_bw1000_record():
    from tko.measure import peaks
    peak = peaks.lookup("BW200, UBB BW1000", "gfx936", store="/nonexistent/store.json")
    assert peak and peak["copy_gbps"] == pytest.approx(1145.5)
    assert dv.judge_copy_peak(1100.0, peak)["status"] == dv.PASS
    low = dv.judge_copy_peak(400.0, peak)
    assert low["status"] == dv.FAIL and "outside" in low["reason"]
    assert dv.judge_copy_peak(None, peak)["status"] == dv.FAIL
    assert dv.judge_copy_peak(900.0, None)["status"] == dv.SKIP


def test_platform_reasons():
    assert dv.platform_from_torch({"importable": True, "devices": []})["reason"] == "no GPU visible"
    nv = dv.platform_from_torch({"importable": True, "devices": [{"arch": "sm_90"}]})
    assert nv["kind"] == "nvidia" and nv["reason"] == "not a DCU: arch sm_90"
    dcu = dv.platform_from_torch({"importable": True, "devices": [{"arch": "gfx936"}]})
    assert dcu["kind"] == "dcu" and dcu["reason"] is None
    missing = dv.Check("x", "tool", "t", lambda ctx: {}, tool="hy-smi-not-installed-here")
    assert dv.skip_reason(missing, dcu) == "hy-smi-not-installed-here not found"


# --------------------------------------------------------------------------- the command

def run(*args, timeout=300):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.slow
def test_whole_command_on_this_machine(tmp_path):
    out = tmp_path / "dv"
    res = run("--out", str(out), "--timeout", "240")
    assert res.returncode == 0, res.stderr
    doc = artifact.read_artifact(out / "dcu_validation.json", dv.SCHEMA)
    assert contracts.contract_problems(doc) == []
    assert [c["id"] for c in doc["checks"]] == list(dv.CHECK_IDS)
    if doc["platform"]["kind"] != "dcu":
        for c in doc["checks"]:
            if c["needs"] == "dcu":
                assert c["status"] == dv.SKIP and c["reason"], c
        assert all(c["status"] != dv.FAIL for c in doc["checks"])
    for c in doc["checks"]:
        assert c["reason"], c
    # the table is printed last: header, one row per check, the count line
    lines = res.stdout.strip().splitlines()
    assert lines[-1].startswith(f"{doc['counts']['pass']} pass")
    assert [ln.split()[0] for ln in lines[-1 - len(dv.CHECK_IDS):-1]] == list(dv.CHECK_IDS)
    with tarfile.open(out / "dcu_validation_raw.tar.gz") as tar:
        names = tar.getnames()
    assert "dcu_validation_raw/platform/torch.stdout.txt" in names
    if any(c["id"] == "proxy_compile" and c["status"] == dv.PASS for c in doc["checks"]):
        assert any(n.endswith(".amdgcn") for n in names)


def test_only_runs_the_named_checks(tmp_path):
    res = run("--out", str(tmp_path / "o"), "--only", "tool_hy_smi,arch_torch")
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "o" / "dcu_validation.json").read_text())
    assert [c["id"] for c in doc["checks"]] == ["arch_torch", "tool_hy_smi"]
    assert doc["only"] == ["tool_hy_smi", "arch_torch"]


@pytest.mark.parametrize("args,words", [
    (["--only", "arch_torch,no_such_check"], "unknown check id 'no_such_check'"),
    (["--timeout", "0"], "--timeout must be > 0"),
])
def test_bad_usage_is_one_line_exit_2(tmp_path, args, words):
    res = run("--out", str(tmp_path / "o"), *args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and lines[0].startswith("validate_dcu.py: error:")
    assert not (tmp_path / "o").exists()


def test_an_ok_kernel_run_with_its_null_error_field_passes(fixtures_dir, tmp_path):
    # Recorded on an H200: kernel_run/1 carries "error": null; the kit once read that key as a failure.
    doc = json.loads((fixtures_dir / "dcu_validation_h200" / "kernel_run.json").read_text())
    assert "error" in doc and doc["error"] is None
    ctx = dv.Context(raw=tmp_path, work=tmp_path, timeout=10, platform={"kind": "nvidia"}, state={"capture": doc})
    check = next(c for c in dv.CHECKS if c.id == "capture_run")
    result = dv.run_check(ctx, check)
    assert result["status"] == dv.PASS and "triton_poi_fused_add_mul_relu_0" in result["reason"]
    ctx.state["capture"] = {"capture_error": "capture failed: boom"}
    assert dv.run_check(ctx, check)["status"] == dv.FAIL


def test_the_h200_run_after_the_fix_has_no_failure_and_says_why_each_dcu_check_skipped(fixtures_dir):
    # Recorded on an H200 (tests/fixtures/dcu_validation_h200/fixed): the kit's table on a GPU that is
    # not a DCU. Every check the kit has was run, none failed, and each skip names its reason.
    doc = json.loads((fixtures_dir / "dcu_validation_h200" / "fixed" / "dcu_validation.json").read_text())
    by_id = {c["id"]: c for c in doc["checks"]}
    # the checks the kit gained after that recording (the Triton stack and its pitfalls, tested on the
    # stand-in installs in tests/test_pitfalls.py); every other check of the kit was run there
    added_since = {"triton_stack", "pitfalls"}
    assert set(by_id) == {c.id for c in dv.CHECKS} - added_since
    assert {i for i, c in by_id.items() if c["status"] == dv.PASS} == {"proxy_compile", "capture_run"}
    assert not [i for i, c in by_id.items() if c["status"] == dv.FAIL]
    for check in by_id.values():
        if check["status"] == dv.SKIP:
            assert "not a DCU: arch sm_90" in check["reason"] or check["reason"].endswith("not found")
