"""The cross-rank view of a multi-process run: one Chrome trace per process, time outside kernels named.

Each process of the program wrote ``trace.<tag>.json`` and ``trace.<tag>.meta.json``
(``tko.patch.rank_profile``). Per rank, over its steady window (from the end of its last compile
range, ``(dynamo_timed)``, to its last event):

* ``compute_us``: the union of the GPU kernels that are not collectives; on a CPU-only run, of
  the top-level CPU ops of the rank's main thread that are not collectives;
* ``collective_us``: the union of collectives: NCCL / RCCL kernels, gloo / NCCL / c10d ops
  (``gloo:all_reduce``, ``c10d::allreduce_``, ``nccl:all_reduce``, ``record_param_comms``);
* ``exposed_collective_us``: collective time no compute hides (a rank waiting on its peers);
* ``host_gap_us``: the rest of the window, where neither ran (host work, launches, other waits);
* ``communication_share``: exposed collective time over the window.

The slowest rank is the one with the most compute (the others wait for it; the profile ranks its
trace in full); ``spread`` is its compute over the least. A rank whose exposed collective share
reaches ``communication_bound_share`` (``references/decision_rules.yaml``) is communication-bound.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..base.decide import threshold
from ..base.errors import InputError
from . import profile_formats as pf

SCHEMA = "rank_view/1"
COLLECTIVE = re.compile(r"(^|[^a-z])(nccl|rccl|gloo|c10d::|record_param_comms|allreduce|all_reduce|"
                        r"allgather|all_gather|reduce_scatter|reducescatter|broadcast|all_to_all|alltoall|"
                        r"sendrecv|barrier)", re.I)
NOT_COLLECTIVE = re.compile(r"^(prims::broadcast_in_dim|aten::broadcast_tensors|aten::broadcast_to)", re.I)


def is_collective(name: str) -> bool:
    return bool(COLLECTIVE.search(name)) and not NOT_COLLECTIVE.match(name)


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]


def _length(intervals) -> float:
    return sum(b - a for a, b in intervals)


def _minus(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Length of union ``a`` not covered by union ``b``."""
    return _length(a) - _length(_union([(max(x, lo), min(y, hi)) for x, y in a for lo, hi in b
                                        if min(y, hi) > max(x, lo)]))


def _clip(events, lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(e.ts, lo), min(e.end, hi)) for e in events if min(e.end, hi) > max(e.ts, lo)]


def _top_level(events) -> list:
    out, end = [], float("-inf")
    for e in sorted(events, key=lambda e: (e.ts, -e.dur)):
        if e.ts >= end:
            out.append(e)
            end = e.end
    return out


def _window(trace: pf.ChromeTrace) -> tuple[float, float] | None:
    """From the end of the last compilation to the end of the last GPU kernel (the trace's end
    without kernels): what a process does after its last kernel (saving, tearing the process group
    down, the profiler's export) is not the step."""
    if trace.span_us is None:
        return None
    compiles = [e.end for e in trace.cpu_ops if pf.is_compile_range(e.name)]
    lo = max(compiles) if compiles else trace.span_us[0]
    hi = max(k.end for k in trace.kernels) if trace.kernels else trace.span_us[1]
    return (lo, hi) if hi > lo else None


def common_window(traces: list[pf.ChromeTrace]) -> tuple[float, float] | None:
    """The steady window all ranks share: from the last rank's end of compilation to the first
    rank's last event (a rank that compiled sooner waits in a collective meanwhile, which is not
    the step's communication). Traces of one host share a clock; None when they do not overlap."""
    wins = [w for w in (_window(t) for t in traces) if w is not None]
    if not wins:
        return None
    lo, hi = max(w[0] for w in wins), min(w[1] for w in wins)
    return (lo, hi) if hi > lo else None


def rank_facts(trace: pf.ChromeTrace, meta: dict, window: tuple[float, float] | None = None) -> dict:
    """One rank's times (µs) and shares over ``window`` (default: its own steady window)."""
    win = window or _window(trace)
    row = {k: meta.get(k) for k in ("rank", "local_rank", "world_size", "pid")}
    if win is None:
        return dict(row, window_us=0.0, note="the trace holds no timed events")
    lo, hi = win
    comm_events = [e for e in trace.kernels + trace.cpu_ops if is_collective(e.name)]
    if trace.kernels:
        basis = "gpu kernels"
        work = [e for e in trace.kernels if not is_collective(e.name)]
    else:
        basis = "cpu ops of the main thread"
        tids = [e.tid for e in trace.cpu_ops if e.ts >= lo]
        main = max(set(tids), key=tids.count) if tids else None
        work = [e for e in _top_level([e for e in trace.cpu_ops if e.tid == main]) if not is_collective(e.name)]
    compute = _union(_clip(work, lo, hi))
    comm = _union(_clip(comm_events, lo, hi))
    window = hi - lo
    exposed = _minus(comm, compute)
    busy = _length(_union(compute + comm))
    return dict(row, basis=basis, window_us=round(window, 3), compute_us=round(_length(compute), 3),
                collective_us=round(_length(comm), 3), exposed_collective_us=round(exposed, 3),
                host_gap_us=round(window - busy, 3),
                communication_share=round(exposed / window, 4) if window else None,
                collectives=_top_names(comm_events, lo, hi))


def _top_names(events, lo: float, hi: float, top: int = 5) -> list[dict]:
    acc: dict[str, list] = {}
    for e in events:
        if e.end > lo and e.ts < hi:
            slot = acc.setdefault(e.name, [0, 0.0])
            slot[0] += 1
            slot[1] += min(e.end, hi) - max(e.ts, lo)
    rows = sorted(acc.items(), key=lambda kv: -kv[1][1])[:top]
    return [{"name": n, "calls": c, "total_us": round(t, 3)} for n, (c, t) in rows]


def read_meta(trace_path: Path) -> dict:
    """The meta file beside a per-process trace (``{}`` when missing or unreadable)."""
    meta = trace_path.with_name(trace_path.name[:-len(".json")] + ".meta.json")
    try:
        doc = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def process_traces(folder: Path) -> list[Path]:
    """The per-process traces in ``folder`` (meta files and unfinished ``.part`` files left out)."""
    return sorted(p for p in folder.glob("trace.*.json") if not p.name.endswith(".meta.json"))


def build(folder: str | Path) -> dict:
    """The ``rank_view/1`` payload of a folder of per-process traces.

    Processes without a rank that hold no compute (a launcher, the parent of spawned workers) are
    listed under ``others``; a single-process program without ranks is its own rank row."""
    folder = Path(folder)
    paths = process_traces(folder)
    if not paths:
        raise InputError(f"{folder}: holds no per-process trace (trace.<tag>.json)")
    rows, others, problems = [], [], []
    loaded = _load_all(paths, problems)
    ranked = [t for t, meta, _ in loaded if meta.get("rank") is not None]
    shared = common_window(ranked) if len(ranked) > 1 else None
    for trace, meta, path in loaded:
        ranked_one = meta.get("rank") is not None
        facts = dict(rank_facts(trace, meta, shared if ranked_one else None), trace=str(path))
        (rows if ranked_one else others).append(facts)
    if not rows:  # no process joined a process group: the busiest one stands for the program
        others.sort(key=lambda r: -(r.get("compute_us") or 0))
        rows, others = others[:1], others[1:]
    rows.sort(key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r.get("pid") or 0))
    return summarize(rows, others, problems)


def _load_all(paths: list[Path], problems: list[str]) -> list[tuple]:
    loaded = []
    for path in paths:
        try:
            parsed = pf.read_profile(path)
        except InputError as exc:
            problems.append(f"{path.name}: {exc}")
            continue
        if parsed.trace is None:
            problems.append(f"{path.name}: not a Chrome trace")
            continue
        loaded.append((parsed.trace, read_meta(path), path))
    return loaded


def summarize(rows: list[dict], others: list[dict], problems: list[str]) -> dict:
    cut = float(threshold("communication_bound_share"))
    computes = [r.get("compute_us") or 0.0 for r in rows]
    slowest = max(range(len(rows)), key=lambda i: computes[i])
    spread = (max(computes) / min(computes)) if rows and min(computes) > 0 else None
    shares = [r.get("communication_share") for r in rows if r.get("communication_share") is not None]
    worst = rows[slowest].get("communication_share")
    bound = worst is not None and worst >= cut
    return {"world_size": next((r["world_size"] for r in rows if r.get("world_size")), len(rows)),
            "ranks": rows, "others": [{k: o.get(k) for k in ("pid", "window_us", "compute_us", "trace")}
                                      for o in others],
            "slowest": {"rank": rows[slowest].get("rank"), "pid": rows[slowest].get("pid"),
                        "trace": rows[slowest].get("trace")},
            "compute_spread": round(spread, 4) if spread else None,
            "communication_share": {"slowest": worst, "max": max(shares) if shares else None,
                                    "min": min(shares) if shares else None},
            "communication_bound": bound, "threshold": {"communication_bound_share": cut},
            "verdict": verdict_line(rows[slowest], bound, cut), "problems": problems}


def verdict_line(row: dict, bound: bool, cut: float) -> str:
    share = row.get("communication_share")
    who = f"rank {row['rank']}" if row.get("rank") is not None else f"pid {row.get('pid')}"
    if share is None:
        return f"{who}: no steady window to judge"
    if bound:
        return (f"this step is communication-bound: on {who} (the slowest) collectives no compute hides "
                f"take {share * 100:.0f}% of the step (>= {cut * 100:.0f}%); tune the communication "
                "(bucket sizes, overlap, fewer or larger collectives, the backend) before any kernel")
    return (f"{who} (the slowest): exposed collectives take {share * 100:.0f}% of the step "
            f"(under {cut * 100:.0f}%): compute and host time set the step")


def markdown_lines(view: dict) -> list[str]:
    """The "Ranks" section of a profile or investigation report."""
    from ..base import markdown as md

    lines = ["## Ranks", "", f"- {md.text(view['verdict'], 400)}"]
    if view.get("compute_spread"):
        lines.append(f"- compute spread across ranks: {view['compute_spread']:.2f}x (slowest over fastest)")
    lines.append("")
    rows = [[r.get("rank", "–") if r.get("rank") is not None else "–", r.get("pid"),
             _ms(r.get("window_us")), _ms(r.get("compute_us")), _ms(r.get("collective_us")),
             _ms(r.get("exposed_collective_us")), _ms(r.get("host_gap_us")),
             f"{r['communication_share'] * 100:.1f}%" if r.get("communication_share") is not None else "–",
             md.text(r.get("basis", "–"), 40)] for r in view["ranks"]]
    lines += md.table(["rank", "pid", "window ms", "compute ms", "collective ms", "exposed comm ms",
                       "host gap ms", "comm share", "compute from"], rows,
                      align=["right"] * 8 + [None])
    return lines


def _ms(us) -> str:
    return "–" if us is None else f"{us / 1e3:.2f}"
