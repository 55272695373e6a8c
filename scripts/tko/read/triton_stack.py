"""Which Triton a DCU runs (its *stack*) and which backend compile options that Triton accepts.

THE place both are decided. Three Triton stacks run on Hygon DCUs (references/dcu_notes.md §3):

* ``dtk``: the DTK's own wheels (``3.1.0+das.opt1.dtk25042``, ``3.3.x``, ``3.5.1+das``); no public
  source, so their options are known only by reading the installed backend;
* ``flagtree-hcu``: FlagTree's ``hcu`` backend (flagos-ai/FlagTree ``third_party/hcu``), Triton 3.0
  based (``flagtree==0.4.0+hcu3.0``, buffer ops behind ``HCUGCN_USE_BUFFER_OPS``), ported to 3.6
  (``0.6.0+hcu3.6``, FlagTree PR #563, ``knobs.hcu``);
* ``triton-das``: HYGON-AI/triton-das, upstream ``release/3.6.x`` plus an ``hcu`` backend (buffer ops
  through ``knobs.amd.use_buffer_ops``, failed compiles archived under
  ``~/.triton/cache/failed_kernels``, the multi-process tuner ``hcutune_cli``);

and ``upstream`` (triton-lang wheels) everywhere else. What a backend accepts is never assumed: it
is the field list of the options dataclass of the installed backend's compiler module
(``HIPOptions`` of ``triton.backends.amd`` / ``triton.backends.hcu``), read at run time through
``triton.backends.backends`` (:func:`backend_option_fields`). Sweeps, pins, probe variants and the
benchmark template ask :func:`offered_options` / :func:`drop_unaccepted` before they pass an option.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import archs
from ..base.versions import parse_version

HCU_BACKEND = "hcu"
STACK_NAMES = ("upstream", "dtk", "flagtree-hcu", "triton-das")
# Files whose presence in an installed backend folder tells the stacks apart (DTK wheels ship
# compiler_hcu.py next to compiler.py; triton-das ships hcutune_cli.py in backends/hcu).
MARKER_FILES = ("compiler.py", "compiler_hcu.py", "driver.py", "hcutune_cli.py")


@dataclass(frozen=True)
class TunableOption:
    """A backend compile option the sweeps and the compile probe may vary.

    ``scope``: ``hip`` = on any HIP backend whose options have the field; ``hcu`` = only on an HCU
    backend (upstream's ``schedule_hint`` has "right now no effect", triton-lang 3.9 compiler.py).
    ``dot_only``: it changes the lowering of ``tl.dot`` only (the dataclass comments say so).
    ``archs``: the archs it is meant for (empty: all). The values tried are
    ``backend_option_values`` of references/decision_rules.yaml."""
    name: str
    scope: str
    dot_only: bool
    archs: tuple[str, ...]
    what: str


TUNABLE = (
    TunableOption("waves_per_eu", "hip", False, (), "occupancy target per EU (LLVM amdgpu-waves-per-eu)"),
    TunableOption("matrix_instr_nonkdim", "hip", True, (), "MFMA / MMAC instruction shape"),
    TunableOption("kpack", "hip", True, (), "k-packing of dot operands (forced to 1 on gfx950)"),
    TunableOption("schedule_hint", "hcu", True, (), "instruction-scheduling variant of tt.dot"),
    TunableOption("sched_latency", "hcu", True, ("gfx928", "gfx936"),
                  "MMAC / DS latency model given to DTK clang (legacy gfx928 / gfx936)"),
    TunableOption("buffer_cache_swizzle", "hcu", False, (), "cache swizzle of buffer ops"),
    TunableOption("mmac_layout_force", "hcu", True, (), "forced MMAC layout (1 legacy .. 4)"),
    TunableOption("enable_v_mmac_cluster", "hcu", True, (), "LLVM HCUMMACCluster mode"),
)
TUNABLE_NAMES = tuple(t.name for t in TUNABLE)


# --------------------------------------------------------------------------- reading the backend

def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    return repr(value)


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return _json_value(f.default)
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return "<factory>"
    return None


def options_dataclass(module: Any) -> tuple[type | None, str | None]:
    """(the options dataclass a backend's compiler module defines, why none) — ``HIPOptions``,
    ``CUDAOptions``: the one dataclass of the module whose name ends in ``Options``."""
    found = [obj for obj in vars(module).values()
             if isinstance(obj, type) and dataclasses.is_dataclass(obj)
             and obj.__module__ == module.__name__ and obj.__name__.endswith("Options")]
    if len(found) == 1:
        return found[0], None
    names = ", ".join(sorted(c.__name__ for c in found))
    return None, (f"several options dataclasses ({names})" if found
                  else f"no *Options dataclass in {module.__name__}")


def _defining_module(cls: Any) -> Any:
    """Triton 3.3 loads its backends under a bare name (``amd``) that never enters sys.modules: the
    module's namespace is then the globals of the class's own functions."""
    import types

    for attr in vars(cls).values():
        namespace = getattr(attr, "__globals__", None)
        if namespace is not None:
            module = types.ModuleType(namespace.get("__name__", "backend"))
            module.__dict__.update(namespace)
            return module
    return None


def backend_option_record(compiler: Any) -> dict:
    """``{class, file, fields: {name: default}}`` of one registered backend's compiler class, or
    ``{error}``. Reads the dataclass; never instantiates it (HCU options probe the DTK on init)."""
    module = sys.modules.get(getattr(compiler, "__module__", "") or "") or _defining_module(compiler)
    if module is None:
        return {"error": f"module of {compiler!r} not loaded"}
    cls, why = options_dataclass(module)
    if cls is None:
        return {"error": why, "module": module.__name__, "file": getattr(module, "__file__", None)}
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "file": getattr(module, "__file__", None),
            "fields": {f.name: _field_default(f) for f in dataclasses.fields(cls)}}


def backend_option_fields(registry: dict) -> dict:
    """``{backend name: record}`` for ``triton.backends.backends`` (3.0+: name -> Backend(compiler,
    driver))."""
    out = {}
    for name in sorted(registry):
        try:
            out[name] = backend_option_record(getattr(registry[name], "compiler", None))
        except Exception as exc:  # one odd backend must not hide the others
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


@functools.lru_cache(maxsize=1)
def _installed() -> tuple[tuple[str, Any], ...]:
    try:
        from triton.backends import backends as registry
    except Exception as exc:
        return (("__error__", f"{type(exc).__name__}: {exc}"),)
    return tuple(backend_option_fields(registry).items())


def installed_backend_options() -> dict:
    """:func:`backend_option_fields` of the Triton this process imports (``{}`` when none does)."""
    found = dict(_installed())
    return {} if "__error__" in found else found


def compiling_backend(records: dict, arch: str | None = None, hip: bool = True) -> str | None:
    """The backend that compiles for ``arch`` on a HIP (``hip``: ROCm / DTK) or CUDA build: ``hcu``
    for a Hygon arch, or for any HIP target when no ``amd`` backend is there; ``amd`` for the other
    HIP targets; ``nvidia`` on CUDA. None when that backend is not installed."""
    if not hip:
        return "nvidia" if "nvidia" in records else None
    known = archs.info(arch) if arch and not archs.is_nvidia(arch) else None
    hygon = known is not None and known.vendor == "hygon"
    if HCU_BACKEND in records and (hygon or arch is None or "amd" not in records):
        return HCU_BACKEND
    return "amd" if "amd" in records else None


def accepted_options(records: dict, backend: str | None) -> dict | None:
    """``{field: default}`` of ``backend``'s options dataclass; None when it was not read."""
    rec = records.get(backend) if backend else None
    fields = rec.get("fields") if isinstance(rec, dict) else None
    return dict(fields) if isinstance(fields, dict) else None


def hcu_backend_installed() -> bool:
    return accepted_options(installed_backend_options(), HCU_BACKEND) is not None


def compile_arch(arch: str) -> tuple[str, str | None]:
    """The arch an offline compile targets for a requested one, and the proxy note: a Hygon arch
    compiles as itself where an HCU backend is installed (it targets gfx926-gfx946 through DTK
    clang), else for its upstream proxy (``archs.compile_target``)."""
    name = archs.normalize(arch)
    known = archs.info(name)
    if known is not None and known.vendor == "hygon" and hcu_backend_installed():
        return name, None
    return archs.compile_target(name)


# --------------------------------------------------------------------------- what may be passed

def option_values(rules: dict | None = None) -> dict[str, list]:
    """``backend_option_values`` of references/decision_rules.yaml: the values tried per option."""
    from ..base.decide import threshold

    values = threshold("backend_option_values", rules)
    return {k: list(v) for k, v in values.items()} if isinstance(values, dict) else {}


def kernel_uses_dot(text: str) -> bool:
    """Whether kernel source calls ``tl.dot`` / ``tl.dot_scaled`` (dot-only options matter)."""
    return bool(re.search(r"\b(?:tl|triton\.language)\.dot(?:_scaled)?\s*\(", text))


def _why_not(opt: TunableOption, accepted: dict | None, backend: str | None, arch: str | None,
             uses_dot: bool) -> str | None:
    if accepted is None:
        return "no backend options could be read"
    if opt.name not in accepted:
        return f"not options of the installed {backend or '?'} backend"
    if opt.scope == HCU_BACKEND and backend != HCU_BACKEND:
        return "act on HCU backends only"
    if opt.dot_only and not uses_dot:
        return "act on tl.dot only and the kernel has none"
    if opt.archs and arch and archs.normalize(arch) not in opt.archs:
        return f"meant for {'/'.join(opt.archs)} only"
    return None


def offered_options(accepted: dict | None, backend: str | None, *, arch: str | None = None,
                    uses_dot: bool = True, rules: dict | None = None) -> tuple[dict[str, list], str | None]:
    """(``{option: values to try}``, one line saying which tunable options were left out and why).

    Only options that ``accepted`` (the backend's dataclass fields) has are ever offered; a value
    equal to the backend's default is not tried again."""
    values = option_values(rules)
    offered: dict[str, list] = {}
    reasons: dict[str, list[str]] = {}
    for opt in TUNABLE:
        why = _why_not(opt, accepted, backend, arch, uses_dot)
        if why is None:
            default = accepted.get(opt.name) if accepted else None
            tried = [v for v in values.get(opt.name, []) if v != default]
            if tried:
                offered[opt.name] = tried
                continue
            why = "no value besides the backend default to try"
        reasons.setdefault(why, []).append(opt.name)
    return offered, left_out_line(reasons)


def left_out_line(reasons: dict[str, list[str]]) -> str | None:
    if not reasons:
        return None
    return "backend options left out: " + "; ".join(f"{', '.join(names)} ({why})"
                                                    for why, names in reasons.items())


def drop_unaccepted(options: dict, accepted: dict | None, backend: str | None) -> tuple[dict, str | None]:
    """``options`` without the backend options (``tko.base.config.BACKEND_OPTIONS``) that ``accepted``
    lacks, and the line naming them. Kernel meta-parameters are kept whatever their name.
    ``accepted`` None (unknown) keeps everything: nothing is known to be refused."""
    from ..base.config import BACKEND_OPTIONS

    if accepted is None:
        return dict(options), None
    dropped = [k for k in options if k in BACKEND_OPTIONS and k not in accepted]
    if not dropped:
        return dict(options), None
    kept = {k: v for k, v in options.items() if k not in dropped}
    return kept, (f"left out {', '.join(f'{k}={options[k]!r}' for k in dropped)}: not options of the "
                  f"installed {backend or '?'} backend")


def installed_accepted(arch: str | None = None, hip: bool = True) -> tuple[dict | None, str | None]:
    """(accepted options, backend name) of the backend this process's Triton compiles with."""
    records = installed_backend_options()
    backend = compiling_backend(records, arch, hip)
    return accepted_options(records, backend), backend


# --------------------------------------------------------------------------- which stack

@dataclass(frozen=True)
class Stack:
    name: str
    title: str
    sources: tuple[str, ...]


STACKS = {s.name: s for s in (
    Stack("upstream", "upstream Triton (triton-lang wheels): no Hygon arch, proxies only",
          ("https://github.com/triton-lang/triton",)),
    Stack("dtk", "DTK Triton wheel (Triton 3.1 / 3.3 / 3.5 with Hygon changes; source not public)",
          ("https://github.com/flagos-ai/Torch-FL/issues/82",
           "https://github.com/flagos-ai/libtriton_jit/issues/40")),
    Stack("flagtree-hcu", "FlagTree hcu backend (Triton 3.0 base; 3.6 port from FlagTree PR #563)",
          ("https://github.com/flagos-ai/FlagTree/tree/main/third_party/hcu",
           "https://github.com/flagos-ai/FlagTree/pull/563")),
    Stack("triton-das", "HYGON-AI/triton-das: Triton release/3.6.x (upstream 85400f80bf) + hcu backend",
          ("https://github.com/HYGON-AI/triton-das",)),
)}
TUNER_ENV = "TRITON_HCUTUNE*"


def backend_files(pkg: Path | None) -> dict[str, list[str]]:
    """``{backend folder: marker files present}`` of an installed triton package (no import)."""
    root = Path(pkg) / "backends" if pkg else None
    if root is None or not root.is_dir():
        return {}
    out = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("__")):
        out[folder.name] = [f for f in MARKER_FILES if (folder / f).is_file()]
    return out


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _stack_name(triton: dict, buffer_ops: dict) -> tuple[str | None, list[str]]:
    """The stack and the facts that decided it (fields of the wrong type read as absent)."""
    if triton.get("importable") is not True:
        return None, ["triton is not importable"]
    version = _str(triton.get("version")) or ""
    files = {k: _strs(v) for k, v in _dict(triton.get("backend_files")).items()}
    knob = _str(_dict(triton.get("buffer_ops_knob")).get("knob"))
    variable = _str(buffer_ops.get("variable"))
    flagtree = _str(triton.get("flagtree_version"))
    backends = _strs(triton.get("backends"))
    hcu_files = sorted(f"{d}/compiler_hcu.py" for d, fs in files.items() if "compiler_hcu.py" in fs)
    has_hcu = HCU_BACKEND in backends or HCU_BACKEND in files
    if flagtree or knob == "triton.knobs.hcu.use_buffer_ops" or variable == "HCUGCN_USE_BUFFER_OPS":
        why = [f"flagtree {flagtree} installed" if flagtree else
               f"buffer ops read through {knob or variable} (FlagTree's hcu knobs)"]
        return "flagtree-hcu", why
    if not has_hcu and not hcu_files:
        if "+das" in version:
            return "dtk", [f"version {version} (+das: a DTK wheel); no hcu backend found"]
        return "upstream", [f"backends {', '.join(backends) or 'none'}: no hcu backend"]
    marker = "hcu backend" if has_hcu else ", ".join(hcu_files)
    if parse_version(version)[:2] >= (3, 6):
        return "triton-das", [f"{marker} on Triton {version} (3.6 base)",
                              f"buffer ops read through {knob or variable}"]
    return "dtk", [f"{marker} on Triton {version} (below 3.6: a DTK wheel)"]


def _extras(records: dict, backend: str | None, files: dict) -> dict:
    """What the compiling backend's own files say: failed-compile archive, multi-process tuner."""
    path = _str(_dict(records.get(backend)).get("file")) if backend else None
    text = ""
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except (OSError, ValueError):
            text = ""
    failed = "~/.triton/cache/failed_kernels" if '"failed_kernels"' in text else None
    tuner = (f"hcutune_cli ({TUNER_ENV})" if "hcutune_cli.py" in (files.get(backend or "") or [])
             else None)
    return {"failed_kernels_dir": failed, "tuner": tuner}


def classify(triton: Any, buffer_ops: Any = None, rules: dict | None = None) -> dict:
    """The ``triton_stack`` record of a ``triton_env/1`` (its ``triton`` and ``buffer_ops``)."""
    triton, buffer_ops = _dict(triton), _dict(buffer_ops)
    name, why = _stack_name(triton, buffer_ops)
    records = {k: v for k, v in _dict(triton.get("backend_options")).items() if isinstance(v, dict)}
    backend = compiling_backend(records, "gfx936") if records else None
    accepted = accepted_options(records, backend)
    offered, left_out = offered_options(accepted, backend, rules=rules)
    stack = STACKS.get(name) if name else None
    version = _str(triton.get("version"))
    rec = _dict(records.get(backend)) if backend else {}
    error = None if accepted is not None else (
        _str(rec.get("error")) or ("not in this record (written before backend_options)"
                                   if "backend_options" not in triton and triton.get("importable") is True
                                   else "triton.backends registered no backend" if not records
                                   else "no HIP backend registered"))
    default = buffer_ops.get("default_when_unset")
    return {
        "name": name, "title": stack.title if stack else None, "why": why,
        "sources": list(stack.sources) if stack else [],
        "triton_version": version, "base": ".".join(map(str, parse_version(version)[:2])) or None,
        "flagtree_version": _str(triton.get("flagtree_version")),
        "backend": backend, "options_class": _str(rec.get("class")),
        "options": sorted(accepted) if accepted is not None else None, "options_error": error,
        "tunable": offered, "left_out": left_out,
        "buffer_ops": {"variable": _str(buffer_ops.get("variable")),
                       "read_by": _str(buffer_ops.get("default_source")),
                       "default": default if isinstance(default, bool) else None},
        **_extras(records, backend, {k: _strs(v) for k, v in _dict(triton.get("backend_files")).items()}),
    }


def stack_title(stack: dict) -> str:
    """``name (title), triton X (base B)[, flagtree F]``: the stack in one line."""
    return (f"{stack.get('name') or 'unknown'} ({stack.get('title') or 'not recognised'}), "
            f"triton {stack.get('triton_version')} (base {stack.get('base') or '?'})"
            + (f", flagtree {stack['flagtree_version']}" if stack.get("flagtree_version") else ""))


def stack_table(stack: dict) -> list[str]:
    """The stack's facts as two-column rows for a human (check_env.py's summary, under its title)."""
    opts = stack.get("options")
    buffer_ops = stack.get("buffer_ops") or {}
    archive, tuner = stack.get("failed_kernels_dir"), stack.get("tuner")
    extras = "; ".join(x for x in (f"failed compiles archived under {archive}" if archive else "",
                                   f"tuner {tuner}" if tuner else "") if x)
    rows = [
        ("recognised by", "; ".join(stack.get("why") or []) or "-"),
        ("DCU backend", f"{stack.get('backend') or 'none'}"
         + (f" ({stack['options_class']}, {len(opts)} options)" if opts is not None else
            f" (options not read: {stack.get('options_error') or 'no backend record'})")),
        ("buffer ops", f"{buffer_ops.get('variable')} read by {buffer_ops.get('read_by')}"),
        ("tunable here", ", ".join(f"{k} {v}" for k, v in (stack.get("tunable") or {}).items()) or "none"),
        ("left out", (stack.get("left_out") or "-").replace("backend options left out: ", "")),
    ] + ([("extras", extras)] if extras else [])
    width = max(len(k) for k, _ in rows)
    return [f"  {k:<{width}}  {v}" for k, v in rows]
