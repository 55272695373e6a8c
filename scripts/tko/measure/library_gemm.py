"""The library GEMM of a matmul kernel's shapes: what ``torch.matmul`` (cuBLAS, hipBLASLt / rocBLAS)
does with the same operands, timed beside the kernel by speed_of_light.py.

:func:`gemm_shapes` finds the operands in a captured launch's arguments (a standalone file's
``_TKO_SPEC["args"]``): two inputs ``A[..., M, K]``, ``B[..., K, N]`` of one dtype and an output
``C[..., M, N]``, by shape alone, in argument order. :func:`time_library_gemm` times
``torch.matmul(A, B, out=C)`` on random operands of those shapes with the timing core.
"""

from __future__ import annotations

import math
from typing import Any, Callable

# torch.matmul has no kernel for these operand dtypes (a float8 GEMM goes through torch._scaled_mm)
UNSUPPORTED_DTYPES = ("float8", "int8", "uint8", "bool")


def _tensors(args: Any) -> list[dict]:
    """The tensor arguments with an integer shape of 2 or 3 dims and a dtype, in order."""
    out = []
    for a in args if isinstance(args, list) else []:
        if not isinstance(a, dict):
            continue
        shape = a.get("shape")
        if (a.get("kind") == "tensor" and isinstance(a.get("dtype"), str) and isinstance(shape, list)
                and len(shape) in (2, 3) and all(isinstance(x, int) and not isinstance(x, bool) and x > 0
                                                 for x in shape)):
            out.append(a)
    return out


def gemm_shapes(args: Any) -> dict | None:
    """``{a, b, out, batch, m, n, k, dtype, out_dtype}`` of the first ``A @ B -> C`` the argument
    shapes allow (A, B of one dtype, the same batch), or None."""
    ts = _tensors(args)
    for i, a in enumerate(ts):
        for b in ts[i + 1:]:
            if a["dtype"] != b["dtype"] or len(a["shape"]) != len(b["shape"]) or a["shape"][:-2] != b["shape"][:-2]:
                continue
            (m, k), (k2, n) = a["shape"][-2:], b["shape"][-2:]
            if k != k2:
                continue
            for c in ts:
                if c is a or c is b or c["shape"] != a["shape"][:-2] + [m, n]:
                    continue
                return {"a": a.get("name"), "b": b.get("name"), "out": c.get("name"), "batch": a["shape"][:-2],
                        "m": m, "n": n, "k": k, "dtype": a["dtype"], "out_dtype": c["dtype"]}
    return None


def describe(shapes: dict) -> str:
    batch = "x".join(str(x) for x in shapes["batch"])
    return (f"torch.matmul({shapes['a']}[{batch + ', ' if batch else ''}{shapes['m']}, {shapes['k']}] @ "
            f"{shapes['b']}[{shapes['k']}, {shapes['n']}]) {shapes['dtype']} -> {shapes['out_dtype']}")


def time_library_gemm(shapes: dict, device: str = "cuda", bench: Callable | None = None,
                      warmup_ms: float = 25, rep_ms: float = 100) -> dict:
    """``torch.matmul`` of ``shapes`` on random operands, timed by :func:`tko.measure.bench.time_fn`
    (do_bench on a GPU; ``bench`` replaces it). Raises what torch raises (an unsupported dtype)."""
    import torch

    from .bench import time_fn

    if any(shapes["dtype"].startswith(d) for d in UNSUPPORTED_DTYPES):
        raise ValueError(f"torch.matmul has no {shapes['dtype']} GEMM")
    dtype, out_dtype = getattr(torch, shapes["dtype"]), getattr(torch, shapes["out_dtype"])
    batch, m, n, k = list(shapes["batch"]), shapes["m"], shapes["n"], shapes["k"]
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(*batch, m, k, device=device, generator=gen).to(dtype)
    b = torch.randn(*batch, k, n, device=device, generator=gen).to(dtype)
    if out_dtype == dtype:
        out = torch.empty(*batch, m, n, device=device, dtype=dtype)
        fn = lambda: torch.matmul(a, b, out=out)  # noqa: E731
    else:  # the kernel writes another dtype than it reads: the cast is part of the library's work too
        out = torch.empty(*batch, m, n, device=device, dtype=out_dtype)
        fn = lambda: out.copy_(torch.matmul(a, b))  # noqa: E731
    timing = time_fn(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, bench=bench)
    flops = 2.0 * m * n * k * math.prod(batch or [1])
    return {"call": describe(shapes), "shapes": shapes, "ms": timing.median_ms, "p20_ms": timing.p20_ms,
            "p80_ms": timing.p80_ms, "timer": timing.timer, "tflops": flops / (timing.median_ms * 1e-3) / 1e12}
