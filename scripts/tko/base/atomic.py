"""Atomic file writes: write a temp file in the same directory, fsync, rename.

A reader never sees a half-written file and a crash never destroys the previous
version of an output.
"""

from __future__ import annotations

import errno
import os
import re
import stat
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


def _stat(path: Path) -> tuple[os.stat_result | None, str | None]:
    """(stat of ``path`` following links, None when it does not exist; why it cannot be reached
    (a symlink loop, a path through a file, a name too long), None when it can)."""
    try:
        return os.stat(path), None
    except FileNotFoundError:
        return None, None
    except OSError as exc:  # ELOOP, ENOTDIR, ENAMETOOLONG, EACCES on a parent
        return None, exc.strerror or str(exc)


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def output_problem(path: str | os.PathLike, folder: bool = False) -> str | None:
    """Why ``path`` cannot be written (None when it can): a directory where a file is expected
    (a file where ``folder`` is), a path through a symlink loop or a file, a read-only file
    system, or a folder that is not writable (checked at the nearest existing ancestor)."""
    target = Path(os.path.abspath(path))
    st, problem = _stat(target)
    if problem:
        return f"{path}: {problem}"
    if st is not None and folder != stat.S_ISDIR(st.st_mode):
        return f"{path}: " + ("exists and is not a folder" if folder else "is a directory, expected a file path")
    if st is not None and not os.access(target, os.W_OK):
        return f"{path}: " + (os.strerror(errno.EROFS) if _read_only(target) else "not writable")
    ancestor = target.parent
    while True:
        st, problem = _stat(ancestor)
        if problem:
            return f"{path}: {ancestor}: {problem}"
        if st is not None or ancestor == ancestor.parent:
            break
        if os.path.lexists(ancestor):  # a link to nothing: mkdir would find the name taken
            return f"{path}: {ancestor} is a link to a missing folder"
        ancestor = ancestor.parent
    if st is None or not stat.S_ISDIR(st.st_mode):
        return f"{path}: {ancestor} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{path}: folder {ancestor}" + (f": {os.strerror(errno.EROFS)}" if _read_only(ancestor)
                                               else " is not writable")
    return None


def check_outputs(*paths: str | os.PathLike | None, folders: tuple = ()) -> None:
    """Raise ``OutputError`` before anything is written when any output path (a file; each of
    ``folders`` a folder) cannot be written, so a failed run never replaces one output and
    leaves the others stale."""
    from .errors import OutputError

    for path, folder in [(p, False) for p in paths] + [(p, True) for p in folders]:
        if path is None or str(path) == "":
            continue
        problem = output_problem(path, folder)
        if problem:
            raise OutputError(f"cannot write output {problem}")


def cannot_write(path: str | os.PathLike, exc: OSError):
    """The OutputError for an OSError met writing ``path`` (a full disk, a read-only file system,
    a symlink loop): one line naming the path and the cause."""
    from .errors import OutputError

    reason = output_problem(path) if isinstance(exc, FileExistsError) else None  # mkdir through a loop
    return OutputError(f"cannot write output {reason or f'{path}: {exc.strerror or exc}'}")


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return write_chunks(path, [data])


def write_chunks(path: str | os.PathLike, chunks: Iterable[bytes]) -> Path:
    """Write ``chunks`` (bytes, in order) to ``path`` atomically: a temp file beside it, fsync,
    rename; the temp file is removed when anything fails (a large output is never held whole)."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise cannot_write(target, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; give the file the mode a plain open() would have.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise cannot_write(target, exc) from None
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
