"""Where a program launches a Triton kernel: the first frame outside Triton, torch and this package,
and whether an autotuner or ``@triton.heuristics`` between it and the kernel made the launch.
Read by the plain ``@triton.jit`` capture and the ``@triton.autotune`` capture alike.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# Classes whose launches the capture records through their own wrappers (by class name).
_OWNER_CLASSES = ("Autotuner", "CachingAutotuner", "DebugAutotuner")
_OWNER_METHODS = ("run", "_bench", "benchmark_all_configs", "bench", "kernel_call", "warmup", "precompile")
_internal_dirs: tuple[str, ...] = ()


def internal_dirs() -> tuple[str, ...]:
    """Folders whose frames are never a launch site: triton, torch and this package."""
    global _internal_dirs
    if not _internal_dirs:
        dirs = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # scripts/tko
        for mod in ("triton", "torch"):
            m = sys.modules.get(mod)
            if m is not None and getattr(m, "__file__", None):
                dirs.append(os.path.dirname(os.path.abspath(m.__file__)))
        _internal_dirs = tuple(d + os.sep for d in dirs)
    return _internal_dirs


def walk_launch_stack(frame: Any) -> tuple[dict | None, str | None, list[str]]:
    """(launch site ``{file, line, function}``, owner class name, heuristics names) from ``frame``
    outward. The site is the first frame outside :func:`internal_dirs`; the ``self`` of the
    internal frames says whether ``@triton.heuristics`` (below the site) or an autotuner (anywhere:
    a custom ``do_bench`` of the user's sits between an Autotuner and its kernel) made the launch."""
    skip = internal_dirs()
    site, owner, heuristics = None, None, []
    for _ in range(64):
        if frame is None:
            break
        filename = frame.f_code.co_filename
        if not filename.startswith(skip):
            if site is None and not filename.startswith("<"):
                site = {"file": filename, "line": frame.f_lineno, "function": frame.f_code.co_name}
        elif frame.f_code.co_name in _OWNER_METHODS:
            this = frame.f_locals.get("self")
            cls = type(this).__name__ if this is not None else ""
            if cls in _OWNER_CLASSES:
                return site, cls, heuristics
            if site is None and cls == "Heuristics" and isinstance(getattr(this, "values", None), dict):
                heuristics += [str(k) for k in this.values]
        frame = frame.f_back
    return site, owner, heuristics
