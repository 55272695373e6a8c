"""Memory twins: a captured kernel with its data arithmetic replaced by additions.

The twin of a ``@triton.jit`` function keeps every ``tl.load`` / ``tl.store`` / atomic, their
pointers and masks, every index and mask computation, the loops, the grid and the signature.  What
changes is the arithmetic on *data* (values that depend on a loaded value) between loads and
stores: expensive elementwise calls (``libdevice.*``, ``tl_math.*``, ``tl.exp`` / ``erf`` /
``sqrt`` / ``fdiv`` ..., elementwise ``triton_helpers.*``) become the sum of their data arguments,
and data ``*``, ``/``, ``//``, ``%``, ``**`` become ``+``.  Every loaded value still reaches a store
(so the compiler cannot drop a load), while the arithmetic cost drops to one add per operation.
Timing the twin on the captured inputs says how fast the kernel's memory traffic alone can go.

Values that feed an address or a mask (an index loaded by a gather, ``tmp4 = where(tmp0 < 0,
tmp0 + N, tmp0)``) are addresses, not data: they stay as written, so the twin reads the same rows.
Reductions (``tl.sum``, ``triton_helpers.max2``, welford helpers), ``tl.where``, casts, shape ops
and comparisons stay too; only their data operands are rewritten.

The analysis is flow-insensitive over Inductor's SSA-like code (and hand-written kernels, where
``acc += x`` inside a loop makes ``acc`` data after a fixpoint).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..read import kernel_ast, kernel_source
from ..base.errors import InputError
from ..base import inputs

TL_MEMORY = {"load", "store"} | kernel_ast.ATOMIC_FUNCS
# tl.* calls that cost arithmetic and have a data result of their argument's type
TL_EXPENSIVE = {"exp", "exp2", "log", "log2", "log1p", "sqrt", "sqrt_rn", "rsqrt", "sigmoid", "erf",
                "fdiv", "div_rn", "cos", "sin", "tanh", "fma", "softplus", "pow", "cdiv", "umulhi"}
# module prefixes whose calls are elementwise math
MATH_PREFIXES = ("libdevice.", "tl_math.", "tl.math.", "triton.language.math.",
                 "tl.extra.cuda.libdevice.", "tl.extra.hip.libdevice.", "tl.extra.libdevice.")
# triton_helpers calls that are not elementwise math: reductions and tensor plumbing
HELPER_KEEP = kernel_ast.HELPER_REDUCTIONS | {
    "promote_to_tensor", "online_softmax_combine", "online_softmax_reduce", "welford_combine",
    "welford_reduce", "device_assert_then", "set_driver_to_gpu", "randint64", "bucketize_binary_search",
    "x_grid_barrier", "gpu_barrier", "any", "prod", "pack_value_flag", "unpack_value", "unpack_flag",
    "get_flag_and_value", "exclusive_scan_decoupled_lookback", "frexp",
}
# elementwise math whose result is a predicate or an integer of a float: cheap, and replacing it
# with its (float) argument would change the dtype the code downstream expects
_DTYPE_CHANGING = re.compile(r"(^is|signbit|finite|2(u?int|ll|ull|float|half|double)|^ilogb|^float_as|^int_as)")
_VALUE_PRODUCERS = {"load"} | kernel_ast.ATOMIC_FUNCS   # calls whose result is memory data
ARITH_OPS = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_OP_TEXT = {ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
TWIN_MARK = "# memory twin (tko.measure.twins): data arithmetic replaced by additions; loads, stores, " \
            "indices, masks, loops and grid as captured"


@dataclass
class Twin:
    """One memory twin: the rewritten function and what was replaced."""

    kernel: str
    function_source: str                       # the twin's def (no decorators)
    text: str                                  # the whole file with the twin in place
    replaced: dict[str, int] = field(default_factory=dict)   # op -> count
    data_names: list[str] = field(default_factory=list)
    address_names: list[str] = field(default_factory=list)
    untouched_helpers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"kernel": self.kernel, "replaced": dict(self.replaced),
                "replaced_total": sum(self.replaced.values()),
                "data_names": self.data_names, "address_names": self.address_names,
                "untouched_helpers": self.untouched_helpers, "notes": self.notes}


def call_name(node: ast.Call) -> str:
    return ast.unparse(node.func)


def _tl(name: str) -> str | None:
    return kernel_ast._tl_func(name)


def memory_call(node: ast.AST) -> str | None:
    """'load' / 'store' / 'atomic_add' ... for a tl memory call, else None."""
    if isinstance(node, ast.Call):
        fn = _tl(call_name(node))
        if fn in TL_MEMORY:
            return fn
    return None


def _address_args(node: ast.Call, fn: str) -> list[ast.AST]:
    """Pointer and mask arguments of a memory call: what decides which bytes move."""
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    ptr = node.args[0] if node.args else kw.get("pointer")
    mask_pos = 1 if fn == "load" else 2
    mask = node.args[mask_pos] if len(node.args) > mask_pos else kw.get("mask")
    extra = [kw[k] for k in ("other", "boundary_check", "cmp") if k in kw]
    if fn == "load" and len(node.args) > 2:
        extra.append(node.args[2])
    return [a for a in (ptr, mask, *extra) if a is not None]


def _value_arg(node: ast.Call, fn: str) -> tuple[str, int | str] | None:
    """Where the stored value of a store/atomic sits: ('pos', 1) or ('kw', 'value')."""
    if fn == "load":
        return None
    if len(node.args) > 1:
        return ("pos", 1)
    for k in node.keywords:
        if k.arg in ("value", "val"):
            return ("kw", k.arg)
    return None


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _statements(body: list[ast.stmt]):
    for stmt in body:
        yield stmt
        for attr in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, attr, None)
            if isinstance(inner, list):
                yield from _statements(inner)


def _targets(stmt: ast.stmt) -> list[ast.AST]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return [stmt.target]
    return []


class DataFlow:
    """Which local names are data (depend on a loaded value) and which feed an address or mask."""

    def __init__(self, func: ast.FunctionDef):
        self.func = func
        self.data: set[str] = set()
        self.address: set[str] = set()
        self.defs: dict[str, list[ast.AST]] = {}
        for stmt in _statements(func.body):
            value = getattr(stmt, "value", None)
            for target in _targets(stmt):
                for name in _names(target):
                    if value is not None:
                        self.defs.setdefault(name, []).append(value)
                    if isinstance(stmt, ast.AugAssign):
                        self.defs.setdefault(name, []).append(target)
        self._solve_data()
        self._solve_address()

    def is_data(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in self.data:
                return True
            if isinstance(sub, ast.Call) and memory_call(sub) in _VALUE_PRODUCERS:
                return True
        return False

    def _solve_data(self) -> None:
        changed = True
        while changed:  # fixpoint: a loop-carried accumulator becomes data on a later round
            changed = False
            for name, values in self.defs.items():
                if name not in self.data and any(self.is_data(v) for v in values):
                    self.data.add(name)
                    changed = True

    def _solve_address(self) -> None:
        seeds: set[str] = set()
        for stmt in _statements(self.func.body):
            if isinstance(stmt, (ast.For, ast.While, ast.If)):
                # loop bounds and branch conditions decide what runs: control, kept as written
                seeds |= _names(stmt.iter if isinstance(stmt, ast.For) else stmt.test)
                continue
            for node in ast.walk(stmt):
                fn = memory_call(node)
                if fn:
                    for arg in _address_args(node, fn):
                        seeds |= _names(arg)
                elif isinstance(node, ast.Call) and _tl(call_name(node)) in ("device_assert", "static_assert"):
                    seeds |= _names(node)
        stack = list(seeds)
        while stack:
            name = stack.pop()
            if name in self.address:
                continue
            self.address.add(name)
            for value in self.defs.get(name, []):
                stack.extend(_names(value) - self.address)


class _Rewriter(ast.NodeTransformer):
    """Rewrite data arithmetic of one expression; count what it replaced."""

    def __init__(self, flow: DataFlow, local_jit: set[str]):
        self.flow = flow
        self.local_jit = local_jit
        self.replaced: dict[str, int] = {}
        self.untouched: set[str] = set()

    def _count(self, what: str) -> None:
        self.replaced[what] = self.replaced.get(what, 0) + 1

    def visit_Call(self, node: ast.Call) -> ast.AST:
        fn = memory_call(node)
        if fn:
            # pointer and mask stay as written; only a store's value is rewritten
            where = _value_arg(node, fn)
            if where and where[0] == "pos":
                node.args[1] = self.visit(node.args[1])
            elif where:
                for k in node.keywords:
                    if k.arg == where[1]:
                        k.value = self.visit(k.value)
            return node
        name = call_name(node)
        if self._expensive(name) and self.flow.is_data(node):
            data_args = [a for a in node.args if self.flow.is_data(a)]
            if data_args:
                self._count(name)
                parts = [self.visit(a) for a in data_args]
                out = parts[0]
                for part in parts[1:]:
                    out = ast.BinOp(left=out, op=ast.Add(), right=part)
                return out
        if isinstance(node.func, ast.Name) and node.func.id in self.local_jit and self.flow.is_data(node):
            self.untouched.add(node.func.id)
        return self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ARITH_OPS) and (self.flow.is_data(node.left) or self.flow.is_data(node.right)):
            self._count(_OP_TEXT[type(node.op)])
            node.op = ast.Add()
        return node

    @staticmethod
    def _expensive(name: str) -> bool:
        leaf = name.rsplit(".", 1)[-1]
        if name.startswith(MATH_PREFIXES):
            return not _DTYPE_CHANGING.search(leaf)
        if name.startswith("triton_helpers."):
            return leaf not in HELPER_KEEP and not _DTYPE_CHANGING.search(leaf)
        return _tl(name) in TL_EXPENSIVE


def _rewrite_body(body: list[ast.stmt], flow: DataFlow, rewriter: _Rewriter) -> None:
    for stmt in body:
        if isinstance(stmt, (ast.For, ast.While, ast.If, ast.With)):
            _rewrite_body(stmt.body, flow, rewriter)
            _rewrite_body(getattr(stmt, "orelse", []), flow, rewriter)
            continue
        targets = {n for t in _targets(stmt) for n in _names(t)}
        value = getattr(stmt, "value", None)
        if targets:
            # an assignment is rewritten when it computes data that no address or mask uses
            if value is not None and targets & flow.data and not targets & flow.address:
                stmt.value = rewriter.visit(value)
                if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ARITH_OPS):
                    rewriter._count(_OP_TEXT[type(stmt.op)] + "=")
                    stmt.op = ast.Add()
        elif isinstance(stmt, ast.Expr) and memory_call(stmt.value):
            stmt.value = rewriter.visit(stmt.value)


def build_twin_function(func: ast.FunctionDef, local_jit: set[str] = frozenset()) -> tuple[ast.FunctionDef, _Rewriter, DataFlow]:
    """A rewritten copy of ``func`` (decorators dropped), the rewriter (counts) and the data flow."""
    import copy

    twin = copy.deepcopy(func)
    twin.decorator_list = []
    flow = DataFlow(twin)
    rewriter = _Rewriter(flow, set(local_jit) - {func.name})
    _rewrite_body(twin.body, flow, rewriter)
    ast.fix_missing_locations(twin)
    return twin, rewriter, flow


def find_function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise InputError(f"no function {name!r} at the top level of the file")


def splice_function(text: str, func: ast.FunctionDef, new_source: str) -> str:
    """``text`` with the def of ``func`` (not its decorators) replaced by ``new_source``."""
    lines = text.splitlines(keepends=True)
    indent = re.match(r"\s*", lines[func.lineno - 1]).group(0)
    block = "".join(indent + ln + "\n" for ln in [TWIN_MARK] + new_source.splitlines())
    return "".join(lines[:func.lineno - 1]) + block + "".join(lines[func.end_lineno:])


def make_twin(text: str, kernel: str | None = None, path: str = "<kernel>") -> Twin:
    """The memory twin of the kernel of a captured file (or any kernel file's jit function)."""
    parsed = kernel_source.parse_kernel_source(text, path)
    if not parsed["kernels"]:
        raise InputError(f"{path}: no @triton.jit function found")
    if not kernel and parsed.get("standalone_spec"):
        kernel = parsed["standalone_spec"].get("function")
    chosen = kernel_source.select_kernel(parsed, kernel)
    tree = kernel_source.parse_source(text, path)
    func = find_function(tree, chosen["name"])
    local_jit = {k["name"] for k in parsed["kernels"]}
    twin, rewriter, flow = build_twin_function(func, local_jit)
    source = ast.unparse(twin)
    notes = []
    if rewriter.untouched:
        notes.append(f"calls jit helper(s) {', '.join(sorted(rewriter.untouched))} on data unchanged: "
                     f"their arithmetic stays in the twin")
    if not rewriter.replaced:
        notes.append("no data arithmetic found to replace: the twin is the kernel")
    return Twin(kernel=chosen["name"], function_source=source,
                text=splice_function(text, func, source), replaced=dict(sorted(rewriter.replaced.items())),
                data_names=sorted(flow.data), address_names=sorted(flow.address & set(flow.defs)),
                untouched_helpers=sorted(rewriter.untouched), notes=notes)


def absolute_saved_inputs(text: str, capture_dir: Path) -> str:
    """The standalone text with its saved index tensors named by absolute path, so a twin written
    elsewhere still loads the captured ``<kernel>.inputs/`` files."""
    from .standalone import replace_spec

    tree = kernel_source.parse_source(text)
    spec = kernel_source.standalone_spec(tree)
    if not spec:
        return text
    for desc in list(spec.get("args", [])) + list((spec.get("extra_kwargs") or {}).values()):
        if isinstance(desc, dict) and desc.get("saved") and not Path(desc["saved"]).is_absolute():
            desc["saved"] = str((Path(capture_dir) / desc["saved"]).resolve())
    return replace_spec(text, spec)


def write_twin_file(kernel_py: Path, out_path: Path, kernel: str | None = None) -> Twin:
    """Write the twin standalone file; returns the twin."""
    from ..base import atomic

    kernel_py = Path(kernel_py)
    text = inputs.read_text(kernel_py, "a kernel .py file")
    twin = make_twin(text, kernel, str(kernel_py))
    out_text = twin.text
    if Path(out_path).resolve().parent != kernel_py.resolve().parent:
        out_text = absolute_saved_inputs(out_text, kernel_py.resolve().parent)
    atomic.write_text(out_path, out_text)
    twin.text = out_text
    return twin


# --------------------------------------------------------------------------- validity

def isa_census(path: Path, arch: str, kernel: str | None = None) -> dict:
    """Offline compile of one kernel file for ``arch`` and its ISA census: load/store families
    and widths (``tko.compile.compile_probe.cell_summary``) and the instruction mix."""
    from ..compile import offline_compile, probe_results

    outcome = offline_compile.compile_kernel_file(path, arch, kernel=kernel)
    scan = probe_results.scan_compiled(outcome.asm, arch, outcome.metadata)
    from ..read.isa import scan_text

    fmt = "amdgcn" if outcome.asm.get("amdgcn") else "ptx"
    records = scan_text(outcome.asm[fmt], fmt, arch=arch).get("kernels") or [{}]
    return {"arch": arch, "compiled_for": outcome.target.get("arch"), "summary": probe_results.cell_summary(scan),
            "mix": records[0].get("mix") or {}, "config": outcome.config.get("kwargs")}


def census_differences(kernel: dict, twin: dict) -> list[str]:
    """Load/store families, counts and widths that differ between kernel and twin ('' = none)."""
    from ..compile.probe_results import LOAD_STORE_FAMILIES
    a, b = kernel["summary"], twin["summary"]
    diffs = [f"{fam} {a.get(fam)} -> {b.get(fam)}" for fam in LOAD_STORE_FAMILIES if a.get(fam) != b.get(fam)]
    diffs += [f"{key.replace('_', ' ')} {a.get(key)} -> {b.get(key)}" for key in ("load_width", "store_width")
              if a.get(key) != b.get(key)]
    return diffs


def check_twin(kernel_py: Path, twin_py: Path, arches: list[str], kernel: str | None = None,
               timed_arch: str | None = None) -> dict:
    """Compile kernel and twin per arch; the census of an arch agrees when both compiled and the
    load/store families, counts and widths are the same.

    ``valid`` is the agreement on ``timed_arch`` (the device the twin is timed on) when it is one of
    ``arches``, else on every arch: a backend that unrolls the twin's cheaper loop differently
    (static counts multiply) says nothing about the traffic on another backend, and is reported
    in ``reasons`` and ``invalid_on``."""
    from ..base.errors import ToolFailure

    per_arch = []
    for arch in arches:
        entry: dict = {"arch": arch}
        try:
            k = isa_census(kernel_py, arch, kernel)
            t = isa_census(twin_py, arch, kernel)
        except (InputError, ToolFailure) as exc:
            entry.update(ok=False, error=str(exc).splitlines()[0])
            per_arch.append(entry)
            continue
        diffs = census_differences(k, t)
        entry.update(ok=not diffs, compiled_for=k["compiled_for"], differences=diffs,
                     kernel=k["summary"], twin=t["summary"],
                     kernel_mix=_mix_brief(k["mix"]), twin_mix=_mix_brief(t["mix"]))
        per_arch.append(entry)
    valid_on = [e["arch"] for e in per_arch if e.get("ok")]
    invalid_on = [e["arch"] for e in per_arch if not e.get("ok")]
    deciding = [timed_arch] if timed_arch in arches else list(arches)
    valid = bool(per_arch) and all(a in valid_on for a in deciding)
    reasons = [f"{e['arch']}: {e['error']}" for e in per_arch if e.get("error")]
    reasons += [f"{e['arch']}: {'; '.join(e['differences'])}" for e in per_arch if e.get("differences")]
    return {"valid": valid, "decided_by": deciding, "valid_on": valid_on, "invalid_on": invalid_on,
            "arches": per_arch, "reasons": reasons}


def _mix_brief(mix: dict) -> dict:
    keys = ("valu", "transcendental", "salu", "vector_memory", "total", "valu_per_byte", "character",
            "alu", "sfu", "fp32", "ld_st")
    return {k: mix[k] for k in keys if k in mix}
