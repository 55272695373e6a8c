"""The kernels a capture recorded, as the names a profiler shows them by.

A hand-written ``@triton.jit`` kernel has no name Triton's prefix rule can recognise
(``tko.read.profile_rank.TRITON_PREFIX``): a profile ranks it Triton when the capture of the same
program recorded it (``profile_kernels.py --capture-log``).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..base.errors import InputError
from . import autotune_events


def captured_names(paths: list[str | Path]) -> list[str]:
    """Every kernel name (``kernel`` and ``function``) of the ``kernel`` events of capture logs,
    first seen first; an unreadable log is an InputError."""
    names: list[str] = []
    for path in paths:
        if not Path(path).is_file():
            raise InputError(f"{path}: no such capture log")
        for event in autotune_events.read_events(path):
            if event.get("event") != "kernel":
                continue
            for name in (event.get("kernel"), event.get("function")):
                if isinstance(name, str) and name and name not in names:
                    names.append(name)
    return names


HAND_WRITTEN_KINDS = ("triton_jit", "triton_autotune")


def _events(paths: list[str | Path], kind: str):
    """The ``kind`` events of the capture logs that exist, in order."""
    for path in paths:
        if Path(path).is_file():
            yield from (e for e in autotune_events.read_events(path) if e.get("event") == kind)


def kernel_kinds(paths: list[str | Path]) -> dict[str, str]:
    """kernel name -> the ``kind`` of its ``kernel`` event (``triton_jit``, ``triton_autotune`` for
    hand-written kernels; Inductor's kinds otherwise); logs that are missing give nothing."""
    kinds: dict[str, str] = {}
    for event in _events(paths, "kernel"):
        if isinstance(event.get("kernel"), str):
            kinds.setdefault(event["kernel"], str(event.get("kind") or "unknown"))
    return kinds


def launch_sites(paths: list[str | Path]) -> dict[str, str]:
    """kernel name -> ``file:line`` of the first recorded launch with a launch site (hand-written
    kernels: the program's ``kernel[grid](...)`` call); logs that are missing give nothing."""
    sites: dict[str, str] = {}
    for event in _events(paths, "launch"):
        site = event.get("launch_site")
        if isinstance(site, dict) and isinstance(site.get("file"), str):
            sites.setdefault(str(event.get("kernel")), f"{site['file']}:{site.get('line')}")
    return sites


def name_patterns(names: list[str]) -> list[re.Pattern]:
    """One exact-name pattern per kernel name (``profile_rank.classify``'s ``triton_names``)."""
    return [re.compile(rf"^{re.escape(n)}$") for n in names]
