"""The plan of a row-kernel call: the device's row limits, the one-pass or chunked form and its
chunk plan, the warps, and the refusals (dtype, layout, device, weight shape, a row over the cap).
The ops, their kernels and the measurements behind these numbers: :mod:`tko.remedies.rowkernels`."""


# No ``from __future__ import annotations`` here: the kernels' ``tl.constexpr`` annotations and
# the custom ops' type hints must be real objects.

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Optional

import torch


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
    if next_pow2(n_cols) <= limit.max_row_elements:
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


def next_pow2(n: int) -> int:
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
    block = next_pow2(n_cols)

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
        guard = op == "rms_norm" and 0 < n_chunks <= chunked.row_guard and int32_rows(x)
        return RowPlan(op, n_rows, n_cols, block, chunked.num_warps, lim, chunk=chunk, note=note,
                       row_stats=chunked.row_stats and op in ("softmax", "log_softmax"),
                       n_chunks=n_chunks, row_guard=guard,
                       stream_out=guard or -(-n_cols // chunk) <= chunked.stream_out)
    warps = plan_num_warps(op, block, lim, x, weight, bias, backward=backward)
    return RowPlan(op, n_rows, n_cols, block, warps, lim)

def int32_rows(*rows: torch.Tensor) -> bool:
    """Every element of these row tensors (leading dims viewable as one) within int32 offsets
    of its first: the guarded RMSNorm's offsets (the output, contiguous, spans no more)."""
    return all(t.shape[0] * t.stride(0) < 2 ** 31 for t in rows)
