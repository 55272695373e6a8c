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


# No count, size, width or register field of a real listing has more digits than this.  A longer
# number (a damaged file) reads as absent: int() refuses past 4300 digits, and byte counts that
# large overflow a float in the ratios.
MAX_DIGITS = 20


def decimal(digits: str) -> int | None:
    """int() of a matched run of digits (an optional sign before them), None when too long."""
    return int(digits) if len(digits.lstrip("-")) <= MAX_DIGITS else None


def to_int(value: str | None) -> int | None:
    """A decimal or prefixed (0x...) integer field; None when absent, unreadable or too long."""
    if value is None:
        return None
    if value.isdigit() and value.isascii() and (value[0] != "0" or len(value) == 1):
        return decimal(value)
    text = value.strip().strip('"').split()[0] if value.strip() else ""
    try:
        number = int(text, 0)
    except ValueError:  # not a number, or past int()'s digit limit
        return None
    return number if abs(number) < 10 ** MAX_DIGITS else None


def ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 3) if denominator else None


def count(value) -> int:
    """An instruction count read back from a record: an int (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
