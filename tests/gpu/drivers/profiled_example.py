"""Run one example repro (optionally under kernel capture) and measure it.

    python tests/gpu/drivers/profiled_example.py --out res.json [--capture] [--prof-steps N] -- EXAMPLE.py ARGS...

The example's own ``run_steps`` (warm-up, then timed steady-state steps) runs first and gives
ms/step; then ``--prof-steps`` more steps run under torch.profiler, and the GPU kernels of those
steps are averaged per name from the Chrome trace (compile-time and autotuning launches are
outside the profiled window).  Written to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--capture", action="store_true", help="import autotune_capture_patch first")
    p.add_argument("--prof-steps", type=int, default=20)
    p.add_argument("--overhead-rounds", type=int, default=5,
                   help="with --capture: blocks of steps timed with the capture on and off, alternating")
    p.add_argument("script")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    opts = p.parse_args()
    if opts.capture:
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import autotune_capture_patch  # noqa: F401  (installs the capture)
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(opts.script)))
    import _repro

    result: dict = {"script": opts.script, "capture": opts.capture}
    original = _repro.run_steps

    def timed(step, n):
        import time

        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / n

    def run_steps(step, args, label):
        result["ms_per_step"] = original(step, args, label)
        if opts.capture:
            # capture cost in one process: alternate blocks with the wrappers on and off
            from tko.patch import capture

            # (rounds alternate which block goes first, and each round's on/off ratio is taken,
            # so a drift of the step time over the run cancels instead of biasing one side)
            on, off = [], []
            for r in range(opts.overhead_rounds):
                for active in ((False, True) if r % 2 == 0 else (True, False)):
                    capture.set_active(active)
                    (on if active else off).append(timed(step, args.steps))
            capture.set_active(True)
            paired = sorted(a / b for a, b in zip(on, off))
            result["overhead"] = {"rounds": opts.overhead_rounds, "steps_per_block": args.steps,
                                  "ms_step_on": on, "ms_step_off": off,
                                  "ratio_median": sorted(on)[len(on) // 2] / sorted(off)[len(off) // 2],
                                  "ratio_paired_median": paired[len(paired) // 2]}
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(opts.prof_steps):
                step()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "trace.json")
            prof.export_chrome_trace(trace)
            with open(trace) as fh:
                events = json.load(fh).get("traceEvents", [])
        kernels: dict = {}
        for ev in events:
            if ev.get("cat") == "kernel" and isinstance(ev.get("dur"), (int, float)):
                k = kernels.setdefault(ev["name"], {"calls": 0, "total_us": 0.0})
                k["calls"] += 1
                k["total_us"] += float(ev["dur"])
        for k in kernels.values():
            k["mean_us"] = k["total_us"] / k["calls"]
        result["prof_steps"] = opts.prof_steps
        result["kernels"] = kernels
        return result["ms_per_step"]

    _repro.run_steps = run_steps
    sys.argv = [opts.script, *[a for a in opts.script_args if a != "--"]]
    runpy.run_path(opts.script, run_name="__main__")
    with open(opts.out, "w") as fh:
        json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
