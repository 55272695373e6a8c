"""Atomic file writes: write a temp file in the same directory, fsync, rename.

A reader never sees a half-written file and a crash never destroys the previous
version of an output.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import Iterable

# mkstemp(prefix=".NAME.", suffix=".tmp") names: ".NAME." + 8 random characters + ".tmp".
_TEMP_NAME = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")
STALE_TEMP_S = 60.0


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def clean_stale_temps(folder: str | os.PathLike, max_age_s: float = STALE_TEMP_S) -> list[Path]:
    """Remove temp files a killed writer left in ``folder`` (only names of the
    ``.NAME.XXXXXXXX.tmp`` pattern, only regular files older than ``max_age_s``)."""
    removed = []
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not _TEMP_NAME.match(entry.name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if entry.is_file(follow_symlinks=False) and now - st.st_mtime > max_age_s:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def output_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be written (None when it can): a directory, a parent that is a
    file, or a folder that is not writable (checked at the nearest existing ancestor)."""
    target = Path(os.path.abspath(path))
    if target.is_dir():
        return f"{path}: is a directory, expected a file path"
    if target.exists() and not os.access(target, os.W_OK):
        return f"{path}: not writable"
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{path}: {ancestor} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{path}: folder {ancestor} is not writable"
    return None


def check_outputs(*paths: str | os.PathLike | None) -> None:
    """Raise ``InputError`` before anything is written when any output path cannot be
    written, so a failed run never replaces one output and leaves the others stale."""
    from .errors import InputError

    for path in paths:
        if path is None or str(path) == "":
            continue
        problem = output_problem(path)
        if problem:
            raise InputError(f"cannot write output {problem}")


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return write_chunks(path, [data])


def write_chunks(path: str | os.PathLike, chunks: Iterable[bytes]) -> Path:
    """Write ``chunks`` (bytes, in order) to ``path`` atomically: a temp file beside it, fsync,
    rename; the temp file is removed when anything fails (a large output is never held whole)."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; give the file the mode a plain open() would have.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


def write_text(path: str | os.PathLike, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append one line with a single O_APPEND write.

    POSIX makes each O_APPEND write land at the end of the file; a single
    write of a line under the pipe/page size is not interleaved with other
    writers on local file systems, so several processes can share one JSON
    Lines file without torn records.
    """
    if not line.endswith("\n"):
        line += "\n"
    data = line.encode("utf-8")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
    finally:
        os.close(fd)
