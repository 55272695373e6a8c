"""Hand-written attention under torch.compile: an inference step (default) or a training step
(--train), bf16 on a GPU (fp32 on the CPU). The investigation should find the pattern
(references/rewrite_catalog.yaml attention_by_hand) and the sdpa trial arm measure the swap."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))       # examples/_repro.py
from _repro import maybe_compile, parse_args, run_steps  # noqa: E402
from model import HandAttention, causal_mask  # noqa: E402


def extra(p):
    p.add_argument("--train", action="store_true", help="forward + backward + SGD instead of inference")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)


def main(model_class=HandAttention, make_mask=lambda n, device, dtype: causal_mask(n, device),
         label="attention_by_hand"):
    args = parse_args(__doc__, extra)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    model = model_class().to(args.device, dtype)
    x = torch.randn(args.batch, args.seq, 1024, device=args.device, dtype=dtype)
    mask = make_mask(args.seq, args.device, dtype)
    fwd = maybe_compile(model, args)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)

    def step():
        if not args.train:
            with torch.no_grad():
                return fwd(x, mask)
        opt.zero_grad(set_to_none=True)
        out = fwd(x, mask)
        out.float().pow(2).mean().backward()
        opt.step()
        return out.detach()

    run_steps(step, args, label + ("_train" if args.train else ""))


if __name__ == "__main__":
    main()
