"""One error convention for every script: exit 0 ok, 2 bad input/usage, 1 failure.

Scripts raise :class:`InputError` (bad file, wrong schema, bad flag value) or
:class:`ToolFailure` (the thing we ran failed); :func:`run_main` turns either
into a single ``<tool>: error: ...`` line on stderr and the exit code, so a user
never sees a traceback for a problem in their input.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import os
import sys
from typing import Callable, Sequence

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
# OSErrors of a write the file system refused: full, over quota or a file-size limit, read-only,
# a symlink loop, a name too long.
OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.ELOOP, errno.ENAMETOOLONG}


class InputError(Exception):
    """Bad input or usage: a missing file, a malformed artifact, a bad flag value."""

    exit_code = EXIT_USAGE


class OutputError(InputError):
    """An output that cannot be written: a read-only file system, a full disk, a path through a
    symlink loop or a file. The user's path or machine, not the tool: exit 2, one line."""


class ToolFailure(Exception):
    """The work itself failed (a kernel crashed, a compile failed, a timeout)."""

    exit_code = EXIT_FAILURE


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the project's conventions.

    Usage errors are one line and exit 2, with a "did you mean" for a mistyped flag; abbreviated
    flags are refused (``--from`` is not ``--from-capture``: a later flag with the same prefix
    would silently change its meaning); ``example=`` puts a runnable command at the end of --help.
    The description and epilog are printed as written (argparse would rewrap them to the
    terminal's width and break an example command mid-line, so copy and paste fails).
    """

    def __init__(self, *args, example: str | list[str] | None = None, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        if example:
            lines = [example] if isinstance(example, str) else list(example)
            block = "example:\n" + "\n".join(f"  {line}" for line in lines)
            kwargs["epilog"] = block + (f"\n\n{kwargs['epilog']}" if kwargs.get("epilog") else "")
        super().__init__(*args, **kwargs)

    def known_flags(self) -> list[str]:
        return [s for action in self._actions for s in action.option_strings if s.startswith("--")]

    def suggestion(self, message: str) -> str:
        """' (did you mean --from-capture?)' for the first unknown flag of an argparse message."""
        if "unrecognized arguments" not in message and "ambiguous option" not in message:
            return ""
        flags = self.known_flags()
        for token in message.split():
            word = token.split("=", 1)[0].strip(",'")
            if not word.startswith("--") or word in flags:
                continue
            close = [f for f in flags if f.startswith(word)] or difflib.get_close_matches(word, flags, n=1)
            if close:
                return f" (did you mean {close[0]}?)"
        return ""

    def parse_args(self, args=None, namespace=None):
        # An unknown flag is named before any "required" complaint, with the flag it resembles.
        argv = sys.argv[1:] if args is None else [str(a) for a in args]
        known = set(self.known_flags())
        for token in argv:
            if token == "--":
                break
            word = token.split("=", 1)[0]
            if word.startswith("--") and word not in known:
                self.error(f"unrecognized arguments: {word}")
        return super().parse_args(args, namespace)

    def error(self, message: str) -> None:  # noqa: D401 - argparse API
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message + self.suggestion(message))}\n")


def one_line(text: object) -> str:
    """``text`` on one line: a line break inside a value read from a user's file (a device name,
    a path) would otherwise split an error into lines a caller cannot tell from other output."""
    return " ".join(str(text).splitlines())


def _say(prog: str, message: object) -> None:
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr)


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
        _say(prog, exc)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except (PermissionError, IsADirectoryError, NotADirectoryError) as exc:
        # raised opening a path the user named: bad input, not a failure of the tool
        where = f"{exc.filename}: " if exc.filename else ""
        _say(prog, f"{where}{exc.strerror or exc}")
        return EXIT_USAGE
    except OSError as exc:
        if exc.errno not in OUTPUT_ERRNOS and not isinstance(exc, FileExistsError):
            return _unexpected(prog, exc)
        # writing where the file system refuses (full, read-only, a symlink loop): the user's
        # path or machine; the atomic writers say this themselves, this catches other writes
        where = f"{exc.filename}: " if exc.filename else ""
        _say(prog, f"cannot write output {where}{exc.strerror or exc}")
        return EXIT_USAGE
    except UnicodeDecodeError as exc:
        print(f"{prog}: error: an input file is not UTF-8 text ({exc.reason} at byte "
              f"{exc.start})", file=sys.stderr)
        return EXIT_USAGE
    except RecursionError:
        print(f"{prog}: error: an input is nested too deeply (or an expression is too long) "
              "to read", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # last line of defence: no traceback for users
        return _unexpected(prog, exc)


def _unexpected(prog: str, exc: Exception) -> int:
    if os.environ.get("TKO_DEBUG") == "1":
        raise exc
    _say(prog, f"unexpected {type(exc).__name__}: {exc} (set TKO_DEBUG=1 for a traceback)")
    return EXIT_FAILURE


def exit_now(rc: int) -> None:
    """Exit with ``rc`` once stdout and stderr are flushed, skipping the interpreter's teardown.

    For a script whose results are written and whose large data (a parsed 100 MB log and its
    summary: about 0.2-0.6 s of freeing, object by object, on a 2-core machine) would otherwise be
    freed before the process ends; the exit hands all of it back at once. Nothing may be left
    unwritten: files are closed (atomic writes rename before this) and no atexit work is needed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can reach it
            pass
    os._exit(rc)
