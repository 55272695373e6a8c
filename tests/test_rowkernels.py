"""tko.remedies.rowkernels: the row kernels (one-pass and chunked) against their torch references, in the
Triton interpreter.

Triton takes ``TRITON_INTERPRET`` at import, and the pytest process may have imported it already,
so the ``test_kernel_*`` tests are marked ``interpreter``: their bodies run in one child pytest
started with ``TRITON_INTERPRET=1`` and each reports its own outcome here
(``tests/interpreter_child.py``). The refusal path, the
limits table and the custom ops need no kernel and run here, where a CPU tensor is refused.
The backward kernels' tests select them (``kernel_backward``); the default backward is the torch
formula, tested on both paths. The chunked form is forced with a 1 KiB limit (:data:`SMALL`: 256
fp32 elements, 64-element chunks), so that rows of a few thousand columns take many chunks.
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tko.base import archs
from tko.remedies import row_plan, row_refs, row_triton, rowkernels as rk
from tko.base.errors import InputError

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6),
       torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=2e-2)}
DTYPES = list(TOL)
ODD_COLS = (1, 7, 1000, 1023, 4097)
# A limit that forces the chunked form on short rows: 256 fp32 elements one-pass, 64-element chunks
SMALL = row_plan.RowLimit("small", 64, 16, 1024, "tests: 1 KiB on chip")
# 16, 13 and 65 chunks of 64, the last one partly masked (a runtime loop bound), and 16 whole
# chunks (the unrolled form: RowPlan.n_chunks 16, no masks)
CHUNKED_COLS = (1000, 777, 4099, 1024)


INTERP = row_plan.interpreting()
# Run in one child pytest under TRITON_INTERPRET=1, each by its own id (tests/interpreter_child.py)
def kernel(test):
    return pytest.mark.slow(pytest.mark.interpreter(test))


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.delenv(rk.BACKWARD_ENV, raising=False)   # the module's own default backward
    with warnings.catch_warnings():  # numpy warns on inf - inf inside the interpreter
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


@pytest.fixture
def kernel_backward():
    """The custom ops' backward runs the one-pass kernels (the default is the torch formula)."""
    with rk.use_backward("kernel"):
        yield


def _x(rows, cols, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, cols, generator=g) * 3).to(dtype)


def _close(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, equal_nan=True, **TOL[dtype])


def _call(op, x, w=None, b=None, limit=None):
    if op == "layer_norm":
        return rk.layer_norm(x, w, b, return_plan=True, limit=limit), row_refs.layer_norm_ref(x, w, b)
    if op == "rms_norm":
        return rk.rms_norm(x, w, return_plan=True, limit=limit), row_refs.rms_norm_ref(x, w)
    return getattr(rk, op)(x, return_plan=True, limit=limit), rk.REFERENCES[op](x)


def _added(before):
    return {k: v - before.get(k, 0) for k, v in rk.call_counts().items() if v != before.get(k, 0)}


@kernel
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", row_plan.OPS)
def test_kernel_odd_rows_match_the_reference(op, dtype):
    for cols in ODD_COLS:
        x = _x(3 if cols < 4000 else 2, cols, dtype, seed=cols)
        w = torch.randn(cols).to(dtype) if op in ("layer_norm", "rms_norm") else None
        b = torch.randn(cols).to(dtype) if op == "layer_norm" else None
        (got, plan), want = _call(op, x, w, b)
        assert plan.use_kernel, plan.reason
        assert plan.block == 1 << max(0, math.ceil(math.log2(cols)))
        _close(got, want, dtype)


@kernel
def test_kernel_references_are_torch():
    x = _x(4, 33, torch.float32)
    w, b = torch.randn(33), torch.randn(33)
    torch.testing.assert_close(row_refs.softmax_ref(x), torch.softmax(x, -1))
    torch.testing.assert_close(row_refs.log_softmax_ref(x), torch.log_softmax(x, -1))
    torch.testing.assert_close(row_refs.layer_norm_ref(x, w, b), F.layer_norm(x, (33,), w, b, 1e-5))
    torch.testing.assert_close(row_refs.rms_norm_ref(x, w),
                               x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)
    # the kernels against torch directly, not only against the module's references
    torch.testing.assert_close(rk.softmax(x), torch.softmax(x, -1))
    torch.testing.assert_close(rk.layer_norm(x, w, b), F.layer_norm(x, (33,), w, b, 1e-5),
                               rtol=1e-5, atol=1e-5)


@kernel
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kernel_masks_nan_and_inf_follow_torch(dtype):
    x = _x(6, 1000, dtype)
    x[0] = float("-inf")               # fully masked attention row: torch gives NaN
    x[1, 10:700] = float("-inf")       # masked in part
    x[2, 5] = float("nan")
    x[3, 7] = float("inf")
    x[4, :999] = float("-inf")         # one live element (the last, next to the masked tail)
    for op in ("softmax", "log_softmax"):
        (got, plan), want = _call(op, x)
        assert plan.use_kernel
        _close(got, want, dtype)
        torch.testing.assert_close(got, getattr(torch, op)(x.float(), -1).to(dtype), equal_nan=True,
                                   **TOL[dtype])
    sm = rk.softmax(x)
    assert torch.isnan(sm[0]).all() and torch.isnan(sm[2]).all() and torch.isnan(sm[3]).all()
    assert (sm[1, 10:700] == 0).all() and torch.isfinite(sm[1]).all()
    assert sm[4, 999] == 1 and (sm[4, :999] == 0).all()
    assert (rk.log_softmax(x)[1, 10:700] == float("-inf")).all()
    for op in ("layer_norm", "rms_norm"):
        (got, plan), want = _call(op, x[2:4])
        assert plan.use_kernel
        _close(got, want, dtype)


@kernel
def test_kernel_masked_tail_is_not_written():
    base = torch.full((4, 16), 123.0)
    x = base[:, :9]                    # rows strided 16 apart, 9 columns used
    y, plan = rk.softmax(x, return_plan=True)
    assert plan.use_kernel and plan.block == 16 and y.shape == (4, 9)
    torch.testing.assert_close(y, torch.softmax(x, -1))
    assert (base == 123.0).all()


@kernel
def test_kernel_shapes_without_weight_and_batched_leading_dims():
    x = _x(6, 100, torch.float16).view(2, 3, 100)
    _close(rk.layer_norm(x), row_refs.layer_norm_ref(x), torch.float16)
    _close(rk.rms_norm(x), row_refs.rms_norm_ref(x), torch.float16)
    b = torch.randn(100)
    _close(rk.layer_norm(x, None, b), row_refs.layer_norm_ref(x, None, b), torch.float16)
    assert rk.softmax(torch.empty(0, 5)).shape == (0, 5)


@kernel
def test_kernel_refusals_return_the_reference_and_say_why():
    check_refusals()


def test_refusals_return_the_reference_and_say_why():
    check_refusals()


def check_refusals():
    limit = row_plan.ROW_LIMITS["interpreter"]
    long = _x(2, limit.max_row_elements + 1, torch.float32)
    y, plan = rk.softmax(long, return_plan=True)
    # over the one-pass limit: the chunked form where a CPU tensor may run a kernel
    if INTERP:
        assert plan.use_kernel and plan.form == "chunked" and plan.chunk == 4096
        assert "exceeds" in plan.note and str(limit.max_row_elements) in plan.note
    else:
        assert not plan.use_kernel and "TRITON_INTERPRET" in plan.reason and plan.form == "reference"
    torch.testing.assert_close(y, torch.softmax(long, -1))
    # over the chunked form's cap: refused, with both reasons
    huge = torch.zeros(1, row_plan.MAX_CHUNKED_ELEMENTS + 1)
    y, plan = rk.softmax(huge, return_plan=True)
    assert not plan.use_kernel and plan.form == "reference"
    assert plan.reason == (f"row of {row_plan.MAX_CHUNKED_ELEMENTS + 1} (BLOCK {2 * row_plan.MAX_CHUNKED_ELEMENTS}) "
                           f"exceeds 16384 fp32 elements on interpreter (64 KiB on chip) and the "
                           f"chunked form's cap of {row_plan.MAX_CHUNKED_ELEMENTS}")
    torch.testing.assert_close(y, torch.softmax(huge, -1))
    # exactly the limit still runs the kernel (where a CPU tensor may)
    at_limit = row_plan.plan_row("softmax", long[:, :limit.max_row_elements])
    assert at_limit.use_kernel if INTERP else "TRITON_INTERPRET" in at_limit.reason

    t = _x(8, 6, torch.float32).t()    # last dim strided
    y, plan = rk.layer_norm(t, return_plan=True)
    assert "last dim not contiguous" in plan.reason
    torch.testing.assert_close(y, F.layer_norm(t, (8,)))

    ints = torch.arange(12).view(3, 4)
    y, plan = rk.softmax(ints, return_plan=True)
    assert "dtype torch.int64" in plan.reason and y.dtype == torch.float32
    torch.testing.assert_close(y, torch.softmax(ints.float(), -1))

    d = _x(2, 5, torch.float64)
    y, plan = rk.rms_norm(d, return_plan=True)
    assert "float64" in plan.reason and y.dtype == torch.float64

    x = _x(2, 5, torch.float32)
    assert row_plan.plan_row("layer_norm", x, torch.ones(4)).reason.startswith("weight shape")
    with pytest.raises(RuntimeError):  # the reference raises as torch does
        rk.layer_norm(x, torch.ones(4))
    odd = torch.randn(2, 3, 10).transpose(0, 1)   # last dim contiguous, rows not one stride
    y, plan = rk.log_softmax(odd, return_plan=True)
    assert plan.use_kernel or "collapse" in plan.reason
    torch.testing.assert_close(y, torch.log_softmax(odd, -1))


@pytest.mark.skipif(INTERP, reason="needs Triton imported without the interpreter")
def test_cpu_tensor_refused_without_the_interpreter():
    x = _x(2, 7, torch.float32)
    y, plan = rk.softmax(x, return_plan=True)
    assert "TRITON_INTERPRET" in plan.reason
    torch.testing.assert_close(y, torch.softmax(x, -1))


def test_limits_table_matches_archs_and_picks_warps(monkeypatch):
    for key in ("gfx936", "gfx938", "gfx942"):
        lim, info = row_plan.ROW_LIMITS[key], archs.ARCHS[key]
        assert lim.wave_size == info.wave_size == 64
        assert lim.on_chip_bytes == info.lds_bytes_per_cu == 64 * 1024
        assert lim.max_row_elements == 16384 and lim.source
    h200 = row_plan.ROW_LIMITS["sm_90"]
    assert h200.wave_size == archs.ARCHS["sm_90"].wave_size == 32
    assert h200.max_row_elements == 32768
    # too long for a DCU's one pass (the chunked form there), one pass on an H200
    monkeypatch.setattr(row_plan, "interpreting", lambda: True)
    x = torch.empty(1, 20000)
    assert row_plan.plan_row("softmax", x, limit=row_plan.ROW_LIMITS["gfx936"]).form == "chunked"
    assert row_plan.plan_row("softmax", x, limit=h200).form == "one_pass"
    dcu = row_plan.ROW_LIMITS["gfx936"]
    assert [row_plan.pick_num_warps(b, dcu) for b in (1, 512, 1024, 4096, 16384)] == [1, 1, 2, 8, 16]
    assert [row_plan.pick_num_warps(b, h200) for b in (1, 1024, 4096, 32768)] == [1, 4, 16, 32]


def _h200_plan(monkeypatch, op, cols, dtype=torch.float16, wb=(True, True), backward=False):
    """plan_row for an sm_90 limit on a CPU tensor, as it plans on the GPU (no refusal for CPU)."""
    monkeypatch.setattr(row_plan, "interpreting", lambda: True)
    x = torch.empty(2, cols, dtype=dtype)
    w, b = (torch.empty(cols, dtype=dtype) if want else None for want in wb)
    args = (x, w, b) if op == "layer_norm" else (x, w) if op == "rms_norm" else (x,)
    plan = row_plan.plan_row(op, *args, limit=row_plan.ROW_LIMITS["sm_90"], backward=backward)
    assert plan.use_kernel, plan.reason
    return plan


def test_h200_layer_norm_16k_forward_takes_8_warps(monkeypatch):
    # layer_norm_16k_offline.md: at 32 warps this forward needs 41-44 registers, one program per SM
    evidence = Path(__file__).parent / "fixtures" / "rowkernel_sweep_h200" / "layer_norm_16k_offline.md"
    assert "FORWARD_NUM_WARPS" in evidence.read_text()
    for dtype in (torch.float16, torch.bfloat16):
        plan = _h200_plan(monkeypatch, "layer_norm", 16384, dtype)
        assert (plan.block, plan.num_warps) == (16384, 8)
        assert plan.num_warps != row_plan.pick_num_warps(16384, row_plan.ROW_LIMITS["sm_90"]) == 32
        # the backward spills at 8 warps: it keeps the default
        assert _h200_plan(monkeypatch, "layer_norm", 16384, dtype, backward=True).num_warps == 32
    # the cases that already fit two programs per SM at 32 warps, and the other row lengths
    same = [("layer_norm", 16384, torch.float32, (True, True)), ("layer_norm", 16384, torch.float16, (True, False)),
            ("layer_norm", 16384, torch.float16, (False, True)), ("layer_norm", 16000, torch.float16, (False, False)),
            ("rms_norm", 16384, torch.float16, (True, False)), ("softmax", 16384, torch.float16, (False, False)),
            ("layer_norm", 4096, torch.float16, (True, True)), ("layer_norm", 32768, torch.float16, (True, True))]
    for op, cols, dtype, wb in same:
        plan = _h200_plan(monkeypatch, op, cols, dtype, wb)
        assert plan.num_warps == row_plan.pick_num_warps(plan.block, row_plan.ROW_LIMITS["sm_90"]), (op, cols, dtype, wb)
    # a 16k row counts by its BLOCK: 16000 columns plan like 16384
    assert _h200_plan(monkeypatch, "layer_norm", 16000).num_warps == 8
    # another device's limit is untouched
    monkeypatch.setattr(row_plan, "interpreting", lambda: True)
    x, w = torch.empty(2, 16384, dtype=torch.float16), torch.empty(16384, dtype=torch.float16)
    assert row_plan.plan_row("layer_norm", x, w, w, limit=row_plan.ROW_LIMITS["gfx936"]).num_warps == 16


# --- the chunked form ---------------------------------------------------------------------------

def _plan(monkeypatch, op, cols, limit, dtype=torch.float16, backward=False):
    """plan_row for ``limit`` on a CPU tensor with weight and bias, as it plans on the GPU."""
    monkeypatch.setattr(row_plan, "interpreting", lambda: True)
    x, w = torch.empty(2, cols, dtype=dtype), torch.empty(cols, dtype=dtype)
    args = (x, w, w) if op == "layer_norm" else (x, w) if op == "rms_norm" else (x,)
    return row_plan.plan_row(op, *args, limit=limit, backward=backward)


def test_rows_over_the_limit_plan_the_chunked_form(monkeypatch):
    h200 = row_plan.ROW_LIMITS["sm_90"]
    over = "row of 65536 (BLOCK 65536) exceeds 32768 fp32 elements on sm_90 (227 KiB on chip)"
    for op in row_plan.OPS:
        plan = _plan(monkeypatch, op, 65536, h200)
        assert plan.use_kernel and plan.reason is None
        # measured on an H200 (row_plan.CHUNK_PLANS): softmax rows in 16k chunks at 16 warps with per-row
        # stats and a runtime loop, the norms in 16k chunks at 32 warps, unrolled
        want = (16384, 16, True) if "softmax" in op else (16384, 32, False)
        assert (plan.form, plan.chunk, plan.num_warps, plan.row_stats, plan.block) == ("chunked", *want, 65536)
        assert plan.note == f"{over}: chunked, two passes over {want[0]}-element chunks"
        # a whole number of chunks: the norms compiled for that count (loops unrolled, no masks)
        assert plan.n_chunks == (0 if "softmax" in op else 65536 // want[0])
        assert _plan(monkeypatch, op, 65536 + 8, h200).n_chunks == 0
        # a row that fits keeps the one-pass plan
        fit = _plan(monkeypatch, op, 32768, h200)
        assert fit.use_kernel and (fit.form, fit.chunk, fit.note, fit.block) == ("one_pass", None, None, 32768)
        # the backward kernels are one-pass only
        bwd = _plan(monkeypatch, op, 65536, h200, backward=True)
        assert (bwd.use_kernel, bwd.form) == (False, "reference")
        assert bwd.reason == f"{over}; the backward kernels are one-pass only"
        assert _plan(monkeypatch, op, 32768, h200, backward=True).form == "one_pass"
    # the cap: 2^20 columns run chunked, one more is refused
    cap = row_plan.MAX_CHUNKED_ELEMENTS
    assert cap == 1 << 20 and _plan(monkeypatch, "softmax", cap, h200).form == "chunked"
    refused = _plan(monkeypatch, "layer_norm", cap + 1, h200)
    assert (refused.use_kernel, refused.form) == (False, "reference")
    assert refused.reason == (f"row of {cap + 1} (BLOCK {2 * cap}) exceeds 32768 fp32 elements on sm_90 "
                              f"(227 KiB on chip) and the chunked form's cap of {cap}")
    # CHUNK: listed per limit and op, else the largest power of two up to 4096 with room for four
    # fp32 vectors on chip, pick_num_warps of it and per-lane stats
    assert [row_plan.chunk_plan(row_plan.ROW_LIMITS[k], "softmax") for k in ("gfx936", "gfx942", "cuda", "hip")] == \
        [(4096, 8, False, True, 0, 0), (4096, 8, False, True, 0, 0), (2048, 8, False, True, 0, 0),
         (4096, 8, False, True, 0, 0)]
    assert row_plan.chunk_plan(row_plan.ROW_LIMITS["gfx936"], "rms_norm") == (4096, 8, False, True, 0, 0)
    assert SMALL.max_row_elements == 256 and row_plan.chunk_plan(SMALL, "softmax") == (64, 1, False, True, 0, 0)
    # the row guard: the sm_90 RMSNorm plan, on unrolled rows only, never another op
    assert row_plan.chunk_plan(h200, "rms_norm").row_guard and not row_plan.chunk_plan(h200, "layer_norm").row_guard
    assert _plan(monkeypatch, "rms_norm", 65536, h200).row_guard
    assert not _plan(monkeypatch, "rms_norm", 65536 + 64, h200).row_guard   # not whole chunks
    assert not _plan(monkeypatch, "rms_norm", 131072, h200).row_guard       # over 4 chunks
    # the streamed store: every chunked softmax row, norm rows of up to 4 chunks (masked tails
    # count their partial chunk), never off the sm_90 plans
    assert all(_plan(monkeypatch, op, n, h200).stream_out for op in ("softmax", "log_softmax")
               for n in (65536, 65536 + 64, 1 << 20))
    assert [_plan(monkeypatch, op, n, h200).stream_out for op in ("layer_norm", "rms_norm")
            for n in (65536, 65536 - 64, 65536 + 64, 131072)] == [True, True, False, False] * 2
    assert not any(_plan(monkeypatch, op, 4096, SMALL).stream_out for op in rk.REFERENCES)
    assert [row_plan.unrolled_chunks(n, 64) for n in (64, 1024, 1000, 63)] == [1, 16, 0, 0]
    monkeypatch.setitem(row_plan.CHUNK_PLANS, ("small", "rms_norm"), row_plan.ChunkPlan(64, 1, False, unroll=False))
    assert _plan(monkeypatch, "rms_norm", 1024, SMALL).n_chunks == 0
    small = _plan(monkeypatch, "layer_norm", 257, SMALL)
    assert (small.form, small.chunk, small.num_warps, small.block) == ("chunked", 64, 1, 512)
    assert _plan(monkeypatch, "layer_norm", 256, SMALL).form == "one_pass"
    # every other refusal stays as it was
    assert row_plan.plan_row("softmax", torch.empty(2, 1000, dtype=torch.float64), limit=SMALL).reason == \
        "dtype torch.float64 not in fp16/bf16/fp32"
    assert row_plan.plan_row("layer_norm", torch.empty(2, 1000), torch.ones(999), limit=SMALL).reason == \
        "weight shape (999,) is not (1000,)"
    assert "last dim not contiguous" in row_plan.plan_row("rms_norm", torch.empty(1000, 2).t(), limit=SMALL).reason


@pytest.mark.slow
@pytest.mark.skipif(INTERP, reason="needs Triton imported without the interpreter")
def test_chunked_kernels_compile_offline_without_spills(monkeypatch):
    # the plan's CHUNK and warps for a row past the one-pass limit, compiled for sm_90 and the DCU
    # proxy gfx942 (tests/fixtures/rowkernels_offline): no spill, no scratch, a program resident
    # (sm_90) and four waves per SIMD (gfx942)
    sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "rowkernels_offline"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    import compile_chunked as cc

    for arch, cols in (("sm_90", 65536), ("gfx942", 32768)):
        for op, const in cc.CASES:
            plan = _plan(monkeypatch, op, cols, row_plan.ROW_LIMITS[arch])
            kernel, chunk, warps, n_chunks = cc.compile_one(op, const, "fp16", arch, cols)
            assert (plan.form, plan.chunk, plan.num_warps, plan.n_chunks) == \
                ("chunked", chunk, warps, n_chunks), (arch, op)
            if arch == "sm_90":
                use = cc.nvidia_usage(kernel)
                assert (use["stack"], use["local"], use["spill_store_b"]) == (0, 0, 0), (op, use)
                # the plan wants few rows in flight (pass 2 rereads them from L2): softmax at CHUNK
                # 16384 / 16 warps takes 68 registers on Triton 3.9, one program per SM
                assert use["programs_per_sm"] >= 1, (op, use)
            else:
                use = cc.amd_usage(kernel, warps)
                assert (use["scratch"], use["vgpr_spill"], use["spill_ops"]) == (0, 0, 0), (op, use)
                # buffer loads on Triton >= 3.5, global loads on 3.3 (chunked_offline_triton331.json)
                loads = (use["buffer_load"] or 0) + (use["global_load"] or 0)
                assert use["waves_per_simd"] >= 4 and loads >= 2, (op, use)  # 8 on 3.3.1, 3.5.1 and 3.9


@pytest.mark.slow
@pytest.mark.skipif(INTERP, reason="needs Triton imported without the interpreter")
def test_norm_statistics_stay_fp32_when_inductor_passes_eps_as_fp64(monkeypatch):
    # Inductor types a float argument of a user kernel fp64 (its generated code for the triton
    # ops on an H200, torch 2.11: tests/fixtures/rowkernel_sweep_h200/call14_triton_op_fp64_eps)
    # and its mutation analysis passes a Python float (call15_triton_op_input_copied); the norms
    # cast eps with tl.cast, so each form compiles, the PTX holds no fp64 arithmetic and the
    # occupancy is the fp32 launch's
    import re

    import triton
    from triton.compiler import ASTSource

    sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "rowkernels_offline"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    import compile_chunked as cc

    cases = {"_layer_norm_kernel": dict(BLOCK=4096, HAS_W=True, HAS_B=True, STATS=True),
             "_rms_norm_kernel": dict(BLOCK=4096, HAS_W=True, STATS=True),
             "_layer_norm_chunked_kernel": dict(CHUNK=16384, HAS_W=True, HAS_B=True, STATS=False, N_CHUNKS=4, STREAM=True),
             "_rms_norm_chunked_kernel": dict(CHUNK=16384, HAS_W=True, STATS=False, N_CHUNKS=4, STREAM=True),
             "_rms_norm_guarded_kernel": dict(CHUNK=16384, HAS_W=True, STATS=False, N_CHUNKS=4)}
    for name, const in cases.items():
        fn = triton.jit(getattr(row_triton, name))
        idx = {n: i for i, n in enumerate(fn.arg_names)}
        regs = {}
        # fp32: a direct launch; fp64: Inductor's launch; a Python float: its mutation analysis
        for eps_type in ("fp32", "fp64", "constexpr"):
            consts = dict(const, **({"eps": 1e-6} if eps_type == "constexpr" else {}))
            sig = {n: "*fp32" if n in ("Mean", "Rstd") else "*fp16"
                   for n in ("X", "Y", "W", "B", "Mean", "Rstd") if n in idx}
            sig.update(stride_x="i32", stride_y="i32", n_cols="i32", eps=eps_type)
            sig.update({"n_rows": "i32"} if "n_rows" in idx else {})
            sig.update(dict.fromkeys(consts, "constexpr"))
            sig = {n: sig[n] for n in fn.arg_names}   # Triton 3.3 reads the types in argument order
            attrs = {(idx[n],): [["tt.divisibility", 16]] for n in sig if sig[n].startswith("*")}
            src = ASTSource(fn, sig, constexprs={(idx[c],): v for c, v in consts.items()}, attrs=attrs)
            k = triton.compile(src, target=cc.TARGETS["sm_90"], options={"num_warps": 16})
            assert not re.findall(r"\b(?:add|sub|mul|div|sqrt|rcp|fma|rsqrt)\.[a-z.]*f64", k.asm["ptx"]), (name, eps_type)
            use = cc.nvidia_usage(k)
            regs[eps_type] = (use["reg"], use["programs_per_sm"])
        # the same programs per SM; a register more for the fp64 argument itself (Triton 3.3.1:
        # the one-pass LayerNorm 38 against 37); before the cast, 14 more (the chunked LayerNorm)
        assert {r[1] for r in regs.values()} == {regs["fp32"][1]}, (name, regs)
        assert max(r[0] for r in regs.values()) - regs["fp32"][0] <= 2, (name, regs)


@pytest.mark.skipif(INTERP or not row_triton.USE_TRITON_OP, reason="the triton ops: torch >= 2.6, Triton compiling")
def test_a_compiled_triton_op_traces_to_the_planned_kernel_launch(monkeypatch):
    # AOTAutograd on fake CUDA tensors runs nothing, so no GPU is needed: the forward graph holds
    # the launch of the chunked RMSNorm kernel with the sm_90 plan's CHUNK, chunk count and warps
    # (Inductor launches exactly this on a GPU: tests/gpu/test_rowkernels_gpu.py), not the op
    import logging

    import triton
    from functorch.compile import aot_function
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:   # torch keeps a launch's num_warps in a one-config autotuner
        triton.autotune(configs=[triton.Config({}, num_warps=1)], key=[])(row_triton.jitted_kernels()["softmax"])
    except RuntimeError as e:   # Triton 3.3 asks the GPU driver for its timer there
        pytest.skip(f"Triton {triton.__version__} builds an autotuner only with a GPU driver: {e}")
    sm90 = row_plan.ROW_LIMITS["sm_90"]
    monkeypatch.setattr(row_plan, "device_limit", lambda device: sm90)
    # without a GPU Triton has no target for the mutation analysis, which then logs and assumes
    # every argument written: the graph still holds the launch
    monkeypatch.setattr(logging.getLogger("torch._higher_order_ops.triton_kernel_wrap"), "disabled", True)
    graphs = []
    mode = FakeTensorMode()
    with mode:
        x = torch.empty(8, 65536, device="cuda", dtype=torch.float16)
        w = torch.empty(65536, device="cuda", dtype=torch.float16)
    compiled = aot_function(lambda a, b: torch.ops.tko.rms_norm(a, b, 1e-6),
                            fw_compiler=lambda gm, _: graphs.append(gm) or gm)
    before = rk.call_counts()
    with mode, contextlib.suppress(RuntimeError):   # running the graph needs CUDA; tracing did not
        compiled(x, w)
    nodes = [n for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert not [n for n in nodes if "tko." in str(n.target)], nodes
    (launch,) = [n for n in nodes if "triton_kernel_wrapper" in str(n.target)]
    plan = row_plan.chunk_plan(sm90, "rms_norm")
    args = launch.kwargs["kwargs"]
    assert (args["CHUNK"], args["N_CHUNKS"], args["HAS_W"], args["STATS"]) == (plan.chunk, 65536 // plan.chunk, True, False)
    assert plan.row_guard and args["n_rows"] == 8     # the sm_90 plan's guarded form
    kernel = kernel_side_table.get_kernel(launch.kwargs["kernel_idx"])
    assert [c.num_warps for c in kernel.configs] == [plan.num_warps]     # the launch's warps, kept
    assert kernel.fn.fn.__name__ == "_rms_norm_guarded_kernel"
    added = {k: v - before.get(k, 0) for k, v in rk.call_counts().items() if v != before.get(k, 0)}
    assert list(added) == ["rms_norm (chunked, traced into a compiled graph): kernel"], added


@pytest.mark.skipif(INTERP, reason="needs Triton imported without the interpreter")
def test_chunked_rows_of_a_cpu_tensor_are_refused_without_the_interpreter():
    x = _x(2, 1000, torch.float32)
    y, plan = rk.softmax(x, return_plan=True, limit=SMALL)
    assert (plan.use_kernel, plan.form) == (False, "reference") and "TRITON_INTERPRET" in plan.reason
    torch.testing.assert_close(y, torch.softmax(x, -1))


@kernel
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", row_plan.OPS)
def test_kernel_chunked_rows_match_the_reference(op, dtype):
    before = rk.call_counts()
    for cols in CHUNKED_COLS:
        x = _x(2, cols, dtype, seed=cols)
        w = torch.randn(cols).to(dtype) if op in ("layer_norm", "rms_norm") else None
        b = torch.randn(cols).to(dtype) if op == "layer_norm" else None
        (got, plan), want = _call(op, x, w, b, limit=SMALL)
        assert plan.use_kernel and (plan.form, plan.chunk, plan.block) == ("chunked", 64, _next_pow2(cols)), plan
        assert plan.n_chunks == (16 if cols == 1024 else 0), plan
        _close(got, want, dtype)
    # rows strided apart under batched leading dims
    x = _x(6, 1100, dtype, seed=1)[:, 50:1050].view(2, 3, 1000)
    (got, plan), want = _call(op, x, limit=SMALL)
    assert plan.form == "chunked" and got.shape == (2, 3, 1000)
    _close(got, want, dtype)
    assert _added(before) == {f"{op} (chunked): kernel": len(CHUNKED_COLS) + 1}, _added(before)
    # the TKO_REPLACE: line joins "key count"; a replace trial counts ': kernel N' as launched
    # (tko.chains.trials._check_replaced)
    line = ", ".join(f"{k} {v}" for k, v in _added(before).items())
    assert re.search(r": kernel \d+", line), line


def _next_pow2(n):
    return 1 << max(0, math.ceil(math.log2(n)))


@kernel
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_kernel_chunked_row_stats_match_the_reference(op, monkeypatch):
    # the per-row form of pass 1 (row_plan.CHUNK_PLANS on sm_90): odd lengths, masked tails
    monkeypatch.setitem(row_plan.CHUNK_PLANS, ("small", op), (64, 1, True))
    for dtype in (torch.float32, torch.bfloat16):
        for cols in CHUNKED_COLS:
            x = _x(2, cols, dtype, seed=cols)
            (got, plan), want = _call(op, x, limit=SMALL)
            assert plan.row_stats and (plan.form, plan.chunk) == ("chunked", 64)
            _close(got, want, dtype)


@kernel
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kernel_chunked_rms_norm_row_guard_matches_the_reference(dtype, monkeypatch):
    # the guarded form (int32 offsets from X, every access under the row mask, the sm_90 plan's):
    # whole-chunk rows take it, rows strided apart too, a masked tail does not; the stats as well
    monkeypatch.setitem(row_plan.CHUNK_PLANS, ("small", "rms_norm"), row_plan.ChunkPlan(64, 1, False, row_guard=16))
    for cols, guarded in ((1024, True), (1000, False)):
        x = _x(5, cols, dtype, seed=cols)
        w = torch.randn(cols).to(dtype)
        (got, plan), want = _call("rms_norm", x, w, limit=SMALL)
        assert (plan.form, plan.n_chunks > 0, plan.row_guard) == ("chunked", guarded, guarded), plan
        _close(got, want, dtype)
    x = _x(6, 1100, dtype, seed=1)[:, 38:1062]            # rows 1100 apart, 1024 long
    (got, plan), want = _call("rms_norm", x, None, limit=SMALL)
    assert plan.row_guard
    _close(got, want, dtype)
    plan = row_plan.plan_row("rms_norm", x, limit=SMALL)
    y, _, rstd = row_triton.launch_forward(plan, x.contiguous(), None, None, 1e-6, stats=True)
    xf = x.float()
    torch.testing.assert_close(rstd, torch.rsqrt(xf.pow(2).mean(-1) + 1e-6), **TOL[torch.float32])
    assert row_plan.int32_rows(x) and not row_plan.int32_rows(torch.empty_strided((2, 8), (2 ** 31, 1), device="meta"))


@kernel
def test_kernel_chunked_and_one_pass_forms_agree():
    x = _x(2, 4099, torch.float32, seed=4)
    w, b = torch.randn(4099), torch.randn(4099)
    for op in row_plan.OPS:
        (one, p1), _ = _call(op, x, w, b)
        (chunked, p2), _ = _call(op, x, w, b, limit=SMALL)
        assert (p1.form, p2.form) == ("one_pass", "chunked")
        torch.testing.assert_close(chunked, one, **TOL[torch.float32])


@kernel
@pytest.mark.parametrize("row_stats", [False, True], ids=["lane_stats", "row_stats"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kernel_chunked_masks_nan_and_inf_follow_torch(dtype, row_stats, monkeypatch):
    # both forms of the chunked softmax pass 1: per-lane running max / sum, and per-row (each
    # chunk reduced to a scalar first), as row_plan.CHUNK_PLANS picks per device
    for op in ("softmax", "log_softmax"):
        monkeypatch.setitem(row_plan.CHUNK_PLANS, ("small", op), (64, 1, row_stats))
    for cols in (1000, 1024):          # a masked tail (runtime loop bound), whole chunks (unrolled)
        _check_nan_and_inf_rows(dtype, row_stats, cols)


def _check_nan_and_inf_rows(dtype, row_stats, cols):
    inf = float("inf")
    x = _x(9, cols, dtype)
    x[0] = -inf                        # fully masked attention row: torch gives NaN
    x[1, 10:700] = -inf                # masked in part, across chunks
    x[2, 5] = float("nan")
    x[3, 7] = inf
    x[4, :cols - 1] = -inf             # one live element, in the last chunk
    x[5, torch.arange(cols) % 64 >= 32] = -inf   # half the lanes see only -inf, in every chunk
    x[6, :500] = -inf                  # NaN after a masked start
    x[6, 700] = float("nan")
    x[7, :300] = -inf                  # +inf after a masked start
    x[7, 900] = inf
    x[8, :600] = -inf                  # masked first chunks, then live ones
    causal = _x(6, cols - 223, dtype, seed=1)
    for i in range(6):                 # a causal mask: row i sees columns 0 .. 150 i
        causal[i, 150 * i + 1:] = -inf
    for op in ("softmax", "log_softmax"):
        for t in (x, causal):
            (got, plan), want = _call(op, t, limit=SMALL)
            assert (plan.form, plan.row_stats) == ("chunked", row_stats)
            _close(got, want, dtype)
            torch.testing.assert_close(got, getattr(torch, op)(t.float(), -1).to(dtype), equal_nan=True,
                                       **TOL[dtype])
    assert row_plan.plan_row("softmax", x, limit=SMALL).n_chunks == (16 if cols == 1024 else 0)
    sm = rk.softmax(x, limit=SMALL)
    assert torch.isnan(sm[[0, 2, 3, 6, 7]]).all()
    assert torch.isfinite(sm[[1, 4, 5, 8]]).all()
    assert (sm[1, 10:700] == 0).all() and (sm[5, torch.arange(cols) % 64 >= 32] == 0).all()
    assert (sm[8, :600] == 0).all() and sm[4, cols - 1] == 1 and (sm[4, :cols - 1] == 0).all()
    assert (rk.log_softmax(x, limit=SMALL)[1, 10:700] == -inf).all()
    csm = rk.softmax(causal, limit=SMALL)
    assert csm[0, 0] == 1 and torch.isfinite(csm).all()
    for i in range(6):
        assert (csm[i, 150 * i + 1:] == 0).all()
    for op in ("layer_norm", "rms_norm"):
        (got, plan), want = _call(op, x[[0, 2, 3, 7, 8]], limit=SMALL)
        assert plan.form == "chunked"
        _close(got, want, dtype)


@kernel
def test_kernel_chunked_layer_norm_keeps_the_variance_of_an_offset_row():
    # mean 300, std 1: unshifted fp32 sums (E[x^2] - E[x]^2) lose about 1e-2 of the variance,
    # and x - mean rounds at the size of the mean; against an fp64 reference
    x = _x(3, 1000, torch.float32) / 3 + 300
    w, b = torch.randn(1000), torch.randn(1000)
    y, plan = rk.layer_norm(x, w, b, return_plan=True, limit=SMALL)
    assert plan.form == "chunked"
    torch.testing.assert_close(y, row_refs.layer_norm_ref(x.double(), w.double(), b.double()).float(),
                               **TOL[torch.float32])
    y, plan = rk.rms_norm(x, w, return_plan=True, limit=SMALL)
    torch.testing.assert_close(y, row_refs.rms_norm_ref(x.double(), w.double()).float(), **TOL[torch.float32])


@kernel
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kernel_backward_through_a_chunked_forward(dtype, monkeypatch):
    # the custom ops plan against the device's own limit: the interpreter's, made small here
    monkeypatch.setitem(row_plan.ROW_LIMITS, "interpreter", SMALL)
    x, dy = _x(3, 777, dtype, seed=3), _x(3, 777, dtype, seed=4) / 3
    why = ("row of 777 (BLOCK 1024) exceeds 256 fp32 elements on small (1 KiB on chip); "
           "the backward kernels are one-pass only")
    for op in row_plan.OPS:
        for params in ([_params(op, 777, dtype, 0)] + ([[]] if op in ("layer_norm", "rms_norm") else [])):
            assert row_plan.plan_row(op, x, *params).form == "chunked"
            before = rk.call_counts()
            check_backward(op, x, params, dy, dtype, backward=None)         # the default: torch
            assert _added(before) == {f"{op} (chunked): kernel": 1, f"{op}_bwd: torch": 1}, _added(before)
            before = rk.call_counts()
            check_backward(op, x, params, dy, dtype, kernel=False, backward="kernel")
            assert _added(before) == {f"{op} (chunked): kernel": 1, f"{op}_bwd: reference ({why})": 1}, \
                _added(before)
    # masked rows (1000 columns: chunked here) through the default backward
    check_masked_rows_backward(dtype, "torch")


@kernel
def test_kernel_chunked_ops_pass_opcheck(monkeypatch):
    monkeypatch.setitem(row_plan.ROW_LIMITS, "interpreter", SMALL)
    x = _x(3, 300, torch.float32).requires_grad_(True)
    w, b = torch.randn(300, requires_grad=True), torch.randn(300, requires_grad=True)
    assert row_plan.plan_row("softmax", x).form == "chunked"
    tko = torch.ops.tko
    for op, args in ((tko.row_softmax, (x,)), (tko.row_log_softmax, (x,)),
                     (tko.layer_norm_fwd, (x, w, b, 1e-5, True)), (tko.rms_norm_fwd, (x, w, 1e-6, True))):
        result = torch.library.opcheck(op, args)
        assert set(result.values()) == {"SUCCESS"}, (op, result)
    # the stats the backward reads, from the chunked forward
    _, mean, rstd = tko.layer_norm_fwd(x.detach(), w.detach(), b.detach(), 1e-5, True)
    want_mean, want_rstd = row_refs.norm_stats_ref(x.detach(), 1e-5, True)
    torch.testing.assert_close(mean, want_mean)
    torch.testing.assert_close(rstd, want_rstd)
    _, rstd = tko.rms_norm_fwd(x.detach(), None, 1e-6, True)
    torch.testing.assert_close(rstd, row_refs.norm_stats_ref(x.detach(), 1e-6, False)[1])


@kernel
def test_kernel_custom_ops_under_torch_compile():
    check_custom_ops()


def test_custom_ops_under_torch_compile():
    check_custom_ops()


def check_custom_ops():
    assert rk.OPS_REGISTERED
    x = _x(3, 37, torch.float32)
    w, b = torch.randn(37), torch.randn(37)
    torch.testing.assert_close(torch.ops.tko.row_softmax(x), torch.softmax(x, -1))
    torch.testing.assert_close(torch.ops.tko.rms_norm(x, w, 1e-6), row_refs.rms_norm_ref(x, w))

    def f(a):
        s = torch.ops.tko.row_softmax(a) + torch.ops.tko.row_log_softmax(a)
        return torch.ops.tko.layer_norm(s, w, b, 1e-5) + torch.ops.tko.rms_norm(a, None, 1e-6)

    want = (F.layer_norm(torch.softmax(x, -1) + torch.log_softmax(x, -1), (37,), w, b, 1e-5)
            + row_refs.rms_norm_ref(x))
    torch._dynamo.reset()
    got = torch.compile(f, backend="eager", fullgraph=True)(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    ints = torch.ops.tko.row_softmax(torch.arange(4).view(1, 4))
    assert ints.dtype == torch.float32


# --- backward ---------------------------------------------------------------------------------

def _fn(op, eps=None):
    """(bundled, reference) for op with its params as positional tensors."""
    if op == "layer_norm":
        return (lambda x, w=None, b=None: rk.layer_norm(x, w, b),
                lambda x, w=None, b=None: row_refs.layer_norm_ref(x, w, b))
    if op == "rms_norm":
        return lambda x, w=None: rk.rms_norm(x, w), lambda x, w=None: row_refs.rms_norm_ref(x, w)
    return getattr(rk, op), rk.REFERENCES[op]


def _grads(fn, inputs, dy):
    leaves = [t.detach().clone().requires_grad_(True) if t is not None else None for t in inputs]
    out = fn(*leaves)
    out.backward(dy)
    return out, [t.grad if t is not None else None for t in leaves]


def _want_grads(op, inputs, dy):
    """torch's autograd of the reference, run in fp64 and cast back: the exact gradient of the
    rounded inputs (an fp32 reference's own rounding would exceed the fp32 tolerance, e.g. on a
    one-element LayerNorm row whose exact gradient is 0)."""
    wide = [t.double() if t is not None else None for t in inputs]
    _, grads = _grads(_fn(op)[1], wide, dy.double())
    return [g.to(t.dtype) if g is not None else None for g, t in zip(grads, inputs)]


def _close_grad(got, want, dtype):
    # the forward tolerances, the absolute one scaled to the gradient's size: a gradient is not
    # bounded by 1 as a softmax is
    assert got.dtype == want.dtype and got.shape == want.shape
    finite = want[torch.isfinite(want)]
    scale = max(1.0, finite.abs().max().item()) if finite.numel() else 1.0
    tol = TOL[dtype]
    torch.testing.assert_close(got, want, equal_nan=True, rtol=tol["rtol"], atol=tol["atol"] * scale)


def _params(op, cols, dtype, seed):
    g = torch.Generator().manual_seed(seed + 1)
    w = torch.randn(cols, generator=g).to(dtype) if op in ("layer_norm", "rms_norm") else None
    b = torch.randn(cols, generator=g).to(dtype) if op == "layer_norm" else None
    return [t for t in (w, b) if t is not None]


def check_backward(op, x, params, dy, dtype, *, kernel=True, backward="kernel"):
    """Gradients of the bundled op against torch's autograd; ``backward`` is the choice to run
    (None: the module's default), ``kernel`` whether that choice's kernel must launch."""
    before = rk.call_counts()
    with rk.use_backward(backward) if backward else contextlib.nullcontext():
        out, got = _grads(_fn(op)[0], [x, *params], dy)
    want = _want_grads(op, [x, *params], dy)
    for g, w in zip(got, want):
        _close_grad(g, w, dtype)
    launched = {k: v - before.get(k, 0) for k, v in rk.call_counts().items() if v != before.get(k, 0)}
    ran_kernel = kernel and (backward or rk.BACKWARD) == "kernel"
    assert launched.get(f"{op}_bwd: kernel", 0) == (1 if ran_kernel else 0), launched
    if (backward or rk.BACKWARD) == "torch":     # the formula ran, nothing else
        assert [k for k in launched if "_bwd" in k] == [f"{op}_bwd: torch"], launched
    return out, got


@kernel
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", row_plan.OPS)
def test_kernel_backward_odd_rows_match_torch_autograd(op, dtype):
    for cols in ODD_COLS:
        # 7 rows over the interpreter's 4 norm programs: 2 rows each, the last program 1
        rows = 7 if cols < 4000 else 3
        x = _x(rows, cols, dtype, seed=cols)
        dy = _x(rows, cols, dtype, seed=cols + 7) / 3
        assert row_plan.plan_row(op, x).use_kernel
        check_backward(op, x, _params(op, cols, dtype, cols), dy, dtype)
        if op in ("layer_norm", "rms_norm"):  # no weight: dx alone
            check_backward(op, x, [], dy, dtype)


@kernel
@pytest.mark.parametrize("backward", rk.BACKWARDS)
@pytest.mark.parametrize("op", row_plan.OPS)
def test_kernel_backward_takes_grads_in_any_layout(op, backward):
    x = _x(2, 3 * 33, torch.float32).view(2, 3, 33)[:, 1]   # rows strided 99 apart
    params = _params(op, 33, torch.float32, 0)
    leaves = [t.clone().requires_grad_(True) for t in (x, *params)]
    with rk.use_backward(backward):
        _fn(op)[0](*leaves).sum().backward()                   # a stride-0 expanded grad
    want = _want_grads(op, [x, *params], torch.ones(2, 33))
    for g, w in zip([t.grad for t in leaves], want):
        _close_grad(g, w, torch.float32)
    with rk.use_backward(backward):
        _, got = _grads(_fn(op)[0], [x, *params], _x(33, 2, torch.float32).t())   # transposed grad
    for g, w in zip(got, _want_grads(op, [x, *params], _x(33, 2, torch.float32).t())):
        _close_grad(g, w, torch.float32)


@kernel
@pytest.mark.parametrize("backward", rk.BACKWARDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kernel_backward_of_masked_rows_follows_torch(dtype, backward):
    with rk.use_backward(backward):
        check_masked_rows_backward(dtype, backward)


def check_masked_rows_backward(dtype, backward):
    x = _x(5, 1000, dtype)
    x[0] = float("-inf")               # fully masked attention row: torch gives NaN, its grad too
    x[1, 10:700] = float("-inf")       # masked in part: zero grad there
    x[2, :999] = float("-inf")         # one live element, next to the masked tail
    dy = _x(5, 1000, dtype, seed=3) / 3
    for op in ("softmax", "log_softmax"):
        _, (dx,) = check_backward(op, x, [], dy, dtype, backward=backward)
        xt = x.detach().float().clone().requires_grad_(True)
        getattr(torch, op)(xt, -1).backward(dy.float())
        torch.testing.assert_close(dx, xt.grad.to(dtype), equal_nan=True, **TOL[dtype])
        assert torch.isnan(dx[0]).all() and torch.isfinite(dx[1:]).all()
        assert torch.isnan(xt.grad[0]).all()
    _, (dx,) = _grads(rk.softmax, [x], dy)
    assert (dx[1, 10:700] == 0).all() and (dx[2] == 0).all()
    _, (dx,) = _grads(rk.log_softmax, [x], dy)
    assert (dx[1, 10:700] == dy[1, 10:700]).all()


@kernel
@pytest.mark.usefixtures("kernel_backward")
def test_kernel_parameter_grads_are_deterministic_and_follow_needs():
    x, dy = _x(9, 100, torch.float32), _x(9, 100, torch.float32, seed=5)
    w, b = torch.randn(100), torch.randn(100)
    first = _grads(_fn("layer_norm")[0], [x, w, b], dy)[1]
    again = _grads(_fn("layer_norm")[0], [x, w, b], dy)[1]
    assert all(torch.equal(p, q) for p, q in zip(first, again))   # no atomics: bitwise the same
    # weight frozen, x and bias trained: no dweight, the rest as torch's
    xl, bl = x.clone().requires_grad_(True), b.clone().requires_grad_(True)
    rk.layer_norm(xl, w, bl).backward(dy)
    want = _want_grads("layer_norm", [x, w, b], dy)
    _close_grad(xl.grad, want[0], torch.float32)
    _close_grad(bl.grad, want[2], torch.float32)
    # only the weight trained
    wl = w.clone().requires_grad_(True)
    rk.rms_norm(x, wl).backward(dy)
    _close_grad(wl.grad, _want_grads("rms_norm", [x, w], dy)[1], torch.float32)
    # mixed dtypes: fp16 activations, fp32 parameters
    xh, dyh = x.half(), dy.half()
    _, got = _grads(_fn("layer_norm")[0], [xh, w, b], dyh)
    for g, want_g, t in zip(got, _want_grads("layer_norm", [xh, w, b], dyh), (xh, w, b)):
        assert g.dtype == t.dtype
        _close_grad(g, want_g, torch.float16)


# --- which backward runs ------------------------------------------------------------------------

@kernel
def test_kernel_default_backward_is_the_torch_formula():
    check_default_backward()


def test_default_backward_is_the_torch_formula():
    # here the forward is refused (a CPU tensor): the reference's outputs and stats
    check_default_backward()


def check_default_backward():
    assert rk.BACKWARD == "torch" and rk.backward_choice() == "torch"
    for op in row_plan.OPS:
        for dtype in DTYPES:
            for cols in (1, 7, 1000, 4097):
                rows = 7 if cols < 4000 else 3
                x = _x(rows, cols, dtype, seed=cols)
                dy = _x(rows, cols, dtype, seed=cols + 7) / 3
                assert row_plan.plan_row(op, x).use_kernel == INTERP
                check_backward(op, x, _params(op, cols, dtype, cols), dy, dtype, backward=None)
                if op in ("layer_norm", "rms_norm"):
                    check_backward(op, x, [], dy, dtype, backward=None)


@kernel
def test_kernel_both_backwards_give_the_same_gradients_and_dtypes():
    # fp16 activations, an fp32 weight and a bf16 bias: dx in fp16, dweight fp32, dbias bf16
    x, dy = _x(9, 100, torch.float16), _x(9, 100, torch.float16, seed=5)
    w, b = torch.randn(100), torch.randn(100).to(torch.bfloat16)
    for op, params in (("layer_norm", [w, b]), ("rms_norm", [w]), ("softmax", []), ("log_softmax", [])):
        got = {}
        for backward in rk.BACKWARDS:
            with rk.use_backward(backward):
                got[backward] = _grads(_fn(op)[0], [x, *params], dy)[1]
        for k, t, want in zip(got["kernel"], got["torch"], _want_grads(op, [x, *params], dy)):
            assert k.dtype == t.dtype == want.dtype
            tol = torch.bfloat16 if want.dtype == torch.bfloat16 else torch.float16
            _close_grad(t, want, tol)
            _close_grad(k, t, tol)


@kernel
def test_kernel_environment_selects_the_kernel_backward(monkeypatch):
    monkeypatch.setenv(rk.BACKWARD_ENV, "kernel")
    x, dy = _x(3, 100, torch.float16), _x(3, 100, torch.float16, seed=2)
    for op in row_plan.OPS:
        before = rk.call_counts()
        _grads(_fn(op)[0], [x, *_params(op, 100, torch.float16, 0)], dy)
        ran = {k: v - before.get(k, 0) for k, v in rk.call_counts().items() if "_bwd" in k and v != before.get(k, 0)}
        assert ran == {f"{op}_bwd: kernel": 1}, ran


def test_backward_choice_follows_use_backward_then_the_environment_then_the_setting(monkeypatch):
    assert rk.BACKWARD == "torch" and rk.backward_choice() == "torch"
    monkeypatch.setenv(rk.BACKWARD_ENV, "kernel")
    assert rk.backward_choice() == "kernel"
    with rk.use_backward("torch"):
        assert rk.backward_choice() == "torch"
        with rk.use_backward("kernel"):
            assert rk.backward_choice() == "kernel"
        assert rk.backward_choice() == "torch"
    assert rk.backward_choice() == "kernel"
    # the kernel path, refused for a CPU tensor here: the reference formula, counted as refused
    before = rk.call_counts()
    _grads(rk.softmax, [_x(2, 5, torch.float32)], _x(2, 5, torch.float32, seed=1))
    ran = [k for k, v in rk.call_counts().items() if "_bwd" in k and v != before.get(k, 0)]
    assert ran == ["softmax_bwd: kernel" if INTERP else
                   "softmax_bwd: reference (cpu tensor and Triton was not imported with TRITON_INTERPRET=1)"]
    monkeypatch.delenv(rk.BACKWARD_ENV)
    monkeypatch.setattr(rk, "BACKWARD", "kernel")
    assert rk.backward_choice() == "kernel"
    monkeypatch.setenv(rk.BACKWARD_ENV, " torch ")    # the environment wins over the setting
    assert rk.backward_choice() == "torch"
    with pytest.raises(InputError, match=r"^use_backward='fast' is not a row backward; one of torch, kernel$"):
        with rk.use_backward("fast"):
            pass


def test_an_unknown_backward_is_one_clear_error_when_a_backward_runs(monkeypatch):
    monkeypatch.setenv(rk.BACKWARD_ENV, "fast")
    x = _x(2, 5, torch.float32).requires_grad_(True)
    y = rk.softmax(x)                     # the forward does not read it
    with pytest.raises(InputError) as err:
        y.sum().backward()
    assert str(err.value) == "TKO_ROW_BACKWARD='fast' is not a row backward; one of torch, kernel"
    monkeypatch.delenv(rk.BACKWARD_ENV)
    monkeypatch.setattr(rk, "BACKWARD", "Kernel")
    with pytest.raises(InputError, match=r"^tko.remedies.rowkernels.BACKWARD='Kernel' is not a row backward"):
        rk.layer_norm(x, torch.ones(5)).sum().backward()


def _compiled_graphs(backward):
    """(forward graph's tko ops, backward graph's tko ops, gradients, counts added) of two calls
    of a compiled function using every op, traced under ``backward``."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    graphs = []

    def grab(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    tko = torch.ops.tko

    def f(a, w, b):
        s = tko.row_softmax(a) + tko.row_log_softmax(a)
        return (tko.layer_norm(s, w, b, 1e-5) * tko.rms_norm(a, w, 1e-6)).sum()

    x = _x(6, 37, torch.float32).requires_grad_(True)
    w, b = torch.randn(37, requires_grad=True), torch.randn(37, requires_grad=True)
    want = torch.autograd.grad(f(x, w, b), (x, w, b))     # eager
    torch._dynamo.reset()
    before = rk.call_counts()
    with rk.use_backward(backward):
        compiled = torch.compile(f, backend=aot_autograd(fw_compiler=grab, bw_compiler=grab), fullgraph=True)
        grads = [torch.autograd.grad(compiled(x, w, b), (x, w, b)) for _ in range(2)]
    fw, bw = graphs
    ops = [{str(n.target) for n in g.graph.nodes if n.op == "call_function" and "tko." in str(n.target)}
           for g in (fw, bw)]
    added = {k: v - before.get(k, 0) for k, v in rk.call_counts().items() if "_bwd" in k and v != before.get(k, 0)}
    return ops[0], ops[1], grads, want, added


@kernel
def test_kernel_default_backward_is_traced_into_the_compiled_backward_graph():
    assert not row_triton.USE_TRITON_OP    # the interpreter: opaque custom ops
    check_traced_graphs()


def test_default_backward_is_traced_into_the_compiled_backward_graph():
    check_traced_graphs()


def check_traced_graphs():
    fw, bw, grads, want, added = _compiled_graphs("torch")
    if row_triton.USE_TRITON_OP:   # triton ops: decomposed into what they run (CPU tensors: the reference)
        assert fw == set(), fw
    else:                  # opaque custom ops: one node each
        assert {"tko.row_softmax.default", "tko.layer_norm_fwd.default", "tko.rms_norm_fwd.default"} <= fw
    assert bw == set(), bw           # torch ops only: Inductor can fuse them
    for got in grads:
        for g, wg in zip(got, want):
            torch.testing.assert_close(g, wg, rtol=1e-4, atol=1e-4)
    # counted once, at the trace; the compiled calls run no Python formula
    assert added == {f"{op}_bwd: torch (traced into a compiled backward)": 1 for op in row_plan.OPS}, added
    fw, bw, _, _, _ = _compiled_graphs("kernel")
    assert bw == (set() if row_triton.USE_TRITON_OP else
                  {"tko.row_softmax_bwd.default", "tko.row_log_softmax_bwd.default",
                   "tko.layer_norm_bwd.default", "tko.rms_norm_bwd.default"}), bw


@kernel
def test_kernel_backward_refusals_return_the_reference_and_say_why():
    check_backward_refusals()


def test_backward_refusals_return_the_reference_and_say_why():
    check_backward_refusals()


def check_backward_refusals():
    limit = row_plan.ROW_LIMITS["interpreter"]
    # fp16 rows: the fp32 reference's own rounding over a 16k-long row varies with the CPU's
    # reduction kernels and can exceed the fp32 tolerance; it stays far inside fp16's
    long = _x(2, limit.max_row_elements + 1, torch.float16)
    dy = _x(2, limit.max_row_elements + 1, torch.float16, seed=1)
    for op in row_plan.OPS:
        before = rk.call_counts()
        check_backward(op, long, _params(op, long.shape[-1], torch.float16, 0), dy, torch.float16,
                       kernel=False)
        new = {k for k, v in rk.call_counts().items() if v != before.get(k, 0)}
        assert any(k.startswith(f"{op}_bwd: reference (row of") and "exceeds" in k for k in new), new
    d = _x(3, 5, torch.float64)
    check_backward("layer_norm", d, _params("layer_norm", 5, torch.float64, 0), _x(3, 5, torch.float64),
                   torch.float32, kernel=False)
    assert any(k.startswith("layer_norm_bwd: reference (dtype torch.float64") for k in rk.call_counts())
    t = _x(8, 6, torch.float32).t()    # last dim strided: the norms refuse forward and backward
    check_backward("rms_norm", t, _params("rms_norm", 8, torch.float32, 0), _x(6, 8, torch.float32),
                   torch.float32, kernel=False)
    # softmax's backward reads only its output, contiguous here: refused forward, kernel backward
    y, plan = rk.softmax(t.clone().requires_grad_(True), return_plan=True)
    assert "last dim not contiguous" in plan.reason and y.is_contiguous()
    check_backward("softmax", t, [], _x(6, 8, torch.float32), torch.float32, kernel=INTERP)
    # the custom op plans against the device's own limit: a limit with autograd is an error
    with pytest.raises(ValueError, match="limit= applies only to calls without autograd"):
        rk.softmax(_x(2, 5, torch.float32).requires_grad_(True), limit=limit)
    assert not rk.softmax(_x(2, 5, torch.float32), limit=limit).requires_grad


@pytest.mark.parametrize("backward", rk.BACKWARDS)
def test_reference_backward_and_double_backward_pass_gradcheck(backward, monkeypatch):
    # fp64 is refused, so these check the torch formula (the default backward, and the one the
    # kernels fall back on) and the create_graph path against finite differences
    monkeypatch.setattr(rk, "BACKWARD", backward)
    x = _x(3, 7, torch.float64).requires_grad_(True)
    w = torch.randn(7, dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, dtype=torch.float64, requires_grad=True)
    for fn, args in ((torch.ops.tko.row_softmax, (x,)), (torch.ops.tko.row_log_softmax, (x,)),
                     (lambda x, w, b: torch.ops.tko.layer_norm(x, w, b, 1e-5), (x, w, b)),
                     (lambda x, w: torch.ops.tko.rms_norm(x, w, 1e-6), (x, w))):
        assert torch.autograd.gradcheck(fn, args)
        assert torch.autograd.gradgradcheck(fn, args)


@kernel
def test_kernel_ops_pass_opcheck():
    x = _x(5, 9, torch.float32).requires_grad_(True)
    w, b = torch.randn(9, requires_grad=True), torch.randn(9, requires_grad=True)
    dy, stat = _x(5, 9, torch.float32, seed=2), torch.rand(5) + 0.5
    tko = torch.ops.tko
    for op, args in ((tko.row_softmax, (x,)), (tko.row_log_softmax, (x,)),
                     (tko.layer_norm_fwd, (x, w, b, 1e-5, True)), (tko.rms_norm_fwd, (x, None, 1e-6, True)),
                     (tko.layer_norm_fwd, (x.detach(), None, None, 1e-5, False)),
                     # a transposed input is refused: the reference results must be laid out
                     # as the fake ones say
                     (tko.rms_norm_fwd, (x.t(), None, 1e-6, True)), (tko.row_softmax, (x.t(),)),
                     (tko.rms_norm_bwd, (dy.t(), x.detach().t(), None, stat[:1].expand(9), False)),
                     (tko.row_log_softmax_bwd, (dy.t(), -torch.rand(5, 9).t())),
                     (tko.row_softmax_bwd, (dy, torch.rand(5, 9))),
                     (tko.row_log_softmax_bwd, (dy, -torch.rand(5, 9))),
                     (tko.layer_norm_bwd, (dy, x.detach(), w.detach(), None, stat - 1, stat, True, False)),
                     (tko.rms_norm_bwd, (dy, x.detach(), w.detach(), stat, True))):
        result = torch.library.opcheck(op, args)
        assert set(result.values()) == {"SUCCESS"}, (op, result)


@kernel
@pytest.mark.parametrize("backward", rk.BACKWARDS)
def test_kernel_forward_and_backward_under_torch_compile(backward):
    check_compiled_training("inductor", backward)


@pytest.mark.parametrize("backward", rk.BACKWARDS)
def test_forward_and_backward_under_torch_compile_on_the_reference_path(backward):
    check_compiled_training("aot_eager", backward)


def _no_autograd_cache():
    """Inductor's AOTAutograd cache keys on the forward graph, not on the backward choice."""
    cfg = torch._functorch.config
    return cfg.patch(enable_autograd_cache=False) if hasattr(cfg, "enable_autograd_cache") \
        else contextlib.nullcontext()


def check_compiled_training(backend, backward):
    x = _x(6, 37, torch.float32).requires_grad_(True)
    w, b = torch.randn(37, requires_grad=True), torch.randn(37, requires_grad=True)
    tko = torch.ops.tko

    def f(a, w, b):
        s = tko.row_softmax(a) + tko.row_log_softmax(a)
        return (tko.layer_norm(s, w, b, 1e-5) * tko.rms_norm(a, w, 1e-6)).sum()

    def ref(a, w, b):
        s = torch.softmax(a, -1) + torch.log_softmax(a, -1)
        return (F.layer_norm(s, (37,), w, b, 1e-5) * row_refs.rms_norm_ref(a, w)).sum()

    torch._dynamo.reset()
    want = torch.autograd.grad(ref(x, w, b), (x, w, b))
    before = rk.call_counts()
    with rk.use_backward(backward), _no_autograd_cache():
        compiled = torch.compile(f, backend=backend, fullgraph=True)
        for _ in range(2):
            got = torch.autograd.grad(compiled(x, w, b), (x, w, b))
            for g, wg in zip(got, want):
                torch.testing.assert_close(g, wg, rtol=1e-4, atol=1e-4)
    ran = {k: v - before.get(k, 0) for k, v in rk.call_counts().items() if v != before.get(k, 0)}
    if backward == "torch":   # traced once into the compiled backward, no kernel, no fallback
        bwd = {k: v for k, v in ran.items() if "_bwd" in k}
        assert bwd == {f"{op}_bwd: torch (traced into a compiled backward)": 1 for op in row_plan.OPS}, ran
        return
    path = "kernel" if INTERP else "reference"
    for op in row_plan.OPS:
        if row_triton.USE_TRITON_OP:   # decomposed: counted at the traces, none at the compiled calls
            assert not any(k.startswith(f"{op}_bwd: ") for k in ran), ran
            assert any(k.startswith(f"{op}_bwd (traced into a compiled graph): {path}") for k in ran), ran
        else:                  # opaque: each op's backward ran at each compiled call, not only at trace
            assert sum(v for k, v in ran.items() if k.startswith(f"{op}_bwd: {path}")) == 2, ran
