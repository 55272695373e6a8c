"""Triton row kernels: softmax, log-softmax, LayerNorm and RMSNorm, forward and backward.

Each program owns one row of the last dimension. In the one-pass form the whole row is one block
(``BLOCK = next_power_of_2(n_cols)``), read once with a masked tail, reduced in fp32 and written
once in the input dtype (fp16, bf16 or fp32). That is only right while the row fits on chip, so
:func:`plan_row` checks the row against :data:`ROW_LIMITS`. A longer row, up to
:data:`MAX_CHUNKED_ELEMENTS`, runs the chunked form (``RowPlan.form == "chunked"``): a loop over
``CHUNK``-element blocks in two passes, keeping running fp32 values (CHUNK, warps and the form of
the softmax stats per device and op: :data:`CHUNK_PLANS`). Softmax / log-softmax: pass 1 is the
online softmax (a running max, and a sum of exp rescaled whenever the max grows; per lane, or per
row with each chunk reduced first), pass 2 rereads the row and writes ``exp(x - max) / sum``
(``x - max - log(sum)``); LayerNorm: pass 1 sums ``d = x - x[0]`` and ``d * d`` (the shift keeps
the variance from cancelling when the mean is large), pass 2 normalizes and writes, with the
per-row mean / rstd for the backward; RMSNorm: pass 1 sums ``x * x``. Pass 2 rereads the row,
meant to find it in L2 still (pass 1 loads evict_last, pass 2 evict_first, as Inductor's looped
reductions do); where a plan unrolls and the row is a whole number of chunks, the kernel is
compiled for that count (:func:`unrolled_chunks`): no masks, and loops the compiler unrolls, as
Inductor's static-shape loops are. Why: on an NVIDIA H200 at 65536 columns (fp16 / bf16,
tests/fixtures/rowkernel_sweep_h200/README.md) the one-pass kernels are refused (a 64k fp32 row is
256 KiB, over the 227 KiB a block holds; offline compiles spill) and Inductor's looped softmax
reads the row from DRAM twice, at 48-50 % of copy (log-softmax 53-54 %, LayerNorm 57-62 %). There
the chunked form reached 59-62 % at CHUNK 4096 / 16 warps with no eviction hints, and with the
hints and :data:`CHUNK_PLANS`' launches 70-72 % (softmax), 79-81 % (log-softmax), 75-78 %
(LayerNorm), 85 % (RMSNorm): 1.26-1.48x over every Inductor mode on softmax, log-softmax and
LayerNorm (call11_unrolled_plans), 1.47x end to end on a softmax repro
(examples/recorded_h200/trials/softmax_64k_replace); storing the output streamed (``.cs``,
ChunkPlan.stream_out) added 0.4-4.2 points at 64k (call23_l2_rows). RMSNorm rows of up to four
whole chunks run ``_rms_norm_guarded_kernel``, addressed as Inductor's own looped RMSNorm is
(ChunkPlan.row_guard), its output stored streamed: 91 % of copy (fp16), 1.00-1.01x Inductor's
coordinate-descent and max-autotune kernels, and 1.11x over their bf16 ones (call17_row_guard,
call23_l2_rows). The report offers the chunked kernel only where the kernel is slower than the
chunked form's two-read floor (rule ``row_kernel_replacement_chunked``). Anything else
(dtype, layout, device, weight shape, a row over the cap) is refused; a refused call returns the
pure-torch reference instead, and ``return_plan=True`` gives the caller the :class:`RowPlan` with
the reason.

Entry points, each with a pure-torch reference (``*_ref``, fp32 math, result in the input dtype):

- :func:`softmax` / :func:`log_softmax` -- over the last dim;
- :func:`layer_norm` -- ``F.layer_norm(x, (n_cols,), weight, bias, eps)``;
- :func:`rms_norm` -- ``x * rsqrt(mean(x**2) + eps) * weight``, all in fp32, then cast.

Importing the module registers the same four ops as ``torch.library`` ops
(``torch.ops.tko.row_softmax``, ``row_log_softmax``, ``layer_norm``, ``rms_norm``). Where torch has
``torch.library.triton_op`` (2.6+) and Triton compiles (:data:`USE_TRITON_OP`) they are triton
ops: under ``torch.compile`` AOTAutograd traces into them, the plan is made at the trace, and
Inductor launches the bundled kernel from its generated code (on an H200 the compiled kernel runs
within 1 % of a direct launch, and the host's share of a replaced step fell from 0.13 to 0.06 ms).
Their Python then runs once per trace, and the launch counts say so: ``rms_norm (chunked, traced
into a compiled graph): kernel``. Elsewhere (older torch, the interpreter) they are opaque custom
ops with fake (meta) implementations, one node each, run at every call.

Backward: each op has a registered autograd formula, one of two (:func:`backward_choice`). By
default (:data:`BACKWARD` ``= "torch"``) it is the chain rule as torch ops, the ``*_bwd_ref``
formulas (softmax ``dx = y * (dy - sum(dy * y))``, log-softmax ``dx = dy - exp(y) * sum(dy)``, the
norms from the per-row stats the forward saved), which under ``torch.compile`` AOTAutograd traces
into the backward graph for Inductor to fuse. ``"kernel"`` runs one-pass backward kernels instead
(``tko::row_softmax_bwd`` ..., ops of the same kind as the forward ones); select it with
``TKO_ROW_BACKWARD=kernel`` in the environment, ``rowkernels.BACKWARD = "kernel"`` or the
:func:`use_backward` block (an unknown value is an :class:`~tko.base.errors.InputError` when a backward
runs). A compiled graph keeps the backward it was traced with, and Inductor's on-disk AOTAutograd
cache keys on the forward graph, not on this choice: after switching, compile with
``TORCHINDUCTOR_AUTOGRAD_CACHE=0`` or a fresh ``TORCHINDUCTOR_CACHE_DIR``. The default is measured:
on an NVIDIA H200 (fp16, 2^27 elements, the backward call alone) the kernels reached 52-76 % of
copy on 4k-32k softmax rows where Inductor's compiled backward reached 99-103 %, and 9-28 % on
LayerNorm / RMSNorm against 28-56 %: 1.25x to 6.4x slower in every case (the comment at
:data:`BACKWARD`). The public norm ops return only the output; they decompose into internal
``tko::layer_norm_fwd`` / ``tko::rms_norm_fwd`` ops that also return the fp32 per-row stats (mean
and rstd; rstd), which either backward reads. The kernels reduce dweight and dbias over rows as
per-program fp32 partial sums summed by torch: no atomics, the same bits on every run. The kernel
backward plans on what it reads (the norms: the forward's inputs, so the same checks and BLOCK;
softmax: its output, which shares the input's row length and dtype; its warps are ``plan_row(...,
backward=True)``'s, which skip :data:`FORWARD_NUM_WARPS`) and falls back to the ``*_bwd_ref``
formulas when refused. Either way dx comes back in the input's dtype, dweight and dbias in the
weight's and bias's. ``create_graph=True`` uses the torch formulas (the norms on stats recomputed
from x), so double backward works. The public functions are differentiable: with autograd on they
go through the ops. Backward calls count apart: ``softmax_bwd: torch`` (an eager run of the
formula; ``softmax_bwd: torch (traced into a compiled backward)`` once per trace), ``softmax_bwd:
kernel``, ``softmax_bwd: reference (why)`` (a refused kernel). The backward kernels are one-pass
only: under ``"kernel"`` a row over the limit (a chunked forward) falls back to the torch formula,
counted ``softmax_bwd: reference (row of ... ; the backward kernels are one-pass only)``. Forward
calls count ``softmax: kernel`` (one pass), ``softmax (chunked): kernel`` and ``softmax: reference
(why)``; every launch key ends in ``: kernel``, the form a ``TKO_REPLACE:`` reader looks for.

NaN/inf rows follow torch in both forms: a row holding NaN or +inf gives NaN softmax, and a row
that is -inf everywhere (a fully masked attention row) gives NaN, as ``torch.softmax`` does (its
gradient is NaN too); -inf in part of a row gives exact zeros there (and zero gradient).

With ``TRITON_INTERPRET=1`` set before Triton is imported the kernels run in the interpreter, the
only way a CPU tensor gets them; otherwise a CPU tensor is refused.
"""


# No ``from __future__ import annotations`` here: the kernels' ``tl.constexpr`` annotations and
# the custom ops' type hints must be real objects.

import os
from contextlib import contextmanager
from dataclasses import replace
from typing import Optional, Tuple

import torch

from ..base.errors import InputError

try:  # the references and the refusal path work without Triton
    import triton
    import triton.language as tl
except Exception:  # pragma: no cover - exercised only where Triton is missing
    triton = None
    tl = None
from .row_plan import (KERNEL_DTYPES, RowLimit, RowPlan, plan_row)
from .row_refs import (out_dtype, stats_dtype, layer_norm_ref, log_softmax_bwd_ref, log_softmax_ref, norm_bwd_ref, norm_stats_ref, rms_norm_ref, softmax_bwd_ref, softmax_ref)
from .row_triton import (USE_TRITON_OP, launch_forward, launch_norm_bwd, launch_softmax_bwd, traced)

# --- which backward the ops run --------------------------------------------------------------

# The ops' registered autograd runs one of two backwards:
#   "torch":  the chain rule as torch ops (softmax_bwd_ref / log_softmax_bwd_ref / norm_bwd_ref on
#             the output or the per-row stats the forward saved). Under torch.compile AOTAutograd
#             traces these ops into the backward graph, where Inductor compiles and fuses them.
#   "kernel": the one-pass backward kernels, as the tko::*_bwd ops (triton ops, or one opaque node each
#             under torch.compile).
# "torch" is the default because the kernels lost every case measured: NVIDIA H200, torch 2.11,
# Triton 3.6, fp16, rows x cols = 2^27, the backward call alone (rowkernel_sweep --direction bwd,
# tests/fixtures/rowkernel_sweep_h200/call3_bwd/ and call4_bwd/). % of copy, kernel against the
# best Inductor mode: softmax 4k 76.3 / 103.0, 16k 52.5 / 101.7, 32k 54.5 / 99.2; layer_norm 4k
# 28.5 / 46.5 (call4: 22.4 / 28.1), 16k 8.8 / 56.0, 32k 9.3 / 38.9; rms_norm 4k 25.3 / 45.0,
# 32k 15.3 / 39.2: 1.25x to 6.4x slower.
BACKWARD = "torch"
BACKWARDS = ("torch", "kernel")
BACKWARD_ENV = "TKO_ROW_BACKWARD"   # set, it wins over BACKWARD
_FORCED_BACKWARD: Optional[str] = None   # use_backward()'s choice: over the environment too


def backward_choice() -> str:
    """The backward the ops run now (:data:`BACKWARDS`): :func:`use_backward`'s choice,
    else ``$TKO_ROW_BACKWARD``, else :data:`BACKWARD`. Read when a backward runs (eager) or is
    traced (torch.compile: a compiled graph keeps the backward it was traced with). An unknown
    value is an :class:`~tko.base.errors.InputError`. Inductor's AOTAutograd cache does not key on
    this choice: a cached compiled graph keeps the backward it was first traced with
    (``TORCHINDUCTOR_AUTOGRAD_CACHE=0`` or a fresh ``TORCHINDUCTOR_CACHE_DIR`` after switching)."""
    if _FORCED_BACKWARD is not None:
        choice, where = _FORCED_BACKWARD, "use_backward"
    else:
        env = os.environ.get(BACKWARD_ENV, "").strip()
        choice, where = (env, BACKWARD_ENV) if env else (BACKWARD, "tko.remedies.rowkernels.BACKWARD")
    if choice not in BACKWARDS:
        raise InputError(f"{where}={choice!r} is not a row backward; one of {', '.join(BACKWARDS)}")
    return choice


@contextmanager
def use_backward(choice: str):
    """Run the ``choice`` backward (``"torch"`` or ``"kernel"``) inside the block, whatever
    :data:`BACKWARD` and ``$TKO_ROW_BACKWARD`` say; the previous choice is restored after."""
    global _FORCED_BACKWARD
    if choice not in BACKWARDS:
        raise InputError(f"use_backward={choice!r} is not a row backward; one of {', '.join(BACKWARDS)}")
    before, _FORCED_BACKWARD = _FORCED_BACKWARD, choice
    try:
        yield
    finally:
        _FORCED_BACKWARD = before




def _count_torch_backward(op: str, dy: torch.Tensor) -> None:
    """``<op>_bwd: torch`` for each eager run of the formula; traced into a compiled backward it
    counts once per trace (the compiled graph then runs it without Python)."""
    key = f"{op}_bwd: torch" + (" (traced into a compiled backward)" if traced(dy) else "")
    _CALLS[key] = _CALLS.get(key, 0) + 1


# --- forward and backward with their counts ---------------------------------------------------

_CALLS: dict = {}


def call_counts() -> dict:
    """Calls per ``"op: kernel"`` (the one-pass form) / ``"op (chunked): kernel"`` /
    ``"op: reference (reason)"`` since import.

    Backward calls count under ``"<op>_bwd: ..."`` (``softmax_bwd: torch``, ``softmax_bwd:
    kernel``), apart from the forward ones."""
    return dict(_CALLS)


def _count(plan: RowPlan, suffix: str = "", on: Optional[torch.Tensor] = None) -> None:
    """One call of ``plan`` on the tensor ``on``: a triton op's function traced on fake tensors
    (USE_TRITON_OP under torch.compile) counts once per trace, under its own key, since the
    compiled graph then launches the kernel with no Python of this module."""
    tags = ["chunked"] if plan.form == "chunked" else []
    if USE_TRITON_OP and on is not None and traced(on):
        tags.append("traced into a compiled graph")
    # every launch key ends in ': kernel': trials read ': kernel N' as launched
    key = (plan.op + suffix + (f" ({', '.join(tags)})" if tags else "")
           + (": kernel" if plan.use_kernel else f": reference ({plan.reason})"))
    _CALLS[key] = _CALLS.get(key, 0) + 1


def _softmax_forward(op: str, x: torch.Tensor, limit=None):
    plan = plan_row(op, x, limit=limit)
    out = launch_forward(plan, x)[0] if plan.use_kernel else REFERENCES[op](x)
    _count(plan, on=x)
    return out, plan


def _norm_forward(op: str, x, weight, bias, eps: float, stats: bool, limit=None):
    """``(out, mean, rstd, plan)``; mean / rstd only with ``stats`` (mean only for LayerNorm)."""
    plan = plan_row(op, x, weight, bias, limit=limit)
    center = op == "layer_norm"
    if plan.use_kernel:
        out, mean, rstd = launch_forward(plan, x, weight, bias, eps, stats=stats)
    else:
        out = layer_norm_ref(x, weight, bias, eps) if center else rms_norm_ref(x, weight, eps)
        mean, rstd = norm_stats_ref(x, eps, center) if stats else (None, None)
    _count(plan, on=x)
    return out, mean, rstd, plan


def _softmax_backward(op: str, dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # planned on what it reads, the saved output: it has the input's row length, dtype and
    # device, so every limit / dtype / device refusal of the forward holds here too; a layout
    # refusal of the input does not (the refused forward's reference output is contiguous, and
    # the backward never reads the input)
    plan = plan_row(op, y, backward=True)
    if plan.use_kernel and (dy.shape != y.shape or dy.dtype not in KERNEL_DTYPES):
        plan = replace(plan, num_warps=1,
                       reason=f"grad {tuple(dy.shape)} {dy.dtype} does not match the output")
    ref = softmax_bwd_ref if op == "softmax" else log_softmax_bwd_ref
    dx = launch_softmax_bwd(plan, dy, y) if plan.use_kernel else ref(dy, y)
    _count(plan, "_bwd", on=y)
    return dx


def _norm_backward(op: str, dy, x, weight, bias, mean, rstd, need_dw: bool, need_db: bool):
    """(dx, dweight, dbias) from the saved stats; planned on the forward's inputs, so the same
    checks and BLOCK as the forward, with the backward's warps."""
    plan = plan_row(op, x, weight, bias, backward=True)
    if plan.use_kernel and (dy.shape != x.shape or dy.dtype not in KERNEL_DTYPES):
        plan = replace(plan, num_warps=1,
                       reason=f"grad {tuple(dy.shape)} {dy.dtype} does not match the input")
    need_dw, need_db = need_dw and weight is not None, need_db and bias is not None
    if plan.use_kernel:
        dx, dw, db = launch_norm_bwd(plan, dy, x, weight, mean, rstd, need_dw, need_db)
    else:
        dx, dw, db = norm_bwd_ref(dy, x, weight, mean, rstd, need_dw, need_db)
    _count(plan, "_bwd", on=x)
    return dx, dw, None if db is None else db.to(bias.dtype)


# --- public functions -------------------------------------------------------------------------

def _wants_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for t in tensors)


def _differentiable(op: str, limit, run_op, run_ref, plan_args):
    """``(out, plan)`` of a call that needs gradients: the custom op, whose registered backward
    runs :func:`backward_choice`'s backward. The op plans against the device's own limit, so
    ``limit`` must be None here."""
    if limit is not None:
        raise ValueError(f"{op}: limit= applies only to calls without autograd (the custom op "
                         "plans against the device's own limit)")
    plan = plan_row(op, *plan_args)
    if OPS_REGISTERED:
        return run_op(), plan
    plan = replace(plan, num_warps=1, reason="no torch.library.custom_op to carry the backward",
                   chunk=None)
    _count(plan)
    return run_ref(), plan  # torch's autograd of the reference


def softmax(x: torch.Tensor, *, return_plan: bool = False, limit: Optional[RowLimit] = None):
    """Softmax over the last dim; the reference when refused (``return_plan`` says why).

    With autograd on the call runs ``torch.ops.tko.row_softmax`` and its registered backward
    (then ``limit`` must be None); the same holds for the other three."""
    if _wants_grad(x):
        out, plan = _differentiable("softmax", limit, lambda: torch.ops.tko.row_softmax(x),
                                    lambda: softmax_ref(x), (x,))
    else:
        out, plan = _softmax_forward("softmax", x, limit)
    return (out, plan) if return_plan else out


def log_softmax(x: torch.Tensor, *, return_plan: bool = False, limit: Optional[RowLimit] = None):
    """Log-softmax over the last dim; the reference when refused."""
    if _wants_grad(x):
        out, plan = _differentiable("log_softmax", limit, lambda: torch.ops.tko.row_log_softmax(x),
                                    lambda: log_softmax_ref(x), (x,))
    else:
        out, plan = _softmax_forward("log_softmax", x, limit)
    return (out, plan) if return_plan else out


def layer_norm(x: torch.Tensor, weight=None, bias=None, eps: float = 1e-5, *,
               return_plan: bool = False, limit: Optional[RowLimit] = None):
    """LayerNorm over the last dim (``F.layer_norm(x, (n,), weight, bias, eps)``)."""
    if _wants_grad(x, weight, bias):
        out, plan = _differentiable(
            "layer_norm", limit, lambda: torch.ops.tko.layer_norm(x, weight, bias, float(eps)),
            lambda: layer_norm_ref(x, weight, bias, eps), (x, weight, bias))
    else:
        out, _, _, plan = _norm_forward("layer_norm", x, weight, bias, eps, False, limit)
    return (out, plan) if return_plan else out


def rms_norm(x: torch.Tensor, weight=None, eps: float = 1e-6, *, return_plan: bool = False,
             limit: Optional[RowLimit] = None):
    """RMSNorm over the last dim: ``x * rsqrt(mean(x**2) + eps) * weight`` in fp32."""
    if _wants_grad(x, weight):
        out, plan = _differentiable(
            "rms_norm", limit, lambda: torch.ops.tko.rms_norm(x, weight, float(eps)),
            lambda: rms_norm_ref(x, weight, eps), (x, weight))
    else:
        out, _, _, plan = _norm_forward("rms_norm", x, weight, None, eps, False, limit)
    return (out, plan) if return_plan else out


REFERENCES = {"softmax": softmax_ref, "log_softmax": log_softmax_ref,
              "layer_norm": layer_norm_ref, "rms_norm": rms_norm_ref}
BACKWARD_REFERENCES = {"softmax": softmax_bwd_ref, "log_softmax": log_softmax_bwd_ref,
                       "layer_norm": norm_bwd_ref, "rms_norm": norm_bwd_ref}


# --- torch.library ops ------------------------------------------------------------------------

OP_NAMES = {"softmax": "tko::row_softmax", "log_softmax": "tko::row_log_softmax",
            "layer_norm": "tko::layer_norm", "rms_norm": "tko::rms_norm"}
# Internal ops: the norms' forward that also returns the per-row stats the backward reads (the
# public norm ops above decompose into it), and each op's backward kernel (what the registered
# autograd calls when backward_choice() is "kernel").
INTERNAL_OP_NAMES = {"layer_norm": ("tko::layer_norm_fwd", "tko::layer_norm_bwd"),
                     "rms_norm": ("tko::rms_norm_fwd", "tko::rms_norm_bwd"),
                     "softmax": (None, "tko::row_softmax_bwd"),
                     "log_softmax": (None, "tko::row_log_softmax_bwd")}
_LIB = None  # the Library holding the public norm ops; registrations live as long as it does


def _already_registered(qualname: str) -> bool:
    ns, name = qualname.split("::")
    try:
        getattr(getattr(torch.ops, ns), name)
        return True
    except (AttributeError, RuntimeError):
        return False


def _all_op_names() -> list:
    return [*OP_NAMES.values(), *(q for pair in INTERNAL_OP_NAMES.values() for q in pair if q)]


def _count_double_backward(op: str) -> None:
    key = f"{op}_bwd: reference (create_graph: differentiable torch ops)"
    _CALLS[key] = _CALLS.get(key, 0) + 1


def _define_op(name: str):
    """The decorator of one op: torch.library.triton_op where :data:`USE_TRITON_OP` (its function
    is its own fake: traced on fake tensors, it launches nothing), else an opaque custom_op."""
    if USE_TRITON_OP:
        return torch.library.triton_op(name, mutates_args=())
    return torch.library.custom_op(name, mutates_args=())


def _register_fake(op, fake) -> None:
    if not USE_TRITON_OP:   # a triton op traces its own function instead
        op.register_fake(fake)


def _register_softmax_ops() -> None:
    def fake(x):
        return torch.empty(x.shape, dtype=out_dtype(x), device=x.device)

    def fake_bwd(dy, y):
        return torch.empty(y.shape, dtype=y.dtype, device=y.device)

    @_define_op(OP_NAMES["softmax"])
    def row_softmax(x: torch.Tensor) -> torch.Tensor:
        return _dense(_softmax_forward("softmax", x)[0])

    @_define_op(OP_NAMES["log_softmax"])
    def row_log_softmax(x: torch.Tensor) -> torch.Tensor:
        return _dense(_softmax_forward("log_softmax", x)[0])

    @_define_op(INTERNAL_OP_NAMES["softmax"][1])
    def row_softmax_bwd(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _dense(_softmax_backward("softmax", dy, y))

    @_define_op(INTERNAL_OP_NAMES["log_softmax"][1])
    def row_log_softmax_bwd(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return _dense(_softmax_backward("log_softmax", dy, y))

    for op, fwd, bwd in (("softmax", row_softmax, row_softmax_bwd),
                         ("log_softmax", row_log_softmax, row_log_softmax_bwd)):
        _register_fake(fwd, fake)
        _register_fake(bwd, fake_bwd)
        torch.library.register_autograd(OP_NAMES[op], _softmax_grad(op, bwd),
                                        setup_context=_save_output)


def _dense(*tensors):
    """The ops' results contiguous whatever the path (a reference result follows the input's
    layout), as the fake implementations promise; a no-op for kernel results."""
    out = tuple(t.contiguous() for t in tensors)
    return out[0] if len(out) == 1 else out


def _save_output(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_grad(op: str, bwd_op):
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: torch ops, so it differentiates again
            _count_double_backward(op)
            return BACKWARD_REFERENCES[op](dy, y)
        if backward_choice() == "torch":
            _count_torch_backward(op, dy)
            return BACKWARD_REFERENCES[op](dy, y)
        return bwd_op(dy, y)
    return backward


def _register_norm_ops() -> None:
    def fake_fwd(x, weight, bias, eps, stats):
        shape = x.shape[:-1] if stats else (0,)
        mean = torch.empty(shape, dtype=stats_dtype(x), device=x.device)
        return torch.empty(x.shape, dtype=out_dtype(x), device=x.device), mean, mean.clone()

    def fake_bwd(dy, x, weight, bias, mean, rstd, need_dw, need_db):
        def like(p, want):
            return torch.empty_like(p) if want and p is not None else x.new_empty(0)
        dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        return dx, like(weight, need_dw), like(bias, need_db)

    # stats=False (no gradient wanted): empty stats, so an inference call writes none
    @_define_op(INTERNAL_OP_NAMES["layer_norm"][0])
    def layer_norm_fwd(x: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor],
                       eps: float, stats: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, mean, rstd, _ = _norm_forward("layer_norm", x, weight, bias, eps, stats)
        return _dense(out, _or_no_stats(mean, x), _or_no_stats(rstd, x))

    @_define_op(INTERNAL_OP_NAMES["rms_norm"][0])
    def rms_norm_fwd(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float,
                     stats: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        out, _, rstd, _ = _norm_forward("rms_norm", x, weight, None, eps, stats)
        return _dense(out, _or_no_stats(rstd, x))

    # unwanted gradients come back as empty tensors: a custom op returns no None
    @_define_op(INTERNAL_OP_NAMES["layer_norm"][1])
    def layer_norm_bwd(dy: torch.Tensor, x: torch.Tensor, weight: Optional[torch.Tensor],
                       bias: Optional[torch.Tensor], mean: torch.Tensor, rstd: torch.Tensor,
                       need_dw: bool, need_db: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dx, dw, db = _norm_backward("layer_norm", dy, x, weight, bias, mean, rstd, need_dw, need_db)
        return _dense(dx, x.new_empty(0) if dw is None else dw, x.new_empty(0) if db is None else db)

    @_define_op(INTERNAL_OP_NAMES["rms_norm"][1])
    def rms_norm_bwd(dy: torch.Tensor, x: torch.Tensor, weight: Optional[torch.Tensor],
                     rstd: torch.Tensor, need_dw: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        dx, dw, _ = _norm_backward("rms_norm", dy, x, weight, None, None, rstd, need_dw, False)
        return _dense(dx, x.new_empty(0) if dw is None else dw)

    _register_fake(layer_norm_fwd, fake_fwd)
    _register_fake(rms_norm_fwd, lambda x, weight, eps, stats: fake_fwd(x, weight, None, eps, stats)[::2])
    _register_fake(layer_norm_bwd, fake_bwd)
    _register_fake(rms_norm_bwd,
                   lambda dy, x, weight, rstd, need_dw: fake_bwd(dy, x, weight, None, rstd, rstd, need_dw, False)[:2])
    torch.library.register_autograd(INTERNAL_OP_NAMES["layer_norm"][0], _layer_norm_grad,
                                    setup_context=_save_norm("layer_norm"))
    torch.library.register_autograd(INTERNAL_OP_NAMES["rms_norm"][0], _rms_norm_grad,
                                    setup_context=_save_norm("rms_norm"))


def _save_norm(op: str):
    def setup_context(ctx, inputs, output):
        if op == "layer_norm":
            (x, weight, bias, eps, stats), (_, mean, rstd) = inputs, output
        else:
            (x, weight, eps, stats), (_, rstd), bias, mean = inputs, output, None, None
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        ctx.mark_non_differentiable(*(t for t in (mean, rstd) if t is not None))
        ctx.eps, ctx.has_stats = eps, stats
    return setup_context


def _norm_grads(op: str, ctx, dy):
    """(dx, dweight, dbias), each None where no gradient is wanted."""
    x, weight, bias, mean, rstd = ctx.saved_tensors
    need = ctx.needs_input_grad
    need_dw = weight is not None and need[1]
    need_db = op == "layer_norm" and bias is not None and need[2]
    if not ctx.has_stats:  # a direct call with stats=False: the backward needs them all the same
        mean, rstd = norm_stats_ref(x, ctx.eps, op == "layer_norm")
    if torch.is_grad_enabled():
        # create_graph=True: torch ops on stats recomputed from x, so the result
        # differentiates again (the saved stats carry no graph)
        _count_double_backward(op)
        mean, rstd = norm_stats_ref(x, ctx.eps, op == "layer_norm")
        dx, dw, db = norm_bwd_ref(dy, x, weight, mean, rstd, need_dw, need_db)
        db = None if db is None else db.to(bias.dtype)
    elif backward_choice() == "torch":  # on the saved stats; dtypes as the kernel's
        _count_torch_backward(op, dy)
        dx, dw, db = norm_bwd_ref(dy, x, weight, mean, rstd, need_dw, need_db)
        db = None if db is None else db.to(bias.dtype)
    elif op == "layer_norm":
        dx, dw, db = torch.ops.tko.layer_norm_bwd(dy, x, weight, bias, mean, rstd, need_dw, need_db)
    else:
        (dx, dw), db = torch.ops.tko.rms_norm_bwd(dy, x, weight, rstd, need_dw), None
    return (dx if need[0] else None, dw if need_dw else None, db if need_db else None)


def _layer_norm_grad(ctx, dy, _dmean, _drstd):
    dx, dw, db = _norm_grads("layer_norm", ctx, dy)
    return dx, dw, db, None, None


def _rms_norm_grad(ctx, dy, _drstd):
    dx, dw, _ = _norm_grads("rms_norm", ctx, dy)
    return dx, dw, None, None


def _or_no_stats(t: Optional[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return t if t is not None else torch.empty(0, dtype=stats_dtype(x), device=x.device)


def _register_public_norm_ops() -> None:
    """``tko::layer_norm`` / ``tko::rms_norm`` return only the output: CompositeImplicitAutograd
    kernels over the ``*_fwd`` ops, so autograd and torch.compile see the op that saves stats;
    the stats are asked for only when a gradient is wanted."""
    global _LIB
    _LIB = torch.library.Library("tko", "FRAGMENT")
    _LIB.define("layer_norm(Tensor x, Tensor? weight, Tensor? bias, float eps) -> Tensor")
    _LIB.define("rms_norm(Tensor x, Tensor? weight, float eps) -> Tensor")
    _LIB.impl("layer_norm", lambda x, weight, bias, eps: torch.ops.tko.layer_norm_fwd(
        x, weight, bias, eps, _wants_grad(x, weight, bias))[0], "CompositeImplicitAutograd")
    _LIB.impl("rms_norm", lambda x, weight, eps: torch.ops.tko.rms_norm_fwd(
        x, weight, eps, _wants_grad(x, weight))[0], "CompositeImplicitAutograd")


def _register_ops() -> bool:
    if not hasattr(torch.library, "custom_op") or not hasattr(torch.library, "register_autograd"):
        return False
    if all(_already_registered(q) for q in _all_op_names()):  # module reloaded
        return True
    _register_softmax_ops()
    _register_norm_ops()
    _register_public_norm_ops()
    return True


OPS_REGISTERED = _register_ops()
