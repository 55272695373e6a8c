"""Untrusted text (kernel names, paths, log fields, model code) in Markdown output.

Every renderer that prints text it did not write itself goes through :func:`text` (a
paragraph or table cell) or :func:`code` (an inline code span). Both fold the value to one
line, so a newline cannot start a heading or end a table row, and keep ``|`` from splitting a
cell. :func:`text` also escapes ``<``, ``>`` and ``&`` (no raw HTML: ``<script>``,
``<img onerror>``), the Markdown specials (no injected emphasis, links or headings) and
neutralises ``javascript:``-style link schemes; inside a code span nothing is interpreted, so
:func:`code` only needs a fence longer than any backtick run in the value (a value with
an HTML tag in it is still given as escaped text, so no raw tag reaches the file).
:func:`table` lays such cells out as the lines of a table.
"""

from __future__ import annotations

import re

_ALWAYS = re.compile(r"([\\`*\[\]#|~])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# an HTML tag an unsafe viewer would act on (C++ template arguments such as ``array<char*, 1>``
# are not tags and stay in the code span)
_HTML = re.compile(r"<\s*/?\s*(?:script|img|iframe|svg|object|embed|style|link|meta|a|body|html|form|"
                   r"input|button|video|audio|math|details|base|frame|frameset|textarea|select|"
                   r"marquee|template|noscript)\b|\bon[a-z]+\s*=", re.IGNORECASE)
_SCHEME = re.compile(r"\b(javascript|vbscript|data|file)\s*:", re.IGNORECASE)


def one_line(value, limit: int | None = None) -> str:
    """``value`` as one line (runs of whitespace, newlines included, become one space),
    cut to ``limit`` characters with an ellipsis."""
    if value is None:
        return ""
    flat = " ".join(str(value).split())
    if limit is not None and len(flat) > limit:
        flat = flat[: max(0, limit - 1)] + "…"
    return flat


def text(value, limit: int | None = None) -> str:
    """Untrusted text for a Markdown paragraph or table cell (an underscore inside a word is
    left as is, so ``triton_poi_fused`` stays readable)."""
    flat = one_line(value, limit)
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    flat = _SCHEME.sub(lambda m: m.group(1) + "&#58;", flat)
    flat = _ALWAYS.sub(r"\\\1", flat)
    return _EDGE_UNDERSCORE.sub(r"\\_", flat)


def code(value, limit: int | None = None) -> str:
    """Untrusted text as an inline code span that survives a table cell.

    A value holding an HTML tag or a script link scheme is given as escaped :func:`text`
    instead: inert in a code span too, but not every viewer of a report renders Markdown.
    """
    flat = one_line(value, limit)
    if _HTML.search(flat) or _SCHEME.search(flat):
        return text(flat)
    flat = flat.replace("|", "\\|")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


# a ``|`` with no backslash before it: GFM's cell scanner takes the longest match, so ``\|``
# after any backslash run (``\\|`` included) is already part of the cell
_BARE_PIPE = re.compile(r"(?<!\\)\|")
_ALIGN_RULE = {None: "---", "left": ":---", "right": "---:", "center": ":---:"}


def table(header: list[str], rows: list[list[str]], align: list[str | None] | None = None) -> list[str]:
    """The lines of a GitHub-flavoured Markdown table: header, separator, one line per row.

    Cells are already-escaped strings (:func:`text`, :func:`code`, numbers); a ``|`` left bare
    in one is escaped so it cannot split the cell. ``align`` gives each column ``None``,
    ``"left"``, ``"right"`` or ``"center"``.
    """
    align = align or [None] * len(header)
    if len(align) != len(header) or any(len(row) != len(header) for row in rows):
        raise ValueError(f"table: every row and the alignment need {len(header)} cells")

    def line(cells) -> str:
        return "| " + " | ".join(_BARE_PIPE.sub(r"\\|", str(c)) for c in cells) + " |"

    return [line(header), "|" + "".join(_ALIGN_RULE[a] + "|" for a in align)] + [line(r) for r in rows]
