"""The ``autotune_summary/1`` JSON, written as :func:`tko.artifact.write_artifact` writes it.

A large summary is mostly its kernels, and each kernel holds some of its values twice by
contract: ``launch`` is ``launches[0]``, ``configs`` is the ``configs`` of one of its
``tunings`` and ``winner`` is mostly one of those rows less its rank.  Here each such value is
encoded once and its text placed at each spot, so the file is the same text, byte for byte,
with about a third less encoding.  A small summary (compact JSON up to
``artifact.COMPACT_ABOVE``) goes to ``write_artifact`` unchanged (indented).
"""

from __future__ import annotations

import json
import operator
import os
from typing import Any, Iterator

from . import artifact


def _no_default(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _compact_encoder():
    """artifact's compact encoding (``separators=(",", ":")``, ASCII, no NaN), less its cycle check
    (a summary is a tree) and its fallback for objects JSON has no form for (artifact._compact
    does both when this raises).  The C encoder is built once rather than per call, as
    ``JSONEncoder.encode`` does, when it gives JSONEncoder's text."""
    slow = json.JSONEncoder(allow_nan=False, separators=(",", ":"), check_circular=False).encode
    try:
        from json.encoder import c_make_encoder, encode_basestring_ascii

        chunks = c_make_encoder(None, _no_default, encode_basestring_ascii, None, ":", ",",
                                False, False, False)

        def fast(value: Any) -> str:
            return "".join(chunks(value, 0))

        probe = {"a": [1, 2.5, None, True, "\u00e9\"x"], "b": {}}
        if fast(probe) == slow(probe):
            return fast
    except (ImportError, TypeError, ValueError):
        pass
    return slow


_ENCODE = _compact_encoder()
# Stand-ins for the values encoded once, put in a copy of the kernel, which is then encoded in
# one call; each stand-in's text is cut out and the value's text put in its place.  A stand-in
# is a NUL and a letter: no value of a summary holds that unless its log did, and then the
# count of cuts is off and the kernel is encoded whole.
_MARK = "\x00tko:"
_CUT = _ENCODE(_MARK)[:-1]  # '"\\u0000tko:'


def kernel_json(kernel: dict) -> str:
    """``artifact._compact(kernel)``, the same text, with the shared values encoded once."""
    try:
        return _kernel_json(kernel)
    except (ValueError, TypeError):  # NaN / infinity or a foreign object: artifact's own way
        return artifact._compact(kernel)


def _kernel_json(kernel: dict) -> str:
    view = dict(kernel)
    texts: dict[str, str] = {}  # stand-in letter -> the value's text
    cuts = 0
    launch, launches = kernel.get("launch"), kernel.get("launches")
    if launch is not None and type(launches) is list and launches and launches[0] is launch:
        view["launch"] = _MARK + "L"
        view["launches"] = [_MARK + "L", *launches[1:]]
        texts["L"] = _ENCODE(launch)
        cuts += 2
    configs, tunings = kernel.get("configs"), kernel.get("tunings")
    at = next((i for i, t in enumerate(tunings) if type(t) is dict and t.get("configs") is configs),
              None) if configs and type(tunings) is list else None
    if at is not None:
        head = view["tunings"] = list(tunings)
        head[at] = dict(tunings[at], configs=_MARK + "C")
        view["configs"] = _MARK + "C"
        rows = list(map(_ENCODE, configs))
        texts["C"] = "[" + ",".join(rows) + "]"
        cuts += 2
        winner = kernel.get("winner")
        winner_text = _unranked_row_json(winner, configs, rows) \
            if winner is tunings[at].get("winner") else None
        if winner_text is not None:
            view["winner"] = head[at]["winner"] = _MARK + "W"
            texts["W"] = winner_text
            cuts += 2
    if not cuts:
        return _ENCODE(kernel)
    pieces = _ENCODE(view).split(_CUT)
    if len(pieces) != cuts + 1:  # a stand-in's text is in the data too
        return _ENCODE(kernel)
    out = [pieces[0]]
    for piece in pieces[1:]:
        text = texts.get(piece[:1])
        if text is None or piece[1:2] != '"':
            return _ENCODE(kernel)
        out += (text, piece[2:])
    return "".join(out)


def _unranked_row_json(winner: Any, rows: list, texts: list[str]) -> str | None:
    """The text of ``winner`` when it is one of ``rows`` less its last item, "rank" (as the
    summary makes a winner's row), cut from that row's text; else None."""
    if type(winner) is not dict:
        return None
    config = winner.get("config")
    for row, text in zip(rows, texts):
        if type(row) is dict and row.get("config") is config and len(row) == len(winner) + 1:
            break
    else:
        return None
    *keys, last = row
    rank = row[last]
    if last != "rank" or not (rank is None or type(rank) is int) or keys != list(winner) \
            or not all(map(operator.is_, winner.values(), row.values())):
        return None
    tail = ',"rank":' + ("null" if rank is None else repr(rank)) + "}"
    return text[:-len(tail)] + "}" if text.endswith(tail) else None


def summary_chunks(doc: dict) -> Iterator[str]:
    """The text of ``artifact._compact_chunks(doc)``, in the same pieces (one per kernel)."""
    yield "{"
    for i, (key, value) in enumerate(doc.items()):
        yield ("," if i else "") + _ENCODE(str(key)) + ":"
        if isinstance(value, list):
            encode = kernel_json if key == "kernels" else artifact._compact
            yield "["
            for j, item in enumerate(value):
                yield ("," if j else "") + (encode(item) if isinstance(item, dict)
                                            else artifact._compact(item))
            yield "]"
        else:
            yield artifact._compact(value)
    yield "}\n"


def write_summary(path: str | os.PathLike, schema: str, tool: str, summary: dict) -> None:
    """:func:`artifact.write_artifact`'s file, the large summary's kernels by :func:`kernel_json`."""
    artifact.write_artifact(path, schema, tool, summary, compact_chunks=summary_chunks)
