"""Standalone kernel files: ``<capture dir>/<kernel>.py`` = the kernel's module source + a runner.

The runner appended here is self-contained (it imports only torch, triton and the
standard library), so a captured kernel runs on a machine that has neither the
capture patch nor this bundle.  It rebuilds the recorded arguments (random
normal floats, saved contents for integer tensors, ``as_strided`` for strides
and storage offsets), launches the best config (``--all-configs``: every
recorded config), times each with ``triton.testing.do_bench`` (median) and
prints one line per config: :data:`RESULT_PREFIX` + JSON, then a human line.

Inductor kernels launch through the module's own ``CachingAutotuner`` (a fresh
copy of the module per config, reduced to that one config), which keeps
Inductor's launcher and grid rules; ``--launch jit`` (and hand-written kernels)
launch the ``@triton.jit`` function with the recorded grid instead.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

from . import atomic

RESULT_PREFIX = "TKO_KERNEL_RESULT "
INPUTS_SUFFIX = ".inputs"
_INDEX_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
_MAIN_GUARD = re.compile(r"""^if\s+__name__\s*==\s*['"]__main__['"]\s*:""", re.M)
_FUTURE = re.compile(r"^from\s+__future__\s+import\s+.*$", re.M)


# the runner's --timer values (one list for the runner and run_captured_kernel.py)
TIMER_CHOICES = ("do_bench", "cudagraph", "profiler", "profiler_flushed", "both", "all")


def timer_arg(text: str) -> str:
    """argparse type of ``--timer``: one of TIMER_CHOICES or a comma list of them (passed on as is)."""
    import argparse

    names = [t.strip() for t in str(text).split(",") if t.strip()]
    bad = [t for t in names if t not in TIMER_CHOICES]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"unknown timer {', '.join(bad) or repr(text)}; choose from "
                                         f"{', '.join(TIMER_CHOICES)} (or a comma list)")
    return ",".join(names)


_SINGLE_TIMERS = TIMER_CHOICES[:4]


def timer_for_runner(runner_text: str, timer: str) -> tuple[str | None, list[str]]:
    """The ``--timer`` value a standalone file's runner accepts for the timers asked for, and the
    timers it cannot give. Files written by earlier versions are still run: their runner may take
    one value only (no comma lists), only do_bench/cudagraph/both, or no --timer at all."""
    wanted: list[str] = []
    for name in timer.split(","):
        for t in {"both": ("do_bench", "cudagraph"), "all": _SINGLE_TIMERS}.get(name, (name,)):
            if t not in wanted:
                wanted.append(t)
    if "def _tko_timers" in runner_text:                       # comma lists
        return timer, []
    if "_TKO_TIMER_CHOICES" in runner_text:                    # one value of all six
        if len(wanted) == 1:
            return wanted[0], []
        return ("both" if set(wanted) <= {"do_bench", "cudagraph"} else "all"), []
    if '"--timer"' in runner_text:                             # do_bench, cudagraph or both
        kept = [t for t in wanted if t in ("do_bench", "cudagraph")]
        dropped = [t for t in wanted if t not in kept]
        if not kept:
            return None, dropped
        return (kept[0] if len(kept) == 1 else "both"), dropped
    return None, [t for t in wanted if t != "do_bench"]        # do_bench only


def standalone_stem(kernel: str, sig_no: int = 1) -> str:
    """File stem of a kernel's standalone copy; later argument signatures get ``__s<N>``."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", kernel)[:150] or "kernel"
    return stem if sig_no <= 1 else f"{stem}__s{sig_no}"


def save_index_tensors(capture_dir: Path, stem: str, described: list[dict], args: tuple,
                       budget: int, log_error: Callable[..., None]) -> int:
    """Save integer/bool tensors (they drive indexing) as ``<stem>.inputs/arg<N>.pt``.

    Each saved file holds the whole flat storage so ``as_strided`` rebuilds the
    exact view.  ``budget`` bounds the bytes saved per kernel; a tensor over it
    is marked ``save_skipped`` and the runner fills it with zeros (always in range).
    Marks ``described[i]["saved"]`` in place; returns the bytes written.
    """
    used = 0
    capturing = _stream_capturing()
    for i, (desc, arg) in enumerate(zip(described, args)):
        if desc.get("kind") != "tensor" or desc.get("dtype") not in _INDEX_DTYPES:
            continue
        if capturing and str(desc.get("device", "")).startswith("cuda"):
            # a copy to the host is illegal while a CUDA graph is being recorded
            desc["save_skipped"] = "a CUDA graph was being captured at the first launch"
            continue
        try:
            import torch

            nbytes = arg.untyped_storage().nbytes()
            if used + nbytes > budget:
                desc["save_skipped"] = f"storage of {nbytes} bytes over the {budget}-byte budget"
                continue
            numel = nbytes // max(1, arg.element_size())
            flat = torch.empty(0, dtype=arg.dtype, device=arg.device).set_(
                arg.untyped_storage(), 0, (numel,), (1,))
            buf = io.BytesIO()
            torch.save(flat.detach().cpu().clone(), buf)
            rel = f"{stem}{INPUTS_SUFFIX}/arg{i}.pt"
            atomic.write_bytes(Path(capture_dir) / rel, buf.getvalue())
            desc["saved"] = rel
            used += nbytes
        except Exception as exc:  # recorded, never raised: capture must not break the program
            desc["save_skipped"] = f"{type(exc).__name__}: {exc}"
            log_error(f"save input {stem} arg{i}", exc)
    return used


def _stream_capturing() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())
    except Exception:
        return False


def _runner(spec: dict) -> str:
    blob = json.dumps(spec, sort_keys=True, allow_nan=False, default=repr)
    return (_RUNNER_TEMPLATE.replace("@SPEC@", repr(blob)).replace("@PREFIX@", repr(RESULT_PREFIX))
            .replace("@TIMERS@", repr(TIMER_CHOICES)))


_SPEC_LINE = re.compile(r"^_TKO_SPEC = .*$", re.M)


def replace_spec(text: str, spec: dict) -> str:
    """A standalone file's text with its ``_TKO_SPEC`` replaced (e.g. another config first)."""
    if len(_SPEC_LINE.findall(text)) != 1:
        raise ValueError("not a standalone file: expected exactly one _TKO_SPEC line")
    blob = json.dumps(spec, sort_keys=True, allow_nan=False, default=repr)
    line = f"_TKO_SPEC = __import__(\"json\").loads({blob!r})"
    return _SPEC_LINE.sub(lambda _m: line, text, count=1)


def _spec(kernel: str, function: str, launch: str, source_file: str | None, args: list[dict],
          extra_kwargs: dict, configs: list[dict], num_bytes: int | None, bytes_source: str | None,
          device: dict | None) -> dict:
    import sys

    versions = {m: getattr(sys.modules.get(m), "__version__", None) for m in ("torch", "triton")}
    return {"kernel": kernel, "function": function, "launch": launch, "source_file": source_file,
            "args": args, "extra_kwargs": extra_kwargs, "configs": configs, "num_bytes": num_bytes,
            "bytes_source": bytes_source, "device": device, "captured_with": versions}


def write_inductor_standalone(capture_dir: Path, stem: str, obj: Any, kernel: str, args: list[dict],
                              configs: list[dict], num_bytes: int | None, bytes_source: str | None,
                              device: dict | None) -> Path | None:
    filename = getattr(obj, "filename", None)
    if not filename or not os.path.isfile(filename):
        return None
    source = Path(filename).read_text(encoding="utf-8")
    function = getattr(getattr(obj, "fn", None), "__name__", None) or kernel
    spec = _spec(kernel, function, "inductor", filename, args, {}, configs, num_bytes, bytes_source, device)
    path = Path(capture_dir) / f"{stem}.py"
    atomic.write_text(path, source.rstrip("\n") + "\n" + _runner(spec))
    return path


def user_module_source(source: str, module_dir: str) -> str:
    """A hand-written kernel's module made safe to run as a captured copy.

    Its own ``if __name__ == "__main__":`` entry point is disabled, and its folder
    goes on ``sys.path`` (after any ``from __future__`` line) so sibling imports resolve.
    """
    source = _MAIN_GUARD.sub('if False:  # the module\'s own entry point, disabled in the captured copy', source)
    path_line = f"import sys as _tko_sys; _tko_sys.path.insert(0, {module_dir!r})\n"
    futures = list(_FUTURE.finditer(source))
    cut = futures[-1].end() + 1 if futures else 0
    return source[:cut] + path_line + source[cut:]


def write_user_standalone(capture_dir: Path, stem: str, jit: Any, kernel: str, args: list[dict],
                          extra_kwargs: dict, configs: list[dict], num_bytes: int | None,
                          bytes_source: str | None, device: dict | None) -> Path | None:
    code = getattr(getattr(jit, "fn", None), "__code__", None)
    filename = getattr(code, "co_filename", None)
    if not filename or not os.path.isfile(filename):
        return None
    source = user_module_source(Path(filename).read_text(encoding="utf-8"),
                                os.path.dirname(os.path.abspath(filename)))
    function = getattr(jit, "__name__", None) or kernel
    spec = _spec(kernel, function, "jit", filename, args, extra_kwargs, configs, num_bytes, bytes_source, device)
    path = Path(capture_dir) / f"{stem}.py"
    atomic.write_text(path, source.rstrip("\n") + "\n" + _runner(spec))
    return path


_RUNNER_TEMPLATE = r'''

# ---------------------------------------------------------------------------------------------
# Standalone runner (written by autotune_capture_patch.py). Needs only torch and triton:
#   python THIS_FILE.py [--all-configs] [--warmup MS] [--rep MS] [--launch auto|inductor|jit]
# One line per config: the prefix below + JSON (kernel, config, ms, bytes, gb_per_s), then a human line.
_TKO_RESULT_PREFIX = @PREFIX@
_TKO_SPEC = __import__("json").loads(@SPEC@)
_TKO_TIMER_CHOICES = @TIMERS@


def _tko_make_arg(desc, here, device):
    import os
    import torch

    kind = desc.get("kind")
    if kind == "scalar":
        return desc.get("value")
    if kind != "tensor":
        return None
    dtype = getattr(torch, desc["dtype"])
    shape, stride, offset = desc["shape"], desc["stride"], int(desc.get("storage_offset") or 0)
    numel = desc.get("storage_numel")
    if numel is None:
        numel = offset + 1 + sum((s - 1) * st for s, st in zip(shape, stride) if s > 0)
    if desc.get("saved"):
        flat = torch.load(os.path.join(here, desc["saved"]), map_location="cpu").to(device)
    elif dtype.is_floating_point or dtype.is_complex:
        flat = torch.randn(max(1, numel), device=device).to(dtype)
    elif dtype == torch.bool:
        flat = torch.rand(max(1, numel), device=device) < 0.5
    else:
        flat = torch.zeros(max(1, numel), dtype=dtype, device=device)  # always a valid index
    return torch.as_strided(flat, shape, stride, offset)


def _tko_config(flat):
    import triton

    flat = dict(flat)
    opts = {k: flat.pop(k) for k in ("num_warps", "num_stages", "num_ctas", "maxnreg") if k in flat}
    try:
        return triton.Config(flat, **opts)
    except TypeError:  # older triton without num_ctas / maxnreg
        return triton.Config(flat, num_warps=opts.get("num_warps", 4), num_stages=opts.get("num_stages", 2))


def _tko_jit_function(obj):
    for _ in range(8):
        if hasattr(obj, "arg_names") and hasattr(obj, "run") and not hasattr(obj, "configs"):
            return obj
        obj = getattr(obj, "fn", None)
    raise RuntimeError("no @triton.jit function found")


def _tko_inductor_call(spec, cfg, args, device):
    import inspect
    import os
    import torch

    namespace = {"__name__": "_tko_kernel_copy", "__file__": __file__, "__builtins__": __builtins__}
    with open(__file__, encoding="utf-8") as fh:
        exec(compile(fh.read(), __file__, "exec"), namespace)
    obj = namespace[spec["function"]]
    obj.configs = [_tko_config(cfg["flat"])]
    # exactly this config: no coordinate descent, and no dynamic R0_BLOCK halving, which adds a
    # config when registers limit occupancy and then autotunes between the two at the first launch
    obj.inductor_meta = dict(getattr(obj, "inductor_meta", None) or {}, coordinate_descent_tuning=False,
                             dynamic_scale_rblock=False)
    if hasattr(obj, "launchers"):
        obj.launchers = []
    if os.environ.get("TRITON_INTERPRET") != "1":  # the interpreter runs configs[0] directly
        obj.precompile()
        launchers = getattr(obj, "launchers", None)
        if launchers is not None and len(launchers) != 1:
            raise RuntimeError(f"Inductor made {len(launchers)} launchers for one config: it would "
                               "autotune at the first launch, so the time would not be this config's")
    if str(device).startswith("cuda"):
        # the stream current at each call: do_bench_cudagraph captures on a side stream
        index = torch.device(device).index
        index = torch.cuda.current_device() if index is None else index
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        stream = (lambda: raw(index)) if raw else (lambda: torch.cuda.current_stream(index).cuda_stream)
    else:
        stream = lambda: 0  # noqa: E731
    if "grid" in inspect.signature(type(obj).run).parameters:  # torch <= 2.6
        grid = tuple(cfg["grid"])
        return lambda: obj.run(*args, grid=grid, stream=stream())
    return lambda: obj.run(*args, stream=stream())


def _tko_jit_call(spec, cfg, args, here, device):
    jit = _tko_jit_function(globals()[spec["function"]])
    kwargs = {k: _tko_make_arg(d, here, device) for k, d in spec.get("extra_kwargs", {}).items()}
    kwargs.update(cfg["flat"])
    if not cfg.get("grid"):
        raise RuntimeError("no grid was recorded for this config")
    grid = tuple(cfg["grid"])
    return lambda: jit[grid](*args, **kwargs)


def _tko_cpu_median_ms(call, rep_ms):
    # interpreter runs (no GPU): wall-clock median of at least 3 calls within about rep_ms
    import time

    times, spent = [], 0.0
    while len(times) < 3 or (spent < rep_ms and len(times) < 100):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1e3)
        spent += times[-1]
    times.sort()
    return times[len(times) // 2]


def _tko_kernel_events_us(trace_path, name):
    # device durations of the kernels named `name` in a torch.profiler chrome trace
    import json

    with open(trace_path, encoding="utf-8") as fh:
        events = json.load(fh).get("traceEvents", [])
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("dur") is not None]
    exact = [float(e["dur"]) for e in kernels if e.get("name") == name]
    return exact or [float(e["dur"]) for e in kernels if str(e.get("name", "")).startswith(name)]


def _tko_profiler_ms(call, name, rep_ms, flush):
    # the instrument the program's profile used: torch.profiler's device duration of each launch
    # (no launch gaps, no event resolution). Median over the launches.
    # flush=False: L2 holds what the kernel's previous launch left (warm, as a producer's output is);
    # flush=True: L2 flushed before each launch, as do_bench does (cold).
    import os
    import tempfile

    import torch
    import triton
    from torch.profiler import ProfilerActivity, profile

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        call()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-4)
    n = int(max(10, min(500, rep_ms / estimate_ms)))
    cache = None
    if flush:
        try:
            cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()
        except Exception:
            cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            if cache is not None:
                cache.zero_()
            call()
        torch.cuda.synchronize()
    fd, trace = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(trace)
        durations = sorted(_tko_kernel_events_us(trace, name))
    finally:
        os.unlink(trace)
    if not durations:
        raise RuntimeError(f"the profiler saw no kernel named {name}")
    return durations[len(durations) // 2] / 1e3


def _tko_gpu_timings(call, spec, timers, warmup, rep, profiler_ms=None):
    # [(timer, ms)] for the chosen timers, in a fixed order
    import sys

    import triton
    import triton.testing

    profiler_ms = profiler_ms or _tko_profiler_ms
    timings = []
    if "do_bench" in timers:
        timings.append(("triton.testing.do_bench", float(triton.testing.do_bench(
            call, warmup=warmup, rep=rep, return_mode="median"))))
    if "cudagraph" in timers:
        timings.append(("triton.testing.do_bench_cudagraph", float(triton.testing.do_bench_cudagraph(
            call, rep=rep, return_mode="median"))))
    for timer, flush in (("profiler", False), ("profiler_flushed", True)):
        if timer not in timers:
            continue
        # a profiler without device activity (some ROCm/DTK builds) loses this timer only
        try:
            name = _tko_jit_function(globals()[spec["function"]]).__name__
            timings.append(("torch.profiler.l2_flushed" if flush else "torch.profiler",
                            profiler_ms(call, name, rep, flush=flush)))
        except Exception as exc:
            print(f"{spec['kernel']}: timer {timer} unavailable ({type(exc).__name__}: {exc})",
                  file=sys.stderr, flush=True)
    return timings


def _tko_timers(text):
    # "--timer" value -> the set of timers, in the order results are printed
    import argparse

    names = [t.strip() for t in str(text).split(",") if t.strip()]
    bad = [t for t in names if t not in _TKO_TIMER_CHOICES]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"unknown timer {', '.join(bad) or repr(text)}; "
                                         f"choose from {', '.join(_TKO_TIMER_CHOICES)} (or a comma list)")
    chosen = set()
    for t in names:
        chosen.update({"both": ("do_bench", "cudagraph"), "all": _TKO_TIMER_CHOICES[:4]}.get(t, (t,)))
    return chosen


def _tko_label(flat):
    return ", ".join(f"{k}={v}" for k, v in flat.items())


def _tko_main(argv=None):
    import argparse
    import json
    import os
    import sys

    spec = _TKO_SPEC
    parser = argparse.ArgumentParser(description=f"Time the captured Triton kernel {spec['kernel']}")
    parser.add_argument("--all-configs", action="store_true", help="time every recorded config")
    parser.add_argument("--warmup", type=float, default=25.0, help="do_bench warm-up time in ms")
    parser.add_argument("--rep", type=float, default=100.0, help="do_bench measuring time in ms")
    parser.add_argument("--launch", choices=("auto", "inductor", "jit"), default="auto",
                        help="inductor: through the module's CachingAutotuner; jit: the @triton.jit "
                             "function with the recorded grid; auto: inductor when captured from Inductor")
    parser.add_argument("--timer", type=_tko_timers, default="do_bench",
                        help="do_bench: triton.testing.do_bench median, L2 flushed before each call; "
                             "cudagraph: do_bench_cudagraph median, no launch overhead, L2 not flushed; "
                             "profiler: torch.profiler device duration per launch (median), the instrument "
                             "of a program profile, L2 warm; profiler_flushed: the same, L2 flushed before "
                             "each launch; both: do_bench and cudagraph; all: every timer; or a comma list, "
                             "e.g. do_bench,profiler_flushed")
    parser.add_argument("--device", default=None,
                        help="cuda (default when a GPU is present); cpu only under TRITON_INTERPRET=1")
    opts = parser.parse_args(argv)
    timers = opts.timer

    import torch

    if opts.device is None:
        opts.device = "cuda" if torch.cuda.is_available() else "cpu"
    if opts.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"{spec['kernel']}: no GPU available", file=sys.stderr)
        return 2
    if opts.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        print(f"{spec['kernel']}: no GPU; set TRITON_INTERPRET=1 to run it on the CPU", file=sys.stderr)
        return 2
    here = os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(0)
    args = [_tko_make_arg(d, here, opts.device) for d in spec["args"]]
    configs = spec["configs"] if opts.all_configs else spec["configs"][:1]
    failures = 0
    for rank, cfg in enumerate(configs):
        record = {"kernel": spec["kernel"], "config": cfg["flat"], "best": rank == 0, "bytes": spec["num_bytes"]}
        try:
            how = opts.launch
            if how == "auto":
                how = spec["launch"]
            if how == "inductor":
                try:
                    call = _tko_inductor_call(spec, cfg, args, opts.device)
                except Exception as exc:
                    if opts.launch != "auto":
                        raise
                    print(f"{spec['kernel']}: Inductor launch failed ({type(exc).__name__}: {exc}); "
                          "falling back to a plain JIT launch", file=sys.stderr)
                    how = "jit"
            if how == "jit":
                call = _tko_jit_call(spec, cfg, args, here, opts.device)
            call()
            timings = []
            if opts.device.startswith("cuda"):
                torch.cuda.synchronize()
                timings.extend(_tko_gpu_timings(call, spec, timers, opts.warmup, opts.rep))
            else:
                timings.append(("perf_counter", _tko_cpu_median_ms(call, opts.rep)))
        except Exception as exc:
            failures += 1
            record.update(ok=False, error=f"{type(exc).__name__}: {exc}")
            print(_TKO_RESULT_PREFIX + json.dumps(record), flush=True)
            print(f"{spec['kernel']} [{_tko_label(cfg['flat'])}]: FAILED {record['error']}", file=sys.stderr)
            continue
        for timer, ms in timings:
            gbps = spec["num_bytes"] / (ms * 1e-3) / 1e9 if spec.get("num_bytes") and ms > 0 else None
            out = dict(record, ok=True, ms=ms, gb_per_s=gbps, statistic="median", timer=timer, launch=how,
                       warmup_ms=opts.warmup, rep_ms=opts.rep)
            print(_TKO_RESULT_PREFIX + json.dumps(out), flush=True)
            rate = f"{gbps:.1f} GB/s" if gbps is not None else "n/a GB/s"
            print(f"{spec['kernel']} [{_tko_label(cfg['flat'])}]: {ms:.4f} ms, {rate} ({how} launch, {timer})",
                  flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(_tko_main())
'''
