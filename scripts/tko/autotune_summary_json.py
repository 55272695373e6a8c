"""The ``autotune_summary/1`` JSON, written as :func:`tko.artifact.write_artifact` writes it.

A large summary is mostly its kernels, and each kernel holds two of its values twice by
contract: ``launch`` is ``launches[0]`` and ``configs`` is the ``configs`` of one of its
``tunings``.  Here each such value is encoded once and its text placed at both spots, so the
file is the same text, byte for byte, with a third less encoding.  A small summary (compact
JSON up to ``artifact.COMPACT_ABOVE``) goes to ``write_artifact`` unchanged (indented).
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any, Iterator

from . import artifact, atomic

# A stand-in for a value encoded once: no value of a summary holds a NUL character unless its
# log did; kernel_json checks that each stand-in's text occurs exactly where it was put.
_MARK_LAUNCH = "\x00tko:launch"
_MARK_CONFIGS = "\x00tko:configs"
# artifact's compact encoder, less its cycle check (a summary is a tree) and its fallback for
# objects JSON has no form for (artifact._compact does both when this one raises).
_ENCODE = json.JSONEncoder(allow_nan=False, separators=(",", ":"), check_circular=False).encode
_MARK_LAUNCH_JSON = _ENCODE(_MARK_LAUNCH)
_MARK_CONFIGS_JSON = _ENCODE(_MARK_CONFIGS)


def kernel_json(kernel: dict) -> str:
    """``artifact._compact(kernel)``, the same text, with the shared values encoded once."""
    try:
        return _kernel_json(kernel)
    except (ValueError, TypeError):  # NaN / infinity or a foreign object: artifact's own way
        return artifact._compact(kernel)


def _kernel_json(kernel: dict) -> str:
    view = dict(kernel)
    swaps: list[tuple[str, Any]] = []
    launch, launches = kernel.get("launch"), kernel.get("launches")
    if launch is not None and launches and launches[0] is launch:
        view["launch"] = _MARK_LAUNCH
        view["launches"] = [_MARK_LAUNCH, *launches[1:]]
        swaps.append((_MARK_LAUNCH_JSON, launch))
    configs, tunings = kernel.get("configs"), kernel.get("tunings")
    at = next((i for i, t in enumerate(tunings) if t.get("configs") is configs), None) \
        if configs and tunings else None
    if at is not None:
        view["configs"] = _MARK_CONFIGS
        view["tunings"] = list(tunings)
        view["tunings"][at] = dict(tunings[at], configs=_MARK_CONFIGS)
        swaps.append((_MARK_CONFIGS_JSON, configs))
    text = _ENCODE(view)
    for mark, value in swaps:
        if text.count(mark) != 2:  # the stand-in's text is in the data too: encode it whole
            return _ENCODE(kernel)
        text = text.replace(mark, _ENCODE(value))
    return text


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
    """:func:`artifact.write_artifact`'s file (same header, same compact-or-indented choice,
    same atomic write), the large summary's kernels by :func:`kernel_json`."""
    doc = artifact.make_artifact(schema, tool, summary)
    if os.path.isdir(path):
        artifact.write_artifact(path, schema, tool, summary)  # raises its own error
    head: list[str] = []
    size = 0
    chunks = summary_chunks(doc)
    for chunk in chunks:
        head.append(chunk)
        size += len(chunk)
        if size > artifact.COMPACT_ABOVE:
            break
    else:
        artifact.write_artifact(path, schema, tool, summary)  # small: indented, as always
        return
    atomic.write_chunks(path, (c.encode("utf-8") for c in itertools.chain(head, chunks)))
