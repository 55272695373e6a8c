"""Rank GPU kernels by device time and join each one to what launched it.

Input is what :mod:`tko.read.profile_formats` parsed: per-dispatch records (Chrome trace,
rocprofv3 kernel trace) or per-name summaries (hipprof / rocprofv3 stats / nsys).  Output is
the payload of a ``kernel_profile/1`` artifact (see references/json_contracts.md).

Launch attribution (Chrome trace only): kernel ``args.correlation`` = runtime call
``args.correlation`` (else the ``ac2g`` flow pair, else the kernel's ``External id`` naming its CPU
op directly, as some ROCm traces have no runtime events); the CPU ops that enclose that runtime call
on the same thread are its aten op / record_function chain, and ``python_function`` events the
Python frames.  Inductor wraps every Triton launch in a record_function named after the kernel
whose args say ``kernel_backend: triton`` with the kernel file and config; kernels launched
under a ``... (dynamo_timed)`` op ran during compilation (autotuning benchmarks) and are left
out of the ranking unless asked for.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from . import step_timeline
from .profile_formats import ChromeTrace, Dispatch, is_compile_range, Parsed, PmcRecord, StatRow, TraceEvent, trace_dispatches

CHAIN_LIMIT = 12        # enclosing op names kept per kernel, innermost first
STACK_LIMIT = 12        # python frames kept per kernel
VARIANT_LIMIT = 5       # distinct launching ops listed per kernel

TRITON_PREFIX = re.compile(r"^triton_(poi|red|per|tem|for|spl|mm|bmm|fused|unk)?_?")
LIBRARY_PATTERNS = re.compile(
    r"cublas|cublasLt|cutlass|cudnn|\bnvjet|sm\d+_xmma|^(ampere|volta|turing|hopper|sm\d+)_|gemv|gemmSN|"
    r"^Cijk_|Tensile|rocblas|hipblas|miopen|MIOpen|\bck::|composable_kernel|"
    r"at::native|at::cuda|_ZN2at6native|_ZN7cutlass|\bcub::|_ZN3cub|rocprim::|hipcub|"
    r"\bnccl|\brccl|flash_fwd|flash_bwd|fmha|cutlass::",
    re.IGNORECASE)


def classify(name: str, triton_launch: bool = False, triton_names: list[re.Pattern] | None = None,
             aten_launch: bool = False) -> str:
    """``triton`` (Inductor/user Triton kernel), ``library`` (vendor or ATen kernel) or ``other``.

    ``aten_launch``: the trace shows an ``aten::`` op launched it directly (an ATen CUDA/HIP
    kernel such as ``(anonymous namespace)::softmax_warp_forward`` whose name says nothing).
    """
    if triton_launch or TRITON_PREFIX.match(name):
        return "triton"
    for pat in triton_names or ():
        if pat.search(name):
            return "triton"
    if LIBRARY_PATTERNS.search(name) or aten_launch:
        return "library"
    return "other"


# --------------------------------------------------------------------------- Chrome trace join

@dataclass
class LaunchInfo:
    runtime_call: str | None = None
    linked_by: str | None = None                            # correlation / flow / external_id
    chain: list[str] = field(default_factory=list)          # enclosing op names, innermost first
    python_stack: list[str] = field(default_factory=list)   # innermost first
    inductor: dict | None = None                            # args of Inductor's launch record
    compile_phase: bool = False
    ranges: tuple = ()                                      # every enclosing op name (unbounded)


def _by_thread(events: list[TraceEvent]) -> dict:
    groups = defaultdict(list)
    for ev in events:
        groups[(ev.pid, ev.tid)].append(ev)
    for evs in groups.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
    return groups


def _enclosing_batch(intervals: list[TraceEvent], queries: list[TraceEvent],
                     eps: float = 0.01) -> dict[int, list[TraceEvent]]:
    """For each query (by id), the intervals of the same thread that contain it, innermost first.

    Profiler ranges on one thread nest, so one sweep with a stack of open ranges finds every
    chain: O(n log n) for the whole trace instead of a search per kernel.
    """
    result: dict[int, list[TraceEvent]] = {}
    order = sorted(queries, key=lambda q: q.ts)
    stack: list[TraceEvent] = []
    i = 0
    for q in order:
        while i < len(intervals) and intervals[i].ts <= q.ts + eps:
            iv = intervals[i]
            while stack and stack[-1].end + eps < iv.ts:
                stack.pop()
            stack.append(iv)
            i += 1
        while stack and stack[-1].end + eps < q.ts:
            stack.pop()
        result[id(q)] = [iv for iv in reversed(stack) if iv.end + eps >= q.end and iv is not q]
    return result


# frames of the profiler bootstrap and runpy that sit under every script it runs
_RUNNER_FRAME = re.compile(r"profile_bootstrap\.py\(|^<frozen runpy>|runpy\.py\(|^<built-in function exec>$")


def attribute_launches(trace: ChromeTrace) -> dict[int, LaunchInfo]:
    """index of kernel in ``trace.kernels`` -> LaunchInfo."""
    runtime_by_corr: dict = {}
    for rt in trace.runtime:
        corr = rt.args.get("correlation")
        if corr is not None:
            runtime_by_corr.setdefault(corr, rt)
    # flow pairs: the 's' end sits on the runtime call, the 'f' end on the kernel
    runtime_by_thread = _by_thread(trace.runtime)
    rt_starts = {k: [e.ts for e in v] for k, v in runtime_by_thread.items()}
    flow_by_kernel_pos = {}
    for (cat, _id), ends in trace.flows.items():
        if "s" in ends and "f" in ends:
            flow_by_kernel_pos[ends["f"]] = ends["s"]

    op_by_ext = {}
    for op in trace.cpu_ops:
        ext = op.args.get("External id")
        if ext is not None and op.cat == "cpu_op":
            op_by_ext.setdefault(ext, op)
    launch_of: dict[int, TraceEvent] = {}
    link: dict[int, str] = {}
    for idx, k in enumerate(trace.kernels):
        rt = runtime_by_corr.get(k.args.get("correlation"))
        link[idx] = "correlation"
        if rt is None:
            link[idx] = "flow"
            s = flow_by_kernel_pos.get((k.pid, k.tid, k.ts))
            if s is not None:
                key = (s[0], s[1])
                starts = rt_starts.get(key, [])
                j = bisect.bisect_left(starts, s[2] - 0.01)
                if j < len(starts) and abs(starts[j] - s[2]) < 0.5:
                    rt = runtime_by_thread[key][j]
        if rt is None:
            # no runtime event (some ROCm traces): the kernel's External id names its CPU op
            op = op_by_ext.get(k.args.get("External id"))
            if op is not None:
                rt, link[idx] = op, "external_id"
        if rt is not None:
            launch_of[idx] = rt
    # enclosing CPU ops and python frames of every launching runtime call, one sweep per thread
    calls_by_thread = defaultdict(list)
    for rt in {id(r): r for r in launch_of.values()}.values():
        calls_by_thread[(rt.pid, rt.tid)].append(rt)
    cpu = _by_thread(trace.cpu_ops)
    py = _by_thread(trace.python_frames)
    ops_of: dict[int, list[TraceEvent]] = {}
    frames_of: dict[int, list[TraceEvent]] = {}
    for key, calls in calls_by_thread.items():
        ops_of.update(_enclosing_batch(cpu.get(key, []), calls))
        frames_of.update(_enclosing_batch(py.get(key, []), calls))

    out: dict[int, LaunchInfo] = {}
    for idx in range(len(trace.kernels)):
        info = LaunchInfo()
        out[idx] = info
        rt = launch_of.get(idx)
        if rt is None:
            continue
        info.linked_by = link[idx]
        ops = ops_of.get(id(rt), [])
        if rt.cat in ("cpu_op", "user_annotation"):
            ops = [rt] + ops  # linked by External id: the op itself is the innermost
        else:
            info.runtime_call = rt.name
        for op in ops:
            if info.inductor is None and op.args.get("kernel_backend") is not None:
                info.inductor = {a: op.args[a] for a in (
                    "kernel_backend", "kernel_file", "kernel_hash", "kernel_kwargs", "num_warps",
                    "num_stages", "kernel_flop", "kernel_num_gb", "kernel_name") if a in op.args}
                info.inductor["record_name"] = op.name
            if is_compile_range(op.name):
                info.compile_phase = True
        info.ranges = tuple(op.name for op in ops)
        info.chain = list(info.ranges[:CHAIN_LIMIT])
        info.python_stack = [f.name for f in frames_of.get(id(rt), [])
                             if not _RUNNER_FRAME.search(f.name)][:STACK_LIMIT]
    return out


def _launch_op(chain: list[str], inductor: dict | None, kernel_name: str) -> str | None:
    """Closest named op: skip Inductor's per-kernel launch record (it only repeats the kernel)."""
    skip = {kernel_name}
    if inductor and inductor.get("record_name"):
        skip.add(inductor["record_name"])
    for name in chain:
        if name not in skip:
            return name
    return None


_LIB_FRAME = re.compile(r"(site-packages|dist-packages|/lib/python3\.\d+/|<built-in|torchinductor|"
                        r"profile_bootstrap\.py|runpy\.py|^<frozen|^torch/)")


def _user_frame(stack: list[str]) -> str | None:
    for frame in stack:
        if not _LIB_FRAME.search(frame):
            return frame
    return None


# --------------------------------------------------------------------------- ranking

@dataclass
class _Acc:
    name: str
    calls: int = 0
    total: float = 0.0
    lo: float | None = None
    hi: float | None = None
    launch_ops: Counter = field(default_factory=Counter)
    chain: list[str] | None = None
    python_stack: list[str] | None = None
    inductor: dict | None = None
    triton_launch: bool = False
    aten_launch: bool = False
    launch: dict | None = None
    launch_variants: set = field(default_factory=set)
    devices: set = field(default_factory=set)
    streams: set = field(default_factory=set)


def _span_union(intervals: list[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def select_dispatches(dispatches: list[Dispatch], launches: dict[int, LaunchInfo] | None,
                      include_compile: bool = False, within: re.Pattern | None = None) -> tuple[list[bool], dict]:
    """Which dispatches to rank: not launched during compilation (unless ``include_compile``) and,
    with ``within``, launched inside a range whose name matches it (e.g. ``ProfilerStep``)."""
    keep, counts = [], {"excluded_compile_dispatches": 0, "excluded_compile_us": 0.0}
    if within is not None:
        counts.update(excluded_outside_dispatches=0, excluded_outside_us=0.0)
    for i, d in enumerate(dispatches):
        info = launches.get(i) if launches else None
        if info and info.compile_phase and not include_compile:
            counts["excluded_compile_dispatches"] += 1
            counts["excluded_compile_us"] += d.dur_us
            keep.append(False)
        elif within is not None and not (info and any(within.search(n) for n in info.ranges)):
            counts["excluded_outside_dispatches"] += 1
            counts["excluded_outside_us"] += d.dur_us
            keep.append(False)
        else:
            keep.append(True)
    for k in ("excluded_compile_us", "excluded_outside_us"):
        if k in counts:
            counts[k] = round(counts[k], 3)
    return keep, counts


def _add_dispatch(a: "_Acc", d: Dispatch, info: LaunchInfo | None) -> None:
    a.calls += 1
    a.total += d.dur_us
    a.lo = d.dur_us if a.lo is None else min(a.lo, d.dur_us)
    a.hi = d.dur_us if a.hi is None else max(a.hi, d.dur_us)
    a.devices.add(str(d.device))
    a.streams.add(str(d.stream))
    if d.launch:
        a.launch_variants.add(repr(sorted(d.launch.items())))
        if a.launch is None:
            a.launch = d.launch
    if not info:
        return
    op = _launch_op(info.chain, info.inductor, d.name)
    a.launch_ops[op] += d.dur_us
    if a.chain is None or (op and a.launch_ops[op] >= max(a.launch_ops.values())):
        a.chain = info.chain
        a.python_stack = info.python_stack
    if info.inductor and a.inductor is None:
        a.inductor = info.inductor
    # Inductor wraps each Triton launch in a range named after the kernel (its args,
    # kernel_backend etc., are exported only with record_shapes)
    if (info.inductor and info.inductor.get("kernel_backend") == "triton") or (
            info.chain and info.chain[0] == d.name):
        a.triton_launch = True
    if op and op.startswith("aten::"):
        a.aten_launch = True


def _kernel_row(a: "_Acc", kernel_total: float, with_launches: bool, triton_names) -> dict:
    row = {
        "name": a.name,
        "origin": classify(a.name, a.triton_launch, triton_names, a.aten_launch),
        "calls": a.calls,
        "total_us": round(a.total, 3),
        "mean_us": round(a.total / a.calls, 3),
        "min_us": round(a.lo, 3),
        "max_us": round(a.hi, 3),
        "share": (a.total / kernel_total) if kernel_total > 0 else 0.0,
    }
    if with_launches:
        ops = [(op, t) for op, t in a.launch_ops.most_common() if op is not None]
        row["launch_op"] = ops[0][0] if ops else None
        row["launch_ops"] = [{"op": op, "total_us": round(t, 3)} for op, t in ops[:VARIANT_LIMIT]]
        row["op_chain"] = a.chain or []
        if a.python_stack:
            row["python_stack"] = a.python_stack
            row["user_frame"] = _user_frame(a.python_stack)
        if a.inductor:
            row["inductor"] = a.inductor
    if a.launch is not None:
        row["launch"] = a.launch
        row["launch_variants"] = len(a.launch_variants)
    row["devices"] = sorted(a.devices)
    row["streams"] = sorted(a.streams)
    return row


def rank_dispatches(dispatches: list[Dispatch], launches: dict[int, LaunchInfo] | None = None,
                    include_compile: bool = False, triton_names=None,
                    within: re.Pattern | None = None) -> tuple[list[dict], dict]:
    accs: dict = {}
    keep, counts = select_dispatches(dispatches, launches, include_compile, within)
    kept: list[Dispatch] = []
    for i, d in enumerate(dispatches):
        if not keep[i]:
            continue
        info = launches.get(i) if launches else None
        kept.append(d)
        # Inductor names kernels per graph, so two graphs can both have a triton_poi_fused_add_0:
        # the kernel hash (exported with record_shapes) keeps them apart
        key = (d.name, info.inductor.get("kernel_hash") if info and info.inductor else None)
        if key not in accs:
            accs[key] = _Acc(d.name)
        _add_dispatch(accs[key], d, info)
    kernel_total = sum(a.total for a in accs.values())
    rows = [_kernel_row(a, kernel_total, launches is not None, triton_names) for a in accs.values()]
    rows.sort(key=lambda r: (-r["total_us"], r["name"]))
    busy = _span_union([(d.start_us, d.start_us + d.dur_us) for d in kept])
    summary = {
        "kernel_time_us": round(kernel_total, 3),
        "gpu_busy_us": round(busy, 3),
        "dispatches": len(kept),
        **counts,
    }
    if kept:
        summary["kernel_span_us"] = round(max(d.start_us + d.dur_us for d in kept)
                                          - min(d.start_us for d in kept), 3)
    return rows, summary


def rank_stats(stats: list[StatRow], declared_total: StatRow | None = None,
               triton_names=None) -> tuple[list[dict], dict, list[str]]:
    """Rank summary rows; the denominator of ``share`` is the tool's Total row when it has one
    (an excerpt of a file still gets shares of the whole run), else the sum of rows."""
    problems: list[str] = []
    merged: dict[str, StatRow] = {}
    for r in stats:  # the same name twice (e.g. two agents) adds up
        m = merged.get(r.name)
        if m is None:
            merged[r.name] = StatRow(r.name, r.calls, r.total_ns, r.avg_ns, r.percentage, r.min_ns, r.max_ns)
        else:
            m.calls += r.calls
            m.total_ns += r.total_ns
            m.percentage = (m.percentage or 0) + (r.percentage or 0) if m.percentage is not None else None
            m.min_ns = min(x for x in (m.min_ns, r.min_ns) if x is not None) if (m.min_ns or r.min_ns) else None
            m.max_ns = max(x for x in (m.max_ns, r.max_ns) if x is not None) if (m.max_ns or r.max_ns) else None
    row_sum = sum(r.total_ns for r in merged.values())
    denom = row_sum
    denom_source = "rows"
    if declared_total is not None and declared_total.total_ns > 0:
        if declared_total.total_ns + 0.5 < row_sum:
            problems.append(f"Total row ({declared_total.total_ns:.0f} ns) is less than the sum of rows "
                            f"({row_sum:.0f} ns); shares use the sum of rows")
        else:
            denom, denom_source = declared_total.total_ns, "total_row"
    rows = []
    for r in merged.values():
        share = r.total_ns / denom if denom > 0 else 0.0
        row = {
            "name": r.name,
            "origin": classify(r.name, False, triton_names),
            "calls": r.calls,
            "total_us": round(r.total_ns / 1000.0, 3),
            "mean_us": round(r.total_ns / r.calls / 1000.0, 3) if r.calls else None,
            "min_us": round(r.min_ns / 1000.0, 3) if r.min_ns is not None else None,
            "max_us": round(r.max_ns / 1000.0, 3) if r.max_ns is not None else None,
            "share": share,
        }
        if r.percentage is not None:
            row["percentage_reported"] = r.percentage
            # the tools round to 3 decimals (hipprof) or 4 significant digits (rocprofv3)
            if abs(share * 100 - r.percentage) > max(0.01, 0.002 * r.percentage):
                problems.append(f"{r.name[:60]}: file says {r.percentage}% but time share is "
                                f"{share * 100:.3f}%")
        rows.append(row)
    rows.sort(key=lambda r: (-r["total_us"], r["name"]))
    summary = {
        "kernel_time_us": round(denom / 1000.0, 3),
        "kernel_time_rows_us": round(row_sum / 1000.0, 3),
        "share_denominator": denom_source,
        "dispatches": (declared_total.calls if declared_total is not None and denom_source == "total_row"
                       else sum(r.calls for r in merged.values())),
    }
    return rows, summary, problems


def rank_profile(parsed: Parsed, include_compile: bool = False, triton_names=None,
                 within: re.Pattern | None = None) -> tuple[list[dict], dict, list[str]]:
    """Rows and summary of any parsed kernel profile (summary table, dispatch list or trace)."""
    if parsed.kernel_stats is not None:
        rows, summary, problems = rank_stats(parsed.kernel_stats, parsed.declared_total, triton_names)
        summary.update(gpu_busy_us=None, wall_span_us=None, gpu_utilization=None)
        return rows, summary, problems
    trace = parsed.trace
    launches = attribute_launches(trace) if trace is not None else None
    dispatches = dispatches_from(parsed)
    rows, summary = rank_dispatches(dispatches, launches, include_compile, triton_names, within)
    if trace is not None:
        lo, hi = trace.span_us
        summary["wall_span_us"] = round(hi - lo, 3)
        keep, _ = select_dispatches(dispatches, launches, include_compile, within)
        kernel_iv = [(d.start_us, d.start_us + d.dur_us) for i, d in enumerate(dispatches) if keep[i]]
        # busy = kernels plus memcpy/memset on the device, overlaps counted once
        summary["gpu_busy_us"] = round(_span_union(kernel_iv + [(e.ts, e.end) for e in trace.gpu_other]), 3)
        summary["gpu_busy_kernels_only_us"] = round(_span_union(kernel_iv), 3)
        summary["timeline"] = step_timeline.timeline(trace, kernel_iv)
        linked = [i.linked_by for i in launches.values()]
        summary["launches_attributed"] = sum(1 for x in linked if x)
        summary["launches_linked_by"] = {k: linked.count(k) for k in sorted({x for x in linked if x})}
    else:
        summary["wall_span_us"] = summary.get("kernel_span_us")
    span = summary.get("wall_span_us")
    summary["gpu_utilization"] = (summary["gpu_busy_us"] / span) if span else None
    return rows, summary, []


def finish(rows: list[dict], summary: dict, top: int | None) -> tuple[list[dict], dict, list[dict]]:
    """Add ranks and origin totals; keep the top N detailed (totals and ``ranking`` cover all).

    Returns (detailed top-N entries, summary, compact ranking of every kernel).
    """
    by_origin = defaultdict(float)
    for r in rows:
        by_origin[r["origin"]] += r["total_us"]
    denom = summary.get("kernel_time_us") or 0.0
    summary["kernels"] = len(rows)
    summary["time_by_origin_us"] = {k: round(v, 3) for k, v in sorted(by_origin.items())}
    summary["triton_share"] = (by_origin.get("triton", 0.0) / denom) if denom > 0 else 0.0
    ranked = [{"rank": i, **r} for i, r in enumerate(rows, 1)]
    ranking = [{k: r[k] for k in ("rank", "name", "origin", "calls", "total_us", "share")} for r in ranked]
    if top is not None and top >= 0:
        summary["shown"] = min(top, len(ranked))
        ranked = ranked[:top]
    return ranked, summary, ranking


def find_kernel(doc: dict, name: str) -> dict | None:
    """The ``ranking`` entry of a kernel_profile/1 document for ``name`` (exact name first, then
    the entry whose mangled/demangled base identifier matches), or None."""
    ranking = doc.get("ranking") or doc.get("kernels") or []
    for r in ranking:
        if r["name"] == name:
            return r
    base = mangled_base(name)
    for r in ranking:
        if mangled_base(r["name"]) == base:
            return r
    return None


# --------------------------------------------------------------------------- PMC join

def mangled_base(name: str) -> str:
    """Identifier a kernel is known by in both mangled and demangled spellings.

    ``_Z31flash_fwd_kernel_16x64_prefetchI...`` and ``void flash_fwd_kernel_16x64_prefetch<...>(...)``
    both give ``flash_fwd_kernel_16x64_prefetch``; ``_ZN2at6native...`` gives the last name.
    """
    m = re.match(r"^_Z(N?)(.*)$", name)
    if m:
        rest, parts = m.group(2), []
        while True:
            lm = re.match(r"^(\d+)", rest)
            if not lm:
                break
            digits = lm.group(1)
            rest = rest[len(digits):]
            # a length past the name's end takes the rest of it; int() refuses past 4300 digits
            n = int(digits) if len(digits) <= 9 else len(rest)
            parts.append(rest[:n])
            rest = rest[n:]
            if not m.group(1):
                break
        return parts[-1] if parts else name
    s = re.sub(r"^void\s+", "", name.strip())
    cut = len(s)
    for i, ch in enumerate(s):  # stop at the first '<' or '('
        if ch in "<(":
            cut = i
            break
    s = s[:cut].strip()
    return s.split("::")[-1] if s else name


def join_pmc(rows: list[dict], records: list[PmcRecord]) -> int:
    """Attach per-kernel means of numeric hardware counters; returns how many rows got some."""
    groups: dict[str, list[PmcRecord]] = defaultdict(list)
    for rec in records:
        groups[mangled_base(rec.kernel)].append(rec)
    joined = 0
    for r in rows:
        recs = groups.get(mangled_base(r["name"]))
        if not recs:
            continue
        sums: dict[str, list[float]] = defaultdict(list)
        for rec in recs:
            for k, v in rec.fields.items():
                if isinstance(v, float):
                    sums[k].append(v)
        r["pmc"] = {"dispatches": len(recs),
                    "mean": {k: sum(v) / len(v) for k, v in sums.items()
                             if k not in ("kernel dispatch index", "dispatch queue index", "process id",
                                          "thread id", "gpu id", "dispatch queue id")}}
        joined += 1
    return joined


def dispatches_from(parsed: Parsed) -> list[Dispatch]:
    if parsed.trace is not None:
        return trace_dispatches(parsed.trace)
    return parsed.dispatches or []
