"""What to change at the launch of a hand-written ``@triton.jit`` kernel (kind ``triton_jit``).

A plain ``kernel[grid](..., BLOCK=..., num_warps=...)`` launch has no config list to pin: the
user changes the arguments at the launch site the capture recorded (``_TKO_SPEC["launch_site"]``).
"""

from __future__ import annotations

from typing import Any

_SHOWN_FIRST = ("num_warps", "num_stages")


def is_plain_launch(spec: dict) -> bool:
    return spec.get("kind") == "triton_jit"


def site_text(spec: dict) -> str:
    site = spec.get("launch_site")
    if isinstance(site, dict) and site.get("file"):
        return f"{site['file']}:{site.get('line')}"
    return "the kernel's launch (its site was not recorded)"


def changed_arguments(new: dict, old: dict) -> dict:
    """The launch arguments whose value differs from the captured launch's (added ones included)."""
    return {k: v for k, v in new.items() if old.get(k) != v}


def heuristics_text(spec: dict, values: dict) -> str:
    """``change the @triton.heuristics of kernel (file:line) to give BLOCK=...``: a heuristic sets
    these at every launch, so a value passed at the launch or pinned in a config is overwritten."""
    where = (f"{spec.get('source_file')}:{spec.get('source_line')}" if spec.get("source_line")
             else spec.get("source_file") or "the kernel")
    return (f"change the @triton.heuristics of {spec.get('function')} ({where}) to give "
            + ", ".join(f"{k}={v!r}" for k, v in values.items()))


def launch_text(spec: dict, new: dict, old: dict, grid_new: Any, grid_old: Any, gain: float | None) -> str:
    """``change the launch at FILE:LINE to kernel[grid](..., BLOCK=256, num_warps=8)`` with the gain."""
    changed = changed_arguments(new, old)
    computed = [k for k in changed if k in (spec.get("heuristics") or [])]
    passed = {k: v for k, v in changed.items() if k not in computed}
    parts = []
    if passed:
        args = ", ".join(f"{k}={v!r}" for k, v in passed.items())
        parts.append(f"change the launch at {site_text(spec)} to {spec.get('function')}[grid](..., {args})")
    if computed:
        parts.append(heuristics_text(spec, {k: changed[k] for k in computed}))
    text = "; and ".join(parts)
    if gain:
        text += f" (measured {gain:.2f}x the captured launch's speed on the captured inputs)"
    if grid_new != grid_old:
        # grid_moves: the program's own grid function, evaluated at capture for each block move
        from .sweep_plan import recorded_grid_moves

        configs = spec.get("configs")
        moves = recorded_grid_moves(configs[0]) if isinstance(configs, list) and configs else {}
        if any(moves.get(f"{k}={v}") == list(grid_new or []) for k, v in changed.items()):
            text += f"; the launch's grid function follows the block ({grid_old} -> {grid_new}): keep it"
        else:
            text += (f"; the grid must follow: {grid_old} -> {grid_new} (a grid computed from the block "
                     "size, e.g. lambda meta: (triton.cdiv(n, meta['BLOCK']),), does)")
    return text
