"""Inputs that are not regular files and outputs the file system refuses: every script answers
with one line and exit 2, never a hang, a traceback or an "unexpected" error.

FIFOs are made with mkfifo; a read-only file system and a full disk are tmpfs mounts where this
machine allows mounting (root in a container that permits it), else those cases skip; a symlink
loop needs nothing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

RECORDED = ROOT / "examples" / "recorded_h200"
CHAIN = RECORDED / "pointwise_chain"
KERNEL = CHAIN / "autotune_kernels" / "triton_poi_fused_add_gelu_mul_0.py"
LOG = CHAIN / "autotune_kernels" / "autotune.log"
PROFILE = CHAIN / "profile" / "profile.json"

# script, then its arguments; "{fifo}" is the input under test, "{out}" a fresh output folder
FIFO_CASES = {
    "summarize": ["summarize_autotune_log.py", "{fifo}", "--json-out", "{out}/s.json"],
    "profile_trace": ["profile_kernels.py", "--trace", "{fifo}", "--json-out", "{out}/p.json"],
    "profile_pmc": ["profile_kernels.py", "--trace", str(CHAIN / "profile" / "profile.trace.json.gz"),
                    "--pmc", "{fifo}", "--json-out", "{out}/p.json"],
    "scan": ["scan_amdgcn.py", "{fifo}", "--json-out", "{out}/i.json"],
    "inspect": ["inspect_triton_meta.py", "{fifo}", "--json-out", "{out}/m.json"],
    "probe": ["probe_compile.py", "{fifo}", "--arch", "gfx942", "--json-out", "{out}/c.json"],
    "probe_launch_event": ["probe_compile.py", str(KERNEL), "--arch", "gfx942", "--launch-event", "{fifo}",
                           "--json-out", "{out}/c.json"],
    "report": ["make_investigation_report.py", "--kernel", "k", "--profile", "{fifo}", "--out", "{out}/r.md"],
    "report_rules": ["make_investigation_report.py", "--kernel", "k", "--profile", str(PROFILE), "--rules",
                     "{fifo}", "--out", "{out}/r.md"],
    "compare": ["compare_profiles.py", "{fifo}", str(PROFILE), "--json-out", "{out}/d.json"],
    "check_env_show": ["check_env.py", "--show", "{fifo}"],
    "collect_log": ["collect_inductor_artifacts.py", "--log", "{fifo}", "--out", "{out}/a"],
    "speed_of_light": ["speed_of_light.py", "{fifo}", "--offline", "--json-out", "{out}/sol.json"],
    "speed_of_light_peaks": ["speed_of_light.py", str(KERNEL), "--offline", "--peaks", "{fifo}",
                             "--json-out", "{out}/sol.json"],
    "run_kernel": ["run_captured_kernel.py", "{fifo}", "--json-out", "{out}/run.json"],
    "sweep_probe": ["sweep_captured_kernel.py", str(KERNEL), "--probe", "{fifo}", "--json-out", "{out}/w.json",
                    "--markdown-out", "{out}/w.md", "--best-out", "{out}/best.py"],
    "pins": ["apply_config_pins.py", "--pins", "{fifo}", str(KERNEL)],
}


def one_line_exit_2(proc: subprocess.CompletedProcess, *needles: str) -> None:
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:], proc.stdout[-2000:])
    assert len(err) == 1, err
    assert "unexpected" not in err[0] and "Traceback" not in proc.stderr, err
    for needle in needles:
        assert needle in err[0], err


@pytest.mark.parametrize("case", sorted(FIFO_CASES))
def test_a_fifo_given_as_input_is_refused_at_once(run_script, tmp_path, case):
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    script, *args = FIFO_CASES[case]
    args = [a.format(fifo=fifo, out=tmp_path / "out") for a in args]
    try:
        proc = run_script(script, *args, cwd=tmp_path, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{script} hung reading a FIFO")
    one_line_exit_2(proc, str(fifo), "not a regular file")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.json"))


# --------------------------------------------------------------------------- outputs

OUTPUT_CASES = {
    "summarize": ["summarize_autotune_log.py", str(LOG), "--json-out", "{out}/s.json", "--markdown-out",
                  "{out}/s.md"],
    "scan": ["scan_amdgcn.py", str(CHAIN / "inductor_cache"), "--json-out", "{out}/i.json"],
    "inspect": ["inspect_triton_meta.py", str(KERNEL), "--json-out", "{out}/m.json"],
    "check_env": ["check_env.py", "--out", "{out}/env.json", "--quiet"],
    "collect": ["collect_inductor_artifacts.py", "--capture-dir", str(CHAIN / "autotune_kernels"), "--out",
                "{out}/artifacts"],
    "investigate": ["investigate.py", "--from-capture", str(CHAIN), "--out", "{out}/inv", "--probe-arch", "none",
                    "--no-run"],
}
FAULT_WORDS = {"read_only": "Read-only file system", "full": "No space left on device",
               "symlink_loop": "symbolic links"}


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, timeout=30)
    except OSError:
        return False
    return done.returncode == 0


@pytest.fixture
def faulty_folder(tmp_path, request):
    """A folder whose writes fail as the case says: a read-only tmpfs, a full tmpfs, or a path
    through a symlink loop."""
    fault = request.param
    if fault == "symlink_loop":
        (tmp_path / "loop_a").symlink_to(tmp_path / "loop_b")
        (tmp_path / "loop_b").symlink_to(tmp_path / "loop_a")
        yield tmp_path / "loop_a" / "out"
        return
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, "256k"):
        pytest.skip("mounting a tmpfs needs root in a container that permits it")
    try:
        (mnt / "out").mkdir()
        if fault == "read_only":
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True, timeout=30)
        else:
            fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError:  # ENOSPC: the disk is full
                pass
            finally:
                os.close(fd)
        yield mnt / "out"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


@pytest.mark.parametrize("faulty_folder", sorted(FAULT_WORDS), indirect=True)
@pytest.mark.parametrize("case", sorted(OUTPUT_CASES))
def test_an_output_the_file_system_refuses_is_one_line_exit_2(run_script, tmp_path, faulty_folder, case,
                                                             request):
    fault = request.node.callspec.params["faulty_folder"]
    script, *args = OUTPUT_CASES[case]
    proc = run_script(script, *[a.format(out=faulty_folder) for a in args], cwd=tmp_path, timeout=120)
    one_line_exit_2(proc, FAULT_WORDS[fault])
    if faulty_folder.is_dir():  # nothing half-written: no temp file left behind
        assert not [p for p in faulty_folder.rglob("*") if p.name.endswith(".tmp")]
