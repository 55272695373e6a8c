"""Which process of a multi-process program this is: rank, local rank, world size and pid.

Read from the launcher's environment (``RANK`` / ``LOCAL_RANK`` / ``WORLD_SIZE``, set by torchrun
and ``torch.distributed.run``), else from ``torch.distributed`` once the program initialized it
(``torch.multiprocessing.spawn`` sets no variable). :func:`watch` wraps
``torch.distributed.init_process_group`` so the rank stays known after the program destroys its
process group (exit hooks run after that). Nothing here imports torch: a process that never
imported it has no ``torch.distributed`` rank.
"""

from __future__ import annotations

import os
import sys

_known: dict = {}  # rank / world_size seen from torch.distributed in this process
_callbacks: list = []  # called with identity() once torch.distributed is initialized
# Python processes a program starts that are machinery, not ranks: no capture, no profiler.
HELPER_MARKERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver",
                  "torch/_inductor/compile_worker", "torch._inductor.compile_worker",
                  "_inductor/autotune_process", "cdll.LoadLibrary(")


def _env_int(env, name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def _from_torch() -> dict:
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            _known.update(rank=dist.get_rank(), world_size=dist.get_world_size(), pid=os.getpid())
    except Exception:
        pass
    return _known if _known.get("pid") == os.getpid() else {}


def identity(env=None) -> dict:
    """``{"rank", "local_rank", "world_size", "pid"}``; a value not known is None."""
    env = os.environ if env is None else env
    rank, world = _env_int(env, "RANK"), _env_int(env, "WORLD_SIZE")
    local = _env_int(env, "LOCAL_RANK")
    if rank is None or world is None:
        seen = _from_torch()
        rank = seen.get("rank", rank)
        world = seen.get("world_size", world)
    return {"rank": rank, "local_rank": local, "world_size": world, "pid": os.getpid()}


def record_tags(env=None) -> dict:
    """The rank fields a record of this process carries: none for a process without a rank."""
    ident = identity(env)
    if ident["rank"] is None and ident["world_size"] is None:
        return {}
    return {k: ident[k] for k in ("rank", "local_rank", "world_size") if ident[k] is not None}


def on_rank(callback) -> None:
    """Call ``callback(identity())`` when this process's rank becomes known (at once if it is)."""
    ident = identity()
    if ident["rank"] is not None:
        callback(ident)
    else:
        _callbacks.append(callback)


def _fire() -> None:
    ident = identity()
    while _callbacks and ident["rank"] is not None:
        try:
            _callbacks.pop(0)(ident)
        except Exception:
            pass


def tag(ident: dict | None = None) -> str:
    """A file-name tag unique per process: ``rank1-pid4242``, or ``pid4242`` without a rank."""
    ident = ident or identity()
    pid = f"pid{ident['pid']}"
    return pid if ident.get("rank") is None else f"rank{ident['rank']}-{pid}"


def is_helper(argv: list[str] | None = None) -> bool:
    """A process the machinery of multiprocessing or Inductor started (resource tracker, compile
    workers), from its command line."""
    line = " ".join(argv if argv is not None else getattr(sys, "orig_argv", sys.argv))
    return any(m in line for m in HELPER_MARKERS)


def watch() -> None:
    """Remember the rank when the program initializes torch.distributed (no-op without torch)."""
    try:
        import torch.distributed as dist
    except Exception:
        return
    orig = getattr(dist, "init_process_group", None)
    if orig is None or getattr(orig, "_tko_ranks", False):
        return

    def init_process_group(*args, **kwargs):
        out = orig(*args, **kwargs)
        _from_torch()
        _fire()
        return out

    init_process_group._tko_ranks = True  # type: ignore[attr-defined]
    init_process_group.__wrapped__ = orig  # type: ignore[attr-defined]
    init_process_group.__doc__ = orig.__doc__
    dist.init_process_group = init_process_group
