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

import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F

from ..base.errors import InputError

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
# Keyed by the arch name scripts/tko/base/archs.py normalises to, plus per-backend defaults.
ROW_LIMITS = {lim.key: lim for lim in (
    # LDS 64 KiB per CU, wave64, 1024 work-items per workgroup: references/dcu_notes.md
    # (section 1 "LDS (GROUP segment) 64 KB", section 6 "LDS 64 KiB per CU ... wave64") and
    # scripts/tko/base/archs.py ARCHS["gfx936"/"gfx938"].lds_bytes_per_cu.
    RowLimit("gfx936", 64, 16, 64 * 1024,
             "references/dcu_notes.md: BW1000 LDS 64 KiB per CU, wave64; archs.py gfx936"),
    RowLimit("gfx938", 64, 16, 64 * 1024,
             "references/dcu_notes.md: LDS 64 KiB per CU, wave64; archs.py gfx938"),
    # MI300: LDS 64 KiB per CU, wave64 (scripts/tko/base/archs.py ARCHS["gfx942"], the DCU proxy).
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


# The chunked form (rows over the limit's max_row_elements): how it walks a row, per (limit key,
# op): CHUNK (the block its loop reads), warps, and for softmax / log-softmax whether pass 1 keeps
# its running max and sum per lane (a CHUNK-long vector each; no cross-warp reduction until the
# passes meet) or per row (each chunk reduced to a scalar max and sum: one exp an element instead
# of two, two block reductions a chunk), and whether a row of whole chunks is walked by loops
# with a compile-time bound (unroll: no masks, the loops unrolled; else a runtime bound). Pass 1
# loads with evict_last and pass 2 with evict_first, as Inductor's looped reductions do, so that
# pass 2 finds the row in L2; fewer rows in flight (larger CHUNK, more warps, so fewer programs per
# SM) help it too. sm_90 is measured on an H200 at 2048 x 65536 (tests/fixtures/rowkernel_sweep_h200):
# chunk_probe (fp16, CHUNK 4096-16384 x 16/32 warps, runtime loops, two rounds within 0.5 %) found
# per-row stats at CHUNK 16384, 16 warps at 74 % of copy on softmax where per-lane stats at 4096 / 16
# (the plan before) reached 62.5 %; call10_unrolled (fp16 and bf16, both loop forms at four
# launches) found the norms unrolled at 16384 / 32 best (LayerNorm 77-79 %, RMSNorm 85 %, against
# 72-73 % and 80 % for the best runtime loop) and softmax / log-softmax 14-20 points worse unrolled.
class ChunkPlan(NamedTuple):
    chunk: int
    num_warps: int
    row_stats: bool               # softmax / log-softmax: per-row (True) or per-lane stats
    unroll: bool = True           # a row of whole chunks: loops with a compile-time bound
    row_guard: int = 0            # RMSNorm: _rms_norm_guarded_kernel on unrolled rows of up to
                                  # this many chunks (its note says why), 0 never
    stream_out: int = 0           # the output stored streamed (.cs) on rows of up to this many
                                  # chunks, 0 never (the guarded RMSNorm always streams)


# stream_out: on an H200 at 64k (4 chunks) the streamed store gained softmax 0.4-0.6,
# log-softmax 1.3-1.4, LayerNorm 3.5-4.2 and the chunked RMSNorm 3.5-3.6 points of copy in the
# plans' forms, and at 128k softmax 1.4, while the unrolled norms lost 0.5-1.1 there and
# LayerNorm's masked loop (rows not a whole number of chunks) 0.6-0.7 at 64k
# (call23_l2_rows/call29_chunked_cs, call31_stream_plan): all softmax rows, norm rows of up to 4
# chunks
CHUNK_PLANS = {
    ("sm_90", "softmax"): ChunkPlan(16384, 16, True, unroll=False, stream_out=64),
    ("sm_90", "log_softmax"): ChunkPlan(16384, 16, True, unroll=False, stream_out=64),
    ("sm_90", "layer_norm"): ChunkPlan(16384, 32, False, stream_out=4),
    # RMSNorm: the guarded kernel at 64k (4 chunks); at 128k it fell to 63.5 % of copy against
    # the chunked kernel's 77.7 % (call17_row_guard), so longer rows keep the chunked kernel
    ("sm_90", "rms_norm"): ChunkPlan(16384, 32, False, row_guard=4, stream_out=4),
}
# A (limit, op) not listed: the largest power of two up to DEFAULT_CHUNK with room for four fp32
# vectors in the limit's on-chip bytes (4096 on every 64 KiB DCU / AMD limit, 2048 on the 48 KiB
# CUDA default; 64 on a 1 KiB test limit), pick_num_warps(CHUNK) warps, per-lane stats and
# unrolled loops (what Inductor's static shapes give): not timed on those devices; offline
# (tests/fixtures/rowkernels_offline) gfx942 compiles them with no spill at 6-8 waves per SIMD.
DEFAULT_CHUNK = 4096
# Longest row the chunked form takes (4 MiB of fp32 a row); longer rows are refused as before.
MAX_CHUNKED_ELEMENTS = 1 << 20
FORMS = ("one_pass", "chunked")


def chunk_plan(limit: RowLimit, op: str) -> ChunkPlan:
    """CHUNK, warps, the form of the softmax stats, whether rows of whole chunks unroll, up to
    how many chunks RMSNorm takes the guarded kernel and the output is stored streamed, for the
    chunked form of ``op`` under ``limit`` (:data:`CHUNK_PLANS`, else the rule above: no
    streaming, untimed there)."""
    if (limit.key, op) in CHUNK_PLANS:
        return ChunkPlan(*CHUNK_PLANS[(limit.key, op)])
    chunk = max(1, min(DEFAULT_CHUNK, limit.max_row_elements // 4))
    return ChunkPlan(chunk, pick_num_warps(chunk, limit), False)


def unrolled_chunks(n_cols: int, chunk: int) -> int:
    """The chunk count the chunked kernel is compiled for (``N_CHUNKS``): ``n_cols / chunk``
    where the row is a whole number of chunks (its loops then end at a compile-time bound, with
    no masks: one compile per such row length, as Inductor's static shapes), else 0 (a runtime
    bound and masked loads)."""
    return n_cols // chunk if chunk and n_cols % chunk == 0 else 0


@dataclass(frozen=True)
class RowPlan:
    """What a call will do: launch a kernel (``reason is None``) or fall back, and why.

    ``form`` is the kernel that runs: ``"one_pass"`` (the row is one block of ``block``
    elements) or ``"chunked"`` (the row is over the limit: a loop over ``chunk``-element blocks,
    two passes; ``block`` is still the row's one-pass BLOCK and ``note`` says why); a refused
    plan's ``form`` is ``"reference"``."""

    op: str
    n_rows: int
    n_cols: int
    block: int
    num_warps: int
    limit: Optional[RowLimit]
    reason: Optional[str] = None
    chunk: Optional[int] = None
    note: Optional[str] = None
    row_stats: bool = False       # chunked softmax: pass 1 keeps a scalar max and sum per row
    n_chunks: int = 0             # chunked: the compile-time chunk count (unrolled_chunks), or 0
    row_guard: bool = False       # chunked RMSNorm, unrolled: _rms_norm_guarded_kernel runs
    stream_out: bool = False      # chunked: the output stored streamed (.cs; ChunkPlan.stream_out,
                                  # and always with row_guard)

    @property
    def use_kernel(self) -> bool:
        return self.reason is None

    @property
    def form(self) -> str:
        return "reference" if self.reason is not None else ("chunked" if self.chunk else "one_pass")


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
    return _cuda_limit(device.index if device.index is not None else torch.cuda.current_device())


@lru_cache(maxsize=None)
def _cuda_limit(index: int) -> RowLimit:
    # cached: a device's arch does not change, and every eager call plans against it
    hip = bool(getattr(torch.version, "hip", None))
    try:
        from tko.base.archs import normalize, torch_device_arch
        arch, _ = torch_device_arch(torch.cuda.get_device_properties(index), hip=hip)
        arch = normalize(arch) if arch else None
    except Exception:
        arch = None
    return arch_limit(arch, hip)


def arch_limit(arch: Optional[str], hip: Optional[bool] = None) -> RowLimit:
    """The :data:`ROW_LIMITS` row of an arch name, else its backend's default (``hip`` as given,
    else ``sm_*`` CUDA and ``gfx*`` HIP), else the interpreter's."""
    if arch in ROW_LIMITS:
        return ROW_LIMITS[arch]
    if hip is None:
        name = str(arch or "")
        hip = True if name.startswith("gfx") else False if name.startswith("sm_") else None
    return ROW_LIMITS["interpreter" if hip is None else "hip" if hip else "cuda"]


def row_form(n_cols: int, limit: RowLimit) -> str:
    """The form a row of ``n_cols`` takes under ``limit``, by its length alone: ``"one_pass"``
    (BLOCK fits), ``"chunked"`` (up to :data:`MAX_CHUNKED_ELEMENTS`) or ``"refused"``."""
    if _next_pow2(n_cols) <= limit.max_row_elements:
        return "one_pass"
    return "chunked" if n_cols <= MAX_CHUNKED_ELEMENTS else "refused"


def pick_num_warps(block: int, limit: RowLimit) -> int:
    """Warps for a one-row block: about ELEMENTS_PER_THREAD fp32 values a thread, a power of two."""
    want = max(1, block // (limit.wave_size * ELEMENTS_PER_THREAD))
    return min(limit.max_num_warps, 1 << (want.bit_length() - 1))


# Forward launches whose warps differ from pick_num_warps, keyed by (limit key, op, BLOCK, input
# bytes per element, weight and bias both given). Offline sm_90 compiles
# (tests/fixtures/rowkernel_sweep_h200/layer_norm_16k_offline.md, Triton 3.6 and 3.9): the fp16 /
# bf16 LayerNorm with weight and bias at BLOCK 16384 takes 41-44 registers at 32 warps, over the
# 32 that let two 1024-thread programs share an SM, so one program (32 KiB of row) runs per SM;
# it measured 58.8 % of copy where every 16k row kernel at two programs per SM reached 89-94 %.
# 8 warps takes 127 registers, no spill, two programs per SM. The backward keeps
# pick_num_warps: at 8 warps it spills kilobytes.
FORWARD_NUM_WARPS = {
    ("sm_90", "layer_norm", 16384, 2, True): 8,
}


def plan_num_warps(op: str, block: int, limit: RowLimit, x: torch.Tensor, weight=None, bias=None,
                   *, backward: bool = False) -> int:
    """Warps of a planned launch: :data:`FORWARD_NUM_WARPS` for a forward it lists, else
    :func:`pick_num_warps`."""
    if not backward:
        key = (limit.key, op, block, x.element_size(), weight is not None and bias is not None)
        if key in FORWARD_NUM_WARPS:
            return FORWARD_NUM_WARPS[key]
    return pick_num_warps(block, limit)


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
             limit: Optional[RowLimit] = None, backward: bool = False) -> RowPlan:
    """Decide whether ``op`` on ``x`` runs a kernel, and which form; ``reason`` says why not.

    A row whose BLOCK fits ``limit`` runs the one-pass kernel; a longer one, up to
    :data:`MAX_CHUNKED_ELEMENTS`, the chunked form (``form="chunked"``). ``backward`` plans the
    op's backward kernel: the same checks and BLOCK, its own warps, and one-pass only (a row over
    the limit is refused: the backward falls back to the torch formula)."""
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
    chunk = note = None
    form = row_form(n_cols, lim)
    if form != "one_pass":
        over = (f"row of {n_cols} (BLOCK {block}) exceeds {lim.max_row_elements} fp32 "
                f"elements on {lim.key} ({lim.on_chip_bytes // 1024} KiB on chip)")
        if backward:
            return refuse(f"{over}; the backward kernels are one-pass only", lim)
        if form == "refused":
            return refuse(f"{over} and the chunked form's cap of {MAX_CHUNKED_ELEMENTS}", lim)
        chunked = chunk_plan(lim, op)
        chunk = chunked.chunk
        note = f"{over}: chunked, two passes over {chunk}-element chunks"
    if x.device.type != "cuda" and not interpreting():
        return refuse(f"{x.device.type} tensor and Triton was not imported with TRITON_INTERPRET=1", lim)
    if chunk is not None:
        n_chunks = unrolled_chunks(n_cols, chunk) if chunked.unroll else 0
        guard = op == "rms_norm" and 0 < n_chunks <= chunked.row_guard and _int32_rows(x)
        return RowPlan(op, n_rows, n_cols, block, chunked.num_warps, lim, chunk=chunk, note=note,
                       row_stats=chunked.row_stats and op in ("softmax", "log_softmax"),
                       n_chunks=n_chunks, row_guard=guard,
                       stream_out=guard or -(-n_cols // chunk) <= chunked.stream_out)
    warps = plan_num_warps(op, block, lim, x, weight, bias, backward=backward)
    return RowPlan(op, n_rows, n_cols, block, warps, lim)

# --- references -----------------------------------------------------------------------------

def _out_dtype(x: torch.Tensor) -> torch.dtype:
    return x.dtype if x.is_floating_point() else torch.float32


def _acc(x: torch.Tensor) -> torch.Tensor:
    return x.double() if x.dtype == torch.float64 else x.float()


def _stats_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


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

    def _softmax_bwd_kernel(DY, Y, DX, stride_dy, stride_y, stride_dx, n_cols, BLOCK: tl.constexpr,
                            LOG: tl.constexpr):
        # the tail loads 0 for both: it adds nothing to either sum and is never stored
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        dy = tl.load(DY + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.load(Y + row * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
        if LOG:
            dx = dy - tl.exp(y) * tl.sum(dy, axis=0)
        else:
            dx = y * (dy - tl.sum(dy * y, axis=0))
        tl.store(DX + row * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=mask)

    # tl.cast(eps, tl.float32) in the norms: a direct launch passes a Python float as fp32, but
    # Inductor types a float argument of a user kernel fp64 (torch 2.11), and an fp64 eps made
    # the row's statistics fp64: on an H200 the chunked RMSNorm took 42 registers instead of 32
    # (one program an SM, not two) and ran 1.27x slower, LayerNorm 49 and 1.43x
    # (tests/fixtures/rowkernel_sweep_h200/call14_triton_op_fp64_eps). tl.cast, not eps.to():
    # Inductor's mutation analysis builds the kernel with eps a Python float, which has no .to(),
    # and on that failure takes every argument as written and copies the input first
    # (call15_triton_op_input_copied: 1.9-2.2x).
    def _layer_norm_kernel(X, Y, W, B, Mean, Rstd, stride_x, stride_y, n_cols, eps,
                           BLOCK: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                           STATS: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        xc = tl.where(mask, x - mean, 0.0)
        var = tl.sum(xc * xc, axis=0) / n_cols
        rstd = 1.0 / tl.sqrt(var + tl.cast(eps, tl.float32))
        y = xc * rstd
        if HAS_W:
            y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
        if STATS:
            tl.store(Mean + row, mean)
            tl.store(Rstd + row, rstd)

    def _rms_norm_kernel(X, Y, W, Rstd, stride_x, stride_y, n_cols, eps, BLOCK: tl.constexpr,
                         HAS_W: tl.constexpr, STATS: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        ms = tl.sum(x * x, axis=0) / n_cols
        rstd = 1.0 / tl.sqrt(ms + tl.cast(eps, tl.float32))
        y = x * rstd
        if HAS_W:
            y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)
        if STATS:
            tl.store(Rstd + row, rstd)

    def _norm_bwd_kernel(DY, X, W, Mean, Rstd, DX, DW, DB, stride_dy, stride_x, stride_dx, n_rows,
                         n_cols, rows_per_program, BLOCK: tl.constexpr, CENTER: tl.constexpr,
                         HAS_W: tl.constexpr, HAS_DW: tl.constexpr, HAS_DB: tl.constexpr):
        # One row at a time held on chip; a program walks rows_per_program consecutive rows and
        # writes its fp32 partial sums of dweight / dbias as row ``pid`` of DW / DB (no atomics).
        pid = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        if HAS_W:
            w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        dw_acc = tl.zeros([BLOCK], dtype=tl.float32)
        db_acc = tl.zeros([BLOCK], dtype=tl.float32)
        first = pid * rows_per_program
        # a fixed trip count, rows past the end masked off (they load zeros and add nothing); a
        # while loop, since Triton 3.3's interpreter cannot take a runtime int as a range() bound
        i = 0
        while i < rows_per_program:
            row = first + i
            i += 1
            row_mask = cols < tl.where(row < n_rows, n_cols, 0)   # a row past the end: no column
            x = tl.load(X + row * stride_x + cols, mask=row_mask, other=0.0).to(tl.float32)
            dy = tl.load(DY + row * stride_dy + cols, mask=row_mask, other=0.0).to(tl.float32)
            last = tl.minimum(row, n_rows - 1)    # in bounds: a masked-off row's x and dy are 0
            rstd = tl.load(Rstd + last)
            if CENTER:
                xhat = tl.where(row_mask, (x - tl.load(Mean + last)) * rstd, 0.0)
            else:
                xhat = x * rstd
            g = dy
            if HAS_W:
                g = dy * w
            dx = g - xhat * (tl.sum(g * xhat, axis=0) / n_cols)
            if CENTER:
                dx = dx - tl.sum(g, axis=0) / n_cols
            tl.store(DX + row * stride_dx + cols, (dx * rstd).to(DX.dtype.element_ty), mask=row_mask)
            if HAS_DW:
                dw_acc += dy * xhat
            if HAS_DB:
                db_acc += dy
        if HAS_DW:
            tl.store(DW + pid * n_cols + cols, dw_acc, mask=mask)
        if HAS_DB:
            tl.store(DB + pid * n_cols + cols, db_acc, mask=mask)

    # The chunked form: one row per program, walked in CHUNK-element blocks twice (pass 1 reduces,
    # pass 2 rereads the row, from L2 while it is still there, and writes). While loops, as in
    # _norm_bwd_kernel: Triton 3.3's interpreter takes no runtime int as a range() bound.
    # N_CHUNKS > 0 (the row is N_CHUNKS * CHUNK long, RowPlan.n_chunks): the loops end at a
    # compile-time bound and the loads carry no mask, so the compiler unrolls them and issues a
    # row's loads back to back, as Inductor's loops over a static row length are (its RMSNorm at
    # 64k: every load of pass 1 in flight, 32 registers, 90 % of copy on an H200, where the same
    # launch with a runtime bound reached 80 %; tests/fixtures/rowkernel_sweep_h200/call9_pass2_probe).
    @triton.jit
    def _load_chunk(row_ptr, c, n_cols, other, EVEN: tl.constexpr, POLICY: tl.constexpr):
        if EVEN:
            return tl.load(row_ptr + c, eviction_policy=POLICY).to(tl.float32)
        return tl.load(row_ptr + c, mask=c < n_cols, other=other, eviction_policy=POLICY).to(tl.float32)

    @triton.jit
    def _store_chunk(row_ptr, c, n_cols, v, EVEN: tl.constexpr, STREAM: tl.constexpr):
        # STREAM: stored .cs, so that written rows leave L2 before the rows pass 2 reads back
        y = v.to(row_ptr.dtype.element_ty)
        if STREAM:
            if EVEN:
                tl.store(row_ptr + c, y, cache_modifier=".cs")
            else:
                tl.store(row_ptr + c, y, mask=c < n_cols, cache_modifier=".cs")
        elif EVEN:
            tl.store(row_ptr + c, y)
        else:
            tl.store(row_ptr + c, y, mask=c < n_cols)

    @triton.jit
    def _row_end(n_cols, CHUNK: tl.constexpr, N_CHUNKS: tl.constexpr):
        if N_CHUNKS > 0:
            return N_CHUNKS * CHUNK
        return n_cols

    def _softmax_chunked_kernel(X, Y, stride_x, stride_y, n_cols, CHUNK: tl.constexpr,
                                LOG: tl.constexpr, ROW_STATS: tl.constexpr, N_CHUNKS: tl.constexpr,
                                STREAM: tl.constexpr):
        # online softmax: a running max m and s = sum(exp(x - m)), s rescaled by exp(m_old - m_new)
        # when m grows; per lane (CHUNK-long m and s, merged once after pass 1) or, ROW_STATS, per
        # row (each chunk reduced to its max and sum: one exp an element). -inf entries add exact
        # zeros and a max that has seen only -inf keeps s = 0 (no -inf - -inf); a NaN or +inf entry
        # makes s NaN, so the row comes out NaN as torch's does, and a row of -inf gives
        # exp(-inf - -inf) = NaN
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, CHUNK)
        x_row = X + row * stride_x
        y_row = Y + row * stride_y
        end = _row_end(n_cols, CHUNK, N_CHUNKS)
        if ROW_STATS:
            m = tl.max(tl.full([CHUNK], float("-inf"), tl.float32), axis=0)
            s = tl.sum(tl.zeros([CHUNK], dtype=tl.float32), axis=0)
        else:
            m = tl.full([CHUNK], float("-inf"), tl.float32)
            s = tl.zeros([CHUNK], dtype=tl.float32)
        start = 0
        while start < end:
            x = _load_chunk(x_row, start + cols, n_cols, float("-inf"), N_CHUNKS > 0, "evict_last")
            if ROW_STATS:
                m_new = tl.maximum(m, tl.max(x, axis=0))
            else:
                m_new = tl.maximum(m, x)
            alpha = tl.where(m == m_new, 1.0, tl.exp(m - m_new))
            e = tl.where(x == float("-inf"), 0.0, tl.exp(x - m_new))
            if ROW_STATS:
                s = s * alpha + tl.sum(e, axis=0)
            else:
                s = s * alpha + e
            m = m_new
            start += CHUNK
        if ROW_STATS:
            row_max = m
            total = s
        else:
            row_max = tl.max(m, axis=0)
            total = tl.sum(s * tl.where(m == row_max, 1.0, tl.exp(m - row_max)), axis=0)
        log_total = tl.log(total)
        start = 0
        while start < end:
            c = start + cols
            z = _load_chunk(x_row, c, n_cols, float("-inf"), N_CHUNKS > 0, "evict_first") - row_max
            if LOG:
                y = z - log_total
            else:
                y = tl.exp(z) / total
            _store_chunk(y_row, c, n_cols, y, N_CHUNKS > 0, STREAM)
            start += CHUNK

    def _layer_norm_chunked_kernel(X, Y, W, B, Mean, Rstd, stride_x, stride_y, n_cols, eps,
                                   CHUNK: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                                   STATS: tl.constexpr, N_CHUNKS: tl.constexpr, STREAM: tl.constexpr):
        # pass 1: per lane the fp32 sums of d and d * d, d = x - x[0]: shifted by the row's first
        # element, so that var = E[d^2] - E[d]^2 does not cancel when |mean| >> std (unshifted,
        # an fp32 row of mean 300 and std 1 loses about 1e-2 of its variance); pass 2
        # normalizes d - E[d], not x - mean, which would round at the size of the mean.
        # NaN / inf rows give NaN, as F.layer_norm does.
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, CHUNK)
        x_row = X + row * stride_x
        y_row = Y + row * stride_y
        end = _row_end(n_cols, CHUNK, N_CHUNKS)
        shift = tl.load(x_row).to(tl.float32)
        s1 = tl.zeros([CHUNK], dtype=tl.float32)
        s2 = tl.zeros([CHUNK], dtype=tl.float32)
        start = 0
        while start < end:
            c = start + cols
            x = _load_chunk(x_row, c, n_cols, 0.0, N_CHUNKS > 0, "evict_last")
            d = tl.where(c < end, x - shift, 0.0)      # `end`: a constant when unrolled
            s1 += d
            s2 += d * d
            start += CHUNK
        d_mean = tl.sum(s1, axis=0) / n_cols
        var = tl.sum(s2, axis=0) / n_cols - d_mean * d_mean
        var = tl.where(var < 0.0, 0.0, var)      # rounding only; a NaN stays NaN
        mean = shift + d_mean
        rstd = 1.0 / tl.sqrt(var + tl.cast(eps, tl.float32))
        start = 0
        while start < end:
            c = start + cols
            x = _load_chunk(x_row, c, n_cols, 0.0, N_CHUNKS > 0, "evict_first")
            y = ((x - shift) - d_mean) * rstd
            if HAS_W:
                y = y * _load_chunk(W, c, n_cols, 0.0, N_CHUNKS > 0, "")
            if HAS_B:
                y = y + _load_chunk(B, c, n_cols, 0.0, N_CHUNKS > 0, "")
            _store_chunk(y_row, c, n_cols, y, N_CHUNKS > 0, STREAM)
            start += CHUNK
        if STATS:
            tl.store(Mean + row, mean)
            tl.store(Rstd + row, rstd)

    def _rms_norm_chunked_kernel(X, Y, W, Rstd, stride_x, stride_y, n_cols, eps,
                                 CHUNK: tl.constexpr, HAS_W: tl.constexpr, STATS: tl.constexpr,
                                 N_CHUNKS: tl.constexpr, STREAM: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, CHUNK)
        x_row = X + row * stride_x
        y_row = Y + row * stride_y
        end = _row_end(n_cols, CHUNK, N_CHUNKS)
        s2 = tl.zeros([CHUNK], dtype=tl.float32)
        start = 0
        while start < end:
            x = _load_chunk(x_row, start + cols, n_cols, 0.0, N_CHUNKS > 0, "evict_last")
            s2 += x * x
            start += CHUNK
        rstd = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / n_cols + tl.cast(eps, tl.float32))
        start = 0
        while start < end:
            c = start + cols
            y = _load_chunk(x_row, c, n_cols, 0.0, N_CHUNKS > 0, "evict_first") * rstd
            if HAS_W:
                y = y * _load_chunk(W, c, n_cols, 0.0, N_CHUNKS > 0, "")
            _store_chunk(y_row, c, n_cols, y, N_CHUNKS > 0, STREAM)
            start += CHUNK
        if STATS:
            tl.store(Rstd + row, rstd)

    def _rms_norm_guarded_kernel(X, Y, W, Rstd, stride_x, stride_y, n_rows, n_cols, eps,
                                 CHUNK: tl.constexpr, HAS_W: tl.constexpr, STATS: tl.constexpr,
                                 N_CHUNKS: tl.constexpr):
        # The chunked RMSNorm on a row of N_CHUNKS whole chunks, addressed as Inductor's looped
        # RMSNorm addresses it (RowPlan.row_guard): int32 offsets from X, every load and store
        # under the (always true) row mask, the weight loaded evict_last. ptxas then streams
        # pass 2 in order: on an H200 at 2048 x 65536 89.6 % of copy (fp16) and 87.8 % (bf16)
        # against 85.6 % for the chunked kernel; each trait alone gained nothing, the same traits
        # behind constexpr switches inside the chunked kernel lost 8 points (so it is a kernel of
        # its own), and at 131072 columns it lost 14: with 8 chunks its pass 1 keeps two loads in
        # flight, each with its own 64-bit address, so the plan takes it up to 4 chunks only
        # (tests/fixtures/rowkernel_sweep_h200/call17_row_guard). Its DRAM traffic is the floor
        # (ncu: 256.3 MiB read for the 256 MiB input, pass 2 all from L2; the chunked kernel
        # 300-304 MiB); the streamed store added 1.5-2.5 points (91.3 % fp16, 88.9-90.3 % bf16),
        # while a persistent grid, maxnreg 32, other launches, pass 1 of the next row run
        # inside pass 2 and rows kept in registers between the passes all lost (call23_l2_rows,
        # call32_held_rows). Inductor's tuned modes reach this launch and the same DRAM floor
        # (call33_tuning_draws): at 64k fp16 the two are level.
        pid = tl.program_id(0)
        cols = tl.arange(0, CHUNK)
        ok = tl.full([CHUNK], 0, tl.int32) + pid < n_rows
        x_off, y_off = pid * stride_x, pid * stride_y
        end = N_CHUNKS * CHUNK
        s2 = tl.zeros([CHUNK], dtype=tl.float32)
        start = 0
        while start < end:
            x = tl.load(X + (x_off + start + cols), mask=ok, other=0.0, eviction_policy="evict_last")
            x = x.to(tl.float32)
            s2 += x * x
            start += CHUNK
        rstd = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / n_cols + tl.cast(eps, tl.float32))
        start = 0
        while start < end:
            c = start + cols
            x = tl.load(X + (x_off + c), mask=ok, other=0.0, eviction_policy="evict_first")
            if HAS_W:
                w = tl.load(W + c, eviction_policy="evict_last")
                y = x.to(tl.float32) * rstd * w.to(tl.float32)
            else:
                y = x.to(tl.float32) * rstd
            # streamed (.cs): written rows leave L2 first, so the rows pass 2 reads back stay
            tl.store(Y + (y_off + c), y.to(Y.dtype.element_ty), mask=ok, cache_modifier=".cs")
            start += CHUNK
        if STATS:
            tl.store(Rstd + pid, rstd)

_JITTED: dict = {}


def _kernels() -> dict:
    """The kernels jit-ed for the current mode (compiled or interpreted)."""
    mode = interpreting()
    if mode not in _JITTED:
        _JITTED[mode] = {"softmax": triton.jit(_softmax_kernel),
                         "softmax_bwd": triton.jit(_softmax_bwd_kernel),
                         "layer_norm": triton.jit(_layer_norm_kernel),
                         "rms_norm": triton.jit(_rms_norm_kernel),
                         "norm_bwd": triton.jit(_norm_bwd_kernel),
                         "softmax_chunked": triton.jit(_softmax_chunked_kernel),
                         "layer_norm_chunked": triton.jit(_layer_norm_chunked_kernel),
                         "rms_norm_chunked": triton.jit(_rms_norm_chunked_kernel),
                         "rms_norm_guarded": triton.jit(_rms_norm_guarded_kernel)}
    return _JITTED[mode]


def _launchables(t: torch.Tensor) -> dict:
    """The kernels as a launch on ``t`` takes them: wrapped by wrap_triton while a triton op's
    function is traced (fake tensors, or a dispatch mode such as make_fx's), so that the graph
    holds the launch; the jitted kernels themselves otherwise (a wrapped launch in eager goes
    through a higher-order op, much slower)."""
    if USE_TRITON_OP and (_traced(t) or _dispatch_mode_active()):
        return {name: torch.library.wrap_triton(k) for name, k in _kernels().items()}
    return _kernels()


def _dispatch_mode_active() -> bool:
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode
    except ImportError:  # pragma: no cover - every torch with triton_op has it
        return False
    return _get_current_dispatch_mode() is not None


def _stats_like(x: torch.Tensor, want: bool) -> Optional[torch.Tensor]:
    return torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device) if want else None


def _launch(plan: RowPlan, x: torch.Tensor, weight=None, bias=None, eps: float = 0.0,
            stats: bool = False):
    """The forward kernel of ``plan.form``: ``(y, mean, rstd)``; the stats are None unless
    ``stats`` (a norm). Both forms take the same arguments, the block as BLOCK or CHUNK."""
    x2 = x.view(-1, plan.n_cols)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    mean = _stats_like(x, stats and plan.op == "layer_norm")
    rstd = _stats_like(x, stats and plan.op in ("layer_norm", "rms_norm"))
    if plan.n_rows == 0:
        return y, mean, rstd
    y2 = y.view(-1, plan.n_cols)
    k = _launchables(x)
    grid = (plan.n_rows,)
    if plan.form == "chunked":
        common = dict(CHUNK=plan.chunk, N_CHUNKS=plan.n_chunks, num_warps=plan.num_warps)
        if not plan.row_guard:           # the guarded RMSNorm always streams
            common["STREAM"] = plan.stream_out
        form = "_chunked"
    else:
        common, form = dict(BLOCK=plan.block, num_warps=plan.num_warps), ""
    # an absent pointer (weight, bias, stats) is passed as x2: the kernel never touches it
    if plan.op in ("softmax", "log_softmax"):
        if plan.form == "chunked":
            common["ROW_STATS"] = plan.row_stats
        k["softmax" + form][grid](x2, y2, x2.stride(0), y2.stride(0), plan.n_cols,
                                  LOG=plan.op == "log_softmax", **common)
    elif plan.op == "layer_norm":
        k["layer_norm" + form][grid](x2, y2, weight if weight is not None else x2,
                                     bias if bias is not None else x2,
                                     mean if stats else x2, rstd if stats else x2,
                                     x2.stride(0), y2.stride(0), plan.n_cols, float(eps),
                                     HAS_W=weight is not None, HAS_B=bias is not None,
                                     STATS=stats, **common)
    else:
        rows = ()
        if plan.form == "chunked" and plan.row_guard:
            form, rows = "_guarded", (plan.n_rows,)
        k["rms_norm" + form][grid](x2, y2, weight if weight is not None else x2,
                                   rstd if stats else x2, x2.stride(0), y2.stride(0), *rows,
                                   plan.n_cols, float(eps), HAS_W=weight is not None, STATS=stats,
                                   **common)
    return y, mean, rstd


def _int32_rows(*rows: torch.Tensor) -> bool:
    """Every element of these row tensors (leading dims viewable as one) within int32 offsets
    of its first: the guarded RMSNorm's offsets (the output, contiguous, spans no more)."""
    return all(t.shape[0] * t.stride(0) < 2 ** 31 for t in rows)


def _rows(t: torch.Tensor, n_cols: int) -> torch.Tensor:
    """``t`` as (rows, n_cols) with unit column stride; a copy only when its layout has none.

    Gradients arrive in any layout (``sum().backward()`` sends a stride-0 expanded one)."""
    if n_cols <= 1 or t.stride(-1) == 1:
        try:
            return t.view(-1, n_cols)
        except RuntimeError:
            pass
    return t.contiguous().view(-1, n_cols)


def _launch_softmax_bwd(plan: RowPlan, dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    dx = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    if plan.n_rows == 0:
        return dx
    dy2, y2, dx2 = _rows(dy, plan.n_cols), y.view(-1, plan.n_cols), dx.view(-1, plan.n_cols)
    _launchables(y)["softmax_bwd"][(plan.n_rows,)](
        dy2, y2, dx2, dy2.stride(0), y2.stride(0), dx2.stride(0), plan.n_cols, BLOCK=plan.block,
        LOG=plan.op == "log_softmax", num_warps=plan.num_warps)
    return dx


# Programs per SM of the norm backward while it reduces dweight / dbias: enough to fill the
# device, few enough that the fp32 partial-sum buffer stays a small fraction of dx.
PARTIALS_PER_SM = 4
# The interpreter has no SMs; a few programs so that each walks several rows.
INTERPRETER_PARTIALS = 4


def _rows_per_program(n_rows: int, device: torch.device, reduce_params: bool) -> int:
    """Rows each backward program walks: one when no parameter gradient is reduced."""
    if not reduce_params:
        return 1
    if device.type == "cuda":
        programs = PARTIALS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        programs = INTERPRETER_PARTIALS
    return max(1, -(-n_rows // programs))


def _launch_norm_bwd(plan: RowPlan, dy, x, weight, mean, rstd, need_dw: bool, need_db: bool):
    """dx, and dweight / dbias (each None when not wanted) summed from the programs' partials."""
    n, dev = plan.n_cols, x.device
    dx = torch.empty(x.shape, dtype=x.dtype, device=dev)
    if plan.n_rows == 0:
        zeros = torch.zeros(n, dtype=torch.float32, device=dev)
        return dx, zeros.to(weight.dtype) if need_dw else None, zeros if need_db else None
    per = _rows_per_program(plan.n_rows, dev, need_dw or need_db)
    grid = -(-plan.n_rows // per)
    dw = torch.empty(grid, n, dtype=torch.float32, device=dev) if need_dw else None
    db = torch.empty(grid, n, dtype=torch.float32, device=dev) if need_db else None
    dy2, x2, dx2 = _rows(dy, n), x.view(-1, n), dx.view(-1, n)
    _launchables(x)["norm_bwd"][(grid,)](
        dy2, x2, weight if weight is not None else x2, mean if mean is not None else rstd, rstd,
        dx2, dw if need_dw else dx2, db if need_db else dx2, dy2.stride(0), x2.stride(0),
        dx2.stride(0), plan.n_rows, n, per, BLOCK=plan.block, CENTER=mean is not None,
        HAS_W=weight is not None, HAS_DW=need_dw, HAS_DB=need_db, num_warps=plan.num_warps)
    # the fixed split into programs makes the order of this sum, and so the result, fixed
    return dx, dw.sum(0).to(weight.dtype) if need_dw else None, db.sum(0) if need_db else None


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


def _traced(t: torch.Tensor) -> bool:
    """True when ``t`` is a tracing stand-in (AOTAutograd traces a backward on fake tensors)."""
    try:
        from torch._subclasses.fake_tensor import is_fake
    except ImportError:  # pragma: no cover - torch without fake tensors cannot trace either
        return False
    return is_fake(t)


def _count_torch_backward(op: str, dy: torch.Tensor) -> None:
    """``<op>_bwd: torch`` for each eager run of the formula; traced into a compiled backward it
    counts once per trace (the compiled graph then runs it without Python)."""
    key = f"{op}_bwd: torch" + (" (traced into a compiled backward)" if _traced(dy) else "")
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
    if USE_TRITON_OP and on is not None and _traced(on):
        tags.append("traced into a compiled graph")
    # every launch key ends in ': kernel': trials read ': kernel N' as launched
    key = (plan.op + suffix + (f" ({', '.join(tags)})" if tags else "")
           + (": kernel" if plan.use_kernel else f": reference ({plan.reason})"))
    _CALLS[key] = _CALLS.get(key, 0) + 1


def _softmax_forward(op: str, x: torch.Tensor, limit=None):
    plan = plan_row(op, x, limit=limit)
    out = _launch(plan, x)[0] if plan.use_kernel else REFERENCES[op](x)
    _count(plan, on=x)
    return out, plan


def _norm_forward(op: str, x, weight, bias, eps: float, stats: bool, limit=None):
    """``(out, mean, rstd, plan)``; mean / rstd only with ``stats`` (mean only for LayerNorm)."""
    plan = plan_row(op, x, weight, bias, limit=limit)
    center = op == "layer_norm"
    if plan.use_kernel:
        out, mean, rstd = _launch(plan, x, weight, bias, eps, stats=stats)
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
    dx = _launch_softmax_bwd(plan, dy, y) if plan.use_kernel else ref(dy, y)
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
        dx, dw, db = _launch_norm_bwd(plan, dy, x, weight, mean, rstd, need_dw, need_db)
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

# The ops are torch.library.triton_op (torch 2.6+) where Triton compiles: under torch.compile
# AOTAutograd traces into the op's function (the kernels launched through wrap_triton, the plan
# made at trace time) and Inductor launches the kernel from its generated code, with none of this
# module's Python left at run time. As an opaque custom_op each call paid the op's Python: on an
# H200 (torch 2.11) the replaced RMSNorm at 2048 x 65536 spent 0.13 ms of host time a step
# against 0.146 ms of kernel; a call of the custom op cost the host 88 us, 31 us of it the launch
# and 14 us the plan (tests/fixtures/rowkernel_sweep_h200/call12_custom_op_host_cost). Elsewhere
# (older torch; the interpreter, whose kernels wrap_triton takes only from torch 2.13) they stay
# opaque custom ops (custom_op exists from 2.4), run at each call.
USE_TRITON_OP = (hasattr(torch.library, "triton_op") and hasattr(torch.library, "wrap_triton")
                 and triton is not None and not interpreting())
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
        return torch.empty(x.shape, dtype=_out_dtype(x), device=x.device)

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
        mean = torch.empty(shape, dtype=_stats_dtype(x), device=x.device)
        return torch.empty(x.shape, dtype=_out_dtype(x), device=x.device), mean, mean.clone()

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
    return t if t is not None else torch.empty(0, dtype=_stats_dtype(x), device=x.device)


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
