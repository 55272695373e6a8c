"""Correctness-gated variant sweep of a captured kernel over every visible GPU; writes ``variant_sweep/1``.

    python scripts/sweep_captured_kernel.py KERNEL.py [--probe probe.json] [--devices all|0,1]
        [--workers-per-device N] [--compile-jobs N] [--warmup MS --rep MS] [--max-variants N]
        --json-out sweep.json --markdown-out sweep.md --best-out best_<kernel>.py

KERNEL.py is a standalone file written by autotune_capture_patch.py.  Variants around its captured
winner (block sizes x2 and /2, alone and with num_warps scaled alike, num_warps x2 and /2,
num_stages +/-1 for kernels with a loop,
on AMD / DCU each backend compile option the installed backend's options dataclass has (waves_per_eu;
matrix_instr_nonkdim, kpack for tl.dot kernels; the HCU backend's own options), and the hint variants a
probe_compile.py JSON found to change the ISA) run on
the captured inputs, each checked against the winner's output on the same inputs; only those that
pass are timed (do_bench median, p20, p80) and ranked.  The winner is re-timed at the end: the
difference of its two timings is the noise.  With TRITON_INTERPRET=1 the whole path runs on the CPU
(hand-written kernels; the times are then not performance numbers).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.base.errors import ArgumentParser, InputError, run_main  # noqa: E402
from tko.base.interpreter import interpreter_on  # noqa: E402

TOOL = "sweep_captured_kernel.py"


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=TOOL, example='python scripts/sweep_captured_kernel.py autotune_kernels/triton_poi_fused_add_0.py --json-out sweep.json --markdown-out sweep.md', description=__doc__.split("\n\n")[0])
    parser.add_argument("kernel", help="standalone kernel file written by autotune_capture_patch.py")
    parser.add_argument("--probe", default=None, help="compile_probe/1 JSON from probe_compile.py: its hint "
                        "variants that compiled and changed the ISA are swept too")
    parser.add_argument("--devices", default="all", help="'all' (default) or GPU indices, e.g. 0,1")
    parser.add_argument("--workers-per-device", type=int, default=1,
                        help="worker processes per GPU (default 1; more share the GPU and add noise)")
    parser.add_argument("--compile-jobs", type=int, default=None,
                        help="processes that compile every variant first (default: CPU count)")
    parser.add_argument("--warmup", type=float, default=25.0, help="do_bench warm-up in ms (default 25)")
    parser.add_argument("--rep", type=float, default=100.0, help="do_bench repetition in ms (default 100)")
    parser.add_argument("--max-variants", type=int, default=24,
                        help="run at most this many variants, the captured winner included (default 24)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one variant may take (default 600)")
    parser.add_argument("--work-dir", default=None, help="keep edited sources and worker logs here")
    parser.add_argument("--json-out", required=True, help="where to write the variant_sweep/1 JSON")
    parser.add_argument("--markdown-out", required=True, help="where to write the ranked table")
    parser.add_argument("--best-out", required=True, help="where to write the best variant as a runnable file")
    return parser


def _check(opts) -> None:
    from pathlib import Path

    from tko.base import inputs

    if not Path(opts.kernel).exists():
        raise InputError(f"no such kernel file: {opts.kernel}")
    inputs.check_input(opts.kernel, "a kernel .py file")
    if opts.probe:
        inputs.check_input(opts.probe, "a compile_probe JSON")
    for flag in ("warmup", "rep", "timeout"):
        if getattr(opts, flag) <= 0:
            raise InputError(f"--{flag} must be positive")
    for flag in ("workers_per_device", "max_variants"):
        if getattr(opts, flag) < 1:
            raise InputError(f"--{flag.replace('_', '-')} must be at least 1")
    if opts.compile_jobs is not None and opts.compile_jobs < 1:
        raise InputError("--compile-jobs must be at least 1")


def main(argv=None) -> int:
    import tempfile
    import time
    from pathlib import Path

    from tko.measure import sweep, sweep_plan, sweep_results
    from tko.base.artifact import read_artifact, write_artifact
    from tko.base.atomic import write_text

    opts = build_parser().parse_args(argv)
    _check(opts)
    kernel = Path(opts.kernel)
    interpret = interpreter_on()
    probe_doc = read_artifact(opts.probe, expect="compile_probe") if opts.probe else None

    started = time.time()
    work_ctx = None
    if opts.work_dir:
        work = Path(opts.work_dir).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        work_ctx = tempfile.TemporaryDirectory(prefix="tko_sweep_")
        work = Path(work_ctx.name)
    try:
        plan = sweep_plan.build_plan(kernel, work, probe_doc=probe_doc, max_variants=opts.max_variants)
        if not interpret:
            import torch

            if not torch.cuda.is_available():
                raise InputError("no GPU visible: the sweep needs a GPU (or TRITON_INTERPRET=1 to check the "
                                 "path on the CPU, without performance numbers)")
        devices = sweep.visible_devices(opts.devices, interpret)
        warm = None
        if not interpret:
            jobs = opts.compile_jobs or os.cpu_count() or 1
            warm = lambda: sweep.warm_compile(plan, devices, jobs, work, opts.timeout)  # noqa: E731
        run = sweep.run_sweep(plan, devices, opts.workers_per_device, opts.warmup, opts.rep, work, interpret,
                              timeout=opts.timeout, warm=warm)
        compile_info = run["compile"] if not interpret else {
            "jobs": 0, "seconds": 0.0, "failed": [], "note": "interpreter: nothing is compiled"}
        payload = sweep_results.assemble(plan, run, devices=devices, workers_per_device=opts.workers_per_device,
                                 warmup_ms=opts.warmup, rep_ms=opts.rep, interpret=interpret,
                                 wall_s=time.time() - started, compile_info=compile_info,
                                 probe_file=str(Path(opts.probe).resolve()) if opts.probe else None)
        sweep_results.write_best(plan, payload, opts.best_out)
        payload["work_dir"] = str(work) if opts.work_dir else None
        write_artifact(opts.json_out, "variant_sweep/1", TOOL, payload)
        write_text(opts.markdown_out, sweep_results.markdown(payload))
    finally:
        if work_ctx is not None:
            work_ctx.cleanup()
    print(payload["summary"]["text"])
    if payload["best"]["file"]:
        print(f"best variant written to {payload['best']['file']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main, prog=TOOL))
