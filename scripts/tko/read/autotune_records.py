"""The records an autotune log is read into: configs (parsed from any of the logs' spellings and
normalized), timings, tunings and the facts per kernel. No parsing of a format here."""


from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..base.config import (BACKEND_OPTIONS, TritonConfig, normalize_record, record_key, record_label)

# ---------------------------------------------------------------------------
# configs

# The exact JSON types of a well-formed config's typed fields (None: absent), for _plain_config.
_NONE = type(None)
_INT_OR_NONE = frozenset({int, _NONE})
_DICT_OR_NONE = frozenset({dict, _NONE})

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


def _plain_config(cfg: Any) -> bool:
    """True: :func:`config_problem` finds nothing (exact JSON types); False: ask it."""
    return type(cfg) is dict and type(cfg.get("num_warps")) in _INT_OR_NONE \
        and type(cfg.get("num_stages")) in _INT_OR_NONE \
        and ("kwargs" not in cfg or (type(cfg["kwargs"]) in _DICT_OR_NONE
                                     and type(cfg.get("extras")) in _DICT_OR_NONE))


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


