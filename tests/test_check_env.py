"""check_env.py end to end on this machine, with fake DCU tools that print real outputs,
with torch/triton made unimportable, and the device-record builders."""

from __future__ import annotations

import json
import os
import stat
import sys
from importlib import metadata
from types import SimpleNamespace

import pytest

from tko.base import archs
from tko.env import buffer_ops, children, env_probe, smoke, toolchain
from tko.base.contracts import contract_problems

KB = 1024


def _body(fixtures_dir, name):
    text = (fixtures_dir / "dcu" / name).read_text(encoding="utf-8")
    return "".join(l for l in text.splitlines(keepends=True) if not l.startswith("#"))


def _load(path):
    doc = json.loads(path.read_text())
    assert contract_problems(doc) == []
    assert doc["schema"] == "triton_env/1" and doc["tool"] == "check_env.py"
    return doc


# --------------------------------------------------------------------------- CLI conventions

def test_help(run_script):
    res = run_script("check_env.py", "--help")
    assert res.returncode == 0
    for flag in ("--out", "--smoke", "--smoke-target", "--expect-arch"):
        assert flag in res.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--no-such-flag"], "unrecognized arguments"),
    (["--expect-arch", "banana"], "--expect-arch"),
    (["--smoke-target", "x86"], "--smoke-target"),
    (["--tool-timeout", "0"], "--tool-timeout"),
])
def test_bad_flags_exit_2_with_one_line(run_script, tmp_path, args, fragment):
    res = run_script("check_env.py", "--out", tmp_path / "e.json", *args, cwd=tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "e.json").exists()


# --------------------------------------------------------------------------- end to end, this machine

@pytest.mark.slow
def test_end_to_end_offline_smoke_and_env_flags(run_script, tmp_path):
    """The CPU machine run: no GPU, offline compiles for gfx942 and sm_90, env flags recorded."""
    env = {"TORCH_LOGS": "+inductor", "TRITON_CACHE_DIR": str(tmp_path / "tcache"),
           "AMDGCN_USE_BUFFER_OPS": "0", "HIP_VISIBLE_DEVICES": "0",
           "HSA_OVERRIDE_GFX_VERSION": "9.4.2", "TORCHINDUCTOR_MAX_AUTOTUNE": "1",
           "TKO_UNRELATED_VARIABLE": "x"}
    res = run_script("check_env.py", "--out", "env.json", "--smoke", "--smoke-target", "gfx942",
                     "--smoke-target", "sm_90", "--smoke-target", "gfx936", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    doc = _load(tmp_path / "env.json")

    # versions: what the interpreter has installed
    assert doc["torch"]["importable"] is True
    assert doc["torch"]["dist_version"] == metadata.version("torch")
    assert doc["torch"]["version"].split("+")[0] == metadata.version("torch").split("+")[0]
    assert doc["triton"]["importable"] is True
    assert doc["triton"]["version"] == metadata.version("triton")
    assert {"amd", "nvidia"} <= set(doc["triton"]["backends"])

    # env flags: exactly the relevant ones
    for key in ("TORCH_LOGS", "TRITON_CACHE_DIR", "AMDGCN_USE_BUFFER_OPS", "HIP_VISIBLE_DEVICES",
                "HSA_OVERRIDE_GFX_VERSION", "TORCHINDUCTOR_MAX_AUTOTUNE"):
        assert doc["env"][key] == env[key]
    assert "TKO_UNRELATED_VARIABLE" not in doc["env"]

    # buffer ops: recorded as set to 0, default read from the installed triton
    b = doc["buffer_ops"]
    assert b["set"] is True and b["env"] == "0" and b["effective"] is False
    knob = doc["triton"]["buffer_ops_knob"]
    if knob["default"] is not None:
        assert b["default_when_unset"] is knob["default"]
        assert b["default_source"].startswith("triton.knobs.")
    assert b["default_when_unset"] is buffer_ops.buffer_ops_by_version(metadata.version("triton"))

    # no GPU here
    if not doc["torch"].get("cuda_available"):
        assert doc["arch_check"]["status"] == "no_device"
        assert "nothing can be launched" in doc["smoke"]["local"]

    runs = {r["target_requested"]: r for r in doc["smoke"]["runs"]}
    amd = runs["gfx942"]["variants"]
    # each variant saw only its own setting, although the parent had the flag at 0
    assert amd["unset"]["buffer_ops_env"] is None
    assert amd["1"]["buffer_ops_env"] == "1"
    for variant in ("unset", "1"):
        r = amd[variant]
        assert r["ok"] is True, r
        assert r["asm_kind"] == "amdgcn" and r["target"]["arch"] == "gfx942"
        assert r["launched"] is False
    assert amd["1"]["buffer_ops_effective"] is True
    assert amd["1"]["memory_ops"].get("buffer_load", 0) >= 1
    assert amd["1"]["memory_ops"].get("buffer_store", 0) >= 1
    if amd["unset"]["buffer_ops_effective"]:
        assert amd["unset"]["memory_ops"].get("buffer_load", 0) >= 1
        assert "global_load" not in amd["unset"]["memory_ops"]
    else:  # triton <= 3.5: off by default, so the plain global path
        assert amd["unset"]["memory_ops"].get("global_load", 0) >= 1
    nv = runs["sm_90"]["variants"]
    for variant in ("unset", "1"):
        assert nv[variant]["ok"] is True and nv[variant]["asm_kind"] == "ptx"
        assert nv[variant]["memory_ops"]["ld.global"] >= 1
    assert "does not apply" in runs["sm_90"]["advice"]
    # gfx936 is not an upstream target: the failure is recorded with the compiler's own words
    hygon = runs["gfx936"]
    for variant in ("unset", "1"):
        r = hygon["variants"][variant]
        assert r["ok"] is False and r["stage"] == "compile"
        assert any("gfx936" in line for line in r["diagnostics"]), r
    assert "proxy gfx942" in hygon["proxy_note"]
    assert any("smoke gfx936" in w for w in doc["warnings"])

    # the human summary: short, and names the essentials
    out = res.stdout.splitlines()
    assert len(out) <= 24
    text = res.stdout
    assert "AMDGCN_USE_BUFFER_OPS" in text and "smoke gfx942" in text and "triton" in text

    # --show prints the same summary from the recorded file, probing nothing
    shown = run_script("check_env.py", "--show", tmp_path / "env.json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == out[1:]


def test_show_refuses_another_artifact(run_script, tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "isa_scan/1", "tool": "scan_amdgcn.py"}))
    res = run_script("check_env.py", "--show", other, cwd=tmp_path)
    assert res.returncode == 2
    assert "is a isa_scan/1 artifact, expected triton_env/1" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_without_torch_and_triton(run_script, tmp_path, fixtures_dir):
    """A machine with neither package: imports fail, are recorded, the run still succeeds."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\nsys.modules['torch'] = None\nsys.modules['triton'] = None\n")
    # and a DCU whose only tool on PATH is hy-smi (it prints no arch)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "smi.json").write_text(_body(fixtures_dir, "hysmi_json_k100ai_gfx928_1.txt"))
    _fake_tool(bin_dir, "hy-smi", f"cat '{tmp_path}/smi.json'\n")
    path = f"{bin_dir}{os.pathsep}/usr/bin:/bin"
    env = {"PYTHONPATH": str(site), "PATH": path}
    res = run_script("check_env.py", "--out", "env.json", "--smoke-target", "gfx942",
                     cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    doc = _load(tmp_path / "env.json")
    assert doc["torch"]["importable"] is False
    assert "torch" in doc["torch"]["error"] and "ModuleNotFoundError" in doc["torch"]["error"]
    assert doc["triton"]["importable"] is False
    assert doc["triton"]["package_dir"] is None
    assert [d["name"] for d in doc["devices"]] == ["K100_AI", "K100_AI"]
    assert {d["source"] for d in doc["devices"]} == {"hy-smi"}
    assert doc["devices"][0]["memory_bytes"] == 65520 * 1024 * 1024
    assert doc["platform_kind"] == "dcu"
    assert doc["arch_check"]["status"] == "unknown"
    assert any("torch is not importable" in w for w in doc["warnings"])
    assert any("triton is not importable" in w for w in doc["warnings"])
    # smoke: both variants fail at import, recorded
    (run,) = doc["smoke"]["runs"]
    for variant in ("unset", "1"):
        r = run["variants"][variant]
        assert r["ok"] is False and r["stage"] == "import" and "triton" in r["error"]
    # without triton, the default comes from the version rule or is unknown
    assert doc["buffer_ops"]["default_source"].startswith(("version rule", "unknown"))
    assert "NOT importable" in res.stdout


_CRASH_ON_TORCH_IMPORT = """
import os, signal, sys, time
class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            {action}
        return None
sys.meta_path.insert(0, _Finder())
"""


def test_torch_import_crash_is_recorded_and_triton_still_probed(run_script, tmp_path):
    """A torch whose import kills the interpreter (as a broken driver stack can) is one record."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        _CRASH_ON_TORCH_IMPORT.format(action="os.kill(os.getpid(), signal.SIGSEGV)"))
    res = run_script("check_env.py", "--out", "env.json", cwd=tmp_path,
                     env={"PYTHONPATH": str(site)})
    assert res.returncode == 0, res.stderr
    doc = _load(tmp_path / "env.json")
    assert doc["torch"]["importable"] is False
    assert "status -11" in doc["torch"]["error"]
    assert doc["triton"]["importable"] is True       # probed in its own subprocess
    assert any("torch is not importable" in w for w in doc["warnings"])


def test_hanging_import_times_out(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_CRASH_ON_TORCH_IMPORT.format(action="time.sleep(60)"))
    env = dict(os.environ, PYTHONPATH=str(site))
    child = children.run_child("torch", env=env, timeout=2)
    rec = env_probe.import_record(child, "torch")
    assert rec["importable"] is False and "timed out after 2 s" in rec["error"]


_FAKE_TRITON = {
    # A stand-in for a DCU Triton 3.3 whose LLVM lowering aborts the process when
    # AMDGCN_USE_BUFFER_OPS=1 (the failure the skill's spec reports on gfx938); it
    # exercises how check_env records a smoke subprocess that dies mid-compile.
    "__init__.py": (
        "import os\n__version__ = '3.3.0'\n"
        "def jit(fn):\n    return fn\n"
        "def cdiv(a, b):\n    return -(-a // b)\n"
        "def compile(src, target=None, options=None):\n"
        "    if os.environ.get('AMDGCN_USE_BUFFER_OPS') == '1':\n"
        "        os.write(2, b'LLVM ERROR: Cannot select: t42: i32 = buffer_load (simulated)\\n')\n"
        "        os.abort()\n"
        "    class Compiled:\n"
        "        asm = {'amdgcn': 'global_load_dword v1, v0, s[0:1]\\nglobal_store_dword v0, v1, s[2:3]\\n'}\n"
        "    return Compiled()\n"),
    "language.py": "constexpr = int\n",
    "backends/__init__.py": "backends = {'amd': None}\n",
    "backends/compiler.py": ("class GPUTarget:\n"
                             "    def __init__(self, backend, arch, warp_size):\n"
                             "        self.backend, self.arch, self.warp_size = backend, arch, warp_size\n"),
    "compiler/__init__.py": ("class ASTSource:\n"
                             "    def __init__(self, fn, signature, constexprs=None, attrs=None):\n"
                             "        self.fn = fn\n"),
}


def test_smoke_child_that_aborts_in_llvm(run_script, tmp_path):
    site = tmp_path / "site"
    for rel, text in _FAKE_TRITON.items():
        path = site / "triton" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    res = run_script("check_env.py", "--out", "env.json", "--smoke-target", "gfx942",
                     "--smoke-target", "gfx90a", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert res.returncode == 0, res.stderr
    doc = _load(tmp_path / "env.json")
    assert doc["triton"]["version"] == "3.3.0"
    b = doc["buffer_ops"]                         # no knobs, no matching source: the release rule
    assert b["default_when_unset"] is False and b["default_source"].startswith("version rule")
    runs = {r["target_requested"]: r for r in doc["smoke"]["runs"]}
    first, second = runs["gfx942"], runs["gfx90a"]
    assert first["variants"]["unset"]["ok"] is True
    assert first["variants"]["unset"]["memory_ops"] == {"global_load": 1, "global_store": 1}
    crashed = first["variants"]["1"]
    assert crashed["ok"] is False and crashed["stage"] == "subprocess"
    assert crashed["child_rc"] == -6                              # SIGABRT
    assert crashed["diagnostics"] == ["LLVM ERROR: Cannot select: t42: i32 = buffer_load (simulated)"]
    assert "keep AMDGCN_USE_BUFFER_OPS unset" in first["advice"]
    # the second target of that subprocess never ran, and says so
    assert second["variants"]["1"]["error"].startswith("not run")
    assert second["variants"]["unset"]["ok"] is True
    assert "not tried" in second["advice"]
    assert "LLVM ERROR: Cannot select" in res.stdout


# --------------------------------------------------------------------------- fake DCU tools

def _fake_tool(folder, name, script):
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_dcu_tools_from_path_with_hung_and_failing_tools(run_script, tmp_path, fixtures_dir):
    """Fake rocminfo / hy-smi / hipcc print real DCU outputs; hipprof hangs; nvidia-smi fails."""
    bin_dir = tmp_path / "bin"
    data = tmp_path / "data"
    bin_dir.mkdir()
    data.mkdir()
    for name in ("rocminfo_gfx936_bw_1.txt", "hysmi_bw1000_gfx936_1.txt",
                 "hysmi_json_k100ai_gfx928_1.txt", "hipcc_version_dtk2510_gfx936_1.txt"):
        (data / name).write_text(_body(fixtures_dir, name))
    _fake_tool(bin_dir, "rocminfo", f"cat '{data}/rocminfo_gfx936_bw_1.txt'\n")
    _fake_tool(bin_dir, "hy-smi",
               f"case \"$*\" in *--json*) cat '{data}/hysmi_json_k100ai_gfx928_1.txt';;\n"
               f"*) cat '{data}/hysmi_bw1000_gfx936_1.txt';; esac\n")
    _fake_tool(bin_dir, "hipcc", f"cat '{data}/hipcc_version_dtk2510_gfx936_1.txt'\n")
    _fake_tool(bin_dir, "hipprof", "sleep 30\n")
    _fake_tool(bin_dir, "nvidia-smi", "echo 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    path = f"{bin_dir}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin:/bin"
    res = run_script("check_env.py", "--out", "env.json", "--tool-timeout", "2",
                     cwd=tmp_path, env={"PATH": path})
    assert res.returncode == 0, res.stderr
    doc = _load(tmp_path / "env.json")
    tools = doc["tools"]
    assert tools["rocminfo"]["found"] and tools["rocminfo"]["on_path"]
    assert tools["rocminfo"]["version"] == "1.11"          # HSA runtime version from its output
    assert tools["hipcc"]["version"] == "25.10.0-0"
    assert tools["hipcc"]["hipcc"]["flavor"] == "dtk"
    assert tools["hipprof"]["found"] and tools["hipprof"]["timed_out"] is True
    assert "timed out" in tools["hipprof"]["error"]
    assert tools["nvidia-smi"]["found"] and tools["nvidia-smi"]["version_rc"] == 9
    assert tools["dccobjdump"]["found"] is False
    stack = doc["dcu_stack"]
    assert stack["kind"] == "dtk"
    assert stack["rocminfo"]["banner"] == "C-3000 hycu module is loaded"
    assert stack["hy_smi"]["table"]["style"] == "HCU" and len(stack["hy_smi"]["table"]["devices"]) == 8
    assert stack["hy_smi"]["json"]["complete"] is False
    assert stack["hy_smi"]["json"]["cards"][0]["series"] == "K100_AI"
    assert doc["nvidia_stack"]["nvidia_smi"]["gpus"] == []
    if not doc["torch"].get("cuda_available"):
        # torch (CPU build) sees nothing, so the device record comes from rocminfo
        (dev,) = doc["devices"]
        assert dev["source"] == "rocminfo" and dev["arch"] == "gfx936" and dev["compute_units"] == 80
        assert dev["arch_expected"] is True
        assert doc["arch_check"]["status"] == "expected"
        assert doc["platform_kind"] == "dcu"
        assert any("torch sees no GPU" in w for w in doc["warnings"])
        assert any("hipprof" not in w and "dccobjdump" in w for w in doc["warnings"])
        assert "gfx936:sramecc+:xnack-" in res.stdout


# --------------------------------------------------------------------------- device records

def test_device_record_from_dcu_torch_props(fixtures_dir):
    """A torch-like properties object carrying the values recorded on a gfx936 BW (public samples)."""
    env_text = _body(fixtures_dir, "torch_versions_gfx936_1.txt")
    assert "6.3.26113" in env_text
    props = SimpleNamespace(name="BW", major=9, minor=3, gcnArchName="gfx936:sramecc+:xnack-",
                            multi_processor_count=80, total_memory=68702699520,
                            L2_cache_size=8388608, warp_size=64, shared_memory_per_block=65536,
                            shared_memory_per_multiprocessor=65536,
                            max_threads_per_multi_processor=2560, clock_rate=1500000)
    dev = env_probe.device_from_torch_props(props, 0, "6.3.26113")
    assert dev["arch"] == "gfx936" and dev["arch_full"] == "gfx936:sramecc+:xnack-"
    assert dev["vendor"] == "hygon" and dev["wave_size"] == 64
    assert dev["compute_units"] == 80 and dev["lds_per_block_bytes"] == 64 * KB
    assert dev["max_clock_mhz"] == 1500
    assert dev["lds_per_block_optin_bytes"] is None      # not in this torch's properties
    check = env_probe.arch_check([dev], archs.EXPECTED_DCU_ARCHS)
    assert check["status"] == "expected"


def test_device_record_older_torch_without_warp_size():
    props = SimpleNamespace(name="AMD Instinct MI300X", major=9, minor=4, gcnArchName="gfx942:sramecc+:xnack-",
                            multi_processor_count=304, total_memory=205822885888)
    dev = env_probe.device_from_torch_props(props, 1, "6.2.41133")
    assert dev["arch"] == "gfx942" and dev["vendor"] == "amd"
    assert dev["wave_size"] == 64 and dev["wave_size_source"] == "arch table"
    check = env_probe.arch_check([dev], archs.EXPECTED_DCU_ARCHS)
    assert check["status"] == "unexpected" and "gfx942" in check["message"]


def test_device_record_cuda_props():
    props = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, gcnArchName="",
                            multi_processor_count=132, warp_size=32)
    dev = env_probe.device_from_torch_props(props, 0, None)
    assert dev["arch"] == "sm_90" and dev["vendor"] == "nvidia" and dev["capability"] == "9.0"
    check = env_probe.arch_check([dev], archs.EXPECTED_DCU_ARCHS)
    assert check["status"] == "not_dcu" and "workflow still applies" in check["message"]


def test_no_device_arch_check():
    assert env_probe.arch_check([], ["gfx936"])["status"] == "no_device"


# --------------------------------------------------------------------------- buffer-op default

def test_buffer_ops_default_from_installed_source_matches_knob():
    import importlib

    pkg = toolchain.triton_package_dir()
    if pkg is None:
        pytest.skip("triton not installed")
    from_src = buffer_ops.buffer_ops_from_source(pkg)
    assert from_src is not None
    knobs = importlib.import_module("triton.knobs")
    amd = getattr(knobs, "amd", None)
    if amd is not None:
        assert from_src["default"] is type(amd).__dict__["use_buffer_ops"].default


def test_buffer_ops_source_of_triton_3_3(tmp_path):
    # The line that Triton 3.3.1 has in third_party/amd/backend/compiler.py (amd_hygon.md 1.1).
    amd = tmp_path / "backends" / "amd"
    amd.mkdir(parents=True)
    (amd / "compiler.py").write_text(
        'def use_buffer_ops():\n    return os.environ.get("AMDGCN_USE_BUFFER_OPS", "0") == "1"\n')
    rec = buffer_ops.buffer_ops_from_source(tmp_path)
    assert rec == {"default": False, "source": "source text of triton/backends/amd/compiler.py",
                   "variable": "AMDGCN_USE_BUFFER_OPS"}


def test_buffer_ops_source_of_old_hygon_fork(tmp_path):
    # FlagTree's older hcu backend reads HCUGCN_USE_BUFFER_OPS, default "0" (amd_hygon.md 3.3).
    hcu = tmp_path / "backends" / "hcu"
    hcu.mkdir(parents=True)
    (hcu / "compiler.py").write_text(
        'use = os.environ.get("HCUGCN_USE_BUFFER_OPS", "0") == "1"\n')
    rec = buffer_ops.buffer_ops_from_source(tmp_path)
    assert rec["variable"] == "HCUGCN_USE_BUFFER_OPS" and rec["default"] is False


@pytest.mark.parametrize("version, default", [
    ("3.3.0", False), ("3.5.1+das.opt1.dtk2604.torch290", False), ("3.6.0", True),
    ("3.9.0", True), (None, None),
])
def test_buffer_ops_version_rule(version, default):
    assert buffer_ops.buffer_ops_by_version(version) is default


# --------------------------------------------------------------------------- helpers

def test_run_command_timeout_and_missing():
    res = children.run_command([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert res["timed_out"] is True and "timed out" in res["error"]
    res = children.run_command(["/nonexistent/tool-xyz", "--version"])
    assert res["rc"] is None and "FileNotFoundError" in res["error"]


def test_nvidia_smi_csv():
    rows = toolchain.parse_nvidia_smi_csv("0, NVIDIA H200, 570.124.06, 143771, 9.0\n"
                                          "garbage line\n")
    assert rows == [{"index": 0, "name": "NVIDIA H200", "driver_version": "570.124.06",
                     "memory_bytes": 143771 * 1024 * 1024, "capability": "9.0", "arch": "sm_90"}]


@pytest.mark.parametrize("arch, target", [
    ("gfx942", ("hip", "gfx942", 64)), ("sm_90", ("cuda", 90, 32)), ("90", ("cuda", 90, 32)),
    ("gfx938:sramecc+:xnack-", ("hip", "gfx938", 64)),
])
def test_target_for(arch, target):
    assert smoke.target_for(arch) == target


@pytest.mark.gpu
def test_gpu_smoke_compiles_and_launches(run_script, tmp_path):
    """On a GPU: the smoke kernel is JIT-compiled for the local target, launched and checked."""
    res = run_script("check_env.py", "--out", "env.json", "--smoke", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = _load(tmp_path / "env.json")
    assert doc["torch"]["cuda_available"] is True and doc["devices"]
    dev = doc["devices"][0]
    assert dev["source"] == "torch" and dev["arch"] and dev["compute_units"] > 0
    assert dev["wave_size"] in (32, 64) and dev["memory_bytes"] > 0
    assert doc["arch_check"]["status"] in ("expected", "unexpected", "not_dcu")
    (run,) = doc["smoke"]["runs"]
    assert run["mode"] == "local"
    for variant in ("unset", "1"):
        r = run["variants"][variant]
        assert r["launched"] is True and r["result_ok"] is True and r["max_abs_err"] == 0.0, r
        assert r["asm_kind"] in ("amdgcn", "ptx")
    if dev["vendor"] == "nvidia":
        assert doc["arch_check"]["status"] == "not_dcu"
        assert run["variants"]["unset"]["memory_ops"]["ld.global"] >= 1
