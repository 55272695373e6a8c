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
from dataclasses import dataclass, field

from ..base.errors import InputError
from .isa_common import clean_text, count, decimal, ratio, to_int

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
_MNEMONIC = re.compile(r"^[a-z][a-z0-9_]*$")
_WAIT_FIELD = re.compile(r"\b(vmcnt|lgkmcnt|expcnt|vscnt|vbcnt)\((\d+)\)")
_TARGET = re.compile(r"(?:amdgcn|amdgpu)[\w.]*-amd-amdhsa-[\w-]*?(gfx[0-9a-f]+)")
_OBJDUMP_SYMBOL = re.compile(r"^[0-9a-fA-F]+\s+<([^>]+)>:\s*$")
_LABEL = re.compile(r"^([A-Za-z_$][\w.$]*):")
_COMMENT_KV = re.compile(r"^;\s*([A-Za-z][A-Za-z0-9_ ]*?)\s*[:=]\s*(-?\d+)")
_KD_START = re.compile(r"^\.amdhsa_kernel\s+(\S+)")
_SET = re.compile(r"^\s*\.set\s+\.L(.+)\.(num_vgpr|num_agpr|numbered_sgpr|private_seg_size),\s*(\d+)")
_WIDTH = re.compile(r"(dwordx\d|dword|ubyte|sbyte|byte|ushort|sshort|short|b\d+|[uif]\d+)")

_COMMENT_KEYS = {
    "TotalNumSgprs": "sgpr_count", "NumSgprs": "sgpr_count_old", "NumVgprs": "arch_vgpr_count",
    "NumAgprs": "agpr_count_comment", "TotalNumVgprs": "vgpr_total", "ScratchSize": "scratch_bytes_comment",
    "Occupancy": "llvm_occupancy", "LDSByteSize": "lds_bytes_static_comment",
    "NumVGPRsForWavesPerEU": "vgprs_for_waves", "NumSGPRsForWavesPerEU": "sgprs_for_waves",
    "AccumOffset": "accum_offset", "codeLenInByte": "code_bytes",
}


@dataclass
class _Kernel:
    name: str
    insts: list = field(default_factory=list)      # mnemonics (see _instruction)
    comment: dict = field(default_factory=dict)    # ; Kernel info: block
    kd: dict = field(default_factory=dict)         # .amdhsa_* descriptor
    meta: dict = field(default_factory=dict)       # amdhsa.kernels YAML entry
    sets: dict = field(default_factory=dict)       # .set .L<name>.num_vgpr ...


def detect_arch(text: str) -> str | None:
    m = _TARGET.search(text)
    if m:
        return m.group(1)
    m = re.search(r"-mcpu=(gfx[0-9a-f]+)|\b(gfx9[0-9a-f]{2})\b", text)
    return (m.group(1) or m.group(2)) if m else None


def looks_like_amdgcn(text: str) -> bool:
    return bool(re.search(r"\.amdgcn_target|\.amdhsa_kernel|amdhsa\.kernels|\bs_endpgm\b|"
                          r"\bs_waitcnt\b|\bv_[a-z0-9_]+_e(32|64)\b|\bs_load_dword", text))


# a line of an AMDGCN listing: a section/kernel directive or an instruction of a known family
_LISTING_LINE = re.compile(
    r"^[ \t]*(?:\.(?:text|amdgcn_target|amdhsa_kernel|globl|type)\b|amdhsa\.kernels\b|"
    r"(?:[sv]|global|buffer|flat|ds|scratch|image|exp)_[a-z0-9_]+(?:[ \t]|$))", re.MULTILINE)


def require_listing(text: str) -> None:
    """Raise ``InputError`` unless ``text`` has at least one AMDGCN directive or instruction
    line (prose or binary data renamed ``.amdgcn`` would otherwise scan as a phantom kernel)."""
    if not (looks_like_amdgcn(text) or _LISTING_LINE.search(text)):
        raise InputError("not an AMDGCN listing (no .text, .amdhsa_kernel, target or "
                         "instruction line found)")


def _split_comment(line: str) -> tuple[str, str]:
    cut = len(line)
    for marker in (";", "//"):
        pos = line.find(marker)
        if pos != -1:
            cut = min(cut, pos)
    return line[:cut], line[cut:]


# The reader goes line by line only over the lines that can change what it is reading (kernel
# labels, descriptor / metadata / ``; Kernel info:`` blocks, .set, .size, .Lfunc_end) and reads
# the runs of lines between them, which hold only instructions, other directives, comments and
# blank lines, with one findall each.
#
# A line that goes to the line-by-line reader: after blanks and tabs, a character other than
# a-z . ; / (a label, a number, uppercase, other whitespace), a state-changing directive, the
# Kernel info header, or a lowercase word followed by something other than a blank, ';', '//' or
# the line end (a label ``name:``) or by blanks and '<' (llvm-objdump ``0000 <name>:``).  Sending a
# line there that a run could hold costs time, never a different result.
_SPECIAL = re.compile(
    r"\n[ \t]*(?:[^a-z.;/ \t\n]"
    r"|\.(?:amdgpu_metadata|amdhsa_kernel|set|Lfunc_end|size|end_amdgpu)"
    r"|; Kernel info:"
    r"|(?=([a-z][a-z0-9_]*))\1(?:[^a-z0-9_ \t;/\n]|/(?!/)|[^\S\n]+<))")
# An instruction line of a run: its mnemonic, or, for the mnemonics whose operands or comment
# change what they count (buffer_*: MUBUF spills; scratch_*: spill notes; s_waitcnt*: counters),
# the mnemonic with the rest of its line.
_DETAIL_PREFIXES = ("buffer_", "scratch_", "s_waitcnt")
_RUN_INSTRUCTION = re.compile(r"\n[ \t]*((?:buffer_|scratch_|s_waitcnt)[^\n]*|[a-z][a-z0-9_]*)")
# an entry of _Kernel.insts with operands: mnemonic, the code after it, the comment (from the
# first ';' or '//', as _split_comment cuts)
_DETAIL_ENTRY = re.compile(r"([a-z][a-z0-9_]*)([^;/]*(?:/(?!/)[^;/]*)*)(.*)", re.DOTALL)
_FUNCTION_NAME = re.compile(r"\.(?:globl|type)\s+([^\s,]+)")
_YAML_KEY = re.compile(r"^\.([\w]+):\s*(.*)$")
# ends of the blocks read whole: the line after the last line of each
_YAML_END = re.compile(r"\n[^\S\n]*\.end_amdgpu_metadata")
_KD_END = re.compile(r"\n[^\S\n]*\.end_amdhsa_kernel")
_KD_LINE = re.compile(r"^[^\S\n]*\.amdhsa_(\S*)[^\S\n]+(\S+)", re.MULTILINE)
_COMMENT_RUN = re.compile(r"(?:\n[^\S\n]*;[^\n]*)*")


def _function_names(text: str) -> set[str]:
    """Names of ``.globl`` / ``.type`` directives that start a line (after whitespace)."""
    names: set[str] = set()
    pos = 0
    search = _FUNCTION_NAME.search
    while True:
        m = search(text, pos)
        if m is None:
            return names
        start = m.start()
        line_start = text.rfind("\n", 0, start) + 1
        if line_start == start or text[line_start:start].isspace():
            names.add(m.group(1))
            pos = m.end()
        else:
            pos = start + 1


def _instruction(mnemonic: str, operands: str, comment: str) -> str:
    """The entry of :attr:`_Kernel.insts` for one instruction."""
    if mnemonic.startswith(_DETAIL_PREFIXES):
        return f"{mnemonic} {operands}{comment}"
    return mnemonic


def _parse_instruction(entry: str) -> tuple[str, str, str]:
    """(mnemonic, operands, comment) of an :attr:`_Kernel.insts` entry (operands and comment are
    kept for the buffer_ / scratch_ / s_waitcnt mnemonics only)."""
    if not entry.startswith(_DETAIL_PREFIXES):
        return entry, "", ""
    mnemonic, code, comment = _DETAIL_ENTRY.match(entry).groups()
    return mnemonic, code.strip(), comment


def split_kernels(text: str, default_name: str = "kernel") -> list[_Kernel]:
    """One :class:`_Kernel` per function body found, with its resource blocks attached."""
    require_listing(text)
    reader = _ListingReader(clean_text(text), default_name)
    reader.read()
    _attach_yaml(reader.yaml_lines, reader.kernel)
    kernels = reader.kernels
    return [kernels[name] for name in reader.order if kernels[name].insts or kernels[name].meta
            or kernels[name].kd]


class _ListingReader:
    """What :func:`split_kernels` knows while it reads one listing: the kernels found so far,
    the kernel whose body is being read (``current``), the one the next ``; Kernel info:`` lines
    belong to (``last``), the block being read and where the next line starts (``start``)."""

    def __init__(self, text: str, default_name: str):
        self.text = text
        self.size = len(text)
        self.default_name = default_name
        self.functions = _function_names(text)
        self.kernels: dict[str, _Kernel] = {}
        self.order: list[str] = []
        self.current: _Kernel | None = None
        self.last: _Kernel | None = None
        self.kd_target: _Kernel | None = None
        self.in_info = False
        self.in_yaml = False
        self.yaml_lines: list[str] = []
        self.start = 0  # where the next line starts; past ``size`` once the reading is over

    def kernel(self, name: str) -> _Kernel:
        if name not in self.kernels:
            self.kernels[name] = _Kernel(name)
            self.order.append(name)
        return self.kernels[name]

    def _enter(self, name: str) -> None:
        self.current = self.last = self.kernel(name)

    def _skip_line_at(self, pos: int) -> None:
        """Go on from the line after the one holding ``pos``."""
        nl = self.text.find("\n", pos)
        self.start = nl + 1 if nl >= 0 else self.size + 1

    def read(self) -> None:
        """Runs of plain lines in bulk, the lines between them one by one."""
        text, size = self.text, self.size
        special = _SPECIAL.match
        read_run, read_line = self._read_run, self._read_line
        known_special = True  # the first line, and a line a run stopped at, go line by line
        while self.start <= size:
            if not known_special and not self.in_yaml and not self.in_info \
                    and self.kd_target is None and special(text, self.start - 1) is None:
                read_run()
                known_special = True
                continue
            known_special = False
            read_line()

    def _read_run(self) -> None:
        """The lines from ``start`` up to the next line that can change the state, with one
        findall: instructions go to the current kernel."""
        text, start = self.text, self.start
        m = _SPECIAL.search(text, start - 1)
        end = m.start() if m is not None else self.size
        found = _RUN_INSTRUCTION.findall(text, start - 1, end)
        if found:
            if self.current is None and not (self.functions or self.order):
                self._enter(self.default_name)
            if self.current is not None:
                self.current.insts += found
        self.start = end + 1 if m is not None else self.size + 1

    def _read_line(self) -> None:
        """One line, by the block it is in or the kind of line it is."""
        text, start = self.text, self.start
        nl = text.find("\n", start)
        if nl < 0:
            nl = self.size
        raw = text[start:nl]
        self.start = nl + 1
        stripped = raw.strip()
        if self.in_yaml:
            if stripped.startswith(".end_amdgpu_metadata"):
                self.in_yaml = False
            else:
                self.yaml_lines.append(raw)
            return
        if stripped.startswith(".amdgpu_metadata"):
            self._read_yaml_block()
            return
        if self.kd_target is not None:
            if stripped.startswith(".end_amdhsa_kernel"):
                self.kd_target = None
            else:
                parts = stripped.split()
                if len(parts) >= 2 and parts[0].startswith(".amdhsa_"):
                    self.kd_target.kd[parts[0][len(".amdhsa_"):]] = to_int(parts[1])
            return
        m = _KD_START.match(stripped) if stripped.startswith(".amdhsa_kernel") else None
        if m:
            self._read_kd_block(m.group(1))
            return
        m = _SET.match(raw) if ".set" in raw else None
        if m:
            self.kernel(m.group(1)).sets[m.group(2)] = decimal(m.group(3))
            return
        if stripped.startswith("; Kernel info:"):
            self._read_info_block()
            return
        if self.in_info:
            if stripped.startswith(";"):
                self._info_comment(stripped)
                return
            self.in_info = False
        self._read_code_line(raw, stripped)

    def _read_yaml_block(self) -> None:
        """After ``.amdgpu_metadata``: the block whole, up to its end line."""
        self.in_yaml = True
        text, start, size = self.text, self.start, self.size
        if start > size:
            return
        m = _YAML_END.search(text, start - 1)
        stop = m.start() if m is not None else size
        if stop >= start:
            self.yaml_lines += text[start:stop].split("\n")
        if m is None:
            self.start = size + 1
            return
        self.in_yaml = False
        self._skip_line_at(m.end())

    def _read_kd_block(self, name: str) -> None:
        """After ``.amdhsa_kernel <name>``: the descriptor whole, unless a metadata block starts
        inside it (then line by line)."""
        self.kd_target = target = self.kernel(name)
        text, start, size = self.text, self.start, self.size
        if start > size:
            return
        m = _KD_END.search(text, start - 1)
        stop = m.start() if m is not None else size
        block = text[start:stop]
        if ".amdgpu_metadata" in block:
            return
        for key, value in _KD_LINE.findall(block):
            target.kd[key] = to_int(value)
        if m is None:
            self.start = size + 1
            return
        self.kd_target = None
        self._skip_line_at(m.end())

    def _read_info_block(self) -> None:
        """After ``; Kernel info:``: the comment lines that follow, whole."""
        self.in_info = True
        text, start = self.text, self.start
        if start > self.size:
            return
        stop = _COMMENT_RUN.match(text, start - 1).end()
        if self.last is not None and stop >= start:
            for line in text[start:stop].split("\n"):
                self._info_comment(line.strip())
        self.in_info = False
        self.start = stop + 1

    def _info_comment(self, stripped: str) -> None:
        """A ``; Key: value`` line of a Kernel info block, for the last kernel."""
        kv = _COMMENT_KV.match(stripped)
        if kv and self.last is not None:
            key = kv.group(1).replace(" ", "")
            if key in _COMMENT_KEYS:
                self.last.comment[_COMMENT_KEYS[key]] = decimal(kv.group(2))

    def _read_code_line(self, raw: str, stripped: str) -> None:
        """A line outside the blocks: a kernel's start or end, a directive or an instruction."""
        m = _OBJDUMP_SYMBOL.match(stripped) if stripped.endswith(":") else None
        if m:
            self._enter(m.group(1))
            return
        code, comment = _split_comment(raw)
        code = code.strip()
        if not code:
            return
        if code.startswith(".Lfunc_end"):
            self.current = None
            return
        m = _LABEL.match(code) if ":" in code else None
        if m:
            if m.group(1) in self.functions:
                self._enter(m.group(1))
            return
        if code.startswith("."):
            if code.startswith(".size") or code.startswith(".end_amdgpu"):
                self.current = None
            return
        mnemonic, *rest = code.split(None, 1)
        operands = rest[0] if rest else ""
        mnemonic = mnemonic.lower()
        if not _MNEMONIC.match(mnemonic):
            return
        if self.current is None:
            if self.functions or self.order:
                return  # data between functions (e.g. padding) is not code
            self._enter(self.default_name)
        self.current.insts.append(_instruction(mnemonic, operands.strip(), comment))


def _attach_yaml(yaml_lines: list[str], kernel) -> None:
    """Per-kernel scalars of the ``amdhsa.kernels`` list (``.vgpr_count``, ``.name`` ...)."""
    entry: dict | None = None
    item_indent = None
    entries: list[dict] = []
    in_kernels = False
    deeper = None  # once the items' indent is known: the start of lines too deep to hold a key
    for raw in yaml_lines:
        if deeper is not None and raw.startswith(deeper):
            continue
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip())
        text = raw.strip()
        if indent == 0:
            in_kernels = text.startswith("amdhsa.kernels:")
            continue
        if not in_kernels:
            continue
        if text.startswith("- ") and (item_indent is None or indent == item_indent):
            item_indent = indent
            deeper = " " * (item_indent + 3)
            entry = {}
            entries.append(entry)
            text = text[2:].strip()
            indent += 2
        if entry is None or indent != item_indent + 2:
            continue
        m = _YAML_KEY.match(text)
        if m and m.group(2):
            value = m.group(2).strip()
            number = to_int(value)
            entry[m.group(1)] = number if number is not None else value.strip("'\"")
    for entry in entries:
        name = entry.get("name")
        if isinstance(name, str):
            kernel(name).meta = entry


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
# comment do not matter (all but _DETAIL_PREFIXES)
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


def _classified(k: _Kernel, private_mubuf: bool):
    """(mnemonic, operands, comment, family, width, lane bytes, mix category, count) for each
    distinct instruction of ``k``, in the order first seen (so families and mix categories are
    first met in the same order as instruction by instruction)."""
    for entry, n in Counter(k.insts).items():
        if entry.startswith(_DETAIL_PREFIXES):
            mnemonic, operands, comment = _parse_instruction(entry)
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


def scan_kernel(k: _Kernel) -> dict:
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


def read_resources(k: _Kernel) -> dict:
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
