"""``autotune_event/1`` lines (the capture patch's ``autotune.log``): each decoded and checked once,
into plain events and their timings; a malformed line is a reported problem, never an exception."""


from __future__ import annotations

import functools
import json
import math
import operator
from pathlib import Path
from typing import Any

from ..base import inputs
from .autotune_records import (_NONE, Timing, _event_config, _int, _ms, _plain_config, config_problem)

# ---------------------------------------------------------------------------
# the line parser

_DECODER = json.JSONDecoder()
_SCAN = _DECODER.scan_once


def decode_event(text: str) -> tuple[dict | None, str | None]:
    """One ``autotune_event/1`` line -> (event, None), or (None, why it cannot be read)."""
    try:
        try:  # JSONDecoder.raw_decode less its frame: ``text`` is stripped, json.loads less its regex
            event, end = _SCAN(text, 0)
        except StopIteration as err:
            raise json.JSONDecodeError("Expecting value", text, err.value) from None
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
    except json.JSONDecodeError as exc:
        return None, f"truncated or invalid JSON line ({exc.msg})"
    if type(event) is dict and event.get("schema") == "autotune_event/1" \
            and type(event.get("kernel")) is str and event["kernel"] \
            and type(event.get("event")) is str and _plain_event(event):
        return event, None  # the common well-formed line; any other goes the careful way below
    if not isinstance(event, dict):
        return None, "JSON line is not an object"
    schema = str(event.get("schema", ""))
    if not schema.startswith("autotune_event/"):
        return None, f"JSON line with schema {schema or 'missing'!r}, expected autotune_event/1"
    if schema != "autotune_event/1":
        return None, f"unsupported {schema} (this reader knows autotune_event/1)"
    kernel, kind = event.get("kernel"), event.get("event")
    if not isinstance(kernel, str) or not kernel or not isinstance(kind, str):
        return None, "autotune_event line without 'event' or 'kernel'"
    problem = event_problem(event)
    if problem:
        return None, f"autotune_event line with {problem}"
    return event, None


# Field types of autotune_event/1 (references/json_contracts.md); null stands for "absent".
_NUMBER = (int, float)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "pid": (int,), "time": _NUMBER, "source_file": (str,), "function": (str,), "kind": (str,),
    "size_hints": (dict,), "triton_meta": (dict,), "inductor_meta": (dict,), "keys": (list,),
    "configs": (list,), "from_cache": (bool,), "timings": (list,), "statistic": (str,),
    "benchmarker": (str,), "duration_s": _NUMBER, "winner": (dict,), "args": (list,),
    "grid": (list,), "num_bytes": _NUMBER, "bytes_source": (str,), "saved_bytes": _NUMBER,
    "device": (dict,), "versions": (dict,), "standalone_file": (str,), "message": (str,),
}
_TYPE_WORDS = {int: "an integer", float: "a number", str: "a string", dict: "an object",
               list: "a list", bool: "a boolean"}


def _finite(value: Any) -> bool:
    # an int is finite however large (math.isfinite would raise OverflowError past a float's range)
    if isinstance(value, bool) or not isinstance(value, _NUMBER):
        return False
    return isinstance(value, int) or math.isfinite(value)




def _arg_problem(arg: Any) -> str | None:
    if not isinstance(arg, dict):
        return "an argument that is not an object"
    if arg.get("kind") != "tensor":
        return None
    for key in ("shape", "stride"):
        value = arg.get(key)
        if value is None and key == "stride":
            continue
        if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            return f"a tensor argument whose '{key}' is not a list of integers"
    return None


# The exact JSON types a well-formed event's typed fields have (None: absent), for _plain_event.
_PLAIN_NUMBER = frozenset({int, float, _NONE})
_PLAIN_TYPES = {key: _PLAIN_NUMBER if types is _NUMBER else frozenset(types) | {_NONE}
                for key, types in _FIELD_TYPES.items()}
_INT_ONLY = frozenset({int})
_isfinite = math.isfinite




def _plain_arg(arg: Any) -> bool:
    """True: :func:`_arg_problem` finds nothing (exact JSON types); False: ask it."""
    if type(arg) is not dict:
        return False
    if arg.get("kind") != "tensor":
        return True
    shape, stride = arg.get("shape"), arg.get("stride")
    return type(shape) is list and _INT_ONLY.issuperset(map(type, shape)) \
        and (stride is None or (type(stride) is list and _INT_ONLY.issuperset(map(type, stride))))


def _plain_event(event: dict) -> bool:
    """True when :func:`event_problem` would find nothing, told from the exact types a JSON
    decoder gives; False sends the event to it (a subclass, a huge integer, a wrong type)."""
    try:
        for key, value in event.items():
            types = _PLAIN_TYPES.get(key)
            if types is not None and (type(value) not in types or (
                    types is _PLAIN_NUMBER and value is not None and not _isfinite(value))):
                return False
        meta = event.get("inductor_meta")
        gb = meta.get("kernel_num_gb") if meta else None
        if gb is not None and (type(gb) not in _PLAIN_NUMBER or not _isfinite(gb)):
            return False
    except OverflowError:  # an integer too large for a float: event_problem raises it in place
        return False
    configs, winner, args = event.get("configs"), event.get("winner"), event.get("args")
    return (not configs or all(map(_plain_config, configs))) \
        and (winner is None or _plain_config(winner)) \
        and (not args or all(map(_plain_arg, args)))


def _plain_fields(event: dict) -> bool:
    """True when every typed field of ``event`` is absent or of its type (the common case,
    checked in the order of the event's own keys; :func:`event_problem` names the problem)."""
    for key, value in event.items():
        types = _FIELD_TYPES.get(key)
        if types is None or value is None:
            continue
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            return False
        if types is _NUMBER and not _finite(value):
            return False
    return True


def event_problem(event: dict) -> str | None:
    """What makes a decoded ``autotune_event/1`` object unusable (None: nothing)."""
    for key, types in (() if _plain_fields(event) else _FIELD_TYPES.items()):
        value = event.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            return f"'{key}' not {_TYPE_WORDS[types[-1] if types is _NUMBER else types[0]]}"
        if types is _NUMBER and not _finite(value):
            return f"'{key}' not a finite number"
    gb = (event.get("inductor_meta") or {}).get("kernel_num_gb")
    if gb is not None and not _finite(gb):
        return "'inductor_meta.kernel_num_gb' not a finite number"
    for key in ("configs",):
        for cfg in event.get(key) or []:
            if (problem := config_problem(cfg)):
                return f"'{key}' holding {problem}"
    if event.get("winner") is not None and (problem := config_problem(event["winner"])):
        return f"'winner' being {problem}"
    for arg in event.get("args") or []:
        if (problem := _arg_problem(arg)):
            return f"'args' holding {problem}"
    return None


def read_events(path: str | Path) -> list[dict]:
    """Every readable ``autotune_event/1`` event of a capture log, in order (bad lines skipped;
    ``summarize_autotune_log.py`` is the place that reports them)."""
    events = []
    with inputs.open_input(path, "an autotune log") as fh:
        for line in inputs.capped_lines(fh):  # an over-long line reads as blank: skipped
            line = line.strip()
            if line.startswith("{"):
                event, _ = decode_event(line)
                if event is not None:
                    events.append(event)
    return events


@functools.lru_cache(maxsize=64)
def _event_basis(benchmarker: str | None) -> str:
    """The statistic_basis of a capture-patch tuning (one string per benchmarker, not per event)."""
    return "recorded by the capture patch" + (f" (benchmarker: {benchmarker})" if benchmarker else "")


_arg_saved = operator.methodcaller("get", "saved")


def _event_timing(item: Any) -> Timing | None:
    """One item of an event's ``timings`` (None: it holds no readable config); a time or count
    of its JSON type is taken as it is, anything else goes through _ms / _int."""
    cfg = item.get("config") if isinstance(item, dict) else None
    if not (_plain_config(cfg) or config_problem(cfg) is None):
        return None
    get = item.get
    ms, regs, spills, shared, gbps = (get("ms"), get("n_regs"), get("n_spills"), get("shared"),
                                      get("gb_per_s"))
    return Timing(_event_config(cfg),
                  ms if type(ms) is float and _isfinite(ms) else _ms(ms),
                  regs if type(regs) is int else _int(regs),
                  spills if type(spills) is int else _int(spills),
                  shared if type(shared) is int else _int(shared),
                  gbps if type(gbps) is float and _isfinite(gbps) else _ms(gbps))


