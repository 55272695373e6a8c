"""Real faults under a capturing program: a full disk, a read-only capture dir, a FIFO for the log,
a SIGKILL in the middle of a run. In each, the user's program finishes with the results it has
without capture, bit for bit, and what capture leaves behind reads as whole records.

Faults are made by the kernel where this machine allows it: a 16 KiB tmpfs (mounting needs root
and a container that permits it), else RLIMIT_FSIZE (writes past the limit fail with EFBIG);
a read-only remount of that tmpfs, else a mode-0555 dir for a non-root user.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_capture import SCRIPTS, USER_PROGRAM

pytestmark = pytest.mark.slow


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, timeout=30)
    return done.returncode == 0


def _umount(where: Path) -> None:
    subprocess.run(["umount", str(where)], capture_output=True, timeout=30)


def _limit_file_size(limit: int):
    def apply():  # in the child, before exec: SIG_IGN survives exec, so EFBIG comes back as an error
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def _start(tmp_path: Path, cap: Path, out: Path, capture: bool, preexec=None) -> subprocess.Popen:
    prog = tmp_path / "prog.py"
    prog.write_text(USER_PROGRAM.format(scripts=str(SCRIPTS)))
    env = dict(os.environ, TRITON_INTERPRET="1", TRITON_CAPTURE_DIR=str(cap),
               WITH_CAPTURE="1" if capture else "0", BREAK_CAPTURE="0", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.Popen([sys.executable, str(prog), str(out)], env=env, cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec)


def _run(tmp_path: Path, cap: Path, capture: bool = True, preexec=None) -> tuple:
    import torch

    out = tmp_path / f"out_{int(time.time() * 1e6)}.pt"
    proc = _start(tmp_path, cap, out, capture, preexec)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-2000:]
    return torch.load(out), stderr


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    where = tmp_path_factory.mktemp("plain")
    return _run(where, where / "cap", capture=False)[0]


def _records(log: Path) -> list[dict]:
    """Every line of the log as JSON: a torn or glued line fails here."""
    lines = log.read_bytes().decode("utf-8").splitlines() if log.exists() else []
    return [json.loads(line) for line in lines if line]


def _no_temp_files(cap: Path) -> list[str]:
    return [p.name for p in cap.rglob(".*.tmp")] if cap.is_dir() else []


def test_a_full_disk_drops_whole_records_and_says_so_once(tmp_path, plain):
    import torch

    mnt = tmp_path / "small"
    mounted = _mount_tmpfs(mnt, "16k")
    try:
        # the program's own output goes to tmp_path, outside the small disk; with RLIMIT_FSIZE
        # every file is limited, so the limit is above the output's size
        result, stderr = _run(tmp_path, mnt / "cap", preexec=None if mounted else _limit_file_size(6000))
        assert torch.equal(result, plain)
        assert stderr.count("capture record lost") <= 1
        records = _records(mnt / "cap" / "autotune.log")
        assert [r["event"] for r in records] == ["kernel", "autotune", "launch"][:len(records)]
        lost = len(records) < 3 or "capture record lost" in stderr or (mnt / "cap" / "capture_errors.log").exists()
        assert lost, "the disk was meant to fill: nothing was lost"
        assert _no_temp_files(mnt / "cap") == []
    finally:
        if mounted:
            _umount(mnt)


def test_a_read_only_capture_dir_turns_capture_off_and_the_program_runs(tmp_path, plain):
    import torch

    mnt = tmp_path / "ro"
    mounted = _mount_tmpfs(mnt, "1m")
    try:
        (mnt / "cap").mkdir()
        if mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True, timeout=30)
        else:
            os.chmod(mnt / "cap", 0o555)
            if os.access(mnt / "cap", os.W_OK):
                pytest.skip("root without mount: a mode-0555 dir stays writable")
        result, stderr = _run(tmp_path, mnt / "cap")
        assert torch.equal(result, plain)
        assert stderr.count("capture off") == 1 and "not writable" in stderr
        assert list((mnt / "cap").iterdir()) == []
    finally:
        if mounted:
            _umount(mnt)
        elif (mnt / "cap").exists():
            os.chmod(mnt / "cap", 0o755)


def test_a_fifo_for_the_log_never_blocks_the_program(tmp_path, plain):
    import torch

    cap = tmp_path / "cap"
    cap.mkdir()
    os.mkfifo(cap / "autotune.log")
    result, stderr = _run(tmp_path, cap)
    assert torch.equal(result, plain)
    assert stderr.count("capture off") == 1 and "not a regular file" in stderr


def test_a_run_killed_mid_capture_leaves_whole_records_and_the_next_run_is_read(tmp_path, plain):
    import torch

    cap = tmp_path / "cap"
    proc = _start(tmp_path, cap, tmp_path / "killed.pt", capture=True)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:  # kill as soon as the first record is down
        if (cap / "autotune.log").exists() and (cap / "autotune.log").stat().st_size:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    before = _records(cap / "autotune.log")
    assert before and before[0]["event"] == "kernel"
    result, _ = _run(tmp_path, cap)
    assert torch.equal(result, plain)
    after = _records(cap / "autotune.log")
    assert after[:len(before)] == before
    assert [r["event"] for r in after[len(before):]][-1] == "launch"  # the second run recorded whole
