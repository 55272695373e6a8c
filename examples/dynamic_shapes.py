"""A pointwise + reduction graph called with changing sequence lengths, compiled with dynamic
shapes: one kernel serves every length, with symbolic sizes as scalar arguments."""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(x, w):
    h = torch.nn.functional.silu(x) * w
    return h / h.norm(dim=-1, keepdim=True).clamp_min(1e-6)


def main():
    args = parse_args(__doc__)
    torch.manual_seed(0)
    w = torch.randn(768, device=args.device)
    inputs = [torch.randn(4, seq, 768, device=args.device) for seq in (128, 257, 512, 1000)]
    g = maybe_compile(f, args, dynamic=True)
    state = {"i": 0}

    def step():
        out = g(inputs[state["i"] % len(inputs)], w)
        state["i"] += 1
        return out

    run_steps(step, args, "dynamic_shapes")


if __name__ == "__main__":
    main()
