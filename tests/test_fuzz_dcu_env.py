"""Fuzzing of the DCU tool-output parsers and the environment readers.

Seeds are the real public samples of tests/fixtures/dcu/ (each with its source header) and the
recorded H200 validation run of tests/fixtures/dcu_validation_h200/, mutated: lines dropped,
duplicated or shuffled, truncation, random bytes / NULs / non-UTF-8 spliced in, wrong-typed JSON
fields, huge numbers, empty input.  The contract: every parser is total, the only exception that
may escape it is InputError, and a script answers bad input with one stderr line and exit 2.
Each defect found has a direct regression test below its fuzz test.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import FIXTURES, ROOT
from fuzzing import (SCALARS, assert_ok_or_one_line, fuzz_settings, json_paths, json_values, put,
                     run_script)
from tko.base import archs
from tko.read import dcu_tools
from tko.env import children, dcu_validate as dv, env_probe, smoke, toolchain
from tko.measure import peaks
from tko.base.errors import InputError

FUZZ = fuzz_settings()
DCU = FIXTURES / "dcu"
H200 = FIXTURES / "dcu_validation_h200"
ENV_JSON = ROOT / "examples" / "recorded_h200" / "tiny_launches" / "triton_env.json"
PEAK_TABLE = ROOT / "references" / "device_peaks.yaml"


# --------------------------------------------------------------------------- helpers

def body(name: str) -> str:
    """A fixture without its '#' source header (real tool output has none)."""
    text = (DCU / name).read_text(encoding="utf-8")
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


def total(fn, *args, **kwargs):
    """``fn(*args)``; an InputError is an accepted answer (None), anything else fails the test."""
    try:
        return fn(*args, **kwargs)
    except InputError:
        return None


# JSON values of every type, NaN, infinities and numbers past a float's range included.
JSON = json_values(SCALARS | st.integers(-2**70, 2**70) | st.just(10**400)
                   | st.sampled_from(["", "²", "٣", "9" * 400, "gfx936", "sm_90", "0x6320", "1e999"]))

# What "huge numbers" and "odd digits" replace a run of digits with.
NUMBERS = [b"9" * 20, b"1" + b"0" * 400, b"9" * 5000, b"-1", b"1e999", b"NaN", b"0",
           "²".encode(), "٣".encode(), b"0x"]
SPLICES = (st.binary(max_size=8)
           | st.sampled_from([b"\x00", b"\xff\xfe", b"\xc3", "²".encode(), b"\x1b[31m", b"\r",
                              b"{", b"}", b":", b'"', b",", b"\n\n", b"  ", b"\t", b"[" * 100000,
                              b"!!timestamp ", b"!!binary ", b"!!set ", b"&a ", b"*a ", b"- "]))
OPS = ("drop", "dup", "shuffle", "truncate", "splice", "number")


@st.composite
def mutated(draw, text: str) -> bytes:
    """``text`` as bytes after 1-4 mutations (or empty)."""
    data = text.encode("utf-8")
    if draw(st.integers(0, 19)) == 0:
        return b""
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(OPS))
        if op == "truncate":
            data = data[:draw(st.integers(0, len(data)))]
            continue
        if op == "splice":
            at = draw(st.integers(0, len(data)))
            data = data[:at] + draw(SPLICES) + data[at:]
            continue
        lines = data.split(b"\n")
        i = draw(st.integers(0, len(lines) - 1))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "shuffle":
            j = min(len(lines), i + draw(st.integers(2, 8)))
            lines[i:j] = draw(st.permutations(lines[i:j]))
        else:
            numbered = [k for k, line in enumerate(lines) if re.search(rb"\d", line)] or [i]
            k = draw(st.sampled_from(numbered))
            lines[k] = re.sub(rb"\d+", draw(st.sampled_from(NUMBERS)).replace(b"\\", b"\\\\"),
                              lines[k], count=1) if re.search(rb"\d", lines[k]) else lines[k] + b"1"
        data = b"\n".join(lines)
    return data


def text_or_bytes(data: bytes, as_text: bool) -> str | bytes:
    return data.decode("utf-8", errors="replace") if as_text else data


@st.composite
def wrong_typed(draw, doc, keep=("schema",)):
    """A copy of ``doc`` with 1-4 of its values (at any depth) replaced by any JSON value."""
    doc = copy.deepcopy(doc)
    paths = [p for p, _ in json_paths(doc) if p[0] not in keep]
    for _ in range(draw(st.integers(1, 4))):
        put(doc, draw(st.sampled_from(paths)), draw(JSON))
    return doc


def dumps(doc) -> str:
    return json.dumps(doc, allow_nan=True)


ROCMINFO = {name: body(name) for name in ("rocminfo_gfx936_bw_1.txt", "rocminfo_gfx906_z100l_1.txt",
                                          "rocminfo_gfx938_derived_from_gfx936.txt")}
HYSMI = {name: body(name) for name in ("hysmi_bw1000_gfx936_1.txt", "hysmi_k100lc_gfx926_1.txt",
                                       "hysmi_fragment_cuda_torch_on_dcu_1.txt")}
SMI_JSON = {name: body(name) for name in ("hysmi_json_k100ai_gfx928_1.txt",
                                          "rocmsmi_json_k100ai_gfx928_1.txt")}
HIPCC = body("hipcc_version_dtk2510_gfx936_1.txt")
TORCH_VERSIONS = body("torch_versions_gfx936_1.txt")
PROPS = json.loads(body("hip_device_props_bw1000_gfx936_1.jsonl"))


# --------------------------------------------------------------------------- 1. dcu_tools

def test_real_samples_parse_as_today():
    gpu = dcu_tools.parse_rocminfo(ROCMINFO["rocminfo_gfx936_bw_1.txt"])["gpus"][0]
    assert (gpu["arch"], gpu["compute_units"], gpu["lds_per_block_bytes"]) == ("gfx936", 80, 65536)
    assert dcu_tools.parse_rocminfo(ROCMINFO["rocminfo_gfx938_derived_from_gfx936.txt"])["gpus"][0]["arch"] \
        == "gfx938"
    table = dcu_tools.parse_hysmi_table(HYSMI["hysmi_bw1000_gfx936_1.txt"])
    assert (table["style"], len(table["devices"]), table["complete"]) == ("HCU", 8, True)
    cards = dcu_tools.parse_smi_json(SMI_JSON["hysmi_json_k100ai_gfx928_1.txt"])["cards"]
    assert cards[0]["series"] == "K100_AI" and cards[0]["vram_total_mib"] == 65520.0
    assert dcu_tools.parse_hipcc_version(HIPCC)["version"] == "25.10.0-0"
    assert dcu_tools.first_version(TORCH_VERSIONS.split("torch.version.hip")[1]) == "6.3.26113"


def _check_rocminfo(parsed: dict) -> None:
    for gpu in parsed["gpus"]:
        for key in ("compute_units", "wave_size", "memory_bytes", "l2_bytes", "lds_per_block_bytes"):
            assert gpu[key] is None or isinstance(gpu[key], int), (key, gpu[key])
        assert gpu["arch"] is None or isinstance(gpu["arch"], str)


@FUZZ
@given(name=st.sampled_from(sorted(ROCMINFO)), data=st.data(), as_text=st.booleans())
def test_fuzz_rocminfo(name, data, as_text):
    raw = data.draw(mutated(ROCMINFO[name]))
    parsed = total(dcu_tools.parse_rocminfo, text_or_bytes(raw, as_text))
    if parsed is not None:
        _check_rocminfo(parsed)


@pytest.mark.parametrize("text", [
    "Agent 1\n  Device Type: GPU\n  Compute Unit: " + "9" * 5000 + "\n",
    "Agent " + "9" * 5000 + "\n  Device Type: GPU\n",
    "Agent 1\n  Device Type: GPU\n  Pool Info:\n    Pool " + "9" * 5000 + "\n",
])
def test_rocminfo_number_past_the_int_digit_limit_is_not_a_number(text):
    parsed = dcu_tools.parse_rocminfo(text)
    assert parsed["gpus"][0]["compute_units"] is None
    assert len(parsed["agents"]) == 1


@FUZZ
@given(name=st.sampled_from(sorted(HYSMI)), data=st.data(), as_text=st.booleans())
def test_fuzz_hysmi_table(name, data, as_text):
    parsed = total(dcu_tools.parse_hysmi_table, text_or_bytes(data.draw(mutated(HYSMI[name])), as_text))
    if parsed is not None:
        assert all(isinstance(d["index"], int) for d in parsed["devices"])


def test_hysmi_row_with_a_non_ascii_digit_is_not_a_card():
    text = "HCU Temp AvgPwr\n0 39.0C 132.0W\n² 41.0C 151.0W\n" + "9" * 5000 + " 1C 1W\n"
    parsed = dcu_tools.parse_hysmi_table(text)
    assert [d["index"] for d in parsed["devices"]] == [0]


SMI_KEYS = sorted(json.loads(SMI_JSON["hysmi_json_k100ai_gfx928_1.txt"].split("\n", 1)[1]
                             .rstrip() + "}")["card0"])


def _smi_docs():
    card = st.dictionaries(st.sampled_from(SMI_KEYS), JSON, max_size=6) | JSON
    return st.dictionaries(st.sampled_from(["card0", "card1", "card" + "9" * 5000, "x"]), card,
                           max_size=3)


@FUZZ
@given(name=st.sampled_from(sorted(SMI_JSON)), data=st.data(), as_text=st.booleans())
def test_fuzz_smi_json_text(name, data, as_text):
    parsed = total(dcu_tools.parse_smi_json, text_or_bytes(data.draw(mutated(SMI_JSON[name])), as_text))
    if parsed is not None:
        env_probe._hysmi_devices({"json": parsed})


@FUZZ
@given(doc=_smi_docs(), cut=st.integers(0, 400))
def test_fuzz_smi_json_wrong_types(doc, cut):
    text = dumps(doc)
    for t in (text, text[:cut]):
        parsed = total(dcu_tools.parse_smi_json, t)
        if parsed is not None:
            for dev in env_probe._hysmi_devices({"json": parsed}):
                assert dev["memory_bytes"] is None or isinstance(dev["memory_bytes"], int)


def test_smi_json_nested_too_deeply_keeps_the_cards_before():
    text = '{"card0": {"Card Series": "K100_AI"}, "card1": ' + "[" * 100000
    parsed = dcu_tools.parse_smi_json(text)
    assert [c["series"] for c in parsed["cards"]] == ["K100_AI"] and parsed["complete"] is False


@pytest.mark.parametrize("mib", ["9" * 400, "NaN", "Infinity"])
def test_hysmi_json_memory_past_a_floats_range_is_unknown(mib):
    parsed = dcu_tools.parse_smi_json('{"card0": {"vram Total Memory (MiB)": "%s"}}' % mib)
    assert env_probe._hysmi_devices({"json": parsed})[0]["memory_bytes"] is None


def test_smi_json_card_with_a_huge_index_keeps_the_card():
    parsed = dcu_tools.parse_smi_json('{"card%s": {"Card Series": "K100_AI"}}' % ("9" * 5000))
    assert parsed["cards"][0]["series"] == "K100_AI" and parsed["cards"][0]["index"] is None


@FUZZ
@given(data=st.data(), as_text=st.booleans(), case=st.sampled_from([str, str.upper, str.title]))
def test_fuzz_hipcc_version(data, as_text, case):
    raw = data.draw(mutated(case(HIPCC)))
    parsed = total(dcu_tools.parse_hipcc_version, text_or_bytes(raw, as_text))
    if parsed is not None:
        assert parsed["flavor"] in (None, "dtk", "rocm")


@pytest.mark.parametrize("line", ["Clang Version 17.0.0", "CLANG VERSION", "AMD Clang version 5"])
def test_hipcc_version_with_clang_in_another_case(line):
    assert dcu_tools.parse_hipcc_version(line)["clang_line"] == line


@FUZZ
@given(data=st.data(), as_text=st.booleans())
def test_fuzz_version_text(data, as_text):
    raw = text_or_bytes(data.draw(mutated(TORCH_VERSIONS)), as_text)
    version = total(dcu_tools.first_version, raw)
    assert version is None or re.match(r"\d", version)
    total(dcu_tools.parse_info_version, raw)
    assert isinstance(dcu_tools.clean_text(raw), str)


# --------------------------------------------------------------------------- 2. dcu_validate

def test_real_samples_judge_as_today():
    v = dv.judge_rocminfo(ROCMINFO["rocminfo_gfx936_bw_1.txt"], "gfx936:sramecc+:xnack-", 80)
    assert v["status"] == dv.PASS and v["details"]["device"]["compute_units"] == 80
    assert dv.judge_hysmi(HYSMI["hysmi_bw1000_gfx936_1.txt"])["details"]["cards"] == 8
    assert dv.judge_tool_version("hipcc", HIPCC)["details"]["version"] == "25.10.0-0"
    run = json.loads((H200 / "kernel_run.json").read_text())
    assert dv.judge_kernel_run(run)["status"] == dv.PASS
    doc = json.loads((H200 / "dcu_validation.json").read_text())
    assert dv.platform_from_torch({"importable": True, "devices": [doc["platform"]["device"]]})["arch"] \
        == "sm_90"
    assert dv.table_lines(doc)[-1].endswith("(platform: nvidia, sm_90)")


@FUZZ
@given(name=st.sampled_from(sorted(ROCMINFO)), data=st.data(), torch_arch=JSON, torch_cus=JSON)
def test_fuzz_judge_rocminfo(name, data, torch_arch, torch_cus):
    text = data.draw(mutated(ROCMINFO[name])).decode("utf-8", errors="replace")
    v = total(dv.judge_rocminfo, text, torch_arch, torch_cus)
    assert v is None or v["status"] in (dv.PASS, dv.FAIL)


def test_judge_rocminfo_with_a_torch_arch_of_the_wrong_type_fails_with_a_line():
    v = dv.judge_rocminfo(ROCMINFO["rocminfo_gfx936_bw_1.txt"], 936, 80)
    assert v["status"] == dv.FAIL and "936" in v["reason"]


@FUZZ
@given(tool=st.sampled_from(["hy-smi", "hipcc", "hipprof", "rocprofv3", "dccobjdump", "llvm-objdump"]),
       seed=st.sampled_from([HIPCC, TORCH_VERSIONS, *HYSMI.values()]), data=st.data())
def test_fuzz_judge_tool_version(tool, seed, data):
    text = data.draw(mutated(seed)).decode("utf-8", errors="replace")
    v = total(dv.judge_tool_version, tool, text)
    assert v is None or v["status"] in (dv.PASS, dv.FAIL)


@FUZZ
@given(arch=JSON | st.sampled_from(["gfx936:sramecc+:xnack-", "gfx938", "gfx936:", "sm_90"]),
       cus=JSON)
def test_fuzz_judge_arch_string(arch, cus):
    v = total(dv.judge_arch_string, arch, cus)
    assert v is None or v["status"] in (dv.PASS, dv.FAIL)


KERNEL_RUN = json.loads((H200 / "kernel_run.json").read_text())


@FUZZ
@given(doc=wrong_typed(KERNEL_RUN) | JSON)
def test_fuzz_judge_kernel_run(doc):
    v = total(dv.judge_kernel_run, doc)
    assert v is None or v["status"] in (dv.PASS, dv.FAIL)


@pytest.mark.parametrize("doc", [
    {"status": "ok", "best": [1]},
    {"status": "ok", "best": {"ok": True, "ms": "0.5"}},
    {"status": "ok", "best": {"ok": True, "ms": 10 ** 400}},
    [],
])
def test_judge_kernel_run_of_a_wrong_typed_document_fails_with_a_line(doc):
    v = dv.judge_kernel_run(doc)
    assert v["status"] == dv.FAIL and v["reason"]


@FUZZ
@given(measured=JSON, peak=JSON | st.fixed_dictionaries({"copy_gbps": JSON}))
def test_fuzz_judge_copy_peak(measured, peak):
    v = total(dv.judge_copy_peak, measured, peak)
    assert v is None or v["status"] in (dv.PASS, dv.FAIL, dv.SKIP)


@pytest.mark.parametrize("measured, peak", [
    (10 ** 400, None), (1000.0, {"copy_gbps": "x"}), (1000.0, {"copy_gbps": 10 ** 400}),
    (float("inf"), {"copy_gbps": 1145.5}), (1000.0, [1]),
])
def test_judge_copy_peak_of_wrong_numbers_is_a_verdict(measured, peak):
    assert dv.judge_copy_peak(measured, peak)["status"] in (dv.FAIL, dv.SKIP)


@FUZZ
@given(variants=st.dictionaries(st.text(max_size=6), JSON | st.fixed_dictionaries(
    {}, optional={"ok": JSON, "memory_ops": JSON, "error": JSON, "diagnostics": JSON, "stage": JSON}),
    max_size=3) | JSON)
def test_fuzz_judge_smoke(variants):
    v = total(dv.judge_smoke, variants)
    assert v is None or v["status"] in (dv.PASS, dv.FAIL)


def test_judge_smoke_of_wrong_typed_records_fails_with_a_line():
    v = dv.judge_smoke({"unset": [1], "=1": {"ok": False, "diagnostics": "x", "memory_ops": [2]}})
    assert v["status"] == dv.FAIL


LISTING = (FIXTURES / "isa" / "hygon" / "hygon_constructed_gfx936.amdgcn").read_text(encoding="utf-8")
PROFILE = (FIXTURES / "profiles" / "hipprof_kernel_stats_gfx936_1.csv").read_text(encoding="utf-8")


@FUZZ
@given(data=st.data())
def test_fuzz_judge_isa_and_profile(data):
    listing = data.draw(mutated(LISTING)).decode("utf-8", errors="replace")
    v = total(dv.judge_isa, listing, data.draw(st.none() | st.just(listing)))
    assert v is None or v["status"] in (dv.PASS, dv.FAIL)
    csv = data.draw(mutated(PROFILE)).decode("utf-8", errors="replace")
    v = total(dv.judge_profile, csv, data.draw(st.none() | st.text(max_size=6)))
    assert v is None or v["status"] in (dv.PASS, dv.FAIL)


VALIDATION = json.loads((H200 / "dcu_validation.json").read_text())


@FUZZ
@given(platform=wrong_typed(VALIDATION["platform"]) | JSON, importable=JSON)
def test_fuzz_platform_from_torch(platform, importable):
    device = platform.get("device") if isinstance(platform, dict) else platform
    info = {"importable": importable, "devices": [device] if device is not None else platform}
    p = total(dv.platform_from_torch, info)
    assert p is None or p["kind"] in ("dcu", "amd", "nvidia", "cpu")


@pytest.mark.parametrize("info", [
    {"importable": True, "devices": [1]},
    {"importable": True, "devices": [{"arch": 936}]},
    {"importable": True, "devices": {"arch": "gfx936"}},
    [],
])
def test_platform_from_a_wrong_typed_torch_record_is_no_gpu(info):
    p = dv.platform_from_torch(info)
    assert (p["kind"], p["arch"]) == ("cpu", None) and p["reason"].startswith("no GPU visible")


@FUZZ
@given(doc=wrong_typed(VALIDATION))
def test_fuzz_validation_table(doc):
    lines = total(dv.table_lines, doc)
    assert lines is None or all(isinstance(line, str) for line in lines)


def test_validation_table_of_a_wrong_typed_payload_is_an_input_error():
    with pytest.raises(InputError, match="dcu_validation/1"):
        dv.table_lines({"checks": [1], "counts": {}, "platform": {}})


# --------------------------------------------------------------------------- 3. env_probe

NVIDIA_SMI = "0, NVIDIA H200, 570.124.06, 143771, 9.0\n1, NVIDIA H200, 570.124.06, 143771, 9.0\n"


@FUZZ
@given(data=st.data())
def test_fuzz_nvidia_smi_csv(data):
    text = data.draw(mutated(NVIDIA_SMI)).decode("utf-8", errors="replace")
    rows = total(toolchain.parse_nvidia_smi_csv, text)
    for row in rows or []:
        assert isinstance(row["index"], int)
        assert row["memory_bytes"] is None or isinstance(row["memory_bytes"], int)


@pytest.mark.parametrize("line", ["0, H200, 570, %s, 9.0" % ("9" * 400), "²,H200,570,1,9.0",
                                  "%s,H200,570,1,9.0" % ("9" * 5000)])
def test_nvidia_smi_rows_with_huge_or_odd_numbers(line):
    rows = toolchain.parse_nvidia_smi_csv(line)
    assert rows == [] or rows[0]["memory_bytes"] is None


@FUZZ
@given(spec=st.sampled_from(toolchain.TOOLS), seed=st.sampled_from([HIPCC, TORCH_VERSIONS]),
       data=st.data())
def test_fuzz_tool_version(spec, seed, data):
    text = data.draw(mutated(seed)).decode("utf-8", errors="replace")
    version = total(toolchain.tool_version, spec, text)
    assert version is None or isinstance(version, str)
    assert all(isinstance(line, str) for line in children.first_lines(text) + children.last_lines(text))


PROPS_AS_TORCH = {"name": PROPS["name"], "gcnArchName": PROPS["gcnArchName"],
                  "multi_processor_count": PROPS["cu_count"], "warp_size": PROPS["warp_size"],
                  "clock_rate": PROPS["clock_khz"], "total_memory": PROPS["global_mem_bytes"],
                  "L2_cache_size": PROPS["l2_bytes"], "shared_memory_per_block": PROPS["lds_per_block"],
                  "max_threads_per_multi_processor": PROPS["max_threads_per_cu"],
                  "major": 9, "minor": 4, "uuid": "x"}


def test_device_props_sample_reads_as_today():
    dev = env_probe.device_from_torch_props(SimpleNamespace(**PROPS_AS_TORCH), 0, "6.3.26113")
    assert (dev["arch"], dev["compute_units"], dev["max_clock_mhz"]) == ("gfx936", 80, 1500)


@FUZZ
@given(props=wrong_typed(PROPS_AS_TORCH), hip=st.none() | st.just("6.3.26113"))
def test_fuzz_device_from_torch_props(props, hip):
    dev = total(env_probe.device_from_torch_props, SimpleNamespace(**props), 0, hip)
    if dev is not None:
        check = total(env_probe.arch_check, [dev], ["gfx936"])
        assert check is None or check["status"] in ("expected", "unexpected", "not_dcu", "unknown")


def test_device_props_with_a_non_string_arch_name():
    props = SimpleNamespace(**dict(PROPS_AS_TORCH, gcnArchName=936))
    dev = env_probe.device_from_torch_props(props, 0, "6.3")
    assert dev["arch_full"] == "936" and dev["compute_units"] == 80


@FUZZ
@given(name=st.sampled_from(sorted(ROCMINFO)), data=st.data(),
       expected=st.lists(st.text(max_size=8) | st.sampled_from(["gfx936", "gfx938"]), max_size=3))
def test_fuzz_arch_check_of_rocminfo_devices(name, data, expected):
    parsed = total(dcu_tools.parse_rocminfo, data.draw(mutated(ROCMINFO[name])))
    devices = (parsed or {}).get("gpus") or []
    check = total(env_probe.arch_check, devices, expected)
    assert check is None or isinstance(check["message"], str)


# --------------------------------------------------------------------------- 4. peaks

STORE = {"schema": "device_peak/1", "tool": "measure_peak_bandwidth.py", "created": "2026-12-01",
         "devices": [{"name": "BW200, UBB BW1000", "arch": "gfx936", "copy_gbps": 1100.0,
                      "hbm_read_gbps": None, "measured_at": "2026-12-01"}]}
TABLE_TEXT = PEAK_TABLE.read_text(encoding="utf-8")


def test_real_peak_table_and_store_read_as_today(tmp_path):
    store = tmp_path / "store.json"
    store.write_text(json.dumps(STORE))
    assert peaks.lookup("BW200, UBB BW1000", "gfx936", store=store)["copy_gbps"] == 1100.0
    peak = peaks.lookup("BW200, UBB BW1000", "gfx936", store=tmp_path / "none.json", table=PEAK_TABLE)
    assert (peak["copy_gbps"], peak["kind"]) == (1145.5, "measured")


def _lookup_all(store: Path, table: Path | None) -> None:
    for name, arch in (("BW200, UBB BW1000", "gfx936"), ("NVIDIA H200", "sm_90")):
        peak = total(peaks.lookup, name, arch, store=store, table=table)
        assert peak is None or isinstance(peak["peak_gbps"], float)
        assert isinstance(peaks.describe(peak), str)


@FUZZ
@given(doc=wrong_typed(STORE), data=st.data())
def test_fuzz_peak_store(doc, data):
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store.json"
        raw = data.draw(st.just(dumps(doc).encode()) | mutated(dumps(STORE)))
        store.write_bytes(raw)
        _lookup_all(store, None)


@FUZZ
@given(data=st.data())
def test_fuzz_peak_table(data):
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "device_peaks.yaml"
        table.write_bytes(data.draw(mutated(TABLE_TEXT)))
        _lookup_all(Path(tmp) / "none.json", table)


@pytest.mark.parametrize("value", ['"x"', "[1]", "1" + "0" * 400, "true"])
def test_peak_store_record_with_a_wrong_typed_figure_is_skipped(tmp_path, value):
    store = tmp_path / "store.json"
    store.write_text(dumps(STORE).replace("1100.0", value))
    peak = peaks.lookup("BW200, UBB BW1000", "gfx936", store=store)
    assert peak["source"] == "table" and peak["copy_gbps"] == 1145.5
    assert any("skipped" in n for n in peak["notes"])


@pytest.mark.parametrize("text", [
    "devices:\n  - name: BW1000\n    arch: gfx936\n    date: 2026-13-45\n",
    "devices:\n  - name: BW1000\n    arch: gfx936\n    date: 2026-10-10\n    copy_gbps: 1\n",
    b"devices: [\xff]\n",
    "devices:\n  - name: BW1000\n    arch: gfx936\n    copy_gbps: x\n",
    "devices:\n  - name: BW1000\n    arch: gfx936\n    date: !!timestamp x\n",
    "devices: " + "[" * 100000,
    "devices:\n  - name: BW1000\n    arch: gfx936\n    aliases: 5\n    copy_gbps: 1\n",
    "devices:\n  - name: BW1000\n    arch: 936\n    copy_gbps: 1\n",
])
def test_peak_table_damaged_is_skipped_or_an_input_error(tmp_path, text):
    table = tmp_path / "t.yaml"
    table.write_bytes(text if isinstance(text, bytes) else text.encode())
    try:
        peaks.load_table(table)
    except InputError as exc:
        assert str(table) in str(exc)
    peak = peaks.lookup("BW200, UBB BW1000", "gfx936", store=tmp_path / "n.json", table=table)
    assert peak is None or peak["copy_gbps"] == 1.0
    json.dumps(peak)


# --------------------------------------------------------------------------- 5. archs

@pytest.mark.parametrize("text, name", [("gfx936", "gfx936"), ("gfx938:sramecc+:xnack-", "gfx938"),
                                        ("sm_90", "sm_90"), ("sm90a", "sm_90"), ("90", "sm_90"),
                                        ("amdgcn-amd-amdhsa--gfx936", "gfx936")])
def test_arch_names_normalise_as_today(text, name):
    assert archs.normalize(text) == name


@FUZZ
@given(text=st.text(max_size=24) | st.sampled_from(["gfx936", "gfx938:sramecc+:xnack-", "sm_90",
                                                    "²", "sm_²", "٣٠", "SM_90A", ":", ""]))
def test_fuzz_arch_names(text):
    name = archs.normalize(text)
    assert isinstance(name, str)
    archs.info(text), archs.is_nvidia(text), archs.compile_target(text)
    if name.startswith("sm_") and name[3:].isascii() and name[3:].isdigit():
        assert smoke.target_for(text)[0] == "cuda"
    else:
        try:
            smoke.target_for(text)
        except ValueError as exc:
            assert "target" in str(exc) or "arch" in str(exc), exc


@pytest.mark.parametrize("text, words", [("²", "unknown target"), ("¹²", "unknown target"),
                                         ("sm_²", "bad NVIDIA arch")])
def test_non_ascii_digits_are_not_an_nvidia_arch(text, words):
    assert archs.normalize("90") == "sm_90" and archs.normalize(text) == text
    with pytest.raises(ValueError, match=words):
        smoke.target_for(text)


def test_check_env_refuses_a_smoke_target_of_non_ascii_digits(capsys):
    rc, err = run_script("check_env", ["--smoke-target", "sm_²"], capsys)
    assert rc == 2 and len(err) == 1 and "expected an arch" in err[0], err


# --------------------------------------------------------------------------- 6. scripts

ENV_DOC = json.loads(ENV_JSON.read_text())


def test_check_env_show_of_the_recorded_file(capsys):
    rc, err = run_script("check_env", ["--show", str(ENV_JSON)], capsys)
    assert rc == 0, err


@FUZZ
@given(doc=wrong_typed(ENV_DOC, keep=("schema",)), data=st.data())
def test_fuzz_check_env_show(doc, data, capsys):
    raw = data.draw(st.just(dumps(doc).encode()) | mutated(ENV_JSON.read_text()))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "triton_env.json"
        path.write_bytes(raw)
        rc, err = run_script("check_env", ["--show", str(path)], capsys)
    assert_ok_or_one_line(rc, err)


@pytest.mark.parametrize("field, value", [
    (("devices", 0, "memory_bytes"), 10 ** 400),
    (("buffer_ops", "default_when_unset"), "x"),
    (("devices", 0, "index"), [1]),
])
def test_check_env_show_of_a_wrong_typed_field_is_one_line_exit_2_or_ok(tmp_path, capsys, field, value):
    doc = copy.deepcopy(ENV_DOC)
    node = doc
    for key in field[:-1]:
        node = node[key]
    node[field[-1]] = value
    path = tmp_path / "env.json"
    path.write_text(dumps(doc))
    rc, err = run_script("check_env", ["--show", str(path)], capsys)
    assert_ok_or_one_line(rc, err)


@FUZZ
@given(doc=wrong_typed(STORE), data=st.data())
def test_fuzz_measure_peak_bandwidth_lookup(doc, data, capsys):
    raw = data.draw(st.just(dumps(doc).encode()) | mutated(dumps(STORE)))
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store.json"
        store.write_bytes(raw)
        rc, err = run_script("measure_peak_bandwidth",
                             ["--lookup", "BW200, UBB BW1000", "gfx936", "--out", str(store)], capsys)
    assert_ok_or_one_line(rc, err)


def test_validate_dcu_out_that_is_a_file_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "f"
    out.write_bytes(b"\x00\xff")
    rc, err = run_script("validate_dcu", ["--out", str(out), "--only", "arch_torch"], capsys)
    assert rc == 2 and len(err) == 1 and str(out) in err[0]


@pytest.mark.parametrize("tag", ["triton_env/²", "device_peak/²"])
def test_schema_tag_with_a_non_ascii_version_is_one_line_exit_2(tmp_path, capsys, tag):
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(dict(ENV_DOC if tag.startswith("triton") else STORE, schema=tag)))
    if tag.startswith("triton"):
        rc, err = run_script("check_env", ["--show", str(path)], capsys)
        assert rc == 2 and len(err) == 1 and str(path) in err[0], err
    else:
        with pytest.raises(InputError, match="expected device_peak/1"):
            peaks.load_store(path)


# --------------------------------------------------------------------------- 7. probe children

CHILD_STDOUT = ("import warning\n" + children.CHILD_MARKER
                + json.dumps({"importable": True, "version": "2.11.0", "devices": [PROPS_AS_TORCH]}) + "\n")


def _fake_run(stdout: bytes):
    text = stdout.decode("utf-8", errors="replace")
    return lambda *a, **k: {"argv": [], "rc": 0, "stdout": text, "stderr": text[-200:],
                            "timed_out": False, "error": None, "seconds": 0.1}


def test_child_payload_of_the_real_shape():
    assert children.child_payload(CHILD_STDOUT)["version"] == "2.11.0"


@FUZZ
@given(data=st.data())
def test_fuzz_probe_child_output(data, monkeypatch, tmp_path):
    monkeypatch.setattr(children, "run_command", _fake_run(data.draw(mutated(CHILD_STDOUT))))
    payload = children.run_child("torch")
    assert isinstance(payload, dict) and "child_seconds" in payload
    ctx = dv.Context(raw=tmp_path, work=tmp_path, timeout=1.0, platform={}, state={})
    info = dv.run_probe_child(ctx, "platform", "torch", "torch", {})
    assert isinstance(info, dict)
    assert dv.platform_from_torch(info)["kind"] in ("dcu", "amd", "nvidia", "cpu")


@pytest.mark.parametrize("line", ["5", "[1]", "9" * 5000, "[" * 100000, "null", '{"a": '])
def test_child_marker_line_that_is_no_json_object_is_a_failed_child(monkeypatch, line):
    monkeypatch.setattr(children, "run_command", _fake_run((children.CHILD_MARKER + line).encode()))
    assert children.run_child("torch")["child_failed"] is True


# --------------------------------------------------------------------------- 8. occupancy of an arch

COUNTS = st.none() | st.integers(-2**70, 2**70) | st.integers(0, 1024) | st.just(10**400)


def test_occupancy_of_gfx936_as_today():
    from tko.read.occupancy import amd_occupancy

    occ = amd_occupancy("gfx936:sramecc+:xnack-", vgpr_count=128, sgpr_count=40, num_warps=4,
                        shared_bytes=0)
    assert (occ["arch"], occ["estimate"], occ["waves_per_simd"], occ["limiter"]) \
        == ("gfx936", True, 6, "vgpr")


@FUZZ
@given(arch=st.sampled_from(sorted(archs.ARCHS)) | st.text(max_size=12), vgpr=COUNTS, sgpr=COUNTS,
       agpr=COUNTS, shared=COUNTS, warps=COUNTS, llvm=COUNTS)
def test_fuzz_occupancy_of_any_arch_and_counts(arch, vgpr, sgpr, agpr, shared, warps, llvm):
    from tko.read.occupancy import amd_occupancy

    occ = total(amd_occupancy, arch, vgpr_count=vgpr, sgpr_count=sgpr, agpr_count=agpr,
                shared_bytes=shared, num_warps=warps, llvm_occupancy=llvm)
    assert occ is None or isinstance(occ["notes"], list)
