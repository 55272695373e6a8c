"""Timing and correctness gate shared by every benchmark of this bundle.

The rules (references/json_contracts.md, section ``benchmark/1``, says how they show up in output):

* correctness first: the output is poisoned before each checked run (a NaN with a private payload,
  so an element the kernel never wrote is told apart from a NaN it computed), compared with a
  reference computed in float64 by the relative norm error ``||out - ref|| / ||ref||`` plus an
  element-wise bound; NaN never passes;
* timing with ``triton.testing.do_bench`` (median, p20, p80; warm-up and repetition in ms), cycling
  through several input sets whose total size exceeds the L2 cache so that small sizes are not
  timed out of the cache;
* bytes by Inductor's rule (every tensor argument once, ``in_out_ptr*`` twice);
* ranking: variants that failed their check, or were not timed, are never ranked; variants whose
  times differ by less than the noise are flagged as ties.

torch and triton are imported inside the functions that need them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..base.errors import ToolFailure

# --------------------------------------------------------------------------- tolerances


@dataclass(frozen=True)
class Tolerance:
    """Pass bounds for one output dtype.

    ``rel_norm`` bounds ``||out - ref|| / ||ref||``. Element-wise, every element must satisfy
    ``|out - ref| <= rtol * |ref| + atol * rms(ref)``: ``atol`` is relative to the root mean square
    of the reference so that the bound does not depend on the scale of the data.
    """

    rel_norm: float
    rtol: float
    atol: float
    label: str


# Relative norm errors that correct kernels land well under: float32 arithmetic far under 1e-5;
# tf32 / a float32 tl.dot (Triton's default input precision) near 3e-4; fp16 storage about 3e-4;
# bf16 storage about 2e-3.
_TOLERANCES = {
    "float64": Tolerance(1e-12, 1e-9, 1e-12, "float64"),
    "float32": Tolerance(1e-5, 1e-4, 1e-5, "float32"),
    "tf32": Tolerance(1e-3, 1e-2, 1e-3, "tf32 / float32 dot"),
    "float16": Tolerance(1e-3, 1e-2, 1e-3, "float16"),
    "bfloat16": Tolerance(1e-2, 5e-2, 1e-2, "bfloat16"),
    "float8": Tolerance(1e-1, 2.5e-1, 1e-1, "float8"),
}


def quantum_near_zero(dtype: Any) -> float:
    """The spacing of a float dtype's subnormals (``smallest_normal * eps``; float16: 2^-24 =
    5.96e-8), 0 for anything else. Two results rounded to the dtype from nearly equal values can
    differ by one such step however small the values; under it a relative bound means nothing."""
    import torch

    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        return 0.0
    info = torch.finfo(dtype)
    return float(info.smallest_normal * info.eps)


def dtype_name(dtype: Any) -> str:
    """'torch.bfloat16' / torch.bfloat16 / 'bf16' -> 'bfloat16'."""
    text = str(dtype).replace("torch.", "").lower()
    aliases = {"fp64": "float64", "double": "float64", "fp32": "float32", "float": "float32",
               "fp16": "float16", "half": "float16", "bf16": "bfloat16",
               "fp32_dot": "tf32", "ieee": "float32"}
    return aliases.get(text, text)


def tolerance_for(dtype: Any) -> Tolerance:
    """Tolerance for an output dtype; ``"tf32"`` for float32 outputs of a tf32 / default dot.

    Integer and bool outputs must match exactly.
    """
    name = dtype_name(dtype)
    if name.startswith("float8"):
        return _TOLERANCES["float8"]
    if name in _TOLERANCES:
        return _TOLERANCES[name]
    if name.startswith(("int", "uint", "bool")):
        return Tolerance(0.0, 0.0, 0.0, f"{name} (exact)")
    raise ValueError(f"no tolerance known for dtype {dtype!r}")


# --------------------------------------------------------------------------- poison

# Quiet NaNs with a payload no arithmetic produces (hardware and libm return the canonical NaN),
# stored through an integer view of the same width. Integer outputs get a sentinel value.
_POISON_BITS = {
    8: 0x7FF8DBADDBADDBAD,   # float64
    4: 0x7FC0DBAD,           # float32
    2: None,                 # per dtype below
    1: 0x7F,                 # float8 e4m3fn NaN (no room for a payload)
}
_POISON_BITS_16 = {"float16": 0x7E5B, "bfloat16": 0x7FDB}
_INT_SENTINEL = {1: -0x5B, 2: -0x5BAD, 4: -0x5BADDBAD, 8: -0x5BADDBADDBADDBAD}


def _int_view_dtype(size: int):
    import torch

    return {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]


def _poison_pattern(tensor) -> tuple[Any, int]:
    """(integer dtype of the view, bit pattern written) for a tensor's dtype."""
    size = tensor.element_size()
    if tensor.dtype.is_floating_point:
        name = dtype_name(tensor.dtype)
        if size == 2:
            bits = _POISON_BITS_16.get(name)
        elif size == 1 and name.endswith("fnuz"):
            bits = 0x80                       # the only NaN of the fnuz float8 formats
        else:
            bits = _POISON_BITS[size]
        if bits is None:
            raise ValueError(f"cannot poison dtype {tensor.dtype}")
        if bits >= 1 << (8 * size - 1):       # keep the value in the signed range of the view
            bits -= 1 << (8 * size)
        return _int_view_dtype(size), bits
    if tensor.dtype.is_complex:
        raise ValueError(f"cannot poison dtype {tensor.dtype}")
    if str(tensor.dtype) == "torch.bool":
        return None, 1
    if str(tensor.dtype).startswith("torch.uint"):
        return tensor.dtype, (1 << (8 * size - 1)) - 0x25
    return tensor.dtype, _INT_SENTINEL[size]


def poison_(tensor):
    """Fill ``tensor`` in place with the poison pattern of its dtype and return it.

    Floating outputs get a NaN with a private payload, so :func:`check_outputs` can count the
    elements a kernel did not write separately from NaNs it computed.
    """
    view_dtype, bits = _poison_pattern(tensor)
    if view_dtype is None:             # bool: nothing distinguishable; True is the odd value out
        tensor.fill_(True)
    elif tensor.dtype.is_floating_point:
        tensor.view(view_dtype).fill_(bits)
    else:
        tensor.fill_(bits)
    return tensor


def poisoned_mask(tensor):
    """Bool tensor: True where ``tensor`` still holds the poison pattern."""
    view_dtype, bits = _poison_pattern(tensor)
    if view_dtype is None:
        return tensor == True  # noqa: E712 - elementwise
    if tensor.dtype.is_floating_point:
        return tensor.view(view_dtype) == bits
    return tensor == bits


# --------------------------------------------------------------------------- check


@dataclass
class CheckResult:
    passed: bool
    reason: str
    rel_err: float | None
    max_abs: float | None
    nan_count: int
    unwritten_count: int
    mismatch_count: int       # elements outside the element-wise bound (NaN and unwritten included)
    numel: int
    dtype: str
    tolerance: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _check_one(out, ref, tol: Tolerance, name: str, slack: float = 0.0) -> CheckResult:
    import torch

    dname = dtype_name(out.dtype)
    base = dict(numel=out.numel(), dtype=dname, tolerance=asdict(tol) | ({"abs_slack": slack} if slack else {}))
    if tuple(out.shape) != tuple(ref.shape):
        return CheckResult(False, f"{name}shape {tuple(out.shape)} != reference {tuple(ref.shape)}",
                           None, None, 0, 0, out.numel(), **base)
    ref64 = ref.detach().to(device=out.device, dtype=torch.float64)
    if torch.isnan(ref64).any():
        return CheckResult(False, f"{name}reference contains NaN: fix the reference or the inputs",
                           None, None, 0, 0, 0, **base)
    unwritten = poisoned_mask(out)
    if not out.dtype.is_floating_point:
        # An integer sentinel is also a valid value: where the reference holds it, a written
        # element cannot be told apart, so only elements that should differ from it count.
        unwritten &= ref64 != float(_poison_pattern(out)[1])
    unwritten_count = int(unwritten.sum())
    out64 = out.detach().to(torch.float64)
    nan = torch.isnan(out64) & ~unwritten
    nan_count = int(nan.sum())
    bad = unwritten | nan
    diff = (out64 - ref64).abs()
    finite = ~bad
    max_abs = float(diff[finite].max()) if bool(finite.any()) else None
    ref_norm = float(torch.linalg.vector_norm(ref64))
    diff_norm = float(torch.linalg.vector_norm(torch.where(bad, torch.zeros_like(diff), diff)))
    if bad.any():
        rel_err = math.inf
    elif ref_norm == 0.0:
        rel_err = 0.0 if diff_norm == 0.0 else math.inf
    else:
        rel_err = diff_norm / ref_norm
    rms = ref_norm / math.sqrt(max(1, ref64.numel()))
    bound = tol.rtol * ref64.abs() + tol.atol * rms + slack
    outside = (diff > bound) | bad
    mismatch_count = int(outside.sum())
    # the slack, spread over every element, is what the norm test allows on top
    rel_norm = tol.rel_norm + (slack * math.sqrt(max(1, ref64.numel())) / ref_norm if slack and ref_norm else 0.0)
    if unwritten_count:
        reason = f"{name}{unwritten_count} of {out.numel()} elements never written (still poisoned)"
    elif nan_count:
        reason = f"{name}{nan_count} NaN in the output (NaN never passes)"
    elif not rel_err <= rel_norm:
        reason = f"{name}relative error {rel_err:.3g} > {rel_norm:g} ({tol.label})"
    elif mismatch_count:
        reason = (f"{name}{mismatch_count} elements outside |out-ref| <= {tol.rtol:g}*|ref| + "
                  f"{tol.atol:g}*rms(ref)" + (f" + {slack:.3g}" if slack else "") +
                  f" (max abs error {max_abs:.3g})")
    else:
        return CheckResult(True, "ok", rel_err, max_abs, 0, 0, 0, **base)
    return CheckResult(False, reason, rel_err, max_abs, nan_count, unwritten_count,
                       mismatch_count, **base)


def check_outputs(out, ref, dtype: Any = None, tolerance: Tolerance | None = None,
                  abs_slack: float | Sequence[float] = 0.0) -> CheckResult:
    """Check a kernel output (or a sequence of outputs) against a reference.

    ``dtype`` picks the tolerance (default: the output's dtype; pass ``"tf32"`` for a float32
    output of a float32 ``tl.dot``). The reference may have any floating dtype; it is compared
    in float64. Outputs should have been filled with :func:`poison_` before the run.
    ``abs_slack`` (one per output for a sequence) widens every element's bound by that much: the
    run-to-run difference of a reference that is not deterministic (float atomics), see
    :func:`self_difference`.
    """
    if isinstance(out, (list, tuple)):
        if not isinstance(ref, (list, tuple)) or len(ref) != len(out):
            return CheckResult(False, "outputs and references differ in number", None, None,
                               0, 0, 0, 0, "mixed")
        slacks = list(abs_slack) if isinstance(abs_slack, (list, tuple)) else [abs_slack] * len(out)
        results = [check_outputs(o, r, dtype, tolerance, sl) for o, r, sl in zip(out, ref, slacks)]
        for i, res in enumerate(results):
            if not res.passed:
                res.reason = f"output {i}: {res.reason}"
        worst = next((r for r in results if not r.passed), None)
        rels = [r.rel_err for r in results if r.rel_err is not None]
        maxes = [r.max_abs for r in results if r.max_abs is not None]
        return CheckResult(
            passed=worst is None,
            reason="ok" if worst is None else worst.reason,
            rel_err=max(rels) if rels else None,
            max_abs=max(maxes) if maxes else None,
            nan_count=sum(r.nan_count for r in results),
            unwritten_count=sum(r.unwritten_count for r in results),
            mismatch_count=sum(r.mismatch_count for r in results),
            numel=sum(r.numel for r in results),
            dtype=",".join(r.dtype for r in results),
            tolerance=(worst or results[0]).tolerance if results else {},
        )
    tol = tolerance or tolerance_for(dtype if dtype is not None else out.dtype)
    return _check_one(out, ref, tol, "", float(abs_slack or 0.0))


# A second ordering of float atomics differs from the reference about as much as a re-run of the
# reference does; the margin covers orderings the few re-runs did not show.
NONDETERMINISM_MARGIN = 4.0


def self_difference(runs: Sequence[Any], ref: Any) -> dict:
    """How far re-runs of the reference kernel land from its first output (float atomics are
    not deterministic). Returns ``max_abs`` (over the runs), ``runs`` and ``slack`` (the
    element-wise widening :func:`check_outputs` should apply: ``max_abs`` x the margin)."""
    import torch

    worst = 0.0
    for out in runs:
        if out.dtype.is_floating_point:
            d = (out.detach().to(torch.float64) - ref.detach().to(device=out.device, dtype=torch.float64)).abs()
            d = d[~torch.isnan(d)]
            if d.numel():
                worst = max(worst, float(d.max()))
        elif not torch.equal(out, ref):
            worst = math.inf            # an integer output that changes between runs: no slack fixes that
    slack = worst * NONDETERMINISM_MARGIN if math.isfinite(worst) else 0.0
    return {"runs": len(runs), "max_abs": worst if math.isfinite(worst) else None, "slack": slack,
            "integer_changed": not math.isfinite(worst)}


# --------------------------------------------------------------------------- bytes


def bytes_of(args: Sequence[Any] | Mapping[str, Any], names: Sequence[str] | None = None,
             num_in_out_args: int | None = None) -> int:
    """Bytes one launch moves by Inductor's rule: every tensor argument once, in/out twice.

    ``args`` is a sequence (with ``names`` or ``num_in_out_args``) or a name -> value mapping.
    An argument is in/out when its name starts with ``in_out_ptr`` (Inductor's naming) or it is
    among the first ``num_in_out_args``. Uses Inductor's own ``get_num_bytes`` when importable.
    """
    if isinstance(args, Mapping):
        names = list(args.keys())
        values = list(args.values())
    else:
        values = list(args)
    if names is not None:
        if len(names) != len(values):
            raise ValueError(f"{len(names)} names for {len(values)} arguments")
        in_out = [str(n).startswith("in_out_ptr") for n in names]
    else:
        in_out = [i < (num_in_out_args or 0) for i in range(len(values))]
    # get_num_bytes wants the in/out arguments first; the sum does not depend on the order.
    ordered = [v for v, io in zip(values, in_out) if io] + [v for v, io in zip(values, in_out) if not io]
    n_io = sum(in_out)
    try:
        from torch._inductor.runtime.runtime_utils import get_num_bytes
    except Exception:  # torch without Inductor, or an older layout
        get_num_bytes = None
    if get_num_bytes is not None:
        return int(get_num_bytes(*ordered, num_in_out_args=n_io))
    return int(sum(_tensor_bytes(v) * (2 if i < n_io else 1) for i, v in enumerate(ordered)))


def _tensor_bytes(value: Any) -> int:
    if hasattr(value, "numel") and hasattr(value, "element_size"):
        return int(value.numel()) * int(value.element_size())
    return 0


def gb_per_s(num_bytes: int | None, ms: float | None) -> float | None:
    if not num_bytes or not ms or ms <= 0:
        return None
    return num_bytes / (ms * 1e-3) / 1e9


# --------------------------------------------------------------------------- timing


class TimingUnavailable(ToolFailure):
    """No device to time on (a CPU-only machine, the Triton interpreter)."""


@dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    rotate_sets: int
    calls: int                 # calls of fn made by the timer (estimate + warm-up + timed)
    sets_used: int             # distinct rotating sets those calls touched
    timer: str
    warmup_ms: float
    rep_ms: float

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def spread(self) -> float:
        """(p80 - p20) / median: the run's own noise."""
        return (self.p80_ms - self.p20_ms) / self.median_ms if self.median_ms > 0 else math.inf


def timing_unavailable_reason() -> str | None:
    """Why ``time_fn`` cannot time here, or None when a device timer is available."""
    import os

    # as tko.base.interpreter.interpreter_on: this module is copied whole into the benchmark template
    # (tko.measure.embed), where only its ToolFailure import has a stand-in
    if os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on"):
        return "TRITON_INTERPRET=1: kernels run in the Triton interpreter on the CPU, not on a device"
    try:
        import torch
    except Exception as exc:
        return f"torch not importable ({type(exc).__name__})"
    if not torch.cuda.is_available():
        return "no GPU visible to torch (torch.cuda.is_available() is False)"
    return None


def _call(fn: Callable, item: Any):
    if isinstance(item, Mapping):
        return fn(**item)
    if isinstance(item, (list, tuple)):
        return fn(*item)
    return fn(item)


def time_fn(fn: Callable, warmup_ms: float = 25, rep_ms: float = 100,
            rotate: Sequence[Any] | None = None, bench: Callable | None = None) -> Timing:
    """Median, p20 and p80 (ms) of ``fn`` with ``triton.testing.do_bench``.

    With ``rotate``, each call takes the next item (cycled): a tuple is passed as positional
    arguments, a mapping as keyword arguments, anything else as the single argument; without it
    ``fn`` is called with no arguments. ``bench`` replaces ``do_bench`` (same signature); without
    it a device is required, else :class:`TimingUnavailable` is raised.
    """
    sets = list(rotate) if rotate is not None else [()]
    if not sets:
        raise ValueError("rotate is empty")
    timer = "custom"
    if bench is None:
        reason = timing_unavailable_reason()
        if reason:
            raise TimingUnavailable(reason)
        from triton.testing import do_bench as bench
        timer = "triton.testing.do_bench"
    state = {"calls": 0}
    used: set[int] = set()

    def step():
        i = state["calls"] % len(sets)
        state["calls"] += 1
        used.add(i)
        return _call(fn, sets[i])

    q = bench(step, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.2, 0.8])
    median, p20, p80 = (float(v) for v in q)
    return Timing(median, p20, p80, len(sets), state["calls"], len(used), timer,
                  float(warmup_ms), float(rep_ms))


# Copied into every standalone kernel file (tko/measure/embed.py): no annotations, which a kernel module
# without ``from __future__ import annotations`` would evaluate, and only the standard library.
def cpu_wall_bench(fn, warmup=0, rep=0, quantiles=None, min_calls=3, max_calls=100):
    """``triton.testing.do_bench``'s contract on the host clock, for interpreter runs (no device).

    Untimed calls for ``warmup`` ms (at least one when it is positive), then at least
    ``min_calls`` timed calls, more until
    ``rep`` ms of wall time or ``max_calls``. Returns the median in ms, or the ``quantiles``.
    The host clock times the interpreter, not a kernel: callers label it as such.
    """
    import time

    deadline = time.perf_counter() + warmup * 1e-3
    if warmup > 0:
        fn()
    while time.perf_counter() < deadline:
        fn()
    times = []
    deadline = time.perf_counter() + rep * 1e-3
    while len(times) < min_calls or (time.perf_counter() < deadline and len(times) < max_calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    picks = [times[min(len(times) - 1, int(round(q * (len(times) - 1))))] for q in (quantiles or [0.5])]
    return picks if quantiles else picks[0]


def device_l2_bytes(device: Any = None) -> int | None:
    """L2 size of a torch device from ``get_device_properties`` (None where torch lacks it)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(device if device is not None else
                                                 torch.cuda.current_device())
    except Exception:
        return None
    value = getattr(props, "L2_cache_size", None)
    return int(value) if value else None


def rotation_count(set_bytes: int, l2_bytes: int | None, factor: float = 2.0,
                   max_sets: int = 64, budget_bytes: int | None = None) -> int:
    """How many input sets to cycle so that together they exceed ``factor`` x L2.

    One set when it alone already exceeds that, or when the L2 size is unknown; never more
    than ``max_sets`` or than fit in ``budget_bytes``.
    """
    if set_bytes <= 0 or not l2_bytes:
        return 1
    need = int(math.floor(factor * l2_bytes / set_bytes)) + 1
    n = max(1, min(need, max_sets))
    if budget_bytes:
        n = max(1, min(n, budget_bytes // set_bytes))
    return n


# --------------------------------------------------------------------------- ranking


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def rank_variants(results: Iterable[Any], noise_rel: float = 0.0) -> dict:
    """Rank timed variants that passed their check; everything else is listed as excluded.

    Each result has ``name``, ``passed`` (bool), ``median_ms`` and optionally ``p20_ms`` /
    ``p80_ms`` (dicts or objects). Two variants tie when their medians differ by no more than
    ``noise_rel`` (e.g. the measured difference between two timings of one variant) or their
    p20-p80 ranges overlap. Returns ``{"ranked": [...], "excluded": [...], "best": name|None}``;
    each ranked entry has ``rank``, ``name``, ``median_ms``, ``x_best`` (times the best median),
    ``ties_best`` and ``ties`` (names within noise of it).
    """
    timed, excluded = [], []
    for res in results:
        name = _get(res, "name")
        ms = _get(res, "median_ms")
        if not _get(res, "passed", False):
            excluded.append({"name": name, "reason": "failed its check: " +
                             str(_get(res, "reason") or "no passing check")})
        elif ms is None or not math.isfinite(float(ms)) or float(ms) <= 0:
            excluded.append({"name": name, "reason": "not timed"})
        else:
            timed.append(res)
    timed.sort(key=lambda r: float(_get(r, "median_ms")))

    def interval(r):
        m = float(_get(r, "median_ms"))
        lo, hi = _get(r, "p20_ms"), _get(r, "p80_ms")
        return (float(lo) if lo is not None else m, float(hi) if hi is not None else m)

    def tie(a, b) -> bool:
        ma, mb = float(_get(a, "median_ms")), float(_get(b, "median_ms"))
        if abs(ma - mb) <= noise_rel * min(ma, mb):
            return True
        (alo, ahi), (blo, bhi) = interval(a), interval(b)
        return alo <= bhi and blo <= ahi

    ranked = []
    best = timed[0] if timed else None
    for i, res in enumerate(timed):
        ms = float(_get(res, "median_ms"))
        ranked.append({
            "rank": i + 1,
            "name": _get(res, "name"),
            "median_ms": ms,
            "x_best": ms / float(_get(best, "median_ms")),
            "ties_best": i > 0 and tie(res, best),
            "ties": [_get(o, "name") for o in timed if o is not res and tie(res, o)],
        })
    return {"ranked": ranked, "excluded": excluded,
            "best": _get(best, "name") if best is not None else None,
            "best_is_clear": bool(ranked) and not any(r["ties_best"] for r in ranked),
            "noise_rel": noise_rel}
