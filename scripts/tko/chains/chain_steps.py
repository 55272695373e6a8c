"""The steps of a chain: each front or program run as a child process with its output streamed or
logged, its status, time and last error lines recorded (a step in the background too), and the
output folder prepared."""


from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ..base import fronts
from ..base.errors import InputError

@dataclass
class Step:
    name: str
    cmd: list[str]
    status: str = "pending"
    seconds: float | None = None
    error: str | None = None
    output: str | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "command": " ".join(shlex.quote(c) for c in self.cmd),
                "status": self.status, "seconds": self.seconds, "error": self.error, "output": self.output}


# What a run writes into --out (and what --force clears: nothing else there is touched).
OUT_ENTRIES = ("capture", "artifacts", "kernels", "trials", "rewrites", "autotune_summary.json",
               "autotune_summary.md", "profile.json", "profile.md", "investigation.json", "investigation.md",
               "pins.json")
HEARTBEAT_S = 15.0


def prepare_out(out: Path, force: bool, keep: Path | None = None) -> None:
    """Refuse an --out that holds files (an earlier run's files would be read as this run's)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    if not out.is_dir() or not any(out.iterdir()):
        return
    ours = [out / n for n in OUT_ENTRIES if (out / n).exists()]
    if not force:
        raise InputError(f"--out {out} is not empty ({', '.join(sorted(p.name for p in out.iterdir())[:5])}"
                         f"{', ...' if len(list(out.iterdir())) > 5 else ''}): give a new folder, or --force to "
                         f"clear what this run writes there ({', '.join(OUT_ENTRIES)})")
    for path in ours:
        if keep is not None and (keep.resolve() == path.resolve() or path.resolve() in keep.resolve().parents):
            continue  # the capture being read lives here: never delete the input
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


@dataclass
class Chain:
    out: Path
    steps: list[Step] = field(default_factory=list)
    timeout: float = 1800.0
    planned: int = 0

    def _add(self, step: Step) -> str:
        """Record ``step``; its "step k/n" counter (a step past the plan raises the plan)."""
        self.steps.append(step)
        self.planned = max(self.planned, len(self.steps))
        return f"[investigate] step {len(self.steps)}/{self.planned} {step.name}"

    def skip(self, name: str, reason: str) -> None:
        """A planned step that cannot apply to this input: recorded and counted, not a failure."""
        print(f"{self._add(Step(name, [], status='skipped', error=reason))}: skipped ({reason})", flush=True)

    def run(self, name: str, cmd: list[str], output: Path | None = None, env: dict | None = None,
            log: Path | None = None, cwd: Path | None = None, stream: bool = False,
            echo: str | None = None) -> bool:
        """Run one step; its output goes to ``log`` (and to the console with ``stream``; without it,
        the lines that start with ``echo``)."""
        step = Step(name, [str(c) for c in cmd], output=str(output) if output else None)
        fronts.check(step.cmd)
        print(f"{self._add(step)}: {' '.join(shlex.quote(c) for c in step.cmd)}", flush=True)
        t0 = time.perf_counter()
        full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        rc, tail = run_streaming(step.cmd, full_env, cwd, self.timeout, log, stream,
                                 label=f"[investigate] {name}", echo=echo)
        return self.finish(step, rc, tail, time.perf_counter() - t0, log)

    def start(self, name: str, cmd: list[str], output: Path | None = None) -> Background:
        """Start one step in the background, for the steps after it that do not read its output;
        :meth:`Background.wait` ends and records it."""
        step = Step(name, [str(c) for c in cmd], output=str(output) if output else None)
        fronts.check(step.cmd)
        print(f"{self._add(step)} (in the background): {' '.join(shlex.quote(c) for c in step.cmd)}", flush=True)
        return Background(self, step)

    def finish(self, step: Step, rc: int | None, tail: list[str], seconds: float, log: Path | None) -> bool:
        """Record how a step ended (status, time, the error's last lines) and say so."""
        name = step.name
        step.seconds = round(seconds, 2)
        if rc is None:
            step.error = f"timed out after {self.timeout:.0f} s" + (f" (log: {log})" if log else "")
        elif rc != 0:
            step.error = f"exit {rc}: " + " | ".join(tail[-3:]) + (f" (log: {log})" if log else "")
        step.status = "ok" if rc == 0 else "failed"
        print(f"[investigate] {name}: {step.status} in {step.seconds:.1f} s"
              + (f": {step.error}" if step.error else ""), flush=True)
        return rc == 0


class Background:
    """A step running in a thread of its own (its child in its own process group, as every step's).
    Its time is the child's, from start to exit, not until :meth:`wait` is called."""

    def __init__(self, chain: Chain, step: Step):
        self.chain, self.step = chain, step
        self.procs: list[subprocess.Popen] = []
        self.result: tuple[int | None, list[str]] = (None, ["(did not start)"])
        self.t0 = time.perf_counter()
        self.ended: float | None = None
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.thread = threading.Thread(target=self._work, args=(env,), daemon=True)
        self.thread.start()

    def _work(self, env: dict) -> None:
        self.result = run_streaming(self.step.cmd, env, None, self.chain.timeout, None, False,
                                    label=f"[investigate] {self.step.name}", started=self.procs.append)
        self.ended = time.perf_counter()

    def wait(self) -> bool:
        """Wait for the step to end; True when it succeeded."""
        self.thread.join()
        return self.chain.finish(self.step, *self.result, (self.ended or time.perf_counter()) - self.t0, None)

    def cancel(self) -> None:
        """End the step's whole process group now (the chain is stopping)."""
        from ..base.subproc import kill_group

        for proc in self.procs:
            if proc.poll() is None:
                kill_group(proc)
        self.thread.join(timeout=10)


def run_streaming(cmd: list[str], env: dict, cwd: Path | None, timeout: float, log: Path | None,
                  stream: bool, label: str, started=None, echo: str | None = None) -> tuple[int | None, list[str]]:
    """Run ``cmd`` in its own process group; tee its output to ``log`` (and the console), print a
    heartbeat with the latest line while it runs, kill the whole group on timeout.
    ``started`` (a callable) gets the child once it runs. Returns (exit code or None on timeout,
    the last output lines)."""
    from ..base.subproc import kill_group

    tail: deque[str] = deque(maxlen=40)
    fh = open(log, "w", encoding="utf-8") if log is not None else None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=cwd, start_new_session=True, errors="replace")
    if started is not None:
        started(proc)

    def pump() -> None:
        for line in proc.stdout:
            tail.append(line.rstrip("\n"))
            if fh:
                fh.write(line)
                fh.flush()
            if stream:
                print(f"  | {line}", end="", flush=True)
            elif echo and line.startswith(echo):
                print(f"{label}: {line}", end="", flush=True)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    t0 = time.perf_counter()
    rc: int | None = None
    try:
        while True:
            try:
                rc = proc.wait(timeout=HEARTBEAT_S)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.perf_counter() - t0
                if elapsed > timeout:
                    kill_group(proc)
                    break
                if not stream:
                    last = tail[-1][:120] if tail else "(no output yet)"
                    print(f"{label}: {elapsed:.0f} s, running; last line: {last}", flush=True)
    finally:
        reader.join(timeout=5)
        if fh:
            fh.close()
    return rc, list(tail)
