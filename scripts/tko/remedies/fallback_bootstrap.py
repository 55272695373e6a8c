"""Run a repro script as ``__main__`` with ``torch._dynamo.disable`` applied to named regions.

    python fallback_bootstrap.py [--disable TARGET ...] [--set NAME=JSON ...] [--eager-compile]
        [--static-shapes] [--replace-rows OPS] -- script.py args...

The one launcher of every end-to-end trial (eager_fallback_ab.py, try_remedies.py): settings reach
the program only through it and the environment, never by editing the user's file. ``--set``
assigns ``inductor.<config>`` / ``dynamo.<config>`` values before the script runs;
``--eager-compile`` makes ``torch.compile`` return the callable uncompiled; ``--static-shapes``
forces ``dynamic=False``; ``--replace-rows softmax,layer_norm`` routes those torch functions to the
bundled row kernels (``tko.remedies.row_replace``); ``$TKO_PINS`` installs config pins; ``$TKO_TRIAL_OUT`` turns on the
timing of compiled callables and the saving of their outputs (``tko.remedies.trial_hooks``).

TARGET is ``module.path:Name`` or ``module.path:Class.method`` for code in an importable module
(patched after import, before the script runs), or ``__main__:Name`` / ``__main__:Class.method`` for
code defined in the script itself or imported by it at top level: the script's AST gets
``Name = torch._dynamo.disable(Name)`` right after the top-level statement that defines or imports ``Name``. With no --disable the script runs
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


def _binds(node: ast.stmt, name: str) -> bool:
    """Whether a top-level statement defines ``name`` or imports it (``from model import Name``:
    a model class the script imports is patched there, on the one class object every user shares)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((alias.asname or alias.name.split(".")[0]) == name for alias in node.names)
    return False


def rewrite_main(source: str, filename: str, attr_paths: list[str]) -> ast.Module:
    tree = ast.parse(source, filename)
    for attr_path in attr_paths:
        head = attr_path.split(".")[0]
        index = next((i for i, node in enumerate(tree.body) if _binds(node, head)), None)
        if index is None:
            raise LookupError(f"{filename} defines or imports no top-level function or class {head!r}")
        patch = ast.parse(f"{attr_path} = __import__('torch')._dynamo.disable({attr_path})").body[0]
        tree.body.insert(index + 1, patch)
    return ast.fix_missing_locations(tree)


def _setting(text: str) -> tuple[str, object]:
    import json

    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=JSON, got {text!r}")
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


HERE = os.path.dirname(os.path.abspath(__file__))


def _install_trial_hooks(a) -> None:
    # import tko from scripts/, then take scripts/ off the path: the repro sees its own modules
    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
    try:
        from tko.remedies import row_replace, trial_hooks
    finally:
        sys.path.remove(os.path.dirname(os.path.dirname(HERE)))
    trial_hooks.install_from_env(dict(a.set), eager=a.eager_compile, static=a.static_shapes)
    if a.replace_rows:
        done = row_replace.install(row_replace.parse_ops(a.replace_rows))
        print(f"{PATCH_PREFIX}: row kernels swapped in for {', '.join(done) or 'nothing'}", file=sys.stderr)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fallback_bootstrap")
    parser.add_argument("--disable", action="append", default=[])
    parser.add_argument("--set", action="append", default=[], type=_setting)
    parser.add_argument("--eager-compile", action="store_true")
    parser.add_argument("--static-shapes", action="store_true")
    parser.add_argument("--replace-rows", default=None, metavar="OPS")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    a = parser.parse_args(argv)
    # run as a script, this file's folder is sys.path[0]; its modules must not shadow the repro's
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
    main_targets = [t.split(":", 1)[1] for t in a.disable if t.startswith("__main__:")]
    script = os.path.abspath(a.script)
    sys.argv = [script, *a.args]
    sys.path.insert(0, os.path.dirname(script))
    trial = a.set or a.eager_compile or a.static_shapes or a.replace_rows or any(
        os.environ.get(v) for v in ("TKO_TRIAL_OUT", "TKO_PINS"))
    try:
        if trial:
            _install_trial_hooks(a)
        for target in a.disable:
            if not target.startswith("__main__:"):
                patch_module_target(target)
        with open(script, encoding="utf-8") as fh:
            source = fh.read()
        code = compile(rewrite_main(source, script, main_targets), script, "exec")
    except (ImportError, AttributeError, LookupError, SyntaxError, OSError) as exc:
        print(f"{PATCH_PREFIX} error: cannot apply --disable: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    except Exception as exc:  # e.g. a malformed pins file
        print(f"{PATCH_PREFIX} error: cannot set up the trial: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    if a.disable:
        print(f"{PATCH_PREFIX}: torch._dynamo.disable applied to {', '.join(a.disable)}", file=sys.stderr)
    run_as_main(code, script)
    return 0


def run_as_main(code, script: str) -> None:
    """Run the script's code in a real module that is ``sys.modules["__main__"]``, as ``python
    script.py`` does: pickle finds its functions there (``torch.multiprocessing.spawn`` of a worker
    the script defines), and spawned children re-import the script by its ``__file__``."""
    import types

    module = types.ModuleType("__main__")
    module.__dict__.update({"__file__": script, "__builtins__": __builtins__, "__spec__": None,
                            "__loader__": None, "__package__": None, "__cached__": None})
    sys.modules["__main__"] = module
    exec(code, module.__dict__)


if __name__ == "__main__":
    sys.exit(main())
