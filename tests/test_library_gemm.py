"""The library GEMM of a matmul kernel's operand shapes (tko.measure.library_gemm): operands found in
real captured arguments, and torch.matmul timed through the timing core (a host timer here)."""

from __future__ import annotations

import time

import pytest

from conftest import ROOT
from tko.measure import library_gemm, sweep_plan

TUTORIAL_MATMUL = ROOT / "examples" / "recorded_h200" / "triton_tutorials" / "autotune_kernels" / "matmul_kernel.py"


def tensor(name, shape, dtype="float16"):
    return {"name": name, "kind": "tensor", "shape": shape, "dtype": dtype}


def test_the_tutorial_matmul_captured_on_the_h200_is_a_4096_cube_fp16_gemm():
    spec = sweep_plan.read_standalone(TUTORIAL_MATMUL)[2]
    shapes = library_gemm.gemm_shapes(spec["args"])
    assert shapes == {"a": "a_ptr", "b": "b_ptr", "out": "c_ptr", "batch": [], "m": 4096, "n": 4096, "k": 4096,
                      "dtype": "float16", "out_dtype": "float16"}
    assert library_gemm.describe(shapes) == "torch.matmul(a_ptr[4096, 4096] @ b_ptr[4096, 4096]) float16 -> float16"


def test_operands_are_found_by_shape_in_argument_order():
    scalars = [{"name": "M", "kind": "scalar", "dtype": "int", "value": 32}]
    rect = [tensor("x", [32, 64]), tensor("w", [64, 48]), *scalars, tensor("y", [32, 48], "float32")]
    assert library_gemm.gemm_shapes(rect) == {"a": "x", "b": "w", "out": "y", "batch": [], "m": 32, "n": 48,
                                              "k": 64, "dtype": "float16", "out_dtype": "float32"}
    batched = [tensor("q", [8, 128, 64]), tensor("k", [8, 64, 128]), tensor("s", [8, 128, 128])]
    assert library_gemm.gemm_shapes(batched)["batch"] == [8]
    assert library_gemm.gemm_shapes([tensor("x", [32, 64]), tensor("w", [64, 48])]) is None          # no output
    assert library_gemm.gemm_shapes([tensor("x", [32, 64]), tensor("w", [64, 48], "bfloat16"),
                                     tensor("y", [32, 48])]) is None                              # mixed inputs
    assert library_gemm.gemm_shapes([tensor("x", [32, 64]), tensor("w", [48, 64]), tensor("y", [32, 48])]) is None
    hostile = [None, 5, tensor("x", [32, True]), tensor("w", [64, -48]), {"kind": "tensor", "shape": [2, 2]}]
    assert library_gemm.gemm_shapes(hostile) is None and library_gemm.gemm_shapes("args") is None


def host_bench(fn, warmup, rep, quantiles):
    """do_bench's signature, timed on the host: this machine has no GPU."""
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return [times[2], times[1], times[3]]


def test_the_library_gemm_runs_the_shapes_and_reports_its_rate():
    shapes = library_gemm.gemm_shapes([tensor("x", [64, 96], "float32"), tensor("w", [96, 32], "float32"),
                                       tensor("y", [64, 32], "float32")])
    rec = library_gemm.time_library_gemm(shapes, device="cpu", bench=host_bench)
    assert rec["timer"] == "custom" and rec["p20_ms"] <= rec["ms"] <= rec["p80_ms"]
    assert rec["tflops"] == pytest.approx(2 * 64 * 32 * 96 / (rec["ms"] * 1e-3) / 1e12)
    assert rec["call"] == "torch.matmul(x[64, 96] @ w[96, 32]) float32 -> float32"
    cast = dict(shapes, dtype="bfloat16", out_dtype="float32")           # the kernel writes another dtype
    assert library_gemm.time_library_gemm(cast, device="cpu", bench=host_bench)["ms"] > 0
    with pytest.raises(ValueError, match="no float8_e4m3fn GEMM"):
        library_gemm.time_library_gemm(dict(shapes, dtype="float8_e4m3fn"), device="cpu", bench=host_bench)
