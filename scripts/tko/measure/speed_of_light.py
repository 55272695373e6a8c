"""A kernel's speed of light, measured: kernel vs memory twin vs the copy floor.

Three times place a kernel:

- the **copy floor**: the time of a copy of the unique bytes it must move (``tko.measure.byte_model``),
  timed now on a GPU with the same byte count (a copy of under ~250 MB runs well below the 1 GiB
  copy peak: on an H200 a 34 MB copy at 60 % of it); offline, those bytes at the 1 GiB copy peak;
  for a multi-pass reduction also the **one-pass floor** (each input read once; the same bytes)
  beside the bytes its passes really read;
- the **memory twin** (``tko.measure.twins``): the same loads, stores, indices, loops and grid with the data
  arithmetic replaced by additions, timed on the captured inputs;
- the kernel itself.

:func:`classify` turns them into one class: ``at_floor`` (nothing left worth a rewrite),
``arithmetic_bound`` (the twin is near the floor and the kernel well above it: the costly ops are
named), ``access_pattern_bound`` (the twin itself is far from the floor: the likely causes from the
source and the arguments, each with the most its remedy can gain), ``matmul_bound`` (the kernel
calls ``tl.dot``: the matrix units, not memory, set its time, and a copy floor bounds nothing: its
headroom is what a sweep of its tiles or the library GEMM measures), or ``unmeasured`` (what is
missing, and what a GPU run would add).
"""

from __future__ import annotations

import math
from typing import Any

from ..base.artifact import positive_float

CLASSES = ("at_floor", "arithmetic_bound", "access_pattern_bound", "matmul_bound", "unmeasured")
THRESHOLD_NAMES = ("sol_at_floor_ratio", "sol_twin_near_floor_ratio", "sol_twin_gap_ratio",
                   "sol_above_peak_noise", "sol_min_waves")
# preferred timer first: device time with L2 flushed, as the copy peak was measured
TIMER_PREFERENCE = ("torch.profiler.l2_flushed", "triton.testing.do_bench", "torch.profiler",
                    "triton.testing.do_bench_cudagraph")
FLOOR_BYTES = (("copy", "unique_bytes"), ("one_pass", "one_pass_bytes"), ("passes", "multi_pass_bytes"))
FLOOR_BASES = ("size_matched_copy", "peak")
# the size-matched copy: short do_bench settings, float32 elements, a buffer of at least 4 KiB
MATCHED_DTYPE, MATCHED_ELEMENT, MATCHED_MIN_BUFFER = "float32", 4, 4096
MATCHED_WARMUP_MS, MATCHED_REP_MS = 20, 100
# under this many bytes a copy runs well below the 1 GiB copy peak (H200: 268 MB at 93 %, 134 MB at 86 %)
SMALL_COPY_BYTES = 250e6
MATCHED_KEYS = ("bytes_moved", "buffer_bytes", "median_ms", "p20_ms", "p80_ms", "copy_gbps", "dtype", "method",
                "measured_at")
GPU_RUN_ADDS = ("kernel and memory-twin device times (torch.profiler, L2 flushed; do_bench beside it)",
                "for a kernel that calls tl.dot, torch.matmul of the same shapes timed beside it",
                "the kernel's % of copy bandwidth under the unique bytes and under Inductor's estimate",
                "the class: at_floor, arithmetic_bound, access_pattern_bound or matmul_bound, with the gap in ms")


def thresholds_from_rules(rules: dict | None = None) -> dict[str, float]:
    """The ``sol_*`` thresholds of references/decision_rules.yaml (through tko.base.decide)."""
    from ..base.decide import load_rules
    from ..base.errors import InputError

    rules = rules if rules is not None else load_rules()
    table = rules.get("thresholds", {})
    missing = [n for n in THRESHOLD_NAMES if n not in table]
    if missing:
        raise InputError(f"decision rules lack the thresholds {', '.join(missing)}")
    return {n: float(table[n]["value"] if isinstance(table[n], dict) else table[n]) for n in THRESHOLD_NAMES}


def _ratio(a: float | None, b: float | None) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a <= 0 or b <= 0:
        return None
    return a / b


def _ms(nbytes: float | None, peak_gbps: float | None) -> float | None:
    if not nbytes or not peak_gbps:
        return None
    return nbytes / (peak_gbps * 1e9) * 1e3


def floor_bytes(model: dict) -> dict[str, float]:
    """The bytes each floor stands for: ``copy`` (unique bytes) and, for a multi-pass kernel,
    ``one_pass`` (each input read once) and ``passes`` (the passes as written)."""
    multi = (model.get("max_passes") or 0) > 1
    out = {}
    for name, key in FLOOR_BYTES:
        n = model.get(key)
        if (name == "copy" or multi) and isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0:
            out[name] = n
    return out


def floors(model: dict, peak_gbps: float | None, matched: dict | None = None) -> dict:
    """Copy floor, one-pass floor and the floor of the passes as written, in ms; pure.

    ``matched`` maps a floor (``copy``, ``one_pass``, ``passes``) to the record of a copy timed
    with the same bytes (``copy_gbps``; see :func:`size_matched_copies`): that floor is its bytes at
    that rate. A floor without one uses ``peak_gbps``, the 1 GiB copy peak, which a kernel moving
    under ~250 MB cannot reach. ``floor_rates`` says per floor which rate was used.
    """
    passes = model.get("max_passes") or 0
    multi = model.get("multi_pass_bytes")
    one = model.get("one_pass_bytes")
    matched = {k: v for k, v in (matched or {}).items() if isinstance(v, dict) and positive_float(v.get("copy_gbps"))}
    rates, ms = {}, {}
    for name, nbytes in floor_bytes(model).items():
        rec = matched.get(name)
        rate = positive_float(rec["copy_gbps"]) if rec else peak_gbps
        basis = "size_matched_copy" if rec else ("peak" if peak_gbps else None)
        rates[name] = {"basis": basis, "gbps": rate, "bytes": nbytes}
        ms[name] = _ms(nbytes, rate)
    size_matched = {k: v for k, v in matched.items() if k in rates}
    return {"peak_gbps": peak_gbps, "unique_bytes": model.get("unique_bytes"),
            "copy_floor_ms": ms.get("copy"),
            "one_pass_floor_ms": ms.get("one_pass"), "passes_floor_ms": ms.get("passes"),  # multi-pass only
            "copy_rate_basis": (rates.get("copy") or {}).get("basis"), "floor_rates": rates,
            "size_matched_copy": size_matched or None,
            "passes": passes, "multi_pass_bytes": multi if passes > 1 else None,
            "one_pass_bytes": one, "bytes_upper_bound": bool(model.get("upper_bound"))}


def size_matched_copies(model: dict) -> tuple[dict, list[str]]:
    """Time ``dst.copy_(src)`` moving each floor's bytes (``tko.measure.peaks.measure_copy``, short
    do_bench); ``({floor: record}, notes)``. A copy that fails leaves its floor on the peak, with a
    note; it never raises."""
    from . import peaks

    out, notes, done = {}, [], {}
    for name, nbytes in floor_bytes(model).items():
        # measure_copy's nbytes is the buffer: read once and written once, it moves twice that
        buffer = max(MATCHED_MIN_BUFFER, int(nbytes) // 2 // MATCHED_ELEMENT * MATCHED_ELEMENT)
        if buffer not in done:
            try:
                rec = peaks.measure_copy(buffer, dtype=MATCHED_DTYPE, warmup_ms=MATCHED_WARMUP_MS,
                                         rep_ms=MATCHED_REP_MS)
                done[buffer] = {key: rec.get(key) for key in MATCHED_KEYS}
                if not positive_float(done[buffer].get("copy_gbps")):
                    raise ValueError(f"copy_gbps {done[buffer].get('copy_gbps')!r} is not a positive number")
            except Exception as exc:
                done[buffer] = None
                why = (str(exc).splitlines() or [""])[0][:200]
                notes.append(f"the size-matched copy of {nbytes:.0f} bytes failed ({type(exc).__name__}: {why}); "
                             f"the floors of those bytes use the 1 GiB copy peak")
        if done[buffer]:
            out[name] = dict(done[buffer], bytes=nbytes, timer="triton.testing.do_bench")
    return out, notes


def peak_floor_note(fl: dict) -> str | None:
    """What a floor at the 1 GiB copy peak means for a kernel of this size."""
    if fl.get("copy_rate_basis") != "peak" or not fl.get("unique_bytes"):
        return None
    small = fl["unique_bytes"] < SMALL_COPY_BYTES
    return (f"copy floor: the unique bytes ({fl['unique_bytes'] / 1e6:.1f} MB) at the 1 GiB copy peak "
            f"({fl['peak_gbps']:.1f} GB/s); a kernel moving under ~250 MB cannot reach that rate, not even a plain "
            f"copy of its bytes (on an H200 a 34 MB copy runs at 60 % of it, a 134 MB copy at 86 %, 268 MB at 93 %)"
            + (", so this floor is too low" if small else "") + "; a GPU run times a copy of the same bytes instead")


# --------------------------------------------------------------------------- static facts

def static_facts(kernel: dict, model: dict, spec: dict, source: str = "") -> dict:
    """What the source and the captured arguments say about the access pattern (``dot``: the
    kernel's own function calls ``tl.dot``; a captured file may hold its module's other kernels)."""
    from ..read.triton_stack import kernel_uses_dot

    ops = kernel.get("memory_ops", [])
    grid = ((spec.get("configs") or [{}])[0] or {}).get("grid")
    device = (kernel.get("triton_meta") or {}).get("device")
    units = device.get("multi_processor_count") if isinstance(device, dict) else None
    strided = [a["name"] for a in model.get("args", []) if a["role"] not in (None, "unused")
               and not a.get("contiguous", True)]
    strided += [b for b in transposed_bases(ops) if b not in strided]
    return {
        "multi_pass": (model.get("max_passes") or 0) > 1 and bool(kernel.get("reductions")),
        "passes": model.get("passes") or {},
        "gather": sorted({b for o in ops if o.get("kind") == "gather" for b in o.get("bases", [])}),
        "scatter": sorted({b for o in ops if o.get("kind") == "scatter" for b in o.get("bases", [])}
                          | {b for a in kernel.get("atomics", []) if a.get("indirect") for b in a.get("bases", [])}),
        "atomics": sorted({a.get("op") for a in kernel.get("atomics", [])}),
        "strided_args": strided,
        "programs": math.prod(int(g) for g in grid) if grid else None,
        "compute_units": int(units) if isinstance(units, (int, float)) else None,
        "dot": kernel_uses_dot(function_source(source, kernel.get("line"))),
    }


def function_source(text: str, line: int | None) -> str:
    """The source of the function defined at ``line`` (its ``def`` line, decorators apart); all of
    ``text`` when it cannot be parsed or no function starts there."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return text
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and line in (n.lineno, *(d.lineno for d in n.decorator_list))), None)
    return ast.get_source_segment(text, fn) or text if fn else text


def pointer_terms(pointer: str | None) -> tuple[set[str], set[str]]:
    """(unit, scaled): index names added with coefficient 1 in a pointer expression, and names
    under a product (``x1`` and ``y0`` of ``p + (x1 + 8192*y0)``)."""
    import ast

    try:
        node = ast.parse(pointer or "", mode="eval").body
    except SyntaxError:
        return set(), set()
    unit, scaled, stack = set(), set(), [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)):
            stack += [n.left, n.right]
        elif isinstance(n, ast.Name):
            unit.add(n.id)
        else:
            scaled |= {m.id for m in ast.walk(n) if isinstance(m, ast.Name)}
    return unit, scaled


def transposed_bases(ops: list[dict]) -> list[str]:
    """Pointers of a 2-D indexed kernel accessed with the roles of two indices swapped (one op's
    unit-stride index is another's scaled index, as in ``x1 + 8192*y0`` vs ``y0 + 8192*x1``); the
    side that disagrees with the store is the transposed one."""
    direct = []
    for o in ops:
        if o.get("kind") != "direct" or not o.get("bases"):
            continue
        unit, scaled = pointer_terms(o.get("pointer"))
        unit, scaled = unit - set(o["bases"]), scaled - set(o["bases"])
        if unit and scaled:
            direct.append((o, unit, scaled))
    stores = [d for d in direct if d[0]["op"] == "store"]
    ref = stores[0] if stores else (direct[0] if direct else None)
    if ref is None:
        return []
    out = set()
    for o, unit, scaled in direct:
        if unit & ref[2] and scaled & ref[1]:
            out.update(o["bases"])
    return sorted(out)


def costly_ops(twin_summary: dict | None, validity: dict | None) -> dict:
    """The arithmetic the twin removed (source) and what it cost in the ISA (kernel vs twin)."""
    out: dict[str, Any] = {"source": dict((twin_summary or {}).get("replaced") or {}), "isa": []}
    for entry in (validity or {}).get("arches", []):
        k, t = entry.get("kernel_mix") or {}, entry.get("twin_mix") or {}
        if k:
            out["isa"].append({"arch": entry["arch"], **{f"kernel_{key}": k.get(key) for key in ("valu", "transcendental", "total")},
                               **{f"twin_{key}": t.get(key) for key in ("valu", "transcendental", "total")}})
    return out


def _ops_text(costly: dict) -> str:
    src = costly.get("source") or {}
    named = sorted(src.items(), key=lambda kv: (not ("." in kv[0]), -kv[1]))
    text = ", ".join(f"{op} x{n}" for op, n in named) or "none found in the source"
    isa = next(iter(costly.get("isa") or []), None)
    if isa and isa.get("kernel_valu") is not None:
        text += (f" ({isa['arch']}: {isa['kernel_valu']} VALU / {isa.get('kernel_transcendental')} "
                 f"transcendental instructions in the kernel, {isa.get('twin_valu')} / "
                 f"{isa.get('twin_transcendental')} in the twin)")
    return text


def access_causes(facts: dict, numbers: dict, th: dict) -> list[dict]:
    """Likely causes of a twin far from the floor, each with the most its remedy can gain."""
    twin_x = numbers.get("twin_over_floor")
    causes = []
    if facts.get("multi_pass"):
        bytes_x = _ratio(numbers.get("multi_pass_bytes"), numbers.get("one_pass_bytes"))
        bound = min(x for x in (bytes_x, twin_x) if x) if (bytes_x or twin_x) else None
        n = max((facts.get("passes") or {}).values() or [2])
        causes.append({"cause": "multi_pass", "detail": f"{n} passes over {', '.join(sorted(facts['passes']))}",
                       "remedy": f"one pass instead of {n}", "at_most_x": bound,
                       "basis": "bytes of the passes / bytes of one pass, capped by twin / copy floor"})
    for key, remedy in (("strided_args", "contiguous (coalesced) access"),
                        ("gather", "sorted or contiguous indices"),
                        ("scatter", "a segment reduction over sorted indices")):
        if facts.get(key):
            causes.append({"cause": "strided" if key == "strided_args" else key,
                           "detail": ", ".join(facts[key]), "remedy": remedy, "at_most_x": twin_x,
                           "basis": "twin / copy floor"})
    if facts.get("atomics"):
        causes.append({"cause": "atomics", "detail": ", ".join(facts["atomics"]),
                       "remedy": "no atomics (one writer per output)", "at_most_x": twin_x,
                       "basis": "twin / copy floor"})
    programs, units = facts.get("programs"), facts.get("compute_units")
    if programs and units and programs < th["sol_min_waves"] * units:
        grid_x = units / programs
        causes.append({"cause": "small_grid", "detail": f"{programs} programs for {units} SMs/CUs",
                       "remedy": "a grid with at least one program per SM/CU",
                       "at_most_x": min(grid_x, twin_x) if twin_x else grid_x,
                       "basis": "SMs / programs, capped by twin / copy floor"})
    if not causes:
        causes.append({"cause": "unknown", "detail": "no multi-pass, stride, gather, scatter, atomic or "
                       "grid fact in the source: profile the twin's memory counters",
                       "remedy": None, "at_most_x": twin_x, "basis": "twin / copy floor"})
    return causes


# --------------------------------------------------------------------------- classification

def measured_numbers(kernel_ms: float | None, twin_ms: float | None, fl: dict, model: dict,
                     library: dict | None = None) -> dict:
    """The numbers every class carries: ms, % of copy, ratios; with ``library`` (a matmul kernel:
    its do_bench time and the library GEMM's, one timer on both sides) their ratio too."""
    floor = fl.get("copy_floor_ms")
    peak = fl.get("peak_gbps")
    unique = model.get("unique_bytes")

    def pct(ms):
        return 100.0 * floor / ms if floor and ms else None

    return {"kernel_ms": kernel_ms, "twin_ms": twin_ms, "copy_floor_ms": floor,
            "one_pass_floor_ms": fl.get("one_pass_floor_ms"), "passes_floor_ms": fl.get("passes_floor_ms"),
            "peak_gbps": peak, "unique_bytes": unique, "inductor_bytes": model.get("inductor_bytes"),
            "multi_pass_bytes": fl.get("multi_pass_bytes"), "one_pass_bytes": fl.get("one_pass_bytes"),
            "kernel_pct_of_copy": pct(kernel_ms), "twin_pct_of_copy": pct(twin_ms),
            "kernel_over_floor": _ratio(kernel_ms, floor), "twin_over_floor": _ratio(twin_ms, floor),
            "kernel_over_twin": _ratio(kernel_ms, twin_ms),
            "gap_ms": kernel_ms - floor if kernel_ms and floor else None,
            **({"library_gemm_ms": library.get("library_ms"), "kernel_do_bench_ms": library.get("kernel_ms"),
                "kernel_over_library": _ratio(library.get("kernel_ms"), library.get("library_ms")),
                "library_tflops": library.get("library_tflops"), "kernel_tflops": library.get("kernel_tflops")}
               if library else {})}


def classify(numbers: dict, th: dict, *, twin_valid: bool, facts: dict | None = None,
             costly: dict | None = None, above_peak: bool = False) -> dict:
    """One class for measured numbers (see :func:`measured_numbers`); pure: no I/O.

    ``th`` holds the ``sol_*`` thresholds; ``facts`` the static access facts; ``costly`` the ops the
    twin removed; ``above_peak`` that the unique bytes in the kernel's time beat the copy peak.
    """
    facts, costly = facts or {}, costly or {}
    k, t, floor = numbers.get("kernel_ms"), numbers.get("twin_ms"), numbers.get("copy_floor_ms")

    def result(cls, says, **extra):
        return {"class": cls, "says": says, "numbers": numbers, **extra}

    if not k:
        return result("unmeasured", "offline: nothing timed. A GPU run would add: " + "; ".join(GPU_RUN_ADDS),
                      missing=["kernel_ms"] + ([] if t else ["twin_ms"]), gpu_run_adds=list(GPU_RUN_ADDS))
    if not floor:
        return result("unmeasured", f"kernel {k:.4g} ms, but no copy peak for this device: no floor to "
                      f"compare with (measure_peak_bandwidth.py, or --peak-gbps)", missing=["copy_floor_ms"])
    if above_peak:
        return result("unmeasured", f"the unique bytes in {k:.4g} ms exceed the copy peak "
                      f"({numbers['kernel_pct_of_copy']:.0f} % of copy): byte estimate above what the device can "
                      f"move (L2-resident or over-counted); not classified at the floor", missing=["valid_floor"])
    kx = numbers["kernel_over_floor"]
    if facts.get("dot"):
        lib, lx = numbers.get("library_gemm_ms"), numbers.get("kernel_over_library")
        rates = (f" ({numbers['library_tflops']:.4g} against {numbers['kernel_tflops']:.4g} TFLOP/s)"
                 if numbers.get("library_tflops") and numbers.get("kernel_tflops") else "")
        versus = (f"; the library GEMM of the same shapes (torch.matmul) takes {lib:.4g} ms, the kernel "
                  f"{numbers['kernel_do_bench_ms']:.4g} ms by the same timer (do_bench): {lx:.2f}x{rates}"
                  if lib and lx else "")
        return result("matmul_bound", f"the kernel calls tl.dot: {k:.4g} ms is {kx:.2f}x the copy floor "
                      f"{floor:.4g} ms, but the matrix units, not memory, set a matmul's time, so that ratio "
                      f"is no gap: its headroom is what a sweep of its tiles (sweep_captured_kernel.py) or "
                      f"the library GEMM of the same shapes measures{versus}")
    if kx <= th["sol_at_floor_ratio"]:
        return result("at_floor", f"{k:.4g} ms is {kx:.2f}x the copy floor {floor:.4g} ms "
                      f"({numbers['kernel_pct_of_copy']:.0f} % of copy): at most {kx:.2f}x is left")
    if not t or not twin_valid:
        why = "the memory twin is invalid (its ISA census differs)" if not twin_valid else "the twin was not timed"
        return result("unmeasured", f"{k:.4g} ms is {kx:.2f}x the copy floor, but {why}: arithmetic and "
                      f"access cannot be told apart", missing=["twin_ms"],
                      causes=access_causes(facts, numbers, th) if facts else [])
    tx, kt = numbers["twin_over_floor"], numbers["kernel_over_twin"]
    if tx > th["sol_twin_near_floor_ratio"] or kt < th["sol_twin_gap_ratio"]:
        causes = access_causes(facts, numbers, th)
        also = (f"; the arithmetic adds {kt:.2f}x on top ({_ops_text(costly)})"
                if kt >= th["sol_twin_gap_ratio"] else "")
        best = ", ".join(f"{c['remedy']}: at most {c['at_most_x']:.2f}x" for c in causes
                         if c.get("remedy") and c.get("at_most_x"))
        return result("access_pattern_bound", f"the memory twin alone takes {t:.4g} ms, {tx:.2f}x the copy floor "
                      f"{floor:.4g} ms; kernel {k:.4g} ms ({kt:.2f}x the twin){also}. Likely: "
                      f"{', '.join(c['cause'] for c in causes)}" + (f" ({best})" if best else ""), causes=causes)
    return result("arithmetic_bound", f"kernel {k:.4g} ms is {kt:.2f}x its memory twin {t:.4g} ms, and the twin is "
                  f"{tx:.2f}x the copy floor: the arithmetic costs {k - t:.4g} ms. Costly: {_ops_text(costly)}; "
                  f"cheaper arithmetic can gain at most {kt:.2f}x", costly_ops=costly,
                  remedy={"remedy": "cheaper arithmetic (fewer transcendental / division / libdevice calls)",
                          "at_most_x": kt, "basis": "kernel / twin"})


# --------------------------------------------------------------------------- measuring

def pick_ms(run: dict | None) -> tuple[float | None, str | None]:
    """The best config's time from a ``kernel_run/1`` payload, by the preferred timer."""
    if not run or run.get("status") != "ok":
        return None, None
    results = run.get("results")
    best = [r for r in (results if isinstance(results, list) else [])
            if isinstance(r, dict) and r.get("ok") and r.get("best") and positive_float(r.get("ms")) is not None]
    for timer in TIMER_PREFERENCE:
        for rec in best:
            if rec.get("timer") == timer:
                return positive_float(rec["ms"]), timer
    return (positive_float(best[0]["ms"]), best[0].get("timer")) if best else (None, None)


def reusable_run(run: dict, kernel_py, timer: str) -> str | None:
    """Why a given ``kernel_run/1`` cannot stand for timing the kernel here; None when it can: it ran
    this file, ended ok, with every timer asked for, and holds the best config's time."""
    from pathlib import Path

    ran = run.get("kernel_file")
    if not isinstance(ran, str) or Path(ran).resolve() != Path(kernel_py).resolve():
        return f"it ran {ran!r}, not this file"
    if run.get("status") != "ok":
        return f"its status is {run.get('status')!r}"
    cmd = [str(c) for c in run.get("command") or []]
    given = set(cmd[cmd.index("--timer") + 1].split(",")) if "--timer" in cmd[:-1] else set()
    missing = set(timer.split(",")) - given
    if missing:
        return "it was not timed with " + ", ".join(sorted(missing))
    return None if pick_ms(run)[0] is not None else "it holds no time of the best config"


def _kernel_times(kernel_py, timer: str, timeout: float, given: dict | None, label: str | None,
                  notes: list) -> dict | None:
    """The kernel's run: a given one (the investigation's ``run`` step) when it fits, else timed now."""
    from .kernel_run import run_kernel

    why = reusable_run(given, kernel_py, timer) if given is not None else None
    if given is not None and why is None:
        notes.append(f"kernel times from {label} (this file, the same timers), not timed again")
        return dict(_run_brief(given), source=label)
    if given is not None:
        notes.append(f"{label} not used ({why}): the kernel timed here")
    return _run_brief(run_kernel(kernel_py, timer=timer, timeout=timeout))


def _library_gemm(spec: dict, notes: list) -> dict | None:
    """torch.matmul of the kernel's operand shapes, timed (:mod:`tko.measure.library_gemm`); None,
    with a note, when the arguments show no GEMM or the library cannot run it."""
    from . import library_gemm

    shapes = library_gemm.gemm_shapes(spec.get("args"))
    if shapes is None:
        notes.append("the kernel calls tl.dot, but no A[M, K], B[K, N], C[M, N] among its tensor arguments: "
                     "the library GEMM not timed")
        return None
    try:
        return library_gemm.time_library_gemm(shapes)
    except Exception as exc:
        notes.append(f"{library_gemm.describe(shapes)} not timed: {type(exc).__name__}: "
                     f"{(str(exc).splitlines() or [''])[0][:160]}")
        return None


def _library_pair(kernel_run: dict | None, library: dict | None) -> dict | None:
    """The kernel's and the library GEMM's times by one timer (do_bench), or None."""
    kernel_ms = next((t["ms"] for t in (kernel_run or {}).get("timings") or []
                      if t.get("timer") == "triton.testing.do_bench" and positive_float(t.get("ms"))), None)
    if not library or not positive_float(library.get("ms")) or kernel_ms is None:
        return None
    flops = positive_float(library.get("tflops"))
    return {"kernel_ms": kernel_ms, "library_ms": library["ms"],
            "library_tflops": flops, "kernel_tflops": flops * library["ms"] / kernel_ms if flops else None}


def _run_brief(run: dict | None) -> dict | None:
    if run is None:
        return None
    ms, timer = pick_ms(run)
    return {"status": run.get("status"), "error": run.get("error"), "ms": ms, "timer": timer,
            "timings": [{"timer": r.get("timer"), "ms": r.get("ms")} for r in run.get("results", [])
                        if r.get("ok") and r.get("best")],
            "stderr_tail": run.get("stderr_tail", [])[-6:]}


def gpu_available() -> tuple[bool, str]:
    try:
        import torch
    except Exception as exc:
        return False, f"torch does not import ({type(exc).__name__})"
    if not torch.cuda.is_available():
        return False, "no GPU visible to torch"
    return True, torch.cuda.get_device_name(0)


def resolve_peak(spec: dict, peak_gbps: float | None, store: str | None) -> dict | None:
    """``--peak-gbps`` as given, else the peak store / table record for the captured device."""
    from . import peaks

    if peak_gbps:
        return {"peak_gbps": float(peak_gbps), "basis": "copy_gbps", "source": "--peak-gbps", "kind": "given"}
    device = spec.get("device") or {}
    return peaks.lookup(device.get("name"), device.get("arch"), store=store)


def default_arches(spec: dict) -> list[str]:
    """gfx942 (the AMD census) plus the captured device's arch when it is another one."""
    arch = (spec.get("device") or {}).get("arch")
    out = ["gfx942"]
    if arch and str(arch) != "gfx942":
        out.append(str(arch))
    return out


def chart_bars(numbers: dict, sweep_ms: float | None = None, remedy_ms: float | None = None) -> list:
    bars = [("kernel", numbers.get("kernel_ms")), ("memory twin", numbers.get("twin_ms")),
            ("copy floor", numbers.get("copy_floor_ms"))]
    if numbers.get("one_pass_floor_ms") is not None:
        bars.append(("one-pass floor", numbers["one_pass_floor_ms"]))
        bars.append(("floor of the passes", numbers.get("passes_floor_ms")))
    if sweep_ms is not None:
        bars.append(("best sweep variant", sweep_ms))
    if remedy_ms is not None:
        bars.append(("measured remedy", remedy_ms))
    return bars


def best_sweep_ms(doc: dict) -> float | None:
    """The best ranked variant's median of a ``variant_sweep/1`` artifact."""
    ranking = doc.get("ranking")
    ranked = ranking.get("ranked") if isinstance(ranking, dict) else None
    times = [positive_float(r.get("median_ms")) for r in (ranked if isinstance(ranked, list) else [])
             if isinstance(r, dict)]
    times = [t for t in times if t is not None]
    return min(times) if times else None


def analyse(kernel_py, *, twin_path, arches: list[str] | None = None, peak_gbps: float | None = None,
            peaks_store: str | None = None, timer: str = "profiler_flushed,do_bench", offline: bool = False,
            timeout: float = 300.0, kernel: str | None = None, sweep_ms: float | None = None,
            remedy_ms: float | None = None, rules: dict | None = None,
            floor_basis: str = "size_matched_copy", kernel_run: dict | None = None,
            kernel_run_label: str | None = None) -> dict:
    """Build, check and (on a GPU) time the twin; the ``speed_of_light/1`` payload.

    On a GPU the floors are copies of the same bytes timed now (``floor_basis`` ``size_matched_copy``,
    see :func:`size_matched_copies`); offline, or with ``floor_basis="peak"``, the bytes at the 1 GiB
    copy peak. The bandwidth check stays on the peak. ``kernel_run``: a ``kernel_run/1`` of this file
    with the same timers (:func:`reusable_run`) stands for timing the kernel again.
    """
    from pathlib import Path

    from . import byte_model, twins
    from ..read import kernel_source
    from ..base.errors import InputError
    from ..base.svg_chart import kernel_bars

    if floor_basis not in FLOOR_BASES:
        raise InputError(f"floor basis {floor_basis!r}: expected one of {', '.join(FLOOR_BASES)}")
    kernel_py = Path(kernel_py)
    text, parsed = kernel_source.read_kernel_file(kernel_py)
    spec = parsed.get("standalone_spec")
    if not spec:
        raise InputError(f"{kernel_py}: no _TKO_SPEC: not a captured standalone kernel file "
                         f"(capture it with autotune_capture_patch.py)")
    chosen = kernel_source.select_kernel(parsed, kernel or spec.get("function"))
    th = thresholds_from_rules(rules)
    twin = twins.write_twin_file(kernel_py, Path(twin_path), chosen["name"])
    arches = arches or default_arches(spec)
    validity = twins.check_twin(kernel_py, Path(twin_path), arches, chosen["name"],
                                timed_arch=(spec.get("device") or {}).get("arch"))
    model = byte_model.model_for_file(text, kernel_py, chosen["name"])
    peak = resolve_peak(spec, peak_gbps, peaks_store)
    notes = list(twin.notes) + list(model["notes"])
    runs: dict[str, Any] = {"kernel": None, "twin": None}
    gpu, why = (False, "--offline") if offline else gpu_available()
    if gpu:
        from .kernel_run import run_kernel

        runs["kernel"] = _kernel_times(kernel_py, timer, timeout, kernel_run, kernel_run_label or "the given run",
                                       notes)
        if validity["valid"]:
            runs["twin"] = _run_brief(run_kernel(Path(twin_path), timer=timer, timeout=timeout))
        else:
            notes.append("twin not timed: invalid (" + "; ".join(validity["reasons"]) + ")")
    else:
        notes.append(f"not timed ({why}); a GPU run would add: " + "; ".join(GPU_RUN_ADDS))
    if validity["valid"] and validity["invalid_on"]:
        notes.append(f"twin census differs on {', '.join(validity['invalid_on'])} (" + "; ".join(validity["reasons"])
                     + f"); it agrees on {', '.join(validity['decided_by'])}, where it is timed")
    kernel_ms = (runs["kernel"] or {}).get("ms")
    twin_ms = (runs["twin"] or {}).get("ms") if validity["valid"] else None
    facts = static_facts(chosen, model, spec, text)
    library = None
    if gpu and facts.get("dot") and kernel_ms:
        runs["library_gemm"] = _library_gemm(spec, notes)
        library = _library_pair(runs["kernel"], runs["library_gemm"])
    fl = measured_floors(model, (peak or {}).get("peak_gbps"), gpu=gpu, floor_basis=floor_basis,
                         kernel_timer=(runs["kernel"] or {}).get("timer"), notes=notes)
    numbers = measured_numbers(kernel_ms, twin_ms, fl, model, library)
    bandwidth = byte_model.bandwidth_check(model, kernel_ms, fl["peak_gbps"], th["sol_above_peak_noise"])
    costly = costly_ops(twin.summary(), validity)
    classification = classify(numbers, th, twin_valid=validity["valid"], facts=facts, costly=costly,
                              above_peak=bandwidth["unique"]["above_peak"])
    chart = kernel_bars(f"{chosen['name']}: {classification['class']}",
                        chart_bars(numbers, sweep_ms, remedy_ms), reference=fl["copy_floor_ms"])
    return {"kernel_file": str(kernel_py.resolve()), "kernel": chosen["name"], "twin_file": str(Path(twin_path).resolve()),
            "twin": twin.summary(), "validity": validity, "byte_model": model, "peak": peak,
            "timer": timer, "offline": not gpu, "runs": runs, "floors": fl, "bandwidth": bandwidth,
            "facts": facts, "classification": classification, "thresholds": th,
            "sweep_ms": sweep_ms, "remedy_ms": remedy_ms, "chart_svg": chart, "notes": notes}


def measured_floors(model: dict, peak_gbps: float | None, *, gpu: bool, floor_basis: str,
                    kernel_timer: str | None, notes: list[str]) -> dict:
    """:func:`floors` with size-matched copies on a GPU (``floor_basis`` ``size_matched_copy``), else
    at the peak; what each basis means goes into ``notes``."""
    matched: dict = {}
    if gpu and floor_basis == "size_matched_copy":
        matched, failed = size_matched_copies(model)
        notes.extend(failed)
    elif gpu:
        notes.append("floors at the 1 GiB copy peak as asked (floor basis 'peak'), not a copy of the same bytes")
    fl = floors(model, peak_gbps, matched)
    if fl["size_matched_copy"]:
        notes.append("floors from copies of the same bytes (dst.copy_(src), triton.testing.do_bench median, L2 "
                     f"flushed, warmup {MATCHED_WARMUP_MS} ms, rep {MATCHED_REP_MS} ms); the kernel's time is "
                     f"{kernel_timer or 'not measured'}; the bandwidth check stays on the 1 GiB copy peak")
    note = peak_floor_note(fl)
    if note:
        notes.append(note)
    return fl


def floor_basis_line(fl: dict) -> str | None:
    """One line of the Markdown report: which rate each floor is at."""
    rates, peak = fl.get("floor_rates") or {}, fl.get("peak_gbps")
    peak_text = f"{peak:.1f} GB/s" if peak else "unknown"
    parts = []
    for name, label in (("copy", "copy floor"), ("one_pass", "one-pass floor"), ("passes", "floor of the passes")):
        r = rates.get(name)
        if not r or not r.get("gbps"):
            continue
        mb = r["bytes"] / 1e6
        if r["basis"] == "size_matched_copy":
            parts.append(f"{label}: a copy of the same {mb:.1f} MB timed now, {r['gbps']:.1f} GB/s "
                         f"(the 1 GiB peak: {peak_text})")
        else:
            parts.append(f"{label}: {mb:.1f} MB at the 1 GiB copy peak, {r['gbps']:.1f} GB/s (not size-matched: "
                         f"a kernel moving under ~250 MB cannot reach it)")
    return "; ".join(parts) + "." if parts else None


def _f(value, fmt=".4g", unit=""):
    return "n/a" if value is None else f"{value:{fmt}}{unit}"


def markdown(payload: dict) -> str:
    """The Markdown report: class, numbers, the chart inline, twin validity, byte model."""
    from ..base import markdown as md

    c, n = payload["classification"], payload["classification"]["numbers"]
    lines = [f"# Speed of light: {md.code(payload['kernel'])}", "",
             f"**{c['class']}**: {c['says']}", "", payload["chart_svg"], ""]
    lines += md.table(["kernel ms", "twin ms", "copy floor ms", "one-pass floor ms", "% of copy", "kernel / twin",
                       "twin / floor"],
                      [[_f(n["kernel_ms"]), _f(n["twin_ms"]), _f(n["copy_floor_ms"]), _f(n["one_pass_floor_ms"]),
                        _f(n["kernel_pct_of_copy"], ".1f", " %"), _f(n["kernel_over_twin"], ".2f", "x"),
                        _f(n["twin_over_floor"], ".2f", "x")]]) + [""]
    basis = floor_basis_line(payload.get("floors") or {})
    if basis:
        lines += [basis[0].upper() + basis[1:], ""]
    for cause in c.get("causes") or []:
        bound = f": at most {cause['at_most_x']:.2f}x ({cause['basis']})" if cause.get("at_most_x") else ""
        lines.append(f"- {md.text(cause['cause'])} ({md.text(cause['detail'])}) -> "
                     f"{md.text(cause.get('remedy') or 'no remedy named')}{bound}")
    v = payload["validity"]
    lines += ["", "## Memory twin", "",
              f"Replaced: {', '.join(f'{md.code(k)} x{x}' for k, x in payload['twin']['replaced'].items()) or 'nothing'}. "
              f"Valid: **{'yes' if v['valid'] else 'no'}**" + ("" if v["valid"] else f" ({md.text('; '.join(v['reasons']))})"),
              "", "| arch | kernel loads/stores | twin loads/stores | kernel VALU | twin VALU |", "|---|---|---|---|---|"]
    for e in v["arches"]:
        if e.get("error"):
            lines.append(f"| {md.text(e['arch'])} | compile failed: {md.text(e['error'], 200)} | | | |")
            continue
        ks, ts = e["kernel"], e["twin"]
        lines.append(f"| {md.text(e['arch'])} | {_ls(ks)} | {_ls(ts)} | {(e.get('kernel_mix') or {}).get('valu')} | "
                     f"{(e.get('twin_mix') or {}).get('valu')} |")
    m = payload["byte_model"]
    lines += ["", "## Bytes", "",
              f"Unique bytes {m['unique_bytes']}{' (upper bound)' if m['upper_bound'] else ''}; Inductor's estimate "
              f"{m['inductor_bytes']} ({m['inductor_source']}); passes: {m['passes'] or 'one'}.", ""]
    for key, b in payload["bandwidth"].items():
        if b.get("gb_per_s"):
            lines.append(f"- {key} bytes: {b['gb_per_s']:.1f} GB/s, {_f(b['pct_of_copy'], '.1f', ' %')} of copy"
                         + (f" -- {b['flag']}" if b.get("flag") else ""))
    lines += [f"- {md.text(note)}" for note in payload["notes"]]
    return "\n".join(lines) + "\n"


def _ls(summary: dict) -> str:
    from ..compile.probe_results import LOAD_STORE_FAMILIES
    return ", ".join(f"{fam} {summary[fam]}" for fam in LOAD_STORE_FAMILIES if summary.get(fam)) or "none"
