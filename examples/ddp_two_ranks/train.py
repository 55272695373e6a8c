"""Two-rank data-parallel training step: a compiled MLP block under DistributedDataParallel.

Runs the same under any launcher:

    torchrun --standalone --nproc_per_node 2 train.py --steps 20     # ranks from the environment
    python train.py --steps 20                                        # spawns its two ranks itself

Backend: NCCL when each rank has a GPU of its own, else gloo (on the CPU, or on one GPU that both
ranks share: gloo moves the gradients through host memory). Each rank prints its own
``<float> ms/step`` line; rank 0's last line is the program's step time. With ``$TKO_AB_OUTPUT``
set, each rank saves its last loss to ``<path>`` (rank 0) or ``<path>.rank<R>`` (the others).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist


class Block(torch.nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, hidden)
        self.down = torch.nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20, help="timed steps after warm-up")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps (compile happens here)")
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64, help="rows per rank")
    p.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    p.add_argument("--backend", default=None, help="nccl or gloo (default: nccl with a GPU per rank)")
    p.add_argument("--world-size", type=int, default=2, help="ranks to spawn without a launcher")
    return p.parse_args(argv)


def pick(args, world: int) -> tuple[str, str]:
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    own_gpu = device == "cuda" and torch.cuda.device_count() >= world
    return device, args.backend or ("nccl" if own_gpu else "gloo")


def run(rank: int, world: int, args) -> None:
    device, backend = pick(args, world)
    dist.init_process_group(backend, rank=rank, world_size=world)
    if device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        device = f"cuda:{torch.cuda.current_device()}"
    torch.manual_seed(0)
    model = Block(args.dim, args.hidden).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    fwd = torch.compile(ddp)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(args.batch, args.dim, generator=gen).to(device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = fwd(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    for _ in range(args.warmup):
        step()
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    sync()
    ms = (time.perf_counter() - t0) * 1e3 / max(1, args.steps)
    print(f"rank {rank}/{world} ({backend}, {device}): {ms:.4f} ms/step over {args.steps} steps", flush=True)
    save(loss, rank)
    # Let gloo's worker threads finish the last collective before the group is torn down: the
    # Reducer's destructor holds the GIL while it joins them, and a worker still releasing a
    # collective's thread-local state (backward stashes a Python object there) needs the GIL: a
    # deadlock at exit, seen under the profiler (README, "Programs that run as several processes").
    dist.barrier()
    time.sleep(0.1)
    dist.destroy_process_group()


def save(loss, rank: int) -> None:
    path = os.environ.get("TKO_AB_OUTPUT")
    if path:
        torch.save(loss.cpu(), path if rank == 0 else f"{path}.rank{rank}")


def spawned(rank: int, world: int, args) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    run(rank, world, args)


def main() -> None:
    args = parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun, torch.distributed.run
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    torch.multiprocessing.spawn(spawned, args=(args.world_size, args), nprocs=args.world_size)


if __name__ == "__main__":
    main()
