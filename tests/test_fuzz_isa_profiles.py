"""Hostile input for the ISA scanners and the profile readers: every parser is total.

Real listings (tests/fixtures/isa) and real profiles (tests/fixtures/profiles, the recorded H200
runs) are mutated: lines dropped, duplicated or shuffled, the file cut at a random byte, random
bytes and NULs spliced in, directives left without operands, numbers made huge, non-UTF-8 bytes,
empty files.  Only the project's InputError may escape a parser; a script exits 0, or 2 with one
line on stderr.  Each defect found has a direct test.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import FIXTURES
from fuzzing import (SCALARS, assert_ok_or_one_line, assert_one_line_exit_2, fuzz_settings,
                     json_paths, json_values, put, run_script)
from tko.read import isa, isa_amdgcn, isa_ptx, profile_compare
from tko.read import profile_formats as pf
from tko.read import profile_rank as pr
from tko.base.artifact import check_fields, make_artifact
from tko.base.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
ISA_DIR = FIXTURES / "isa"
PROFILES = FIXTURES / "profiles"
RECORDED = ROOT / "examples" / "recorded_h200"

FUZZ = fuzz_settings()


# JSON values of every type, NaN, infinities and integers past a float's range included.
JSON = json_values(SCALARS | st.sampled_from([10**400, -10**400, 0, -1]))


# --------------------------------------------------------------------------- mutations

HUGE = [b"9" * 25, b"1" + b"0" * 400, b"9" * 5000, b"-" + b"9" * 30, b"1e999", b"-1",
        b"0x" + b"f" * 40, b"nan", b"inf", b"1.2.3", b"."]
NON_UTF8 = [b"\xff", b"\xfe\xff", b"\xc3(", b"\xe9", b"\x80\x80", b"\xed\xa0\x80", b"\x00"]


def _lines(raw: bytes) -> list[bytes]:
    return raw.split(b"\n")


def _drop_lines(draw, raw):
    lines = _lines(raw)
    start = draw(st.integers(0, len(lines)))
    return b"\n".join(lines[:start] + lines[start + draw(st.integers(1, 40)):])


def _duplicate_lines(draw, raw):
    lines = _lines(raw)
    i = draw(st.integers(0, len(lines) - 1))
    block = lines[i:i + draw(st.integers(1, 20))]
    j = draw(st.integers(0, len(lines)))
    return b"\n".join(lines[:j] + block * draw(st.integers(1, 3)) + lines[j:])


def _shuffle_lines(draw, raw):
    lines = _lines(raw)
    i = draw(st.integers(0, len(lines) - 1))
    part = lines[i:i + draw(st.integers(2, 60))]
    draw(st.randoms(use_true_random=False)).shuffle(part)
    return b"\n".join(lines[:i] + part + lines[i + len(part):])


def _truncate(draw, raw):
    return raw[:draw(st.integers(0, len(raw)))]


def _splice_bytes(draw, raw):
    pos = draw(st.integers(0, len(raw)))
    junk = draw(st.binary(min_size=1, max_size=16) | st.sampled_from([b"\x00", b"\x00" * 64]))
    return raw[:pos] + junk + raw[pos:]


_DIRECTIVE = re.compile(rb"(?m)^([ \t]*(?:\.[\w.$-]+|;[ \t]*[A-Za-z][\w ]*:|[\w.]+:|"
                        rb"[A-Z][\w ]*[:,]))[^\n]*$")


def _missing_operands(draw, raw):
    """Directives (``.amdhsa_next_free_vgpr 12``, ``.set .Lk.num_vgpr, 12``, ``; NumVgprs: 12``,
    ``.reg .b32 %r<5>;``, a CSV header cell) cut after their name."""
    found = list(_DIRECTIVE.finditer(raw))
    if not found:
        return raw
    picks = draw(st.lists(st.integers(0, len(found) - 1), min_size=1, max_size=8, unique=True))
    out = raw
    for i in sorted(picks, reverse=True):
        m = found[i]
        out = out[:m.start()] + m.group(1) + out[m.end():]
    return out


def _huge_numbers(draw, raw):
    found = list(re.finditer(rb"\d+", raw))
    if not found:
        return raw
    picks = draw(st.lists(st.integers(0, len(found) - 1), min_size=1, max_size=6, unique=True))
    out = raw
    for i in sorted(picks, reverse=True):
        m = found[i]
        out = out[:m.start()] + draw(st.sampled_from(HUGE)) + out[m.end():]
    return out


def _non_utf8(draw, raw):
    pos = draw(st.integers(0, len(raw)))
    return raw[:pos] + draw(st.sampled_from(NON_UTF8)) + raw[pos:]


def _grow(draw, raw):
    """The file repeated past 128 KiB (the csv module's field limit) with a quote opened and
    never closed on one line: one field then runs to the end."""
    copies = 131072 // max(len(raw), 1) + 2
    lines = _lines(raw * copies)
    i = draw(st.integers(0, len(lines) - 1))
    lines[i] = b'"' + lines[i]
    return b"\n".join(lines)


def _empty(draw, raw):
    return draw(st.sampled_from([b"", b"\n", b"\n\n\n", b" \t\r\n", b"\x00"]))


MUTATIONS = [_drop_lines, _duplicate_lines, _shuffle_lines, _truncate, _splice_bytes,
             _missing_operands, _huge_numbers, _non_utf8, _empty]
# a large file matters to the CSV readers only (the listing scanners have no field limit)
PROFILE_MUTATIONS = MUTATIONS + [_grow]


@st.composite
def mutated(draw, seeds: list[Path], mutations=tuple(MUTATIONS)) -> tuple[Path, bytes]:
    """(seed path, its bytes after one to three mutations)."""
    seed = draw(st.sampled_from(seeds))
    raw = _seed_bytes(seed)
    for mutate in draw(st.lists(st.sampled_from(mutations), min_size=1, max_size=3)):
        raw = mutate(draw, raw) if raw else raw
    return seed, raw


@lru_cache(maxsize=None)
def _seed_bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


# --------------------------------------------------------------------------- 1. ISA listings

ISA_SEEDS = sorted(p for p in ISA_DIR.rglob("*") if p.suffix in (".amdgcn", ".ptx", ".sass"))
# (kernels, format, arch, instructions counted) of each real listing, as scanned before fuzzing
ISA_EXPECTED = {
    "gfx90a-nopr/add_fp32.amdgcn": (1, "amdgcn", "gfx90a", 30),
    "gfx90a-nopr/gelu_fp16.amdgcn": (1, "amdgcn", "gfx90a", 307),
    "gfx90a-nopr/index_add.amdgcn": (1, "amdgcn", "gfx90a", 202),
    "gfx90a-nopr/matmul.amdgcn": (1, "amdgcn", "gfx90a", 371),
    "gfx90a-nopr/matmul_spill.amdgcn": (1, "amdgcn", "gfx90a", 732),
    "gfx90a-nopr/softmax.amdgcn": (1, "amdgcn", "gfx90a", 328),
    "gfx90a-pr32/add_fp32.amdgcn": (1, "amdgcn", "gfx90a", 31),
    "gfx90a-pr32/gelu_fp16.amdgcn": (1, "amdgcn", "gfx90a", 279),
    "gfx90a-pr32/index_add.amdgcn": (1, "amdgcn", "gfx90a", 195),
    "gfx90a-pr32/matmul.amdgcn": (1, "amdgcn", "gfx90a", 281),
    "gfx90a-pr32/matmul_spill.amdgcn": (1, "amdgcn", "gfx90a", 550),
    "gfx90a-pr32/softmax.amdgcn": (1, "amdgcn", "gfx90a", 326),
    "gfx942-nopr/add_fp32.amdgcn": (1, "amdgcn", "gfx942", 26),
    "gfx942-nopr/gelu_fp16.amdgcn": (1, "amdgcn", "gfx942", 301),
    "gfx942-nopr/index_add.amdgcn": (1, "amdgcn", "gfx942", 147),
    "gfx942-nopr/matmul.amdgcn": (1, "amdgcn", "gfx942", 296),
    "gfx942-nopr/matmul_spill.amdgcn": (1, "amdgcn", "gfx942", 501),
    "gfx942-nopr/softmax.amdgcn": (1, "amdgcn", "gfx942", 333),
    "gfx942-pr32/add_fp32.amdgcn": (1, "amdgcn", "gfx942", 32),
    "gfx942-pr32/gelu_fp16.amdgcn": (1, "amdgcn", "gfx942", 269),
    "gfx942-pr32/index_add.amdgcn": (1, "amdgcn", "gfx942", 122),
    "gfx942-pr32/matmul.amdgcn": (1, "amdgcn", "gfx942", 257),
    "gfx942-pr32/matmul_spill.amdgcn": (1, "amdgcn", "gfx942", 476),
    "gfx942-pr32/softmax.amdgcn": (1, "amdgcn", "gfx942", 332),
    "hygon/hygon_constructed_gfx936.amdgcn": (3, "amdgcn", "gfx936", 47),
    "inductor/gfx90a-nopr/triton_poi_fused_add_gelu_mul_0.amdgcn": (1, "amdgcn", "gfx90a", 245),
    "inductor/gfx90a-nopr/triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1.amdgcn":
        (1, "amdgcn", "gfx90a", 234),
    "inductor/gfx90a-nopr/triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online"
    "_sub_0.amdgcn": (1, "amdgcn", "gfx90a", 1040),
    "inductor/gfx90a-pr32/triton_poi_fused_add_gelu_mul_0.amdgcn": (1, "amdgcn", "gfx90a", 245),
    "inductor/gfx90a-pr32/triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1.amdgcn":
        (1, "amdgcn", "gfx90a", 205),
    "inductor/gfx90a-pr32/triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online"
    "_sub_0.amdgcn": (1, "amdgcn", "gfx90a", 1002),
    "inductor/gfx942-nopr/triton_poi_fused_add_gelu_mul_0.amdgcn": (1, "amdgcn", "gfx942", 234),
    "inductor/gfx942-nopr/triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1.amdgcn":
        (1, "amdgcn", "gfx942", 175),
    "inductor/gfx942-nopr/triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online"
    "_sub_0.amdgcn": (1, "amdgcn", "gfx942", 1076),
    "inductor/gfx942-pr32/triton_poi_fused_add_gelu_mul_0.amdgcn": (1, "amdgcn", "gfx942", 243),
    "inductor/gfx942-pr32/triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1.amdgcn":
        (1, "amdgcn", "gfx942", 152),
    "inductor/gfx942-pr32/triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online"
    "_sub_0.amdgcn": (1, "amdgcn", "gfx942", 1069),
    "sm80/matmul.ptx": (1, "ptx", "sm_80", 629),
    "sm90/add_fp32.ptx": (1, "ptx", "sm_90", 51),
    "sm90/index_add.ptx": (1, "ptx", "sm_90", 56),
    "sm90/index_add.sass": (1, "sass", "sm_90", 72),
    "sm90/matmul.ptx": (1, "ptx", "sm_90", 597),
    "triton-3.5.1/gfx90a-nopr/add_fp32.amdgcn": (1, "amdgcn", "gfx90a", 30),
    "triton-3.5.1/gfx90a-nopr/matmul_spill.amdgcn": (1, "amdgcn", "gfx90a", 777),
    "triton-3.5.1/gfx90a-pr32/add_fp32.amdgcn": (1, "amdgcn", "gfx90a", 30),
    "triton-3.5.1/gfx90a-pr32/matmul_spill.amdgcn": (1, "amdgcn", "gfx90a", 1053),
    "triton-3.5.1/gfx942-nopr/add_fp32.amdgcn": (1, "amdgcn", "gfx942", 31),
    "triton-3.5.1/gfx942-nopr/matmul_spill.amdgcn": (1, "amdgcn", "gfx942", 528),
    "triton-3.5.1/gfx942-pr32/add_fp32.amdgcn": (1, "amdgcn", "gfx942", 31),
    "triton-3.5.1/gfx942-pr32/matmul_spill.amdgcn": (1, "amdgcn", "gfx942", 646),
}
FORMAT_OF = {".amdgcn": "amdgcn", ".ptx": "ptx", ".sass": "sass"}


def _instructions(result: dict) -> int:
    return sum(sum(k["mnemonics"].values()) for k in result["kernels"])


def test_every_isa_seed_has_an_expected_scan():
    assert sorted(str(p.relative_to(ISA_DIR)) for p in ISA_SEEDS) == sorted(ISA_EXPECTED)


@pytest.mark.parametrize("rel", sorted(ISA_EXPECTED))
def test_isa_seed_scans_as_before(rel):
    text = (ISA_DIR / rel).read_text(encoding="utf-8", errors="replace")
    kernels, fmt, arch, insts = ISA_EXPECTED[rel]
    for how in ("auto", fmt):
        result = isa.scan_text(text, how)
        assert (len(result["kernels"]), result["format"], result["arch"], _instructions(result)) \
            == (kernels, fmt, arch, insts)


def _scan_mutated(raw: bytes, fmt: str) -> None:
    """scan_text on the listing as scan_path decodes it, by its suffix's format and by sniffing;
    what comes back is a well-formed record."""
    text = raw.decode("utf-8", errors="replace")
    for how in (fmt, "auto"):
        try:
            result = isa.scan_text(text, how)
        except InputError:
            continue
        assert result["kernels"]
        for k in result["kernels"]:
            assert isinstance(k["name"], str) and k["verdict"] and isinstance(k["totals"], dict)


@FUZZ
@given(case=mutated(ISA_SEEDS))
def test_fuzz_isa_scan_text_is_total(case):
    seed, raw = case
    _scan_mutated(raw, FORMAT_OF[seed.suffix])
    isa_amdgcn.memory_op_counts(raw.decode("utf-8", errors="replace"))


@FUZZ
@given(case=mutated([p for p in ISA_SEEDS if p.suffix != ".amdgcn"]))
def test_fuzz_ptx_and_sass_readers_are_total(case):
    seed, raw = case
    text = raw.decode("utf-8", errors="replace")
    isa_ptx.scan_ptx(text)
    isa_ptx.scan_sass(text, text)
    isa_ptx.parse_resource_usage(text)


ISA_METADATA = sorted(p for p in ISA_DIR.rglob("*.json"))


def _metadata_values():
    """Triton <name>.json text: fields of random values, or a real one mutated."""
    fields = st.dictionaries(st.sampled_from(["shared", "num_warps", "name", "target", "num_stages",
                                              "waves_per_eu", "hash"]), JSON, max_size=5)
    return fields.map(lambda d: json.dumps({"shared": 0, **d}).encode()) \
        | mutated(ISA_METADATA).map(lambda case: case[1]) \
        | st.sampled_from([b"[" * 100000, b'{"shared": 1' + b"0" * 5000 + b"}"])


@FUZZ
@given(case=mutated(ISA_SEEDS), meta=st.none() | _metadata_values(),
       kernel=st.none() | st.sampled_from(["add", "kernel", "zz"]),
       arch=st.none() | st.sampled_from(["gfx942", "gfx90a", "gfx936", "gfx908", "sm_90"]))
def test_fuzz_isa_scan_path_is_total(case, meta, kernel, arch):
    seed, raw = case
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / seed.name
        listing.write_bytes(raw)
        if meta is not None:
            listing.with_suffix(".json").write_bytes(meta)
        targets = [listing, Path(tmp)] + ([listing.with_suffix(".json")] if meta else [])
        for target in targets:
            try:
                records = isa.scan_path(target, kernel, arch=arch)
            except InputError:
                continue
            assert records and all(r["source"] == str(listing) for r in records)


def test_scan_amdgcn_script_on_seed(tmp_path, capsys):
    out = tmp_path / "scan.json"
    rc, err = run_script("scan_amdgcn", [str(ISA_DIR / "hygon"), "--json-out", str(out),
                                         "--quiet"], capsys)
    assert rc == 0, err
    assert json.loads(out.read_text())["summary"]["kernels"] == 3


@FUZZ
@given(case=mutated(ISA_SEEDS), suffix=st.sampled_from([".amdgcn", ".s", ".ptx", ".sass"]),
       as_tree=st.booleans(), meta=st.none() | _metadata_values())
def test_fuzz_scan_amdgcn_script(capsys, case, suffix, as_tree, meta):
    _, raw = case
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / f"k{suffix}"
        listing.write_bytes(raw)
        if meta is not None:
            listing.with_suffix(".json").write_bytes(meta)
        out = Path(tmp) / "out" / "scan.json"
        rc, err = run_script("scan_amdgcn", [tmp if as_tree else str(listing), "--json-out",
                                             str(out)], capsys)
        assert_ok_or_one_line(rc, err)
        if rc == 0:
            assert json.loads(out.read_text())["summary"]["kernels"] >= 1


# --------------------------------------------------------------------------- 2. profiles

PROFILE_SEEDS = sorted(p for p in PROFILES.iterdir() if p.suffix in (".csv", ".txt", ".log"))
TRACE_SEED = RECORDED / "dynamic_shapes" / "profile" / "profile.trace.json.gz"
# (format, dispatches, kernel rows, API rows, PMC records, trace kernels) of each real profile
PROFILE_EXPECTED = {
    "hipprof_api_stats_hiptrace_dcu_rocfft_1.csv": ("stats_csv", None, None, 24, None, None),
    "hipprof_kernel_stats_dcu_rocfft_1.csv": ("stats_csv", None, 9, None, None, None),
    "hipprof_kernel_stats_dcu_rocfft_2.csv": ("stats_csv", None, 10, None, None, None),
    "hipprof_kernel_stats_gfx936_1.csv": ("stats_csv", None, 24, None, None, None),
    "hipprof_pmc_text_gfx936_1.txt": ("hipprof_pmc", None, None, None, 3, None),
    "hipprof_stdout_stats_bw1000_gfx936_1.log": ("hipprof_console", None, 1, 21, None, None),
    "rocprof_v1_results_nbody_1.csv": ("dispatch_csv", 10, None, None, None, None),
    "rocprof_v1_results_stats_nbody_1.csv": ("stats_csv", None, 1, None, None, None),
    "rocprofv3_kernel_trace_docs_1.csv": ("dispatch_csv", 8, None, None, None, None),
    "h200_eager_stack.trace.json.gz": ("chrome_trace", None, None, None, None, 23),
    "profile.trace.json.gz": ("chrome_trace", None, None, None, None, 28),
}


def _counts(parsed: pf.Parsed) -> tuple:
    def n(x):
        return None if x is None else len(x)

    return (parsed.format, n(parsed.dispatches), n(parsed.kernel_stats), n(parsed.api_stats),
            n(parsed.pmc), None if parsed.trace is None else len(parsed.trace.kernels))


@pytest.mark.parametrize("path", PROFILE_SEEDS + [PROFILES / "h200_eager_stack.trace.json.gz",
                                                  TRACE_SEED], ids=lambda p: p.name)
def test_profile_seed_parses_as_before(path):
    parsed = pf.read_profile(path)
    assert _counts(parsed) == PROFILE_EXPECTED[path.name]
    assert parsed.problems == []


def _rank(parsed: pf.Parsed) -> None:
    """Everything profile_kernels does with a parsed profile, short of writing it."""
    if parsed.pmc is not None:
        pr.join_pmc([{"name": r.kernel} for r in parsed.pmc], parsed.pmc)
        return
    rows, summary, _ = pr.rank_profile(parsed)
    ranked, summary, ranking = pr.finish(rows, summary, 5)
    assert len(ranking) == summary["kernels"] == len(rows)
    for r in ranking:
        pr.find_kernel({"ranking": ranking}, r["name"])


@FUZZ
@given(case=mutated(PROFILE_SEEDS + [TRACE_SEED], PROFILE_MUTATIONS), gz=st.booleans())
def test_fuzz_read_profile_is_total(case, gz):
    _, raw = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.csv"
        path.write_bytes(gzip.compress(raw) if gz else raw)
        try:
            parsed = pf.read_profile(path)
        except InputError as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc), exc
            return
        _rank(parsed)


KERNEL_SEEDS = [p for p in PROFILE_SEEDS if PROFILE_EXPECTED[p.name][0] != "hipprof_pmc"]
FLAG_OF = {"stats_csv": "--hipprof", "hipprof_console": "--hipprof", "dispatch_csv": "--rocprof",
           "chrome_trace": "--trace"}


@FUZZ
@given(case=mutated(KERNEL_SEEDS + [TRACE_SEED], PROFILE_MUTATIONS),
       pmc=st.none() | mutated([PROFILES / "hipprof_pmc_text_gfx936_1.txt"]),
       extra=st.sampled_from([[], ["--top", "0"], ["--top", "1"], ["--include-compile"],
                              ["--triton-name", "fft"], ["--within", "Profiler"]]))
def test_fuzz_profile_kernels_script(capsys, case, pmc, extra):
    seed, raw = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / seed.name.replace(".gz", "")
        path.write_bytes(raw)
        argv = [FLAG_OF[PROFILE_EXPECTED[seed.name][0]], str(path), *extra]
        if pmc is not None:
            (Path(tmp) / "pmc.txt").write_bytes(pmc[1])
            argv += ["--pmc", str(Path(tmp) / "pmc.txt")]
        out = Path(tmp) / "p.json"
        rc, err = run_script("profile_kernels", argv + ["--json-out", str(out), "--markdown-out",
                                                         str(Path(tmp) / "p.md")], capsys)
        assert_ok_or_one_line(rc, err)
        if rc == 0:
            doc = json.loads(out.read_text())
            assert doc["schema"] == "kernel_profile/1"
            assert len(doc["ranking"]) == doc["summary"]["kernels"]


def test_profile_kernels_script_on_seed(tmp_path, capsys):
    out = tmp_path / "p.json"
    rc, err = run_script("profile_kernels", ["--hipprof", str(PROFILES / "hipprof_kernel_stats_"
                                                                        "gfx936_1.csv"),
                                             "--json-out", str(out)], capsys)
    assert rc == 0, err
    assert json.loads(out.read_text())["summary"]["kernels"] == 24


# --------------------------------------------------------------------------- 3. compare_profiles

PROFILE_DOCS = sorted(RECORDED.glob("*/profile/profile.json"))


@lru_cache(maxsize=None)
def _profile_doc(path: Path) -> dict:
    return json.loads(path.read_text())


def test_compare_profiles_on_seeds(tmp_path, capsys):
    before, after = PROFILE_DOCS[0], PROFILE_DOCS[1]
    out = tmp_path / "c.json"
    rc, err = run_script("compare_profiles", [str(before), str(after), "--json-out", str(out)],
                         capsys)
    assert rc == 0, err
    doc = json.loads(out.read_text())
    names = {k["name"] for p in (before, after) for k in _profile_doc(p)["ranking"]}
    assert len(doc["kernels"]) == len(names)


@st.composite
def mangled_profile(draw) -> dict:
    """A recorded kernel_profile/1 document, schema tag kept, with random values put in place of
    some of its fields (anywhere in the tree) and of some fields of its kernels."""
    doc = copy.deepcopy(_profile_doc(draw(st.sampled_from(PROFILE_DOCS))))
    nodes = [p for p, _ in json_paths(doc) if p[0] not in ("schema",)]
    hot = [p for p in nodes if p[0] in ("summary", "kernels", "ranking", "device") and len(p) <= 3]
    for where in draw(st.lists(st.sampled_from(hot), max_size=4)) \
            + draw(st.lists(st.sampled_from(nodes), max_size=2)):
        put(doc, where, draw(JSON))
    return doc


@FUZZ
@given(before=mangled_profile(), after=mangled_profile(),
       steps=st.sampled_from([[], ["--steps-before", "3", "--steps-after", "2"],
                              ["--steps-before", "0"], ["--top", "0"], ["--top", "-1"]]))
def test_fuzz_compare_profiles_script(capsys, before, after, steps):
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, doc in (("before.json", before), ("after.json", after)):
            path = Path(tmp) / name
            path.write_text(json.dumps(doc))
            paths.append(str(path))
        out = Path(tmp) / "c.json"
        rc, err = run_script("compare_profiles", paths + steps + [
            "--json-out", str(out), "--markdown-out", str(Path(tmp) / "c.md")], capsys)
        assert_ok_or_one_line(rc, err)
        if rc == 0:
            assert json.loads(out.read_text())["schema"] == "profile_comparison/1"


@FUZZ
@given(fields=st.dictionaries(st.sampled_from(["summary", "kernels", "ranking", "device"]),
                              JSON | st.lists(st.dictionaries(
                                  st.sampled_from(["name", "origin", "calls", "total_us"]),
                                  SCALARS, max_size=4), max_size=3), max_size=3))
def test_fuzz_profile_compare_is_total(fields):
    doc = make_artifact("kernel_profile/1", "t", {"summary": {}, "kernels": [], "ranking": [],
                                                  "problems": [], "source": {}})
    doc.update(fields)
    try:
        check_fields(doc, "kernel_profile", "p.json")
        payload = profile_compare.compare(doc, doc, 2, 3)
    except InputError:
        return
    profile_compare.markdown(payload, 5)


# --------------------------------------------------------------------------- 4. defects found

ADD_FP32 = ISA_DIR / "gfx942-nopr" / "add_fp32.amdgcn"
H5000 = "9" * 5000  # past int()'s 4300-digit limit


def _add_fp32(pattern: str, replacement: str) -> str:
    text, n = re.subn(pattern, replacement, ADD_FP32.read_text())
    assert n == 1, pattern
    return text


def test_wrong_typed_triton_metadata_counts_as_absent(tmp_path, capsys):
    # was TypeError ('>' between list and int; unhashable list) or OverflowError from occupancy
    listing = tmp_path / "add_fp32.amdgcn"
    listing.write_text(ADD_FP32.read_text())
    listing.with_suffix(".json").write_text(json.dumps(
        {"shared": [], "num_warps": -10**400, "name": [1]}))
    [k] = isa.scan_path(listing, "add_fp32")
    assert k["name"] == "add_fp32"
    assert (k["resources"]["lds_source"], k["resources"]["num_warps"]) == ("asm_static", 4)
    assert k["occupancy"]["waves_per_simd"] == 8
    rc, err = run_script("scan_amdgcn", [str(tmp_path), "--quiet"], capsys)
    assert rc == 0, err


@pytest.mark.parametrize("pattern,replacement", [
    (r"\.set \.Ladd_fp32\.num_vgpr, 10", f".set .Ladd_fp32.num_vgpr, {H5000}"),
    (r"; NumVgprs: 10", f"; NumVgprs: {H5000}"),
    (r"\.vgpr_count:     10", f".vgpr_count:     {H5000}"),
])
def test_register_count_past_int_digit_limit_gives_way_to_another_spelling(pattern, replacement):
    # was ValueError: Exceeds the limit (4300 digits) for integer string conversion
    [k] = isa.scan_text(_add_fp32(pattern, replacement))["kernels"]
    assert (k["resources"]["vgpr"], k["resources"]["vgpr_total"]) == (10, 10)
    assert k["occupancy"]["waves_per_simd"] == 8


def test_workgroup_size_past_a_floats_range_leaves_warps_unknown():
    # was OverflowError: integer division result too large for a float (occupancy)
    text = _add_fp32(r"\.max_flat_workgroup_size: 256", ".max_flat_workgroup_size: -1" + "0" * 400)
    [k] = isa.scan_text(text)["kernels"]
    assert k["resources"]["max_flat_workgroup_size"] is None
    assert k["resources"]["num_warps"] is None
    assert k["occupancy"]["waves_per_simd"] == 8


def test_memory_width_past_int_digit_limit_is_an_unknown_width():
    # was ValueError (int() of the b<digits> width)
    text = _add_fp32(r"global_store_dwordx4", f"global_store_b{H5000}")
    [k] = isa.scan_text(text)["kernels"]
    assert k["families"]["global_store"] == 1
    assert k["mix"]["store_bytes_per_lane"] == 0


def test_ptx_thread_count_and_vector_width_past_int_digit_limit():
    # was ValueError on .reqntid and on ld.global.v<digits>
    text = (ISA_DIR / "sm90" / "add_fp32.ptx").read_text()
    text = re.sub(r"\.reqntid \d+", f".reqntid {H5000}", text)
    text = text.replace("ld.global.v4.b32", f"ld.global.v{H5000}.b32", 1)
    [k] = isa.scan_text(text)["kernels"]
    assert k["resources"]["threads_per_block"] is None and k["resources"]["num_warps"] is None
    assert k["families"]["ld_global"] == 4
    assert k["mix"]["load_bytes_per_lane"] == 16 * 3 + 4


def test_sass_resource_and_width_past_int_digit_limit():
    # was ValueError on REG:<digits> and on LDG.E.F<digits>
    text = (ISA_DIR / "sm90" / "index_add.sass").read_text()
    base = isa.scan_text(text)["kernels"][0]
    text = re.sub(r"REG:\d+", f"REG:{H5000}", text).replace("LDG.E.64", f"LDG.E.F{H5000}", 1)
    [k] = isa.scan_text(text)["kernels"]
    assert k["resources"]["registers"] is None
    assert k["families"]["LDG"] == base["families"]["LDG"]
    assert k["mix"]["load_bytes_per_lane"] == base["mix"]["load_bytes_per_lane"] - 8 + 4


STATS_HEADER = '"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n'


@pytest.mark.parametrize("row", ['"k1",1e999,100,100,50.0', '"k1",inf,100,100,50.0',
                                 '"k1",1,nan,100,50.0', '"k1",1,100,1e999,50.0'])
def test_non_finite_number_in_a_stats_row_skips_the_row(row):
    # calls "1e999" was OverflowError (int of infinity); a NaN time reached the artifact as "nan"
    parsed = pf.parse_stats_csv(STATS_HEADER + row + '\n"k2",2,100,50,50.0\n')
    assert [r.name for r in parsed.kernel_stats] == ["k2"]
    assert len(parsed.problems) == 1 and "not a finite number" in parsed.problems[0]


def test_non_finite_dispatch_time_skips_the_row():
    parsed = pf.parse_dispatch_csv("Kernel_Name,Start_Timestamp,End_Timestamp\n"
                                   "k1,10,inf\nk2,10,20\n")
    assert [d.name for d in parsed.dispatches] == ["k2"]
    assert "not a finite number" in parsed.problems[0]


def test_pmc_value_that_is_no_number_is_kept_as_text():
    # "1.2.3" matches the value pattern; float() of it was ValueError
    parsed = pf.parse_hipprof_pmc('kernel-name:"k"\n grid size' + " " * 33 + "1.2.3\n"
                                  " work group size" + " " * 27 + "256\n")
    assert parsed.pmc[0].fields == {"grid size": "1.2.3", "work group size": 256.0}


def test_dispatch_csv_header_opening_an_endless_quote_is_one_line_exit_2(tmp_path, capsys):
    # was _csv.Error: field larger than field limit (131072)
    trace = tmp_path / "kernel_trace.csv"
    trace.write_text('Kernel_Name,Start_Timestamp,End_Timestamp,"\n'
                     + "".join(f"k{i},{i * 10},{i * 10 + 5}\n" for i in range(20000)))
    with pytest.raises(InputError, match="not a CSV file .field larger than field limit"):
        pf.read_profile(trace)
    rc, err = run_script("profile_kernels", ["--rocprof", str(trace), "--json-out",
                                             str(tmp_path / "p.json")], capsys)
    assert_one_line_exit_2(rc, err, str(trace), "field larger than field limit")


@pytest.mark.parametrize("where", ["ranking", "summary"])
def test_profile_number_past_a_floats_range_is_one_line_exit_2(tmp_path, capsys, where):
    # was OverflowError: integer division result too large for a float
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_profile_doc(PROFILE_DOCS[0])))
    doc = copy.deepcopy(_profile_doc(PROFILE_DOCS[0]))
    if where == "ranking":
        doc["ranking"][0]["total_us"] = 10**400
        needle = f"kernel {doc['ranking'][0]['name'][:60]!r} total_us is a number too large"
    else:
        doc["summary"]["kernel_time_us"] = 10**400
        needle = "summary.kernel_time_us is a number too large"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    rc, err = run_script("compare_profiles", [str(good), str(bad), "--json-out",
                                              str(tmp_path / "c.json")], capsys)
    assert_one_line_exit_2(rc, err, f"{bad}: {needle}", "401 digits")


def test_mangled_name_length_past_int_digit_limit(tmp_path, capsys):
    # the PMC join's name matching was ValueError on _Z<5000 digits>...
    assert pr.mangled_base("_Z" + H5000 + "abc") == "abc"
    assert pr.mangled_base("_ZN2at6nativeE") == "native"
    pmc = tmp_path / "pmc.txt"
    pmc.write_text(f'kernel-name:"_Z{H5000}k"\n grid size' + " " * 33 + "64\n")
    out = tmp_path / "p.json"
    rc, err = run_script("profile_kernels", ["--hipprof", str(PROFILES / "hipprof_kernel_stats_"
                                                                        "gfx936_1.csv"),
                                             "--pmc", str(pmc), "--json-out", str(out)], capsys)
    assert rc == 0, err
    assert json.loads(out.read_text())["summary"]["pmc_kernels_joined"] == 0


@pytest.mark.skipif(isa_ptx.nvidia_tool("cuobjdump") is None, reason="no cuobjdump")
@pytest.mark.parametrize("content", [b"", b"hello\x00world",
                                     (ISA_DIR / "sm90" / "add_fp32.cubin").read_bytes()[:3000]],
                         ids=["empty", "junk", "truncated"])
def test_damaged_cubin_is_one_line_exit_2(tmp_path, capsys, content):
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(content)
    rc, err = run_script("scan_amdgcn", [str(cubin), "--quiet"], capsys)
    assert_one_line_exit_2(rc, err, str(cubin), "cuobjdump could not read it")


@pytest.mark.parametrize("script,argv", [
    ("scan_amdgcn", ["{d}/k.amdgcn"]),
    ("scan_amdgcn", ["{d}/k.ptx"]),
    ("profile_kernels", ["--hipprof", "{d}/k.csv", "--json-out", "{d}/p.json"]),
    ("profile_kernels", ["--rocprof", "{d}/k.csv", "--json-out", "{d}/p.json"]),
    ("profile_kernels", ["--trace", "{d}/k.json", "--json-out", "{d}/p.json"]),
    ("compare_profiles", ["{d}/k.json", "{d}/k.json", "--json-out", "{d}/c.json"]),
])
def test_empty_input_is_one_line_exit_2(tmp_path, capsys, script, argv):
    for name in ("k.amdgcn", "k.ptx", "k.csv", "k.json"):
        (tmp_path / name).write_bytes(b"")
    rc, err = run_script(script, [a.format(d=tmp_path) for a in argv], capsys)
    assert_one_line_exit_2(rc, err, str(tmp_path / "k."))


@pytest.mark.parametrize("meta", [b"[" * 100000, b'{"shared": 1' + b"0" * 5000 + b"}", b"\xff{"],
                         ids=["deep", "long_number", "not_utf8"])
def test_unreadable_triton_metadata_is_ignored_next_to_a_listing(tmp_path, capsys, meta):
    # was RecursionError / ValueError (int() past 4300 digits) out of json.loads
    listing = tmp_path / "add_fp32.amdgcn"
    listing.write_text(ADD_FP32.read_text())
    listing.with_suffix(".json").write_bytes(meta)
    [k] = isa.scan_path(listing)
    assert "triton_metadata" not in k and k["resources"]["lds_source"] == "asm_static"
    rc, err = run_script("scan_amdgcn", [str(listing.with_suffix(".json"))], capsys)
    assert_one_line_exit_2(rc, err, "not a Triton kernel metadata .json")


# --------------------------------------------------------------------------- 5. trace fields

TK = {"ph": "X", "cat": "kernel", "name": "triton_poi_k0", "ts": 10.0, "dur": 2.0, "pid": 0,
      "tid": 7, "args": {"correlation": 5, "External id": 3, "grid": [1, 1, 1]}}
TR = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 9.0, "dur": 0.5,
      "pid": 1, "tid": 1, "args": {"correlation": 5, "External id": 3}}
TOP = {"ph": "X", "cat": "cpu_op", "name": "triton_poi_k0", "ts": 8.0, "dur": 3.0, "pid": 1,
       "tid": 1, "args": {"External id": 3, "kernel_backend": "triton", "kernel_file": "/k.py"}}
ARG_KEYS = ["correlation", "External id", "grid", "block", "registers per thread", "device",
            "stream", "kernel_backend", "kernel_file", "kernel_kwargs", "num_warps", "num_stages",
            "kernel_hash", "kernel_name", "kernel_flop", "kernel_num_gb"]


def _trace_doc():
    args = st.dictionaries(st.sampled_from(ARG_KEYS), JSON, max_size=4)
    event = st.builds(lambda base, over, a: {**base, **over, "args": {**base["args"], **a}},
                      st.sampled_from([TK, TR, TOP]),
                      st.dictionaries(st.sampled_from(["name", "ts", "dur", "pid", "tid"]), JSON,
                                      max_size=2), args)
    return st.builds(lambda evs, props: {"traceEvents": [TK, TR, TOP] + evs,
                                         "deviceProperties": props},
                     st.lists(event, max_size=5), JSON | st.lists(JSON, max_size=2))


@FUZZ
@given(doc=_trace_doc())
def test_fuzz_profile_kernels_trace_fields(capsys, doc):
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "t.json"
        trace.write_text(json.dumps(doc))
        out = Path(tmp) / "p.json"
        rc, err = run_script("profile_kernels", ["--trace", str(trace), "--json-out", str(out),
                                                 "--markdown-out", str(Path(tmp) / "p.md")],
                             capsys)
        assert_ok_or_one_line(rc, err)
        if rc == 0:
            kernels = json.loads(out.read_text())["kernels"]
            assert "triton_poi_k0" in [k["name"] for k in kernels]
