"""The package's folders are its architecture: one subpackage per stage, imports only downward.

The floors are declared once, lowest first, in ``tko.FLOORS``; ARCHITECTURE.md describes each one.
A module imports from its own floor or a lower one; the root modules (``tko.cli``) stand above every
floor; the lowest floor (``base``) imports from no other. Lazy imports inside functions count too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tko

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "scripts" / "tko"


def modules() -> dict[str, Path]:
    """Dotted name -> file, for every module and subpackage of tko."""
    found = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The tko modules that ``name`` imports, at module level or inside functions."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                source = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            if source.split(".")[0] != "tko":
                continue
            for alias in node.names:
                full = f"{source}.{alias.name}"
                out.add(full if full in known else source)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "tko")
    return {m for m in out if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def floor(name: str) -> int:
    """The floor index of a module; the root modules stand above all floors, the root package below."""
    parts = name.split(".")
    if len(parts) == 1:
        return -1  # tko itself: __version__ and FLOORS, imported by any floor
    return tko.FLOORS.index(parts[1]) if parts[1] in tko.FLOORS else len(tko.FLOORS)


def test_every_subpackage_is_a_declared_floor_and_every_module_lives_in_one():
    subpackages = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    assert subpackages == set(tko.FLOORS)
    at_root = {p.stem for p in PKG.glob("*.py")} - {"__init__"}
    assert at_root == {"cli"}, f"modules outside the floors: {sorted(at_root - {'cli'})}"


def test_imports_run_only_downward():
    upward = [f"{a} -> {b}" for a, deps in graph().items() for b in deps if floor(b) > floor(a)]
    assert not upward, "imports from a higher floor:\n" + "\n".join(sorted(upward))


def test_the_base_imports_no_stage():
    stages = [f"{a} -> {b}" for a, deps in graph().items() if a.startswith("tko.base")
              for b in deps if floor(b) > 0]
    assert not stages, stages


def test_no_import_cycle():
    g = graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(node, path):
        state[node] = 1
        path.append(node)
        for dep in sorted(g[node]):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, path)
        path.pop()
        state[node] = 2

    for node in sorted(g):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_architecture_md_names_every_floor_in_order():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    headings = re.findall(r"^### `tko\.(\w+)`", text, re.M)
    assert headings == list(tko.FLOORS)
