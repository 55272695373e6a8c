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

import ast
import difflib
import hashlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..compile import offline_compile, probe_variants
from ..read import kernel_source, triton_stack
from . import launch_advice, standalone
from ..base.config import OPTION_KEYS, TritonConfig
from ..base.errors import InputError, ToolFailure
from .sweep_worker import INTERPRETER_TIMER, MESSAGE_PREFIX

BLOCK_KEYS = ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK", "R1_BLOCK", "RBLOCK")
INDUCTOR_GRID_AXIS = {"XBLOCK": 0, "YBLOCK": 1, "ZBLOCK": 2}
SOURCE_HINTS = ("assume", "multiple_of")
ENV_HINTS = {"buffer_ops_on": {probe_variants.BUFFER_OPS_ENV: "1"}, "buffer_ops_off": {probe_variants.BUFFER_OPS_ENV: "0"}}
SCRIPTS_DIR = str(Path(__file__).resolve().parents[2])


@dataclass
class Variant:
    name: str
    kind: str                      # baseline, config, source, env
    description: str
    flat: dict
    grid: list | None
    file: str
    env: dict = field(default_factory=dict)
    diff: str | None = None        # unified diff of a source edit
    claims: list = field(default_factory=list)

    def key(self) -> str:
        text = Path(self.file).read_bytes() if self.kind == "source" else b""
        blob = json.dumps([self.flat, self.grid, self.env, hashlib.sha1(text).hexdigest()], sort_keys=True)
        return blob

    def task(self) -> dict:
        return {"name": self.name, "flat": self.flat, "grid": self.grid, "file": self.file, "env": self.env}

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "description": self.description, "config": self.flat,
                "grid": self.grid, "env": self.env, "source_diff": self.diff, "claims": self.claims}


@dataclass
class Plan:
    kernel_file: str
    kernel: str
    launch: str
    spec: dict
    variants: list
    notes: list
    dropped: list
    backend_options: dict = field(default_factory=dict)   # {backend, accepted}: what the options obey


# --------------------------------------------------------------------------- variant generation

def read_standalone(path: str | Path) -> tuple[str, dict, dict]:
    """(file text, parsed file, ``_TKO_SPEC``) of a captured standalone file."""
    text, parsed = kernel_source.read_kernel_file(path)
    spec = parsed.get("standalone_spec")
    if not spec or not spec.get("configs"):
        raise InputError(f"{path}: not a captured standalone file (no _TKO_SPEC with configs); "
                         "write one with autotune_capture_patch.py")
    return text, parsed, spec


def is_block_key(key: str, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and key not in OPTION_KEYS and (
        key in BLOCK_KEYS or key.upper().startswith("BLOCK") or key.upper().endswith("BLOCK")
        or "BLOCK_" in key.upper())


def _has_loop(text: str, function: str) -> bool:
    node = probe_variants._function_node(text, function)
    return any(isinstance(n, (ast.For, ast.While)) for n in ast.walk(node))


def grid_driving_keys(kernel: dict) -> set[str]:
    """Block constexprs that multiply a program id in an index expression (they set the grid)."""
    pid_vars = {v["name"] for v in kernel.get("index_vars") or [] if "program_id" in v["expr"]}
    keys = set()
    for var in kernel.get("index_vars") or []:
        expr = var["expr"].split("=", 1)[-1]
        if "program_id" in expr or any(re.search(rf"\b{re.escape(p)}\b", expr) for p in pid_vars):
            keys.update(re.findall(r"\b[A-Z][A-Z0-9_]*\b", expr))
    return keys


def scaled_grid(grid: list | None, factor: float) -> list | None:
    """The recorded grid for a block size x ``factor``: the one axis above 1, rounded up.

    cdiv(n, 2B) == ceil(cdiv(n, B) / 2), so x2 is exact; /2 may add one fully masked program.
    None when the grid has several axes above 1 (which one the block drives is not recorded).
    """
    if not grid:
        return None
    big = [i for i, g in enumerate(grid) if g > 1]
    if len(big) != 1:
        return None
    out = list(grid)
    g = grid[big[0]]
    out[big[0]] = -(-g // 2) if factor > 1 else g * 2
    return out


def config_text(flat: dict) -> str:
    """The ``triton.Config(...)`` to pin for a flat config."""
    return TritonConfig.from_flat(flat).to_source()


def _hip_build() -> bool:
    try:
        import torch

        return getattr(torch.version, "hip", None) is not None
    except Exception:
        return False


def _triton_at_least(version: tuple) -> bool:
    from ..base.versions import package_version, parse_version

    found = package_version("triton")
    return bool(found) and parse_version(found) >= version


def probe_hint_names(probe_doc: dict) -> tuple[list[str], list[str]]:
    """(variant names that compiled AND changed the ISA on some target, notes on the others)."""
    changed, notes = [], []
    by_name: dict[str, list[dict]] = {}
    for r in probe_doc.get("results") or []:
        by_name.setdefault(r.get("variant"), []).append(r)
    for name, rows in by_name.items():
        if name == "baseline":
            continue
        if any(r.get("status") == "ok" and r.get("changes_vs_baseline") for r in rows):
            changed.append(name)
        elif any(r.get("status") == "ok" for r in rows):
            notes.append(f"probe variant {name}: same load/store code as baseline on every target; not swept")
        else:
            notes.append(f"probe variant {name}: did not compile in the probe; not swept")
    return changed, notes


def _block_variants(kernel: dict, launch: str, flat0: dict, grid0: list | None, kernel_file: str,
                    notes: list) -> list[Variant]:
    """Each block size x2 and /2 (the grid rescaled where the block drives it), alone and with
    num_warps scaled alike."""
    out: list[Variant] = []
    driving = grid_driving_keys(kernel)
    for key, value in flat0.items():
        if not is_block_key(key, value):
            continue
        for factor, label in ((2, "x2"), (0.5, "/2")):
            new = int(value * factor)
            if new < 1 or new == value:
                continue
            flat = dict(flat0, **{key: new})
            grid = grid0
            if launch == "inductor":
                # the launcher computes the grid on torch > 2.6; older torch launches the recorded
                # grid, so it is rescaled on the block's own axis (x, y, z)
                axis = INDUCTOR_GRID_AXIS.get(key)
                if axis is not None and grid0 and axis < len(grid0):
                    grid = list(grid0)
                    grid[axis] = -(-grid0[axis] // 2) if factor > 1 else grid0[axis] * 2
            elif key in driving:
                grid = scaled_grid(grid0, factor)
                if grid is None:
                    notes.append(f"{key}={new}: not swept: the recorded grid {grid0} has several axes above 1 "
                                 "and which one the block drives is not recorded")
                    continue
            desc = f"{key} {label} ({value} -> {new})"
            if grid != grid0:
                desc += f"; grid {grid0} -> {grid}"
            out.append(Variant(f"{key}={new}", "config", desc, flat, grid, kernel_file))
            # the same block move with num_warps scaled alike keeps the work per thread: the move
            # that a block change alone cannot make when the winner is register- or lane-bound
            warps0 = int(flat0.get("num_warps") or 4)
            warps_new = int(warps0 * factor)
            if 1 <= warps_new <= 16 and warps_new != warps0:
                out.append(Variant(f"{key}={new},num_warps={warps_new}", "config",
                                   f"{desc}; num_warps {warps0} -> {warps_new}",
                                   dict(flat, num_warps=warps_new), grid, kernel_file))
    return out


def _distinct(variants: list[Variant], notes: list) -> list[Variant]:
    """The variants without those that launch the same as an earlier one."""
    unique, seen = [], set()
    for v in variants:
        k = v.key()
        if k in seen:
            notes.append(f"{v.name}: same launch as an earlier variant; dropped")
            continue
        seen.add(k)
        unique.append(v)
    return unique


def _option_variants(flat0: dict, grid0: list | None, kernel_file: str, text: str, hip: bool, arch: str | None,
                     backend_options: tuple[dict | None, str | None], notes: list) -> list[Variant]:
    """One variant per value of each backend option the compiling backend accepts
    (``triton_stack.offered_options``); one note says which were left out and why."""
    if not hip:
        notes.append("backend options (waves_per_eu, ...) not swept: AMD / HCU compile options and this "
                     "is not a HIP build")
        return []
    accepted, backend = backend_options
    offered, left_out = triton_stack.offered_options(accepted, backend, arch=arch,
                                                     uses_dot=triton_stack.kernel_uses_dot(text))
    if left_out:
        notes.append(left_out)
    what = {t.name: t.what for t in triton_stack.TUNABLE}
    return [Variant(f"{name}={value}", "config", f"{backend} backend option {name}={value} ({what[name]})",
                    dict(flat0, **{name: value}), grid0, kernel_file)
            for name, values in offered.items() for value in values if value != flat0.get(name)]


def _without_unaccepted(variants: list[Variant], backend_options: tuple[dict | None, str | None],
                        notes: list) -> None:
    """No variant passes an option the compiling backend lacks (a JIT launch raises on one)."""
    accepted, backend = backend_options
    for v in variants:
        v.flat, line = triton_stack.drop_unaccepted(v.flat, accepted, backend)
        if line:
            notes.append(f"{v.name}: {line}")


def build_plan(kernel_file: str | Path, work_dir: str | Path, probe_doc: dict | None = None,
               max_variants: int = 24, hip: bool | None = None,
               backend_options: tuple[dict | None, str | None] | None = None) -> Plan:
    """The variants to sweep. ``hip`` (default: this torch is a HIP build) and ``backend_options``
    (``(accepted options, backend name)``; default: the installed backend that compiles for the
    captured device) decide which backend options are swept."""
    kernel_file = str(Path(kernel_file).resolve())
    text, parsed, spec = read_standalone(kernel_file)
    kernel = kernel_source.select_kernel(parsed, spec.get("function"))
    launch = spec.get("launch", "jit")
    winner = spec["configs"][0]
    flat0 = dict(winner["flat"])
    grid0 = list(winner["grid"]) if winner.get("grid") else None
    hip = _hip_build() if hip is None else hip
    arch = (spec.get("device") or {}).get("arch")
    if backend_options is None:
        backend_options = triton_stack.installed_accepted(arch, hip) if hip else (None, None)
    notes: list[str] = []
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    variants = [Variant("baseline", "baseline", "the captured winner", flat0, grid0, kernel_file)]

    def config_variant(name: str, description: str, **changes: Any) -> None:
        flat = dict(flat0, **changes)
        variants.append(Variant(name, "config", description, flat, grid0, kernel_file))

    variants += _block_variants(kernel, launch, flat0, grid0, kernel_file, notes)
    warps = int(flat0.get("num_warps") or 4)
    for new, label in ((warps * 2, "x2"), (warps // 2, "/2")):
        if 1 <= new <= 16 and new != warps:
            config_variant(f"num_warps={new}", f"num_warps {label} ({warps} -> {new})", num_warps=new)
    stages = flat0.get("num_stages")
    if _has_loop(text, kernel["name"]):
        stages = int(stages or (2 if hip else 3))
        for new in (stages + 1, stages - 1):
            if new >= 1:
                config_variant(f"num_stages={new}", f"num_stages {stages} -> {new} (the kernel has a loop "
                               "to pipeline)", num_stages=new)
    else:
        notes.append("num_stages not swept: the kernel has no loop, so software pipelining has nothing to do")
    variants += _option_variants(flat0, grid0, kernel_file, text, hip, arch, backend_options, notes)
    if probe_doc is not None:
        variants += _probe_variants(probe_doc, text, kernel, spec, kernel_file, flat0, grid0, work, hip, notes)
    if hip:
        _without_unaccepted(variants, backend_options, notes)
    unique = _distinct(variants, notes)
    dropped = [v.name for v in unique[max(1, max_variants):]]
    if dropped:
        notes.append(f"--max-variants {max_variants}: not run: {', '.join(dropped)}")
    accepted, backend = backend_options
    return Plan(kernel_file, kernel["name"], launch, spec, unique[:max(1, max_variants)], notes, dropped,
                {"backend": backend, "accepted": sorted(accepted) if accepted is not None else None})


def _probe_variants(probe_doc: dict, text: str, kernel: dict, spec: dict, kernel_file: str, flat0: dict,
                    grid0: list | None, work: Path, hip: bool, notes: list) -> list[Variant]:
    if probe_doc.get("kernel") not in (None, kernel["name"]):
        raise InputError(f"the probe JSON is for kernel {probe_doc.get('kernel')!r}, not {kernel['name']!r}")
    names, probe_notes = probe_hint_names(probe_doc)
    notes += probe_notes
    plan = offline_compile.plan_compile(kernel, launch=offline_compile.launch_from_standalone_spec(spec))
    out = []
    jit_pointer_range = spec.get("launch") != "inductor" and _triton_at_least((3, 6))
    for name in names:
        parts = [p.strip() for p in name.split("+") if p.strip()]
        pointer_range = False
        if "pointer_range" in parts:
            parts = [p for p in parts if p != "pointer_range"]
            if spec.get("launch") == "inductor" and hip:
                pointer_range = True       # Inductor passes triton_meta attributes: a real edit
            elif jit_pointer_range:
                notes.append(f"probe variant {name}: tt.pointer_range=32 is what a JIT launch on Triton >= 3.6 "
                             "already adds for tensors under 2 GiB (AMD, buffer ops on), so the captured "
                             "winner has it; no separate variant")
            elif spec.get("launch") == "inductor":
                notes.append(f"probe variant {name}: tt.pointer_range acts on AMD (HIP) only; not swept here")
            else:
                notes.append(f"probe variant {name}: tt.pointer_range is a compile attribute that a JIT launch "
                             "before Triton 3.6 cannot be given; not swept")
        if not parts and not pointer_range:
            continue
        if [p for p in parts if p not in SOURCE_HINTS and p not in ENV_HINTS]:
            continue  # the probe's block/warp variants are already among the config variants
        env: dict = {}
        for p in parts:
            env.update(ENV_HINTS.get(p, {}))
        if env and not hip:
            notes.append(f"probe variant {name}: {probe_variants.BUFFER_OPS_ENV} acts on AMD (HIP) only; not swept here")
            continue
        source_parts = [p for p in parts if p in SOURCE_HINTS]
        label = "+".join((["pointer_range"] if pointer_range else []) + parts)
        if env:
            notes.append(f"{label}: {probe_variants.BUFFER_OPS_ENV} is set in the worker before the compile; Triton <= 3.3 "
                         "reads it at import, so there this variant compiles like the baseline")
        if not source_parts and not pointer_range:
            out.append(Variant(label, "env", f"environment {env}", dict(flat0), grid0, kernel_file, env=env))
            continue
        new_text, descriptions, claims = text, [], []
        if source_parts:
            derived = probe_variants.build_variants(["+".join(source_parts)], kernel, text, plan)[0]
            if derived.skipped:
                notes.append(f"probe variant {name}: {derived.skipped}")
                continue
            top = derived.source_lines.get("top", [])
            after = {int(k): v for k, v in derived.source_lines.items() if k != "top"}
            new_text = probe_variants.rewrite_source(text, kernel["name"], top, after)
            descriptions.append(derived.description)
            claims += derived.claims
        if pointer_range:
            # last: the decorator edit is re-located in the already edited text
            edited, why = inductor_pointer_range_edit(new_text, kernel["name"], spec)
            if edited is None:
                notes.append(f"probe variant {name}: pointer_range not applied: {why[0]}")
                continue
            new_text = edited
            descriptions.append("['tt.pointer_range', 32] added to triton_meta for pointers under 2 GiB "
                                "(what Inductor emits on HIP from torch 2.13)")
            claims += why
        out.append(source_variant(label, "; ".join(descriptions), kernel_file, kernel["name"], text, new_text,
                                  flat0, grid0, work, env=env, claims=claims))
    return out


def source_variant(name: str, description: str, kernel_file: str, kernel_name: str, text: str, new_text: str,
                   flat: dict, grid: list | None, work: str | Path, env: dict | None = None,
                   claims: list | None = None) -> Variant:
    """A variant whose kernel source is ``new_text``, written to ``work``, with its diff from ``text``."""
    path = Path(work) / f"{kernel_name}__{re.sub(r'[^A-Za-z0-9_]', '_', name)}.py"
    path.write_text(new_text, encoding="utf-8")
    diff = "".join(difflib.unified_diff(text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                        fromfile=Path(kernel_file).name, tofile=Path(kernel_file).name + " (edited)"))
    return Variant(name, "source", description, dict(flat), grid, str(path), env=env or {}, diff=diff,
                   claims=claims or [])


_ITEM_BYTES = {"float64": 8, "int64": 8, "uint64": 8, "complex64": 8, "float32": 4, "int32": 4, "uint32": 4,
               "float16": 2, "bfloat16": 2, "int16": 2, "uint16": 2}
POINTER_RANGE_LIMIT = 2 ** 31


def inductor_pointer_range_edit(text: str, kernel_name: str, spec: dict) -> tuple[str | None, list[str]]:
    """The kernel's ``triton_meta`` with ``['tt.pointer_range', 32]`` added for pointer arguments
    whose recorded storage is under 2 GiB: what Inductor's ``emit_pointer_range_32`` (torch >= 2.13)
    emits on HIP itself.  (new text or None, claims or the reason it does not apply)."""
    func = probe_variants._function_node(text, kernel_name)
    meta = None
    for dec in func.decorator_list:
        if isinstance(dec, ast.Call):
            meta = next((k.value for k in dec.keywords if k.arg == "triton_meta" and isinstance(k.value, ast.Dict)),
                        meta)
    if meta is None:
        return None, ["no triton_meta dict literal in the decorator"]
    entries = {k.value: v for k, v in zip(meta.keys, meta.values) if isinstance(k, ast.Constant)}
    sig_node, configs_node = entries.get("signature"), entries.get("configs")
    if sig_node is None or not isinstance(configs_node, ast.List) or len(configs_node.elts) != 1:
        return None, ["triton_meta has no signature or not exactly one attribute config"]
    try:
        signature = ast.literal_eval(sig_node)
        configs = ast.literal_eval(configs_node)
    except ValueError:
        return None, ["triton_meta signature/configs are not literals"]
    args = {a.get("name"): a for a in spec.get("args", [])}
    attrs = dict(configs[0])
    claims = []
    for index, (name, dtype) in enumerate(signature.items()):
        if not str(dtype).startswith("*"):
            continue
        desc = args.get(name) or {}
        size = _ITEM_BYTES.get(str(desc.get("dtype")), 1)
        nbytes = int(desc.get("storage_numel") or 0) * size
        if not desc or nbytes >= POINTER_RANGE_LIMIT:
            continue
        hints = [list(h) for h in attrs.get((index,), [])]
        if ["tt.pointer_range", 32] in hints:
            continue
        attrs[(index,)] = hints + [["tt.pointer_range", 32]]
        claims.append(f"{name}: storage of {nbytes} bytes recorded at capture, under 2 GiB, so 32-bit offsets "
                      "from the base reach all of it")
    if not claims:
        return None, ["every pointer already has tt.pointer_range, or none was recorded under 2 GiB"]
    lines = text.splitlines(keepends=True)
    start = sum(len(ln) for ln in lines[:configs_node.lineno - 1]) + configs_node.col_offset
    end = sum(len(ln) for ln in lines[:configs_node.end_lineno - 1]) + configs_node.end_col_offset
    ordered = dict(sorted(attrs.items()))
    return text[:start] + repr([ordered]) + text[end:], claims


# --------------------------------------------------------------------------- workers

class WorkerProcess:
    """One ``tko.measure.sweep_worker`` process bound to one device; messages come through a reader thread."""

    def __init__(self, slot: str, device_index: int | None, setup: dict, log_path: Path):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if device_index is not None:
            env.update(device_visibility(device_index, env, _hip_build()))
            if _hip_build():
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


# --------------------------------------------------------------------------- results

def _rel(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return abs(a - b) / min(a, b)


def _baseline_block(run: dict) -> dict:
    """The winner's times: its median, the re-time, the noise they give, per-slot medians."""
    base_timing = (run["records"].get("baseline") or {}).get("timing") or {}
    base_ms = base_timing.get("median_ms")
    retime_ms = ((run.get("retime") or {}).get("timing") or {}).get("median_ms")
    retime_rel = _rel(base_ms, retime_ms)
    # half the winner's own p20-p80 range: two back-to-back medians agree far better than two
    # processes do (0.01-0.3 % vs 0.3-0.9 % between runs on an H200), so the retime alone flatters
    spread_rel = ((base_timing["p80_ms"] - base_timing["p20_ms"]) / (2 * base_ms)
                  if base_ms and base_timing.get("p20_ms") is not None and base_timing.get("p80_ms") is not None
                  else None)
    known = [n for n in (retime_rel, spread_rel) if n is not None]
    noise = max(known) if known else None
    # the winner as timed by each worker on its own device (several workers), else the one timing
    slot_base = {s["slot"]: (s.get("baseline") or {}).get("median_ms") for s in run["slots"]}
    slot_medians = [v for v in slot_base.values() if v]
    device_spread = (max(slot_medians) - min(slot_medians)) / min(slot_medians) if len(slot_medians) > 1 else None
    return {"median_ms": base_ms, "retime_median_ms": retime_ms, "noise_rel": noise,
            "retime_rel": retime_rel, "spread_rel": spread_rel,
            "retime_slot": (run.get("retime") or {}).get("slot"),
            "per_slot_ms": {k: v for k, v in slot_base.items() if v}, "device_spread_rel": device_spread}


def _shared_notes(devices: list, workers_per_device: int) -> list[str]:
    shared = []
    if len(devices) > 1:
        shared.append(f"variants ran on {len(devices)} devices: each is compared with the winner timed on its "
                      "own device (x vs baseline), and ranked by that ratio")
    if workers_per_device > 1:
        shared.append(f"{workers_per_device} workers shared each device, so timings may overlap other "
                      "variants' runs; use --workers-per-device 1 for final numbers")
    return shared


def _variant_row(v: Variant, rec: dict | None, base: dict, num_bytes, peak, interpret: bool) -> dict:
    """One variant's row: its status, timing and the ratio to the winner timed on its device."""
    from .bench import gb_per_s
    from . import peaks

    base_ms, noise = base["median_ms"], base["noise_rel"]
    rec = rec or {"passed": False, "error": "not run (no worker took it)"}
    timing = rec.get("timing")
    ms = (timing or {}).get("median_ms")
    status = "ok" if rec.get("passed") and timing else ("error" if rec.get("error") else "failed")
    ref_ms = base["per_slot_ms"].get(rec.get("slot")) or base_ms
    row = v.to_json()
    row.update(status=status, check=rec.get("check"), error=rec.get("error"), timing=timing,
               median_ms=ms, p20_ms=(timing or {}).get("p20_ms"), p80_ms=(timing or {}).get("p80_ms"),
               baseline_ms_same_device=ref_ms,
               x_vs_baseline=(ref_ms / ms) if ms and ref_ms else None,
               gb_per_s=gb_per_s(num_bytes, ms) if not interpret else None,
               slot=rec.get("slot"), device_index=rec.get("device_index"), device_name=rec.get("device_name"),
               seconds=rec.get("seconds"), phase_s=rec.get("phase_s"))
    row["pct_of_copy_peak"] = peaks.percent_of_peak(row["gb_per_s"], peak)
    row["within_noise"] = (v.name != "baseline" and ms is not None and noise is not None
                           and _rel(ms, ref_ms) is not None and _rel(ms, ref_ms) <= noise)
    row["reason"] = (rec.get("check") or {}).get("reason") if status == "failed" else rec.get("error")
    return row


def _rank(rows: list[dict], base_ms: float | None, noise: float | None) -> dict:
    """Rank the rows that ran (times on the winner's scale); the errors are listed as excluded."""
    from .bench import rank_variants

    def on_baseline_scale(r: dict, key: str):
        # a time measured on another device, scaled by how the winner ran there
        value, ref = r[key], r["baseline_ms_same_device"]
        return value * base_ms / ref if value is not None and ref and base_ms else value

    ranking = rank_variants([{"name": r["name"], "passed": r["status"] == "ok",
                              "median_ms": on_baseline_scale(r, "median_ms"), "p20_ms": on_baseline_scale(r, "p20_ms"),
                              "p80_ms": on_baseline_scale(r, "p80_ms"),
                              "reason": r["reason"] if r["status"] == "failed" else None} for r in rows
                             if r["status"] != "error"], noise_rel=noise or 0.0)
    for r in rows:
        if r["status"] == "error":
            ranking["excluded"].append({"name": r["name"], "reason": "error: " + str(r["error"])})
    return ranking


def _best_and_summary(plan: Plan, rows: list[dict], best_name, noise: float | None,
                      interpret: bool) -> tuple[bool, dict]:
    """Whether the best is within noise of the winner, and the summary block."""
    best = next((r for r in rows if r["name"] == best_name), None)
    within_noise = bool(best and best_name != "baseline" and noise is not None and best["x_vs_baseline"]
                        and best["x_vs_baseline"] - 1.0 <= noise)
    ok = [r for r in rows if r["status"] == "ok"]
    best_text = str(best_name) + (f" ({best['x_vs_baseline']:.3f}x baseline" + (", within noise" if within_noise else "")
                                  + ")" if best and best.get("x_vs_baseline") else "")
    if interpret:
        best_text += " [interpreter: not a performance number]"
    counts = {k: sum(1 for r in rows if r["status"] == k) for k in ("ok", "failed", "error")}
    summary = {"text": f"{len(plan.variants)} variants, {len(ok)} passed and timed, "
                       f"{len(rows) - len(ok)} failed or errored; best {best_text}",
               "variants": len(plan.variants), "status_counts": counts, "best": best_text, "noise_rel": noise}
    return within_noise, summary


def assemble(plan: Plan, run: dict, *, devices: list, workers_per_device: int, warmup_ms: float, rep_ms: float,
             interpret: bool, wall_s: float, compile_info: dict | None, probe_file: str | None) -> dict:
    from . import peaks

    num_bytes = plan.spec.get("num_bytes")
    base = _baseline_block(run)
    noise = base["noise_rel"]
    first_slot = next((s for s in run["slots"] if s.get("device_name")), {})
    peak = None
    if not interpret and first_slot:
        peak = peaks.lookup(first_slot["device_name"], first_slot.get("device_arch"))
    rows = [_variant_row(v, run["records"].get(v.name), base, num_bytes, peak, interpret) for v in plan.variants]
    ranking = _rank(rows, base["median_ms"], noise)
    best_name = ranking["best"]
    within_noise, summary = _best_and_summary(plan, rows, best_name, noise, interpret)
    return {
        "kernel_file": plan.kernel_file,
        "kernel": plan.kernel,
        "launch": plan.launch,
        "probe_file": probe_file,
        "captured_device": plan.spec.get("device") or {},
        "backend_options": plan.backend_options,
        "devices": [{"index": d} for d in devices] if not interpret else [{"index": None, "name": "cpu"}],
        "workers_per_device": workers_per_device,
        "slots": run["slots"],
        "interpreter": interpret,
        "timer": INTERPRETER_TIMER if interpret else "triton.testing.do_bench (median, p20, p80)",
        "warmup_ms": warmup_ms,
        "rep_ms": rep_ms,
        "num_bytes": num_bytes,
        "peak": peak,
        "compile": compile_info,
        "variants": rows,
        "ranking": ranking,
        "baseline": base,
        "best": {"name": best_name, "within_noise": within_noise, "file": None, "apply": None},
        "notes": plan.notes + _shared_notes(devices, workers_per_device)
        + ([f"timing: {INTERPRETER_TIMER}; the ranking is only a test of the path"] if interpret else []),
        "wall_s": round(wall_s, 3),
        "timing_s": run.get("timing_s"),
        "summary": summary,
        "cases": [{k: r[k] for k in ("name", "status", "median_ms", "x_vs_baseline", "gb_per_s")} for r in rows],
    }


def how_to_apply(row: dict, plan: Plan) -> str:
    if row["kind"] == "baseline" and launch_advice.is_plain_launch(plan.spec):
        return f"keep the launch at {launch_advice.site_text(plan.spec)} as it is"
    if row["kind"] == "baseline":
        return "keep the captured config: " + config_text(plan.variants[0].flat)
    if row["kind"] == "config" and launch_advice.is_plain_launch(plan.spec):
        base = plan.variants[0]
        return launch_advice.launch_text(plan.spec, row["config"], base.flat, row.get("grid"), base.grid,
                                         row.get("x_vs_baseline"))
    if row["kind"] == "config":
        text = "pin " + config_text(row["config"])
        if plan.launch == "inductor":
            # an Inductor kernel's configs are generated, not written by the user; its own
            # coordinate-descent tuner walks the same neighbourhood (block sizes x2 and /2,
            # num_warps; num_stages for matmuls) from the winner and keeps what is faster
            text += (" (an Inductor kernel: set torch._inductor.config.coordinate_descent_tuning = True, "
                     "or TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1, and check in a new capture that its "
                     "winner became this config; or use the best-variant file for a hand-written copy)")
            if larger_reduction_block(row["config"], plan.variants[0].flat):
                text += ("; note: the sweep timed it with Inductor's dynamic R0_BLOCK halving off, which in "
                         "a program (TORCHINDUCTOR_DYNAMIC_SCALE_RBLOCK=1, the default) adds a config with "
                         "R0_BLOCK halved when registers limit occupancy and keeps the faster of the two")
        return text
    if row["kind"] == "env":
        return "set " + " ".join(f"{k}={v}" for k, v in row["env"].items()) + " in the environment"
    return "apply this source edit:\n" + (row["source_diff"] or "")


def larger_reduction_block(config: dict, winner: dict) -> bool:
    """A reduction config with a larger R*_BLOCK, or a larger XBLOCK next to one, than the winner's."""
    rkeys = [k for k in config if k.startswith("R") and k.endswith("_BLOCK")]
    if not rkeys:
        return False
    return any(isinstance(config.get(k), int) and isinstance(winner.get(k), int) and config[k] > winner[k]
               for k in rkeys + ["XBLOCK"])


def write_best(plan: Plan, payload: dict, path: str | Path) -> str | None:
    """The standalone file with the best variant's source and config; saved inputs by absolute path."""
    name = payload["best"]["name"]
    if name is None:
        return None
    variant = next(v for v in plan.variants if v.name == name)
    text = Path(variant.file).read_text(encoding="utf-8")
    spec = json.loads(json.dumps(plan.spec))
    here = os.path.dirname(plan.kernel_file)
    for desc in spec["args"]:
        if desc.get("saved"):
            desc["saved"] = os.path.join(here, desc["saved"])
    spec["configs"] = [{"flat": variant.flat, "grid": variant.grid}] + [
        c for c in spec["configs"][1:] if c.get("flat") != variant.flat]
    text = standalone.replace_spec(text, spec)
    if variant.env:
        # first, before triton is imported: some Triton versions read these at import
        line = f"__import__(\"os\").environ.update({variant.env!r})  # the sweep's best variant needs this\n"
        futures = list(re.finditer(r"^from\s+__future__\s+import\s+.*$", text, re.M))
        cut = futures[-1].end() + 1 if futures else 0
        text = text[:cut] + line + text[cut:]
    from ..base.atomic import write_text

    write_text(path, text)
    row = next(r for r in payload["variants"] if r["name"] == name)
    payload["best"]["file"] = str(Path(path).resolve())
    payload["best"]["apply"] = how_to_apply(row, plan)
    if payload["best"]["within_noise"]:
        payload["best"]["apply"] = ("within the noise of the captured winner: re-measure before changing "
                                    "anything; if it holds, " + payload["best"]["apply"])
    return str(path)


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(payload: dict) -> str:
    from ..base import markdown as md

    interp = payload["interpreter"]
    lines = [f"# Variant sweep: {md.code(payload['kernel'])}", "",
             f"Kernel file {md.code(payload['kernel_file'])} ({md.text(payload['launch'])} launch). Timer: {payload['timer']}, "
             f"warm-up {payload['warmup_ms']:g} ms, rep {payload['rep_ms']:g} ms, the same for every variant. "
             f"{len(payload['slots'])} worker(s) over {len(payload['devices'])} device(s); wall time "
             f"{payload['wall_s']:.1f} s, of which timing {_fmt(payload.get('timing_s'), '.1f')} s.", ""]
    if interp:
        lines += ["**Interpreter run (TRITON_INTERPRET=1): the times below are not performance numbers.**", ""]
    b = payload["baseline"]
    pct = lambda v: _fmt(None if v is None else 100 * v, ".2f")  # noqa: E731
    lines += [f"Baseline {_fmt(b['median_ms'], '.4f')} ms, re-timed at the end {_fmt(b['retime_median_ms'], '.4f')} ms"
              f" ({pct(b.get('retime_rel'))}%); half its p20-p80 range {pct(b.get('spread_rel'))}%: noise "
              f"{pct(b['noise_rel'])}%, the larger. Differences inside the noise are marked `~`."]
    if b.get("per_slot_ms"):
        lines[-1] += (" Each worker timed the winner on its own device first ("
                      + ", ".join(f"{k} {v:.4f} ms" for k, v in sorted(b["per_slot_ms"].items()))
                      + f"; spread {pct(b.get('device_spread_rel'))}%); x vs baseline compares on the same device.")
    lines.append("")
    lines += ["| rank | variant | ms (p20-p80) | x vs baseline | GB/s | % copy peak | check | device |",
              "|---|---|---|---|---|---|---|---|"]
    ranks = {r["name"]: r for r in payload["ranking"]["ranked"]}
    order = [r["name"] for r in payload["ranking"]["ranked"]] + [
        v["name"] for v in payload["variants"] if v["name"] not in ranks]
    rows = {v["name"]: v for v in payload["variants"]}
    for name in order:
        v = rows[name]
        r = ranks.get(name)
        check = "pass" if v["status"] == "ok" else f"**{md.text(v['status'])}**: " + md.text(v.get("reason"), 140)
        x = _fmt(v["x_vs_baseline"], ".3f") + (" ~" if v.get("within_noise") else "")
        ms = (f"{v['median_ms']:.4f} ({v['p20_ms']:.4f}-{v['p80_ms']:.4f})" if v["median_ms"] else "-")
        lines.append(f"| {r['rank'] if r else '-'} | {md.code(name)} | {ms} | {x} | {_fmt(v['gb_per_s'], '.1f')} | "
                     f"{_fmt(v['pct_of_copy_peak'], '.1f')} | {check} | "
                     f"{md.text(v.get('device_name') or '-')} {md.text(v.get('slot') or '')} |")
    best = payload["best"]
    lines += ["", f"## Best: {md.code(best['name'])}" + (" (within noise of the baseline)" if best["within_noise"] else ""), ""]
    if best.get("file"):
        lines.append(f"Runnable file: {md.code(best['file'])}")
    if best.get("apply"):
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", best["apply"])), default=0))
        lines += ["", fence + "diff" if "apply this source edit" in best["apply"] else fence,
                  best["apply"], fence]
    if payload["notes"]:
        lines += ["", "## Notes", ""] + [f"- {md.text(n)}" for n in payload["notes"]]
    return "\n".join(lines) + "\n"
