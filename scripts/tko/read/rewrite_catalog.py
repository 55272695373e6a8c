"""Model-level rewrites (``references/rewrite_catalog.yaml``): read the catalog, find its patterns.

Three ways to find one, each a function here: in the profiled Triton kernels' names (Inductor names a
fused kernel after its aten ops: ``triton_per_fused__softmax_div_masked_fill_0``), in the program's
source (every regular expression of ``model_code.all`` inside one function, reported at the line of
``anchor``, with the lines around it), and from a program rule that fired (``many_tiny_launches``).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from ..base import inputs, resources
from ..base.errors import InputError
from . import rewrite_code

CATALOG_PATH = resources.reference("rewrite_catalog.yaml")
REQUIRED = ("id", "pattern", "detect", "replacement", "after", "conditions", "source")
SNIPPET_LINES = 2      # lines shown before and after the anchor line
MAX_SOURCE_BYTES = 2 << 20


def load_catalog(path: Path | str = CATALOG_PATH) -> list[dict]:
    import yaml

    try:
        data = yaml.safe_load(inputs.read_text(Path(path), "a YAML rewrite catalog"))
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({' '.join(str(exc).split())[:200]})") from None
    entries = data.get("rewrites") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{path}: expected a mapping with a non-empty 'rewrites' list")
    for e in entries:
        missing = [k for k in REQUIRED if not isinstance(e, dict) or not e.get(k)]
        if missing:
            raise InputError(f"{path}: rewrite {e.get('id', '?') if isinstance(e, dict) else e!r}: "
                             f"missing {', '.join(missing)}")
        try:
            for rx in _patterns(e):
                re.compile(rx)
        except re.error as exc:
            raise InputError(f"{path}: rewrite {e['id']}: bad pattern ({exc})") from None
    return entries


def _patterns(e: dict) -> list[str]:
    d = e["detect"]
    mc = d.get("model_code") or {}
    return list(d.get("kernel_names") or []) + list(mc.get("all") or []) + ([mc["anchor"]] if mc.get("anchor") else [])


@functools.lru_cache(maxsize=1)
def bundled() -> tuple[dict, ...]:
    return tuple(load_catalog())


def by_kernel_names(entry: dict, kernels: list[tuple[str, float | None]]) -> list[dict]:
    """``[{"how": "kernel_name", "kernel", "share"}]`` for the (name, share) pairs the entry matches."""
    pats = [re.compile(p, re.IGNORECASE) for p in entry["detect"].get("kernel_names") or []]
    return [{"how": "kernel_name", "kernel": name, "share": share} for name, share in kernels
            if any(p.search(name) for p in pats)]


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


CHECK_CALLS = ("assert_close", "assert_allclose", "allclose", "isclose", "assert_equal", "equal")


def _is_check(call: ast.AST) -> bool:
    """A call of an output check: torch.testing.assert_close, torch.allclose, np.testing.assert_allclose..."""
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in CHECK_CALLS


def _inside_checks(fn: ast.AST) -> list[tuple[int, int]]:
    """(first, last) line of each ``assert`` statement and output-check call in ``fn``."""
    return [(n.lineno, n.end_lineno) for n in ast.walk(fn) if isinstance(n, ast.Assert) or _is_check(n)]


def check_only_lines(fn: ast.AST) -> set[int]:
    """Lines of ``fn`` that only check outputs: assert statements, output-check calls, and assignments
    whose names are read only inside those (``ref = x * torch.rsqrt(...)`` then
    ``torch.testing.assert_close(out, ref)``). A catalog pattern written there is a reference, not the
    model: detection skips these lines."""
    checks = _inside_checks(fn)

    def in_check(node) -> bool:
        return any(a <= node.lineno and node.end_lineno <= b for a, b in checks)

    lines = {ln for a, b in checks for ln in range(a, b + 1)}
    loads: dict[str, list[ast.Name]] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            loads.setdefault(n.id, []).append(n)
    for st in ast.walk(fn):
        if not isinstance(st, (ast.Assign, ast.AnnAssign)) or st.value is None:
            continue
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if names and len(names) == len(targets) and all(loads.get(n) and all(in_check(u) for u in loads[n])
                                                        for n in names):
            lines.update(range(st.lineno, st.end_lineno + 1))
    return lines


def by_model_code(entry: dict, path: Path) -> list[dict]:
    """``[{"how": "model_code", "file", "line", "function", "snippet"}]`` (plus ``change`` or
    ``change_why`` where :mod:`tko.read.rewrite_code` has a rule for the entry): each function of ``path``
    holding every ``model_code.all`` expression (innermost functions first; each anchor line once).
    Lines that only check outputs (:func:`check_only_lines`: an assert, ``assert_close`` /
    ``allclose``, a reference computed for them) are not model code and are skipped."""
    mc = entry["detect"].get("model_code")
    if not mc:
        return []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:MAX_SOURCE_BYTES]
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return []
    lines = text.splitlines()
    alls = [re.compile(p) for p in mc.get("all") or []]
    anchor = re.compile(mc.get("anchor") or mc["all"][0])
    found, seen = [], set()
    for fn in sorted(_functions(tree), key=lambda f: f.end_lineno - f.lineno):
        skip = check_only_lines(fn)
        body = [(n, lines[n - 1]) for n in range(fn.lineno, min(fn.end_lineno, len(lines)) + 1) if n not in skip]
        if not all(p.search("\n".join(ln for _, ln in body)) for p in alls):
            continue
        at = next((n for n, ln in body if anchor.search(ln)), None)
        if at is None or at in seen:
            continue
        seen.add(at)
        lo, hi = max(1, at - SNIPPET_LINES), min(len(lines), at + SNIPPET_LINES)
        hit = {"how": "model_code", "file": str(path), "line": at, "function": fn.name,
               "snippet": [{"line": n, "text": lines[n - 1]} for n in range(lo, hi + 1)]}
        advice = rewrite_code.library_advice(entry["id"], path)
        found.append({**hit, **(rewrite_code.propose(entry["id"], tree, lines, fn, at) or {}),
                      **({"library": advice} if advice else {})})
    return found


def detect(kernels: list[tuple[str, float | None]], sources: list[Path], program_rules: list[str],
           catalog: tuple[dict, ...] | None = None) -> list[dict]:
    """Every catalog entry found, with how: ``{"id", "pattern", "found_by": [...], "replacement",
    "after", "conditions", "arm", "source"}``, in the catalog's order."""
    out = []
    for e in catalog or bundled():
        found = by_kernel_names(e, kernels)
        for src in sources:
            found += by_model_code(e, src)
        rule = e["detect"].get("program_rule")
        if rule and rule in program_rules:
            found.append({"how": "program_rule", "rule": rule})
        if found:
            out.append({"id": e["id"], "pattern": e["pattern"], "found_by": found, "replacement": e["replacement"],
                        "after": e["after"], "conditions": e["conditions"], "arm": e.get("arm"),
                        "source": e["source"]})
    return out
