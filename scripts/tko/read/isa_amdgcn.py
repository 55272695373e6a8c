"""AMDGCN assembly (LLVM ``.amdgcn`` / ``.s`` dumps, llvm-objdump listings).

Splits a listing into kernels, counts every memory / atomic / LDS / scalar-load /
matrix / wait instruction into families with its access width, reads the
register and scratch resources from the ``; Kernel info:`` comments, the
``.amdhsa_kernel`` descriptor and the ``amdhsa.kernels`` metadata, and turns
the counts into a verdict (``buffer`` / ``global`` / ``flat`` / ``mixed`` /
``none``) and plain-words findings.

Traps handled (LLVM's "User Guide for AMDGPU Backend", https://llvm.org/docs/AMDGPUUsage.html,
and references/dcu_notes.md section 4 for the Hygon mnemonics; each seen in the compiler output
under tests/fixtures/isa):

* gfx9 / gfx90a spill through MUBUF: ``buffer_store_dword vN, off, s[..], 0
  offset:K ; 4-byte Folded Spill``.  These go to the private segment, so they
  are counted as ``scratch_*`` and as spills, never as data buffer ops.
* ``buffer_wbl2`` / ``buffer_inv`` / ``buffer_wbinvl1*`` are cache control, not data.
* Triton allocates LDS dynamically: the asm says 0; the caller passes the real
  size (``shared`` of Triton's ``<name>.json``).
* Triton 3.9's target string ``amdgpu9.42-amd-amdhsa-unknown-gfx942``; LLVM's
  ``; TotalNumSgprs:`` (new) and ``; NumSgprs:`` (old).
* Hygon DCU mnemonics: ``v_mmac_*``, ``ds_read_m32x16*``, ``ds_read_matrix*``,
  ``ds_write_matrix*``, ``matrix_load*`` / ``matrix_store*``, ``s_waitcnt_vbcnt``,
  ``s_abarrier_*``.
"""


from __future__ import annotations

import re
from collections import Counter

from ..base.errors import InputError
from .isa_common import count, ratio
from .isa_amdgcn_listing import DETAIL_PREFIXES, AmdgcnKernel, parse_instruction, split_kernels

# Families of data memory ops, by addressing path.
DATA_FAMILIES = {
    "buffer": ("buffer_load", "buffer_store", "buffer_atomic"),
    "global": ("global_load", "global_store", "global_atomic", "global_atomic_cas"),
    "flat": ("flat_load", "flat_store", "flat_atomic"),
}
LOAD_FAMILIES = ("buffer_load", "global_load", "flat_load")
STORE_FAMILIES = ("buffer_store", "global_store", "flat_store")
ATOMIC_FAMILIES = ("buffer_atomic", "global_atomic", "global_atomic_cas", "flat_atomic")
LDS_FAMILIES = ("ds_read", "ds_write", "ds_other", "ds_matrix")
MATRIX_FAMILIES = ("mfma", "accvgpr", "mmac")
# data families -> "<path>_<load|store|atomic>" (memory_op_counts)
_DATA_PATH_OP = {f: f[:-len("_cas")] if f.endswith("_cas") else f
                 for fams in DATA_FAMILIES.values() for f in fams}
# Every family the scanner reports (always present in the output, 0 when absent).
FAMILIES = (
    "buffer_load", "buffer_store", "buffer_atomic",
    "global_load", "global_store", "global_atomic", "global_atomic_cas",
    "flat_load", "flat_store", "flat_atomic",
    "scratch_load", "scratch_store",
    "ds_read", "ds_write", "ds_other", "ds_matrix",
    "matrix_load", "matrix_store",
    "s_load", "s_buffer_load", "s_store",
    "mfma", "accvgpr", "mmac",
    "s_waitcnt", "s_barrier", "cache_control",
)

_CACHE_CONTROL = re.compile(r"^buffer_(wbl2|inv|wbinvl1|gl[01]_inv)")
_TRANSCENDENTAL = re.compile(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)(_|$)")
_BRANCH = re.compile(r"^s_(branch|cbranch|setpc|swappc|getpc|call|endpgm|trap|rfe)")
_WAIT_FIELD = re.compile(r"\b(vmcnt|lgkmcnt|expcnt|vscnt|vbcnt)\((\d+)\)")
_WIDTH = re.compile(r"(dwordx\d|dword|ubyte|sbyte|byte|ushort|sshort|short|b\d+|[uif]\d+)")


def _operands(operands: str) -> list[str]:
    # split on commas outside brackets: "v[0:3], v8, s[0:3], 0 offen"
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    *pieces, tail = operands.split(",")
    for piece in pieces:  # each ends at a comma: a split where the brackets before it balance
        cur.append(piece)
        depth += piece.count("[") + piece.count("(") - piece.count("]") - piece.count(")")
        if depth == 0:
            out.append(",".join(cur).strip())
            cur = []
    cur.append(tail)
    last = ",".join(cur)
    if last:
        out.append(last.strip())
    return out


def _second_operand_is_off(operands: str) -> bool:
    ops = _operands(operands)
    return len(ops) > 1 and ops[1] == "off"


def lane_bytes(family: str, width: str) -> int:
    """Bytes one lane moves for a memory op of this family/width (0 if unknown)."""
    if family in ATOMIC_FAMILIES:
        if width.endswith("_x2") or re.search(r"(f64|i64|u64)$", width):
            return 8
        return 4
    m = _WIDTH.search(width)
    if not m:
        return 0
    token = m.group(1)
    if len(token) > 8:  # b<digits> / u<digits> past any real width: unknown
        return 0
    if token.startswith("dwordx"):
        size = 4 * int(token[6:])
    elif token == "dword":
        size = 4
    elif token in ("ubyte", "sbyte", "byte"):
        size = 1
    elif token in ("ushort", "sshort", "short"):
        size = 2
    else:
        size = max(1, int(token[1:]) // 8)
    if family.startswith("ds_") and re.match(r"^2(st64)?_", width):
        size *= 2  # ds_read2 / ds_write2: two elements per lane
    return size


def classify(mnemonic: str, operands: str, comment: str, private_mubuf: bool) -> tuple[str, str] | None:
    """(family, width) of a counted instruction, or None when it is not in a family."""
    m = mnemonic
    if _CACHE_CONTROL.match(m):
        return "cache_control", m[len("buffer_"):]
    if m.startswith("buffer_"):
        for fam in ("buffer_atomic", "buffer_load", "buffer_store"):
            if m.startswith(fam + "_"):
                width = m[len(fam) + 1:]
                if fam != "buffer_atomic":
                    spill_note = "Spill" in comment or "Reload" in comment
                    if spill_note or (private_mubuf and _second_operand_is_off(operands)):
                        # gfx9 private-segment (scratch) access through MUBUF
                        return ("scratch_load" if fam == "buffer_load" else "scratch_store",
                                width + " (mubuf)")
                return fam, width
        return None
    if m.startswith("global_atomic_cmpswap"):
        return "global_atomic_cas", m[len("global_atomic_"):]
    for fam in ("global_atomic", "global_load", "global_store", "flat_atomic", "flat_load",
                "flat_store", "scratch_load", "scratch_store", "s_buffer_load", "s_load",
                "s_store", "matrix_load", "matrix_store"):
        if m.startswith(fam + "_") or m == fam:
            return fam, m[len(fam) + 1:]
    if m.startswith("ds_"):
        if m.startswith(("ds_read_m32x16", "ds_read_matrix", "ds_write_matrix")):
            return "ds_matrix", m[3:]
        for fam, prefixes in (("ds_read", ("ds_read", "ds_load")), ("ds_write", ("ds_write", "ds_store"))):
            for prefix in prefixes:
                if m.startswith(prefix) and not m.startswith(prefix + "_addtid"):
                    return fam, m[len(prefix):].lstrip("_")
        return "ds_other", m[3:]
    if m.startswith(("v_mfma_", "v_smfmac_")):
        return "mfma", m[2:]
    if m.startswith("v_accvgpr_"):
        return "accvgpr", m[len("v_accvgpr_"):]
    if m.startswith("v_mmac_"):
        return "mmac", m[len("v_mmac_"):]
    if m.startswith("s_waitcnt"):
        return "s_waitcnt", m[len("s_waitcnt"):].lstrip("_") or "waitcnt"
    if m.startswith(("s_barrier", "s_abarrier")):
        return "s_barrier", m[2:]
    return None


def mix_category(mnemonic: str, family: str | None) -> str:
    if family in MATRIX_FAMILIES:
        return "matrix"
    if family == "s_waitcnt":
        return "waitcnt"
    if family == "s_barrier":
        return "barrier"
    if family in ("s_load", "s_buffer_load", "s_store"):
        return "scalar_memory"
    if family in LDS_FAMILIES:
        return "lds"
    if family is not None:
        return "vector_memory"
    if mnemonic.startswith("v_"):
        return "transcendental" if _TRANSCENDENTAL.match(mnemonic) else "valu"
    if _BRANCH.match(mnemonic):
        return "branch"
    if mnemonic.startswith("s_nop") or mnemonic.startswith("s_sleep") or mnemonic.startswith("s_set"):
        return "other"
    if mnemonic.startswith("s_"):
        return "salu"
    return "other"


# mnemonic -> (family, width, lane bytes, mix category) of the mnemonics whose operands and
# comment do not matter (all but DETAIL_PREFIXES)
_PLAIN_CLASS: dict[str, tuple] = {}


def _plain_class(mnemonic: str) -> tuple:
    found = _PLAIN_CLASS.get(mnemonic)
    if found is None:
        hit = classify(mnemonic, "", "", False)
        family = hit[0] if hit else None
        found = (family, hit[1] if hit else None, lane_bytes(*hit) if hit else 0,
                 mix_category(mnemonic, family))
        _PLAIN_CLASS[mnemonic] = found
    return found


def _classified(k: AmdgcnKernel, private_mubuf: bool):
    """(mnemonic, operands, comment, family, width, lane bytes, mix category, count) for each
    distinct instruction of ``k``, in the order first seen (so families and mix categories are
    first met in the same order as instruction by instruction)."""
    for entry, n in Counter(k.insts).items():
        if entry.startswith(DETAIL_PREFIXES):
            mnemonic, operands, comment = parse_instruction(entry)
            family, width, nbytes, category = _PLAIN_CLASS.get(mnemonic) or _plain_class(mnemonic)
            if family in ("buffer_load", "buffer_store"):  # a MUBUF spill is scratch traffic
                found = classify(mnemonic, operands, comment, private_mubuf)
                if found[0] != family:
                    family, width = found
                    nbytes = lane_bytes(family, width)
                    category = mix_category(mnemonic, family)
            yield mnemonic, operands, comment, family, width, nbytes, category, n
        else:
            yield (entry, "", "") + (_PLAIN_CLASS.get(entry) or _plain_class(entry)) + (n,)


def _private_mubuf(resources: dict) -> bool:
    return bool(resources.get("scratch_bytes"))


def memory_op_counts(text: str) -> dict:
    """The data memory instructions of an AMDGCN listing, all its kernels together, counted as
    :func:`scan_kernel` counts them (gfx9 MUBUF spills are scratch traffic, ``buffer_wbl2`` /
    ``buffer_inv`` cache control):

    ``{"ops": {"buffer_load": 2, "global_store": 1, ...}, "mnemonics": {"buffer_load_dwordx4": 2,
    ...}}``: ``ops`` by path (buffer / global / flat) and kind (load / store / atomic; a
    ``global_atomic_cmpswap`` is a ``global_atomic``), ``mnemonics`` per instruction; both hold
    only what occurs, in the order first seen.  Text that is no AMDGCN listing has none.
    """
    ops: dict[str, int] = {}
    mnemonics: dict[str, int] = {}
    try:
        kernels = split_kernels(text)
    except InputError:
        kernels = []
    for k in kernels:
        private_mubuf = _private_mubuf(read_resources(k))
        for mnemonic, _, _, family, _, _, _, n in _classified(k, private_mubuf):
            path_op = _DATA_PATH_OP.get(family)
            if path_op is not None:
                ops[path_op] = ops.get(path_op, 0) + n
                mnemonics[mnemonic] = mnemonics.get(mnemonic, 0) + n
    return {"ops": ops, "mnemonics": mnemonics}


def scan_kernel(k: AmdgcnKernel) -> dict:
    """Counts and resources of one kernel (no arch/occupancy decisions here)."""
    resources = read_resources(k)
    private_mubuf = _private_mubuf(resources)
    mnemonics: Counter = Counter()
    families = dict.fromkeys(FAMILIES, 0)
    widths: dict[str, dict] = {}
    mix: dict[str, int] = {}
    waits: Counter = Counter()
    spill = Counter()
    data_bytes = {"load": 0, "store": 0, "atomic": 0}
    for mnemonic, operands, comment, family, width, nbytes, category, n in \
            _classified(k, private_mubuf):
        mnemonics[mnemonic] += n
        mix[category] = mix.get(category, 0) + n
        if family is None:
            continue
        families[family] = families.get(family, 0) + n
        by_width = widths.get(family)
        if by_width is None:
            by_width = widths[family] = {}
        by_width[width] = by_width.get(width, 0) + n
        if family in LOAD_FAMILIES:
            data_bytes["load"] += nbytes * n
        elif family in STORE_FAMILIES:
            data_bytes["store"] += nbytes * n
        elif family in ATOMIC_FAMILIES:
            data_bytes["atomic"] += nbytes * n
        if family in ("scratch_load", "scratch_store"):
            kind = "loads" if family == "scratch_load" else "stores"
            if "Spill" in comment or "Reload" in comment or "(mubuf)" in width:
                spill[kind] += n
            if "(mubuf)" in width:
                spill["via_mubuf"] += n
        if family == "s_waitcnt":
            fields = _WAIT_FIELD.findall(operands)
            if mnemonic != "s_waitcnt" and not fields:
                waits[mnemonic[len("s_waitcnt_"):]] += n
            for name, value in fields:
                waits[name] += n
                if value == "0":
                    waits[name + "_0"] += n
    return {
        "mnemonics": dict(sorted(mnemonics.items())),
        "families": families,
        "widths": {f: dict(sorted(c.items())) for f, c in widths.items()},
        "waitcnt": dict(sorted(waits.items())),
        "spill_ops": {"stores": spill["stores"], "loads": spill["loads"],
                      "via": ("mubuf" if spill["via_mubuf"] else "scratch") if spill else None},
        "mix_counts": mix,
        "data_bytes_per_lane": data_bytes,
        "resources": resources,
    }


def read_resources(k: AmdgcnKernel) -> dict:
    c, kd, meta, sets = k.comment, k.kd, k.meta, k.sets

    def first(*values):
        for v in values:
            if isinstance(v, int):
                return v
        return None

    vgpr_total = first(meta.get("vgpr_count"), c.get("vgpr_total"))
    agpr = first(meta.get("agpr_count"), c.get("agpr_count_comment"), sets.get("num_agpr"))
    arch_vgpr = first(c.get("arch_vgpr_count"), sets.get("num_vgpr"), kd.get("next_free_vgpr"))
    sgpr = first(c.get("sgpr_count"), c.get("sgpr_count_old"), meta.get("sgpr_count"))
    scratch = first(meta.get("private_segment_fixed_size"), c.get("scratch_bytes_comment"),
                    kd.get("private_segment_fixed_size"), sets.get("private_seg_size"))
    lds_static = first(meta.get("group_segment_fixed_size"), kd.get("group_segment_fixed_size"),
                       c.get("lds_bytes_static_comment"))
    wave = first(meta.get("wavefront_size"))
    wg = first(meta.get("max_flat_workgroup_size"))
    return {
        "vgpr": arch_vgpr,
        "agpr": agpr,
        "vgpr_total": vgpr_total if vgpr_total is not None else arch_vgpr,
        "sgpr": sgpr,
        "sgprs_for_waves": c.get("sgprs_for_waves"),
        "scratch_bytes": scratch,
        "vgpr_spill_count": first(meta.get("vgpr_spill_count")),
        "sgpr_spill_count": first(meta.get("sgpr_spill_count")),
        "lds_bytes_static": lds_static,
        "llvm_occupancy": c.get("llvm_occupancy"),
        "wavefront_size": wave,
        "max_flat_workgroup_size": wg,
        "code_bytes": c.get("code_bytes"),
    }


# Matrix-core families counted in totals.matrix_ops (v_accvgpr_* moves are not matrix math).
MATRIX_OP_FAMILIES = ("mfma", "mmac")


def totals(families: dict, resources: dict) -> dict:
    """The per-kernel totals the decision rules read (``isa_scan.json`` ``kernels[].totals``):
    matrix-core instructions, data atomics, and the registers LLVM reports spilled."""
    return {"matrix_ops": sum(count(families.get(f)) for f in MATRIX_OP_FAMILIES),
            "atomics": sum(count(families.get(f)) for f in ATOMIC_FAMILIES),
            "spills": count(resources.get("vgpr_spill_count")) + count(resources.get("sgpr_spill_count"))}


def memory_verdict(families: dict) -> tuple[str, dict]:
    """Verdict over the buffer / global / flat paths; Hygon MLS ops are counted beside it."""
    counts = {path: sum(families.get(f, 0) for f in fams) for path, fams in DATA_FAMILIES.items()}
    used = [p for p, n in counts.items() if n]
    counts["mls"] = families.get("matrix_load", 0) + families.get("matrix_store", 0)
    if not used:
        return "none", counts
    return (used[0] if len(used) == 1 else "mixed"), counts


def _addressing_findings(verdict: str, counts: dict, widths: dict) -> list[str]:
    out: list[str] = []
    total = counts["buffer"] + counts["global"] + counts["flat"]
    if verdict == "none" and counts["mls"]:
        out.append(f"data moves only through {counts['mls']} Hygon MLS matrix_load/matrix_store "
                   f"instruction(s); no buffer, global or flat data ops")
    elif verdict == "none":
        out.append("no data loads/stores/atomics through buffer, global or flat instructions "
                   "(only scalar, LDS or scratch traffic)")
    elif verdict == "buffer":
        wide = sum(widths.get(f, {}).get("dwordx4", 0) for f in ("buffer_load", "buffer_store"))
        out.append(f"all {total} data memory ops are buffer (MUBUF) instructions: buffer ops are "
                   f"in effect" + (f"; {wide} of them dwordx4 (16 B per lane), the strongest "
                                   f"evidence of vectorised access" if wide else ""))
    elif verdict in ("global", "flat"):
        out.append(f"all {total} data memory ops are {verdict}_* instructions: buffer ops were not "
                   f"applied; inspect the pointer hints (tt.pointer_range=32, tt.divisibility) and "
                   f"the offset formulas (non-negative, 32-bit, under 2 GiB)")
        if verdict == "flat":
            out.append("flat_* means a generic address space: the compiler could not tell the "
                       "pointer is global")
    else:
        parts = ", ".join(f"{n} {p}" for p, n in counts.items() if n and p != "mls")
        share = round(100 * counts["buffer"] / total)
        out.append(f"mixed addressing ({parts}; {share}% buffer): some pointers got buffer ops "
                   f"and others did not; compare their offset formulas and hints argument by "
                   f"argument")
    return out


def _width_findings(widths: dict) -> list[str]:
    out: list[str] = []
    load_widths = [lane_bytes(f, w) for f in LOAD_FAMILIES for w in widths.get(f, {})]
    if load_widths and min(load_widths) >= 4 and max(load_widths) < 16:
        widest = max(load_widths)
        out.append(f"widest data load moves {widest} B per lane (no dwordx4): fewer elements per "
                   f"lane than a 16-byte access needs; for a pointwise kernel, more elements per "
                   f"lane (XBLOCK / (num_warps * 64)) or contiguity/divisibility hints may widen it")
    narrow = []
    for family in LOAD_FAMILIES + STORE_FAMILIES:
        for width, n in widths.get(family, {}).items():
            if 0 < lane_bytes(family, width) < 4:
                narrow.append(f"{n} {family}_{width}")
    if narrow:
        out.append("sub-dword accesses (" + ", ".join(narrow) + "): 8/16-bit elements are moved "
                   "one at a time, not vectorised; check contiguity and divisibility hints "
                   "(tl.multiple_of, strides divisible by 16)")
    return out


def _hazard_findings(scan: dict, fam: dict, res: dict, arch: str | None) -> list[str]:
    """Atomics, spills and matrix instructions."""
    out: list[str] = []
    cas = fam.get("global_atomic_cas", 0)
    if cas:
        out.append(f"{cas} global_atomic_cmpswap: the atomic is emulated with compare-and-swap "
                   f"retry loops (no native op for this type/arch); contention multiplies the cost")
    atomics = sum(fam.get(f, 0) for f in ATOMIC_FAMILIES)
    if atomics:
        out.append(f"{atomics} atomic instruction(s): scattered/atomic-heavy work; tuning the "
                   f"Triton config rarely fixes this, a model-level rewrite (sort/segment, "
                   f"avoid scatter) may")
    spills = scan["spill_ops"]
    vspill = res.get("vgpr_spill_count") or 0
    if vspill or spills["stores"] or spills["loads"]:
        how = ("buffer_store/load ... off (MUBUF private segment; not data buffer ops)"
               if spills["via"] == "mubuf" else "scratch_store/load")
        out.append(f"register spills: {vspill} VGPRs spilled, {res.get('scratch_bytes') or 0} B "
                   f"scratch per lane, {spills['stores']} spill stores / {spills['loads']} reloads "
                   f"via {how}; reduce the tile (BLOCK_*), num_stages or waves_per_eu, or raise "
                   f"num_warps")
    if fam.get("mfma") and arch and arch.startswith("gfx93"):
        out.append("v_mfma_* in a listing for a Hygon arch: Hygon DCUs use v_mmac_*; this "
                   "listing was likely compiled for an AMD proxy target")
    if fam.get("mmac"):
        out.append(f"{fam['mmac']} Hygon v_mmac_* matrix instruction(s)")
    return out


def _mix_findings(scan: dict, fam: dict) -> list[str]:
    out: list[str] = []
    waits = scan["waitcnt"]
    loads = sum(fam.get(f, 0) for f in LOAD_FAMILIES)
    mix = mix_summary(scan)
    if mix["character"] == "compute_heavy":
        out.append(f"{mix['valu_per_byte']} VALU instructions per byte a lane moves "
                   f"({mix['transcendental']} transcendental): arithmetic-bound; better memory "
                   f"instructions will not speed it up, cheaper math (approximations, fewer "
                   f"conversions) might")
    elif mix["character"] == "memory" and mix["data_bytes_per_lane"]:
        out.append(f"{mix['valu_per_byte']} VALU instructions per byte moved: memory-bound; "
                   f"access width and buffer ops matter")
    if loads >= 4 and waits.get("vmcnt_0", 0) >= loads:
        out.append(f"{waits['vmcnt_0']} s_waitcnt vmcnt(0) for {loads} vector loads: each load "
                   f"is waited for before the next is used; little memory-level parallelism")
    return out


def findings(scan: dict, verdict: str, counts: dict, arch: str | None) -> list[str]:
    """What the counts mean for the kernel, in plain words (references/optimization_patterns.md)."""
    fam, widths, res = scan["families"], scan["widths"], scan["resources"]
    return (_addressing_findings(verdict, counts, widths) + _width_findings(widths)
            + _hazard_findings(scan, fam, res, arch) + _mix_findings(scan, fam))


def mix_summary(scan: dict) -> dict:
    counts = scan["mix_counts"]
    data = scan["data_bytes_per_lane"]
    moved = data["load"] + data["store"] + data["atomic"]
    valu = counts.get("valu", 0)
    special = counts.get("transcendental", 0)
    out = {
        "valu": valu, "transcendental": special, "matrix": counts.get("matrix", 0),
        "salu": counts.get("salu", 0), "vector_memory": counts.get("vector_memory", 0),
        "lds": counts.get("lds", 0), "scalar_memory": counts.get("scalar_memory", 0),
        "waitcnt": counts.get("waitcnt", 0), "barrier": counts.get("barrier", 0),
        "branch": counts.get("branch", 0), "other": counts.get("other", 0),
        "total": sum(counts.values()),
        "data_bytes_per_lane": moved,
        "load_bytes_per_lane": data["load"], "store_bytes_per_lane": data["store"],
        "valu_per_byte": ratio(valu + special, moved),
        "transcendental_per_byte": ratio(special, moved),
    }
    out["character"] = character(out)
    return out


# Static VALU instructions per data byte one lane moves.  The cuts are thresholds of
# references/decision_rules.yaml (balanced_valu_per_byte, arithmetic_heavy_valu_per_byte, with
# their sources), so the scanner's ``compute_heavy`` and the arithmetic_bound rule agree.  Static
# counts ignore loop trip counts, so this reads straight-line (pointwise / persistent) kernels only.


def character(mix: dict, rules: dict | None = None) -> str:
    """``matrix`` / ``compute_heavy`` / ``balanced`` / ``memory`` / ``no_data_traffic``.

    ``rules``: decision rules to take the cuts from (default: the bundled file)."""
    from ..base.decide import threshold  # lazy: the rules file is read only when a kernel moves data

    if mix["matrix"]:
        return "matrix"
    if not mix["data_bytes_per_lane"]:
        return "no_data_traffic"
    per_byte = mix["valu_per_byte"] or 0
    if per_byte >= threshold("arithmetic_heavy_valu_per_byte", rules):
        return "compute_heavy"
    if per_byte >= threshold("balanced_valu_per_byte", rules):
        return "balanced"
    return "memory"
