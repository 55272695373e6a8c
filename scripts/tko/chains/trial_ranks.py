"""Trials of a program that runs as several processes: one launcher, every rank in every arm.

A launcher command (torchrun, ``python -m torch.distributed.run``, a shell script) runs as typed
in each process of an arm, with the same world size as the user gave; a script runs through
``fallback_bootstrap.py`` as before. Either way the arm reaches every other Python process of the
program (the ranks a script spawns, torchrun's workers) by the site route
(``tko.remedies.trial_site``). Each rank writes its own measurements and outputs; the step time is
the line the program prints (the last one, as before), else the slowest rank's; outputs are
compared rank by rank.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..base.errors import InputError
from ..patch import site_route

HOOK = "tko.remedies.trial_site:install"


def split(cmd: list[str], split_command) -> tuple[str, list[str], list[str] | None]:
    """(script, args, launcher): a launcher keeps its whole command; a script is split as before."""
    if cmd and site_route.is_multi_process_launcher(cmd):
        return cmd[0], list(cmd[1:]), list(cmd)
    if not cmd:
        raise InputError("no repro command after '--' (e.g. -- python repro.py --steps 20)")
    script, args = split_command(cmd)
    return script, args, None


def spec_of(spec, settings: dict) -> dict:
    """The arm as ``$TKO_TRIAL_SPEC``: its settings and launcher flags."""
    flags = list(spec.bootstrap)
    rows = flags[flags.index("--replace-rows") + 1] if "--replace-rows" in flags[:-1] else None
    return {"settings": settings, "eager": "--eager-compile" in flags, "static": "--static-shapes" in flags,
            "replace_rows": rows}


def site_env(spec, settings: dict) -> dict:
    return site_route.site_env([HOOK], TKO_TRIAL_SPEC=json.dumps(spec_of(spec, settings)))


def refuse_unsupported(arm, launcher: list[str] | None):
    """An arm that needs the script run through the trial launcher (``--disable``: the script's
    source is rewritten) cannot run under a multi-process launcher: skipped, with the reason."""
    if launcher and "--disable" in arm.spec.bootstrap and arm.status == "ok":
        arm.status = "skipped"
        arm.reason = ("--disable rewrites the script the trial launcher runs; under a multi-process launcher "
                      "put torch._dynamo.disable in the program, or run its script with python")
    return arm


def read_measurements(meas_path: Path) -> dict:
    """The measurements of a run: the launching process's file, merged with each rank's
    (``<stem>.rank<R>.json``): the slowest rank's step time, the latest first step."""
    meas = _load(meas_path)
    per_rank = [d for d in (_load(p) for p in sorted(meas_path.parent.glob(meas_path.stem + ".*.json"))) if d]
    if not per_rank:
        return meas
    steps = [d["step_ms"] for d in per_rank if isinstance(d.get("step_ms"), (int, float))]
    firsts = [d["first_step_s"] for d in per_rank if isinstance(d.get("first_step_s"), (int, float))]
    merged = dict(per_rank[0], **{k: v for k, v in meas.items() if v})
    if steps and meas.get("step_ms") is None:
        merged["step_ms"] = max(steps)
    if firsts and meas.get("first_step_s") is None:
        merged["first_step_s"] = max(firsts)
    merged["ranks"] = [{k: d.get(k) for k in ("rank", "world_size", "step_ms", "first_step_s")} for d in per_rank]
    return merged


def rank_outputs(out_path: Path, ab_path: Path) -> list[str]:
    """Each rank's saved outputs: ``<stem>.rank<R>.pt`` and ``<ab>.rank<R>`` (the repro's own)."""
    own = sorted(out_path.parent.glob(out_path.stem + ".rank*.pt"))
    ab = sorted(ab_path.parent.glob(ab_path.name + ".rank*"))
    return [str(p) for p in own + ab]


def _load(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
