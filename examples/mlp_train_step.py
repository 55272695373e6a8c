"""A small MLP training step (forward + backward + SGD) under torch.compile: pointwise, reduction
and GEMM-adjacent kernels in both directions."""

import torch

from _repro import maybe_compile, parse_args, run_steps


class MLP(torch.nn.Module):
    def __init__(self, d=1024, hidden=4096):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, hidden)
        self.down = torch.nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def main():
    args = parse_args(__doc__)
    torch.manual_seed(0)
    model = MLP().to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(2048, 1024, device=args.device)
    fwd = maybe_compile(model, args)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = fwd(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    run_steps(step, args, "mlp_train_step")


if __name__ == "__main__":
    main()
