"""Capture of plain ``@triton.jit`` launches: ``kernel[grid](..., BLOCK=..., num_warps=...)``.

Installed by ``autotune_capture_patch`` after :func:`tko.patch.capture.install` (the Inductor and
Autotuner wrappers). It wraps the CLASS method ``run`` of Triton's ``JITFunction`` (and of the
interpreter's ``InterpretedFunction`` under ``TRITON_INTERPRET=1``), which every launch of a JIT kernel
passes through: ``kernel[grid](...)`` is ``kernel.run(*args, grid=grid, warmup=False, **kwargs)`` on
every Triton 3.x. ``@triton.heuristics`` calls it with its computed constexprs added, so those
launches are recorded with the final values.

Hot path: one dict lookup (the kernel object's state), one key of the launch's int arguments and
scalar keywords, one set lookup. Slow path (a new kernel or argument signature, at most
``TRITON_CAPTURE_MAX_SIGNATURES`` per kernel): the first frame outside Triton, torch and this
package is the launch site; a launch made from inside an ``Autotuner`` or Inductor's
``CachingAutotuner`` (which the capture already records) marks the kernel as theirs and it is
never recorded here. A kernel with nothing more to record (theirs, or at the signature cap) gets
its original ``run`` bound on the instance, so later launches skip the wrapper; so does one whose
last ``TRITON_CAPTURE_JIT_WATCH`` launches (default 64) brought no new signature, until a compile
of a new specialization (``JITFunction._do_compile``, wrapped: a cache miss only) re-arms it and its
next launch is recorded. The steady state of a launch-bound loop thus pays nothing.
Every failure goes to ``capture_errors.log``.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

from . import capture
from .launch_site import walk_launch_stack
from .jit_record import _RUN_KEYWORDS, def_location, jit_name, param_info, record_launch, snapshot, source_hash

# Launches in a row with an already recorded signature after which a kernel's launches bypass the
# wrapper (TRITON_CAPTURE_JIT_WATCH): the steady state of a launch-bound loop then pays nothing.
DEFAULT_WATCH = 64


def _signature_key(args: tuple, kwargs: dict) -> Any:
    """(args, kwargs) -> the int positional arguments and the scalar keyword values (block sizes,
    num_warps), as one fast getter chosen from the first launch."""
    positions = [i for i, a in enumerate(args) if type(a) is int]
    names = tuple(k for k, v in kwargs.items() if k not in _RUN_KEYWORDS and type(v) in (int, bool, float, str))
    pos = capture.operator.itemgetter(*positions) if positions else capture._no_scalars

    def key(a: tuple, kw: dict) -> tuple:
        return (pos(a), tuple([kw.get(n) for n in names]))

    return key


class JitState(capture.KernelState):
    """A JIT kernel's state; ``quiet``: launches in a row whose signature was already recorded."""

    __slots__ = ("quiet",)

    def __init__(self, obj: Any, name: str):
        super().__init__(obj, name)
        self.quiet = 0


_watch = DEFAULT_WATCH
_rearm_classes: set = set()  # classes whose _do_compile is wrapped: a bypassed kernel can be re-armed


def _quiet_bypass(obj: Any, st: JitState, orig: Any) -> None:
    """``_watch`` launches in a row brought no new signature: bypass the wrapper (no cost at all
    from here on) where a compile of a new specialization re-arms it (:func:`_rearm`)."""
    if type(obj) in _rearm_classes and getattr(type(obj).run, "_tko_capture", False):
        st.standalone["quiet_bypass"] = True
        _bypass(obj, orig)
    else:
        st.quiet = -(1 << 62)  # no re-arm here (the interpreter, a Triton without _do_compile): keep watching


def _rearm(obj: Any) -> None:
    """A compile of a new specialization (dtype, alignment, constexprs) of a kernel bypassed for
    quiet: its next launch passes through the wrapper again and is recorded."""
    st = capture._states.get(id(obj))
    if st is None or st.obj is not obj or not st.standalone.pop("quiet_bypass", False):
        return
    obj.__dict__.pop("run", None)
    st.quiet = 0
    st.standalone.update(force=True, key=st.key)
    st.key = None  # the next launch takes the slow path, which records it


def _bypass(obj: Any, orig: Any) -> None:
    try:
        obj.run = types.MethodType(orig, obj)
    except Exception as exc:
        capture.log_error(f"bypass {jit_name(obj)}", exc)


def _new_state(obj: Any, walk: tuple) -> capture.KernelState:
    st = JitState(obj, jit_name(obj))
    capture._states[id(obj)] = st
    site, owner, _heuristics = walk
    if owner is not None:
        st.frozen = True  # an autotuner's inner kernel: its own wrapper records it
        st.standalone["owner"] = owner
        return st
    names, constexprs, defaults = param_info(obj)
    filename, line, _src = def_location(obj)
    st.standalone.update(names=names, constexprs=constexprs, defaults=defaults, def_file=filename,
                         def_line=line, source_hash=source_hash(obj))
    return st


def on_jit_run(obj: Any, args: tuple, kwargs: dict, orig: Any) -> Any:
    """The slow path of the ``run`` wrapper: a kernel or argument signature not seen yet."""
    pending, st = None, None
    try:
        frame, walk = sys._getframe(2), None
        st = capture._states.get(id(obj))
        if st is None or st.obj is not obj:
            walk = walk_launch_stack(frame)
            st = _new_state(obj, walk)
        if not st.frozen and not kwargs.get("warmup"):
            if st.key is None:
                st.key = st.standalone.pop("key", None) or _signature_key(args, kwargs)
            sig = st.key(args, kwargs)
            if sig not in st.signatures or st.standalone.pop("force", False):
                st.signatures.add(sig)
                st.frozen = len(st.signatures) >= capture.settings().max_signatures
                site, _owner, heuristics = walk or walk_launch_stack(frame)
                pending = snapshot(obj, st, args, kwargs, site, heuristics)
    except Exception as exc:
        capture.log_error(f"JITFunction.run(enter) {jit_name(obj)}", exc)
        capture._freeze(obj)
        st = capture._states.get(id(obj))
    result = orig(obj, *args, **kwargs)
    if pending is not None:
        try:
            record_launch(obj, st, pending)
        except Exception as exc:
            capture.log_error(f"JITFunction.run(exit) {st.name}", exc)
    if st is not None and st.frozen and getattr(type(obj).run, "_tko_capture", False):
        _bypass(obj, orig)
    return result


def _wrap_jit(cls: Any) -> None:
    orig_run = cls.run
    states_get = capture._states.get

    def run(self, *args, **kwargs):
        # hot path: a kernel and signature already recorded cost one lookup, one key, one set test
        st = states_get(id(self))
        if st is not None:
            if st.frozen:
                return orig_run(self, *args, **kwargs)
            key = st.key
            if key is not None:
                try:
                    seen = key(args, kwargs) in st.signatures
                except Exception:  # e.g. fewer arguments than the first launch: the slow path decides
                    seen = False
                if seen:
                    quiet = st.quiet = st.quiet + 1
                    if quiet >= _watch:
                        _quiet_bypass(self, st, orig_run)
                    return orig_run(self, *args, **kwargs)
        return on_jit_run(self, args, kwargs, orig_run)

    run.__wrapped__ = orig_run
    run.__name__ = "run"
    run._tko_capture = True
    cls.run = run
    capture._patches.append((cls, "run", orig_run, run))


def _wrap_compile(cls: Any) -> None:
    """Wrap ``_do_compile`` (a compile-cache miss only, never the hot path) to re-arm the capture."""
    orig = getattr(cls, "_do_compile", None)
    if orig is None:
        return

    def _do_compile(self, *args, **kwargs):
        try:
            _rearm(self)
        except Exception as exc:
            capture.log_error(f"re-arm {jit_name(self)}", exc)
        return orig(self, *args, **kwargs)

    _do_compile.__wrapped__ = orig
    _do_compile._tko_capture = True
    cls._do_compile = _do_compile
    capture._patches.append((cls, "_do_compile", orig, _do_compile))
    _rearm_classes.add(cls)


def install(env: dict | None = None) -> dict:
    """Wrap ``JITFunction.run`` (and ``_do_compile``) and, when the interpreter module is importable,
    ``InterpretedFunction.run``."""
    global _watch
    env = os.environ if env is None else env
    _watch = max(1, int(env.get("TRITON_CAPTURE_JIT_WATCH") or DEFAULT_WATCH))
    done = {}
    for label, module, name in (("triton_jit", "triton.runtime.jit", "JITFunction"),
                                ("triton_interpreter", "triton.runtime.interpreter", "InterpretedFunction")):
        try:
            import importlib

            cls = getattr(importlib.import_module(module), name)
            if not hasattr(cls, "run"):
                # Triton <= 3.3's interpreter launches through GridExecutor, not a run method: its
                # launches are not recorded there (the GPU path is), and that is no capture error
                done[label] = False
                continue
            if not getattr(cls.run, "_tko_capture", False):
                _wrap_jit(cls)
                if label == "triton_jit":
                    _wrap_compile(cls)
            done[label] = True
        except Exception as exc:
            done[label] = False
            capture.log_error(f"install {label}", exc)
    return done

