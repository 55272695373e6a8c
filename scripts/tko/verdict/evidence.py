"""Gather one kernel's evidence from the artifacts of the other scripts.

Each artifact is optional. The ``from_*`` adapters (tko.verdict.report calls them in order) fill an
:class:`Evidence` with the sections the report shows and the facts the decision rules read
(``tko.base.decide.Fact`` with the artifact and field each value came from); an artifact that is absent
or does not mention the kernel becomes a listed gap, never an error. Each artifact is first read
into a frozen record (``Profile``, ``AutotuneKernel``, ``MetaKernel``, ``IsaKernel``, ``KernelRun``,
...) that checks the types of its fields once: a field of the wrong type reads as missing.
"""


from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from ..base import archs
from ..base.decide import Fact

GEMM_NAME = re.compile(r"(^|_)(mm|bmm|addmm|baddbmm|matmul|gemm)(_|$)")


# ----------------------------------------------------------------------------- typed reading
# Each artifact is read once, at the edge, into a frozen record whose fields have the type the
# code below relies on: a field of the wrong type reads as missing (None, or an empty container),
# never as an exception deep inside a rule or a template.

# An integer past a float's range (JSON integers have no bound) cannot be divided or formatted as
# a float: it reads as missing, like a field of the wrong type.
_FLOAT_RANGE = int(sys.float_info.max)


def _num(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if isinstance(value, int) and abs(value) > _FLOAT_RANGE else value


def _positive(value: Any) -> int | float | None:
    """A number above zero (a ratio or a time), else None."""
    number = _num(value)
    return number if number is not None and number > 0 else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _obj_or_none(value: Any) -> dict | None:
    return value if isinstance(value, dict) else None


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _list_or_none(value: Any) -> list | None:
    return value if isinstance(value, list) else None


def _objs(value: Any) -> list[dict]:
    """The objects of a list (other entries dropped), or [] for anything else."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _objs_or_none(value: Any) -> list[dict] | None:
    """Like :func:`_objs`, but None (absent) for anything that is not a list."""
    return _objs(value) if isinstance(value, list) else None


def _numbers_in(rec: dict, keys: tuple[str, ...] | None = None) -> dict:
    """``rec`` with the values of ``keys`` (default: all) that are not numbers set to None: an
    object the report shows as it is, with the fields the template formats as numbers made safe."""
    return {k: v if v is None or _num(v) is not None or (keys is not None and k not in keys) else None
            for k, v in rec.items()}


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


@dataclass
class Evidence:
    kernel: str
    facts: dict[str, Fact] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)

    def fact(self, name: str, value: Any, source: str) -> None:
        if value is not None:
            self.facts[name] = Fact(value, source)


def find_kernel(records: list, kernel: str, key: str) -> tuple[int, Any] | tuple[None, None]:
    """The record whose ``key`` (a field of a dict, an attribute of a typed record) names the
    kernel: exact name first, then a unique prefix match."""
    def name(rec):
        return rec.get(key) if isinstance(rec, dict) else getattr(rec, key)

    for i, rec in enumerate(records):
        if name(rec) == kernel:
            return i, rec
    prefixed = [(i, r) for i, r in enumerate(records) if str(name(r) or "").startswith(kernel)]
    return prefixed[0] if len(prefixed) == 1 else (None, None)


# ----------------------------------------------------------------------------- autotune summary

CONFIG_NUMBERS = ("ms", "x_fastest", "gb_per_s")


def _first_launch(rec: dict) -> Any:
    """The kernel's first recorded launch: ``launches[0]`` (autotune_summary/2), ``launch`` (/1)."""
    launches = rec.get("launches")
    if isinstance(launches, list) and launches:
        return launches[0]
    return rec.get("launch")


def _launch(value: Any) -> dict | None:
    """The recorded launch (input shapes, grid, bytes) as shown; its ``args`` a list of objects."""
    if not isinstance(value, dict):
        return None
    return {**value, "args": _objs(value["args"])} if "args" in value else value


@dataclass(frozen=True)
class AutotuneKernel:
    """One ``kernels[]`` entry of an ``autotune_summary`` (/1 or /2); the objects shown as they are
    (``winner``, ``configs``, ``launch``) are checked to be objects."""
    kernel: str | None
    kind: str | None
    winner: dict | None
    winner_from: str | None
    fastest_ms: int | float | None
    slowest_ms: int | float | None
    spread: int | float | None
    configs: list[dict]                 # the numbers the report formats (ms, x_fastest, gb_per_s) checked
    flags: list[str] | None
    statistic: str | None
    from_cache: bool | None
    num_bytes: int | float | None
    bytes_source: str | None
    standalone_file: str | None
    notes: list | None
    launch: dict | None

    @classmethod
    def read(cls, rec: dict) -> AutotuneKernel:
        flags = rec.get("flags")
        return cls(kernel=_str(rec.get("kernel")), kind=_str(rec.get("kind")), winner=_obj_or_none(rec.get("winner")),
                   winner_from=_str(rec.get("winner_from")), fastest_ms=_num(rec.get("fastest_ms")),
                   slowest_ms=_num(rec.get("slowest_ms")), spread=_num(rec.get("spread")),
                   configs=[_numbers_in(c, CONFIG_NUMBERS) for c in _objs(rec.get("configs"))], flags=_strs(flags) if isinstance(flags, list) else None,
                   statistic=_str(rec.get("statistic")), from_cache=_bool(rec.get("from_cache")),
                   num_bytes=_num(rec.get("num_bytes")), bytes_source=_str(rec.get("bytes_source")),
                   standalone_file=_str(rec.get("standalone_file")), notes=_list_or_none(rec.get("notes")),
                   launch=_launch(_first_launch(rec)))

    def winner_ms(self) -> int | float | None:
        return _num((self.winner or {}).get("ms"))

    def winner_gb_per_s(self) -> int | float | None:
        return _num((self.winner or {}).get("gb_per_s"))


AUTOTUNE_SECTION = ("kind", "winner", "winner_from", "fastest_ms", "slowest_ms", "spread", "configs", "flags",
                    "statistic", "from_cache", "num_bytes", "bytes_source", "standalone_file", "notes")


def from_summary(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no autotune summary (summarize_autotune_log.py): configs tried unknown")
        return
    i, rec = find_kernel([AutotuneKernel.read(k) for k in _objs(doc.get("kernels"))], ev.kernel, "kernel")
    if rec is None:
        ev.gaps.append(f"{label}: kernel not in the autotune summary (no capture of it)")
        return
    where = f"{label}: kernels[{i}]"
    timed = [c for c in rec.configs if c.get("ms") is not None]
    ev.sections["autotune"] = {k: getattr(rec, k) for k in AUTOTUNE_SECTION}
    if rec.launch:
        ev.sections["inputs"] = rec.launch
    else:
        ev.gaps.append(f"{where}: no launch recorded (capture log without a launch event): input shapes unknown")
    ev.fact("n_configs", len(timed) or (1 if rec.winner else None), f"{where}.configs (timed)")
    ev.fact("spread", rec.spread, f"{where}.spread")
    ev.fact("from_cache", rec.from_cache, f"{where}.from_cache")
    ev.sections.setdefault("timing", {})["autotune_winner_ms"] = rec.winner_ms()
    if rec.winner_gb_per_s() is not None:
        ev.sections["timing"]["autotune_winner_gb_per_s"] = rec.winner_gb_per_s()
        ev.sections["timing"].setdefault("gb_per_s_source", f"{where}.winner.gb_per_s")


# ----------------------------------------------------------------------------- triton meta

@dataclass(frozen=True)
class MemoryOp:
    """A ``memory_ops[]`` or ``atomics[]`` entry of a kernel in a ``triton_meta/1``."""
    op: str | None
    kind: str | None
    indirect: bool | None
    bases: list[str]

    @classmethod
    def read(cls, rec: dict) -> MemoryOp:
        return cls(op=_str(rec.get("op")), kind=_str(rec.get("kind")), indirect=_bool(rec.get("indirect")),
                   bases=_strs(rec.get("bases")))


@dataclass(frozen=True)
class Param:
    name: str | None
    kind: str | None
    dtype: str | None

    @classmethod
    def read(cls, rec: dict) -> Param:
        return cls(name=_str(rec.get("name")), kind=_str(rec.get("kind")), dtype=_str(rec.get("dtype")))


@dataclass(frozen=True)
class MetaKernel:
    """One ``kernels[]`` entry of a ``triton_meta/1``: the @triton.jit function's accesses."""
    name: str | None
    kind: str | None
    memory_ops: list[MemoryOp]
    atomics: list[MemoryOp]
    params: list[Param]
    pointer_hints: dict[str, dict]      # {pointer: {"tt.divisibility": ..., "tt.pointer_range": ...}}
    hint_calls: list[str | None]        # the text of each hint call
    reductions: list[str | None]        # the op of each reduction
    findings: list
    inductor_facts: dict | None

    @classmethod
    def read(cls, rec: dict) -> MetaKernel:
        hints = {k: v for k, v in _obj(rec.get("pointer_hints")).items() if isinstance(v, dict)}
        return cls(name=_str(rec.get("name")), kind=_str(rec.get("kind")),
                   memory_ops=[MemoryOp.read(o) for o in _objs(rec.get("memory_ops"))],
                   atomics=[MemoryOp.read(o) for o in _objs(rec.get("atomics"))],
                   params=[Param.read(p) for p in _objs(rec.get("params"))], pointer_hints=hints,
                   hint_calls=[_str(h.get("text")) for h in _objs(rec.get("hint_calls"))],
                   reductions=[_str(r.get("op")) for r in _objs(rec.get("reductions"))],
                   findings=_list(rec.get("findings")), inductor_facts=_obj_or_none(rec.get("inductor_facts")))

    def hint(self, pointer: str | None, name: str) -> Any:
        return self.pointer_hints.get(pointer, {}).get(name) if pointer is not None else None


def _entry(doc: dict, kernel: str) -> tuple[int, MetaKernel] | tuple[None, None]:
    """The entry kernel the file names, else the kernel matching the name."""
    kernels = [MetaKernel.read(k) for k in _objs(doc.get("kernels"))]
    entry = _str(doc.get("entry_kernel"))
    for i, k in enumerate(kernels):
        if k.name == entry:
            return i, k
    return find_kernel(kernels, kernel, "name")


def _meta_section(k: MetaKernel, source: Any) -> dict:
    ops = k.memory_ops
    return {
        "name": k.name, "kind": k.kind, "source": source,
        "pointers": [{"name": p.name, "dtype": p.dtype, "divisibility": k.hint(p.name, "tt.divisibility"),
                      "pointer_range": k.hint(p.name, "tt.pointer_range")}
                     for p in k.params if p.kind == "pointer"],
        "scalars": [{"name": p.name, "dtype": p.dtype} for p in k.params if p.kind == "scalar"],
        "hint_calls": k.hint_calls,
        "loads": sum(1 for o in ops if o.op == "load"), "stores": sum(1 for o in ops if o.op == "store"),
        "atomics": len(k.atomics),
        "gathers": sum(1 for o in ops if o.kind == "gather"),
        "scatters": sum(1 for o in ops + k.atomics if o.kind == "scatter"),
        "reductions": k.reductions,
        "findings": k.findings,
        "inductor_facts": k.inductor_facts,
    }


def from_meta(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no kernel metadata (inspect_triton_meta.py): pointer hints and access kinds unknown")
        return
    i, k = _entry(doc, ev.kernel)
    if k is None:
        ev.gaps.append(f"{label}: no @triton.jit function matches the kernel")
        return
    where = f"{label}: kernels[{i}]"
    loads = [o for o in k.memory_ops if o.op == "load"]
    stores = [o for o in k.memory_ops if o.op == "store"]
    ev.sections["meta"] = _meta_section(k, doc.get("source"))
    ev.fact("loads", len(loads), f"{where}.memory_ops (op=load)")
    ev.fact("stores", len(stores), f"{where}.memory_ops (op=store)")
    ev.fact("atomics", len(k.atomics), f"{where}.atomics")
    ev.fact("scatter", any(o.kind == "scatter" or o.indirect for o in stores + k.atomics),
            f"{where}.memory_ops/atomics (kind=scatter or indirect offset)")
    # Inductor passes the symbolic sizes of a dynamic-shape graph as ks0, ks1, ... scalars
    dynamic = [p.name for p in k.params if p.kind == "scalar" and re.fullmatch(r"ks\d+", str(p.name))]
    ev.sections["meta"]["dynamic_size_args"] = dynamic
    ev.fact("dynamic_sizes", bool(dynamic), f"{where}.params (scalars named ks<N>: {dynamic or 'none'})")
    ev.fact("dynamic_size_args", ", ".join(dynamic) or None, f"{where}.params")
    # Multi-pass: an input pointer loaded at several places of a reduction kernel (Inductor's
    # looped reductions re-read the row once per pass).
    if k.reductions:
        bases: dict[str, int] = {}
        for o in loads:
            for b in o.bases:
                bases[b] = bases.get(b, 0) + 1
        reread = sorted(b for b, n in bases.items() if n > 1)
        ev.sections["meta"]["reread_inputs"] = reread
        ev.fact("multi_pass", bool(reread), f"{where}.memory_ops (same base loaded {reread or 'once'})")
    else:
        ev.fact("multi_pass", False, f"{where}.reductions (none)")


# ----------------------------------------------------------------------------- isa scan

ISA_TOTALS = ("matrix_ops", "atomics", "spills")


@dataclass(frozen=True)
class IsaKernel:
    """One ``kernels[]`` record of an ``isa_scan/1``; the objects the report shows as they are
    (``data_ops``, ``widths``, ``resources``, ``occupancy``) are checked to be objects."""
    name: str | None
    format: str | None
    arch: str | None
    source: str | None
    verdict: str | None
    data_ops: dict | None
    widths: dict | None
    resources: dict | None
    occupancy: dict | None
    findings: list
    families: dict[str, int]
    mix: dict
    totals: dict[str, int] | None       # None: absent (a scan older than the field) or malformed
    num_warps: int | None               # triton_metadata.num_warps

    @classmethod
    def read(cls, rec: dict) -> IsaKernel:
        totals = rec.get("totals")
        if not (isinstance(totals, dict) and all(_int(totals.get(k)) is not None for k in ISA_TOTALS)):
            totals = None
        return cls(name=_str(rec.get("name")), format=_str(rec.get("format")), arch=_str(rec.get("arch")),
                   source=_str(rec.get("source")), verdict=_str(rec.get("verdict")),
                   data_ops=_obj_or_none(rec.get("data_ops")), widths=_obj_or_none(rec.get("widths")),
                   resources=_obj_or_none(rec.get("resources")), occupancy=_obj_or_none(rec.get("occupancy")),
                   findings=_list(rec.get("findings")),
                   families={k: v for k, v in _obj(rec.get("families")).items() if _int(v) is not None},
                   mix=_numbers_in(_obj(rec.get("mix")), ("valu_per_byte",)),
                   totals={k: totals[k] for k in ISA_TOTALS} if totals else None,
                   num_warps=_int(_obj(rec.get("triton_metadata")).get("num_warps")))


def _isa_record(kernels: list[IsaKernel], kernel: str,
                num_warps: int | None) -> tuple[int, IsaKernel] | tuple[None, None]:
    """The record of the kernel; of several (one per autotune config), the winner's num_warps."""
    matches = [(i, r) for i, r in enumerate(kernels) if r.name == kernel]
    if not matches:
        found = find_kernel(kernels, kernel, "name")
        matches = [found] if found[1] is not None else []
    if not matches:
        return None, None
    if num_warps is not None:
        for i, r in matches:
            if r.num_warps == num_warps:
                return i, r
    return matches[0]


def _isa_totals(rec: IsaKernel, where: str) -> tuple[dict[str, int], dict[str, str]]:
    """The scanner's ``totals`` of a kernel record, with the field each came from; a record
    written before ``totals`` existed (or with a malformed one) is summed from its families."""
    if rec.totals is not None:
        return rec.totals, {k: f"{where}.totals.{k}" for k in ISA_TOTALS}
    from ..read.isa import legacy_totals

    return legacy_totals(rec.families, rec.resources or {}), {
        "matrix_ops": f"{where}.families (mfma/mmac/mma/wgmma)", "atomics": f"{where}.families (atomic)",
        "spills": f"{where}.resources spill counts / local memory ops"}


ISA_SECTION = ("name", "format", "arch", "source", "verdict", "data_ops", "widths", "resources", "occupancy",
               "findings")


def from_isa(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no ISA scan (scan_amdgcn.py): load/store instruction families unknown")
        return
    kernels = [IsaKernel.read(r) for r in _objs(doc.get("kernels"))]
    winner = (ev.sections.get("autotune") or {}).get("winner") or {}
    i, rec = _isa_record(kernels, ev.kernel, _int(_obj(winner.get("config")).get("num_warps")))
    if rec is None:
        ev.gaps.append(f"{label}: no listing of this kernel among {len(kernels)} scanned")
        return
    where = f"{label}: kernels[{i}]"
    info = archs.info(rec.arch or "")
    ev.sections["isa"] = {k: getattr(rec, k) for k in ISA_SECTION}
    ev.sections["isa"]["families"] = {k: v for k, v in rec.families.items() if v}
    ev.sections["isa"]["mix"] = rec.mix
    ev.sections["isa"]["records_for_kernel"] = sum(1 for r in kernels if r.name == ev.kernel)
    totals, sources = _isa_totals(rec, where)
    ev.fact("matrix_ops", totals["matrix_ops"], sources["matrix_ops"])
    if totals["atomics"] and "atomics" not in ev.facts:
        ev.fact("atomics", totals["atomics"], sources["atomics"])
    ev.fact("spills", totals["spills"], sources["spills"])
    ev.fact("valu_per_byte", _num(rec.mix.get("valu_per_byte")), f"{where}.mix.valu_per_byte")
    ev.fact("memory_verdict", rec.verdict, f"{where}.verdict")
    ev.fact("vendor", info.vendor if info else ("nvidia" if rec.format in ("ptx", "sass") else None),
            f"{where}.arch ({rec.arch})")


# ----------------------------------------------------------------------------- kernel run, peak

@dataclass(frozen=True)
class RunTiming:
    """``best`` / ``fastest`` / one ``results[]`` entry of a ``kernel_run/1``."""
    ms: int | float | None
    config: dict | None
    bytes: int | float | None
    gb_per_s: int | float | None
    best: bool | None
    ok: bool | None
    timer: str | None

    @classmethod
    def read(cls, rec: dict) -> RunTiming:
        return cls(ms=_num(rec.get("ms")), config=_obj_or_none(rec.get("config")), bytes=_num(rec.get("bytes")),
                   gb_per_s=_num(rec.get("gb_per_s")), best=_bool(rec.get("best")), ok=_bool(rec.get("ok")),
                   timer=_str(rec.get("timer")))


@dataclass(frozen=True)
class KernelRun:
    """A ``kernel_run/1`` (run_captured_kernel.py): the captured winner's standalone timing."""
    status: str | None
    error: str | None
    best: RunTiming | None       # ``best``, else ``fastest``
    fastest: RunTiming | None
    results: list[RunTiming]

    @classmethod
    def read(cls, doc: dict) -> KernelRun:
        best, fastest = _obj(doc.get("best")), _obj(doc.get("fastest"))
        return cls(status=_str(doc.get("status")), error=_str(doc.get("error")),
                   best=RunTiming.read(best or fastest) if best or fastest else None,
                   fastest=RunTiming.read(fastest) if fastest else None,
                   results=[RunTiming.read(r) for r in _objs(doc.get("results"))])


def from_run(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no standalone run (run_captured_kernel.py): time outside the program unknown")
        return
    run = KernelRun.read(doc)
    best = run.best
    if run.status != "ok" or not best:
        ev.gaps.append(f"{label}: standalone run {run.status}: {run.error}")
        return
    t = ev.sections.setdefault("timing", {})
    t.update({"standalone_ms": best.ms, "standalone_config": best.config,
              "standalone_bytes": best.bytes, "standalone_gb_per_s": best.gb_per_s,
              "fastest_config_ms": run.fastest.ms if run.fastest else None})
    if best.gb_per_s is not None:
        t["gb_per_s_source"] = f"{label}: best.gb_per_s"
    # the device time of a launch with L2 flushed (run_captured_kernel.py --timer ...,profiler_flushed)
    # is what DRAM delivers; do_bench's events add the launch latency, which for a kernel of a few
    # microseconds is most of its time (H200: 1.4-4.9x the device time below ~20 us)
    device = next((r for r in run.results if r.best and r.ok and r.timer == "torch.profiler.l2_flushed"), None)
    if device and device.gb_per_s is not None:
        t.update({"standalone_device_ms": device.ms, "standalone_gb_per_s": device.gb_per_s,
                  "gb_per_s_source": f"{label}: torch.profiler device time, L2 flushed (captured winner)"})


@dataclass(frozen=True)
class Peak:
    """A device's copy bandwidth as tko.measure.peaks.lookup gives it (measured store, bundled table) or
    ``--peak-gbps``."""
    peak_gbps: int | float | None
    copy_gbps: int | float | None
    basis: str | None
    source: str | None
    kind: str | None
    where: str | None
    device: str | None
    arch: str | None

    @classmethod
    def read(cls, peak: dict) -> Peak:
        return cls(peak_gbps=_num(peak.get("peak_gbps")), copy_gbps=_num(peak.get("copy_gbps")),
                   **{k: _str(peak.get(k)) for k in ("basis", "source", "kind", "where", "device", "arch")})


def from_peak(ev: Evidence, peak: dict | None, device_name: str | None, arch: str | None) -> None:
    t = ev.sections.setdefault("timing", {})
    gbps = t.get("standalone_gb_per_s", t.get("autotune_winner_gb_per_s"))
    ev.fact("gb_per_s", gbps, t.get("gb_per_s_source", "timing"))
    if not peak:
        ev.gaps.append(f"no peak bandwidth known for {device_name or 'the device'} {arch or ''}".rstrip()
                       + ": run measure_peak_bandwidth.py on it, so GB/s gets a % of peak")
        return
    p = Peak.read(peak)
    t["peak"] = {k: getattr(p, k) for k in ("peak_gbps", "basis", "source", "kind", "where", "device", "arch")}
    if gbps is not None and p.copy_gbps:
        ev.fact("pct_copy_peak", gbps / p.copy_gbps,
                f"{t.get('gb_per_s_source')} / copy peak {p.copy_gbps:.0f} GB/s ({p.source})")
        t["pct_copy_peak"] = gbps / p.copy_gbps


# ----------------------------------------------------------------------------- compile probe

@dataclass(frozen=True)
class ProbeResult:
    """One ``results[]`` entry of a ``compile_probe/1``: a variant compiled for one target."""
    variant: str | None
    arch: str | None
    compiled_for: str | None
    status: str | None
    error: str | None
    verdict: str | None          # summary.verdict
    buffer_load: int | None      # summary.buffer_load
    global_load: int | None
    load_width: str | None

    @classmethod
    def read(cls, rec: dict) -> ProbeResult:
        summary = _obj(rec.get("summary"))
        return cls(variant=_str(rec.get("variant")), arch=_str(rec.get("arch")),
                   compiled_for=_str(rec.get("compiled_for")), status=_str(rec.get("status")),
                   error=_str(rec.get("error")), verdict=_str(summary.get("verdict")),
                   buffer_load=_int(summary.get("buffer_load")), global_load=_int(summary.get("global_load")),
                   load_width=_str(summary.get("load_width")))

    def row(self) -> dict:
        return {"variant": self.variant, "arch": self.arch, "compiled_for": self.compiled_for,
                "status": self.status, "verdict": self.verdict, "buffer_load": self.buffer_load,
                "global_load": self.global_load, "load_width": self.load_width,
                "error": (self.error or "")[:160] or None}


def _buffer_variant(results: list[ProbeResult]) -> str | None:
    """The first variant that compiled to buffer loads where its target's baseline had fewer."""
    base = {r.arch: r for r in results if r.variant == "baseline" and r.status == "ok"}
    for r in results:
        b = base.get(r.arch)
        if (b and r.status == "ok" and r.variant != "baseline" and r.verdict == "buffer"
                and (r.buffer_load or 0) > (b.buffer_load or 0)):
            return r.variant
    return None


def from_probe(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no compile probe (probe_compile.py): effect of hints on the ISA unknown")
        return
    results = [ProbeResult.read(r) for r in _objs(doc.get("results"))]
    findings = doc.get("findings", [])
    ev.sections["probe"] = {"targets": _list_or_none(doc.get("targets")), "rows": [r.row() for r in results],
                            "findings": findings if isinstance(findings, list) else [],
                            "triton_version": _str(doc.get("triton_version"))}
    ev.fact("probe_buffer_variant", _buffer_variant(results),
            f"{label}: results (first variant turning loads into buffer loads)")


# ----------------------------------------------------------------------------- benchmark / sweep

def _first_present(rec: dict, *keys: str) -> Any:
    """The value of the first of ``keys`` that ``rec`` has (older files name some fields differently)."""
    return next((rec[k] for k in keys if k in rec), None)


@dataclass(frozen=True)
class VariantRow:
    """One variant of a ``variant_sweep/1`` (``variants[]``) or a ``benchmark/1`` case (``results[]``)."""
    name: str | None
    status: str | None
    median_ms: int | float | None
    x_vs_baseline: int | float | None
    gb_per_s: int | float | None
    pct_of_peak: int | float | None
    within_noise: bool | None
    reason: str | None

    @classmethod
    def read(cls, v: dict) -> VariantRow:
        return cls(name=_str(v.get("name")), status=_str(v.get("status")), median_ms=_num(v.get("median_ms")),
                   x_vs_baseline=_num(_first_present(v, "x_vs_baseline", "speedup_vs_baseline")),
                   gb_per_s=_num(v.get("gb_per_s")),
                   pct_of_peak=_num(_first_present(v, "pct_of_copy_peak", "pct_of_peak")),
                   within_noise=_bool(_first_present(v, "within_noise", "ties_best")), reason=_str(v.get("reason")))

    def row(self) -> dict:
        return {"name": self.name, "status": self.status, "median_ms": self.median_ms,
                "x_vs_baseline": self.x_vs_baseline, "gb_per_s": self.gb_per_s, "pct_of_peak": self.pct_of_peak,
                "within_noise": self.within_noise,
                "reason": self.reason if self.status not in ("passed", "ok") else None}


@dataclass(frozen=True)
class TuningRuns:
    """The measured variants of a ``variant_sweep/1``, or of the first case of a ``benchmark/1``."""
    schema: str
    rows: list[VariantRow]
    best: str | None
    noise_rel: int | float | None
    timer: str | None
    apply: str | dict | None      # how to apply the best (a sweep's best.apply)

    @classmethod
    def read(cls, doc: dict) -> TuningRuns:
        schema = str(doc.get("schema", ""))
        if schema.startswith("variant_sweep/"):
            best = _obj(doc.get("best"))
            apply = best.get("apply")
            return cls(schema, [VariantRow.read(v) for v in _objs(doc.get("variants"))], _str(best.get("name")),
                       _num(_obj(doc.get("baseline")).get("noise_rel")), _str(doc.get("timer")),
                       apply if isinstance(apply, (str, dict)) else None)
        case = next(iter(_objs(doc.get("cases"))), {})  # benchmark/1: one table per (size, dtype) case
        return cls(schema, [VariantRow.read(v) for v in _objs(case.get("results"))],
                   _str(_obj(case.get("ranking")).get("best")), _num(case.get("noise_rel")),
                   _str(_obj(doc.get("timing")).get("timer")), None)


def from_benchmark_or_sweep(ev: Evidence, doc: dict | None, label: str) -> None:
    """Measured variants: a variant sweep of the captured kernel, or a benchmark-template run."""
    if doc is None:
        return
    runs = TuningRuns.read(doc)
    rows = [r.row() for r in runs.rows]
    # a sweep in Triton's interpreter checks each variant; its times are no speed and no headroom
    interpreter = (doc.get("interpreter") is True or "interpreter" in (runs.timer or "")
                   or _obj(doc.get("device")).get("backend") == "interpreter")
    best_row = None if interpreter else next((r for r in runs.rows if r.name == runs.best), None)
    ev.sections["tuning_runs"] = {"schema": runs.schema, "label": label, "rows": rows, "best": runs.best,
                                  "best_x": best_row.x_vs_baseline if best_row else None, "interpreter": interpreter,
                                  "noise_rel": runs.noise_rel, "timer": runs.timer, "apply": runs.apply,
                                  "failed": [r.name for r in runs.rows if r.status in ("failed", "error")]}


# ----------------------------------------------------------------------------- fallback a/b, env

@dataclass(frozen=True)
class FallbackAB:
    """A ``fallback_ab/1`` (eager_fallback_ab.py); ``arms`` and ``output_check`` are shown as they are."""
    disable: list
    arms: list[dict] | None
    speedup: int | float | None       # speedup_fallback_over_compiled (a ratio: > 0)
    noise_spread: int | float | None
    verdict: str | None
    output_check: dict | None

    @classmethod
    def read(cls, doc: dict) -> FallbackAB:
        return cls(disable=_list(doc.get("disable")), arms=_objs_or_none(doc.get("arms")),
                   speedup=_positive(doc.get("speedup_fallback_over_compiled")),
                   noise_spread=_num(doc.get("noise_spread")),
                   verdict=_str(doc.get("verdict")), output_check=_obj_or_none(doc.get("output_check")))

    def outputs_equal(self) -> bool | None:
        return _bool((self.output_check or {}).get("passed"))


def from_ab(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        return
    ab = FallbackAB.read(doc)
    ev.sections["fallback_ab"] = {"disable": ab.disable, "arms": ab.arms,
                                  "speedup_fallback_over_compiled": ab.speedup,
                                  "noise_spread": ab.noise_spread, "verdict": ab.verdict,
                                  "output_check": ab.output_check}
    # measured end to end: the eager fallback's speed-up, and whether it is beyond the run-to-run spread
    speedup, spread = ab.speedup, ab.noise_spread
    ev.fact("fallback_speedup", speedup, f"{label}: speedup_fallback_over_compiled")
    if speedup is not None and spread is not None:
        ev.fact("fallback_beyond_noise", speedup > spread or 1.0 / speedup > spread,
                f"{label}: speedup {speedup:.3f} against noise_spread {spread:.3f}")
    ev.fact("fallback_outputs_equal", ab.outputs_equal(), f"{label}: output_check.passed")


@dataclass(frozen=True)
class Env:
    """The fields of a ``triton_env/1`` (check_env.py) the report shows; the first device's."""
    torch: str | None
    triton: str | None
    device: str | None
    arch: str | None
    platform_kind: str | None
    arch_check: str | None
    buffer_ops: dict | None

    @classmethod
    def read(cls, doc: dict) -> Env:
        devices = _list(doc.get("devices"))
        dev = _obj(devices[0]) if devices else {}
        return cls(torch=_str(_obj(doc.get("torch")).get("version")),
                   triton=_str(_obj(doc.get("triton")).get("version")),
                   device=_str(dev.get("name")), arch=_str(dev.get("arch")),
                   platform_kind=_str(doc.get("platform_kind")),
                   arch_check=_str(_obj(doc.get("arch_check")).get("message")),
                   buffer_ops=_obj_or_none(doc.get("buffer_ops")))


def from_env(ev: Evidence, doc: dict | None) -> tuple[str | None, str | None]:
    if doc is None:
        ev.gaps.append("no environment record (check_env.py): versions and device unknown")
        return None, None
    env = Env.read(doc)
    ev.sections["env"] = {k: getattr(env, k) for k in ("torch", "triton", "device", "arch", "platform_kind",
                                                        "arch_check", "buffer_ops")}
    return env.device, env.arch


def name_facts(ev: Evidence) -> None:
    from ..remedies.row_replace import row_pattern

    ev.fact("name_is_gemm", bool(GEMM_NAME.search(ev.kernel)), "kernel name")
    # the row op a bundled one-pass kernel (tko.remedies.rowkernels) can replace: Inductor names kernels
    # after their aten ops
    ev.fact("row_pattern", row_pattern(ev.kernel), "kernel name (tko.remedies.row_replace.row_pattern)")


