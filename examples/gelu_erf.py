"""An exact-erf GELU on a bias-added activation: one pointwise kernel whose cost is partly the erf.

The expected investigation outcome: below copy bandwidth, and the gap is arithmetic (erf), which
no block size closes; the tanh approximation (`approximate="tanh"`) is the model-code change.
"""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(x, bias):
    return torch.nn.functional.gelu(x + bias)


def main():
    args = parse_args(__doc__, lambda p: (p.add_argument("--rows", type=int, default=8192),
                                          p.add_argument("--dtype", default="bfloat16",
                                                         choices=["bfloat16", "float16", "float32"])))
    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)  # in fp32 the erf hides under the memory time (H200)
    x = torch.randn(args.rows, 4096, device=args.device, dtype=dtype)
    bias = torch.randn(4096, device=args.device, dtype=dtype)
    g = maybe_compile(f, args)
    run_steps(lambda: g(x, bias), args, "gelu_erf")


if __name__ == "__main__":
    main()
