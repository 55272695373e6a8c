"""Child processes: started in their own process group, so a timeout ends the whole tree (a
repro's compile workers too), not only the direct child."""

from __future__ import annotations

import os
import signal
import subprocess


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
