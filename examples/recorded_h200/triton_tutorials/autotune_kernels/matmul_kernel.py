import sys as _tko_sys; _tko_sys.path.insert(0, '/work/main/examples/triton_tutorials')
_tko_own_file, __file__ = __file__, '/work/main/examples/triton_tutorials/tutorial_kernels.py'
"""The Triton tutorials' classics, launched as the tutorials launch them: fused softmax (02, one
program per row, num_warps from the row length), layer norm forward (05, one program per row,
chunks of BLOCK_SIZE, num_warps = BLOCK_SIZE // 256 within 1..8) and matmul (03, @triton.autotune
over a short config list, grouped program order). A step is softmax -> layer norm -> matmul.

    python examples/triton_tutorials/tutorial_kernels.py --steps 20
    TRITON_INTERPRET=1 python examples/triton_tutorials/tutorial_kernels.py --device cpu --rows 64 --cols 128

Sources: triton-lang/triton python/tutorials/02-fused-softmax.py (the one-row-per-program version,
Triton 2.x), 05-layer-norm.py (_layer_norm_fwd_fused and its launch), 03-matrix-multiplication.py
(matmul_kernel; the config list trimmed to four of the tutorial's CUDA configs).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/_repro.py

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from _repro import parse_args, run_steps  # noqa: E402


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    row = tl.load(row_start_ptr + col_offsets, mask=col_offsets < n_cols, other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    softmax_output = numerator / tl.sum(numerator, axis=0)
    tl.store(output_ptr + row_idx * output_row_stride + col_offsets, softmax_output, mask=col_offsets < n_cols)


@triton.jit
def _layer_norm_fwd_fused(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(Y + cols, y, mask=mask)


MATMUL_CONFIGS = [
    triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
    triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, num_stages=2, num_warps=2),
]


# the interpreter has no benchmarker: one config there, so the Autotuner launches it without timing
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


@triton.autotune(configs=MATMUL_CONFIGS[-1:] if INTERPRETED else MATMUL_CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def softmax(x):
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 16 if BLOCK_SIZE >= 4096 else 8 if BLOCK_SIZE >= 2048 else 4   # the tutorial's rule
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, num_warps=num_warps, BLOCK_SIZE=BLOCK_SIZE)
    return y


def layer_norm(x, weight, bias, eps=1e-5):
    y = torch.empty_like(x)
    M, N = x.shape
    mean = torch.empty((M,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    MAX_FUSED_SIZE = 65536 // x.element_size()
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
    _layer_norm_fwd_fused[(M,)](x, y, weight, bias, mean, rstd, x.stride(0), N, eps,
                                BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps, num_ctas=1)
    return y


def matmul(a, b):
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c


def main():
    def extra(p):
        p.add_argument("--rows", type=int, default=4096)
        p.add_argument("--cols", type=int, default=4096)

    args = parse_args(__doc__, extra)
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("tutorial_kernels.py on the CPU needs TRITON_INTERPRET=1")
    dtype = torch.float16 if args.device != "cpu" else torch.float32
    torch.manual_seed(0)
    x = torch.randn(args.rows, args.cols, device=args.device, dtype=dtype)
    w = torch.rand(args.cols, device=args.device, dtype=dtype)
    b = torch.rand(args.cols, device=args.device, dtype=dtype)
    proj = torch.randn(args.cols, args.cols, device=args.device, dtype=dtype) / args.cols ** 0.5
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.float16 else {"rtol": 1e-4, "atol": 1e-4}
    s = softmax(x)
    torch.testing.assert_close(s, torch.softmax(x.float(), -1).to(dtype), **tol)
    n = layer_norm(s, w, b)
    torch.testing.assert_close(n, torch.nn.functional.layer_norm(s.float(), (args.cols,), w.float(), b.float(), 1e-5)
                               .to(dtype), **tol)
    torch.testing.assert_close(matmul(n, proj), (n.float() @ proj.float()).to(dtype), rtol=2e-2, atol=5e-2)

    def step():
        return matmul(layer_norm(softmax(x), w, b), proj)

    run_steps(step, args, "tutorial_kernels")


if False:  # the module's own entry point, disabled in the captured copy
    main()

# ---------------------------------------------------------------------------------------------
# Standalone runner, stamped from tko/measure/standalone_runner.py. Needs only torch and triton:
#   python THIS_FILE.py [--all-configs] [--warmup MS] [--rep MS] [--launch auto|inductor|jit] [--timer T]
# One line per config: the prefix below + JSON (kernel, config, ms, bytes, gb_per_s), then a human line.
if "_tko_own_file" in globals():  # the copy's own path again (its saved inputs lie beside it)
    __file__ = _tko_own_file
_TKO_RUNNER_VERSION = 5
_TKO_RESULT_PREFIX = 'TKO_KERNEL_RESULT '
_TKO_SPEC = __import__("json").loads('{"args": [{"device": "cuda:0", "dtype": "float16", "kind": "tensor", "name": "a_ptr", "shape": [4096, 4096], "storage_numel": 16777216, "storage_offset": 0, "stride": [4096, 1]}, {"device": "cuda:0", "dtype": "float16", "kind": "tensor", "name": "b_ptr", "shape": [4096, 4096], "storage_numel": 16777216, "storage_offset": 0, "stride": [4096, 1]}, {"device": "cuda:0", "dtype": "float16", "kind": "tensor", "name": "c_ptr", "shape": [4096, 4096], "storage_numel": 16777216, "storage_offset": 0, "stride": [4096, 1]}, {"dtype": "int", "kind": "scalar", "name": "M", "value": 4096}, {"dtype": "int", "kind": "scalar", "name": "N", "value": 4096}, {"dtype": "int", "kind": "scalar", "name": "K", "value": 4096}, {"dtype": "int", "kind": "scalar", "name": "stride_am", "value": 4096}, {"dtype": "int", "kind": "scalar", "name": "stride_ak", "value": 1}, {"dtype": "int", "kind": "scalar", "name": "stride_bk", "value": 4096}, {"dtype": "int", "kind": "scalar", "name": "stride_bn", "value": 1}, {"dtype": "int", "kind": "scalar", "name": "stride_cm", "value": 4096}, {"dtype": "int", "kind": "scalar", "name": "stride_cn", "value": 1}], "bytes_source": "get_num_bytes", "captured_with": {"torch": "2.11.0+cu130", "triton": "3.6.0"}, "configs": [{"flat": {"BLOCK_SIZE_K": 64, "BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "GROUP_SIZE_M": 8, "num_stages": 3, "num_warps": 8}, "grid": [512]}, {"flat": {"BLOCK_SIZE_K": 32, "BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 256, "GROUP_SIZE_M": 8, "num_stages": 4, "num_warps": 4}, "grid": [1024]}, {"flat": {"BLOCK_SIZE_K": 32, "BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "GROUP_SIZE_M": 8, "num_stages": 4, "num_warps": 4}, "grid": [1024]}, {"flat": {"BLOCK_SIZE_K": 32, "BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "GROUP_SIZE_M": 8, "num_stages": 2, "num_warps": 2}, "grid": [16384]}], "device": {"arch": "sm_90", "backend": "cuda", "index": 0, "name": "NVIDIA H200", "warp_size": 32}, "extra_kwargs": {}, "function": "matmul_kernel", "kernel": "matmul_kernel", "launch": "jit", "num_bytes": 100663296, "source_file": "examples/triton_tutorials/tutorial_kernels.py"}')
_TKO_TIMER_CHOICES = ('do_bench', 'cudagraph', 'profiler', 'profiler_flushed', 'both', 'all')


def _tko_cpu_wall_bench(fn, warmup=0, rep=0, quantiles=None, min_calls=3, max_calls=100):
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


if __name__ == "__main__":
    raise SystemExit(_tko_main())
