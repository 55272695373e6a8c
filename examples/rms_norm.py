"""RMS normalization with a weight (8192 x 4096 fp16 by default), as in LLaMA-style blocks."""

import torch

from _repro import maybe_compile, parse_args, run_steps


def rms_norm(x, w, eps: float = 1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def main():
    def extra(p):
        p.add_argument("--rows", type=int, default=8192)
        p.add_argument("--cols", type=int, default=4096)
        p.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
        p.add_argument("--functional", action="store_true",
                       help="torch.nn.functional.rms_norm instead of the hand-written formula")
        p.add_argument("--train", action="store_true", help="forward + backward (gradients of x and w)")

    args = parse_args(__doc__, extra)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    torch.manual_seed(0)
    x = torch.randn(args.rows, args.cols, device=args.device, dtype=dtype, requires_grad=args.train)
    w = torch.randn(args.cols, device=args.device, dtype=dtype, requires_grad=args.train)
    fn = (lambda a, b: torch.nn.functional.rms_norm(a, (args.cols,), b, 1e-6)) if args.functional else rms_norm
    g = maybe_compile(fn, args)

    def train_step():
        x.grad = w.grad = None
        y = g(x, w)
        y.backward(torch.ones_like(y))
        return y.detach(), x.grad, w.grad

    run_steps(train_step if args.train else (lambda: g(x, w)), args, "rms_norm")


if __name__ == "__main__":
    main()
