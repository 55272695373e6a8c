"""Why is Inductor's looped RMSNorm faster than the chunked row kernel, and which loop form wins?

    TRITON_CACHE_DIR=D1 TORCHINDUCTOR_CACHE_DIR=D2 \\
      python tests/gpu/drivers/pass2_probe.py --out-dir OUT [--cols 65536] [--dtype fp16]

The chunked form (tko.remedies.rowkernels) reads a long row twice, and pass 2 is meant to find it in L2.
At 2048 x 65536 fp16 Inductor's coordinate-descent RMSNorm (the same two loops, R0_BLOCK 16384 at
32 warps, the same eviction hints on the row) ran at 90 % of copy, the bundled one at 80 %: its loop
has a compile-time bound (static shapes), so its loads carry no mask and the compiler unrolls the
loop and issues a row's loads back to back. This times, in one process, each op's bundled chunked
kernel at a few launches in both forms:

- ``loop``: a runtime bound and masked loads (``RowPlan.n_chunks`` 0);
- ``unrolled``: the chunk count a compile-time constant (``row_plan.unrolled_chunks``);
- ``unrolled_w_evict_last`` (the norms) / ``unrolled_num_stages_1``: the unrolled kernel with
  the weight loaded ``evict_last`` / compiled with ``num_stages=1``, as Inductor's RMSNorm;
- ``loop_y_cs`` / ``unrolled_y_cs`` (``_y_plain``): the chunked kernel with its output always (never)
  stored streamed (``.cs``), whatever the plan's ``stream_out`` (call23_l2_rows/call29_chunked_cs);
- ``unrolled_row_guard`` (RMSNorm): ``_rms_norm_guarded_kernel``, the plan's form on sm_90 rows of
  up to 4 chunks;
- ``inductor_copy*`` / ``bundled_*`` (RMSNorm): Inductor's looped RMSNorm copied here, and the
  bundled one, with one trait at a time switched (addressing, int width, row mask, weight hint;
  call17_row_guard found the guarded form with them);
- ``inductor_default`` / ``coordinate_descent``: torch.compile of the op, default and coordinate
  descent.

The first run of this driver (call9_pass2_probe; the driver as of that commit) also timed probe
copies with pass 2 walking the row backwards, no masks with a runtime bound, the weight loaded
evict_last and ``tl.range(loop_unroll_factor=4)``: none beat the bundled loop.

Every output is checked against the op's fp32 reference. At the end the cubins in the Triton and
Inductor caches are read with cuobjdump (registers, spill, shared memory), and the SASS of the
RMSNorm kernels is kept, so that the kernels can be compared instruction by instruction.
Not a pytest test: it needs a GPU. Writes OUT/pass2_probe.{json,md} and OUT/pass2_sass.tar.gz.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from tko.read import isa, isa_ptx  # noqa: E402
from tko.measure import peaks  # noqa: E402
from tko.remedies import row_plan, row_triton, rowkernels as rk, rowkernel_sweep as sweep  # noqa: E402
from tko.measure.bench import time_fn  # noqa: E402

# (op, CHUNK, warps): the sm_90 plan's launch (CHUNK_PLANS), then its neighbours
LAUNCHES = {"rms_norm": ((16384, 32), (8192, 32), (16384, 16), (4096, 32)),
            "layer_norm": ((16384, 32), (8192, 32), (16384, 16), (4096, 32)),
            "softmax": ((16384, 16), (16384, 32), (8192, 32)),
            "log_softmax": ((16384, 16), (16384, 32), (8192, 32))}
# unrolled_w_evict_last: the norms' weight (and bias) loaded evict_last in pass 2, as Inductor's
# looped RMSNorm loads its weight (the one difference left in their SASS, call10_unrolled; it lost
# 1-4 points, call13_weight_evict_last); unrolled_num_stages_1: compiled with num_stages=1, as
# Inductor's coordinate-descent RMSNorm config is (its .best_config, chunk_probe)
# inductor_copy*: Inductor's coordinate-descent RMSNorm kernel (call7_inductor_rms_norm.log) copied
# with switches that turn one of its traits at a time into the bundled kernel's: ``_while`` (a while
# loop instead of tl.range), ``_i64`` (a 64-bit row base instead of 32-bit offsets), ``_nomask`` (no
# row mask on the loads and stores), ``_ns3`` (num_stages 3 instead of 1); rms_norm only
VARIANTS = ("loop", "unrolled", "unrolled_row_guard", "unrolled_w_evict_last", "unrolled_num_stages_1",
            "loop_y_cs", "unrolled_y_cs", "loop_y_plain", "unrolled_y_plain", "inductor_copy",
            "inductor_copy_while", "inductor_copy_i64", "inductor_copy_nomask", "inductor_copy_ns3",
            *(f"bundled_{a}_{i}_{m}" for a in ("base", "vec") for i in ("i64", "i32")
              for m in ("nomask", "rowmask")),
            "bundled_vec_i32_rowmask_wlast", "bundled_vec_i32_rowmask_where",
            "bundled_vec_i32_rowmask_wlast_where")
# bundled_<addr>_<int>_<mask>: the bundled unrolled RMSNorm (rms_norm only) with its row addressed
# as a scalar base pointer plus column offsets (``base``, the library's) or one vector of offsets
# from X (``vec``, Inductor's), row offsets in ``i64`` (the library's) or ``i32``, and loads and
# stores under a uniform row mask (``rowmask``, Inductor's xmask) or none; ``_wlast``: the weight
# loaded evict_last, ``_where``: pass 1 accumulates through tl.where(mask), both as Inductor's
INDUCTOR_MODES = ("inductor_default", "coordinate_descent")


def library_fn(op: str, variant: str, args: tuple, chunk: int, warps: int):
    """The bundled chunked kernel at one launch: ``loop`` (a runtime bound, masked loads) or
    ``unrolled`` (the chunk count a compile-time constant, ``RowPlan.n_chunks``)."""
    x = args[0]
    lim = row_plan.device_limit(x.device)
    unrolled = variant.startswith("unrolled")
    n_chunks = row_plan.unrolled_chunks(x.shape[-1], chunk) if unrolled else 0
    w_hint = variant.endswith("w_evict_last")
    y_store = next((k for k in ("y_cs", "y_plain") if variant.endswith("_" + k)), None)
    if variant.startswith("bundled_"):
        return _bundled_switch_fn(variant, args, chunk, warps) if op == "rms_norm" else None
    if variant.startswith("inductor_copy"):
        return _inductor_copy_fn(variant, args, chunk, warps) if op == "rms_norm" else None
    if (unrolled and not n_chunks) or (w_hint and op not in ("layer_norm", "rms_norm")) or (
            variant == "unrolled_row_guard" and op != "rms_norm"):
        return None
    plan = row_plan.RowPlan(op, x.shape[0], x.shape[-1], row_plan.next_pow2(x.shape[-1]), warps, lim,
                      chunk=chunk, row_stats=op in ("softmax", "log_softmax"), n_chunks=n_chunks,
                      row_guard=variant == "unrolled_row_guard",
                      stream_out=-(-x.shape[-1] // chunk) <= row_plan.chunk_plan(lim, op).stream_out)
    if w_hint:
        return lambda: _launch_direct(plan, _w_evict_last_kernels()[op], args)
    if y_store:
        return lambda: _launch_direct(plan, _y_store_kernels(y_store)[op], args)
    if variant.endswith("num_stages_1"):
        kernel = row_triton.jitted_kernels()[("softmax" if "softmax" in op else op) + "_chunked"]
        return lambda: _launch_direct(plan, kernel, args, num_stages=1)
    eps = sweep.LN_EPS if op == "layer_norm" else sweep.RMS_EPS
    wb = tuple(args[1:3]) + (None,) * (3 - len(args))
    return lambda: row_triton.launch_forward(plan, x, wb[0], wb[1], eps)[0]


@triton.jit
def _rms_norm_inductor_copy(in_ptr0, in_ptr1, out_ptr1, xnumel: tl.constexpr, r0_numel: tl.constexpr,
                            eps, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr, RANGE: tl.constexpr,
                            I64: tl.constexpr, MASKED: tl.constexpr):
    """Inductor's looped RMSNorm (triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0 of torch 2.11,
    XBLOCK 1), RANGE / I64 / MASKED switching its loop, row offsets and masks."""
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    if not MASKED:
        xmask = tl.full([XBLOCK, 1], True, tl.int1)
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    if I64:
        x_row = in_ptr0 + xindex.to(tl.int64) * r0_numel
        y_row = out_ptr1 + xindex.to(tl.int64) * r0_numel
    else:
        x_row = in_ptr0 + xindex * r0_numel
        y_row = out_ptr1 + xindex * r0_numel
    _tmp4 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    if RANGE:
        for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
            tmp1 = tl.load(x_row + (r0_offset + r0_base), xmask, eviction_policy="evict_last", other=0.0).to(tl.float32)
            _tmp4 = tl.where(xmask, _tmp4 + tmp1 * tmp1, _tmp4)
    else:
        r0_offset = 0
        while r0_offset < r0_numel:
            tmp1 = tl.load(x_row + (r0_offset + r0_base), xmask, eviction_policy="evict_last", other=0.0).to(tl.float32)
            _tmp4 = tl.where(xmask, _tmp4 + tmp1 * tmp1, _tmp4)
            r0_offset += R0_BLOCK
    rstd = tl.math.rsqrt(tl.sum(_tmp4, 1)[:, None] / r0_numel + tl.cast(eps, tl.float32))
    if RANGE:
        for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
            c = r0_offset + r0_base
            tmp6 = tl.load(x_row + c, xmask, eviction_policy="evict_first", other=0.0).to(tl.float32)
            tmp14 = tl.load(in_ptr1 + c, None, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + c, tmp6 * rstd * tmp14, xmask)
    else:
        r0_offset = 0
        while r0_offset < r0_numel:
            c = r0_offset + r0_base
            tmp6 = tl.load(x_row + c, xmask, eviction_policy="evict_first", other=0.0).to(tl.float32)
            tmp14 = tl.load(in_ptr1 + c, None, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + c, tmp6 * rstd * tmp14, xmask)
            r0_offset += R0_BLOCK


def _inductor_copy_fn(variant: str, args: tuple, chunk: int, warps: int):
    """``_rms_norm_inductor_copy`` at one launch, as Inductor launches it (num_stages 1) unless the
    variant's suffix switches one trait to the bundled kernel's."""
    x, w = args[0], args[1]
    n_rows, n_cols = x.shape

    def run():
        y = torch.empty_like(x)
        _rms_norm_inductor_copy[(n_rows,)](
            x, w, y, n_rows, n_cols, sweep.RMS_EPS, XBLOCK=1, R0_BLOCK=chunk,
            RANGE=not variant.endswith("_while"), I64=variant.endswith("_i64"),
            MASKED=not variant.endswith("_nomask"), num_warps=warps,
            num_stages=3 if variant.endswith("_ns3") else 1)
        return y
    return run


@triton.jit
def _rms_norm_switches(X, Y, W, stride_x, stride_y, n_rows, n_cols, eps, CHUNK: tl.constexpr,
                       N_CHUNKS: tl.constexpr, VEC: tl.constexpr, I32: tl.constexpr,
                       ROWMASK: tl.constexpr, WLAST: tl.constexpr, WHERE: tl.constexpr):
    """The bundled unrolled RMSNorm (``_rms_norm_chunked_kernel``, HAS_W, no stats) with the
    row's addressing and a row mask switched (see ``bundled_*`` above)."""
    pid = tl.program_id(0)
    row = pid if I32 else pid.to(tl.int64)
    cols = tl.arange(0, CHUNK)
    ok = tl.full([CHUNK], 0, tl.int32) + pid < n_rows
    if VEC:
        xb, yb, xo, yo = X, Y, row * stride_x, row * stride_y
    else:
        xb, yb, xo, yo = X + row * stride_x, Y + row * stride_y, 0, 0
    end = N_CHUNKS * CHUNK
    s2 = tl.zeros([CHUNK], dtype=tl.float32)
    start = 0
    while start < end:
        if ROWMASK:
            x = tl.load(xb + (xo + start + cols), mask=ok, other=0.0, eviction_policy="evict_last")
        else:
            x = tl.load(xb + (xo + start + cols), eviction_policy="evict_last")
        x = x.to(tl.float32)
        if WHERE:
            s2 = tl.where(ok, s2 + x * x, s2)
        else:
            s2 += x * x
        start += CHUNK
    rstd = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / n_cols + tl.cast(eps, tl.float32))
    start = 0
    while start < end:
        c = start + cols
        if ROWMASK:
            x = tl.load(xb + (xo + c), mask=ok, other=0.0, eviction_policy="evict_first")
        else:
            x = tl.load(xb + (xo + c), eviction_policy="evict_first")
        if WLAST:
            w = tl.load(W + c, eviction_policy="evict_last")
        else:
            w = tl.load(W + c)
        y = x.to(tl.float32) * rstd * w.to(tl.float32)
        if ROWMASK:
            tl.store(yb + (yo + c), y.to(Y.dtype.element_ty), mask=ok)
        else:
            tl.store(yb + (yo + c), y.to(Y.dtype.element_ty))
        start += CHUNK


def _bundled_switch_fn(variant: str, args: tuple, chunk: int, warps: int):
    x, w = args[0], args[1]
    n_chunks = row_plan.unrolled_chunks(x.shape[-1], chunk)
    if not n_chunks:
        return None
    _, addr, ints, mask, *extra = variant.split("_")

    def run():
        y = torch.empty_like(x)
        _rms_norm_switches[(x.shape[0],)](
            x, y, w, x.stride(0), y.stride(0), x.shape[0], x.shape[1], sweep.RMS_EPS, CHUNK=chunk,
            N_CHUNKS=n_chunks, VEC=addr == "vec", I32=ints == "i32", ROWMASK=mask == "rowmask",
            WLAST="wlast" in extra, WHERE="where" in extra, num_warps=warps)
        return y
    return run


_COPIES: dict = {}


def _kernel_copies(kind: str, edit, names=("_layer_norm_chunked_kernel", "_rms_norm_chunked_kernel"),
                   extra: str = "") -> dict:
    """op -> a copy of the library's chunked kernel whose source ``edit`` changed, written to a
    module file (triton.jit reads a kernel's source from its file); ``extra``: more module source."""
    if kind not in _COPIES:
        import importlib.util
        import inspect
        import tempfile
        import textwrap

        srcs = [edit(textwrap.dedent(inspect.getsource(getattr(row_triton, n)))) for n in names]
        head = ("import triton\nimport triton.language as tl\n"
                "from tko.remedies.rowkernels import _load_chunk, _store_chunk, _row_end\n\n")
        path = Path(tempfile.mkdtemp()) / f"{kind}_kernels.py"
        path.write_text(head + extra + "\n\n".join("@triton.jit\n" + src for src in srcs))
        spec = importlib.util.spec_from_file_location(f"{kind}_kernels", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        ops = {"_softmax_chunked_kernel": ("softmax", "log_softmax"), "_layer_norm_chunked_kernel": ("layer_norm",),
               "_rms_norm_chunked_kernel": ("rms_norm",)}
        _COPIES[kind] = {op: getattr(mod, n) for n in names for op in ops[n]}
    return _COPIES[kind]


def _w_evict_last_kernels() -> dict:
    """The norms' chunked kernels whose pass 2 loads the weight (and bias) evict_last."""
    return _kernel_copies("w_evict_last", lambda src: src.replace('N_CHUNKS > 0, "")', 'N_CHUNKS > 0, "evict_last")'))


_STORE = """@triton.jit
def _store_chunk_{kind}(row_ptr, c, n_cols, v, EVEN: tl.constexpr, STREAM: tl.constexpr):
    if EVEN:
        tl.store(row_ptr + c, v.to(row_ptr.dtype.element_ty), cache_modifier="{mod}")
    else:
        tl.store(row_ptr + c, v.to(row_ptr.dtype.element_ty), mask=c < n_cols, cache_modifier="{mod}")


"""


def _y_store_kernels(kind: str) -> dict:
    """The chunked kernels whose output is stored streamed (``y_cs``, ``.cs``) or plainly
    (``y_plain``), whatever the plan's ``stream_out`` says."""
    mod = {"y_cs": ".cs", "y_plain": ""}[kind]
    return _kernel_copies(kind, lambda src: src.replace("_store_chunk(", f"_store_chunk_{kind}("),
                          ("_softmax_chunked_kernel", "_layer_norm_chunked_kernel", "_rms_norm_chunked_kernel"),
                          _STORE.format(kind=kind, mod=mod))


def _launch_direct(plan, kernel, args, **options):
    """``kernel`` (a copy of, or the bundled, chunked kernel of ``plan.op``) launched as
    ``row_triton.launch_forward`` launches it, no stats, with extra compile ``options``."""
    x = args[0]
    y = torch.empty_like(x)
    common = dict(CHUNK=plan.chunk, N_CHUNKS=plan.n_chunks, STREAM=plan.stream_out, num_warps=plan.num_warps,
                  **options)
    grid = (plan.n_rows,)
    if plan.op in ("softmax", "log_softmax"):
        kernel[grid](x, y, x.stride(0), y.stride(0), plan.n_cols, LOG=plan.op == "log_softmax",
                     ROW_STATS=plan.row_stats, **common)
    elif plan.op == "layer_norm":
        kernel[grid](x, y, args[1], args[2], x, x, x.stride(0), y.stride(0), plan.n_cols, sweep.LN_EPS,
                     HAS_W=True, HAS_B=True, STATS=False, **common)
    else:
        kernel[grid](x, y, args[1], x, x.stride(0), y.stride(0), plan.n_cols, sweep.RMS_EPS,
                     HAS_W=True, STATS=False, **common)
    return y


def cases(ops, args_of, launches, variants, modes):
    for op in ops:
        for chunk, warps in LAUNCHES[op][:launches]:
            for variant in variants:
                fn = library_fn(op, variant, args_of[op], chunk, warps)
                if fn is not None:
                    yield op, variant, chunk, warps, fn
        for mode in modes:
            yield op, mode, None, None, mode


def kernel_resources() -> tuple[list[dict], dict]:
    """Registers / spill / shared memory of every cubin in the Triton and Inductor caches, and
    each cubin's SASS (cuobjdump once a cubin)."""
    rows, sass_of = [], {}
    for env in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        root = os.environ.get(env)
        listings = isa.find_listings(Path(root), sass=True) if root else ()
        for cubin in (p for p, _ in listings if p.suffix == ".cubin"):
            try:
                sass, res = isa_ptx.disassemble_cubin(cubin)
            except Exception as e:  # a cubin cuobjdump cannot read is a row, not the end
                rows.append({"cache": env, "cubin": str(cubin), "error": str(e)[:200]})
                continue
            sass_of[str(cubin)] = sass + "\n" + (res or "")
            for name, usage in isa_ptx.parse_resource_usage(res or "").items():
                rows.append({"cache": env, "cubin": str(cubin), "kernel": name, **usage,
                             "sass_lines": sass.count("\n")})
    return rows, sass_of


def sass_tarball(path: Path, rows: list[dict], sass_of: dict) -> None:
    """The SASS of every RMSNorm kernel (bundled, Inductor) and Inductor's sources."""
    with tarfile.open(path, "w:gz") as tar:
        def add(name, text):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for r in rows:
            k = r.get("kernel", "")
            if "rms" in k or ("red_fused" in k and "rsqrt" in k):
                add(f"sass/{k}_{Path(r['cubin']).parent.name[:8]}.sass", sass_of[r["cubin"]])
        root = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        for src in sorted(Path(root).rglob("*.py")) if root else ():
            text = src.read_text(errors="replace")
            if "@triton.jit" in text or "triton_heuristics" in text:
                add(f"inductor/{src.name}", text)
        for cfg in sorted(Path(root).rglob("*.best_config")) if root else ():
            add(f"inductor/{cfg.name}", cfg.read_text(errors="replace"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--cols", type=int, default=65536)
    p.add_argument("--ops", default="rms_norm,layer_norm,softmax,log_softmax")
    p.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
    p.add_argument("--rep-ms", type=float, default=40.0)
    p.add_argument("--repeat", type=int, default=2, help="rounds over the kernels (noise)")
    p.add_argument("--launches", type=int, default=4, help="the first N launches of each op's list")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--modes", default=",".join(INDUCTOR_MODES), help="Inductor modes timed beside")
    args = p.parse_args()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    copy = peaks.measure_copy(1 << 30, rep_ms=200)["copy_gbps"]
    rows = (1 << 27) // args.cols
    ops = args.ops.split(",")
    args_of = {op: sweep.make_inputs(op, args.dtype, rows, args.cols, "cuda") for op in ops}
    refs = {op: rk.REFERENCES[op](*a) for op, a in args_of.items()}   # eps: the sweep's
    lines = [f"copy {copy:.1f} GB/s; {rows} x {args.cols} {args.dtype}; {torch.cuda.get_device_name()}",
             "| op | variant | CHUNK | warps | us (per round) | % of copy | correct |", "|---|---|---|---|---|---|---|"]
    runs = []
    modes = [m for m in args.modes.split(",") if m]
    for op, variant, chunk, warps, fn in cases(ops, args_of, args.launches,
                                               args.variants.split(","), modes):
        rec = {"op": op, "variant": variant, "chunk": chunk, "num_warps": warps}
        a = args_of[op]
        try:
            if isinstance(fn, str):
                fn_c, _, _ = sweep.compiled(fn, op, lambda f: f(*a))
                fn = (lambda f=fn_c: f(*a))
            ok, err = sweep.check(fn(), refs[op], args.dtype)
            times = [time_fn(fn, warmup_ms=10, rep_ms=args.rep_ms).median_ms for _ in range(args.repeat)]
            t = min(times)
            pct = 100 * sweep.moved_bytes(a) / (t * 1e-3) / 1e9 / copy
            rec.update(us=[round(v * 1e3, 2) for v in times], pct_of_copy=round(pct, 1),
                       correct=ok, max_err=err)
            lines.append(f"| {op} | {variant} | {chunk or '-'} | {warps or '-'} | "
                         f"{' / '.join(f'{v * 1e3:.1f}' for v in times)} | {pct:.1f} % | {ok} |")
        except Exception as e:  # a launch that fails is a row of the table, not the end
            rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            lines.append(f"| {op} | {variant} | {chunk or '-'} | {warps or '-'} | failed: {rec['error']} |")
        print(lines[-1], flush=True)
        runs.append(rec)
    res, sass_of = kernel_resources()
    lines += ["", "| kernel | registers | stack (B) | shared (B) |", "|---|---|---|---|"]
    lines += [f"| {r.get('kernel', r['cubin'])} | {r.get('reg', '-')} | {r.get('stack', '-')} | "
              f"{r.get('shared', '-')} |" for r in res]
    (out_dir / "pass2_probe.md").write_text("\n".join(lines) + "\n")
    (out_dir / "pass2_probe.json").write_text(json.dumps(
        {"schema": "pass2_probe/1", "copy_gbps": copy, "rows": rows, "cols": args.cols,
         "dtype": args.dtype, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
         "triton": triton.__version__, "runs": runs, "kernels": res}, indent=1))
    sass_tarball(out_dir / "pass2_sass.tar.gz", res, sass_of)
    print("\n".join(lines[-len(res) - 3:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
