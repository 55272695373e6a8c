"""Does the host cost of an eager bundled-kernel launch change once Inductor has compiled the op?

    python tests/gpu/drivers/eager_launch_cost.py --out-dir OUT [--op rms_norm] [--calls 2000]

``row_triton.launch_forward`` per call on 8 rows (the GPU never holds the host back) read 31 us in one
process (call12_custom_op_host_cost) and 66 us in another, after Inductor had compiled the
triton op in it (call13). This times it in one process at three stages, with a cProfile of each:

- ``fresh``: nothing compiled yet;
- ``after_inductor_baseline``: after torch.compile of the plain torch op (no bundled kernel);
- ``after_triton_op_compiled``: after ``row_replace.install`` and torch.compile of the op, so that
  Inductor has compiled the bundled kernel from its traced launch.

Not a pytest test: it needs a GPU. Writes OUT/eager_launch_cost.{json,md}.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from replace_host_cost import enqueue_ms, op_call  # noqa: E402
from tko.remedies import row_plan, row_replace, row_triton, rowkernels as rk  # noqa: E402
from tko.remedies.rowkernel_sweep import LN_EPS, RMS_EPS, make_inputs  # noqa: E402


def host_us(fn, calls: int) -> float:
    """Host us per call, one sync after all calls (replace_host_cost.enqueue_ms)."""
    for _ in range(50):
        fn()
    return enqueue_ms(fn, calls)[0] * 1e3


def profile_top(fn, calls: int, top: int = 18) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def stage(name: str, launch, calls: int) -> dict:
    times = [host_us(launch, calls) for _ in range(3)]
    return {"stage": name, "host_us": [round(t, 2) for t in times], "profile": profile_top(launch, calls // 4)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--op", default="rms_norm", choices=("rms_norm", "layer_norm", "softmax"))
    p.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    p.add_argument("--cols", type=int, default=65536)
    p.add_argument("--calls", type=int, default=2000)
    args = p.parse_args()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    small = make_inputs(args.op, args.dtype, 8, args.cols, "cuda")
    big = make_inputs(args.op, args.dtype, 2048, args.cols, "cuda")
    eps = RMS_EPS if args.op == "rms_norm" else LN_EPS
    plan = row_plan.plan_row(args.op, *small)
    wb = tuple(small[1:]) + (None,) * (3 - len(small))

    def launch():
        return row_triton.launch_forward(plan, small[0], wb[0], wb[1], eps)

    stages = [stage("fresh", launch, args.calls)]
    base = torch.compile(op_call(args.op, args.cols))
    base(*big)
    stages.append(stage("after_inductor_baseline", launch, args.calls))
    row_replace.install([args.op])
    torch._dynamo.reset()
    replaced = torch.compile(op_call(args.op, args.cols))
    replaced(*big)
    stages.append(stage("after_triton_op_compiled", launch, args.calls))
    kernel = row_triton.jitted_kernels()[plan.op + ("_chunked" if plan.form == "chunked" else "")]
    result = {"schema": "eager_launch_cost/1", "op": args.op, "dtype": args.dtype, "cols": args.cols,
              "plan": {"form": plan.form, "chunk": plan.chunk, "num_warps": plan.num_warps},
              "use_triton_op": row_triton.USE_TRITON_OP, "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "compiled_variants": {str(dev): len(c[0]) for dev, c in
                                                                getattr(kernel, "device_caches", {}).items()},
              "calls": rk.call_counts(), "stages": stages}
    (out_dir / "eager_launch_cost.json").write_text(json.dumps(result, indent=1))
    lines = [f"| stage | host us per _launch (3 rounds) |", "|---|---|"]
    lines += [f"| {s['stage']} | {' / '.join(f'{t:.1f}' for t in s['host_us'])} |" for s in stages]
    for s in stages:
        lines += ["", f"### {s['stage']}", "```", s["profile"].strip(), "```"]
    (out_dir / "eager_launch_cost.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:2 + len(stages)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
