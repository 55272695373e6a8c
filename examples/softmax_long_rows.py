"""A softmax over long rows (4096 x 32768 fp16), as in attention scores or an LM head.

Inductor keeps rows on chip only up to a length limit; past it the reduction loops over the row
in several passes, reading the input more than once.
"""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(x):
    return torch.softmax(x, dim=-1)


def main():
    args = parse_args(__doc__, lambda p: (p.add_argument("--rows", type=int, default=4096),
                                          p.add_argument("--cols", type=int, default=32768)))
    torch.manual_seed(0)
    x = torch.randn(args.rows, args.cols, device=args.device, dtype=torch.float16)
    g = maybe_compile(f, args)
    run_steps(lambda: g(x), args, "softmax_long_rows")


if __name__ == "__main__":
    main()
