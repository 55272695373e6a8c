"""Installed versions, read from package metadata so that nothing heavy is imported."""

from __future__ import annotations

import platform
import sys
from functools import lru_cache
from importlib import metadata


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
    except Exception:  # a broken dist-info must not break a report
        return None


@lru_cache(maxsize=1)
def runtime_versions() -> dict:
    """Versions every artifact records: python, platform, torch, triton, this bundle."""
    from . import __version__

    return {
        "python": platform.python_version(),
        "platform": sys.platform,
        "torch": package_version("torch"),
        "triton": package_version("triton"),
        "tko": __version__,
    }


def parse_version(text: str | None) -> tuple[int, ...]:
    """'3.5.1+das.opt1.dtk2604' -> (3, 5, 1); unknown -> ()."""
    if not text:
        return ()
    parts = []
    for piece in text.split("+", 1)[0].split("."):
        digits = ""
        for ch in piece:
            if ch.isdigit():
                digits += ch
            else:
                break
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)
