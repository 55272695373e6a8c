"""One-pass Triton row kernels: softmax, log-softmax, LayerNorm and RMSNorm forward.

Each program owns one row of the last dimension: the whole row is one block
(``BLOCK = next_power_of_2(n_cols)``), read once with a masked tail, reduced in fp32 and written
once in the input dtype (fp16, bf16 or fp32). That is only right while the row fits on chip, so
:func:`plan_row` checks the row against :data:`ROW_LIMITS` and refuses anything else; a refused
call returns the pure-torch reference instead, and ``return_plan=True`` gives the caller the
:class:`RowPlan` with the reason.

Entry points, each with a pure-torch reference (``*_ref``, fp32 math, result in the input dtype):

- :func:`softmax` / :func:`log_softmax` -- over the last dim;
- :func:`layer_norm` -- ``F.layer_norm(x, (n_cols,), weight, bias, eps)``;
- :func:`rms_norm` -- ``x * rsqrt(mean(x**2) + eps) * weight``, all in fp32, then cast.

Importing the module registers the same four ops as ``torch.library`` custom ops
(``torch.ops.tko.row_softmax``, ``row_log_softmax``, ``layer_norm``, ``rms_norm``) with fake
(meta) implementations, so they stay opaque single nodes under ``torch.compile``.

NaN/inf rows follow torch: a row holding NaN or +inf gives NaN softmax, and a row that is -inf
everywhere (a fully masked attention row) gives NaN, as ``torch.softmax`` does; -inf in part of
a row gives exact zeros there.

With ``TRITON_INTERPRET=1`` set before Triton is imported the kernels run in the interpreter, the
only way a CPU tensor gets them; otherwise a CPU tensor is refused.
"""

# No ``from __future__ import annotations`` here: the kernels' ``tl.constexpr`` annotations and
# the custom ops' type hints must be real objects.

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

try:  # the references and the refusal path work without Triton
    import triton
    import triton.language as tl
except Exception:  # pragma: no cover - exercised only where Triton is missing
    triton = None
    tl = None

OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm")
KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
FP32_BYTES = 4


@dataclass(frozen=True)
class RowLimit:
    """How long a row one program may hold on a device, and how many warps it may use."""

    key: str
    wave_size: int
    max_num_warps: int            # threads per block / wave size
    on_chip_bytes: int            # bytes one program can keep the fp32 row in
    source: str

    @property
    def max_row_elements(self) -> int:
        """Largest BLOCK (a power of two) whose fp32 row fits in ``on_chip_bytes``."""
        return 1 << int(math.log2(self.on_chip_bytes // FP32_BYTES))


# The row must fit as fp32 in the on-chip memory one program can use, so that any layout
# conversion or cross-warp reduction the compiler stages through shared memory / LDS cannot spill.
# Keyed by the arch name scripts/tko/archs.py normalises to, plus per-backend defaults.
ROW_LIMITS = {lim.key: lim for lim in (
    # LDS 64 KiB per CU, wave64, 1024 work-items per workgroup: references/dcu_notes.md
    # (section 1 "LDS (GROUP segment) 64 KB", section 6 "LDS 64 KiB per CU ... wave64") and
    # scripts/tko/archs.py ARCHS["gfx936"/"gfx938"].lds_bytes_per_cu.
    RowLimit("gfx936", 64, 16, 64 * 1024,
             "references/dcu_notes.md: BW1000 LDS 64 KiB per CU, wave64; archs.py gfx936"),
    RowLimit("gfx938", 64, 16, 64 * 1024,
             "references/dcu_notes.md: LDS 64 KiB per CU, wave64; archs.py gfx938"),
    # MI300: LDS 64 KiB per CU, wave64 (scripts/tko/archs.py ARCHS["gfx942"], the DCU proxy).
    RowLimit("gfx942", 64, 16, 64 * 1024, "archs.py gfx942 (CDNA3): LDS 64 KiB per CU, wave64"),
    RowLimit("gfx90a", 64, 16, 64 * 1024, "archs.py gfx90a (CDNA2): LDS 64 KiB per CU, wave64"),
    # H200 (sm_90): 227 KiB shared memory per block with opt-in (228 KiB per SM), warp 32,
    # 1024 threads per block (NVIDIA Hopper tuning guide; the machine in
    # references/device_peaks.yaml; torch reports it as shared_memory_per_block_optin).
    RowLimit("sm_90", 32, 32, 227 * 1024,
             "NVIDIA Hopper tuning guide: 227 KiB shared memory per block (opt-in), warp 32; "
             "H200 of references/device_peaks.yaml"),
    # Unknown archs: the smallest figure of the backend (48 KiB static shared memory per block on
    # any CUDA GPU; 64 KiB LDS on every AMD/Hygon arch in archs.py).
    RowLimit("cuda", 32, 32, 48 * 1024, "CUDA: 48 KiB static shared memory per block on every arch"),
    RowLimit("hip", 64, 16, 64 * 1024, "archs.py: 64 KiB LDS per CU on every gfx9 arch listed"),
    # The interpreter has no on-chip limit; it takes the DCU figure so CPU runs refuse what a DCU does.
    RowLimit("interpreter", 64, 16, 64 * 1024, "same as gfx936 so that CPU tests see the DCU refusal"),
)}

# fp32 values each thread should hold before another warp is worth adding.
ELEMENTS_PER_THREAD = 8


@dataclass(frozen=True)
class RowPlan:
    """What a call will do: launch the kernel (``reason is None``) or fall back, and why."""

    op: str
    n_rows: int
    n_cols: int
    block: int
    num_warps: int
    limit: Optional[RowLimit]
    reason: Optional[str] = None

    @property
    def use_kernel(self) -> bool:
        return self.reason is None


def interpreting() -> bool:
    """True when Triton runs kernels in its interpreter.

    Triton reads ``TRITON_INTERPRET`` when it is imported (its ``tl.max``/``tl.sum`` become
    interpreted functions then), so the mode is that of the import, whatever the environment
    says now.
    """
    if tl is None:
        return False
    return type(tl.max).__name__ == "InterpretedFunction"


def device_limit(device: torch.device) -> RowLimit:
    """The :data:`ROW_LIMITS` row for ``device`` (its arch, else the backend default)."""
    if device.type != "cuda":
        return ROW_LIMITS["interpreter"]
    hip = bool(getattr(torch.version, "hip", None))
    try:
        from tko.archs import normalize, torch_device_arch
        arch, _ = torch_device_arch(torch.cuda.get_device_properties(device), hip=hip)
        arch = normalize(arch) if arch else None
    except Exception:
        arch = None
    if arch in ROW_LIMITS:
        return ROW_LIMITS[arch]
    return ROW_LIMITS["hip" if hip else "cuda"]


def pick_num_warps(block: int, limit: RowLimit) -> int:
    """Warps for a one-row block: about ELEMENTS_PER_THREAD fp32 values a thread, a power of two."""
    want = max(1, block // (limit.wave_size * ELEMENTS_PER_THREAD))
    return min(limit.max_num_warps, 1 << (want.bit_length() - 1))


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _check_param(name: str, t, x: torch.Tensor, n_cols: int) -> Optional[str]:
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        return f"{name} is not a tensor"
    if t.shape != (n_cols,):
        return f"{name} shape {tuple(t.shape)} is not ({n_cols},)"
    if t.dtype not in KERNEL_DTYPES:
        return f"{name} dtype {t.dtype} not in fp16/bf16/fp32"
    if t.device != x.device:
        return f"{name} on {t.device}, input on {x.device}"
    if n_cols > 1 and t.stride(0) != 1:
        return f"{name} is not contiguous"
    return None


def plan_row(op: str, x: torch.Tensor, weight=None, bias=None, *,
             limit: Optional[RowLimit] = None) -> RowPlan:
    """Decide whether ``op`` on ``x`` runs the one-pass kernel; ``reason`` says why not."""
    if op not in OPS:
        raise ValueError(f"unknown row op {op!r}; one of {', '.join(OPS)}")
    n_cols = int(x.shape[-1]) if x.dim() else 1
    n_rows = x.numel() // n_cols if n_cols else 0
    block = _next_pow2(n_cols)

    def refuse(reason, lim=None):
        return RowPlan(op, n_rows, n_cols, block, 1, lim, reason)

    if triton is None:
        return refuse("triton is not importable")
    if x.dim() == 0:
        return refuse("0-d tensor has no row")
    if x.dtype not in KERNEL_DTYPES:
        return refuse(f"dtype {x.dtype} not in fp16/bf16/fp32")
    if n_cols == 0:
        return refuse("empty rows")
    if n_cols > 1 and x.stride(-1) != 1:
        return refuse(f"last dim not contiguous (stride {x.stride(-1)})")
    try:
        x.view(-1, n_cols)
    except RuntimeError:
        return refuse("leading dims do not collapse to one row stride")
    for name, t in (("weight", weight), ("bias", bias)):
        why = _check_param(name, t, x, n_cols)
        if why:
            return refuse(why)
    lim = limit or device_limit(x.device)
    if block > lim.max_row_elements:
        return refuse(f"row of {n_cols} (BLOCK {block}) exceeds {lim.max_row_elements} fp32 "
                      f"elements on {lim.key} ({lim.on_chip_bytes // 1024} KiB on chip)", lim)
    if x.device.type != "cuda" and not interpreting():
        return refuse(f"{x.device.type} tensor and Triton was not imported with TRITON_INTERPRET=1", lim)
    return RowPlan(op, n_rows, n_cols, block, pick_num_warps(block, lim), lim)


# --- references -----------------------------------------------------------------------------

def _out_dtype(x: torch.Tensor) -> torch.dtype:
    return x.dtype if x.is_floating_point() else torch.float32


def _acc(x: torch.Tensor) -> torch.Tensor:
    return x.double() if x.dtype == torch.float64 else x.float()


def softmax_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(_acc(x), dim=-1).to(_out_dtype(x))


def log_softmax_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(_acc(x), dim=-1).to(_out_dtype(x))


def layer_norm_ref(x: torch.Tensor, weight=None, bias=None, eps: float = 1e-5) -> torch.Tensor:
    xa = _acc(x)
    w = weight.to(xa.dtype) if weight is not None else None
    b = bias.to(xa.dtype) if bias is not None else None
    return F.layer_norm(xa, (x.shape[-1],), w, b, eps).to(_out_dtype(x))


def rms_norm_ref(x: torch.Tensor, weight=None, eps: float = 1e-6) -> torch.Tensor:
    xa = _acc(x)
    y = xa * torch.rsqrt(xa.pow(2).mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.to(xa.dtype)
    return y.to(_out_dtype(x))


# --- kernels (plain functions; jit-ed lazily by _kernels) --------------------------------------

if tl is not None:
    def _softmax_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr, LOG: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
        z = x - tl.max(x, axis=0)
        e = tl.where(mask, tl.exp(z), 0.0)
        s = tl.sum(e, axis=0)
        if LOG:
            y = z - tl.log(s)
        else:
            y = e / s
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)

    def _layer_norm_kernel(X, Y, W, B, stride_x, stride_y, n_cols, eps, BLOCK: tl.constexpr,
                           HAS_W: tl.constexpr, HAS_B: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        xc = tl.where(mask, x - mean, 0.0)
        var = tl.sum(xc * xc, axis=0) / n_cols
        y = xc * (1.0 / tl.sqrt(var + eps))
        if HAS_W:
            y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)

    def _rms_norm_kernel(X, Y, W, stride_x, stride_y, n_cols, eps, BLOCK: tl.constexpr,
                         HAS_W: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        ms = tl.sum(x * x, axis=0) / n_cols
        y = x * (1.0 / tl.sqrt(ms + eps))
        if HAS_W:
            y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)

_JITTED: dict = {}


def _kernels() -> dict:
    """The three kernels jit-ed for the current mode (compiled or interpreted)."""
    mode = interpreting()
    if mode not in _JITTED:
        _JITTED[mode] = {"softmax": triton.jit(_softmax_kernel),
                         "layer_norm": triton.jit(_layer_norm_kernel),
                         "rms_norm": triton.jit(_rms_norm_kernel)}
    return _JITTED[mode]


def _launch(plan: RowPlan, x: torch.Tensor, weight=None, bias=None, eps: float = 0.0):
    x2 = x.view(-1, plan.n_cols)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if plan.n_rows == 0:
        return y
    y2 = y.view(-1, plan.n_cols)
    k = _kernels()
    grid = (plan.n_rows,)
    common = dict(BLOCK=plan.block, num_warps=plan.num_warps)
    if plan.op in ("softmax", "log_softmax"):
        k["softmax"][grid](x2, y2, x2.stride(0), y2.stride(0), plan.n_cols,
                           LOG=plan.op == "log_softmax", **common)
    elif plan.op == "layer_norm":
        k["layer_norm"][grid](x2, y2, weight if weight is not None else x2,
                              bias if bias is not None else x2, x2.stride(0), y2.stride(0),
                              plan.n_cols, float(eps), HAS_W=weight is not None,
                              HAS_B=bias is not None, **common)
    else:
        k["rms_norm"][grid](x2, y2, weight if weight is not None else x2, x2.stride(0),
                            y2.stride(0), plan.n_cols, float(eps), HAS_W=weight is not None,
                            **common)
    return y


_CALLS: dict = {}


def call_counts() -> dict:
    """Calls per ``"op: kernel"`` / ``"op: reference (reason)"`` since import."""
    return dict(_CALLS)


def _finish(out, plan, return_plan):
    key = f"{plan.op}: kernel" if plan.use_kernel else f"{plan.op}: reference ({plan.reason})"
    _CALLS[key] = _CALLS.get(key, 0) + 1
    return (out, plan) if return_plan else out


def softmax(x: torch.Tensor, *, return_plan: bool = False, limit: Optional[RowLimit] = None):
    """Softmax over the last dim; the reference when refused (``return_plan`` says why)."""
    plan = plan_row("softmax", x, limit=limit)
    out = _launch(plan, x) if plan.use_kernel else softmax_ref(x)
    return _finish(out, plan, return_plan)


def log_softmax(x: torch.Tensor, *, return_plan: bool = False, limit: Optional[RowLimit] = None):
    """Log-softmax over the last dim; the reference when refused."""
    plan = plan_row("log_softmax", x, limit=limit)
    out = _launch(plan, x) if plan.use_kernel else log_softmax_ref(x)
    return _finish(out, plan, return_plan)


def layer_norm(x: torch.Tensor, weight=None, bias=None, eps: float = 1e-5, *,
               return_plan: bool = False, limit: Optional[RowLimit] = None):
    """LayerNorm over the last dim (``F.layer_norm(x, (n,), weight, bias, eps)``)."""
    plan = plan_row("layer_norm", x, weight, bias, limit=limit)
    out = (_launch(plan, x, weight, bias, eps) if plan.use_kernel
           else layer_norm_ref(x, weight, bias, eps))
    return _finish(out, plan, return_plan)


def rms_norm(x: torch.Tensor, weight=None, eps: float = 1e-6, *, return_plan: bool = False,
             limit: Optional[RowLimit] = None):
    """RMSNorm over the last dim: ``x * rsqrt(mean(x**2) + eps) * weight`` in fp32."""
    plan = plan_row("rms_norm", x, weight, limit=limit)
    out = _launch(plan, x, weight, eps=eps) if plan.use_kernel else rms_norm_ref(x, weight, eps)
    return _finish(out, plan, return_plan)


REFERENCES = {"softmax": softmax_ref, "log_softmax": log_softmax_ref,
              "layer_norm": layer_norm_ref, "rms_norm": rms_norm_ref}


# --- torch.library custom ops ----------------------------------------------------------------

# Opaque custom ops work on every torch this project supports (custom_op exists from 2.4).
# torch.library.triton_op (2.6+) would let Inductor see inside, but it needs the kernels launched
# through wrap_triton, which the interpreter path does not take; HAS_TRITON_OP records whether the
# running torch has it.
HAS_TRITON_OP = hasattr(torch.library, "triton_op")
OP_NAMES = {"softmax": "tko::row_softmax", "log_softmax": "tko::row_log_softmax",
            "layer_norm": "tko::layer_norm", "rms_norm": "tko::rms_norm"}


def _already_registered(qualname: str) -> bool:
    ns, name = qualname.split("::")
    try:
        getattr(getattr(torch.ops, ns), name)
        return True
    except (AttributeError, RuntimeError):
        return False


def _register_ops() -> bool:
    if not hasattr(torch.library, "custom_op"):
        return False
    if all(_already_registered(q) for q in OP_NAMES.values()):  # module reloaded
        return True

    def fake(x, *args):
        return torch.empty(x.shape, dtype=_out_dtype(x), device=x.device)

    @torch.library.custom_op(OP_NAMES["softmax"], mutates_args=())
    def row_softmax(x: torch.Tensor) -> torch.Tensor:
        return softmax(x)

    @torch.library.custom_op(OP_NAMES["log_softmax"], mutates_args=())
    def row_log_softmax(x: torch.Tensor) -> torch.Tensor:
        return log_softmax(x)

    @torch.library.custom_op(OP_NAMES["layer_norm"], mutates_args=())
    def row_layer_norm(x: torch.Tensor, weight: Optional[torch.Tensor],
                       bias: Optional[torch.Tensor], eps: float) -> torch.Tensor:
        return layer_norm(x, weight, bias, eps)

    @torch.library.custom_op(OP_NAMES["rms_norm"], mutates_args=())
    def row_rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float) -> torch.Tensor:
        return rms_norm(x, weight, eps)

    for op in (row_softmax, row_log_softmax, row_layer_norm, row_rms_norm):
        op.register_fake(fake)
    return True


OPS_REGISTERED = _register_ops()
