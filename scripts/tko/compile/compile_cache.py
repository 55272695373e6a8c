"""Offline compile results kept between runs, keyed on everything a compile reads.

An offline compile (``tko.compile.offline_compile.compile_kernel_file``) costs a process seconds: loading an
Inductor kernel module imports torch and Inductor's runtime, then Triton lowers it to ISA. The same
kernel, target and options give the same ISA, so a finished compile is stored under a key made of

- the kernel file's text and the text of the sibling modules it imports (hand-written helpers),
- the compile's arguments: kernel, target arch, config, pointer_range, extra attributes, signature,
  launch event,
- the environment Triton reads (``TRITON_*``, ``AMDGCN_*``, ``HCUGCN_*``, ``MLIR_*``, ``LLVM_*``;
  the cache folders themselves left out) with the variant's own settings over it,
- the versions of triton and torch, and the source of the tko modules that plan a compile,

and read back instead of compiling again. Only successful compiles are stored. The store lives in
``$TKO_CACHE_DIR/compile`` (default ``$XDG_CACHE_HOME/tko`` or ``~/.cache/tko``); any entry can be
deleted at any time; ``TKO_CACHE_DIR=off`` turns it off.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

ENV_PREFIXES = ("TRITON_", "AMDGCN_", "HCUGCN_", "MLIR_", "LLVM_")
# where Triton caches, not what it compiles; the interpreter is off for every offline compile
ENV_IGNORED = {"TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_INTERPRET"}
# The modules whose code turns a kernel file and the arguments into the compile call.
PLANNING_MODULES = ("tko.compile.offline_compile", "tko.read.kernel_source", "tko.base.config", "tko.base.archs")


def root() -> Path | None:
    """The store's folder, or None when ``TKO_CACHE_DIR=off``."""
    given = os.environ.get("TKO_CACHE_DIR", "")
    if given.lower() == "off":
        return None
    if given:
        return Path(given) / "compile"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tko" / "compile"


@functools.lru_cache(maxsize=1)
def _code_and_versions() -> dict:
    from ..base.versions import package_version

    import importlib

    files = [Path(importlib.import_module(name).__file__) for name in PLANNING_MODULES]
    code = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
    return {"code": code, "triton": package_version("triton"), "torch": package_version("torch")}


def _local_imports(path: Path, text: str, seen: dict[str, str]) -> None:
    """The text of every module beside ``path`` that it imports, and theirs, into ``seen``."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return
    for node in tree.body:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        for name in names:
            top = name.split(".")[0]
            for candidate in (path.parent / f"{top}.py", path.parent / top / "__init__.py"):
                key = str(candidate)
                if key in seen or not candidate.is_file():
                    continue
                try:
                    seen[key] = candidate.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue
                _local_imports(candidate, seen[key], seen)


def key(path: str | os.PathLike, text: str, arch: str, args: dict, env: dict | None = None) -> str:
    """The store key of compiling ``path`` (whose text is ``text``) for ``arch`` with ``args``
    (the keyword arguments of the compile) under the environment plus ``env``."""
    siblings: dict[str, str] = {}
    _local_imports(Path(path).resolve(), text, siblings)
    knobs = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES) and k not in ENV_IGNORED}
    knobs.update({k: v for k, v in (env or {}).items() if k not in ENV_IGNORED})
    doc = {"text": text, "siblings": sorted(siblings.values()), "arch": arch, "args": args,
           "env": {k: v for k, v in knobs.items() if v is not None}, **_code_and_versions()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def load(cache_key: str) -> dict | None:
    """The stored outcome (``CompileOutcome.to_json(with_asm=True)``), or None."""
    folder = root()
    if folder is None:
        return None
    try:
        doc = json.loads((folder / cache_key[:2] / f"{cache_key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("asm"), dict) else None


def store(cache_key: str, outcome: dict[str, Any]) -> None:
    """Keep ``outcome`` under ``cache_key`` (written atomically: a reader sees it whole or not at
    all); a store that cannot be written is skipped, never an error of the compile."""
    from ..base import atomic
    from ..base.errors import OutputError

    folder = root()
    if folder is None:
        return
    try:
        atomic.write_text(folder / cache_key[:2] / f"{cache_key}.json", json.dumps(outcome, default=str))
    except OutputError:
        pass
