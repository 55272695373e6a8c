"""Opening an input file: the one place every script reads a file it was handed.

A FIFO, socket or device named as an input would block a plain ``open()`` (a FIFO with no
writer) or stream forever (``/dev/zero``), so the file is opened non-blocking and refused unless
``fstat`` says it is a regular file; the check and the read are on the same descriptor, so a
file swapped in between cannot slip past. Problems are :class:`InputError` lines naming the
path (exit 2). JSON Lines and logs are read line by line with each line capped at
:data:`MAX_LINE_BYTES`: a runaway line is skipped unread, never held whole.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO, Iterator

from .errors import InputError

# The longest line a log or JSON Lines reader holds. An autotune_event/1 record is a few KB (a
# launch with many arguments tens of KB); Inductor's debug lines are shorter. A line past this
# is a fault (a torn write that glued records, binary junk), skipped unread and counted.
MAX_LINE_BYTES = 64 * 2**20


class OverlongLine(str):
    """What :func:`capped_lines` yields in place of a line past the cap (an empty string, so a
    reader that does not look for it sees a blank line): ``length`` is the bytes skipped."""

    length: int = 0


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a file"


def open_input(path: str | os.PathLike, what: str = "a file") -> BinaryIO:
    """``path`` opened for reading in binary, or InputError: missing, a directory, not a regular
    file (``what`` names what was expected: "a JSON file", "an autotune log")."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected {what}") from None
    except OSError as exc:  # permission, a symlink loop, a path through a file
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(f"{path}: is a directory, expected {what}")
        if not stat.S_ISREG(mode):
            raise InputError(f"{path}: not a regular file ({_kind(mode)}), expected {what}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_input(path: str | os.PathLike, what: str = "a file") -> None:
    """InputError unless ``path`` opens as a regular file: for an input handed on to a child
    process or read later (a FIFO there would block the child, not this process)."""
    open_input(path, what).close()


def read_bytes(path: str | os.PathLike, what: str = "a file") -> bytes:
    with open_input(path, what) as fh:
        try:
            return fh.read()
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_text(path: str | os.PathLike, what: str = "a file", errors: str = "strict") -> str:
    """The file as UTF-8 text; with ``errors="strict"`` a file that is not UTF-8 raises
    UnicodeDecodeError (each caller words that for its input)."""
    return read_bytes(path, what).decode("utf-8", errors)


def is_regular_file(path: str | os.PathLike) -> bool:
    """True for a regular file (after symlinks), without opening it: for readers that walk a
    folder and skip what they cannot read."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def capped_lines(fh: BinaryIO, max_line: int | None = None, block: int = 1 << 16) -> Iterator[str]:
    """The lines of a binary file as ``text.split("\\n")`` gives them (a final "" after a trailing
    newline included), read and decoded ``block`` bytes at a time (a "\\n" byte is never part of a
    UTF-8 sequence, so decoding lines together equals decoding each). A line longer than
    ``max_line`` bytes (default :data:`MAX_LINE_BYTES`) is read past, never held: an
    :class:`OverlongLine` stands in its place, so line numbers stay true."""
    cap = MAX_LINE_BYTES if max_line is None else max_line
    block = max(1, min(block, cap))  # a line inside one block is then never over the cap
    pending: list[bytes] = []  # the start of a line that runs past the blocks read so far
    held = 0                   # bytes in pending
    skipped = -1               # bytes of the over-long line being read past; -1: none
    while data := fh.read(block):
        cut = data.rfind(b"\n") + 1
        if not cut:
            if skipped >= 0:
                skipped += len(data)
            elif held + len(data) > cap:
                skipped, pending, held = held + len(data), [], 0
            else:
                pending.append(data)
                held += len(data)
            continue
        start = 0
        if skipped >= 0 or pending:  # that line ends at this block's first newline
            start = data.find(b"\n") + 1
            if skipped >= 0 or held + start - 1 > cap:
                yield _overlong(max(skipped, held) + start - 1)
            else:
                pending.append(data[:start - 1])
                yield b"".join(pending).decode("utf-8", errors="replace")
            skipped = -1
        if start < cut:
            yield from str(memoryview(data)[start:cut - 1], "utf-8", "replace").split("\n")
        pending, held = ([data[cut:]], len(data) - cut) if cut < len(data) else ([], 0)
    if skipped >= 0:
        yield _overlong(skipped)
    else:
        yield b"".join(pending).decode("utf-8", errors="replace")


def _overlong(length: int) -> OverlongLine:
    line = OverlongLine("")
    line.length = length
    return line

