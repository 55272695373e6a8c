"""Large-vocabulary cross entropy, forward and backward: the LM head's projection of every token
onto the vocabulary, then F.cross_entropy over the full N x V logits (bf16 on a GPU), which Inductor
keeps for the backward; the chunked linear + cross-entropy rewrite never holds them at once."""

import torch
import torch.nn.functional as F

from _repro import maybe_compile, parse_args, run_steps


def f(h, weight, target):
    loss = F.cross_entropy(h @ weight.T, target)
    grad_h, grad_w = torch.autograd.grad(loss, (h, weight))
    return loss, grad_h, grad_w


def main():
    args = parse_args(__doc__, lambda p: (p.add_argument("--vocab", type=int, default=128256,
                                                         help="vocabulary (32000 for a Llama-2-size one)"),
                                          p.add_argument("--tokens", type=int, default=8192),
                                          p.add_argument("--hidden", type=int, default=2048)))
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    h = (torch.randn(args.tokens, args.hidden, device=args.device) / args.hidden ** 0.5).to(dtype).requires_grad_()
    weight = torch.randn(args.vocab, args.hidden, device=args.device, dtype=dtype, requires_grad=True)
    target = torch.randint(0, args.vocab, (args.tokens,), device=args.device)
    g = maybe_compile(f, args)
    run_steps(lambda: g(h, weight, target), args, "large_vocab_ce")


if __name__ == "__main__":
    main()
