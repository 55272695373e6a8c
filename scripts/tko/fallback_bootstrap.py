"""Run a repro script as ``__main__`` with ``torch._dynamo.disable`` applied to named regions.

    python fallback_bootstrap.py [--disable TARGET ...] -- script.py args...

TARGET is ``module.path:Name`` or ``module.path:Class.method`` for code in an importable module
(patched after import, before the script runs), or ``__main__:Name`` / ``__main__:Class.method`` for
code defined in the script itself: the script's AST gets ``Name = torch._dynamo.disable(Name)``
right after the top-level statement that defines ``Name``. With no --disable the script runs
unchanged, so both arms of an A/B go through the same launcher.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import sys

PATCH_PREFIX = "TKO_FALLBACK"


def _disable(obj):
    import torch

    return torch._dynamo.disable(obj)


def patch_module_target(target: str) -> None:
    module_name, _, attr_path = target.partition(":")
    module = importlib.import_module(module_name)
    owner, parts = module, attr_path.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    original = getattr(owner, parts[-1])  # AttributeError -> reported by the caller
    setattr(owner, parts[-1], _disable(original))


def rewrite_main(source: str, filename: str, attr_paths: list[str]) -> ast.Module:
    tree = ast.parse(source, filename)
    for attr_path in attr_paths:
        head = attr_path.split(".")[0]
        index = next((i for i, node in enumerate(tree.body)
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.name == head), None)
        if index is None:
            raise LookupError(f"{filename} defines no top-level function or class {head!r}")
        patch = ast.parse(f"{attr_path} = __import__('torch')._dynamo.disable({attr_path})").body[0]
        tree.body.insert(index + 1, patch)
    return ast.fix_missing_locations(tree)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fallback_bootstrap")
    parser.add_argument("--disable", action="append", default=[])
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    a = parser.parse_args(argv)
    main_targets = [t.split(":", 1)[1] for t in a.disable if t.startswith("__main__:")]
    script = os.path.abspath(a.script)
    sys.argv = [script, *a.args]
    sys.path.insert(0, os.path.dirname(script))
    try:
        for target in a.disable:
            if not target.startswith("__main__:"):
                patch_module_target(target)
        with open(script, encoding="utf-8") as fh:
            source = fh.read()
        code = compile(rewrite_main(source, script, main_targets), script, "exec")
    except (ImportError, AttributeError, LookupError, SyntaxError, OSError) as exc:
        print(f"{PATCH_PREFIX} error: cannot apply --disable: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    if a.disable:
        print(f"{PATCH_PREFIX}: torch._dynamo.disable applied to {', '.join(a.disable)}", file=sys.stderr)
    globs = {"__name__": "__main__", "__file__": script, "__builtins__": __builtins__}
    exec(code, globs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
