"""Swap torch's row softmax / log-softmax / LayerNorm / RMSNorm for the bundled one-pass kernels
inside an unchanged program, and recognise those patterns in Inductor kernels.

:func:`install` (the trial bootstrap's ``--replace-rows OPS``) rebinds ``torch.softmax``,
``torch.nn.functional.softmax`` (and the log-softmax, ``layer_norm`` and ``rms_norm`` functions)
to wrappers that call the ``tko::`` ops of :mod:`tko.remedies.rowkernels` when the call is one they do:
the last dim, no dtype change, fp16/bf16/fp32, a GPU tensor. Calls that need gradients are routed
too: the ops carry a registered backward (torch formulas by default, traced into the compiled
backward for Inductor to fuse; the one-pass kernels with ``TKO_ROW_BACKWARD=kernel``), so a
training region runs its forward on them. Any other call goes to the original function, so the
replacement never changes what a program computes, only which kernel computes it.

Under ``torch.compile`` the wrappers are traced like user code. Where the ops are triton ops
(:data:`tko.remedies.row_triton.USE_TRITON_OP`) Inductor launches the bundled kernel from its generated
code; elsewhere each forward op stays one opaque node. The default backward is traced into the
compiled backward graph either way.

Counts of replaced and passed-over calls are printed at exit (``TKO_REPLACE: ...``), so a trial
can tell "replaced" from "never applied", from :func:`tko.remedies.rowkernels.call_counts`:

- ``<op>: routed`` / ``<op>: passed over``: eager calls of the wrappers;
- ``<op>: kernel`` / ``<op> (chunked): kernel`` / ``<op>: reference (why)``: forward launches;
- ``<op> (traced into a compiled graph): kernel`` (``(chunked, traced ...)``): a triton op's
  function traced, once per trace; the compiled calls then launch the kernel with no Python;
- ``<op>_bwd: torch`` (the default backward), ``<op>_bwd: kernel`` / ``<op>_bwd: reference
  (why)``: backward launches.

:func:`row_pattern` names the row op an Inductor kernel implements from its name (Inductor names
kernels after the aten ops fused into them), for the report's offer of a replacement.
"""

from __future__ import annotations

import atexit
import re
import sys
from collections import Counter

OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm")
PREFIX = "TKO_REPLACE"
_counts: Counter = Counter()

# Inductor kernel names list the fused aten ops (torch/_inductor/codegen: kernel_name from the
# origins' aten names): _softmax / _log_softmax / native_layer_norm / rsqrt+mean+pow for RMSNorm.
_PATTERNS = (
    ("log_softmax", re.compile(r"_log_softmax")),
    ("softmax", re.compile(r"_softmax|prepare_softmax")),
    ("layer_norm", re.compile(r"native_layer_norm|_layer_norm|var_mean")),
    ("rms_norm", re.compile(r"_rms_norm|(?=.*mean)(?=.*rsqrt)(?=.*pow)")),
)


def row_pattern(kernel_name: str | None) -> str | None:
    """The row op an Inductor reduction kernel implements, from its name; None when unknown."""
    name = str(kernel_name or "")
    # a backward kernel is no candidate of its own: replacing the forward call brings the bundled
    # backward with it, and the offer's one-pass floor is that of the forward row op
    if not re.match(r"triton_(red|per)_", name) or "backward" in name:
        return None
    for op, pattern in _PATTERNS:
        if pattern.search(name):
            return op
    return None


def bundled_form(op: str, n_cols: int, arch: str | None) -> str | None:
    """The form the bundled kernel of ``op`` takes on rows of ``n_cols`` on ``arch``
    (:func:`tko.remedies.row_plan.row_form` under :func:`tko.remedies.row_plan.arch_limit`): ``"one_pass"``,
    ``"chunked"`` or ``"refused"``; None for an op or length it does not know. The row-length rule
    only; dtype and layout checks need the tensor (:func:`tko.remedies.row_plan.plan_row`)."""
    from . import row_plan

    if op not in OPS or not isinstance(n_cols, int) or n_cols < 1:
        return None
    return row_plan.row_form(n_cols, row_plan.arch_limit(arch))


def parse_ops(text: str) -> list[str]:
    ops = [o.strip() for o in str(text).split(",") if o.strip()] if text not in ("", "all") else list(OPS)
    unknown = [o for o in ops if o not in OPS]
    if unknown:
        raise ValueError(f"unknown row op {', '.join(unknown)} (known: {', '.join(OPS)})")
    return ops


def _interpreting() -> bool:
    from . import row_plan

    return row_plan.interpreting()


def _note(key: str, x=None) -> None:
    # The count is of eager calls; the op itself counts each launch (or trace) at run time
    # (rowkernels.call_counts()). Traced by Dynamo this is a constant False branch; torch <= 2.9
    # also runs the wrapper itself on fake tensors while it compiles (example values, AOT
    # tracing), which is no call of the program either.
    import torch

    if torch.compiler.is_compiling() or _is_fake(x):
        return
    _counts[key] += 1


def _is_fake(x) -> bool:
    try:
        from torch._subclasses.fake_tensor import is_fake
    except ImportError:
        return False
    return is_fake(x)


def _kernel_call_ok(x, *, dim=-1, dtype=None) -> bool:
    import torch

    if not isinstance(x, torch.Tensor) or dtype is not None or x.dim() == 0:
        return False
    if dim not in (-1, x.dim() - 1):
        return False
    if x.device.type != "cuda" and not _interpreting():
        return False
    # autograd is no reason to pass over: the ops have registered backwards
    return x.dtype in (torch.float16, torch.bfloat16, torch.float32)


def _softmax_like(op: str, original):
    def replaced(x, dim=None, *args, dtype=None, **kwargs):
        # F.softmax's _stacklevel only steers a warning about an implicit dim
        routable = not args and set(kwargs) <= {"_stacklevel"}
        if dim is None or not routable or not _kernel_call_ok(x, dim=dim, dtype=dtype):
            _note(f"{op}: passed over", x)
            return original(x, dim, *args, dtype=dtype, **kwargs) if dtype is not None \
                else original(x, dim, *args, **kwargs)
        _note(f"{op}: routed", x)
        import torch

        return getattr(torch.ops.tko, f"row_{op}")(x)

    replaced.__wrapped__ = original
    return replaced


def _norm_ok(x, normalized_shape, params) -> bool:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape or ())
    if len(shape) != 1 or not _kernel_call_ok(x) or x.shape[-1] != shape[0]:
        return False
    import torch

    return all(p is None or isinstance(p, torch.Tensor) for p in params)


def _layer_norm(original):
    def replaced(x, normalized_shape, weight=None, bias=None, eps=1e-5):
        if not _norm_ok(x, normalized_shape, (weight, bias)):
            _note("layer_norm: passed over", x)
            return original(x, normalized_shape, weight, bias, eps)
        _note("layer_norm: routed", x)
        import torch

        return torch.ops.tko.layer_norm(x, weight, bias, float(eps))

    replaced.__wrapped__ = original
    return replaced


def _rms_norm(original):
    def replaced(x, normalized_shape, weight=None, eps=None):
        if not _norm_ok(x, normalized_shape, (weight,)):
            _note("rms_norm: passed over", x)
            return original(x, normalized_shape, weight, eps)
        _note("rms_norm: routed", x)
        import torch

        # F.rms_norm's default eps is the dtype's machine epsilon
        value = torch.finfo(x.dtype).eps if eps is None else float(eps)
        return torch.ops.tko.rms_norm(x, weight, value)

    replaced.__wrapped__ = original
    return replaced


def _targets(op: str) -> list[tuple[object, str]]:
    import torch
    import torch.nn.functional as F

    return {"softmax": [(torch, "softmax"), (F, "softmax"), (torch.special, "softmax")],
            "log_softmax": [(torch, "log_softmax"), (F, "log_softmax"), (torch.special, "log_softmax")],
            "layer_norm": [(F, "layer_norm")],
            "rms_norm": [(F, "rms_norm")]}[op]


def install(ops: list[str]) -> list[str]:
    """Rebind the functions of ``ops``; returns the ``module.name`` of each function replaced."""
    from . import rowkernels

    if not rowkernels.OPS_REGISTERED:
        raise RuntimeError("this torch has no torch.library.custom_op: the row kernels cannot be swapped in")
    makers = {"softmax": lambda f: _softmax_like("softmax", f),
              "log_softmax": lambda f: _softmax_like("log_softmax", f),
              "layer_norm": _layer_norm, "rms_norm": _rms_norm}
    done = []
    for op in ops:
        for owner, attr in _targets(op):
            original = getattr(owner, attr, None)
            if original is None or hasattr(original, "__wrapped__"):
                continue
            setattr(owner, attr, makers[op](original))
            done.append(f"{owner.__name__}.{attr}")
    atexit.register(_report)
    return done


def counts() -> dict[str, int]:
    return dict(_counts)


def _report() -> None:
    from . import rowkernels

    launched = rowkernels.call_counts()
    text = ", ".join(f"{k} {v}" for k, v in sorted({**_counts, **launched}.items()))
    print(f"{PREFIX}: {text or 'no softmax/norm call reached the row kernels'}", file=sys.stderr)
