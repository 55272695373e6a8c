"""Compile probes: one kernel, several targets, several hint/config variants, no kernel launch.

The compiles run in worker processes (``tko.compile.offline_compile`` worker mode), a few compiles to a
process (each imports torch and Triton once), as many processes as CPUs at most, each compile under
a timeout and with a fresh Triton cache of its own: a shared cache could hand back a kernel compiled
under another setting. Tritons up to 3.3 read ``AMDGCN_USE_BUFFER_OPS`` at import time, so there the
variants that set it get processes of their own. A compile stored before from the same inputs
(``tko.compile.compile_cache``) is read back instead; IR line info then names the file of that compile.

Variants (``build_variants``):

- ``baseline``: hints as captured (triton_meta attrs; hand-written: tt.divisibility=16 on pointers);
- ``buffer_ops_on`` / ``buffer_ops_off``: ``AMDGCN_USE_BUFFER_OPS=1`` / ``=0``;
- ``pointer_range``: ``tt.pointer_range=32`` on every pointer argument;
- ``assume``: ``tl.assume(<arg> >= 0)`` for each integer scalar argument (offsets, strides, numels),
  inserted at the top of the kernel body;
- ``multiple_of``: ``tl.multiple_of`` / ``tl.max_contiguous`` on offsets that are provably
  ``program_id * BLOCK (+ arange(0, BLOCK))``; every claim is listed;
- ``blocks``: each block-size constexpr of the config x2 and /2, one at a time;
- ``warps``: num_warps x2 and /2;
- ``options`` (or one option's name, e.g. ``waves_per_eu``): each value of ``backend_option_values``
  (references/decision_rules.yaml) of every backend compile option the compiling backend accepts
  (``tko.read.triton_stack``: ``waves_per_eu``, ``matrix_instr_nonkdim``, ``kpack`` on a HIP backend, the
  HCU ones on an HCU backend); a target whose backend lacks the option skips that compile, saying why.

Variants combine with ``+`` (``pointer_range+assume``).
"""

from __future__ import annotations

import ast
import json
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import archs, subproc
from ..read import kernel_source, triton_stack
from . import offline_compile
from ..base.config import BACKEND_OPTIONS
from ..base.errors import InputError

DEFAULT_VARIANTS = ("baseline", "buffer_ops_on", "buffer_ops_off", "pointer_range", "assume",
                    "multiple_of", "pointer_range+assume", "blocks", "warps")
# What the decision and the sweep read of a probe: which hint turns global loads into buffer loads
# (references/decision_rules.yaml: probe_buffer_variant) and which hints change the ISA (tko.measure.sweep
# sweeps those); the block and warp variants add nothing there (the sweep times configs itself).
HINT_VARIANTS = ("baseline", "buffer_ops_on", "buffer_ops_off", "pointer_range", "assume", "multiple_of",
                 "pointer_range+assume")
BASIC_VARIANTS = ("baseline", "buffer_ops_on", "buffer_ops_off", "pointer_range", "assume",
                  "multiple_of", "blocks", "warps", "options") + triton_stack.TUNABLE_NAMES
BUFFER_OPS_ENV = "AMDGCN_USE_BUFFER_OPS"
# Older Hygon Triton forks (the FlagTree hcu backend based on Triton 3.0/3.1) read this name instead.
HYGON_BUFFER_OPS_ENV = "HCUGCN_USE_BUFFER_OPS"
INT_TYPES = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}


@dataclass
class Variant:
    name: str
    description: str
    env: dict = field(default_factory=dict)
    pointer_range: int | None = None
    config: dict | None = None
    source_lines: dict = field(default_factory=dict)   # {"top": [...], after_line: [...]}
    claims: list = field(default_factory=list)
    skipped: str | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "description": self.description, "env": self.env,
                "pointer_range": self.pointer_range, "config": self.config,
                "inserted": {str(k): v for k, v in self.source_lines.items()},
                "claims": self.claims, "skipped": self.skipped}


# --------------------------------------------------------------------------- source edits

def _function_node(text: str, name: str) -> ast.FunctionDef:
    tree = kernel_source.parse_source(text)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise InputError(f"function {name} not found")


def assume_lines(kernel: dict, plan_signature: dict) -> tuple[list[str], list[str]]:
    """``tl.assume(x >= 0)`` for integer scalar arguments that stay runtime values."""
    lines, claims = [], []
    for param in kernel["params"]:
        dtype = plan_signature.get(param["name"], "")
        if dtype in INT_TYPES:
            lines.append(f"tl.assume({param['name']} >= 0)")
            claims.append(f"{param['name']} >= 0 (an offset, stride or element count: assumed "
                          f"non-negative, true for tensor shapes and strides)")
    return lines, claims


class _BlockFacts:
    """What the kernel body so far proves: which names hold program_id, which a multiple of a BLOCK."""

    def __init__(self, constexprs: set[str]):
        self.constexprs = constexprs
        self.pid_vars: set[str] = set()
        self.block_multiple: dict[str, str] = {}     # var -> BLOCK it is a multiple of

    def is_pid(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.pid_vars
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name.endswith("program_id"):
                return True
            if name.endswith(".to") and isinstance(node.func, ast.Attribute):
                return self.is_pid(node.func.value)
        return False

    def multiple_of_block(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.block_multiple.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if isinstance(b, ast.Name) and b.id in self.constexprs and self.is_pid(a):
                    return b.id
        return None


def _arange_block(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("arange") \
            and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) \
            and node.args[0].value == 0 and isinstance(node.args[1], ast.Name):
        return node.args[1].id
    return None


def _hint_values(node: ast.AST, block: str) -> str | None:
    """``BLOCK`` for a 1-D range; ``[BLOCK, 1]`` for ``arange(...)[:, None]`` (one value per dim)."""
    if not isinstance(node, ast.Subscript):
        return block
    dims = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values = []
    for dim in dims:
        if isinstance(dim, ast.Slice):
            values.append(block)
        elif isinstance(dim, ast.Constant) and dim.value is None:
            values.append("1")
        else:
            return None
    return values[0] if len(values) == 1 else "[" + ", ".join(values) + "]"


def _contiguous_range(facts: _BlockFacts, target: str, value: ast.AST) -> tuple[str, str] | None:
    """(hint line, claim) for ``target = multiple_of_BLOCK + arange(0, BLOCK)``, else None."""
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return None
    for a, b in ((value.left, value.right), (value.right, value.left)):
        block_a, block_r = facts.multiple_of_block(a), _arange_block(b)
        if block_a and block_a == block_r:
            values = _hint_values(b, block_a)
            if values is None:
                continue
            return (f"{target} = tl.max_contiguous(tl.multiple_of({target}, {values}), {values})",
                    f"{target} = {ast.unparse(value)}: starts at a multiple of {block_a} "
                    f"and runs {block_a} contiguous elements")
    return None


def multiple_of_lines(text: str, kernel: dict) -> tuple[dict, list[str]]:
    """Insert hints only where the claim follows from the code: program_id * BLOCK (+ arange)."""
    func = _function_node(text, kernel["name"])
    facts = _BlockFacts({p["name"] for p in kernel["params"] if p["kind"] == "constexpr"})
    inserts: dict[int, list[str]] = {}
    claims: list[str] = []
    for stmt in func.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            continue
        target, value = stmt.targets[0].id, stmt.value
        if facts.is_pid(value):
            facts.pid_vars.add(target)
            continue
        block = facts.multiple_of_block(value)
        if block:
            facts.block_multiple[target] = block
            inserts.setdefault(stmt.end_lineno, []).append(f"{target} = tl.multiple_of({target}, {block})")
            claims.append(f"{target} = {ast.unparse(value)} is program_id * {block}: a multiple of {block}")
            continue
        hinted = _contiguous_range(facts, target, value)
        if hinted:
            inserts.setdefault(stmt.end_lineno, []).append(hinted[0])
            claims.append(hinted[1])
    return inserts, claims


def rewrite_source(text: str, kernel_name: str, top: list[str], after: dict[int, list[str]]) -> str:
    """Insert statements at the top of a function body and after given lines (same indentation)."""
    func = _function_node(text, kernel_name)
    lines = text.splitlines(keepends=True)
    first = func.body[0]
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str) and len(func.body) > 1):
        first = func.body[1]  # keep a docstring first
    stmt_at_line = {s.end_lineno: s for s in ast.walk(func) if isinstance(s, ast.stmt)}
    edits: list[tuple[int, list[str]]] = []
    if top:
        indent = " " * first.col_offset
        edits.append((first.lineno - 1, [f"{indent}{ln}\n" for ln in top]))
    for end_line, new in after.items():
        stmt = stmt_at_line[end_line]
        indent = " " * stmt.col_offset
        edits.append((end_line, [f"{indent}{ln}\n" for ln in new]))
    for index, new in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[index:index] = new
    return "".join(lines)


# --------------------------------------------------------------------------- variants

def _config_with(base: dict, **changes: Any) -> dict:
    cfg = {"kwargs": dict(base.get("kwargs") or {}), "num_warps": base.get("num_warps"),
           "num_stages": base.get("num_stages"), "extras": dict(base.get("extras") or {})}
    for key, value in changes.items():
        if key in ("num_warps", "num_stages"):
            cfg[key] = value
        elif key in BACKEND_OPTIONS:
            cfg["extras"][key] = value
        else:
            cfg["kwargs"][key] = value
    return cfg


def option_variants(name: str, plan: offline_compile.CompilePlan, offered: dict | None,
                    left_out: str | None) -> list[Variant]:
    """``options``: a compile per value of every offered backend option; an option's own name: its
    values only (a skipped variant saying why when no target's backend offers it)."""
    offered = offered or {}
    wanted = list(offered) if name == "options" else [name]
    out = []
    for option in wanted:
        if option not in offered:
            why = (left_out or "").replace("backend options left out: ", "") or "no target's backend offers it"
            out.append(Variant(option, f"backend option {option}", skipped=f"not offered: {why}"))
            continue
        for value in offered[option]:
            out.append(Variant(f"{option}={value}", f"backend compile option {option}={value!r}",
                               config=_config_with(plan.config, **{option: value})))
    return out


def _single(name: str, kernel: dict, text: str, plan: offline_compile.CompilePlan,
            options: tuple[dict, str | None] | None = None) -> list[Variant]:
    if name == "options" or name in triton_stack.TUNABLE_NAMES:
        return option_variants(name, plan, *(options or ({}, None)))
    if name == "baseline":
        return [Variant("baseline", "the kernel as captured: hints from its triton_meta "
                        "(hand-written: tt.divisibility=16 on pointers); buffer-op switch as in the "
                        "environment")]
    if name == "buffer_ops_on":
        return [Variant(name, f"{BUFFER_OPS_ENV}=1", env={BUFFER_OPS_ENV: "1", HYGON_BUFFER_OPS_ENV: "1"})]
    if name == "buffer_ops_off":
        return [Variant(name, f"{BUFFER_OPS_ENV}=0", env={BUFFER_OPS_ENV: "0", HYGON_BUFFER_OPS_ENV: "0"})]
    if name == "pointer_range":
        return [Variant(name, "tt.pointer_range=32 on every pointer argument (what a JIT launch on "
                        "Triton >= 3.6 adds for tensors under 2 GiB)", pointer_range=32)]
    if name == "assume":
        lines, claims = assume_lines(kernel, plan.signature)
        v = Variant(name, "tl.assume(arg >= 0) for integer scalar arguments, at the top of the body",
                    source_lines={"top": lines} if lines else {}, claims=claims)
        if not lines:
            v.skipped = "no integer scalar argument to assume on"
        return [v]
    if name == "multiple_of":
        inserts, claims = multiple_of_lines(text, kernel)
        v = Variant(name, "tl.multiple_of / tl.max_contiguous where program_id * BLOCK (+ arange) "
                    "makes the claim true", source_lines=dict(inserts), claims=claims)
        if not inserts:
            v.skipped = "no offset of the form program_id * BLOCK (+ tl.arange(0, BLOCK)) to annotate"
        return [v]
    if name == "blocks":
        out = []
        for key, value in sorted(plan.config.get("kwargs", {}).items()):
            if not isinstance(value, int) or "BLOCK" not in key.upper() or key not in plan.signature:
                continue
            for factor, label in ((2, "x2"), (0.5, "/2")):
                new = int(value * factor)
                if new < 1 or new == value:
                    continue
                v = Variant(f"{key}={new}", f"{key} {label} ({value} -> {new})",
                            config=_config_with(plan.config, **{key: new}))
                if key in offline_compile.REDUCTION_BLOCKS and \
                        (kernel.get("heuristic") or {}).get("kind") == "persistent_reduction" and new < value:
                    v.claims.append(f"{key} below the reduction size: compiles, but a persistent "
                                    f"reduction then covers only part of each row")
                out.append(v)
        return out
    if name == "warps":
        warps = int(plan.config.get("num_warps") or plan.options.get("num_warps") or 4)
        out = []
        for new, label in ((warps * 2, "x2"), (warps // 2, "/2")):
            if 1 <= new <= 16 and new != warps:
                out.append(Variant(f"num_warps={new}", f"num_warps {label} ({warps} -> {new})",
                                   config=_config_with(plan.config, num_warps=new)))
        return out
    raise InputError(f"unknown variant {name!r}; choose from {', '.join(BASIC_VARIANTS)} "
                     f"(combine with '+', e.g. pointer_range+assume)")


def build_variants(names: list[str], kernel: dict, text: str, plan: offline_compile.CompilePlan,
                   options: tuple[dict, str | None] | None = None) -> list[Variant]:
    """The variants named; ``options`` = (offered backend options, left-out line) of
    :func:`offered_for_targets` for the option variants."""
    out: list[Variant] = []
    for spec in names:
        parts = [p.strip() for p in spec.split("+") if p.strip()]
        if not parts:
            continue
        if len(parts) == 1:
            out.extend(_single(parts[0], kernel, text, plan, options))
            continue
        combined = Variant("+".join(parts), "", env={})
        descriptions = []
        for part in parts:
            singles = _single(part, kernel, text, plan, options)
            if len(singles) != 1:
                raise InputError(f"variant {part!r} expands to several compiles; it cannot be combined")
            single = singles[0]
            descriptions.append(single.description)
            combined.env.update(single.env)
            combined.pointer_range = single.pointer_range or combined.pointer_range
            combined.config = single.config or combined.config
            for key, lines in single.source_lines.items():
                combined.source_lines.setdefault(key, []).extend(lines)
            combined.claims += single.claims
            if single.skipped:
                combined.skipped = single.skipped
        combined.description = "; ".join(descriptions)
        out.append(combined)
    seen, unique = set(), []
    for v in out:
        if v.name not in seen:
            seen.add(v.name)
            unique.append(v)
    return unique


# --------------------------------------------------------------------------- running

@dataclass
class Job:
    variant: Variant
    arch: str
    path: str
    out_dir: Path

    def spec(self, kernel_name: str, base_spec: dict) -> dict:
        """The worker spec: what to compile, where, and the settings over the environment (the
        variant's, and a Triton cache of its own: a shared one could hand back a kernel compiled
        under another setting)."""
        spec = dict(base_spec, path=self.path, arch=self.arch, kernel=kernel_name, out_dir=str(self.out_dir))
        if self.variant.config is not None:
            spec["config"] = self.variant.config
        if self.variant.pointer_range:
            spec["pointer_range"] = self.variant.pointer_range
        spec["env"] = dict(self.variant.env, TRITON_CACHE_DIR=str(self.out_dir / "triton_cache"))
        return spec


# A worker process imports torch and Triton once (3-4 s on a 2-core machine), then compiles in
# about 0.3 s each (the recorded H200 pointwise kernel for gfx942): a second process pays for its
# import only past about a dozen compiles.
COMPILES_PER_WORKER = 12


def _import_time_env(variant: Variant) -> tuple:
    """The settings a worker process must start with: Tritons up to 3.3 read the buffer-op switch
    at import, later ones at each compile (so one process serves every variant)."""
    version = offline_compile.parse_version(offline_compile.package_version("triton"))
    return tuple(sorted(variant.env.items())) if version and version < (3, 4) else ()


def _batches(jobs: list[Job], workers: int) -> list[tuple[dict, list[Job]]]:
    """(process environment, jobs) per worker process: jobs that need the same environment at
    import share processes, at least COMPILES_PER_WORKER to a process, at most ``workers`` each."""
    groups: dict[tuple, list[Job]] = {}
    for job in jobs:
        groups.setdefault(_import_time_env(job.variant), []).append(job)
    out = []
    for env, group in groups.items():
        n = max(1, min(workers, -(-len(group) // COMPILES_PER_WORKER)))
        out += [(dict(env), group[i::n]) for i in range(n)]
    return out


def _run_batch(env: dict, jobs: list[Job], kernel_name: str, base_spec: dict, timeout: float) -> subproc.Completed:
    """One worker process compiling ``jobs`` in turn; each leaves its result.json."""
    paths = []
    for job in jobs:
        job.out_dir.mkdir(parents=True, exist_ok=True)
        spec_path = job.out_dir / "spec.json"
        spec_path.write_text(json.dumps(job.spec(kernel_name, base_spec), default=str), encoding="utf-8")
        paths.append(spec_path)
    return subproc.run(offline_compile.worker_command(*paths), timeout=timeout * len(jobs),
                       env=offline_compile.worker_env(env), cwd=str(jobs[0].out_dir))


def _read_result(job: Job, done: subproc.Completed | None, timeout: float) -> dict:
    """The job's result.json, or why its worker left none (a timeout, a crash)."""
    result_file = job.out_dir / "result.json"
    if result_file.exists():
        result = json.loads(result_file.read_text(encoding="utf-8"))
    elif done is not None and done.timed_out:
        return {"ok": False, "error_kind": "Timeout", "error": f"compile did not finish within {timeout:g} s",
                "seconds": round(done.seconds, 2)}
    else:
        tail = [ln for ln in (done.stderr if done else "").splitlines() if ln.strip()][-4:]
        return {"ok": False, "error_kind": "WorkerCrash", "seconds": round(done.seconds, 2) if done else None,
                "error": f"compile process exited {done.returncode if done else '?'} without a result"
                         + (": " + " | ".join(tail) if tail else "")}
    if not result.get("ok") and done is not None:
        diagnostics = offline_compile.stderr_diagnostics(done.stderr)
        if diagnostics:
            result["diagnostics"] = diagnostics
            first, _, rest = str(result.get("error", "")).partition("\n")
            result["error"] = f"{first}: {diagnostics[0]}" + (f"\n{rest}" if rest else "")
    result["buffer_ops_env"] = dict(os.environ, **job.variant.env).get(BUFFER_OPS_ENV)
    return result


def target_backends(arches: list[str]) -> dict[str, tuple[dict | None, str | None]]:
    """``{requested arch: (accepted options, backend)}`` of the installed backend that compiles for
    each target (a DCU arch compiles natively only where an HCU backend is installed)."""
    records = triton_stack.installed_backend_options()
    out = {}
    for arch in arches:
        if arch == offline_compile.LOCAL:
            doc = offline_compile.local_target_doc()
            compiled_for, hip = doc["arch"], doc["backend"] != "cuda"
        else:
            compiled_for, _ = triton_stack.compile_arch(arch)
            hip = not archs.is_nvidia(compiled_for)
        backend = triton_stack.compiling_backend(records, compiled_for, hip)
        out[arch] = (triton_stack.accepted_options(records, backend), backend)
    return out


def offered_for_targets(backends: dict, text: str) -> tuple[dict, str | None]:
    """The backend options some target's backend accepts (values merged over targets) and the line
    saying what was left out and why (of the first target)."""
    offered: dict[str, list] = {}
    lines = []
    for arch, (accepted, backend) in backends.items():
        if backend == "nvidia" or (arch != offline_compile.LOCAL and archs.is_nvidia(arch)):
            continue
        name = None if arch == offline_compile.LOCAL else arch
        got, line = triton_stack.offered_options(accepted, backend, arch=name,
                                                 uses_dot=triton_stack.kernel_uses_dot(text))
        for option, values in got.items():
            offered.setdefault(option, [])
            offered[option] += [v for v in values if v not in offered[option]]
        if line:
            lines.append(f"{arch}: {line}")
    return offered, "; ".join(lines) or None


def _target_skip(variant: Variant, accepted: dict | None, backend: str | None) -> str | None:
    """Why this target's backend cannot take the variant's backend options (None: it can)."""
    extras = (variant.config or {}).get("extras") or {}
    _, line = triton_stack.drop_unaccepted(extras, accepted if accepted is not None else {}, backend)
    return line if extras and line else None


def _progress_line(n: int, total: int, job: Job) -> str:
    result_file = job.out_dir / "result.json"
    try:
        result = json.loads(result_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        result = {}
    how = "stored compile" if result.get("cached") else f"{result.get('seconds', '?')} s"
    return (f"[{n}/{total}] {job.variant.name} for {job.arch}: "
            f"{'ok' if result.get('ok') else 'failed'} ({how})")


def compile_jobs(jobs: list[Job], kernel_name: str, base_spec: dict, timeout: float, workers: int,
                 progress=None) -> list[dict]:
    """Every job's result: a compile stored before is read back, the rest compile in a few
    worker processes; ``progress`` (a callable) gets one line as each job finishes."""
    report = progress or (lambda line: None)
    pending = []
    for job in jobs:
        spec = job.spec(kernel_name, base_spec)
        _, stored = offline_compile.stored_outcome(job.path, job.arch, offline_compile.spec_args(spec),
                                                   job.variant.env)
        if stored is None:
            pending.append(job)
        else:
            offline_compile.write_result(job.out_dir, stored, 0.0, cached=True)
    finished = [job for job in jobs if all(job is not p for p in pending)]
    seen = {id(job) for job in finished}
    for n, job in enumerate(finished, 1):
        report(_progress_line(n, len(jobs), job))
    batches = _batches(pending, workers)
    if batches:
        report(f"compiling {len(pending)} variant(s) in {len(batches)} process(es)")
    done_by: dict[int, subproc.Completed] = {}
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(_run_batch, env, batch, kernel_name, base_spec, timeout): batch
                   for env, batch in batches}
        while futures:
            finished_now, _ = wait(list(futures), timeout=0.5)
            for job in pending:  # as each result.json appears
                if id(job) not in seen and (job.out_dir / "result.json").exists():
                    seen.add(id(job))
                    report(_progress_line(len(seen), len(jobs), job))
            for future in finished_now:
                for job in futures.pop(future):
                    done_by[id(job)] = future.result()
    for job in pending:  # the ones a timeout or a crash left without a result
        if id(job) not in seen:
            seen.add(id(job))
            report(_progress_line(len(seen), len(jobs), job))
    return [_read_result(job, done_by.get(id(job)), timeout) for job in jobs]


def run_probe(kernel_path: str | Path, arches: list[str], *, variant_names: list[str],
              kernel: str | None = None, config: dict | None = None, signature: Any = None,
              launch: dict | None = None, timeout: float = 120.0, workers: int | None = None,
              keep_dir: str | Path | None = None, progress=None) -> dict:
    """Compile every (variant, target) and return the rows of the comparison (not yet scanned);
    ``progress`` (a callable) gets a line as each compile finishes."""
    kernel_path = Path(kernel_path).resolve()
    text, parsed = kernel_source.read_kernel_file(kernel_path)
    chosen = kernel_source.select_kernel(parsed, kernel)
    if launch is None and parsed.get("standalone_spec"):
        launch = offline_compile.launch_from_standalone_spec(parsed["standalone_spec"])
    embedded = parsed.get("embedded_sources", {}).get(chosen["name"])
    if embedded is not None:
        text = embedded  # source edits apply to the embedded kernel; workers get it as its own file
    # Validate the signature/config once, in this process: a bad flag is one error, not N.
    plan = offline_compile.plan_compile(chosen, config=config, signature=signature, launch=launch)
    for arch in arches:
        if arch != offline_compile.LOCAL:
            offline_compile.make_target(arch)  # unknown arch names fail here, once
    backends = target_backends(arches)
    options = offered_for_targets(backends, text)
    variants = build_variants(variant_names, chosen, text, plan, options)

    base_spec = {"config": plan.config if config is None else config, "signature": signature,
                 "launch": launch}
    root_ctx = None
    if keep_dir:
        root = Path(keep_dir).resolve()
        root.mkdir(parents=True, exist_ok=True)
    else:
        root_ctx = tempfile.TemporaryDirectory(prefix="tko_probe_")
        root = Path(root_ctx.name)
    try:
        jobs: list[tuple[Variant, str, Job | None, str | None]] = []
        original = str(kernel_path)
        if embedded is not None:
            original = str(root / f"{chosen['name']}.py")
            Path(original).write_text(embedded, encoding="utf-8")
        for variant in variants:
            path = original
            if variant.source_lines and not variant.skipped:
                top = variant.source_lines.get("top", [])
                after = {int(k): v for k, v in variant.source_lines.items() if k != "top"}
                new_text = rewrite_source(text, chosen["name"], top, after)
                src_dir = root / _safe(variant.name)
                src_dir.mkdir(parents=True, exist_ok=True)
                rewritten = src_dir / Path(original).name
                rewritten.write_text(new_text, encoding="utf-8")
                path = str(rewritten)
            for arch in arches:
                why = variant.skipped or _target_skip(variant, *backends[arch])
                if why:
                    jobs.append((variant, arch, None, why))
                    continue
                out_dir = root / _safe(variant.name) / _safe(arch)
                jobs.append((variant, arch, Job(variant, arch, path, out_dir), None))
        runnable = [job for _, _, job, _ in jobs if job is not None]
        compiled = iter(compile_jobs(runnable, chosen["name"], base_spec, timeout,
                                     max(1, workers or os.cpu_count() or 1), progress))
        results = [next(compiled) if job is not None else None for _, _, job, _ in jobs]
        rows = []
        for (variant, arch, job, why), result in zip(jobs, results):
            row = {"variant": variant.name, "arch": arch, "skipped": why}
            if result is not None:
                row["result"] = result
                if result.get("ok"):
                    row["texts"] = {stage: Path(p).read_text(encoding="utf-8")
                                    for stage, p in result.get("files", {}).items()
                                    if stage in ("amdgcn", "ptx", "ttgir")}
                    if job is not None:
                        row["source_file"] = job.path
            rows.append(row)
        return {"kernel": chosen, "parsed": parsed, "plan": plan, "variants": variants, "rows": rows,
                "work_dir": str(root) if keep_dir else None, "option_note": options[1],
                "backends": {a: {"backend": b, "accepted": sorted(acc) if acc is not None else None}
                             for a, (acc, b) in backends.items()}}
    finally:
        if root_ctx is not None:
            root_ctx.cleanup()


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=+-]", "_", name)


# --------------------------------------------------------------------------- scanning and comparison

LOAD_STORE_FAMILIES = ("buffer_load", "global_load", "flat_load", "buffer_store", "global_store",
                       "flat_store", "buffer_atomic", "global_atomic")


def scan_compiled(texts: dict, arch: str, metadata: dict) -> dict:
    """ISA summary of one compile: the tko.read.isa kernel record of its AMDGCN (or PTX)."""
    from ..read.isa import scan_text

    if texts.get("amdgcn"):
        text, fmt = texts["amdgcn"], "amdgcn"
    elif texts.get("ptx"):
        text, fmt = texts["ptx"], "ptx"
    else:
        return {"verdict": None, "families": {}, "widths": {}, "resources": {}}
    result = scan_text(text, fmt, arch=arch, shared_bytes=metadata.get("shared"),
                       num_warps=metadata.get("num_warps"))
    kernels = result.get("kernels") or []
    name = metadata.get("name")
    chosen = next((k for k in kernels if k.get("name") == name), kernels[0] if kernels else {})
    return {key: chosen.get(key) for key in ("verdict", "families", "widths", "resources",
                                            "occupancy", "findings") if key in chosen}


def width_bits(width: str) -> int:
    """Bits moved per lane by one instruction of this width (dwordx4 -> 128, v4.b32 -> 128)."""
    named = {"ubyte": 8, "sbyte": 8, "byte": 8, "ushort": 16, "sshort": 16, "short": 16,
             "d16": 16, "dword": 32, "dwordx2": 64, "dwordx3": 96, "dwordx4": 128}
    if width in named:
        return named[width]
    vec = re.search(r"v(\d+)", width)
    bits = re.search(r"[bfsu](\d+)", width)
    return (int(vec.group(1)) if vec else 1) * (int(bits.group(1)) if bits else 0)


def _widest(widths: dict, families: tuple[str, ...]) -> str | None:
    seen: dict[str, int] = {}
    for family in families:
        got = widths.get(family) or {}
        if isinstance(got, dict):
            seen.update({w: n for w, n in got.items() if n})
    return max(seen, key=width_bits) if seen else None


# PTX family names of tko.read.isa folded into the AMDGCN-style columns of the table.
PTX_FAMILIES = {"global_load": ("ld_global", "ld_global_nc"), "global_store": ("st_global",),
                "global_atomic": ("atom_global", "red_global")}


# CAS loops (atomics the target cannot do natively, e.g. fp32 add on gfx90a) count as global atomics.
AMD_FAMILIES = {"global_atomic": ("global_atomic", "global_atomic_cas")}


def cell_summary(scan: dict) -> dict:
    fam = scan.get("families") or {}
    widths = scan.get("widths") or {}
    res = scan.get("resources") or {}
    out: dict[str, Any] = {"verdict": scan.get("verdict")}
    ptx = any(k in fam for k in ("ld_global", "st_global"))
    for family in LOAD_STORE_FAMILIES:
        names = PTX_FAMILIES.get(family, ()) if ptx else AMD_FAMILIES.get(family, (family,))
        out[family] = sum(int(fam.get(n, 0) or 0) for n in names)
    load_fams = PTX_FAMILIES["global_load"] if ptx else ("buffer_load", "global_load", "flat_load")
    store_fams = PTX_FAMILIES["global_store"] if ptx else ("buffer_store", "global_store", "flat_store")
    out["load_width"] = _widest(widths, load_fams)
    out["store_width"] = _widest(widths, store_fams)
    for key in ("vgpr", "sgpr", "agpr", "scratch_bytes", "vgpr_spill_count", "registers_declared_total"):
        if key in res:
            out[key] = res[key]
    occupancy = scan.get("occupancy") or {}
    if occupancy.get("waves_per_simd") is not None:
        out["waves_per_simd"] = occupancy["waves_per_simd"]
    return out


REGISTER_KEYS = (("vgpr", "VGPR"), ("waves_per_simd", "waves/SIMD"), ("vgpr_spill_count", "spills"),
                 ("scratch_bytes", "scratch B"))


def register_changes(base: dict, other: dict) -> list[str]:
    """VGPRs, occupancy and spills that differ between two cell summaries."""
    return [f"{label} {base.get(key)} -> {other.get(key)}" for key, label in REGISTER_KEYS
            if base.get(key) != other.get(key)]


def compare_to_baseline(results: list[dict]) -> list[str]:
    """Plain-words changes of verdict / load-store families / width against the baseline."""
    base = {r["arch"]: r for r in results if r["variant"] == "baseline" and r["status"] == "ok"}
    findings = []
    for r in results:
        if r["variant"] == "baseline":
            continue
        if r["status"] != "ok":
            if r["status"] == "error":
                findings.append(f"{r['variant']} on {r['arch']}: compile failed ({r['error'].splitlines()[0]})")
            continue
        b = base.get(r["arch"])
        if b is None:
            continue
        changes = []
        c0, c1 = b["summary"], r["summary"]
        if c0.get("verdict") != c1.get("verdict"):
            changes.append(f"verdict {c0.get('verdict')} -> {c1.get('verdict')}")
        for fam in LOAD_STORE_FAMILIES:
            if c0.get(fam) != c1.get(fam):
                changes.append(f"{fam} {c0.get(fam)} -> {c1.get(fam)}")
        for key in ("load_width", "store_width"):
            if c0.get(key) != c1.get(key):
                changes.append(f"{key.replace('_', ' ')} {c0.get(key)} -> {c1.get(key)}")
        r["changes_vs_baseline"] = changes
        target = r["arch"] + (f" (proxy {r['compiled_for']})" if r["compiled_for"] != r["arch"] else "")
        if changes:
            findings.append(f"{r['variant']} on {target}: {'; '.join(changes)}")
        else:
            findings.append(f"{r['variant']} on {target}: same load/store code as baseline")
        registers = register_changes(c0, c1)
        if registers:
            findings.append(f"{r['variant']} on {target}: registers {'; '.join(registers)}")
    return findings


def assemble(probe: dict, arches: list[str], triton_version: str | None) -> dict:
    """The compile_probe/1 payload."""
    from ..base.archs import normalize

    results = []
    local_doc = None
    if offline_compile.LOCAL in arches:
        local_doc = offline_compile.local_target_doc()

    def resolve(arch: str) -> tuple[str, str, str | None]:
        """(arch as reported, arch compiled for, proxy note)."""
        if arch == offline_compile.LOCAL:
            return local_doc["arch"], local_doc["arch"], None
        name = normalize(arch)
        compiled_for, note = triton_stack.compile_arch(name)
        return name, compiled_for, note

    for row in probe["rows"]:
        arch, compiled_for, _ = resolve(row["arch"])
        entry: dict[str, Any] = {"variant": row["variant"], "arch": arch, "compiled_for": compiled_for}
        if row.get("skipped"):
            entry.update(status="skipped", reason=row["skipped"])
        else:
            result = row.get("result") or {}
            entry["seconds"] = result.get("seconds")
            entry["stored"] = bool(result.get("cached"))
            entry["buffer_ops_env"] = result.get("buffer_ops_env")
            if result.get("ok"):
                outcome = result["outcome"]
                scan = scan_compiled(row.get("texts", {}), compiled_for, outcome["metadata"])
                entry.update(status="ok", metadata=outcome["metadata"], attrs=outcome["attrs"],
                             options=outcome["options"], config=outcome["config"],
                             summary=cell_summary(scan), scan=scan)
                ttgir = row.get("texts", {}).get("ttgir")
                if ttgir:
                    entry["ttgir_buffer_ops"] = len(re.findall(r"\bamdg(?:pu)?\.buffer_\w+", ttgir))
                    entry["ttgir_assumes"] = len(re.findall(r"llvm\.intr\.assume", ttgir))
            else:
                entry.update(status="error", error_kind=result.get("error_kind"),
                             error="\n".join(str(result.get("error", "")).splitlines()[:6]))
                if result.get("diagnostics"):
                    entry["diagnostics"] = result["diagnostics"]
        results.append(entry)
    findings = compare_to_baseline(results)
    if probe.get("option_note"):
        findings.append(probe["option_note"])
    kernel, plan = probe["kernel"], probe["plan"]
    targets = []
    for arch in arches:
        name, compiled_for, note = resolve(arch)
        targets.append({"requested": name, "compiled_for": compiled_for, "proxy_note": note})
        if note:
            findings.insert(0, note)
    payload = {
        "kernel_file": None,
        "kernel": kernel["name"],
        "origin": probe["parsed"]["origin"],
        "triton_version": triton_version,
        "targets": targets,
        "base": {"signature": plan.signature, "constexprs": plan.constexprs, "attrs": plan.attrs,
                 "config": plan.config, "config_source": plan.config_source, "notes": plan.notes},
        "variants": [v.to_json() for v in probe["variants"]],
        "results": results,
        "findings": findings,
        "backend_options": probe.get("backends") or {},
        "scanner": "tko.read.isa",
    }
    return payload


def register_table(payload: dict, header: list[str]) -> list[str]:
    """VGPRs, occupancy (waves per SIMD) and spills of every compile, side by side (AMDGCN only)."""
    from ..base import markdown as md

    by_key = {(r["variant"], r["arch"]): r for r in payload["results"] if r["status"] == "ok"}
    rows = []
    for variant in [v["name"] for v in payload["variants"]]:
        cells = [md.code(variant)]
        for target in payload["targets"]:
            s = (by_key.get((variant, target["requested"])) or {}).get("summary") or {}
            cells.append("" if "vgpr" not in s else
                         f"{s['vgpr']} · {md.text(s.get('waves_per_simd', '-'))} · {s.get('vgpr_spill_count', 0)}"
                         f" ({s.get('scratch_bytes', 0)} B)")
        if any(cells[1:]):
            rows.append(cells)
    if not rows:
        return []
    return (["## Registers", "", "Cells: VGPRs · waves per SIMD · VGPR spills (scratch bytes).", ""]
            + md.table(header, rows) + [""])


def markdown_table(payload: dict) -> str:
    """One row per variant, one column per target: verdict, buffer/global loads and stores, widths."""
    from ..base import markdown as md

    arches = [t["requested"] for t in payload["targets"]]
    header = ["variant"] + [
        md.text(t["requested"] + (f" (as {t['compiled_for']})" if t["proxy_note"] else ""))
        for t in payload["targets"]]
    lines = [f"# Compile probe: {md.code(payload['kernel'])}", "",
             f"Triton {md.text(payload['triton_version'])}; kernel file {md.code(payload['kernel_file'])}; config "
             f"{md.code(json.dumps(payload['base']['config'].get('kwargs')))} num_warps="
             f"{md.text(payload['base']['config'].get('num_warps'))} "
             f"({md.text(payload['base']['config_source'])}).", "",
             "Cells: verdict · loads buffer/global(+flat) · stores buffer/global(+flat) · widest load width"
             " · atomics buffer/global (when any).", ""]
    rows = []
    by_key = {(r["variant"], r["arch"]): r for r in payload["results"]}
    for variant in [v["name"] for v in payload["variants"]]:
        cells = [md.code(variant)]
        for arch in arches:
            r = by_key.get((variant, arch))
            if r is None:
                cells.append("")
            elif r["status"] == "skipped":
                cells.append(f"skipped: {md.text(r['reason'])}")
            elif r["status"] == "error":
                cells.append("**error**: " + md.text((r["error"].splitlines() or [""])[0], 120))
            else:
                s = r["summary"]
                cell = (f"{md.text(s.get('verdict'))} · L {s['buffer_load']}/{s['global_load'] + s['flat_load']}"
                        f" · S {s['buffer_store']}/{s['global_store'] + s['flat_store']}"
                        f" · {md.text(s.get('load_width') or '-')}")
                if s["buffer_atomic"] or s["global_atomic"]:
                    cell += f" · A {s['buffer_atomic']}/{s['global_atomic']}"
                if r.get("changes_vs_baseline"):
                    cell = f"**{cell}**"
                cells.append(cell)
        rows.append(cells)
    lines += md.table(header, rows)
    lines += ["", "Bold: differs from baseline on that target.", ""]
    lines += register_table(payload, header)
    lines += ["## Findings", ""]
    lines += [f"- {md.text(f)}" for f in payload["findings"]] or ["- none"]
    claims = [(v["name"], c) for v in payload["variants"] for c in v["claims"]]
    if claims:
        lines += ["", "## What the source variants claimed", ""]
        lines += [f"- `{name}`: {c}" for name, c in claims]
    return "\n".join(lines) + "\n"
