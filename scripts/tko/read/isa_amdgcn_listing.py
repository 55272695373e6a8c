"""Reading an AMDGCN listing (LLVM ``.amdgcn`` / ``.s`` dumps, llvm-objdump output) into kernels:
their instructions with operands and comments, the ``; Kernel info:`` comments, the
``.amdhsa_kernel`` descriptor, ``.set`` resource symbols and the ``amdhsa.kernels`` metadata.
The scanner (:mod:`tko.read.isa_amdgcn`) counts and judges what this reads."""


from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..base.errors import InputError
from .isa_common import clean_text, decimal, to_int

MNEMONIC = re.compile(r"^[a-z][a-z0-9_]*$")
_TARGET = re.compile(r"(?:amdgcn|amdgpu)[\w.]*-amd-amdhsa-[\w-]*?(gfx[0-9a-f]+)")
_OBJDUMP_SYMBOL = re.compile(r"^[0-9a-fA-F]+\s+<([^>]+)>:\s*$")
_LABEL = re.compile(r"^([A-Za-z_$][\w.$]*):")
_COMMENT_KV = re.compile(r"^;\s*([A-Za-z][A-Za-z0-9_ ]*?)\s*[:=]\s*(-?\d+)")
_KD_START = re.compile(r"^\.amdhsa_kernel\s+(\S+)")
_SET = re.compile(r"^\s*\.set\s+\.L(.+)\.(num_vgpr|num_agpr|numbered_sgpr|private_seg_size),\s*(\d+)")
_COMMENT_KEYS = {
    "TotalNumSgprs": "sgpr_count", "NumSgprs": "sgpr_count_old", "NumVgprs": "arch_vgpr_count",
    "NumAgprs": "agpr_count_comment", "TotalNumVgprs": "vgpr_total", "ScratchSize": "scratch_bytes_comment",
    "Occupancy": "llvm_occupancy", "LDSByteSize": "lds_bytes_static_comment",
    "NumVGPRsForWavesPerEU": "vgprs_for_waves", "NumSGPRsForWavesPerEU": "sgprs_for_waves",
    "AccumOffset": "accum_offset", "codeLenInByte": "code_bytes",
}


@dataclass
class AmdgcnKernel:
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
DETAIL_PREFIXES = ("buffer_", "scratch_", "s_waitcnt")
_RUN_INSTRUCTION = re.compile(r"\n[ \t]*((?:buffer_|scratch_|s_waitcnt)[^\n]*|[a-z][a-z0-9_]*)")
# an entry of AmdgcnKernel.insts with operands: mnemonic, the code after it, the comment (from the
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
    """The entry of :attr:`AmdgcnKernel.insts` for one instruction."""
    if mnemonic.startswith(DETAIL_PREFIXES):
        return f"{mnemonic} {operands}{comment}"
    return mnemonic


def parse_instruction(entry: str) -> tuple[str, str, str]:
    """(mnemonic, operands, comment) of an :attr:`AmdgcnKernel.insts` entry (operands and comment are
    kept for the buffer_ / scratch_ / s_waitcnt mnemonics only)."""
    if not entry.startswith(DETAIL_PREFIXES):
        return entry, "", ""
    mnemonic, code, comment = _DETAIL_ENTRY.match(entry).groups()
    return mnemonic, code.strip(), comment


def split_kernels(text: str, default_name: str = "kernel") -> list[AmdgcnKernel]:
    """One :class:`AmdgcnKernel` per function body found, with its resource blocks attached."""
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
        self.kernels: dict[str, AmdgcnKernel] = {}
        self.order: list[str] = []
        self.current: AmdgcnKernel | None = None
        self.last: AmdgcnKernel | None = None
        self.kd_target: AmdgcnKernel | None = None
        self.in_info = False
        self.in_yaml = False
        self.yaml_lines: list[str] = []
        self.start = 0  # where the next line starts; past ``size`` once the reading is over

    def kernel(self, name: str) -> AmdgcnKernel:
        if name not in self.kernels:
            self.kernels[name] = AmdgcnKernel(name)
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
        if not MNEMONIC.match(mnemonic):
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

