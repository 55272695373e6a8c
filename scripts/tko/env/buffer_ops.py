"""The default of Triton's AMD buffer-ops switch: read from the installed Triton's source, or
known by version."""


from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Any

from ..base.versions import package_version, parse_version

BUFFER_OPS_ENV = "AMDGCN_USE_BUFFER_OPS"
# --------------------------------------------------------------------------- buffer-op default

_BUFFER_OPS_VARS = (BUFFER_OPS_ENV, "HCUGCN_USE_BUFFER_OPS")   # the second: older Hygon forks
_SOURCE_FILES = ("knobs.py", "backends/amd/compiler.py", "backends/hcu/compiler.py",
                 "backends/hcu/compiler_hcu.py", "backends/amd/compiler_hcu.py")


def buffer_ops_from_source(pkg: Path | None) -> dict | None:
    """Default of the buffer-ops switch read from the installed Triton's source text.

    Matches ``env_bool("AMDGCN_USE_BUFFER_OPS"[, True])`` (3.4+) and
    ``os.environ.get("AMDGCN_USE_BUFFER_OPS", "0") == "1"`` (<= 3.3); an older
    Hygon fork reads ``HCUGCN_USE_BUFFER_OPS`` instead, reported in ``variable``.
    """
    if pkg is None:
        return None
    texts = []
    for rel in _SOURCE_FILES:
        try:
            texts.append((rel, (pkg / rel).read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    for var in _BUFFER_OPS_VARS:
        env_bool = re.compile(r'env_bool\(\s*["\']%s["\']\s*(?:,\s*(True|False))?\s*\)' % var)
        env_get = re.compile(r'environ\.get\(\s*["\']%s["\']\s*,\s*["\'](\d)["\']\s*\)' % var)
        for rel, text in texts:
            m = env_bool.search(text)
            if m:
                return {"default": m.group(1) == "True", "source": f"source text of triton/{rel}",
                        "variable": var}
            m = env_get.search(text)
            if m:
                return {"default": m.group(1) == "1", "source": f"source text of triton/{rel}",
                        "variable": var}
    return None


def buffer_ops_by_version(version: str | None) -> bool | None:
    """Default by release (amd_hygon.md 1.1): off up to 3.5, on from 3.6."""
    v = parse_version(version)
    if not v:
        return None
    return v >= (3, 6)


def _env_truthy(value: str, version: str | None) -> bool:
    v = parse_version(version)
    if v and v < (3, 4):        # read as os.environ.get(...) == "1" up to 3.3
        return value == "1"
    return value.strip().lower() in ("1", "true", "yes", "on", "y")


def buffer_ops_record(triton_info: dict, pkg: Path | None) -> dict:
    version = triton_info.get("version") or package_version("triton")
    knob = triton_info.get("buffer_ops_knob") or {}
    from_src = None if knob.get("default") is not None else buffer_ops_from_source(pkg)
    variable = (from_src or {}).get("variable", BUFFER_OPS_ENV)
    env_value = os.environ.get(variable)
    rec: dict[str, Any] = {"variable": variable, "env": env_value, "set": env_value is not None,
                           "triton_version": version}
    if knob.get("default") is not None:
        rec["default_when_unset"] = bool(knob["default"])
        rec["default_source"] = f"{knob['knob']} (installed triton)"
    else:
        if from_src:
            rec["default_when_unset"] = from_src["default"]
            rec["default_source"] = from_src["source"]
        else:
            rec["default_when_unset"] = buffer_ops_by_version(version)
            rec["default_source"] = ("version rule: off for triton <= 3.5, on from 3.6"
                                     if version else "unknown: no triton found")
    if env_value is None:
        rec["effective"] = rec["default_when_unset"]
    elif knob.get("value") is not None:
        rec["effective"] = bool(knob["value"])
    else:
        rec["effective"] = _env_truthy(env_value, version)
    by_version = buffer_ops_by_version(version)
    if (by_version is not None and rec["default_when_unset"] is not None
            and by_version != rec["default_when_unset"]):
        rec["note"] = (f"this triton ({version}) differs from the upstream release rule "
                       f"(default {'on' if by_version else 'off'}); a vendor build (DTK/FlagTree)?")
    return rec


def buffer_ops_knob(triton_mod) -> dict:
    """Read the AMDGCN_USE_BUFFER_OPS knob of an imported Triton (3.4+ ``triton.knobs``)."""
    out: dict[str, Any] = {"knob": None, "default": None, "value": None}
    try:
        knobs = importlib.import_module("triton.knobs")
    except Exception:
        return out
    for group in ("hcu", "amd"):       # hcu: Hygon FlagTree builds; it drives DCU codegen
        inst = getattr(knobs, group, None)
        if inst is None:
            continue
        desc = type(inst).__dict__.get("use_buffer_ops")
        if desc is None or getattr(desc, "key", None) != BUFFER_OPS_ENV:
            continue
        out["knob"] = f"triton.knobs.{group}.use_buffer_ops"
        out["default"] = getattr(desc, "default", None)
        try:
            out["value"] = bool(getattr(inst, "use_buffer_ops"))
        except Exception as exc:   # a bad env value raises in the knob
            out["value_error"] = f"{type(exc).__name__}: {exc}"
        break
    return out
