"""The profiler of one process of a multi-process program, started by the site route.

``start`` (a ``$TKO_SITE_HOOKS`` entry) starts ``torch.profiler`` in the process and exports its
Chrome trace when the process ends, into ``$TKO_PROFILE_DIR`` as ``trace.<tag>.json`` (tag
``rank<R>-pid<P>``, or ``pid<P>`` for a process that never joined a process group) with a
``trace.<tag>.meta.json`` beside it: rank, local rank, world size, pid, command line. Each
process writes its own two files, each through a rename, so ranks that exit at once lose
nothing. The export runs from ``atexit`` (torchrun workers, ``spawn`` children, which leave
through ``sys.exit``) and from ``multiprocessing``'s exit finalizers (``fork`` children, which
leave through ``os._exit`` and skip ``atexit``), once per process. ``$TKO_PROFILE_OPTS`` holds
``with_stack``, ``record_shapes``, ``cpu_only`` (comma-separated).
"""

from __future__ import annotations

import atexit
import json
import os
import sys

from ..base import ranks

PREFIX = "trace."
SETTLE_S = 0.1   # seconds before destroy_process_group (see _settle_before_destroy)
_state: dict = {}


def _say(msg: str) -> None:
    try:
        sys.stderr.write(f"tko-profile: {msg}\n")
    except Exception:
        pass


def start() -> None:
    out_dir = os.environ.get("TKO_PROFILE_DIR")
    if not out_dir or _state.get("pid") == os.getpid():
        return
    opts = set(os.environ.get("TKO_PROFILE_OPTS", "").split(","))
    import torch
    from torch.profiler import ProfilerActivity, profile

    ranks.watch()
    _settle_before_destroy()
    gpu = "cpu_only" not in opts and torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])  # CUDA: also HIP
    prof = profile(activities=activities, with_stack="with_stack" in opts,
                   record_shapes="record_shapes" in opts)
    prof.__enter__()
    _state.update(pid=os.getpid(), prof=prof, gpu=gpu, dir=out_dir, done=False)
    atexit.register(export)
    try:
        from multiprocessing import util

        util.Finalize(None, export, exitpriority=100)  # fork children: os._exit skips atexit
    except Exception:
        pass


def _settle_before_destroy() -> None:
    """A short sleep before ``destroy_process_group``: under the profiler a gloo worker can still be
    releasing the last collective's thread-local state (a Python object: it needs the GIL) when the
    program tears the group down, and the Reducer's destructor then joins it while holding the GIL,
    a deadlock at exit (README, "Programs that run as several processes"). Sleeping lets it finish."""
    try:
        import functools
        import time

        import torch.distributed as dist
    except Exception:
        return
    orig = getattr(dist, "destroy_process_group", None)
    if orig is None or getattr(orig, "_tko_settle", False):
        return

    @functools.wraps(orig)
    def destroy_process_group(*args, **kwargs):
        time.sleep(SETTLE_S)
        return orig(*args, **kwargs)

    destroy_process_group._tko_settle = True  # type: ignore[attr-defined]
    dist.destroy_process_group = destroy_process_group


def export() -> None:
    """Stop the profiler and write this process's trace and meta files (once; only in the process
    that started it: a forked child inherits the registration, not the profiler)."""
    if _state.get("pid") != os.getpid() or _state.get("done"):
        return
    _state["done"] = True
    prof = _state["prof"]
    try:
        if _state["gpu"]:
            import torch

            torch.cuda.synchronize()
    except Exception:
        pass
    try:
        ident = ranks.identity()
        prof.__exit__(None, None, None)
        stem = os.path.join(_state["dir"], PREFIX + ranks.tag(ident))
        os.makedirs(_state["dir"], exist_ok=True)
        prof.export_chrome_trace(stem + ".json.part")
        os.replace(stem + ".json.part", stem + ".json")
        meta = dict(ident, argv=list(getattr(sys, "orig_argv", sys.argv)), gpu=_state["gpu"],
                    trace=os.path.basename(stem + ".json"))
        with open(stem + ".meta.json.part", "w", encoding="utf-8") as fh:
            json.dump(meta, fh)
        os.replace(stem + ".meta.json.part", stem + ".meta.json")
    except Exception as exc:  # the program's own exit must not change
        _say(f"trace not written: {type(exc).__name__}: {exc}")
