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

import json
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import archs, subproc
from ..read import kernel_source, triton_stack
from . import offline_compile
from .probe_variants import (BUFFER_OPS_ENV, Variant, build_variants, rewrite_source)

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


