"""Tests marked ``interpreter`` run their bodies in one child pytest started with ``TRITON_INTERPRET=1``.

Triton takes interpreter or compiler mode when ``triton.language`` is first imported, and
``tests/conftest.py`` imports it in compiler mode, so such a test cannot run in this process. Each
marked test still passes, fails or skips here by its own id: the first one to run starts a single
child over every marked test selected in this session, and each reads its own outcome from the
child's record (one interpreter start for all of them, and ``pytest path::test_x[...]`` runs just
that one in the child). Under pytest-xdist the workers share that one child: the first to need it
runs it under a file lock named for the test run, the others wait on the lock and read its record.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

RESULTS_ENV = "TKO_INTERPRETER_RESULTS"
MARK = "interpreter"
CHILD_TIMEOUT_S = 1200


def in_child() -> bool:
    return bool(os.environ.get(RESULTS_ENV))


class ChildRecorder:
    """In the child: one outcome per test id, written once at the session's end."""

    def __init__(self, path: str):
        self.path = path
        self.outcomes: dict[str, dict] = {}

    def pytest_runtest_logreport(self, report):
        # A failure or skip in setup decides the test; otherwise the call phase does.
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.outcomes[report.nodeid] = {"outcome": report.outcome, "text": report.longreprtext}
        elif report.when == "teardown" and report.failed:
            self.outcomes[report.nodeid] = {"outcome": "failed", "text": report.longreprtext}

    def pytest_sessionfinish(self, session):
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(self.outcomes, fh)
        os.replace(tmp, self.path)


class ChildRun:
    """In the parent: runs the child once, lazily, over the session's selected marked tests."""

    def __init__(self, root: Path):
        self.root = root
        self.outcomes: dict[str, dict] | None = None
        self.tail = ""

    def outcome(self, item) -> dict | None:
        if self.outcomes is None:
            self.outcomes = self._shared([i.nodeid for i in item.session.items if i.get_closest_marker(MARK)])
        return self.outcomes.get(item.nodeid)

    def _shared(self, ids: list[str]) -> dict:
        """The child's record, run once per test run however many xdist workers ask."""
        run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
        shared = Path(tempfile.gettempdir()) / f"tko-interpreter-{run_id}.json"
        with open(f"{shared}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not shared.exists():
                record = {"outcomes": self._run(ids), "tail": self.tail}
                tmp = shared.with_suffix(".tmp")
                tmp.write_text(json.dumps(record))
                os.replace(tmp, shared)
            record = json.loads(shared.read_text())
        if run_id == str(os.getpid()):  # no other worker will read it
            shared.unlink()
            Path(f"{shared}.lock").unlink()
        self.tail = record["tail"]
        return record["outcomes"]

    def _run(self, ids: list[str]) -> dict:
        with tempfile.TemporaryDirectory(prefix="tko-interp-") as work:
            results = Path(work) / "results.json"
            env = dict(os.environ, TRITON_INTERPRET="1", **{RESULTS_ENV: str(results)},
                       # a fresh Inductor cache: a graph cached before an op's schema changed would
                       # call the old one
                       TORCHINDUCTOR_CACHE_DIR=str(Path(work) / "inductor"),
                       # one CPU thread: the references' sums then run in one order whatever else
                       # shares the machine (an fp32 gradient once missed its 1e-5 under load)
                       OMP_NUM_THREADS="1")
            for var in ("TKO_DEBUG", "TKO_ROW_BACKWARD"):
                env.pop(var, None)
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                   "--rootdir", str(self.root), *(f"{self.root}/{i}" for i in ids)]
            try:
                res = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                                     timeout=CHILD_TIMEOUT_S)
                self.tail = (res.stdout[-4000:] + res.stderr[-2000:]).strip()
            except subprocess.TimeoutExpired as exc:
                self.tail = f"the interpreter child ran past {CHILD_TIMEOUT_S} s: {exc}"
            return json.loads(results.read_text()) if results.exists() else {}


def report_outcome(run: ChildRun, item) -> None:
    """Ends a marked test here with the outcome its body had in the child."""
    got = run.outcome(item)
    if got is None:
        pytest.fail(f"the interpreter child did not report {item.nodeid}:\n{run.tail}", pytrace=False)
    if got["outcome"] == "skipped":
        pytest.skip(got["text"].rsplit("Skipped: ", 1)[-1].strip(" ')\n") or "skipped in the child")
    if got["outcome"] != "passed":
        pytest.fail(f"in the interpreter child:\n{got['text']}", pytrace=False)
