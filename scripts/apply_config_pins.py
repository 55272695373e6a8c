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
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def _install(loaded: dict | None = None) -> int:
    """Install the pins ``loaded`` from --pins, else those $TKO_PINS names."""
    from tko.patch import pins

    try:
        return pins.install(loaded) if loaded is not None else pins.install_from_env()
    except Exception as exc:  # a broken pins file must not break the program
        print(f"apply_config_pins: pins not applied: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0


def build_parser():
    from tko.base.errors import ArgumentParser

    parser = ArgumentParser(prog="apply_config_pins.py", description=__doc__.split("\n\n")[0],
                            example="python scripts/apply_config_pins.py --pins trials/pins.json repro.py -- --steps 20")
    parser.add_argument("--pins", required=True, help="config_pins/1 file (sets TKO_PINS)")
    parser.add_argument("program", help="the Python script to run")
    parser.add_argument("program_args", nargs="*", help="its arguments (put -- before them)")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    opts = parser.parse_args(argv)
    from tko.base import inputs
    from tko.base.errors import InputError

    if not os.path.exists(opts.pins):
        parser.error(f"--pins {opts.pins}: no such file")
    try:
        inputs.check_input(opts.pins, "a config_pins/1 JSON")
    except InputError as exc:
        parser.error(f"--pins {exc}")
    if not os.path.isfile(opts.program):
        parser.error(f"no such program: {opts.program}")
    from tko.patch import pins

    try:  # a bad pins file named on the command line is a usage error, not a warning
        loaded = pins.load_pins(opts.pins)
    except InputError as exc:
        parser.error(str(exc))
    os.environ["TKO_PINS"] = os.path.abspath(opts.pins)
    print(f"apply_config_pins: {_install(loaded)} pin(s) loaded from {opts.pins}", file=sys.stderr)
    from tko.cli import run_program

    run_program(opts.program, opts.program_args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
elif __name__ != "__tko_front__":   # read for its parser only (tko.base.fronts)
    PINS_LOADED = _install()
