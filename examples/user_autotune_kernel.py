"""A hand-written `@triton.autotune` kernel (fused scale + bias + ReLU) run outside torch.compile."""

import torch
import triton
import triton.language as tl

from _repro import parse_args, run_steps


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=2),
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 4096}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def scale_bias_relu_kernel(x_ptr, bias_ptr, out_ptr, n_elements, n_cols, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + offs % n_cols, mask=mask)
    y = tl.maximum(x * scale + b, 0.0)
    tl.store(out_ptr + offs, y, mask=mask)


def scale_bias_relu(x, bias, scale=0.5):
    out = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    scale_bias_relu_kernel[grid](x, bias, out, n, x.shape[-1], scale)
    return out


def main():
    args = parse_args(__doc__)
    if not args.device.startswith("cuda"):
        raise SystemExit("user_autotune_kernel.py needs a GPU (autotuning times configs on the device)")
    torch.manual_seed(0)
    x = torch.randn(8192, 4096, device=args.device)
    bias = torch.randn(4096, device=args.device)
    ref = torch.relu(x * 0.5 + bias)
    torch.testing.assert_close(scale_bias_relu(x, bias), ref)
    run_steps(lambda: scale_bias_relu(x, bias), args, "user_autotune_kernel")


if __name__ == "__main__":
    main()
