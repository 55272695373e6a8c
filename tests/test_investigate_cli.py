"""investigate.py as a user meets it on the console: what it prints, its progress lines, its exit
status and where the reason for a failure goes (fast cases; the full chains are in
test_investigate.py, marked slow)."""

from __future__ import annotations

import shutil

import pytest

from conftest import ROOT

RECORDED = ROOT / "examples" / "recorded_h200"


def copy_capture(tmp_path, example: str = "pointwise_chain"):
    cap = tmp_path / "capture"
    shutil.copytree(RECORDED / example, cap)
    return cap


@pytest.mark.parametrize("content,needle", [("", "empty"), ("\n\n", "empty")])
def test_an_empty_capture_log_is_exit_2_with_the_reason_on_stderr(run_script, tmp_path, content, needle):
    cap = copy_capture(tmp_path)
    (cap / "autotune_kernels" / "autotune.log").write_text(content)
    (cap / "log_profile.txt").write_text("")
    proc = run_script("investigate.py", "--from-capture", cap, "--out", tmp_path / "inv", cwd=tmp_path)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr)
    assert len(err) == 1 and needle in err[0] and "autotune.log" in err[0], err
    assert not (tmp_path / "inv").exists()  # refused before anything was written


def test_a_capture_log_without_records_is_exit_2_with_the_reason_on_stderr(run_script, tmp_path):
    cap = copy_capture(tmp_path)
    (cap / "autotune_kernels" / "autotune.log").write_text("not an autotune record\n")
    (cap / "log_profile.txt").write_text("")
    shutil.rmtree(cap / "profile")  # no profile either: the kernels come from the autotune log
    proc = run_script("investigate.py", "--from-capture", cap, "--out", tmp_path / "inv", cwd=tmp_path)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr)
    assert len(err) == 1 and "no autotune records" in err[0] and "summarize" in err[0], err
