"""Each kernel's end-to-end ceiling (Amdahl): share x (1 - 1/headroom).

The headroom is the largest measured "x left" of the kernel: its time over its copy floor
(speed_of_light.py, ``sol_kernel_over_floor``; not for a ``matmul_bound`` kernel, which no copy bounds),
the best variant of its sweep (``tuning_runs.best_x``) or, for a matmul kernel, its time over the
library GEMM of the same shapes (``sol_kernel_over_library``); with none, the ceiling is its whole
share (the kernel vanishing).
The facts feed ``ceiling_under_cut`` and ``library_dominated_small_kernel`` of
decision_rules.yaml, with the profile's class shares (:mod:`tko.verdict.step_breakdown`).
"""

from __future__ import annotations

from ..base.decide import threshold
from ..read import kernel_classes
from . import step_breakdown
from .evidence import Evidence, _num


def headroom(ev: Evidence) -> tuple[float, str] | None:
    """(x left, what measured it): the largest of the speed of light and the sweep; None: unmeasured."""
    found = []
    sol = ev.facts.get("sol_kernel_over_floor")
    matmul = getattr(ev.facts.get("sol_class"), "value", None) == "matmul_bound"   # a copy floor bounds no GEMM
    if sol is not None and _num(sol.value) and sol.value > 0 and not matmul:
        found.append((max(1.0, float(sol.value)), f"speed of light: {sol.value:.2f}x its copy floor"))
    runs = ev.sections.get("tuning_runs") or {}
    best_x = _num(runs.get("best_x"))
    if best_x and best_x > 0:
        found.append((max(1.0, float(best_x)), f"sweep: best variant {runs.get('best')} at {best_x:.2f}x"))
    library = ev.facts.get("sol_kernel_over_library")
    # a library lead inside the cut is timing noise or the price of a fused epilogue: no headroom
    if matmul and library is not None and _num(library.value) and library.value >= threshold("library_gemm_lead_min"):
        found.append((float(library.value),
                      f"library GEMM of the same shapes: the kernel takes {library.value:.2f}x its time"))
    return max(found, key=lambda f: f[0]) if found else None


def library_lead(ev: Evidence) -> None:
    """``library_gemm_lead``: how much faster the library GEMM of a matmul kernel's shapes is than
    the best the kernel was measured at (its launched config, or its sweep's best variant)."""
    library = ev.facts.get("sol_kernel_over_library")
    if library is None or not _num(library.value) or library.value <= 0:
        return
    best_x = _num((ev.sections.get("tuning_runs") or {}).get("best_x"))
    best_x = max(1.0, float(best_x)) if best_x and best_x > 0 else 1.0
    ev.fact("library_gemm_lead", round(float(library.value) / best_x, 4),
            f"sol_kernel_over_library {library.value:.2f} / the sweep's best {best_x:.2f}x")


def add_facts(ev: Evidence, profile: dict | None, label: str) -> None:
    """headroom, ceiling, the kernel's class and the profile's library share, as facts."""
    share = ev.facts.get("share")
    share = _num(share.value) if share is not None else None
    h = headroom(ev)
    if h is not None:
        ev.fact("headroom", round(h[0], 4), h[1])
        ev.fact("headroom_source", h[1], "tko/verdict/ceiling.py")
    ev.fact("headroom_measured", h is not None, "speed_of_light.py or a sweep ran on this kernel")
    library_lead(ev)
    if share is not None:
        if h is not None:
            ev.fact("ceiling", round(share * (1 - 1 / h[0]), 6), f"share {share:.4f} x (1 - 1/{h[0]:.3f})")
            ev.fact("ceiling_basis", f"{share:.1%} x (1 - 1/{h[0]:.2f})", "Amdahl")
        else:
            ev.fact("ceiling", round(share, 6), "share: no headroom measured, the kernel vanishing")
            ev.fact("ceiling_basis", "its whole share: no headroom measured", "Amdahl")
    if not isinstance(profile, dict):
        return
    origin = (ev.sections.get("profile") or {}).get("origin")
    ev.fact("kernel_class", kernel_classes.classify(ev.kernel, origin), f"{label}: origin {origin}, kernel name")
    for name, fact in step_breakdown.program_facts(profile, label).items():
        ev.facts[name] = fact
