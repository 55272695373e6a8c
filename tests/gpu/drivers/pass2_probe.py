"""Why does pass 2 of a chunked row kernel miss L2, and does Inductor's own loop do better?

    TRITON_CACHE_DIR=D1 TORCHINDUCTOR_CACHE_DIR=D2 \\
      python tests/gpu/drivers/pass2_probe.py --out-dir OUT [--cols 65536] [--dtype fp16]

The chunked form (tko.rowkernels) reads a long row twice, and pass 2 is meant to find it in L2.
At 2048 x 65536 fp16 Inductor's coordinate-descent RMSNorm (the same two loops, R0_BLOCK 16384 at
32 warps, the same eviction hints) ran at 90 % of copy, the bundled one at 80 %. This times, in one
process, for each op at a few launches:

- ``library``: the bundled kernel as ``rowkernels`` launches it (a while loop, masked loads);
- ``fwd`` / ``rev``: a probe copy with a counted ``tl.range`` loop over chunks, pass 2 walking the
  row forwards or backwards (backwards reads first the chunks pass 1 read last, the most recent in
  L2); ``*_even``: the same with no masks (the row a multiple of CHUNK, as Inductor's static
  shapes give); ``*_whint``: the weight loaded evict_last, as Inductor does;
- ``*_unroll4``: masked loads, each loop unrolled 4 times (``tl.range(loop_unroll_factor=4)``):
  more loads in flight without the no-mask specialization;
- ``inductor_default`` / ``inductor_cd``: torch.compile of the op, default and coordinate descent.

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

from tko import isa_ptx, peaks, rowkernels as rk, rowkernel_sweep as sweep  # noqa: E402
from tko.bench import time_fn  # noqa: E402

# (op, CHUNK, warps): the sm_90 plan's launch first, then the neighbours chunk_probe liked
LAUNCHES = {"rms_norm": ((8192, 32), (16384, 32)),
            "layer_norm": ((8192, 32), (16384, 32)),
            "softmax": ((16384, 16), (8192, 32)),
            "log_softmax": ((16384, 16),)}
VARIANTS = ("library", "fwd", "rev", "fwd_even", "rev_even", "fwd_even_whint", "fwd_unroll4",
            "rev_unroll4")


@triton.jit
def _chunk_start(i, n_chunks, CHUNK: tl.constexpr, REVERSE: tl.constexpr):
    if REVERSE:
        return (n_chunks - 1 - i) * CHUNK
    return i * CHUNK


@triton.jit
def _load(ptr, c, n_cols, other, EVEN: tl.constexpr, POLICY: tl.constexpr):
    if EVEN:
        return tl.load(ptr + c, eviction_policy=POLICY).to(tl.float32)
    return tl.load(ptr + c, mask=c < n_cols, other=other, eviction_policy=POLICY).to(tl.float32)


@triton.jit
def _store(ptr, c, n_cols, v, EVEN: tl.constexpr):
    if EVEN:
        tl.store(ptr + c, v.to(ptr.dtype.element_ty))
    else:
        tl.store(ptr + c, v.to(ptr.dtype.element_ty), mask=c < n_cols)


@triton.jit
def _rms_probe(X, Y, W, stride_x, stride_y, n_cols, eps, CHUNK: tl.constexpr,
               REVERSE: tl.constexpr, EVEN: tl.constexpr, WHINT: tl.constexpr,
               UNROLL: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, CHUNK)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    n_chunks = tl.cdiv(n_cols, CHUNK)
    s2 = tl.zeros([CHUNK], dtype=tl.float32)
    for i in tl.range(0, n_chunks, loop_unroll_factor=UNROLL):
        x = _load(x_row, i * CHUNK + cols, n_cols, 0.0, EVEN, "evict_last")
        s2 += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / n_cols + eps)
    for i in tl.range(0, n_chunks, loop_unroll_factor=UNROLL):
        c = _chunk_start(i, n_chunks, CHUNK, REVERSE) + cols
        x = _load(x_row, c, n_cols, 0.0, EVEN, "evict_first")
        w = _load(W, c, n_cols, 0.0, EVEN, "evict_last" if WHINT else "")
        _store(y_row, c, n_cols, x * rstd * w, EVEN)


@triton.jit
def _layer_norm_probe(X, Y, W, B, stride_x, stride_y, n_cols, eps, CHUNK: tl.constexpr,
                      REVERSE: tl.constexpr, EVEN: tl.constexpr, WHINT: tl.constexpr,
                      UNROLL: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, CHUNK)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    n_chunks = tl.cdiv(n_cols, CHUNK)
    shift = tl.load(x_row).to(tl.float32)
    s1 = tl.zeros([CHUNK], dtype=tl.float32)
    s2 = tl.zeros([CHUNK], dtype=tl.float32)
    for i in tl.range(0, n_chunks, loop_unroll_factor=UNROLL):
        c = i * CHUNK + cols
        x = _load(x_row, c, n_cols, 0.0, EVEN, "evict_last")
        d = tl.where(c < n_cols, x - shift, 0.0)
        s1 += d
        s2 += d * d
    d_mean = tl.sum(s1, axis=0) / n_cols
    var = tl.maximum(tl.sum(s2, axis=0) / n_cols - d_mean * d_mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    for i in tl.range(0, n_chunks, loop_unroll_factor=UNROLL):
        c = _chunk_start(i, n_chunks, CHUNK, REVERSE) + cols
        x = _load(x_row, c, n_cols, 0.0, EVEN, "evict_first")
        w = _load(W, c, n_cols, 0.0, EVEN, "evict_last" if WHINT else "")
        b = _load(B, c, n_cols, 0.0, EVEN, "evict_last" if WHINT else "")
        _store(y_row, c, n_cols, ((x - shift) - d_mean) * rstd * w + b, EVEN)


@triton.jit
def _softmax_probe(X, Y, stride_x, stride_y, n_cols, CHUNK: tl.constexpr, LOG: tl.constexpr,
                   REVERSE: tl.constexpr, EVEN: tl.constexpr, UNROLL: tl.constexpr):
    # per-row stats, as the sm_90 plan: each chunk reduced to a scalar max and sum
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, CHUNK)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    n_chunks = tl.cdiv(n_cols, CHUNK)
    m = tl.max(tl.full([CHUNK], float("-inf"), tl.float32), axis=0)
    s = tl.sum(tl.zeros([CHUNK], dtype=tl.float32), axis=0)
    for i in tl.range(0, n_chunks, loop_unroll_factor=UNROLL):
        x = _load(x_row, i * CHUNK + cols, n_cols, float("-inf"), EVEN, "evict_last")
        m_new = tl.maximum(m, tl.max(x, axis=0))
        alpha = tl.where(m == m_new, 1.0, tl.exp(m - m_new))
        s = s * alpha + tl.sum(tl.where(x == float("-inf"), 0.0, tl.exp(x - m_new)), axis=0)
        m = m_new
    log_total = tl.log(s)
    for i in tl.range(0, n_chunks, loop_unroll_factor=UNROLL):
        c = _chunk_start(i, n_chunks, CHUNK, REVERSE) + cols
        z = _load(x_row, c, n_cols, float("-inf"), EVEN, "evict_first") - m
        if LOG:
            y = z - log_total
        else:
            y = tl.exp(z) / s
        _store(y_row, c, n_cols, y, EVEN)


def probe_fn(op: str, variant: str, args: tuple, chunk: int, warps: int):
    """The launch of one probe variant, or None where it does not apply."""
    x = args[0]
    n_cols = x.shape[-1]
    even = variant.endswith("_even") or "_even_" in variant
    if even and n_cols % chunk:
        return None
    y = torch.empty_like(x)
    flags = dict(REVERSE=variant.startswith("rev"), EVEN=even, CHUNK=chunk, num_warps=warps,
                 UNROLL=4 if variant.endswith("unroll4") else 1)
    grid = (x.shape[0],)
    if op in ("softmax", "log_softmax"):
        if variant.endswith("whint"):
            return None
        return lambda: (_softmax_probe[grid](x, y, x.stride(0), y.stride(0), n_cols,
                                             LOG=op == "log_softmax", **flags), y)[1]
    flags["WHINT"] = variant.endswith("whint")
    if op == "rms_norm":
        return lambda: (_rms_probe[grid](x, y, args[1], x.stride(0), y.stride(0), n_cols,
                                         sweep.RMS_EPS, **flags), y)[1]
    return lambda: (_layer_norm_probe[grid](x, y, args[1], args[2], x.stride(0), y.stride(0),
                                            n_cols, sweep.LN_EPS, **flags), y)[1]


def library_fn(op: str, args: tuple, chunk: int, warps: int):
    x = args[0]
    lim = rk.device_limit(x.device)
    plan = rk.RowPlan(op, x.shape[0], x.shape[-1], rk._next_pow2(x.shape[-1]), warps, lim,
                      chunk=chunk, row_stats=op in ("softmax", "log_softmax"))
    eps = sweep.LN_EPS if op == "layer_norm" else sweep.RMS_EPS
    wb = tuple(args[1:3]) + (None,) * (3 - len(args))
    return lambda: rk._launch(plan, x, wb[0], wb[1], eps)[0]


def reference(op: str, args: tuple):
    if op == "layer_norm":
        return rk.layer_norm_ref(*args, eps=sweep.LN_EPS)
    if op == "rms_norm":
        return rk.rms_norm_ref(*args, eps=sweep.RMS_EPS)
    return getattr(rk, f"{op}_ref")(*args)


def cases(ops, args_of):
    for op in ops:
        for chunk, warps in LAUNCHES[op]:
            for variant in VARIANTS:
                fn = (library_fn(op, args_of[op], chunk, warps) if variant == "library"
                      else probe_fn(op, variant, args_of[op], chunk, warps))
                if fn is not None:
                    yield op, variant, chunk, warps, fn
        for mode in ("inductor_default", "coordinate_descent"):
            yield op, mode, None, None, mode


def kernel_resources() -> list[dict]:
    """Registers / spill / shared memory of every cubin in the Triton and Inductor caches."""
    out = []
    for env in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        root = os.environ.get(env)
        for cubin in sorted(Path(root).rglob("*.cubin")) if root else ():
            try:
                sass, res = isa_ptx.disassemble_cubin(cubin)
            except Exception as e:  # a cubin cuobjdump cannot read is a row, not the end
                out.append({"cubin": str(cubin), "error": str(e)[:200]})
                continue
            for name, usage in isa_ptx.parse_resource_usage(res or "").items():
                out.append({"cubin": str(cubin), "kernel": name, **usage,
                            "sass_lines": sass.count("\n")})
    return out


def sass_tarball(path: Path, rows: list[dict]) -> None:
    """The SASS of every RMSNorm kernel (probe, library, Inductor) and Inductor's sources."""
    with tarfile.open(path, "w:gz") as tar:
        def add(name, text):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for r in rows:
            k = r.get("kernel", "")
            if "rms" in k or ("red_fused" in k and "rsqrt" in k):
                sass, res = isa_ptx.disassemble_cubin(r["cubin"])
                add(f"sass/{k}_{Path(r['cubin']).parent.name[:8]}.sass", sass + "\n" + (res or ""))
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
    args = p.parse_args()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    copy = peaks.measure_copy(1 << 30, rep_ms=200)["copy_gbps"]
    rows = (1 << 27) // args.cols
    ops = args.ops.split(",")
    args_of = {op: sweep.make_inputs(op, args.dtype, rows, args.cols, "cuda") for op in ops}
    refs = {op: reference(op, a) for op, a in args_of.items()}
    lines = [f"copy {copy:.1f} GB/s; {rows} x {args.cols} {args.dtype}; {torch.cuda.get_device_name()}",
             "| op | variant | CHUNK | warps | us (per round) | % of copy | correct |", "|---|---|---|---|---|---|---|"]
    runs = []
    for op, variant, chunk, warps, fn in cases(ops, args_of):
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
    res = kernel_resources()
    lines += ["", "| kernel | registers | stack (B) | shared (B) |", "|---|---|---|---|"]
    lines += [f"| {r.get('kernel', r['cubin'])} | {r.get('reg', '-')} | {r.get('stack', '-')} | "
              f"{r.get('shared', '-')} |" for r in res]
    (out_dir / "pass2_probe.md").write_text("\n".join(lines) + "\n")
    (out_dir / "pass2_probe.json").write_text(json.dumps(
        {"schema": "pass2_probe/1", "copy_gbps": copy, "rows": rows, "cols": args.cols,
         "dtype": args.dtype, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
         "triton": triton.__version__, "runs": runs, "kernels": res}, indent=1))
    sass_tarball(out_dir / "pass2_sass.tar.gz", res)
    print("\n".join(lines[-len(res) - 3:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
