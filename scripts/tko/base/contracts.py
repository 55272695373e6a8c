"""Read ``references/json_contracts.md`` so tests can check real outputs against it.

Each artifact has a section whose heading holds the tag in backticks, e.g.
``## `isa_scan/1` — scan_amdgcn.py``, followed by a Markdown table whose first
column is a backticked top-level field name.  A field written ``name?`` is
optional.  The header fields (schema, tool, created, versions) are implied.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import resources
from .artifact import HEADER_KEYS

CONTRACTS_PATH = resources.reference("json_contracts.md")

_HEADING = re.compile(r"^#{2,3}\s+`([a-z0-9_]+/\d+)`")
_ROW = re.compile(r"^\|\s*`([A-Za-z0-9_]+)(\??)`\s*\|")


def documented_fields(path: Path = CONTRACTS_PATH) -> dict[str, dict[str, bool]]:
    """{schema tag: {field: required}} for every artifact section of the document."""
    result: dict[str, dict[str, bool]] = {}
    current = None
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _HEADING.match(line)
        if m:
            current = m.group(1)
            result[current] = {}
            continue
        if line.startswith("## ") or line.startswith("# "):
            current = None
            continue
        if current:
            row = _ROW.match(line)
            if row:
                result[current][row.group(1)] = row.group(2) != "?"
    return result


def contract_problems(doc: dict, path: Path = CONTRACTS_PATH) -> list[str]:
    """Differences between a real artifact and its documented contract (empty = conforms)."""
    tag = doc.get("schema")
    fields = documented_fields(path)
    if tag not in fields:
        return [f"schema {tag!r} has no section in {path.name}"]
    spec = fields[tag]
    problems = []
    for key in HEADER_KEYS:
        if key not in doc:
            problems.append(f"missing header field {key!r}")
    for key, required in spec.items():
        if required and key not in doc:
            problems.append(f"{tag}: documented field {key!r} missing from output")
    for key in doc:
        if key not in HEADER_KEYS and key not in spec:
            problems.append(f"{tag}: output field {key!r} is not documented")
    return problems
