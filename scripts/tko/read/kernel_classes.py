"""Kernel classes of a step's GPU time: library GEMM, attention, convolution, collectives, copies
and fills, Triton (Inductor / hand-written), other.

The patterns are data (``references/kernel_classes.yaml``, each class with its sources) and are
parsed here only. :func:`classify` names one kernel's class; :func:`breakdown` totals a
``kernel_profile/1`` document's ranking by class, with each class's share of GPU kernel time.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..base import inputs, resources
from ..base.errors import InputError

CLASSES_PATH = resources.reference("kernel_classes.yaml")
ORIGINS = ("triton", "library", "other")


@dataclass(frozen=True)
class KernelClass:
    id: str
    label: str
    origin: str | None
    names: tuple[re.Pattern, ...]
    library: bool
    source: str

    def matches(self, name: str, origin: str | None) -> bool:
        if self.origin is not None and origin != self.origin:
            return False
        return not self.names or any(p.search(name) for p in self.names)


def _one_class(rec, path) -> KernelClass:
    if not isinstance(rec, dict) or not isinstance(rec.get("id"), str) or not isinstance(rec.get("source"), str):
        raise InputError(f"{path}: every class needs an 'id' and a 'source' ({rec!r:.80})")
    names = rec.get("names") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputError(f"{path}: class {rec['id']}: 'names' must be a list of regular expressions")
    if rec.get("origin") is not None and rec["origin"] not in ORIGINS:
        raise InputError(f"{path}: class {rec['id']}: origin must be one of {', '.join(ORIGINS)}")
    try:
        pats = tuple(re.compile(n, re.IGNORECASE) for n in names)
    except re.error as exc:
        raise InputError(f"{path}: class {rec['id']}: bad pattern ({exc})") from None
    return KernelClass(rec["id"], str(rec.get("label") or rec["id"]), rec.get("origin"), pats,
                       bool(rec.get("library")), rec["source"])


def load_classes(path: Path | str = CLASSES_PATH) -> tuple[KernelClass, ...]:
    """The classes in match order; the last must match everything (no origin, no names)."""
    import yaml

    try:
        data = yaml.safe_load(inputs.read_text(Path(path), "a YAML kernel-class file"))
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({' '.join(str(exc).split())[:200]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("classes"), list) or not data["classes"]:
        raise InputError(f"{path}: expected a mapping with a non-empty 'classes' list")
    classes = tuple(_one_class(rec, path) for rec in data["classes"])
    if classes[-1].origin is not None or classes[-1].names:
        raise InputError(f"{path}: the last class ({classes[-1].id}) must match every kernel (no origin, no names)")
    if len({c.id for c in classes}) != len(classes):
        raise InputError(f"{path}: class ids repeat")
    return classes


@functools.lru_cache(maxsize=1)
def bundled() -> tuple[KernelClass, ...]:
    return load_classes()


def classify(name: str, origin: str | None = None, classes: tuple[KernelClass, ...] | None = None) -> str:
    """The id of the first class that takes this kernel (the catch-all last class otherwise)."""
    classes = classes or bundled()
    for c in classes:
        if c.matches(str(name), origin):
            return c.id
    return classes[-1].id


def class_info(classes: tuple[KernelClass, ...] | None = None) -> dict[str, KernelClass]:
    return {c.id: c for c in (classes or bundled())}


def _rows(doc: dict) -> list[dict]:
    """Every ranked kernel of a kernel_profile/1 (``ranking`` covers all; ``kernels`` the top N)."""
    rows = doc.get("ranking") if isinstance(doc.get("ranking"), list) and doc.get("ranking") else doc.get("kernels")
    return [r for r in rows or [] if isinstance(r, dict) and isinstance(r.get("name"), str)
            and _finite(r.get("total_us"))]


def _finite(v) -> bool:
    """A number a float holds (an int past 1e308 overflows one; a JSON file may carry any)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def breakdown(doc: dict, classes: tuple[KernelClass, ...] | None = None) -> dict:
    """GPU kernel time by class: ``{"kernel_time_us", "classes": [{id, label, library, total_us,
    share, kernels, calls, top: [{name, share}]}...]}`` in the data file's order, classes with no
    time left out. Shares are of the profile's kernel time (summary.kernel_time_us, else the sum)."""
    classes = classes or bundled()
    acc: dict[str, dict] = {}
    for r in _rows(doc):
        cid = classify(r["name"], r.get("origin"), classes)
        a = acc.setdefault(cid, {"total_us": 0.0, "kernels": 0, "calls": 0, "top": []})
        a["total_us"] += r["total_us"]
        a["kernels"] += 1
        a["calls"] += r["calls"] if isinstance(r.get("calls"), int) else 0
        a["top"].append(r)
    summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
    row_sum = sum(a["total_us"] for a in acc.values())
    denom = summary.get("kernel_time_us")
    denom = denom if isinstance(denom, (int, float)) and denom >= row_sum > 0 else row_sum
    out = []
    for c in classes:
        a = acc.get(c.id)
        if not a:
            continue
        top = sorted(a["top"], key=lambda r: -r["total_us"])[:3]
        out.append({"id": c.id, "label": c.label, "library": c.library, "total_us": round(a["total_us"], 3),
                    "share": a["total_us"] / denom if denom else 0.0, "kernels": a["kernels"], "calls": a["calls"],
                    "top": [{"name": r["name"], "share": r["total_us"] / denom if denom else 0.0} for r in top]})
    # a summary table's Total row can hold more than its listed rows: the rest is said, not hidden
    return {"kernel_time_us": round(denom, 3), "classes": out, "unlisted_us": round(denom - row_sum, 3)}
