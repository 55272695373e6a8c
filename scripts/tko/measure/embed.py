"""Copies of this package's own code in files that must run without it.

Two files carry such copies: every captured standalone kernel file (the runner of
``tko/measure/standalone_runner.py`` with ``tko.measure.bench.cpu_wall_bench``) and
``scripts/triton_benchmark_template.py`` (``tko/measure/bench.py`` whole, as its inline core, used when
the template is copied somewhere without this package). The copies are generated from the one
source here, never edited by hand; ``tests/test_triton_benchmark_template.py`` fails when the
template's copy differs from what :func:`inline_bench` gives, and

    cd scripts && python -m tko.measure.embed --write

brings the template up to date.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE / "bench.py"
TEMPLATE = HERE.parents[1] / "triton_benchmark_template.py"
INLINE_BEGIN = "# ==== inline core: generated from scripts/tko/measure/bench.py by `python -m tko.measure.embed --write`; do not edit ===="
INLINE_END = "# ==== end of the inline core ===="
# the one package import of bench.py, and what stands in for it in a copy
_BENCH_IMPORT = "from ..base.errors import ToolFailure\n"
_BENCH_IMPORT_STAND_IN = ("class ToolFailure(Exception):  # tko.base.errors.ToolFailure, where the package is absent\n"
                          "    exit_code = 1\n")


def function_source(path: Path, name: str, new_name: str | None = None) -> str:
    """The text of top-level function ``name`` in ``path`` (decorators, docstring and comments
    kept), renamed to ``new_name`` in its ``def`` line."""
    text = Path(path).read_text(encoding="utf-8")
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            lines = text.splitlines(keepends=True)
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            source = "".join(lines[first:node.end_lineno])
            if new_name:
                source = re.sub(rf"^def {re.escape(name)}\(", f"def {new_name}(", source, count=1, flags=re.M)
            return source
    raise LookupError(f"{path}: no top-level function {name}")


def module_body(path: Path) -> str:
    """A module's text after its docstring and ``from __future__`` line."""
    text = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(text)
    skip = 0
    for node in tree.body:
        is_doc = isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (is_doc or is_future):
            break
        skip = node.end_lineno
    return "".join(text.splitlines(keepends=True)[skip:]).strip("\n") + "\n"


def inline_bench() -> str:
    """``tko/measure/bench.py`` as the benchmark template's inline core (its package import replaced)."""
    body = module_body(BENCH)
    if _BENCH_IMPORT not in body:
        raise LookupError(f"{BENCH}: expected the line {_BENCH_IMPORT.strip()!r}")
    return body.replace(_BENCH_IMPORT, _BENCH_IMPORT_STAND_IN, 1)


def between(text: str, begin: str, end: str) -> tuple[int, int]:
    """Offsets of the text between the ``begin`` and ``end`` marker lines (exactly one line
    each that is the marker alone: a mention inside a string does not count)."""
    begins = [m.end() + 1 for m in re.finditer(rf"^{re.escape(begin)}$", text, re.M)]
    ends = [m.start() for m in re.finditer(rf"^{re.escape(end)}$", text, re.M)]
    if len(begins) != 1 or len(ends) != 1:
        raise LookupError(f"expected one {begin!r} and one {end!r} line")
    start, stop = begins[0], ends[0]
    if stop < start:
        raise LookupError(f"{end!r} comes before {begin!r}")
    return start, stop


def template_block(text: str) -> str:
    start, stop = between(text, INLINE_BEGIN, INLINE_END)
    return text[start:stop]


def with_inline_bench(text: str) -> str:
    """The template's text with its inline core regenerated."""
    start, stop = between(text, INLINE_BEGIN, INLINE_END)
    return text[:start] + "\n" + inline_bench() + "\n\n" + text[stop:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate (or check) the benchmark template's inline core.")
    parser.add_argument("--write", action="store_true", help="rewrite the template's inline core in place")
    opts = parser.parse_args(argv)
    text = TEMPLATE.read_text(encoding="utf-8")
    fresh = with_inline_bench(text)
    if opts.write:
        if fresh != text:
            from ..base.atomic import write_text

            write_text(TEMPLATE, fresh)
        print(f"{TEMPLATE.name}: inline core {'regenerated' if fresh != text else 'already current'}")
        return 0
    if fresh != text:
        print(f"{TEMPLATE.name}: inline core out of date; run `python -m tko.measure.embed --write` in scripts/",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
