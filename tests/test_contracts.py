"""json_contracts.md and the code agree on which artifacts exist."""

from __future__ import annotations

import re
from pathlib import Path

from tko import contracts

ROOT = Path(__file__).resolve().parents[1]


def written_schemas() -> set[str]:
    """Every schema tag a script or core module passes when writing an artifact."""
    tags = set()
    for path in (ROOT / "scripts").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        tags |= set(re.findall(r'["\']([a-z_]+/\d+)["\']', text))
    return {t for t in tags if not t.startswith(("tmp/", "dev/", "proc/"))}


def test_every_documented_artifact_is_written_by_the_code():
    documented = set(contracts.documented_fields())
    missing = documented - written_schemas()
    assert not missing, f"documented but never written: {sorted(missing)}"


def test_every_written_artifact_is_documented():
    undocumented = written_schemas() - set(contracts.documented_fields())
    assert not undocumented, f"written but not documented: {sorted(undocumented)}"


def test_every_section_has_a_field_table():
    for tag, fields in contracts.documented_fields().items():
        assert fields, f"{tag} has no field table"
