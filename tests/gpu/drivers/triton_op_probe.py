"""Does Inductor's launch of a bundled row kernel (the ops as torch.library.triton_op) run as fast
as the kernel launched directly?

    TRITON_CACHE_DIR=D1 TORCHINDUCTOR_CACHE_DIR=D2 \\
      python tests/gpu/drivers/triton_op_probe.py --out-dir OUT [--cols 65536,4096] [--dtype fp16]

Per op and row length (rows x cols = 2^27): the kernel launched by the op's own Python
(``row_triton.launch_forward``, the eager path) and the op under torch.compile (AOTAutograd traces into the
triton op, Inductor compiles and launches the kernel from its generated code), do_bench median of
each, outputs checked against the fp32 reference. Then every cubin of a bundled kernel in the
Triton cache (the direct launch) and in Inductor's cache: registers, and its global loads and
stores by width (the SASS), so that a difference in the compiled form shows. Inductor's generated
code for each op is kept. Not a pytest test: it needs a GPU. Writes OUT/triton_op_probe.{json,md}
and OUT/inductor_code.tar.gz.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tarfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

import torch  # noqa: E402
import triton  # noqa: E402

from pass2_probe import kernel_resources  # noqa: E402  (this folder)
from tko.measure import peaks  # noqa: E402
from tko.remedies import row_plan, row_triton, rowkernel_sweep as sweep, rowkernels as rk  # noqa: E402
from tko.measure.bench import time_fn  # noqa: E402

OPS = ("rms_norm", "layer_norm", "softmax", "log_softmax")
EPS = {"layer_norm": sweep.LN_EPS, "rms_norm": sweep.RMS_EPS}


def op_call(op: str):
    tko = torch.ops.tko
    return {"softmax": lambda x: tko.row_softmax(x), "log_softmax": lambda x: tko.row_log_softmax(x),
            "layer_norm": lambda x, w, b: tko.layer_norm(x, w, b, sweep.LN_EPS),
            "rms_norm": lambda x, w: tko.rms_norm(x, w, sweep.RMS_EPS)}[op]


def memory_ops(sass: str) -> dict:
    """Global loads / stores of a SASS listing by opcode with its width suffix."""
    return dict(Counter(re.findall(r"\b((?:LDG|STG)(?:\.[A-Z0-9]+)*)", sass)))


def cubins() -> list[dict]:
    """The bundled kernels' cubins in both caches (pass2_probe.kernel_resources), each with its
    global memory ops by width."""
    rows, sass_of = kernel_resources()
    return [dict(r, memory_ops=memory_ops(sass_of[r["cubin"]])) if "kernel" in r else r
            for r in rows if "_kernel" in r.get("kernel", "_kernel")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--cols", default="65536,4096")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
    args = p.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    copy = peaks.measure_copy(1 << 30, rep_ms=200)["copy_gbps"]
    runs, code_of = [], {}
    lines = [f"copy {copy:.1f} GB/s; {args.dtype}; {torch.cuda.get_device_name()}; torch {torch.__version__}, "
             f"Triton {triton.__version__}; triton ops: {row_triton.USE_TRITON_OP}",
             "| op | cols | plan | direct us | compiled us | compiled / direct | correct |",
             "|---|---|---|---|---|---|---|"]
    for op in args.ops.split(","):
        for cols in map(int, args.cols.split(",")):
            a = sweep.make_inputs(op, args.dtype, (1 << 27) // cols, cols, "cuda")
            plan = row_plan.plan_row(op, *a)
            eps = EPS.get(op, 0.0)
            wb = tuple(a[1:]) + (None,) * (3 - len(a))
            want = rk.REFERENCES[op](*a, *((eps,) if op in EPS else ()))
            direct = lambda: row_triton.launch_forward(plan, a[0], wb[0], wb[1], eps)[0]  # noqa: E731
            torch._dynamo.reset()
            from torch._inductor.utils import run_and_get_code

            fn = torch.compile(op_call(op), fullgraph=True)
            got, code = run_and_get_code(fn, *a)
            code_of[f"{op}_{cols}.py"] = "\n".join(code)
            ok = all(sweep.check(f(), want, args.dtype)[0] for f in (direct, lambda: fn(*a)))
            t_direct = time_fn(direct, warmup_ms=10, rep_ms=40).median_ms
            t_comp = time_fn(lambda: fn(*a), warmup_ms=10, rep_ms=40).median_ms
            rec = {"op": op, "cols": cols, "form": plan.form, "chunk": plan.chunk, "n_chunks": plan.n_chunks,
                   "num_warps": plan.num_warps, "direct_us": round(t_direct * 1e3, 2),
                   "compiled_us": round(t_comp * 1e3, 2), "correct": ok}
            runs.append(rec)
            lines.append(f"| {op} | {cols} | {plan.form} {plan.chunk or plan.block}/{plan.num_warps} | "
                         f"{rec['direct_us']} | {rec['compiled_us']} | {t_comp / t_direct:.3f} | {ok} |")
            print(lines[-1], flush=True)
    res = cubins()
    lines += ["", "| cache | kernel | registers | stack | global memory ops |", "|---|---|---|---|---|"]
    lines += [f"| {r['cache']} | {r.get('kernel', r.get('cubin'))} | {r.get('reg')} | {r.get('stack')} | "
              f"{r.get('memory_ops', r.get('error'))} |" for r in res]
    (out / "triton_op_probe.md").write_text("\n".join(lines) + "\n")
    (out / "triton_op_probe.json").write_text(json.dumps(
        {"schema": "triton_op_probe/1", "copy_gbps": copy, "dtype": args.dtype, "torch": torch.__version__,
         "triton": triton.__version__, "runs": runs, "cubins": res}, indent=1))
    with tarfile.open(out / "inductor_code.tar.gz", "w:gz") as tar:
        for name, text in code_of.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
