"""Hand-written Triton kernels launched directly, no @triton.autotune, no torch.compile: a fused
scale-add launched with a deliberately poor fixed config (BLOCK=64, num_warps=1), and a row RMSNorm
whose block size comes from @triton.heuristics.

    python examples/handwritten/handwritten_kernels.py --steps 20
    TRITON_INTERPRET=1 python examples/handwritten/handwritten_kernels.py --device cpu --rows 64 --cols 256
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/_repro.py

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from _repro import parse_args, run_steps  # noqa: E402


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * alpha + y, mask=mask)


@triton.heuristics({"BLOCK_N": lambda args: triton.next_power_of_2(args["n_cols"])})
@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, out_ptr, stride, n_cols, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    var = tl.sum(x * x, axis=0) / n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * (1.0 / tl.sqrt(var + eps)) * w
    tl.store(out_ptr + row * stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def scale_add(x, y, alpha=0.5):
    out = torch.empty_like(x)
    n = x.numel()
    # the poor fixed config: 64 elements per program, one warp
    scale_add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, alpha, BLOCK=64, num_warps=1)
    return out


def rms_norm(x, w, eps=1e-6):
    out = torch.empty_like(x)
    rows, cols = x.shape
    rms_norm_kernel[(rows,)](x, w, out, x.stride(0), cols, eps)
    return out


def main():
    def extra(p):
        p.add_argument("--rows", type=int, default=8192)
        p.add_argument("--cols", type=int, default=4096)

    args = parse_args(__doc__, extra)
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("handwritten_kernels.py on the CPU needs TRITON_INTERPRET=1")
    torch.manual_seed(0)
    x = torch.randn(args.rows, args.cols, device=args.device)
    y = torch.randn(args.rows, args.cols, device=args.device)
    w = torch.randn(args.cols, device=args.device)
    torch.testing.assert_close(scale_add(x, y), x * 0.5 + y)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(rms_norm(x, w), ref, rtol=1e-4, atol=1e-4)

    def step():
        return rms_norm(scale_add(x, y), w)

    run_steps(step, args, "handwritten_kernels")


if __name__ == "__main__":
    main()
