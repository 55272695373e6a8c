"""The shared core: artifacts, atomic writes, error convention, versions, arch table."""

from __future__ import annotations

import json
import multiprocessing as mp
import os

import pytest

from tko.base import archs, artifact, atomic, errors, versions


def test_artifact_round_trip_has_header_and_versions(tmp_path):
    out = tmp_path / "sub" / "a.json"
    doc = artifact.write_artifact(out, "isa_scan/1", "scan_amdgcn.py", {"kernels": [], "x": (1, 2)})
    loaded = artifact.read_artifact(out, "isa_scan")
    assert loaded == json.loads(out.read_text())
    assert loaded["schema"] == "isa_scan/1" and loaded["tool"] == "scan_amdgcn.py"
    assert loaded["x"] == [1, 2]
    assert set(loaded["versions"]) >= {"python", "torch", "triton", "tko"}
    assert doc["created"].endswith("+00:00")


def test_non_finite_floats_stay_valid_json(tmp_path):
    out = tmp_path / "a.json"
    artifact.write_artifact(out, "t/1", "t", {"ms": [float("inf"), float("nan"), 1.5]})
    assert json.loads(out.read_text())["ms"] == ["inf", "nan", 1.5]


@pytest.mark.parametrize("expect,ok", [("isa_scan", True), ("isa_scan/1", True),
                                       ("isa_scan/2", False), ("triton_meta", False),
                                       (["triton_meta", "isa_scan/1"], True)])
def test_read_artifact_checks_schema(tmp_path, expect, ok):
    out = tmp_path / "a.json"
    artifact.write_artifact(out, "isa_scan/1", "t", {})
    if ok:
        assert artifact.read_artifact(out, expect)["schema"] == "isa_scan/1"
    else:
        with pytest.raises(errors.InputError, match="is a isa_scan/1 artifact, expected"):
            artifact.read_artifact(out, expect)


@pytest.mark.parametrize("content,msg", [(None, "no such file"), ("{not json", "not valid JSON"),
                                         ('{"a": 1}', "no 'schema' field"), ("[1, 2]", "no 'schema'")])
def test_read_artifact_bad_input_is_one_line_input_error(tmp_path, content, msg):
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(errors.InputError, match=msg) as info:
        artifact.read_artifact(path, "isa_scan")
    assert "\n" not in str(info.value)


def test_atomic_write_keeps_old_file_when_writing_fails(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    atomic.write_text(target, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(errors.OutputError, match="out.json: disk full"):
        atomic.write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temp file left behind


def _append_many(path, worker, count):
    for i in range(count):
        atomic.append_line(path, json.dumps({"worker": worker, "i": i, "pad": "x" * 300}))


def test_append_line_from_many_processes_never_tears_a_record(tmp_path):
    path = tmp_path / "log.jsonl"
    procs = [mp.Process(target=_append_many, args=(str(path), w, 200)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    lines = path.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # raises if a line was torn
    assert len(records) == 800
    assert {(r["worker"], r["i"]) for r in records} == {(w, i) for w in range(4) for i in range(200)}


def test_run_main_maps_errors_to_exit_codes_and_one_line(capsys):
    def bad_input(argv):
        raise errors.InputError("x.json: no such file")

    def failure(argv):
        raise errors.ToolFailure("kernel crashed")

    def unexpected(argv):
        raise KeyError("k")

    assert errors.run_main(bad_input, [], prog="t") == 2
    assert errors.run_main(failure, [], prog="t") == 1
    assert errors.run_main(unexpected, [], prog="t") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["t: error: x.json: no such file", "t: error: kernel crashed",
                   "t: error: unexpected KeyError: 'k' (set TKO_DEBUG=1 for a traceback)"]


def test_an_error_naming_a_value_with_line_breaks_stays_one_line(capsys):
    # a device name read from a user's file, with line breaks and markdown in it
    def bad_input(argv):
        raise errors.InputError("trials ran on a\nb\r\n# heading\n| x |, not on H200")

    assert errors.run_main(bad_input, [], prog="t") == 2
    assert capsys.readouterr().err.splitlines() == ["t: error: trials ran on a b # heading | x |, not on H200"]


def test_argument_parser_usage_error_exits_2(capsys):
    p = errors.ArgumentParser(prog="t")
    p.add_argument("--n", type=int)
    with pytest.raises(SystemExit) as info:
        p.parse_args(["--n", "x"])
    assert info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("text,expected", [("3.5.1+das.opt1.dtk2604", (3, 5, 1)), ("2.11.0+cu130", (2, 11, 0)),
                                           ("3.6.0", (3, 6, 0)), ("", ()), (None, ()), ("3.9.0rc1", (3, 9, 0))])
def test_parse_version(text, expected):
    assert versions.parse_version(text) == expected


@pytest.mark.parametrize("raw,norm", [("gfx938:sramecc+:xnack-", "gfx938"), ("amdgcn-amd-amdhsa--gfx936", "gfx936"),
                                      ("90", "sm_90"), ("sm90a", "sm_90"), ("sm_80", "sm_80")])
def test_arch_normalize(raw, norm):
    assert archs.normalize(raw) == norm


def test_dcu_archs_map_to_named_proxy_and_say_so():
    for dcu in ("gfx936", "gfx938"):
        target, note = archs.compile_target(dcu)
        assert target == "gfx942" and dcu in note and "proxy" in note
    assert archs.compile_target("gfx942") == ("gfx942", None)
    assert archs.compile_target("sm_90") == ("sm_90", None)


def test_atomic_write_gives_the_umask_mode_not_0600(tmp_path):
    old = os.umask(0o022)
    try:
        target = atomic.write_text(tmp_path / "f.json", "{}")
    finally:
        os.umask(old)
    assert (target.stat().st_mode & 0o777) == 0o644


def test_module_version_reads_init_without_metadata(tmp_path, monkeypatch):
    pkg = tmp_path / "fakepkg_tko"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise SystemExit('must not be imported')\n__version__ = '3.1.0+das.opt1'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert versions.package_version("fakepkg_tko") is None
    assert versions.module_version("fakepkg_tko") == "3.1.0+das.opt1"
    assert versions.module_version("no_such_module_tko") is None


def test_torch_device_arch_reads_cuda_and_hip_properties():
    """Recent CUDA builds of torch put the product name in gcnArchName (seen on an H200 with torch
    2.11: 'NVIDIA H200'); the arch there is sm_<major><minor>. HIP builds name the arch in it."""
    from types import SimpleNamespace

    from tko.base.archs import torch_device_arch

    h200 = SimpleNamespace(gcnArchName="NVIDIA H200", major=9, minor=0)
    assert torch_device_arch(h200, hip=False) == ("sm_90", "sm_90")
    dcu = SimpleNamespace(gcnArchName="gfx938:sramecc+:xnack-", major=9, minor=3)
    assert torch_device_arch(dcu, hip=True) == ("gfx938", "gfx938:sramecc+:xnack-")
    assert torch_device_arch(SimpleNamespace(gcnArchName="", major=None, minor=None)) == (None, None)


def test_autotuner_user_do_bench_on_both_autotuner_layouts():
    from tko.base.versions import autotuner_user_do_bench

    def mine(fn, quantiles=None):
        return 1.0

    def testing_do_bench(fn, quantiles=None):
        return 1.0

    testing_do_bench.__module__ = "triton.testing"

    class New:  # triton >= 3.4: _do_bench, None when not given
        def __init__(self, fn):
            self._do_bench = fn

    class Old:  # triton 3.3: do_bench holds the given function or triton.testing.do_bench
        def __init__(self, fn):
            self.do_bench = fn

    assert autotuner_user_do_bench(New(mine)) is mine and autotuner_user_do_bench(New(None)) is None
    assert autotuner_user_do_bench(Old(mine)) is mine
    assert autotuner_user_do_bench(Old(testing_do_bench)) is None
    assert autotuner_user_do_bench(object()) is None
