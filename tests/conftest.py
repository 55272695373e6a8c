"""Shared test setup: make scripts/ importable and skip `gpu` tests without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))


def _gpu_present() -> bool:
    try:
        import torch
    except Exception:
        return False
    try:
        return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_present():
        return
    skip = pytest.mark.skip(reason="no GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
