"""Launch overrides: change the arguments of a hand-written ``@triton.jit`` launch inside the unchanged
program (``num_warps``, ``num_stages``, AMD options, constexpr block sizes).

A ``launch_overrides/1`` file lists ``{kernel, source_hash, launch: {NAME: value}, source}``: when
``$TKO_LAUNCH_OVERRIDES`` names one (``apply_config_pins.py --launch-overrides FILE``, or a trial arm),
:func:`install` wraps ``JITFunction.run`` (and the interpreter's ``InterpretedFunction.run``) so that
every launch of a kernel whose name and source hash match takes the listed values, as if written at
its launch site. The hash is :func:`tko.patch.jit_record.source_hash`, the one the capture records:
a kernel whose source changed is left alone with one warning line on stderr.

A constexpr that sizes the grid is only overridden where the launch computes its grid from the
arguments (``kernel[lambda meta: ...]``): a fixed grid tuple would no longer cover the data, so such
a launch keeps its own value of that constexpr (one warning line). ``num_warps``, ``num_stages`` and
backend options never change the grid. A kernel without an override pays one dict lookup once:
its ``run`` is then the original, bound on the instance.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

from ..base.errors import InputError
from . import jit_record

SCHEMA = "launch_overrides/1"
ENV_VAR = "TKO_LAUNCH_OVERRIDES"
PREFIX = "TKO_LAUNCH_OVERRIDES"
_decided: dict[int, tuple[Any, dict | None]] = {}   # id(kernel) -> (kernel, override or None)
_warned: set = set()


def _warn(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"{PREFIX}: {message}", file=sys.stderr)


def load_overrides(path: str | os.PathLike) -> dict[str, dict]:
    """``{kernel: override}`` of a ``launch_overrides/1`` file; a malformed entry is an InputError."""
    from ..base.artifact import read_artifact

    doc = read_artifact(path, SCHEMA)
    entries = doc.get("overrides")
    if not isinstance(entries, list):
        raise InputError(f"{path}: field 'overrides' must be a list of objects")
    out = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("kernel"), str) or not entry["kernel"]:
            raise InputError(f"{path}: overrides[{i}] needs a 'kernel' name")
        launch = entry.get("launch")
        if not isinstance(launch, dict) or not launch or not all(
                isinstance(v, (bool, int, float, str)) for v in launch.values()):
            raise InputError(f"{path}: overrides[{i}].launch must be an object of numbers and strings")
        if not isinstance(entry.get("source_hash"), str):
            raise InputError(f"{path}: overrides[{i}] needs the kernel's 'source_hash' (a string)")
        out[entry["kernel"]] = entry
    return out


def write_overrides(path: str | os.PathLike, tool: str, entries: list[dict]) -> Path:
    from ..base.artifact import write_artifact

    write_artifact(path, SCHEMA, tool, {"overrides": entries})
    return Path(path)


def overrides_from_sweep(sweep: dict, spec: dict, origin: str | None = None) -> dict:
    """The override of a ``variant_sweep/1`` of a plain JIT launch: the best config's values that
    differ from the captured launch's (``spec``: the standalone file's ``_TKO_SPEC``)."""
    if spec.get("kind") != jit_record.KIND or not spec.get("source_hash"):
        raise InputError("the sweep's kernel is no plain @triton.jit launch captured with its source hash")
    best = (sweep.get("best") or {}).get("name")
    if not best or best == "baseline":
        raise InputError("the sweep found no variant better than the captured launch: nothing to override")
    variant = next((v for v in sweep.get("variants") or [] if v.get("name") == best), None)
    if not variant or variant.get("kind") != "config":
        raise InputError(f"the sweep's best variant {best!r} is not a launch-argument change")
    captured = dict((spec.get("configs") or [{}])[0].get("flat") or {})
    launch = {k: v for k, v in (variant.get("config") or {}).items() if captured.get(k) != v}
    return {"kernel": spec["kernel"], "source_hash": spec["source_hash"], "launch": launch,
            "source": {"sweep": origin, "variant": best, "x_vs_baseline": variant.get("x_vs_baseline"),
                       "launch_site": spec.get("launch_site")}}


def _decide(obj: Any, overrides: dict[str, dict]) -> dict | None:
    """The override for this kernel object (None: none applies), decided once per object."""
    name = jit_record.jit_name(obj)
    entry = overrides.get(name)
    if entry is None:
        return None
    have = jit_record.source_hash(obj)
    if have != entry["source_hash"]:
        _warn(f"override for {name} ignored: kernel source hash {have} differs from the override's "
              f"{entry['source_hash']} (the arguments were chosen for other code)")
        return None
    names, constexprs, _defaults = jit_record.param_info(obj)
    launch = dict(entry["launch"])
    blocks = {k for k in launch if k in constexprs}
    _warn(f"launches of {name} take {launch}")
    return {"launch": launch, "names": names, "blocks": blocks}


def _apply(name: str, ov: dict, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The launch's (args, kwargs) with the override's values in place."""
    launch, names = ov["launch"], ov["names"]
    if ov["blocks"] and not callable(kwargs.get("grid")):
        kept = sorted(ov["blocks"])
        _warn(f"{name}: {', '.join(kept)} not overridden at a launch with a fixed grid (the grid would "
              "not follow); compute the grid from meta at the launch site to take them")
        launch = {k: v for k, v in launch.items() if k not in ov["blocks"]}
    args = list(args)
    for key, value in launch.items():
        index = names.index(key) if key in names else -1
        if 0 <= index < len(args):
            args[index] = value
        elif key not in ("grid", "warmup"):
            kwargs[key] = value
    return tuple(args), kwargs


def _wrap(cls: Any, overrides: dict[str, dict]) -> None:
    orig = cls.run
    if getattr(orig, "_tko_overrides", False):
        return
    decided_get = _decided.get

    def run(self, *args, **kwargs):
        seen = decided_get(id(self))
        if seen is None or seen[0] is not self:
            try:
                ov = _decide(self, overrides)
            except Exception as exc:  # an override must never break the program
                _warn(f"override for {jit_record.jit_name(self)} not applied: {type(exc).__name__}: {exc}")
                ov = None
            _decided[id(self)] = seen = (self, ov)
            if ov is None and getattr(type(self).run, "_tko_overrides", False):
                self.run = types.MethodType(orig, self)  # nothing to do for this kernel: off its path
        if seen[1] is not None and not kwargs.get("warmup"):
            args, kwargs = _apply(jit_record.jit_name(self), seen[1], args, kwargs)
        return orig(self, *args, **kwargs)

    run.__wrapped__ = orig
    run._tko_overrides = True
    cls.run = run


def install(overrides: dict[str, dict]) -> int:
    """Apply ``overrides`` (of :func:`load_overrides`) to every JIT launch from now on."""
    import importlib

    for module, name in (("triton.runtime.jit", "JITFunction"), ("triton.runtime.interpreter", "InterpretedFunction")):
        try:
            _wrap(getattr(importlib.import_module(module), name), overrides)
        except (ImportError, AttributeError):
            continue
    return len(overrides)


def install_from_env(env: dict | None = None) -> int:
    """Install the overrides ``$TKO_LAUNCH_OVERRIDES`` names; returns how many (0: none)."""
    path = (os.environ if env is None else env).get(ENV_VAR)
    return install(load_overrides(path)) if path else 0
