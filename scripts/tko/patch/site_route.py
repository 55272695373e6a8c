"""Reach every Python process of a program: the ``sitecustomize`` route and the launcher forms.

A program may run as several processes: ``torchrun ...``, ``python -m torch.distributed.run ...``,
``python train.py`` that spawns its workers, ``bash run.sh``. The skill then runs the command
exactly as typed, with :data:`SITE_DIR` prepended to ``PYTHONPATH``: its ``sitecustomize.py``
installs the hooks named in ``$TKO_SITE_HOOKS`` in each Python process the program starts
(:func:`site_env`), so the user's script stays the real ``__main__`` (``pickle`` and
``multiprocessing`` find its functions) and each process writes its own files, tagged with its
rank (``tko.base.ranks``). Interpreter flags that drop ``PYTHONPATH`` or ``site`` (``-I``, ``-E``,
``-S``) turn the route off; :func:`launcher_kind` refuses them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..base.errors import InputError

SITE_DIR = Path(__file__).resolve().parent / "sitedir"
SCRIPTS_DIR = Path(__file__).resolve().parents[2]
PYTHON = re.compile(r"^python(\d+(\.\d+)*)?(\.exe)?$")
TORCHRUN = re.compile(r"^torchrun(\.exe)?$")
SHELLS = {"bash", "sh", "dash", "zsh", "env", "srun", "mpirun", "mpiexec", "accelerate", "deepspeed"}
DIST_MODULES = ("torch.distributed.run", "torch.distributed.launch")
NO_SITE_FLAGS = ("-I", "-E", "-S")
# The skill's own launchers: they install the hooks in their process themselves.
OWN_LAUNCHERS = ("profile_bootstrap.py", "fallback_bootstrap.py", "autotune_capture_patch.py",
                 "apply_config_pins.py")


def site_env(hooks: list[str], base: dict | None = None, **extra: str) -> dict:
    """The variables that install ``hooks`` in every Python process of the program (to merge into
    its environment): ``PYTHONPATH`` with the site folder first, the hooks, where ``tko`` lives."""
    base = os.environ if base is None else base
    old = base.get("PYTHONPATH", "")
    parts = [str(SITE_DIR)] + [p for p in old.split(os.pathsep) if p and p != str(SITE_DIR)]
    return {"PYTHONPATH": os.pathsep.join(parts), "TKO_SITE_HOOKS": ",".join(hooks),
            "TKO_SITE_SCRIPTS": str(SCRIPTS_DIR), "TKO_SITE_SKIP_ARGV0": ",".join(OWN_LAUNCHERS),
            **extra}


def launcher_kind(cmd: list[str]) -> str:
    """``script`` (``python x.py``, or ``x.py``), ``module`` (``python -m pkg``, not a launcher),
    ``torchrun`` (torchrun or ``python -m torch.distributed.run``) or ``command`` (a shell script or
    another launcher that starts Python). Raises InputError on what cannot work."""
    if not cmd or not cmd[0]:
        raise InputError("no program command after '--'")
    first = os.path.basename(cmd[0])
    if TORCHRUN.match(first):
        return "torchrun"
    if PYTHON.match(first):
        rest = cmd[1:]
        bad = [f for f in rest[:1] if f in NO_SITE_FLAGS]
        if bad:
            raise InputError(f"python {bad[0]}: that flag turns off PYTHONPATH or site, which the skill "
                             "needs to reach the program's processes; drop it")
        if not rest:
            raise InputError("no script given after the python interpreter")
        if rest[0] == "-m" and len(rest) > 1:
            return "torchrun" if rest[1] in DIST_MODULES else "module"
        return "script" if rest[0].endswith(".py") else "command"
    if first.endswith(".py"):
        return "script"
    return "command"


def is_multi_process_launcher(cmd: list[str]) -> bool:
    """A command the skill must run as typed, under the site route (not through its own launcher)."""
    return launcher_kind(cmd) in ("torchrun", "command", "module")
