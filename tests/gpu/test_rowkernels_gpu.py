"""On a GPU: the bundled row ops under torch.compile are triton ops that Inductor launches itself.

AOTAutograd traces into each ``tko::`` op, so Inductor's generated code launches the bundled
kernel (one-pass or chunked) and calls no ``torch.ops.tko`` op at run time: the op's Python runs
at the trace only, counted under ``(traced into a compiled graph)``, and no Inductor kernel
(a copy of an input) runs beside it. Outputs match the fp32 references.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

# (rows, cols): one-pass on every limit, and chunked on every limit (whole chunks: unrolled)
SHAPES = ((64, 4096), (16, 65536))


def _args(op, rows, cols, dtype):
    import torch

    from tko.remedies.rowkernel_sweep import make_inputs

    return make_inputs(op, {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype], rows, cols, "cuda")


def _call(op):
    import torch

    tko = torch.ops.tko
    return {"softmax": lambda x: tko.row_softmax(x), "log_softmax": lambda x: tko.row_log_softmax(x),
            "layer_norm": lambda x, w, b: tko.layer_norm(x, w, b, 1e-5),
            "rms_norm": lambda x, w: tko.rms_norm(x, w, 1e-6)}[op]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("op", ("softmax", "log_softmax", "layer_norm", "rms_norm"))
def test_compiled_ops_launch_the_kernel_from_inductors_code(op, shape):
    import torch
    from torch._inductor.utils import run_and_get_code

    from tko.remedies import row_plan, row_triton, rowkernels as rk

    if not row_triton.USE_TRITON_OP:
        pytest.skip(f"torch {torch.__version__} has no torch.library.triton_op")
    args = _args(op, *shape, torch.float16)
    plan = row_plan.plan_row(op, *args)
    assert plan.use_kernel, plan.reason
    eps = {"layer_norm": 1e-5, "rms_norm": 1e-6}.get(op)
    want = rk.REFERENCES[op](*args, *((eps,) if eps else ()))
    torch._dynamo.reset()
    before = rk.call_counts()
    fn = torch.compile(_call(op), fullgraph=True)
    got, code = run_and_get_code(fn, *args)
    for _ in range(3):
        got = fn(*args)
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
    source = "\n".join(code)
    kernel = f"_{'softmax' if 'softmax' in op else op}{'_chunked' if plan.form == 'chunked' else ''}_kernel"
    kernel = "_rms_norm_guarded_kernel" if plan.row_guard else kernel
    assert kernel in source, source[-3000:]
    assert "torch.ops.tko" not in source, source[-3000:]
    # no Inductor kernel beside it: a copy of the input would mean its mutation analysis of the
    # kernel failed and took every argument as written (call15_triton_op_input_copied: 1.9-2.2x slower)
    assert "triton_poi_" not in source and "triton_red_" not in source and "triton_per_" not in source, \
        source[-3000:]
    added = {k: v - before.get(k, 0) for k, v in rk.call_counts().items() if v != before.get(k, 0)}
    assert added and all("traced into a compiled graph" in k for k in added), added
    assert all(k.endswith(": kernel") for k in added), added
