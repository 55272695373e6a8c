"""Before/after comparison of two ranked profiles (``kernel_profile/1``): what a change did.

Kernels are matched by name. Times are per step when the step counts are given (the profiles may
cover different numbers of steps), else totals. A kernel only in the "before" profile was removed
(or renamed: Inductor renumbers kernels when a graph changes), one only in "after" was added.
"""

from __future__ import annotations

from typing import Any

from ..base.errors import InputError


def _ranked(doc: dict) -> list[dict]:
    return doc.get("ranking") or doc.get("kernels") or []


def _device(doc: dict) -> str | None:
    devices = doc.get("device") or []
    return devices[0].get("name") if devices and isinstance(devices[0], dict) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return (b / a) if a and b is not None else None


def _number(value: Any, what: str) -> float:
    """A number field as a float (absent: 0); JSON integers have no bound, so one past a float's
    range is bad input, not an OverflowError deep in the arithmetic."""
    try:
        return float(value or 0.0)
    except OverflowError:
        raise InputError(f"{what} is a number too large to compare "
                         f"({str(value)[:20]}..., {len(str(value))} digits)") from None


def _summary(doc: dict, side: str) -> dict:
    """The summary fields compare() reads, as floats."""
    s = doc.get("summary") or {}
    by_origin = s.get("time_by_origin_us") or {}
    return {"kernel_time_us": _number(s.get("kernel_time_us"), f"{side}: summary.kernel_time_us"),
            "dispatches": _number(s.get("dispatches"), f"{side}: summary.dispatches"),
            "time_by_origin_us": {o: _number(v, f"{side}: summary.time_by_origin_us.{o}")
                                  for o, v in by_origin.items()}}


def compare(before: dict, after: dict, steps_before: int = 1, steps_after: int = 1,
            labels: tuple[str, str] = ("before", "after")) -> dict[str, Any]:
    """``labels`` name the two profiles in error messages (the scripts pass their paths)."""
    if steps_before < 1 or steps_after < 1:
        raise InputError("step counts must be at least 1")
    sb, sa = _summary(before, labels[0]), _summary(after, labels[1])
    per = "per step" if (steps_before, steps_after) != (1, 1) else "total"
    rows: dict[str, dict] = {}
    for side, label, doc, steps in (("before", labels[0], before, steps_before),
                                    ("after", labels[1], after, steps_after)):
        for k in _ranked(doc):
            row = rows.setdefault(k["name"], {"name": k["name"], "origin": k.get("origin"),
                                              "before_us": None, "after_us": None,
                                              "before_calls": None, "after_calls": None})
            where = f"{label}: kernel {k['name'][:60]!r}"
            row[f"{side}_us"] = round(_number(k.get("total_us"), f"{where} total_us") / steps, 3)
            row[f"{side}_calls"] = round(_number(k.get("calls"), f"{where} calls") / steps, 3)
            row["origin"] = row["origin"] or k.get("origin")
    for row in rows.values():
        b, a = row["before_us"], row["after_us"]
        row["status"] = "both" if b is not None and a is not None else ("removed" if a is None else "added")
        row["delta_us"] = round((a or 0.0) - (b or 0.0), 3)
        row["ratio"] = _ratio(b, a)
    ordered = sorted(rows.values(), key=lambda r: -abs(r["delta_us"]))
    kt_b = (sb.get("kernel_time_us") or 0.0) / steps_before
    kt_a = (sa.get("kernel_time_us") or 0.0) / steps_after
    disp_b = (sb.get("dispatches") or 0) / steps_before
    disp_a = (sa.get("dispatches") or 0) / steps_after
    origins = sorted(set(sb.get("time_by_origin_us") or {}) | set(sa.get("time_by_origin_us") or {}))
    by_origin = {o: {"before_us": round((sb.get("time_by_origin_us") or {}).get(o, 0.0) / steps_before, 3),
                     "after_us": round((sa.get("time_by_origin_us") or {}).get(o, 0.0) / steps_after, 3)}
                 for o in origins}
    counts = {s: sum(1 for r in rows.values() if r["status"] == s) for s in ("both", "removed", "added")}
    ratio = _ratio(kt_b, kt_a)
    notes = []
    if _device(before) and _device(after) and _device(before) != _device(after):
        notes.append(f"different devices: {_device(before)} before, {_device(after)} after")
    if per == "total":
        notes.append("no step counts given: totals over each profile, comparable only if both profiled the "
                     "same number of steps (--steps-before/--steps-after)")
    text = (f"GPU kernel time ({per}) {kt_b:.1f} -> {kt_a:.1f} us"
            + (f" ({ratio:.3f}x)" if ratio is not None else "")
            + f"; launches {disp_b:g} -> {disp_a:g}; {counts['removed']} kernels gone, {counts['added']} new, "
              f"{counts['both']} in both")
    return {"basis": per, "steps": {"before": steps_before, "after": steps_after},
            "totals": {"kernel_time_us": {"before": round(kt_b, 3), "after": round(kt_a, 3), "ratio": ratio},
                       "dispatches": {"before": disp_b, "after": disp_a},
                       "by_origin_us": by_origin},
            "counts": counts, "kernels": ordered, "notes": notes, "summary": text}


def _short(name: str, n: int = 70) -> str:
    return name if len(name) <= n else name[: n - 3] + "..."


def markdown(payload: dict, top: int = 25) -> str:
    from ..base import markdown as md

    t = payload["totals"]
    unit = "us per step" if payload["basis"] == "per step" else "us, total"
    lines = ["# Profile comparison", "", md.text(payload["summary"]), "",
             "| | before | after | after/before |", "|---|---|---|---|",
             f"| GPU kernel time ({unit}) | {t['kernel_time_us']['before']:.1f} | {t['kernel_time_us']['after']:.1f} | "
             + (f"{t['kernel_time_us']['ratio']:.3f} |" if t["kernel_time_us"]["ratio"] is not None else "- |"),
             f"| launches | {t['dispatches']['before']:g} | {t['dispatches']['after']:g} | |"]
    for origin, v in t["by_origin_us"].items():
        lines.append(f"| {md.text(origin)} kernels ({unit}) | {v['before_us']:.1f} | {v['after_us']:.1f} | |")
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    lines += ["", f"Largest changes ({unit}):", ""]
    lines += md.table(["kernel", "origin", "before", "after", "delta", "status"],
                      [[md.code(_short(r["name"])), md.text(r["origin"] or "-"), fmt(r["before_us"]), fmt(r["after_us"]),
                        f"{r['delta_us']:+.1f}", md.text(r["status"])] for r in payload["kernels"][:top]])
    if payload["notes"]:
        lines += ["", "## Notes", ""] + [f"- {md.text(n)}" for n in payload["notes"]]
    return "\n".join(lines) + "\n"
