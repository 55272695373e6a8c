"""tko.base.subproc.run: the one way the tools run a child to completion."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from tko.base import subproc  # noqa: E402

# A child that starts a grandchild (optionally deaf to SIGTERM), prints its pid, then sleeps.
_PARENT = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(grandchild.pid, flush=True)
time.sleep(60)
"""
_SLEEPER = "import time; time.sleep(60)"
_DEAF_SLEEPER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def _gone(pid: int, wait_s: float = 10.0) -> bool:
    """The process has ended: no such pid, or a zombie its new parent has not reaped yet."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("grandchild", [_SLEEPER, _DEAF_SLEEPER], ids=["plain", "ignores-sigterm"])
def test_timeout_kills_child_and_grandchild(grandchild):
    done = subproc.run([sys.executable, "-c", _PARENT, grandchild], timeout=2.0, grace_s=0.5)
    assert done.timed_out is True
    assert done.returncode < 0                      # killed by a signal
    assert done.seconds < 20
    pid = int(done.stdout.split()[0])               # output written before the kill is kept
    assert _gone(pid), f"grandchild {pid} outlived the timeout"


def test_output_and_return_code_passed_through():
    code = ("import sys; sys.stdout.write('out line'); sys.stderr.write('err line'); "
            "sys.stdout.flush(); sys.stdout.buffer.write(b' \\xff'); sys.exit(3)")
    done = subproc.run([sys.executable, "-c", code], timeout=60)
    assert (done.returncode, done.timed_out) == (3, False)
    assert done.stdout == "out line \ufffd"         # undecodable bytes replaced, not raised
    assert done.stderr == "err line"
    assert done.seconds > 0


def test_env_cwd_and_input(tmp_path):
    code = "import os, sys; print(os.getcwd(), os.environ['TKO_SUBPROC_TEST'], sys.stdin.read())"
    done = subproc.run([sys.executable, "-c", code], timeout=60, cwd=str(tmp_path),
                       env=dict(os.environ, TKO_SUBPROC_TEST="set"), input="fed")
    assert done.returncode == 0
    assert done.stdout.split() == [str(tmp_path.resolve()), "set", "fed"]


def test_uncaptured_output_goes_to_the_console(capfd):
    done = subproc.run([sys.executable, "-c", "print('to the console')"], timeout=60, capture=False)
    assert done.returncode == 0 and done.stdout == ""
    assert "to the console" in capfd.readouterr().out


def test_group_member_holding_stdout_does_not_hold_the_wait():
    """The child exits at once; a grandchild it left behind still has the child's stdout open."""
    code = ("import subprocess, sys; "
            f"p = subprocess.Popen([sys.executable, '-c', {_SLEEPER!r}]); print(p.pid, flush=True)")
    done = subproc.run([sys.executable, "-c", code], timeout=30)
    pid = int(done.stdout.split()[0])
    try:
        assert (done.returncode, done.timed_out) == (0, False)
        assert done.seconds < 20
    finally:
        os.kill(pid, signal.SIGKILL)


def test_missing_executable_names_it(tmp_path):
    missing = str(tmp_path / "no-such-tool")
    with pytest.raises(FileNotFoundError) as exc:
        subproc.run([missing, "--version"], timeout=5)
    assert missing in str(exc.value)


def test_output_file_gets_stdout_and_stderr_interleaved(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("before\n")
    code = "import sys; print('a', flush=True); print('b', file=sys.stderr, flush=True); print('c')"
    done = subproc.run([sys.executable, "-c", code], timeout=30, output=log)
    assert done.returncode == 0 and done.stdout == done.stderr == ""
    assert log.read_text().split() == ["before", "a", "b", "c"]
