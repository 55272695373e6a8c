"""Parsers for GPU profiler outputs: each format is read here and nowhere else.

Formats (``detect_format`` names them):

- ``chrome_trace``: torch.profiler / Kineto Chrome trace JSON (``.json`` or ``.json.gz``).
  Kernels are ``cat: "kernel"`` events; the CUDA/HIP runtime launch that queued a kernel
  carries the same ``args.correlation`` (and an ``ac2g`` flow pair links the two).
- ``stats_csv``: per-name summary CSV: hipprof ``<prefix>.hipkernel.csv`` /
  ``.hiptrace.csv`` and rocprofv3 ``--stats`` files (``"Name","Calls","TotalDurationNs",
  "AverageNs","Percentage"[,"MinNs","MaxNs","StdDev"]``, hipprof ends with a ``Total`` row),
  and ``nsys stats -r cuda_gpu_kern_sum --format csv`` (``"Time (%)","Total Time (ns)",
  "Instances","Avg (ns)",...,"Name"``).
- ``hipprof_console``: the ``|``-separated statistics tables hipprof prints to the terminal
  (``HIP API statistics``, ``HIPOPS API statistics`` = GPU kernels, ...).
- ``dispatch_csv``: one row per kernel dispatch: rocprofv3 ``<pid>_kernel_trace.csv``
  (``Kernel_Name``, ``Start_Timestamp``, ``End_Timestamp``, ...) and legacy rocprof
  ``results.csv`` (``KernelName``, ``BeginNs``, ``EndNs``).
- ``hipprof_pmc``: hipprof hardware-counter text ``pmc_results_<pid>.txt``.

All text input tolerates ANSI escapes, ``\\r`` and leading ``#`` comment lines; a malformed
row is skipped and reported in ``problems``; an unknown format raises InputError.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

# CPU ranges whose kernels are compilation or tuning, not the program's steps: Dynamo's timed
# phases, and Triton's Autotuner benchmarking as tko.patch.profile_bootstrap marks it
COMPILE_MARKS = ("(dynamo_timed)", "(tko_autotune)")


def is_compile_range(name: str | None) -> bool:
    return bool(name) and any(m in name for m in COMPILE_MARKS)
from typing import Any

from ..base.errors import InputError
from ..base import inputs

_ANSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")


def clean_text(text: str) -> str:
    """Drop ANSI escapes and carriage returns; a lone ``\\r`` (progress redraw) ends a line."""
    text = _ANSI.sub("", text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def strip_comment_header(lines: list[str]) -> list[str]:
    """Drop the leading ``#`` lines (fixture source headers); no tool output starts with '#'."""
    i = 0
    while i < len(lines) and (lines[i].startswith("#") or not lines[i].strip()):
        i += 1
    return lines[i:]


# --------------------------------------------------------------------------- records

@dataclass
class Dispatch:
    """One kernel execution on the device (times in microseconds)."""

    name: str
    start_us: float
    dur_us: float
    device: Any = None
    stream: Any = None
    correlation: Any = None
    launch: dict = field(default_factory=dict)  # grid/block/registers as the tool names them


@dataclass
class StatRow:
    """One aggregated row of a summary table (times in nanoseconds, as the tools print them)."""

    name: str
    calls: int
    total_ns: float
    avg_ns: float | None = None
    percentage: float | None = None
    min_ns: float | None = None
    max_ns: float | None = None


@dataclass
class TraceEvent:
    name: str
    cat: str
    ts: float
    dur: float
    pid: Any
    tid: Any
    args: dict

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass
class ChromeTrace:
    kernels: list[TraceEvent]
    gpu_other: list[TraceEvent]          # memcpy / memset on the device
    runtime: list[TraceEvent]            # cuda/hip runtime and driver calls
    cpu_ops: list[TraceEvent]            # cpu_op, user_annotation
    python_frames: list[TraceEvent]      # python_function (with_stack=True)
    flows: dict                          # flow id -> {"s": (pid, tid, ts), "f": (pid, tid, ts)}
    span_us: tuple[float, float] | None  # first start, last end over all timed events
    device_properties: list
    problems: list[str]


@dataclass
class PmcRecord:
    kernel: str
    fields: dict  # counter name -> float (units stripped) or str


@dataclass
class Parsed:
    format: str
    dispatches: list[Dispatch] | None = None
    kernel_stats: list[StatRow] | None = None
    api_stats: list[StatRow] | None = None
    declared_total: StatRow | None = None
    trace: ChromeTrace | None = None
    pmc: list[PmcRecord] | None = None
    tables: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- reading

def read_text(path: Path) -> str:
    raw = inputs.read_bytes(path, "a profile file")
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{path}: broken or truncated gzip file ({exc or type(exc).__name__})"
                             ) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        try:
            return raw.decode("latin-1")
        except Exception:  # pragma: no cover - latin-1 decodes any byte
            raise InputError(f"{path}: not a text file") from None


def _first_content_line(lines: list[str]) -> str:
    for line in lines:
        if line.strip():
            return line.strip()
    return ""


_DISPATCH_NAME = ("kernel_name", "kernelname")


def _header_keys(line: str) -> list[str]:
    try:
        row = next(csv.reader([line]))
    except (csv.Error, StopIteration):
        return []
    return [_canon(c) for c in row]


def _is_dispatch_header(keys: set) -> bool:
    return bool(keys & set(_DISPATCH_NAME)) and bool(keys & {"start_timestamp", "beginns"})


def _is_stats_header(keys: set) -> bool:
    return "name" in keys and bool(keys & {"totaldurationns", "total_time_ns"})


def _find_header(lines: list[str], accept, limit: int = 30) -> int | None:
    """Index of the CSV header line; nsys prints a title / 'Processing ...' lines before it."""
    for i, line in enumerate(lines[:limit]):
        if "," in line and accept(set(_header_keys(line))):
            return i
    return None


def detect_format(text: str) -> str:
    """Name the format of a profile given as text (already cleaned), or raise InputError."""
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        return "chrome_trace"
    lines = strip_comment_header(text.split("\n"))
    first = _first_content_line(lines)
    if first.startswith("kernel-name:"):
        return "hipprof_pmc"
    if any(_TABLE_TITLE.search(line) for line in lines[:5000]):
        return "hipprof_console"
    if _find_header(lines, _is_dispatch_header) is not None:
        return "dispatch_csv"
    if _find_header(lines, _is_stats_header) is not None:
        return "stats_csv"
    raise InputError("unknown profile format (expected a torch.profiler Chrome trace, a hipprof "
                     ".hipkernel.csv/.hiptrace.csv or console log, hipprof PMC text, a rocprofv3 "
                     "kernel_trace.csv or --stats csv, or an nsys cuda_gpu_kern_sum csv); "
                     f"first line: {first[:80]!r}")


def read_profile(path: str | Path) -> Parsed:
    """Detect the format of ``path`` and parse it."""
    p = Path(path)
    text = read_text(p)
    head = text[:4096].lstrip()
    if not (head.startswith("{") or head.startswith("[")):
        text = clean_text(text)  # JSON traces can be hundreds of MB: only text formats need this
    try:
        fmt = detect_format(text)
        if fmt == "chrome_trace":
            return Parsed(format=fmt, trace=parse_chrome_trace(_load_json(text, p)))
        if fmt == "hipprof_pmc":
            return parse_hipprof_pmc(text)
        if fmt == "hipprof_console":
            return parse_hipprof_console(text)
        if fmt == "dispatch_csv":
            return parse_dispatch_csv(text)
        return parse_stats_csv(text)
    except InputError as exc:
        raise InputError(f"{p}: {exc}") from None


def _load_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg} at line {exc.lineno}); "
                         "a trace cut short by a crash cannot be read") from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read") from None
    except ValueError as exc:
        raise InputError(f"not valid JSON ({exc})") from None


# --------------------------------------------------------------------------- numbers

def _canon(column: str) -> str:
    """Header cell -> key: lower case, non-alphanumerics to '_' ("Total Time (ns)" -> total_time_ns)."""
    return re.sub(r"[^a-z0-9]+", "_", column.strip().lower()).strip("_")


def kernel_name(raw: str) -> str:
    """A kernel name as the tools print it, minus the AMD code-object descriptor suffix
    (legacy rocprof ``name [clone .kd]``, some ROCm traces ``name.kd``), so one kernel has one
    name across tools and matches Inductor's kernel name."""
    name = raw.strip()
    for suffix in (" [clone .kd]", ".kd"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _num(value: str) -> float:
    v = value.strip().replace(",", "")
    if not v:
        raise ValueError("empty")
    number = float(v)
    if not math.isfinite(number):  # "inf" / "nan" / 1e999 is no measured time or count
        raise ValueError(f"not a finite number: {v[:20]}")
    return number


# Column aliases of summary tables: canonical field -> header keys seen in the tools.
_STAT_COLUMNS = {
    "name": ("name",),
    "calls": ("calls", "instances", "count"),
    "total_ns": ("totaldurationns", "total_time_ns"),
    "avg_ns": ("averagens", "avg_ns", "average"),
    "percentage": ("percentage", "time", "time_"),
    "min_ns": ("minns", "min_ns", "minimum"),
    "max_ns": ("maxns", "max_ns", "maximum"),
}


def _column_map(keys: list[str], aliases: dict) -> dict[str, int]:
    found = {}
    for fieldname, names in aliases.items():
        for i, key in enumerate(keys):
            if key in names:
                found[fieldname] = i
                break
    return found


def _stat_rows(header: list[str], rows: list[tuple[int, list[str]]], where: str,
               problems: list[str]) -> tuple[list[StatRow], StatRow | None]:
    """Rows of one summary table -> StatRows; the ``Total`` row is returned separately."""
    cols = _column_map([_canon(h) for h in header], _STAT_COLUMNS)
    missing = [f for f in ("name", "calls", "total_ns") if f not in cols]
    if missing:
        raise InputError(f"{where}: summary table lacks column(s) {', '.join(missing)} "
                         f"(header: {', '.join(header)})")
    out: list[StatRow] = []
    total = None
    for lineno, row in rows:
        if not any(c.strip() for c in row):
            continue
        try:
            if len(row) != len(header):
                raise ValueError(f"{len(row)} fields, header has {len(header)}")
            name = kernel_name(row[cols["name"]])
            if not name:
                raise ValueError("empty name")

            def opt(key):
                if key not in cols or not row[cols[key]].strip():
                    return None
                return _num(row[cols[key]])

            rec = StatRow(name=name, calls=int(_num(row[cols["calls"]])),
                          total_ns=_num(row[cols["total_ns"]]), avg_ns=opt("avg_ns"),
                          percentage=opt("percentage"), min_ns=opt("min_ns"), max_ns=opt("max_ns"))
        except (ValueError, IndexError) as exc:
            problems.append(f"{where} line {lineno}: malformed row skipped ({exc}): "
                            f"{','.join(row)[:120]}")
            continue
        if name == "Total":
            total = rec
        else:
            out.append(rec)
    return out, total


def _looks_like_api(rows: list[StatRow]) -> bool:
    """hipprof writes API and kernel summaries with the same columns; API names are hip*/hsa*."""
    if not rows:
        return False
    api = sum(1 for r in rows if re.match(r"^(__)?(hip|hsa|hiprtc|cuda|cu|nccl|rccl)[A-Z_]", r.name))
    return api == len(rows)


# --------------------------------------------------------------------------- stats CSV

def parse_stats_csv(text: str) -> Parsed:
    lines = strip_comment_header(text.split("\n"))
    lines = lines[_find_header(lines, _is_stats_header) or 0:]
    problems: list[str] = []
    reader = csv.reader(io.StringIO("\n".join(lines)))
    try:
        header = next(reader)
    except StopIteration:
        raise InputError("empty file") from None
    except csv.Error as exc:
        raise InputError(f"not a CSV file ({exc})") from None
    rows = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.append(f"line {reader.line_num}: unreadable CSV ({exc})")
            continue
        rows.append((reader.line_num, row))
    stats, total = _stat_rows(header, rows, "csv", problems)
    parsed = Parsed(format="stats_csv", declared_total=total, problems=problems)
    if _looks_like_api(stats):
        parsed.api_stats = stats
    else:
        parsed.kernel_stats = stats
    if "instances" in [_canon(h) for h in header]:
        parsed.format = "nsys_kern_sum"
    return parsed


# --------------------------------------------------------------------------- hipprof console

_TABLE_TITLE = re.compile(r"^HIP_PROF:.*?\b([A-Z][A-Za-z]* API statistics|[A-Za-z ]*statistics)\s*$")


def parse_hipprof_console(text: str) -> Parsed:
    """The ``|Name |Calls |...|`` tables hipprof prints; ``HIPOPS API statistics`` are kernels."""
    lines = text.split("\n")
    problems: list[str] = []
    tables: dict[str, tuple[list[StatRow], StatRow | None]] = {}
    title = None
    header: list[str] | None = None
    body: list[tuple[int, list[str]]] = []

    def close():
        nonlocal header, body
        if title and header:
            tables[title] = _stat_rows(header, body, f"table '{title}'", problems)
        header, body = None, []

    for lineno, line in enumerate(lines, 1):
        m = _TABLE_TITLE.match(line.strip())
        if m:
            close()
            title = m.group(1).strip()
            continue
        s = line.strip()
        if not s.startswith("|") or title is None:
            continue
        cells = [c.strip() for c in s.strip("|").split("|")]
        if header is None:
            header = cells
        else:
            body.append((lineno, cells))
    close()
    if not tables:
        raise InputError("hipprof log holds no statistics table (run hipprof with --hip-trace)")
    parsed = Parsed(format="hipprof_console", problems=problems)
    # "HIPOPS API statistics" is the GPU-op (kernel) table; "HIP API statistics" the host calls
    for name, (rows, total) in tables.items():
        parsed.tables[name] = rows
        if name.upper().startswith("HIPOPS"):
            parsed.kernel_stats, parsed.declared_total = rows, total
        elif name.upper().startswith("HIP API") or _looks_like_api(rows):
            parsed.api_stats = parsed.api_stats or rows
        elif parsed.kernel_stats is None:
            parsed.kernel_stats, parsed.declared_total = rows, total
    return parsed


# --------------------------------------------------------------------------- dispatch CSV

_DISPATCH_COLUMNS = {
    "name": ("kernel_name", "kernelname"),
    "start": ("start_timestamp", "beginns"),
    "end": ("end_timestamp", "endns"),
    "kind": ("kind",),
    "device": ("agent_id", "gpu_id"),
    "stream": ("stream_id", "queue_id"),
    "correlation": ("correlation_id", "index"),
}
_DISPATCH_LAUNCH = {  # launch geometry / resources kept as the tool names them
    "grid_size": (("grid_size_x", "grid_size_y", "grid_size_z"), ("grd",)),
    "workgroup_size": (("workgroup_size_x", "workgroup_size_y", "workgroup_size_z"), ("wgr",)),
    "lds_bytes": (("lds_block_size",), ("group_segment_size",), ("lds",)),
    "scratch_bytes": (("scratch_size",), ("private_segment_size",), ("scr",)),
    "vgpr": (("vgpr_count",), ("arch_vgpr_count",), ("arch_vgpr",)),
    "accum_vgpr": (("accum_vgpr_count",), ("accum_vgpr",)),
    "sgpr": (("sgpr_count",), ("sgpr",)),
}


def _maybe_int(v: str):
    try:
        f = float(v)
        return int(f) if f.is_integer() else f
    except ValueError:
        return v.strip()


def parse_dispatch_csv(text: str) -> Parsed:
    lines = strip_comment_header(text.split("\n"))
    lines = lines[_find_header(lines, _is_dispatch_header) or 0:]
    reader = csv.reader(io.StringIO("\n".join(lines)))
    try:
        header = next(reader)
    except StopIteration:
        raise InputError("empty file") from None
    except csv.Error as exc:  # e.g. a quote the header opens and never closes
        raise InputError(f"not a CSV file ({exc})") from None
    keys = [_canon(h) for h in header]
    cols = _column_map(keys, _DISPATCH_COLUMNS)
    missing = [f for f in ("name", "start", "end") if f not in cols]
    if missing:
        raise InputError(f"kernel trace CSV lacks column(s) {', '.join(missing)}")
    problems: list[str] = []
    out: list[Dispatch] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.append(f"line {reader.line_num}: unreadable CSV ({exc})")
            continue
        if not any(c.strip() for c in row):
            continue
        lineno = reader.line_num
        try:
            if len(row) != len(header):
                raise ValueError(f"{len(row)} fields, header has {len(header)}")
            if "kind" in cols and row[cols["kind"]].strip() not in ("KERNEL_DISPATCH", ""):
                continue
            start, end = _num(row[cols["start"]]), _num(row[cols["end"]])
            if end < start:
                raise ValueError("end before start")
            launch = {}
            for out_key, variants in _DISPATCH_LAUNCH.items():
                for names in variants:
                    idx = [keys.index(n) for n in names if n in keys]
                    if len(idx) == len(names):
                        vals = [_maybe_int(row[i]) for i in idx]
                        launch[out_key] = vals if len(vals) > 1 else vals[0]
                        break
            out.append(Dispatch(
                name=kernel_name(row[cols["name"]]), start_us=start / 1000.0, dur_us=(end - start) / 1000.0,
                device=_maybe_int(row[cols["device"]]) if "device" in cols else None,
                stream=_maybe_int(row[cols["stream"]]) if "stream" in cols else None,
                correlation=_maybe_int(row[cols["correlation"]]) if "correlation" in cols else None,
                launch=launch))
        except (ValueError, IndexError) as exc:
            problems.append(f"line {lineno}: malformed row skipped ({exc}): {','.join(row)[:120]}")
    return Parsed(format="dispatch_csv", dispatches=out, problems=problems)


# --------------------------------------------------------------------------- hipprof PMC

_PMC_FIELD = re.compile(r"^\s+(\S.*?)\s{2,}(\S.*?)\s*$")
_PMC_VALUE = re.compile(r"^(-?[0-9.]+(?:[eE][-+]?\d+)?)\s*(?:\(([^)]*)\))?$")


def _finite(text: str) -> float | None:
    """:func:`_num` of ``text``, None where it raises ("1.2.3" matches the value pattern too)."""
    try:
        return _num(text)
    except ValueError:
        return None


def parse_hipprof_pmc(text: str) -> Parsed:
    """``kernel-name:"<mangled>"`` then `` <field, 42 cols><value>[(unit)]`` lines per dispatch."""
    problems: list[str] = []
    records: list[PmcRecord] = []
    current: PmcRecord | None = None
    for lineno, line in enumerate(strip_comment_header(text.split("\n")), 1):
        if line.startswith("kernel-name:"):
            name = line[len("kernel-name:"):].strip()
            if len(name) >= 2 and name[0] == name[-1] == '"':
                name = name[1:-1]
            current = PmcRecord(kernel=name, fields={})
            records.append(current)
            continue
        if not line.strip():
            continue
        m = _PMC_FIELD.match(line)
        if current is None or not m:
            problems.append(f"line {lineno}: unrecognised PMC line skipped: {line.strip()[:100]}")
            continue
        key, raw = m.group(1).strip(), m.group(2).strip()
        v = _PMC_VALUE.match(raw)
        number = _finite(v.group(1)) if v else None
        if number is not None:
            unit = v.group(2)
            fname = f"{key} ({unit})" if unit else key
            current.fields[fname] = number
        else:
            current.fields[key] = raw
    if not records:
        raise InputError("no 'kernel-name:' record in PMC text")
    return Parsed(format="hipprof_pmc", pmc=records, problems=problems)


# --------------------------------------------------------------------------- Chrome trace

_KERNEL_CATS = {"kernel"}
_GPU_OTHER_CATS = {"gpu_memcpy", "gpu_memset"}
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_api", "runtime"}
_CPU_CATS = {"cpu_op", "user_annotation"}
_PY_CATS = {"python_function"}


def parse_chrome_trace(doc: Any) -> ChromeTrace:
    """Split a Kineto trace into kernels, runtime calls, CPU ops, python frames and flows."""
    if isinstance(doc, dict):
        events = doc.get("traceEvents")
        props = doc.get("deviceProperties") or []
    elif isinstance(doc, list):  # bare event array form of the Chrome format
        events, props = doc, []
    else:
        events, props = None, []
    if not isinstance(events, list):
        raise InputError("JSON has no 'traceEvents' list: not a Chrome trace")
    problems: list[str] = []
    out = ChromeTrace([], [], [], [], [], {}, None, props if isinstance(props, list) else [], problems)
    lo, hi = None, None
    bad = 0
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            bad += 1
            continue
        ph = ev.get("ph")
        cat = str(ev.get("cat") or "")
        if ph in ("s", "f", "t") and "id" in ev:
            if not _ids_ok(ev, ("id", "pid", "tid")):
                bad += 1
                continue
            slot = out.flows.setdefault((cat, ev["id"]), {})
            slot["s" if ph == "s" else "f"] = (ev.get("pid"), ev.get("tid"), _f(ev.get("ts")))
            continue
        if ph != "X":
            continue
        te = _timed_event(ev, cat)
        if te is None:
            bad += 1
            continue
        lo = te.ts if lo is None else min(lo, te.ts)
        hi = te.end if hi is None else max(hi, te.end)
        lcat = cat.lower()
        if lcat in _KERNEL_CATS:
            te.name = kernel_name(te.name)
            out.kernels.append(te)
        elif lcat in _GPU_OTHER_CATS:
            out.gpu_other.append(te)
        elif lcat in _RUNTIME_CATS:
            out.runtime.append(te)
        elif lcat in _CPU_CATS:
            out.cpu_ops.append(te)
        elif lcat in _PY_CATS:
            out.python_frames.append(te)
    if bad:
        problems.append(f"{bad} malformed trace event(s) skipped")
    out.span_us = (lo, hi) if lo is not None else None
    return out


def _f(v):
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return None


# Trace fields the ranking uses as keys (grouping, linking): they must be plain scalars.
_ID_ARGS = ("correlation", "External id", "device", "stream", "kernel_hash", "kernel_name",
            "kernel_backend")


def _ids_ok(mapping: dict, keys: tuple) -> bool:
    return all(mapping.get(k) is None or isinstance(mapping[k], (str, int, float)) for k in keys)


def _timed_event(ev: dict, cat: str) -> TraceEvent | None:
    """An ``X`` event as a TraceEvent, or None when a field has the wrong type."""
    args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
    if not _ids_ok(ev, ("pid", "tid")) or not _ids_ok(args, _ID_ARGS):
        return None
    ts, dur = _f(ev.get("ts")), _f(ev.get("dur", 0.0))
    if isinstance(ev.get("ts"), bool) or ts is None or dur is None \
            or not math.isfinite(ts) or not math.isfinite(dur) or dur < 0:
        return None
    return TraceEvent(name=str(ev.get("name", "")), cat=cat, ts=ts, dur=dur, pid=ev.get("pid"),
                      tid=ev.get("tid"), args=args)


def trace_dispatches(trace: ChromeTrace) -> list[Dispatch]:
    """Kernel events of a Chrome trace as Dispatch records."""
    keep = ("grid", "block", "registers per thread", "shared memory", "blocks per SM",
            "warps per SM", "est. achieved occupancy %")
    out = []
    for k in trace.kernels:
        out.append(Dispatch(name=k.name, start_us=k.ts, dur_us=k.dur,
                            device=k.args.get("device", k.pid), stream=k.args.get("stream", k.tid),
                            correlation=k.args.get("correlation"),
                            launch={key: k.args[key] for key in keep if key in k.args}))
    return out
