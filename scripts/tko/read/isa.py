"""ISA scan: one entry point for AMDGCN, PTX and SASS listings.

``scan_text(text)`` scans one listing; ``scan_path(path)`` finds listings in a
file or a tree (a Triton cache ``<key>/<name>.{amdgcn,json,...}``, a
TorchInductor cache root, a collected ``triton_artifacts/`` folder) and uses
Triton's ``<name>.json`` metadata next to each listing for the LDS size and
warp count the assembly does not show.

Every kernel record has the same keys whatever the format: ``name``,
``format``, ``arch``, ``families``, ``widths``, ``mnemonics``, ``resources``,
``occupancy``, ``verdict``, ``data_ops``, ``findings``, ``mix``, ``totals`` (see the
``isa_scan/1`` section of references/json_contracts.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import isa_amdgcn, isa_amdgcn_listing, isa_ptx
from ..base.errors import InputError
from ..base import archs, inputs
from .occupancy import amd_occupancy

ASM_SUFFIXES = (".amdgcn", ".s", ".ptx", ".sass", ".cubin")
FORMATS = ("auto", "amdgcn", "ptx", "sass")


def detect_format(text: str) -> str | None:
    if isa_ptx.looks_like_sass(text):
        return "sass"
    if isa_ptx.looks_like_ptx(text):
        return "ptx"
    if isa_amdgcn_listing.looks_like_amdgcn(text):
        return "amdgcn"
    return None


def scan_text(text: str, fmt: str = "auto", *, arch: str | None = None,
              shared_bytes: int | None = None, num_warps: int | None = None,
              name: str | None = None, resource_usage: str | None = None) -> dict:
    """Scan one listing.

    ``arch`` is the arch to judge occupancy for (default: the one the listing
    names).  ``shared_bytes`` is Triton's dynamic LDS / shared memory per
    workgroup (``metadata["shared"]``); ``num_warps`` the warps per workgroup.
    ``name`` names a kernel the listing does not name itself.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown ISA format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt == "auto":
        fmt = detect_format(text)
        if fmt is None:
            raise InputError("not an AMDGCN, PTX or SASS listing (no kernel, target or "
                             "instruction recognised)")
    if fmt == "amdgcn":
        return _scan_amdgcn(text, arch, shared_bytes, num_warps, name or "kernel")
    return _scan_nvidia(text, fmt, arch, shared_bytes, num_warps, resource_usage)


def legacy_totals(families: dict, resources: dict) -> dict:
    """``totals`` of a record written before ``kernels[].totals`` existed: each format's sums over
    its own family names (the formats' names do not overlap, so the format need not be known)."""
    parts = (isa_amdgcn.totals(families, resources), isa_ptx.totals(families, "ptx"),
             isa_ptx.totals(families, "sass"))
    return {name: sum(p[name] for p in parts) for name in parts[0]}


def _scan_amdgcn(text, arch, shared_bytes, num_warps, default_name) -> dict:
    listed_arch = isa_amdgcn_listing.detect_arch(text)
    judge_arch = archs.normalize(arch) if arch else listed_arch
    kernels = []
    for k in isa_amdgcn_listing.split_kernels(text, default_name):
        scan = isa_amdgcn.scan_kernel(k)
        res = scan["resources"]
        if shared_bytes is not None:
            res["lds_bytes"], res["lds_source"] = shared_bytes, "triton_metadata"
        else:
            res["lds_bytes"], res["lds_source"] = res["lds_bytes_static"], "asm_static"
        warps = num_warps
        if warps is None and res.get("max_flat_workgroup_size") and res.get("wavefront_size"):
            warps = res["max_flat_workgroup_size"] // res["wavefront_size"]
        res["num_warps"] = warps
        occ = amd_occupancy(judge_arch, vgpr_count=_count(res.get("vgpr_total")),
                            agpr_count=_count(res.get("agpr")),
                            sgpr_count=_count(res.get("sgprs_for_waves") or res.get("sgpr")),
                            shared_bytes=_count(res["lds_bytes"]), num_warps=_count(warps, 1),
                            llvm_occupancy=_count(res.get("llvm_occupancy")))
        verdict, data_ops = isa_amdgcn.memory_verdict(scan["families"])
        notes = isa_amdgcn.findings(scan, verdict, data_ops, judge_arch)
        if shared_bytes is None and res["lds_bytes_static"] == 0 and \
                (scan["families"]["ds_read"] or scan["families"]["ds_write"]):
            notes.append("the listing uses LDS (ds_*) but says 0 bytes: Triton allocates LDS "
                         "dynamically; pass the kernel's <name>.json (\"shared\") for the real size")
        notes.extend(occ["notes"])
        if arch and listed_arch and archs.normalize(arch) != listed_arch:
            notes.append(f"listing compiled for {listed_arch}; occupancy judged for "
                         f"{archs.normalize(arch)}")
        info = archs.info(judge_arch) if judge_arch else None
        if info is not None and info.vendor == "hygon" and listed_arch != judge_arch:
            notes.append(f"{judge_arch} is a Hygon DCU: memory-op families carry over from the "
                         f"{listed_arch} listing; matrix instructions and register limits do not")
        kernels.append({
            "name": k.name, "format": "amdgcn", "arch": listed_arch,
            "families": scan["families"], "widths": scan["widths"], "mnemonics": scan["mnemonics"],
            "waitcnt": scan["waitcnt"], "spill": scan["spill_ops"], "resources": res,
            "occupancy": occ, "verdict": verdict, "data_ops": data_ops, "findings": notes,
            "mix": isa_amdgcn.mix_summary(scan), "totals": isa_amdgcn.totals(scan["families"], res),
        })
    if not kernels:
        raise InputError("AMDGCN text holds no kernel body")
    return {"format": "amdgcn", "arch": listed_arch, "kernels": kernels}


# Above this a register, LDS or warp count is no real kernel's (a damaged listing or .json):
# the occupancy estimate leaves it out rather than overflow on it.
_COUNT_LIMIT = 2**31


def _count(value, low: int = 0) -> int | None:
    """``value`` if it is a plausible count (an int, not a bool, in [low, 2**31)), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value < _COUNT_LIMIT:
        return value
    return None


def _scan_nvidia(text, fmt, arch, shared_bytes, num_warps, resource_usage) -> dict:
    raw = isa_ptx.scan_ptx(text) if fmt == "ptx" else isa_ptx.scan_sass(text, resource_usage)
    listed_arch = raw["arch"]
    kernels = []
    for k in raw["kernels"]:
        res = dict(k["resources"])
        res["shared_bytes"] = shared_bytes
        threads = res.get("threads_per_block")
        res["num_warps"] = num_warps if num_warps is not None else (threads // 32 if threads else None)
        notes = isa_ptx.nvidia_findings(k, fmt)
        if fmt == "sass" and shared_bytes is not None and res.get("shared_static") is not None \
                and res["shared_static"] < shared_bytes:
            notes.append(f"cuobjdump reports {res['shared_static']} B static shared memory; Triton "
                         f"allocates {shared_bytes} B dynamically (metadata 'shared')")
        kernels.append({
            "name": k["name"], "format": fmt, "arch": listed_arch,
            "families": k["families"], "widths": k["widths"], "mnemonics": k["mnemonics"],
            "predicated": k.get("predicated"), "resources": res,
            "occupancy": {"arch": arch or listed_arch, "waves_per_simd": None,
                          "notes": ["occupancy is computed for AMD targets only"]},
            "verdict": isa_ptx.nvidia_verdict(k["families"], fmt),
            "data_ops": {"global": sum(k["families"].get(f, 0) for f in (
                isa_ptx.PTX_DATA if fmt == "ptx" else ("LDG", "STG", "ATOMG", "RED")))},
            "findings": notes, "mix": isa_ptx.nvidia_mix(k), "totals": isa_ptx.totals(k["families"], fmt),
        })
    if not kernels:
        raise InputError(f"{fmt.upper()} text holds no kernel (.entry / Function)")
    return {"format": fmt, "arch": listed_arch, "kernels": kernels}


# ---- files and trees -----------------------------------------------------------

def _read_metadata(path: Path) -> dict | None:
    """Triton's ``<name>.json`` cache metadata, or None if absent / not Triton's."""
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError, OSError):
        # not UTF-8, not JSON, a number past int()'s digit limit, nested too deeply, unreadable
        return None
    if not isinstance(doc, dict) or not ({"shared", "num_warps"} & doc.keys()):
        return None
    return doc


def _metadata_summary(meta: dict | None) -> dict | None:
    if not meta:
        return None
    target = meta.get("target") if isinstance(meta.get("target"), dict) else {}
    keep = {k: meta.get(k) for k in ("name", "num_warps", "num_stages", "shared", "waves_per_eu",
                                      "matrix_instr_nonkdim", "kpack", "triton_version", "hash")
            if k in meta}
    if target:
        keep["target"] = {k: target.get(k) for k in ("backend", "arch", "warp_size")}
    return keep


def _scan_file(path: Path, meta: dict | None, arch: str | None) -> list[dict]:
    # a hand-edited or foreign .json: a wrong-typed field counts as absent
    shared = _count((meta or {}).get("shared"))
    warps = _count((meta or {}).get("num_warps"), 1)
    name = _name((meta or {}).get("name")) or path.stem
    if path.suffix == ".cubin":
        inputs.open_input(path, "a cubin").close()  # cuobjdump would block on a FIFO
        sass, usage = isa_ptx.disassemble_cubin(path)
        result = scan_text(sass, "sass", arch=arch, shared_bytes=shared, num_warps=warps,
                           resource_usage=usage)
    else:
        text = inputs.read_text(path, "an ISA listing", errors="replace")
        fmt = {".ptx": "ptx", ".sass": "sass", ".amdgcn": "amdgcn"}.get(path.suffix, "auto")
        if fmt == "auto" and detect_format(text) is None:
            raise InputError(f"{path}: not an AMDGCN, PTX or SASS listing")
        result = scan_text(text, fmt, arch=arch, shared_bytes=shared, num_warps=warps, name=name)
    summary = _metadata_summary(meta)
    for k in result["kernels"]:
        k["source"] = str(path)
        if summary:
            k["triton_metadata"] = summary
    return result["kernels"]


def find_listings(root: Path, sass: bool = False) -> list[tuple[Path, Path | None]]:
    """(listing, metadata json or None) for every listing under ``root``.

    A ``.cubin`` with a ``.ptx`` of the same kernel next to it is skipped unless ``sass``:
    disassembling means two cuobjdump runs per file, slow on a large cache.
    """
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        names = set(filenames)
        for fname in sorted(filenames):
            p = Path(dirpath) / fname
            if p.suffix not in ASM_SUFFIXES or fname.startswith(".") or not inputs.is_regular_file(p):
                continue
            if p.suffix == ".cubin" and not sass and f"{p.stem}.ptx" in names:
                continue
            meta = Path(dirpath) / (p.stem + ".json")
            found.append((p, meta if meta.name in names else None))
    return found


def _listing_for_json(path: Path) -> Path:
    for suffix in (".amdgcn", ".ptx", ".cubin", ".sass", ".s"):
        cand = path.with_suffix(suffix)
        if cand.exists():
            return cand
    raise InputError(f"{path}: no listing next to it ({path.stem}.amdgcn / .ptx / .cubin)")


def scan_path(path: str | os.PathLike, kernel: str | None = None, *,
              arch: str | None = None, sass: bool = False) -> list[dict]:
    """Scan a listing, a Triton ``<name>.json`` or a tree; one record per kernel found.

    ``kernel`` keeps kernels whose name equals it or, when none does, contains it;
    no match raises :class:`InputError` listing the names found.  In a tree, ``sass``
    also disassembles the ``.cubin`` files that have a ``.ptx`` next to them.
    """
    root = Path(path)
    if not root.exists():
        raise InputError(f"{root}: no such file or directory")
    records: list[dict] = []
    if root.is_dir():
        listings = find_listings(root, sass=sass)
        if not listings:
            raise InputError(f"{root}: no .amdgcn, .s, .ptx, .sass or .cubin listing found")
        for listing, meta_path in listings:
            meta = _read_metadata(meta_path) if meta_path else None
            try:
                records.extend(_scan_file(listing, meta, arch))
            except InputError:
                continue  # e.g. a host .s file in an artifacts tree: not a kernel listing
        if not records:
            raise InputError(f"{root}: none of the {len(listings)} listing(s) found is an "
                             f"AMDGCN, PTX or SASS kernel listing")
    else:
        if root.suffix == ".json":
            meta = _read_metadata(root)
            if meta is None:
                raise InputError(f"{root}: not a Triton kernel metadata .json (no 'shared' / "
                                 f"'num_warps')")
            listing = _listing_for_json(root)
        else:
            listing = root
            meta = _read_metadata(root.with_suffix(".json"))
        records = _scan_file(listing, meta, arch)
    if kernel:
        records = filter_kernels(records, kernel)
    return records


def _name(value) -> str | None:
    return value if isinstance(value, str) and value else None


def filter_kernels(records: list[dict], wanted: str) -> list[dict]:
    def names(r):
        meta = r.get("triton_metadata") or {}
        return {r["name"], _name(meta.get("name")) or r["name"], Path(r.get("source", "")).stem}

    exact = [r for r in records if wanted in names(r)]
    if exact:
        return exact
    partial = [r for r in records if any(wanted in n for n in names(r))]
    if partial:
        return partial
    found = sorted({r["name"] for r in records})
    shown = ", ".join(found[:30]) + (f", ... ({len(found)} in all)" if len(found) > 30 else "")
    raise InputError(f"no kernel matches {wanted!r}; found: {shown}")
