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
import functools
import io
import json
import math
import re
from pathlib import Path
from typing import Any

from ..base.config import POSITIONAL, TritonConfig
from ..base.errors import InputError
from ..base import inputs

TL_PREFIXES = ("tl.", "triton.language.")
HINT_FUNCS = {"assume", "multiple_of", "max_contiguous", "max_constancy"}
ATOMIC_FUNCS = {"atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
                "atomic_xchg", "atomic_cas", "atomic_sub", "atomic_fadd"}
TL_REDUCTIONS = {"sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum", "cumsum", "cumprod",
                 "associative_scan", "histogram"}
# triton_helpers functions that reduce over an axis (the rest, e.g. maximum, are elementwise).
HELPER_REDUCTIONS = {"max2", "min2", "prod", "any", "welford", "welford_reduce", "welford_combine",
                     "max_with_index", "min_with_index", "online_softmax_reduce", "sum", "final_argmax",
                     "final_argmin", "exclusive_scan_decoupled_lookback",
                     "exclusive_scan_decoupled_lookback_64"}
INDUCTOR_FACT_KEYS = ("kernel_name", "num_load", "num_store", "num_reduction", "atomic_add_found",
                      "mutated_arg_names", "kernel_num_gb", "kernel_flop", "grid_type", "optimize_mem",
                      "no_x_dim", "autotune_hints", "tiling_scores", "backend_hash", "deterministic")

# Flags carried in the data-flow sets next to parameter names.
LOADED = "<loaded>"      # value came (directly or not) from a tl.load
I64 = "<i64>"            # value was widened to int64
PID = "<program_id>"
RANGE = "<arange>"


# --------------------------------------------------------------------------- literals

def literal(node: ast.AST | None) -> Any:
    """Evaluate a literal-ish expression; calls and names become tagged dicts, never run."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict = {}
        for k, v in zip(node.keys, node.values):
            if k is None:  # **spread
                continue
            key = literal(k)
            if isinstance(key, list):
                key = tuple(key)
            elif isinstance(key, dict):
                key = ast.unparse(k)
            out[key] = literal(v)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        val = literal(node.operand)
        return -val if isinstance(val, (int, float)) else {"__expr__": ast.unparse(node)}
    if isinstance(node, ast.Call):
        return {"__call__": ast.unparse(node.func), "args": [literal(a) for a in node.args],
                "kwargs": {kw.arg: literal(kw.value) for kw in node.keywords if kw.arg}}
    if isinstance(node, ast.Name):
        return {"__name__": node.id}
    return {"__expr__": ast.unparse(node)}


def jsonable(value: Any) -> Any:
    """Literal values with tuple keys / tagged calls rendered for JSON."""
    if isinstance(value, dict):
        if "__call__" in value:
            return ast_call_text(value)
        if "__name__" in value and len(value) == 1:
            return value["__name__"]
        if "__expr__" in value and len(value) == 1:
            return value["__expr__"]
        return {(",".join(map(str, k)) if isinstance(k, tuple) else str(k)): jsonable(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def ast_call_text(value: dict) -> str:
    args = [repr(jsonable(a)) for a in value.get("args", [])]
    args += [f"{k}={jsonable(v)!r}" for k, v in value.get("kwargs", {}).items()]
    return f"{value['__call__']}({', '.join(args)})"


def _int_list(value: Any) -> list[int]:
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, int)]
    return []


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
                for idx in _int_list(props.get("tt.divisibility")):
                    hints.setdefault(name_of(idx), []).append(["tt.divisibility", 16])
                for idx in _int_list(props.get("tt.equal_to")) + _int_list(props.get("tt.equal_to_1")):
                    hints.setdefault(name_of(idx), []).append(["tt.equal_to", 1])
            else:
                encoding = "attrs_descriptor"
                for idx in _int_list(kwargs.get("divisible_by_16")):
                    hints.setdefault(name_of(idx), []).append(["tt.divisibility", 16])
                for idx in _int_list(kwargs.get("divisible_by_8")):
                    hints.setdefault(name_of(idx), []).append(["tt.divisibility", 8])
                for idx in _int_list(kwargs.get("equal_to_1")):
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


# --------------------------------------------------------------------------- function body

def _call_name(node: ast.Call) -> str:
    try:
        return ast.unparse(node.func)
    except Exception:  # pragma: no cover - ast.unparse handles every expression
        return ""


def _tl_func(name: str) -> str | None:
    for prefix in TL_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return None


class _FlowState:
    """Which parameters and facts each local name depends on (flow-insensitive, transitive)."""

    def __init__(self, params: list[str], ptr_dtypes: dict[str, str], wide_scalars: set[str] = frozenset()):
        self.params = set(params)
        self.ptr_dtypes = ptr_dtypes
        self.wide_scalars = set(wide_scalars)   # i64/u64 scalar args: they widen offsets to 64 bits
        self.deps: dict[str, set[str]] = {}

    def expr_deps(self, node: ast.AST | None) -> set[str]:
        out: set[str] = set()
        if node is None:
            return out
        if isinstance(node, ast.Name):
            if node.id in self.params:
                out.add(node.id)
                if node.id in self.wide_scalars:
                    out.add(I64)
            return out | self.deps.get(node.id, set())
        if isinstance(node, ast.Attribute) and node.attr == "int64":
            out.add(I64)
        if isinstance(node, ast.Call):
            name = _call_name(node)
            fn = _tl_func(name) or ""
            if fn == "load":
                # A loaded value depends on memory, not on the pointer/mask it was read with.
                out.add(LOADED)
                ptr = node.args[0] if node.args else None
                base = {d for d in self.expr_deps(ptr) if d in self.ptr_dtypes}
                if any(self.ptr_dtypes.get(p, "").startswith("*i64") for p in base):
                    out.add(I64)
                return out
            if fn == "program_id":
                out.add(PID)
            elif fn == "arange":
                out.add(RANGE)
            if name.endswith(".to") and node.args and "int64" in ast.unparse(node.args[0]):
                out.add(I64)
        for child in ast.iter_child_nodes(node):
            out |= self.expr_deps(child)
        return out

    def assign(self, target: ast.AST, value_deps: set[str]) -> None:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                self.deps[sub.id] = self.deps.get(sub.id, set()) | value_deps


def _loop_deps(iter_node: ast.AST, state: "_FlowState") -> set[str]:
    """A ``range(start, stop, step)`` index depends on start and step; stop only bounds it."""
    if isinstance(iter_node, ast.Call) and ast.unparse(iter_node.func).split(".")[-1] in (
            "range", "static_range") and iter_node.args:
        args = iter_node.args
        if len(args) == 1:
            return {RANGE}
        deps = state.expr_deps(args[0]) | {RANGE}
        if len(args) > 2:
            deps |= state.expr_deps(args[2])
        return deps
    return state.expr_deps(iter_node)


@functools.lru_cache(maxsize=8)
def _source_lines(source: str) -> list[bytes]:
    """``source`` split as ``ast.get_source_segment`` splits it (at \\n, \\r\\n and \\r), each line
    encoded once: AST column offsets count UTF-8 bytes."""
    return [line.encode("utf-8") for line in io.StringIO(source, newline="").readlines()]


def source_segment(source: str, node: ast.AST) -> str | None:
    """``ast.get_source_segment(source, node)``, with the split lines kept between calls (that
    function splits the whole source on every call: quadratic over a kernel's statements)."""
    end_line, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
    if end_line is None or end_col is None:
        return None
    lines = _source_lines(source)
    first, last = node.lineno - 1, end_line - 1
    if last >= len(lines):
        return None
    if first == last:
        return lines[first][node.col_offset:end_col].decode("utf-8", "replace")
    return (lines[first][node.col_offset:] + b"".join(lines[first + 1:last])
            + lines[last][:end_col]).decode("utf-8", "replace")


def _segment(source: str, node: ast.AST) -> str:
    text = source_segment(source, node)
    return " ".join((text or ast.unparse(node)).split())


class _FunctionAnalysis:
    """The walk of one jit function: the flow state, and what it found so far."""

    def __init__(self, source: str, params: list[dict]):
        self.source = source
        self.ptr_dtypes = {p["name"]: p.get("dtype") or "*" for p in params if p["kind"] == "pointer"}
        self.scalar_params = {p["name"] for p in params if p["kind"] == "scalar"}
        wide = {p["name"] for p in params if p["kind"] == "scalar" and p.get("dtype") in ("i64", "u64")}
        self.state = _FlowState([p["name"] for p in params], self.ptr_dtypes, wide)
        self.memory_ops: list[dict] = []
        self.atomics: list[dict] = []
        self.reductions: list[dict] = []
        self.hint_calls: list[dict] = []
        self.index_vars: list[dict] = []

    def _segment(self, node: ast.AST) -> str:
        return _segment(self.source, node)

    def pointer_info(self, ptr: ast.AST | None) -> dict:
        if ptr is None:
            return {"pointer": None, "bases": [], "offset_scalars": [], "indirect": False,
                    "offset_i64": False}
        deps = self.state.expr_deps(ptr)
        bases = sorted(d for d in deps if d in self.ptr_dtypes)
        # Offsets are everything but the base; a loaded value in them means gather/scatter.
        off_deps = deps - set(bases)
        return {"pointer": self._segment(ptr), "bases": bases,
                "offset_scalars": sorted(d for d in off_deps if d in self.scalar_params),
                "indirect": LOADED in off_deps,
                "offset_i64": I64 in off_deps}

    def visit_calls(self, node: ast.AST) -> None:
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Call):
                continue
            name = _call_name(sub)
            fn = _tl_func(name)
            kw = {k.arg: k.value for k in sub.keywords if k.arg}
            if fn in ("load", "store"):
                self._memory_op(sub, fn, kw)
            elif fn in ATOMIC_FUNCS:
                info = self.pointer_info(sub.args[0] if sub.args else kw.get("pointer"))
                self.atomics.append({"op": fn, "line": sub.lineno, **info,
                                     "kind": "scatter" if info["indirect"] else "direct",
                                     "sem": literal(kw["sem"]) if "sem" in kw else None,
                                     "scope": literal(kw["scope"]) if "scope" in kw else None,
                                     "text": self._segment(sub)})
            elif fn in TL_REDUCTIONS or (name.startswith("triton_helpers.")
                                          and name.split(".", 1)[1] in HELPER_REDUCTIONS):
                axis = kw.get("axis") or (sub.args[1] if len(sub.args) > 1 else None)
                self.reductions.append({"op": name, "line": sub.lineno,
                                        "axis": literal(axis) if axis is not None else None,
                                        "text": self._segment(sub)})
            elif fn in HINT_FUNCS:
                self.hint_calls.append({"op": f"tl.{fn}", "line": sub.lineno,
                                        "args": [self._segment(a) for a in sub.args],
                                        "text": self._segment(sub)})

    def _memory_op(self, sub: ast.Call, fn: str, kw: dict) -> None:
        info = self.pointer_info(sub.args[0] if sub.args else kw.get("pointer"))
        if fn == "load":
            mask = sub.args[1] if len(sub.args) > 1 else kw.get("mask")
        else:
            mask = sub.args[2] if len(sub.args) > 2 else kw.get("mask")
        evict = kw.get("eviction_policy")
        self.memory_ops.append({
            "op": fn, "line": sub.lineno, **info,
            "masked": mask is not None and not (isinstance(mask, ast.Constant)
                                                and mask.value is None),
            "mask": self._segment(mask) if mask is not None else None,
            "eviction_policy": literal(evict) if evict is not None else None,
            "cache_modifier": literal(kw["cache_modifier"]) if "cache_modifier" in kw else None,
            "kind": ("gather" if fn == "load" else "scatter") if info["indirect"] else "direct",
        })

    def _assignment(self, stmt: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
        value = stmt.value
        if value is None:
            return
        self.visit_calls(value)
        deps = self.state.expr_deps(value)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        text = self._segment(stmt)
        for target in targets:
            self.state.assign(target, deps)
            if (isinstance(target, ast.Name) and (PID in deps or RANGE in deps)
                    and LOADED not in deps and not (set(deps) & set(self.ptr_dtypes))
                    and not isinstance(value, (ast.Compare, ast.BoolOp))):
                self.index_vars.append({
                    "name": target.id, "line": stmt.lineno, "expr": text,
                    "i64": I64 in deps,
                    "scalars": sorted(d for d in deps if d in self.scalar_params),
                })

    def walk_body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self._assignment(stmt)
            elif isinstance(stmt, (ast.For, ast.AsyncFor)):
                self.visit_calls(stmt.iter)
                self.state.assign(stmt.target, _loop_deps(stmt.iter, self.state))
                self.walk_body(stmt.body)
                self.walk_body(stmt.orelse)
            elif isinstance(stmt, (ast.If, ast.While)):
                self.visit_calls(stmt.test)
                self.walk_body(stmt.body)
                self.walk_body(stmt.orelse)
            elif isinstance(stmt, ast.With):
                self.walk_body(stmt.body)
            elif isinstance(stmt, ast.Expr):
                self.visit_calls(stmt.value)
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                self.visit_calls(stmt.value)


def analyse_function(func: ast.FunctionDef, source: str, params: list[dict]) -> dict:
    """Memory ops, hints, atomics, reductions and index variables of one jit function."""
    walk = _FunctionAnalysis(source, params)
    walk.walk_body(func.body)
    calls = sorted({sub.func.id for sub in ast.walk(func) if isinstance(sub, ast.Call)
                    and isinstance(sub.func, ast.Name)})
    return {"calls": calls, "memory_ops": walk.memory_ops, "atomics": walk.atomics,
            "reductions": walk.reductions, "hint_calls": walk.hint_calls, "index_vars": walk.index_vars}


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


def _classify_param(name: str, annotation: str | None, meta: dict | None) -> tuple[str, str | None, str]:
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


def parse_function(func: ast.FunctionDef, source: str) -> dict:
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
        kind, dtype, source_of_kind = _classify_param(name, annotation, meta)
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


def _parse_kernels(text: str, path: str) -> tuple[list[dict], list[str]]:
    tree = parse_source(text, path)
    imports = sorted({ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))})
    kernels = []
    for func in jit_functions(tree):
        kernel = parse_function(func, text)
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
    kernels, imports = _parse_kernels(text, path)
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
            "standalone_spec": standalone_spec(tree, path), "embedded_sources": embedded}


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
    """The kernel to compile: by name, else the one with metadata/decorators, else the entry."""
    kernels = parsed["kernels"]
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


# --------------------------------------------------------------------------- IR

_FUNC_RE = re.compile(r"tt\.func\s+(?:public\s+|private\s+)?@([\w$.]+)\s*\(")
_LLVM_FUNC_RE = re.compile(r"llvm\.func\s+@([\w$.]+)\s*\(")


def _split_args(text: str, start: int) -> tuple[str, int]:
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            if depth == 0:
                return text[start:i], i
            depth -= 1
    return text[start:], len(text)


def _top_level_split(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def parse_ir_text(text: str, stage: str | None = None) -> dict:
    """Function arguments with their tt.* attributes, and assume counts, from TTIR/TTGIR/LLIR."""
    text = text.replace("\r", "")
    funcs = []
    for m in _FUNC_RE.finditer(text):
        body, _ = _split_args(text, m.end())
        args = []
        for position, raw in enumerate(_top_level_split(body)):
            am = re.match(r"\s*%([\w$.]+)\s*:\s*(.*)", raw, re.S)
            if not am:
                continue
            ssa, rest = am.group(1), am.group(2)
            loc = re.search(r'loc\("([^"]+)"', rest)
            type_text = re.split(r"\s*(\{|loc\()", rest, maxsplit=1)[0].strip()
            attrs = {}
            attr_block = re.search(r"\{([^{}]*)\}", rest)
            if attr_block:
                for key, val in re.findall(r"([\w.]+)\s*=\s*([-\w]+)", attr_block.group(1)):
                    attrs[key] = int(val) if re.fullmatch(r"-?\d+", val) else val
            name = loc.group(1) if loc else ssa
            args.append({"position": position, "name": name, "ssa": ssa, "type": type_text,
                         "attrs": attrs})
        funcs.append({"name": m.group(1), "args": args})
    if stage is None:
        stage = "ttgir" if "ttg." in text or "triton_gpu." in text else (
            "ttir" if "tt.func" in text else ("llir" if "define " in text else "unknown"))
    return {
        "stage": stage,
        "functions": funcs,
        "assume_count": len(re.findall(r"llvm\.intr\.assume|call void @llvm\.assume", text)),
        "buffer_ops": len(re.findall(r"\bamdg(?:pu)?\.buffer_(?:load|store|atomic)\w*", text)),
        "tt_loads": len(re.findall(r"\btt\.load\b", text)),
        "tt_stores": len(re.findall(r"\btt\.store\b", text)),
    }


def attach_ir(kernel: dict, ir: dict, path: str) -> dict:
    """Match an IR function to the kernel and report the hints that reached the IR."""
    func = next((f for f in ir["functions"] if f["name"] == kernel["name"]), None)
    if func is None and len(ir["functions"]) == 1:
        func = ir["functions"][0]
    entry = {"file": path, "stage": ir["stage"], "function": func["name"] if func else None,
             "assume_count": ir["assume_count"], "buffer_ops": ir["buffer_ops"],
             "tt_loads": ir["tt_loads"], "tt_stores": ir["tt_stores"], "args": {}, "findings": []}
    if func is None:
        entry["findings"].append(f"{path}: no function matches {kernel['name']}")
        return entry
    param_names = [p["name"] for p in kernel["params"]]
    runtime = [p for p in kernel["params"] if p["kind"] != "constexpr"
               and "constant" not in p]
    for arg in func["args"]:
        name = arg["name"]
        if name not in param_names:
            # Unnamed SSA values (%arg0) follow the runtime parameters in order.
            name = runtime[arg["position"]]["name"] if arg["position"] < len(runtime) else name
        entry["args"][name] = {"type": arg["type"],
                               "tt.divisibility": arg["attrs"].get("tt.divisibility"),
                               "tt.pointer_range": arg["attrs"].get("tt.pointer_range")}
    for name, hints in (kernel.get("pointer_hints") or {}).items():
        got = entry["args"].get(name)
        if got is None:
            continue
        if hints["tt.pointer_range"] and not got["tt.pointer_range"]:
            entry["findings"].append(f"{name}: triton_meta declares tt.pointer_range but the "
                                     f"{ir['stage']} lacks it")
        if got["tt.pointer_range"] and not hints["tt.pointer_range"]:
            entry["findings"].append(f"{name}: tt.pointer_range={got['tt.pointer_range']} reached the "
                                     f"{ir['stage']} (not declared in triton_meta: added by JIT specialisation or by the "
                                     f"compile call)")
    no_pr = [n for n, a in entry["args"].items() if a["type"].startswith("!tt.ptr")
             and not a["tt.pointer_range"]]
    if no_pr:
        entry["findings"].append(f"{ir['stage']}: no tt.pointer_range on {', '.join(no_pr)}")
    if ir["stage"] == "ttgir" and ir["tt_loads"] + ir["tt_stores"] and ir["buffer_ops"] == 0:
        entry["findings"].append("ttgir: loads/stores were not converted to buffer ops")
    return entry
