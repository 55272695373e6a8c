"""The Triton row kernels (softmax, log-softmax, LayerNorm, RMSNorm; one-pass and chunked forms,
forward and backward) and their launchers. Plain functions, jit-ed lazily by :func:`jitted_kernels`, so
importing this module needs no GPU; which launch a call gets is :mod:`tko.remedies.row_plan`'s."""


# No ``from __future__ import annotations`` here: the kernels' ``tl.constexpr`` annotations and
# the custom ops' type hints must be real objects.

from typing import Optional

import torch


try:  # the references and the refusal path work without Triton
    import triton
    import triton.language as tl
except Exception:  # pragma: no cover - exercised only where Triton is missing
    triton = None
    tl = None
from .row_plan import (RowPlan, interpreting)

# --- kernels (plain functions; jit-ed lazily by jitted_kernels) --------------------------------------

if tl is not None:
    def _softmax_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr, LOG: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
        z = x - tl.max(x, axis=0)
        e = tl.where(mask, tl.exp(z), 0.0)
        s = tl.sum(e, axis=0)
        if LOG:
            y = z - tl.log(s)
        else:
            y = e / s
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)

    def _softmax_bwd_kernel(DY, Y, DX, stride_dy, stride_y, stride_dx, n_cols, BLOCK: tl.constexpr,
                            LOG: tl.constexpr):
        # the tail loads 0 for both: it adds nothing to either sum and is never stored
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        dy = tl.load(DY + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.load(Y + row * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
        if LOG:
            dx = dy - tl.exp(y) * tl.sum(dy, axis=0)
        else:
            dx = y * (dy - tl.sum(dy * y, axis=0))
        tl.store(DX + row * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=mask)

    # tl.cast(eps, tl.float32) in the norms: a direct launch passes a Python float as fp32, but
    # Inductor types a float argument of a user kernel fp64 (torch 2.11), and an fp64 eps made
    # the row's statistics fp64: on an H200 the chunked RMSNorm took 42 registers instead of 32
    # (one program an SM, not two) and ran 1.27x slower, LayerNorm 49 and 1.43x
    # (tests/fixtures/rowkernel_sweep_h200/call14_triton_op_fp64_eps). tl.cast, not eps.to():
    # Inductor's mutation analysis builds the kernel with eps a Python float, which has no .to(),
    # and on that failure takes every argument as written and copies the input first
    # (call15_triton_op_input_copied: 1.9-2.2x).
    def _layer_norm_kernel(X, Y, W, B, Mean, Rstd, stride_x, stride_y, n_cols, eps,
                           BLOCK: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                           STATS: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        xc = tl.where(mask, x - mean, 0.0)
        var = tl.sum(xc * xc, axis=0) / n_cols
        rstd = 1.0 / tl.sqrt(var + tl.cast(eps, tl.float32))
        y = xc * rstd
        if HAS_W:
            y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
        if STATS:
            tl.store(Mean + row, mean)
            tl.store(Rstd + row, rstd)

    def _rms_norm_kernel(X, Y, W, Rstd, stride_x, stride_y, n_cols, eps, BLOCK: tl.constexpr,
                         HAS_W: tl.constexpr, STATS: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        ms = tl.sum(x * x, axis=0) / n_cols
        rstd = 1.0 / tl.sqrt(ms + tl.cast(eps, tl.float32))
        y = x * rstd
        if HAS_W:
            y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
        if STATS:
            tl.store(Rstd + row, rstd)

    def _norm_bwd_kernel(DY, X, W, Mean, Rstd, DX, DW, DB, stride_dy, stride_x, stride_dx, n_rows,
                         n_cols, rows_per_program, BLOCK: tl.constexpr, CENTER: tl.constexpr,
                         HAS_W: tl.constexpr, HAS_DW: tl.constexpr, HAS_DB: tl.constexpr):
        # One row at a time held on chip; a program walks rows_per_program consecutive rows and
        # writes its fp32 partial sums of dweight / dbias as row ``pid`` of DW / DB (no atomics).
        pid = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        if HAS_W:
            w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        dw_acc = tl.zeros([BLOCK], dtype=tl.float32)
        db_acc = tl.zeros([BLOCK], dtype=tl.float32)
        first = pid * rows_per_program
        # a fixed trip count, rows past the end masked off (they load zeros and add nothing); a
        # while loop, since Triton 3.3's interpreter cannot take a runtime int as a range() bound
        i = 0
        while i < rows_per_program:
            row = first + i
            i += 1
            row_mask = cols < tl.where(row < n_rows, n_cols, 0)   # a row past the end: no column
            x = tl.load(X + row * stride_x + cols, mask=row_mask, other=0.0).to(tl.float32)
            dy = tl.load(DY + row * stride_dy + cols, mask=row_mask, other=0.0).to(tl.float32)
            last = tl.minimum(row, n_rows - 1)    # in bounds: a masked-off row's x and dy are 0
            rstd = tl.load(Rstd + last)
            if CENTER:
                xhat = tl.where(row_mask, (x - tl.load(Mean + last)) * rstd, 0.0)
            else:
                xhat = x * rstd
            g = dy
            if HAS_W:
                g = dy * w
            dx = g - xhat * (tl.sum(g * xhat, axis=0) / n_cols)
            if CENTER:
                dx = dx - tl.sum(g, axis=0) / n_cols
            tl.store(DX + row * stride_dx + cols, (dx * rstd).to(DX.dtype.element_ty), mask=row_mask)
            if HAS_DW:
                dw_acc += dy * xhat
            if HAS_DB:
                db_acc += dy
        if HAS_DW:
            tl.store(DW + pid * n_cols + cols, dw_acc, mask=mask)
        if HAS_DB:
            tl.store(DB + pid * n_cols + cols, db_acc, mask=mask)

    # The chunked form: one row per program, walked in CHUNK-element blocks twice (pass 1 reduces,
    # pass 2 rereads the row, from L2 while it is still there, and writes). While loops, as in
    # _norm_bwd_kernel: Triton 3.3's interpreter takes no runtime int as a range() bound.
    # N_CHUNKS > 0 (the row is N_CHUNKS * CHUNK long, RowPlan.n_chunks): the loops end at a
    # compile-time bound and the loads carry no mask, so the compiler unrolls them and issues a
    # row's loads back to back, as Inductor's loops over a static row length are (its RMSNorm at
    # 64k: every load of pass 1 in flight, 32 registers, 90 % of copy on an H200, where the same
    # launch with a runtime bound reached 80 %; tests/fixtures/rowkernel_sweep_h200/call9_pass2_probe).
    @triton.jit
    def _load_chunk(row_ptr, c, n_cols, other, EVEN: tl.constexpr, POLICY: tl.constexpr):
        if EVEN:
            return tl.load(row_ptr + c, eviction_policy=POLICY).to(tl.float32)
        return tl.load(row_ptr + c, mask=c < n_cols, other=other, eviction_policy=POLICY).to(tl.float32)

    @triton.jit
    def _store_chunk(row_ptr, c, n_cols, v, EVEN: tl.constexpr, STREAM: tl.constexpr):
        # STREAM: stored .cs, so that written rows leave L2 before the rows pass 2 reads back
        y = v.to(row_ptr.dtype.element_ty)
        if STREAM:
            if EVEN:
                tl.store(row_ptr + c, y, cache_modifier=".cs")
            else:
                tl.store(row_ptr + c, y, mask=c < n_cols, cache_modifier=".cs")
        elif EVEN:
            tl.store(row_ptr + c, y)
        else:
            tl.store(row_ptr + c, y, mask=c < n_cols)

    @triton.jit
    def _row_end(n_cols, CHUNK: tl.constexpr, N_CHUNKS: tl.constexpr):
        if N_CHUNKS > 0:
            return N_CHUNKS * CHUNK
        return n_cols

    def _softmax_chunked_kernel(X, Y, stride_x, stride_y, n_cols, CHUNK: tl.constexpr,
                                LOG: tl.constexpr, ROW_STATS: tl.constexpr, N_CHUNKS: tl.constexpr,
                                STREAM: tl.constexpr):
        # online softmax: a running max m and s = sum(exp(x - m)), s rescaled by exp(m_old - m_new)
        # when m grows; per lane (CHUNK-long m and s, merged once after pass 1) or, ROW_STATS, per
        # row (each chunk reduced to its max and sum: one exp an element). -inf entries add exact
        # zeros and a max that has seen only -inf keeps s = 0 (no -inf - -inf); a NaN or +inf entry
        # makes s NaN, so the row comes out NaN as torch's does, and a row of -inf gives
        # exp(-inf - -inf) = NaN
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, CHUNK)
        x_row = X + row * stride_x
        y_row = Y + row * stride_y
        end = _row_end(n_cols, CHUNK, N_CHUNKS)
        if ROW_STATS:
            m = tl.max(tl.full([CHUNK], float("-inf"), tl.float32), axis=0)
            s = tl.sum(tl.zeros([CHUNK], dtype=tl.float32), axis=0)
        else:
            m = tl.full([CHUNK], float("-inf"), tl.float32)
            s = tl.zeros([CHUNK], dtype=tl.float32)
        start = 0
        while start < end:
            x = _load_chunk(x_row, start + cols, n_cols, float("-inf"), N_CHUNKS > 0, "evict_last")
            if ROW_STATS:
                m_new = tl.maximum(m, tl.max(x, axis=0))
            else:
                m_new = tl.maximum(m, x)
            alpha = tl.where(m == m_new, 1.0, tl.exp(m - m_new))
            e = tl.where(x == float("-inf"), 0.0, tl.exp(x - m_new))
            if ROW_STATS:
                s = s * alpha + tl.sum(e, axis=0)
            else:
                s = s * alpha + e
            m = m_new
            start += CHUNK
        if ROW_STATS:
            row_max = m
            total = s
        else:
            row_max = tl.max(m, axis=0)
            total = tl.sum(s * tl.where(m == row_max, 1.0, tl.exp(m - row_max)), axis=0)
        log_total = tl.log(total)
        start = 0
        while start < end:
            c = start + cols
            z = _load_chunk(x_row, c, n_cols, float("-inf"), N_CHUNKS > 0, "evict_first") - row_max
            if LOG:
                y = z - log_total
            else:
                y = tl.exp(z) / total
            _store_chunk(y_row, c, n_cols, y, N_CHUNKS > 0, STREAM)
            start += CHUNK

    def _layer_norm_chunked_kernel(X, Y, W, B, Mean, Rstd, stride_x, stride_y, n_cols, eps,
                                   CHUNK: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                                   STATS: tl.constexpr, N_CHUNKS: tl.constexpr, STREAM: tl.constexpr):
        # pass 1: per lane the fp32 sums of d and d * d, d = x - x[0]: shifted by the row's first
        # element, so that var = E[d^2] - E[d]^2 does not cancel when |mean| >> std (unshifted,
        # an fp32 row of mean 300 and std 1 loses about 1e-2 of its variance); pass 2
        # normalizes d - E[d], not x - mean, which would round at the size of the mean.
        # NaN / inf rows give NaN, as F.layer_norm does.
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, CHUNK)
        x_row = X + row * stride_x
        y_row = Y + row * stride_y
        end = _row_end(n_cols, CHUNK, N_CHUNKS)
        shift = tl.load(x_row).to(tl.float32)
        s1 = tl.zeros([CHUNK], dtype=tl.float32)
        s2 = tl.zeros([CHUNK], dtype=tl.float32)
        start = 0
        while start < end:
            c = start + cols
            x = _load_chunk(x_row, c, n_cols, 0.0, N_CHUNKS > 0, "evict_last")
            d = tl.where(c < end, x - shift, 0.0)      # `end`: a constant when unrolled
            s1 += d
            s2 += d * d
            start += CHUNK
        d_mean = tl.sum(s1, axis=0) / n_cols
        var = tl.sum(s2, axis=0) / n_cols - d_mean * d_mean
        var = tl.where(var < 0.0, 0.0, var)      # rounding only; a NaN stays NaN
        mean = shift + d_mean
        rstd = 1.0 / tl.sqrt(var + tl.cast(eps, tl.float32))
        start = 0
        while start < end:
            c = start + cols
            x = _load_chunk(x_row, c, n_cols, 0.0, N_CHUNKS > 0, "evict_first")
            y = ((x - shift) - d_mean) * rstd
            if HAS_W:
                y = y * _load_chunk(W, c, n_cols, 0.0, N_CHUNKS > 0, "")
            if HAS_B:
                y = y + _load_chunk(B, c, n_cols, 0.0, N_CHUNKS > 0, "")
            _store_chunk(y_row, c, n_cols, y, N_CHUNKS > 0, STREAM)
            start += CHUNK
        if STATS:
            tl.store(Mean + row, mean)
            tl.store(Rstd + row, rstd)

    def _rms_norm_chunked_kernel(X, Y, W, Rstd, stride_x, stride_y, n_cols, eps,
                                 CHUNK: tl.constexpr, HAS_W: tl.constexpr, STATS: tl.constexpr,
                                 N_CHUNKS: tl.constexpr, STREAM: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, CHUNK)
        x_row = X + row * stride_x
        y_row = Y + row * stride_y
        end = _row_end(n_cols, CHUNK, N_CHUNKS)
        s2 = tl.zeros([CHUNK], dtype=tl.float32)
        start = 0
        while start < end:
            x = _load_chunk(x_row, start + cols, n_cols, 0.0, N_CHUNKS > 0, "evict_last")
            s2 += x * x
            start += CHUNK
        rstd = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / n_cols + tl.cast(eps, tl.float32))
        start = 0
        while start < end:
            c = start + cols
            y = _load_chunk(x_row, c, n_cols, 0.0, N_CHUNKS > 0, "evict_first") * rstd
            if HAS_W:
                y = y * _load_chunk(W, c, n_cols, 0.0, N_CHUNKS > 0, "")
            _store_chunk(y_row, c, n_cols, y, N_CHUNKS > 0, STREAM)
            start += CHUNK
        if STATS:
            tl.store(Rstd + row, rstd)

    def _rms_norm_guarded_kernel(X, Y, W, Rstd, stride_x, stride_y, n_rows, n_cols, eps,
                                 CHUNK: tl.constexpr, HAS_W: tl.constexpr, STATS: tl.constexpr,
                                 N_CHUNKS: tl.constexpr):
        # The chunked RMSNorm on a row of N_CHUNKS whole chunks, addressed as Inductor's looped
        # RMSNorm addresses it (RowPlan.row_guard): int32 offsets from X, every load and store
        # under the (always true) row mask, the weight loaded evict_last. ptxas then streams
        # pass 2 in order: on an H200 at 2048 x 65536 89.6 % of copy (fp16) and 87.8 % (bf16)
        # against 85.6 % for the chunked kernel; each trait alone gained nothing, the same traits
        # behind constexpr switches inside the chunked kernel lost 8 points (so it is a kernel of
        # its own), and at 131072 columns it lost 14: with 8 chunks its pass 1 keeps two loads in
        # flight, each with its own 64-bit address, so the plan takes it up to 4 chunks only
        # (tests/fixtures/rowkernel_sweep_h200/call17_row_guard). Its DRAM traffic is the floor
        # (ncu: 256.3 MiB read for the 256 MiB input, pass 2 all from L2; the chunked kernel
        # 300-304 MiB); the streamed store added 1.5-2.5 points (91.3 % fp16, 88.9-90.3 % bf16),
        # while a persistent grid, maxnreg 32, other launches, pass 1 of the next row run
        # inside pass 2 and rows kept in registers between the passes all lost (call23_l2_rows,
        # call32_held_rows). Inductor's tuned modes reach this launch and the same DRAM floor
        # (call33_tuning_draws): at 64k fp16 the two are level.
        pid = tl.program_id(0)
        cols = tl.arange(0, CHUNK)
        ok = tl.full([CHUNK], 0, tl.int32) + pid < n_rows
        x_off, y_off = pid * stride_x, pid * stride_y
        end = N_CHUNKS * CHUNK
        s2 = tl.zeros([CHUNK], dtype=tl.float32)
        start = 0
        while start < end:
            x = tl.load(X + (x_off + start + cols), mask=ok, other=0.0, eviction_policy="evict_last")
            x = x.to(tl.float32)
            s2 += x * x
            start += CHUNK
        rstd = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / n_cols + tl.cast(eps, tl.float32))
        start = 0
        while start < end:
            c = start + cols
            x = tl.load(X + (x_off + c), mask=ok, other=0.0, eviction_policy="evict_first")
            if HAS_W:
                w = tl.load(W + c, eviction_policy="evict_last")
                y = x.to(tl.float32) * rstd * w.to(tl.float32)
            else:
                y = x.to(tl.float32) * rstd
            # streamed (.cs): written rows leave L2 first, so the rows pass 2 reads back stay
            tl.store(Y + (y_off + c), y.to(Y.dtype.element_ty), mask=ok, cache_modifier=".cs")
            start += CHUNK
        if STATS:
            tl.store(Rstd + pid, rstd)

_JITTED: dict = {}


def jitted_kernels() -> dict:
    """The kernels jit-ed for the current mode (compiled or interpreted)."""
    mode = interpreting()
    if mode not in _JITTED:
        _JITTED[mode] = {"softmax": triton.jit(_softmax_kernel),
                         "softmax_bwd": triton.jit(_softmax_bwd_kernel),
                         "layer_norm": triton.jit(_layer_norm_kernel),
                         "rms_norm": triton.jit(_rms_norm_kernel),
                         "norm_bwd": triton.jit(_norm_bwd_kernel),
                         "softmax_chunked": triton.jit(_softmax_chunked_kernel),
                         "layer_norm_chunked": triton.jit(_layer_norm_chunked_kernel),
                         "rms_norm_chunked": triton.jit(_rms_norm_chunked_kernel),
                         "rms_norm_guarded": triton.jit(_rms_norm_guarded_kernel)}
    return _JITTED[mode]


# The ops are torch.library.triton_op (torch 2.6+) where Triton compiles: under torch.compile
# AOTAutograd traces into the op's function (the kernels launched through wrap_triton, the plan
# made at trace time) and Inductor launches the kernel from its generated code, with none of this
# module's Python left at run time. As an opaque custom_op each call paid the op's Python: on an
# H200 (torch 2.11) the replaced RMSNorm at 2048 x 65536 spent 0.13 ms of host time a step
# against 0.146 ms of kernel; a call of the custom op cost the host 88 us, 31 us of it the launch
# and 14 us the plan (tests/fixtures/rowkernel_sweep_h200/call12_custom_op_host_cost). Elsewhere
# (older torch; the interpreter, whose kernels wrap_triton takes only from torch 2.13) they stay
# opaque custom ops (custom_op exists from 2.4), run at each call.
USE_TRITON_OP = (hasattr(torch.library, "triton_op") and hasattr(torch.library, "wrap_triton")
                 and triton is not None and not interpreting())


def traced(t: torch.Tensor) -> bool:
    """True when ``t`` is a tracing stand-in (AOTAutograd traces a backward on fake tensors)."""
    try:
        from torch._subclasses.fake_tensor import is_fake
    except ImportError:  # pragma: no cover - torch without fake tensors cannot trace either
        return False
    return is_fake(t)


def _launchables(t: torch.Tensor) -> dict:
    """The kernels as a launch on ``t`` takes them: wrapped by wrap_triton while a triton op's
    function is traced (fake tensors, or a dispatch mode such as make_fx's), so that the graph
    holds the launch; the jitted kernels themselves otherwise (a wrapped launch in eager goes
    through a higher-order op, much slower)."""
    if USE_TRITON_OP and (traced(t) or _dispatch_mode_active()):
        return {name: torch.library.wrap_triton(k) for name, k in jitted_kernels().items()}
    return jitted_kernels()


def _dispatch_mode_active() -> bool:
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode
    except ImportError:  # pragma: no cover - every torch with triton_op has it
        return False
    return _get_current_dispatch_mode() is not None


def _stats_like(x: torch.Tensor, want: bool) -> Optional[torch.Tensor]:
    return torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device) if want else None


def launch_forward(plan: RowPlan, x: torch.Tensor, weight=None, bias=None, eps: float = 0.0,
            stats: bool = False):
    """The forward kernel of ``plan.form``: ``(y, mean, rstd)``; the stats are None unless
    ``stats`` (a norm). Both forms take the same arguments, the block as BLOCK or CHUNK."""
    x2 = x.view(-1, plan.n_cols)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    mean = _stats_like(x, stats and plan.op == "layer_norm")
    rstd = _stats_like(x, stats and plan.op in ("layer_norm", "rms_norm"))
    if plan.n_rows == 0:
        return y, mean, rstd
    y2 = y.view(-1, plan.n_cols)
    k = _launchables(x)
    grid = (plan.n_rows,)
    if plan.form == "chunked":
        common = dict(CHUNK=plan.chunk, N_CHUNKS=plan.n_chunks, num_warps=plan.num_warps)
        if not plan.row_guard:           # the guarded RMSNorm always streams
            common["STREAM"] = plan.stream_out
        form = "_chunked"
    else:
        common, form = dict(BLOCK=plan.block, num_warps=plan.num_warps), ""
    # an absent pointer (weight, bias, stats) is passed as x2: the kernel never touches it
    if plan.op in ("softmax", "log_softmax"):
        if plan.form == "chunked":
            common["ROW_STATS"] = plan.row_stats
        k["softmax" + form][grid](x2, y2, x2.stride(0), y2.stride(0), plan.n_cols,
                                  LOG=plan.op == "log_softmax", **common)
    elif plan.op == "layer_norm":
        k["layer_norm" + form][grid](x2, y2, weight if weight is not None else x2,
                                     bias if bias is not None else x2,
                                     mean if stats else x2, rstd if stats else x2,
                                     x2.stride(0), y2.stride(0), plan.n_cols, float(eps),
                                     HAS_W=weight is not None, HAS_B=bias is not None,
                                     STATS=stats, **common)
    else:
        rows = ()
        if plan.form == "chunked" and plan.row_guard:
            form, rows = "_guarded", (plan.n_rows,)
        k["rms_norm" + form][grid](x2, y2, weight if weight is not None else x2,
                                   rstd if stats else x2, x2.stride(0), y2.stride(0), *rows,
                                   plan.n_cols, float(eps), HAS_W=weight is not None, STATS=stats,
                                   **common)
    return y, mean, rstd




def _rows(t: torch.Tensor, n_cols: int) -> torch.Tensor:
    """``t`` as (rows, n_cols) with unit column stride; a copy only when its layout has none.

    Gradients arrive in any layout (``sum().backward()`` sends a stride-0 expanded one)."""
    if n_cols <= 1 or t.stride(-1) == 1:
        try:
            return t.view(-1, n_cols)
        except RuntimeError:
            pass
    return t.contiguous().view(-1, n_cols)


def launch_softmax_bwd(plan: RowPlan, dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    dx = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    if plan.n_rows == 0:
        return dx
    dy2, y2, dx2 = _rows(dy, plan.n_cols), y.view(-1, plan.n_cols), dx.view(-1, plan.n_cols)
    _launchables(y)["softmax_bwd"][(plan.n_rows,)](
        dy2, y2, dx2, dy2.stride(0), y2.stride(0), dx2.stride(0), plan.n_cols, BLOCK=plan.block,
        LOG=plan.op == "log_softmax", num_warps=plan.num_warps)
    return dx


# Programs per SM of the norm backward while it reduces dweight / dbias: enough to fill the
# device, few enough that the fp32 partial-sum buffer stays a small fraction of dx.
PARTIALS_PER_SM = 4
# The interpreter has no SMs; a few programs so that each walks several rows.
INTERPRETER_PARTIALS = 4


def _rows_per_program(n_rows: int, device: torch.device, reduce_params: bool) -> int:
    """Rows each backward program walks: one when no parameter gradient is reduced."""
    if not reduce_params:
        return 1
    if device.type == "cuda":
        programs = PARTIALS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        programs = INTERPRETER_PARTIALS
    return max(1, -(-n_rows // programs))


def launch_norm_bwd(plan: RowPlan, dy, x, weight, mean, rstd, need_dw: bool, need_db: bool):
    """dx, and dweight / dbias (each None when not wanted) summed from the programs' partials."""
    n, dev = plan.n_cols, x.device
    dx = torch.empty(x.shape, dtype=x.dtype, device=dev)
    if plan.n_rows == 0:
        zeros = torch.zeros(n, dtype=torch.float32, device=dev)
        return dx, zeros.to(weight.dtype) if need_dw else None, zeros if need_db else None
    per = _rows_per_program(plan.n_rows, dev, need_dw or need_db)
    grid = -(-plan.n_rows // per)
    dw = torch.empty(grid, n, dtype=torch.float32, device=dev) if need_dw else None
    db = torch.empty(grid, n, dtype=torch.float32, device=dev) if need_db else None
    dy2, x2, dx2 = _rows(dy, n), x.view(-1, n), dx.view(-1, n)
    _launchables(x)["norm_bwd"][(grid,)](
        dy2, x2, weight if weight is not None else x2, mean if mean is not None else rstd, rstd,
        dx2, dw if need_dw else dx2, db if need_db else dx2, dy2.stride(0), x2.stride(0),
        dx2.stride(0), plan.n_rows, n, per, BLOCK=plan.block, CENTER=mean is not None,
        HAS_W=weight is not None, HAS_DW=need_dw, HAS_DB=need_db, num_warps=plan.num_warps)
    # the fixed split into programs makes the order of this sum, and so the result, fixed
    return dx, dw.sum(0).to(weight.dtype) if need_dw else None, db.sum(0) if need_db else None


