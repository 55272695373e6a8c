#!/usr/bin/env python3
"""A captured kernel's speed of light: kernel vs its memory twin vs the copy floor (``speed_of_light/1``).

    python scripts/speed_of_light.py KERNEL.py [--peaks device_peaks.json | --peak-gbps N]
        [--timer T] [--offline] [--floor-basis size_matched_copy|peak] [--arch gfx942 ...]
        [--twin-out TWIN.py] [--sweep SWEEP.json] [--remedy RUN.json] --json-out sol.json
        [--markdown-out sol.md]

Builds the memory twin (the kernel with its data arithmetic replaced by additions: same loads,
stores, indices, masks, loops and grid), compiles kernel and twin offline and compares their
load/store census (the twin is valid only if it is the same), counts the unique bytes the kernel
must move, and on a GPU times kernel and twin on the captured inputs (torch.profiler device time
with L2 flushed, do_bench beside it) and a copy of the same bytes for the floor (the 1 GiB copy
peak is out of reach for a kernel moving under ~250 MB). The class (at_floor, arithmetic_bound,
access_pattern_bound, unmeasured) comes with its numbers; the Markdown holds an inline SVG chart.
Offline (no GPU, or --offline) the twin is built, compiled and checked, not timed, the floor is the
bytes at the 1 GiB copy peak, and the report says what a GPU run would add.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.base.errors import ArgumentParser, InputError, run_main  # noqa: E402

TOOL = "speed_of_light.py"


def build_parser() -> ArgumentParser:
    from tko.measure import speed_of_light
    from tko.measure.standalone import timer_arg

    p = ArgumentParser(prog=TOOL, description=__doc__.split("\n\n")[0], allow_abbrev=False,
                       example="python scripts/speed_of_light.py autotune_kernels/triton_poi_fused_gelu_1.py "
                               "--json-out sol.json --markdown-out sol.md")
    p.add_argument("kernel", help="standalone kernel file written by autotune_capture_patch.py")
    peak = p.add_mutually_exclusive_group()
    peak.add_argument("--peaks", default=None, metavar="FILE",
                      help="device_peak/1 store of measure_peak_bandwidth.py (default: $TKO_PEAKS_FILE, the "
                           "default store, then references/device_peaks.yaml)")
    peak.add_argument("--peak-gbps", type=float, default=None, help="copy bandwidth to use, GB/s (read + write)")
    p.add_argument("--timer", type=timer_arg, default="profiler_flushed,do_bench",
                   help="timers of the runs (default profiler_flushed,do_bench; the first available of "
                        "profiler_flushed, do_bench, profiler, cudagraph is used)")
    p.add_argument("--offline", action="store_true", help="build, compile and check the twin; time nothing")
    p.add_argument("--floor-basis", choices=speed_of_light.FLOOR_BASES, default="size_matched_copy",
                   help="on a GPU, the rate of the floors: size_matched_copy (default: a copy of the same bytes, "
                        "timed now) or peak (the bytes at the 1 GiB copy peak, as offline)")
    p.add_argument("--arch", action="append", default=None,
                   help="arch of the ISA census, repeatable (default: gfx942 and the captured device's arch)")
    p.add_argument("--kernel-name", default=None, help="jit function, when the file holds several")
    p.add_argument("--twin-out", default=None, help="where to write the twin (default: <json-out>.twin.py)")
    p.add_argument("--sweep", default=None, help="variant_sweep/1 JSON: its best variant goes on the chart")
    p.add_argument("--remedy", default=None, help="kernel_run/1 JSON of a rewritten kernel: goes on the chart")
    p.add_argument("--kernel-run", default=None, metavar="FILE",
                   help="kernel_run/1 JSON of this kernel file (run_captured_kernel.py) with the same timers: "
                        "its times stand for the kernel's, which is not timed again (else it is)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per kernel run (default 300)")
    p.add_argument("--json-out", required=True, help="where to write the speed_of_light/1 JSON")
    p.add_argument("--markdown-out", default=None, help="Markdown report with the inline SVG chart")
    return p


def main(argv=None) -> int:
    from pathlib import Path

    from tko.measure import speed_of_light
    from tko.base.artifact import read_artifact, write_artifact
    from tko.base.atomic import write_text
    from tko.base import inputs

    opts = build_parser().parse_args(argv)
    kernel = Path(opts.kernel)
    if not kernel.exists():
        raise InputError(f"no such kernel file: {kernel}")
    inputs.check_input(kernel, "a kernel .py file")
    if opts.peaks:
        inputs.check_input(opts.peaks, "a device_peaks JSON")
    if opts.peak_gbps is not None and opts.peak_gbps <= 0:
        raise InputError("--peak-gbps must be positive")
    if opts.timeout <= 0:
        raise InputError("--timeout must be positive")
    sweep_ms = speed_of_light.best_sweep_ms(read_artifact(opts.sweep, "variant_sweep")) if opts.sweep else None
    remedy_ms = speed_of_light.pick_ms(read_artifact(opts.remedy, "kernel_run"))[0] if opts.remedy else None
    given_run = read_artifact(opts.kernel_run, "kernel_run") if opts.kernel_run else None
    json_out = Path(opts.json_out)
    twin_out = Path(opts.twin_out) if opts.twin_out else json_out.with_suffix(".twin.py")
    payload = speed_of_light.analyse(
        kernel, twin_path=twin_out, arches=opts.arch, peak_gbps=opts.peak_gbps, peaks_store=opts.peaks,
        timer=opts.timer, offline=opts.offline, timeout=opts.timeout, kernel=opts.kernel_name,
        sweep_ms=sweep_ms, remedy_ms=remedy_ms, floor_basis=opts.floor_basis, kernel_run=given_run,
        kernel_run_label=opts.kernel_run)
    write_artifact(json_out, "speed_of_light/1", TOOL, payload)
    if opts.markdown_out:
        write_text(opts.markdown_out, speed_of_light.markdown(payload))
    c = payload["classification"]
    print(f"{payload['kernel']}: {c['class']}: {c['says']}")
    print(f"twin {'valid' if payload['validity']['valid'] else 'INVALID'}: {twin_out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
