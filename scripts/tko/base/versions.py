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


def module_version(name: str) -> str | None:
    """``__version__`` of an installed module without importing it.

    Some builds (DTK's Triton wheels) ship no package metadata; their version is only in
    ``<pkg>/__init__.py``. Reading the text keeps this cheap and side-effect free.
    """
    import re
    from importlib.util import find_spec

    try:
        spec = find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith("__init__.py"):
        return None
    try:
        with open(spec.origin, encoding="utf-8", errors="replace") as fh:
            text = fh.read(20000)
    except OSError:
        return None
    m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return m.group(1) if m else None


@lru_cache(maxsize=1)
def runtime_versions() -> dict:
    """Versions every artifact records: python, platform, torch, triton, this bundle."""
    from .. import __version__

    return {
        "python": platform.python_version(),
        "platform": sys.platform,
        "torch": package_version("torch"),
        "triton": package_version("triton") or module_version("triton"),
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


def autotuner_user_do_bench(tuner):
    """The benchmark function an ``@triton.autotune`` was given (``do_bench=``), or None.

    Triton >= 3.4 keeps it in ``Autotuner._do_bench`` (``do_bench`` is a property falling back
    to the driver's). Triton 3.3 has no ``_do_bench``: ``do_bench`` is a plain attribute holding
    the given function or the driver's default, ``triton.testing.do_bench``.
    """
    if hasattr(tuner, "_do_bench"):
        return tuner._do_bench
    fn = vars(tuner).get("do_bench") if hasattr(tuner, "__dict__") else None
    if fn is None or getattr(fn, "__module__", None) == "triton.testing":
        return None
    return fn
