"""Device peak bandwidth: measure it once, store it, look it up for "% of peak".

Where a peak comes from, in order of precedence (:func:`lookup`):

1. the store of measurements made on this machine by ``measure_peak_bandwidth.py``
   (``$TKO_PEAKS_FILE``, else ``~/.cache/hygon-triton-kernel-optimizer/device_peaks.json``;
   a ``device_peak/1`` artifact), matched by device name and arch;
2. ``references/device_peaks.yaml`` (records of kind ``measured`` first, then ``datasheet``),
   matched by arch and by the table's device name, or one of its ``aliases``, appearing as whole
   words of the device name (``H200`` in ``NVIDIA H200``, ``BW1000`` in ``BW200, UBB BW1000``,
   alias ``BW``: what torch calls a BW1000);
3. nothing: None, and the caller says that no peak is known.

A device known by its arch alone (no name) matches the store's one record of that arch, and no
table record (one arch is several products).

The result always says which source and which kind of number it used. Copy bandwidth counts the
bytes read plus the bytes written, like a kernel's GB/s by Inductor's byte rule.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path

from ..base.artifact import positive_float
from ..base.errors import InputError, ToolFailure
from ..base.archs import torch_device_arch
from ..base import inputs, resources

SCHEMA = "device_peak/1"
STORE_ENV = "TKO_PEAKS_FILE"
DEFAULT_STORE = Path("~/.cache/hygon-triton-kernel-optimizer/device_peaks.json")
TABLE_PATH = resources.reference("device_peaks.yaml")
MIN_COPY_BYTES = 1 << 30


def store_path(path: str | os.PathLike | None = None) -> Path:
    """The measurement store: ``path``, else ``$TKO_PEAKS_FILE``, else the default in ~/.cache."""
    if path:
        return Path(path).expanduser()
    env = os.environ.get(STORE_ENV)
    return Path(env).expanduser() if env else DEFAULT_STORE.expanduser()


def _norm_arch(arch: str | None) -> str | None:
    if not arch:
        return None
    from ..base.archs import normalize

    return normalize(str(arch))


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w]


def name_matches(table_name: str, device_name: str | None) -> bool:
    """True when the table's name is a run of whole words of the device name."""
    if not device_name or not table_name:
        return False
    want, have = _words(table_name), _words(device_name)
    n = len(want)
    return n > 0 and any(have[i:i + n] == want for i in range(len(have) - n + 1))


# --------------------------------------------------------------------------- the store


def load_store(path: str | os.PathLike | None = None) -> list[dict]:
    """Measured records in the store; [] when the store does not exist yet."""
    from ..base.artifact import read_artifact

    p = store_path(path)
    if not p.exists():
        return []
    doc = read_artifact(p, expect=SCHEMA)
    devices = doc.get("devices")
    if not isinstance(devices, list):
        raise InputError(f"{p}: 'devices' is not a list")
    return [d for d in devices if isinstance(d, dict)]


def record_measurement(record: dict, path: str | os.PathLike | None = None,
                       tool: str = "measure_peak_bandwidth.py") -> Path:
    """Add ``record`` to the store, replacing an earlier one for the same device name and arch."""
    from ..base.artifact import write_artifact

    if not record.get("name") or not record.get("arch"):
        raise InputError("a peak record needs the device 'name' and 'arch'")
    p = store_path(path)
    kept = [d for d in load_store(p)
            if not (d.get("name") == record["name"] and d.get("arch") == record["arch"])]
    kept.append(record)
    p.parent.mkdir(parents=True, exist_ok=True)
    write_artifact(p, SCHEMA, tool, {"devices": kept})
    return p


# --------------------------------------------------------------------------- the table


def load_table(path: str | os.PathLike | None = None) -> list[dict]:
    """Records of ``references/device_peaks.yaml``; [] when it is absent."""
    p = Path(path) if path else TABLE_PATH
    if not p.exists():
        return []
    try:
        import yaml
    except Exception as exc:
        raise InputError(f"{p}: reading it needs pyyaml ({type(exc).__name__})") from None
    try:
        doc = yaml.safe_load(inputs.read_text(p, "a YAML peaks table"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (yaml.YAMLError, ValueError, TypeError, AttributeError, RecursionError) as exc:
        # PyYAML's constructors raise more than YAMLError on a bad value: ValueError for a date
        # that is no date (2026-13-45), AttributeError for '!!timestamp x'; deep nesting recurses
        raise InputError(f"{p}: not valid YAML ({(str(exc).splitlines() or [type(exc).__name__])[0]})") \
            from None
    devices = (doc or {}).get("devices") if isinstance(doc, dict) else None
    if not isinstance(devices, list):
        raise InputError(f"{p}: expected a top-level 'devices' list")
    return [d for d in devices if isinstance(d, dict)]


# --------------------------------------------------------------------------- lookup


def _bad_figure(rec: dict) -> str | None:
    """The first of copy_gbps / hbm_read_gbps that is set but not a positive finite number
    (text, a bool, NaN, an integer past a float's range): float() would raise or mislead."""
    for key in ("copy_gbps", "hbm_read_gbps"):
        value = rec.get(key)
        if value is None:
            continue
        if positive_float(value) is None:
            return key
    return None


def _plain(value):
    """A JSON-writable value: YAML dates (and sets, bytes) become their text."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def _result(rec: dict, source: str, where: str, kind: str, notes: list[str]) -> dict | None:
    copy = rec.get("copy_gbps")
    read = rec.get("hbm_read_gbps")
    if copy is None and read is None:
        return None
    peak, basis = (copy, "copy_gbps") if copy is not None else (read, "hbm_read_gbps")
    return {
        "peak_gbps": float(peak),
        "basis": basis,
        "copy_gbps": float(copy) if copy is not None else None,
        "hbm_read_gbps": float(read) if read is not None else None,
        "source": source,
        "where": where,
        "kind": kind,
        "device": _plain(rec.get("name")),
        "arch": _plain(rec.get("arch")),
        "date": _plain(rec.get("date") or rec.get("measured_at")),
        "detail": _plain(rec.get("source") or rec.get("method")),
        "notes": notes,
    }


def lookup(device_name: str | None, arch: str | None, store: str | os.PathLike | None = None,
           table: str | os.PathLike | None = None) -> dict | None:
    """The peak bandwidth to quote for a device, with where it came from; None when unknown.

    ``peak_gbps`` is the copy bandwidth (read + written) when known, else HBM read bandwidth
    (``basis`` says which). A store or table that cannot be read is skipped with a note.
    """
    arch_n = _norm_arch(arch)
    notes: list[str] = []
    try:
        stored = load_store(store)
    except InputError as exc:
        stored, _ = [], notes.append(f"measurement store skipped: {exc}")
    if device_name is None and arch_n is not None:
        # a device known by its arch alone (an ISA scan, no check_env record): the store's one
        # record of that arch is that device; two (an H100 and an H200 are both sm_90) are a guess
        same_arch = [r for r in stored if _norm_arch(r.get("arch")) == arch_n]
        if len(same_arch) == 1:
            device_name = same_arch[0].get("name")
            notes.append(f"device named by its arch alone: the store's one {arch_n} record taken")
    for rec in reversed(stored):            # the newest record wins
        if rec.get("name") == device_name and _norm_arch(rec.get("arch")) == arch_n:
            bad = _bad_figure(rec)
            if bad:
                notes.append(f"measurement store record of {device_name} {arch} skipped: "
                             f"{bad} is not a positive number")
                continue
            res = _result(rec, "store", str(store_path(store)), "measured", notes)
            if res:
                res["field_kinds"] = {"copy_gbps": "measured" if res["copy_gbps"] else None,
                                      "hbm_read_gbps": "measured" if res["hbm_read_gbps"] else None}
                return res
    try:
        rows = load_table(table)
    except InputError as exc:
        rows, _ = [], notes.append(f"peak table skipped: {exc}")
    matches = [r for r in rows if _norm_arch(r.get("arch")) == arch_n and any(
        name_matches(str(n), device_name) for n in [r.get("name", "")] + _aliases(r))]
    for r in list(matches):
        bad = _bad_figure(r)
        if bad:
            notes.append(f"peak table record {r.get('name')!r:.40} skipped: {bad} is not a positive number")
            matches.remove(r)
    if not matches:
        return None
    where = str(Path(table) if table else TABLE_PATH)
    # Each field from the measured record when it has it, else from the datasheet record.
    ordered = sorted(matches, key=lambda r: 0 if r.get("kind") == "measured" else 1)

    def first(key):
        return next(((r[key], r) for r in ordered if r.get(key) is not None), (None, None))

    copy, copy_rec = first("copy_gbps")
    read, read_rec = first("hbm_read_gbps")
    primary = copy_rec or read_rec
    if primary is None:
        return None
    merged = dict(primary, copy_gbps=copy, hbm_read_gbps=read)
    res = _result(merged, "table", where, str(primary.get("kind") or "unknown"), notes)
    res["field_kinds"] = {"copy_gbps": copy_rec.get("kind") if copy_rec else None,
                          "hbm_read_gbps": read_rec.get("kind") if read_rec else None}
    return res


def _aliases(row: dict) -> list:
    aliases = row.get("aliases")
    # a list of names; one name written without the brackets is that name, not its letters
    return list(aliases) if isinstance(aliases, list) else [aliases] if isinstance(aliases, str) else []


def percent_of_peak(gbps: float | None, peak: dict | None) -> float | None:
    if gbps is None or not peak or not peak.get("peak_gbps"):
        return None
    return 100.0 * gbps / peak["peak_gbps"]


def describe(peak: dict | None) -> str:
    """One line naming the peak and where it came from."""
    if not peak:
        return "no peak bandwidth known for this device (run measure_peak_bandwidth.py once)"
    what = "copy (read + write)" if peak["basis"] == "copy_gbps" else "HBM read"
    src = "measured on this machine" if peak["source"] == "store" else f"{peak['kind']} table record"
    return (f"peak {peak['peak_gbps']:.1f} GB/s {what}, {src} for {peak.get('device')} "
            f"{peak.get('arch')} ({peak['where']})")


# --------------------------------------------------------------------------- measurement


def current_device(index: int | None = None) -> dict:
    """Name, arch and L2 size of a torch GPU (raises InputError when there is none)."""
    import torch

    if not torch.cuda.is_available():
        raise ToolFailure("no GPU visible to torch: nothing to measure")
    idx = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(idx)
    hip = bool(torch.version.hip) or str(getattr(props, "gcnArchName", "")).startswith("gfx")
    arch, arch_full = torch_device_arch(props, hip)
    return {"index": idx, "name": props.name, "arch": arch, "backend": "hip" if hip else "cuda",
            "arch_full": arch_full,
            "l2_bytes": getattr(props, "L2_cache_size", None),
            "memory_bytes": getattr(props, "total_memory", None),
            "compute_units": getattr(props, "multi_processor_count", None)}


def measure_copy(nbytes: int = MIN_COPY_BYTES, dtype: str = "float32", warmup_ms: float = 50,
                 rep_ms: float = 300, index: int | None = None) -> dict:
    """Time ``dst.copy_(src)`` of an ``nbytes`` buffer with do_bench (median); a store record."""
    import torch

    from .bench import time_fn

    dev = current_device(index)
    tdtype = getattr(torch, dtype)
    elem = torch.empty((), dtype=tdtype).element_size()
    numel = nbytes // elem
    device = torch.device("cuda", dev["index"])
    # Random data, never zeros: some devices move zeros faster than real data.
    src = torch.randn(numel, device=device).to(tdtype) if tdtype.is_floating_point else \
        torch.randint(-100, 100, (numel,), device=device, dtype=tdtype)
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize(device)
    if not torch.equal(dst[:4096], src[:4096]) or not torch.equal(dst[-4096:], src[-4096:]):
        raise ToolFailure("dst.copy_(src) did not copy the data: check the device")
    with torch.cuda.device(device):         # do_bench records its events on the current device
        timing = time_fn(lambda: dst.copy_(src), warmup_ms=warmup_ms, rep_ms=rep_ms)
    moved = 2 * numel * elem
    return {
        "name": dev["name"],
        "arch": dev["arch"],
        "arch_full": dev["arch_full"],
        "backend": dev["backend"],
        "copy_gbps": moved / (timing.median_ms * 1e-3) / 1e9,
        "copy_gbps_p20": moved / (timing.p80_ms * 1e-3) / 1e9,
        "copy_gbps_p80": moved / (timing.p20_ms * 1e-3) / 1e9,
        "hbm_read_gbps": None,
        "median_ms": timing.median_ms,
        "p20_ms": timing.p20_ms,
        "p80_ms": timing.p80_ms,
        "buffer_bytes": numel * elem,
        "bytes_moved": moved,
        "dtype": dtype,
        "method": f"dst.copy_(src), {numel * elem} bytes {dtype}, triton.testing.do_bench median "
                  f"(warmup {warmup_ms} ms, rep {rep_ms} ms); bytes read + written",
        "l2_bytes": dev["l2_bytes"],
        "memory_bytes": dev["memory_bytes"],
        "compute_units": dev["compute_units"],
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "triton": _triton_version(),
    }


def _triton_version() -> str | None:
    try:
        import triton

        return triton.__version__
    except Exception:
        return None
