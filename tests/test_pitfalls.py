"""Known DCU pitfalls as data (references/dcu_pitfalls.yaml): matching against stacks and kernels, the
investigation report naming them, validate_dcu.py running the checks it can."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tko.env import dcu_validate, pitfalls
from tko.base.contracts import contract_problems
from tko.base.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
FIX = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIX / "triton_stacks"))
import make_fake_install  # noqa: E402

ENTRIES = pitfalls.load()
BY_ID = {p["id"]: p for p in ENTRIES}
DAS = {"name": "triton-das", "triton_version": "3.6.0"}
FT36 = {"name": "flagtree-hcu", "triton_version": "3.6.0"}
FT30 = {"name": "flagtree-hcu", "triton_version": "3.1.0"}
SPIN = (FIX / "triton_stacks" / "flagtree_1030_spin_barrier.py").read_text()


def _body(name: str) -> str:
    text = (FIX / "dcu" / name).read_text(encoding="utf-8")
    return "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("#"))


def found(stack, arch, kernel=None):
    return {e["id"]: e for e in pitfalls.match(stack, arch, kernel, ENTRIES)}


def test_every_entry_names_its_source_and_stacks_that_exist():
    from tko.read.triton_stack import STACK_NAMES

    assert len(ENTRIES) >= 4
    for p in ENTRIES:
        assert p["source"]["what"] and (p["source"]["url"] is None or p["source"]["url"].startswith("https://"))
        assert set(p.get("stacks") or []) <= set(STACK_NAMES), p["id"]
        assert p.get("check"), p["id"]


def test_gfx938_store_drop_matches_only_its_launch_shape():
    kernel = {"num_warps": 4, "constexprs": {"BLOCK_T": 32, "BLOCK_H": 8}, "source": None}
    hit = found(DAS, "gfx938", kernel)["gfx938_triton36_two_gram_store_drop"]
    assert hit["status"] == "matches" and "num_warps=4" in hit["why"] and "BLOCK_T=32" in hit["why"]
    assert "gfx938_triton36_two_gram_store_drop" not in found(DAS, "gfx938", dict(kernel, num_warps=2))
    assert "gfx938_triton36_two_gram_store_drop" not in found(DAS, "gfx936", kernel)
    assert "gfx938_triton36_two_gram_store_drop" not in found(dict(DAS, triton_version="3.7.0"), "gfx938", kernel)
    assert "gfx938_triton36_two_gram_store_drop" not in found({"name": "upstream", "triton_version": "3.6.0"},
                                                               "gfx938", kernel)
    # no captured config: it may apply, and says so
    maybe = found(DAS, "gfx938", {})["gfx938_triton36_two_gram_store_drop"]
    assert maybe["status"] == "may apply" and "not recorded" in maybe["why"][-1]


def test_spin_barrier_deadlock_matches_the_issue_kernel_on_flagtree_36():
    hit = found(FT36, None, {"source": SPIN})["hcu_volatile_spin_barrier_deadlock"]
    assert hit["status"] == "matches" and hit["source"]["url"].endswith("/issues/1030")
    assert "hcu_volatile_spin_barrier_deadlock" not in found(FT30, None, {"source": SPIN})   # 3.1: outside >=3.6
    assert "hcu_volatile_spin_barrier_deadlock" not in found(FT36, None, {"source": "x = tl.load(p)"})


def test_clang_options_pitfall_needs_the_error_to_match():
    maybe = found(DAS, "gfx936")["hcu_clang_rejects_mllvm_options"]
    assert maybe["status"] == "may apply" and maybe["machine_check"]["kind"] == "clang_mllvm"
    error = _body("triton_error_hcu_gfx936_hsaco_1.txt")       # the public FlagTree#820 log
    hit = found(FT36, "gfx936", {"errors": [error]})["hcu_clang_rejects_mllvm_options"]
    assert hit["status"] == "matches" and any("compile error shows" in w for w in hit["why"])
    assert pitfalls.error_matches(error, ENTRIES) == ["hcu_clang_rejects_mllvm_options"]
    assert "hcu_clang_rejects_mllvm_options" not in found(FT30, "gfx936")      # a 3.0 backend has no such flags


@pytest.mark.parametrize("version, spec, inside", [
    ("3.6.0", ">=3.6,<3.7", True), ("3.6.1+das.opt1", ">=3.6,<3.7", True), ("3.7.0", ">=3.6,<3.7", False),
    ("3.5.1", ">=3.6", False), (None, ">=3.6", None), ("3.1.0", "", True),
])
def test_version_ranges(version, spec, inside):
    assert pitfalls.in_range(version, spec) is inside


@pytest.mark.parametrize("text, fragment", [
    ("pitfalls: 3\n", "no 'pitfalls' list"),
    ("pitfalls:\n  - {id: a, title: t}\n", "lacks source, symptom, workaround"),
    ("pitfalls:\n  - {id: a, title: t, source: s, symptom: s, workaround: w, triton: '3.6'}\n", "expected e.g."),
    (": : :\n", "cannot read"),
])
def test_a_broken_pitfalls_file_is_one_clear_error(tmp_path, text, fragment):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=fragment):
        pitfalls.load(path)


# --------------------------------------------------------------------------- the report names them

def _run(argv, cwd, env=None):
    res = subprocess.run([sys.executable, *map(str, argv)], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    return res


def test_report_names_the_pitfall_of_the_recorded_stack_and_kernel(tmp_path):
    """FlagTree 0.6.0+hcu3.6 (stand-in install of its real hcu options) and the kernel of
    FlagTree#1030: the report lists the spin-barrier deadlock as matching, with its workaround."""
    site = make_fake_install.build("flagtree-hcu-3.6", tmp_path / "site")
    _run([SCRIPTS / "check_env.py", "--out", "env.json", "--quiet"], tmp_path,
         env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    kernel = tmp_path / "spin.py"
    kernel.write_text(SPIN)
    _run([SCRIPTS / "inspect_triton_meta.py", kernel, "--kernel", "_kern", "--json-out", "meta.json"], tmp_path)
    _run([SCRIPTS / "make_investigation_report.py", "--kernel", "_kern", "--out", "report.md", "--meta", "meta.json",
          "--env", "env.json"], tmp_path)
    doc = json.loads((tmp_path / "report.json").read_text())
    assert contract_problems(doc) == []
    section = doc["sections"]["pitfalls"]
    assert (section["stack"], section["triton"], section["known"]) == ("flagtree-hcu", "3.6.0", len(ENTRIES))
    status = {e["id"]: e["status"] for e in section["found"]}
    assert status["hcu_volatile_spin_barrier_deadlock"] == "matches"
    assert "hcu_tle_ops_not_legalized" not in status           # the kernel has no TLE op
    md = (tmp_path / "report.md").read_text()
    block = md.split("## Known DCU pitfalls", 1)[1].split("\n## ", 1)[0]
    assert "(`hcu_volatile_spin_barrier_deadlock`, matches" in block
    assert "https://github.com/flagos-ai/FlagTree/issues/1030" in block


# --------------------------------------------------------------------------- validate_dcu checks them

def test_judges():
    text = _body("triton_error_hcu_gfx936_hsaco_1.txt")
    options = BY_ID["hcu_clang_rejects_mllvm_options"]["check"]["machine"]["options"]
    out = dcu_validate.judge_clang_mllvm(text, 1, options)
    assert out["status"] == "fail" and out["details"]["rejected"] == options
    assert dcu_validate.judge_clang_mllvm("", 0, options)["status"] == "pass"
    assert dcu_validate.judge_clang_mllvm("ld: no such file", 1, options)["status"] == "fail"
    upstream = {"name": "upstream", "triton_version": "3.9.0", "backend": "amd", "options": ["kpack"]}
    assert dcu_validate.judge_triton_stack(upstream, "dcu")["status"] == "fail"
    assert dcu_validate.judge_triton_stack(upstream, "cpu")["status"] == "pass"
    dtk = {"name": "dtk", "triton_version": "3.5.1+das", "backend": None, "options": None, "options_error": "e"}
    assert dcu_validate.judge_triton_stack(dtk, "dcu")["status"] == "fail"
    assert dcu_validate.judge_triton_stack({"name": None, "why": ["triton is not importable"]}, "cpu")["status"] == "fail"


@pytest.mark.parametrize("clang_says, status", [
    ("echo \"clang (LLVM option parsing): Unknown command line argument '-check-valu-data-forward-hazards=0'.\" >&2\n"
     "exit 1\n", "fail"),
    ("exit 0\n", "pass"),
])
def test_validate_dcu_runs_the_clang_check_of_the_stack(tmp_path, clang_says, status):
    site = make_fake_install.build("triton-das", tmp_path / "site")
    clang = tmp_path / "clang"
    clang.write_text("#!/bin/sh\n" + clang_says)
    clang.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(site), TRITON_HIP_CLANG_PATH=str(clang))
    res = subprocess.run([sys.executable, str(SCRIPTS / "validate_dcu.py"), "--out", "vd", "--only",
                          "triton_stack,pitfalls"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    doc = json.loads((tmp_path / "vd" / "dcu_validation.json").read_text())
    assert contract_problems(doc) == []
    assert doc["triton_stack"]["name"] == "triton-das"
    checks = {c["id"]: c for c in doc["checks"]}
    assert checks["triton_stack"]["status"] == "pass"
    assert checks["pitfalls"]["status"] == status, checks["pitfalls"]["reason"]
    assert res.returncode == (1 if status == "fail" else 0)
    if status == "fail":
        assert "hcu_clang_rejects_mllvm_options" in checks["pitfalls"]["reason"]
        assert "pitfalls/clang_mllvm.stderr.txt" in checks["pitfalls"]["raw_files"]
