"""A trial arm in every process of a multi-process program (a ``$TKO_SITE_HOOKS`` entry).

``try_remedies.py`` runs a launcher (torchrun, a shell script) or a script that spawns its ranks
as typed, with ``$TKO_TRIAL_SPEC`` (JSON: ``settings``, ``eager``, ``static``, ``replace_rows``)
naming the arm. :func:`install` applies it in each process as ``fallback_bootstrap.py`` does in
its own (``tko.remedies.trial_hooks``, config pins, the row kernels) and, when ``$TKO_TRIAL_OUT``
is set, writes the process's measurements and outputs at exit to files of its own:
``<out stem>.rank<R>.json`` / ``.pt`` (``pid<P>`` for a process without a rank), so ranks that
exit together never overwrite each other. A process that ran no compiled callable writes nothing.
"""

from __future__ import annotations

import atexit
import json
import os
import sys

from ..base import ranks
from . import trial_hooks

PREFIX = "TKO_TRIAL"


def spec_from_env(env=None) -> dict:
    env = os.environ if env is None else env
    try:
        spec = json.loads(env.get("TKO_TRIAL_SPEC") or "{}")
    except ValueError:
        spec = {}
    return spec if isinstance(spec, dict) else {}


def rank_path(path: str, suffix: str, ident: dict) -> str:
    """``/w/base_1.json`` -> ``/w/base_1.rank1.json`` (``.pid42.json`` without a rank)."""
    stem = path[:-len(suffix)] if path.endswith(suffix) else path
    who = f"rank{ident['rank']}" if ident.get("rank") is not None else f"pid{ident['pid']}"
    return f"{stem}.{who}{suffix}"


def install() -> None:
    env = os.environ
    spec = spec_from_env(env)
    ranks.watch()
    trial_hooks.apply_settings(spec.get("settings") or {})
    if env.get("TKO_PINS"):
        from ..patch import pins

        trial_hooks._state["pins"] = pins.install_from_env(env)
    eager, static = bool(spec.get("eager")), bool(spec.get("static"))
    if env.get("TKO_TRIAL_OUT"):
        trial_hooks.wrap_compile(full=env.get("TKO_TRIAL_TIMING", "full") == "full", eager=eager, static=static)
        atexit.register(_write, env["TKO_TRIAL_OUT"], env.get("TKO_TRIAL_OUTPUTS"))
    elif eager or static:
        trial_hooks.wrap_compile(full=False, eager=eager, static=static)
    if spec.get("replace_rows"):
        from . import row_replace

        done = row_replace.install(row_replace.parse_ops(spec["replace_rows"]))
        print(f"TKO_FALLBACK: row kernels swapped in for {', '.join(done) or 'nothing'}", file=sys.stderr)


def _write(out_path: str, outputs_path: str | None) -> None:
    records = [r for r in trial_hooks._records if r.calls]
    if not records:
        return
    ident = ranks.identity()
    try:
        if outputs_path:
            import torch

            torch.save({r.name: trial_hooks._to_cpu(r.last) for r in records}, rank_path(outputs_path, ".pt", ident))
        with open(rank_path(out_path, ".json", ident), "w", encoding="utf-8") as fh:
            json.dump(dict(trial_hooks.measurements(), **ranks.record_tags()), fh)
    except Exception as exc:  # report, never mask the program's own exit
        print(f"{PREFIX}: could not write measurements: {type(exc).__name__}: {exc}", file=sys.stderr)
