"""Evidence from speed of light (``speed_of_light/1``): the kernel against its memory twin and the
copy floor, the causes of the gap, and the bundled row kernels' floor where they apply."""


from __future__ import annotations

from dataclasses import dataclass
from .evidence import (Evidence, _bool, _num, _numbers_in, _obj, _objs, _str)

# ----------------------------------------------------------------------------- speed of light


def _cause_text(causes: list[dict]) -> str:
    parts = []
    for c in causes:
        bound = f", at most {c['at_most_x']:.2f}x" if _num(c.get("at_most_x")) is not None else ""
        parts.append(f"{c.get('cause')} ({c.get('detail')}" + (f"; {c['remedy']}" if c.get("remedy") else "")
                     + f"{bound})")
    return "; ".join(parts) or "no cause named"


def _costly_text(costly: dict[str, int | float]) -> str:
    return ", ".join(f"{op} x{n}" for op, n in sorted(costly.items(), key=lambda kv: -kv[1])) or "none named"


BANDWIDTH_NUMBERS = ("bytes", "gb_per_s", "pct_of_copy")
SOL_NUMBERS = ("kernel_ms", "twin_ms", "copy_floor_ms", "kernel_over_floor", "twin_over_floor", "kernel_over_twin",
               "library_gemm_ms", "kernel_do_bench_ms", "kernel_over_library")


@dataclass(frozen=True)
class SpeedOfLight:
    """A ``speed_of_light/1`` (speed_of_light.py): the kernel against its memory twin and copy floor.
    ``numbers``, ``causes`` and ``bandwidth`` are shown as they are (checked to be objects)."""
    kernel: str | None
    sol_class: str | None                 # classification.class
    says: str | None
    numbers: dict                         # classification.numbers
    causes: list[dict]
    costly_ops: dict[str, int | float]    # classification.costly_ops.source: {op: count}
    offline: bool | None
    timer: str | None
    twin_valid: bool | None
    peak_source: str | None
    unique_bytes: int | float | None
    inductor_bytes: int | float | None
    bytes_upper_bound: bool | None        # byte_model.upper_bound: the byte count is an upper bound
    bandwidth: dict
    chart_svg: str | None
    arch: str | None = None               # peak.arch: the device the floors were measured on
    one_pass_bytes: int | float | None = None   # byte_model.one_pass_bytes
    reread_bytes: int | float | None = None     # byte_model.args[passes > 1].touched_bytes, summed
    row_cols: int | None = None           # the last dim of the first input read more than once

    @classmethod
    def read(cls, doc: dict) -> SpeedOfLight:
        c, model = _obj(doc.get("classification")), _obj(doc.get("byte_model"))
        reread = [a for a in _objs(model.get("args")) if (_num(a.get("passes")) or 0) > 1]
        shape = reread[0].get("shape") if reread else None
        row_cols = shape[-1] if isinstance(shape, list) and shape and isinstance(shape[-1], int) else None
        costly = _obj(_obj(c.get("costly_ops")).get("source"))
        bandwidth = {k: _numbers_in(b, BANDWIDTH_NUMBERS) for k, b in _obj(doc.get("bandwidth")).items()
                     if isinstance(b, dict)}
        return cls(kernel=_str(doc.get("kernel")), sol_class=_str(c.get("class")), says=_str(c.get("says")),
                   numbers=_numbers_in(_obj(c.get("numbers"))),
                   causes=[_numbers_in(cause, ("at_most_x",)) for cause in _objs(c.get("causes"))],
                   costly_ops={op: n for op, n in costly.items() if _num(n) is not None},
                   offline=_bool(doc.get("offline")), timer=_str(doc.get("timer")),
                   twin_valid=_bool(_obj(doc.get("validity")).get("valid")),
                   peak_source=_str(_obj(doc.get("peak")).get("source")),
                   unique_bytes=_num(model.get("unique_bytes")), inductor_bytes=_num(model.get("inductor_bytes")),
                   bytes_upper_bound=_bool(model.get("upper_bound")), bandwidth=bandwidth,
                   chart_svg=_str(doc.get("chart_svg")), arch=_str(_obj(doc.get("peak")).get("arch")),
                   one_pass_bytes=_num(model.get("one_pass_bytes")),
                   reread_bytes=sum(_num(a.get("touched_bytes")) or 0 for a in reread) or None,
                   row_cols=row_cols)

    def number(self, key: str) -> int | float | None:
        return _num(self.numbers.get(key))

    def above_peak(self) -> list[str]:
        """The byte counts whose bandwidth beat the copy peak."""
        return [k for k, b in self.bandwidth.items() if isinstance(b, dict) and b.get("above_peak")]


def _sol_section(sol: SpeedOfLight, label: str) -> dict:
    return {"label": label, "kernel": sol.kernel, "class": sol.sol_class, "says": sol.says,
            "numbers": sol.numbers, "causes": sol.causes, "offline": sol.offline, "timer": sol.timer,
            "twin_valid": sol.twin_valid, "peak_source": sol.peak_source, "unique_bytes": sol.unique_bytes,
            "inductor_bytes": sol.inductor_bytes, "bytes_upper_bound": sol.bytes_upper_bound,
            "bandwidth": sol.bandwidth, "above_peak": sol.above_peak(), "chart_svg": sol.chart_svg}


def _bundled_row_floor(ev: Evidence, sol: SpeedOfLight, one_pass_ms: float, kernel_ms: float,
                       label: str) -> None:
    """The floor of the bundled row kernel that would replace this multi-pass one: the one-pass
    floor where its rows fit on chip, else that of its chunked form, which reads each row twice
    (pass 2 from L2 when the row is still there; this floor counts both reads from DRAM)."""
    from ..remedies.row_replace import bundled_form, row_pattern

    op = row_pattern(ev.kernel)
    if not op or not sol.row_cols:
        return
    arch = sol.arch or (ev.sections.get("env") or {}).get("arch")
    form = bundled_form(op, sol.row_cols, arch)
    ev.fact("sol_row_cols", sol.row_cols, f"{label}: byte_model.args[passes > 1][0].shape[-1]")
    ev.fact("row_kernel_form", form, f"{label}: rows of {sol.row_cols} on {arch or 'an unknown arch'} "
            "(tko.remedies.row_replace.bundled_form)")
    if form == "one_pass":
        floor, how = one_pass_ms, "one_pass_floor_ms"
    elif form == "chunked" and sol.reread_bytes and sol.one_pass_bytes:
        floor = one_pass_ms * (sol.one_pass_bytes + sol.reread_bytes) / sol.one_pass_bytes
        how = "one_pass_floor_ms x (one_pass_bytes + the reread inputs once more) / one_pass_bytes"
    else:
        return
    ev.fact("sol_bundled_floor_ms", floor, f"{label}: {how}")
    ev.fact("sol_bundled_gain", kernel_ms / floor, f"{label}: kernel_ms / sol_bundled_floor_ms")


def from_sol(ev: Evidence, doc: dict | None, label: str) -> None:
    """speed_of_light.py: the kernel against its memory twin and its copy floor."""
    if doc is None:
        return
    sol = SpeedOfLight.read(doc)
    above = sol.above_peak()
    ev.sections["speed_of_light"] = _sol_section(sol, label)
    where = f"{label}: classification"
    ev.fact("sol_class", sol.sol_class, f"{where}.class")
    for key in SOL_NUMBERS:
        ev.fact(f"sol_{key}", sol.number(key), f"{where}.numbers.{key}")
    one_pass, kernel_ms = sol.number("one_pass_floor_ms"), sol.number("kernel_ms")
    if sol.number("passes_floor_ms") and one_pass and kernel_ms:
        # a multi-pass kernel: what reading each input once could reach
        ev.fact("sol_one_pass_floor_ms", one_pass, f"{where}.numbers.one_pass_floor_ms")
        ev.fact("sol_one_pass_gain", kernel_ms / one_pass, f"{where}.numbers: kernel_ms / one_pass_floor_ms")
        _bundled_row_floor(ev, sol, one_pass, kernel_ms, label)
    if sol.sol_class == "access_pattern_bound":
        ev.fact("sol_causes", _cause_text(sol.causes), f"{where}.causes")
        ev.fact("sol_cause_known", any(c.get("cause") not in (None, "unknown") for c in sol.causes),
                f"{where}.causes[].cause other than unknown")
    if sol.sol_class == "arithmetic_bound":
        ev.fact("sol_costly_ops", _costly_text(sol.costly_ops), f"{where}.costly_ops.source")
    ev.fact("sol_unique_bytes", sol.unique_bytes, f"{label}: byte_model.unique_bytes")
    ev.fact("sol_inductor_bytes", sol.inductor_bytes, f"{label}: byte_model.inductor_bytes")
    if sol.sol_class in (None, "unmeasured"):
        ev.gaps.append(f"{label}: speed of light not timed ({'offline: built and checked, ' if sol.offline else ''}"
                       "nothing timed): the kernel and its memory twin against the copy floor need "
                       "speed_of_light.py on a GPU")
    if kernel_ms:
        ev.fact("bytes_above_peak", bool(above),
                f"{label}: bandwidth.{'/'.join(above) or 'unique/inductor'}.above_peak")
