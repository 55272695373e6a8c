"""json_contracts.md and the code agree on which artifacts exist and which fields they have."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tko.base import artifact, contracts

ROOT = Path(__file__).resolve().parents[1]
TAG = re.compile(r"[a-z_]+/\d+")


def written_schemas() -> set[str]:
    """Every schema tag the code writes: the schema argument of write_artifact / make_artifact, or
    the value of a "schema" key in a dict literal (JSON Lines records), as a string or a module
    constant (SCHEMA = "kernel_run/1", also through an import alias: rs.SCHEMA). A tag that is only
    read, quoted in a docstring or compared against does not count."""
    consts, refs, literal = {}, set(), set()
    for path in (ROOT / "scripts").rglob("*.py"):
        mod = path.stem
        tree = ast.parse(path.read_text(encoding="utf-8"))
        alias = {a.asname or a.name: a.name.rsplit(".", 1)[-1]
                 for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}

        def ref(arg):
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                literal.add(arg.value)
            elif isinstance(arg, ast.Name):
                refs.add((mod, arg.id))
            elif isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name):
                refs.add((alias.get(arg.value.id, arg.value.id), arg.attr))

        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str) and TAG.fullmatch(node.value.value):
                consts.update({(mod, t.id): node.value.value for t in node.targets if isinstance(t, ast.Name)})
            elif isinstance(node, ast.Call):
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                index = {"write_artifact": 1, "make_artifact": 0}.get(func)
                if index is not None and len(node.args) > index:
                    ref(node.args[index])
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and key.value == "schema":
                        ref(value)
    return {t for t in literal if TAG.fullmatch(t)} | {consts[r] for r in refs if r in consts}


def test_written_schemas_finds_the_writers():
    tags = written_schemas()
    # a literal, a module constant, an aliased module's constant, a JSON Lines record
    assert {"kernel_run/1", "rowkernel_sweep/1", "autotune_event/1", "investigation/1"} <= tags, tags
    assert not any(t.startswith(("tmp/", "dev/", "proc/")) for t in tags)


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


def test_fields_the_readers_check_are_documented():
    """tko.base.artifact.FIELD_TYPES (the type check every read_artifact makes) names only fields of the
    artifact's field table in json_contracts.md."""
    by_name = {tag.split("/")[0]: fields for tag, fields in contracts.documented_fields().items()}
    problems = []
    for name, table in artifact.FIELD_TYPES.items():
        if name not in by_name:
            problems.append(f"{name}: type-checked when read, but json_contracts.md has no section")
            continue
        problems += [f"{name}: reader checks '{key}', not in its field table"
                     for key in table if key not in by_name[name]]
    for (name, key), table in artifact.SUB_TYPES.items():
        if key not in by_name.get(name, {}):
            problems.append(f"{name}: reader checks '{key}[]', not in its field table")
    assert not problems, "\n".join(problems)
