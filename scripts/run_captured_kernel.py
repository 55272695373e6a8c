"""Time a standalone captured kernel (``<capture dir>/<kernel>.py``) and write ``kernel_run/1`` JSON.

    python scripts/run_captured_kernel.py KERNEL.py [--all-configs] [--timeout S]
        [--warmup MS --rep MS] --json-out run.json

The kernel runs in a subprocess with a timeout.  Its result lines (a fixed prefix + JSON, one per
config) are parsed into the JSON; a crash, a timeout or no result line exits 1 with one line, and
the kernel's last stderr lines go into the JSON. A captured kernel on a machine whose torch sees no
GPU is refused (exit 2) with the capture's recorded run and the offline command to read it instead.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.base.errors import ArgumentParser, InputError, ToolFailure, run_main  # noqa: E402

TOOL = "run_captured_kernel.py"


def build_parser() -> ArgumentParser:
    from tko.measure.standalone import timer_arg

    parser = ArgumentParser(prog=TOOL, example='python scripts/run_captured_kernel.py autotune_kernels/triton_poi_fused_add_0.py --timer do_bench,profiler_flushed --json-out run.json', description=__doc__.split("\n\n")[0])
    parser.add_argument("kernel", help="standalone kernel file written by autotune_capture_patch.py")
    parser.add_argument("--all-configs", action="store_true", help="time every recorded config, not only the best")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before the run is killed (default 600)")
    parser.add_argument("--warmup", type=float, default=None, help="do_bench warm-up time in ms (runner default 25)")
    parser.add_argument("--rep", type=float, default=None, help="do_bench measuring time in ms (runner default 100)")
    parser.add_argument("--timer", type=timer_arg, default=None,
                        help="do_bench (default: median, L2 flushed), cudagraph (no launch overhead, warm L2), "
                             "profiler (torch.profiler device time per launch, warm L2: what a program "
                             "profile measures), profiler_flushed (the same, L2 flushed), both (do_bench and "
                             "cudagraph), all, or a comma list such as do_bench,profiler_flushed")
    parser.add_argument("--python", default=None, help="interpreter to run the kernel with (default: this one)")
    parser.add_argument("--json-out", required=True, help="where to write the kernel_run/1 JSON")
    return parser


def main(argv=None) -> int:
    from pathlib import Path

    from tko.base import inputs
    from tko.base.artifact import write_artifact
    from tko.measure.kernel_run import gpu_missing, run_kernel
    from tko.measure.standalone import runner_version, timer_for_runner

    parser = build_parser()
    opts = parser.parse_args(argv)
    kernel = Path(opts.kernel)
    if not kernel.exists():
        raise InputError(f"no such kernel file: {kernel}")
    inputs.check_input(kernel, "a kernel .py file")
    if opts.timeout <= 0:
        raise InputError("--timeout must be positive")
    for flag in ("warmup", "rep"):
        value = getattr(opts, flag)
        if value is not None and value <= 0:
            raise InputError(f"--{flag} must be positive")
    if opts.timer:  # said first: it holds whether the run happens here or not
        timer, dropped = timer_for_runner(runner_version(kernel.read_text(errors="replace")), opts.timer)
        if dropped:
            print(f"{TOOL}: warning: this standalone file's runner predates timer(s) {', '.join(dropped)}: "
                  f"timed with {timer or 'its default timer'} (capture again for every timer)", file=sys.stderr)
    no_gpu = None if opts.python else gpu_missing(kernel)
    if no_gpu:
        raise InputError(no_gpu)
    payload = run_kernel(kernel, all_configs=opts.all_configs, timeout=opts.timeout,
                         warmup=opts.warmup, rep=opts.rep, python=opts.python, timer=opts.timer)
    write_artifact(opts.json_out, "kernel_run/1", TOOL, payload)
    if payload["status"] != "ok":
        raise ToolFailure(f"{kernel.name}: {payload['error']} (details in {opts.json_out})")
    for rec in payload["results"]:
        gbps = rec.get("gb_per_s")
        print(f"{rec['kernel']}: {rec['ms']:.4f} ms" + (f", {gbps:.1f} GB/s" if gbps else "")
              + f" [{rec.get('timer')}]" + (" (best)" if rec.get("best") else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main, prog=TOOL))
