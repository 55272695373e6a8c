"""One error convention for every script: exit 0 ok, 2 bad input/usage, 1 failure.

Scripts raise :class:`InputError` (bad file, wrong schema, bad flag value) or
:class:`ToolFailure` (the thing we ran failed); :func:`run_main` turns either
into a single ``<tool>: error: ...`` line on stderr and the exit code, so a user
never sees a traceback for a problem in their input.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class InputError(Exception):
    """Bad input or usage: a missing file, a malformed artifact, a bad flag value."""

    exit_code = EXIT_USAGE


class ToolFailure(Exception):
    """The work itself failed (a kernel crashed, a compile failed, a timeout)."""

    exit_code = EXIT_FAILURE


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exits 2."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse API
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def tool_name(argv0: str | None = None) -> str:
    return os.path.basename(argv0 or sys.argv[0]) or "tko"


def run_main(main: Callable[[Sequence[str] | None], int | None],
             argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Call ``main(argv)`` and map exceptions to one-line errors and exit codes.

    Unexpected exceptions are also reduced to one line (with the exception
    type) unless ``TKO_DEBUG=1`` asks for the traceback.
    """
    prog = prog or tool_name()
    try:
        rc = main(argv)
        return EXIT_OK if rc is None else int(rc)
    except (InputError, ToolFailure) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # last line of defence: no traceback for users
        if os.environ.get("TKO_DEBUG") == "1":
            raise
        print(f"{prog}: error: unexpected {type(exc).__name__}: {exc} "
              f"(set TKO_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_FAILURE
