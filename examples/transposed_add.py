"""An add of a matrix and another's transpose: one input is read across its strides."""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(a, b):
    return a + b.t()


def main():
    args = parse_args(__doc__, lambda p: p.add_argument("--n", type=int, default=8192))
    torch.manual_seed(0)
    a = torch.randn(args.n, args.n, device=args.device, dtype=torch.float16)
    b = torch.randn(args.n, args.n, device=args.device, dtype=torch.float16)
    g = maybe_compile(f, args)
    run_steps(lambda: g(a, b), args, "transposed_add")


if __name__ == "__main__":
    main()
