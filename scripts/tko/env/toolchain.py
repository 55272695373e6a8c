"""External tools of the environment probe (rocminfo, hy-smi, hipcc, nvidia-smi, ...) and the
DCU / CUDA install stacks they describe; each tool runs with a short timeout in its own process group."""


from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..read import dcu_tools
from .children import TOOL_TIMEOUT_S, first_lines, run_command

# Where ROCm/DTK and CUDA installs live when not on PATH.
DCU_ROOTS = ("/opt/dtk", "/opt/rocm")
DCU_EXTRA_BIN = ("/opt/hyhal/bin", "/usr/local/hyhal/bin")
CUDA_ROOTS = ("/usr/local/cuda",)
# --------------------------------------------------------------------------- external tools

@dataclass(frozen=True)
class ToolSpec:
    name: str
    group: str                                  # "dcu" or "nvidia"
    version_args: tuple[str, ...] | None        # None: tool has no version flag we trust
    version_regex: str | None = None


TOOLS = (
    ToolSpec("rocminfo", "dcu", None),          # version = HSA runtime version in its output
    ToolSpec("hy-smi", "dcu", None),
    ToolSpec("rocm-smi", "dcu", ("--version",)),
    ToolSpec("hipcc", "dcu", ("--version",)),
    ToolSpec("hipconfig", "dcu", ("--version",)),
    ToolSpec("hipprof", "dcu", ("--version",)),
    ToolSpec("dccobjdump", "dcu", ("--version",)),
    ToolSpec("rocprofv3", "dcu", ("--version",)),
    ToolSpec("nvidia-smi", "nvidia", ("--version",), r"DRIVER version\s*:\s*(\S+)"),
    ToolSpec("nvcc", "nvidia", ("--version",), r"release [\d.]+, V(\d+(?:\.\d+)+)"),
    ToolSpec("ncu", "nvidia", ("--version",), r"Version (\d+(?:\.\d+)+)"),
    ToolSpec("nsys", "nvidia", ("--version",), r"version (\d+(?:\.\d+)+\S*)"),
    ToolSpec("cuobjdump", "nvidia", ("--version",), r"release [\d.]+, V(\d+(?:\.\d+)+)"),
    ToolSpec("nvdisasm", "nvidia", ("--version",), r"release [\d.]+, V(\d+(?:\.\d+)+)"),
)
BUNDLED_NVIDIA = ("cuobjdump", "nvdisasm", "ptxas")


def _extra_bin_dirs(group: str) -> list[str]:
    dirs = []
    if group == "dcu":
        for var in ("ROCM_PATH", "HIP_PATH", "ROCM_HOME", "DTK_HOME"):
            if os.environ.get(var):
                dirs.append(os.path.join(os.environ[var], "bin"))
        dirs += [os.path.join(r, "bin") for r in DCU_ROOTS]
        dirs += [os.path.join(r, "hip", "bin") for r in DCU_ROOTS]
        dirs += list(DCU_EXTRA_BIN)
    else:
        for var in ("CUDA_HOME", "CUDA_PATH"):
            if os.environ.get(var):
                dirs.append(os.path.join(os.environ[var], "bin"))
        dirs += [os.path.join(r, "bin") for r in CUDA_ROOTS]
    return dirs


def find_tool(name: str, group: str) -> tuple[str | None, bool]:
    """(path, on_path) of a tool: PATH first, then the usual install folders."""
    path = shutil.which(name)
    if path:
        return path, True
    for d in _extra_bin_dirs(group):
        cand = os.path.join(d, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand, False
    return None, False


def tool_version(spec: ToolSpec, output: str) -> str | None:
    if spec.name == "hipcc":
        return dcu_tools.parse_hipcc_version(output).get("version")
    if spec.version_regex:
        m = re.search(spec.version_regex, output)
        if m:
            return m.group(1)
    return dcu_tools.first_version(output)


def probe_tool(spec: ToolSpec, path: str | None = None, on_path: bool | None = None,
               timeout: float = TOOL_TIMEOUT_S) -> dict:
    if path is None:
        path, on_path = find_tool(spec.name, spec.group)
    rec: dict[str, Any] = {"group": spec.group, "found": path is not None, "path": path,
                           "on_path": bool(on_path), "version": None}
    if path is None or spec.version_args is None:
        return rec
    res = run_command([path, *spec.version_args], timeout=timeout)
    text = (res["stdout"] or "") + "\n" + (res["stderr"] or "")
    rec["version_rc"] = res["rc"]
    rec["version_output"] = first_lines(text, 3)
    if res["error"]:
        rec["error"] = res["error"]
        rec["timed_out"] = res["timed_out"]
    elif res["rc"] == 0 or text.strip():
        rec["version"] = tool_version(spec, text)
        if spec.name == "hipcc":
            rec["hipcc"] = dcu_tools.parse_hipcc_version(text)
    return rec


def triton_package_dir() -> Path | None:
    """Folder of the installed triton package, found without importing it."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def probe_bundled_nvidia(timeout: float = TOOL_TIMEOUT_S) -> dict:
    """The CUDA binaries Triton's wheel bundles in triton/backends/nvidia/bin."""
    pkg = triton_package_dir()
    out = {}
    for name in BUNDLED_NVIDIA:
        path = pkg / "backends" / "nvidia" / "bin" / name if pkg else None
        if path is None or not path.is_file():
            out[name] = {"group": "nvidia", "found": False, "path": None, "source": "triton wheel",
                         "version": None}
            continue
        spec = ToolSpec(name, "nvidia", ("--version",), r"release [\d.]+, V(\d+(?:\.\d+)+)")
        rec = probe_tool(spec, str(path), False, timeout)
        rec["source"] = "triton wheel"
        out[name] = rec
    return out


# --------------------------------------------------------------------------- DCU / CUDA stacks

def install_roots() -> list[tuple[str, str]]:
    """(path, where-from) of candidate ROCm/DTK installs, de-duplicated by real path."""
    cands = []
    for var in ("ROCM_PATH", "HIP_PATH", "ROCM_HOME", "DTK_HOME"):
        value = os.environ.get(var)
        if value:
            cands.append((value.rstrip("/") or "/", f"${var}"))
    for root in DCU_ROOTS:
        cands.append((root, "default location"))
    for pattern_root in ("/opt",):
        try:
            for entry in sorted(os.listdir(pattern_root)):
                if re.match(r"^(dtk|rocm)[-_.]?\d", entry):
                    cands.append((os.path.join(pattern_root, entry), "default location"))
        except OSError:
            pass
    seen = set()
    out = []
    for path, origin in cands:
        if not os.path.isdir(path):
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        out.append((path, origin))
    return out


def probe_install(path: str, origin: str) -> dict:
    real = os.path.realpath(path)
    text = (path + " " + real).lower()
    kind = "dtk" if "dtk" in text else ("rocm" if "rocm" in text else None)
    rec: dict[str, Any] = {"path": path, "realpath": real, "from": origin, "kind": kind,
                           "version": None, "version_file": None}
    for rel in (".info/version", ".info/version-dev", ".info/version-hip-sdk"):
        vf = os.path.join(path, rel)
        if os.path.isfile(vf):
            try:
                rec["version"] = dcu_tools.parse_info_version(
                    Path(vf).read_text(encoding="utf-8", errors="replace"))
                rec["version_file"] = vf
                break
            except OSError as exc:
                rec["version_error"] = str(exc)
    if os.path.isdir(os.path.join(path, "aillvm")) or os.path.isdir(os.path.join(path, "dcc")):
        rec["kind"] = "dtk"   # DTK ships aillvm/ and dcc/ (the HCU Triton backend calls them)
    return rec


def probe_dcu_stack(tools: dict, timeout: float = TOOL_TIMEOUT_S) -> dict:
    stack: dict[str, Any] = {
        "rocm_path_env": os.environ.get("ROCM_PATH"),
        "installs": [probe_install(p, o) for p, o in install_roots()],
    }
    hipcc = tools.get("hipcc", {})
    stack["hipcc"] = hipcc.get("hipcc")
    stack["kind"] = next((i["kind"] for i in stack["installs"] if i["kind"]), None)
    if stack["hipcc"] and stack["hipcc"].get("flavor"):
        stack["kind"] = stack["hipcc"]["flavor"]
    rocminfo = tools.get("rocminfo", {})
    if rocminfo.get("found"):
        res = run_command([rocminfo["path"]], timeout=timeout)
        rec: dict[str, Any] = {"rc": res["rc"], "error": res["error"]}
        if res["stdout"].strip():
            parsed = dcu_tools.parse_rocminfo(res["stdout"])
            rec.update(banner=parsed["banner"], runtime_version=parsed["runtime_version"],
                       agents=len(parsed["agents"]), gpus=parsed["gpus"])
            rocminfo["version"] = parsed["runtime_version"]
        if res["rc"] not in (0, None) or res["error"]:
            rec["error_lines"] = first_lines(res["stderr"] or res["stdout"], 3)
        stack["rocminfo"] = rec
    hysmi = tools.get("hy-smi", {})
    if hysmi.get("found"):
        # the flag set of the public hy-smi --json captures (tests/fixtures/dcu/)
        res = run_command([hysmi["path"], "--showid", "--showmeminfo", "vram", "--showpower",
                           "--showserial", "--showuse", "--showtemp", "--showproductname",
                           "--showuniqueid", "--json"], timeout=timeout)
        rec = {"rc": res["rc"], "error": res["error"]}
        parsed_json = dcu_tools.parse_smi_json(res["stdout"]) if "{" in res["stdout"] else None
        if parsed_json and parsed_json["cards"]:
            rec["json"] = {"complete": parsed_json["complete"],
                           "cards": [{k: v for k, v in c.items() if k != "raw"}
                                     for c in parsed_json["cards"]]}
        table = run_command([hysmi["path"]], timeout=timeout)
        if table["stdout"].strip():
            parsed = dcu_tools.parse_hysmi_table(table["stdout"])
            rec["table"] = {"style": parsed["style"], "complete": parsed["complete"],
                            "devices": [{k: v for k, v in d.items() if k != "raw"}
                                        for d in parsed["devices"]]}
        if table["error"]:
            rec["table_error"] = table["error"]
        stack["hy_smi"] = rec
    return stack


def mib_to_bytes(mib: Any) -> int | None:
    """MiB as a tool printed them -> bytes; None for NaN, infinity (a number past a float's range)
    or anything not a number."""
    if isinstance(mib, bool) or not isinstance(mib, (int, float)):
        return None
    if isinstance(mib, float) and not math.isfinite(mib):
        return None
    return int(mib * 1024 * 1024)


def parse_nvidia_smi_csv(text: str) -> list[dict]:
    """Rows of ``nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap
    --format=csv,noheader,nounits``."""
    rows = []
    for line in dcu_tools.clean_text(text).split("\n"):
        cells = [c.strip() for c in line.split(",")]
        # isdecimal, not isdigit: int() refuses '²'; a 5000-digit index is no GPU either
        if len(cells) < 5 or not cells[0].isdecimal() or len(cells[0]) > 9:
            continue
        cap = cells[4]
        mem = cells[3]
        rows.append({
            "index": int(cells[0]),
            "name": cells[1],
            "driver_version": cells[2],
            "memory_bytes": mib_to_bytes(float(mem)) if re.match(r"^\d+(\.\d+)?$", mem) else None,
            "capability": cap if re.match(r"^\d+\.\d+$", cap) else None,
            "arch": "sm_" + cap.replace(".", "") if re.match(r"^\d+\.\d+$", cap) else None,
        })
    return rows


def probe_nvidia_stack(tools: dict, timeout: float = TOOL_TIMEOUT_S) -> dict:
    stack: dict[str, Any] = {"cuda_home_env": os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"),
                             "installs": []}
    for root in CUDA_ROOTS:
        if os.path.isdir(root):
            rec: dict[str, Any] = {"path": root, "realpath": os.path.realpath(root), "version": None}
            vj = os.path.join(root, "version.json")
            if os.path.isfile(vj):
                try:
                    rec["version"] = json.loads(Path(vj).read_text())["cuda"]["version"]
                except (OSError, ValueError, KeyError, TypeError):
                    pass
            stack["installs"].append(rec)
    smi = tools.get("nvidia-smi", {})
    if smi.get("found"):
        res = run_command([smi["path"], "--query-gpu=index,name,driver_version,memory.total,compute_cap",
                           "--format=csv,noheader,nounits"], timeout=timeout)
        stack["nvidia_smi"] = {"rc": res["rc"], "error": res["error"],
                               "gpus": parse_nvidia_smi_csv(res["stdout"])}
    return stack


