"""Offline compiles kept between runs (tko.compile.compile_cache): read back for the same inputs, compiled
again when anything the compile reads changes; probe_compile.py says where it stands as it goes."""

from __future__ import annotations

import json
import os
import re

import pytest

from conftest import ROOT
from tko.compile import compile_cache, offline_compile

CHAIN = ROOT / "examples" / "recorded_h200" / "pointwise_chain"
KERNEL = CHAIN / "inductor_cache" / "gh" / "cghcy2z3ricfgzjv6jvzkrguswgumoejzjo3b6orsfglwuyefgxy.py"
HAND_WRITTEN = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
                "def add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
                "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)\n")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TKO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton_cache"))
    return tmp_path / "cache"


def _compile(path, **kw):
    return offline_compile.compile_kernel_file(path, "gfx942", signature="x_ptr=*fp32,y_ptr=*fp32,n=i32",
                                               config={"BLOCK": 256}, **kw)


def test_a_compile_is_read_back_and_made_again_when_an_input_changes(cache, tmp_path, monkeypatch):
    kernel = tmp_path / "add.py"
    kernel.write_text(HAND_WRITTEN)
    first = _compile(kernel)
    assert "global_load" in first.asm["amdgcn"] and len(list(cache.rglob("*.json"))) == 1

    calls = []
    real = offline_compile.compile_plan
    monkeypatch.setattr(offline_compile, "compile_plan", lambda *a, **k: calls.append(a) or real(*a, **k))
    again = _compile(kernel)
    assert calls == [] and again == first  # read back, not compiled

    monkeypatch.setenv("AMDGCN_USE_BUFFER_OPS", "0")  # a setting Triton reads
    _compile(kernel)
    monkeypatch.delenv("AMDGCN_USE_BUFFER_OPS")
    _compile(kernel, pointer_range=32)  # another compile option
    kernel.write_text(HAND_WRITTEN.replace("+ 1.0", "+ 2.0"))  # another source
    _compile(kernel)
    assert len(calls) == 3 and len(list(cache.rglob("*.json"))) == 4

    monkeypatch.setenv("TKO_CACHE_DIR", "off")
    _compile(kernel)
    assert len(calls) == 4


def test_a_helper_module_beside_the_kernel_is_part_of_the_key(tmp_path):
    (tmp_path / "helpers.py").write_text("import triton\n\n@triton.jit\ndef twice(x):\n    return x * 2\n")
    text = "from helpers import twice\n" + HAND_WRITTEN
    key = compile_cache.key(tmp_path / "k.py", text, "gfx942", {"kernel": None})
    assert key == compile_cache.key(tmp_path / "k.py", text, "gfx942", {"kernel": None})
    (tmp_path / "helpers.py").write_text("import triton\n\n@triton.jit\ndef twice(x):\n    return x * 3\n")
    assert key != compile_cache.key(tmp_path / "k.py", text, "gfx942", {"kernel": None})


def test_probe_compile_reports_each_compile_as_it_finishes_and_reuses_them(run_script, cache, tmp_path):
    args = [KERNEL, "--arch", "gfx942", "--variants", "baseline,pointer_range",
            "--launch-event", CHAIN / "autotune_kernels" / "autotune.log"]
    env = {"TKO_CACHE_DIR": str(cache)}
    cold = run_script("probe_compile.py", *args, "--json-out", tmp_path / "cold.json", cwd=tmp_path, env=env)
    assert cold.returncode == 0, cold.stderr
    lines = [ln for ln in cold.stdout.splitlines() if re.search(r"\[\d/2\]", ln)]
    assert [re.search(r"\[(\d)/2\] (\S+)", ln).groups() for ln in lines] in (
        [("1", "baseline"), ("2", "pointer_range")], [("1", "pointer_range"), ("2", "baseline")])
    assert "compiling 2 variant(s) in 1 process(es)" in cold.stdout

    warm = run_script("probe_compile.py", *args, "--json-out", tmp_path / "warm.json", cwd=tmp_path, env=env)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.count("(stored compile)") == 2 and "compiling" not in warm.stdout
    summaries = [{(r["variant"], r["arch"]): r["summary"] for r in json.loads((tmp_path / f"{name}.json").read_text())
                  ["results"]} for name in ("cold", "warm")]
    assert summaries[0] == summaries[1]
    assert summaries[0][("pointer_range", "gfx942")]["verdict"] == "buffer"  # the recorded kernel's finding
    assert summaries[0][("baseline", "gfx942")]["verdict"] == "global"
    assert os.listdir(cache)
