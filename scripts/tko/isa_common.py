"""Text clean-up and small helpers shared by the AMDGCN, PTX and SASS readers."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def clean_text(text: str) -> str:
    """A dump with ANSI colour escapes removed and line ends made ``\\n`` (``text`` itself when
    it has neither)."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def clean_lines(text: str) -> list[str]:
    """Lines of a dump with ANSI colour escapes and carriage returns removed."""
    return clean_text(text).split("\n")


def to_int(value: str | None) -> int | None:
    if value is None:
        return None
    if value.isdigit() and value.isascii() and (value[0] != "0" or len(value) == 1):
        return int(value)
    text = value.strip().strip('"').split()[0] if value.strip() else ""
    try:
        return int(text, 0)
    except ValueError:
        return None


def ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 3) if denominator else None


def count(value) -> int:
    """An instruction count read back from a record: an int (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
