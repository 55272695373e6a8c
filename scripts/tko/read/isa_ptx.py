"""NVIDIA PTX (``.ptx``) and SASS (``cuobjdump -sass`` / ``nvdisasm`` text) readers.

The same questions as for AMDGCN: which memory paths and widths a kernel uses
(``ld.global.v4.b32`` / ``LDG.E.128``), atomics (``atom.`` / ``red.``,
``ATOMG`` / ``RED``), shared memory (``ld.shared`` / ``LDS``), async copies,
tensor-core ops (``mma`` / ``wgmma``, ``HMMA`` / ``HGMMA``), special-function
ops and register use.  A ``.cubin`` is disassembled with the ``cuobjdump`` /
``nvdisasm`` that the Triton wheel bundles (``triton/backends/nvidia/bin``).
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path

from ..base import subproc
from ..base.errors import InputError, ToolFailure
from .isa_common import clean_lines, count, decimal, ratio

PTX_FAMILIES = (
    "ld_global", "ld_global_nc", "st_global", "atom_global", "red_global",
    "ld_shared", "st_shared", "atom_shared", "ldmatrix", "stmatrix",
    "cp_async", "cp_async_bulk", "ld_local", "st_local", "ld_param",
    "mma", "wgmma", "barrier",
)
PTX_DATA = ("ld_global", "ld_global_nc", "st_global", "atom_global", "red_global")
PTX_ATOMIC = ("atom_global", "red_global", "atom_shared")
_PTX_SPECIAL = re.compile(r"^(ex2|lg2|rcp|rsqrt|sqrt|sin|cos|tanh)\.")
_PTX_BRANCH = re.compile(r"^(bra|ret|exit|call|brx)\b")
_TYPE_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
               "b32": 4, "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8,
               "f16x2": 4, "bf16x2": 4, "b128": 16}


def looks_like_ptx(text: str) -> bool:
    return bool(re.search(r"^\s*\.(version|target)\s", text, re.M)) and ".entry" in text


def looks_like_sass(text: str) -> bool:
    return bool(re.search(r"Function\s*:\s*\S+", text)) and bool(re.search(r"/\*[0-9a-f]{4,}\*/", text))


def ptx_arch(text: str) -> str | None:
    m = re.search(r"^\s*\.target\s+(sm_\d+)", text, re.M)
    return m.group(1) if m else None


def _ptx_kernels(lines: list[str]) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    depth = 0
    for line in lines:
        m = re.match(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)", line)
        if m:
            current = []
            out.append((m.group(1), current))
            depth = 0
            continue
        if current is None:
            continue
        current.append(line)
        depth += line.count("{") - line.count("}")
        if depth <= 0 and "}" in line and line.strip() == "}":
            current = None
    return out


def _ptx_family(op: str) -> tuple[str, str] | None:
    parts = op.split(".")
    head = parts[0]
    rest = ".".join(parts[1:])
    if head in ("ld", "st") and len(parts) > 1:
        space = parts[1]
        if space == "global":
            fam = "ld_global_nc" if head == "ld" and ".nc" in "." + rest else f"{head}_global"
        elif space in ("shared", "shared::cta", "shared::cluster"):
            fam = f"{head}_shared"
        elif space == "local":
            fam = f"{head}_local"
        elif space == "param":
            fam = "ld_param" if head == "ld" else None
        else:
            fam = None
        if fam:
            return fam, ".".join(p for p in parts[2:])
        return None
    if head in ("atom", "red"):
        space = parts[1] if len(parts) > 1 else ""
        if space.startswith("shared"):
            return "atom_shared", ".".join(parts[2:])
        return (f"{head}_global", ".".join(parts[2:] if space == "global" else parts[1:]))
    if head == "ldmatrix":
        return "ldmatrix", rest
    if head == "stmatrix":
        return "stmatrix", rest
    if head == "cp" and rest.startswith("async.bulk"):
        return "cp_async_bulk", rest[len("async.bulk"):].lstrip(".")
    if head == "cp" and rest.startswith("async"):
        return "cp_async", rest[len("async"):].lstrip(".")
    if head == "mma":
        return "mma", rest
    if head == "wgmma":
        # fence / commit_group / wait_group are bookkeeping, not matrix math
        return ("wgmma", rest) if rest.startswith("mma_async") else None
    if head in ("bar", "barrier"):
        return "barrier", rest
    return None


def _ptx_lane_bytes(width: str) -> int:
    parts = width.split(".")
    vec = 1
    for p in parts:
        if re.fullmatch(r"v\d{1,3}", p):
            vec = int(p[1:])
    for p in reversed(parts):
        if p in _TYPE_BYTES:
            return vec * _TYPE_BYTES[p]
    return 0


def scan_ptx(text: str) -> dict:
    lines = clean_lines(text)
    arch = ptx_arch(text)
    kernels = []
    for name, body in _ptx_kernels(lines):
        ops: Counter = Counter()
        families: Counter = Counter({f: 0 for f in PTX_FAMILIES})
        widths: dict[str, Counter] = {}
        mix: Counter = Counter()
        regs: dict[str, int] = {}
        predicated = 0
        data_bytes = {"load": 0, "store": 0, "atomic": 0}
        threads = None
        for raw in body:
            code = raw.split("//", 1)[0].strip()
            if not code:
                continue
            m = re.match(r"^\.reg\s+\.(\w+)\s+%\w+<(\d+)>", code)
            if m:
                regs[m.group(1)] = regs.get(m.group(1), 0) + (decimal(m.group(2)) or 0)
                continue
            m = re.match(r"^\.(?:reqntid|maxntid)\s+(\d+)", code)
            if m:
                threads = decimal(m.group(1))
                continue
            if code.startswith((".", "{", "}", "$")) or code.endswith(":"):
                continue
            if code.startswith("@"):
                predicated += 1
                code = code.split(None, 1)[1] if " " in code else ""
            op = code.split(None, 1)[0].rstrip(";") if code else ""
            if not re.match(r"^[a-z][\w.:]*$", op):
                continue
            ops[op] += 1
            found = _ptx_family(op)
            if found:
                fam, width = found
                families[fam] += 1
                widths.setdefault(fam, Counter())[width] += 1
                nbytes = _ptx_lane_bytes(width)
                if fam in ("ld_global", "ld_global_nc"):
                    data_bytes["load"] += nbytes
                elif fam == "st_global":
                    data_bytes["store"] += nbytes
                elif fam in ("atom_global", "red_global"):
                    data_bytes["atomic"] += nbytes
            mix[_ptx_mix(op, found[0] if found else None)] += 1
        kernels.append({
            "name": name,
            "mnemonics": dict(sorted(ops.items())),
            "families": dict(families),
            "widths": {f: dict(sorted(c.items())) for f, c in widths.items()},
            "predicated": predicated,
            "resources": {"registers_declared": regs,
                          "registers_declared_total": sum(v for k, v in regs.items() if k != "pred"),
                          "threads_per_block": threads},
            "mix_counts": dict(mix),
            "data_bytes_per_lane": data_bytes,
        })
    return {"format": "ptx", "arch": arch, "kernels": kernels}


def _ptx_mix(op: str, family: str | None) -> str:
    if family in ("mma", "wgmma"):
        return "matrix"
    if family == "barrier":
        return "barrier"
    if family in ("ld_shared", "st_shared", "atom_shared", "ldmatrix", "stmatrix"):
        return "lds"
    if family == "ld_param":
        return "scalar_memory"
    if family is not None:
        return "vector_memory"
    if _PTX_SPECIAL.match(op):
        return "transcendental"
    if _PTX_BRANCH.match(op):
        return "branch"
    if op.startswith(("mov", "cvta")):
        return "other"
    return "valu"


# ---- SASS -------------------------------------------------------------------

SASS_FAMILIES = ("LDG", "STG", "ATOMG", "RED", "LDS", "STS", "ATOMS", "LDSM", "LDGSTS", "UTMALDG",
                 "LDL", "STL", "LDC", "HMMA", "HGMMA", "IMMA", "BAR", "MUFU")
_SASS_LINE = re.compile(r"/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)")


def nvidia_tool(name: str) -> str | None:
    """Path of cuobjdump / nvdisasm: the Triton wheel's bundled copy first, then PATH."""
    try:
        import importlib.util
        spec = importlib.util.find_spec("triton")
        if spec and spec.origin:
            bundled = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / name
            if bundled.exists() and os.access(bundled, os.X_OK):
                return str(bundled)
    except (ImportError, ValueError):
        pass
    return shutil.which(name)


def disassemble_cubin(path: str | os.PathLike) -> tuple[str, str | None]:
    """(``cuobjdump -sass`` text, ``--dump-resource-usage`` text or None)."""
    tool = nvidia_tool("cuobjdump")
    if tool is None:
        raise ToolFailure(f"{path}: cannot disassemble a cubin: cuobjdump not found "
                          f"(it ships with the triton wheel and the CUDA toolkit)")
    try:
        sass = subproc.run([tool, "-sass", str(path)], timeout=120)
    except OSError as exc:
        raise ToolFailure(f"{path}: cuobjdump failed: {exc}") from None
    if sass.timed_out:
        raise ToolFailure(f"{path}: cuobjdump failed: timed out after 120 s")
    if sass.returncode != 0:
        raise InputError(f"{path}: cuobjdump could not read it: "
                         f"{(sass.stderr or sass.stdout).strip().splitlines()[-1:] or ['?']}")
    usage = subproc.run([tool, "--dump-resource-usage", str(path)], timeout=120)
    return sass.stdout, usage.stdout if usage.returncode == 0 and not usage.timed_out else None


def parse_resource_usage(text: str) -> dict[str, dict]:
    """``Function name:\\n REG:26 STACK:0 SHARED:0 LOCAL:0 ...`` -> {name: {reg, stack, ...}}."""
    out: dict[str, dict] = {}
    current = None
    for line in clean_lines(text):
        m = re.match(r"^\s*Function\s+([^\s:]+):", line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        if current is not None:
            for key, value in re.findall(r"([A-Z_]+(?:\[\d+\])?):(\d+)", line):
                current[key.lower()] = decimal(value)
    return out


def _sass_lane_bytes(op: str) -> int:
    """Bytes per thread of LDG/STG/ATOMG/RED from the opcode modifiers (default 32-bit)."""
    for part in op.split(".")[1:]:
        if part.isascii() and part.isdigit():
            return int(part) // 8 if len(part) <= 4 else 4  # LDG.E.128, LDG.E.64
        m = re.fullmatch(r"[FUSB]F?(\d{1,4})(?:x(\d{1,4}))?", part)  # U8, S16, F32x4, BF16x2
        if m:
            return int(m.group(1)) // 8 * int(m.group(2) or 1)
    return 4


def scan_sass(text: str, resource_usage: str | None = None) -> dict:
    lines = clean_lines(text)
    arch = None
    m = re.search(r"code for (sm_\d+)", text) or re.search(r"\.target\s+(sm_\d+)", text)
    if m:
        arch = m.group(1)
    if resource_usage is None and "Resource usage:" in text:
        resource_usage = text  # cuobjdump --dump-resource-usage output saved with the SASS
    usage = parse_resource_usage(resource_usage) if resource_usage else {}
    kernels: list[dict] = []
    current = None
    for line in lines:
        m = re.match(r"^\s*Function\s*:\s*(\S+)", line)
        if m:
            current = {"name": m.group(1), "ops": Counter()}
            kernels.append(current)
            continue
        if current is None:
            continue
        m = _SASS_LINE.search(line)
        if m:
            current["ops"][m.group(1)] += 1
    out = []
    for k in kernels:
        families: Counter = Counter({f: 0 for f in SASS_FAMILIES})
        widths: dict[str, Counter] = {}
        mix: Counter = Counter()
        data_bytes = {"load": 0, "store": 0, "atomic": 0}
        for op, n in k["ops"].items():
            head = op.split(".")[0]
            # generic ATOM and Hopper's REDG / ATOMG spellings roll into ATOMG / RED
            head = {"ATOM": "ATOMG", "REDG": "RED"}.get(head, head)
            if head in families:
                families[head] += n
                widths.setdefault(head, Counter())[op[len(op.split(".")[0]):].lstrip(".") or "32"] += n
                nbytes = _sass_lane_bytes(op) * n
                if head == "LDG":
                    data_bytes["load"] += nbytes
                elif head == "STG":
                    data_bytes["store"] += nbytes
                elif head in ("ATOMG", "RED"):
                    data_bytes["atomic"] += nbytes
            if head in ("HMMA", "HGMMA", "IMMA"):
                mix["matrix"] += n
            elif head == "MUFU":
                mix["transcendental"] += n
            elif head in ("LDG", "STG", "ATOMG", "RED", "LDGSTS", "UTMALDG", "LDL", "STL"):
                mix["vector_memory"] += n
            elif head in ("LDS", "STS", "ATOMS", "LDSM"):
                mix["lds"] += n
            elif head in ("BAR",):
                mix["barrier"] += n
            elif head in ("BRA", "EXIT", "RET", "CALL", "BSYNC", "BSSY"):
                mix["branch"] += n
            elif head.startswith("U") or head in ("S2R", "S2UR", "LDC", "ULDC", "CS2R", "NOP", "MOV"):
                mix["other"] += n
            else:
                mix["valu"] += n
        res = usage.get(k["name"], {})
        out.append({
            "name": k["name"],
            "mnemonics": dict(sorted(k["ops"].items())),
            "families": dict(families),
            "widths": {f: dict(sorted(c.items())) for f, c in widths.items()},
            "resources": {"registers": res.get("reg"), "shared_static": res.get("shared"),
                          "local_bytes": res.get("local"), "stack_bytes": res.get("stack")},
            "mix_counts": dict(mix),
            "data_bytes_per_lane": data_bytes,
        })
    return {"format": "sass", "arch": arch, "kernels": out}


# The families behind the per-kernel totals the decision rules read (``kernels[].totals``);
# local-memory traffic stands for register spills (or local arrays).
TOTAL_FAMILIES = {
    "ptx": {"matrix_ops": ("mma", "wgmma"), "atomics": ("atom_global", "red_global"),
            "spills": ("ld_local", "st_local")},
    "sass": {"matrix_ops": ("HMMA", "HGMMA", "IMMA"), "atomics": ("ATOMG", "RED"), "spills": ("LDL", "STL")},
}


def totals(families: dict, fmt: str) -> dict:
    """``matrix_ops``, ``atomics`` and ``spills`` of a PTX or SASS kernel's families."""
    return {name: sum(count(families.get(f)) for f in fams) for name, fams in TOTAL_FAMILIES[fmt].items()}


def nvidia_verdict(families: dict, fmt: str) -> str:
    data = PTX_DATA if fmt == "ptx" else ("LDG", "STG", "ATOMG", "RED")
    return "global" if any(families.get(f, 0) for f in data) else "none"


def nvidia_findings(kernel: dict, fmt: str) -> list[str]:
    fam, widths = kernel["families"], kernel["widths"]
    out = []
    if fmt == "ptx":
        loads = fam["ld_global"] + fam["ld_global_nc"]
        stores = fam["st_global"]
        vec = sum(n for f in ("ld_global", "ld_global_nc", "st_global")
                  for w, n in widths.get(f, {}).items() if _ptx_lane_bytes(w) >= 16)
        narrow = [f"{n} {f}.{w}" for f in ("ld_global", "ld_global_nc", "st_global")
                  for w, n in widths.get(f, {}).items() if 0 < _ptx_lane_bytes(w) < 4]
    else:
        loads, stores = fam["LDG"], fam["STG"]
        vec = sum(n for f in ("LDG", "STG") for w, n in widths.get(f, {}).items() if "128" in w)
        narrow = [f"{n} {f}.{w}" for f in ("LDG", "STG") for w, n in widths.get(f, {}).items()
                  if re.search(r"\b(U8|S8|U16|S16)\b", w.replace(".", " "))]
    total = totals(fam, fmt)
    atomics, mma, local = total["atomics"], total["matrix_ops"], total["spills"]
    if loads or stores:
        out.append(f"{loads} global loads, {stores} global stores; {vec} are 16-byte vector "
                   f"accesses" + (" (vectorised)" if vec else " (none vectorised)"))
    if narrow:
        out.append("sub-word global accesses (" + ", ".join(narrow) + "): elements moved one at "
                   "a time; check alignment/divisibility hints")
    if atomics:
        out.append(f"{atomics} global atomic/reduction instruction(s): scattered/atomic-heavy work")
    if mma:
        out.append(f"{mma} tensor-core instruction(s)")
    if local:
        out.append(f"{local} local-memory accesses: register spills or local arrays")
    return out


def nvidia_mix(kernel: dict) -> dict:
    counts = kernel["mix_counts"]
    data = kernel["data_bytes_per_lane"]
    moved = data["load"] + data["store"] + data["atomic"]
    valu, special = counts.get("valu", 0), counts.get("transcendental", 0)
    out = {k: counts.get(k, 0) for k in ("valu", "transcendental", "matrix", "vector_memory", "lds",
                                          "scalar_memory", "barrier", "branch", "other")}
    out.update({"total": sum(counts.values()), "data_bytes_per_lane": moved,
                "load_bytes_per_lane": data["load"], "store_bytes_per_lane": data["store"],
                "valu_per_byte": ratio(valu + special, moved),
                "transcendental_per_byte": ratio(special, moved)})
    return out
