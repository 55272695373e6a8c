"""Child processes: started in their own process group, so a timeout ends the whole tree (a
repro's compile workers too), not only the direct child."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Completed:
    """How a child run ended. ``returncode`` is minus the signal number for a killed child;
    ``seconds`` runs from the start until the child (killed or not) was reaped."""
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float


def run(cmd: Sequence[str], *, timeout: float | None, env: dict | None = None, cwd: str | None = None,
        input: str | None = None, capture: bool = True, grace_s: float = 5.0,
        output: str | os.PathLike | None = None) -> Completed:
    """Run ``cmd`` to completion in a new session; past ``timeout`` (or on Ctrl-C, which no longer
    reaches a child in its own session) the whole process group is killed (:func:`kill_group`).

    Output goes to temporary files, not pipes: a chatty child never blocks on a full pipe, and a
    group member that keeps stdout open after the child exits cannot hold the wait. With
    ``capture=False`` stdout and stderr stay the caller's (``Completed.stdout`` is empty).
    ``output``: a file that stdout and stderr are appended to, interleaved as the child wrote
    them (``Completed.stdout`` and ``stderr`` are then empty).
    ``input``: None leaves stdin the caller's; a string is the child's whole stdin ("": none).
    A missing executable raises Popen's FileNotFoundError, which names it.
    """
    with (open(output, "ab") if output is not None else tempfile.TemporaryFile()) as out, \
            tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as stdin:
        if input is not None:
            stdin.write(input.encode("utf-8"))
            stdin.seek(0)
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(cmd), env=env, cwd=cwd, start_new_session=True,
                                stdin=None if input is None else stdin,
                                stdout=out if capture or output is not None else None,
                                stderr=subprocess.STDOUT if output is not None else err if capture else None)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc, grace_s)
        except BaseException:
            kill_group(proc, grace_s)
            raise
        proc.wait()  # kill_group returns early when the group is already gone
        seconds = time.perf_counter() - t0
        stdout, stderr = ("", "") if output is not None else (_read(f) for f in (out, err))
    return Completed(proc.returncode, stdout, stderr, timed_out, seconds)


def _read(fh) -> str:
    fh.seek(0)
    return fh.read().decode("utf-8", errors="replace")


def kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM the child's process group, wait up to ``grace_s`` for the child, then SIGKILL the
    group: members that outlive the child (compile workers) or ignore SIGTERM go too."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def failure_line(text: str) -> str | None:
    """The line that says why a Python process died: the exception line after its last traceback
    (logs interleave other output after it, e.g. Inductor's debug lines), else the last line."""
    lines = [ln.rstrip() for ln in (text or "").splitlines() if ln.strip()]
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")]
    if starts:
        for line in lines[starts[-1] + 1:]:
            if not line[:1].isspace():
                return line.strip()[:300]
    return lines[-1].strip()[:300] if lines else None
