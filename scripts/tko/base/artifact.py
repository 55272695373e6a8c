"""Versioned JSON artifacts: every JSON a script writes and reads goes through here.

Each artifact is a JSON object with a header::

    {"schema": "<artifact>/<major>", "tool": "<script>", "created": "<UTC ISO>",
     "versions": {...}, ...payload...}

:func:`read_artifact` checks the tag and says clearly when it was handed the
wrong file.  The contract of every artifact is ``references/json_contracts.md``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from . import atomic, inputs
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


# Above this many bytes of compact JSON an artifact is written compact (no indent), streamed:
# the indenting encoder is pure Python and a large artifact would be held whole in memory.
COMPACT_ABOVE = 8_000_000

_COMPACT = json.JSONEncoder(default=_jsonable, allow_nan=False, separators=(",", ":"))


def _compact_encoder():
    """``_COMPACT.encode`` less its cycle check (an artifact is a tree: a cycle would end in
    RecursionError), with the C encoder built once instead of per call; ``_COMPACT.encode``
    itself where the C encoder is missing or gives other text."""
    try:
        from json.encoder import c_make_encoder, encode_basestring_ascii

        chunks = c_make_encoder(None, _jsonable, encode_basestring_ascii, None, ":", ",",
                                False, False, False)

        def encode(value: Any) -> str:
            return "".join(chunks(value, 0))

        probe = {"a": [1, 2.5, None, True, "\u00e9\"x", (3,)], "b": {}}
        if encode(probe) == _COMPACT.encode(probe):
            return encode
    except (ImportError, TypeError, ValueError):
        pass
    return _COMPACT.encode


_ENCODE = _compact_encoder()


def _compact(obj: Any) -> str:
    try:
        return _ENCODE(obj)
    except (ValueError, TypeError):  # NaN / infinity, or a key JSON has no form for: as dumps()
        return _COMPACT.encode(_clean_floats(obj))


# Items of a top-level list encoded per call: one C call per item would spend as long in
# the Python around it as in encoding a small item.
LIST_GROUP = 64


def _compact_chunks(doc: dict):
    """The compact JSON of ``doc`` in pieces: top-level values one at a time, the items of a
    top-level list a group at a time, so no piece is much larger than a few items."""
    yield "{"
    for i, (key, value) in enumerate(doc.items()):
        yield ("," if i else "") + _COMPACT.encode(str(key)) + ":"
        if isinstance(value, list):
            yield "["
            for j in range(0, len(value), LIST_GROUP):
                if j:
                    yield ","
                yield _compact_items(value[j:j + LIST_GROUP])
            yield "]"
        else:
            yield _compact(value)
    yield "}\n"


def _compact_items(items: list) -> str:
    """The compact JSON of ``items`` less its brackets (each item as :func:`_compact` writes it)."""
    try:
        return _ENCODE(items)[1:-1]
    except (ValueError, TypeError):
        return ",".join(map(_compact, items))


def write_artifact(path: str | os.PathLike, schema: str, tool: str, payload: dict) -> dict:
    """Build the artifact and write it atomically; returns the document written.

    An artifact whose compact JSON stays under ``COMPACT_ABOVE`` bytes is written indented
    (:func:`dumps`); a larger one compact, streamed to the temp file in pieces of about a
    megabyte (same content, same header, same atomic rename)."""
    doc = make_artifact(schema, tool, payload)
    if Path(path).is_dir():
        raise InputError(f"{path}: is a directory, expected a file path for the {schema} JSON")
    try:
        _write(path, doc)
    except RecursionError:  # a value from the input nested past what the encoders recurse into
        raise InputError(f"{path}: the {schema} JSON holds a value nested too deeply to write") from None
    return doc


def _write(path: str | os.PathLike, doc: dict) -> None:
    head: list[str] = []
    size = 0
    chunks = _compact_chunks(doc)
    for chunk in chunks:
        head.append(chunk)
        size += len(chunk)
        if size > COMPACT_ABOVE:
            break
    else:
        atomic.write_text(path, dumps(doc))
        return
    atomic.write_chunks(path, _batched_bytes(itertools.chain(head, chunks)))


def _batched_bytes(chunks: Iterable[str], size: int = 1 << 20):
    """``chunks`` joined into pieces of about ``size`` characters, as UTF-8 (a few writes of a
    megabyte rather than one per list item)."""
    batch: list[str] = []
    held = 0
    for chunk in chunks:
        batch.append(chunk)
        held += len(chunk)
        if held >= size:
            yield "".join(batch).encode("utf-8")
            batch, held = [], 0
    if batch:
        yield "".join(batch).encode("utf-8")


def load_json(path: str | os.PathLike) -> Any:
    p = Path(path)
    try:
        return json.loads(inputs.read_text(p, "a JSON file"))
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a text file") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InputError(f"{p}: JSON nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer literal past Python's digit limit
        raise InputError(f"{p}: not readable JSON ({exc})") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror or exc})") from None


def positive_float(value: Any) -> float | None:
    """A JSON number above zero as a finite float (a time, a rate, a peak); None for anything
    else: a bool, text, NaN, infinity, or an integer past a float's range (JSON integers have no
    bound, and float() of one raises)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if 0 < number < float("inf") else None


def schema_name(tag: str) -> tuple[str, int | None]:
    name, _, major = tag.partition("/")
    # ASCII digits of a sane length only: "²".isdigit() is true, and int() refuses it
    return name, int(major) if major.isascii() and major.isdigit() and len(major) < 10 else None


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
            check_fields(doc, got_name, path)
            return doc
    raise InputError(f"{path}: is a {got} artifact, expected {' or '.join(wanted)}")


# Top-level field types per artifact (references/json_contracts.md), checked when a file is read so
# a hand-edited or foreign file fails with one line naming the field, not deep inside a reader.
# "obj" object, "list" list, "objs" list of objects, "str" string, "num" number; a trailing "?"
# admits null.  Fields not listed, and fields absent from the file, are not checked here.
_PROFILE_ROW = {"name": "str", "origin": "str?", "calls": "num?", "total_us": "num?"}
FIELD_TYPES: dict[str, dict[str, str]] = {
    "triton_env": {"python": "obj", "host": "obj", "platform_kind": "str", "torch": "obj",
                   "triton": "obj", "native_runtime": "obj", "devices": "objs",
                   "expected_archs": "list", "arch_check": "obj", "dcu_stack": "obj?",
                   "nvidia_stack": "obj?", "tools": "obj", "env": "obj", "buffer_ops": "obj",
                   "smoke": "obj?", "warnings": "list"},
    "kernel_profile": {"source": "obj", "summary": "obj", "kernels": "objs", "ranking": "objs",
                       "problems": "list", "device": "objs?", "api_stats": "objs?"},
    "autotune_summary": {"inputs": "objs", "spread_threshold": "num", "flag_meanings": "obj",
                         "kernels": "objs", "skipped": "objs"},
    "artifact_manifest": {"out_dir": "str", "roots": "obj", "kernels": "objs", "refused": "list",
                          "relocated": "obj", "cpu_kernels": "list?", "notes": "list"},
    "isa_scan": {"input": "str", "kernel_filter": "str?", "arch_requested": "str?",
                 "kernels": "objs", "summary": "obj"},
    "fallback_ab": {"command": "list", "disable": "list", "device": "obj", "arms": "objs",
                    "speedup_fallback_over_compiled": "num?", "verdict": "str",
                    "output_check": "obj?"},
    "benchmark": {"core": "obj", "device": "obj", "timing": "obj", "peak": "obj?",
                  "settings": "obj", "cases": "objs", "summary": "obj", "warnings": "list"},
    "triton_meta": {"source": "str", "origin": "str", "entry_kernel": "str?", "kernels": "objs",
                    "ir_files": "list", "findings": "list"},
    "compile_probe": {"kernel_file": "str", "kernel": "str", "targets": "list", "base": "obj",
                      "variants": "objs", "results": "objs", "findings": "list"},
    "investigation_report": {"kernel": "str", "decision": "obj", "facts": "obj",
                             "sections": "obj", "gaps": "list", "inputs": "obj"},
    "kernel_run": {"kernel_file": "str", "command": "list", "status": "str", "results": "objs",
                   "best": "obj?", "fastest": "obj?", "problems": "list"},
    "variant_sweep": {"kernel_file": "str", "kernel": "str", "devices": "list", "slots": "list",
                      "variants": "objs", "ranking": "obj?", "baseline": "obj?", "best": "obj?",
                      "notes": "list", "summary": "obj", "cases": "objs", "peak": "obj?",
                      "num_bytes": "num?"},
    "speed_of_light": {"kernel_file": "str", "kernel": "str", "twin": "obj?", "validity": "obj?",
                       "byte_model": "obj?", "peak": "obj?", "runs": "obj?", "floors": "obj?",
                       "bandwidth": "obj?", "facts": "obj?", "classification": "obj",
                       "sweep_ms": "num?", "remedy_ms": "num?", "notes": "list"},
    "remedy_trials": {"command": "list", "device": "obj?", "order": "list", "arms": "objs",
                      "winner": "str?", "notes": "list"},
    "config_pins": {"pins": "objs"},
}
# Fields inside an object field, or inside each object of a list field; names in REQUIRED must be
# present there.
SUB_TYPES: dict[tuple[str, str], dict[str, str]] = {
    ("kernel_profile", "kernels"): _PROFILE_ROW,
    ("kernel_profile", "ranking"): _PROFILE_ROW,
    ("kernel_profile", "summary"): {"kernel_time_us": "num?", "dispatches": "num?",
                                    "time_by_origin_us": "nums?"},
}
REQUIRED: dict[tuple[str, str], tuple[str, ...]] = {
    ("kernel_profile", "kernels"): ("name",),
    ("kernel_profile", "ranking"): ("name",),
}
_TYPE_TEXT = {"obj": "an object", "list": "a list", "objs": "a list of objects", "str": "a string",
              "num": "a number", "nums": "an object of numbers"}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_ok(value: Any, kind: str) -> bool:
    if kind.endswith("?"):
        if value is None:
            return True
        kind = kind[:-1]
    if kind == "obj":
        return isinstance(value, dict)
    if kind == "list":
        return isinstance(value, list)
    if kind == "objs":
        return isinstance(value, list) and all(isinstance(v, dict) for v in value)
    if kind == "str":
        return isinstance(value, str)
    if kind == "nums":
        return isinstance(value, dict) and all(_is_number(v) for v in value.values())
    return _is_number(value)


def _field_problem(doc: dict, table: dict[str, str], where: str,
                   required: tuple[str, ...] = ()) -> str | None:
    for key in required:
        if key not in doc:
            return f"field '{where}{key}' is missing"
    for key, kind in table.items():
        if key in doc and not _type_ok(doc[key], kind):
            nullable = " or null" if kind.endswith("?") else ""
            return f"field '{where}{key}' must be {_TYPE_TEXT[kind.rstrip('?')]}{nullable}"
    return None


def check_fields(doc: dict, name: str, path: Any) -> None:
    """Raise InputError naming the first field of ``doc`` whose type breaks the contract."""
    problem = _field_problem(doc, FIELD_TYPES.get(name, {}), "")
    for (schema, key), table in SUB_TYPES.items():
        if problem or schema != name:
            continue
        value, required = doc.get(key), REQUIRED.get((schema, key), ())
        if isinstance(value, dict):
            problem = _field_problem(value, table, f"{key}.", required)
        for i, item in enumerate(value if isinstance(value, list) else []):
            problem = problem or _field_problem(item, table, f"{key}[{i}].", required)
    if problem:
        raise InputError(f"{path}: {problem}")
