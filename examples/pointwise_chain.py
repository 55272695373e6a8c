"""A memory-bound pointwise chain (bias, GELU, scale, residual add) that Inductor fuses into one kernel.

The expected investigation outcome: one hot `triton_poi_` kernel; judge it against copy bandwidth.
"""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(x, bias, residual):
    y = torch.nn.functional.gelu(x + bias, approximate="tanh")
    return y * 0.5 + residual


def main():
    args = parse_args(__doc__, lambda p: p.add_argument("--rows", type=int, default=8192))
    torch.manual_seed(0)
    x = torch.randn(args.rows, 4096, device=args.device, dtype=torch.float16)
    bias = torch.randn(4096, device=args.device, dtype=torch.float16)
    residual = torch.randn_like(x)
    g = maybe_compile(f, args)
    run_steps(lambda: g(x, bias, residual), args, "pointwise_chain")


if __name__ == "__main__":
    main()
