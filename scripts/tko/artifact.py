"""Versioned JSON artifacts: every JSON a script writes and reads goes through here.

Each artifact is a JSON object with a header::

    {"schema": "<artifact>/<major>", "tool": "<script>", "created": "<UTC ISO>",
     "versions": {...}, ...payload...}

:func:`read_artifact` checks the tag and says clearly when it was handed the
wrong file.  The contract of every artifact is ``references/json_contracts.md``.
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from . import atomic
from .errors import InputError
from .versions import runtime_versions

HEADER_KEYS = ("schema", "tool", "created", "versions")


def _jsonable(obj: Any) -> Any:
    """Fallback encoder: tuples/sets to lists, paths to str, NaN/inf to strings."""
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        return obj.item()
    return repr(obj)


def _clean_floats(obj: Any) -> Any:
    # JSON has no NaN/Infinity; keep them readable and loadable by any parser.
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): _clean_floats(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean_floats(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    return json.dumps(_clean_floats(obj), indent=2, sort_keys=False, default=_jsonable,
                      allow_nan=False) + "\n"


def make_artifact(schema: str, tool: str, payload: dict) -> dict:
    if "/" not in schema:
        raise ValueError(f"schema tag must be '<name>/<major>', got {schema!r}")
    doc = {
        "schema": schema,
        "tool": tool,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": runtime_versions(),
    }
    for key, value in payload.items():
        if key in HEADER_KEYS:
            raise ValueError(f"payload may not set header key {key!r}")
        doc[key] = value
    return doc


def write_artifact(path: str | os.PathLike, schema: str, tool: str, payload: dict) -> dict:
    """Build the artifact and write it atomically; returns the document written."""
    doc = make_artifact(schema, tool, payload)
    atomic.write_text(path, dumps(doc))
    return doc


def load_json(path: str | os.PathLike) -> Any:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, expected a JSON file")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a text file") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


def schema_name(tag: str) -> tuple[str, int | None]:
    name, _, major = tag.partition("/")
    return name, int(major) if major.isdigit() else None


def read_artifact(path: str | os.PathLike, expect: str | Iterable[str]) -> dict:
    """Load an artifact and check its schema tag.

    ``expect`` is a name ("isa_scan") or a tag ("isa_scan/1"), or several.
    A name accepts any major version; a tag accepts that major only.
    """
    wanted = [expect] if isinstance(expect, str) else list(expect)
    doc = load_json(path)
    if not isinstance(doc, dict) or "schema" not in doc:
        raise InputError(f"{path}: not an artifact of this bundle (no 'schema' field); "
                         f"expected {' or '.join(wanted)}")
    got = str(doc["schema"])
    got_name, got_major = schema_name(got)
    for want in wanted:
        name, major = schema_name(want)
        if name == got_name and (major is None or major == got_major):
            return doc
    raise InputError(f"{path}: is a {got} artifact, expected {' or '.join(wanted)}")
