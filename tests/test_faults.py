"""Hostile input and failing environments: torn outputs, disk full, untrusted text in
Markdown, files that are not what their name says, FIFOs, runaway children, hard links."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, SCRIPTS
from tko.base import atomic, markdown
from tko.patch import capture
from tko.read.autotune_log import parse_files

RECORDED = ROOT / "examples" / "recorded_h200"
HOSTILE = "evil\n# injected heading | x <script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=alert(1)>"


def hipprof_csv(path: Path, names: list[str]) -> Path:
    rows = ['"Name","Calls","TotalDurationNs","AverageNs","Percentage"']
    for i, name in enumerate(names):
        quoted = name.replace('"', '""')
        rows.append(f'"{quoted}","{10 + i}","{(i + 1) * 100000}","{(i + 1) * 10000}","{10.0 + i}"')
    path.write_text("\n".join(rows) + "\n")
    return path


def assert_safe_markdown(text: str) -> None:
    """No raw HTML, no line a hostile value turned into a heading, every table row as wide as
    its header."""
    assert "<script" not in text.lower() and "<img" not in text.lower()
    assert "javascript:" not in text.lower()
    assert not any(line.startswith("# injected") for line in text.splitlines())
    width = None
    for line in text.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", line))
        if width is None:
            width = cells
        assert cells == width, line


# --------------------------------------------------------------------------- 6: all outputs or none


def test_compare_profiles_keeps_the_good_json_when_the_markdown_path_is_bad(run_script, tmp_path):
    prof = tmp_path / "p.json"
    proc = run_script("profile_kernels.py", "--hipprof", hipprof_csv(tmp_path / "k.csv", ["a", "b"]),
                      "--json-out", prof)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "cmp.json"
    out.write_text('{"good": true}')
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for bad in (blocker / "cmp.md", tmp_path):  # a parent that is a file; a directory
        proc = run_script("compare_profiles.py", prof, prof, "--json-out", out, "--markdown-out", bad)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "cannot write output" in proc.stderr
        assert json.loads(out.read_text()) == {"good": True}


def test_profile_kernels_and_the_report_write_nothing_when_one_output_cannot_be_written(run_script, tmp_path):
    csv = hipprof_csv(tmp_path / "k.csv", ["a"])
    out = tmp_path / "p.json"
    out.write_text('{"good": true}')
    (tmp_path / "file").write_text("x")
    proc = run_script("profile_kernels.py", "--hipprof", csv, "--json-out", out,
                      "--markdown-out", tmp_path / "file" / "p.md")
    assert proc.returncode == 2 and "cannot write output" in proc.stderr
    assert json.loads(out.read_text()) == {"good": True}
    (tmp_path / "r.md").mkdir()
    proc = run_script("make_investigation_report.py", "--kernel", "k", "--out", "r.md", cwd=tmp_path)
    assert proc.returncode == 2 and "is a directory" in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_stale_temp_files_of_a_killed_writer_are_removed_on_the_next_write(tmp_path):
    old = tmp_path / ".out.json.ab_cd123.tmp"
    fresh = tmp_path / ".other.md.zz99yy00.tmp"
    unrelated = tmp_path / ".notes.tmp"
    for p in (old, fresh, unrelated):
        p.write_text("partial")
    past = time.time() - 3600
    os.utime(old, (past, past))
    os.utime(unrelated, (past, past))
    atomic.write_text(tmp_path / "out.json", "{}")
    assert not old.exists()
    assert fresh.exists() and unrelated.exists()  # too young / not a temp-file name
    assert (tmp_path / "out.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".notes.tmp", ".other.md.zz99yy00.tmp", "out.json"]


# --------------------------------------------------------------------------- 7: disk full


@pytest.fixture
def capture_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(capture, "_settings", capture.Settings({"TRITON_CAPTURE_DIR": str(tmp_path / "cap")}))
    monkeypatch.setattr(capture, "_capture_off", None)
    monkeypatch.setattr(capture, "_loss_reported", False)
    (tmp_path / "cap").mkdir()
    return tmp_path / "cap"


def test_a_failed_append_leaves_no_partial_line_and_is_reported_once(capture_dir, monkeypatch, capsys):
    capture.emit("kernel", "k0")
    before = capture.settings().log_path.read_bytes()
    real_write = os.write

    def full_disk(fd, data):
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(capture.os, "write", full_disk)
    capture.emit("kernel", "k1")
    capture.emit("kernel", "k2")
    monkeypatch.setattr(capture.os, "write", real_write)
    assert capture.settings().log_path.read_bytes() == before
    err = capsys.readouterr().err
    assert err.count("capture record lost: ENOSPC") == 1 and "further losses not shown" in err
    capture.emit("kernel", "k3")
    assert [json.loads(x)["kernel"] for x in capture.settings().log_path.read_text().splitlines()] == ["k0", "k3"]


def test_after_a_torn_line_the_next_record_starts_on_a_fresh_line_and_is_read(capture_dir):
    line = next(iter((RECORDED / "pointwise_chain" / "autotune_kernels" / "autotune.log").open()))
    log = capture.settings().log_path
    log.write_text(line + line[: len(line) // 3])  # a run killed by a full disk mid-record
    capture.emit("kernel", "triton_after_0", function="triton_after_0", kind="pointwise")
    lines = log.read_text().splitlines()
    assert json.loads(lines[-1])["kernel"] == "triton_after_0"
    parsed = parse_files([log])
    assert "triton_after_0" in parsed.facts
    assert len(parsed.skipped) == 1


# --------------------------------------------------------------------------- 8: untrusted text in Markdown


def test_markdown_helpers_neutralise_html_headings_pipes_and_links():
    cell = markdown.text(HOSTILE)
    assert "\n" not in cell and "<" not in cell and "javascript:" not in cell
    assert re.search(r"(?<!\\)\|", cell) is None
    code = markdown.code("a`b|c\nd")
    assert code.startswith("``") and "\\|" in code and "\n" not in code
    assert markdown.text("triton_poi_fused_add_0") == "triton_poi_fused_add_0"


def test_hostile_kernel_names_through_summarize_profile_and_the_report(run_script, tmp_path):
    src = (RECORDED / "pointwise_chain" / "autotune_kernels" / "autotune.log").read_text().splitlines()
    real = json.loads(src[0])["kernel"]
    log = tmp_path / "autotune.log"
    log.write_text("\n".join(line.replace(json.dumps(real)[1:-1], json.dumps(HOSTILE)[1:-1]) for line in src) + "\n")
    proc = run_script("summarize_autotune_log.py", log, "--json-out", tmp_path / "s.json",
                      "--markdown-out", tmp_path / "s.md")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert HOSTILE in [k["kernel"] for k in summary["kernels"]]
    assert_safe_markdown((tmp_path / "s.md").read_text())

    proc = run_script("profile_kernels.py", "--hipprof", hipprof_csv(tmp_path / "k.csv", [HOSTILE, "plain"]),
                      "--json-out", tmp_path / "p.json", "--markdown-out", tmp_path / "p.md")
    assert proc.returncode == 0, proc.stderr
    assert_safe_markdown((tmp_path / "p.md").read_text())
    proc = run_script("compare_profiles.py", tmp_path / "p.json", tmp_path / "p.json", "--json-out",
                      tmp_path / "c.json", "--markdown-out", tmp_path / "c.md")
    assert proc.returncode == 0, proc.stderr
    assert_safe_markdown((tmp_path / "c.md").read_text())

    proc = run_script("make_investigation_report.py", "--kernel", HOSTILE, "--autotune-summary", "s.json",
                      "--profile", "p.json", "--out", "r.md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_safe_markdown((tmp_path / "r.md").read_text())


def test_hostile_launch_argument_name_reaches_the_report_escaped(run_script, tmp_path):
    # a launch argument's name is recorded from the program: the report's launch-args table
    # shows it, escaped like every other recorded text
    src = (RECORDED / "pointwise_chain" / "autotune_kernels" / "autotune.log").read_text()
    assert '"name": "in_ptr0"' in src
    (tmp_path / "autotune.log").write_text(src.replace('"name": "in_ptr0"', f'"name": {json.dumps(HOSTILE)}'))
    proc = run_script("summarize_autotune_log.py", tmp_path / "autotune.log", "--json-out", tmp_path / "s.json")
    assert proc.returncode == 0, proc.stderr
    kernel = json.loads((tmp_path / "s.json").read_text())["kernels"][0]["kernel"]
    proc = run_script("make_investigation_report.py", "--kernel", kernel, "--autotune-summary", "s.json",
                      "--out", "r.md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "r.md").read_text()
    assert "| arg | kind | dtype | shape | stride |" in text and "injected heading" in text
    assert_safe_markdown(text)


# --------------------------------------------------------------------------- 9: not AMDGCN


@pytest.mark.parametrize("content", [b"This is a README about kernels.\nIt has prose only.\n",
                                     bytes(range(256)) * 64])
def test_scan_amdgcn_refuses_a_file_that_is_not_a_listing(run_script, tmp_path, content):
    path = tmp_path / "input.amdgcn"
    path.write_bytes(content)
    proc = run_script("scan_amdgcn.py", path, "--json-out", tmp_path / "isa.json")
    assert proc.returncode == 2
    assert "not an AMDGCN listing" in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "isa.json").exists()


# --------------------------------------------------------------------------- 10: environment


def _install_in_child(cap: Path) -> subprocess.CompletedProcess:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from tko.patch import capture; "
            "capture.install({'TRITON_CAPTURE_DIR': sys.argv[2]}); capture.emit('kernel', 'k'); print('done')")
    return subprocess.run([sys.executable, "-c", code, str(SCRIPTS), str(cap)], capture_output=True,
                          text=True, timeout=60)


def test_a_fifo_named_autotune_log_turns_capture_off_without_blocking(tmp_path):
    cap = tmp_path / "cap"
    cap.mkdir()
    os.mkfifo(cap / "autotune.log")
    proc = _install_in_child(cap)
    assert proc.returncode == 0 and proc.stdout.strip() == "done"
    assert proc.stderr.count("capture off") == 1 and "not a regular file" in proc.stderr


def test_an_unusable_capture_dir_says_so_once(tmp_path):
    (tmp_path / "file").write_text("x")
    proc = _install_in_child(tmp_path / "file" / "cap")
    assert proc.returncode == 0 and proc.stdout.strip() == "done"
    assert proc.stderr.count("autotune_capture_patch: capture off: cannot create capture dir") == 1


def test_append_refuses_a_fifo_even_when_it_appears_after_install(capture_dir):
    os.mkfifo(capture_dir / "autotune.log")
    with pytest.raises(OSError):
        capture.append_record(capture_dir / "autotune.log", "{}")


def test_the_runner_timeout_ends_the_kernels_child_processes(tmp_path):
    from tko.measure.kernel_run import run_kernel

    pid_file = tmp_path / "child.pid"
    kernel = tmp_path / "kernel.py"
    kernel.write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(120)\n")
    result = run_kernel(kernel, timeout=3)
    assert result["status"] == "timeout"
    pid = int(pid_file.read_text())
    deadline = time.time() + 10
    while time.time() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_collect_says_when_the_log_is_empty_or_binary_and_refuses_an_unreadable_one(run_script, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    binary = tmp_path / "bin.txt"
    binary.write_bytes(bytes(range(256)) * 16)
    for log, word in ((empty, "is empty"), (binary, "not a text log")):
        proc = run_script("collect_inductor_artifacts.py", "--log", log, "--out", tmp_path / f"o_{log.stem}")
        assert word in proc.stderr, proc.stderr
    proc = run_script("collect_inductor_artifacts.py", "--log", tmp_path, "--out", tmp_path / "o3")
    assert proc.returncode == 2


def test_collect_refuses_a_hard_link_to_a_file_outside_its_roots(tmp_path):
    from tko.read.inductor_files import Root

    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    root = tmp_path / "cache"
    (root / "ab").mkdir(parents=True)
    os.link(secret, root / "ab" / "leak.py")
    (root / "ab" / "ok.py").write_text("@triton.jit\ndef k(x):\n    pass\n")
    refused: list[dict] = []
    names = [p.name for p, _ in Root(root, refused).files()]
    assert names == ["ok.py"]
    assert refused and "hard link" in refused[0]["reason"]
