"""What a compile probe found: each compiled variant's ISA scanned and summarized, compared with the
baseline (memory-op widths and kinds, registers, spills), assembled into ``compile_probe/1`` and its
Markdown table."""


from __future__ import annotations

import json
import re
from typing import Any

from ..read import triton_stack
from . import offline_compile

# --------------------------------------------------------------------------- scanning and comparison

LOAD_STORE_FAMILIES = ("buffer_load", "global_load", "flat_load", "buffer_store", "global_store",
                       "flat_store", "buffer_atomic", "global_atomic")


def scan_compiled(texts: dict, arch: str, metadata: dict) -> dict:
    """ISA summary of one compile: the tko.read.isa kernel record of its AMDGCN (or PTX)."""
    from ..read.isa import scan_text

    if texts.get("amdgcn"):
        text, fmt = texts["amdgcn"], "amdgcn"
    elif texts.get("ptx"):
        text, fmt = texts["ptx"], "ptx"
    else:
        return {"verdict": None, "families": {}, "widths": {}, "resources": {}}
    result = scan_text(text, fmt, arch=arch, shared_bytes=metadata.get("shared"),
                       num_warps=metadata.get("num_warps"))
    kernels = result.get("kernels") or []
    name = metadata.get("name")
    chosen = next((k for k in kernels if k.get("name") == name), kernels[0] if kernels else {})
    return {key: chosen.get(key) for key in ("verdict", "families", "widths", "resources",
                                            "occupancy", "findings") if key in chosen}


def width_bits(width: str) -> int:
    """Bits moved per lane by one instruction of this width (dwordx4 -> 128, v4.b32 -> 128)."""
    named = {"ubyte": 8, "sbyte": 8, "byte": 8, "ushort": 16, "sshort": 16, "short": 16,
             "d16": 16, "dword": 32, "dwordx2": 64, "dwordx3": 96, "dwordx4": 128}
    if width in named:
        return named[width]
    vec = re.search(r"v(\d+)", width)
    bits = re.search(r"[bfsu](\d+)", width)
    return (int(vec.group(1)) if vec else 1) * (int(bits.group(1)) if bits else 0)


def _widest(widths: dict, families: tuple[str, ...]) -> str | None:
    seen: dict[str, int] = {}
    for family in families:
        got = widths.get(family) or {}
        if isinstance(got, dict):
            seen.update({w: n for w, n in got.items() if n})
    return max(seen, key=width_bits) if seen else None


# PTX family names of tko.read.isa folded into the AMDGCN-style columns of the table.
PTX_FAMILIES = {"global_load": ("ld_global", "ld_global_nc"), "global_store": ("st_global",),
                "global_atomic": ("atom_global", "red_global")}


# CAS loops (atomics the target cannot do natively, e.g. fp32 add on gfx90a) count as global atomics.
AMD_FAMILIES = {"global_atomic": ("global_atomic", "global_atomic_cas")}


def cell_summary(scan: dict) -> dict:
    fam = scan.get("families") or {}
    widths = scan.get("widths") or {}
    res = scan.get("resources") or {}
    out: dict[str, Any] = {"verdict": scan.get("verdict")}
    ptx = any(k in fam for k in ("ld_global", "st_global"))
    for family in LOAD_STORE_FAMILIES:
        names = PTX_FAMILIES.get(family, ()) if ptx else AMD_FAMILIES.get(family, (family,))
        out[family] = sum(int(fam.get(n, 0) or 0) for n in names)
    load_fams = PTX_FAMILIES["global_load"] if ptx else ("buffer_load", "global_load", "flat_load")
    store_fams = PTX_FAMILIES["global_store"] if ptx else ("buffer_store", "global_store", "flat_store")
    out["load_width"] = _widest(widths, load_fams)
    out["store_width"] = _widest(widths, store_fams)
    for key in ("vgpr", "sgpr", "agpr", "scratch_bytes", "vgpr_spill_count", "registers_declared_total"):
        if key in res:
            out[key] = res[key]
    occupancy = scan.get("occupancy") or {}
    if occupancy.get("waves_per_simd") is not None:
        out["waves_per_simd"] = occupancy["waves_per_simd"]
    return out


REGISTER_KEYS = (("vgpr", "VGPR"), ("waves_per_simd", "waves/SIMD"), ("vgpr_spill_count", "spills"),
                 ("scratch_bytes", "scratch B"))


def register_changes(base: dict, other: dict) -> list[str]:
    """VGPRs, occupancy and spills that differ between two cell summaries."""
    return [f"{label} {base.get(key)} -> {other.get(key)}" for key, label in REGISTER_KEYS
            if base.get(key) != other.get(key)]


def compare_to_baseline(results: list[dict]) -> list[str]:
    """Plain-words changes of verdict / load-store families / width against the baseline."""
    base = {r["arch"]: r for r in results if r["variant"] == "baseline" and r["status"] == "ok"}
    findings = []
    for r in results:
        if r["variant"] == "baseline":
            continue
        if r["status"] != "ok":
            if r["status"] == "error":
                findings.append(f"{r['variant']} on {r['arch']}: compile failed ({r['error'].splitlines()[0]})")
            continue
        b = base.get(r["arch"])
        if b is None:
            continue
        changes = []
        c0, c1 = b["summary"], r["summary"]
        if c0.get("verdict") != c1.get("verdict"):
            changes.append(f"verdict {c0.get('verdict')} -> {c1.get('verdict')}")
        for fam in LOAD_STORE_FAMILIES:
            if c0.get(fam) != c1.get(fam):
                changes.append(f"{fam} {c0.get(fam)} -> {c1.get(fam)}")
        for key in ("load_width", "store_width"):
            if c0.get(key) != c1.get(key):
                changes.append(f"{key.replace('_', ' ')} {c0.get(key)} -> {c1.get(key)}")
        r["changes_vs_baseline"] = changes
        target = r["arch"] + (f" (proxy {r['compiled_for']})" if r["compiled_for"] != r["arch"] else "")
        if changes:
            findings.append(f"{r['variant']} on {target}: {'; '.join(changes)}")
        else:
            findings.append(f"{r['variant']} on {target}: same load/store code as baseline")
        registers = register_changes(c0, c1)
        if registers:
            findings.append(f"{r['variant']} on {target}: registers {'; '.join(registers)}")
    return findings


def assemble(probe: dict, arches: list[str], triton_version: str | None) -> dict:
    """The compile_probe/1 payload."""
    from ..base.archs import normalize

    results = []
    local_doc = None
    if offline_compile.LOCAL in arches:
        local_doc = offline_compile.local_target_doc()

    def resolve(arch: str) -> tuple[str, str, str | None]:
        """(arch as reported, arch compiled for, proxy note)."""
        if arch == offline_compile.LOCAL:
            return local_doc["arch"], local_doc["arch"], None
        name = normalize(arch)
        compiled_for, note = triton_stack.compile_arch(name)
        return name, compiled_for, note

    for row in probe["rows"]:
        arch, compiled_for, _ = resolve(row["arch"])
        entry: dict[str, Any] = {"variant": row["variant"], "arch": arch, "compiled_for": compiled_for}
        if row.get("skipped"):
            entry.update(status="skipped", reason=row["skipped"])
        else:
            result = row.get("result") or {}
            entry["seconds"] = result.get("seconds")
            entry["stored"] = bool(result.get("cached"))
            entry["buffer_ops_env"] = result.get("buffer_ops_env")
            if result.get("ok"):
                outcome = result["outcome"]
                scan = scan_compiled(row.get("texts", {}), compiled_for, outcome["metadata"])
                entry.update(status="ok", metadata=outcome["metadata"], attrs=outcome["attrs"],
                             options=outcome["options"], config=outcome["config"],
                             summary=cell_summary(scan), scan=scan)
                ttgir = row.get("texts", {}).get("ttgir")
                if ttgir:
                    entry["ttgir_buffer_ops"] = len(re.findall(r"\bamdg(?:pu)?\.buffer_\w+", ttgir))
                    entry["ttgir_assumes"] = len(re.findall(r"llvm\.intr\.assume", ttgir))
            else:
                entry.update(status="error", error_kind=result.get("error_kind"),
                             error="\n".join(str(result.get("error", "")).splitlines()[:6]))
                if result.get("diagnostics"):
                    entry["diagnostics"] = result["diagnostics"]
        results.append(entry)
    findings = compare_to_baseline(results)
    if probe.get("option_note"):
        findings.append(probe["option_note"])
    kernel, plan = probe["kernel"], probe["plan"]
    targets = []
    for arch in arches:
        name, compiled_for, note = resolve(arch)
        targets.append({"requested": name, "compiled_for": compiled_for, "proxy_note": note})
        if note:
            findings.insert(0, note)
    payload = {
        "kernel_file": None,
        "kernel": kernel["name"],
        "origin": probe["parsed"]["origin"],
        "triton_version": triton_version,
        "targets": targets,
        "base": {"signature": plan.signature, "constexprs": plan.constexprs, "attrs": plan.attrs,
                 "config": plan.config, "config_source": plan.config_source, "notes": plan.notes},
        "variants": [v.to_json() for v in probe["variants"]],
        "results": results,
        "findings": findings,
        "backend_options": probe.get("backends") or {},
        "scanner": "tko.read.isa",
    }
    return payload


def register_table(payload: dict, header: list[str]) -> list[str]:
    """VGPRs, occupancy (waves per SIMD) and spills of every compile, side by side (AMDGCN only)."""
    from ..base import markdown as md

    by_key = {(r["variant"], r["arch"]): r for r in payload["results"] if r["status"] == "ok"}
    rows = []
    for variant in [v["name"] for v in payload["variants"]]:
        cells = [md.code(variant)]
        for target in payload["targets"]:
            s = (by_key.get((variant, target["requested"])) or {}).get("summary") or {}
            cells.append("" if "vgpr" not in s else
                         f"{s['vgpr']} · {md.text(s.get('waves_per_simd', '-'))} · {s.get('vgpr_spill_count', 0)}"
                         f" ({s.get('scratch_bytes', 0)} B)")
        if any(cells[1:]):
            rows.append(cells)
    if not rows:
        return []
    return (["## Registers", "", "Cells: VGPRs · waves per SIMD · VGPR spills (scratch bytes).", ""]
            + md.table(header, rows) + [""])


def markdown_table(payload: dict) -> str:
    """One row per variant, one column per target: verdict, buffer/global loads and stores, widths."""
    from ..base import markdown as md

    arches = [t["requested"] for t in payload["targets"]]
    header = ["variant"] + [
        md.text(t["requested"] + (f" (as {t['compiled_for']})" if t["proxy_note"] else ""))
        for t in payload["targets"]]
    lines = [f"# Compile probe: {md.code(payload['kernel'])}", "",
             f"Triton {md.text(payload['triton_version'])}; kernel file {md.code(payload['kernel_file'])}; config "
             f"{md.code(json.dumps(payload['base']['config'].get('kwargs')))} num_warps="
             f"{md.text(payload['base']['config'].get('num_warps'))} "
             f"({md.text(payload['base']['config_source'])}).", "",
             "Cells: verdict · loads buffer/global(+flat) · stores buffer/global(+flat) · widest load width"
             " · atomics buffer/global (when any).", ""]
    rows = []
    by_key = {(r["variant"], r["arch"]): r for r in payload["results"]}
    for variant in [v["name"] for v in payload["variants"]]:
        cells = [md.code(variant)]
        for arch in arches:
            r = by_key.get((variant, arch))
            if r is None:
                cells.append("")
            elif r["status"] == "skipped":
                cells.append(f"skipped: {md.text(r['reason'])}")
            elif r["status"] == "error":
                cells.append("**error**: " + md.text((r["error"].splitlines() or [""])[0], 120))
            else:
                s = r["summary"]
                cell = (f"{md.text(s.get('verdict'))} · L {s['buffer_load']}/{s['global_load'] + s['flat_load']}"
                        f" · S {s['buffer_store']}/{s['global_store'] + s['flat_store']}"
                        f" · {md.text(s.get('load_width') or '-')}")
                if s["buffer_atomic"] or s["global_atomic"]:
                    cell += f" · A {s['buffer_atomic']}/{s['global_atomic']}"
                if r.get("changes_vs_baseline"):
                    cell = f"**{cell}**"
                cells.append(cell)
        rows.append(cells)
    lines += md.table(header, rows)
    lines += ["", "Bold: differs from baseline on that target.", ""]
    lines += register_table(payload, header)
    lines += ["## Findings", ""]
    lines += [f"- {md.text(f)}" for f in payload["findings"]] or ["- none"]
    claims = [(v["name"], c) for v in payload["variants"] for c in v["claims"]]
    if claims:
        lines += ["", "## What the source variants claimed", ""]
        lines += [f"- `{name}`: {c}" for name, c in claims]
    return "\n".join(lines) + "\n"
