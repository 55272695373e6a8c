"""Where the step time of a program whose row op is replaced goes: the host or the GPU.

    python tests/gpu/drivers/replace_host_cost.py --out-dir OUT [--op rms_norm] [--dtype fp16]
        [--rows 2048] [--cols 65536] [--steps 400]

The RMSNorm replace trial at 2048 x 65536 (examples/recorded_h200/trials/rms_norm_64k_replace)
ran the bundled kernel every step and lost end to end (0.78-0.84x) although the kernel alone is
faster than Inductor's: a step that costs the host more than the kernel costs the GPU runs at the
host's pace. Each arm runs in its own process (the replacement rebinds torch functions):

- ``baseline``: torch.compile of the op (``F.rms_norm`` / ``F.softmax``), Inductor default;
- ``replace``: the same after ``tko.remedies.row_replace.install([op])``, as the trial's replace arm.

Per arm: ``step_ms`` (steps enqueued back to back, one sync at the end, as examples/_repro.py
times them), ``host_ms`` (the time to enqueue them, before that sync), the GPU kernel time per
step from torch.profiler, and the profiler's top host ops. The replace arm also times, per call,
each layer of the path on a small input (8 rows: the GPU never holds the host back), so that the
host cost can be put on a layer. Not a pytest test: it needs a GPU. Writes OUT/host_cost.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

ARMS = ("baseline", "replace")


def op_call(op: str, cols: int):
    import torch.nn.functional as F

    if op == "rms_norm":
        return lambda x, w: F.rms_norm(x, (cols,), w, 1e-6)
    if op == "layer_norm":
        return lambda x, w, b: F.layer_norm(x, (cols,), w, b, 1e-5)
    return lambda x: getattr(F, op)(x, dim=-1)


def enqueue_ms(fn, steps: int) -> tuple[float, float]:
    """(ms per step enqueued, ms per step to the end of the last): one sync after all steps."""
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) * 1e3 / steps, (t2 - t0) * 1e3 / steps


def profile(fn, steps: int) -> dict:
    """GPU kernel time per step and the top host ops, from torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity

    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    events = prof.key_averages()
    kernels = [(e.key, e.device_time_total / steps, e.count / steps) for e in events
               if e.device_time_total > 0 and e.device_type == torch.autograd.DeviceType.CUDA]
    host = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:12]
    return {"gpu_us_per_step": round(sum(k[1] for k in kernels), 2),
            "kernels": [{"name": k[0][:90], "us_per_step": round(k[1], 2), "per_step": k[2]}
                        for k in kernels],
            "host_top": [{"name": e.key[:90], "self_cpu_us_per_step": round(e.self_cpu_time_total / steps, 2),
                          "calls_per_step": e.count / steps} for e in host]}


def layer_costs(op: str, dtype, cols: int, steps: int) -> list[dict]:
    """Host us per call of each layer of the replaced path, on 8 rows (the GPU idle)."""
    import torch
    import torch.nn.functional as F
    from tko.remedies import row_plan, row_triton, rowkernels as rk
    from tko.remedies.rowkernel_sweep import make_inputs

    args = make_inputs(op, {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype], 8, cols, "cuda")
    x = args[0]
    eps = 1e-6 if op == "rms_norm" else 1e-5
    plan = row_plan.plan_row(op, *args)
    wb = tuple(args[1:]) + (None,) * (3 - len(args))
    layers = {"plan_row": lambda: row_plan.plan_row(op, *args),
              "device_limit": lambda: row_plan.device_limit(x.device),
              "_launch (kernel launch, plan given)": lambda: row_triton.launch_forward(plan, x, wb[0], wb[1], eps)}
    if op == "rms_norm":
        layers.update({"rk.rms_norm (no grad)": lambda: rk.rms_norm(x, args[1], eps),
                       "torch.ops.tko.rms_norm_fwd": lambda: torch.ops.tko.rms_norm_fwd(x, args[1], eps, False),
                       "torch.ops.tko.rms_norm": lambda: torch.ops.tko.rms_norm(x, args[1], eps),
                       "F.rms_norm replaced (eager)": lambda: F.rms_norm(x, (cols,), args[1], eps)})
    else:
        row_op = getattr(torch.ops.tko, f"row_{op}")
        layers.update({f"torch.ops.tko.row_{op}": lambda: row_op(x),
                       f"F.{op} replaced (eager)": lambda: getattr(F, op)(x, dim=-1)})
    g = torch.compile(op_call(op, cols))
    layers["compiled step (replaced)"] = lambda: g(*args)
    out = []
    for layer, fn in layers.items():
        for _ in range(20):
            fn()
        host, total = enqueue_ms(fn, steps)
        out.append({"layer": layer, "host_us": round(host * 1e3, 2), "with_gpu_us": round(total * 1e3, 2)})
    return out


def run_arm(arm: str, op: str, dtype_name: str, rows: int, cols: int, steps: int) -> dict:
    import torch
    from tko.remedies import row_replace, rowkernels as rk
    from tko.remedies.rowkernel_sweep import make_inputs

    if arm == "replace":
        row_replace.install([op])
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    args = make_inputs(op, dtype_name, rows, cols, "cuda")
    g = torch.compile(op_call(op, cols))
    for _ in range(30):
        g(*args)
    rounds = [enqueue_ms(lambda: g(*args), steps) for _ in range(3)]
    rec = {"arm": arm, "op": op, "dtype": dtype_name, "rows": rows, "cols": cols, "steps": steps,
           "host_ms": [round(r[0], 4) for r in rounds], "step_ms": [round(r[1], 4) for r in rounds],
           "profile": profile(lambda: g(*args), 50), "calls": rk.call_counts()}
    if arm == "replace":
        rec["layers"] = layer_costs(op, dtype, cols, steps)
    return rec


def table(results: list[dict]) -> list[str]:
    lines = ["| arm | op | dtype | step ms (3 rounds) | host ms to enqueue | GPU kernels us/step |",
             "|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['arm']} | {r['op']} | {r['dtype']} | failed: {r['error'][:150]} | | |")
            continue
        lines.append(f"| {r['arm']} | {r['op']} | {r['dtype']} | {' / '.join(map(str, r['step_ms']))} | "
                     f"{' / '.join(map(str, r['host_ms']))} | {r['profile']['gpu_us_per_step']} |")
    for r in results:
        if r.get("layers"):
            lines += ["", f"{r['op']} {r['dtype']}, 8 rows: host us per call of each layer",
                      "| layer | host us | with GPU us |", "|---|---|---|"]
            lines += [f"| {x['layer']} | {x['host_us']} | {x['with_gpu_us']} |" for x in r["layers"]]
        if r.get("profile"):
            lines += ["", f"{r['arm']} {r['op']} {r['dtype']}: top host ops (self us per step)"]
            lines += [f"- {h['name']}: {h['self_cpu_us_per_step']} ({h['calls_per_step']} calls)"
                      for h in r["profile"]["host_top"][:8]]
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--ops", default="rms_norm,softmax")
    p.add_argument("--dtypes", default="fp16,bf16")
    p.add_argument("--rows", type=int, default=2048)
    p.add_argument("--cols", type=int, default=65536)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--arm", choices=ARMS, help="(internal) run one arm and print its JSON")
    args = p.parse_args()
    if args.arm:
        print("RESULT " + json.dumps(run_arm(args.arm, args.ops, args.dtypes, args.rows, args.cols,
                                             args.steps)))
        return 0
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for op in args.ops.split(","):
        for dtype in args.dtypes.split(","):
            for arm in ARMS:
                cmd = [sys.executable, __file__, "--out-dir", str(out), "--arm", arm, "--ops", op,
                       "--dtypes", dtype, "--rows", str(args.rows), "--cols", str(args.cols),
                       "--steps", str(args.steps)]
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
                tail = [x for x in (done.stderr or done.stdout).strip().splitlines()
                        if not x.startswith("TKO_REPLACE")][-12:] or ["no output"]
                results.append(json.loads(line[-1][7:]) if line else
                               {"arm": arm, "op": op, "dtype": dtype, "error": tail[-1],
                                "stderr_tail": tail})
                print(table(results[-1:])[2], flush=True)
    lines = table(results)
    (out / "host_cost.md").write_text("\n".join(lines) + "\n")
    (out / "host_cost.json").write_text(json.dumps({"schema": "replace_host_cost/1", "runs": results}, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
