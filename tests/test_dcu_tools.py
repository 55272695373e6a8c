"""DCU tool-output parsers on real public outputs (tests/fixtures/dcu/, sources in each header)."""

from __future__ import annotations

import json

import pytest

from tko.base import archs
from tko.read import dcu_tools
from tko.env import env_probe

KB = 1024


def body(fixtures_dir, name: str) -> str:
    """A fixture without its '#' source header (real tool output has none)."""
    text = (fixtures_dir / "dcu" / name).read_text(encoding="utf-8")
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


# --------------------------------------------------------------------------- rocminfo

def test_rocminfo_gfx936_dtk(fixtures_dir):
    parsed = dcu_tools.parse_rocminfo(body(fixtures_dir, "rocminfo_gfx936_bw_1.txt"))
    assert parsed["banner"] == "C-3000 hycu module is loaded"
    assert parsed["runtime_version"] == "1.11"
    assert [a["device_type"] for a in parsed["agents"]] == ["CPU"] * 8 + ["HCU"]
    assert [a["agent"] for a in parsed["agents"]] == list(range(1, 10))
    assert len(parsed["gpus"]) == 1
    gpu = parsed["gpus"][0]
    assert gpu["agent"] == 9
    assert gpu["name"] == "BW"
    assert gpu["arch"] == "gfx936"
    assert gpu["arch_full"] == "gfx936:sramecc+:xnack-"
    assert gpu["vendor"] == "hygon"
    assert gpu["vendor_name"] == "C-3000"
    assert gpu["device_type"] == "HCU"
    assert gpu["chip_id"] == 0x6320
    assert gpu["compute_units"] == 80
    assert gpu["simds_per_cu"] == 4
    assert gpu["wave_size"] == 64
    assert gpu["max_waves_per_cu"] == 40
    assert gpu["max_clock_mhz"] == 1500
    assert gpu["l2_bytes"] == 8192 * KB
    assert gpu["lds_per_block_bytes"] == 64 * KB
    assert gpu["memory_bytes"] == 67092480 * KB
    # CPU agents keep their fields and pools
    cpu = parsed["agents"][0]
    assert cpu["fields"]["Vendor Name"] == "HygonGenuine"
    assert [p["pool"] for p in cpu["pools"]] == [1, 2, 3]
    assert cpu["isas"] == []


def test_rocminfo_agrees_with_hip_device_props_of_same_model(fixtures_dir):
    """Two independent real captures of a gfx936 BW: rocminfo and hipGetDeviceProperties."""
    gpu = dcu_tools.parse_rocminfo(body(fixtures_dir, "rocminfo_gfx936_bw_1.txt"))["gpus"][0]
    text = body(fixtures_dir, "hip_device_props_bw1000_gfx936_1.jsonl")
    (p,) = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert p["name"] == "BW200, UBB BW1000"
    assert gpu["arch_full"] == p["gcnArchName"] and gpu["arch"] == archs.normalize(p["gcnArchName"]) == "gfx936"
    assert gpu["vendor"] == archs.info(gpu["arch"]).vendor
    expected = {"compute_units": p["cu_count"], "wave_size": p["warp_size"], "memory_bytes": p["global_mem_bytes"],
                "l2_bytes": p["l2_bytes"], "lds_per_block_bytes": p["lds_per_block"],
                "max_clock_mhz": p["clock_khz"] // 1000}
    for key, value in expected.items():
        assert gpu[key] == value, key


def test_rocminfo_tolerates_ansi_and_carriage_returns(fixtures_dir):
    text = body(fixtures_dir, "rocminfo_gfx936_bw_1.txt")
    # The stored original holds colour escapes before "C-3000" and before the first agent block
    # (INDEX.md); add such escapes and CRLF line ends, as a terminal capture would have them.
    noisy = text.replace("C-3000 hycu", "\x1b[32mC-3000 hycu", 1)
    noisy = noisy.replace("*******\nAgent 1", "\x1b[0m*******\nAgent 1", 1)
    noisy = noisy.replace("  Name:                    gfx936", "  Name:                    \x1b[1mgfx936\x1b[0m")
    noisy = noisy.replace("\n", "\r\n")
    clean = dcu_tools.parse_rocminfo(text)
    dirty = dcu_tools.parse_rocminfo(noisy.encode("utf-8"))
    assert dirty["banner"] == clean["banner"] == "C-3000 hycu module is loaded"
    assert dirty["gpus"] == clean["gpus"]
    assert len(dirty["agents"]) == 9


def test_rocminfo_gfx938_derived_fixture(fixtures_dir):
    parsed = dcu_tools.parse_rocminfo(body(fixtures_dir, "rocminfo_gfx938_derived_from_gfx936.txt"))
    (gpu,) = parsed["gpus"]
    assert gpu["arch"] == "gfx938"
    assert gpu["arch_full"] == "gfx938:sramecc+:xnack-"
    assert gpu["vendor"] == "hygon"
    check = env_probe.arch_check([gpu], archs.EXPECTED_DCU_ARCHS)
    assert check["status"] == "expected" and gpu["arch_expected"] is True
    check = env_probe.arch_check([dict(gpu)], ["gfx936"])
    assert check["status"] == "unexpected" and "gfx938" in check["message"]


def test_rocminfo_gfx906_fragments(fixtures_dir):
    """A Hygon Z100L (gfx906) paste of which only the head and a GPU-agent tail survive."""
    raw = (fixtures_dir / "dcu" / "rocminfo_gfx906_z100l_1.txt").read_text(encoding="utf-8")
    part_a, part_b = raw.split("# ----- part B -----\n")
    strip = lambda t: "".join(l for l in t.splitlines(keepends=True) if not l.startswith("#"))  # noqa: E731
    head = dcu_tools.parse_rocminfo(strip(part_a))
    assert head["banner"] == "hygon module is loaded"
    assert head["runtime_version"] == "1.1"
    assert len(head["agents"]) == 1
    assert head["agents"][0]["fields"]["Name"] == "Hygon C86 3350  8-core Processor"
    assert head["agents"][0]["fields"]["Node"] == "0"
    assert head["agents"][0]["device_type"] is None      # the paste stops before "Device Type"
    assert head["gpus"] == []
    tail = dcu_tools.parse_rocminfo(strip(part_b))
    (frag,) = tail["agents"]
    assert frag["agent"] is None            # started mid-agent: no "Agent N" header
    assert frag["fields"]["Max fbarriers/Workgrp"] == "32"
    assert [p["pool"] for p in frag["pools"]] == [1, 2, 3]
    assert frag["pools"][0]["Size"] == "33538048(0x1ffc000) KB"
    device = dcu_tools.rocminfo_device(frag)
    assert device["memory_bytes"] == 33538048 * KB          # 32 GiB HBM of a Z100L
    assert device["arch"] is None                          # the name lines were not retrievable


# --------------------------------------------------------------------------- hy-smi table

def test_hysmi_new_style_hcu_header(fixtures_dir):
    parsed = dcu_tools.parse_hysmi_table(body(fixtures_dir, "hysmi_bw1000_gfx936_1.txt"))
    assert parsed["style"] == "HCU"
    assert parsed["complete"] is True
    assert parsed["columns"] == ["HCU", "Temp", "AvgPwr", "Perf", "PwrCap", "VRAM%", "HCU%",
                                 "Dec%", "Enc%", "Mode"]
    devs = parsed["devices"]
    assert [d["index"] for d in devs] == list(range(8))
    assert [d["temp_c"] for d in devs] == [39.0, 41.0, 37.0, 35.0, 40.0, 40.0, 38.0, 36.0]
    assert devs[1]["avg_power_w"] == 151.0
    assert {d["power_cap_w"] for d in devs} == {800.0}
    assert {d["perf"] for d in devs} == {"manual"}
    assert devs[0]["util_pct"] == 0.0 and devs[0]["dec_pct"] == 0.0 and devs[0]["enc_pct"] == 0.0
    assert devs[0]["mode"] == "Normal"


def test_hysmi_old_style_dcu_header(fixtures_dir):
    parsed = dcu_tools.parse_hysmi_table(body(fixtures_dir, "hysmi_k100lc_gfx926_1.txt"))
    assert parsed["style"] == "DCU"
    (dev,) = parsed["devices"]
    assert dev["index"] == 0
    assert dev["temp_c"] == 33.0
    assert dev["perf"] == "auto"
    assert dev["power_cap_w"] == 450.0
    assert dev["vram_pct"] == 30.0
    assert dev["util_pct"] == 0.0
    assert dev["dec_pct"] is None and dev["enc_pct"] is None


def test_hysmi_cut_off_header_fragment(fixtures_dir):
    parsed = dcu_tools.parse_hysmi_table(body(fixtures_dir, "hysmi_fragment_cuda_torch_on_dcu_1.txt"))
    assert parsed["style"] == "HCU"
    assert parsed["columns"][-1] == "HCU%"
    assert parsed["devices"] == []
    assert parsed["complete"] is False


def test_hysmi_table_with_ansi_and_cr(fixtures_dir):
    text = body(fixtures_dir, "hysmi_bw1000_gfx936_1.txt")
    noisy = "\x1b[1m" + text.replace("\n", "\r\n").replace("Normal", "\x1b[32mNormal\x1b[0m")
    assert dcu_tools.parse_hysmi_table(noisy)["devices"] == \
        dcu_tools.parse_hysmi_table(text)["devices"]


# --------------------------------------------------------------------------- smi --json

def test_hysmi_json_unclosed(fixtures_dir):
    parsed = dcu_tools.parse_smi_json(body(fixtures_dir, "hysmi_json_k100ai_gfx928_1.txt"))
    assert parsed["complete"] is False          # the sample is cut after card1 (no closing brace)
    assert [c["card"] for c in parsed["cards"]] == ["card0", "card1"]
    c0 = parsed["cards"][0]
    assert c0["index"] == 0
    assert c0["device_id"] == "0x6210"
    assert c0["series"] == "K100_AI"
    assert c0["vendor_name"] == "Chengdu Haiguang IC Design Co., Ltd."
    assert c0["vram_total_mib"] == 65520.0 and c0["vram_used_mib"] == 2.0
    assert c0["util_pct"] == 0.0
    assert c0["avg_power_w"] == 77.0
    assert c0["temp_c"] == {"edge": 37.0, "junction": 35.0, "mem": 38.0, "core": 35.0}
    assert parsed["cards"][1]["serial"] == "TRCW340004110601"


def test_hysmi_json_closed_and_cut_mid_card(fixtures_dir):
    text = body(fixtures_dir, "hysmi_json_k100ai_gfx928_1.txt").rstrip("\n")
    closed = dcu_tools.parse_smi_json(text + "}")
    assert closed["complete"] is True and len(closed["cards"]) == 2
    cut = text[: text.index('"Unique ID": "7137d9debec858c1"')]   # inside card1
    partial = dcu_tools.parse_smi_json(cut)
    assert partial["complete"] is False
    assert [c["card"] for c in partial["cards"]] == ["card0"]


def test_dtk_rocm_smi_json(fixtures_dir):
    parsed = dcu_tools.parse_smi_json(body(fixtures_dir, "rocmsmi_json_k100ai_gfx928_1.txt"))
    (card,) = parsed["cards"]
    assert card["vendor_name"] == "Chengdu C-3000 IC Design Co., Ltd."
    assert card["series"] == "K100_AI"
    assert card["temp_c"]["edge"] == 48.0
    assert card["avg_power_w"] == 78.0


def test_smi_json_without_json():
    assert dcu_tools.parse_smi_json("hy-smi: command not found\n") == {"cards": [], "complete": False}


# --------------------------------------------------------------------------- hipcc --version

def test_hipcc_version_dtk(fixtures_dir):
    parsed = dcu_tools.parse_hipcc_version(body(fixtures_dir, "hipcc_version_dtk2510_gfx936_1.txt"))
    assert parsed["flavor"] == "dtk"
    assert parsed["dcc_version"] == "25.10.0-0"
    assert parsed["version"] == "25.10.0-0"
    assert parsed["clang_version"] == "17.0.0"
    assert parsed["target"] == "x86_64-unknown-linux-gnu"
    assert parsed["installed_dir"] == "/opt/dtk/llvm/bin"
    assert parsed["hip_version"] is None


def test_first_version_on_real_version_strings(fixtures_dir):
    text = body(fixtures_dir, "torch_versions_gfx936_1.txt")
    hip_line = next(l for l in text.splitlines() if "torch.version.hip" in l)
    assert dcu_tools.first_version(hip_line) == "6.3.26113"
    meta_line = next(l for l in text.splitlines() if "Metadata" in l)
    assert dcu_tools.first_version(meta_line) == "2.10.0+das.opt1.dtk2604.2606161421.g91a580"
    assert dcu_tools.first_version("no digits here") is None


# --------------------------------------------------------------------------- text cleaning

@pytest.mark.parametrize("text, expected", [
    ("\x1b[31mred\x1b[0m\r\nnext\rline", "red\nnext\nline"),
    (b"bytes\r\n", "bytes\n"),
])
def test_clean_text(text, expected):
    assert dcu_tools.clean_text(text) == expected
