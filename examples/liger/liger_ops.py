"""A small LLM-style training step on Liger-Kernel's Triton ops (RMSNorm, SwiGLU, cross-entropy), no
torch.compile: every hot kernel is a hand-written @triton.jit kernel that Liger launches as
kernel[grid](..., BLOCK_SIZE=..., num_warps=...).

Needs the liger-kernel package (pip install liger-kernel; it needs only torch and triton):

    python examples/liger/liger_ops.py --steps 20
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/_repro.py
# LIGER_KERNEL_IMPL left unset: Liger 0.8.5 then runs its Triton kernels; it names only its other
# backends (ascend, cute, cutedsl, cutile) and refuses "triton" (seen on the H200, 2026-12-04)

import torch  # noqa: E402

from _repro import parse_args, run_steps  # noqa: E402

try:
    from liger_kernel.transformers.functional import liger_cross_entropy, liger_rms_norm, liger_swiglu
except ImportError as exc:  # pragma: no cover - depends on the machine
    raise SystemExit(f"liger_ops.py needs liger-kernel (pip install liger-kernel): {exc}")


def main():
    def extra(p):
        p.add_argument("--tokens", type=int, default=4096)
        p.add_argument("--hidden", type=int, default=2048)
        p.add_argument("--ffn", type=int, default=5632)
        p.add_argument("--vocab", type=int, default=32000)

    args = parse_args(__doc__, extra)
    if not args.device.startswith("cuda"):
        raise SystemExit("liger_ops.py needs a GPU")
    torch.manual_seed(0)
    dev, dt = args.device, torch.bfloat16
    x = torch.randn(args.tokens, args.hidden, device=dev, dtype=dt, requires_grad=True)
    norm_w = torch.ones(args.hidden, device=dev, dtype=dt, requires_grad=True)
    w_gate = (torch.randn(args.hidden, args.ffn, device=dev, dtype=dt) * 0.02).requires_grad_()
    w_up = (torch.randn(args.hidden, args.ffn, device=dev, dtype=dt) * 0.02).requires_grad_()
    w_down = (torch.randn(args.ffn, args.hidden, device=dev, dtype=dt) * 0.02).requires_grad_()
    w_out = (torch.randn(args.hidden, args.vocab, device=dev, dtype=dt) * 0.02).requires_grad_()
    target = torch.randint(0, args.vocab, (args.tokens,), device=dev)

    def step():
        h = liger_rms_norm(x, norm_w, 1e-6, in_place=False)
        h = liger_swiglu(h @ w_gate, h @ w_up) @ w_down + x
        loss = liger_cross_entropy((h @ w_out).float(), target)
        loss.backward()
        return loss.detach()

    run_steps(step, args, "liger_ops")


if __name__ == "__main__":
    main()
