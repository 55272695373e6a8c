#!/usr/bin/env python3
"""Run a program with per-kernel Triton config pins applied: each pinned Inductor kernel launches
exactly its pinned config (kernel name + source hash -> config, a ``config_pins/1`` file that
``try_remedies.py --pins-from-sweep`` writes). Inductor's output is not edited.

In the program, before the compiled model first runs::

    import sys; sys.path.insert(0, "<skill>/scripts"); import apply_config_pins   # reads $TKO_PINS

or from the shell, the program unchanged::

    python scripts/apply_config_pins.py --pins trials/pins.json repro.py -- ARGS

A pin whose kernel source changed (another torch, another model) is ignored with a one-line warning
on stderr; it is never applied to another kernel.

``--launch-overrides FILE`` (``$TKO_LAUNCH_OVERRIDES``, a ``launch_overrides/1`` file) does the same for
hand-written ``@triton.jit`` launches: kernel name + source hash -> new launch arguments
(``num_warps``, ``num_stages``, constexpr block sizes), applied at every launch of that kernel.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def _install(kind: str, loaded: dict | None = None) -> int:
    """Install ``kind`` (``pins`` or ``launch_overrides``, a module of tko.patch): the entries
    ``loaded`` from the command line, else those its environment variable names."""
    import importlib

    module = importlib.import_module(f"tko.patch.{kind}")
    try:
        return module.install(loaded) if loaded is not None else module.install_from_env()
    except Exception as exc:  # a broken file must not break the program
        print(f"apply_config_pins: {kind.replace('_', ' ')} not applied: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 0


def build_parser():
    from tko.base.errors import ArgumentParser

    parser = ArgumentParser(prog="apply_config_pins.py", description=__doc__.split("\n\n")[0],
                            example="python scripts/apply_config_pins.py --pins trials/pins.json repro.py -- --steps 20")
    parser.add_argument("--pins", help="config_pins/1 file (sets TKO_PINS)")
    parser.add_argument("--launch-overrides", metavar="FILE",
                        help="launch_overrides/1 file: new launch arguments of hand-written @triton.jit "
                             "kernels (sets TKO_LAUNCH_OVERRIDES)")
    parser.add_argument("program", help="the Python script to run")
    parser.add_argument("program_args", nargs="*", help="its arguments (put -- before them)")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    opts = parser.parse_args(argv)
    from tko.base import inputs
    from tko.base.errors import InputError

    if not opts.pins and not opts.launch_overrides:
        parser.error("give --pins, --launch-overrides or both")
    for flag, path, what in (("--pins", opts.pins, "a config_pins/1 JSON"),
                             ("--launch-overrides", opts.launch_overrides, "a launch_overrides/1 JSON")):
        if path is None:
            continue
        if not os.path.exists(path):
            parser.error(f"{flag} {path}: no such file")
        try:
            inputs.check_input(path, what)
        except InputError as exc:
            parser.error(f"{flag} {exc}")
    if not os.path.isfile(opts.program):
        parser.error(f"no such program: {opts.program}")
    from tko.patch import launch_overrides, pins

    try:  # a bad file named on the command line is a usage error, not a warning
        loaded = pins.load_pins(opts.pins) if opts.pins else None
        overrides = launch_overrides.load_overrides(opts.launch_overrides) if opts.launch_overrides else None
    except InputError as exc:
        parser.error(str(exc))
    if opts.pins:
        os.environ["TKO_PINS"] = os.path.abspath(opts.pins)
        print(f"apply_config_pins: {_install('pins', loaded)} pin(s) loaded from {opts.pins}", file=sys.stderr)
    if opts.launch_overrides:
        os.environ["TKO_LAUNCH_OVERRIDES"] = os.path.abspath(opts.launch_overrides)
        print(f"apply_config_pins: {_install('launch_overrides', overrides)} launch override(s) loaded from "
              f"{opts.launch_overrides}", file=sys.stderr)
    from tko.cli import run_program

    run_program(opts.program, opts.program_args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
elif __name__ != "__tko_front__":   # read for its parser only (tko.base.fronts)
    PINS_LOADED = _install("pins") if os.environ.get("TKO_PINS") else 0
    LAUNCH_OVERRIDES_LOADED = _install("launch_overrides") if os.environ.get("TKO_LAUNCH_OVERRIDES") else 0
