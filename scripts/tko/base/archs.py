"""GPU architecture facts and the proxy rule for DCU targets upstream Triton lacks.

Sources: LLVM's AMDGPU occupancy rules ("User Guide for AMDGPU Backend",
https://llvm.org/docs/AMDGPUUsage.html), flagos-ai/FlagTree
``third_party/hcu/lib/TritonHCUGPUToLLVM/TargetUtils.cpp``, PaddlePaddle ``cmake/hip.cmake``
and the public DCU samples (rocminfo / hipGetDeviceProperties of a BW1000, gfx936); each
DCU fact is cited where it is stated in references/dcu_notes.md (sections 1, 4 and 6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The DCU archs this skill targets by default; check_env flags anything else.
EXPECTED_DCU_ARCHS = ("gfx936", "gfx938")


@dataclass(frozen=True)
class ArchInfo:
    name: str                 # "gfx942", "sm_90"
    vendor: str               # "amd", "hygon", "nvidia"
    family: str               # "CDNA3", "GCN5", "Hopper", ...
    wave_size: int
    lds_bytes_per_cu: int | None = None
    vgprs_per_simd_lane: int | None = None   # unified VGPR file per lane (arch + acc)
    max_waves_per_simd: int | None = None
    vgpr_granule: int | None = None          # VGPR allocation granule (wave64)
    upstream_triton: bool = True             # upstream Triton's AMD backend compiles for it
    proxy: str | None = None                 # upstream target used when it does not
    product: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


ARCHS: dict[str, ArchInfo] = {a.name: a for a in (
    ArchInfo("gfx906", "amd", "GCN5", 64, 65536, 256, 10, 4, upstream_triton=False, proxy="gfx90a",
             product="MI50/MI60; Hygon Z100/Z100L",
             notes=("upstream Triton compiles gfx906 only from 3.8",)),
    ArchInfo("gfx908", "amd", "CDNA1", 64, 65536, 512, 8, 4, product="MI100",
             notes=("separate 256-entry arch and acc VGPR files",)),
    ArchInfo("gfx90a", "amd", "CDNA2", 64, 65536, 512, 8, 8, product="MI200"),
    ArchInfo("gfx942", "amd", "CDNA3", 64, 65536, 512, 8, 8, product="MI300"),
    ArchInfo("gfx950", "amd", "CDNA4", 64, 163840, 512, 8, 8, product="MI350"),
    ArchInfo("gfx926", "hygon", "DCU (CDNA-derived)", 64, 65536, None, None, upstream_triton=False,
             proxy="gfx90a", product="K100"),
    ArchInfo("gfx928", "hygon", "DCU (CDNA-derived)", 64, 65536, 512, None, upstream_triton=False,
             proxy="gfx942", product="K100_AI"),
    ArchInfo("gfx936", "hygon", "DCU (CDNA-derived)", 64, 65536, 768, 10, upstream_triton=False,
             proxy="gfx942", product="BW1000 (BW200)",
             notes=("Hygon ISA uses v_mmac_* instead of v_mfma_*",
                    "rocminfo of a BW1000 reports Max Waves Per CU 40 (10 per SIMD)",
                    "DTK clang passes -support-768-vgprs for gfx936/gfx938")),
    ArchInfo("gfx938", "hygon", "DCU (CDNA-derived)", 64, 65536, 768, None, upstream_triton=False,
             proxy="gfx942", product="BW1100/BW1101",
             notes=("Hygon ISA uses v_mmac_* instead of v_mfma_*; MLS matrix_load/store",)),
    ArchInfo("sm_80", "nvidia", "Ampere", 32, product="A100"),
    ArchInfo("sm_89", "nvidia", "Ada", 32),
    ArchInfo("sm_90", "nvidia", "Hopper", 32, product="H100/H200"),
    ArchInfo("sm_100", "nvidia", "Blackwell", 32),
)}


def torch_device_arch(props: Any, hip: bool = False) -> tuple[str | None, str | None]:
    """(arch, arch_full) of a ``torch.cuda.get_device_properties`` object.

    HIP builds (ROCm, Hygon DTK) name the arch in ``gcnArchName`` (``gfx938:sramecc+:xnack-``).
    CUDA builds of recent torch fill that field with the product name (``NVIDIA H200``), so there
    the arch is ``sm_<major><minor>``; ``hip`` is ``bool(torch.version.hip)``.
    """
    gcn = getattr(props, "gcnArchName", None) or None
    if hip or (gcn and str(gcn).startswith("gfx")):
        return (normalize(str(gcn)), str(gcn)) if gcn else (None, None)
    major, minor = getattr(props, "major", None), getattr(props, "minor", None)
    if major is None or minor is None:
        return None, None
    return f"sm_{major}{minor}", f"sm_{major}{minor}"


def normalize(arch: str) -> str:
    """'gfx938:sramecc+:xnack-' -> 'gfx938'; '90' / 'sm90' / 'sm_90a' -> 'sm_90'."""
    text = arch.strip().lower()
    text = text.split(":", 1)[0]
    if text.startswith("amdgcn-amd-amdhsa--"):
        text = text[len("amdgcn-amd-amdhsa--"):]
    if text.isascii() and text.isdigit():     # '²'.isdigit() is true too
        return f"sm_{text}"
    if text.startswith("sm") and not text.startswith("sm_"):
        text = "sm_" + text[2:]
    if text.startswith("sm_") and text.endswith("a"):
        text = text[:-1]
    return text


def info(arch: str) -> ArchInfo | None:
    return ARCHS.get(normalize(arch))


def is_nvidia(arch: str) -> bool:
    return normalize(arch).startswith("sm_")


def compile_target(arch: str) -> tuple[str, str | None]:
    """The upstream target to compile for and, if it is a stand-in, why.

    Returns ``(target_arch, proxy_note)``; ``proxy_note`` is None when the arch
    itself is compiled.  Unknown AMD archs are passed through unchanged: the
    installed Triton decides whether it knows them.
    """
    name = normalize(arch)
    known = ARCHS.get(name)
    if known is None or known.upstream_triton or known.proxy is None:
        return name, None
    note = (f"{name} ({known.product}) is not an upstream Triton target; compiled for the proxy "
            f"{known.proxy} instead. Memory-op families and metadata carry over; matrix "
            f"instructions, register limits and occupancy do not.")
    return known.proxy, note
