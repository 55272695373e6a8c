"""Pure-torch references of the row ops, forward and backward: fp32 math, the result in the input
dtype. The row kernels are checked against them, and a refused call runs them instead."""


# No ``from __future__ import annotations`` here: the kernels' ``tl.constexpr`` annotations and
# the custom ops' type hints must be real objects.


import torch
import torch.nn.functional as F


try:  # the references and the refusal path work without Triton
    import triton
    import triton.language as tl
except Exception:  # pragma: no cover - exercised only where Triton is missing
    triton = None
    tl = None

# --- references -----------------------------------------------------------------------------

def out_dtype(x: torch.Tensor) -> torch.dtype:
    return x.dtype if x.is_floating_point() else torch.float32


def _acc(x: torch.Tensor) -> torch.Tensor:
    return x.double() if x.dtype == torch.float64 else x.float()


def stats_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def softmax_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(_acc(x), dim=-1).to(out_dtype(x))


def log_softmax_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(_acc(x), dim=-1).to(out_dtype(x))


def layer_norm_ref(x: torch.Tensor, weight=None, bias=None, eps: float = 1e-5) -> torch.Tensor:
    xa = _acc(x)
    w = weight.to(xa.dtype) if weight is not None else None
    b = bias.to(xa.dtype) if bias is not None else None
    return F.layer_norm(xa, (x.shape[-1],), w, b, eps).to(out_dtype(x))


def rms_norm_ref(x: torch.Tensor, weight=None, eps: float = 1e-6) -> torch.Tensor:
    xa = _acc(x)
    y = xa * torch.rsqrt(xa.pow(2).mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.to(xa.dtype)
    return y.to(out_dtype(x))


def norm_stats_ref(x: torch.Tensor, eps: float, center: bool):
    """Per-row (mean, rstd) as the backward reads them: fp32 (fp64 for fp64), mean None for RMS."""
    xa = _acc(x)
    if center:
        var, mean = torch.var_mean(xa, dim=-1, correction=0)
        return mean, torch.rsqrt(var + eps)
    return None, torch.rsqrt(xa.pow(2).mean(dim=-1) + eps)


# Backward references: the chain rule written out in fp32 (fp64 for fp64) from what the forward
# saved, the same formulas as the kernels; torch's own autograd of the ``*_ref`` functions above is
# what the tests hold both against. Plain torch ops, so they are differentiable again.

def softmax_bwd_ref(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    ya, ga = _acc(y), _acc(dy)
    return (ya * (ga - (ga * ya).sum(dim=-1, keepdim=True))).to(y.dtype)


def log_softmax_bwd_ref(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    ya, ga = _acc(y), _acc(dy)
    return (ga - torch.exp(ya) * ga.sum(dim=-1, keepdim=True)).to(y.dtype)


def norm_bwd_ref(dy, x, weight, mean, rstd, need_dw: bool, need_db: bool):
    """(dx, dweight or None, dbias or None) of LayerNorm (``mean`` given) or RMSNorm (None)."""
    xa, ga = _acc(x), _acc(dy)
    r = rstd.to(xa.dtype).unsqueeze(-1)
    xhat = (xa - mean.to(xa.dtype).unsqueeze(-1)) * r if mean is not None else xa * r
    g = ga * weight.to(xa.dtype) if weight is not None else ga
    dx = g - xhat * (g * xhat).mean(dim=-1, keepdim=True)
    if mean is not None:
        dx = dx - g.mean(dim=-1, keepdim=True)
    n = x.shape[-1]
    dw = (ga * xhat).reshape(-1, n).sum(0).to(weight.dtype) if need_dw else None
    db = ga.reshape(-1, n).sum(0) if need_db else None
    return (dx * r).to(x.dtype), dw, db


