"""Size sweep of the bundled one-pass row kernels against Inductor (``rowkernel_sweep/1``).

For each op of :mod:`tko.rowkernels` (softmax, log_softmax, layer_norm, rms_norm), dtype and row
length ``n_cols`` (``n_rows = elements // n_cols``), every mode is run on the same input:

- ``bundled``: ``rowkernels.<op>``; a refused :class:`~tko.rowkernels.RowPlan` is recorded as
  ``refused`` with its reason and not timed (its output would be the torch reference);
- ``inductor_default`` / ``max_autotune`` / ``coordinate_descent``: ``torch.compile`` of the plain
  torch op (default mode, ``max-autotune-no-cudagraphs``, default mode with
  ``coordinate_descent_tuning`` patched around the compile and the first call, where Inductor
  compiles and tunes), after ``torch._dynamo.reset()`` so that each mode compiles anew;
- ``eager``: the plain torch op without compiling (a baseline; what CPU tests can afford).

Times are ``triton.testing.do_bench`` medians on a GPU; without one (or in the Triton
interpreter) a CPU wall-clock median, and the payload's ``timer`` says so. Bytes are the one-pass
floor: the input read once, the output written once, weight and bias once; ``pct_of_copy`` is
that over the time, against the copy peak passed in. Each output is checked against the fp32
reference ``rowkernels.<op>_ref``; a mode that raises is ``failed`` and the sweep goes on.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Iterable

from . import markdown as md

SCHEMA = "rowkernel_sweep/1"
OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm")
INDUCTOR_MODES = ("inductor_default", "max_autotune", "coordinate_descent")
DEFAULT_MODES = ("bundled",) + INDUCTOR_MODES
MODES = DEFAULT_MODES + ("eager",)
DTYPE_NAMES = ("fp16", "bf16", "fp32")
DEFAULT_DTYPES = ("fp16", "bf16")
DEFAULT_COLS = tuple(1 << k for k in range(10, 17))      # 1k .. 64k
DEFAULT_ELEMENTS = 1 << 27
LN_EPS, RMS_EPS = 1e-5, 1e-6                             # the defaults of tko.rowkernels
# Output-dtype tolerances: about one rounding of the stored result (fp16 ulp 2^-10, bf16 2^-7).
TOLERANCE = {"fp16": dict(rtol=1e-3, atol=1e-3), "bf16": dict(rtol=1.6e-2, atol=1.6e-2),
             "fp32": dict(rtol=1e-5, atol=1e-5)}
BEAT_MARGIN = 0.02                                       # bundled must be >2 % faster to "beat"
ROW_KEYS = ("op", "dtype", "n_cols", "n_rows", "mode", "status", "reason", "ms", "gbps",
            "pct_of_copy", "correct", "max_abs_err", "x_vs_inductor_default")


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


def moved_bytes(args: tuple) -> int:
    """One-pass floor: every argument read once plus the output (the input's size) written once."""
    x = args[0]
    return sum(a.numel() * a.element_size() for a in args) + x.numel() * x.element_size()


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
    from .bench import timing_unavailable_reason

    why = timing_unavailable_reason()
    return "triton.testing.do_bench median" if why is None else f"cpu wall clock median ({why})"


def time_ms(fn: Callable, warmup_ms: float, rep_ms: float, on_gpu: bool) -> float:
    if on_gpu:
        from .bench import time_fn

        return time_fn(fn, warmup_ms=warmup_ms, rep_ms=rep_ms).median_ms
    from .bench import cpu_wall_bench

    # always one untimed call first, even at warm-up 0
    return cpu_wall_bench(fn, max(warmup_ms, 1e-9), rep_ms, min_calls=3, max_calls=1000)


# --------------------------------------------------------------------------- modes


def prepare(mode: str, op: str, args: tuple) -> tuple[Callable | None, object, dict]:
    """(callable, first output, extra row fields) of a mode; the compile and the first call
    (where Inductor compiles and tunes) happen here. A refused bundled plan gives no callable."""
    import torch

    from . import rowkernels as rk

    if mode == "bundled":
        plan = rk.plan_row(op, *args)
        info = {"plan": {"block": plan.block, "num_warps": plan.num_warps,
                         "limit": plan.limit.key if plan.limit else None}}
        if not plan.use_kernel:
            return None, None, dict(info, status="refused", reason=plan.reason)
        fn = bundled_fn(op, plan.limit)
        return fn, fn(*args), info
    if mode == "eager":
        fn = torch_fn(op)
        return fn, fn(*args), {}
    if mode not in INDUCTOR_MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    torch._dynamo.reset()             # each mode compiles anew, not from the previous mode's graph
    opts = {"mode": "max-autotune-no-cudagraphs"} if mode == "max_autotune" else {}
    # Set both ways, so that a TORCHINDUCTOR_* setting in the environment cannot leak across modes.
    patch = {"coordinate_descent_tuning": mode == "coordinate_descent"}
    if mode != "max_autotune":
        patch["max_autotune"] = False
    t0 = time.perf_counter()
    with torch._inductor.config.patch(patch):   # compilation is lazy: the first call is inside
        fn = torch.compile(torch_fn(op), dynamic=False, **opts)
        out = fn(*args)
    return fn, out, {"first_call_s": round(time.perf_counter() - t0, 3)}


def run_mode(mode: str, op: str, dtype: str, args: tuple, ref, *, peak_gbps: float | None,
             warmup_ms: float, rep_ms: float, on_gpu: bool) -> dict:
    """One row of the sweep: status, time, bandwidth, correctness; exceptions become ``failed``."""
    x = args[0]
    row = {k: None for k in ROW_KEYS}
    row.update(op=op, dtype=dtype, n_cols=int(x.shape[-1]), n_rows=int(x.shape[0]), mode=mode,
               status="ok", bytes=moved_bytes(args))
    try:
        fn, out, extra = prepare(mode, op, args)
        row.update(extra)
        if fn is None:
            return row
        row["correct"], row["max_abs_err"] = check(out, ref, dtype)
        del out
        row["ms"] = time_ms(lambda: fn(*args), warmup_ms, rep_ms, on_gpu)
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
    from . import rowkernels as rk

    if on_gpu:
        from .peaks import current_device

        return current_device()
    return {"name": "cpu", "backend": "cpu", "arch": None, "interpreter": rk.interpreting()}


# --------------------------------------------------------------------------- the sweep


def shape_for(n_cols: int, elements: int = DEFAULT_ELEMENTS, rows: int | None = None) -> tuple[int, int]:
    """(n_rows, n_cols): ``rows`` when given, else ``elements // n_cols`` (at least 1)."""
    return (rows if rows else max(1, elements // n_cols)), n_cols


def run_case(op: str, dtype: str, n_cols: int, modes: Iterable[str], *, elements: int,
             rows: int | None, peak_gbps: float | None, warmup_ms: float, rep_ms: float,
             on_gpu: bool, seed: int = 0) -> list[dict]:
    """Every mode on one (op, dtype, n_cols) input, against one reference."""
    from . import rowkernels as rk

    n_rows, _ = shape_for(n_cols, elements, rows)
    args = make_inputs(op, dtype, n_rows, n_cols, "cuda" if on_gpu else "cpu", seed)
    ref = rk.REFERENCES[op](*args)
    out = [run_mode(m, op, dtype, args, ref, peak_gbps=peak_gbps, warmup_ms=warmup_ms,
                    rep_ms=rep_ms, on_gpu=on_gpu) for m in modes]
    _vs_default(out)
    return out


def _skipped(op, dtype, n_cols, n_rows, modes, why) -> list[dict]:
    return [dict({k: None for k in ROW_KEYS}, op=op, dtype=dtype, n_cols=n_cols, n_rows=n_rows,
                 mode=m, status="skipped", reason=why) for m in modes]


def sweep(ops: Iterable[str] = OPS, dtypes: Iterable[str] = DEFAULT_DTYPES,
          cols: Iterable[int] = DEFAULT_COLS, modes: Iterable[str] = DEFAULT_MODES, *,
          elements: int = DEFAULT_ELEMENTS, rows: int | None = None,
          peak_gbps: float | None = None, peak: dict | None = None,
          warmup_ms: float = 25.0, rep_ms: float = 100.0, budget_s: float | None = None,
          progress: Callable[[dict], None] | None = None) -> dict:
    """The ``rowkernel_sweep/1`` payload. ``peak`` (a :func:`tko.peaks.lookup` result) is kept
    as the peak's provenance; ``budget_s`` skips the cases that would start after it."""
    from .bench import timing_unavailable_reason

    ops, dtypes, cols, modes = list(ops), list(dtypes), [int(c) for c in cols], list(modes)
    for name, got, known in (("op", ops, OPS), ("dtype", dtypes, DTYPE_NAMES), ("mode", modes, MODES)):
        bad = [g for g in got if g not in known]
        if bad:
            raise ValueError(f"unknown {name} {bad[0]!r}; one of {', '.join(known)}")
    on_gpu = timing_unavailable_reason() is None
    t0, out = time.perf_counter(), []
    for op in ops:
        for dtype in dtypes:
            for n in cols:
                if budget_s is not None and time.perf_counter() - t0 > budget_s:
                    case = _skipped(op, dtype, n, shape_for(n, elements, rows)[0], modes,
                                    f"time budget of {budget_s:g} s spent")
                else:
                    case = run_case(op, dtype, n, modes, elements=elements, rows=rows,
                                    peak_gbps=peak_gbps, warmup_ms=warmup_ms, rep_ms=rep_ms,
                                    on_gpu=on_gpu)
                for r in case:
                    if progress:
                        progress(r)
                out.extend(case)
    payload = {"device": device_info(on_gpu), "timer": timer_label(),
               "peak": {"copy_gbps": peak_gbps, "lookup": peak},
               "settings": {"ops": ops, "dtypes": dtypes, "cols": cols, "modes": modes,
                            "elements": elements, "rows": rows, "warmup_ms": warmup_ms,
                            "rep_ms": rep_ms, "budget_s": budget_s, "tolerance": TOLERANCE,
                            "bytes": "input read once + output written once + weight/bias once"},
               "rows": out}
    payload["comparison"] = compare(payload)
    return payload


def _timed(r: dict) -> bool:
    return r.get("status") == "ok" and bool(r.get("ms")) and r.get("correct") is True


def compare(payload: dict) -> list[dict]:
    """Per (op, dtype, n_cols): the fastest correct Inductor mode and whether the bundled kernel
    beats every Inductor mode by more than :data:`BEAT_MARGIN` (None when nothing to compare)."""
    cases: dict[tuple, list[dict]] = {}
    for r in payload["rows"]:
        cases.setdefault((r["op"], r["dtype"], r["n_cols"]), []).append(r)
    out = []
    for (op, dtype, n), rows in cases.items():
        ind = [r for r in rows if r["mode"] in INDUCTOR_MODES and _timed(r)]
        best = min(ind, key=lambda r: r["ms"]) if ind else None
        b = next((r for r in rows if r["mode"] == "bundled"), None)
        entry = {"op": op, "dtype": dtype, "n_cols": n, "best_inductor_mode": best and best["mode"],
                 "best_inductor_ms": best and best["ms"],
                 "best_inductor_pct_of_copy": best and best["pct_of_copy"],
                 "bundled_status": b and b["status"], "bundled_ms": b and b["ms"],
                 "bundled_pct_of_copy": b and b["pct_of_copy"], "bundled_correct": b and b["correct"],
                 "bundled_speedup": None, "bundled_beats_inductor": None}
        if b is None or best is None:
            entry["verdict"] = ("no bundled row" if b is None else "no Inductor mode timed correctly"
                                if any(r["mode"] in INDUCTOR_MODES for r in rows) else "no Inductor mode run")
        elif not _timed(b):
            entry["bundled_beats_inductor"] = False
            why = "incorrect" if b["status"] == "ok" and b["ms"] else f"{b['status']}: {b['reason']}"
            entry["verdict"] = f"bundled {why}"
        else:
            entry["bundled_speedup"] = best["ms"] / b["ms"]
            entry["bundled_beats_inductor"] = b["ms"] * (1 + BEAT_MARGIN) < best["ms"]
            entry["verdict"] = _verdict(entry["bundled_speedup"], best["mode"])
        out.append(entry)
    return out


def _verdict(speedup: float, mode: str) -> str:
    if speedup > 1 + BEAT_MARGIN:
        return f"bundled {speedup:.2f}x faster than the best Inductor mode ({mode})"
    if speedup < 1 / (1 + BEAT_MARGIN):
        return f"{mode} {1 / speedup:.2f}x faster than bundled"
    return f"within {100 * BEAT_MARGIN:g} % of {mode}"


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


def markdown(payload: dict) -> str:
    """The report: device, peak and timer, the comparison, then the runs table last."""
    dev, peak = payload["device"], payload["peak"]
    where = (peak.get("lookup") or {}).get("where") if isinstance(peak.get("lookup"), dict) else None
    peak_line = (f"copy peak {peak['copy_gbps']:.1f} GB/s" + (f" ({md.text(where)})" if where else "")
                 if peak.get("copy_gbps") else "no copy peak known: % of copy is left empty")
    s = payload["settings"]
    lines = ["# Row kernels vs Inductor", "",
             f"Device {md.text(dev.get('name'))} ({md.text(dev.get('arch') or dev.get('backend'))}); "
             f"{peak_line}; timer: {md.text(payload['timer'])}. Bytes: {md.text(s['bytes'])}. "
             f"Bundled beats Inductor when it is more than {100 * BEAT_MARGIN:g} % faster than every "
             "correct Inductor mode.", "", "## Bundled vs the best Inductor mode", ""]
    lines += comparison_table(payload.get("comparison") or compare(payload))
    lines += ["", "## Runs", ""] + runs_table(payload["rows"])
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- SVG

MODE_COLORS = {"bundled": "#c0392b", "inductor_default": "#2980b9", "max_autotune": "#8e44ad",
               "coordinate_descent": "#27ae60", "eager": "#7f8c8d"}
PANEL_W, PANEL_H, PAD_L, PAD_B, PAD_T = 380, 230, 52, 34, 26


def _cols_label(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def _panel(op: str, dtype: str, rows: list[dict], modes: list[str], cols: list[int],
           key: str, ymax: float, x0: float, y0: float) -> list[str]:
    """One op/dtype panel: axes, ticks, one ``path.series`` per mode (a gap where a mode has
    no timed point), a circle per point."""
    from .svg_chart import FONT, text

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
    for mode in modes:
        pts = {r["n_cols"]: r[key] for r in rows if r["mode"] == mode and _timed(r)
               and isinstance(r.get(key), (int, float))}
        d, pen = [], "M"
        for n in cols:
            if n not in pts:
                pen = "M"
                continue
            d.append(f"{pen}{px(n):.1f},{py(pts[n]):.1f}")
            pen = "L"
        color = MODE_COLORS.get(mode, "#333")
        body.append(f'<path class="series" data-mode={_attr(mode)} d="{" ".join(d)}" fill="none" '
                    f'stroke="{color}" stroke-width="2"/>')
        body += [f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="3" fill="{color}" data-mode={_attr(mode)} '
                 f'data-n-cols="{n}" data-value="{v:.6g}"/>' for n, v in sorted(pts.items())]
    return body + ["</g>"]


def _attr(value) -> str:
    from xml.sax.saxutils import quoteattr

    return quoteattr(str(value))


def svg(payload: dict) -> str:
    """% of copy (GB/s when no peak is known) against row length: one panel per op and dtype
    (ops down, dtypes across), one line per mode, a shared legend."""
    from .svg_chart import FONT, _svg, text

    rows = payload["rows"]
    key = "pct_of_copy" if payload["peak"].get("copy_gbps") else "gbps"
    ops = list(dict.fromkeys(r["op"] for r in rows))
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
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
    for i, op in enumerate(ops):
        for j, dtype in enumerate(dtypes):
            sub = [r for r in rows if r["op"] == op and r["dtype"] == dtype]
            body += _panel(op, dtype, sub, modes, cols, key, ymax, j * PANEL_W, legend_h + i * PANEL_H)
    width, height = max(1, len(dtypes)) * PANEL_W, legend_h + max(1, len(ops)) * PANEL_H
    return _svg(max(width, 8 + 170 * len(modes)), height, "row kernels vs Inductor", body)
