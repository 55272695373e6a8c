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
