"""Waves per SIMD of an AMD kernel from its registers, LDS and warp count.

The rules follow LLVM's AMDGPU occupancy logic ("User Guide for AMDGPU Backend",
https://llvm.org/docs/AMDGPUUsage.html) and AMD's ``occ.sh`` (the occupancy steps of the ROCm
guide "Optimizing Triton kernels", ROCm 6.1,
https://rocm.docs.amd.com/en/docs-6.1.0/how-to/llm-fine-tuning-optimization/optimizing-triton-kernel.html):

* VGPRs: ``min(max_waves, file // roundup(vgpr_count, granule))``.  On gfx90a /
  gfx942 / gfx950 the file is the unified 512-entry one (arch + acc VGPRs, so
  ``.vgpr_count`` already includes AGPRs), granule 8, at most 8 waves; on
  gfx906 / gfx908 it is 256 entries, granule 4, at most 10 / 8 waves.
* SGPRs (GFX8+): <= 80 -> 10, <= 88 -> 9, <= 100 -> 8, else 7 waves.
* Workgroups: a workgroup of ``num_warps`` waves is spread over the 4 SIMDs of a
  CU, so a CU holds ``floor(waves_per_simd * 4 / num_warps)`` of them, and
  ``floor(lds_per_cu / shared)`` by LDS.  The effective waves/SIMD is
  ``workgroups * num_warps / 4``.

Triton allocates LDS dynamically, so LLVM's ``; Occupancy:`` comment never sees
it: :func:`amd_occupancy` reports where the two disagree.
"""

from __future__ import annotations

from ..base import archs

SIMDS_PER_CU = 4


def _round_up(value: int, granule: int) -> int:
    return -(-value // granule) * granule


def sgpr_limit(sgprs: int | None) -> int | None:
    if not sgprs:
        return None
    if sgprs <= 80:
        return 10
    if sgprs <= 88:
        return 9
    if sgprs <= 100:
        return 8
    return 7


def vgpr_limit(vgprs: int, file_size: int, granule: int, max_waves: int) -> int:
    if vgprs <= 0:
        return max_waves
    return min(max_waves, file_size // _round_up(vgprs, granule))


def _register_file(name: str, arch_info, notes: list) -> tuple:
    """(VGPR file entries per lane, max waves per SIMD, allocation granule) of an AMD arch; a
    Hygon arch (rules not public) or a missing figure takes its proxy's."""
    file_size = arch_info.vgprs_per_simd_lane
    max_waves = arch_info.max_waves_per_simd
    granule = arch_info.vgpr_granule
    if arch_info.vendor == "hygon" or file_size is None or max_waves is None or granule is None:
        proxy = archs.info(arch_info.proxy or "gfx942")
        file_size = file_size or proxy.vgprs_per_simd_lane
        max_waves = max_waves or proxy.max_waves_per_simd
        granule = granule or proxy.vgpr_granule
        notes.append(f"{name}: register-file rules are not public; estimated with a "
                     f"{file_size}-entry VGPR file, granule {granule}, max {max_waves} waves/SIMD")
    return file_size, max_waves, granule


def _register_limits(name, vgpr_count, agpr_count, sgpr_count, file_size, granule, max_waves) -> dict:
    limits: dict[str, float] = {}
    if name == "gfx908":
        # gfx908: separate 256-entry arch and acc files; the fuller one binds
        limits["vgpr"] = min(vgpr_limit(vgpr_count, 256, granule, max_waves),
                             vgpr_limit(agpr_count or 0, 256, granule, max_waves))
    else:
        limits["vgpr"] = vgpr_limit(vgpr_count, file_size, granule, max_waves)
    sgpr_waves = sgpr_limit(sgpr_count)
    if sgpr_waves is not None:
        limits["sgpr"] = min(max_waves, sgpr_waves)
    return limits


def _workgroup_limits(limits: dict, register_waves: int, num_warps, shared_bytes, lds_cu,
                      result: dict, notes: list):
    """Adds the workgroup-fit and LDS limits; returns the workgroups per CU (None: unknown)."""
    workgroups = None
    if num_warps:
        limits["workgroup_fit"] = register_waves * SIMDS_PER_CU // num_warps
        workgroups = limits["workgroup_fit"]
        if workgroups == 0:
            notes.append(f"a workgroup of {num_warps} waves needs {-(-num_warps // SIMDS_PER_CU)} "
                         f"waves/SIMD but registers allow {register_waves}: it cannot launch")
    else:
        result["unknown"].append("num_warps")
    if shared_bytes is None:
        result["unknown"].append("shared_bytes")
    elif shared_bytes > 0 and lds_cu:
        lds_workgroups = lds_cu // shared_bytes
        limits["lds_workgroups"] = lds_workgroups
        if lds_workgroups == 0:
            notes.append(f"{shared_bytes} B of LDS per workgroup exceeds the {lds_cu} B of a CU")
        workgroups = lds_workgroups if workgroups is None else min(workgroups, lds_workgroups)
    return workgroups


def _compare_with_llvm(result: dict, register_waves: int, llvm_occupancy: int, shared_bytes, notes: list):
    result["agrees_with_llvm"] = register_waves == llvm_occupancy
    if register_waves != llvm_occupancy:
        notes.append(f"register-only estimate {register_waves} waves/SIMD differs from LLVM's "
                     f"'; Occupancy: {llvm_occupancy}'")
    if result["waves_per_simd"] < llvm_occupancy and "lds_workgroups" in result["limits"] and \
            result["limiter"] == "lds":
        notes.append(f"LLVM's '; Occupancy: {llvm_occupancy}' ignores Triton's dynamic LDS "
                     f"({shared_bytes} B/workgroup): effective {result['waves_per_simd']} "
                     f"waves/SIMD")


def amd_occupancy(arch: str | None, *, vgpr_count: int | None, sgpr_count: int | None = None,
                  agpr_count: int | None = None, shared_bytes: int | None = None,
                  num_warps: int | None = None, llvm_occupancy: int | None = None) -> dict:
    """Occupancy estimate with the limiter named and LLVM's figure compared.

    ``vgpr_count`` is the total the hardware allocates (``.vgpr_count`` /
    ``; TotalNumVgprs:``; on gfx908 pass arch VGPRs and ``agpr_count`` apart).
    Missing inputs leave their limit out and are listed in ``unknown``.
    """
    name = archs.normalize(arch) if arch else None
    arch_info = archs.info(name) if name else None
    notes: list[str] = []
    result: dict = {"arch": name, "waves_per_simd": None, "workgroups_per_cu": None,
                    "register_waves_per_simd": None, "max_waves_per_simd": None,
                    "limits": {}, "limiter": None, "llvm_occupancy": llvm_occupancy,
                    "agrees_with_llvm": None, "estimate": False, "unknown": [], "notes": notes}
    if arch_info is None or arch_info.vendor == "nvidia":
        result["notes"].append(f"no AMD occupancy rules for arch {name!r}")
        return result
    file_size, max_waves, granule = _register_file(name, arch_info, notes)
    result["estimate"] = arch_info.vendor == "hygon"
    result["max_waves_per_simd"] = max_waves
    if vgpr_count is None:
        result["unknown"].append("vgpr_count")
        notes.append("no VGPR count in the listing: occupancy not estimated")
        return result
    limits = _register_limits(name, vgpr_count, agpr_count, sgpr_count, file_size, granule, max_waves)
    register_waves = min([max_waves, *limits.values()])
    result["register_waves_per_simd"] = register_waves
    workgroups = _workgroup_limits(limits, register_waves, num_warps, shared_bytes,
                                   arch_info.lds_bytes_per_cu, result, notes)
    if num_warps and workgroups is not None:
        waves = min(float(register_waves), workgroups * num_warps / SIMDS_PER_CU)
        result["workgroups_per_cu"] = workgroups
    else:
        waves = float(register_waves)
    result["waves_per_simd"] = int(waves) if waves == int(waves) else round(waves, 2)
    result["limits"] = limits
    result["limiter"] = _limiter(limits, register_waves, result["waves_per_simd"], max_waves,
                                 num_warps)
    if llvm_occupancy is not None:
        _compare_with_llvm(result, register_waves, llvm_occupancy, shared_bytes, notes)
    return result


def _limiter(limits: dict, register_waves: int, waves, max_waves: int, num_warps) -> str:
    if waves >= max_waves:
        return "none"
    lds_wg = limits.get("lds_workgroups")
    fit_wg = limits.get("workgroup_fit")
    if lds_wg is not None and num_warps and (fit_wg is None or lds_wg < fit_wg):
        return "lds"
    if waves < register_waves:
        return "workgroup_size"
    if limits.get("sgpr", max_waves) < limits.get("vgpr", max_waves):
        return "sgpr"
    return "vgpr"
