"""Many tiny kernels: per-parameter optimizer-style updates on small tensors, launch-bound.

Each kernel moves a few KB; the time is launch overhead, not bandwidth. Tuning block sizes cannot
help; fusing the launches (foreach ops, one flat buffer) or CUDA graphs can.
"""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(params, grads, lr: float = 1e-3):
    return [p - lr * torch.sign(g) * g.abs().sqrt() for p, g in zip(params, grads)]


def main():
    args = parse_args(__doc__, lambda p: p.add_argument("--tensors", type=int, default=64))
    torch.manual_seed(0)
    shapes = [(17 + 3 * i, 31) for i in range(args.tensors)]
    params = [torch.randn(s, device=args.device) for s in shapes]
    grads = [torch.randn(s, device=args.device) for s in shapes]
    g = maybe_compile(f, args)
    run_steps(lambda: g(params, grads), args, "tiny_launches")


if __name__ == "__main__":
    main()
