"""Static reading of a Triton kernel file: what it declares and does, without executing it.

Works on TorchInductor-generated kernels of every era (see ``triton_meta`` encodings
below) and on hand-written ``@triton.jit`` / ``@triton.autotune`` files.  Everything
comes from ``ast``: nothing is imported or run, so a kernel captured on another machine
(another torch, another Triton, no GPU) can always be read.

``triton_meta`` encodings Inductor has written (torch/_inductor/codegen/triton_utils.py):

- torch 2.4-2.5 / triton 3.0-3.1: ``signature={0: '*fp32', 2: 'i32'}`` (int keys),
  ``configs=[AttrsDescriptor(divisible_by_16=(0, 1, 2), equal_to_1=())]``;
- torch 2.6 / triton 3.2: name keys,
  ``configs=[AttrsDescriptor.from_dict({'arg_properties': {'tt.divisibility': (0, 1),
  'tt.equal_to': ()}, 'cls': 'AttrsDescriptor'})]``;
- torch 2.7+ / triton >= 3.3 ("V4"): name keys including ``'XBLOCK': 'constexpr'``,
  ``configs=[{(0,): [['tt.divisibility', 16]], ...}]`` (2.14 may add
  ``['tt.pointer_range', 32]``).

:func:`parse_kernel_source` normalises all three into per-argument-name hints.
"""


from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import Any

from ..base.config import POSITIONAL, TritonConfig
from ..base.errors import InputError
from ..base import inputs
from .kernel_ast import (INDUCTOR_FACT_KEYS, int_list, analyse_function, jsonable, literal)

# --------------------------------------------------------------------------- triton_meta

def normalize_triton_meta(meta: dict, arg_names: list[str]) -> dict:
    """Signature, constants and hints keyed by argument name, whatever the encoding."""

    def name_of(key: Any) -> str:
        if isinstance(key, tuple) and len(key) == 1:
            key = key[0]
        if isinstance(key, int):
            return arg_names[key] if 0 <= key < len(arg_names) else f"#{key}"
        return str(key)

    raw_sig = meta.get("signature") if isinstance(meta.get("signature"), dict) else {}
    signature = {name_of(k): v for k, v in raw_sig.items()}
    int_keys = bool(raw_sig) and all(isinstance(k, int) for k in raw_sig)
    raw_const = meta.get("constants") if isinstance(meta.get("constants"), dict) else {}
    constants = {name_of(k): jsonable(v) for k, v in raw_const.items()}

    hints: dict[str, list[list]] = {}
    encoding = None
    configs = meta.get("configs") if isinstance(meta.get("configs"), list) else []
    for cfg in configs[:1]:  # Inductor writes exactly one attrs entry
        if isinstance(cfg, dict) and "__call__" not in cfg:
            encoding = "v4_dict"
            for key, pairs in cfg.items():
                for pair in pairs or []:
                    if isinstance(pair, list) and len(pair) == 2:
                        hints.setdefault(name_of(key), []).append([pair[0], pair[1]])
        elif isinstance(cfg, dict):
            call = cfg["__call__"]
            kwargs = cfg.get("kwargs", {})
            if call.endswith("from_dict"):
                encoding = "attrs_descriptor_from_dict"
                props = (cfg.get("args") or [{}])[0]
                props = props.get("arg_properties", {}) if isinstance(props, dict) else {}
                for idx in int_list(props.get("tt.divisibility")):
                    hints.setdefault(name_of(idx), []).append(["tt.divisibility", 16])
                for idx in int_list(props.get("tt.equal_to")) + int_list(props.get("tt.equal_to_1")):
                    hints.setdefault(name_of(idx), []).append(["tt.equal_to", 1])
            else:
                encoding = "attrs_descriptor"
                for idx in int_list(kwargs.get("divisible_by_16")):
                    hints.setdefault(name_of(idx), []).append(["tt.divisibility", 16])
                for idx in int_list(kwargs.get("divisible_by_8")):
                    hints.setdefault(name_of(idx), []).append(["tt.divisibility", 8])
                for idx in int_list(kwargs.get("equal_to_1")):
                    hints.setdefault(name_of(idx), []).append(["tt.equal_to", 1])
    if encoding is None:
        encoding = "v4_dict" if any(v == "constexpr" for v in signature.values()) else (
            "int_keys" if int_keys else ("name_keys" if signature else None))
    era = {"attrs_descriptor": "torch 2.4-2.5 / triton 3.0-3.1",
           "attrs_descriptor_from_dict": "torch 2.6 / triton 3.2",
           "v4_dict": "torch 2.7+ / triton >= 3.3"}.get(encoding)
    if encoding == "attrs_descriptor" and not int_keys:
        era = "AttrsDescriptor with name-keyed signature"
    device = meta.get("device")
    if isinstance(device, dict) and "__call__" in device:
        device = jsonable(device.get("kwargs", {}))
    else:
        device = jsonable(device)
    return {"encoding": encoding, "era": era, "signature_keys": "int" if int_keys else "name",
            "signature": signature, "constants": constants, "hints": hints, "device": device,
            "device_type": jsonable(meta.get("device_type"))}


def normalize_config(value: Any) -> dict | None:
    """``triton.Config({...}, num_warps=4)`` or an Inductor config dict -> one shape.

    The ``autotune_event/1`` record of :class:`tko.base.config.TritonConfig`; options the source
    leaves at None are not set, so they are left out."""
    if isinstance(value, dict) and "__call__" in value:
        if not value["__call__"].endswith("Config"):
            return None
        args = value.get("args", [])
        opts = dict(value.get("kwargs", {}))
        block = args[0] if args and isinstance(args[0], dict) else opts.pop("kwargs", {}) or {}
        for name, val in zip(POSITIONAL, args[1:]):
            opts.setdefault(name, val)
        cfg = TritonConfig.of(block, **{str(k): v for k, v in opts.items()})
    elif isinstance(value, dict):
        cfg = TritonConfig.from_flat(value)
    else:
        return None
    return cfg.explicit().mapped(jsonable).record()


# --------------------------------------------------------------------------- decorators

def _decorator_info(dec: ast.expr) -> tuple[str, dict]:
    """('triton.jit' | 'triton.autotune' | 'triton_heuristics.pointwise' ..., literal kwargs)."""
    if isinstance(dec, ast.Call):
        name = ast.unparse(dec.func)
        kwargs = {kw.arg: literal(kw.value) for kw in dec.keywords if kw.arg}
        if dec.args:
            kwargs["__args__"] = [literal(a) for a in dec.args]
        return name, kwargs
    return ast.unparse(dec), {}


def is_jit_decorator(name: str) -> bool:
    return name in ("triton.jit", "jit", "triton.runtime.jit.jit", "triton.jit_fn")


def _collect_configs(kwargs: dict) -> list[dict]:
    configs = []
    raw = kwargs.get("configs")
    if isinstance(raw, list):
        for item in raw:
            cfg = normalize_config(item)
            if cfg:
                configs.append(cfg)
    single = kwargs.get("config")
    if isinstance(single, dict):
        cfg = normalize_config(single)
        if cfg:
            configs.append(cfg)
    return configs


def _param_list(func: ast.FunctionDef) -> list[tuple[str, str | None, Any]]:
    args = func.args
    positional = list(args.posonlyargs) + list(args.args)
    defaults: list[Any] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [(a.arg, ast.unparse(a.annotation) if a.annotation else None, d)
           for a, d in zip(positional, defaults)]
    out += [(a.arg, ast.unparse(a.annotation) if a.annotation else None, d)
            for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    return out


def _classify_param(name: str, annotation: str | None, meta: dict | None,
                    tensors: dict | None = None) -> tuple[str, str | None, str]:
    if tensors and name in tensors:  # a captured launch passed a tensor here (hand-written: `X`, `Mean`)
        return "pointer", tensors[name], "standalone_spec"
    if meta is not None and name in meta["signature"]:
        dtype = str(meta["signature"][name])
        if dtype == "constexpr":
            return "constexpr", None, "triton_meta"
        if dtype.startswith("*"):
            return "pointer", dtype, "triton_meta"
        return "scalar", dtype, "triton_meta"
    if annotation and annotation.split(".")[-1] == "constexpr":
        return "constexpr", None, "annotation"
    if meta is not None and name in meta["constants"]:
        return "constexpr", None, "triton_meta constants"
    if re.search(r"(^|_)ptr(\d*|s)?($|_)|_ptr\d*$|^ptr", name) or name.endswith("_ptr"):
        return "pointer", None, "name"
    return "scalar", None, "name"


def _kernel_kind(decorators: list[tuple[str, dict]]) -> str:
    for name, _ in decorators:
        if name.startswith("triton_heuristics."):
            return name.split(".", 1)[1]
        if name.endswith("autotune"):
            return "triton_autotune"
    return "jit"


def parse_function(func: ast.FunctionDef, source: str, tensors: dict | None = None) -> dict:
    """One @triton.jit function; ``tensors``: parameter -> dtype of the tensors a captured launch of
    it passed (a standalone file's ``_TKO_SPEC``), which name the pointers where names do not."""
    decorators = [_decorator_info(d) for d in func.decorator_list]
    heuristic = None
    triton_meta_raw = None
    inductor_meta_raw = None
    configs: list[dict] = []
    autotune = None
    for name, kwargs in decorators:
        if "triton_meta" in kwargs and isinstance(kwargs["triton_meta"], dict):
            triton_meta_raw = kwargs["triton_meta"]
        if "inductor_meta" in kwargs and isinstance(kwargs["inductor_meta"], dict):
            inductor_meta_raw = kwargs["inductor_meta"]
        if name.startswith("triton_heuristics."):
            heuristic = {"kind": name.split(".", 1)[1],
                         **{k: jsonable(v) for k, v in kwargs.items()
                            if k not in ("triton_meta", "inductor_meta", "configs", "__args__")}}
            if "num_warps" in kwargs or "num_stages" in kwargs:  # template(num_stages=, num_warps=)
                configs.append({"kwargs": {}, "num_warps": kwargs.get("num_warps"),
                                "num_stages": kwargs.get("num_stages"), "extras": {}})
        if name.endswith("autotune"):
            autotune = {k: jsonable(v) for k, v in kwargs.items() if k != "configs"}
        configs.extend(_collect_configs(kwargs))

    raw_params = _param_list(func)
    arg_names = [p[0] for p in raw_params]
    meta = normalize_triton_meta(triton_meta_raw, arg_names) if triton_meta_raw else None
    params = []
    for index, (name, annotation, default) in enumerate(raw_params):
        kind, dtype, source_of_kind = _classify_param(name, annotation, meta, tensors)
        entry = {"name": name, "index": index, "kind": kind, "dtype": dtype,
                 "kind_from": source_of_kind}
        if annotation:
            entry["annotation"] = annotation
        if default is not None:
            entry["default"] = jsonable(literal(default))
        if meta is not None:
            entry["hints"] = meta["hints"].get(name, [])
            if name in meta["constants"]:
                entry["constant"] = meta["constants"][name]
        params.append(entry)

    body = analyse_function(func, source, params)
    inductor_meta = None
    if inductor_meta_raw is not None:
        inductor_meta = {k: jsonable(v) for k, v in inductor_meta_raw.items()}
    pointer_hints = {}
    for p in params:
        if p["kind"] != "pointer":
            continue
        hints = dict((h[0], h[1]) for h in p.get("hints", []))
        pointer_hints[p["name"]] = {"tt.divisibility": hints.get("tt.divisibility"),
                                    "tt.pointer_range": hints.get("tt.pointer_range")}
    return {
        "name": func.name,
        "line": func.lineno,
        "kind": _kernel_kind(decorators),
        "decorators": [n for n, _ in decorators],
        "params": params,
        "triton_meta": meta,
        "inductor_meta": inductor_meta,
        "inductor_facts": {k: inductor_meta[k] for k in INDUCTOR_FACT_KEYS
                           if inductor_meta and k in inductor_meta},
        "heuristic": heuristic,
        "autotune": autotune,
        "configs": configs,
        "pointer_hints": pointer_hints if meta is not None else None,
        **body,
    }


# --------------------------------------------------------------------------- findings

def kernel_findings(kernel: dict) -> list[str]:
    """Plain-words observations a reader acts on."""
    out: list[str] = []
    meta = kernel["triton_meta"]
    ops = kernel["memory_ops"]
    used_bases = {b for op in ops + kernel["atomics"] for b in op["bases"]}
    if meta is None:
        out.append(f"{kernel['name']}: no triton_meta (hand-written kernel); pointer hints come from the "
                   f"JIT at launch (tt.divisibility=16 for 16-byte-aligned args; tt.pointer_range=32 for "
                   f"tensors under 2 GiB on Triton >= 3.6 when buffer ops are on)")
    else:
        no_pr = [n for n, h in (kernel["pointer_hints"] or {}).items()
                 if h["tt.pointer_range"] is None and (n in used_bases or not used_bases)]
        no_div = [n for n, h in (kernel["pointer_hints"] or {}).items()
                  if h["tt.divisibility"] is None and (n in used_bases or not used_bases)]
        if no_pr:
            out.append(f"{', '.join(no_pr)}: no tt.pointer_range in triton_meta; offsets not provably "
                       f"non-negative, so buffer ops need a proof from the offset expression (Triton "
                       f"3.3-3.5 with AMDGCN_USE_BUFFER_OPS=1) or tt.pointer_range=32 (Triton >= 3.6)")
        if no_div:
            out.append(f"{', '.join(no_div)}: no tt.divisibility=16; the base is not known to be "
                       f"16-byte aligned, which limits vector width")
    scalar_uses: dict[str, list[str]] = {}
    wide_uses: list[str] = []
    assumed = " ".join(h["text"] for h in kernel["hint_calls"] if h["op"] == "tl.assume")
    for op in ops:
        base = ", ".join(op["bases"]) or op["pointer"]
        if op["indirect"]:
            out.append(f"line {op['line']}: {op['op']} of {base} uses an offset computed from a loaded "
                       f"value ({op['kind']}): no contiguity to vectorise, and buffer ops need "
                       f"tt.pointer_range=32 (the offset cannot be proven non-negative)")
        if op["offset_i64"]:
            wide_uses.append(f"{base} (line {op['line']})")
        for scalar in op["offset_scalars"]:
            if not re.search(rf"\b{re.escape(scalar)}\b", assumed):
                scalar_uses.setdefault(scalar, []).append(f"{base} (line {op['line']})")
    if wide_uses:
        out.append(f"offsets of {', '.join(wide_uses)} are 64-bit (an i64 argument, a .to(tl.int64) or a "
                   f"loaded int64 index): without tt.pointer_range=32 such offsets stay global_* on Triton "
                   f"3.4-3.9, and some DTK Triton builds skip buffer ops for i64 addptr offsets; compile-probe")
    for scalar, uses in scalar_uses.items():
        out.append(f"offsets of {', '.join(uses)} use scalar argument {scalar} with no "
                   f"tl.assume({scalar} >= 0): not provably non-negative on Triton 3.3-3.5")
    for var in kernel["index_vars"]:
        if var["i64"]:
            continue
        if var["scalars"]:
            continue
        if re.search(r"[%/]|\+", var["expr"].split("=", 1)[-1]) and "arange" not in var["expr"] \
                and "program_id" not in var["expr"]:
            out.append(f"{var['expr']} is an i32 offset built from program_id/arange: buffer ops possible "
                       f"once the pointer carries tt.pointer_range=32 (Triton >= 3.6), or with "
                       f"AMDGCN_USE_BUFFER_OPS=1 on 3.3-3.5 (non-negativity follows from program_id/arange)")
    if kernel["atomics"]:
        ops_text = ", ".join(sorted({a["op"] for a in kernel["atomics"]}))
        scattered = any(a["indirect"] for a in kernel["atomics"])
        out.append(f"atomics: {ops_text}{' at data-dependent indices (scatter)' if scattered else ''}: "
                   f"atomic-heavy kernels rarely gain from Triton tuning; consider a model rewrite")
    for hint in kernel["hint_calls"]:
        out.append(f"line {hint['line']}: {hint['text']}")
    facts = kernel["inductor_facts"]
    if facts.get("atomic_add_found"):
        out.append("inductor_meta says atomic_add_found=True")
    if kernel["configs"]:
        out.append(f"{len(kernel['configs'])} declared config(s)")
    elif kernel["kind"] in ("pointwise", "reduction", "persistent_reduction"):
        out.append(f"configs are generated at run time by triton_heuristics.{kernel['kind']} from "
                   f"size_hints={kernel['heuristic'].get('size_hints')}; take the winner from the "
                   f"autotune log")
    return list(dict.fromkeys(out))  # same text from a repeated statement (loop prologue/body): once


# --------------------------------------------------------------------------- entry points

def parse_source(text: str, path: str = "<kernel>") -> ast.Module:
    try:
        return ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise InputError(f"{path}: not valid Python (line {exc.lineno}: {exc.msg})") from None
    except (RecursionError, MemoryError):
        raise InputError(f"{path}: Python source nested too deeply to parse") from None


def jit_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names = [_decorator_info(d)[0] for d in node.decorator_list]
            if any(is_jit_decorator(n) for n in names):
                out.append(node)
    return out


def standalone_spec(tree: ast.Module, path: str = "<kernel>") -> dict | None:
    """The ``_TKO_SPEC`` a captured standalone kernel carries (recorded args and configs), if any;
    InputError when it is there but damaged (:func:`spec_problem`)."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "_TKO_SPEC"
                and isinstance(node.value, ast.Call) and node.value.args
                and isinstance(node.value.args[0], ast.Constant)
                and isinstance(node.value.args[0].value, str)):
            try:
                spec = json.loads(node.value.args[0].value)
            except (ValueError, RecursionError):
                return None
            if not isinstance(spec, dict):
                return None
            problem = spec_problem(spec)
            if problem:
                raise InputError(f"{path}: _TKO_SPEC (line {node.lineno}): {problem}; a damaged standalone file")
            return spec
    return None


_INT_LIMIT = 1 << 63  # a count or size past int64 is no tensor's


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -_INT_LIMIT < value < _INT_LIMIT


def _is_ints(value: Any) -> bool:
    return isinstance(value, list) and all(map(_is_int, value))


def _optional(value: Any, check) -> bool:
    return value is None or check(value)


def _arg_problem(i: int, arg: Any) -> str | None:
    if not isinstance(arg, dict):
        return f"args[{i}] is not an object"
    if not all(_optional(arg.get(k), lambda v: isinstance(v, str)) for k in ("name", "kind", "dtype")):
        return f"args[{i}] has a name, kind or dtype that is not a string"
    if arg.get("kind") != "tensor":
        return None
    if not _is_ints(arg.get("shape")) or not _optional(arg.get("stride"), _is_ints):
        return f"args[{i}] is a tensor without integer shape and stride"
    if not isinstance(arg.get("dtype"), str) or not all(
            _optional(arg.get(k), _is_int) for k in ("storage_numel", "storage_offset")) \
            or not _optional(arg.get("saved"), lambda v: isinstance(v, str)):
        return f"args[{i}] has a wrong-typed dtype, storage size or saved file"
    return None


def _config_problem(i: int, cfg: Any) -> str | None:
    if not isinstance(cfg, dict) or not isinstance(cfg.get("flat"), dict):
        return f"configs[{i}] has no 'flat' object"
    # (a float: a hand-written kernel's float constexpr, e.g. eps: tl.constexpr = 1e-6)
    if not all(isinstance(k, str) and (_is_int(v) or isinstance(v, (str, bool)) or v is None
                                       or (isinstance(v, float) and math.isfinite(v)))
               for k, v in cfg["flat"].items()):
        return f"configs[{i}].flat holds a value that is not an integer, finite float, string or boolean"
    if not all(_optional(cfg["flat"].get(k), _is_int) for k in ("num_warps", "num_stages", "num_ctas",
                                                                  "maxnreg")):
        return f"configs[{i}].flat has a num_warps, num_stages, num_ctas or maxnreg that is not an integer"
    if not _optional(cfg.get("grid"), _is_ints):
        return f"configs[{i}].grid is not a list of integers"
    return None


def spec_problem(spec: dict) -> str | None:
    """What makes a standalone file's ``_TKO_SPEC`` unusable (None: nothing): the fields its
    readers (the runner, the sweep, the byte model, the compile plan) use, with their types."""
    for key in ("kernel", "function"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            return f"'{key}' is not a name"
    for key in ("launch", "bytes_source", "source_file"):
        if not _optional(spec.get(key), lambda v: isinstance(v, str)):
            return f"'{key}' is not a string"
    num_bytes = spec.get("num_bytes")
    if not _optional(num_bytes, _is_int) and not (isinstance(num_bytes, float) and math.isfinite(num_bytes)):
        return "'num_bytes' is not a number"
    for key in ("extra_kwargs", "device", "captured_with"):
        if not _optional(spec.get(key), lambda v: isinstance(v, dict)):
            return f"'{key}' is not an object"
    if not isinstance(spec.get("args"), list) or not isinstance(spec.get("configs"), list):
        return "'args' or 'configs' is not a list"
    problems = [_arg_problem(i, a) for i, a in enumerate(spec["args"])]
    problems += [_arg_problem(i, a) for i, a in enumerate((spec.get("extra_kwargs") or {}).values())]
    problems += [_config_problem(i, c) for i, c in enumerate(spec["configs"])]
    return next((p for p in problems if p), None)


def embedded_sources(tree: ast.Module) -> list[tuple[str, str, int]]:
    """Kernel sources inside Inductor output code: ``async_compile.triton('name', <source>, ...)``."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("async_compile.triton")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)):
            name = node.args[0].value if isinstance(node.args[0], ast.Constant) else None
            found.append((str(name), node.args[1].value, node.lineno))
    return found


def _spec_tensors(spec: dict | None) -> dict[str, dict]:
    """function -> {parameter: pointer dtype} of the tensors a standalone file's launch passed."""
    if not spec or not isinstance(spec.get("function"), str):
        return {}
    args = [a for a in spec.get("args") or [] if isinstance(a, dict) and a.get("kind") == "tensor"
            and isinstance(a.get("name"), str)]
    return {spec["function"]: {a["name"]: f"*{a['dtype']}" if isinstance(a.get("dtype"), str) else None
                               for a in args}}


def _parse_kernels(text: str, path: str, tensors: dict | None = None) -> tuple[list[dict], list[str]]:
    tree = parse_source(text, path)
    imports = sorted({ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))})
    kernels = []
    for func in jit_functions(tree):
        kernel = parse_function(func, text, (tensors or {}).get(func.name))
        kernel["findings"] = kernel_findings(kernel)
        kernels.append(kernel)
    return kernels, imports


def parse_kernel_source(text: str, path: str = "<kernel>") -> dict:
    """Every @triton.jit function of a file, with metadata, memory ops and findings.

    A kernel module, a captured standalone copy (its ``_TKO_SPEC`` is returned as
    ``standalone_spec``), a hand-written file, or Inductor output code whose kernels are
    embedded as strings (each such kernel gets ``embedded``: the call line and its source).
    """
    tree = parse_source(text, path)
    spec = standalone_spec(tree, path)
    kernels, imports = _parse_kernels(text, path, _spec_tensors(spec))
    embedded: dict[str, str] = {}
    if not kernels:
        for name, source, line in embedded_sources(tree):
            try:
                inner, inner_imports = _parse_kernels(source, f"{path}:{line}")
            except InputError:
                continue
            imports = sorted(set(imports) | set(inner_imports))
            for kernel in inner:
                kernel["embedded"] = {"call_line": line, "async_compile_name": name}
                kernels.append(kernel)
                embedded[kernel["name"]] = source
    origin = "inductor" if any("triton_heuristics" in i for i in imports) else "hand-written"
    return {"origin": origin, "imports": imports, "kernels": kernels,
            "standalone_spec": spec, "embedded_sources": embedded}


def read_kernel_file(path: str | Path) -> tuple[str, dict]:
    p = Path(path)
    try:
        text = inputs.read_text(p, "a kernel .py file")
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a text file") from None
    try:
        parsed = parse_kernel_source(text, str(p))
    except RecursionError:  # ast walks recurse: a 5000-term expression outruns the stack
        raise InputError(f"{p}: an expression too deeply nested or too long to analyse") from None
    if not parsed["kernels"]:
        raise InputError(f"{p}: no @triton.jit function found")
    return text, parsed


def select_kernel(parsed: dict, name: str | None) -> dict:
    """The kernel to compile: by name, else a captured standalone file's kernel (its ``_TKO_SPEC``),
    else the one with metadata/decorators, else the entry."""
    kernels = parsed["kernels"]
    # a captured hand-written kernel's file holds its whole module: the spec names the one launched
    launched = (parsed.get("standalone_spec") or {}).get("function")
    if not name and any(launched in (k["name"], (k.get("inductor_facts") or {}).get("kernel_name")) for k in kernels):
        name = launched
    if name:
        for k in kernels:
            # Inductor's descriptive name (inductor_meta) differs from the function name on torch 2.4-2.5
            if name in (k["name"], (k.get("inductor_facts") or {}).get("kernel_name")):
                return k
        found = [k for k in kernels if name in k["name"]]
        if len(found) == 1:
            return found[0]
        raise InputError(f"kernel {name!r} not found; the file defines: "
                         f"{', '.join(k['name'] for k in kernels)}")
    decorated = [k for k in kernels if k["triton_meta"] or k["kind"] != "jit"]
    if len(decorated) == 1:
        return decorated[0]
    if len(decorated) > 1:
        raise InputError(f"the file defines several kernels ({', '.join(k['name'] for k in decorated)}); "
                         f"choose one with --kernel")
    # A helper is called by another jit function; the entry kernel is called by none.
    called = {c for k in kernels for c in k.get("calls", [])}
    entries = [k for k in kernels if k["name"] not in called]
    if len(entries) > 1:
        raise InputError(f"the file defines several jit functions ({', '.join(k['name'] for k in entries)}); "
                         f"choose one with --kernel")
    return (entries or kernels)[-1]


