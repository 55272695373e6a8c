"""Compile one @triton.jit function of a kernel file for a chosen target, on a machine with no GPU.

The kernel file may be TorchInductor output (any era: see ``tko.read.kernel_source``) or hand-written.
Loading never runs the file as written: the module is re-compiled from its AST with

- the ``triton_heuristics.*`` / ``triton.autotune`` / ``triton.heuristics`` decorators removed (they
  build a ``CachingAutotuner`` / ``Autotuner`` that wants a GPU; the bare ``JITFunction`` is kept),
- top-level ``*.set_driver_to_gpu()`` calls dropped (Inductor files call it at import, 2.6+),
- every other top-level statement guarded, so an import that the installed Triton lacks (e.g.
  ``from triton.compiler.compiler import AttrsDescriptor`` on triton >= 3.3) does not stop the load,
- ``__name__`` set so that an appended ``if __name__ == "__main__":`` runner does not run,
- ``TRITON_INTERPRET`` off while it loads (``@triton.jit`` reads it at decoration: under the
  interpreter it gives an ``InterpretedFunction``, which does not compile), and off in the workers.

The hints come from the static ``triton_meta`` (kept as written), from a captured ``launch`` event
(``autotune_event/1``), or from ``--signature``; the config from the caller, the declared configs, or a
default rule from Inductor's size hints.  Then::

    triton.compile(ASTSource(fn, signature, constexprs, attrs),
                   target=GPUTarget("hip", arch, 64) | GPUTarget("cuda", cc, 32), options=...)

Main entry for other modules::

    compile_kernel_file(path, arch, *, kernel=None, config=None, pointer_range=None,
                        extra_attrs=None, signature=None, env=None, launch=None) -> CompileOutcome

A worker mode (``python -m tko.compile.offline_compile --worker spec.json [spec.json ...]``) compiles in a fresh
process and writes the stages to files; ``tko.compile.compile_probe`` uses it because old Tritons read
``AMDGCN_USE_BUFFER_OPS`` at import. Finished compiles are kept between runs (``tko.compile.compile_cache``).
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..read import triton_stack
from ..base.config import TritonConfig
from ..base.errors import InputError, ToolFailure
from ..base.versions import package_version, parse_version
from ..base import archs, inputs
from . import compile_cache
from ..read import kernel_source

TEXT_STAGES = ("source", "ttir", "ttgir", "llir", "amdgcn", "ptx")
BLOCK_NAMES_X = ("XBLOCK",)
REDUCTION_BLOCKS = ("RBLOCK", "R0_BLOCK", "R1_BLOCK")
TORCH_TO_TRITON_DTYPE = {
    "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "float64": "fp64", "double": "fp64", "int64": "i64", "long": "i64", "int32": "i32", "int": "i32",
    "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16", "complex64": "fp32",
}
ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8, "i64": 8, "i32": 4, "i16": 2, "i8": 1,
                 "u8": 1, "i1": 1, "u16": 2, "u32": 4, "u64": 8, "fp8e4nv": 1, "fp8e5": 1,
                 "fp8e4b8": 1, "fp8e5b16": 1}
VALID_SCALAR_TYPES = set(ELEMENT_BYTES) | {"u1", "fp8e4b15", "constexpr"}


@dataclass
class CompileOutcome:
    """What one offline compile produced.  ``asm`` holds the text stages by suffix."""

    kernel: str
    requested_arch: str
    target: dict                      # {"backend", "arch", "warp_size"}
    proxy_note: str | None
    asm: dict[str, str]
    metadata: dict
    signature: dict
    constexprs: dict
    attrs: dict                       # {arg name: [[attr, value], ...]}
    options: dict
    config: dict
    config_source: str
    notes: list[str] = field(default_factory=list)

    def to_json(self, with_asm: bool = False) -> dict:
        doc = asdict(self)
        if not with_asm:
            doc.pop("asm")
        return doc


# --------------------------------------------------------------------------- loading

def _strip_decorators(func: ast.FunctionDef) -> list[str]:
    """Keep only @triton.jit; return the names of the decorators removed."""
    kept, removed = [], []
    for dec in func.decorator_list:
        name = ast.unparse(dec.func if isinstance(dec, ast.Call) else dec)
        if kernel_source.is_jit_decorator(name):
            kept.append(dec)
        else:
            removed.append(name)
    func.decorator_list = kept
    return removed


def _is_driver_call(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and ast.unparse(stmt.value.func).endswith("set_driver_to_gpu"))


def _guard(stmt: ast.stmt) -> ast.stmt:
    handler = ast.ExceptHandler(type=ast.Name("Exception", ast.Load()), name=None,
                                body=[ast.Pass()])
    node = ast.Try(body=[stmt], handlers=[handler], orelse=[], finalbody=[])
    return ast.copy_location(node, stmt)


def load_module_namespace(path: str | Path, text: str | None = None) -> tuple[dict, list[str]]:
    """Execute a neutralised copy of the kernel module; returns (globals, notes)."""
    path = str(Path(path).resolve())
    if text is None:
        text = Path(path).read_text(encoding="utf-8")
    tree = kernel_source.parse_source(text, path)
    notes: list[str] = []
    body: list[ast.stmt] = []
    for stmt in tree.body:
        if _is_driver_call(stmt):
            continue
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            body.append(stmt)  # must stay a bare first statement to compile at all
            continue
        if isinstance(stmt, ast.FunctionDef):
            names = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in stmt.decorator_list]
            if any(kernel_source.is_jit_decorator(n) for n in names):
                removed = _strip_decorators(stmt)
                if removed:
                    notes.append(f"{stmt.name}: compiled without its {', '.join(removed)} decorator(s)")
            body.append(stmt)
        elif isinstance(stmt, ast.ClassDef):
            body.append(_guard(stmt))
        else:
            body.append(_guard(stmt))
    tree.body = body
    ast.fix_missing_locations(tree)
    module_name = "tko_kernel_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    namespace: dict[str, Any] = {"__name__": module_name, "__file__": path, "__builtins__": __builtins__}
    code = compile(tree, path, "exec")  # same file name: inspect.getsource reads the real lines
    folder = os.path.dirname(path)
    added = folder not in sys.path
    if added:  # sibling modules of a hand-written kernel (shared @triton.jit helpers) must import
        sys.path.insert(0, folder)
    try:
        with _env({"TRITON_INTERPRET": None}):  # a JITFunction to compile, not the interpreter's
            exec(code, namespace)  # noqa: S102 - the decorators that need a GPU were removed above
    except Exception as exc:
        raise ToolFailure(f"{path}: loading the kernel module failed: {type(exc).__name__}: {exc}") from None
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    return namespace, notes


# --------------------------------------------------------------------------- signature / hints

def parse_signature_flag(text: str) -> dict[str, str]:
    """'x_ptr=*fp32,n=i32' -> {'x_ptr': '*fp32', 'n': 'i32'}."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, dtype = item.partition("=")
        name, dtype = name.strip(), dtype.strip()
        if not sep or not name or not dtype:
            raise InputError(f"--signature entry {item!r} is not NAME=TYPE (e.g. x_ptr=*fp32, n=i32)")
        base = dtype[1:] if dtype.startswith("*") else dtype
        if base not in VALID_SCALAR_TYPES:
            raise InputError(f"--signature {name}: unknown type {dtype!r}; use Triton names "
                             f"(*fp32, *fp16, *bf16, *i64, i32, i64, fp32, ...)")
        out[name] = dtype
    return out


def parse_config_flag(text: str) -> dict:
    """'XBLOCK=1024,num_warps=4' -> {'kwargs': {'XBLOCK': 1024}, 'num_warps': 4, ...}."""
    try:
        cfg = TritonConfig.from_assignments(text)
    except ValueError as exc:
        raise InputError(f"--config {exc}") from None
    return cfg.explicit().record()


def normalize_config_dict(config: dict | None) -> dict:
    """Accept {'XBLOCK': 1024, 'num_warps': 4} or the event shape {'kwargs': {...}, 'num_warps': ...}."""
    if not config:
        return TritonConfig().record()
    if isinstance(config.get("flat"), dict):  # a standalone file's recorded config: {"flat": ..., "grid": ...}
        config = config["flat"]
    if isinstance(config.get("kwargs"), dict):
        return TritonConfig.from_record(config).record()
    return kernel_source.normalize_config(dict(config)) or TritonConfig().record()


def _dtype_from_torch(text: str | None) -> str | None:
    if not text:
        return None
    name = str(text).replace("torch.", "")
    return TORCH_TO_TRITON_DTYPE.get(name)


def _scalar_type(value: Any) -> str:
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -2**31 <= value < 2**31 else ("u64" if value >= 2**63 else "i64")
    return "fp32"


def hints_from_launch(kernel: dict, launch: dict) -> tuple[dict, dict, dict, list[str]]:
    """Signature, constexprs and attrs a JIT launch with these arguments would specialise to."""
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    attrs: dict[str, list] = {}
    notes: list[str] = []
    args = {a.get("name"): a for a in launch.get("args", []) if isinstance(a, dict)}
    for param in kernel["params"]:
        arg = args.get(param["name"])
        if arg is None:
            continue
        if param["kind"] == "constexpr":  # a flag passed by keyword (scale_by_weight=True): its value
            if arg.get("kind") == "scalar" and isinstance(arg.get("value"), (bool, int, float, str)):
                constexprs[param["name"]] = arg["value"]
            continue
        if arg.get("kind") == "tensor":
            dtype = _dtype_from_torch(arg.get("dtype"))
            if dtype is None:
                notes.append(f"{param['name']}: dtype {arg.get('dtype')!r} not mapped")
                continue
            signature[param["name"]] = "*" + dtype
            offset_bytes = int(arg.get("storage_offset") or 0) * ELEMENT_BYTES.get(dtype, 1)
            if offset_bytes % 16 == 0:  # torch allocations are 16-byte aligned at offset 0
                attrs.setdefault(param["name"], []).append(["tt.divisibility", 16])
        elif arg.get("kind") == "none":
            signature[param["name"]] = "constexpr"
            constexprs[param["name"]] = None
        else:
            value = arg.get("value")
            if isinstance(value, int) and not isinstance(value, bool) and value == 1:
                signature[param["name"]] = "constexpr"  # the JIT folds ints equal to 1
                constexprs[param["name"]] = 1
                continue
            signature[param["name"]] = _scalar_type(value)
            if isinstance(value, int) and not isinstance(value, bool) and value % 16 == 0:
                attrs.setdefault(param["name"], []).append(["tt.divisibility", 16])
    return signature, constexprs, attrs, notes


def launch_from_standalone_spec(spec: dict) -> dict:
    """A captured standalone file's ``_TKO_SPEC`` as a launch event: recorded args (the keyword
    ones too: a constexpr flag passed by name) + first config."""
    extra = spec.get("extra_kwargs") if isinstance(spec.get("extra_kwargs"), dict) else {}
    launch: dict[str, Any] = {"args": [a for a in spec.get("args", []) if isinstance(a, dict)]
                              + [dict(a, name=n) for n, a in extra.items() if isinstance(a, dict)]}
    configs = [c for c in spec.get("configs") or [] if isinstance(c, dict)]
    if configs:
        launch["winner"] = configs[0]
    return launch


def _size_hints(kernel: dict) -> dict:
    heur = kernel.get("heuristic") or {}
    hints = heur.get("size_hints")
    if isinstance(hints, dict):
        return {("r0_" if k == "r" else k): v for k, v in hints.items() if isinstance(v, int)}
    if isinstance(hints, list):
        ints = [h for h in hints if isinstance(h, int)]
        if "reduction" in heur.get("kind", ""):
            return dict(zip(("x", "r0_"), ints))
        return dict(zip(("y", "x"), ints)) if len(ints) == 2 else dict(zip(("x",), ints))
    return {}


def default_config(kernel: dict) -> tuple[dict, str] | None:
    """A plausible config for an Inductor kernel whose configs are generated at run time."""
    constexpr_names = [p["name"] for p in kernel["params"] if p["kind"] == "constexpr"
                       and "constant" not in p]
    kind = (kernel.get("heuristic") or {}).get("kind", "")
    sizes = _size_hints(kernel)
    if not kind or not constexpr_names:
        return None
    kw: dict[str, int] = {}
    r = sizes.get("r0_", 1)
    for name in constexpr_names:
        if name == "XBLOCK":
            if "reduction" in kind:
                kw[name] = 1
            else:
                kw[name] = min(sizes.get("x", 1024), 32 if "YBLOCK" in constexpr_names else 1024)
        elif name == "YBLOCK":
            kw[name] = min(sizes.get("y", 32), 32)
        elif name in REDUCTION_BLOCKS:
            kw[name] = r if kind == "persistent_reduction" else min(r, 2048)
        elif name.endswith("BLOCK"):
            kw[name] = 64
    warps = 8 if ("reduction" in kind and r >= 2048) else 4
    cfg = TritonConfig.of(kw, num_warps=warps, num_stages=1).record()
    return cfg, (f"default rule for triton_heuristics.{kind} from size_hints={sizes} (Inductor picks "
                 f"its configs at run time; pass config= / --config to match the captured winner)")


# --------------------------------------------------------------------------- plan

@dataclass
class CompilePlan:
    kernel: str
    signature: dict
    constexprs: dict
    attrs: dict
    options: dict
    config: dict
    config_source: str
    notes: list


def _types_from_meta(meta: dict | None) -> tuple[dict[str, str], dict[str, Any], dict[str, list]]:
    """Signature, constexprs and attrs from a kernel's ``triton_meta``."""
    sig: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    attrs: dict[str, list] = {}
    if meta:
        for name, dtype in meta["signature"].items():
            sig[name] = str(dtype)
        constexprs.update(meta["constants"])
        for name, pairs in meta["hints"].items():
            for key, value in pairs:
                if key == "tt.equal_to":  # old-era equal_to_1: a constant 1 on triton >= 3.3
                    sig[name] = "constexpr"
                    constexprs[name] = value
                else:
                    attrs.setdefault(name, []).append([key, value])
    return sig, constexprs, attrs


def _merge_launch(kernel: dict, launch: dict, meta: dict | None, sig: dict, constexprs: dict, attrs: dict,
                  notes: list[str]) -> None:
    """What a captured launch event says of types, constexprs and attrs (triton_meta wins)."""
    l_sig, l_const, l_attrs, l_notes = hints_from_launch(kernel, launch)
    notes += l_notes
    for name, dtype in l_sig.items():
        if name not in sig or not meta:
            sig[name] = dtype
    for name, value in l_const.items():
        constexprs.setdefault(name, value)
    if not meta:
        attrs.update(l_attrs)


def _merge_signature(kernel: dict, signature: dict, offline_only: bool, sig: dict, attrs: dict) -> None:
    """A given signature overrides the types; offline only, its pointers are taken as 16-byte aligned."""
    for name in signature:
        if name not in {p["name"] for p in kernel["params"]}:
            raise InputError(f"signature names {name!r}, which is not a parameter of "
                             f"{kernel['name']} ({', '.join(p['name'] for p in kernel['params'])})")
    sig.update(signature)
    if offline_only:
        # A JIT launch marks 16-byte-aligned pointers; offline we assume torch's aligned allocations.
        for name, dtype in signature.items():
            if dtype.startswith("*"):
                attrs.setdefault(name, []).append(["tt.divisibility", 16])


def _pick_config(kernel: dict, config: dict | None, launch: dict | None) -> tuple[dict, str]:
    """Config: given > launch winner > first declared > default rule; (config, where from)."""
    if config:
        return normalize_config_dict(config), "given"
    if launch and isinstance(launch.get("winner"), dict):
        return normalize_config_dict(launch["winner"]), "captured winner"
    if kernel.get("configs"):
        return normalize_config_dict(kernel["configs"][0]), "first declared config"
    default = default_config(kernel)
    return default if default else (normalize_config_dict(None), "none")


def _fill_constexprs(kernel: dict, cfg: dict, sig: dict, constexprs: dict, notes: list[str]) -> None:
    """Every constexpr a value (known, the config's, the default); an error for what has none, or
    a parameter without a type."""
    missing_types, missing_constexpr = [], []
    for param in kernel["params"]:
        name = param["name"]
        if param["kind"] == "constexpr" or sig.get(name) == "constexpr":
            sig[name] = "constexpr"
            if name in constexprs:
                continue
            if name in cfg["kwargs"]:
                constexprs[name] = cfg["kwargs"][name]
            elif "default" in param:
                constexprs[name] = param["default"]
            else:
                missing_constexpr.append(name)
        elif name not in sig:
            missing_types.append(name)
    if missing_types:
        raise InputError(f"{kernel['name']}: no type for {', '.join(missing_types)}; pass a signature "
                         f"such as --signature '{','.join(f'{n}=*fp32' if 'ptr' in n else f'{n}=i32' for n in missing_types)}' "
                         f"or a captured launch event")
    if missing_constexpr:
        raise InputError(f"{kernel['name']}: no value for constexpr {', '.join(missing_constexpr)}; "
                         f"pass --config '{','.join(f'{n}=...' for n in missing_constexpr)}'")
    unknown_cfg = [k for k in cfg["kwargs"] if k not in sig]
    if unknown_cfg:
        notes.append(f"config keys {', '.join(unknown_cfg)} are not parameters of {kernel['name']}; ignored")


def _final_attrs(kernel: dict, sig: dict, attrs: dict, pointer_range: int | bool | None,
                 extra_attrs: dict | None) -> dict:
    """The attrs with tt.pointer_range set (a width), dropped (False) or kept (None), the extra
    attrs added; none on a constexpr."""
    pointers = [p["name"] for p in kernel["params"] if sig.get(p["name"], "").startswith("*")]
    if pointer_range is True:
        pointer_range = 32
    if pointer_range:
        for name in pointers:
            pairs = [pr for pr in attrs.get(name, []) if pr[0] != "tt.pointer_range"]
            attrs[name] = pairs + [["tt.pointer_range", int(pointer_range)]]
    elif pointer_range is False:
        for name in pointers:
            attrs[name] = [pr for pr in attrs.get(name, []) if pr[0] != "tt.pointer_range"]
    for name, pairs in (extra_attrs or {}).items():
        if name not in sig:
            raise InputError(f"extra attrs name {name!r}, not a parameter of {kernel['name']}")
        attrs.setdefault(name, []).extend([list(p) for p in pairs])
    return {n: p for n, p in attrs.items() if p and sig.get(n) != "constexpr"}


def plan_compile(kernel: dict, *, config: dict | None = None, pointer_range: int | bool | None = None,
                 extra_attrs: dict | None = None, signature: dict | str | None = None,
                 launch: dict | None = None) -> CompilePlan:
    """Decide signature, constexprs, attrs and options for one kernel (no Triton needed)."""
    notes: list[str] = []
    meta = kernel.get("triton_meta")
    sig, constexprs, attrs = _types_from_meta(meta)
    if launch:
        _merge_launch(kernel, launch, meta, sig, constexprs, attrs, notes)
    if isinstance(signature, str):
        signature = parse_signature_flag(signature)
    if signature:
        _merge_signature(kernel, signature, not meta and not launch, sig, attrs)
    cfg, source = _pick_config(kernel, config, launch)
    _fill_constexprs(kernel, cfg, sig, constexprs, notes)
    attrs = _final_attrs(kernel, sig, attrs, pointer_range, extra_attrs)
    options = TritonConfig.from_record(cfg).compile_options()
    ordered_sig = {p["name"]: sig[p["name"]] for p in kernel["params"]}
    return CompilePlan(kernel["name"], ordered_sig, constexprs, attrs, options, cfg, source, notes)


# --------------------------------------------------------------------------- compile

LOCAL = "local"


def local_target_doc() -> dict:
    """The current device's target, as the installed Triton's driver reports it (needs a GPU)."""
    try:
        from triton.runtime import driver
        target = driver.active.get_current_target()
    except Exception as exc:
        raise InputError(f"no local GPU target ({type(exc).__name__}: {exc}); name one with --arch") from None
    arch = target.arch if isinstance(target.arch, str) else f"sm_{target.arch}"
    return {"backend": target.backend, "arch": archs.normalize(arch), "warp_size": target.warp_size}


def make_target(arch: str) -> tuple[Any, dict, str | None, str]:
    """GPUTarget for an arch name, the DCU proxy note, and the normalised requested arch.

    ``"local"`` is the device of this machine exactly as the installed Triton sees it: on a DCU with
    DTK's Triton that is gfx936/gfx938 itself, so no proxy is used.
    """
    from triton.backends.compiler import GPUTarget

    if arch == LOCAL:
        from triton.runtime import driver

        target = driver.active.get_current_target()
        doc = local_target_doc()
        return target, doc, None, doc["arch"]
    requested = archs.normalize(arch)
    if not re.fullmatch(r"gfx[0-9a-f]{3,4}|sm_\d{2,3}", requested):
        raise InputError(f"unknown arch {arch!r}; use e.g. gfx942, gfx90a, gfx938, sm_90")
    # a DCU arch compiles as itself where an HCU backend is installed, else for its upstream proxy
    target_arch, note = triton_stack.compile_arch(requested)
    if archs.is_nvidia(target_arch):
        cc = int(target_arch[3:])
        return GPUTarget("cuda", cc, 32), {"backend": "cuda", "arch": target_arch, "warp_size": 32}, note, requested
    return (GPUTarget("hip", target_arch, 64), {"backend": "hip", "arch": target_arch, "warp_size": 64},
            note, requested)


@contextlib.contextmanager
def _env(overrides: dict | None):
    saved = {}
    for key, value in (overrides or {}).items():
        saved[key] = os.environ.get(key)
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = str(value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _metadata_dict(compiled: Any) -> dict:
    meta = compiled.metadata
    raw = meta._asdict() if hasattr(meta, "_asdict") else dict(meta)
    keep = ("name", "hash", "shared", "num_warps", "num_stages", "num_ctas", "warp_size",
            "waves_per_eu", "matrix_instr_nonkdim", "kpack", "arch", "triton_version", "maxnreg",
            "enable_fp_fusion", "global_scratch_size")
    out = {k: raw[k] for k in keep if k in raw}
    if "target" in raw:
        t = raw["target"]
        arch = getattr(t, "arch", None)
        out["target"] = {"backend": getattr(t, "backend", None),
                         "arch": archs.normalize(str(arch)) if arch is not None else None,
                         "warp_size": getattr(t, "warp_size", None)}
    return json.loads(json.dumps(out, default=str))


_LLD_STUB = """#!{python}
# Stand-in for ld.lld (no ROCm linker on this machine): copies the object so the compile finishes.
import shutil, sys
args = sys.argv[1:]
if "--version" in args:
    print("LLD 0 (tko stand-in: hsaco not linked)")
    sys.exit(0)
shutil.copyfile(args[args.index("-shared") + 1], args[args.index("-o") + 1])  # ld.lld -shared IN -o OUT
"""


@functools.lru_cache(maxsize=1)
def lld_stand_in() -> str:
    stub_dir = tempfile.mkdtemp(prefix="tko_lld_")
    atexit.register(shutil.rmtree, stub_dir, True)
    stub = Path(stub_dir) / "ld.lld"
    stub.write_text(_LLD_STUB.format(python=sys.executable), encoding="utf-8")
    stub.chmod(0o755)
    return str(stub)


def hip_linker_env(target_doc: dict) -> tuple[dict, str | None]:
    """Triton < 3.5 spawns ld.lld for the hsaco (and to hash the backend); without one the compile
    dies after the AMDGCN text exists.  Point TRITON_HIP_LLD_PATH at a copying stand-in then."""
    if target_doc.get("backend") != "hip":
        return {}, None
    version = parse_version(package_version("triton"))
    if not version or version >= (3, 5):
        return {}, None
    given = os.environ.get("TRITON_HIP_LLD_PATH")
    if given and Path(given).is_file():
        return {}, None
    import triton

    candidates = [Path(triton.__file__).parent / "backends" / "amd" / "llvm" / "bin" / "ld.lld",
                  Path("/opt/rocm/llvm/bin/ld.lld"), Path("/usr/bin/ld.lld")]
    if any(c.is_file() for c in candidates):
        return {}, None
    return {"TRITON_HIP_LLD_PATH": lld_stand_in()}, (
        f"no ld.lld here and triton {package_version('triton')} links the hsaco with it: a stand-in "
        f"copied the unlinked object, so the AMDGCN text is complete but the hsaco is not loadable")


def compile_plan(fn: Any, plan: CompilePlan, arch: str, env: dict | None = None) -> CompileOutcome:
    import triton
    from triton.compiler import ASTSource

    version = parse_version(package_version("triton"))
    if version and version < (3, 3):
        raise ToolFailure(f"offline compile needs triton >= 3.3 (dict attrs, constexprs=); "
                          f"installed {package_version('triton')}")
    target, target_doc, proxy_note, requested = make_target(arch)
    index = {name: i for i, name in enumerate(fn.arg_names)}
    missing = [n for n in plan.signature if n not in index]
    if missing:
        raise InputError(f"{plan.kernel}: parameters {missing} not found in the loaded function")
    attrs = {(index[n],): [list(p) for p in pairs] for n, pairs in plan.attrs.items()}
    src = ASTSource(fn, dict(plan.signature), constexprs=dict(plan.constexprs), attrs=attrs)
    linker_env, linker_note = hip_linker_env(target_doc)
    with _env({**linker_env, **(env or {})}):
        try:
            compiled = triton.compile(src, target=target, options=dict(plan.options))
        except Exception as exc:
            raise ToolFailure(compile_error_text(exc)) from None
    asm = {}
    for stage in TEXT_STAGES:
        try:
            value = compiled.asm.get(stage) if hasattr(compiled.asm, "get") else compiled.asm[stage]
        except Exception:
            value = None
        if isinstance(value, str):
            asm[stage] = value
    notes = list(plan.notes) + ([linker_note] if linker_note else [])
    if proxy_note:
        notes.append(proxy_note)
    return CompileOutcome(kernel=plan.kernel, requested_arch=requested, target=target_doc,
                          proxy_note=proxy_note, asm=asm, metadata=_metadata_dict(compiled),
                          signature=plan.signature, constexprs=plan.constexprs, attrs=plan.attrs,
                          options=plan.options, config=plan.config, config_source=plan.config_source,
                          notes=notes)


def compile_error_text(exc: BaseException, max_lines: int = 6) -> str:
    """The compiler's reason first, then the source context; no Python traceback.

    Triton's CompilationError reads ``at L:C:`` / source lines / caret / reason: the reason (after the
    caret) is what a reader needs, so it goes on the first line.
    """
    lines = [ln.rstrip() for ln in str(exc).splitlines() if ln.strip()]
    kind = type(exc).__name__
    caret = next((i for i, ln in enumerate(lines) if set(ln.strip()) == {"^"}), None)
    if caret is not None and caret + 1 < len(lines):
        reason = " ".join(ln.strip() for ln in lines[caret + 1:])
        where = lines[0].rstrip(":")
        code = lines[caret - 1].strip() if caret >= 1 else ""
        return "\n".join([f"{kind}: {reason}", f"{where}: {code}"])
    if not lines:
        return kind
    return "\n".join([f"{kind}: {lines[0]}"] + lines[1:max_lines])


def stderr_diagnostics(stderr: str, limit: int = 4) -> list[str]:
    """``file:line:col: error: ...`` lines the MLIR/LLVM passes print to stderr (not in the exception)."""
    found = []
    for line in stderr.splitlines():
        m = re.search(r"\berror:\s*(.+)", line)
        if m and "Failures have been detected" not in line:
            found.append(m.group(1).strip())
    return list(dict.fromkeys(found))[:limit]


def compile_kernel_file(path: str | os.PathLike, arch: str, *, kernel: str | None = None,
                        config: dict | None = None, pointer_range: int | bool | None = None,
                        extra_attrs: dict | None = None, signature: dict | str | None = None,
                        env: dict | None = None, launch: dict | None = None) -> CompileOutcome:
    """Compile one jit function of a kernel file for ``arch`` without a GPU.

    - ``kernel``: function name (default: the decorated / entry kernel of the file).
    - ``config``: ``{"XBLOCK": 1024, "num_warps": 4}`` or the ``autotune_event/1`` config shape;
      default: captured winner, first declared config, or a rule from Inductor's size hints.
    - ``pointer_range``: None keeps the hints as captured, 32/True adds ``tt.pointer_range=32`` to
      every pointer argument (what a JIT launch on Triton >= 3.6 adds for tensors under 2 GiB), False
      removes it.
    - ``extra_attrs``: ``{arg name: [["tt.divisibility", 16], ...]}`` added on top.
    - ``signature``: ``{"x_ptr": "*fp32", "n": "i32"}`` or ``"x_ptr=*fp32,n=i32"`` (hand-written kernels).
    - ``env``: environment set around the compile (in this process; for knobs Triton reads at import
      use :func:`compile_in_subprocess`).
    - ``launch``: an ``autotune_event/1`` ``launch`` event: argument dtypes and scalar values.

    Raises ``InputError`` for a bad file / signature / config and ``ToolFailure`` when Triton fails;
    gfx936 / gfx938 and other DCU archs compile for their upstream proxy (``proxy_note`` says so).
    A compile made before from the same inputs is read back, not repeated (``tko.compile.compile_cache``).
    """
    args = {"kernel": kernel, "config": config, "pointer_range": pointer_range, "extra_attrs": extra_attrs,
            "signature": signature, "launch": launch}
    cache_key, outcome = stored_outcome(path, arch, args, env)
    if outcome is None:
        outcome = _compile_kernel_file(Path(path), arch, env=env, **args)
        if cache_key:
            compile_cache.store(cache_key, outcome.to_json(with_asm=True))
    return outcome


def stored_outcome(path: str | os.PathLike, arch: str, args: dict,
                   env: dict | None = None) -> tuple[str | None, CompileOutcome | None]:
    """(the compile's store key, its stored outcome or None): ``args`` are the keyword arguments
    of :func:`compile_kernel_file`, ``env`` the settings over this process's environment. A file
    that cannot be read has no key: the compile itself says why."""
    try:
        text = inputs.read_text(path, "a kernel .py file")
    except (InputError, UnicodeDecodeError):
        return None, None
    cache_key = compile_cache.key(path, text, arch, args, env)
    stored = compile_cache.load(cache_key)
    try:
        return cache_key, CompileOutcome(**stored) if stored else None
    except TypeError:  # written by other code: compile again
        return cache_key, None


def _compile_kernel_file(path: Path, arch: str, *, kernel: str | None, config: dict | None,
                         pointer_range: int | bool | None, extra_attrs: dict | None,
                         signature: dict | str | None, env: dict | None, launch: dict | None) -> CompileOutcome:
    text, parsed = kernel_source.read_kernel_file(path)
    chosen = kernel_source.select_kernel(parsed, kernel)
    spec_notes = []
    if launch is None and parsed.get("standalone_spec"):
        launch = launch_from_standalone_spec(parsed["standalone_spec"])
        spec_notes.append("argument types and config from the captured standalone file's recorded launch")
    plan = plan_compile(chosen, config=config, pointer_range=pointer_range, extra_attrs=extra_attrs,
                        signature=signature, launch=launch)
    embedded = parsed.get("embedded_sources", {}).get(chosen["name"])
    with tempfile.TemporaryDirectory(prefix="tko_kernel_") as tmp:
        if embedded is not None:
            # Kernels embedded in Inductor output code: the JIT reads source from a real file.
            path = Path(tmp) / f"{chosen['name']}.py"
            path.write_text(embedded, encoding="utf-8")
            text = embedded
            spec_notes.append(f"kernel source taken from the async_compile.triton call at line "
                              f"{chosen['embedded']['call_line']}")
        namespace, load_notes = load_module_namespace(path, text)
        fn = namespace.get(chosen["name"])
        if fn is None or not hasattr(fn, "arg_names"):
            raise ToolFailure(f"{path}: {chosen['name']} did not load as a triton JITFunction")
        outcome = compile_plan(fn, plan, arch, env=env)
    outcome.notes = spec_notes + load_notes + outcome.notes
    if chosen.get("triton_meta") is None and not launch:
        outcome.notes.append("hand-written kernel: tt.divisibility=16 assumed on pointer args as a JIT "
                             "launch gives 16-byte-aligned tensors; a JIT launch on Triton >= 3.6 with "
                             "buffer ops on also adds tt.pointer_range=32 (see the pointer_range variant)")
    return outcome


# --------------------------------------------------------------------------- subprocess worker

def _scripts_dir() -> str:
    return str(Path(__file__).resolve().parents[2])


def worker_command(*spec_paths: str | os.PathLike) -> list[str]:
    return [sys.executable, "-m", "tko.compile.offline_compile", "--worker", *map(str, spec_paths)]


def worker_env(overrides: dict | None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = _scripts_dir() + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("TRITON_INTERPRET", None)  # a compile, never the interpreter (a user's CPU check sets it)
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


def spec_args(spec: dict) -> dict:
    """The keyword arguments of :func:`compile_kernel_file` in a worker spec."""
    return {k: spec.get(k) for k in ("kernel", "config", "pointer_range", "extra_attrs", "signature", "launch")}


def write_result(out_dir: Path, outcome: CompileOutcome | None, seconds: float, cached: bool = False,
                 error: dict | None = None) -> dict:
    """``result.json`` (and one file per text stage) of one compile in ``out_dir``: what the
    worker leaves, and what a stored compile is read back as. Written last and atomically, so its
    presence says the compile is done."""
    from ..base import atomic

    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = dict(error or {"ok": False})
    if outcome is not None:
        files = {}
        for stage, content in outcome.asm.items():
            file = out_dir / f"{outcome.kernel}.{stage}"
            file.write_text(content, encoding="utf-8")
            files[stage] = str(file)
        result = {"ok": True, "outcome": outcome.to_json(), "files": files}
    result.update(seconds=round(seconds, 2), cached=cached)
    atomic.write_text(out_dir / "result.json", json.dumps(result, default=str))
    return result


def run_worker(spec_paths: list[str]) -> int:
    """Compile per each JSON spec in turn, in this one process (torch and Triton imported once);
    each leaves ``result.json`` (+ one file per stage) in its spec's ``out_dir``. A spec's ``env``
    is set around its compile."""
    for spec_path in spec_paths:
        spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
        started = time.perf_counter()
        outcome, error = None, None
        try:
            outcome = compile_kernel_file(spec["path"], spec["arch"], env=spec.get("env"), **spec_args(spec))
        except (InputError, ToolFailure) as exc:
            error = {"ok": False, "error_kind": type(exc).__name__, "error": str(exc)}
        except BaseException as exc:  # a worker must always leave a readable answer
            error = {"ok": False, "error_kind": type(exc).__name__, "error": compile_error_text(exc),
                     "traceback_tail": traceback.format_exc().splitlines()[-3:]}
        write_result(Path(spec["out_dir"]), outcome, time.perf_counter() - started, error=error)
        print(f"compiled {spec['out_dir']}", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--worker":
        sys.exit(run_worker(sys.argv[2:]))
    print("usage: python -m tko.compile.offline_compile --worker SPEC.json [SPEC.json ...]", file=sys.stderr)
    sys.exit(2)
