"""The front scripts a chain runs as child processes, checked against the fronts' own parsers.

A chain runs a step as ``python scripts/<front>.py ...`` where the step can crash or hang (a
kernel on the GPU, a compile) or needs a fresh interpreter. The argv it builds is a second copy
of the front's flags; :func:`argv_error` parses it with the front's own ``build_parser()``, so a
renamed or removed flag fails where the chain is tested instead of in a user's run. The chains
check every step they start when ``$TKO_CHECK_STEP_ARGV`` is set (the test suite sets it): the
check imports each front once, which a user's run need not pay.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from .resources import scripts_dir

CHECK_ENV = "TKO_CHECK_STEP_ARGV"


def front_argv(name: str, *args: Any) -> list[str]:
    """``[python, scripts/<name>, *args]``: how a chain starts the front ``name`` (``x.py``)."""
    return [sys.executable, str(scripts_dir() / name), *(str(a) for a in args)]


@lru_cache(maxsize=None)
def front_parser(path: str):
    """The parser of the front script at ``path`` (its ``build_parser()``); None for a file
    that is not a front of this package."""
    file = Path(path)
    if file.parent != scripts_dir() or not file.is_file():
        return None
    # this name tells a front that installs itself on import (the capture patch) not to
    spec = importlib.util.spec_from_file_location("__tko_front__", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    build = getattr(module, "build_parser", None)
    return build() if callable(build) else None


def argv_error(cmd: list) -> str | None:
    """Why the front named by ``cmd`` (``[python, scripts/<front>.py, ...]``) would refuse its
    arguments, in the front's own words; None when it takes them or ``cmd`` runs no front."""
    if len(cmd) < 2 or not str(cmd[1]).endswith(".py"):
        return None
    parser = front_parser(str(cmd[1]))
    if parser is None:
        return None
    args = [str(a) for a in cmd[2:]]
    why = _refusal(parser, args)
    if why and "--" in args:   # a front that takes a command after "--" splits it off itself
        why = _refusal(parser, args[:args.index("--")])
    return why


def _refusal(parser, args: list[str]) -> str | None:
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(args)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return said.getvalue().strip().splitlines()[-1] if said.getvalue().strip() else f"exit {exc.code}"
    return None


def check(cmd: list) -> None:
    """Raise when ``$TKO_CHECK_STEP_ARGV`` is set and the front refuses ``cmd``'s arguments."""
    if not os.environ.get(CHECK_ENV):
        return
    why = argv_error(cmd)
    if why:
        raise AssertionError(f"a chain built an argv its front refuses: {why} (argv: {cmd[1:]})")
