"""A LLaMA-style SwiGLU MLP block, x -> (silu(x Wg^T) * (x Wu^T)) Wd^T, gate and up as two separate
nn.Linear GEMMs (8192 tokens, hidden 2048, intermediate 5632, bf16 by default); --train adds the
backward. The gated_activation entry of references/rewrite_catalog.yaml: try_remedies.py --arms
gate_up_fused runs it with one GEMM over the concatenated gate and up weights."""

import torch
import torch.nn.functional as F

from _repro import maybe_compile, parse_args, run_steps


class GatedMLP(torch.nn.Module):
    def __init__(self, hidden: int, inter: int, act: str = "silu"):
        super().__init__()
        self.gate_proj = torch.nn.Linear(hidden, inter, bias=False)
        self.up_proj = torch.nn.Linear(hidden, inter, bias=False)
        self.down_proj = torch.nn.Linear(inter, hidden, bias=False)
        self.act = F.silu if act == "silu" else (lambda t: F.gelu(t, approximate="tanh"))

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


def main():
    def extra(p):
        p.add_argument("--tokens", type=int, default=8192)
        p.add_argument("--hidden", type=int, default=2048)
        p.add_argument("--inter", type=int, default=5632)
        p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
        p.add_argument("--act", choices=("silu", "gelu"), default="silu")
        p.add_argument("--train", action="store_true", help="forward + backward (gradients of x and the weights)")

    args = parse_args(__doc__, extra)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    torch.manual_seed(0)
    model = GatedMLP(args.hidden, args.inter, args.act).to(args.device, dtype)
    x = torch.randn(args.tokens, args.hidden, device=args.device, dtype=dtype, requires_grad=args.train)
    fwd = maybe_compile(model, args)

    def step():
        if not args.train:
            with torch.no_grad():
                return fwd(x)
        for p in (x, *model.parameters()):
            p.grad = None
        out = fwd(x)
        out.float().square().mean().backward()
        return out.detach(), x.grad, model.gate_proj.weight.grad, model.up_proj.weight.grad

    run_steps(step, args, "gated_mlp")


if __name__ == "__main__":
    main()
