"""Size sweep of the bundled row kernels against Inductor (``rowkernel_sweep/1``).

For each op of :mod:`tko.remedies.rowkernels` (softmax, log_softmax, layer_norm, rms_norm), dtype and row
length ``n_cols`` (``n_rows = elements // n_cols``), every mode is run on the same input:

- ``bundled``: ``rowkernels.<op>``; a refused :class:`~tko.remedies.row_plan.RowPlan` is recorded as
  ``refused`` with its reason and not timed (its output would be the torch reference);
- ``inductor_default`` / ``max_autotune`` / ``coordinate_descent``: ``torch.compile`` of the plain
  torch op (default mode, ``max-autotune-no-cudagraphs``, default mode with
  ``coordinate_descent_tuning`` patched around the compile and the first call, where Inductor
  compiles and tunes), after ``torch._dynamo.reset()`` so that each mode compiles anew;
- ``eager``: the plain torch op without compiling (a baseline; what CPU tests can afford).

Directions: ``fwd`` (the default) times the op. ``bwd`` times the backward call alone:
``torch.autograd.grad(y, inputs, dy, retain_graph=True)`` on an output ``y`` computed once before
the timed loop, with a fixed upstream gradient ``dy``. The bundled mode goes through the
differentiable public functions with the one-pass backward kernel forced
(``rowkernels.use_backward("kernel")`` around its first and its timed calls, whatever
``rowkernels.BACKWARD`` or ``TKO_ROW_BACKWARD`` say: the custom ops' default backward is the torch
formula, and the kernel is what this mode measures); the other modes
through the autograd of the (compiled) torch op, whose backward graph Inductor compiles as well
(on the first backward, which runs untimed inside the mode's config patch). Timing only the backward keeps the forward out of the backward's bandwidth figure, and both the
custom op and AOTAutograd's compiled backward take repeated calls on a retained graph. The
gradients (dx, and dweight / dbias for the norms) are checked against torch's autograd of the fp32
reference at the same dtype tolerances.

Times are ``triton.testing.do_bench`` medians on a GPU; without one (or in the Triton
interpreter) a CPU wall-clock median, and the payload's ``timer`` says so. Bytes are the one-pass
floor: the input read once, the output written once, weight and bias once (backward:
:data:`BYTES_BWD`); ``pct_of_copy`` is that over the time, against the copy peak passed in. Each
output is checked against the fp32 reference ``rowkernels.<op>_ref``; a mode that raises is
``failed`` and the sweep goes on.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Iterable

from ..base import markdown as md

SCHEMA = "rowkernel_sweep/1"
OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm")
INDUCTOR_MODES = ("inductor_default", "max_autotune", "coordinate_descent")
DEFAULT_MODES = ("bundled",) + INDUCTOR_MODES
MODES = DEFAULT_MODES + ("eager",)
DTYPE_NAMES = ("fp16", "bf16", "fp32")
DEFAULT_DTYPES = ("fp16", "bf16")
DEFAULT_COLS = tuple(1 << k for k in range(10, 17))      # 1k .. 64k
DEFAULT_ELEMENTS = 1 << 27
DIRECTIONS = ("fwd", "bwd")
DEFAULT_DIRECTIONS = ("fwd",)
BYTES_FWD = "input read once + output written once + weight/bias once"
BYTES_BWD = ("softmax / log_softmax: y and dy read, dx written; norms: x, dy, weight and the fp32 "
             "per-row stats (mean and rstd; rstd) read, dx, dweight (and dbias) written, once each")
BWD_TIMING = ("the backward call alone (torch.autograd.grad with retain_graph) on an output "
              "computed once before the timed loop")
GRAD_NAMES = ("dx", "dweight", "dbias")
LN_EPS, RMS_EPS = 1e-5, 1e-6                             # the defaults of tko.remedies.rowkernels
# Output-dtype tolerances: about one rounding of the stored result (fp16 ulp 2^-10, bf16 2^-7).
TOLERANCE = {"fp16": dict(rtol=1e-3, atol=1e-3), "bf16": dict(rtol=1.6e-2, atol=1.6e-2),
             "fp32": dict(rtol=1e-5, atol=1e-5)}
ROW_KEYS = ("op", "dtype", "n_cols", "n_rows", "mode", "direction", "status", "reason", "ms", "gbps",
            "pct_of_copy", "correct", "max_abs_err", "x_vs_inductor_default")


def beat_margin() -> float:
    """How much faster the bundled kernel must be to beat Inductor: the threshold
    ``clear_lead_x`` of references/decision_rules.yaml, less one (0.02)."""
    from ..base.decide import threshold

    return round(float(threshold("clear_lead_x")) - 1.0, 6)


def torch_dtype(name: str):
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[name]


def first_line(exc: BaseException) -> str:
    """The exception's first line; with the next one when it only introduces it (Inductor's
    ``backend='inductor' raised:``)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    head = lines[0] + (f" {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else "")
    return f"{type(exc).__name__}: {head}"


# --------------------------------------------------------------------------- the ops


def torch_fn(op: str) -> Callable:
    """The plain torch op Inductor compiles; the same math as ``rowkernels.<op>_ref``."""
    import torch
    import torch.nn.functional as F

    if op == "softmax":
        return lambda x: torch.softmax(x, -1)
    if op == "log_softmax":
        return lambda x: torch.log_softmax(x, -1)
    if op == "layer_norm":
        return lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, LN_EPS)

    def rms(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS) * w.float()).to(x.dtype)

    return rms


def bundled_fn(op: str, limit) -> Callable:
    """``rowkernels.<op>`` with its limit fixed, so each timed call skips the device query."""
    from . import rowkernels as rk

    if op == "layer_norm":
        return lambda x, w, b: rk.layer_norm(x, w, b, LN_EPS, limit=limit)
    if op == "rms_norm":
        return lambda x, w: rk.rms_norm(x, w, RMS_EPS, limit=limit)
    return lambda x: getattr(rk, op)(x, limit=limit)


def differentiable_fn(op: str) -> Callable:
    """``rowkernels.<op>`` as autograd calls it: no ``limit`` (the custom op plans against the
    device's own), so a gradient runs the op's registered backward (the kernel inside
    ``rowkernels.use_backward("kernel")``, as :func:`prepare_bwd` runs it)."""
    from . import rowkernels as rk

    if op == "layer_norm":
        return lambda x, w, b: rk.layer_norm(x, w, b, LN_EPS)
    if op == "rms_norm":
        return lambda x, w: rk.rms_norm(x, w, RMS_EPS)
    return getattr(rk, op)


def make_inputs(op: str, dtype: str, n_rows: int, n_cols: int, device, seed: int = 0) -> tuple:
    """The call's arguments: ``x`` (N(0, 3^2)), plus weight (and bias) near 1 (and 0)."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    dt = torch_dtype(dtype)
    x = (torch.randn(n_rows, n_cols, generator=g, device=device) * 3).to(dt)
    if op in ("softmax", "log_softmax"):
        return (x,)
    w = (1 + 0.1 * torch.randn(n_cols, generator=g, device=device)).to(dt)
    if op == "rms_norm":
        return (x, w)
    return (x, w, (0.1 * torch.randn(n_cols, generator=g, device=device)).to(dt))


def make_grad_out(x, seed: int = 0):
    """The fixed upstream gradient ``dy``: N(0, 1) in the input's dtype and shape."""
    import torch

    g = torch.Generator(device=x.device).manual_seed(seed + 1)
    return torch.randn(x.shape, generator=g, device=x.device).to(x.dtype)


def moved_bytes(args: tuple) -> int:
    """One-pass floor: every argument read once plus the output (the input's size) written once."""
    x = args[0]
    return sum(a.numel() * a.element_size() for a in args) + x.numel() * x.element_size()


def moved_bytes_bwd(op: str, args: tuple) -> int:
    """Backward floor (:data:`BYTES_BWD`): three row-sized tensors (y or x, dy, dx), and for the
    norms weight read, dweight / dbias written and the per-row fp32 stats read."""
    x = args[0]
    rows_bytes = 3 * x.numel() * x.element_size()
    if op in ("softmax", "log_softmax"):
        return rows_bytes
    n_rows = x.numel() // x.shape[-1]
    stats = (2 if op == "layer_norm" else 1) * n_rows * 4
    params = sum(a.numel() * a.element_size() for a in args[1:])
    return rows_bytes + stats + params + params     # weight read; dweight (and dbias) written


def leaves_of(args: tuple) -> tuple:
    """Copies of the arguments that autograd differentiates against."""
    return tuple(a.detach().requires_grad_(True) for a in args)


def reference_grads(op: str, args: tuple, dy) -> tuple:
    """Torch's autograd of the fp32 reference ``rowkernels.<op>_ref`` (fp32 math, each gradient
    in its input's dtype): dx, and dweight / dbias for the norms."""
    import torch

    from . import rowkernels as rk

    leaves = leaves_of(args)
    with torch.enable_grad():
        return torch.autograd.grad(rk.REFERENCES[op](*leaves), leaves, dy)


def check_grads(grads, refs, dtype: str) -> tuple[bool, float | None, dict]:
    """(every gradient passes, the largest max abs error, name -> max abs error)."""
    if len(grads) != len(refs):
        return False, None, {}
    results = {name: check(g, r, dtype) for name, g, r in zip(GRAD_NAMES, grads, refs)}
    errs = [e for _, e in results.values() if e is not None]
    return (all(ok for ok, _ in results.values()), max(errs) if errs else None,
            {name: e for name, (_, e) in results.items()})


def check(out, ref, dtype: str) -> tuple[bool, float | None]:
    """(passes the dtype's tolerance, max abs error) of ``out`` against the reference."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        return False, None
    got, want = out.float(), ref.float()
    err = float((got - want).abs().max()) if got.numel() else 0.0
    try:
        torch.testing.assert_close(got, want, **TOLERANCE[dtype])
    except AssertionError:
        return False, err
    return True, err


# --------------------------------------------------------------------------- timing


def timer_label() -> str:
    """The timer a sweep here uses: do_bench on a GPU, else the CPU wall clock (and why)."""
    from ..measure.bench import timing_unavailable_reason

    why = timing_unavailable_reason()
    return "triton.testing.do_bench median" if why is None else f"cpu wall clock median ({why})"


def time_ms(fn: Callable, warmup_ms: float, rep_ms: float, on_gpu: bool) -> float:
    if on_gpu:
        from ..measure.bench import time_fn

        return time_fn(fn, warmup_ms=warmup_ms, rep_ms=rep_ms).median_ms
    from ..measure.bench import cpu_wall_bench

    # always one untimed call first, even at warm-up 0
    return cpu_wall_bench(fn, max(warmup_ms, 1e-9), rep_ms, min_calls=3, max_calls=1000)


# --------------------------------------------------------------------------- modes


def bundled_plan(op: str, args: tuple):
    """The bundled kernel's plan for ``args`` and the row fields that record it."""
    from . import row_plan

    plan = row_plan.plan_row(op, *args)
    return plan, {"plan": {"block": plan.block, "num_warps": plan.num_warps,
                           "limit": plan.limit.key if plan.limit else None,
                           "form": plan.form, "chunk": plan.chunk, "row_stats": plan.row_stats,
                           "n_chunks": plan.n_chunks, "row_guard": plan.row_guard,
                           "stream_out": plan.stream_out}}


def prepare(mode: str, op: str, args: tuple) -> tuple[Callable | None, object, dict]:
    """(callable, first output, extra row fields) of a mode; the compile and the first call
    (where Inductor compiles and tunes) happen here. A refused bundled plan gives no callable."""
    if mode == "bundled":
        plan, info = bundled_plan(op, args)
        if not plan.use_kernel:
            return None, None, dict(info, status="refused", reason=plan.reason)
        fn = bundled_fn(op, plan.limit)
        return fn, fn(*args), info
    if mode == "eager":
        fn = torch_fn(op)
        return fn, fn(*args), {}
    return compiled(mode, op, lambda fn: fn(*args))


def compiled(mode: str, op: str, first: Callable) -> tuple[Callable, object, dict]:
    """(compiled torch op, ``first(fn)``, extra row fields) of an Inductor mode; ``first`` runs
    inside the mode's config patch, since Inductor compiles (and tunes) lazily on first use."""
    import torch

    if mode not in INDUCTOR_MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    torch._dynamo.reset()             # each mode compiles anew, not from the previous mode's graph
    opts = {"mode": "max-autotune-no-cudagraphs"} if mode == "max_autotune" else {}
    # Set both ways, so that a TORCHINDUCTOR_* setting in the environment cannot leak across modes.
    patch = {"coordinate_descent_tuning": mode == "coordinate_descent"}
    if mode != "max_autotune":
        patch["max_autotune"] = False
    t0 = time.perf_counter()
    with torch._inductor.config.patch(patch):
        fn = torch.compile(torch_fn(op), dynamic=False, **opts)
        out = first(fn)
    return fn, out, {"first_call_s": round(time.perf_counter() - t0, 3)}


def _bwd_counts_added(before: dict) -> list[str]:
    from . import rowkernels as rk

    return sorted(k for k, v in rk.call_counts().items() if "_bwd: " in k and v > before.get(k, 0))


def prepare_bwd(mode: str, op: str, args: tuple, dy) -> tuple[Callable | None, tuple | None, dict]:
    """(timed backward call, first gradients, extra row fields) of a mode. The forward runs once
    here; the timed call is the backward alone on the retained graph. The bundled mode runs the
    one-pass backward kernel (forced through ``rowkernels.use_backward``, the previous choice
    restored after each call); a bundled forward plan that is refused, or a backward that did
    not run the kernel, gives no callable."""
    import torch

    from . import rowkernels as rk

    leaves = leaves_of(args)
    state = {}

    def first(fn):
        state["y"] = fn(*leaves)
        return torch.autograd.grad(state["y"], leaves, dy, retain_graph=True)

    if mode == "bundled":
        plan, info = bundled_plan(op, args)
        if not plan.use_kernel:
            return None, None, dict(info, status="refused", reason=plan.reason)
        before = rk.call_counts()
        with torch.enable_grad(), rk.use_backward("kernel"):
            grads = first(differentiable_fn(op))
        ran = _bwd_counts_added(before)
        info["plan"]["backward"] = ran
        if ran != [f"{op}_bwd: kernel"]:  # the kernel must be what gets timed
            return None, None, dict(info, status="refused", reason=f"backward ran {', '.join(ran) or 'nothing'}")
        y = state["y"]

        def timed():
            with rk.use_backward("kernel"):   # each timed call, not only the first
                return torch.autograd.grad(y, leaves, dy, retain_graph=True)
        return timed, grads, info
    if mode == "eager":
        with torch.enable_grad():
            grads, info = first(torch_fn(op)), {}
    else:
        with torch.enable_grad():
            _, grads, info = compiled(mode, op, first)
    y = state["y"]
    return (lambda: torch.autograd.grad(y, leaves, dy, retain_graph=True)), grads, info


def run_mode(mode: str, op: str, dtype: str, args: tuple, ref, *, peak_gbps: float | None,
             warmup_ms: float, rep_ms: float, on_gpu: bool, dy=None) -> dict:
    """One row of the sweep: status, time, bandwidth, correctness; exceptions become ``failed``.
    With ``dy`` the row is the backward (``ref`` the reference gradients)."""
    x = args[0]
    bwd = dy is not None
    row = {k: None for k in ROW_KEYS}
    row.update(op=op, dtype=dtype, n_cols=int(x.shape[-1]), n_rows=int(x.shape[0]), mode=mode,
               direction="bwd" if bwd else "fwd", status="ok",
               bytes=moved_bytes_bwd(op, args) if bwd else moved_bytes(args))
    try:
        if bwd:
            timed, grads, extra = prepare_bwd(mode, op, args, dy)
        else:
            fn, out, extra = prepare(mode, op, args)
            timed = fn and (lambda: fn(*args))
        row.update(extra)
        if timed is None:
            return row
        if bwd:
            row["correct"], row["max_abs_err"], row["grad_errors"] = check_grads(grads, ref, dtype)
            del grads
        else:
            row["correct"], row["max_abs_err"] = check(out, ref, dtype)
            del out
        row["ms"] = time_ms(timed, warmup_ms, rep_ms, on_gpu)
    except Exception as exc:  # one mode's failure must not end the sweep
        row.update(status="failed", reason=first_line(exc))
        return row
    row["gbps"] = row["bytes"] / (row["ms"] * 1e-3) / 1e9 if row["ms"] > 0 else None
    if peak_gbps and row["gbps"]:
        row["pct_of_copy"] = 100.0 * row["gbps"] / peak_gbps
    return row


def _vs_default(rows: list[dict]) -> None:
    """``x_vs_inductor_default`` = Inductor default ms / this mode's ms (above 1: faster)."""
    base = next((r["ms"] for r in rows if r["mode"] == "inductor_default" and r["ms"]), None)
    for r in rows:
        r["x_vs_inductor_default"] = base / r["ms"] if base and r["ms"] else None


def device_info(on_gpu: bool) -> dict:
    from . import row_plan

    if on_gpu:
        from ..measure.peaks import current_device

        return current_device()
    return {"name": "cpu", "backend": "cpu", "arch": None, "interpreter": row_plan.interpreting()}


# --------------------------------------------------------------------------- the sweep


def shape_for(n_cols: int, elements: int = DEFAULT_ELEMENTS, rows: int | None = None) -> tuple[int, int]:
    """(n_rows, n_cols): ``rows`` when given, else ``elements // n_cols`` (at least 1)."""
    return (rows if rows else max(1, elements // n_cols)), n_cols


def run_case(op: str, dtype: str, n_cols: int, modes: Iterable[str], *, elements: int,
             rows: int | None, peak_gbps: float | None, warmup_ms: float, rep_ms: float,
             on_gpu: bool, seed: int = 0, direction: str = "fwd") -> list[dict]:
    """Every mode on one (op, dtype, n_cols) input in one direction, against one reference."""
    from . import rowkernels as rk

    n_rows, _ = shape_for(n_cols, elements, rows)
    args = make_inputs(op, dtype, n_rows, n_cols, "cuda" if on_gpu else "cpu", seed)
    dy = make_grad_out(args[0], seed) if direction == "bwd" else None
    ref = rk.REFERENCES[op](*args) if dy is None else reference_grads(op, args, dy)
    out = [run_mode(m, op, dtype, args, ref, peak_gbps=peak_gbps, warmup_ms=warmup_ms,
                    rep_ms=rep_ms, on_gpu=on_gpu, dy=dy) for m in modes]
    _vs_default(out)
    return out


def _skipped(op, dtype, n_cols, n_rows, modes, why, direction="fwd") -> list[dict]:
    return [dict({k: None for k in ROW_KEYS}, op=op, dtype=dtype, n_cols=n_cols, n_rows=n_rows,
                 mode=m, direction=direction, status="skipped", reason=why) for m in modes]


def sweep(ops: Iterable[str] = OPS, dtypes: Iterable[str] = DEFAULT_DTYPES,
          cols: Iterable[int] = DEFAULT_COLS, modes: Iterable[str] = DEFAULT_MODES, *,
          elements: int = DEFAULT_ELEMENTS, rows: int | None = None,
          peak_gbps: float | None = None, peak: dict | None = None,
          warmup_ms: float = 25.0, rep_ms: float = 100.0, budget_s: float | None = None,
          progress: Callable[[dict], None] | None = None,
          directions: Iterable[str] = DEFAULT_DIRECTIONS) -> dict:
    """The ``rowkernel_sweep/1`` payload. ``peak`` (a :func:`tko.measure.peaks.lookup` result) is kept
    as the peak's provenance; ``budget_s`` skips the cases that would start after it; each
    (op, dtype, n_cols) runs in every one of ``directions`` (``fwd``, ``bwd``)."""
    from ..measure.bench import timing_unavailable_reason

    ops, dtypes, cols, modes = list(ops), list(dtypes), [int(c) for c in cols], list(modes)
    directions = list(directions)
    for name, got, known in (("op", ops, OPS), ("dtype", dtypes, DTYPE_NAMES), ("mode", modes, MODES),
                             ("direction", directions, DIRECTIONS)):
        bad = [g for g in got if g not in known]
        if bad:
            raise ValueError(f"unknown {name} {bad[0]!r}; one of {', '.join(known)}")
    on_gpu = timing_unavailable_reason() is None
    t0, out = time.perf_counter(), []
    for op, dtype, n, direction in ((o, d, n, r) for o in ops for d in dtypes for n in cols
                                    for r in directions):
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            case = _skipped(op, dtype, n, shape_for(n, elements, rows)[0], modes,
                            f"time budget of {budget_s:g} s spent", direction)
        else:
            case = run_case(op, dtype, n, modes, elements=elements, rows=rows, peak_gbps=peak_gbps,
                            warmup_ms=warmup_ms, rep_ms=rep_ms, on_gpu=on_gpu, direction=direction)
        for r in case:
            if progress:
                progress(r)
        out.extend(case)
    settings = {"ops": ops, "dtypes": dtypes, "cols": cols, "modes": modes, "elements": elements,
                "rows": rows, "warmup_ms": warmup_ms, "rep_ms": rep_ms, "budget_s": budget_s,
                "tolerance": TOLERANCE, "bytes": BYTES_FWD, "directions": directions}
    if "bwd" in directions:
        settings.update(bytes_bwd=BYTES_BWD, bwd_timing=BWD_TIMING)
    payload = {"device": device_info(on_gpu), "timer": timer_label(),
               "peak": {"copy_gbps": peak_gbps, "lookup": peak}, "settings": settings, "rows": out}
    payload["comparison"] = compare(payload)
    return payload


def _direction(r: dict) -> str:
    return r.get("direction") or "fwd"        # payloads from before backward rows: forward


def _timed(r: dict) -> bool:
    return r.get("status") == "ok" and bool(r.get("ms")) and r.get("correct") is True


def compare(payload: dict) -> list[dict]:
    """Per (op, dtype, n_cols, direction): the fastest correct Inductor mode and whether the
    bundled kernel beats every Inductor mode by more than :func:`beat_margin` (None when nothing
    to compare). A case whose every row was skipped (the time budget) says ``not run: <why>``."""
    cases: dict[tuple, list[dict]] = {}
    for r in payload["rows"]:
        cases.setdefault((r["op"], r["dtype"], r["n_cols"], _direction(r)), []).append(r)
    out = []
    for (op, dtype, n, direction), rows in cases.items():
        ind = [r for r in rows if r["mode"] in INDUCTOR_MODES and _timed(r)]
        best = min(ind, key=lambda r: r["ms"]) if ind else None
        b = next((r for r in rows if r["mode"] == "bundled"), None)
        entry = {"op": op, "dtype": dtype, "n_cols": n, "direction": direction,
                 "best_inductor_mode": best and best["mode"],
                 "best_inductor_ms": best and best["ms"],
                 "best_inductor_pct_of_copy": best and best["pct_of_copy"],
                 "bundled_status": b and b["status"], "bundled_ms": b and b["ms"],
                 "bundled_pct_of_copy": b and b["pct_of_copy"], "bundled_correct": b and b["correct"],
                 "bundled_speedup": None, "bundled_beats_inductor": None}
        if all(r["status"] == "skipped" for r in rows):
            why = "; ".join(dict.fromkeys(r.get("reason") or "skipped" for r in rows))
            entry["verdict"] = f"not run: {why}"
        elif b is None or best is None:
            entry["verdict"] = ("no bundled row" if b is None else "no Inductor mode timed correctly"
                                if any(r["mode"] in INDUCTOR_MODES for r in rows) else "no Inductor mode run")
        elif not _timed(b):
            entry["bundled_beats_inductor"] = False
            why = "incorrect" if b["status"] == "ok" and b["ms"] else f"{b['status']}: {b['reason']}"
            entry["verdict"] = f"bundled {why}"
        else:
            entry["bundled_speedup"] = best["ms"] / b["ms"]
            entry["bundled_beats_inductor"] = b["ms"] * (1 + beat_margin()) < best["ms"]
            entry["verdict"] = _verdict(entry["bundled_speedup"], best["mode"])
        out.append(entry)
    return out


def _verdict(speedup: float, mode: str) -> str:
    margin = beat_margin()
    if speedup > 1 + margin:
        return f"bundled {speedup:.2f}x faster than the best Inductor mode ({mode})"
    if speedup < 1 / (1 + margin):
        return f"{mode} {1 / speedup:.2f}x faster than bundled"
    return f"within {100 * margin:g} % of {mode}"


# --------------------------------------------------------------------------- Markdown


def _f(value, fmt: str = ".3f", suffix: str = "") -> str:
    return "" if not isinstance(value, (int, float)) or isinstance(value, bool) \
        else f"{value:{fmt}}{suffix}"


def _yes(value) -> str:
    return "" if value is None else ("yes" if value else "**no**")


RUN_COLUMNS = ["op", "dtype", "n_cols", "n_rows", "mode", "status", "ms", "GB/s", "% of copy", "x vs default",
               "correct", "max abs err", "reason"]
RUN_HEADER = md.table(RUN_COLUMNS, [])[0]  # the line a reader finds the runs table by


def runs_table(rows: list[dict]) -> list[str]:
    """The runs table: a header, its rule, one line per row."""
    return md.table(RUN_COLUMNS, [
        [md.text(r["op"]), md.text(r["dtype"]), str(r["n_cols"]), str(r["n_rows"]), md.text(r["mode"]),
         md.text(r["status"]), _f(r["ms"], ".4f"), _f(r["gbps"], ".1f"), _f(r["pct_of_copy"], ".1f", " %"),
         _f(r["x_vs_inductor_default"], ".2f", "x"), _yes(r["correct"]), _f(r["max_abs_err"], ".2e"),
         md.text(r["reason"], 160)] for r in rows])


def comparison_table(entries: list[dict]) -> list[str]:
    rows = []
    for e in entries:
        beats = "" if e["bundled_beats_inductor"] is None else ("yes" if e["bundled_beats_inductor"] else "no")
        rows.append([md.text(e["op"]), md.text(e["dtype"]), e["n_cols"], _f(e["bundled_pct_of_copy"], ".1f", " %"),
                     md.text(e["best_inductor_mode"] or ""), _f(e["best_inductor_pct_of_copy"], ".1f", " %"),
                     _f(e["bundled_speedup"], ".2f", "x"), beats, md.text(e["verdict"], 200)])
    return md.table(["op", "dtype", "n_cols", "bundled % of copy", "best Inductor", "its % of copy",
                     "bundled speedup", "bundled beats Inductor", "verdict"], rows)


# Section titles per direction; the forward ones are the titles of a forward-only report.
SECTION_SUFFIX = {"fwd": "", "bwd": ", backward"}


def _bytes_sentence(s: dict, directions: list[str]) -> str:
    if "bwd" not in directions:
        return f"Bytes: {md.text(s['bytes'])}."
    sentence = f"Backward times {md.text(s.get('bwd_timing') or BWD_TIMING)}; its bytes: " \
               f"{md.text(s.get('bytes_bwd') or BYTES_BWD)}."
    return (f"Bytes: forward: {md.text(s['bytes'])}. " if "fwd" in directions else "") + sentence


def markdown(payload: dict) -> str:
    """The report: device, peak and timer, the comparisons, then the runs tables last (per
    direction, forward first)."""
    dev, peak = payload["device"], payload["peak"]
    where = (peak.get("lookup") or {}).get("where") if isinstance(peak.get("lookup"), dict) else None
    peak_line = (f"copy peak {peak['copy_gbps']:.1f} GB/s" + (f" ({md.text(where)})" if where else "")
                 if peak.get("copy_gbps") else "no copy peak known: % of copy is left empty")
    s = payload["settings"]
    directions = [d for d in DIRECTIONS if any(_direction(r) == d for r in payload["rows"])] or ["fwd"]
    lines = ["# Row kernels vs Inductor", "",
             f"Device {md.text(dev.get('name'))} ({md.text(dev.get('arch') or dev.get('backend'))}); "
             f"{peak_line}; timer: {md.text(payload['timer'])}. {_bytes_sentence(s, directions)} "
             f"Bundled beats Inductor when it is more than {100 * beat_margin():g} % faster than every "
             "correct Inductor mode."]
    entries = payload.get("comparison") or compare(payload)
    for d in directions:
        lines += ["", f"## Bundled vs the best Inductor mode{SECTION_SUFFIX[d]}", ""]
        lines += comparison_table([e for e in entries if (e.get("direction") or "fwd") == d])
    for d in directions:
        lines += ["", f"## Runs{SECTION_SUFFIX[d]}", ""]
        lines += runs_table([r for r in payload["rows"] if _direction(r) == d])
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- SVG

MODE_COLORS = {"bundled": "#c0392b", "inductor_default": "#2980b9", "max_autotune": "#8e44ad",
               "coordinate_descent": "#27ae60", "eager": "#7f8c8d"}
PANEL_W, PANEL_H, PAD_L, PAD_B, PAD_T = 380, 230, 52, 34, 26


def _cols_label(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


BWD_DASH = "6,4"                                         # backward series are dashed


def _series(mode: str, direction: str, pts: dict, cols: list[int], px, py) -> list[str]:
    """One mode's line in one direction (a gap where it has no timed point), a circle per point;
    backward lines are dashed and carry ``data-direction``."""
    d, pen = [], "M"
    for n in cols:
        if n not in pts:
            pen = "M"
            continue
        d.append(f"{pen}{px(n):.1f},{py(pts[n]):.1f}")
        pen = "L"
    color = MODE_COLORS.get(mode, "#333")
    extra = f' data-direction="bwd" stroke-dasharray="{BWD_DASH}"' if direction == "bwd" else ""
    tag = ' data-direction="bwd"' if direction == "bwd" else ""
    return [f'<path class="series" data-mode={_attr(mode)}{extra} d="{" ".join(d)}" fill="none" '
            f'stroke="{color}" stroke-width="2"/>'] + [
        f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="3" fill="{color}" data-mode={_attr(mode)}{tag} '
        f'data-n-cols="{n}" data-value="{v:.6g}"/>' for n, v in sorted(pts.items())]


def _panel(op: str, dtype: str, rows: list[dict], modes: list[str], cols: list[int],
           key: str, ymax: float, x0: float, y0: float, directions=("fwd",)) -> list[str]:
    """One op/dtype panel: axes, ticks, one ``path.series`` per mode and direction, a circle
    per point."""
    from ..base.svg_chart import FONT, text

    pw, ph = PANEL_W - PAD_L - 12, PANEL_H - PAD_T - PAD_B
    lo, hi = math.log2(min(cols)), math.log2(max(cols))

    def px(n):
        return x0 + PAD_L + (pw * (math.log2(n) - lo) / (hi - lo) if hi > lo else pw / 2)

    def py(v):
        return y0 + PAD_T + ph * (1 - min(v, ymax) / ymax)

    body = [f'<g class="panel" data-op={_attr(op)} data-dtype={_attr(dtype)}>',
            f'<text x="{x0 + PAD_L}" y="{y0 + 16}" {FONT} font-weight="bold">{text(op)} {text(dtype)}</text>',
            f'<rect x="{x0 + PAD_L}" y="{y0 + PAD_T}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>']
    for i in range(5):
        v = ymax * i / 4
        body.append(f'<text x="{x0 + PAD_L - 4}" y="{py(v) + 4:.1f}" text-anchor="end" {FONT}>{v:.0f}</text>')
    for n in cols:
        body.append(f'<text x="{px(n):.1f}" y="{y0 + PAD_T + ph + 16}" text-anchor="middle" {FONT}>'
                    f'{text(_cols_label(n))}</text>')
    for direction in directions:
        for mode in modes:
            pts = {r["n_cols"]: r[key] for r in rows if r["mode"] == mode and _direction(r) == direction
                   and _timed(r) and isinstance(r.get(key), (int, float))}
            body += _series(mode, direction, pts, cols, px, py)
    return body + ["</g>"]


def _attr(value) -> str:
    from xml.sax.saxutils import quoteattr

    return quoteattr(str(value))


def svg(payload: dict) -> str:
    """% of copy (GB/s when no peak is known) against row length: one panel per op and dtype
    (ops down, dtypes across), one line per mode and direction (backward dashed), a shared
    legend."""
    from ..base.svg_chart import FONT, _svg, text

    rows = payload["rows"]
    key = "pct_of_copy" if payload["peak"].get("copy_gbps") else "gbps"
    ops = list(dict.fromkeys(r["op"] for r in rows))
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    directions = [d for d in DIRECTIONS if any(_direction(r) == d for r in rows)] or ["fwd"]
    cols = sorted({r["n_cols"] for r in rows}) or [1]
    values = [r[key] for r in rows if _timed(r) and isinstance(r.get(key), (int, float))]
    top = max(values, default=0.0)
    ymax = max(100.0, top) if key == "pct_of_copy" else max(top, 1.0)
    ymax = math.ceil(ymax * 1.05 / 20) * 20 if key == "pct_of_copy" else ymax * 1.05
    legend_h = 44
    body = [f'<text x="8" y="18" {FONT} font-weight="bold">'
            f'{"% of copy peak" if key == "pct_of_copy" else "GB/s (no copy peak known)"} vs row length</text>']
    for i, mode in enumerate(modes):
        x = 8 + 170 * i
        body.append(f'<g class="legend" data-mode={_attr(mode)}><line x1="{x}" y1="33" x2="{x + 20}" y2="33" '
                    f'stroke="{MODE_COLORS.get(mode, "#333")}" stroke-width="3"/>'
                    f'<text x="{x + 26}" y="37" {FONT}>{text(mode)}</text></g>')
    keys = len(modes)
    if "bwd" in directions:
        x, keys = 8 + 170 * len(modes), keys + 1
        body.append(f'<g class="legend" data-direction="bwd"><line x1="{x}" y1="33" x2="{x + 20}" y2="33" '
                    f'stroke="#333" stroke-width="3" stroke-dasharray="{BWD_DASH}"/>'
                    f'<text x="{x + 26}" y="37" {FONT}>backward (dashed)</text></g>')
    for i, op in enumerate(ops):
        for j, dtype in enumerate(dtypes):
            sub = [r for r in rows if r["op"] == op and r["dtype"] == dtype]
            body += _panel(op, dtype, sub, modes, cols, key, ymax, j * PANEL_W, legend_h + i * PANEL_H,
                           directions)
    width, height = max(1, len(dtypes)) * PANEL_W, legend_h + max(1, len(ops)) * PANEL_H
    return _svg(max(width, 8 + 170 * keys), height, "row kernels vs Inductor", body)
