"""The chunked row kernels' CHUNK and warps on one GPU: which launch reads a long row fastest?

    python tests/gpu/drivers/chunk_probe.py --json-out OUT/chunk_probe.json [--cols 65536]

The chunked form (tko.remedies.rowkernels, rows over the one-pass limit) walks a row in CHUNK-element
blocks twice; pass 2 is meant to find the row in L2. How many rows are resident between the passes
(programs per SM, set by CHUNK, warps and registers) decides whether it does. This times each
forward op (fp16, rows x cols = 2^27 elements) at CHUNK 2048 / 4096 / 8192 and 4-32 warps with the
project's timing core, checks each output against the op's fp32 reference, and prints % of the
copy rate measured in the same process. ``softmax_scalar`` is a variant of the softmax pass 1 that
reduces each chunk to a scalar max and sum (one exp an element instead of two, a cross-warp
reduction a chunk). Not a pytest test: it needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from tko.measure import peaks  # noqa: E402
from tko.remedies import row_plan, row_refs, row_triton  # noqa: E402
from tko.measure.bench import time_fn  # noqa: E402

CHUNKS = (2048, 4096, 8192)
WARPS = (4, 8, 16, 32)


@triton.jit
def _softmax_scalar_kernel(X, Y, stride_x, stride_y, n_cols, CHUNK: tl.constexpr):
    # pass 1 keeps a scalar running max and sum: one exp an element, two block reductions a chunk
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, CHUNK)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    m = float("-inf")
    s = 0.0
    start = 0
    while start < n_cols:
        c = start + cols
        x = tl.load(x_row + c, mask=c < n_cols, other=float("-inf"),
                    eviction_policy="evict_last").to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
        start += CHUNK
    start = 0
    while start < n_cols:
        c = start + cols
        mask = c < n_cols
        x = tl.load(x_row + c, mask=mask, other=float("-inf"),
                    eviction_policy="evict_first").to(tl.float32)
        tl.store(y_row + c, (tl.exp(x - m) / s).to(Y.dtype.element_ty), mask=mask)
        start += CHUNK


def _case(op, x, w, b, chunk, warps):
    """(callable, reference output) of one launch."""
    lim = row_plan.device_limit(x.device)
    n_cols = x.shape[-1]
    if op == "softmax_scalar":
        y = torch.empty_like(x)

        def run():
            _softmax_scalar_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), n_cols,
                                                  CHUNK=chunk, num_warps=warps)
            return y
        return run, row_refs.softmax_ref(x)
    plan = row_plan.RowPlan(op, x.shape[0], n_cols, row_plan.next_pow2(n_cols), warps, lim, chunk=chunk)
    eps = 1e-5
    refs = {"softmax": lambda: row_refs.softmax_ref(x), "log_softmax": lambda: row_refs.log_softmax_ref(x),
            "layer_norm": lambda: row_refs.layer_norm_ref(x, w, b, eps),
            "rms_norm": lambda: row_refs.rms_norm_ref(x, w, eps)}
    wb = {"layer_norm": (w, b), "rms_norm": (w, None)}.get(op, (None, None))
    return (lambda: row_triton.launch_forward(plan, x, wb[0], wb[1], eps)[0]), refs[op]()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json-out", required=True)
    p.add_argument("--cols", type=int, default=65536)
    p.add_argument("--ops", default="softmax,softmax_scalar,log_softmax,layer_norm,rms_norm")
    p.add_argument("--rep-ms", type=float, default=40.0)
    p.add_argument("--chunks", default=",".join(map(str, CHUNKS)))
    p.add_argument("--warps", default=",".join(map(str, WARPS)))
    p.add_argument("--repeat", type=int, default=1, help="rounds over all cases (noise between rounds)")
    p.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
    args = p.parse_args()
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    copy = peaks.measure_copy(1 << 30, rep_ms=200)["copy_gbps"]
    rows = (1 << 27) // args.cols
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, args.cols, device="cuda", generator=g).to(dtype)
    w = (1 + 0.1 * torch.randn(args.cols, device="cuda", generator=g)).to(dtype)
    b = (0.1 * torch.randn(args.cols, device="cuda", generator=g)).to(dtype)
    out = []
    print(f"copy {copy:.1f} GB/s; {rows} x {args.cols} {args.dtype}")
    print("| op | CHUNK | warps | us | % of copy | max abs err |")
    print("|---|---|---|---|---|---|")
    cases = [(op, int(c), int(w)) for op in args.ops.split(",") for c in args.chunks.split(",")
             for w in args.warps.split(",") if int(w) * 32 <= int(c)]
    for round_ in range(args.repeat):
        for op, chunk, warps in cases:
            rec = {"op": op, "chunk": chunk, "num_warps": warps, "round": round_}
            try:
                fn, ref = _case(op, x, w, b, chunk, warps)
                err = (fn().float() - ref.float()).abs().max().item()
                t = time_fn(fn, warmup_ms=10, rep_ms=args.rep_ms).median_ms
                moved = 2 * x.numel() * 2 + (w.numel() * 2 if "norm" in op else 0)
                rec.update(us=t * 1e3, pct_of_copy=100 * moved / (t * 1e-3) / 1e9 / copy,
                           max_abs_err=err)
                print(f"| {op} | {chunk} | {warps} | {t * 1e3:.1f} | {rec['pct_of_copy']:.1f} % "
                      f"| {err:.2e} |", flush=True)
            except Exception as e:  # a launch that fails is a row of the table, not the end
                rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
                print(f"| {op} | {chunk} | {warps} | failed: {rec['error']} |", flush=True)
            out.append(rec)
    Path(args.json_out).write_text(json.dumps({"schema": "chunk_probe/1", "copy_gbps": copy,
                                               "rows": rows, "cols": args.cols, "dtype": args.dtype,
                                               "device": torch.cuda.get_device_name(),
                                               "torch": torch.__version__,
                                               "triton": triton.__version__, "runs": out},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
