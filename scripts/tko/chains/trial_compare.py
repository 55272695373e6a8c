"""Output comparison of remedy arms against the baseline's reference run.

Each run leaves the compiled callables' last outputs (saved by the bootstrap) and, when the repro
saves one, ``$TKO_AB_OUTPUT``. Every tensor is compared with ``torch.testing.assert_close`` at the
tolerance of the least precise float dtype its callable outputs (``working_tolerance``, from
``tko.measure.bench.tolerance_for``: ``rtol``, and ``atol`` relative to the reference's root mean square, plus two subnormal steps of the dtype, ``tko.measure.bench.quantum_near_zero``: a
softmax over 64k columns in float16 writes most of its outputs as subnormals, where two correct
kernels differ by a step that no relative bound covers), widened by the baseline's own run-to-run
difference x 4 (``tko.measure.bench.self_difference``'s margin) so that float atomics do not read as a
change.
"""

from __future__ import annotations

import math
from typing import Any

from ..measure.bench import NONDETERMINISM_MARGIN, quantum_near_zero, tolerance_for

# Subnormal steps two correct results may differ by: each rounds once from nearly the same value.
QUANTA_ALLOWED = 2


def load_outputs(paths: list[str]) -> dict | None:
    import torch

    loaded = {}
    for path in paths:
        key = "repro ($TKO_AB_OUTPUT)" if ".ab.pt" in path else "compiled callables"
        rank = _rank_of(path)
        loaded[key + (f" [{rank}]" if rank else "")] = torch.load(path, weights_only=False)
    return loaded or None


def _rank_of(path: str) -> str | None:
    """``rank1`` of a rank's own output file (``x.rank1.pt``, ``x.ab.pt.rank1``), else None."""
    import re

    found = re.search(r"\.(rank\d+)(\.pt)?$", path)
    return found.group(1) if found else None


def flatten(obj: Any, prefix: str = "") -> dict:
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return {prefix or "output": obj}
    flat = {}
    for key, value in items:
        flat.update(flatten(value, f"{prefix}/{key}" if prefix else str(key)))
    return flat


def max_difference(out: dict, ref: dict) -> float:
    """Largest absolute difference over float tensors; inf when anything else changed."""
    import torch

    if out.keys() != ref.keys():
        return math.inf
    worst = 0.0
    for key, r in ref.items():
        o = out[key]
        if isinstance(r, torch.Tensor) and isinstance(o, torch.Tensor) and o.shape == r.shape:
            if r.dtype.is_floating_point:
                d = (o.double() - r.double()).abs()
                d = d[~torch.isnan(d)]
                worst = max(worst, float(d.max()) if d.numel() else 0.0)
            elif not torch.equal(o, r):
                return math.inf
        elif type(o) is not type(r) or (not isinstance(r, torch.Tensor) and o != r):
            return math.inf
    return worst


def working_tolerance(ref: dict, key: str):
    """The tolerance of the least precise float dtype among the outputs of ``key``'s callable (the
    first two parts of the flattened key): a float32 output of a graph that computes in bfloat16
    carries bfloat16's error (logits from a bf16 GEMM, upcast to float32 for the softmax), so two
    correct graphs that round at different points differ by more than a float32 bound allows."""
    import torch

    group = "/".join(key.split("/")[:2]) + "/"
    dtypes = {t.dtype for k, t in ref.items() if (k == key or k.startswith(group))
              and isinstance(t, torch.Tensor) and t.dtype.is_floating_point}
    return max((tolerance_for(d) for d in dtypes or {ref[key].dtype}), key=lambda t: t.rtol)


def check(out: dict, ref: dict, slack: float) -> tuple[str, str]:
    """(``equal``/``different``, reason) of flattened outputs against the reference."""
    import torch

    if out.keys() != ref.keys():
        missing = sorted(set(ref) ^ set(out))
        return "different", f"outputs differ in structure: {', '.join(missing[:4])}"
    for key, r in ref.items():
        o = out[key]
        if not isinstance(r, torch.Tensor):
            if o != r:
                return "different", f"{key}: {o!r} != {r!r}"
            continue
        try:
            tol = working_tolerance(ref, key)
            rms = float(r.double().pow(2).mean().sqrt()) if r.numel() and r.dtype.is_floating_point else 0.0
            atol = tol.atol * rms + QUANTA_ALLOWED * quantum_near_zero(r.dtype) + slack
            torch.testing.assert_close(o, r, rtol=tol.rtol, atol=atol, equal_nan=True, check_device=False)
        except (AssertionError, ValueError, TypeError) as exc:
            # the count and the greatest differences, so that a reader can judge the size of it
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            return "different", f"{key}: " + "; ".join(lines[:4])
    return "equal", "equal within the dtype tolerance" + (
        f" widened by the baseline's own run-to-run difference (slack {slack:.3g})" if slack else "")


def baseline_slack(base_runs: list[dict], ref: dict) -> tuple[float | None, str]:
    """Slack from the baseline runs' differences to the reference run (None: integers changed)."""
    worst, compared = 0.0, 0
    for record in base_runs:
        outputs = load_outputs(record.get("outputs") or []) if record["status"] == "ok" else None
        if outputs is None:
            continue
        worst = max(worst, max_difference(flatten(outputs), ref))
        compared += 1
    if not math.isfinite(worst):
        return None, "the baseline's own non-float outputs (or their structure) change between runs"
    return worst * NONDETERMINISM_MARGIN, f"baseline run-to-run max |diff| {worst:.3g} over {compared} re-runs"


def _last_outputs(arm) -> list[str]:
    done = [r for r in arm.runs if r["status"] == "ok" and r.get("outputs")]
    return done[-1]["outputs"] if done else []


def compare_arms(arms: list) -> list[str]:
    """Set ``outputs`` on every arm; returns notes (the baseline's own difference)."""
    base = arms[0]
    ref_paths = base.runs[0].get("outputs") if base.runs else None
    if not ref_paths:
        for arm in arms:
            arm.outputs = {"result": "unknown", "reason": "the baseline saved no outputs (no compiled "
                           "callable was called and the repro wrote nothing to $TKO_AB_OUTPUT)"}
        return []
    ref = flatten(load_outputs(ref_paths))
    slack, note = baseline_slack(base.runs[1:], ref)
    base.outputs = {"result": "equal", "reason": f"the reference ({note})"}
    for arm in arms[1:]:
        paths = _last_outputs(arm)
        if not paths:
            arm.outputs = {"result": "unknown", "reason": "the arm did not finish a run" if arm.runs
                           else "not run"}
        elif slack is None:
            arm.outputs = {"result": "unknown", "reason": note}
        else:
            result, reason = check(flatten(load_outputs(paths)), ref, slack)
            arm.outputs = {"result": result, "reason": reason}
    return [note]
