"""RMS normalization with a weight (8192 x 4096 fp16), as in LLaMA-style blocks."""

import torch

from _repro import maybe_compile, parse_args, run_steps


def rms_norm(x, w, eps: float = 1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def main():
    args = parse_args(__doc__, lambda p: p.add_argument("--rows", type=int, default=8192))
    torch.manual_seed(0)
    x = torch.randn(args.rows, 4096, device=args.device, dtype=torch.float16)
    w = torch.randn(4096, device=args.device, dtype=torch.float16)
    g = maybe_compile(rms_norm, args)
    run_steps(lambda: g(x, w), args, "rms_norm")


if __name__ == "__main__":
    main()
