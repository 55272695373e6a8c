"""A GEMM with a fused epilogue (bias, GELU, residual): the GEMM goes to the vendor library by
default; max-autotune may pick a Triton template with the epilogue fused."""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(x, w, bias, residual):
    return torch.nn.functional.gelu(x @ w + bias, approximate="tanh") + residual


def main():
    args = parse_args(__doc__, lambda p: p.add_argument("--m", type=int, default=4096))
    torch.manual_seed(0)
    x = torch.randn(args.m, 4096, device=args.device, dtype=torch.float16)
    w = torch.randn(4096, 4096, device=args.device, dtype=torch.float16) / 64
    bias = torch.randn(4096, device=args.device, dtype=torch.float16)
    residual = torch.randn(args.m, 4096, device=args.device, dtype=torch.float16)
    g = maybe_compile(f, args)
    run_steps(lambda: g(x, w, bias, residual), args, "gemm_epilogue")


if __name__ == "__main__":
    main()
