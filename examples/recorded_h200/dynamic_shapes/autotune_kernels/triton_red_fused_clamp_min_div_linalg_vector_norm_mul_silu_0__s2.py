
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.reduction(
    size_hints={'x': 512, 'r0_': 1024},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'in_ptr1': '*fp32', 'out_ptr1': '*fp32', 'ks0': 'i64', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 4, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': True, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 0, 'r0_': 4721664}}
)
@triton.jit
def triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0(in_ptr0, in_ptr1, out_ptr1, ks0, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = xindex
    _tmp10 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + ks0*x0), r0_mask & xmask, eviction_policy='evict_last', other=0.0)
        tmp6 = tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)
        tmp1 = -tmp0
        tmp2 = libdevice.exp(tmp1)
        tmp3 = tl.full([1, 1], 1.0, tl.float32)
        tmp4 = tmp2 + tmp3
        tmp5 = (tmp0 / tmp4)
        tmp7 = tmp5 * tmp6
        tmp8 = tmp7 * tmp7
        tmp9 = tl.broadcast_to(tmp8, [XBLOCK, R0_BLOCK])
        tmp11 = _tmp10 + tmp9
        _tmp10 = tl.where(r0_mask & xmask, tmp11, _tmp10)
    tmp10 = tl.sum(_tmp10, 1)[:, None]
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_1 = r0_index
        tmp12 = tl.load(in_ptr0 + (r0_1 + ks0*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)
        tmp18 = tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)
        tmp13 = -tmp12
        tmp14 = libdevice.exp(tmp13)
        tmp15 = tl.full([1, 1], 1.0, tl.float32)
        tmp16 = tmp14 + tmp15
        tmp17 = (tmp12 / tmp16)
        tmp19 = tmp17 * tmp18
        tmp20 = tl.sqrt_rn(tmp10)
        tmp21 = tl.full([1, 1], 1e-06, tl.float32)
        tmp22 = triton_helpers.maximum(tmp20, tmp21)
        tmp23 = (tmp19 / tmp22)
        tl.store(out_ptr1 + (r0_1 + ks0*x0), tmp23, r0_mask & xmask)


# ---------------------------------------------------------------------------------------------
# Standalone runner (written by autotune_capture_patch.py). Needs only torch and triton:
#   python THIS_FILE.py [--all-configs] [--warmup MS] [--rep MS] [--launch auto|inductor|jit]
# One line per config: the prefix below + JSON (kernel, config, ms, bytes, gb_per_s), then a human line.
_TKO_RESULT_PREFIX = 'TKO_KERNEL_RESULT '
_TKO_SPEC = __import__("json").loads('{"args": [{"device": "cuda:0", "dtype": "float32", "kind": "tensor", "name": "in_ptr0", "shape": [4, 257, 768], "storage_numel": 789504, "storage_offset": 0, "stride": [197376, 768, 1]}, {"device": "cuda:0", "dtype": "float32", "kind": "tensor", "name": "in_ptr1", "shape": [768], "storage_numel": 768, "storage_offset": 0, "stride": [1]}, {"device": "cuda:0", "dtype": "float32", "kind": "tensor", "name": "out_ptr1", "shape": [4, 257, 768], "storage_numel": 789504, "storage_offset": 0, "stride": [197376, 768, 1]}, {"dtype": "int", "kind": "scalar", "name": "ks0", "value": 768}, {"dtype": "int", "kind": "scalar", "name": "xnumel", "value": 1028}, {"dtype": "int", "kind": "scalar", "name": "r0_numel", "value": 768}], "bytes_source": "get_num_bytes", "captured_with": {"torch": "2.11.0+cu130", "triton": "3.6.0"}, "configs": [{"flat": {"R0_BLOCK": 1024, "XBLOCK": 2, "num_stages": 1, "num_warps": 8}, "grid": [514, 1, 1]}], "device": {"arch": "sm_90", "backend": "cuda", "index": 0, "name": "NVIDIA H200", "warp_size": 32}, "extra_kwargs": {}, "function": "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0", "kernel": "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0", "launch": "inductor", "num_bytes": 6319104, "source_file": "/tmp/rec/dynamic_shapes/capture/inductor_cache/tmp9r0lov5s/xp/cxpgb6z3kzrm2elrmmxi6qe4utoprxk37gdjvtwmel3o2iyi4bct.py"}')


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
    parser.add_argument("--timer", choices=("do_bench", "cudagraph", "both"), default="do_bench",
                        help="do_bench: triton.testing.do_bench median, L2 flushed before each call; "
                             "cudagraph: do_bench_cudagraph median, no launch overhead, L2 not flushed; "
                             "both: one result line for each")
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
                if opts.timer in ("do_bench", "both"):
                    timings.append(("triton.testing.do_bench", float(triton.testing.do_bench(
                        call, warmup=opts.warmup, rep=opts.rep, return_mode="median"))))
                if opts.timer in ("cudagraph", "both"):
                    timings.append(("triton.testing.do_bench_cudagraph", float(triton.testing.do_bench_cudagraph(
                        call, rep=opts.rep, return_mode="median"))))
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
