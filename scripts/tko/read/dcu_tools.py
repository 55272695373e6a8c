"""Parsers of DCU / ROCm tool output: rocminfo, hy-smi (table and ``--json``),
DTK ``rocm-smi --json``, ``hipcc --version`` and the DTK ``.info/version``
file.

Each format is parsed here and nowhere else.  The parsers take the text a tool
printed, tolerate ANSI colour escapes and ``\\r`` (real captures contain both),
and return plain dicts.  Formats were taken from public DCU outputs (see
``tests/fixtures/dcu/``): DTK's rocminfo prints ``Device Type: HCU`` and a
``C-3000 hycu module is loaded`` banner; hy-smi tables name their first column
``DCU`` (older drivers) or ``HCU`` (newer ones); hy-smi/rocm-smi JSON is one
line that is often cut off when pasted, so the JSON reader keeps every
complete card object and reports whether the document was complete.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..base import archs

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_VERSION = re.compile(r"\d+(?:\.\d+)+(?:[-+~][0-9A-Za-z.+-]*)?")


def clean_text(text: str | bytes) -> str:
    """Drop ANSI escapes; turn ``\\r\\n`` and lone ``\\r`` into newlines."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = _ANSI.sub("", text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def first_version(text: str | None) -> str | None:
    """The first dotted version number in ``text`` (``'6.3.26113'``), else None."""
    if not text:
        return None
    m = _VERSION.search(clean_text(text))
    return m.group(0) if m else None


# --------------------------------------------------------------------------- rocminfo

_KV = re.compile(r"^(\s*)([^:]+?):\s*(.*?)\s*$")
_NUM = re.compile(r"^(-?\d+)(?:\(0x[0-9a-fA-F]+\))?\s*(KB|MB|GB)?\b")
_AGENT = re.compile(r"^Agent\s+(\d+)\s*$")
_POOL = re.compile(r"^Pool\s+(\d+)\s*$")
_ISA = re.compile(r"^ISA\s+(\d+)\s*$")
GPU_DEVICE_TYPES = ("GPU", "HCU", "DCU")
_BANNER = re.compile(r"\bmodule\b.*\bis loaded$")


# No count or size a tool prints has more digits; int() refuses more than 4300 of them.
_MAX_DIGITS = 30


def _digits_int(digits: str) -> int | None:
    """int of a run of decimal digits (a sign allowed); None when it is too long to be a count."""
    return int(digits) if len(digits.lstrip("-")) <= _MAX_DIGITS else None


def _index(cell: str) -> int | None:
    """A card / agent number: decimal digits only (``'²'.isdigit()`` is true, int() refuses it)."""
    return _digits_int(cell) if cell.isdecimal() else None


def _int_value(value: str) -> int | None:
    """'80', '8192(0x2000) KB' -> int; sizes stay in the unit printed (see callers)."""
    m = _NUM.match(value.strip())
    return _digits_int(m.group(1)) if m else None


def _new_agent(index: int | None) -> dict:
    return {"agent": index, "fields": {}, "cache_kb": {}, "pools": [], "isas": []}


_SECTIONS = {"Cache Info": "cache", "Pool Info": "pools", "ISA Info": "isa"}


class _RocminfoParser:
    """The state of a ``rocminfo`` read: the banner, the system attributes, the agents, and
    where in them the current line is (``agent``; ``section``: "cache", "pools", "isa" for the
    nested blocks inside an agent; the open ``pool`` / ``isa``; ``in_system``)."""

    def __init__(self) -> None:
        self.banner: str | None = None
        self.system: dict[str, str] = {}
        self.agents: list[dict] = []
        self.agent: dict | None = None
        self.section: str | None = None
        self.pool: dict | None = None
        self.isa: dict | None = None
        self.in_system = False

    def line(self, raw: str) -> bool:
        """Take one line; False at the end marker."""
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or set(stripped) <= {"=", "*"}:
            return True
        if stripped == "*** Done ***":
            return False
        if self._heading(stripped):
            return True
        kv = _KV.match(line)
        if kv:
            self._field(len(kv.group(1)), kv.group(2).strip(), kv.group(3))
        return True

    def _heading(self, stripped: str) -> bool:
        """The banner, the system / agents headings, 'Agent N', 'Pool N', 'ISA N': True if one."""
        # "ROCk module is loaded" (ROCm), "ROCk module version 6.x is loaded",
        # "C-3000 hycu module is loaded" / "hygon module is loaded" (DTK)
        if self.banner is None and _BANNER.search(stripped):
            self.banner = stripped
            return True
        if stripped in ("HSA System Attributes", "HSA Agents"):
            self.in_system = stripped == "HSA System Attributes"
            return True
        m = _AGENT.match(stripped)
        if m:
            self.in_system = False
            self.agent = _new_agent(_digits_int(m.group(1)))
            self.agents.append(self.agent)
            self.section = self.pool = self.isa = None
            return True
        # 'Pool 1' / 'ISA 1' open a nested block; they carry no colon
        pm = _POOL.match(stripped)
        im = _ISA.match(stripped)
        if self.agent is None or not (pm or im):
            return False
        if pm and self.section == "pools":
            self.pool = {"pool": _digits_int(pm.group(1))}
            self.agent["pools"].append(self.pool)
        elif im and self.section == "isa":
            self.isa = {"isa": _digits_int(im.group(1))}
            self.agent["isas"].append(self.isa)
        return True

    def _field(self, indent: int, key: str, value: str) -> None:
        """A 'key: value' line of the system, of an agent, or of a block nested in it."""
        if self.in_system:
            self.system[key] = value
            return
        if self.agent is None:
            if indent == 0:
                return     # shell prompt or other text before the agents
            self.agent = _new_agent(None)
            self.agents.append(self.agent)
        if indent <= 2:
            self.section = _SECTIONS.get(key)
            self.pool = self.isa = None
            if self.section is None:
                self.agent["fields"][key] = value
            return
        self._nested(key, value)

    def _nested(self, key: str, value: str) -> None:
        """A line of a nested block (indent > 2)."""
        agent = self.agent
        if self.section == "cache":
            size = _int_value(value)
            if size is not None:
                agent["cache_kb"][key] = size
        elif self.section == "pools":
            if self.pool is None:   # fragment that starts inside a pool
                self.pool = {"pool": None}
                agent["pools"].append(self.pool)
            self.pool[key] = value
        elif self.section == "isa":
            if self.isa is None:
                self.isa = {"isa": None}
                agent["isas"].append(self.isa)
            if key not in self.isa:
                self.isa[key] = value


def parse_rocminfo(text: str | bytes) -> dict:
    """Parse ``rocminfo`` output.

    Returns ``{"banner", "runtime_version", "system": {...}, "agents": [...],
    "gpus": [...]}``.  Every agent keeps its raw ``fields``; GPU agents (device
    type GPU, or HCU on DTK) also get the normalised device record of
    :func:`rocminfo_device`.  Text that starts in the middle of an agent (a
    pasted fragment) becomes an agent with ``agent: None``.
    """
    parser = _RocminfoParser()
    for raw in clean_text(text).split("\n"):
        if not parser.line(raw):
            break
    gpus = []
    for a in parser.agents:
        kind = a["fields"].get("Device Type", "").strip().upper()
        a["device_type"] = kind or None
        if kind in GPU_DEVICE_TYPES:
            gpus.append(rocminfo_device(a))
    return {
        "banner": parser.banner,
        "runtime_version": parser.system.get("Runtime Version"),
        "system": parser.system,
        "agents": parser.agents,
        "gpus": gpus,
    }


def _pool_bytes(pool: dict) -> int | None:
    size = pool.get("Size")
    if size is None:
        return None
    m = _NUM.match(size.strip())
    number = _digits_int(m.group(1)) if m else None
    if number is None:
        return None
    unit = (m.group(2) or "KB").upper()
    return number * {"KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}[unit]


def rocminfo_device(agent: dict) -> dict:
    """Device record (the shape check_env uses) from one parsed rocminfo GPU agent."""
    f = agent["fields"]
    isa_names = [i.get("Name", "") for i in agent["isas"] if i.get("Name")]
    arch_full = None
    if isa_names:
        arch_full = isa_names[0].strip()
        if arch_full.startswith("amdgcn-amd-amdhsa--"):
            arch_full = arch_full[len("amdgcn-amd-amdhsa--"):]
    name = f.get("Name", "").strip() or None
    arch = archs.normalize(arch_full or name) if (arch_full or name) else None
    global_pools = [p for p in agent["pools"] if p.get("Segment", "").startswith("GLOBAL")]
    group_pools = [p for p in agent["pools"] if p.get("Segment", "").strip() == "GROUP"]
    memory = max((b for b in map(_pool_bytes, global_pools) if b), default=None)
    lds = _pool_bytes(group_pools[0]) if group_pools else None
    l2_kb = agent["cache_kb"].get("L2")
    known = archs.info(arch) if arch else None
    return {
        "source": "rocminfo",
        "agent": agent.get("agent"),
        "name": (f.get("Marketing Name") or "").strip() or name,
        "arch": arch,
        "arch_full": arch_full or name,
        "vendor": known.vendor if known else _vendor_from_name(f.get("Vendor Name")),
        "vendor_name": (f.get("Vendor Name") or "").strip() or None,
        "device_type": (f.get("Device Type") or "").strip() or None,
        "chip_id": _int_value(f.get("Chip ID", "")) if f.get("Chip ID") else None,
        "compute_units": _int_value(f.get("Compute Unit", "")) if f.get("Compute Unit") else None,
        "simds_per_cu": _int_value(f.get("SIMDs per CU", "")) if f.get("SIMDs per CU") else None,
        "wave_size": _int_value(f.get("Wavefront Size", "")) if f.get("Wavefront Size") else None,
        "max_waves_per_cu": (_int_value(f.get("Max Waves Per CU", ""))
                             if f.get("Max Waves Per CU") else None),
        "max_clock_mhz": (_int_value(f.get("Max Clock Freq. (MHz)", ""))
                          if f.get("Max Clock Freq. (MHz)") else None),
        "memory_bytes": memory,
        "l2_bytes": l2_kb * 1024 if l2_kb is not None else None,
        "lds_per_block_bytes": lds,
    }


def _vendor_from_name(vendor_name: str | None) -> str | None:
    v = (vendor_name or "").strip().lower()
    if not v:
        return None
    if v in ("amd", "advanced micro devices, inc."):
        return "amd"
    # DTK prints 'C-3000' (and 'Hygon'/'Haiguang' strings) for DCU agents
    if "hygon" in v or "haiguang" in v or "c-3000" in v:
        return "hygon"
    return v


# --------------------------------------------------------------------------- hy-smi table

_SMI_HEADER = re.compile(r"^\s*(HCU|DCU)\s+Temp\b")


def _num(text: str) -> float | None:
    m = re.match(r"^-?\d+(?:\.\d+)?", text.strip())
    return float(m.group(0)) if m else None


def parse_hysmi_table(text: str | bytes) -> dict:
    """Parse the default ``hy-smi`` table.

    Both header styles are accepted: ``DCU Temp AvgPwr Perf PwrCap VRAM% DCU%
    Mode`` (older) and ``HCU ... HCU% Dec% Enc% Mode`` (newer).  Returns
    ``{"style": "HCU"|"DCU"|None, "columns": [...], "devices": [...],
    "complete": bool}``; ``complete`` is False when the table was cut off
    before its ``End of SMI Log`` line.
    """
    lines = clean_text(text).split("\n")
    style = None
    columns: list[str] = []
    devices = []
    complete = False
    for line in lines:
        if "End of SMI Log" in line:
            complete = True
            break
        if not columns:
            m = _SMI_HEADER.match(line)
            if m:
                style = m.group(1)
                columns = line.split()
            continue
        cells = line.split()
        index = _index(cells[0]) if cells else None
        if index is None:
            continue
        raw = dict(zip(columns, cells))
        util_key = f"{style}%"
        devices.append({
            "index": index,
            "temp_c": _num(raw.get("Temp", "")),
            "avg_power_w": _num(raw.get("AvgPwr", "")),
            "perf": raw.get("Perf"),
            "power_cap_w": _num(raw.get("PwrCap", "")),
            "vram_pct": _num(raw.get("VRAM%", "")),
            "util_pct": _num(raw.get(util_key, "")),
            "dec_pct": _num(raw.get("Dec%", "")) if "Dec%" in raw else None,
            "enc_pct": _num(raw.get("Enc%", "")) if "Enc%" in raw else None,
            "mode": raw.get("Mode"),
            "raw": raw,
        })
    return {"style": style, "columns": columns, "devices": devices, "complete": complete}


# --------------------------------------------------------------------------- smi --json

_SMI_JSON_KEYS = {
    "Device ID": "device_id",
    "Card Series": "series",
    "Card Vendor": "vendor_name",
    "Card SKU": "sku",
    "Serial Number": "serial",
    "Unique ID": "unique_id",
    "Average Graphics Package Power (W)": "avg_power_w",
    "HCU use (%)": "util_pct",
    "DCU use (%)": "util_pct",
    "GPU use (%)": "util_pct",
    "vram Total Memory (MiB)": "vram_total_mib",
    "vram Total Used Memory (MiB)": "vram_used_mib",
}


def _read_object_members(text: str, start: int) -> tuple[dict, bool]:
    """Read ``"key": value`` members of an object from just after its ``{``.

    Returns (members, closed).  Stops at the first member that does not decode,
    so a document cut off mid-way yields every member before the cut.
    """
    decoder = json.JSONDecoder()
    members: dict[str, Any] = {}
    pos = start
    n = len(text)
    while True:
        while pos < n and text[pos] in " \t\n,":
            pos += 1
        if pos >= n:
            return members, False
        if text[pos] == "}":
            return members, True
        try:
            key, pos = decoder.raw_decode(text, pos)
            while pos < n and text[pos] in " \t\n":
                pos += 1
            if pos >= n or text[pos] != ":":
                return members, False
            pos += 1
            while pos < n and text[pos] in " \t\n":
                pos += 1
            value, pos = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, ValueError, RecursionError):   # Recursion: '[[[[...' cut off
            return members, False
        members[str(key)] = value


def parse_smi_json(text: str | bytes) -> dict:
    """Parse ``hy-smi --json`` / DTK ``rocm-smi --json`` output.

    Text before the first ``{`` (a command line, a banner) is skipped.  Returns
    ``{"cards": [...], "complete": bool}``; each card has normalised fields
    (``series``, ``device_id``, ``vram_total_mib``, ``util_pct``, temperatures)
    and its ``raw`` object.
    """
    body = clean_text(text)
    start = body.find("{")
    if start < 0:
        return {"cards": [], "complete": False}
    members, closed = _read_object_members(body, start + 1)
    cards = []
    for key, obj in members.items():
        if not isinstance(obj, dict):
            continue
        card: dict[str, Any] = {"card": key}
        m = re.match(r"card(\d+)$", key)
        card["index"] = _index(m.group(1)) if m else None
        temps = {}
        for raw_key, value in obj.items():
            norm = _SMI_JSON_KEYS.get(raw_key)
            if norm in ("avg_power_w", "util_pct", "vram_total_mib", "vram_used_mib"):
                card[norm] = _num(str(value))
            elif norm:
                card[norm] = value
            tm = re.match(r"Temperature \(Sensor (\w+)\) \(C\)", raw_key)
            if tm:
                temps[tm.group(1)] = _num(str(value))
        if temps:
            card["temp_c"] = temps
        card["raw"] = obj
        cards.append(card)
    return {"cards": cards, "complete": closed}


# --------------------------------------------------------------------------- hipcc --version

_CLANG_VERSION = re.compile(r"clang version", re.IGNORECASE)

def parse_hipcc_version(text: str | bytes) -> dict:
    """Parse ``hipcc --version`` (DTK: ``dcc version: 25.10.0-0``; ROCm: ``HIP version: 6.3...``).

    ``flavor`` is ``dtk`` when the compiler is DTK's dcc/dcutoolkit LLVM,
    ``rocm`` when it reports a HIP version with AMD clang, else None.
    """
    body = clean_text(text)
    out: dict[str, Any] = {"flavor": None, "dcc_version": None, "hip_version": None,
                           "clang_version": None, "target": None, "installed_dir": None}
    for line in body.split("\n"):
        s = line.strip()
        low = s.lower()
        if low.startswith("dcc version:"):
            out["dcc_version"] = s.split(":", 1)[1].strip()
        elif low.startswith("hip version:"):
            out["hip_version"] = s.split(":", 1)[1].strip()
        elif out["clang_version"] is None and _CLANG_VERSION.search(s):
            # any case: 'Clang version' must not make the split below miss
            out["clang_version"] = first_version(s[_CLANG_VERSION.search(s).end():])
            out["clang_line"] = s
        elif low.startswith("target:"):
            out["target"] = s.split(":", 1)[1].strip()
        elif low.startswith("installeddir:"):
            out["installed_dir"] = s.split(":", 1)[1].strip()
    clang_line = out.get("clang_line", "")
    if out["dcc_version"] or "dcutoolkit" in clang_line or "/opt/dtk" in (out["installed_dir"] or ""):
        out["flavor"] = "dtk"
    elif out["hip_version"] or "AMD clang" in clang_line or "roc-" in clang_line:
        out["flavor"] = "rocm"
    out["version"] = out["dcc_version"] or out["hip_version"] or out["clang_version"]
    return out


# --------------------------------------------------------------------------- DTK .info/version

def parse_info_version(text: str | bytes) -> str | None:
    """Version from a DTK/ROCm ``.info/version`` file: its first non-empty line.

    ROCm writes e.g. ``6.3.1-48``; no public DTK copy of the file was found, so
    the whole first line is kept (a dotted number inside it is preferred).
    """
    for line in clean_text(text).split("\n"):
        s = line.strip()
        if s:
            return first_version(s) or s
    return None
