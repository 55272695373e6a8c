"""tko.base.markdown: the one table builder and the escaping of untrusted text in it."""

from __future__ import annotations

import pytest

from tko.base import markdown as md


def test_table_lines_alignment_and_escaped_pipes():
    lines = md.table(["kernel", "ms"], [[md.code("a|b"), "1.5"], ["x | y", "2"]], align=[None, "right"])
    assert lines[0] == "| kernel | ms |"
    assert lines[1].count("|") == 3 and lines[1].endswith("--:|")
    # a code span's escaped pipe stays as it is; a bare one is escaped: each row keeps two cells
    for row in lines[2:]:
        assert len([c for c in row.replace("\\|", "").split("|")]) == 4, row
    assert lines[3] == "| x \\| y | 2 |"


def test_table_refuses_a_row_of_the_wrong_width():
    with pytest.raises(ValueError):
        md.table(["a", "b"], [["1"]])
    with pytest.raises(ValueError):
        md.table(["a", "b"], [["1", "2"]], align=["left"])


def test_hostile_names_cannot_break_a_table_or_inject_html():
    name = "k\n# heading | <script>alert(1)</script> [x](javascript:alert(1))"
    lines = md.table(["name"], [[md.text(name)], [md.code(name)]])
    assert len(lines) == 4 and all("\n" not in ln for ln in lines)
    body = "\n".join(lines[2:])
    assert "<script" not in body and "javascript:" not in body.lower()
    assert not any(ln.lstrip().startswith("#") for ln in lines)
