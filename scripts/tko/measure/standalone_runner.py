"""The runner stamped at the end of every captured standalone kernel file.

This module is the one source of that runner: :func:`tko.measure.standalone.runner_text` copies the
text between the two ``STAMP`` marker lines below into the file, after a header that sets
``_TKO_RUNNER_VERSION``, ``_TKO_RESULT_PREFIX``, ``_TKO_TIMER_CHOICES`` and the kernel's
``_TKO_SPEC``, and with ``tko.measure.bench.cpu_wall_bench`` copied in as ``_tko_cpu_wall_bench``.
The stamped runner needs only torch, triton and the standard library, so a captured kernel
runs where neither the capture patch nor this package is installed.

In a stamped file the functions run in the kernel module's namespace: ``globals()`` holds the
kernel and ``__file__`` is the standalone file. Imported from here, the functions that do not
need those (argument rebuilding, configs, timer parsing, trace reading) can be tested alone.

Raise :data:`RUNNER_VERSION` whenever the stamped text changes in a way a reader of the file
must know (new flags, new output fields): ``standalone.runner_version`` reads it back and
``standalone.timer_for_runner`` decides from it what a file's runner accepts.
"""

from __future__ import annotations

from .bench import cpu_wall_bench as _tko_cpu_wall_bench  # stamped as a copy of that function

RUNNER_VERSION = 5
RESULT_PREFIX = "TKO_KERNEL_RESULT "
# the runner's --timer values (one list for the runner and run_captured_kernel.py)
TIMER_CHOICES = ("do_bench", "cudagraph", "profiler", "profiler_flushed", "both", "all")

# set by the stamp's header in a standalone file
_TKO_RESULT_PREFIX = RESULT_PREFIX
_TKO_TIMER_CHOICES = TIMER_CHOICES
_TKO_SPEC: dict = {}

STAMP_BEGIN = "# ---- tko runner: stamp begin ----"
STAMP_END = "# ---- tko runner: stamp end ----"

# ---- tko runner: stamp begin ----


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


def _tko_constexpr(value):
    # a tl.dtype constexpr (Liger's X_dtype) is recorded as its repr, "triton.language.bfloat16"
    if isinstance(value, str) and value.startswith("triton.language."):
        import triton.language as tl

        found = getattr(tl, value[len("triton.language."):], None)
        if isinstance(found, tl.dtype):
            return found
    return value


def _tko_config(flat):
    import triton

    flat = {k: _tko_constexpr(v) for k, v in flat.items()}
    opts = {k: flat.pop(k) for k in ("num_warps", "num_stages", "num_ctas", "maxnreg") if k in flat}
    try:
        return triton.Config(flat, **opts)
    except TypeError:  # older triton without num_ctas / maxnreg
        return triton.Config(flat, num_warps=opts.get("num_warps", 4), num_stages=opts.get("num_stages", 2))


def _tko_jit_function(obj):
    # the @triton.jit kernel itself, not an Autotuner or a @triton.heuristics around it (their .fn is
    # another launchable kernel; launching them would redo their choices over the swept values)
    for _ in range(8):
        wrapper = hasattr(obj, "configs") or hasattr(getattr(obj, "fn", None), "run")
        if hasattr(obj, "arg_names") and hasattr(obj, "run") and not wrapper:
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
    kwargs.update({k: _tko_constexpr(v) for k, v in cfg["flat"].items()})
    if not cfg.get("grid"):
        raise RuntimeError("no grid was recorded for this config")
    grid = tuple(cfg["grid"])
    return lambda: jit[grid](*args, **kwargs)


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


def _tko_parser(spec):
    import argparse

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
    return parser


def _tko_launcher(spec, cfg, args, here, device, launch):
    # (call, launch used): through Inductor's CachingAutotuner or the @triton.jit function;
    # "auto" falls back to the plain JIT launch when the Inductor one cannot be built
    import sys

    how = spec["launch"] if launch == "auto" else launch
    if how == "inductor":
        try:
            return _tko_inductor_call(spec, cfg, args, device), how
        except Exception as exc:
            if launch != "auto":
                raise
            print(f"{spec['kernel']}: Inductor launch failed ({type(exc).__name__}: {exc}); "
                  "falling back to a plain JIT launch", file=sys.stderr)
    return _tko_jit_call(spec, cfg, args, here, device), "jit"


def _tko_time(call, spec, opts):
    # [(timer, ms)]: the chosen device timers, or the host clock in the interpreter
    import torch

    call()
    if opts.device.startswith("cuda"):
        torch.cuda.synchronize()
        return _tko_gpu_timings(call, spec, opts.timer, opts.warmup, opts.rep)
    return [("perf_counter", _tko_cpu_wall_bench(call, 0, opts.rep, min_calls=3, max_calls=100))]


def _tko_report(record, timings, spec, cfg, how, opts):
    import json

    for timer, ms in timings:
        gbps = spec["num_bytes"] / (ms * 1e-3) / 1e9 if spec.get("num_bytes") and ms > 0 else None
        out = dict(record, ok=True, ms=ms, gb_per_s=gbps, statistic="median", timer=timer, launch=how,
                   warmup_ms=opts.warmup, rep_ms=opts.rep)
        print(_TKO_RESULT_PREFIX + json.dumps(out), flush=True)
        rate = f"{gbps:.1f} GB/s" if gbps is not None else "n/a GB/s"
        print(f"{spec['kernel']} [{_tko_label(cfg['flat'])}]: {ms:.4f} ms, {rate} ({how} launch, {timer})",
              flush=True)


def _tko_main(argv=None):
    import json
    import os
    import sys

    spec = _TKO_SPEC
    opts = _tko_parser(spec).parse_args(argv)

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
            call, how = _tko_launcher(spec, cfg, args, here, opts.device, opts.launch)
            timings = _tko_time(call, spec, opts)
        except Exception as exc:
            failures += 1
            record.update(ok=False, error=f"{type(exc).__name__}: {exc}")
            print(_TKO_RESULT_PREFIX + json.dumps(record), flush=True)
            print(f"{spec['kernel']} [{_tko_label(cfg['flat'])}]: FAILED {record['error']}", file=sys.stderr)
            continue
        _tko_report(record, timings, spec, cfg, how, opts)
    return 1 if failures else 0


# ---- tko runner: stamp end ----
