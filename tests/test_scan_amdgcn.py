"""scan_amdgcn.py and tko.read.isa on real compiler output (tests/fixtures/isa, see its README).

Expected counts were checked by hand with grep on the fixture; each assertion says how.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tko.read import isa
from tko.base.contracts import contract_problems
from tko.read.isa import scan_path, scan_text
from tko.read.isa_ptx import nvidia_tool

ISA = Path(__file__).resolve().parent / "fixtures" / "isa"


def read(rel: str) -> str:
    return (ISA / rel).read_text()


def meta(rel: str) -> dict:
    return json.loads((ISA / rel).read_text())


def only(result: dict) -> dict:
    assert len(result["kernels"]) == 1, [k["name"] for k in result["kernels"]]
    return result["kernels"][0]


# ---- buffer vs global: the pointer_range=32 attribute decides on Triton >= 3.6 ----------------

def test_pointwise_pr32_is_buffer_dwordx4():
    k = only(scan_text(read("gfx942-pr32/add_fp32.amdgcn")))
    # grep -cE '^\s+buffer_load_dwordx4 ' -> 2 ; buffer_store_dwordx4 -> 1 ; '^\s+global_' -> 0
    assert k["name"] == "add_fp32"
    assert k["families"]["buffer_load"] == 2 and k["widths"]["buffer_load"] == {"dwordx4": 2}
    assert k["families"]["buffer_store"] == 1 and k["widths"]["buffer_store"] == {"dwordx4": 1}
    assert k["data_ops"] == {"buffer": 3, "global": 0, "flat": 0, "mls": 0}
    assert k["verdict"] == "buffer"
    assert any("dwordx4" in f and "buffer ops are in effect" in f for f in k["findings"])


def test_pointwise_without_pointer_range_is_global():
    k = only(scan_text(read("gfx942-nopr/add_fp32.amdgcn")))
    # grep -cE '^\s+global_load_dwordx4 ' -> 2 ; global_store_dwordx4 -> 1 ; '^\s+buffer_' -> 0
    assert k["families"]["global_load"] == 2 and k["families"]["global_store"] == 1
    assert k["families"]["buffer_load"] == 0
    assert k["verdict"] == "global"
    assert any("pointer hints" in f for f in k["findings"])


def test_fp16_loaded_one_ushort_at_a_time():
    k = only(scan_text(read("gfx942-pr32/gelu_fp16.amdgcn")))
    # grep -cE '^\s+buffer_load_ushort ' -> 4 ; '^\s+buffer_store_short ' -> 4
    assert k["widths"]["buffer_load"] == {"ushort": 4}
    assert k["widths"]["buffer_store"] == {"short": 4}
    assert any(f.startswith("sub-dword accesses (4 buffer_load_ushort, 4 buffer_store_short)")
               for f in k["findings"])


# ---- traps ----------------------------------------------------------------------------------

def test_gfx90a_mubuf_spills_are_not_data_buffer_ops():
    text = read("gfx90a-pr32/matmul_spill.amdgcn")
    k = only(scan_text(text))
    # grep -cE '^\s+buffer_load_'  -> 60 = 24 buffer_load_ushort (data) + 36 '4-byte Folded Reload'
    # grep -cE '^\s+buffer_store_' -> 68 = 32 buffer_store_short (data) + 36 '4-byte Folded Spill'
    assert k["mnemonics"]["buffer_load_dword"] == 36 and k["mnemonics"]["buffer_store_dword"] == 36
    assert k["families"]["buffer_load"] == 24
    assert k["families"]["buffer_store"] == 32
    assert k["families"]["scratch_store"] == 36 and k["families"]["scratch_load"] == 36
    assert k["spill"] == {"stores": 36, "loads": 36, "via": "mubuf"}
    # '.vgpr_spill_count: 36', '.private_segment_fixed_size: 148'
    assert k["resources"]["vgpr_spill_count"] == 36
    assert k["resources"]["scratch_bytes"] == 148
    assert k["data_ops"]["buffer"] == 56
    assert any("not data buffer ops" in f for f in k["findings"])


def test_mubuf_private_access_without_comment_still_counted_as_scratch():
    # llvm-objdump listings carry no "Folded Spill" comment; `off` vaddr + scratch > 0 decides
    text = read("gfx90a-pr32/matmul_spill.amdgcn").replace("; 4-byte Folded Spill", "") \
        .replace("; 4-byte Folded Reload", "")
    k = only(scan_text(text))
    assert k["families"]["buffer_store"] == 32 and k["families"]["scratch_store"] == 36


def test_gfx942_spills_are_scratch_ops():
    k = only(scan_text(read("gfx942-pr32/matmul_spill.amdgcn")))
    # grep -cE '^\s+scratch_store_' -> 21 (17 dwordx2 + 4 dword); scratch_load_ -> 21
    assert k["families"]["scratch_store"] == 21 and k["families"]["scratch_load"] == 21
    assert k["widths"]["scratch_store"] == {"dwordx2": 17, "dword": 4}
    assert k["spill"]["via"] == "scratch"
    # grep -cE '^\s+buffer_load_' -> 24 ; '^\s+buffer_store_' -> 32: all data (buffer_load_ushort)
    assert k["families"]["buffer_load"] == 24 and k["families"]["buffer_store"] == 32
    assert k["resources"]["vgpr_spill_count"] == 38


def test_lds_comes_from_triton_json_not_asm():
    path = ISA / "gfx942-pr32" / "softmax.amdgcn"
    # asm: '; LDSByteSize: 0 bytes/workgroup' and '.group_segment_fixed_size: 0'; softmax.json "shared": 32
    assert meta("gfx942-pr32/softmax.json")["shared"] == 32
    (k,) = scan_path(path)
    assert k["resources"]["lds_bytes_static"] == 0
    assert k["resources"]["lds_bytes"] == 32 and k["resources"]["lds_source"] == "triton_metadata"
    assert k["resources"]["num_warps"] == 8
    # grep -cE '^\s+ds_write' -> 2 ; '^\s+ds_read' -> 2
    assert k["families"]["ds_write"] == 2 and k["families"]["ds_read"] == 2
    # without the metadata the scanner says where the real size is
    bare = only(scan_text(path.read_text()))
    assert bare["resources"]["lds_source"] == "asm_static"
    assert any("dynamically" in f for f in bare["findings"])


def test_triton_39_target_string_and_old_spellings():
    text = read("gfx942-pr32/matmul.amdgcn")
    assert '.amdgcn_target "amdgpu9.42-amd-amdhsa-unknown-gfx942"' in text
    new = only(scan_text(text))
    assert new["arch"] == "gfx942"
    # the pre-3.9 target string and the older '; NumSgprs:' comment give the same result
    old_text = text.replace("amdgpu9.42-amd-amdhsa-unknown-gfx942", "amdgcn-amd-amdhsa--gfx942") \
        .replace("; TotalNumSgprs:", "; NumSgprs:").replace(".sgpr_count:", ".sgpr_count_x:")
    old = only(scan_text(old_text))
    assert old["arch"] == "gfx942"
    # '; TotalNumSgprs: 32', '.vgpr_count: 56'
    assert new["resources"]["sgpr"] == old["resources"]["sgpr"] == 32
    assert new["resources"]["vgpr_total"] == 56
    assert old["families"] == new["families"]


def test_ansi_escapes_and_carriage_returns_tolerated():
    text = read("gfx942-pr32/index_add.amdgcn")
    noisy = "\x1b[1;32m" + text.replace("\n", "\r\n").replace("buffer_atomic_add_f32",
                                                               "\x1b[0mbuffer_atomic_add_f32")
    assert only(scan_text(noisy))["families"] == only(scan_text(text))["families"]


def test_cache_control_is_not_a_data_buffer_op():
    k = only(scan_text(read("gfx942-pr32/index_add.amdgcn")))
    # grep -cE '^\s+buffer_' -> 11 = 5 buffer_load_ + 4 buffer_atomic_add_f32 + buffer_wbl2 + buffer_inv
    assert k["families"]["buffer_load"] == 5
    assert k["families"]["buffer_atomic"] == 4 and k["widths"]["buffer_atomic"] == {"add_f32": 4}
    assert k["families"]["cache_control"] == 2
    assert k["data_ops"]["buffer"] == 9


def test_gfx90a_atomics_are_cas_loops():
    k = only(scan_text(read("gfx90a-pr32/index_add.amdgcn")))
    # grep -cE '^\s+global_atomic_cmpswap ' -> 4 ; '^\s+global_load_dword ' -> 4 (CAS reload)
    # '^\s+buffer_load_' -> 5
    assert k["families"]["global_atomic_cas"] == 4 and k["families"]["global_atomic"] == 0
    assert k["families"]["global_load"] == 4 and k["families"]["buffer_load"] == 5
    assert k["verdict"] == "mixed"
    assert any("compare-and-swap" in f for f in k["findings"])


def test_waitcnt_breakdown_and_barriers():
    k = only(scan_text(read("gfx942-pr32/softmax.amdgcn")))
    # grep -cE '^\s+s_waitcnt' -> 13 ; with vmcnt -> 8 ; with lgkmcnt -> 5 ; vmcnt(0) -> 1
    # grep -cE '^\s+s_barrier' -> 3
    assert k["families"]["s_waitcnt"] == 13
    assert k["waitcnt"]["vmcnt"] == 8 and k["waitcnt"]["lgkmcnt"] == 5
    assert k["waitcnt"]["vmcnt_0"] == 1
    assert k["families"]["s_barrier"] == 3
    # grep -cE '^\s+v_exp_f32' -> 8, '^\s+v_rcp_f32' -> 8: 16 transcendental
    assert k["mix"]["transcendental"] == 16


def test_matrix_cores_counted_per_arch_spelling():
    k942 = only(scan_text(read("gfx942-pr32/matmul.amdgcn")))
    k90a = only(scan_text(read("gfx90a-pr32/matmul.amdgcn")))
    # grep -c 'v_mfma_f32_32x32x8_f16' gfx942 -> 4 ; 'v_mfma_f32_32x32x8f16' gfx90a -> 4
    assert k942["widths"]["mfma"] == {"mfma_f32_32x32x8_f16": 4}
    assert k90a["widths"]["mfma"] == {"mfma_f32_32x32x8f16": 4}
    assert k942["mix"]["character"] == "matrix"


def test_instruction_mix_tells_arithmetic_bound_from_memory_bound():
    add = only(scan_text(read("gfx942-pr32/add_fp32.amdgcn")))["mix"]
    gelu = only(scan_text(read("gfx942-pr32/gelu_fp16.amdgcn")))["mix"]
    # add: 2 loads + 1 store of dwordx4 = 48 B per lane; gelu: 4 ushort + 4 short = 16 B per lane
    assert add["data_bytes_per_lane"] == 48 and gelu["data_bytes_per_lane"] == 16
    assert add["character"] == "memory" and gelu["character"] == "compute_heavy"
    assert gelu["valu_per_byte"] > 10 * add["valu_per_byte"]


@pytest.mark.parametrize("rel,expected", [
    ("gfx90a-nopr/matmul_spill.amdgcn", {"matrix_ops": 8, "atomics": 0, "spills": 73}),  # .vgpr_spill_count 73
    ("gfx942-pr32/index_add.amdgcn", {"matrix_ops": 0, "atomics": 4, "spills": 0}),
    ("sm90/index_add.ptx", {"matrix_ops": 0, "atomics": 2, "spills": 0}),
    ("sm90/index_add.sass", {"matrix_ops": 0, "atomics": 2, "spills": 0}),
    ("sm80/matmul.ptx", {"matrix_ops": 16, "atomics": 0, "spills": 0}),
])
def test_totals_the_rules_read_are_in_each_record(rel, expected):
    (k,) = scan_path(ISA / rel)
    assert k["totals"] == expected
    # the same sums an old record without totals is read with
    assert isa.legacy_totals(k["families"], k["resources"]) == expected


def test_mix_character_takes_its_cuts_from_the_decision_rules():
    from tko.base import decide
    from tko.read.isa_amdgcn import character

    gelu = only(scan_text(read("gfx942-pr32/gelu_fp16.amdgcn")))["mix"]
    cut = decide.threshold("arithmetic_heavy_valu_per_byte")
    assert cut == decide.load_rules()["thresholds"]["arithmetic_heavy_valu_per_byte"]["value"]
    assert gelu["valu_per_byte"] >= cut
    # rules with a cut above the kernel's VALU per byte make it balanced, not compute-heavy
    rules = {"thresholds": {"arithmetic_heavy_valu_per_byte": {"value": gelu["valu_per_byte"] + 1},
                            "balanced_valu_per_byte": {"value": 2.0}}}
    assert character(gelu, rules) == "balanced"


def test_occupancy_matches_llvm_on_every_compiled_listing():
    records = scan_path(ISA / "gfx942-pr32") + scan_path(ISA / "gfx90a-nopr")
    assert len(records) == 12
    for k in records:
        occ = k["occupancy"]
        assert occ["llvm_occupancy"] is not None, k["source"]
        assert occ["register_waves_per_simd"] == occ["llvm_occupancy"], (k["source"], occ)
        assert occ["agrees_with_llvm"] is True


def test_occupancy_reports_dynamic_lds_llvm_ignores():
    text = read("gfx942-pr32/matmul.amdgcn")   # '; Occupancy: 8', '.vgpr_count: 56'
    k = only(scan_text(text, shared_bytes=48 * 1024, num_warps=4))
    occ = k["occupancy"]
    # 65536 // 49152 = 1 workgroup per CU; 1 * 4 warps / 4 SIMDs = 1 wave per SIMD
    assert occ["waves_per_simd"] == 1 and occ["limiter"] == "lds"
    assert occ["llvm_occupancy"] == 8
    assert any("ignores Triton's dynamic LDS" in f for f in k["findings"])


def test_hygon_constructed_listing_counts_hygon_families():
    result = scan_text(read("hygon/hygon_constructed_gfx936.amdgcn"))
    assert result["arch"] == "gfx936"
    by_name = {k["name"]: k for k in result["kernels"]}
    assert list(by_name) == ["k_mmac_bf16", "k_lds_read", "hygon_matrix_demo"]
    # counts from the isa_check source: v_mmac_f32_16x16x16_bf16 4, s_load_dword(x2) 2, global_store_dword 1
    mmac = by_name["k_mmac_bf16"]
    assert mmac["widths"]["mmac"] == {"f32_16x16x16_bf16": 4}
    assert mmac["families"]["s_load"] == 2 and mmac["families"]["global_store"] == 1
    assert mmac["families"]["mfma"] == 0
    assert by_name["k_lds_read"]["widths"]["ds_read"] == {"b128": 12}
    demo = by_name["hygon_matrix_demo"]
    # by hand: 6 v_mmac_*, 3 ds matrix ops, 2 matrix_load, 1 matrix_store, 1 s_waitcnt_vbcnt,
    # 1 s_abarrier_try_wait
    assert demo["families"]["mmac"] == 6
    assert demo["families"]["ds_matrix"] == 3 and demo["families"]["ds_read"] == 0
    assert demo["families"]["matrix_load"] == 2 and demo["families"]["matrix_store"] == 1
    assert demo["waitcnt"]["vbcnt"] == 1
    assert demo["widths"]["s_barrier"] == {"abarrier_try_wait": 1}
    assert demo["data_ops"]["mls"] == 3 and demo["verdict"] == "none"
    assert mmac["occupancy"]["estimate"] is True


def test_hygon_arch_judged_from_a_proxy_listing():
    k = only(scan_text(read("gfx942-pr32/matmul.amdgcn"), arch="gfx936"))
    assert k["arch"] == "gfx942" and k["occupancy"]["arch"] == "gfx936"
    assert any("v_mfma_* in a listing for a Hygon arch" in f for f in k["findings"])


# ---- NVIDIA ---------------------------------------------------------------------------------

def test_ptx_vector_loads_atomics_and_wgmma():
    add = only(scan_text(read("sm90/add_fp32.ptx")))
    # grep -c 'ld.global.v4.b32' -> 4 ; 'st.global.v4.b32' -> 2 ; '.reg .b32 	%r<33>'
    assert add["format"] == "ptx" and add["arch"] == "sm_90"
    assert add["widths"]["ld_global"] == {"v4.b32": 4} and add["widths"]["st_global"] == {"v4.b32": 2}
    assert add["resources"]["registers_declared"]["b32"] == 33
    assert add["resources"]["num_warps"] == 4          # .reqntid 128
    assert add["predicated"] >= 6
    idx = only(scan_text(read("sm90/index_add.ptx")))
    # grep -c 'atom.global.gpu.acq_rel.add.v4.f32' -> 2
    assert idx["widths"]["atom_global"] == {"gpu.acq_rel.add.v4.f32": 2}
    mm = only(scan_text(read("sm90/matmul.ptx")))
    # grep -c 'wgmma.mma_async' -> 2 ; 'ld.global.b16' -> 32
    assert mm["families"]["wgmma"] == 2 and mm["widths"]["ld_global"] == {"b16": 32}
    assert any("sub-word" in f for f in mm["findings"])


def test_sass_text_with_resource_usage():
    k = only(scan_text(read("sm90/index_add.sass")))
    # grep -c 'LDG.E' -> 4 (2 .128, 2 .64); 'ATOMG.E.ADD.F32x4' -> 2 ; 'REG:26'
    assert k["format"] == "sass"
    assert k["widths"]["LDG"] == {"E.128": 2, "E.64": 2}
    assert k["families"]["ATOMG"] == 2
    assert k["resources"]["registers"] == 26
    # 2*16 + 2*8 load bytes + 2 * 16 (F32x4) atomic bytes per thread
    assert k["mix"]["data_bytes_per_lane"] == 80


@pytest.mark.skipif(nvidia_tool("cuobjdump") is None, reason="no cuobjdump (Triton wheel / CUDA)")
def test_cubin_disassembled_with_bundled_cuobjdump():
    (k,) = [r for r in scan_path(ISA / "sm90" / "add_fp32.cubin")]
    # cuobjdump -sass: 4 'LDG.E.128', 2 'STG.E.128'; --dump-resource-usage: 'REG:26'
    assert k["format"] == "sass" and k["arch"] == "sm_90"
    assert k["widths"]["LDG"] == {"E.128": 4} and k["widths"]["STG"] == {"E.128": 2}
    assert k["resources"]["registers"] == 26
    assert k["triton_metadata"]["num_warps"] == 4
    # in a tree the cubin is disassembled only on request (a .ptx sits next to it)
    assert [r["format"] for r in scan_path(ISA / "sm90", kernel="add_fp32")] == ["ptx"]
    assert sorted(r["format"] for r in scan_path(ISA / "sm90", kernel="add_fp32", sass=True)) == \
        ["ptx", "sass"]


# ---- files, trees, filters --------------------------------------------------------------------

def test_triton_json_argument_reads_listing_next_to_it():
    (k,) = scan_path(ISA / "gfx942-pr32" / "matmul_spill.json")
    assert k["name"] == "matmul_spill" and k["resources"]["lds_bytes"] == 8192
    assert k["triton_metadata"]["waves_per_eu"] == 8


def test_inductor_cache_like_tree(tmp_path):
    key = tmp_path / "triton" / "0" / "ABCDEF0123"
    key.mkdir(parents=True)
    for suffix in (".amdgcn", ".json", ".ttgir"):
        shutil.copy(ISA / "gfx942-nopr" / f"index_add{suffix}", key / f"index_add{suffix}")
    (key / "__grp__index_add.json").write_text('{"child_paths": {}}')
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "cabcd.py").write_text("print('inductor output code')\n")
    (tmp_path / "ab" / "host.s").write_text("\t.text\n\tmovq %rsp, %rbp\n\tret\n")
    (k,) = scan_path(tmp_path, kernel="index")
    assert k["name"] == "index_add" and k["resources"]["lds_bytes"] == 4096
    # grep -cE '^\s+global_atomic_add_f32 ' -> 4 (gfx942 without pointer_range: global atomics)
    assert k["families"]["global_atomic"] == 4


def test_kernel_filter_exact_beats_substring():
    names = [k["name"] for k in scan_path(ISA / "gfx942-pr32", kernel="matmul")]
    assert names == ["matmul"]
    names = [k["name"] for k in scan_path(ISA / "gfx942-pr32", kernel="mat")]
    assert names == ["matmul", "matmul_spill"]


def test_kernel_filter_no_match_lists_what_was_found():
    with pytest.raises(isa.InputError, match="no kernel matches 'nope'; found: add_fp32, gelu_fp16"):
        scan_path(ISA / "gfx942-pr32", kernel="nope")


def test_not_a_listing_is_an_input_error():
    with pytest.raises(isa.InputError):
        scan_text("hello world\n")


# ---- the script -------------------------------------------------------------------------------

def test_cli_writes_contract_conforming_artifact(run_script, tmp_path):
    out = tmp_path / "isa_scan.json"
    proc = run_script("scan_amdgcn.py", ISA, "--kernel", "softmax", "--json-out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "isa_scan/1" and doc["tool"] == "scan_amdgcn.py"
    assert contract_problems(doc) == []
    # softmax in 4 AMD folders
    assert doc["summary"]["kernels"] == 4 and {k["name"] for k in doc["kernels"]} == {"softmax"}
    assert all(k["resources"]["lds_bytes"] == 32 for k in doc["kernels"])
    assert "verdict=buffer" in proc.stdout


def test_cli_errors_are_one_line_exit_2(run_script, tmp_path):
    proc = run_script("scan_amdgcn.py", ISA / "gfx90a-pr32", "--kernel", "nope", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "found: add_fp32" in proc.stderr
    proc = run_script("scan_amdgcn.py", tmp_path / "missing", cwd=tmp_path)
    assert proc.returncode == 2 and "no such file" in proc.stderr
    junk = tmp_path / "junk.s"
    junk.write_text("not assembly at all\n")
    proc = run_script("scan_amdgcn.py", junk, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    proc = run_script("scan_amdgcn.py", ISA / "gfx90a-pr32", "--arch", "pentium", cwd=tmp_path)
    assert proc.returncode == 2 and "unknown --arch" in proc.stderr
    assert run_script("scan_amdgcn.py", "--help", cwd=tmp_path).returncode == 0


# ---- real TorchInductor kernels (captured on an H200, compiled here for AMD; README) ---------

IND = ISA / "inductor"
POI = "triton_poi_fused_add_gelu_mul_0"
RED = "triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online_sub_0"
IDX = "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1"


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_inductor_pointwise_buffer_only_with_pointer_range(arch):
    (pr,) = scan_path(IND / f"{arch}-pr32" / f"{POI}.amdgcn")
    (no,) = scan_path(IND / f"{arch}-nopr" / f"{POI}.amdgcn")
    # grep -cE '^\s+buffer_load_dwordx2 ' -> 3 ; buffer_store_dwordx2 -> 1 (pr32);
    # '^\s+global_load_dwordx2 ' -> 3 ; global_store_dwordx2 -> 1 (nopr): 4 fp16 per lane, 8 B
    assert pr["widths"]["buffer_load"] == {"dwordx2": 3} and pr["widths"]["buffer_store"] == {"dwordx2": 1}
    assert no["widths"]["global_load"] == {"dwordx2": 3} and no["widths"]["global_store"] == {"dwordx2": 1}
    assert (pr["verdict"], no["verdict"]) == ("buffer", "global")
    assert any(f.startswith("widest data load moves 8 B per lane") for f in pr["findings"])


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_inductor_reduction_mixed_without_pointer_range(arch):
    (pr,) = scan_path(IND / f"{arch}-pr32" / f"{RED}.amdgcn")
    (no,) = scan_path(IND / f"{arch}-nopr" / f"{RED}.amdgcn")
    # pr32: grep -cE '^\s+buffer_load_' -> 16, '^\s+buffer_store_' -> 8, global_ -> 0
    # nopr: buffer_load_ -> 8, global_load_ -> 8, global_store_ -> 8
    assert pr["data_ops"]["buffer"] == 24 and pr["verdict"] == "buffer"
    assert (no["families"]["buffer_load"], no["families"]["global_load"],
            no["families"]["global_store"]) == (8, 8, 8)
    assert no["verdict"] == "mixed"
    assert any("(8 buffer, 16 global; 33% buffer)" in f for f in no["findings"])
    # 6 ds_bpermute_b32 + 5 ds_read_b32 + 5 ds_write_b32; LDS 192 B and 16 warps from the .json
    assert (pr["families"]["ds_other"], pr["families"]["ds_read"], pr["families"]["ds_write"]) == (6, 5, 5)
    assert pr["resources"]["lds_bytes"] == 192 and pr["resources"]["num_warps"] == 16


def test_inductor_index_add_atomics_per_arch_and_hint():
    def fam(folder):
        (k,) = scan_path(IND / folder / f"{IDX}.amdgcn")
        return k["families"]
    # grep -cE '^\s+buffer_atomic_add_f32 ' gfx942-pr32 -> 4; '^\s+global_atomic_add_f32 ' gfx942-nopr
    # -> 4; '^\s+global_atomic_cmpswap ' in both gfx90a listings -> 4
    assert fam("gfx942-pr32")["buffer_atomic"] == 4
    assert fam("gfx942-nopr")["global_atomic"] == 4
    assert fam("gfx90a-pr32")["global_atomic_cas"] == 4
    assert fam("gfx90a-nopr")["global_atomic_cas"] == 4


def test_real_h200_inductor_cache_root():
    # torch 2.11 / triton 3.6 on an H200: <cache root>/tmp*/triton/<key>/<name>.{ptx,cubin,json}
    root = Path(__file__).resolve().parent / "fixtures" / "inductor_h200" / "scatter_index_add"
    records = scan_path(root / "inductor_cache", kernel=IDX)
    # without --sass the .cubin next to each .ptx is not disassembled
    assert records and {(r["format"], r["arch"]) for r in records} == {("ptx", "sm_90")}
    key = "FWLZZK6J6XAFW46MAJ6VUUM7O4VMIPQFES2V36W57OWFX4CH73DA"
    (k,) = [r for r in records if key in r["source"]]
    # grep -c 'atom.global' -> 4 ('atom.global.gpu.relaxed.add.v4.f32'); grep -c 'ld.global' -> 7
    assert k["families"]["atom_global"] == 4
    assert k["families"]["ld_global"] + k["families"]["ld_global_nc"] == 7
    assert k["resources"]["shared_bytes"] == 2048 and k["resources"]["num_warps"] == 8
    for r in records:   # every autotune variant: scanner count == a plain regex count
        text = Path(r["source"]).read_text()
        assert r["families"]["atom_global"] == text.count("atom.global.")


def test_llvm_objdump_style_listing():
    # llvm-objdump -d prints '<addr> <symbol>:' and '// <addr>: <encoding>' comments, no metadata
    lines = ["", "0000000000001900 <add_fp32>:"]
    for raw in read("gfx942-nopr/add_fp32.amdgcn").splitlines():
        code = raw.split(";")[0].strip()
        if code and not code.startswith(".") and not code.endswith(":") and code[0].islower() \
                and "_" in code.split()[0]:
            lines.append(f"\t{code:<50} // 000000001900: BF8C0000")
        if code.startswith(".Lfunc_end"):
            break
    k = only(scan_text("\n".join(lines), arch="gfx942"))
    assert k["name"] == "add_fp32"
    real = only(scan_text(read("gfx942-nopr/add_fp32.amdgcn")))
    assert k["families"] == real["families"] and k["verdict"] == "global"
    assert k["occupancy"]["waves_per_simd"] is None and "vgpr_count" in k["occupancy"]["unknown"]


# ---- an older Triton (3.5.1, AMDGCN_USE_BUFFER_OPS=1): older target string, same traps ------

def test_triton_351_listing_spills_only_through_mubuf():
    text = read("triton-3.5.1/gfx90a-nopr/matmul_spill.amdgcn")
    assert '.amdgcn_target "amdgcn-amd-amdhsa--gfx90a"' in text
    k = only(scan_text(text))
    assert k["arch"] == "gfx90a"
    # grep: 98 'buffer_store_dword ... Folded Spill' (all 98 buffer_store_*), 98 '... Folded Reload'
    # (all 98 buffer_load_*); data: 24 global_load_*, 8 global_store_*; '.vgpr_spill_count: 98'
    assert k["mnemonics"]["buffer_store_dword"] == 98 and k["mnemonics"]["buffer_load_dword"] == 98
    assert k["families"]["buffer_load"] == 0 and k["families"]["buffer_store"] == 0
    assert (k["families"]["global_load"], k["families"]["global_store"]) == (24, 8)
    assert k["verdict"] == "global"          # a naive count would call 196 buffer ops "buffer"
    assert k["spill"] == {"stores": 98, "loads": 98, "via": "mubuf"}
    assert k["resources"]["vgpr_spill_count"] == 98 and k["resources"]["scratch_bytes"] == 332


def test_triton_351_pointwise_buffer_without_pointer_range():
    # 3.5 proves pid*BLOCK + arange non-negative itself: buffer ops without tt.pointer_range
    k = only(scan_text(read("triton-3.5.1/gfx942-nopr/add_fp32.amdgcn")))
    # grep -cE '^\s+buffer_load_dwordx4 ' -> 2 ; buffer_store_dwordx4 -> 1
    assert k["arch"] == "gfx942" and k["verdict"] == "buffer"
    assert k["widths"]["buffer_load"] == {"dwordx4": 2} and k["widths"]["buffer_store"] == {"dwordx4": 1}
    assert k["occupancy"]["agrees_with_llvm"] is True


# ---- on a GPU: the SASS resource count agrees with what the driver loaded ----------------------

@pytest.mark.gpu
def test_sass_registers_match_the_loaded_kernel(tmp_path, monkeypatch):
    import importlib.util

    import torch
    if torch.version.hip:
        pytest.skip("NVIDIA check: compares cuobjdump's register count with the driver's")
    if nvidia_tool("cuobjdump") is None:
        pytest.skip("no cuobjdump")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("isa_generate", ISA / "generate.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    n = 1 << 20
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    compiled = gen.add_fp32[(n // 1024,)](x, y, out, n, BLOCK=1024)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y)
    (cubin,) = (tmp_path / "cache").rglob("add_fp32.cubin")
    (k,) = scan_path(cubin)
    assert k["resources"]["registers"] == compiled.n_regs
    assert k["resources"]["shared_bytes"] == compiled.metadata.shared
    assert k["widths"]["LDG"] == {"E.128": 4}   # the JIT launch vectorises as the offline compile did


def test_ptx_ampere_mma_sync_and_ldmatrix():
    k = only(scan_text(read("sm80/matmul.ptx")))
    # grep -c 'mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32' -> 16 ; grep -c 'ldmatrix' -> 8
    assert k["arch"] == "sm_80"
    assert k["widths"]["mma"] == {"sync.aligned.m16n8k16.row.col.f32.f16.f16.f32": 16}
    assert k["families"]["ldmatrix"] == 8 and k["families"]["wgmma"] == 0
    assert k["mix"]["matrix"] == 16


@pytest.mark.parametrize("mnemonic, operands, family, width", [
    ("v_accvgpr_write_b32", "a0, v1", "accvgpr", "write_b32"),
    ("v_accvgpr_read_b32", "v1, a0", "accvgpr", "read_b32"),
    ("flat_load_dwordx4", "v[0:3], v[4:5]", "flat_load", "dwordx4"),
    ("flat_atomic_add_f32", "v[4:5], v0", "flat_atomic", "add_f32"),
    ("s_buffer_load_dwordx2", "s[0:1], s[4:7], 0x10", "s_buffer_load", "dwordx2"),
    ("ds_swizzle_b32", "v1, v2 offset:swizzle(SWAP,16)", "ds_other", "swizzle_b32"),
    ("ds_read2st64_b64", "v[0:3], v4 offset1:1", "ds_read", "2st64_b64"),
    ("global_load_lds_dwordx4", "v[0:1], off", "global_load", "lds_dwordx4"),
    ("buffer_load_dword", "v1, s[4:7], 0 offen lds", "buffer_load", "dword"),
    ("global_atomic_cmpswap_x2", "v[0:1], v[2:5], off glc", "global_atomic_cas", "cmpswap_x2"),
    ("buffer_wbinvl1_vol", "", "cache_control", "wbinvl1_vol"),
    ("v_smfmac_f32_16x16x32_f16", "v[0:3], v[4:5], v[6:9], v10", "mfma", "smfmac_f32_16x16x32_f16"),
])
def test_family_table(mnemonic, operands, family, width):
    from tko.read.isa_amdgcn import classify
    assert classify(mnemonic, operands, "", private_mubuf=False) == (family, width)


def test_flat_only_listing_gets_flat_verdict():
    # the gfx942 listing with every global_ op respelled flat_ (the flat path has the same syntax)
    text = read("gfx942-nopr/add_fp32.amdgcn").replace("global_load_", "flat_load_") \
        .replace("global_store_", "flat_store_")
    k = only(scan_text(text))
    assert k["verdict"] == "flat" and k["data_ops"]["flat"] == 3
    assert any("generic address space" in f for f in k["findings"])


# ---- the reader: runs of instruction lines are read whole, odd lines one by one (issue 15) --

_ODD_LISTING = """\t.text
\t.globl\tk_one
\t.type\tk_one,@function
k_one:                                  ; @k_one
; %bb.0:
\ts_load_dwordx2 s[0:1], s[4:5], 0x0
\tS_WAITCNT lgkmcnt(0)
\tglobal_load_dword v1, v0, s[0:1]
\tv_add_f32_e32 v1, 1.0, v1;no blank before the comment
\tbuffer_store_dword v1, off, s[8:11], 0 offset:4 ; 4-byte Folded Spill
\ts_waitcnt vmcnt(0) // a slash comment
\tglobal_store_dword v0, v1, s[0:1]
\ts_endpgm
.Lfunc_end0:
\t.size\tk_one, .Lfunc_end0-k_one
\tv_nop_after_the_end
; Kernel info:
; NumVgprs: 2
; ScratchSize: 4
\t.amdhsa_kernel k_one
\t\t.amdhsa_next_free_vgpr 2
\t.end_amdhsa_kernel
\t.globl\tk_two
k_two:
\tbuffer_load_dwordx4 v[0:3], v4, s[0:3], 0 offen
\ts_endpgm
.Lfunc_end1:
0000000000001000 <k_three>:
\tv_mov_b32_e32 v0, 0
\ts_endpgm"""


def test_odd_lines_read_one_by_one():
    # an uppercase mnemonic, a comment with no blank before it, '//' comments, an instruction
    # after .Lfunc_end (not code), a Kernel info block and a descriptor after the body, an
    # llvm-objdump symbol line, no final newline
    from tko.read.isa_amdgcn import scan_kernel
    from tko.read.isa_amdgcn_listing import split_kernels
    kernels = {k.name: k for k in split_kernels(_ODD_LISTING)}
    assert list(kernels) == ["k_one", "k_two", "k_three"]
    one = scan_kernel(kernels["k_one"])
    assert one["mnemonics"] == {"buffer_store_dword": 1, "global_load_dword": 1, "global_store_dword": 1,
                                "s_endpgm": 1, "s_load_dwordx2": 1, "s_waitcnt": 2, "v_add_f32_e32": 1}
    assert {f: n for f, n in one["families"].items() if n} == {
        "global_load": 1, "global_store": 1, "scratch_store": 1, "s_load": 1, "s_waitcnt": 2}
    assert one["waitcnt"] == {"lgkmcnt": 1, "lgkmcnt_0": 1, "vmcnt": 1, "vmcnt_0": 1}
    assert one["spill_ops"] == {"stores": 1, "loads": 0, "via": "mubuf"}
    assert one["resources"]["vgpr"] == 2 and one["resources"]["scratch_bytes"] == 4
    assert scan_kernel(kernels["k_two"])["families"]["buffer_load"] == 1
    assert scan_kernel(kernels["k_three"])["mnemonics"] == {"s_endpgm": 1, "v_mov_b32_e32": 1}


@pytest.mark.parametrize("rel", sorted(str(p.relative_to(ISA)) for p in ISA.glob("*/*.amdgcn")))
def test_layout_does_not_change_the_scan(rel):
    # the same listing indented with blanks, not indented, or with CRLF line ends: the reader
    # takes the runs of lines whole or one by one in different places, the scan is the same
    text = read(rel)
    want = scan_text(text, "amdgcn")
    for variant in (text.replace("\t", "  "), text.replace("\n\t", "\n"), text.replace("\n", "\r\n"),
                    text.rstrip("\n")):
        assert scan_text(variant, "amdgcn") == want


# ---- one memory-op counter: check_env's smoke compile and references/hint_effects.py (issue 16) --

def test_memory_op_counts_is_the_scanners_count():
    from tko.read.isa_amdgcn import memory_op_counts
    # the MUBUF spills (36 + 36 buffer_*_dword '4-byte Folded Spill/Reload') are not data ops
    counts = memory_op_counts(read("gfx90a-pr32/matmul_spill.amdgcn"))
    assert counts["ops"] == {"buffer_load": 24, "buffer_store": 32}
    assert counts["mnemonics"] == {"buffer_load_ushort": 24, "buffer_store_short": 32}
    # a CAS loop's global_atomic_cmpswap is a global atomic
    counts = memory_op_counts(read("gfx90a-pr32/index_add.amdgcn"))
    assert counts["ops"] == {"buffer_load": 5, "global_load": 4, "global_atomic": 4}
    assert counts["mnemonics"]["global_atomic_cmpswap"] == 4
    for rel in sorted(str(p.relative_to(ISA)) for p in ISA.glob("*/*.amdgcn")):
        k = scan_text(read(rel), "amdgcn")["kernels"]
        ops = memory_op_counts(read(rel))["ops"]
        assert sum(ops.values()) == sum(x["data_ops"]["buffer"] + x["data_ops"]["global"]
                                        + x["data_ops"]["flat"] for x in k), rel
    assert memory_op_counts("not a listing") == {"ops": {}, "mnemonics": {}}


def test_check_env_and_hint_effects_use_the_scanners_counter():
    import importlib.util

    from tko.env import smoke
    from tko.compile import offline_compile
    text = read("gfx90a-pr32/matmul_spill.amdgcn")
    assert smoke.count_memory_ops(text, "amdgcn") == {"buffer_load": 24, "buffer_store": 32}
    assert smoke.count_memory_ops("ld.global.f32 %f1, [%rd1];", "ptx") == {"ld.global": 1}
    path = Path(__file__).resolve().parents[1] / "references" / "hint_effects.py"
    spec = importlib.util.spec_from_file_location("hint_effects_under_test", path)
    hint_effects = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hint_effects)
    assert hint_effects._data_ops(text) == ["buffer_load_ushort", "buffer_store_short"]
    assert hint_effects._data_ops(read("gfx942-nopr/add_fp32.amdgcn")) == [
        "global_load_dwordx4", "global_store_dwordx4"]
    assert hint_effects.lld_stand_in is offline_compile.lld_stand_in  # one ld.lld stand-in
