"""The syntax of a Triton kernel function: literal values of its AST, and what its body does (loads,
stores, atomics, reductions, hints and masks, with the data flow from program ids, aranges and
loaded values); :mod:`tko.read.kernel_source` reads a whole file with it."""


from __future__ import annotations

import ast
import functools
import io
from typing import Any

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


def int_list(value: Any) -> list[int]:
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, int)]
    return []


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


