"""Whether Triton's interpreter is on: kernels then run on the CPU, as a check, not a timing."""

from __future__ import annotations

import os


def interpreter_on(env: dict | None = None) -> bool:
    """``TRITON_INTERPRET`` read as Triton reads it (``1``, ``true`` or ``on``, any case; older
    Triton took only ``1``, which this accepts too), from ``env`` or this process's environment."""
    value = (os.environ if env is None else env).get("TRITON_INTERPRET", "")
    return str(value).strip().lower() in ("1", "true", "on")
