"""Probe children: commands with a timeout that never raise, and probe steps run in a fresh
interpreter that report one JSON marker line (a broken install can abort the interpreter)."""


from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any, Sequence

from ..base import subproc
from ..read import dcu_tools

SCRIPTS_DIR = Path(__file__).resolve().parents[2]
CHILD_MARKER = "TKO_PROBE_JSON:"

TOOL_TIMEOUT_S = 15.0
# each child step by name, as "module:function": the modules that hold them import this one
CHILD_STEPS = {"torch": "tko.env.env_probe:child_torch", "triton": "tko.env.env_probe:child_triton",
               "native": "tko.env.env_probe:child_native", "smoke": "tko.env.smoke:child_smoke"}
RUNTIME_TIMEOUT_S = 180.0       # first torch import on a cold cache can be slow
# --------------------------------------------------------------------------- subprocess helper

def run_command(argv: Sequence[str], timeout: float = TOOL_TIMEOUT_S,
                env: dict | None = None, cwd: str | None = None) -> dict:
    """Run a command; never raises.

    Returns ``{"argv", "rc", "stdout", "stderr", "timed_out", "error", "seconds"}``.
    The command gets its own process group so that a hung tool and anything it
    spawned are killed together on timeout (at once: a hung tool gets no grace).
    """
    result: dict[str, Any] = {"argv": list(argv), "rc": None, "stdout": "", "stderr": "",
                              "timed_out": False, "error": None, "seconds": None}
    try:
        # input="": a tool that prompts reads end of file instead of waiting on a terminal
        done = subproc.run(argv, timeout=timeout, env=env, cwd=cwd, input="", grace_s=0.0)
    except OSError as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        return result
    if done.timed_out:
        result["timed_out"] = True
        result["error"] = f"timed out after {timeout:g} s"
    result.update(rc=done.returncode, stdout=done.stdout, stderr=done.stderr,
                  seconds=round(done.seconds, 3))
    return result


def first_lines(text: str | None, n: int = 5) -> list[str]:
    lines = [l.rstrip() for l in dcu_tools.clean_text(text or "").split("\n") if l.strip()]
    return lines[:n]


def last_lines(text: str | None, n: int = 8) -> list[str]:
    lines = [l.rstrip() for l in dcu_tools.clean_text(text or "").split("\n") if l.strip()]
    return lines[-n:]


# --------------------------------------------------------------------------- child processes

DIAGNOSTIC_LINE = re.compile(r"\berror\b|LLVM ERROR|unsupported", re.IGNORECASE)


def run_child(kind: str, args: dict | None = None, env: dict | None = None,
              timeout: float = RUNTIME_TIMEOUT_S) -> dict:
    """Run :func:`child_main` in a fresh interpreter; return its JSON or a failure record."""
    code = (f"import sys; sys.path.insert(0, {str(SCRIPTS_DIR)!r}); "
            f"from tko.env import children; children.child_main({kind!r}, {json.dumps(args or {})!r})")
    res = run_command([sys.executable, "-c", code], timeout=timeout, env=env)
    payload = child_payload(res["stdout"])
    if payload is None:
        why = res["error"] or f"exited with status {res['rc']} before reporting"
        payload = {"child_failed": True, "error": why,
                   "error_lines": first_lines(res["stderr"]) or first_lines(res["stdout"]),
                   "stderr_tail": last_lines(res["stderr"])}
    # Compiler diagnostics (MLIR / LLVM) go to stderr before the Python exception,
    # which alone is often just "PassManager::run failed".
    diagnostics = [l.strip() for l in dcu_tools.clean_text(res["stderr"]).split("\n")
                   if DIAGNOSTIC_LINE.search(l)]
    if diagnostics:
        payload["diagnostics"] = diagnostics[:5]
    payload["child_seconds"] = res["seconds"]
    payload["child_timed_out"] = res["timed_out"]
    payload["child_rc"] = res["rc"]
    if res["stderr"].strip():
        payload.setdefault("stderr_tail", last_lines(res["stderr"]))
    return payload


def child_payload(stdout: str) -> dict | None:
    """The JSON object of a child's last marker line; None when there is none or it is not one
    (cut off, not an object, an integer past int()'s digit limit, nested too deeply)."""
    for line in stdout.splitlines()[::-1]:
        if line.startswith(CHILD_MARKER):
            try:
                payload = json.loads(line[len(CHILD_MARKER):])
            except (ValueError, RecursionError):     # JSONDecodeError is a ValueError
                return None
            return payload if isinstance(payload, dict) else None
    return None


def child_main(kind: str, args_json: str) -> None:
    """Entry point of a probe child: print one marker line with the JSON result."""
    args = json.loads(args_json)
    try:
        module, function = CHILD_STEPS[kind].split(":")
        result = getattr(importlib.import_module(module), function)(args)
    except BaseException as exc:  # the parent records whatever happened
        result = {"child_failed": True, "error": f"{type(exc).__name__}: {exc}",
                  "error_lines": first_lines(str(exc))}
    sys.stdout.flush()
    sys.stdout.write("\n" + CHILD_MARKER + json.dumps(result, default=repr) + "\n")
    sys.stdout.flush()


def exc_record(exc: BaseException) -> dict:
    text = f"{type(exc).__name__}: {exc}"
    return {"error": first_lines(text, 1)[0] if first_lines(text, 1) else type(exc).__name__,
            "error_lines": first_lines(text, 6)}


