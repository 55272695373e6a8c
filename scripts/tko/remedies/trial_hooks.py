"""What the bootstrap installs in a trial process before the repro runs as ``__main__``.

* :func:`apply_settings`: ``inductor.<name>`` / ``dynamo.<name>`` config values (nested names
  such as ``inductor.triton.cudagraphs``); a name this torch does not have is recorded as absent.
* :func:`wrap_compile`: replaces ``torch.compile`` so every compiled callable is timed and its
  last output kept. ``TKO_TRIAL_TIMING=full`` times every call with device synchronization
  (``torch.cuda.synchronize`` on CUDA/HIP, nothing on the CPU); ``first`` times only the first
  call and leaves the others untouched (used when the repro prints its own step time). Options:
  ``eager`` (return the callable uncompiled, still timed) and ``static`` (force ``dynamic=False``).
* At exit, the measurements go to ``$TKO_TRIAL_OUT`` (JSON) and the outputs to
  ``$TKO_TRIAL_OUTPUTS`` (``torch.save`` of ``{callable: last output}``, detached, on the CPU).

Step time: for each compiled callable, the median of its calls after the first ``WARMUP_CALLS``
(compilation and recompilation happen there); the step time is the sum of those medians over the
callables. ``first_step_s`` is the sum of the callables' first-call times (compile included).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import statistics
import sys
import time
from typing import Any

WARMUP_CALLS = 2
PREFIX = "TKO_TRIAL"


class CallRecord:
    def __init__(self, name: str):
        self.name = name
        self.calls = 0
        self.times: list[float] = []
        self.last: Any = None

    def summary(self) -> dict:
        steady = self.times[WARMUP_CALLS:]
        return {"name": self.name, "calls": self.calls, "timed_calls": len(self.times),
                "first_s": self.times[0] if self.times else None,
                "steady_calls": len(steady),
                "median_ms": statistics.median(steady) * 1e3 if steady else None}


_records: list[CallRecord] = []
_state: dict = {"settings": {}, "absent": [], "pins": 0, "options": []}


def _config_owner(name: str):
    """(object, attribute) for ``inductor.a.b`` / ``dynamo.a``; None when this torch lacks it."""
    import importlib

    root, _, rest = name.partition(".")
    modules = {"inductor": "torch._inductor.config", "dynamo": "torch._dynamo.config"}
    if root not in modules or not rest:
        return None
    owner = importlib.import_module(modules[root])
    parts = rest.split(".")
    for part in parts[:-1]:
        if not hasattr(owner, part):
            return None
        owner = getattr(owner, part)
    return (owner, parts[-1]) if hasattr(owner, parts[-1]) else None


def apply_settings(settings: dict) -> None:
    for name, value in settings.items():
        found = _config_owner(name)
        if found is None:
            _state["absent"].append(name)
            continue
        setattr(found[0], found[1], value)
        _state["settings"][name] = value


def _sync_fn():
    import torch

    if torch.cuda.is_available():
        return torch.cuda.synchronize
    return lambda: None


def _timed(fn, record: CallRecord, full: bool):
    sync = []

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if full or record.calls == 0:
            if not sync:
                sync.append(_sync_fn())
            sync[0]()
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            sync[0]()
            record.times.append(time.perf_counter() - t0)
        else:
            out = fn(*args, **kwargs)
        record.calls += 1
        record.last = out
        return out

    return call


def _name_of(model: Any) -> str:
    base = getattr(model, "__qualname__", None) or type(model).__name__
    taken = sum(1 for r in _records if r.name.split("#")[0] == base)
    return base if not taken else f"{base}#{taken}"


def wrap_compile(full: bool, eager: bool = False, static: bool = False) -> None:
    import torch

    orig = torch.compile

    def compile_one(model, kwargs):
        record = CallRecord(_name_of(model))
        _records.append(record)
        if static:
            kwargs["dynamic"] = False
        compiled = model if eager else orig(model, **kwargs)
        if isinstance(compiled, torch.nn.Module):
            # the module stays a module (parameters, state_dict): time its forward instead
            compiled.forward = _timed(compiled.forward, record, full)
            return compiled
        return _timed(compiled, record, full)

    @functools.wraps(orig)
    def compile(model=None, **kwargs):
        if model is None:
            return lambda m: compile_one(m, dict(kwargs))
        return compile_one(model, dict(kwargs))

    torch.compile = compile
    _state["options"] = [o for o, on in (("eager", eager), ("static", static)) if on]


def _to_cpu(obj: Any) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, (list, tuple)):
        return [_to_cpu(o) for o in obj]
    if isinstance(obj, dict):
        return {str(k): _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (int, float, bool, str, type(None))):
        return obj
    return repr(type(obj))


def measurements() -> dict:
    callables = [r.summary() for r in _records]
    steady = [c["median_ms"] for c in callables if c["median_ms"] is not None]
    firsts = [c["first_s"] for c in callables if c["first_s"] is not None]
    return {"callables": callables, "step_ms": sum(steady) if steady else None,
            "first_step_s": sum(firsts) if firsts else None, "settings": _state["settings"],
            "absent": _state["absent"], "options": _state["options"], "pins": _state["pins"],
            "peak_memory_mb": _peak_memory_mb()}


def _peak_memory_mb() -> float | None:
    """torch.cuda.max_memory_allocated of the run (the process's peak of tensors), in MiB."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return round(torch.cuda.max_memory_allocated() / 2 ** 20, 3)
    except Exception:  # a broken device at exit: the peak is unknown, the run is not lost
        return None
    return None


def write_at_exit(out_path: str, outputs_path: str | None) -> None:
    def _write():
        try:
            if outputs_path and any(r.calls for r in _records):
                import torch

                torch.save({r.name: _to_cpu(r.last) for r in _records if r.calls}, outputs_path)
            with open(out_path, "w", encoding="utf-8") as fh:
                json.dump(measurements(), fh)
        except Exception as exc:  # report, never mask the program's own exit
            print(f"{PREFIX}: could not write measurements: {type(exc).__name__}: {exc}", file=sys.stderr)

    atexit.register(_write)


def install_from_env(settings: dict, eager: bool, static: bool) -> None:
    """Everything a trial process needs, driven by the bootstrap's flags and the environment."""
    env = os.environ
    apply_settings(settings)
    from . import graph_rewrites

    graph_rewrites.install_from_env(env)
    if env.get("TKO_PINS"):
        from ..patch import pins

        _state["pins"] = pins.install_from_env(env)
    if env.get("TKO_LAUNCH_OVERRIDES"):
        from ..patch import launch_overrides

        launch_overrides.install_from_env(env)
    if env.get("TKO_TRIAL_OUT"):
        wrap_compile(full=env.get("TKO_TRIAL_TIMING", "full") == "full", eager=eager, static=static)
        write_at_exit(env["TKO_TRIAL_OUT"], env.get("TKO_TRIAL_OUTPUTS"))
    elif eager or static:
        wrap_compile(full=False, eager=eager, static=static)
