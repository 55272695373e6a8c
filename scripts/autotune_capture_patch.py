"""Capture every Triton kernel a program runs: ``import autotune_capture_patch`` before torch.compile.

Usage (in the program, before the compiled model first runs)::

    import sys; sys.path.insert(0, "<skill>/scripts")   # not needed after `pip install .`
    import autotune_capture_patch

Importing it writes nothing: the capture folder appears with the first kernel recorded.

or from the shell without editing the program::

    python <skill>/scripts/autotune_capture_patch.py [--dir DIR] [--force-retune] -- program.py ARGS...

Environment:
  TRITON_CAPTURE_DIR            where to write (default ./autotune_kernels): autotune.log
                                (JSON Lines, autotune_event/1), <kernel>.py standalone copies,
                                <kernel>.inputs/ saved index tensors, capture_errors.log
  TRITON_CAPTURE_FORCE_RETUNE=1 disable Inductor's caches for this run, so every kernel is
                                autotuned (and timed) again instead of served from cache
  TRITON_CAPTURE_MAX_SAVE_MB    bytes of integer (index) tensors saved per kernel (default 64)
  TRITON_CAPTURE_MAX_SIGNATURES argument signatures recorded per kernel (default 8)
  TRITON_CAPTURE_STANDALONE=0   record the log only, write no standalone files
  TRITON_CAPTURE_JIT_WATCH      launches in a row with an already recorded signature after which a
                                hand-written @triton.jit kernel's launches bypass the capture (default
                                64); a compile of a new specialization brings it back

A failure inside the capture goes to capture_errors.log and never reaches the program.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def _install() -> dict:
    try:
        from tko.patch import capture, jit_capture

        installed = capture.install()
        # plain @triton.jit launches (after the Autotuner's wrapper: it owns its inner kernels)
        return {**installed, **jit_capture.install()}
    except Exception as exc:  # never break the importing program
        try:
            print(f"autotune_capture_patch: capture disabled: {type(exc).__name__}: {exc}", file=sys.stderr)
        except Exception:
            pass
        return {}


def build_parser():
    from tko.base.errors import ArgumentParser

    parser = ArgumentParser(
        prog="autotune_capture_patch.py", example='python scripts/autotune_capture_patch.py --dir autotune_kernels --force-retune repro.py -- --steps 20',
        description="Run a Python program with Triton/Inductor kernel capture installed. "
                    "Or `import autotune_capture_patch` inside the program.")
    parser.add_argument("--dir", help="capture directory (sets TRITON_CAPTURE_DIR)")
    parser.add_argument("--force-retune", action="store_true",
                        help="disable Inductor caches so every kernel is autotuned again")
    parser.add_argument("program", help="the Python script to run")
    parser.add_argument("program_args", nargs="*", help="its arguments (put -- before them)")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    opts = parser.parse_args(argv)
    if opts.dir:
        os.environ["TRITON_CAPTURE_DIR"] = opts.dir
    if opts.force_retune:
        os.environ["TRITON_CAPTURE_FORCE_RETUNE"] = "1"
    if not os.path.isfile(opts.program):
        print(f"autotune_capture_patch.py: error: no such program: {opts.program}", file=sys.stderr)
        return 2
    installed = _install()
    if installed:
        print(f"autotune_capture_patch: capturing into {installed.get('capture_dir')}", file=sys.stderr)
    from tko.cli import run_program

    run_program(opts.program, opts.program_args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
elif __name__ != "__tko_front__":   # read for its parser only (tko.base.fronts)
    INSTALLED = _install()
