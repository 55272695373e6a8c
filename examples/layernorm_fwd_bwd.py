"""A LayerNorm forward and backward (8192 x 1024 fp32): the compiled region's reductions against
eager's fused ATen kernels."""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(x, w, b, grad_out):
    y = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    gx, gw, gb = torch.autograd.grad(y, (x, w, b), grad_out)
    return y, gx, gw, gb


def main():
    args = parse_args(__doc__, lambda p: (p.add_argument("--rows", type=int, default=8192),
                                          p.add_argument("--cols", type=int, default=1024)))
    torch.manual_seed(0)
    x = torch.randn(args.rows, args.cols, device=args.device, requires_grad=True)
    w = torch.randn(args.cols, device=args.device, requires_grad=True)
    b = torch.randn(args.cols, device=args.device, requires_grad=True)
    grad_out = torch.randn(args.rows, args.cols, device=args.device)
    g = maybe_compile(f, args)
    run_steps(lambda: g(x, w, b, grad_out), args, "layernorm_fwd_bwd")


if __name__ == "__main__":
    main()
