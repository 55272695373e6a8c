"""The variants a compile probe compiles: each a change of the kernel's source (hints such as
``tl.assume`` and ``tl.multiple_of``, pointer ranges), its config (blocks, warps) or its backend
options and environment (buffer ops), built from the kernel's file and the target's compile plan."""


from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from ..read import kernel_source, triton_stack
from . import offline_compile
from ..base.config import BACKEND_OPTIONS
from ..base.errors import InputError

DEFAULT_VARIANTS = ("baseline", "buffer_ops_on", "buffer_ops_off", "pointer_range", "assume",
                    "multiple_of", "pointer_range+assume", "blocks", "warps")
# What the decision and the sweep read of a probe: which hint turns global loads into buffer loads
# (references/decision_rules.yaml: probe_buffer_variant) and which hints change the ISA (tko.measure.sweep
# sweeps those); the block and warp variants add nothing there (the sweep times configs itself).
HINT_VARIANTS = ("baseline", "buffer_ops_on", "buffer_ops_off", "pointer_range", "assume", "multiple_of",
                 "pointer_range+assume")
BASIC_VARIANTS = ("baseline", "buffer_ops_on", "buffer_ops_off", "pointer_range", "assume",
                  "multiple_of", "blocks", "warps", "options") + triton_stack.TUNABLE_NAMES
BUFFER_OPS_ENV = "AMDGCN_USE_BUFFER_OPS"
# Older Hygon Triton forks (the FlagTree hcu backend based on Triton 3.0/3.1) read this name instead.
HYGON_BUFFER_OPS_ENV = "HCUGCN_USE_BUFFER_OPS"
INT_TYPES = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}


@dataclass
class Variant:
    name: str
    description: str
    env: dict = field(default_factory=dict)
    pointer_range: int | None = None
    config: dict | None = None
    source_lines: dict = field(default_factory=dict)   # {"top": [...], after_line: [...]}
    claims: list = field(default_factory=list)
    skipped: str | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "description": self.description, "env": self.env,
                "pointer_range": self.pointer_range, "config": self.config,
                "inserted": {str(k): v for k, v in self.source_lines.items()},
                "claims": self.claims, "skipped": self.skipped}


# --------------------------------------------------------------------------- source edits

def _function_node(text: str, name: str) -> ast.FunctionDef:
    tree = kernel_source.parse_source(text)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise InputError(f"function {name} not found")


def assume_lines(kernel: dict, plan_signature: dict) -> tuple[list[str], list[str]]:
    """``tl.assume(x >= 0)`` for integer scalar arguments that stay runtime values."""
    lines, claims = [], []
    for param in kernel["params"]:
        dtype = plan_signature.get(param["name"], "")
        if dtype in INT_TYPES:
            lines.append(f"tl.assume({param['name']} >= 0)")
            claims.append(f"{param['name']} >= 0 (an offset, stride or element count: assumed "
                          f"non-negative, true for tensor shapes and strides)")
    return lines, claims


class _BlockFacts:
    """What the kernel body so far proves: which names hold program_id, which a multiple of a BLOCK."""

    def __init__(self, constexprs: set[str]):
        self.constexprs = constexprs
        self.pid_vars: set[str] = set()
        self.block_multiple: dict[str, str] = {}     # var -> BLOCK it is a multiple of

    def is_pid(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.pid_vars
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name.endswith("program_id"):
                return True
            if name.endswith(".to") and isinstance(node.func, ast.Attribute):
                return self.is_pid(node.func.value)
        return False

    def multiple_of_block(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.block_multiple.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if isinstance(b, ast.Name) and b.id in self.constexprs and self.is_pid(a):
                    return b.id
        return None


def _arange_block(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("arange") \
            and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) \
            and node.args[0].value == 0 and isinstance(node.args[1], ast.Name):
        return node.args[1].id
    return None


def _hint_values(node: ast.AST, block: str) -> str | None:
    """``BLOCK`` for a 1-D range; ``[BLOCK, 1]`` for ``arange(...)[:, None]`` (one value per dim)."""
    if not isinstance(node, ast.Subscript):
        return block
    dims = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values = []
    for dim in dims:
        if isinstance(dim, ast.Slice):
            values.append(block)
        elif isinstance(dim, ast.Constant) and dim.value is None:
            values.append("1")
        else:
            return None
    return values[0] if len(values) == 1 else "[" + ", ".join(values) + "]"


def _contiguous_range(facts: _BlockFacts, target: str, value: ast.AST) -> tuple[str, str] | None:
    """(hint line, claim) for ``target = multiple_of_BLOCK + arange(0, BLOCK)``, else None."""
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return None
    for a, b in ((value.left, value.right), (value.right, value.left)):
        block_a, block_r = facts.multiple_of_block(a), _arange_block(b)
        if block_a and block_a == block_r:
            values = _hint_values(b, block_a)
            if values is None:
                continue
            return (f"{target} = tl.max_contiguous(tl.multiple_of({target}, {values}), {values})",
                    f"{target} = {ast.unparse(value)}: starts at a multiple of {block_a} "
                    f"and runs {block_a} contiguous elements")
    return None


def multiple_of_lines(text: str, kernel: dict) -> tuple[dict, list[str]]:
    """Insert hints only where the claim follows from the code: program_id * BLOCK (+ arange)."""
    func = _function_node(text, kernel["name"])
    facts = _BlockFacts({p["name"] for p in kernel["params"] if p["kind"] == "constexpr"})
    inserts: dict[int, list[str]] = {}
    claims: list[str] = []
    for stmt in func.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            continue
        target, value = stmt.targets[0].id, stmt.value
        if facts.is_pid(value):
            facts.pid_vars.add(target)
            continue
        block = facts.multiple_of_block(value)
        if block:
            facts.block_multiple[target] = block
            inserts.setdefault(stmt.end_lineno, []).append(f"{target} = tl.multiple_of({target}, {block})")
            claims.append(f"{target} = {ast.unparse(value)} is program_id * {block}: a multiple of {block}")
            continue
        hinted = _contiguous_range(facts, target, value)
        if hinted:
            inserts.setdefault(stmt.end_lineno, []).append(hinted[0])
            claims.append(hinted[1])
    return inserts, claims


def rewrite_source(text: str, kernel_name: str, top: list[str], after: dict[int, list[str]]) -> str:
    """Insert statements at the top of a function body and after given lines (same indentation)."""
    func = _function_node(text, kernel_name)
    lines = text.splitlines(keepends=True)
    first = func.body[0]
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str) and len(func.body) > 1):
        first = func.body[1]  # keep a docstring first
    stmt_at_line = {s.end_lineno: s for s in ast.walk(func) if isinstance(s, ast.stmt)}
    edits: list[tuple[int, list[str]]] = []
    if top:
        indent = " " * first.col_offset
        edits.append((first.lineno - 1, [f"{indent}{ln}\n" for ln in top]))
    for end_line, new in after.items():
        stmt = stmt_at_line[end_line]
        indent = " " * stmt.col_offset
        edits.append((end_line, [f"{indent}{ln}\n" for ln in new]))
    for index, new in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[index:index] = new
    return "".join(lines)


# --------------------------------------------------------------------------- variants

def _config_with(base: dict, **changes: Any) -> dict:
    cfg = {"kwargs": dict(base.get("kwargs") or {}), "num_warps": base.get("num_warps"),
           "num_stages": base.get("num_stages"), "extras": dict(base.get("extras") or {})}
    for key, value in changes.items():
        if key in ("num_warps", "num_stages"):
            cfg[key] = value
        elif key in BACKEND_OPTIONS:
            cfg["extras"][key] = value
        else:
            cfg["kwargs"][key] = value
    return cfg


def option_variants(name: str, plan: offline_compile.CompilePlan, offered: dict | None,
                    left_out: str | None) -> list[Variant]:
    """``options``: a compile per value of every offered backend option; an option's own name: its
    values only (a skipped variant saying why when no target's backend offers it)."""
    offered = offered or {}
    wanted = list(offered) if name == "options" else [name]
    out = []
    for option in wanted:
        if option not in offered:
            why = (left_out or "").replace("backend options left out: ", "") or "no target's backend offers it"
            out.append(Variant(option, f"backend option {option}", skipped=f"not offered: {why}"))
            continue
        for value in offered[option]:
            out.append(Variant(f"{option}={value}", f"backend compile option {option}={value!r}",
                               config=_config_with(plan.config, **{option: value})))
    return out


def _single(name: str, kernel: dict, text: str, plan: offline_compile.CompilePlan,
            options: tuple[dict, str | None] | None = None) -> list[Variant]:
    if name == "options" or name in triton_stack.TUNABLE_NAMES:
        return option_variants(name, plan, *(options or ({}, None)))
    if name == "baseline":
        return [Variant("baseline", "the kernel as captured: hints from its triton_meta "
                        "(hand-written: tt.divisibility=16 on pointers); buffer-op switch as in the "
                        "environment")]
    if name == "buffer_ops_on":
        return [Variant(name, f"{BUFFER_OPS_ENV}=1", env={BUFFER_OPS_ENV: "1", HYGON_BUFFER_OPS_ENV: "1"})]
    if name == "buffer_ops_off":
        return [Variant(name, f"{BUFFER_OPS_ENV}=0", env={BUFFER_OPS_ENV: "0", HYGON_BUFFER_OPS_ENV: "0"})]
    if name == "pointer_range":
        return [Variant(name, "tt.pointer_range=32 on every pointer argument (what a JIT launch on "
                        "Triton >= 3.6 adds for tensors under 2 GiB)", pointer_range=32)]
    if name == "assume":
        lines, claims = assume_lines(kernel, plan.signature)
        v = Variant(name, "tl.assume(arg >= 0) for integer scalar arguments, at the top of the body",
                    source_lines={"top": lines} if lines else {}, claims=claims)
        if not lines:
            v.skipped = "no integer scalar argument to assume on"
        return [v]
    if name == "multiple_of":
        inserts, claims = multiple_of_lines(text, kernel)
        v = Variant(name, "tl.multiple_of / tl.max_contiguous where program_id * BLOCK (+ arange) "
                    "makes the claim true", source_lines=dict(inserts), claims=claims)
        if not inserts:
            v.skipped = "no offset of the form program_id * BLOCK (+ tl.arange(0, BLOCK)) to annotate"
        return [v]
    if name == "blocks":
        out = []
        for key, value in sorted(plan.config.get("kwargs", {}).items()):
            if not isinstance(value, int) or "BLOCK" not in key.upper() or key not in plan.signature:
                continue
            for factor, label in ((2, "x2"), (0.5, "/2")):
                new = int(value * factor)
                if new < 1 or new == value:
                    continue
                v = Variant(f"{key}={new}", f"{key} {label} ({value} -> {new})",
                            config=_config_with(plan.config, **{key: new}))
                if key in offline_compile.REDUCTION_BLOCKS and \
                        (kernel.get("heuristic") or {}).get("kind") == "persistent_reduction" and new < value:
                    v.claims.append(f"{key} below the reduction size: compiles, but a persistent "
                                    f"reduction then covers only part of each row")
                out.append(v)
        return out
    if name == "warps":
        warps = int(plan.config.get("num_warps") or plan.options.get("num_warps") or 4)
        out = []
        for new, label in ((warps * 2, "x2"), (warps // 2, "/2")):
            if 1 <= new <= 16 and new != warps:
                out.append(Variant(f"num_warps={new}", f"num_warps {label} ({warps} -> {new})",
                                   config=_config_with(plan.config, num_warps=new)))
        return out
    raise InputError(f"unknown variant {name!r}; choose from {', '.join(BASIC_VARIANTS)} "
                     f"(combine with '+', e.g. pointer_range+assume)")


def build_variants(names: list[str], kernel: dict, text: str, plan: offline_compile.CompilePlan,
                   options: tuple[dict, str | None] | None = None) -> list[Variant]:
    """The variants named; ``options`` = (offered backend options, left-out line) of
    :func:`offered_for_targets` for the option variants."""
    out: list[Variant] = []
    for spec in names:
        parts = [p.strip() for p in spec.split("+") if p.strip()]
        if not parts:
            continue
        if len(parts) == 1:
            out.extend(_single(parts[0], kernel, text, plan, options))
            continue
        combined = Variant("+".join(parts), "", env={})
        descriptions = []
        for part in parts:
            singles = _single(part, kernel, text, plan, options)
            if len(singles) != 1:
                raise InputError(f"variant {part!r} expands to several compiles; it cannot be combined")
            single = singles[0]
            descriptions.append(single.description)
            combined.env.update(single.env)
            combined.pointer_range = single.pointer_range or combined.pointer_range
            combined.config = single.config or combined.config
            for key, lines in single.source_lines.items():
                combined.source_lines.setdefault(key, []).extend(lines)
            combined.claims += single.claims
            if single.skipped:
                combined.skipped = single.skipped
        combined.description = "; ".join(descriptions)
        out.append(combined)
    seen, unique = set(), []
    for v in out:
        if v.name not in seen:
            seen.add(v.name)
            unique.append(v)
    return unique


