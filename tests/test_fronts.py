"""The front scripts' parsers, and the check of the argv a chain builds for them."""

from __future__ import annotations

import sys

import pytest

from tko import cli
from tko.base import fronts, resources


@pytest.mark.parametrize("name", cli.SCRIPTS)
def test_every_front_builds_its_parser_without_running(name, monkeypatch):
    monkeypatch.delenv("TRITON_CAPTURE_DIR", raising=False)
    parser = fronts.front_parser(str(resources.scripts_dir() / f"{name}.py"))
    assert parser is not None and parser.prog == f"{name}.py"


def test_reading_the_capture_patch_for_its_parser_installs_nothing():
    from tko.patch import capture

    before = dict(capture._installed)
    fronts.front_parser(str(resources.scripts_dir() / "autotune_capture_patch.py"))
    assert capture._installed == before


def test_a_renamed_flag_is_refused_in_the_fronts_words():
    ok = fronts.front_argv("summarize_autotune_log.py", "a.log", "--json-out", "s.json")
    assert fronts.argv_error(ok) is None
    bad = fronts.front_argv("summarize_autotune_log.py", "a.log", "--json-output", "s.json")
    assert "--json-output" in fronts.argv_error(bad)
    with pytest.raises(AssertionError, match="refuses"):
        fronts.check(bad)


def test_a_command_after_the_separator_is_the_fronts_own():
    cmd = fronts.front_argv("try_remedies.py", "--out", "t", "--runs", "2", "--", "python", "repro.py", "--steps", "3")
    assert fronts.argv_error(cmd) is None
    wrong = fronts.front_argv("try_remedies.py", "--out", "t", "--run", "2", "--", "python", "repro.py")
    assert "--run" in fronts.argv_error(wrong)


def test_a_command_that_runs_no_front_is_not_checked():
    assert fronts.argv_error([sys.executable, "repro.py", "--anything"]) is None
    assert fronts.argv_error(["bash", "run.sh"]) is None
