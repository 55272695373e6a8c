"""THE parser of autotune logs, in every format this bundle meets.

Formats, detected per line (one file may mix them, e.g. a ``log_profile.txt``):

* ``autotune_event/1`` JSON Lines written by ``autotune_capture_patch.py``
  (contract: ``references/json_contracts.md``);
* Triton's ``TRITON_PRINT_AUTOTUNING=1`` messages: the 3.0-3.3 one-line form
  ``Triton autotuning for function F finished after Ts; best config selected: C;``,
  the 3.4+ four-line form (``..., with key as K,`` / ``finished after Ts,`` /
  ``best config selected: C;``) and 3.3+ ``Autotuning kernel F with config C``;
* Inductor's ``kernel_autotune`` metric table CSV (torch 2.11+,
  ``TORCHINDUCTOR_ENABLED_METRIC_TABLES=kernel_autotune``);
* ``TORCH_LOGS="+inductor"`` debug lines of ``triton_heuristics`` and
  ``coordinate_descent_tuner`` (with or without the torch log prefix).

A line that carries one of these formats but cannot be read whole (a truncated
JSON line, a config cut in half) is recorded in ``skipped`` and ignored; any
other text is ordinary log noise.  Nothing here imports torch or triton.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import gc
import json
import math
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..base.config import (BACKEND_OPTIONS, TEXT_FIELD, TritonConfig, normalize_record, record_key,
                     record_label)
from ..base.errors import InputError
from ..base import inputs

FMT_EVENTS = "autotune_event"
FMT_TRITON = "triton_print_autotuning"
FMT_CSV = "kernel_autotune_csv"
FMT_DEBUG = "inductor_debug_log"

# torch logging prefix: "[rank0]:V1130 03:12:45.123000 4242 torch/_inductor/x.py:12] [0/0] msg"
_TORCH_PREFIX = re.compile(
    r"^(?:\[rank\d+\]:)?[VDIWEC]\d{4} \d\d:\d\d:\d\d\.\d+ +(?P<pid>\d+) "
    r"(?P<site>[^\s\]]+:\d+)\] (?:\[[^\]]*\] )*(?P<msg>.*)$")
_NUM = r"(?:[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan))"
_TIMING_TAIL = re.compile(
    rf"^(?P<cfg>.*): (?P<ms>{_NUM}), nreg (?P<nreg>-?\d+|None), nspill (?P<nspill>-?\d+|None), "
    r"#shared-mem (?P<shared>-?\d+|None)\s*$")
_GETS = re.compile(r"^CachingAutotuner gets (?P<n>\d+) configs for (?P<name>\S+)\s*$")
_BENCH_ALL = re.compile(r"^Benchmark all input configs for (?P<name>\S+), get:\s*$")
_BEST = re.compile(r"^Best config for (?P<name>\S+?): (?P<rest>.*)$")
_COORDESC = re.compile(r"^COORDESC: (?P<rest>.*)$")
_CD_START = re.compile(r"^= Do coordinate descent tuning for (?P<name>\S+) =\s*$")
_CD_BASE = re.compile(rf"^(?P<name>\S+): Baseline Config (?P<cfg>.*), baseline timing (?P<ms>{_NUM})\s*$")
_CD_IMPROVE = re.compile(
    rf"^(?P<name>\S+): Improve from (?P<a>.*) (?P<ta>{_NUM}) -> (?P<b>.*) (?P<tb>{_NUM}), "
    rf"(?P<ratio>{_NUM})x\s*$")
_TRITON_ONE = re.compile(
    r"Triton autotuning for function (?P<name>\S+) finished after (?P<t>[\d.]+)s; "
    r"best config selected: (?P<cfg>.*);\s*$")
_TRITON_HEAD = re.compile(r"Triton autotuning for function (?P<name>\S+),\s*$")
_TRITON_KEY = re.compile(r"^with key as (?P<key>.*),\s*$")
_TRITON_TIME = re.compile(r"^finished after (?P<t>[\d.]+)s,\s*$")
_TRITON_BEST = re.compile(r"^best config selected: (?P<cfg>.*);\s*$")
_TRITON_TRY = re.compile(r"Autotuning kernel (?P<name>\S+) with config (?P<cfg>.*?)\s*$")
_TRITON_FAIL = re.compile(r"^Autotuning failed with (?P<err>.*)$")
_CSV_COLUMNS = ["kernel_path", "kernel_name", "triton_config", "latency_ms"]
# Text that only these formats print: a line holding one but matching no rule is garbled.
_ANCHORS = ("Benchmark all input configs", "nspill", "#shared-mem", "COORDESC",
            "Triton autotuning for function", "CachingAutotuner gets", "Best config for")
_TUNER_SITES = ("triton_heuristics.py", "coordinate_descent_tuner.py")


# ---------------------------------------------------------------------------
# configs

def parse_config_str(text: str) -> dict | None:
    """``str(triton.Config)`` -> ``{"kwargs", "num_warps", "num_stages", "extras"}``.

    None when the text is not a whole config (it must name num_warps and
    num_stages, which every Triton release prints).
    """
    try:
        return TritonConfig.from_text(text).record()
    except ValueError:
        return None


def normalize_config(cfg: Any) -> dict | None:
    """Accept an ``autotune_event/1`` config dict (or a flat dict) and return the shape above."""
    if config_problem(cfg):
        return None
    return _normalize_checked(cfg)


# normalize_config of a config config_problem has passed
_normalize_checked = normalize_record
_BACKEND_OPTIONS = frozenset(BACKEND_OPTIONS)


_RECORD_FIELDS = ("kwargs", "num_warps", "num_stages", "extras")


def _event_config(record: dict) -> dict:
    """``normalize_record(record)`` of a checked config of a decoded event that is dropped after
    its line: the usual record (object kwargs free of backend options, object extras) keeps its own
    kwargs and extras dicts instead of copies, and is itself the result when it has just the
    record's fields in the record's order."""
    kwargs, extras = record.get("kwargs"), record.get("extras")
    if type(kwargs) is dict and type(extras) is dict and _BACKEND_OPTIONS.isdisjoint(kwargs):
        if tuple(record) == _RECORD_FIELDS:
            return record
        return {"kwargs": kwargs, "num_warps": record.get("num_warps"),
                "num_stages": record.get("num_stages"), "extras": extras}
    return normalize_record(record)


# Identity of a config record across formats (defaults and key order do not matter), and its label.
config_key = record_key
config_label = record_label
_KWARG_PLAIN = frozenset({int, str})  # values whose repr is equal exactly when they are


def _same_config(a: dict, b: dict) -> bool:
    """``config_key(a) == config_key(b)``.  Two event records with no extras, int or str
    kwargs and int (or no) warps and stages are told apart without building their keys: their
    keys are equal exactly when the kwargs, warps and stages are."""
    ka, kb = a.get("kwargs"), b.get("kwargs")
    if not a.get("extras") and not b.get("extras") and type(ka) is dict and type(kb) is dict:
        wa, sa, wb, sb = a.get("num_warps"), a.get("num_stages"), b.get("num_warps"), b.get("num_stages")
        if type(wa) in _INT_OR_NONE and type(sa) in _INT_OR_NONE and type(wb) in _INT_OR_NONE \
                and type(sb) in _INT_OR_NONE and _KWARG_PLAIN.issuperset(map(type, ka.values())) \
                and _KWARG_PLAIN.issuperset(map(type, kb.values())):
            return wa == wb and sa == sb and ka == kb
    return record_key(a) == record_key(b)


# ---------------------------------------------------------------------------
# parsed records

@dataclass(slots=True)
class Timing:
    config: dict
    ms: float | None            # None: the config failed or was skipped (Inductor's inf)
    n_regs: int | None = None
    n_spills: int | None = None
    shared: int | None = None
    gb_per_s: float | None = None
    key: tuple | None = field(default=None, repr=False, compare=False)  # see _timing_key


def _timing_key(timing: Timing) -> tuple:
    """``config_key(timing.config)``, worked out once (parse and summary both match on it)."""
    key = timing.key
    if key is None:
        key = timing.key = config_key(timing.config)
    return key


@dataclass(slots=True)
class Tuning:
    """One benchmarking of a kernel's configs (an autotune or a coordinate descent)."""

    kernel: str
    origin: str                 # "file:line" of its first line
    fmt: str
    phase: str = "autotune"     # or "coordesc"
    timings: list[Timing] = field(default_factory=list)
    winner: dict | None = None
    winner_ms: float | None = None
    statistic: str = "unknown"
    statistic_basis: str = ""
    duration_s: float | None = None
    pid: int | None = None
    origins: list[str] = field(default_factory=list)

    def __post_init__(self):
        if not self.origins:
            self.origins = [self.origin]


@dataclass
class KernelFacts:
    """What the logs say about a kernel besides timings."""

    declared_configs: int | None = None
    configs: list[dict] = field(default_factory=list)
    from_cache: bool = False
    source_files: list[str] = field(default_factory=list)
    kind: str | None = None
    num_bytes: int | None = None
    bytes_source: str | None = None
    standalone_file: str | None = None
    standalone_files: list[str] = field(default_factory=list)  # one per argument signature
    device: dict | None = None
    saved_inputs: list[str] = field(default_factory=list)
    launches: list[dict] = field(default_factory=list)  # first launch per argument signature
    notes: list[str] = field(default_factory=list)

    def add_source(self, path: Any) -> None:
        if isinstance(path, str) and path and path not in self.source_files:
            self.source_files.append(path)


@dataclass
class ParsedLogs:
    tunings: list[Tuning] = field(default_factory=list)
    facts: dict[str, KernelFacts] = field(default_factory=dict)
    skipped: list[dict] = field(default_factory=list)
    inputs: list[dict] = field(default_factory=list)

    def fact(self, kernel: str) -> KernelFacts:
        fact = self.facts.get(kernel)
        if fact is None:
            fact = self.facts[kernel] = KernelFacts()
        return fact


def _ms(text_or_value: Any) -> float | None:
    if text_or_value is None:  # the common absent field, without the exception
        return None
    try:
        value = float(text_or_value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


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


def config_problem(cfg: Any) -> str | None:
    """Why a config object cannot be read (None: it can)."""
    if not isinstance(cfg, dict):
        return "a config that is not an object"
    if "kwargs" in cfg:
        for key in ("kwargs", "extras"):
            if cfg.get(key) is not None and not isinstance(cfg[key], dict):
                return f"a config whose '{key}' is not an object"
    for key in ("num_warps", "num_stages"):
        value = cfg.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            return f"a config whose '{key}' is not an integer"
    return None


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
_NONE = type(None)
_PLAIN_NUMBER = frozenset({int, float, _NONE})
_PLAIN_TYPES = {key: _PLAIN_NUMBER if types is _NUMBER else frozenset(types) | {_NONE}
                for key, types in _FIELD_TYPES.items()}
_INT_OR_NONE = frozenset({int, _NONE})
_DICT_OR_NONE = frozenset({dict, _NONE})
_INT_ONLY = frozenset({int})
_isfinite = math.isfinite


def _plain_config(cfg: Any) -> bool:
    """True: :func:`config_problem` finds nothing (exact JSON types); False: ask it."""
    return type(cfg) is dict and type(cfg.get("num_warps")) in _INT_OR_NONE \
        and type(cfg.get("num_stages")) in _INT_OR_NONE \
        and ("kwargs" not in cfg or (type(cfg["kwargs"]) in _DICT_OR_NONE
                                     and type(cfg.get("extras")) in _DICT_OR_NONE))


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


class _FileParser:
    def __init__(self, path: Path, out: ParsedLogs):
        self.path = path
        self.out = out
        self.facts = out.facts
        self.prefix = f"{path}:"  # of where(): str(path) is a Python call each time
        self.formats: dict[str, int] = {}
        self.records = 0
        self.overlong = 0  # lines past inputs.MAX_LINE_BYTES, skipped unread
        # per-pid text context (several processes may write one log)
        self.open_bench: dict[Any, Tuning] = {}
        self.declaring: dict[Any, tuple[str, int]] = {}
        self.coordesc: dict[Any, Tuning] = {}
        self.last_kernel: dict[Any, str] = {}
        self.triton_tries: dict[str, Tuning] = {}
        self.last_try: Tuning | None = None
        self.triton_block: dict | None = None
        self.csv_header: list[str] | None = None
        self.csv_group: Tuning | None = None
        self.csv_group_key: tuple | None = None

    # -- bookkeeping
    def where(self, lineno: int) -> str:
        return f"{self.prefix}{lineno}"

    def skip(self, lineno: int, reason: str) -> None:
        self.out.skipped.append({"where": self.where(lineno), "reason": reason})

    def seen(self, fmt: str) -> None:
        self.formats[fmt] = self.formats.get(fmt, 0) + 1
        self.records += 1

    def add_tuning(self, tuning: Tuning) -> Tuning:
        self.out.tunings.append(tuning)
        return tuning

    # -- driver
    def parse(self, lines: Iterable[str]) -> None:
        """``lines``: the file split at "\\n" only (not splitlines(): form feeds etc. must not
        shift line numbers), with or without the "\\n"."""
        for lineno, raw in enumerate(lines, 1):
            line = raw.rstrip("\n").rstrip("\r")
            if not line and type(raw) is inputs.OverlongLine:
                self.overlong += 1
                self.skip(lineno, f"a line of {raw.length} bytes, over the {inputs.MAX_LINE_BYTES}-byte "
                                  "line cap: skipped unread")
                continue
            if self.triton_block is not None and self._triton_block_line(lineno, line):
                continue
            if self.csv_header is not None:
                if self._csv_line(lineno, line):
                    continue
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):  # blank, or a comment / fixture header
                continue
            if stripped.startswith("{") and (self.formats.get(FMT_EVENTS)
                                             or '"schema"' in stripped[:200]
                                             or '"event"' in stripped[:200]):
                try:
                    self._json_line(lineno, stripped)
                except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
                    self.skip(lineno, f"autotune_event line with unreadable fields ({exc})")
                continue
            if self._csv_header_line(stripped):
                continue
            self._text_line(lineno, line)
        if self.triton_block is not None:
            self.skip(self.triton_block["lineno"],
                      "multi-line Triton autotuning message cut off at end of file")
            self.triton_block = None
        self.csv_group = None

    # -- autotune_event/1 JSON Lines
    def _json_line(self, lineno: int, text: str) -> None:
        event, problem = decode_event(text)
        if problem:
            self.skip(lineno, problem)
            return
        get = event.get  # the fields are checked: each is absent, None or of its type
        kernel, kind = event["kernel"], event["event"]
        formats = self.formats  # self.seen(FMT_EVENTS) and self.out.fact(kernel), inline
        formats[FMT_EVENTS] = formats.get(FMT_EVENTS, 0) + 1
        self.records += 1
        fact = self.facts.get(kernel)
        if fact is None:
            fact = self.facts[kernel] = KernelFacts()
        source = get("source_file")
        if source and source not in fact.source_files:  # add_source of a checked str or None
            fact.source_files.append(source)
        standalone = get("standalone_file")
        if isinstance(standalone, str):
            fact.standalone_file = fact.standalone_file or standalone
            if standalone not in fact.standalone_files:
                fact.standalone_files.append(standalone)
        if isinstance(get("device"), dict):
            fact.device = event["device"]
        if isinstance(get("kind"), str):
            fact.kind = event["kind"]
        if get("from_cache") is True or kind == "cache_hit":
            fact.from_cache = True
        configs = get("configs")
        if isinstance(configs, list):
            fact.configs = list(map(_event_config, configs))  # checked on decoding
            fact.declared_configs = len(configs)
        if isinstance(get("num_bytes"), (int, float)) and fact.num_bytes is None:
            fact.num_bytes = int(event["num_bytes"])
            fact.bytes_source = get("bytes_source")
        meta = get("inductor_meta")
        if meta and isinstance(meta.get("kernel_num_gb"), (int, float)) and fact.num_bytes is None:
            fact.num_bytes = int(meta["kernel_num_gb"] * 1e9)
            fact.bytes_source = "kernel_num_gb"
        args = get("args")
        if args is not None:
            self._event_args(lineno, event, kind, args, fact)
        if kind == "note" and isinstance(get("message"), str):
            fact.notes.append(event["message"])
        if kind in ("autotune", "coordesc"):
            self._event_tuning(lineno, event, kernel, kind)

    def _event_args(self, lineno: int, event: dict, kind: str, args: list,
                    fact: KernelFacts) -> None:
        """A launch's arguments: the first launch per signature and the saved input files."""
        if kind == "launch":
            fact.launches.append({"args": args, "grid": event.get("grid"),
                                  "num_bytes": event.get("num_bytes"),
                                  "bytes_source": event.get("bytes_source"),
                                  "standalone_file": event.get("standalone_file"),
                                  "origin": self.where(lineno)})
            site = event.get("launch_site")  # a plain @triton.jit launch: where the program launches it
            if isinstance(site, dict) and isinstance(site.get("file"), str):
                fact.launches[-1]["launch_site"] = {"file": site["file"], "line": site.get("line"),
                                                    "function": site.get("function")}
        saved_inputs = fact.saved_inputs
        for saved in map(_arg_saved, args):  # each arg an object (checked on decoding)
            if saved is not None and isinstance(saved, str) and saved not in saved_inputs:
                saved_inputs.append(saved)

    def _event_tuning(self, lineno: int, event: dict, kernel: str, kind: str) -> None:
        """An ``autotune`` or ``coordesc`` event: its timings and winner as one Tuning."""
        timings = event.get("timings")
        if not isinstance(timings, list):
            self.skip(lineno, f"{kind} event without a 'timings' list")
            return
        statistic = event.get("statistic")
        tuning = Tuning(kernel=kernel, origin=self.where(lineno), fmt=FMT_EVENTS, phase=kind,
                        pid=_int(event.get("pid")), statistic=str(statistic or "unknown"),
                        statistic_basis=_event_basis(event.get("benchmarker"))
                        if statistic else "not recorded")
        rows = tuning.timings
        for item in timings:
            timing = _event_timing(item)
            if timing is None:
                self.skip(lineno, f"{kind} event: a timing without a readable config")
            else:
                rows.append(timing)
        winner = _event_config(event["winner"]) if event.get("winner") is not None else None
        if winner:
            tuning.winner = winner
            tuning.winner_ms = next((t.ms for t in rows if _same_config(t.config, winner)), None)
        self.add_tuning(tuning)

    # -- kernel_autotune metric table CSV
    def _csv_header_line(self, text: str) -> bool:
        cells = [c.strip() for c in text.split(",")]
        if cells == _CSV_COLUMNS or cells == ["model_name"] + _CSV_COLUMNS:
            self.csv_header = cells
            self.csv_group = None
            return True
        return False

    def _csv_line(self, lineno: int, line: str) -> bool:
        """Consume a metric-table row; False hands the line back to the text rules."""
        if not line.strip():
            return True
        if self._csv_header_line(line.strip()):
            return True
        try:
            cells = next(csv.reader([line]))
        except (csv.Error, StopIteration):
            cells = []
        header = self.csv_header or []
        if len(cells) != len(header):
            # a row cut short still starts like a row of this table
            if line.count(",") >= 1 and ("num_warps" in line or line.startswith(("\"", ","))
                                         or "/" in line.split(",")[0]):
                self.skip(lineno, f"metric table row with {len(cells)} of {len(header)} columns")
                return True
            self.csv_header = None
            self.csv_group = None
            return False
        row = dict(zip(header, cells))
        cfg = parse_config_str(row["triton_config"])
        if cfg is None:
            self.skip(lineno, "metric table row with an unreadable triton_config")
            return True
        latency = row["latency_ms"].strip()
        ms = _ms(latency)
        if ms is None and latency not in ("inf", "nan", ""):
            self.skip(lineno, f"metric table row with latency_ms {latency!r}")
            return True
        self.seen(FMT_CSV)
        kernel = row["kernel_name"]
        group_key = (row["kernel_path"], kernel)
        tuning = self.csv_group
        if tuning is None or self.csv_group_key != group_key or any(
                config_key(t.config) == config_key(cfg) for t in tuning.timings):
            # one benchmark_all_configs call writes its rows together; a new kernel or a
            # repeated config starts the next one
            tuning = self.add_tuning(Tuning(
                kernel=kernel, origin=self.where(lineno), fmt=FMT_CSV, statistic="min",
                statistic_basis="inferred: the kernel_autotune table exists from torch 2.11, whose "
                                "default benchmarker returns the minimum"))
            self.csv_group, self.csv_group_key = tuning, group_key
        tuning.timings.append(Timing(cfg, ms))
        self.out.fact(kernel).add_source(row["kernel_path"])
        return True

    # -- Triton TRITON_PRINT_AUTOTUNING, 3.4+ four-line block
    def _triton_block_line(self, lineno: int, line: str) -> bool:
        block = self.triton_block
        text = line.strip()
        step = block["step"]
        m = None
        if step == 0:
            m = _TRITON_KEY.match(text)
            if m:
                block["key"] = m.group("key")
        elif step == 1:
            m = _TRITON_TIME.match(text)
            if m:
                block["t"] = float(m.group("t"))
        elif step == 2:
            m = _TRITON_BEST.match(text)
            if m:
                cfg = parse_config_str(m.group("cfg"))
                if cfg is None:
                    self.triton_block = None
                    self.skip(block["lineno"], "Triton autotuning message with an unreadable "
                                               "best config")
                    return True
                self._triton_done(block["lineno"], block["name"], block["t"], cfg, block["key"])
                self.triton_block = None
                return True
        if m is None:
            self.triton_block = None
            self.skip(block["lineno"], "multi-line Triton autotuning message cut off "
                                       f"(line {lineno} does not continue it)")
            return False
        block["step"] = step + 1
        return True

    def _triton_done(self, lineno: int, name: str, seconds: float, cfg: dict,
                     key: str | None) -> None:
        self.seen(FMT_TRITON)
        tuning = self.triton_tries.pop(name, None)
        if tuning is None:
            tuning = self.add_tuning(Tuning(kernel=name, origin=self.where(lineno), fmt=FMT_TRITON))
        tuning.statistic = "median"
        tuning.statistic_basis = "Triton Autotuner: do_bench quantiles (0.5, 0.2, 0.8), compared " \
                                 "by median; times are not printed"
        tuning.duration_s = seconds
        tuning.winner = cfg
        if key is not None:
            self.out.fact(name).notes.append(f"tuned for key {key}")
        self.out.fact(name).kind = self.out.fact(name).kind or "triton_autotune"

    # -- plain text lines: the patterns of _TEXT_RULES (below the handlers) are tried in order;
    # the first that matches and whose handler does not return False takes the line
    def _text_line(self, lineno: int, line: str) -> None:
        m = _TORCH_PREFIX.match(line)
        pid = _int(m.group("pid")) if m else None
        msg = (m.group("msg") if m else line).strip()
        for find, handle in self._TEXT_RULES:
            t = find(msg)
            if t is not None and handle(self, lineno, pid, t) is not False:
                return
        self._text_rest(lineno, m, pid, msg)

    def _on_triton_one(self, lineno: int, pid: Any, t: re.Match) -> None:
        cfg = parse_config_str(t.group("cfg"))
        if cfg is None:
            self.skip(lineno, "Triton autotuning message with an unreadable best config")
        else:
            self._triton_done(lineno, t.group("name"), float(t.group("t")), cfg, None)

    def _on_triton_head(self, lineno: int, pid: Any, t: re.Match) -> None:
        self.triton_block = {"lineno": lineno, "name": t.group("name"), "step": 0,
                             "key": None, "t": None}

    def _on_triton_try(self, lineno: int, pid: Any, t: re.Match) -> None:
        cfg = parse_config_str(t.group("cfg"))
        if cfg is None:
            self.skip(lineno, "'Autotuning kernel ... with config' line with an unreadable config")
            return
        name = t.group("name")
        tuning = self.triton_tries.get(name)
        if tuning is None or any(config_key(x.config) == config_key(cfg) for x in tuning.timings):
            tuning = self.add_tuning(Tuning(kernel=name, origin=self.where(lineno), fmt=FMT_TRITON))
            self.triton_tries[name] = tuning
        tuning.timings.append(Timing(cfg, None))
        self.last_try = tuning
        self.seen(FMT_TRITON)

    def _on_triton_fail(self, lineno: int, pid: Any, t: re.Match) -> bool | None:
        if self.last_try is None:
            return False
        self.out.fact(self.last_try.kernel).notes.append(
            f"config {config_label(self.last_try.timings[-1].config)} failed: {t.group('err')}")
        return None

    def _on_gets(self, lineno: int, pid: Any, t: re.Match) -> None:
        name, n = t.group("name"), int(t.group("n"))
        fact = self.out.fact(name)
        fact.declared_configs = n
        fact.configs = []
        self.declaring[pid] = (name, n)
        self.open_bench.pop(pid, None)
        self.seen(FMT_DEBUG)

    def _on_bench_all(self, lineno: int, pid: Any, t: re.Match) -> None:
        self.declaring.pop(pid, None)
        self.open_bench[pid] = self.add_tuning(Tuning(
            kernel=t.group("name"), origin=self.where(lineno), fmt=FMT_DEBUG, pid=pid))
        self.last_kernel[pid] = t.group("name")
        self.seen(FMT_DEBUG)

    def _on_best(self, lineno: int, pid: Any, t: re.Match) -> None:
        self.declaring.pop(pid, None)
        self.open_bench.pop(pid, None)
        self._best_line(lineno, pid, t.group("name"), t.group("rest"))

    def _on_cd_start(self, lineno: int, pid: Any, t: re.Match) -> None:
        self.coordesc[pid] = self.add_tuning(Tuning(
            kernel=t.group("name"), origin=self.where(lineno), fmt=FMT_DEBUG, phase="coordesc",
            pid=pid))
        self.seen(FMT_DEBUG)

    def _on_cd_base(self, lineno: int, pid: Any, t: re.Match) -> None:
        cfg = parse_config_str(t.group("cfg"))
        tuning = self._coordesc_for(pid, t.group("name"), lineno)
        if cfg is not None and not any(config_key(x.config) == config_key(cfg)
                                       for x in tuning.timings):
            tuning.timings.append(Timing(cfg, _ms(t.group("ms"))))
        self.seen(FMT_DEBUG)

    def _on_cd_improve(self, lineno: int, pid: Any, t: re.Match) -> None:
        cfg = parse_config_str(t.group("b"))
        tuning = self._coordesc_for(pid, t.group("name"), lineno)
        if cfg is None:
            self.skip(lineno, "coordinate descent result with an unreadable config")
            return
        tuning.winner, tuning.winner_ms = cfg, _ms(t.group("tb"))
        self.coordesc.pop(pid, None)
        self.seen(FMT_DEBUG)

    def _on_coordesc(self, lineno: int, pid: Any, t: re.Match) -> None:
        self._coordesc_probe(lineno, pid, t.group("rest"))

    _TEXT_RULES = (
        (_TRITON_ONE.search, _on_triton_one),
        (_TRITON_HEAD.search, _on_triton_head),
        (_TRITON_TRY.search, _on_triton_try),
        (_TRITON_FAIL.match, _on_triton_fail),
        (_GETS.match, _on_gets),
        (_BENCH_ALL.match, _on_bench_all),
        (_BEST.match, _on_best),
        (_CD_START.match, _on_cd_start),
        (_CD_BASE.match, _on_cd_base),
        (_CD_IMPROVE.match, _on_cd_improve),
        (_COORDESC.match, _on_coordesc),
    )

    def _text_rest(self, lineno: int, m: re.Match | None, pid: Any, msg: str) -> None:
        """A line no rule takes: a timing of an open benchmark, a config of a declared list, or
        a line cut short."""
        timed = _TIMING_TAIL.match(msg)
        if timed is not None and pid in self.open_bench:
            cfg = parse_config_str(timed.group("cfg"))
            if cfg is None:
                self.skip(lineno, "benchmark line with an unreadable config")
                return
            self.open_bench[pid].timings.append(self._timing(cfg, timed))
            self.seen(FMT_DEBUG)
            return
        if timed is None and pid in self.declaring and self._declared_config(lineno, m, pid, msg):
            return
        if pid in self.open_bench and timed is None:
            bench = self.open_bench[pid]
            if "num_warps" in msg or "nreg" in msg:
                self.skip(lineno, f"truncated benchmark line for {bench.kernel}")
                return
            if m is not None and m.group("site").split(":")[0].endswith("triton_heuristics.py"):
                self.open_bench.pop(pid, None)
        if timed is not None:
            self.skip(lineno, "benchmark timing line without a preceding "
                              "'Benchmark all input configs' line")
            return
        if any(anchor in msg for anchor in _ANCHORS):
            self.skip(lineno, "autotune log line in an unrecognised or truncated form")
        elif self.formats.keys() == {FMT_EVENTS}:
            self.skip(lineno, "not a JSON line in a JSON Lines capture log")
        elif "num_warps" in msg and TEXT_FIELD.match(msg) and parse_config_str(msg) is None \
                and (m is None or m.group("site").split(":")[0].endswith(_TUNER_SITES)):
            self.skip(lineno, "config line cut short")

    def _declared_config(self, lineno: int, m: re.Match | None, pid: Any, msg: str) -> bool:
        """A line after 'CachingAutotuner gets N configs': one of them (True), a truncated one
        (True, skipped), else the list ends (False)."""
        cfg = parse_config_str(msg)
        name, n = self.declaring[pid]
        fact = self.out.fact(name)
        if cfg is not None:
            fact.configs.append(cfg)
            if len(fact.configs) >= n:
                self.declaring.pop(pid, None)
            self.seen(FMT_DEBUG)
            return True
        if "num_warps" in msg and m is not None:
            self.skip(lineno, f"config line of 'CachingAutotuner gets {n} configs for {name}' "
                              "is truncated")
            return True
        self.declaring.pop(pid, None)
        return False

    def _timing(self, cfg: dict, m: re.Match) -> Timing:
        return Timing(cfg, _ms(m.group("ms")), _int(m.group("nreg")), _int(m.group("nspill")),
                      _int(m.group("shared")))

    def _best_line(self, lineno: int, pid: Any, name: str, rest: str) -> None:
        timed = _TIMING_TAIL.match(rest)
        cfg = parse_config_str(timed.group("cfg")) if timed else None
        if cfg is None:
            self.skip(lineno, f"'Best config for {name}' line is truncated or unreadable")
            return
        self.seen(FMT_DEBUG)
        target = next((t for t in reversed(self.out.tunings)
                       if t.kernel == name and t.fmt == FMT_DEBUG and t.phase == "autotune"
                       and t.pid == pid and t.winner is None), None)
        if target is None:
            target = self.add_tuning(Tuning(kernel=name, origin=self.where(lineno), fmt=FMT_DEBUG,
                                            pid=pid))
            target.timings.append(self._timing(cfg, timed))
        target.winner, target.winner_ms = cfg, _ms(timed.group("ms"))
        if target.statistic == "unknown":
            target.statistic = "min"
            target.statistic_basis = ("inferred: 'Best config for' is logged from torch 2.9, whose "
                                      "default benchmarker returns the minimum")
        self.last_kernel[pid] = name

    def _coordesc_for(self, pid: Any, name: str, lineno: int) -> Tuning:
        tuning = self.coordesc.get(pid)
        if tuning is None or tuning.kernel != name:
            tuning = self.add_tuning(Tuning(kernel=name, origin=self.where(lineno), fmt=FMT_DEBUG,
                                            phase="coordesc", pid=pid))
            self.coordesc[pid] = tuning
        return tuning

    def _coordesc_probe(self, lineno: int, pid: Any, rest: str) -> None:
        timed = _TIMING_TAIL.match(rest)
        cfg = parse_config_str(timed.group("cfg")) if timed else None
        if cfg is None:
            self.skip(lineno, "COORDESC line is truncated or unreadable")
            return
        tuning = self.coordesc.get(pid)
        if tuning is None:
            name = self.last_kernel.get(pid)
            if name is None:
                self.skip(lineno, "COORDESC line with no kernel to attach it to")
                return
            tuning = self._coordesc_for(pid, name, lineno)
        tuning.timings.append(self._timing(cfg, timed))
        self.seen(FMT_DEBUG)


_NO_RECORDS = ("no autotune records recognised (expected autotune.log JSON Lines, "
               "TRITON_PRINT_AUTOTUNING output, a kernel_autotune metric table or "
               "TORCH_LOGS=+inductor lines)")


def _problem(head: bytes) -> str | None:
    """Why a file cannot be an autotune log at all (``head``: its first non-blank block, b""
    when it is empty or blank), or None."""
    if not head:
        return "empty file"
    if head[:4096].count(b"\x00") > 64:  # a few NULs (a torn write) do not make it binary
        return "binary file, expected a text autotune log"
    return None


def _head(fh) -> bytes:
    """The first 4 KiB of the file, or where those are blank the first block that is not (b""
    for a blank file), read a block at a time: a file of blanks is never held whole."""
    head = fh.read(4096)
    while head and not head.strip():
        head = fh.read(1 << 20)
    return head


@contextlib.contextmanager
def paused_gc():
    """The cyclic garbage collector off for a while: parsing and summarizing allocate millions of
    small objects and make no cycles, and every collection would walk all of them again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse_files(paths: list[str | Path]) -> ParsedLogs:
    """Parse every file (with the garbage collector paused).

    One file that is empty, binary or holds no autotune record is an InputError.  Among several
    files such a file is listed in ``skipped`` instead (a run's log may hold no autotune lines while
    its capture log does), unless none of them holds a record.  A missing file is always an error.
    """
    with paused_gc():
        return _parse_files(paths)


def _parse_files(paths: list[str | Path]) -> ParsedLogs:
    out = ParsedLogs()
    empties: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw)
        with inputs.open_input(path, "an autotune log") as fh:  # missing, a folder, a FIFO: an error
            problem = _problem(_head(fh))
            if problem is None:
                parser = _FileParser(path, out)
                fh.seek(0)
                parser.parse(inputs.capped_lines(fh))  # line by line: the file is never held whole
                if parser.records == 0:
                    problem = _NO_RECORDS
                else:
                    out.inputs.append({"path": str(path), "formats": parser.formats,
                                       "skipped": sum(1 for s in out.skipped
                                                      if s["where"].rsplit(":", 1)[0] == str(path)),
                                       "overlong_lines": parser.overlong})
        if problem is not None:
            if len(paths) == 1:
                raise InputError(f"{path}: {problem}")
            empties.append((path, problem))
    if empties and not out.inputs:
        path, problem = empties[0]
        raise InputError(f"{path}: {problem}" + (f" (nor any of the other {len(empties) - 1} files)"
                                                 if len(empties) > 1 else ""))
    for path, problem in empties:
        out.skipped.append({"where": str(path), "reason": problem})
        out.inputs.append({"path": str(path), "formats": {}, "skipped": 1, "overlong_lines": 0})
    return out


# ---------------------------------------------------------------------------
# summary

SPREAD_RULE = "small_autotune_spread"   # the threshold of references/decision_rules.yaml


@functools.lru_cache(maxsize=1)
def default_spread_threshold() -> float:
    """The ``flat_spread`` cut: ``small_autotune_spread`` of references/decision_rules.yaml."""
    from ..base.decide import load_rules

    entry = (load_rules().get("thresholds") or {}).get(SPREAD_RULE)
    value = entry.get("value") if isinstance(entry, dict) else entry
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InputError(f"decision rules lack the threshold {SPREAD_RULE}")
    return float(value)



FLAG_TEXT = {
    "single_config": "only one config was declared or timed: this kernel was never tuned here "
                     "(Inductor's own logs do not say whether an autotune cache supplied it; "
                     "the capture log does, as from_cache)",
    "from_cache": "an autotune cache supplied the config, so nothing was timed in this run",
    "flat_spread": "slowest/fastest is below the spread threshold: tuning these configs is pointless",
    "spills": "at least one config spills registers",
    "winner_spills": "the chosen config spills registers",
    "failed_configs": "some configs failed or were skipped (no time)",
    "no_timings": "the log names the configs but prints no per-config times",
    "winner_not_fastest": "the reported winner is not the fastest config timed here",
    "retuned": "the kernel was tuned more than once (several shapes, processes or runs)",
    "winners_disagree": "different tunings picked different winners",
    "coordesc_improved": "coordinate descent found a config faster than the autotune winner",
    "several_source_files": "the name belongs to more than one module (different graphs reuse names)",
}


def _same_tuning(a: Tuning, b: Tuning) -> bool:
    """The same benchmarking reported twice (e.g. +inductor lines and the metric table)."""
    if a.kernel != b.kernel or a.phase != b.phase or len(a.timings) != len(b.timings) \
            or not any(t.ms is not None for t in a.timings):
        return False  # without times two tunings cannot be told apart from two real ones
    times_b = {_timing_key(t): t.ms for t in b.timings}
    for t in a.timings:
        key = _timing_key(t)
        if key not in times_b:
            return False
        x, y = t.ms, times_b[key]
        if (x is None) != (y is None):
            return False
        if x is not None and abs(x - y) > 1e-6 + 1e-6 * abs(x):  # logs print 6 decimals
            return False
    return True


def _merge(into: Tuning, other: Tuning) -> None:
    by_key = {_timing_key(t): t for t in into.timings}
    for t in other.timings:
        mine = by_key[_timing_key(t)]
        for name in ("n_regs", "n_spills", "shared", "gb_per_s"):
            if getattr(mine, name) is None and getattr(t, name) is not None:
                setattr(mine, name, getattr(t, name))
    if into.winner is None and other.winner is not None:
        into.winner, into.winner_ms = other.winner, other.winner_ms
    if into.statistic == "unknown" and other.statistic != "unknown":
        into.statistic, into.statistic_basis = other.statistic, other.statistic_basis
    into.origins += [o for o in other.origins if o not in into.origins]


def _dedupe(tunings: list[Tuning]) -> list[Tuning]:
    kept: list[Tuning] = []
    groups: dict[tuple, list[Tuning]] = {}  # twins share kernel and phase: search only those
    for tuning in tunings:
        group = groups.setdefault((tuning.kernel, tuning.phase), [])
        twin = next((k for k in group if _same_tuning(k, tuning)), None)
        if twin is None:
            kept.append(tuning)
            group.append(tuning)
        else:
            _merge(twin, tuning)
    return kept


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def _timing_row(t: Timing, fastest: float | None, num_bytes: int | None) -> dict:
    ms, gbps = t.ms, t.gb_per_s
    if gbps is None and num_bytes and ms:
        gbps = num_bytes / 1e9 / (ms / 1e3)
    return {"config": t.config, "label": _label(t.config),
            "ms": None if ms is None else round(ms, 6),
            "x_fastest": round(ms / fastest, 4) if ms and fastest else None,
            "n_regs": t.n_regs, "n_spills": t.n_spills, "shared": t.shared,
            "gb_per_s": None if gbps is None else round(gbps, 2)}


def _label(config: dict) -> str:
    """``config_label(config)``; the label of a plain event record (int or str kwargs, no
    extras, int or no warps and stages) is made once per distinct record."""
    kwargs, warps, stages = config.get("kwargs"), config.get("num_warps"), config.get("num_stages")
    if type(kwargs) is dict and not config.get("extras") and type(warps) in _INT_OR_NONE \
            and type(stages) in _INT_OR_NONE and _KWARG_PLAIN.issuperset(map(type, kwargs.values())):
        return _plain_label(tuple(kwargs.items()), warps, stages)
    return config_label(config)


@functools.lru_cache(maxsize=4096)
def _plain_label(kwargs: tuple, warps: int | None, stages: int | None) -> str:
    # the key holds no bool or float, so equal keys are records with equal labels
    return config_label({"kwargs": dict(kwargs), "num_warps": warps, "num_stages": stages})


_timing_ms = operator.attrgetter("ms")


def _tuning_view(t: Tuning, num_bytes: int | None) -> dict:
    timed = [x for x in t.timings if x.ms is not None]
    # the timed configs by time (a stable sort: ties keep log order), then the untimed ones
    ranked = sorted(timed, key=_timing_ms)
    if len(timed) < len(t.timings):
        ranked += [x for x in t.timings if x.ms is None]
    fastest = ranked[0].ms if timed else None
    slowest = ranked[len(timed) - 1].ms if timed else None
    rows = [_timing_row(x, fastest, num_bytes) for x in ranked]
    for rank, row in enumerate(rows, 1):
        row["rank"] = rank if row["ms"] is not None else None
    winner = t.winner
    winner_ms = t.winner_ms
    if winner is None and timed:
        # Inductor and Triton both keep the config with the smallest time (the first of equals)
        winner, winner_ms = ranked[0].config, fastest
    win_row = None
    if winner is not None:
        match = next((i for i, x in enumerate(ranked) if _same_config(x.config, winner)), None)
        if match is None:
            win_row = _timing_row(Timing(winner, winner_ms), fastest, num_bytes)
            win_row["ms"] = _round(winner_ms)
        else:  # the winner's row, without its rank (its last item)
            win_row = dict(rows[match])
            del win_row["rank"]
    return {"phase": t.phase, "format": t.fmt, "origins": t.origins, "pid": t.pid,
            "statistic": t.statistic, "statistic_basis": t.statistic_basis,
            "duration_s": t.duration_s, "configs": rows, "winner": win_row,
            "fastest_ms": rows[0]["ms"] if timed else None,  # _round(fastest), as its row has it
            "slowest_ms": rows[len(timed) - 1]["ms"] if timed else None,
            "spread": _round(slowest / fastest, 4) if fastest and slowest and len(timed) > 1 else None,
            "timed": len(timed), "failed": len(t.timings) - len(timed) if t.fmt != FMT_TRITON else 0}


def summarize(parsed: ParsedLogs, spread_threshold: float | None = None) -> dict:
    """Per kernel: ranked configs, winner, spread, GB/s, regs/spills and flags.

    ``spread_threshold`` None: :func:`default_spread_threshold` (the rules file's)."""
    if spread_threshold is None:
        spread_threshold = default_spread_threshold()
    with paused_gc():
        return _summarize(parsed, spread_threshold)


def _summarize(parsed: ParsedLogs, spread_threshold: float) -> dict:
    tunings = _dedupe(parsed.tunings)
    names = list(dict.fromkeys([t.kernel for t in tunings] + list(parsed.facts)))
    by_kernel: dict[str, list[Tuning]] = {}
    for t in tunings:
        by_kernel.setdefault(t.kernel, []).append(t)
    kernels = [_kernel_summary(name, parsed.facts.get(name) or KernelFacts(), by_kernel.get(name, []),
                               spread_threshold) for name in names]
    kernels.sort(key=lambda k: -((k["winner"] or {}).get("ms") or 0.0))
    return {"inputs": parsed.inputs, "spread_threshold": spread_threshold,
            "flag_meanings": {f: FLAG_TEXT[f] for f in FLAG_TEXT},
            "kernels": kernels, "skipped": parsed.skipped}


# The fields of the headline tuning that the kernel's entry carries (autotune_summary/2 writes
# them once, there); :func:`full_tuning` puts them back.
HEADLINE_SHARED = ("statistic", "statistic_basis", "configs", "fastest_ms", "slowest_ms", "spread")


def full_tuning(kernel: dict, tuning: dict) -> dict:
    """A ``tunings[]`` entry of a summary kernel with every field, the headline's included."""
    if not tuning.get("headline"):
        return tuning
    shared = {key: kernel.get(key) for key in HEADLINE_SHARED}
    if "winner" not in tuning:
        shared["winner"] = kernel.get("winner")
    return {**shared, **tuning}


def _kernel_summary(name: str, fact: KernelFacts, mine: list[Tuning], spread_threshold: float) -> dict:
    """One kernel of the summary: its tunings, the config it runs, and the flags."""
    auto = [_tuning_view(t, fact.num_bytes) for t in mine if t.phase == "autotune"]
    coord = [_tuning_view(t, fact.num_bytes) for t in mine if t.phase == "coordesc"] \
        if len(auto) < len(mine) else []
    # the headline is the autotune that timed the most configs (the latest on a tie)
    head = auto[0] if len(auto) == 1 else \
        max(reversed(auto), key=lambda v: (v["timed"], len(v["configs"])), default=None)
    winner = head["winner"] if head else None
    final = coord[-1]["winner"] if coord and coord[-1]["winner"] else None
    chosen = final or winner
    chosen_from = "coordesc" if final else ("autotune" if winner else None)
    if chosen is None and len(fact.configs) == 1:
        # nothing was timed; the kernel runs its only (or cache-supplied) config
        chosen = _timing_row(Timing(fact.configs[0], None), None, fact.num_bytes)
        chosen_from = "from_cache" if fact.from_cache else "only_config"
    statistic = head["statistic"] if head else (coord[0]["statistic"] if coord else "unknown")
    configs = head["configs"] if head else []
    flags = _kernel_flags(fact, auto, coord, head, final, chosen, spread_threshold)
    entry = {
        "kernel": name,
        "kind": fact.kind,
        "source_files": fact.source_files,
        "standalone_file": fact.standalone_file,
        "declared_configs": fact.declared_configs,
        "from_cache": fact.from_cache,
        "statistic": statistic,
        "statistic_basis": head["statistic_basis"] if head else None,
        "winner": chosen,
        "winner_from": chosen_from,
        "fastest_ms": head["fastest_ms"] if head else None,
        "slowest_ms": head["slowest_ms"] if head else None,
        "spread": head["spread"] if head else None,
        "configs": configs,
        "num_bytes": fact.num_bytes,
        "bytes_source": fact.bytes_source,
        "launches": fact.launches,
        "tunings": auto,
        "coordesc": coord,
        "flags": flags,
        "notes": fact.notes,
    }
    for view in auto:
        view["headline"] = view is head
    if head:  # the headline's rows and figures are the kernel's own fields: written once
        for key in HEADLINE_SHARED:
            del head[key]
        if head["winner"] is chosen:
            del head["winner"]
    return entry


def _kernel_flags(fact: KernelFacts, auto: list[dict], coord: list[dict], head: dict | None,
                  final: dict | None, chosen: dict | None, spread_threshold: float) -> list[str]:
    """The flags of one kernel (FLAG_TEXT), in a fixed order."""
    winner = head["winner"] if head else None
    flags = []
    n_configs = max([fact.declared_configs or 0]
                    + [len(v["configs"]) for v in auto]) or None
    if n_configs == 1 or (n_configs is None and fact.configs and len(fact.configs) == 1):
        flags.append("single_config")
    if fact.from_cache:
        flags.append("from_cache")
    if head and head["spread"] is not None and head["spread"] < spread_threshold:
        flags.append("flat_spread")
    rows = [r for v in auto + coord for r in v["configs"]]
    if any((r["n_spills"] or 0) > 0 for r in rows):
        flags.append("spills")
    if chosen and (chosen.get("n_spills") or 0) > 0:
        flags.append("winner_spills")
    if any(v["failed"] for v in auto + coord):
        flags.append("failed_configs")
    if head and head["timed"] == 0 and head["configs"]:
        flags.append("no_timings")
    if head and winner and head["fastest_ms"] is not None and winner["ms"] is not None \
            and winner["ms"] > head["fastest_ms"] * (1 + 1e-9):
        flags.append("winner_not_fastest")
    if len(auto) > 1:
        flags.append("retuned")
        if len({config_label(v["winner"]["config"]) for v in auto if v["winner"]}) > 1:
            flags.append("winners_disagree")
    if final and winner and final["ms"] is not None and winner["ms"] is not None \
            and final["ms"] < winner["ms"] and config_label(final["config"]) != winner["label"]:
        flags.append("coordesc_improved")
    # module names are content hashes: one name in two cache folders is one module
    if len(fact.source_files) > 1 and len({Path(f).name for f in fact.source_files}) > 1:
        flags.append("several_source_files")
    return flags


def _cell(value: Any, fmt: str = "{}") -> str:
    return "–" if value is None else fmt.format(value)


# Markdown caps (the JSON always holds everything): kernels in the overview table, kernels
# given a section of their own, config rows per kernel.
MD_MAX_KERNELS = 1000
MD_MAX_SECTIONS = 200
MD_MAX_ROWS = 50


def render_markdown(summary: dict) -> str:
    from ..base import markdown as md

    lines = ["# Autotune summary", ""]
    inputs = ", ".join(f"{md.code(i['path'])} ({md.text(', '.join(f'{k}: {v}' for k, v in i['formats'].items()))})"
                       for i in summary["inputs"])
    lines += [f"Inputs: {inputs}.", "",
              f"Spread threshold: {summary['spread_threshold']} (a spread below it is flagged "
              "`flat_spread`). Kernels are ordered by the winner's time, slowest first; a time "
              "is per launch in ms, measured with the statistic shown.", ""]
    kernels = summary["kernels"]
    if len(kernels) > MD_MAX_KERNELS:
        lines += [f"{len(kernels)} kernels: the table and the sections below show the "
                  f"{MD_MAX_KERNELS} slowest; every kernel is in the JSON.", ""]
    elif len(kernels) > MD_MAX_SECTIONS:
        lines += [f"{len(kernels)} kernels: sections follow for the {MD_MAX_SECTIONS} slowest; "
                  "every kernel is in the JSON.", ""]
    lines += ["| kernel | configs timed | winner | ms | spread | statistic | flags |",
              "|---|---|---|---|---|---|---|"]
    for k in kernels[:MD_MAX_KERNELS]:
        w = k["winner"] or {}
        timed = sum(1 for c in k["configs"] if c["ms"] is not None)
        lines.append(f"| {md.code(k['kernel'])} | {timed}/{len(k['configs'])} | {md.text(w.get('label', '–'))} | "
                     f"{_cell(w.get('ms'), '{:.4f}')} | {_cell(k['spread'], '{:.3f}')} | "
                     f"{md.text(k['statistic'])} | {md.text(', '.join(k['flags']) or '–')} |")
    for k in kernels[:MD_MAX_SECTIONS]:
        lines += ["", f"## {md.code(k['kernel'])}", ""]
        if k["source_files"]:
            lines.append("Source: " + ", ".join(md.code(s) for s in k["source_files"]))
        if k["standalone_file"]:
            lines.append(f"Standalone copy: {md.code(k['standalone_file'])}")
        if k["declared_configs"] is not None:
            lines.append(f"Declared configs: {k['declared_configs']}")
        if k["statistic_basis"]:
            lines.append(f"Statistic: {md.text(k['statistic'])} ({md.text(k['statistic_basis'])})")
        if k["num_bytes"]:
            lines.append(f"Bytes per launch: {md.text(k['num_bytes'])} ({md.text(k['bytes_source'])})")
        if k["launches"]:
            first = k["launches"][0]
            args = ", ".join(
                f"{a.get('name')}: {a.get('dtype')}{list(a['shape'])}" if a.get("kind") == "tensor"
                else f"{a.get('name')}={a.get('value')}" for a in first["args"]
                if isinstance(a, dict))
            lines.append(f"Inputs (first launch, grid {md.text(first['grid'])}): {md.text(args)}"
                         + (f"; {len(k['launches'])} argument signatures" if len(k["launches"]) > 1
                            else ""))
            site = first.get("launch_site")
            if isinstance(site, dict):
                lines.append(f"Launch site: {md.code(str(site.get('file')) + ':' + str(site.get('line')))}"
                             " (a plain `kernel[grid](...)` launch: its arguments are the config)")
        if k["configs"]:
            lines += ["", "| rank | config | ms | × fastest | n_regs | spills | shared | GB/s |",
                      "|---|---|---|---|---|---|---|---|"]
            for c in k["configs"][:MD_MAX_ROWS]:
                lines.append(f"| {_cell(c['rank'])} | {md.text(c['label'])} | {_cell(c['ms'], '{:.4f}')} | "
                             f"{_cell(c['x_fastest'], '{:.3f}')} | {_cell(c['n_regs'])} | "
                             f"{_cell(c['n_spills'])} | {_cell(c['shared'])} | "
                             f"{_cell(c['gb_per_s'], '{:.1f}')} |")
            if len(k["configs"]) > MD_MAX_ROWS:
                lines += ["", f"The table shows the {MD_MAX_ROWS} fastest of {len(k['configs'])} "
                              "configs; every config is in the JSON."]
        if k["winner"]:
            lines += ["", f"Winner ({md.text(k['winner_from'])}): {md.text(k['winner']['label'])}"
                      + (f" at {k['winner']['ms']:.4f} ms" if k["winner"]["ms"] is not None else "")]
        for c in k["coordesc"]:
            lines.append(f"Coordinate descent: {len(c['configs'])} probes"
                         + (f", best {md.text(c['winner']['label'])}" if c["winner"] else ""))
        if len(k["tunings"]) > 1:
            lines.append(f"Tuned {len(k['tunings'])} times; the table shows the tuning that timed "
                         "the most configs.")
        for flag in k["flags"]:
            lines.append(f"- **{flag}**: {FLAG_TEXT[flag]}")
        for note in k["notes"]:
            lines.append(f"- note: {md.text(note)}")
    if summary["skipped"]:
        lines += ["", "## Skipped lines", ""]
        lines += [f"- {md.code(s['where'])}: {md.text(s['reason'])}" for s in summary["skipped"][:200]]
        if len(summary["skipped"]) > 200:
            lines.append(f"- ... and {len(summary['skipped']) - 200} more (see the JSON)")
    return "\n".join(lines) + "\n"
