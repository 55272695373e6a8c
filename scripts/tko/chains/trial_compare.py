"""Output comparison of remedy arms against the baseline's reference run.

Each run leaves the compiled callables' last outputs (saved by the bootstrap) and, when the repro
saves one, ``$TKO_AB_OUTPUT``. Every tensor is compared with ``torch.testing.assert_close`` at the
tolerance of the least precise float dtype its callable outputs (``working_tolerance``, from
``tko.measure.bench.tolerance_for``: ``rtol``, and ``atol`` relative to the reference's root mean square, plus two subnormal steps of the dtype, ``tko.measure.bench.quantum_near_zero``: a
softmax over 64k columns in float16 writes most of its outputs as subnormals, where two correct
kernels differ by a step that no relative bound covers), widened by the baseline's own run-to-run
difference x 4 (``tko.measure.bench.self_difference``'s margin) so that float atomics do not read as a
change. A floating tensor that misses that bound only in a small tail (``trial_outputs_tail`` of
``references/decision_rules.yaml``: few elements outside it, none far off, or any number each off by
a hair of the tensor's rms; the relative norm error within the dtype's ``rel_norm``) still compares equal, and the reason gives the tail's numbers.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..base.decide import threshold
from ..measure.bench import NONDETERMINISM_MARGIN, quantum_near_zero, tolerance_for

# Subnormal steps two correct results may differ by: each rounds once from nearly the same value.
QUANTA_ALLOWED = 2
# Elements per float64 pass: a gradient of 262M elements is 2 GiB in float64, and the statistics
# would take several such copies at once; 16M elements take 128 MiB a copy.
CHUNK = 1 << 24


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
    """Largest absolute difference over float tensors (NaNs skipped); inf when anything else changed.
    Equal tensors cost one comparison; others a float64 pass a chunk at a time (a 263M-element
    gradient would take 4 GiB of float64 copies at once)."""
    import torch

    if out.keys() != ref.keys():
        return math.inf
    worst = 0.0
    for key, r in ref.items():
        o = out[key]
        if isinstance(r, torch.Tensor) and isinstance(o, torch.Tensor) and o.shape == r.shape:
            if o.dtype == r.dtype and torch.equal(o, r):
                continue
            if not r.dtype.is_floating_point:
                return math.inf
            for oc, rc in zip(_chunks(o), _chunks(r)):
                d = (oc - rc).abs()
                d = d[~torch.isnan(d)]
                worst = max(worst, float(d.max()) if d.numel() else 0.0)
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
    tails = []
    for key, r in ref.items():
        o = out[key]
        if not isinstance(r, torch.Tensor):
            if o != r:
                return "different", f"{key}: {o!r} != {r!r}"
            continue
        try:
            result, why = check_tensor(o, r, working_tolerance(ref, key), slack)
        except (ValueError, TypeError) as exc:   # a dtype without a known tolerance
            result, why = "different", str(exc)
        if result == "different":
            return "different", f"{key}: {why}"
        if why:
            tails.append(f"{key}: {why}")
    reason = "equal within the dtype tolerance" + (
        f" widened by the baseline's own run-to-run difference (slack {slack:.3g})" if slack else "")
    return "equal", "; ".join([reason] + tails)


def check_tensor(o: Any, r: Any, tol: Any, slack: float) -> tuple[str, str]:
    """(``equal``/``different``, reason) of one tensor at tolerance ``tol``; the reason of an equal
    one is empty unless it passed as a tail (``trial_outputs_tail``)."""
    import torch

    if isinstance(o, torch.Tensor) and o.dtype == r.dtype and o.shape == r.shape and torch.equal(o, r):
        return "equal", ""   # bit for bit (NaNs aside): no bound to compute
    floating = r.dtype.is_floating_point
    rms = _rms(r) if r.numel() and floating else 0.0
    atol = tol.atol * rms + QUANTA_ALLOWED * quantum_near_zero(r.dtype) + slack
    try:
        torch.testing.assert_close(o, r, rtol=tol.rtol, atol=atol, equal_nan=True, check_device=False)
        return "equal", ""
    except (AssertionError, ValueError, TypeError) as exc:
        # the count and the greatest differences, so that a reader can judge the size of it
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        why = "; ".join(lines[:4])
    if not (floating and isinstance(o, torch.Tensor) and o.dtype == r.dtype and o.shape == r.shape):
        return "different", why   # a tail rule for values only, never for a changed type or shape
    stats = tail_stats(o, r, tol.rtol, atol)
    failed = _tail_failures(stats, tol.rel_norm, rms)
    if failed:
        return "different", f"{why}; not a tail (trial_outputs_tail): {'; '.join(failed)} ({_tail_text(stats, rms)})"
    return "equal", _tail_text(stats, rms) + " (a tail: trial_outputs_tail)"


def _chunks(t: Any, device: Any = None):
    """float64 slices of ``t`` flattened, ``CHUNK`` elements each (on ``device`` if given)."""
    import torch

    flat = t.reshape(-1)
    for start in range(0, flat.numel(), CHUNK):
        yield flat[start:start + CHUNK].to(device=device, dtype=torch.float64)


def _rms(r: Any) -> float:
    """Root mean square of ``r``'s finite elements in float64, a chunk at a time: a NaN the output
    shares (equal_nan) or an infinity must not make the bound NaN or infinite for every element."""
    import torch

    total, count = 0.0, 0
    for c in _chunks(r):
        finite = c[torch.isfinite(c)]
        total, count = total + float(finite.pow(2).sum()), count + finite.numel()
    return math.sqrt(total / count) if count else 0.0


def tail_stats(o: Any, r: Any, rtol: float, atol: float) -> dict:
    """How ``o`` misses ``|o - r| <= rtol * |r| + atol``: elements outside (a NaN or infinity that
    the reference does not hold counts, its difference as infinite), the worst ``|o - r|`` of those
    outside (an element within the bound is not a miss, however large its value and difference), and
    the relative norm error over the reference's finite elements; a chunk at a time."""
    import torch

    outside, worst, diff_sq, ref_sq = 0, 0.0, 0.0, 0.0
    for oc, rc in zip(_chunks(o, r.device), _chunks(r)):
        same = (oc == rc) | (torch.isnan(oc) & torch.isnan(rc))   # equal_nan, and inf == inf
        finite = torch.isfinite(oc) & torch.isfinite(rc)
        d = torch.where(same, 0.0, torch.where(finite, (oc - rc).abs(), math.inf))
        missed = ~(same | (finite & (d <= rtol * rc.abs() + atol)))
        outside += int(missed.sum())
        worst = max(worst, float(d[missed].max())) if missed.any() else worst
        diff_sq += float(d.pow(2).sum())
        ref_sq += float(torch.where(torch.isfinite(rc), rc, 0.0).pow(2).sum())
    rel = math.sqrt(diff_sq / ref_sq) if ref_sq else (0.0 if diff_sq == 0 else math.inf)
    return {"outside": outside, "n": r.numel(), "worst": worst, "rel_norm": rel}


def _tail_failures(stats: dict, rel_norm: float, rms: float) -> list[str]:
    """The conditions of ``trial_outputs_tail`` that ``stats`` miss, in words (none: a tail)."""
    rule = threshold("trial_outputs_tail")
    fraction = stats["outside"] / max(stats["n"], 1)
    failed = []
    if not stats["rel_norm"] <= rel_norm:
        failed.append(f"relative norm error {stats['rel_norm']:.2g} over the dtype's {rel_norm:g}")
    near = stats["worst"] <= rule["near_abs_rms"] * rms   # every miss tiny: a sum in another order
    if not fraction <= rule["max_fraction"] and not near:
        failed.append(f"{stats['outside']} of {stats['n']} elements ({fraction:.2g}) outside the element-wise "
                      f"bound, over {rule['max_fraction']:g} of them, the worst over {rule['near_abs_rms']:g} x rms")
    if not stats["worst"] <= rule["max_abs_rms"] * rms:
        failed.append(f"worst |diff| {stats['worst']:.3g} over {rule['max_abs_rms']:g} x rms ({rms:.3g})")
    return failed


def _tail_text(stats: dict, rms: float) -> str:
    return (f"{stats['outside']} of {stats['n']} elements ({stats['outside'] / max(stats['n'], 1):.2g}) outside the "
            f"element-wise bound, worst {stats['worst']:.3g} ({stats['worst'] / rms if rms else 0.0:.2g} x rms), "
            f"relative norm error {stats['rel_norm']:.2g}")


class OutputCheck:
    """The trials' output comparisons, each done once: the reference loaded once, each baseline
    re-run's difference to it once, and each arm run's verdict kept with the slack it was judged
    at. An ``equal`` stays equal at a larger slack (the bound only widens), so only a ``different``
    is judged again when the baseline's own difference grows. The trials compare a run right after
    it (inside the budget's clock) and again before the stacked round and at the end: outputs of
    560 MB a run took the H200's trials 46 s past their budget when every check ran twice at the end."""

    def __init__(self) -> None:
        self.ref_paths: tuple | None = None
        self.ref: dict | None = None
        self.diffs: dict[tuple, float] = {}
        self.verdicts: dict[tuple, tuple[float, str, str]] = {}
        self.seconds = 0.0

    def reference(self, paths: list[str]) -> dict:
        if tuple(paths) != self.ref_paths:
            self.ref_paths, self.ref = tuple(paths), flatten(load_outputs(paths))
            self.diffs, self.verdicts = {}, {}
        return self.ref

    def slack(self, base_runs: list[dict], ref: dict) -> tuple[float | None, str]:
        """Slack from the baseline runs' differences to the reference run (None: integers changed)."""
        worst, compared = 0.0, 0
        for record in base_runs:
            paths = tuple(record.get("outputs") or []) if record["status"] == "ok" else ()
            if not paths:
                continue
            if paths not in self.diffs:
                self.diffs[paths] = max_difference(flatten(load_outputs(list(paths))), ref)
            worst, compared = max(worst, self.diffs[paths]), compared + 1
        if not math.isfinite(worst):
            return None, "the baseline's own non-float outputs (or their structure) change between runs"
        return worst * NONDETERMINISM_MARGIN, f"baseline run-to-run max |diff| {worst:.3g} over {compared} re-runs"

    def verdict(self, paths: list[str], ref: dict, slack: float) -> tuple[str, str]:
        kept = self.verdicts.get(tuple(paths))
        if kept and (kept[1] == "equal" or kept[0] >= slack):
            return kept[1], kept[2]
        result, reason = check(flatten(load_outputs(paths)), ref, slack)
        self.verdicts[tuple(paths)] = (slack, result, reason)
        return result, reason

    def compare(self, arms: list) -> list[str]:
        """Set ``outputs`` on every arm; returns notes (the baseline's own difference)."""
        start = time.perf_counter()
        try:
            return self._compare(arms)
        finally:
            self.seconds += time.perf_counter() - start

    def _compare(self, arms: list) -> list[str]:
        base = arms[0]
        ref_paths = base.runs[0].get("outputs") if base.runs else None
        if not ref_paths:
            for arm in arms:
                arm.outputs = {"result": "unknown", "reason": "the baseline saved no outputs (no compiled "
                               "callable was called and the repro wrote nothing to $TKO_AB_OUTPUT)"}
            return []
        ref = self.reference(ref_paths)
        slack, note = self.slack(base.runs[1:], ref)
        base.outputs = {"result": "equal", "reason": f"the reference ({note})"}
        for arm in arms[1:]:
            paths = _last_outputs(arm)
            if not paths:
                arm.outputs = {"result": "unknown", "reason": _why_not_compared(arm)}
            elif slack is None:
                arm.outputs = {"result": "unknown", "reason": note}
            else:
                result, reason = self.verdict(paths, ref, slack)
                arm.outputs = {"result": result, "reason": reason}
        return [note]


def has_nan(outputs: dict) -> bool:
    """Any NaN in a flattened set of outputs (:func:`flatten`)."""
    import torch

    return any(isinstance(t, torch.Tensor) and t.is_floating_point() and bool(torch.isnan(t).any())
               for t in outputs.values())


def _why_not_compared(arm) -> str:
    if not arm.runs:
        return "not run"
    if arm.status == "not applied":   # its runs measured the unchanged program: nothing of its own to compare
        return "not compared: the arm did not apply"
    return "the arm did not finish a run"


def _last_outputs(arm) -> list[str]:
    done = [r for r in arm.runs if r["status"] == "ok" and r.get("outputs")]
    return done[-1]["outputs"] if done else []
