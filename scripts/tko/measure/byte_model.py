"""Bytes a kernel must move, from its captured arguments: a floor that cannot exceed physics.

Inductor's estimate (``num_bytes`` in a captured spec) sums every argument's size, and doubles
``in_out_ptr`` arguments.  That over-counts a gather (an embedding table of which few rows are
read) and a broadcast, and says nothing about passes.  This model counts, per tensor storage,
the elements a view can reach (shape and stride, broadcast dimensions once), once for reading
and once for writing (an atomic reads and writes), and for a table read or written through a
loaded index the rows the saved index tensor really names (unique rows x row bytes).  Without a
saved index the whole table is counted and the number is flagged as an upper bound.

A bandwidth over the measured copy peak beyond noise means the byte count is wrong for this
run (the data was L2-resident, or bytes were over-counted): :func:`above_peak` says so, and the
decision rules refuse "at copy bandwidth" on it.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from ..read import kernel_ast, kernel_source
from ..compile.offline_compile import ELEMENT_BYTES, TORCH_TO_TRITON_DTYPE

ABOVE_PEAK_TEXT = "byte estimate above what the device can move: L2-resident or over-counted"


def element_bytes(dtype: str | None) -> int | None:
    name = str(dtype or "").replace("torch.", "")
    return ELEMENT_BYTES.get(TORCH_TO_TRITON_DTYPE.get(name, name))


def view_elements(desc: dict) -> tuple[int, int]:
    """(span, distinct): elements from the first to the last a view reaches, and the distinct
    elements it names (broadcast dimensions, stride 0, count once)."""
    shape, stride = list(desc.get("shape") or []), list(desc.get("stride") or [])
    if any(int(s) == 0 for s in shape):
        return 0, 0
    span = 1 + sum((int(s) - 1) * abs(int(st)) for s, st in zip(shape, stride))
    distinct = 1
    for s, st in zip(shape, stride):
        if int(st) != 0:
            distinct *= int(s)
    return span, min(span, distinct)


# --------------------------------------------------------------------------- what the source does

def _pointer_params(kernel: dict) -> set[str]:
    return {p["name"] for p in kernel["params"] if p["kind"] == "pointer"}


def access_facts(func: ast.FunctionDef, kernel: dict) -> dict:
    """Per pointer parameter: read / written / atomic, passes (loops that load it), and for an
    indirect access the pointer parameters whose loaded values form the index."""
    pointers = _pointer_params(kernel)
    origin: dict[str, set[str]] = {}          # local name -> pointers whose loaded data it carries
    alias: dict[str, set[str]] = {}           # local name -> pointers it is an address into

    def pointer_refs(node: ast.AST) -> set[str]:
        """The pointer parameters an address expression points into: named directly or through a
        local such as ``a_ptrs = a_ptr + offs`` or ``row_ptr = x_ptr + row * stride`` (not through
        data a load returned)."""
        out: set[str] = set()
        stack = [node]
        while stack:
            sub = stack.pop()
            if isinstance(sub, ast.Call) and kernel_ast._tl_func(ast.unparse(sub.func)) == "load":
                continue
            if isinstance(sub, ast.Name):
                out |= {sub.id} & pointers or alias.get(sub.id, set())
            stack.extend(ast.iter_child_nodes(sub))
        return out

    def loaded_from(node: ast.AST) -> set[str]:
        out: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                out |= origin.get(sub.id, set())
            if isinstance(sub, ast.Call) and kernel_ast._tl_func(ast.unparse(sub.func)) == "load" and sub.args:
                out |= {n.id for n in ast.walk(sub.args[0]) if isinstance(n, ast.Name) and n.id in pointers}
        return out

    facts: dict[str, dict] = {p: {"read": False, "written": False, "atomic": False, "loops": set(),
                                  "direct": False, "index_from": set()} for p in pointers}

    def visit(body: list[ast.stmt], loop: int | None) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.For, ast.While)):
                visit(stmt.body, id(stmt))
                visit(stmt.orelse, loop)
                continue
            if isinstance(stmt, ast.If):
                visit(stmt.body, loop)
                visit(stmt.orelse, loop)
                continue
            for sub in ast.walk(stmt):
                if isinstance(sub, ast.Call):
                    _record_access(sub, loop, facts, loaded_from, pointer_refs)
            value = getattr(stmt, "value", None)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else (
                [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) else [])
            if value is not None:
                got, into = loaded_from(value), pointer_refs(value)
                for target in targets:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            origin[n.id] = origin.get(n.id, set()) | got
                            if into and n.id not in pointers:
                                alias[n.id] = alias.get(n.id, set()) | into

    for _ in range(2):  # a loop-carried index needs a second round to reach its loads
        visit(func.body, None)
    return facts


def _record_access(call: ast.Call, loop, facts, loaded_from, pointer_refs) -> None:
    fn = kernel_ast._tl_func(ast.unparse(call.func))
    if fn not in ("load", "store") and fn not in kernel_ast.ATOMIC_FUNCS:
        return
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    ptr = call.args[0] if call.args else kw.get("pointer")
    if ptr is None:
        return
    bases = pointer_refs(ptr)
    index_from = loaded_from(ptr) - bases
    for base in bases:
        f = facts[base]
        if fn == "load":
            f["read"] = True
            f["loops"].add(loop)
        elif fn == "store":
            f["written"] = True
        else:
            f["atomic"] = True
        if index_from:
            f["index_from"] |= index_from
        else:
            f["direct"] = True


# --------------------------------------------------------------------------- gathered rows

def unique_rows(index_desc: dict, rows: int, capture_dir: Path | None) -> tuple[int | None, str]:
    """Distinct rows (mod ``rows``: Inductor wraps negative indices) a saved index tensor names."""
    saved = index_desc.get("saved")
    if not saved:
        return None, index_desc.get("save_skipped") or "index tensor not saved at capture"
    path = Path(saved) if os.path.isabs(saved) else Path(capture_dir or ".") / saved
    if not path.is_file():
        return None, f"saved index {path} not found"
    try:
        import torch

        flat = torch.load(str(path), map_location="cpu")
        view = torch.as_strided(flat, index_desc["shape"], index_desc["stride"],
                                int(index_desc.get("storage_offset") or 0))
        return int(torch.unique(view.reshape(-1).long() % max(1, rows)).numel()), f"unique values of {path.name}"
    except Exception as exc:  # a damaged file leaves the bound, never a crash
        return None, f"reading {path.name} failed ({type(exc).__name__}: {exc})"


# --------------------------------------------------------------------------- the model

def _arg_entry(desc: dict, f: dict | None, by_name: dict, capture_dir: Path | None) -> dict:
    es = element_bytes(desc.get("dtype")) or 0
    span, distinct = view_elements(desc)
    full = distinct * es
    entry = {"name": desc.get("name"), "dtype": desc.get("dtype"), "shape": desc.get("shape"),
             "stride": desc.get("stride"), "element_bytes": es, "view_bytes": full,
             "role": None, "touched_bytes": 0, "counted_bytes": 0, "passes": 0, "upper_bound": False,
             "contiguous": _contiguous(desc)}
    if f is None or not (f["read"] or f["written"] or f["atomic"]):
        entry["role"] = "unused"
        return entry
    entry["role"] = "+".join(r for r in ("read", "written", "atomic") if f[r])
    touched = full
    if f["index_from"] and not f["direct"]:
        rows = int((desc.get("shape") or [1])[0]) or 1
        got, how = None, "no index pointer found"
        for src in sorted(f["index_from"]):
            got, how = unique_rows(by_name.get(src, {}), rows, capture_dir)
            if got is not None:
                break
        entry["gather"] = {"index_args": sorted(f["index_from"]), "rows": rows, "unique_rows": got,
                           "row_bytes": full // rows, "how": how}
        if got is None:
            entry["upper_bound"] = True
        else:
            touched = min(full, got * (full // rows))
    entry["touched_bytes"] = touched
    # an atomic reads and writes each touched element; so does an in/out buffer
    directions = int(f["read"] or f["atomic"]) + int(f["written"] or f["atomic"])
    entry["counted_bytes"] = touched * directions
    entry["passes"] = len(f["loops"]) if f["read"] else 0
    return entry


def _contiguous(desc: dict) -> bool:
    expect = 1
    for s, st in reversed(list(zip(desc.get("shape") or [], desc.get("stride") or []))):
        if int(s) > 1 and int(st) != expect:
            return False
        expect *= int(s)
    return True


def byte_model(spec: dict, kernel: dict, func: ast.FunctionDef, capture_dir: Path | None = None) -> dict:
    """The byte model of one captured kernel: unique bytes, per-argument detail, passes."""
    facts = access_facts(func, kernel)
    tensors = [d for d in spec.get("args", []) if isinstance(d, dict) and d.get("kind") == "tensor"]
    by_name = {d.get("name"): d for d in tensors}
    entries = [_arg_entry(d, facts.get(d.get("name")), by_name, capture_dir) for d in tensors]
    entries = _merge_storages(entries, tensors)
    unique = sum(e["counted_bytes"] for e in entries)
    read = sum(e["touched_bytes"] for e in entries if "read" in e["role"] or "atomic" in e["role"])
    multi = sum(e["touched_bytes"] * max(0, e["passes"] - 1) for e in entries) + unique
    passes = {e["name"]: e["passes"] for e in entries if e["passes"] > 1}
    notes = []
    if any(e["upper_bound"] for e in entries):
        notes.append("a table read or written through an index was counted whole (no saved index "
                     "tensor): unique_bytes is an upper bound")
    inductor = spec.get("num_bytes")
    if isinstance(inductor, (int, float)) and inductor and unique and inductor > 1.05 * unique:
        notes.append(f"Inductor's estimate ({int(inductor)} B) is {inductor / unique:.2f}x these unique bytes")
    return {"unique_bytes": unique, "read_bytes": read, "write_bytes": unique - read,
            "upper_bound": any(e["upper_bound"] for e in entries),
            "inductor_bytes": inductor, "inductor_source": spec.get("bytes_source"),
            "one_pass_bytes": unique, "multi_pass_bytes": multi, "passes": passes,
            "max_passes": max([e["passes"] for e in entries] or [0]),
            "args": entries, "notes": notes}


def _merge_storages(entries: list[dict], tensors: list[dict]) -> list[dict]:
    """Views of one storage count once: arguments a capture marked with the same storage key
    (``storage_key`` or ``data_ptr``) keep the largest touched span."""
    groups: dict = {}
    for entry, desc in zip(entries, tensors):
        key = desc.get("storage_key") or desc.get("data_ptr")
        if key is None:
            continue
        groups.setdefault(key, []).append(entry)
    for members in groups.values():
        if len(members) < 2:
            continue
        keep = max(members, key=lambda e: e["touched_bytes"])
        for e in members:
            if e is not keep:
                e["shared_storage_with"] = keep["name"]
                e["counted_bytes"] = 0
    return entries


def model_for_file(text: str, path: str | Path, kernel: str | None = None) -> dict:
    """Parse a captured standalone file and build its byte model (saved inputs beside it)."""
    from ..base.errors import InputError
    from .twins import find_function

    parsed = kernel_source.parse_kernel_source(text, str(path))
    spec = parsed.get("standalone_spec")
    if not spec:
        raise InputError(f"{path}: no _TKO_SPEC: not a captured standalone kernel file")
    chosen = kernel_source.select_kernel(parsed, kernel or spec.get("function"))
    func = find_function(kernel_source.parse_source(text, str(path)), chosen["name"])
    return byte_model(spec, chosen, func, Path(path).resolve().parent)


# --------------------------------------------------------------------------- physics check

def gbps(num_bytes: float | None, ms: float | None) -> float | None:
    if not num_bytes or not ms or ms <= 0:
        return None
    return num_bytes / (ms * 1e-3) / 1e9


def above_peak(num_bytes: float | None, ms: float | None, peak_gbps: float | None, noise: float = 0.05) -> bool:
    """True when ``num_bytes`` in ``ms`` is faster than the copy peak by more than ``noise``:
    the bytes did not all come from HBM (L2-resident) or are over-counted."""
    rate = gbps(num_bytes, ms)
    return bool(rate and peak_gbps and rate > peak_gbps * (1.0 + noise))


def bandwidth_check(model: dict, ms: float | None, peak_gbps: float | None, noise: float = 0.05) -> dict:
    """GB/s and % of copy peak under the unique bytes and under Inductor's estimate, each flagged."""
    out = {}
    for key, nbytes in (("unique", model.get("unique_bytes")), ("inductor", model.get("inductor_bytes"))):
        rate = gbps(nbytes, ms)
        flagged = above_peak(nbytes, ms, peak_gbps, noise)
        out[key] = {"bytes": nbytes, "gb_per_s": rate,
                    "pct_of_copy": 100.0 * rate / peak_gbps if rate and peak_gbps else None,
                    "above_peak": flagged, "flag": ABOVE_PEAK_TEXT if flagged else None}
    return out
