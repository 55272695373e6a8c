"""Row reductions: softmax over long rows and a LayerNorm, the two common reduction kernels."""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(x, w, b):
    p = torch.softmax(x.float(), dim=-1)
    n = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    return p, n


def main():
    args = parse_args(__doc__, lambda p: p.add_argument("--cols", type=int, default=8192))
    torch.manual_seed(0)
    x = torch.randn(4096, args.cols, device=args.device, dtype=torch.float32)
    w = torch.randn(args.cols, device=args.device)
    b = torch.randn(args.cols, device=args.device)
    g = maybe_compile(f, args)
    run_steps(lambda: g(x, w, b), args, "row_reduction")


if __name__ == "__main__":
    main()
