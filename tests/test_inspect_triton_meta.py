"""inspect_triton_meta.py on real Inductor output (torch 2.11, H200), documented 2.4 / 2.6 forms,
hand-written kernels, and real IR (H200 Triton cache; gfx942 IR compiled offline by
tests/fixtures/kernels/generate_ir.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tko.base.contracts import contract_problems
from tko.read.kernel_ir import parse_ir_text
from tko.read.kernel_source import read_kernel_file

FIXTURES = Path(__file__).resolve().parent / "fixtures"
KERNELS = FIXTURES / "kernels"
H200 = FIXTURES / "inductor_h200"


def h200_kernel(example: str, name: str) -> Path:
    """The Inductor kernel module (not the wrapper) defining ``name`` in an H200 example."""
    for path in sorted((H200 / example).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if f"def {name}(" in text and "async_compile" not in text:
            return path
    pytest.skip(f"{name} not in the H200 fixtures")


def h200_ir(example: str, name: str, suffix: str) -> Path:
    found = sorted((H200 / example).rglob(f"{name}.{suffix}"))
    if not found:
        pytest.skip(f"no {name}.{suffix} in the H200 fixtures")
    return found[0]


def inspect(run_script, tmp_path, kernel_file, *extra):
    out = tmp_path / "meta.json"
    proc = run_script("inspect_triton_meta.py", kernel_file, *extra, "--json-out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert contract_problems(doc) == []
    return doc


def by_name(items, name):
    return next(i for i in items if i["name"] == name)


def test_v4_pointwise_from_h200(run_script, tmp_path):
    path = h200_kernel("pointwise_chain", "triton_poi_fused_add_gelu_mul_0")
    doc = inspect(run_script, tmp_path, path)
    assert doc["schema"] == "triton_meta/1" and doc["origin"] == "inductor"
    k = doc["kernels"][0]
    meta = k["triton_meta"]
    assert meta["encoding"] == "v4_dict" and meta["signature_keys"] == "name"
    assert meta["signature"]["XBLOCK"] == "constexpr" and meta["signature"]["in_ptr0"] == "*fp16"
    assert [p["kind"] for p in k["params"]] == ["pointer"] * 4 + ["scalar", "constexpr"]
    # (0,)..(4,) carry tt.divisibility=16 in the file; none carries tt.pointer_range (torch 2.11).
    assert k["pointer_hints"]["in_ptr0"] == {"tt.divisibility": 16, "tt.pointer_range": None}
    assert by_name(k["params"], "xnumel")["hints"] == [["tt.divisibility", 16]]
    assert k["heuristic"]["kind"] == "pointwise" and k["heuristic"]["size_hints"] == {"x": 33554432}
    facts = k["inductor_facts"]
    assert facts["kernel_name"] == "triton_poi_fused_add_gelu_mul_0"
    assert (facts["num_load"], facts["num_store"], facts["atomic_add_found"]) == (3, 1, False)
    loads = [op for op in k["memory_ops"] if op["op"] == "load"]
    assert [op["bases"] for op in loads] == [["in_ptr0"], ["in_ptr1"], ["in_ptr2"]]
    assert [op["eviction_policy"] for op in loads] == [None, "evict_last", None]
    assert not any(op["indirect"] or op["offset_i64"] for op in k["memory_ops"])
    assert any("no tt.pointer_range" in f and "in_ptr2" in f for f in doc["findings"])
    assert any(f.startswith("x0 = (xindex % 4096) is an i32 offset") for f in doc["findings"])
    assert k["configs"] == []  # pointwise configs are generated at run time


def test_v4_scatter_gather_atomics_from_h200(run_script, tmp_path):
    path = h200_kernel("scatter_index_add", "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1")
    k = inspect(run_script, tmp_path, path)["kernels"][0]
    gather = [op for op in k["memory_ops"] if op["kind"] == "gather"]
    # tmp11 = tl.load(in_ptr2 + (x1 + 64*tmp9)), tmp9 from the int64 index loaded from in_ptr1.
    assert [(op["bases"], op["offset_i64"]) for op in gather] == [(["in_ptr2"], True)]
    (atomic,) = k["atomics"]
    assert atomic["op"] == "atomic_add" and atomic["bases"] == ["out_ptr0"]
    assert atomic["indirect"] and atomic["kind"] == "scatter" and atomic["sem"] == "relaxed"
    assert k["inductor_facts"]["atomic_add_found"] is True
    assert k["inductor_facts"]["mutated_arg_names"] == ["out_ptr0"]
    assert k["heuristic"]["size_hints"] == {"y": 1048576, "x": 64}
    assert any("atomics: atomic_add at data-dependent indices" in f for f in k["findings"])


def test_v4_reduction_and_dynamic_shape_from_h200(run_script, tmp_path):
    path = h200_kernel("dynamic_shapes", "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0")
    k = inspect(run_script, tmp_path, path)["kernels"][0]
    assert k["kind"] == "reduction" and k["heuristic"]["reduction_hint"] == "ReductionHint.INNER"
    assert by_name(k["params"], "ks0")["dtype"] == "i64"
    assert [r["op"] for r in k["reductions"]] == ["tl.sum"]
    # ks0 (i64) scales x0 in `in_ptr0 + (r0_1 + ks0*x0)`: a 64-bit offset with a scalar in it.
    first = k["memory_ops"][0]
    assert first["bases"] == ["in_ptr0"] and first["offset_i64"] and first["offset_scalars"] == ["ks0"]
    # The loop bound r0_numel only bounds `for r0_offset in tl.range(0, r0_numel, R0_BLOCK)`.
    assert not any("r0_numel" in op["offset_scalars"] for op in k["memory_ops"])


def test_torch_2_4_int_keyed_attrs_descriptor(run_script, tmp_path):
    doc = inspect(run_script, tmp_path, KERNELS / "inductor_2_4_pointwise.py")
    k = doc["kernels"][0]
    meta = k["triton_meta"]
    assert (meta["encoding"], meta["signature_keys"]) == ("attrs_descriptor", "int")
    assert meta["signature"] == {"in_ptr0": "*fp32", "in_ptr1": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32"}
    assert sorted(meta["hints"]) == ["in_ptr0", "in_ptr1", "out_ptr0", "xnumel"]
    assert k["name"] == "triton_" and k["inductor_facts"]["kernel_name"] == "triton_poi_fused_add_0"
    assert k["heuristic"]["size_hints"] == [16384]
    assert by_name(k["params"], "XBLOCK")["kind_from"] == "annotation"
    assert any(f.startswith("x0 = xindex % 128 is an i32 offset") for f in doc["findings"])


def test_torch_2_6_from_dict_and_gather(run_script, tmp_path):
    k = inspect(run_script, tmp_path, KERNELS / "inductor_2_6_embedding.py")["kernels"][0]
    meta = k["triton_meta"]
    assert (meta["encoding"], meta["signature_keys"]) == ("attrs_descriptor_from_dict", "name")
    assert meta["hints"]["in_ptr1"] == [["tt.divisibility", 16]]
    kinds = [(op["op"], op["bases"], op["kind"]) for op in k["memory_ops"]]
    assert kinds == [("load", ["in_ptr0"], "direct"), ("load", ["in_ptr1"], "gather"),
                     ("store", ["out_ptr0"], "direct")]
    # the gathered offset comes from an int64 load (in_ptr0 is *i64)
    assert k["memory_ops"][1]["offset_i64"] and not k["memory_ops"][0]["offset_i64"]


def test_hand_written_autotune_hints_and_helper(run_script, tmp_path):
    doc = inspect(run_script, tmp_path, KERNELS / "autotuned_scale.py")
    assert doc["origin"] == "hand-written" and doc["entry_kernel"] == "scale_kernel"
    k = by_name(doc["kernels"], "scale_kernel")
    assert k["kind"] == "triton_autotune" and k["triton_meta"] is None and k["pointer_hints"] is None
    assert k["configs"] == [
        {"kwargs": {"BLOCK": 256}, "num_warps": 2, "num_stages": None, "extras": {}},
        {"kwargs": {"BLOCK": 1024}, "num_warps": 4, "num_stages": 1, "extras": {}},
        {"kwargs": {"BLOCK": 2048}, "num_warps": 8, "num_stages": None, "extras": {"waves_per_eu": 2}},
    ]
    assert k["autotune"]["key"] == ["n"]
    assert [(h["op"], h["text"]) for h in k["hint_calls"]] == [
        ("tl.assume", "tl.assume(n > 0)"),
        ("tl.multiple_of", "tl.multiple_of(pid * BLOCK, BLOCK)"),
        ("tl.max_contiguous", "tl.max_contiguous(offs, BLOCK)"),
    ]
    assert [p["kind"] for p in k["params"]] == ["pointer", "pointer", "scalar", "scalar", "constexpr"]
    assert k["memory_ops"][0]["eviction_policy"] == "evict_first" and k["memory_ops"][0]["masked"]
    assert k["calls"] == ["_scale_value"]


def test_hand_written_index_add_scatter(run_script, tmp_path):
    k = inspect(run_script, tmp_path, KERNELS / "index_add.py")["kernels"][0]
    assert [op["kind"] for op in k["memory_ops"]] == ["direct", "direct"]
    (atomic,) = k["atomics"]
    assert atomic["kind"] == "scatter" and atomic["offset_scalars"] == ["row_len"]


def test_ir_from_real_cuda_jit_launch(run_script, tmp_path):
    """The Triton cache of the hand-written autotune kernel run on the H200: JIT specialisation."""
    ttir = h200_ir("user_autotune_kernel", "scale_bias_relu_kernel", "ttir")
    doc = inspect(run_script, tmp_path, FIXTURES.parents[1] / "examples" / "user_autotune_kernel.py",
                  "--ir", ttir)
    k = doc["kernels"][0]
    (ir,) = k["ir"]
    assert ir["stage"] == "ttir" and ir["function"] == "scale_bias_relu_kernel"
    assert ir["args"]["x_ptr"] == {"type": "!tt.ptr<f32>", "tt.divisibility": 16, "tt.pointer_range": None}
    assert ir["args"]["n_cols"]["tt.divisibility"] == 16  # 4096 % 16 == 0 at the launch
    assert ir["assume_count"] == 0
    assert "ttir: no tt.pointer_range on x_ptr, bias_ptr, out_ptr" in doc["findings"]


def test_ir_offline_amd_pointer_range_and_assume(run_script, tmp_path):
    path = h200_kernel("pointwise_chain", "triton_poi_fused_add_gelu_mul_0")
    ir_dir = KERNELS / "ir"
    doc = inspect(run_script, tmp_path, path, "--ir", ir_dir / "pointwise_chain_gfx942_pr32.ttir",
                  "--ir", ir_dir / "pointwise_chain_gfx942_pr32.ttgir")
    ttir, ttgir = doc["kernels"][0]["ir"]
    assert ttir["args"]["in_ptr0"]["tt.pointer_range"] == 32
    assert ttgir["stage"] == "ttgir" and ttgir["buffer_ops"] == 4  # 3 loads + 1 store converted
    assert any("tt.pointer_range=32 reached the ttgir" in f for f in ttgir["findings"])

    text = (ir_dir / "strided_copy_assume_gfx942.ttir").read_text()
    ir = parse_ir_text(text)
    assert ir["assume_count"] == 2  # tl.assume(n >= 0), tl.assume(stride >= 0)


@pytest.mark.parametrize("name, message", [
    ("broken_syntax.py", "not valid Python (line 8"),
    ("missing.py", "no such file"),
])
def test_bad_input_is_one_line_exit_2(run_script, tmp_path, name, message):
    proc = run_script("inspect_triton_meta.py", KERNELS / name, "--json-out", tmp_path / "m.json")
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m.json").exists()


def test_no_jit_function_and_bad_ir(run_script, tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    proc = run_script("inspect_triton_meta.py", plain, "--json-out", tmp_path / "m.json")
    assert proc.returncode == 2 and "no @triton.jit function" in proc.stderr
    proc = run_script("inspect_triton_meta.py", KERNELS / "add_kernel.py", "--ir", plain,
                      "--json-out", tmp_path / "m.json")
    assert proc.returncode == 2 and "no tt.func" in proc.stderr


def test_parse_never_executes(tmp_path):
    evil = tmp_path / "k.py"
    marker = tmp_path / "ran"
    evil.write_text(f"open({str(marker)!r}, 'w').write('x')\nimport triton\n"
                    "@triton.jit\ndef k(x_ptr):\n    pass\n")
    _, parsed = read_kernel_file(evil)
    assert parsed["kernels"][0]["name"] == "k" and not marker.exists()


def test_output_code_with_embedded_kernels(run_script, tmp_path):
    """Inductor output code holds its kernels as async_compile.triton('name', '''source''') strings."""
    wrapper = next(p for p in sorted((H200 / "scatter_index_add").rglob("*.py"))
                   if "async_compile.triton(" in p.read_text(encoding="utf-8"))
    doc = inspect(run_script, tmp_path, wrapper)
    names = [k["name"] for k in doc["kernels"]]
    assert names == ["triton_poi_fused_zeros_like_0",
                     "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1"]
    assert doc["entry_kernel"] is None  # two kernels: none is "the" entry
    assert all(k["embedded"]["async_compile_name"] == k["name"] for k in doc["kernels"])
    assert doc["kernels"][1]["atomics"][0]["kind"] == "scatter"
    proc = run_script("inspect_triton_meta.py", wrapper, "--kernel", "zeros_like_0",
                      "--json-out", tmp_path / "one.json")
    assert proc.returncode == 0
    assert [k["name"] for k in json.loads((tmp_path / "one.json").read_text())["kernels"]] == [
        "triton_poi_fused_zeros_like_0"]


def test_select_by_inductor_kernel_name(run_script, tmp_path):
    """torch 2.4 names the function `triton_`; the capture log names it by inductor_meta's kernel_name."""
    proc = run_script("inspect_triton_meta.py", KERNELS / "inductor_2_4_pointwise.py", "--kernel",
                      "triton_poi_fused_add_0", "--json-out", tmp_path / "m.json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "m.json").read_text())["kernels"][0]["name"] == "triton_"
