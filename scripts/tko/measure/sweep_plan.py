"""The plan of a config sweep: the kernel file read, and the variants worth timing (block sizes the
grid allows, warps and stages, backend options, the source hints a compile probe found useful),
each with its config, grid, environment and source."""


from __future__ import annotations

import ast
import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compile import offline_compile, probe_variants
from ..read import kernel_source, triton_stack
from ..base.config import TritonConfig, is_block_key
from ..base.errors import InputError

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


def recorded_grid_moves(config: Any) -> dict[str, list[int]]:
    """A standalone config's ``grid_moves`` (the program's grid per block move), the well-formed
    entries only: a name and a list of positive ints each."""
    moves = config.get("grid_moves") if isinstance(config, dict) else None
    if not isinstance(moves, dict):
        return {}
    return {k: list(v) for k, v in moves.items() if isinstance(k, str) and isinstance(v, list) and v
            and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v)}


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


def hip_build() -> bool:
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
                    notes: list, moves: dict | None = None) -> list[Variant]:
    """Each block size x2 and /2 (the grid rescaled where the block drives it), alone and with
    num_warps scaled alike. ``moves``: the program's own grid per move, evaluated at capture from
    its grid function (``kernel[lambda META: ...]``); it beats any rule of ours."""
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
            grid, recorded = grid0, (moves or {}).get(f"{key}={new}")
            if recorded:
                grid = list(recorded)
            elif launch == "inductor":
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
                desc += f"; grid {grid0} -> {grid}" + (" (the program's grid function)" if recorded else "")
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
    hip = hip_build() if hip is None else hip
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

    variants += _block_variants(kernel, launch, flat0, grid0, kernel_file, notes, recorded_grid_moves(winner))
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


