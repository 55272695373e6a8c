"""THE Triton config value: one type for every form a config takes in this bundle.

Forms, each with its constructor and writer:

* a live ``triton.Config`` (:meth:`TritonConfig.from_triton`; :meth:`TritonConfig.triton_args`
  gives the constructor arguments, as a pins file stores them);
* its printed text, ``str(triton.Config)`` = ``BLOCK: 1024, num_warps: 4, num_ctas: 1, ...``, which
  ``TRITON_PRINT_AUTOTUNING``, Inductor's ``+inductor`` debug lines and its ``kernel_autotune``
  metric table all print (:meth:`TritonConfig.from_text` / :meth:`TritonConfig.text`);
* ``NAME=VALUE`` assignments, as a ``--config`` flag and :meth:`TritonConfig.label` write them
  (:meth:`TritonConfig.from_assignments`);
* a flat dict ``{meta..., num_warps, num_stages, ...}``: a standalone file's ``flat``, a sweep
  variant, Inductor's ``triton_config_to_hashable`` pairs (:meth:`TritonConfig.from_flat` /
  :meth:`TritonConfig.flat`);
* the ``autotune_event/1`` record ``{"kwargs", "num_warps", "num_stages", "extras"}``
  (:meth:`TritonConfig.from_record` / :meth:`TritonConfig.record`);
* Python source ``triton.Config({...}, num_warps=.., num_stages=..)`` (:meth:`TritonConfig.to_source`).

Nothing here imports torch or triton.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

# Attributes of triton.Config other than ``kwargs``, in the order ``str(triton.Config)`` prints them
# (triton/runtime/autotuner.py, class Config): 3.0-3.1 num_warps, num_ctas, num_stages, maxnreg;
# 3.2 adds num_buffers_warp_spec, num_consumer_groups, reg_dec_producer, reg_inc_consumer;
# 3.3-3.9 drop those four and add ir_override; facebookexperimental/triton (ws-3.5) adds
# minRegAutoWS, maxRegAutoWS, pingpongAutoWS.  pre_hook (3.0+) is a callable, never printed.
CONFIG_FIELDS = ("num_warps", "num_ctas", "num_stages", "num_buffers_warp_spec", "num_consumer_groups",
                 "reg_dec_producer", "reg_inc_consumer", "maxnreg", "ir_override", "minRegAutoWS",
                 "maxRegAutoWS", "pingpongAutoWS", "pre_hook")
# AMD compile options (triton/backends/amd/compiler.py, HIPOptions) that are no Config attribute:
# Inductor's ROCm configs and hand-written HIP ones put them in Config.kwargs, and JITFunction.run
# hands every kwarg that is no kernel parameter to the backend's parse_options.
AMD_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")
# Options of the same kind that only Hygon's HCU backends have (HIPOptions of HYGON-AI/triton-das and
# flagos-ai/FlagTree third_party/hcu/backend): the tuning knobs, then the legacy DTK options that
# FlagTree 3.0 declares and triton-das consumes and ignores. Whether the installed backend accepts
# one is decided by tko.read.triton_stack, never here.
HCU_OPTIONS = ("schedule_hint", "sched_latency", "buffer_cache_swizzle", "mmac_layout_force",
               "enable_v_mmac_cluster", "instruction_sched_variant", "num_ldmatrixes", "enable_mmacfuse",
               "reorder_instr")
# Backend compile options carried in Config.kwargs (the HIP ones of both backends).
BACKEND_OPTIONS = AMD_OPTIONS + HCU_OPTIONS
# THE list of option keys: every other key of a flat config is a kernel meta-parameter.
OPTION_KEYS = CONFIG_FIELDS + BACKEND_OPTIONS
# Inductor's block meta-parameters; a hand-written kernel's block constexprs are found by name.
BLOCK_KEYS = ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK", "R1_BLOCK", "RBLOCK")


def is_block_key(key: str, value: Any) -> bool:
    """A flat config key that is a block size: an int meta-parameter named like one."""
    return isinstance(value, int) and not isinstance(value, bool) and key not in OPTION_KEYS and (
        key in BLOCK_KEYS or key.upper().startswith("BLOCK") or key.upper().endswith("BLOCK")
        or "BLOCK_" in key.upper())


# triton.Config's positional parameters after kwargs (3.0-3.1 and 3.3+).
POSITIONAL = ("num_warps", "num_stages", "num_ctas", "maxnreg")
# Triton's defaults of the options: a value equal to its default says nothing about a config,
# so it is no part of its identity (key) or label.  None is always "not set".
DEFAULTS = {"num_ctas": 1, "maxnreg": None, "ir_override": None, "num_buffers_warp_spec": 0,
            "num_consumer_groups": 0, "reg_dec_producer": 0, "reg_inc_consumer": 0}
# Options that an offline triton.compile takes besides num_warps / num_stages (CUDAOptions and
# HIPOptions fields of every release; the 3.2 warp-spec fields and ir_override are left to the
# live Config).
COMPILE_OPTIONS = ("num_ctas", "maxnreg") + BACKEND_OPTIONS
# The fields a standalone copy and offline compile cannot carry: a callable.
_NOT_DATA = ("pre_hook",)

# "NAME: " at the start of the text or after ", " (str(triton.Config) joins fields with ", ").
TEXT_FIELD = re.compile(r"(?:^|, )([A-Za-z_][A-Za-z0-9_]*): ")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", re.S)

Pairs = tuple  # tuple[tuple[str, Any], ...]


def parse_value(text: str) -> Any:
    """One printed value: None / bool / int / float, else the text itself."""
    text = text.strip()
    if text in ("None", "null"):
        return None
    if text in ("True", "False"):
        return text == "True"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _significant(options: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Options that are set and differ from Triton's default, sorted by name."""
    return sorted((k, v) for k, v in options if v is not None and DEFAULTS.get(k, object()) != v)


def _py(value: Any) -> str:
    """A value as Python source: strings in double quotes (as json.dumps writes them)."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def record_key(record: dict) -> tuple:
    """:meth:`TritonConfig.key` of an ``autotune_event/1`` record, without building the value."""
    return (tuple(sorted((k, repr(v)) for k, v in (record.get("kwargs") or {}).items())),
            record.get("num_warps"), record.get("num_stages"),
            tuple((k, repr(v)) for k, v in _significant((record.get("extras") or {}).items())))


def normalize_record(record: dict) -> dict:
    """``TritonConfig.from_record(record).record()`` without building the value (the log reader
    normalizes every config of a large log through it)."""
    if "kwargs" not in record:
        return TritonConfig.from_flat(record).record()
    kwargs = dict(record.get("kwargs") or {})
    extras = dict(record.get("extras") or {})
    for key in [k for k in kwargs if k in BACKEND_OPTIONS]:
        extras[key] = kwargs.pop(key)
    return {"kwargs": kwargs, "num_warps": record.get("num_warps"), "num_stages": record.get("num_stages"),
            "extras": extras}


def record_label(record: dict) -> str:
    """:meth:`TritonConfig.label` of an ``autotune_event/1`` record."""
    parts = [f"{k}={v}" for k, v in (record.get("kwargs") or {}).items()]
    parts.append(f"num_warps={record.get('num_warps')}")
    parts.append(f"num_stages={record.get('num_stages')}")
    parts += [f"{k}={v}" for k, v in _significant((record.get("extras") or {}).items())]
    return ", ".join(parts)


@dataclass(frozen=True, eq=False)
class TritonConfig:
    """A Triton config: kernel meta-parameters, warps, stages and the other options.

    ``kwargs`` and ``options`` are ``(name, value)`` pairs in the order they were given (labels
    and records keep it); equality and hashing go by :meth:`key`, which ignores that order and
    options at Triton's defaults.  Backend options (AMD, HCU) live in ``options`` whatever form they came in.
    """

    kwargs: Pairs = ()
    num_warps: int | None = None
    num_stages: int | None = None
    options: Pairs = ()

    # ------------------------------------------------------------------ constructors

    @classmethod
    def _build(cls, kwargs: dict, num_warps: Any, num_stages: Any, options: Iterable) -> "TritonConfig":
        """Backend options given as kwargs (as Config.kwargs holds them) move to the options."""
        kw = [(str(k), v) for k, v in kwargs.items() if k not in BACKEND_OPTIONS]
        opts = [(str(k), v) for k, v in options] + [(k, v) for k, v in kwargs.items() if k in BACKEND_OPTIONS]
        return cls(tuple(kw), num_warps, num_stages, tuple(opts))

    @classmethod
    def of(cls, kwargs: dict | None = None, **options: Any) -> "TritonConfig":
        """Like the ``triton.Config`` call: ``TritonConfig.of({"XBLOCK": 512}, num_warps=8)``."""
        warps, stages = options.pop("num_warps", None), options.pop("num_stages", None)
        return cls._build(dict(kwargs or {}), warps, stages, options.items())

    @classmethod
    def from_flat(cls, flat: dict) -> "TritonConfig":
        """``{XBLOCK: 512, num_warps: 8, waves_per_eu: 2}``: a key of :data:`OPTION_KEYS` is an option."""
        kwargs = {k: v for k, v in flat.items() if k not in OPTION_KEYS}
        options = [(k, v) for k, v in flat.items() if k in OPTION_KEYS and k not in ("num_warps", "num_stages")]
        return cls._build(kwargs, flat.get("num_warps"), flat.get("num_stages"), options)

    @classmethod
    def from_record(cls, record: dict) -> "TritonConfig":
        """An ``autotune_event/1`` config record (a dict without ``kwargs`` is read as flat)."""
        if "kwargs" not in record:
            return cls.from_flat(record)
        return cls._build(dict(record.get("kwargs") or {}), record.get("num_warps"),
                          record.get("num_stages"), (record.get("extras") or {}).items())

    @classmethod
    def from_triton(cls, cfg: Any) -> "TritonConfig":
        """A ``triton.Config`` (any release): options at Triton's default are left out."""
        kwargs = dict(getattr(cfg, "kwargs", None) or {})
        options = [(k, kwargs.pop(k)) for k in [k for k in kwargs if k in BACKEND_OPTIONS]]
        for name in CONFIG_FIELDS:
            if name in ("num_warps", "num_stages") or name in _NOT_DATA:
                continue
            value = getattr(cfg, name, None)
            if value is not None and DEFAULTS.get(name, object()) != value:
                options.append((name, value))
        return cls._build(kwargs, getattr(cfg, "num_warps", None), getattr(cfg, "num_stages", None), options)

    @classmethod
    def from_text(cls, text: str) -> "TritonConfig":
        """``str(triton.Config)`` of any release (a trailing ``;`` is ignored).

        ValueError when the text is not one whole config: it must start with a field and name
        num_warps and num_stages as integers, which every Triton release prints.
        """
        text = text.strip().rstrip(";").strip()
        marks = list(TEXT_FIELD.finditer(text))
        if not marks or marks[0].start() != 0:
            raise ValueError(f"not a printed triton.Config: {text[:80]!r}")
        fields: dict[str, Any] = {}
        for i, m in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
            fields[m.group(1)] = parse_value(text[m.end():end])
        if not _is_int(fields.get("num_warps")) or not _is_int(fields.get("num_stages")):
            raise ValueError(f"a printed triton.Config without integer num_warps and num_stages "
                             f"(cut short?): {text[:80]!r}")
        return cls.from_flat(fields)

    @classmethod
    def from_assignments(cls, text: str) -> "TritonConfig":
        """``XBLOCK=1024,num_warps=4`` (a ``--config`` flag) or ``XBLOCK=1024, num_warps=4`` (a label).

        ValueError naming the first entry that is not ``NAME=VALUE``.
        """
        flat: dict[str, Any] = {}
        for item in filter(None, (p.strip() for p in text.split(","))):
            m = _ASSIGNMENT.match(item)
            if not m:
                raise ValueError(f"entry {item!r} is not NAME=VALUE")
            flat[m.group(1)] = parse_value(m.group(2))
        return cls.from_flat(flat)

    # ------------------------------------------------------------------ reading

    def option(self, name: str, default: Any = None) -> Any:
        return next((v for k, v in self.options if k == name), default)

    def kwargs_dict(self) -> dict:
        return dict(self.kwargs)

    def options_dict(self) -> dict:
        return dict(self.options)

    def key(self) -> tuple:
        """Identity across forms: kwargs order and options at Triton's defaults do not matter."""
        return (tuple(sorted((k, repr(v)) for k, v in self.kwargs)), self.num_warps, self.num_stages,
                tuple((k, repr(v)) for k, v in _significant(self.options)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TritonConfig) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def label(self) -> str:
        """``XBLOCK=512, num_warps=8, num_stages=1[, waves_per_eu=2]`` (options at defaults left out)."""
        parts = [f"{k}={v}" for k, v in self.kwargs]
        parts += [f"num_warps={self.num_warps}", f"num_stages={self.num_stages}"]
        parts += [f"{k}={v}" for k, v in _significant(self.options)]
        return ", ".join(parts)

    # ------------------------------------------------------------------ writing

    def record(self) -> dict:
        """The ``autotune_event/1`` config record."""
        return {"kwargs": dict(self.kwargs), "num_warps": self.num_warps, "num_stages": self.num_stages,
                "extras": dict(self.options)}

    def flat(self) -> dict:
        """``{meta..., AMD options..., num_warps, num_stages, other options...}`` (None warps/stages left out)."""
        out = dict(self.kwargs)
        out.update((k, v) for k, v in self.options if k in BACKEND_OPTIONS)
        for name, value in (("num_warps", self.num_warps), ("num_stages", self.num_stages)):
            if value is not None:
                out[name] = value
        out.update((k, v) for k, v in self.options if k not in BACKEND_OPTIONS)
        return out

    def triton_args(self) -> tuple[dict, dict]:
        """``(kwargs, keywords)`` of the ``triton.Config`` call: AMD options go in kwargs (no Config
        parameter takes them), each other option that is set is a keyword; pre_hook is left out."""
        kwargs = dict(self.kwargs)
        kwargs.update((k, v) for k, v in self.options if k in BACKEND_OPTIONS)
        keywords = {k: v for k, v in (("num_warps", self.num_warps), ("num_stages", self.num_stages))
                    if v is not None}
        keywords.update((k, v) for k, v in self.options
                        if k not in BACKEND_OPTIONS and k not in _NOT_DATA and v is not None)
        return kwargs, keywords

    def to_source(self) -> str:
        """``triton.Config({"XBLOCK": 512}, num_warps=8, num_stages=1)``."""
        kwargs, keywords = self.triton_args()
        body = "{" + ", ".join(f"{json.dumps(k)}: {_py(v)}" for k, v in kwargs.items()) + "}"
        opts = ", ".join(f"{k}={_py(v)}" for k, v in keywords.items())
        return f"triton.Config({body}" + (f", {opts}" if opts else "") + ")"

    def text(self) -> str:
        """``str(triton.Config)`` form: kwargs (AMD options among them), then the fields that are
        set in the order Triton prints them; :meth:`from_text` reads it back."""
        kwargs, _ = self.triton_args()
        parts = [f"{k}: {v}" for k, v in kwargs.items()]
        fields = dict(self.options, num_warps=self.num_warps, num_stages=self.num_stages)
        parts += [f"{k}: {fields[k]}" for k in CONFIG_FIELDS if k in fields and k not in _NOT_DATA]
        return ", ".join(parts)

    def compile_options(self) -> dict:
        """Options for ``triton.compile``: num_warps (when set), num_stages, and those of
        :data:`COMPILE_OPTIONS` that are set."""
        out: dict[str, Any] = {}
        if self.num_warps:
            out["num_warps"] = int(self.num_warps)
        if self.num_stages is not None:
            out["num_stages"] = int(self.num_stages)
        out.update((k, v) for k, v in self.options if k in COMPILE_OPTIONS and v is not None)
        return out

    # ------------------------------------------------------------------ transforming

    def mapped(self, fn: Callable[[Any], Any]) -> "TritonConfig":
        """The same config with ``fn`` applied to every kwarg and option value (e.g. to JSON)."""
        return TritonConfig(tuple((k, fn(v)) for k, v in self.kwargs), self.num_warps, self.num_stages,
                            tuple((k, fn(v)) for k, v in self.options))

    def explicit(self) -> "TritonConfig":
        """The same config without the options whose value is None (not set)."""
        return TritonConfig(self.kwargs, self.num_warps, self.num_stages,
                            tuple((k, v) for k, v in self.options if v is not None))
