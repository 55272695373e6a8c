"""The GPU timeline of a profiled step: busy, idle (host/launch gaps) and compile time.

From a Chrome trace (torch.profiler): the window runs from the first to the last ranked kernel,
from the first kernel after the last compilation range when kernels follow it (the steady state:
a first step's lazy compiles, autotuning and one-off waits are not the step's gaps);
busy is the union of the ranked kernels and the device's memcpy/memset inside it; every gap
between them is idle time, except a gap that overlaps a compilation range on the host (an op named
``... (dynamo_timed)``, Inductor's compile and autotune phases), which is counted as compile time,
not as a launch gap. ``ProfilerStep#N`` ranges, when the program profiled with a schedule, give
the step count and the mean step time. The result is ``summary.timeline`` of ``kernel_profile/1``.
"""

from __future__ import annotations

import re
import statistics

from .profile_formats import is_compile_range

STEP_RANGE = re.compile(r"^ProfilerStep#\d+$")
GAPS_SHOWN = 3


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def _overlaps(gap: tuple[float, float], ranges: list[tuple[float, float]]) -> bool:
    return any(s < gap[1] and e > gap[0] for s, e in ranges)


def _steps(cpu_ops) -> dict:
    durs = [op.dur for op in cpu_ops if STEP_RANGE.match(op.name or "")]
    if not durs:
        return {}
    return {"profiler_steps": len(durs), "step_us": round(statistics.median(durs), 3)}


def timeline(trace, kernels: list[tuple[float, float]]) -> dict | None:
    """``kernels``: (start_us, end_us) of the ranked dispatches. None without any."""
    if not kernels:
        return None
    compiled = [op.end for op in trace.cpu_ops if is_compile_range(op.name)]
    steady = [k for k in kernels if compiled and k[0] >= max(compiled)]
    window = "after the last compilation" if steady else "whole trace"
    kernels = steady or kernels
    lo, hi = min(s for s, _ in kernels), max(e for _, e in kernels)
    other = [(e.ts, e.end) for e in trace.gpu_other if e.end > lo and e.ts < hi]
    busy = _union(kernels + [(max(s, lo), min(e, hi)) for s, e in other])
    compiling = _union([(op.ts, op.end) for op in trace.cpu_ops if is_compile_range(op.name)])
    gaps = [(a[1], b[0]) for a, b in zip(busy, busy[1:]) if b[0] > a[1]]
    idle = [g for g in gaps if not _overlaps(g, compiling)]
    compile_us = sum(e - s for s, e in gaps) - sum(e - s for s, e in idle)
    largest = sorted(idle, key=lambda g: g[0] - g[1])[:GAPS_SHOWN]
    out = {"window": window, "window_us": round(hi - lo, 3), "busy_us": round(sum(e - s for s, e in busy), 3),
           "idle_us": round(sum(e - s for s, e in idle), 3), "idle_gaps": len(idle),
           "compile_gap_us": round(compile_us, 3),
           "memcpy_memset_us": round(sum(e - s for s, e in _union(other)), 3),
           "largest_gaps_us": [round(e - s, 3) for s, e in largest]}
    out.update(_steps(trace.cpu_ops))
    return out
