import sys as _tko_sys; _tko_sys.path.insert(0, '/work/main/examples')
"""A hand-written `@triton.autotune` kernel (fused scale + bias + ReLU) run outside torch.compile."""

import torch
import triton
import triton.language as tl

from _repro import parse_args, run_steps


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=2),
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 4096}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def scale_bias_relu_kernel(x_ptr, bias_ptr, out_ptr, n_elements, n_cols, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + offs % n_cols, mask=mask)
    y = tl.maximum(x * scale + b, 0.0)
    tl.store(out_ptr + offs, y, mask=mask)


def scale_bias_relu(x, bias, scale=0.5):
    out = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    scale_bias_relu_kernel[grid](x, bias, out, n, x.shape[-1], scale)
    return out


def main():
    args = parse_args(__doc__)
    if not args.device.startswith("cuda"):
        raise SystemExit("user_autotune_kernel.py needs a GPU (autotuning times configs on the device)")
    torch.manual_seed(0)
    x = torch.randn(8192, 4096, device=args.device)
    bias = torch.randn(4096, device=args.device)
    ref = torch.relu(x * 0.5 + bias)
    torch.testing.assert_close(scale_bias_relu(x, bias), ref)
    run_steps(lambda: scale_bias_relu(x, bias), args, "user_autotune_kernel")


if False:  # the module's own entry point, disabled in the captured copy
    main()


# ---------------------------------------------------------------------------------------------
# Standalone runner (written by autotune_capture_patch.py). Needs only torch and triton:
#   python THIS_FILE.py [--all-configs] [--warmup MS] [--rep MS] [--launch auto|inductor|jit]
# One line per config: the prefix below + JSON (kernel, config, ms, bytes, gb_per_s), then a human line.
_TKO_RESULT_PREFIX = 'TKO_KERNEL_RESULT '
_TKO_SPEC = __import__("json").loads('{"args": [{"device": "cuda:0", "dtype": "float32", "kind": "tensor", "name": "x_ptr", "shape": [8192, 4096], "storage_numel": 33554432, "storage_offset": 0, "stride": [4096, 1]}, {"device": "cuda:0", "dtype": "float32", "kind": "tensor", "name": "bias_ptr", "shape": [4096], "storage_numel": 4096, "storage_offset": 0, "stride": [1]}, {"device": "cuda:0", "dtype": "float32", "kind": "tensor", "name": "out_ptr", "shape": [8192, 4096], "storage_numel": 33554432, "storage_offset": 0, "stride": [4096, 1]}, {"dtype": "int", "kind": "scalar", "name": "n_elements", "value": 33554432}, {"dtype": "int", "kind": "scalar", "name": "n_cols", "value": 4096}, {"dtype": "float", "kind": "scalar", "name": "scale", "value": 0.5}], "bytes_source": "get_num_bytes", "captured_with": {"torch": "2.11.0+cu130", "triton": "3.6.0"}, "configs": [{"flat": {"BLOCK": 1024, "num_stages": 3, "num_warps": 4}, "grid": [32768]}, {"flat": {"BLOCK": 256, "num_stages": 3, "num_warps": 2}, "grid": [131072]}, {"flat": {"BLOCK": 4096, "num_stages": 3, "num_warps": 8}, "grid": [8192]}], "device": {"arch": "sm_90", "backend": "cuda", "index": 0, "name": "NVIDIA H200", "warp_size": 32}, "extra_kwargs": {}, "function": "scale_bias_relu_kernel", "kernel": "scale_bias_relu_kernel", "launch": "jit", "num_bytes": 268451840, "source_file": "/work/main/examples/user_autotune_kernel.py"}')
_TKO_TIMER_CHOICES = ('do_bench', 'cudagraph', 'profiler', 'profiler_flushed', 'both', 'all')


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
    obj.inductor_meta = dict(getattr(obj, "inductor_meta", None) or {}, coordinate_descent_tuning=False)
    if hasattr(obj, "launchers"):
        obj.launchers = []
    if os.environ.get("TRITON_INTERPRET") != "1":  # the interpreter runs configs[0] directly
        obj.precompile()
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
    parser.add_argument("--timer", choices=_TKO_TIMER_CHOICES, default="do_bench",
                        help="do_bench: triton.testing.do_bench median, L2 flushed before each call; "
                             "cudagraph: do_bench_cudagraph median, no launch overhead, L2 not flushed; "
                             "profiler: torch.profiler device duration per launch (median), the instrument "
                             "of a program profile, L2 warm; profiler_flushed: the same, L2 flushed before "
                             "each launch; both: do_bench and cudagraph; all: every timer")
    parser.add_argument("--device", default=None,
                        help="cuda (default when a GPU is present); cpu only under TRITON_INTERPRET=1")
    opts = parser.parse_args(argv)

    import torch
    import triton
    import triton.testing

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
                if opts.timer in ("do_bench", "both", "all"):
                    timings.append(("triton.testing.do_bench", float(triton.testing.do_bench(
                        call, warmup=opts.warmup, rep=opts.rep, return_mode="median"))))
                if opts.timer in ("cudagraph", "both", "all"):
                    timings.append(("triton.testing.do_bench_cudagraph", float(triton.testing.do_bench_cudagraph(
                        call, rep=opts.rep, return_mode="median"))))
                if opts.timer in ("profiler", "profiler_flushed", "all"):
                    name = _tko_jit_function(globals()[spec["function"]]).__name__
                    if opts.timer != "profiler_flushed":
                        timings.append(("torch.profiler", _tko_profiler_ms(call, name, opts.rep, flush=False)))
                    if opts.timer != "profiler":
                        timings.append(("torch.profiler.l2_flushed",
                                        _tko_profiler_ms(call, name, opts.rep, flush=True)))
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
