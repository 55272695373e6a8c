"""Every script: `--help` works from any directory, and bad input is one line with exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
# Imported, not run: the capture patch is configured by environment variables.
NOT_CLI = {"autotune_capture_patch.py"}
CLI_SCRIPTS = sorted(p.name for p in SCRIPTS.glob("*.py") if p.name not in NOT_CLI)


def run(script, *args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "TKO_DEBUG"}
    # Only the script's own dependencies: nothing of this repository on the path.
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, str(SCRIPTS / script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("script", CLI_SCRIPTS)
def test_help_works_from_any_directory(script, tmp_path):
    proc = run(script, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout.lower()
    assert not list(tmp_path.iterdir()), "--help must not write files"


@pytest.mark.parametrize("script", CLI_SCRIPTS)
def test_unknown_flag_is_one_line_exit_2(script, tmp_path):
    proc = run(script, "--no-such-flag-xyz", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) <= 2  # usage + error


def test_console_scripts_are_generated_from_the_one_list():
    """pyproject.toml's [project.scripts] is tko.cli.SCRIPTS, generated (`python -m tko.cli --write`)."""
    from tko import cli

    text = (SCRIPTS.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert cli.with_console_scripts(text) == text, "run `cd scripts && python -m tko.cli --write`"
    assert sorted(cli.SCRIPTS) == sorted(p.stem for p in SCRIPTS.glob("*.py")), "a script front without a command"
