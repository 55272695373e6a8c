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

import importlib.util
import json
import math
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..base import archs, subproc
from ..read import dcu_tools, triton_stack
from ..read.isa_amdgcn import memory_op_counts
from ..base.versions import package_version, parse_version

SCRIPTS_DIR = Path(__file__).resolve().parents[2]
CHILD_MARKER = "TKO_PROBE_JSON:"
BUFFER_OPS_ENV = "AMDGCN_USE_BUFFER_OPS"

TOOL_TIMEOUT_S = 15.0
RUNTIME_TIMEOUT_S = 180.0       # first torch import on a cold cache can be slow
NATIVE_TIMEOUT_S = 30.0
SMOKE_TIMEOUT_S = 300.0

# Environment variables recorded verbatim (exact names, then prefixes).
ENV_NAMES = ("TORCH_LOGS", "TORCH_COMPILE_DEBUG", "ROCM_PATH", "HIP_PATH", "ROCM_HOME",
             "DTK_HOME", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING",
             "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
             "MLIR_ENABLE_DUMP", "LLVM_IR_ENABLE_DUMP", "PYTORCH_ROCM_ARCH")
ENV_PREFIXES = ("AMDGCN_", "HCUGCN_", "TRITON_", "TORCHINDUCTOR_", "HIP_", "HSA_")

# Where ROCm/DTK and CUDA installs live when not on PATH.
DCU_ROOTS = ("/opt/dtk", "/opt/rocm")
DCU_EXTRA_BIN = ("/opt/hyhal/bin", "/usr/local/hyhal/bin")
CUDA_ROOTS = ("/usr/local/cuda",)


# --------------------------------------------------------------------------- subprocess helper

def run_command(argv: Sequence[str], timeout: float = TOOL_TIMEOUT_S,
                env: dict | None = None, cwd: str | None = None) -> dict:
    """Run a command; never raises.

    Returns ``{"argv", "rc", "stdout", "stderr", "timed_out", "error", "seconds"}``.
    The command gets its own process group so that a hung tool and anything it
    spawned are killed together on timeout (at once: a hung tool gets no grace).
    """
    result: dict[str, Any] = {"argv": list(argv), "rc": None, "stdout": "", "stderr": "",
                              "timed_out": False, "error": None, "seconds": None}
    try:
        # input="": a tool that prompts reads end of file instead of waiting on a terminal
        done = subproc.run(argv, timeout=timeout, env=env, cwd=cwd, input="", grace_s=0.0)
    except OSError as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        return result
    if done.timed_out:
        result["timed_out"] = True
        result["error"] = f"timed out after {timeout:g} s"
    result.update(rc=done.returncode, stdout=done.stdout, stderr=done.stderr,
                  seconds=round(done.seconds, 3))
    return result


def first_lines(text: str | None, n: int = 5) -> list[str]:
    lines = [l.rstrip() for l in dcu_tools.clean_text(text or "").split("\n") if l.strip()]
    return lines[:n]


def last_lines(text: str | None, n: int = 8) -> list[str]:
    lines = [l.rstrip() for l in dcu_tools.clean_text(text or "").split("\n") if l.strip()]
    return lines[-n:]


# --------------------------------------------------------------------------- child processes

_DIAG = re.compile(r"\berror\b|LLVM ERROR|unsupported", re.IGNORECASE)


def run_child(kind: str, args: dict | None = None, env: dict | None = None,
              timeout: float = RUNTIME_TIMEOUT_S) -> dict:
    """Run :func:`child_main` in a fresh interpreter; return its JSON or a failure record."""
    code = (f"import sys; sys.path.insert(0, {str(SCRIPTS_DIR)!r}); "
            f"from tko.env import env_probe; env_probe.child_main({kind!r}, {json.dumps(args or {})!r})")
    res = run_command([sys.executable, "-c", code], timeout=timeout, env=env)
    payload = child_payload(res["stdout"])
    if payload is None:
        why = res["error"] or f"exited with status {res['rc']} before reporting"
        payload = {"child_failed": True, "error": why,
                   "error_lines": first_lines(res["stderr"]) or first_lines(res["stdout"]),
                   "stderr_tail": last_lines(res["stderr"])}
    # Compiler diagnostics (MLIR / LLVM) go to stderr before the Python exception,
    # which alone is often just "PassManager::run failed".
    diagnostics = [l.strip() for l in dcu_tools.clean_text(res["stderr"]).split("\n")
                   if _DIAG.search(l)]
    if diagnostics:
        payload["diagnostics"] = diagnostics[:5]
    payload["child_seconds"] = res["seconds"]
    payload["child_timed_out"] = res["timed_out"]
    payload["child_rc"] = res["rc"]
    if res["stderr"].strip():
        payload.setdefault("stderr_tail", last_lines(res["stderr"]))
    return payload


def child_payload(stdout: str) -> dict | None:
    """The JSON object of a child's last marker line; None when there is none or it is not one
    (cut off, not an object, an integer past int()'s digit limit, nested too deeply)."""
    for line in stdout.splitlines()[::-1]:
        if line.startswith(CHILD_MARKER):
            try:
                payload = json.loads(line[len(CHILD_MARKER):])
            except (ValueError, RecursionError):     # JSONDecodeError is a ValueError
                return None
            return payload if isinstance(payload, dict) else None
    return None


def child_main(kind: str, args_json: str) -> None:
    """Entry point of a probe child: print one marker line with the JSON result."""
    args = json.loads(args_json)
    handlers: dict[str, Callable[[dict], dict]] = {
        "torch": _child_torch, "triton": _child_triton, "native": _child_native,
        "smoke": _child_smoke}
    try:
        result = handlers[kind](args)
    except BaseException as exc:  # the parent records whatever happened
        result = {"child_failed": True, "error": f"{type(exc).__name__}: {exc}",
                  "error_lines": first_lines(str(exc))}
    sys.stdout.flush()
    sys.stdout.write("\n" + CHILD_MARKER + json.dumps(result, default=repr) + "\n")
    sys.stdout.flush()


def _exc_record(exc: BaseException) -> dict:
    text = f"{type(exc).__name__}: {exc}"
    return {"error": first_lines(text, 1)[0] if first_lines(text, 1) else type(exc).__name__,
            "error_lines": first_lines(text, 6)}


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


def _buffer_ops_knob(triton_mod) -> dict:
    """Read the AMDGCN_USE_BUFFER_OPS knob of an imported Triton (3.4+ ``triton.knobs``)."""
    out: dict[str, Any] = {"knob": None, "default": None, "value": None}
    try:
        knobs = importlib.import_module("triton.knobs")
    except Exception:
        return out
    for group in ("hcu", "amd"):       # hcu: Hygon FlagTree builds; it drives DCU codegen
        inst = getattr(knobs, group, None)
        if inst is None:
            continue
        desc = type(inst).__dict__.get("use_buffer_ops")
        if desc is None or getattr(desc, "key", None) != BUFFER_OPS_ENV:
            continue
        out["knob"] = f"triton.knobs.{group}.use_buffer_ops"
        out["default"] = getattr(desc, "default", None)
        try:
            out["value"] = bool(getattr(inst, "use_buffer_ops"))
        except Exception as exc:   # a bad env value raises in the knob
            out["value_error"] = f"{type(exc).__name__}: {exc}"
        break
    return out


def _child_torch(args: dict) -> dict:
    torch_info: dict[str, Any] = {"importable": False}
    try:
        import torch  # noqa: F401
    except BaseException as exc:
        torch_info.update(_exc_record(exc))
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
        torch_info["device_error"] = _exc_record(exc)["error"]
    devices = []
    if torch_info.get("cuda_available"):
        for i in range(torch_info["device_count"]):
            try:
                props = torch.cuda.get_device_properties(i)
                devices.append(device_from_torch_props(props, i, torch_info["hip"]))
            except Exception as exc:
                devices.append({"source": "torch", "index": i, **_exc_record(exc)})
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
            torch_info["triton_active_target_error"] = _exc_record(exc)["error"]
    return torch_info


def _child_triton(args: dict) -> dict:
    triton_info: dict[str, Any] = {"importable": False}
    try:
        import triton
    except BaseException as exc:
        triton_info.update(_exc_record(exc))
        return triton_info
    triton_info.update(importable=True, version=str(getattr(triton, "__version__", None)),
                       file=getattr(triton, "__file__", None))
    try:
        from triton.backends import backends as registered
        triton_info["backends"] = sorted(registered)
        # what each backend accepts, from its options dataclass (tko.read.triton_stack)
        triton_info["backend_options"] = triton_stack.backend_option_fields(registered)
    except Exception as exc:
        triton_info["backends_error"] = _exc_record(exc)["error"]
    triton_info["buffer_ops_knob"] = _buffer_ops_knob(triton)
    return triton_info


def _child_native(args: dict) -> dict:
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


# --------------------------------------------------------------------------- smoke compile

_PTX_MEM = re.compile(r"\b(ld|st)\.global\b")


def count_memory_ops(asm: str, kind: str) -> dict:
    """Counts of memory-instruction families in AMDGCN (``buffer_load`` ...: the ISA scanner's
    :func:`tko.read.isa_amdgcn.memory_op_counts`) or PTX (``ld.global``)."""
    if kind == "amdgcn":
        return memory_op_counts(asm)["ops"]
    counts: dict[str, int] = {}
    for m in _PTX_MEM.finditer(asm):
        key = f"{m.group(1)}.global"
        counts[key] = counts.get(key, 0) + 1
    return counts


def target_for(arch: str) -> tuple[str, Any, int]:
    """(backend, arch, warp_size) of a GPUTarget for 'gfx942' / 'sm_90' / '90'."""
    name = archs.normalize(arch)
    if name.startswith("sm_"):
        digits = name[3:]
        if not (digits.isascii() and digits.isdigit()):     # int() refuses '²'
            raise ValueError(f"bad NVIDIA arch {arch!r}")
        return "cuda", int(digits), 32
    if not name.startswith("gfx"):
        raise ValueError(f"unknown target {arch!r}: expected gfxNNN or sm_NN")
    known = archs.info(name)
    return "hip", name, known.wave_size if known else 64


def _child_smoke(args: dict) -> dict:
    """Smoke-compile for each requested target in this process (one flag setting)."""
    common: dict[str, Any] = {"mode": args["mode"], "buffer_ops_env": os.environ.get(BUFFER_OPS_ENV)}
    targets = args.get("targets") or [None]
    try:
        import triton
        common["triton_version"] = str(getattr(triton, "__version__", None))
        common["buffer_ops_effective"] = _buffer_ops_knob(triton).get("value")
        from tko.compile import smoke_kernel
    except BaseException as exc:
        rec = {"ok": False, "stage": "import", **common, **_exc_record(exc)}
        return {"results": [dict(rec) for _ in targets]}
    results = []
    for i, target in enumerate(targets):
        out: dict[str, Any] = {"ok": False, "stage": "compile", **common}
        start = time.monotonic()
        with _StderrCapture(os.path.join(args["stderr_dir"], f"stderr_{i}.txt")) as captured:
            try:
                if args["mode"] == "local":
                    _smoke_local(triton, smoke_kernel, out)
                else:
                    _smoke_offline(triton, smoke_kernel, target, out)
            except BaseException as exc:
                out.update(_exc_record(exc))
        out.update(_stderr_fields(captured.text))
        out["seconds"] = round(time.monotonic() - start, 3)
        results.append(out)
    return {"results": results}


def _stderr_fields(text: str) -> dict:
    out: dict[str, Any] = {}
    diagnostics = [l.strip() for l in dcu_tools.clean_text(text).split("\n") if _DIAG.search(l)]
    if diagnostics:
        out["diagnostics"] = diagnostics[:5]
    if text.strip():
        out["stderr_tail"] = last_lines(text)
    return out


class _StderrCapture:
    """Send file descriptor 2 to a file (MLIR/LLVM write there directly, not via
    sys.stderr).  The file is named by the parent, so that what LLVM printed
    before aborting the process is still readable afterwards."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        sys.stderr.flush()
        self._tmp = open(self.path, "w+b")
        self._saved = os.dup(2)
        os.dup2(self._tmp.fileno(), 2)
        self.text = ""
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._tmp.seek(0)
        self.text = self._tmp.read().decode("utf-8", errors="replace")
        self._tmp.close()
        return False


def _record_asm(compiled, out: dict) -> None:
    asm = getattr(compiled, "asm", {}) or {}
    kind = "amdgcn" if "amdgcn" in asm else ("ptx" if "ptx" in asm else None)
    out["asm_kind"] = kind
    if kind:
        text = asm[kind]
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        out["memory_ops"] = count_memory_ops(text, kind)
        if kind == "amdgcn":
            m = re.search(r'\.amdgcn_target\s+"([^"]+)"', text)
            out["amdgcn_target"] = m.group(1) if m else None


def _smoke_local(triton, smoke_kernel, out: dict) -> None:
    import torch
    out["stage"] = "device"
    target = triton.runtime.driver.active.get_current_target()
    out["target"] = {"backend": target.backend, "arch": str(target.arch),
                     "warp_size": target.warp_size}
    n = 1000                                    # not a multiple of BLOCK: exercises the mask
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    out["stage"] = "compile"
    grid = (triton.cdiv(n, smoke_kernel.BLOCK),)
    compiled = smoke_kernel.scale_shift[grid](x, y, n, BLOCK=smoke_kernel.BLOCK)
    out["stage"] = "launch"
    torch.cuda.synchronize()
    out["launched"] = True
    _record_asm(compiled, out)
    out["stage"] = "check"
    expected = x * 2.0 + 1.0
    out["max_abs_err"] = float((y - expected).abs().max().item())
    out["result_ok"] = bool(torch.equal(y, expected))
    out["ok"] = out["result_ok"]
    out["stage"] = "done"


def _smoke_offline(triton, smoke_kernel, arch: str, out: dict) -> None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    backend, target_arch, warp = target_for(arch)
    out["target"] = {"backend": backend, "arch": str(target_arch), "warp_size": warp}
    out["launched"] = False
    # Mimic what a JIT launch would attach: 16-byte alignment always, and on HIP
    # the 32-bit pointer range whenever buffer ops are on for this process.
    hints = [["tt.divisibility", 16]]
    if backend == "hip" and out.get("buffer_ops_effective"):
        hints.append(["tt.pointer_range", 32])
    out["pointer_hints"] = hints
    out["stage"] = "compile"
    attrs = {(i,): hints for i in smoke_kernel.POINTER_ARGS}
    try:
        src = ASTSource(smoke_kernel.scale_shift, dict(smoke_kernel.SIGNATURE),
                        constexprs={"BLOCK": smoke_kernel.BLOCK}, attrs=attrs)
    except TypeError:
        # Triton <= 3.2 spells the arguments differently; compile without hints there.
        sig = {k: v for k, v in smoke_kernel.SIGNATURE.items() if v != "constexpr"}
        src = ASTSource(smoke_kernel.scale_shift, sig, constants={"BLOCK": smoke_kernel.BLOCK})
        out["pointer_hints"] = None
    compiled = triton.compile(src, target=GPUTarget(backend, target_arch, warp),
                              options={"num_warps": 4})
    _record_asm(compiled, out)
    out["ok"] = True
    out["stage"] = "done"


def _failed_child_results(res: dict, mode: str, targets: Sequence[str | None], work: str) -> list[dict]:
    """Per-target records when the smoke child died (LLVM abort, segfault) or hung."""
    results = []
    for i, _ in enumerate(targets):
        rec: dict[str, Any] = {"ok": False, "stage": "subprocess", "mode": mode,
                               "error": res.get("error"), "error_lines": res.get("error_lines", [])}
        rec.update({k: v for k, v in res.items() if k.startswith("child_")})
        path = os.path.join(work, f"stderr_{i}.txt")
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                rec.update(_stderr_fields(fh.read().decode("utf-8", errors="replace")))
        else:
            rec["error"] = f"not run: the subprocess ended at an earlier target ({res.get('error')})"
        results.append(rec)
    return results


def smoke_env(variant: str) -> dict:
    """The child environment of one smoke variant: the flag unset, or set to '1'."""
    env = dict(os.environ)
    env.pop(BUFFER_OPS_ENV, None)
    if variant != "unset":
        env[BUFFER_OPS_ENV] = variant
    return env


def run_smoke(mode: str, targets: Sequence[str | None],
              timeout: float = SMOKE_TIMEOUT_S) -> list[dict]:
    """Smoke runs, one per target, each with the flag unset and set to 1.

    Each flag setting runs in its own subprocess (the flag is read at import on
    old Triton); the offline targets of one setting share that subprocess.
    """
    by_variant = {}
    for variant in ("unset", "1"):
        env = smoke_env(variant)
        # A fresh Triton cache per child: a cached binary would hide a compile failure.
        work = tempfile.mkdtemp(prefix="tko_smoke_")
        env["TRITON_CACHE_DIR"] = os.path.join(work, "triton_cache")
        try:
            res = run_child("smoke", {"mode": mode, "targets": list(targets), "stderr_dir": work},
                            env=env, timeout=timeout * max(1, len(targets)))
            results = res.pop("results", None)
            if not isinstance(results, list) or len(results) != len(targets):
                results = _failed_child_results(res, mode, targets, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for r in results:
            r.update({k: v for k, v in res.items() if k.startswith("child_")})
        by_variant[variant] = results
    runs = []
    for i, target in enumerate(targets):
        variants = {v: by_variant[v][i] for v in by_variant}
        record = {"mode": mode, "target_requested": target, "variants": variants}
        known = archs.info(target) if target else None
        if known and not known.upstream_triton and not all(r.get("ok") for r in variants.values()):
            record["proxy_note"] = (f"{known.name} ({known.product}) is not an upstream Triton target: "
                                    f"a DTK/FlagTree Triton compiles it; upstream Triton can compile "
                                    f"the proxy {known.proxy} (--smoke-target {known.proxy})")
        runs.append(record)
    return runs


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

def _install_roots() -> list[tuple[str, str]]:
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
        "installs": [probe_install(p, o) for p, o in _install_roots()],
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


def _mib_to_bytes(mib: Any) -> int | None:
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
            "memory_bytes": _mib_to_bytes(float(mem)) if re.match(r"^\d+(\.\d+)?$", mem) else None,
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


# --------------------------------------------------------------------------- buffer-op default

_BUFFER_OPS_VARS = (BUFFER_OPS_ENV, "HCUGCN_USE_BUFFER_OPS")   # the second: older Hygon forks
_SOURCE_FILES = ("knobs.py", "backends/amd/compiler.py", "backends/hcu/compiler.py",
                 "backends/hcu/compiler_hcu.py", "backends/amd/compiler_hcu.py")


def buffer_ops_from_source(pkg: Path | None) -> dict | None:
    """Default of the buffer-ops switch read from the installed Triton's source text.

    Matches ``env_bool("AMDGCN_USE_BUFFER_OPS"[, True])`` (3.4+) and
    ``os.environ.get("AMDGCN_USE_BUFFER_OPS", "0") == "1"`` (<= 3.3); an older
    Hygon fork reads ``HCUGCN_USE_BUFFER_OPS`` instead, reported in ``variable``.
    """
    if pkg is None:
        return None
    texts = []
    for rel in _SOURCE_FILES:
        try:
            texts.append((rel, (pkg / rel).read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    for var in _BUFFER_OPS_VARS:
        env_bool = re.compile(r'env_bool\(\s*["\']%s["\']\s*(?:,\s*(True|False))?\s*\)' % var)
        env_get = re.compile(r'environ\.get\(\s*["\']%s["\']\s*,\s*["\'](\d)["\']\s*\)' % var)
        for rel, text in texts:
            m = env_bool.search(text)
            if m:
                return {"default": m.group(1) == "True", "source": f"source text of triton/{rel}",
                        "variable": var}
            m = env_get.search(text)
            if m:
                return {"default": m.group(1) == "1", "source": f"source text of triton/{rel}",
                        "variable": var}
    return None


def buffer_ops_by_version(version: str | None) -> bool | None:
    """Default by release (amd_hygon.md 1.1): off up to 3.5, on from 3.6."""
    v = parse_version(version)
    if not v:
        return None
    return v >= (3, 6)


def _env_truthy(value: str, version: str | None) -> bool:
    v = parse_version(version)
    if v and v < (3, 4):        # read as os.environ.get(...) == "1" up to 3.3
        return value == "1"
    return value.strip().lower() in ("1", "true", "yes", "on", "y")


def buffer_ops_record(triton_info: dict, pkg: Path | None) -> dict:
    version = triton_info.get("version") or package_version("triton")
    knob = triton_info.get("buffer_ops_knob") or {}
    from_src = None if knob.get("default") is not None else buffer_ops_from_source(pkg)
    variable = (from_src or {}).get("variable", BUFFER_OPS_ENV)
    env_value = os.environ.get(variable)
    rec: dict[str, Any] = {"variable": variable, "env": env_value, "set": env_value is not None,
                           "triton_version": version}
    if knob.get("default") is not None:
        rec["default_when_unset"] = bool(knob["default"])
        rec["default_source"] = f"{knob['knob']} (installed triton)"
    else:
        if from_src:
            rec["default_when_unset"] = from_src["default"]
            rec["default_source"] = from_src["source"]
        else:
            rec["default_when_unset"] = buffer_ops_by_version(version)
            rec["default_source"] = ("version rule: off for triton <= 3.5, on from 3.6"
                                     if version else "unknown: no triton found")
    if env_value is None:
        rec["effective"] = rec["default_when_unset"]
    elif knob.get("value") is not None:
        rec["effective"] = bool(knob["value"])
    else:
        rec["effective"] = _env_truthy(env_value, version)
    by_version = buffer_ops_by_version(version)
    if (by_version is not None and rec["default_when_unset"] is not None
            and by_version != rec["default_when_unset"]):
        rec["note"] = (f"this triton ({version}) differs from the upstream release rule "
                       f"(default {'on' if by_version else 'off'}); a vendor build (DTK/FlagTree)?")
    return rec


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
    roots = [p for p, _ in _install_roots()]
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
                    "memory_bytes": _mib_to_bytes(mib),
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
