"""tko.base.config.TritonConfig on configs taken from the fixtures, in every form the bundle meets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tko.read import kernel_source
from tko.base.config import (AMD_OPTIONS, CONFIG_FIELDS, OPTION_KEYS, TritonConfig, normalize_record, record_key,
                        record_label)

FIX = Path(__file__).resolve().parent / "fixtures"
LOGS = FIX / "autotune_logs"
INDUCTOR_LOG = FIX / "inductor_h200" / "tiny_launches" / "log_profile.txt"
USER_CAPTURE = FIX / "capture_h200" / "user_autotune_kernel"


def _lines(path: Path, pattern: str) -> list[str]:
    return [m.group(1) for line in path.read_text().splitlines() if (m := re.search(pattern, line))]


def _spec(path: Path) -> dict:
    text = path.read_text()
    return json.loads(re.search(r"^_TKO_SPEC = __import__\(\"json\"\)\.loads\('(.*)'\)$", text, re.M).group(1))


# ---------------------------------------------------------------------------- printed text

def test_text_of_every_triton_era_round_trips():
    interp = _lines(LOGS / "triton_print_autotuning_interp.log", r"Autotuning kernel \S+ with config (.*)$")
    one_line = _lines(LOGS / "triton_print_autotuning_3_2_from_source.log", r"best config selected: (.*;)\s*$")
    assert interp[0] == "BLOCK: 64, num_warps: 4, num_ctas: 1, num_stages: 3, maxnreg: None, ir_override: None"
    assert "num_buffers_warp_spec: 0" in one_line[0]
    for text in interp + one_line:
        cfg = TritonConfig.from_text(text)
        assert cfg.text() == text.rstrip(";")          # Triton's own field order comes back
        assert TritonConfig.from_text(cfg.text()) == cfg
    c39 = TritonConfig.from_text(interp[0])
    assert c39.kwargs == (("BLOCK", 64),) and (c39.num_warps, c39.num_stages) == (4, 3)
    assert c39.options == (("num_ctas", 1), ("maxnreg", None), ("ir_override", None))
    c32 = TritonConfig.from_text(one_line[0])
    assert c32.kwargs_dict() == {"BLOCK_M": 128, "BLOCK_N": 64} and c32.num_stages == 2
    assert c32.label() == "BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2"   # defaults say nothing


def test_inductor_debug_log_text():
    texts = _lines(INDUCTOR_LOG, r"Best config for \S+: (.*): [\d.]+, nreg")
    cfg = TritonConfig.from_text(texts[0])
    assert cfg.text() == texts[0] == "XBLOCK: 128, num_warps: 4, num_ctas: 1, num_stages: 1, maxnreg: None"
    assert cfg.record() == {"kwargs": {"XBLOCK": 128}, "num_warps": 4, "num_stages": 1,
                            "extras": {"num_ctas": 1, "maxnreg": None}}
    assert cfg.flat() == {"XBLOCK": 128, "num_warps": 4, "num_stages": 1, "num_ctas": 1, "maxnreg": None}


def test_text_that_is_no_whole_config():
    for text in ("XBLOCK: 256, num_warps: 4, num_ct", "hello world", "", "num_warps: True, num_stages: 1"):
        with pytest.raises(ValueError):
            TritonConfig.from_text(text)


# ---------------------------------------------------------------------------- other forms

def test_one_config_in_every_form_has_one_key():
    # the winner of the real user autotune capture: BLOCK 1024, 4 warps, 3 stages
    event = next(json.loads(line) for line in (USER_CAPTURE / "autotune.log").read_text().splitlines()
                 if '"winner"' in line and json.loads(line).get("winner"))
    record = event["winner"]
    assert record == {"kwargs": {"BLOCK": 1024}, "num_warps": 4, "num_stages": 3, "extras": {}}
    flat = _spec(USER_CAPTURE / "scale_bias_relu_kernel.py")["configs"][0]["flat"]
    assert flat == {"BLOCK": 1024, "num_stages": 3, "num_warps": 4}
    source = kernel_source.parse_kernel_source((USER_CAPTURE / "scale_bias_relu_kernel.py").read_text())
    declared = next(k for k in source["kernels"] if k["name"] == "scale_bias_relu_kernel")["configs"]
    forms = [TritonConfig.from_record(record), TritonConfig.from_flat(flat), TritonConfig.from_record(flat),
             TritonConfig.from_text("BLOCK: 1024, num_warps: 4, num_ctas: 1, num_stages: 3, maxnreg: None, "
                                    "ir_override: None"),
             TritonConfig.from_assignments("BLOCK=1024,num_warps=4,num_stages=3"),
             TritonConfig.of({"BLOCK": 1024}, num_warps=4, num_stages=3, num_ctas=1)]
    assert len({c.key() for c in forms}) == 1 and len(set(forms)) == 1
    assert record_key(record) == forms[0].key() and record_label(record) == forms[0].label()
    assert all(c.label() == "BLOCK=1024, num_warps=4, num_stages=3" for c in forms)
    # the source declares BLOCK 1024 with 4 warps and Triton's default stages (not written: None)
    assert declared[1] == {"kwargs": {"BLOCK": 1024}, "num_warps": 4, "num_stages": None, "extras": {}}
    assert TritonConfig.from_record(declared[1]) != forms[0]
    assert TritonConfig.from_assignments(forms[0].label()) == forms[0]


def test_flat_and_source_of_a_real_sweep_pin():
    doc = json.loads((FIX / "sweep_h200" / "index_add_sweep.json").read_text())
    best = next(v for v in doc["variants"] if v["name"] == doc["best"]["name"])
    cfg = TritonConfig.from_flat(best["config"])
    assert doc["best"]["apply"] == "pin " + cfg.to_source()
    assert cfg.to_source() == 'triton.Config({"XBLOCK": 64, "YBLOCK": 32}, num_warps=8, num_stages=1)'
    assert cfg.flat() == best["config"] and TritonConfig.from_flat(cfg.flat()) == cfg
    assert cfg.triton_args() == ({"XBLOCK": 64, "YBLOCK": 32}, {"num_warps": 8, "num_stages": 1})


def test_from_triton_config():
    triton = pytest.importorskip("triton")
    cfg = TritonConfig.from_triton(triton.Config({"XBLOCK": 1024}, num_warps=4, num_stages=1))
    assert cfg.record() == {"kwargs": {"XBLOCK": 1024}, "num_warps": 4, "num_stages": 1, "extras": {}}
    assert cfg == TritonConfig.from_text(str(triton.Config({"XBLOCK": 1024}, num_warps=4, num_stages=1)))
    big = TritonConfig.from_triton(triton.Config({"BLOCK": 64}, num_warps=8, num_stages=2, num_ctas=2, maxnreg=128,
                                                 pre_hook=lambda args: None))
    assert big.options == (("num_ctas", 2), ("maxnreg", 128))     # pre_hook is no data
    assert big.flat() == {"BLOCK": 64, "num_warps": 8, "num_stages": 2, "num_ctas": 2, "maxnreg": 128}
    assert eval(big.to_source(), {"triton": triton}).all_kwargs() == \
        triton.Config({"BLOCK": 64}, num_warps=8, num_stages=2, num_ctas=2, maxnreg=128).all_kwargs()


def test_inductor_hashable_pairs():
    # triton_config_to_hashable: sorted kwargs, then num_warps and num_stages
    pairs = (("R0_BLOCK", 2048), ("XBLOCK", 1), ("num_warps", 16), ("num_stages", 1))
    cfg = TritonConfig.from_flat(dict(pairs))
    assert cfg.record() == {"kwargs": {"R0_BLOCK": 2048, "XBLOCK": 1}, "num_warps": 16, "num_stages": 1,
                            "extras": {}}


# ---------------------------------------------------------------------------- AMD options

def test_amd_options_in_every_form():
    event = next(json.loads(line) for line in (LOGS / "autotune_events_contract.jsonl").read_text().splitlines()
                 if "waves_per_eu" in line)
    record = event["configs"][0]
    assert record == {"kwargs": {"XBLOCK": 1, "R0_BLOCK": 2048}, "num_warps": 16, "num_stages": 1,
                      "extras": {"waves_per_eu": 2}}
    cfg = TritonConfig.from_record(record)
    # Inductor's HIP configs carry them in Config.kwargs, so its printed text lists them there
    text = "XBLOCK: 1, R0_BLOCK: 2048, waves_per_eu: 2, num_warps: 16, num_ctas: 1, num_stages: 1, maxnreg: None"
    assert TritonConfig.from_text(text) == cfg and TritonConfig.from_text(text).text() == text
    as_kwargs = TritonConfig.from_record({"kwargs": {"XBLOCK": 1, "R0_BLOCK": 2048, "waves_per_eu": 2},
                                          "num_warps": 16, "num_stages": 1})
    assert as_kwargs.record() == record
    flat = {"XBLOCK": 1, "R0_BLOCK": 2048, "waves_per_eu": 2, "num_warps": 16, "num_stages": 1}
    assert TritonConfig.from_flat(flat) == cfg and cfg.flat() == flat
    assert cfg.label() == "XBLOCK=1, R0_BLOCK=2048, num_warps=16, num_stages=1, waves_per_eu=2"
    assert cfg.to_source() == 'triton.Config({"XBLOCK": 1, "R0_BLOCK": 2048, "waves_per_eu": 2}, num_warps=16, num_stages=1)'
    assert cfg.compile_options() == {"num_warps": 16, "num_stages": 1, "waves_per_eu": 2}
    assert cfg != TritonConfig.from_record(dict(record, extras={}))
    both = TritonConfig.of({"BLOCK": 2048}, num_warps=8, matrix_instr_nonkdim=16, kpack=2)
    assert both.options_dict() == {"matrix_instr_nonkdim": 16, "kpack": 2}
    assert set(AMD_OPTIONS) <= set(OPTION_KEYS) and set(CONFIG_FIELDS) <= set(OPTION_KEYS)


def test_source_literal_with_amd_keyword():
    # tests/fixtures/kernels/autotuned_scale.py: triton.Config({"BLOCK": 2048}, num_warps=8, waves_per_eu=2)
    parsed = kernel_source.parse_kernel_source((FIX / "kernels" / "autotuned_scale.py").read_text())
    configs = next(k for k in parsed["kernels"] if k["name"] == "scale_kernel")["configs"]
    cfg = TritonConfig.from_record(configs[2])
    assert cfg == TritonConfig.of({"BLOCK": 2048, "waves_per_eu": 2}, num_warps=8)
    assert cfg.option("waves_per_eu") == 2 and cfg.option("kpack", 1) == 1


# ---------------------------------------------------------------------------- value semantics

def test_key_ignores_order_and_defaults_but_not_values():
    a = TritonConfig.of({"XBLOCK": 2, "R0_BLOCK": 1024}, num_warps=8, num_stages=1)
    b = TritonConfig.of({"R0_BLOCK": 1024, "XBLOCK": 2}, num_warps=8, num_stages=1, num_ctas=1, maxnreg=None)
    assert a == b and hash(a) == hash(b) and a.label() != b.label()   # labels keep the given order
    assert a != TritonConfig.of({"XBLOCK": 2, "R0_BLOCK": 1024}, num_warps=8, num_stages=1, num_ctas=2)
    assert a != TritonConfig.of({"XBLOCK": 2, "R0_BLOCK": 512}, num_warps=8, num_stages=1)
    assert b.explicit().options == (("num_ctas", 1),)
    assert a.mapped(str).kwargs == (("XBLOCK", "2"), ("R0_BLOCK", "1024"))
    with pytest.raises(Exception):
        a.num_warps = 4   # frozen


def test_assignments_errors_name_the_entry():
    with pytest.raises(ValueError, match="'num_warps' is not NAME=VALUE"):
        TritonConfig.from_assignments("XBLOCK=1024,num_warps")
    assert TritonConfig.from_assignments("").record() == TritonConfig().record()
    assert TritonConfig.from_assignments("MODE=fast, ratio=0.5").kwargs_dict() == {"MODE": "fast", "ratio": 0.5}


def test_record_fast_paths_agree_with_the_value():
    events = []
    for line in (LOGS / "autotune_events_contract.jsonl").read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:   # the fixture holds a line cut in half on purpose
            pass
    records = [c for e in events for c in e.get("configs") or []]
    records += [r["config"] for e in events for r in e.get("timings") or []]
    records.append({"kwargs": {"XBLOCK": 8, "kpack": 2}, "num_warps": 2, "num_stages": 1, "extras": {"num_ctas": 1}})
    records.append({"XBLOCK": 8, "num_warps": 2, "waves_per_eu": 1})
    assert len(records) > 5
    for rec in records:
        cfg = TritonConfig.from_record(rec)
        assert normalize_record(rec) == cfg.record()
        assert record_key(cfg.record()) == cfg.key() and record_label(cfg.record()) == cfg.label()
