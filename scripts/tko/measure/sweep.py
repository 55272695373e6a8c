"""Correctness-gated variant sweep of a captured kernel: variants, dispatch, ranking, report.

Variants are derived around the captured winner (the first config of the standalone file's
``_TKO_SPEC``): block-size constexprs x2 and /2, ``num_warps`` x2 and /2, ``num_stages`` +/-1 when the
kernel has a loop (pipelining needs one), the backend compile options (``waves_per_eu``, and on an HCU
backend its own) that the installed backend accepts (``tko.read.triton_stack``), and the hint variants that a
``compile_probe/1`` JSON found to compile AND change the ISA (source edits are the probe's own edits,
re-derived with ``tko.compile.compile_probe.build_variants`` / ``rewrite_source``).

Every variant runs in a worker process bound to one device (``tko.measure.sweep_worker``), on the captured
inputs, checked against the captured winner's output on the same inputs; only variants that pass are
timed and ranked.
"""


from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from ..base.errors import InputError, ToolFailure
from .sweep_worker import MESSAGE_PREFIX
from .sweep_plan import (Plan, SCRIPTS_DIR, hip_build)

# --------------------------------------------------------------------------- workers

class WorkerProcess:
    """One ``tko.measure.sweep_worker`` process bound to one device; messages come through a reader thread."""

    def __init__(self, slot: str, device_index: int | None, setup: dict, log_path: Path):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if device_index is not None:
            env.update(device_visibility(device_index, env, hip_build()))
            if hip_build():
                env.pop("CUDA_VISIBLE_DEVICES", None)
        code = ("import sys; sys.path.insert(0, %r); from tko.measure.sweep_worker import main; "
                "raise SystemExit(main())" % SCRIPTS_DIR)
        self.slot = slot
        self.log = open(log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=env,
                                     cwd=str(Path(setup["base_file"]).parent))
        self.messages: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.send(setup)

    def _read(self) -> None:
        for line in self.proc.stdout:
            at = line.find(MESSAGE_PREFIX)  # a print of the kernel module may precede it on the line
            if at >= 0:
                self.messages.put(json.loads(line[at + len(MESSAGE_PREFIX):]))
        self.messages.put(None)  # end of output: the process exited

    def send(self, obj: dict) -> None:
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float) -> dict:
        try:
            msg = self.messages.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            return {"error": f"no answer within {timeout:g} s; worker stopped"}
        if msg is None:
            self.proc.wait()
            return {"error": f"worker exited with code {self.proc.returncode} (see {self.log.name})"}
        return msg

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except Exception:
            self.kill()
        self.log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def device_visibility(index: int, env: dict, hip: bool) -> dict:
    """The environment that shows a worker only device ``index`` of the devices this process sees.

    Indices are relative to this process's own visibility list, so ``CUDA_VISIBLE_DEVICES=2,3`` and
    index 1 give ``3``.  HIP builds (ROCm, Hygon DTK) filter with ``HIP_VISIBLE_DEVICES``; setting both
    variables there would filter twice.
    """
    var = "HIP_VISIBLE_DEVICES" if hip else "CUDA_VISIBLE_DEVICES"
    current = env.get(var) or (env.get("CUDA_VISIBLE_DEVICES") if hip else None)
    visible = [x.strip() for x in current.split(",") if x.strip()] if current else []
    return {var: visible[index] if index < len(visible) else str(index)}


def visible_devices(requested: str, interpret: bool) -> list[int | None]:
    """Device indices to bind workers to; ``[None]`` (the CPU) under the interpreter."""
    if interpret:
        return [None]
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        raise InputError("no GPU visible: the sweep needs a GPU (or TRITON_INTERPRET=1 for a CPU check run)")
    if requested in ("all", ""):
        return list(range(count))
    try:
        wanted = [int(x) for x in requested.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--devices: expected 'all' or indices like 0,1; got {requested!r}") from None
    bad = [d for d in wanted if not 0 <= d < count]
    if bad or not wanted:
        raise InputError(f"--devices {requested}: {count} GPU(s) visible (indices 0..{count - 1})")
    return wanted


def warm_compile(plan: Plan, devices: list, jobs: int, work: Path, timeout: float) -> dict:
    """Compile every variant in ``jobs`` processes so that the timing workers find a warm Triton cache."""
    tasks: queue.Queue = queue.Queue()
    for v in plan.variants:
        tasks.put(v.task())
    results: list[dict] = []
    started = time.time()

    def run(n: int) -> None:
        dev = devices[n % len(devices)]
        setup = {"mode": "compile", "base_file": plan.kernel_file, "device": "cuda"}
        w = WorkerProcess(f"compile{n}", dev, setup, work / f"compile{n}.log")
        ready = w.receive(timeout)
        if not ready.get("ready"):
            results.append({"name": None, "ok": False, "error": ready.get("error")})
            w.kill()
            return
        while True:
            try:
                task = tasks.get_nowait()
            except queue.Empty:
                break
            w.send(task)
            results.append(w.receive(timeout))
        w.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(max(1, min(jobs, len(plan.variants))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"jobs": len(threads), "seconds": round(time.time() - started, 3),
            "failed": [r for r in results if not r.get("ok")]}


class _SweepScheduler:
    """Runs the variants of a plan over (device x worker) slots, one thread per slot.

    State: ``tasks`` (the queue of variants not yet taken), ``records`` (variant name -> its
    result), ``slots_info`` (one dict per slot), ``workers`` (slot -> the worker left alive when
    the queue ran dry); the three are written under ``lock``.  ``gate`` opens when the compile
    step has finished (``warmed``: what it reported), and ``timing_started`` is when it opened.
    """

    def __init__(self, plan: Plan, devices: list, workers_per_device: int, warmup_ms: float,
                 rep_ms: float, work: Path, interpret: bool, timeout: float):
        self.work, self.timeout = work, timeout
        self.baseline = baseline = plan.variants[0]
        self.setup = {"mode": "run", "base_file": plan.kernel_file, "device": "cpu" if interpret else "cuda",
                      "warmup_ms": warmup_ms, "rep_ms": rep_ms, "baseline": baseline.task()}
        self.slots = [(f"dev{'cpu' if d is None else d}.w{k}", d) for d in devices
                      for k in range(workers_per_device)]
        # several workers: each times the winner on its own device first, and the first of those
        # timings is the winner's record, so the winner is not timed once more as a variant
        self.per_slot_baseline = len(self.slots) > 1
        self.tasks: queue.Queue = queue.Queue()
        for v in plan.variants:
            if not (self.per_slot_baseline and v.name == baseline.name):
                self.tasks.put(v.task())
        self.records: dict[str, dict] = {}
        self.slots_info: list[dict] = []
        self.workers: dict[str, WorkerProcess] = {}
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.warmed: dict = {}
        self.timing_started: float | None = None

    def _open_gate(self) -> None:
        self.timing_started = time.time()
        self.gate.set()

    def _warm_then_open(self, warm: Callable[[], dict]) -> None:
        try:
            self.warmed.update(warm())
        except Exception as exc:  # the timing workers compile on their own then; say why
            self.warmed.update(failed=[], error=f"{type(exc).__name__}: {exc}")
        finally:
            self._open_gate()

    def _start(self, slot: str, dev) -> tuple[WorkerProcess | None, dict]:
        w = WorkerProcess(slot, dev, self.setup, self.work / f"{slot}.log")
        ready = w.receive(self.timeout)
        if not ready.get("ready"):
            w.kill()
            return None, ready
        return w, ready

    def run(self, warm: Callable[[], dict] | None) -> float:
        """Time every variant; returns the seconds from the gate's opening to the last result."""
        if warm is None:
            self._open_gate()
            warm_thread = None
        else:
            warm_thread = threading.Thread(target=self._warm_then_open, args=(warm,))
            warm_thread.start()
        threads = [threading.Thread(target=self._run_slot, args=s) for s in self.slots]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if warm_thread is not None:
            warm_thread.join()
        return round(time.time() - self.timing_started, 3)

    def _run_slot(self, slot: str, dev) -> None:
        w, ready = self._start(slot, dev)
        info = {"slot": slot, "device_index": dev, "device_name": ready.get("device_name"),
                "device_arch": ready.get("device_arch"),
                "ready": w is not None, "error": ready.get("error"), "outputs": ready.get("outputs"),
                "poisoned": ready.get("poisoned"), "restored_in_out": ready.get("restored_in_out"),
                "self_difference": ready.get("self_difference"),
                "variants": []}
        with self.lock:
            self.slots_info.append(info)
        if w is None:
            return
        self.gate.wait()
        if self.per_slot_baseline and not self._time_own_baseline(w, slot, dev, info):
            return
        w = self._take_tasks(w, slot, dev, info)
        if w is not None:
            with self.lock:
                self.workers[slot] = w

    def _time_own_baseline(self, w: WorkerProcess, slot: str, dev, info: dict) -> bool:
        """Each worker times the winner on its own device first: variants are compared with the
        winner on the same GPU, so a difference between two GPUs of one model is not a speed-up.
        False (the worker killed) when the winner fails there."""
        baseline = self.baseline
        t0 = time.time()
        w.send(baseline.task())
        own = w.receive(self.timeout)
        own.setdefault("name", baseline.name)
        with self.lock:
            held = self.records.get(baseline.name)
            if held is None or (not held.get("passed") and own.get("passed")):
                self.records[baseline.name] = dict(own, slot=slot, device_index=dev,
                                                   device_name=info["device_name"],
                                                   seconds=round(time.time() - t0, 3))
                info["variants"].append(baseline.name)
        timing = own.get("timing") or {}
        info["baseline"] = {"median_ms": timing.get("median_ms"), "p20_ms": timing.get("p20_ms"),
                            "p80_ms": timing.get("p80_ms"),
                            "passed": own.get("passed"), "error": own.get("error")}
        if own.get("error") or not own.get("passed"):
            w.kill()                  # its tasks stay queued for the other workers
            info["error"] = f"the winner failed on this worker: {own.get('error') or 'check failed'}"
            return False
        return True

    def _take_tasks(self, w: WorkerProcess, slot: str, dev, info: dict) -> WorkerProcess | None:
        """Time queued variants until the queue is empty; returns the worker still alive, if any."""
        while True:
            try:
                task = self.tasks.get_nowait()
            except queue.Empty:
                return w
            t0 = time.time()
            w.send(task)
            rec = w.receive(self.timeout)
            rec.setdefault("name", task["name"])
            if rec.get("error"):
                # crashed, hung, or raised: a failed launch can leave the device context unusable,
                # so the worker is replaced (and re-runs the winner for its reference) for the rest
                rec["passed"] = False
                w.kill()
                w, again = self._start(slot, dev)
                if w is None:
                    info["error"] = again.get("error")
            rec.update(slot=slot, device_index=dev, device_name=info["device_name"],
                       seconds=round(time.time() - t0, 3))
            with self.lock:
                self.records[task["name"]] = rec
                info["variants"].append(task["name"])
            if w is None:
                return None

    def finish(self, retime_baseline: bool) -> dict | None:
        """Re-time the winner on the worker of its record (when asked), then close every worker."""
        retime = None
        try:
            if not any(s["ready"] for s in self.slots_info):
                first = next((s for s in self.slots_info if s.get("error")), {})
                raise ToolFailure(f"no worker could run the captured winner: {first.get('error')}")
            first = self.records.get(self.baseline.name) or {}
            w = self.workers.get(first.get("slot"))
            if retime_baseline and w is not None and first.get("passed"):
                w.send(self.baseline.task())
                retime = w.receive(self.timeout)
                retime.update(slot=first["slot"], device_index=first.get("device_index"))
        finally:
            for w in self.workers.values():
                w.close()
        return retime


def run_sweep(plan: Plan, devices: list, workers_per_device: int, warmup_ms: float, rep_ms: float,
              work: Path, interpret: bool, timeout: float = 600.0, retime_baseline: bool = True,
              warm: Callable[[], dict] | None = None) -> dict:
    """Run every variant of ``plan`` over (device x worker) slots; returns records, slots, baseline re-time.

    ``warm`` (the compile step) runs while the timing workers start (import, device context, the
    winner's reference outputs); no variant is timed before it has finished, so compiles never
    share the GPU or the CPU with a timed run.
    """
    sched = _SweepScheduler(plan, devices, workers_per_device, warmup_ms, rep_ms, work, interpret, timeout)
    timing_s = sched.run(warm)
    retime = sched.finish(retime_baseline)
    sched.slots_info.sort(key=lambda s: s["slot"])
    return {"records": sched.records, "slots": sched.slots_info, "retime": retime, "timing_s": timing_s,
            "compile": sched.warmed if warm is not None else None}


