"""Run a standalone captured kernel in a subprocess and turn its result lines into ``kernel_run/1``.

The runner (``tko.measure.standalone_runner``, stamped by ``tko.measure.standalone``) prints one line per timed
config: ``RESULT_PREFIX`` + JSON. This module is the one parser of those lines. A kernel that
crashes, times out or prints no result line is a failure, never an empty success.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ..base import inputs, subproc
from ..base.subproc import failure_line
from ..base.interpreter import interpreter_on
from .standalone import RESULT_PREFIX, runner_version, timer_for_runner

STDERR_TAIL_LINES = 30


def parse_result_lines(text: str) -> tuple[list[dict], list[str]]:
    """(results, problems): one dict per well-formed result line, one string per bad one."""
    results, problems = [], []
    for no, line in enumerate(text.splitlines(), 1):
        at = line.find(RESULT_PREFIX)
        if at < 0:
            continue
        payload = line[at + len(RESULT_PREFIX):].strip()
        try:
            rec = json.loads(payload)
        except ValueError as exc:
            problems.append(f"stdout line {no}: result line is not JSON ({exc})")
            continue
        if not isinstance(rec, dict) or "kernel" not in rec or "config" not in rec:
            problems.append(f"stdout line {no}: result line lacks kernel/config")
            continue
        ok = rec.get("ok", True)
        ms = rec.get("ms")
        if ok and not (isinstance(ms, (int, float)) and ms > 0):
            problems.append(f"stdout line {no}: result line has no positive ms")
            continue
        rec["ok"] = bool(ok)
        results.append(rec)
    return results, problems


def _tail(text: str, n: int = STDERR_TAIL_LINES) -> list[str]:
    return text.splitlines()[-n:]


def gpu_missing(kernel_py: Path) -> str | None:
    """Why a captured standalone kernel cannot be timed here: its runner times it on a GPU and
    torch sees none. None when it can run: a GPU is present, Triton's interpreter is on, or the
    file is no captured kernel (then its own run says what it needs)."""
    import ast

    from ..read.kernel_source import standalone_spec

    if interpreter_on():
        return None
    try:
        spec = standalone_spec(ast.parse(kernel_py.read_text(errors="replace")), str(kernel_py))
    except (SyntaxError, ValueError, RecursionError):
        return None
    if spec is None:
        return None
    try:
        import torch

        if torch.cuda.is_available():
            return None
    except Exception:  # no usable torch: the run itself says so
        return None
    from ..base.layout import CAPTURE_KERNELS, RUNS_DIR

    device = spec.get("device") if isinstance(spec.get("device"), dict) else {}
    captured_on = " ".join(str(device[k]) for k in ("name", "arch") if device.get(k)) or "a GPU"
    why = f"{kernel_py.name} needs a GPU (captured on {captured_on}) and torch sees none on this machine"
    cap = kernel_py.parent.parent if kernel_py.parent.name == CAPTURE_KERNELS else None
    if cap is not None:
        recorded = cap / RUNS_DIR / f"{kernel_py.stem}.json"
        if recorded.is_file():
            why += f"; its recorded run: {recorded}"
        why += (f"; read the whole capture offline: python scripts/investigate.py --from-capture {cap} "
                "--out investigation")
    return why + " (TRITON_INTERPRET=1 runs it on the CPU: a check, not a timing)"


def run_kernel(kernel_py: Path, all_configs: bool = False, timeout: float = 600.0,
               warmup: float | None = None, rep: float | None = None,
               extra_args: list[str] | None = None, python: str | None = None,
               timer: str | None = None) -> dict:
    """Run the standalone file; returns the ``kernel_run/1`` payload (``status`` ok/failed/timeout)."""
    kernel_py = Path(kernel_py).resolve()
    cmd = [python or sys.executable, str(kernel_py)]
    if all_configs:
        cmd.append("--all-configs")
    if warmup is not None:
        cmd += ["--warmup", str(warmup)]
    if rep is not None:
        cmd += ["--rep", str(rep)]
    timers_dropped: list[str] = []
    if timer:
        timer, timers_dropped = timer_for_runner(runner_version(inputs.read_text(kernel_py, "a kernel .py file", errors="replace")), timer)
        if timer:
            cmd += ["--timer", timer]
    cmd += list(extra_args or [])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    start = time.time()
    # its own session: a timeout ends the whole process group (the kernel's compile workers too)
    done = subproc.run(cmd, timeout=timeout, env=env, cwd=str(kernel_py.parent))
    stdout, stderr, timed_out = done.stdout, done.stderr, done.timed_out
    rc = None if timed_out else done.returncode
    seconds = time.time() - start
    results, problems = parse_result_lines(stdout)
    ok_results = [r for r in results if r["ok"]]
    failed_results = [r for r in results if not r["ok"]]
    if timed_out:
        status, error = "timeout", f"kernel run timed out after {timeout:g} s"
    elif rc != 0:
        status, error = "failed", f"kernel run exited with code {rc}"
        cause = failure_line(stderr) or failure_line(stdout)
        if cause and not failed_results:
            error += f": {cause}"
    elif not ok_results:
        status, error = "failed", "kernel run printed no result line"
    elif failed_results:
        status, error = "failed", f"{len(failed_results)} config(s) failed"
    else:
        status, error = "ok", None
    if error and failed_results:
        error += f": {failed_results[0].get('error')}"
    # with several timers per config, "best" and "fastest" use the first timer printed
    first_timer = ok_results[0].get("timer") if ok_results else None
    primary = [r for r in ok_results if r.get("timer") == first_timer]
    best = next((r for r in primary if r.get("best")), None)
    fastest = min(primary, key=lambda r: r["ms"]) if primary else None
    return {
        "kernel_file": str(kernel_py),
        "command": cmd,
        "status": status,
        "error": error,
        "returncode": rc,
        "timed_out": timed_out,
        "timeout_s": timeout,
        "seconds": round(seconds, 3),
        "kernel": (results[0]["kernel"] if results else None),
        "results": results,
        "timer": first_timer,
        "best": best,
        "fastest": fastest,
        "problems": problems,
        "timers_dropped": timers_dropped,
        "stdout_tail": _tail(stdout) if status != "ok" else [],
        "stderr_tail": _tail(stderr) if status != "ok" else [],
    }
