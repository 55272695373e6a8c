"""A regular (non-editable) install carries the rules, peaks, contracts, templates and script fronts:
the core finds them from any directory, and the console entry points run the main job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# one worker builds the wheel once: two in-tree builds at a time collide in build/
pytestmark = pytest.mark.xdist_group("wheel")


@pytest.fixture(scope="module")
def installed_site(tmp_path_factory):
    wheels = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(wheels), str(ROOT)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "No module named pip" in proc.stderr:
        pytest.skip("no pip in this interpreter")
    assert proc.returncode == 0, proc.stderr[-2000:]
    site = tmp_path_factory.mktemp("site")
    (wheel,) = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
        names = zf.namelist()
    return site, names


def run_installed(site: Path, cwd: Path, code: str, *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TKO_DEBUG"}
    env["PYTHONPATH"] = str(site)  # the installed copy only: no checkout on the path
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_wheel_holds_every_file_the_core_reads(installed_site):
    _, names = installed_site
    for needed in ("tko/_bundle/references/decision_rules.yaml", "tko/_bundle/references/device_peaks.yaml",
                   "tko/_bundle/references/json_contracts.md", "tko/_bundle/templates/investigation_report.md.j2",
                   "tko/_bundle/scripts/investigate.py", "tko/base/resources.py"):
        assert needed in names, needed
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert entry_points


def test_installed_core_loads_rules_from_another_directory(installed_site, tmp_path):
    site, _ = installed_site
    proc = run_installed(site, tmp_path, "import tko, tko.base.decide, tko.base.resources as r; "
                         "rules = tko.base.decide.load_rules(); print(tko.__file__); print(r.skill_root()); "
                         "print(len(rules['rules']))")
    assert proc.returncode == 0, proc.stderr
    where, root, n_rules = proc.stdout.split()
    assert where.startswith(str(site)) and root.startswith(str(site)) and int(n_rules) > 5


@pytest.mark.slow
def test_installed_entry_point_runs_the_main_job(installed_site, tmp_path):
    site, _ = installed_site
    out = tmp_path / "inv"
    code = "import sys; from tko import cli; sys.argv = ['tko-investigate', *sys.argv[1:]]; cli.investigate()"
    proc = run_installed(site, tmp_path, code, "--from-capture",
                         ROOT / "examples" / "recorded_h200" / "pointwise_chain", "--out", out,
                         "--probe-arch", "none")
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "investigation.json").read_text())
    assert doc["kernels"][0]["verdict"] and all(str(site) in s["command"] for s in doc["steps"] if s["command"])


def test_the_capture_patch_imports_from_the_installed_package_and_writes_nothing_until_a_kernel_is_captured(
        installed_site, tmp_path):
    site, names = installed_site
    assert "autotune_capture_patch.py" in names  # a top-level module beside the tko package
    cwd = tmp_path / "empty"
    cwd.mkdir()
    code = ("import autotune_capture_patch as p, os, sys; print(p.__file__); print(p.INSTALLED['capture_dir']); "
            "print(p.INSTALLED['inductor'], p.INSTALLED['triton_autotuner']); print(sorted(os.listdir('.')))")
    proc = run_installed(site, cwd, code)
    assert proc.returncode == 0, proc.stderr
    where, capture_dir, patched, listed = proc.stdout.splitlines()
    assert where.startswith(str(site)) and capture_dir == str(cwd / "autotune_kernels")
    assert patched == "True True" and listed == "[]" and list(cwd.iterdir()) == []
    assert "capture off" not in proc.stderr

    # the first record creates the capture folder, and only then
    proc = run_installed(site, cwd, "import autotune_capture_patch; from tko.patch import capture; capture.emit('kernel', 'k')")
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in cwd.iterdir()] == ["autotune_kernels"]
    assert (cwd / "autotune_kernels" / "autotune.log").read_text().count('"kernel": "k"') == 1
