"""Shared scaffolding of the example repros: flags, device choice and a steady-state timer."""

from __future__ import annotations

import argparse
import os
import time


def parse_args(description: str, extra=None):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=20, help="timed steps after warm-up")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps (compile happens here)")
    p.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    p.add_argument("--eager", action="store_true", help="run without torch.compile")
    if extra:
        extra(p)
    args = p.parse_args()
    import torch

    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    return args


def maybe_compile(fn, args, **kwargs):
    import torch

    return fn if args.eager else torch.compile(fn, **kwargs)


def run_steps(step, args, label: str) -> float:
    """Warm up, then time ``args.steps`` calls; prints and returns ms per step."""
    import torch

    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    for _ in range(args.warmup):
        out = step()
    sync()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        out = step()
    sync()
    ms = (time.perf_counter() - t0) * 1e3 / max(1, args.steps)
    print(f"{label}: {ms:.4f} ms/step over {args.steps} steps ({'eager' if args.eager else 'compiled'}, "
          f"{args.device})")
    save_output(out)
    return ms


def save_output(out) -> None:
    """Save the last step's output where an A/B comparison asks for it (TKO_AB_OUTPUT)."""
    path = os.environ.get("TKO_AB_OUTPUT")
    if path and out is not None:
        import torch

        torch.save(_to_cpu(out), path)


def _to_cpu(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    return obj
