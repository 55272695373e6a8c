"""tko.read.occupancy: waves per SIMD from registers, LDS and warps.

Reference values: LLVM's '; Occupancy:' on real Triton compiles (research notes section 2.3: VGPR
13 -> 8, 232 -> 2, 264 -> 1 on gfx942; gfx906 printed 10) and the fixtures in tests/fixtures/isa.
"""

from __future__ import annotations

import pytest

from tko.read.occupancy import amd_occupancy, sgpr_limit, vgpr_limit


@pytest.mark.parametrize("vgprs, waves", [(13, 8), (64, 8), (65, 7), (72, 7), (73, 6), (128, 4),
                                          (168, 3), (169, 2), (232, 2), (256, 2), (264, 1),
                                          (512, 1)])
def test_gfx942_unified_file_granule_8(vgprs, waves):
    # min(8, 512 // roundup(v, 8)); the thresholds of AMD's occ.sh (>256 -> 1, >168 -> 2, >128 -> 3 ...)
    assert amd_occupancy("gfx942", vgpr_count=vgprs)["waves_per_simd"] == waves


def test_gfx906_has_256_vgprs_and_10_waves():
    assert amd_occupancy("gfx906", vgpr_count=24)["waves_per_simd"] == 10
    assert amd_occupancy("gfx906", vgpr_count=128)["waves_per_simd"] == 2
    assert amd_occupancy("gfx906", vgpr_count=26)["waves_per_simd"] == 9   # 256 // 28


def test_gfx908_separate_files():
    occ = amd_occupancy("gfx908", vgpr_count=40, agpr_count=128)
    assert occ["waves_per_simd"] == 2     # the 128-entry acc half binds: 256 // 128


def test_sgpr_limit_steps():
    assert [sgpr_limit(n) for n in (22, 80, 81, 88, 89, 100, 101)] == [10, 10, 9, 9, 8, 8, 7]
    occ = amd_occupancy("gfx90a", vgpr_count=16, sgpr_count=102)
    assert occ["waves_per_simd"] == 7 and occ["limiter"] == "sgpr"


def test_lds_limits_and_is_named():
    # 20 KiB per workgroup: 65536 // 20480 = 3 workgroups/CU; 3 * 4 warps / 4 SIMDs = 3 waves
    occ = amd_occupancy("gfx942", vgpr_count=64, shared_bytes=20480, num_warps=4, llvm_occupancy=8)
    assert occ["waves_per_simd"] == 3 and occ["limiter"] == "lds"
    assert occ["workgroups_per_cu"] == 3
    assert occ["agrees_with_llvm"] is True          # registers alone give 8, as LLVM says
    assert any("ignores Triton's dynamic LDS" in n for n in occ["notes"])
    # gfx950 has 160 KiB of LDS per CU: the same kernel is not LDS-bound there
    assert amd_occupancy("gfx950", vgpr_count=64, shared_bytes=20480, num_warps=4)["waves_per_simd"] == 8


def test_workgroup_size_granularity():
    # 3 waves/SIMD by registers = 12 waves/CU; an 8-wave workgroup fits once -> 2 waves/SIMD
    occ = amd_occupancy("gfx942", vgpr_count=168, num_warps=8)
    assert occ["register_waves_per_simd"] == 3
    assert occ["waves_per_simd"] == 2 and occ["limiter"] == "workgroup_size"


def test_small_workgroups_give_fractional_waves():
    # 1-warp workgroups, 48 KiB LDS each: one workgroup per CU = 1 wave over 4 SIMDs
    occ = amd_occupancy("gfx942", vgpr_count=32, shared_bytes=49152, num_warps=1)
    assert occ["waves_per_simd"] == 0.25


def test_lds_larger_than_cu_cannot_launch():
    occ = amd_occupancy("gfx942", vgpr_count=32, shared_bytes=70000, num_warps=4)
    assert occ["waves_per_simd"] == 0
    assert any("exceeds" in n for n in occ["notes"])


def test_disagreement_with_llvm_is_reported():
    occ = amd_occupancy("gfx942", vgpr_count=128, llvm_occupancy=8)
    assert occ["agrees_with_llvm"] is False
    assert any("differs from LLVM" in n for n in occ["notes"])


def test_hygon_is_an_estimate_and_unknown_inputs_are_listed():
    occ = amd_occupancy("gfx936", vgpr_count=100)
    assert occ["estimate"] is True and occ["max_waves_per_simd"] == 10
    assert "num_warps" in occ["unknown"] and "shared_bytes" in occ["unknown"]
    assert any("not public" in n for n in occ["notes"])
    none = amd_occupancy("gfx942", vgpr_count=None)
    assert none["waves_per_simd"] is None and "vgpr_count" in none["unknown"]


def test_nvidia_and_unknown_archs_get_no_amd_rules():
    assert amd_occupancy("sm_90", vgpr_count=32)["waves_per_simd"] is None
    assert amd_occupancy("gfx1234", vgpr_count=32)["waves_per_simd"] is None


def test_vgpr_limit_helper():
    assert vgpr_limit(0, 512, 8, 8) == 8
    assert vgpr_limit(57, 512, 8, 8) == 8
