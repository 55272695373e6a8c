"""Environment probe behind ``check_env.py``: what is installed, what GPU is there,
which profiling/ISA tools exist, and whether a tiny kernel compiles.

Everything that can hang or crash runs in a subprocess with a timeout, and its
failure is recorded, never raised:

* torch/triton are imported in a child process (a broken DTK install can
  abort the interpreter on import);
* the HIP/CUDA driver libraries are loaded with ctypes in another child;
* every external tool (rocminfo, hy-smi, hipcc, nvidia-smi, ...) runs with a
  short timeout in its own process group;
* each smoke compile runs in its own child so that ``AMDGCN_USE_BUFFER_OPS``
  is read fresh at import (Triton <= 3.3 reads it once per process).

Parsing of DCU tool output is in :mod:`tko.read.dcu_tools`.
"""


from __future__ import annotations

import os
import platform
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from ..base import archs
from ..read import triton_stack
from ..base.versions import package_version
from .children import RUNTIME_TIMEOUT_S, TOOL_TIMEOUT_S, exc_record, run_child
from .buffer_ops import BUFFER_OPS_ENV, buffer_ops_knob, buffer_ops_record
from .smoke import SMOKE_TIMEOUT_S, run_smoke
from .toolchain import (TOOLS, install_roots, mib_to_bytes, probe_bundled_nvidia, probe_dcu_stack,
                        probe_nvidia_stack, probe_tool, triton_package_dir)

NATIVE_TIMEOUT_S = 30.0

# Environment variables recorded verbatim (exact names, then prefixes).
ENV_NAMES = ("TORCH_LOGS", "TORCH_COMPILE_DEBUG", "ROCM_PATH", "HIP_PATH", "ROCM_HOME",
             "DTK_HOME", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING",
             "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
             "MLIR_ENABLE_DUMP", "LLVM_IR_ENABLE_DUMP", "PYTORCH_ROCM_ARCH")
ENV_PREFIXES = ("AMDGCN_", "HCUGCN_", "TRITON_", "TORCHINDUCTOR_", "HIP_", "HSA_")


# --------------------------------------------------------------------------- torch / triton

def device_from_torch_props(props: Any, index: int, hip_version: str | None = None) -> dict:
    """Device record from a ``torch.cuda.get_device_properties`` object (or look-alike).

    On ROCm/DTK builds ``gcnArchName`` holds the arch (``gfx938:sramecc+:xnack-``);
    on CUDA builds the arch is ``sm_<major><minor>``.  Fields a torch version
    lacks are recorded as None.
    """
    def get(name):
        value = getattr(props, name, None)
        return value if value not in ("",) else None

    arch, arch_full = archs.torch_device_arch(props, bool(hip_version))
    major, minor = get("major"), get("minor")
    known = archs.info(arch) if arch else None
    vendor = known.vendor if known else ("nvidia" if arch and arch.startswith("sm_")
                                         else ("amd" if arch else None))
    warp = get("warp_size")
    wave_source = "torch"
    if warp is None and known is not None:
        warp, wave_source = known.wave_size, "arch table"
    clock = get("clock_rate")  # kHz
    uuid = get("uuid")
    return {
        "source": "torch",
        "index": index,
        "name": get("name"),
        "arch": arch,
        "arch_full": arch_full,
        "vendor": vendor,
        "capability": f"{major}.{minor}" if major is not None and minor is not None else None,
        "compute_units": get("multi_processor_count"),
        "wave_size": warp,
        "wave_size_source": wave_source if warp is not None else None,
        "memory_bytes": get("total_memory"),
        "l2_bytes": get("L2_cache_size"),
        "lds_per_block_bytes": get("shared_memory_per_block"),
        "lds_per_block_optin_bytes": get("shared_memory_per_block_optin"),
        "lds_per_cu_bytes": get("shared_memory_per_multiprocessor"),
        "max_threads_per_cu": get("max_threads_per_multi_processor"),
        "regs_per_cu": get("regs_per_multiprocessor"),
        "max_clock_mhz": clock // 1000 if isinstance(clock, int) else None,
        "uuid": str(uuid) if uuid is not None else None,
    }




def child_torch(args: dict) -> dict:
    torch_info: dict[str, Any] = {"importable": False}
    try:
        import torch  # noqa: F401
    except BaseException as exc:
        torch_info.update(exc_record(exc))
        return torch_info
    torch_info.update(importable=True, version=str(torch.__version__),
                      hip=getattr(torch.version, "hip", None),
                      cuda=getattr(torch.version, "cuda", None),
                      git_version=getattr(torch.version, "git_version", None),
                      file=getattr(torch, "__file__", None))
    torch_info["backend"] = "hip" if torch_info["hip"] else ("cuda" if torch_info["cuda"] else "cpu")
    try:
        torch_info["cuda_available"] = bool(torch.cuda.is_available())
        torch_info["device_count"] = int(torch.cuda.device_count())
    except Exception as exc:
        torch_info.update(cuda_available=False, device_count=0)
        torch_info["device_error"] = exc_record(exc)["error"]
    devices = []
    if torch_info.get("cuda_available"):
        for i in range(torch_info["device_count"]):
            try:
                props = torch.cuda.get_device_properties(i)
                devices.append(device_from_torch_props(props, i, torch_info["hip"]))
            except Exception as exc:
                devices.append({"source": "torch", "index": i, **exc_record(exc)})
    torch_info["devices"] = devices
    if devices:
        # Triton's drivers decide through torch whether they are active, so the
        # target Triton would compile for is asked here, next to the device.
        try:
            import triton
            target = triton.runtime.driver.active.get_current_target()
            torch_info["triton_active_target"] = {"backend": target.backend, "arch": str(target.arch),
                                                  "warp_size": target.warp_size}
        except BaseException as exc:
            torch_info["triton_active_target_error"] = exc_record(exc)["error"]
    return torch_info


def child_triton(args: dict) -> dict:
    triton_info: dict[str, Any] = {"importable": False}
    try:
        import triton
    except BaseException as exc:
        triton_info.update(exc_record(exc))
        return triton_info
    triton_info.update(importable=True, version=str(getattr(triton, "__version__", None)),
                       file=getattr(triton, "__file__", None))
    try:
        from triton.backends import backends as registered
        triton_info["backends"] = sorted(registered)
        # what each backend accepts, from its options dataclass (tko.read.triton_stack)
        triton_info["backend_options"] = triton_stack.backend_option_fields(registered)
    except Exception as exc:
        triton_info["backends_error"] = exc_record(exc)["error"]
    triton_info["buffer_ops_knob"] = buffer_ops_knob(triton)
    return triton_info


def child_native(args: dict) -> dict:
    """Load the HIP / CUDA driver libraries with ctypes (works without torch)."""
    import ctypes

    def load(candidates):
        errors = []
        for name in candidates:
            try:
                return ctypes.CDLL(name), name, errors
            except OSError as exc:
                errors.append(f"{name}: {exc}")
        return None, None, errors

    out: dict[str, Any] = {}
    hip_names = ["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"]
    for root in args.get("hip_roots", []):
        hip_names.append(os.path.join(root, "lib", "libamdhip64.so"))
        hip_names.append(os.path.join(root, "hip", "lib", "libamdhip64.so"))
    lib, name, errors = load(hip_names)
    hip: dict[str, Any] = {"loaded": lib is not None, "library": name}
    if lib is None:
        hip["error"] = errors[0] if errors else "not found"
    else:
        value = ctypes.c_int(0)
        for fn, key in (("hipRuntimeGetVersion", "runtime_version"),
                        ("hipDriverGetVersion", "driver_version"),
                        ("hipGetDeviceCount", "device_count")):
            try:
                rc = getattr(lib, fn)(ctypes.byref(value))
                hip[key] = value.value if rc == 0 else None
                if rc != 0:
                    hip[f"{key}_status"] = rc
            except Exception as exc:
                hip[f"{key}_error"] = str(exc)
    out["hip"] = hip

    lib, name, errors = load(["libcuda.so.1", "libcuda.so"])
    cuda: dict[str, Any] = {"loaded": lib is not None, "library": name}
    if lib is None:
        cuda["error"] = errors[0] if errors else "not found"
    else:
        value = ctypes.c_int(0)
        try:
            init = lib.cuInit(0)
            cuda["init_status"] = init
            rc = lib.cuDriverGetVersion(ctypes.byref(value))
            cuda["driver_version"] = value.value if rc == 0 else None
            if init == 0:
                rc = lib.cuDeviceGetCount(ctypes.byref(value))
                cuda["device_count"] = value.value if rc == 0 else None
        except Exception as exc:
            cuda["error"] = str(exc)
    out["cuda"] = cuda
    return out


# --------------------------------------------------------------------------- env flags

def env_flags(environ: dict | None = None) -> dict:
    environ = dict(os.environ if environ is None else environ)
    out = {}
    for key in sorted(environ):
        if key in ENV_NAMES or key.startswith(ENV_PREFIXES):
            out[key] = environ[key]
    return out


# --------------------------------------------------------------------------- arch check

def arch_check(devices: list[dict], expected: Sequence[str]) -> dict:
    """Mark each device ``arch_expected`` and say what the machine is."""
    expected_set = [archs.normalize(a) for a in expected]
    gpus = [d for d in devices if d.get("arch")]
    if not gpus and devices:
        return {"status": "unknown", "expected": expected_set,
                "message": (f"{len(devices)} GPU(s) found by {devices[0].get('source')} but their "
                            "arch is unknown (rocminfo or a torch build for this device reports it)")}
    if not gpus:
        return {"status": "no_device", "expected": expected_set,
                "message": "no GPU found; the arch could not be checked"}
    statuses = []
    for d in gpus:
        d["arch_expected"] = d["arch"] in expected_set
        statuses.append(d["arch_expected"])
    names = sorted({d["arch"] for d in gpus})
    if all(statuses):
        return {"status": "expected", "expected": expected_set,
                "message": f"{', '.join(names)} is an expected DCU arch"}
    if all(d.get("vendor") == "nvidia" for d in gpus):
        return {"status": "not_dcu", "expected": expected_set,
                "message": (f"NVIDIA GPU ({', '.join(names)}), not a DCU: the workflow still applies "
                            "(PTX/SASS instead of AMDGCN; AMDGCN_USE_BUFFER_OPS does not apply)")}
    odd = sorted({d["arch"] for d in gpus if not d["arch_expected"]})
    return {"status": "unexpected", "expected": expected_set,
            "message": (f"unexpected arch {', '.join(odd)} (expected {', '.join(expected_set)}); "
                        "check the device, or pass --expect-arch")}


# --------------------------------------------------------------------------- whole probe

def _run_probes(tool_timeout: float, runtime_timeout: float) -> tuple:
    """(torch, triton, native runtime, tools, DCU stack, NVIDIA stack) records."""
    roots = [p for p, _ in install_roots()]
    # The probes are independent processes: run them side by side (a torch import
    # takes seconds, and so may rocminfo on a busy node).
    with ThreadPoolExecutor(max_workers=8) as pool:
        f_torch = pool.submit(run_child, "torch", None, None, runtime_timeout)
        f_triton = pool.submit(run_child, "triton", None, None, runtime_timeout)
        f_native = pool.submit(run_child, "native", {"hip_roots": roots}, None, NATIVE_TIMEOUT_S)
        f_bundled = pool.submit(probe_bundled_nvidia, tool_timeout)
        f_tools = {spec.name: pool.submit(probe_tool, spec, None, None, tool_timeout)
                   for spec in TOOLS}
        tools = {name: f.result() for name, f in f_tools.items()}
        f_dcu = pool.submit(probe_dcu_stack, tools, tool_timeout)
        f_nvidia = pool.submit(probe_nvidia_stack, tools, tool_timeout)
        dcu_stack, nvidia_stack = f_dcu.result(), f_nvidia.result()
        nvidia_stack["triton_bundled"] = f_bundled.result()
        native = f_native.result()
        torch_info = import_record(f_torch.result(), "torch")
        triton_info = import_record(f_triton.result(), "triton")
    for key in ("child_seconds", "child_timed_out", "child_rc"):
        native.pop(key, None)
    return torch_info, triton_info, native, tools, dcu_stack, nvidia_stack


def triton_record_facts(triton_info: dict) -> Path | None:
    """Adds to a triton child record what this process reads without importing triton: the
    distribution versions, the package folder and its backend marker files; returns the folder."""
    triton_info["dist_version"] = package_version("triton")
    pkg = triton_package_dir()
    triton_info["package_dir"] = str(pkg) if pkg else None
    triton_info["flagtree_version"] = package_version("flagtree")    # FlagTree installs as triton
    triton_info["backend_files"] = triton_stack.backend_files(pkg)
    return pkg


def _package_records(torch_info: dict, triton_info: dict, warnings: list):
    """Moves the active target into the triton record, adds versions; returns Triton's package dir."""
    for key in ("active_target", "active_target_error"):
        if f"triton_{key}" in torch_info:
            triton_info[key] = torch_info.pop(f"triton_{key}")
    torch_info["dist_version"] = package_version("torch")
    pkg = triton_record_facts(triton_info)
    if not torch_info.get("importable"):
        warnings.append(f"torch is not importable: {torch_info.get('error')}")
    if not triton_info.get("importable"):
        warnings.append(f"triton is not importable: {triton_info.get('error')}")
    return pkg


def _devices(torch_info: dict, dcu_stack: dict, nvidia_stack: dict, warnings: list) -> list:
    """The devices torch sees, else those the system tools list (and why torch does not)."""
    devices = list(torch_info.get("devices") or [])
    if devices:
        return devices
    devices = list((dcu_stack.get("rocminfo") or {}).get("gpus") or [])
    for i, d in enumerate(devices):
        d.setdefault("index", i)
    if not devices:
        devices = _hysmi_devices(dcu_stack.get("hy_smi") or {})
    if not devices and nvidia_stack.get("nvidia_smi"):
        for row in nvidia_stack["nvidia_smi"]["gpus"]:
            devices.append({"source": "nvidia-smi", "vendor": "nvidia", **row})
    if devices and torch_info.get("importable"):
        vendors = {d.get("vendor") for d in devices}
        if torch_info.get("cuda") and vendors & {"hygon", "amd"}:
            warnings.append(f"torch {torch_info.get('version')} is a CUDA build on a DCU/AMD "
                            "machine: it cannot see the device; install the DTK/ROCm build of torch")
        elif torch_info.get("hip") and vendors == {"nvidia"}:
            warnings.append(f"torch {torch_info.get('version')} is a HIP build on an NVIDIA machine")
        else:
            warnings.append("torch sees no GPU but system tools do: is this a CPU-only torch "
                            "build, or is the device hidden (*_VISIBLE_DEVICES)?")
    return devices


def probe(expected_archs: Sequence[str], smoke: bool = False,
          smoke_targets: Sequence[str] = (), tool_timeout: float = TOOL_TIMEOUT_S,
          runtime_timeout: float = RUNTIME_TIMEOUT_S, smoke_timeout: float = SMOKE_TIMEOUT_S) -> dict:
    """Run every probe and return the ``triton_env/1`` payload (without header)."""
    warnings: list[str] = []
    torch_info, triton_info, native, tools, dcu_stack, nvidia_stack = _run_probes(tool_timeout, runtime_timeout)
    pkg = _package_records(torch_info, triton_info, warnings)
    devices = _devices(torch_info, dcu_stack, nvidia_stack, warnings)
    check = arch_check(devices, expected_archs)
    if check["status"] == "unexpected":
        warnings.append(check["message"])
    if torch_info.get("hip") and not torch_info.get("cuda_available"):
        warnings.append("torch is a HIP build but no device is available "
                        "(HIP_VISIBLE_DEVICES / driver / permissions?)")
    buffer_ops = buffer_ops_record(triton_info, pkg)
    missing_dcu = [n for n in ("hipcc", "hipprof", "dccobjdump", "rocminfo")
                   if not tools[n]["found"]]
    platform_kind = _platform_kind(devices)
    if platform_kind in ("dcu", "amd") and missing_dcu:
        warnings.append(f"not found: {', '.join(missing_dcu)} (needed for profiling / ISA checks)")
    payload: dict[str, Any] = {
        "python": {"executable": sys.executable, "version": platform.python_version()},
        "host": {"system": platform.system(), "machine": platform.machine(),
                 "release": platform.release()},
        "platform_kind": platform_kind,
        "torch": torch_info,
        "triton": triton_info,
        "native_runtime": native,
        "devices": devices,
        "expected_archs": check["expected"],
        "arch_check": check,
        "dcu_stack": dcu_stack,
        "nvidia_stack": nvidia_stack,
        "tools": tools,
        "env": env_flags(),
        "buffer_ops": buffer_ops,
        "triton_stack": triton_stack.classify(triton_info, buffer_ops),
    }
    if smoke:
        payload["smoke"] = run_smoke_all(torch_info, smoke_targets, smoke_timeout, warnings)
    payload["warnings"] = warnings
    return payload


def import_record(child: dict, package: str) -> dict:
    """The torch/triton record of a probe child; a child that died or hung becomes a failed import."""
    for key in ("child_timed_out", "child_rc"):
        child.pop(key, None)
    if not child.get("child_failed"):
        child.pop("stderr_tail", None)       # import-time warnings of a working package
        child.pop("diagnostics", None)
        return child
    return {"importable": False,
            "error": f"importing {package} in a subprocess failed: {child.get('error')}",
            "error_lines": child.get("error_lines") or [], "stderr_tail": child.get("stderr_tail") or [],
            "child_seconds": child.get("child_seconds")}


def _hysmi_devices(hysmi: dict) -> list[dict]:
    """Device records from hy-smi --json cards (no arch: hy-smi does not print it)."""
    out = []
    for card in (hysmi.get("json") or {}).get("cards", []):
        mib = card.get("vram_total_mib")
        out.append({"source": "hy-smi", "index": card.get("index"), "name": card.get("series"),
                    "arch": None, "arch_full": None, "vendor": "hygon",
                    "memory_bytes": mib_to_bytes(mib),
                    "device_id": card.get("device_id")})
    return out


def _platform_kind(devices: list[dict]) -> str:
    vendors = {d.get("vendor") for d in devices}
    if "hygon" in vendors:
        return "dcu"
    if "amd" in vendors:
        return "amd"
    if "nvidia" in vendors:
        return "nvidia"
    return "cpu"


def run_smoke_all(torch_info: dict, targets: Sequence[str], timeout: float,
                  warnings: list[str]) -> dict:
    out: dict[str, Any] = {"runs": []}
    if torch_info.get("cuda_available"):
        out["runs"] += run_smoke("local", [None], timeout)
    else:
        out["local"] = ("no GPU visible to torch: nothing can be launched"
                        + ("" if targets else "; pass --smoke-target gfx942 (or sm_90) to compile offline"))
    if targets:
        out["runs"] += run_smoke("offline", list(targets), timeout)
    for run in out["runs"]:
        label = run["target_requested"] or "local"
        for variant, res in run["variants"].items():
            if not res.get("ok"):
                why = _why(res)
                warnings.append(f"smoke {label} with {BUFFER_OPS_ENV} "
                                f"{'unset' if variant == 'unset' else '=' + variant} failed at "
                                f"{res.get('stage', '?')}: {why}")
        unset, forced = run["variants"].get("unset", {}), run["variants"].get("1", {})
        if "ptx" in (unset.get("asm_kind"), forced.get("asm_kind")):
            run["advice"] = (f"NVIDIA target: {BUFFER_OPS_ENV} does not apply; global memory is "
                             "accessed with ld.global / st.global")
        elif str(forced.get("error", "")).startswith("not run"):
            run["advice"] = (f"{BUFFER_OPS_ENV}=1 was not tried for this target: the subprocess "
                             "died at an earlier target")
        elif unset.get("ok") and not forced.get("ok"):
            run["advice"] = (f"keep {BUFFER_OPS_ENV} unset: the compile fails with it set to 1 "
                             "on this stack")
        elif unset.get("ok") and forced.get("ok"):
            run["advice"] = (f"{BUFFER_OPS_ENV}=1 compiles on this stack; it may be tried as an "
                             "explicit buffer-op experiment")
    return out


# --------------------------------------------------------------------------- human summary

def _fmt_bytes(n: Any) -> str:
    if not isinstance(n, (int, float)) or not 0 < n < float("inf") or n >= 2 ** 100:
        return "?"      # also NaN, infinity and integers whose division overflows a float
    gib = n / 1024 ** 3
    return f"{gib:.0f} GiB" if gib >= 1 else f"{n / 1024 ** 2:.0f} MiB"


def _why(res: dict) -> str:
    """The most telling failure line: a compiler 'error:' line, else the exception."""
    diag = res.get("diagnostics") or []
    if diag:
        text = diag[0]
        return text.split("error: ", 1)[1] if "error: " in text else text
    return str(res.get("error"))


def _smoke_line(run: dict) -> str:
    label = run.get("target_requested") or "local GPU"
    mode = "offline compile" if run.get("mode") == "offline" else "compile + launch"
    parts = []
    for variant, res in run.get("variants", {}).items():
        name = "unset" if variant == "unset" else f"={variant}"
        if res.get("ok"):
            ops = res.get("memory_ops") or {}
            ops_text = " ".join(f"{k} {v}" for k, v in sorted(ops.items())) or "no memory ops"
            extra = ""
            if res.get("launched"):
                extra = ", result ok" if res.get("result_ok") else ", RESULT WRONG"
            parts.append(f"{name}: ok ({ops_text}{extra})")
        else:
            why = _why(res)
            parts.append(f"{name}: FAILED at {res.get('stage', '?')}: {why}")
    return f"smoke {label} ({mode}): " + " | ".join(parts)


def summary_lines(doc: dict) -> list[str]:
    """About a dozen lines for a human: versions, device, tools, buffer ops, smoke, warnings."""
    t, tr = doc.get("torch", {}), doc.get("triton", {})
    lines = []
    if t.get("importable"):
        rt = f"hip {t['hip']}" if t.get("hip") else (f"cuda {t['cuda']}" if t.get("cuda") else "cpu build")
        torch_text = f"torch {t.get('version')} ({rt})"
    else:
        torch_text = f"torch NOT importable ({t.get('error')})"
    if tr.get("importable"):
        triton_text = f"triton {tr.get('version')} (backends: {', '.join(tr.get('backends') or []) or '?'})"
    else:
        triton_text = f"triton NOT importable ({tr.get('error')})"
    lines.append(f"python {doc['python']['version']} | {torch_text} | {triton_text}")
    stack = doc.get("triton_stack")
    if not isinstance(stack, dict):  # a record older than the field: classified from its facts
        stack = triton_stack.classify(doc.get("triton"), doc.get("buffer_ops"))
    lines.append("triton stack: " + triton_stack.stack_title(stack))
    lines += triton_stack.stack_table(stack)
    nat = doc.get("native_runtime", {})
    hip, cuda = nat.get("hip", {}), nat.get("cuda", {})
    rt_parts = []
    if hip.get("loaded"):
        rt_parts.append(f"HIP runtime {hip.get('runtime_version')} ({hip.get('device_count')} device(s))")
    if cuda.get("loaded"):
        rt_parts.append(f"CUDA driver {cuda.get('driver_version')} ({cuda.get('device_count')} device(s))")
    lines.append("runtime: " + ("; ".join(rt_parts) if rt_parts else "no HIP or CUDA driver library loaded"))
    devices = doc.get("devices") or []
    if devices:
        for d in devices[:4]:
            lines.append(f"device {d.get('index', '?')}: {d.get('name')} [{d.get('arch_full') or d.get('arch')}] "
                         f"{d.get('compute_units')} CU/SM, wave {d.get('wave_size')}, "
                         f"{_fmt_bytes(d.get('memory_bytes'))}, via {d.get('source')}")
        if len(devices) > 4:
            lines.append(f"... and {len(devices) - 4} more device(s)")
    else:
        lines.append("device: none found")
    lines.append(f"arch check: {doc['arch_check']['message']}")
    stack = doc.get("dcu_stack", {})
    inst = ", ".join(f"{i['path']} ({i.get('kind') or '?'} {i.get('version') or 'version ?'})"
                     for i in stack.get("installs", [])) or "no ROCm/DTK install found"
    lines.append(f"ROCm/DTK: {inst}; ROCM_PATH={stack.get('rocm_path_env') or 'unset'}")
    tools = doc.get("tools", {})
    found = [f"{n} {r.get('version') or ''}".strip() for n, r in tools.items() if r.get("found")]
    bundled = [n for n, r in doc.get("nvidia_stack", {}).get("triton_bundled", {}).items() if r.get("found")]
    missing = [n for n, r in tools.items() if not r.get("found")]
    lines.append("tools found: " + (", ".join(found) or "none")
                 + (f"; in triton wheel: {', '.join(bundled)}" if bundled else ""))
    lines.append("tools missing: " + (", ".join(missing) or "none"))
    b = doc.get("buffer_ops", {})
    state = "unset" if not b.get("set") else f"={b.get('env')}"
    default = {True: "on", False: "off", None: "unknown"}[b.get("default_when_unset")]
    lines.append(f"{b.get('variable') or BUFFER_OPS_ENV} {state}; default when unset: {default} ({b.get('default_source')}); "
                 f"effective now: {({True: 'on', False: 'off', None: 'unknown'})[b.get('effective')]}")
    smoke = doc.get("smoke")
    if smoke is not None:
        if smoke.get("local"):
            lines.append(f"smoke: {smoke['local']}")
        for run in smoke.get("runs", []):
            lines.append(_smoke_line(run))
            for key in ("advice", "proxy_note"):
                if run.get(key):
                    lines.append(f"  -> {run[key]}")
    for w in doc.get("warnings", []):
        lines.append(f"WARNING: {w}")
    return lines
