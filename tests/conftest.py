"""Shared test setup: make scripts/ importable and skip `gpu` tests without a GPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

# Offline compiles are kept between runs (tko.compile.compile_cache): the tests keep theirs in a folder of
# their own, new for each session (and for every script they run), never the user's ~/.cache.
# every front argv a chain builds is parsed by the front's own parser first (tko.base.fronts)
os.environ["TKO_CHECK_STEP_ARGV"] = "1"
if not os.environ.get("TKO_CACHE_DIR"):
    import atexit
    import shutil
    import tempfile

    os.environ["TKO_CACHE_DIR"] = tempfile.mkdtemp(prefix="tko_test_cache_")
    atexit.register(shutil.rmtree, os.environ["TKO_CACHE_DIR"], True)

import fuzzing  # noqa: E402
import interpreter_child  # noqa: E402  (tests/ is on sys.path: pytest's rootdir-relative conftest import)

# Triton fixes interpreter or compiler mode when triton.language is first imported, and a test
# that sets TRITON_INTERPRET=1 in this process must not be the first: later offline compiles
# would then meet interpreted library functions (gluon's import asserts on them).
try:
    import triton.language  # noqa: F401
except Exception:  # no triton: the tests that need it skip
    pass


def _gpu_present() -> bool:
    try:
        import torch
    except Exception:
        return False
    try:
        return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)
    except Exception:
        return False


@pytest.fixture(autouse=True)
def _seeded_torch():
    """Every test draws the same random tensors: a test's verdict never depends on the draw."""
    try:
        import torch
    except Exception:
        yield
        return
    torch.manual_seed(0)
    yield


def pytest_configure(config):
    # a test named by its id runs whatever its tier: the default "not slow" applies to folders and files
    if config.option.markexpr == "not slow" and any("::" in str(a) for a in config.args):
        config.option.markexpr = ""
    # the fast tier is the one that deselects slow tests (pyproject's addopts); fuzz tests run fewer examples there
    fuzzing.full_tier = "not slow" not in (config.option.markexpr or "")
    config._tko_slow_deselected = 0
    if interpreter_child.in_child():
        config.pluginmanager.register(interpreter_child.ChildRecorder(os.environ[interpreter_child.RESULTS_ENV]))
    else:
        config._tko_interpreter_run = interpreter_child.ChildRun(ROOT)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test marked ``interpreter`` takes its outcome from the interpreter child (tests/interpreter_child.py)."""
    if pyfuncitem.get_closest_marker(interpreter_child.MARK) and not interpreter_child.in_child():
        interpreter_child.report_outcome(pyfuncitem.config._tko_interpreter_run, pyfuncitem)
        return True
    return None


def pytest_deselected(items):
    if items:
        config = items[0].config
        config._tko_slow_deselected += sum(1 for i in items if i.get_closest_marker("slow"))


def pytest_terminal_summary(terminalreporter, config):
    n = getattr(config, "_tko_slow_deselected", 0)
    if n and config.option.markexpr == "not slow":
        terminalreporter.write_line(f"{n} slow tests not run (the fast tier); the full tier: "
                                    "python -m pytest -q -m 'slow or not slow'")


def pytest_collection_modifyitems(config, items):
    if _gpu_present():
        return
    skip = pytest.mark.skip(reason="no GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def loadable_by_this_torch(module: Path, out_dir: Path) -> Path:
    """``module``, or a copy of it whose ``DeviceProperties(...)`` keeps only the fields this
    torch's Inductor has.

    The H200 fixtures were written by torch 2.11, whose DeviceProperties has
    ``max_threads_per_block``; torch 2.7 - 2.9 reject it, and nothing else in those modules.
    """
    from torch._inductor.runtime.hints import DeviceProperties

    known = set(DeviceProperties._fields)
    text = module.read_text(encoding="utf-8")

    def fit(m: re.Match) -> str:
        kept = [kw for kw in m.group(1).split(", ") if kw.split("=", 1)[0].strip() in known]
        return f"DeviceProperties({', '.join(kept)})"

    fitted = re.sub(r"DeviceProperties\(([^()]*)\)", fit, text)
    if fitted == text:
        return module
    out_dir.mkdir(parents=True, exist_ok=True)
    copy = out_dir / module.name
    copy.write_text(fitted, encoding="utf-8")
    return copy


@pytest.fixture
def run_script():
    """Run ``python scripts/<name>.py args...`` from a given cwd; returns CompletedProcess."""

    def _run(name, *args, cwd=None, env=None, timeout=300):
        full_env = dict(os.environ)
        full_env.pop("TKO_DEBUG", None)
        if env:
            full_env.update(env)
        return subprocess.run(
            [sys.executable, str(SCRIPTS / name), *map(str, args)],
            cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout,
        )

    return _run


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
