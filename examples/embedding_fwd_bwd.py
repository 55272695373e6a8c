"""An embedding lookup, forward and backward: a gather of table rows, then a scatter-add of their
gradients into the table (atomics where tokens repeat)."""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(table, idx, grad_out):
    out = torch.nn.functional.embedding(idx, table)
    (g,) = torch.autograd.grad(out, table, grad_out)
    return out, g


def main():
    args = parse_args(__doc__, lambda p: (p.add_argument("--vocab", type=int, default=32000),
                                          p.add_argument("--tokens", type=int, default=16384)))
    torch.manual_seed(0)
    table = torch.randn(args.vocab, 1024, device=args.device, requires_grad=True)
    # a skewed token distribution, as in text: frequent tokens repeat
    idx = (torch.rand(args.tokens, device=args.device) ** 3 * args.vocab).long()
    grad_out = torch.randn(args.tokens, 1024, device=args.device)
    g = maybe_compile(f, args)
    run_steps(lambda: g(table, idx, grad_out), args, "embedding_fwd_bwd")


if __name__ == "__main__":
    main()
