"""Record every Triton kernel a program runs: configs, timings, winner, first-launch arguments.

Installed by ``import autotune_capture_patch``.  It wraps CLASS methods (never
constructors or Triton compile hooks) so objects built in Inductor's compile
workers and pickled back (torch >= 2.7) are covered too:

* ``CachingAutotuner.run`` (every Inductor kernel launch; first launch per
  argument signature records the arguments, the grid, bytes and writes the
  standalone file),
* ``CachingAutotuner.benchmark_all_configs`` (per-config timings),
* ``CachingAutotuner.coordinate_descent_tuning`` (coordinate-descent probes),
* ``triton.runtime.autotuner.Autotuner.run`` (hand-written ``@triton.autotune``
  kernels outside torch.compile),
* ``JITFunction.run`` / the interpreter's ``InterpretedFunction.run`` (every other hand-written
  ``@triton.jit`` launch, ``@triton.heuristics`` ones included: ``tko.patch.jit_capture``, which
  ``autotune_capture_patch`` installs right after :func:`install`).

Every wrapper forwards ``*args, **kwargs`` unchanged and returns what the
original returned; an exception inside the capture code is written to
``capture_errors.log`` and never reaches the program.  Events are JSON Lines
(``autotune_event/1``) appended with one ``O_APPEND`` write each, so DDP ranks
may share a capture directory.
"""


from __future__ import annotations

import errno
import json
import os
import stat
import sys
import time
import traceback
import operator
import re
import types
from pathlib import Path
from typing import Any

from ..base import atomic
from ..base import ranks
from ..base.archs import torch_device_arch
from ..base.interpreter import interpreter_on
from ..base.versions import autotuner_user_do_bench
from .capture_records import (_clean, _finite, _from_cache, _json_default, _json_flat, _jsonable_scalar,
                              _signature_names, config_flat, config_from_hashable, config_record,
                              describe_arg, gb_per_s, grid_moves, inductor_configs, inductor_kernel_name,
                              inductor_meta_record, inductor_statistic, kernel_kind, launch_grid,
                              num_bytes_estimate, size_hints_record, standalone_config, triton_meta_record,
                              versions)

SCHEMA = "autotune_event/1"
LOG_NAME = "autotune.log"
ERROR_LOG_NAME = "capture_errors.log"
DEFAULT_DIR = "./autotune_kernels"
DEFAULT_MAX_SAVE_MB = 64.0
DEFAULT_MAX_SIGNATURES = 8
MAX_ERROR_LINES = 200

_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")




# ---------------------------------------------------------------------------
# settings and state


class Settings:
    """Capture settings, read once from the environment at install time."""

    def __init__(self, env: dict | None = None):
        env = os.environ if env is None else env
        self.capture_dir = Path(env.get("TRITON_CAPTURE_DIR") or DEFAULT_DIR).resolve()
        self.force_retune = env.get("TRITON_CAPTURE_FORCE_RETUNE", "") in ("1", "true", "yes")
        self.max_save_bytes = int(float(env.get("TRITON_CAPTURE_MAX_SAVE_MB") or DEFAULT_MAX_SAVE_MB) * 2**20)
        self.max_signatures = int(env.get("TRITON_CAPTURE_MAX_SIGNATURES") or DEFAULT_MAX_SIGNATURES)
        self.standalone = env.get("TRITON_CAPTURE_STANDALONE", "1") not in ("0", "false", "no")

    @property
    def log_path(self) -> Path:
        return self.capture_dir / LOG_NAME

    @property
    def error_path(self) -> Path:
        return self.capture_dir / ERROR_LOG_NAME


class KernelState:
    """Per kernel object and process: what was already recorded.

    Holds the kernel object itself, so its ``id`` (the key of ``_states``) cannot be reused
    by another object; kernels live as long as the program anyway.
    """

    __slots__ = ("obj", "name", "signatures", "key", "frozen", "standalone", "static")

    def __init__(self, obj: Any, name: str):
        self.obj = obj
        self.name = name
        self.signatures: set = set()
        self.key: Any = None  # args -> signature (an itemgetter of the scalar arguments)
        self.frozen = False  # nothing more to record (capture failed, or signature cap reached)
        self.standalone: dict = {}
        self.static = False  # one signature only (an Inductor kernel compiled for static shapes)


def _no_scalars(args: tuple) -> tuple:
    return ()


_settings: Settings | None = None
_states: dict[int, KernelState] = {}
_error_count = 0
_device_cache: dict = {}
_installed: dict[str, Any] = {}
_patches: list[tuple[Any, str, Any, Any]] = []  # (class, attribute, original, wrapper)
_capture_off: str | None = None  # why nothing is recorded (None: recording)
_loss_reported = False


def _set_capture_off(reason: str | None) -> None:
    """Turn recording off for this process, saying so once on stderr."""
    global _capture_off
    _capture_off = reason
    if reason:
        _stderr(f"capture off: {reason}")


def settings() -> Settings:
    global _settings
    if _settings is None:
        _settings = Settings()
    return _settings


# ---------------------------------------------------------------------------
# output








def emit(event: str, kernel: str, **fields: Any) -> dict:
    """Append one ``autotune_event/1`` line; returns the record.

    A record that cannot be written (disk full, a read-only or non-regular log) is dropped
    whole, never half-written; the first loss is reported on stderr, since
    ``capture_errors.log`` is most likely unwritable too.
    """
    record = {"schema": SCHEMA, "event": event, "kernel": kernel, "pid": os.getpid(), "time": time.time()}
    record.update(ranks.record_tags())  # rank, local_rank, world_size of a multi-process program
    record.update({k: v for k, v in fields.items() if v is not None})
    line = json.dumps(_clean(record), default=_json_default, allow_nan=False)
    if _capture_off is None:
        try:
            append_record(settings().log_path, line)
        except OSError as exc:
            _report_loss(exc)
    return record


def _report_loss(exc: OSError) -> None:
    global _loss_reported
    if _loss_reported:
        return
    _loss_reported = True
    reason = errno.errorcode.get(exc.errno, str(exc.errno)) if exc.errno else str(exc)
    _stderr(f"capture record lost: {reason} ({exc.strerror or exc}); further losses not shown")


def _stderr(message: str) -> None:
    try:
        sys.stderr.write(f"autotune_capture_patch: {message}\n")
        sys.stderr.flush()
    except Exception:
        pass


def append_record(path: Path, line: str) -> None:
    """One ``O_APPEND`` write of the whole line, or nothing.

    Opened non-blocking (a FIFO never blocks the program) and refused unless a regular file;
    held under an advisory lock (released on close) while checked and written.
    A record starts on a fresh line when the file does not end with a newline (an earlier
    torn write); a short or failed write is truncated back to the size before it.
    """
    data = (line if line.endswith("\n") else line + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)  # the capture folder, made by the first record
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        _lock(fd)  # writers sharing the log (DDP ranks) see each other's records whole
        size = os.fstat(fd).st_size
        if size and _last_byte(path, size) != b"\n":
            data = b"\n" + data
        try:
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, "short write")
        except OSError:
            _drop_partial(fd, path, size, data)
            raise
    finally:
        os.close(fd)


def _lock(fd: int) -> None:
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)
    except (ImportError, OSError):
        pass  # no advisory locks here (some network file systems): O_APPEND still holds


def _drop_partial(fd: int, path: Path, size: int, data: bytes) -> None:
    """Truncate back to ``size`` when what follows it is a prefix of our own record (another
    process's append is left alone)."""
    try:
        now = os.fstat(fd).st_size
        if size < now <= size + len(data):
            with open(path, "rb") as fh:
                fh.seek(size)
                if data.startswith(fh.read(now - size)):
                    os.ftruncate(fd, size)
    except OSError:
        pass


def _last_byte(path: Path, size: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(size - 1)
            return fh.read(1)
    except OSError:
        return b"\n"


def check_capture_dir(s: Settings) -> str | None:
    """Why capture cannot record into ``s.capture_dir`` (None when it can). Nothing is created:
    the folder appears with the first record (an import of the patch leaves the cwd as it was)."""
    if not s.capture_dir.is_dir():
        problem = atomic.output_problem(s.capture_dir, folder=True)
        return f"cannot create capture dir {problem}" if problem else None
    if not os.access(s.capture_dir, os.W_OK | os.X_OK):
        return f"capture dir {s.capture_dir} is not writable"
    try:
        st = os.stat(s.log_path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{s.log_path}: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode):
        return f"{s.log_path} is not a regular file"
    if not os.access(s.log_path, os.W_OK):
        return f"{s.log_path} is not writable"
    return None


def log_error(where: str, exc: BaseException | None = None, message: str | None = None) -> None:
    """One line per capture error in ``capture_errors.log``; never raises."""
    global _error_count
    try:
        _error_count += 1
        if _error_count > MAX_ERROR_LINES:
            return
        text = message or ""
        if exc is not None:
            frames = traceback.extract_tb(exc.__traceback__)
            at = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
            text = f"{type(exc).__name__}: {exc}{at}".replace("\n", " ")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        atomic.append_line(settings().error_path, f"{stamp} pid={os.getpid()} {where}: {text}")
    except Exception:
        pass


def device_record(index: Any = None, device_type: str | None = None) -> dict | None:
    """name / arch / index / warp_size of a GPU (cached per index)."""
    key = (index, device_type)
    if key in _device_cache:
        return _device_cache[key]
    rec = None
    try:
        import torch

        if torch.cuda.is_available():
            idx = torch.cuda.current_device() if index is None else int(index)
            props = torch.cuda.get_device_properties(idx)
            arch = torch_device_arch(props, bool(getattr(torch.version, "hip", None)))[0]
            rec = {"name": props.name, "arch": arch, "index": idx,
                   "warp_size": getattr(props, "warp_size", None),
                   "backend": "hip" if getattr(torch.version, "hip", None) else "cuda"}
    except Exception as exc:
        log_error("device_record", exc)
    _device_cache[key] = rec
    return rec


# ---------------------------------------------------------------------------
# Inductor hooks


def _state_for(obj: Any) -> tuple[KernelState, bool]:
    st = _states.get(id(obj))
    if st is not None and st.obj is obj:
        return st, False
    st = KernelState(obj, inductor_kernel_name(obj))
    st.static = static_inductor_kernel(obj)
    _states[id(obj)] = st
    return st, True


_INT_TYPE = re.compile(r"^[iu]\d+$")


def static_inductor_kernel(obj: Any) -> bool:
    """True when every integer argument of an Inductor kernel is re-bound to a literal in its
    body (static shapes: ``xnumel = 33554432``): its launches all have one signature. Dynamic
    shapes leave ``xnumel`` / ``ks0`` as real arguments."""
    try:
        signature = (getattr(obj, "triton_meta", None) or {}).get("signature") or {}
        src = getattr(getattr(obj, "fn", None), "src", None)
        if not signature or not isinstance(src, str):
            return False
        ints = [name for name, ty in signature.items() if isinstance(ty, str) and _INT_TYPE.match(ty)]
        return all(re.search(rf"^\s+{re.escape(name)} = -?\d+\s*$", src, re.M) for name in ints)
    except Exception as exc:
        log_error(f"static check {inductor_kernel_name(obj)}", exc)
        return False


def _bypass(obj: Any, orig: Any) -> None:
    """Nothing more to record for this kernel: its ``run`` becomes the original bound method on
    the instance, so later launches do not pass through the capture at all."""
    try:
        obj.run = types.MethodType(orig, obj)
    except Exception as exc:  # e.g. a class with __slots__: the wrapper's hot path stays
        log_error(f"bypass {inductor_kernel_name(obj)}", exc)


def _arg_names(obj: Any, nargs: int) -> list[str]:
    fn = getattr(obj, "fn", None)
    names = list(getattr(fn, "arg_names", None) or [])
    if len(names) < nargs:
        sig = _signature_names(getattr(obj, "triton_meta", None) or {})
        names = sig if len(sig) >= nargs else names + [f"arg{i}" for i in range(len(names), nargs)]
    return names[:nargs]


def kernel_event_inductor(obj: Any, st: KernelState) -> None:
    st.standalone["declared"] = inductor_configs(obj)
    triton_meta = getattr(obj, "triton_meta", None) or {}
    dev = triton_meta.get("device")
    emit("kernel", st.name,
         source_file=getattr(obj, "filename", None),
         function=getattr(getattr(obj, "fn", None), "__name__", None),
         kind=kernel_kind(obj),
         size_hints=size_hints_record(getattr(obj, "size_hints", None), kernel_kind(obj)),
         triton_meta=triton_meta_record(triton_meta),
         inductor_meta=inductor_meta_record(obj),
         configs=[config_record(c) for c in inductor_configs(obj)],
         from_cache=_from_cache(obj),
         device=device_record(dev if isinstance(dev, int) else getattr(dev, "index", None)),
         versions=versions())
    if _from_cache(obj):
        emit("cache_hit", st.name, source_file=getattr(obj, "filename", None), from_cache=True,
             winner=config_record(inductor_configs(obj)[0]) if inductor_configs(obj) else None,
             message="an autotune cache supplied the config; set TRITON_CAPTURE_FORCE_RETUNE=1 "
                     "to time every config")


def _signature_key(args: tuple) -> Any:
    """args -> the tuple of its int arguments (numels, strides of dynamic shapes), as a fast getter."""
    positions = [i for i, a in enumerate(args) if type(a) is int]
    if not positions:
        return _no_scalars
    return operator.itemgetter(*positions)


def _grid_for(obj: Any, args: tuple, kwargs: dict, cfg: Any) -> list | None:
    """The launch grid of ``cfg`` (2.7+: GridExpr via _interpret_args_grid; older: grid=)."""
    grid = kwargs.get("grid")
    try:
        if grid is not None:
            g = grid(dict(cfg.kwargs)) if callable(grid) else grid
            return [int(x) for x in g]
        interp = getattr(obj, "_interpret_args_grid", None)
        if interp is not None:
            _, g = interp(args, cfg)
            return [int(x) for x in g]
    except Exception as exc:
        log_error(f"grid {inductor_kernel_name(obj)}", exc)
    return None


def on_inductor_run(obj: Any, args: tuple, kwargs: dict, orig: Any) -> Any:
    """The slow path of the ``CachingAutotuner.run`` wrapper: a kernel or signature not seen yet."""
    pending = None
    st = None
    try:
        st, new = _state_for(obj)
        if new:
            kernel_event_inductor(obj, st)
        if st.key is None:
            st.key = _signature_key(args)
        sig = st.key(args)
        if sig not in st.signatures and not st.frozen:
            st.signatures.add(sig)
            st.frozen = len(st.signatures) >= settings().max_signatures
            pending = _snapshot_args(obj, st, args, len(st.signatures))
    except Exception as exc:
        log_error(f"run(enter) {inductor_kernel_name(obj)}", exc)
        _freeze(obj)
    result = orig(obj, *args, **kwargs)
    if pending is not None:
        try:
            _record_launch_inductor(obj, st, args, kwargs, pending)
        except Exception as exc:
            log_error(f"run(exit) {st.name}", exc)
    if st is not None and (st.frozen or (st.static and st.signatures)) \
            and getattr(type(obj).run, "_tko_capture", False):
        # (only where the class's run is the wrapper: a subclass that overrides run, as
        # Inductor's DebugAutotuner does, must keep its own run)
        _bypass(obj, orig)
    return result


def _freeze(obj: Any) -> None:
    st = _states.get(id(obj))
    if st is None or st.obj is not obj:
        st = KernelState(obj, "?")
        _states[id(obj)] = st
    st.frozen = True


_stem_owners: dict[str, str] = {}


def unique_stem(stem: str, owner: str | None) -> str:
    """Two kernels of one name from different modules (graphs reuse names) get different files."""
    import hashlib

    owner = owner or ""
    if _stem_owners.setdefault(stem, owner) == owner:
        return stem
    tagged = f"{stem}__{hashlib.sha1(owner.encode()).hexdigest()[:8]}"
    _stem_owners.setdefault(tagged, owner)
    return tagged


def _snapshot_args(obj: Any, st: KernelState, args: tuple, sig_no: int) -> dict:
    """Describe the arguments BEFORE the launch (mutated buffers change) and save index tensors."""
    from ..measure import standalone

    names = _arg_names(obj, len(args))
    described = [describe_arg(n, a) for n, a in zip(names, args)]
    stem = unique_stem(standalone.standalone_stem(st.name, sig_no), getattr(obj, "filename", None))
    saved = standalone.save_index_tensors(settings().capture_dir, stem, described, args,
                                          settings().max_save_bytes, log_error)
    return {"names": names, "args": described, "saved": saved, "stem": stem}


def _record_launch_inductor(obj: Any, st: KernelState, args: tuple, kwargs: dict, snap: dict) -> None:
    from ..measure import standalone

    launchers = getattr(obj, "launchers", None) or []
    winner = launchers[0].config if launchers else None
    if winner is None and getattr(obj, "triton_interpret", False) and getattr(obj, "configs", None):
        winner = obj.configs[0]  # TRITON_INTERPRET=1 runs configs[0] without launchers
    num_bytes, source = num_bytes_estimate(snap["names"], args, getattr(obj, "inductor_meta", None))
    grid = _grid_for(obj, args, kwargs, winner) if winner is not None else None
    # the winner first, then every other config timed or declared, each with its grid
    # (the grid lets the runner fall back to a plain JIT launch of any config)
    configs = []
    seen = set()
    candidates = [winner] if winner is not None else []
    candidates += list(st.standalone.get("configs_objs", [])) + list(st.standalone.get("declared", []))
    for cfg in candidates:
        flat = _json_flat(cfg)
        key = json.dumps(flat, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        configs.append({"flat": flat, "grid": _grid_for(obj, args, kwargs, cfg)})
    path = None
    if settings().standalone:
        path = standalone.write_inductor_standalone(
            settings().capture_dir, snap["stem"], obj, st.name, snap["args"], configs,
            num_bytes, source, device_record())
    emit("launch", st.name, source_file=getattr(obj, "filename", None), args=snap["args"], grid=grid,
         num_bytes=num_bytes, bytes_source=source, winner=config_record(winner) if winner else None,
         device=device_record(), standalone_file=str(path) if path else None,
         saved_bytes=snap["saved"] or None)


def on_benchmark_all_configs(obj: Any, args: tuple, kwargs: dict, timings: Any) -> None:
    st, new = _state_for(obj)
    if new:
        kernel_event_inductor(obj, st)
    names = _arg_names(obj, len(args))
    num_bytes, source = num_bytes_estimate(names, args, getattr(obj, "inductor_meta", None))
    statistic, benchmarker = inductor_statistic()
    rows = []
    timed = []
    for launcher, ms in dict(timings).items():
        ms = float(ms) if isinstance(ms, (int, float)) else None
        cfg = getattr(launcher, "config", None)
        rows.append({"config": config_record(cfg), "ms": _finite(ms),
                     "n_regs": getattr(launcher, "n_regs", None), "n_spills": getattr(launcher, "n_spills", None),
                     "shared": getattr(launcher, "shared", None), "gb_per_s": gb_per_s(num_bytes, ms)})
        timed.append(cfg)
    finite = [(r["ms"], i) for i, r in enumerate(rows) if r["ms"] is not None]
    winner = rows[min(finite)[1]]["config"] if finite else None
    st.standalone["configs_objs"] = timed
    emit("autotune", st.name, source_file=getattr(obj, "filename", None), timings=rows, winner=winner,
         statistic=statistic, benchmarker=benchmarker, num_bytes=num_bytes, bytes_source=source)


def on_coordesc(obj: Any, args: tuple, result_launcher: Any) -> None:
    st, new = _state_for(obj)
    if new:
        kernel_event_inductor(obj, st)
    tuner = getattr(obj, "coordesc_tuner", None)
    cached = dict(getattr(tuner, "cached_benchmark_results", None) or {})
    names = _arg_names(obj, len(args))
    num_bytes, source = num_bytes_estimate(names, args, getattr(obj, "inductor_meta", None))
    statistic, benchmarker = inductor_statistic()
    rows = []
    for key, ms in cached.items():
        ms = float(ms) if isinstance(ms, (int, float)) else None
        rows.append({"config": config_from_hashable(key), "ms": _finite(ms), "gb_per_s": gb_per_s(num_bytes, ms)})
    winner_cfg = getattr(result_launcher, "config", None)
    st.standalone["configs_objs"] = list(st.standalone.get("configs_objs", [])) + (
        [winner_cfg] if winner_cfg is not None else [])
    emit("coordesc", st.name, source_file=getattr(obj, "filename", None), timings=rows,
         winner=config_record(winner_cfg) if winner_cfg is not None else None,
         statistic=statistic, benchmarker=benchmarker, num_bytes=num_bytes, bytes_source=source)


# ---------------------------------------------------------------------------
# Triton's own Autotuner (hand-written @triton.autotune outside torch.compile)


def _under_autotuner(autotuner: Any) -> tuple[Any, list[dict]]:
    """(the JIT function under an autotuner, the ``values`` of each ``@triton.heuristics`` between
    them, outermost first: the order Triton computes them in). A Heuristics has ``arg_names`` and
    ``run`` too; only the JIT function wraps a plain Python function."""
    layers, fn = [], getattr(autotuner, "fn", None)
    for _ in range(8):
        if fn is None or (hasattr(fn, "arg_names") and hasattr(fn, "run") and not hasattr(fn, "configs")
                          and isinstance(getattr(fn, "fn", None), types.FunctionType)):
            break
        if isinstance(getattr(fn, "values", None), dict):
            layers.append(fn.values)
        fn = getattr(fn, "fn", None)
    return fn, layers


def heuristic_values(layers: list[dict], meta: dict) -> dict:
    """What the heuristics give for one launch's ``meta`` (arguments, keywords and config), as
    Triton's ``Heuristics.run`` computes them: in order, each seeing the ones before it."""
    meta, out = dict(meta), {}
    for values in layers:
        for name, fn in values.items():
            out[name] = meta[name] = fn(meta)
    return out


def on_triton_autotune_run(obj: Any, args: tuple, kwargs: dict, orig: Any) -> Any:
    """The slow path of the ``Autotuner.run`` wrapper (signature = size of the autotuner's cache)."""
    cache = getattr(obj, "cache", None)
    size = len(cache) if isinstance(cache, dict) else 0
    before = None
    try:
        jit = _under_autotuner(obj)[0]
        name = str(getattr(getattr(obj, "base_fn", None), "__name__", None) or getattr(jit, "__name__", "kernel"))
        st = _states.get(id(obj))
        if st is None or st.obj is not obj:
            st = KernelState(obj, name)
            _states[id(obj)] = st
            src = getattr(getattr(jit, "fn", None), "__code__", None)
            emit("kernel", name, source_file=getattr(src, "co_filename", None), function=name,
                 kind="triton_autotune", configs=[config_record(c) for c in (getattr(obj, "configs", None) or [])],
                 keys=list(getattr(obj, "keys", None) or getattr(obj, "key", None) or []),
                 device=device_record(), versions=versions())
        before = {"size": size, "timings": getattr(obj, "configs_timings", None),
                  "bench_time": getattr(obj, "bench_time", None)}
        names = list(getattr(obj, "arg_names", None) or getattr(jit, "arg_names", None) or [])
        names = (names + [f"arg{i}" for i in range(len(names), len(args))])[: len(args)]
        described = [describe_arg(n, a) for n, a in zip(names, args)]
        from ..measure import standalone

        sig_no = len(st.signatures) + 1
        code = getattr(getattr(jit, "fn", None), "__code__", None)
        stem = unique_stem(standalone.standalone_stem(name, sig_no),
                           f"{getattr(code, 'co_filename', '')}:{getattr(code, 'co_firstlineno', '')}")
        saved = standalone.save_index_tensors(settings().capture_dir, stem, described, args,
                                              settings().max_save_bytes, log_error)
        from .launch_site import walk_launch_stack

        # the user's kernel[grid](...) call, as for a plain @triton.jit launch
        site = walk_launch_stack(sys._getframe(2))[0]   # 1 is the run wrapper (its self: the Autotuner)
        before.update(names=names, described=described, saved=saved, stem=stem, jit=jit, site=site)
    except Exception as exc:
        log_error("Autotuner.run(enter)", exc)
        _freeze(obj)
        before = None
    result = orig(obj, *args, **kwargs)
    if before is not None:
        try:
            _record_triton_autotune(obj, st, args, kwargs, before)
        except Exception as exc:
            log_error(f"Autotuner.run(exit) {st.name}", exc)
    return result


def _timing_ms(value: Any) -> float | None:
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    return _finite(float(value)) if isinstance(value, (int, float)) else None


def _record_triton_autotune(obj: Any, st: KernelState, args: tuple, kwargs: dict, before: dict) -> None:
    from ..measure import standalone

    cache = getattr(obj, "cache", None)
    size = len(cache) if isinstance(cache, dict) else 0
    st.signatures.add(size)
    st.frozen = len(st.signatures) >= settings().max_signatures
    best = getattr(obj, "best_config", None) or (obj.configs[0] if getattr(obj, "configs", None) else None)
    names = before["names"]
    num_bytes, source = num_bytes_estimate(names, args, None)
    timings = getattr(obj, "configs_timings", None)
    if timings is not None and timings is not before["timings"]:
        from_cache = getattr(obj, "bench_time", None) == before["bench_time"] and before["bench_time"] is not None
        rows = [{"config": config_record(c), "ms": _timing_ms(t),
                 "quantiles_ms": [_finite(float(x)) for x in t] if isinstance(t, (list, tuple)) else None,
                 "gb_per_s": gb_per_s(num_bytes, _timing_ms(t))} for c, t in timings.items()]
        emit("autotune", st.name, timings=rows, winner=config_record(best) if best else None,
             statistic="median",
             benchmarker="custom do_bench" if autotuner_user_do_bench(obj)
             else HOST_CLOCK if _installed.get("interpreter_clock") else "triton.testing.do_bench",
             num_bytes=num_bytes,
             bytes_source=source, from_cache=from_cache or None,
             duration_s=getattr(obj, "bench_time", None))
    elif size == before["size"] and len(getattr(obj, "configs", None) or []) > 1:
        emit("cache_hit", st.name, from_cache=True, winner=config_record(best) if best else None,
             message="Autotuner served this key from its in-memory cache")
    call_kwargs = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
    configs = []
    all_cfgs = [best] + [c for c in (getattr(obj, "configs", None) or []) if c is not best] if best else []
    layers = _under_autotuner(obj)[1]
    for cfg in all_cfgs:
        meta = dict(zip(names, args))
        meta.update(call_kwargs)
        meta.update(config_flat(cfg))
        heur = {}
        if layers:
            try:
                heur = heuristic_values(layers, meta)
            except Exception as exc:
                log_error(f"heuristics {st.name}", exc)
            meta.update(heur)
        grid = kwargs.get("grid")
        try:
            g = launch_grid(grid, meta)
        except Exception as exc:
            log_error(f"grid {st.name}", exc)
            g = None
        # the heuristics' blocks move too: the sweep moves every block of the standalone's config
        moves = grid_moves(grid, meta, dict(config_flat(cfg), **heur)) if cfg is best else None
        # the heuristics' constexprs go with the config: the standalone launches the bare JIT function
        configs.append(standalone_config(dict(_json_flat(cfg), **{k: _jsonable_scalar(v) for k, v in heur.items()}),
                                         g, moves))
    jit = before["jit"]
    extra = {k: describe_arg(k, v) for k, v in call_kwargs.items()}
    path = None
    if settings().standalone:
        path = standalone.write_user_standalone(
            settings().capture_dir, before["stem"], jit, st.name, before["described"], extra, configs,
            num_bytes, source, device_record(),
            extra_spec={"heuristics": [str(k) for layer in layers for k in layer]} if layers else None)
    emit("launch", st.name, args=before["described"], grid=configs[0]["grid"] if configs else None,
         num_bytes=num_bytes, bytes_source=source, winner=config_record(best) if best else None,
         device=device_record(), standalone_file=str(path) if path else None,
         saved_bytes=before["saved"] or None, kind="triton_autotune", launch_site=before.get("site"))


# ---------------------------------------------------------------------------
# installation


def _wrap_inductor(cls: Any) -> None:
    orig_run = cls.run
    orig_bench_all = getattr(cls, "benchmark_all_configs", None)
    orig_coordesc = getattr(cls, "coordinate_descent_tuning", None)

    states_get = _states.get

    def run(self, *args, **kwargs):
        # hot path: a kernel and signature already recorded cost one dict lookup and one getter
        st = states_get(id(self))
        if st is not None:
            if st.frozen:
                return orig_run(self, *args, **kwargs)
            key = st.key
            if key is not None:
                try:
                    seen = key(args) in st.signatures
                except Exception:  # e.g. a different arity: record nothing, break nothing
                    seen = True
                if seen:
                    return orig_run(self, *args, **kwargs)
        return on_inductor_run(self, args, kwargs, orig_run)

    def benchmark_all_configs(self, *args, **kwargs):
        timings = orig_bench_all(self, *args, **kwargs)
        try:
            on_benchmark_all_configs(self, args, kwargs, timings)
        except Exception as exc:
            log_error(f"benchmark_all_configs {inductor_kernel_name(self)}", exc)
        return timings

    def coordinate_descent_tuning(self, launcher, *args, **kwargs):
        result = orig_coordesc(self, launcher, *args, **kwargs)
        try:
            on_coordesc(self, args, result)
        except Exception as exc:
            log_error(f"coordinate_descent_tuning {inductor_kernel_name(self)}", exc)
        return result

    for name, fn, orig in (("run", run, orig_run), ("benchmark_all_configs", benchmark_all_configs, orig_bench_all),
                           ("coordinate_descent_tuning", coordinate_descent_tuning, orig_coordesc)):
        if orig is None:
            continue
        fn.__wrapped__ = orig
        fn.__name__ = name
        fn._tko_capture = True
        setattr(cls, name, fn)
        _patches.append((cls, name, orig, fn))


def _wrap_triton_autotuner(cls: Any) -> None:
    orig_run = cls.run

    states_get = _states.get

    def run(self, *args, **kwargs):
        st = states_get(id(self))
        if st is not None:
            if st.frozen:
                return orig_run(self, *args, **kwargs)
            cache = getattr(self, "cache", None)
            if (len(cache) if isinstance(cache, dict) else 0) in st.signatures:
                return orig_run(self, *args, **kwargs)
        return on_triton_autotune_run(self, args, kwargs, orig_run)

    run.__wrapped__ = orig_run
    run.__name__ = "run"
    run._tko_capture = True
    cls.run = run
    _patches.append((cls, "run", orig_run, run))


def set_active(active: bool) -> None:
    """Put the original methods back (False) or the capture wrappers again (True).

    For measuring the capture's own cost inside one process; kernels keep their state.
    """
    for cls, name, orig, wrapper in _patches:
        setattr(cls, name, wrapper if active else orig)


def _force_retune() -> None:
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    try:
        from torch._inductor import config as ind_config

        ind_config.force_disable_caches = True
    except Exception as exc:
        log_error("force_retune", exc)


HOST_CLOCK = "host clock in Triton's interpreter (no GPU driver)"


def _interpreter_clock(ta: Any) -> bool:
    """In Triton's interpreter without a GPU driver an ``@triton.autotune`` of several configs stops
    the program (Triton >= 3.4 asks the driver for a benchmarker: "0 active drivers"): it gets the
    host clock instead, and the capture's records say so. Nothing changes where a driver exists."""
    import functools

    if not interpreter_on():
        return False
    if not isinstance(ta.Autotuner.__dict__.get("do_bench"), functools.cached_property):
        return False   # Triton < 3.4: do_bench is set per instance
    try:
        from triton.runtime.driver import driver

        driver.active.get_benchmarker()
        return False
    except Exception:
        pass
    from ..measure.bench import cpu_wall_bench

    # one untimed call, then three on the host clock: an interpreter's times rank configs, no more
    host_clock = functools.partial(cpu_wall_bench, warmup=1, rep=0, min_calls=3)
    ta.Autotuner.do_bench = property(lambda self: getattr(self, "_do_bench", None) or host_clock)
    return True


def install(env: dict | None = None) -> dict:
    """Patch Inductor and Triton once per process; returns what was patched."""
    global _settings
    if _installed:
        return dict(_installed)
    _settings = Settings(env)
    _set_capture_off(check_capture_dir(_settings))
    if _settings.force_retune:
        _force_retune()
    try:
        from torch._inductor.runtime import triton_heuristics as th

        if not getattr(th.CachingAutotuner.run, "_tko_capture", False):
            _wrap_inductor(th.CachingAutotuner)
        _installed["inductor"] = True
    except Exception as exc:
        _installed["inductor"] = False
        log_error("install inductor", exc)
    try:
        from triton.runtime import autotuner as ta

        if not getattr(ta.Autotuner.run, "_tko_capture", False):
            _wrap_triton_autotuner(ta.Autotuner)
        _installed["triton_autotuner"] = True
        _installed["interpreter_clock"] = _interpreter_clock(ta)
    except Exception as exc:
        _installed["triton_autotuner"] = False
        log_error("install triton autotuner", exc)
    _installed["capture_dir"] = str(_settings.capture_dir)
    _installed["force_retune"] = _settings.force_retune
    return dict(_installed)
