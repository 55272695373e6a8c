"""probe_compile.py / tko.compile.offline_compile / tko.compile.compile_probe on real compiler output.

Every compile here is a real offline Triton compile for gfx942 (or sm_90): the expected instruction
counts were checked by hand with `--keep-dir` and `grep -E '^\\s+(buffer|global)_(load|store)_'`
on the kept .amdgcn files (numbers in the comments).  Where Triton versions behave differently
(AMDGCN_USE_BUFFER_OPS off by default before 3.6; from 3.6 tt.pointer_range=32 is what converts a
load; on 3.3-3.5 a tl.assume non-negativity proof is) the expectation is chosen per installed
version.  Run and passing on triton 3.3.1 and 3.4.0 (without torch), 3.6.0 and 3.9.0.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tko.compile import offline_compile, probe_variants
from tko.read import kernel_ir, kernel_source
from tko.base.contracts import contract_problems
from tko.base.errors import InputError
from tko.base.versions import package_version, parse_version

FIXTURES = Path(__file__).resolve().parent / "fixtures"
KERNELS = FIXTURES / "kernels"
H200 = FIXTURES / "inductor_h200"
TRITON = parse_version(package_version("triton"))
STRIDED_SIG = "src_ptr=*fp32,dst_ptr=*fp32,n=i32,stride=i32"
ADD_SIG = "x_ptr=*fp32,y_ptr=*fp32,output_ptr=*fp32,n_elements=i32"

slow = pytest.mark.slow
# triton >= 3.3: dict attrs and constexprs= in ASTSource (before 3.5 ld.lld is replaced by a stand-in)
needs_offline_triton = pytest.mark.skipif(TRITON < (3, 3), reason="offline compile needs triton >= 3.3")


def h200_kernel(example: str, name: str) -> Path:
    for path in sorted((H200 / example).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if f"def {name}(" in text and "async_compile" not in text:
            return path
    raise AssertionError(f"{name} not in the committed H200 fixtures under {H200 / example}")


def probe_run(run_script, tmp_path, kernel_file, *args, expect_rc=0):
    out = tmp_path / "probe.json"
    md = tmp_path / "probe.md"
    proc = run_script("probe_compile.py", kernel_file, *args, "--json-out", out, "--markdown-out", md,
                      cwd=tmp_path, timeout=600)
    assert proc.returncode == expect_rc, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "compile_probe/1" and contract_problems(doc) == []
    return doc, md.read_text(), proc


def results(doc):
    return {(r["variant"], r["arch"]): r for r in doc["results"]}


# --------------------------------------------------------------------------- real compiles

@slow
@needs_offline_triton
def test_inductor_pointwise_pointer_range_turns_global_into_buffer(run_script, tmp_path):
    """Real torch 2.11 Inductor kernel: its triton_meta has no tt.pointer_range (as Inductor passes it)."""
    pytest.importorskip("torch")  # the kernel calls libdevice from torch's triton_helpers
    path = h200_kernel("pointwise_chain", "triton_poi_fused_add_gelu_mul_0")
    doc, md, _ = probe_run(run_script, tmp_path, path, "--arch", "gfx942",
                           "--variants", "baseline,pointer_range", "--config", "XBLOCK=1024,num_warps=4")
    assert doc["origin"] == "inductor" and doc["base"]["config_source"] == "given"
    assert doc["base"]["attrs"]["in_ptr0"] == [["tt.divisibility", 16]]
    res = results(doc)
    base, pr = res[("baseline", "gfx942")]["summary"], res[("pointer_range", "gfx942")]["summary"]
    assert res[("pointer_range", "gfx942")]["attrs"]["in_ptr0"] == [["tt.divisibility", 16],
                                                                    ["tt.pointer_range", 32]]
    # Hand-checked on triton 3.9: baseline 3x global_load_dwordx2 + 1x global_store_dwordx2;
    # pointer_range 3x buffer_load_dwordx2 + 1x buffer_store_dwordx2 (fp16 x 4 per lane).
    assert (base["global_load"], base["global_store"], base["buffer_load"]) == (3, 1, 0)
    assert base["load_width"] == "dwordx2"
    if TRITON >= (3, 6):  # buffer ops on by default; pr32 is enough
        assert base["verdict"] == "global" and pr["verdict"] == "buffer"
        assert (pr["buffer_load"], pr["buffer_store"], pr["global_load"]) == (3, 1, 0)
        assert any(f.startswith("pointer_range on gfx942: verdict global -> buffer") for f in doc["findings"])
        assert "| `pointer_range` | **buffer · L 3/0 · S 1/0 · dwordx2** |" in md
    else:  # 3.5: buffer ops off unless AMDGCN_USE_BUFFER_OPS=1
        assert pr["verdict"] == "global"


@slow
@needs_offline_triton
def test_assume_on_stride_kernel_per_version(run_script, tmp_path):
    """`offs * stride` with a runtime stride: what tl.assume(stride >= 0) buys depends on the version."""
    doc, md, _ = probe_run(run_script, tmp_path, KERNELS / "strided_copy.py", "--arch", "gfx942",
                           "--signature", STRIDED_SIG, "--config", "BLOCK=1024,num_warps=4", "--variants",
                           "baseline,buffer_ops_on+assume,pointer_range,buffer_ops_off+pointer_range")
    res = {k[0]: v for k, v in results(doc).items()}
    assume = res["buffer_ops_on+assume"]
    assert assume["buffer_ops_env"] == "1" and res["buffer_ops_off+pointer_range"]["buffer_ops_env"] == "0"
    # the source edit reached the IR: tl.assume(n >= 0), tl.assume(stride >= 0)
    variant = next(v for v in doc["variants"] if v["name"] == "buffer_ops_on+assume")
    assert variant["inserted"]["top"] == ["tl.assume(n >= 0)", "tl.assume(stride >= 0)"]
    assert assume["ttgir_assumes"] == 2 and res["baseline"]["ttgir_assumes"] == 0
    verdicts = {name: r["summary"]["verdict"] for name, r in res.items()}
    if TRITON >= (3, 6):
        # Range analysis cannot bound offs*stride without pr32; the assume does not change that.
        # Hand-checked: 4 global_load_dword / 4 global_store_dword vs 4 buffer_load_dword / 4 buffer_store_dword.
        assert verdicts == {"baseline": "global", "buffer_ops_on+assume": "global",
                            "pointer_range": "buffer", "buffer_ops_off+pointer_range": "global"}
        assert (res["pointer_range"]["summary"]["buffer_load"], res["pointer_range"]["summary"]["buffer_store"]) == (4, 4)
        assert any(f == "buffer_ops_on+assume on gfx942: same load/store code as baseline" for f in doc["findings"])
    elif TRITON >= (3, 3):
        # 3.3-3.5 with the switch on: the non-negativity proof from the assume unlocks buffer loads.
        assert verdicts["baseline"] == "global" and verdicts["buffer_ops_on+assume"] in ("buffer", "mixed")
        assert verdicts["buffer_ops_off+pointer_range"] == "global"


@slow
@needs_offline_triton
def test_gfx938_compiles_for_its_proxy(run_script, tmp_path):
    doc, md, _ = probe_run(run_script, tmp_path, KERNELS / "add_kernel.py", "--arch", "gfx938",
                           "--variants", "pointer_range", "--signature", ADD_SIG,
                           "--config", "BLOCK_SIZE=1024")
    (target,) = doc["targets"]
    assert target["requested"] == "gfx938" and target["compiled_for"] == "gfx942"
    assert "gfx938" in target["proxy_note"] and "proxy gfx942" in target["proxy_note"]
    (row,) = doc["results"]
    assert row["status"] == "ok" and row["arch"] == "gfx938" and row["compiled_for"] == "gfx942"
    assert row["metadata"]["target"] == {"backend": "hip", "arch": "gfx942", "warp_size": 64}
    # 3 fp32 streams, masked (n_elements not known divisible): 8 dword loads, 4 dword stores; buffer
    # ones where buffer ops are on by default (>= 3.6), global ones before.
    s = row["summary"]
    assert (s["buffer_load"] + s["global_load"], s["buffer_store"] + s["global_store"]) == (8, 4)
    assert s["verdict"] == ("buffer" if TRITON >= (3, 6) else "global")
    assert doc["findings"][0] == target["proxy_note"] and "gfx938 (as gfx942)" in md


def test_syntax_error_is_one_line_exit_2(run_script, tmp_path):
    proc = run_script("probe_compile.py", KERNELS / "broken_syntax.py", "--arch", "gfx942",
                      "--json-out", tmp_path / "p.json")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "not valid Python (line 8" in proc.stderr and not (tmp_path / "p.json").exists()


@slow
@needs_offline_triton
def test_compile_errors_are_reported_per_variant(run_script, tmp_path):
    doc, md, proc = probe_run(run_script, tmp_path, KERNELS / "bad_body.py", "--arch", "gfx942",
                              "--variants", "baseline,pointer_range", "--signature", "x_ptr=*fp32,n=i32",
                              "--config", "BLOCK=64", expect_rc=1)
    assert [r["status"] for r in doc["results"]] == ["error", "error"]
    for r in doc["results"]:
        assert r["error_kind"] == "ToolFailure"
        assert r["error"].splitlines()[0] == "CompilationError: NameError('undefined_name is not defined')"
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "| `baseline` | **error**: CompilationError: NameError" in md


@slow
@needs_offline_triton
def test_bad_signature_type_is_a_per_variant_error(run_script, tmp_path):
    doc, _, _ = probe_run(run_script, tmp_path, KERNELS / "strided_copy.py", "--arch", "gfx942",
                          "--variants", "baseline", "--config", "BLOCK=64",
                          "--signature", "src_ptr=*fp32,dst_ptr=*fp32,n=*fp32,stride=i32", expect_rc=1)
    (row,) = doc["results"]
    assert row["status"] == "error"
    first = row["error"].splitlines()[0]  # 3.9: the message; 3.6: IncompatibleTypeErrorImpl('...')
    assert first.startswith("CompilationError: ") and "invalid operands of type pointer<fp32>" in first
    assert "mask = offs < n" in row["error"]


@pytest.mark.parametrize("args, message", [
    (["--arch", "gfx942"], "no type for src_ptr, dst_ptr, n, stride"),
    (["--arch", "gfx942", "--signature", STRIDED_SIG], "no value for constexpr BLOCK"),
    (["--arch", "gfx942", "--signature", "src=*fp32"], "not a parameter of strided_copy"),
    (["--arch", "gfx942", "--signature", "src_ptr=*float"], "unknown type '*float'"),
    (["--arch", "nonsense", "--signature", STRIDED_SIG, "--config", "BLOCK=64"], "unknown arch"),
    (["--arch", "gfx942", "--signature", STRIDED_SIG, "--config", "BLOCK=64", "--variants", "fast"],
     "unknown variant 'fast'"),
])
def test_bad_flags_exit_2_before_any_compile(run_script, tmp_path, args, message):
    proc = run_script("probe_compile.py", KERNELS / "strided_copy.py", *args, "--json-out", tmp_path / "p.json")
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_default_target_needs_a_gpu(run_script, tmp_path):
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a GPU is present: the default target is its arch")
    except ImportError:
        pass
    proc = run_script("probe_compile.py", KERNELS / "strided_copy.py", "--json-out", tmp_path / "p.json")
    assert proc.returncode == 2 and "--arch" in proc.stderr


# --------------------------------------------------------------------------- in-process compiles

@needs_offline_triton
def test_compile_kernel_file_loads_torch_2_6_era_file(monkeypatch, tmp_path):
    """AttrsDescriptor import (gone in triton >= 3.3), set_driver_to_gpu() and the heuristics
    decorator are neutralised; hints come from the from_dict triton_meta."""
    from tko.read.isa import scan_text

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    out = offline_compile.compile_kernel_file(KERNELS / "inductor_2_6_embedding.py", "gfx90a",
                                              pointer_range=32, config={"XBLOCK": 256, "num_warps": 4})
    assert out.kernel == "triton_poi_fused_embedding_0" and out.proxy_note is None
    assert out.signature == {"in_ptr0": "*i64", "in_ptr1": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32",
                             "XBLOCK": "constexpr"}
    assert out.constexprs == {"XBLOCK": 256} and out.options == {"num_warps": 4}
    assert out.attrs["xnumel"] == [["tt.divisibility", 16]]
    assert any("triton_heuristics.pointwise" in n for n in out.notes)
    assert out.metadata["target"]["arch"] == "gfx90a" and set(out.asm) >= {"ttir", "ttgir", "amdgcn"}
    (kernel,) = scan_text(out.asm["amdgcn"], arch="gfx90a")["kernels"]
    if TRITON >= (3, 6):  # buffer ops on by default: pr32 converts the loads
        assert kernel["families"]["buffer_load"] >= 2 and kernel["families"]["global_load"] == 0
    else:
        assert kernel["families"]["buffer_load"] == 0 and kernel["families"]["global_load"] >= 2


@needs_offline_triton
def test_compile_hand_written_autotune_for_sm90_uses_first_declared_config(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    out = offline_compile.compile_kernel_file(KERNELS / "autotuned_scale.py", "sm_90",
                                              signature="x_ptr=*fp16,out_ptr=*fp16,n=i32,alpha=fp32")
    assert out.kernel == "scale_kernel" and out.config_source == "first declared config"
    assert out.constexprs == {"BLOCK": 256} and out.options == {"num_warps": 2}
    assert out.target == {"backend": "cuda", "arch": "sm_90", "warp_size": 32}
    assert ".target sm_90" in out.asm["ptx"] and "ld.global" in out.asm["ptx"]


def test_plan_from_launch_event_specialises_like_the_jit():
    """A launch event shaped as the autotune_event/1 contract describes (constructed here)."""
    _, parsed = kernel_source.read_kernel_file(KERNELS / "strided_copy.py")
    kernel = kernel_source.select_kernel(parsed, None)
    launch = {"event": "launch", "kernel": "strided_copy", "args": [
        {"name": "src_ptr", "kind": "tensor", "dtype": "torch.float16", "storage_offset": 0},
        {"name": "dst_ptr", "kind": "tensor", "dtype": "torch.float16", "storage_offset": 3},
        {"name": "n", "kind": "scalar", "value": 4096},
        {"name": "stride", "kind": "scalar", "value": 1}],
        "winner": {"kwargs": {"BLOCK": 512}, "num_warps": 8, "num_stages": 1, "extras": {}}}
    plan = offline_compile.plan_compile(kernel, launch=launch)
    assert plan.signature == {"src_ptr": "*fp16", "dst_ptr": "*fp16", "n": "i32", "stride": "constexpr",
                              "BLOCK": "constexpr"}
    assert plan.constexprs == {"stride": 1, "BLOCK": 512}  # ints equal to 1 are folded, as the JIT does
    # dst_ptr starts 3 halves (6 bytes) into its storage: not 16-byte aligned, so no divisibility.
    assert plan.attrs == {"src_ptr": [["tt.divisibility", 16]], "n": [["tt.divisibility", 16]]}
    assert plan.config_source == "captured winner" and plan.options == {"num_warps": 8, "num_stages": 1}


def test_default_config_rules_from_size_hints():
    path = h200_kernel("scatter_index_add", "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1")
    _, parsed = kernel_source.read_kernel_file(path)
    plan = offline_compile.plan_compile(kernel_source.select_kernel(parsed, None))
    assert plan.constexprs == {"YBLOCK": 32, "XBLOCK": 32} and "default rule" in plan.config_source
    path = h200_kernel("dynamic_shapes", "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0")
    _, parsed = kernel_source.read_kernel_file(path)
    plan = offline_compile.plan_compile(kernel_source.select_kernel(parsed, None))
    assert plan.constexprs == {"XBLOCK": 1, "R0_BLOCK": 1024}


# --------------------------------------------------------------------------- variants (no compile)

def _plan(name, signature=None, config=None):
    text, parsed = kernel_source.read_kernel_file(KERNELS / name)
    kernel = kernel_source.select_kernel(parsed, None)
    return text, kernel, offline_compile.plan_compile(kernel, signature=signature, config=config)


def test_multiple_of_claims_only_what_the_code_proves():
    text, kernel, plan = _plan("add_kernel.py", ADD_SIG, {"BLOCK_SIZE": 1024})
    (v,) = probe_variants.build_variants(["multiple_of"], kernel, text, plan)
    assert v.claims == [
        "block_start = pid * BLOCK_SIZE is program_id * BLOCK_SIZE: a multiple of BLOCK_SIZE",
        "offsets = block_start + tl.arange(0, BLOCK_SIZE): starts at a multiple of BLOCK_SIZE and runs "
        "BLOCK_SIZE contiguous elements"]
    edited = probe_variants.rewrite_source(text, kernel["name"], [], {int(k): x for k, x in v.source_lines.items()})
    lines = edited.splitlines()
    i = lines.index("    block_start = pid * BLOCK_SIZE")
    assert lines[i + 1] == "    block_start = tl.multiple_of(block_start, BLOCK_SIZE)"
    assert lines[i + 3] == "    offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK_SIZE), BLOCK_SIZE)"
    # index_add's offsets depend on a loaded row index: nothing is sound to claim
    text, kernel, plan = _plan("index_add.py", "out_ptr=*fp32,index_ptr=*i64,src_ptr=*fp32,n_index=i32,"
                                               "row_len=i32", {"BLOCK": 128})
    (v,) = probe_variants.build_variants(["multiple_of"], kernel, text, plan)
    assert v.skipped and not v.claims


def test_assume_inserted_at_top_of_body_for_integer_scalars():
    text, kernel, plan = _plan("autotuned_scale.py", "x_ptr=*fp16,out_ptr=*fp16,n=i32,alpha=fp32")
    (v,) = probe_variants.build_variants(["assume"], kernel, text, plan)
    assert v.source_lines == {"top": ["tl.assume(n >= 0)"]}  # alpha is a float: no claim
    edited = probe_variants.rewrite_source(text, kernel["name"], v.source_lines["top"], {})
    body = edited.split("def scale_kernel(", 1)[1].splitlines()
    assert body[1] == "    tl.assume(n >= 0)" and body[2] == "    tl.assume(n > 0)"
    kernel_source.parse_kernel_source(edited)  # still valid Python


def test_block_and_warp_neighbours_and_combinations():
    text, kernel, plan = _plan("strided_copy.py", STRIDED_SIG, {"BLOCK": 1024, "num_warps": 4})
    names = [v.name for v in probe_variants.build_variants(["blocks", "warps", "pointer_range+assume"], kernel, text, plan)]
    assert names == ["BLOCK=2048", "BLOCK=512", "num_warps=8", "num_warps=2", "pointer_range+assume"]
    combo = probe_variants.build_variants(["pointer_range+assume+buffer_ops_on"], kernel, text, plan)[0]
    assert combo.pointer_range == 32
    assert combo.env == {"AMDGCN_USE_BUFFER_OPS": "1", "HCUGCN_USE_BUFFER_OPS": "1"}
    with pytest.raises(InputError):
        probe_variants.build_variants(["blocks+assume"], kernel, text, plan)


def test_worker_runs_from_any_directory(tmp_path):
    """The worker command needs only PYTHONPATH=scripts, which worker_env provides."""
    env = offline_compile.worker_env({"X_TEST": "1"})
    assert env["PYTHONPATH"].split(os.pathsep)[0].endswith("scripts") and env["X_TEST"] == "1"


@needs_offline_triton
def test_compile_kernel_embedded_in_output_code(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    wrapper = next(p for p in sorted((H200 / "scatter_index_add").rglob("*.py"))
                   if "async_compile.triton(" in p.read_text(encoding="utf-8"))
    with pytest.raises(InputError, match="several kernels"):
        offline_compile.compile_kernel_file(wrapper, "gfx942")
    out = offline_compile.compile_kernel_file(wrapper, "gfx942", kernel="triton_poi_fused_zeros_like_0",
                                              pointer_range=32, config={"XBLOCK": 1024, "num_warps": 4})
    assert out.kernel == "triton_poi_fused_zeros_like_0"
    assert any("async_compile.triton call at line" in n for n in out.notes)
    if TRITON >= (3, 6):
        assert "buffer_store" in out.asm["amdgcn"] and "global_store" not in out.asm["amdgcn"]
    else:  # buffer ops off unless AMDGCN_USE_BUFFER_OPS=1
        assert "global_store" in out.asm["amdgcn"] and "buffer_store" not in out.asm["amdgcn"]


@pytest.mark.gpu
def test_default_target_is_the_local_gpu(run_script, tmp_path):
    """On a GPU machine the local device compiles as the installed Triton targets it: no proxy."""
    doc, _, _ = probe_run(run_script, tmp_path, KERNELS / "add_kernel.py", "--variants", "baseline",
                          "--signature", ADD_SIG, "--config", "BLOCK_SIZE=1024")
    (target,) = doc["targets"]
    assert target["proxy_note"] is None and target["requested"] == target["compiled_for"]
    (row,) = doc["results"]
    assert row["status"] == "ok" and row["metadata"]["target"]["arch"] == target["compiled_for"]
    assert row["summary"]["global_load"] + row["summary"]["buffer_load"] > 0


def test_multiple_of_on_2d_inductor_index_gives_one_value_per_dim():
    path = h200_kernel("scatter_index_add", "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1")
    text, parsed = kernel_source.read_kernel_file(path)
    kernel = kernel_source.select_kernel(parsed, None)
    plan = offline_compile.plan_compile(kernel)
    (v,) = probe_variants.build_variants(["multiple_of"], kernel, text, plan)
    inserted = [line for lines in v.source_lines.values() for line in lines]
    # yoffset = (pid1 + pid2 * num_programs(1)) * YBLOCK is not a plain program_id product: no claim.
    assert inserted == ["xoffset = tl.multiple_of(xoffset, XBLOCK)",
                        "xindex = tl.max_contiguous(tl.multiple_of(xindex, [1, XBLOCK]), [1, XBLOCK])"]


# --------------------------------------------------------------------------- real captures (H200)

CAPTURE = FIXTURES / "capture_h200" / "user_autotune_kernel"


def test_launch_event_specialises_like_the_real_jit_launch():
    """The recorded launch of the hand-written kernel on the H200 gives the same argument hints the
    JIT gave it there (its TTIR from the real Triton cache)."""
    import probe_compile

    _, parsed = kernel_source.read_kernel_file(FIXTURES.parents[1] / "examples" / "user_autotune_kernel.py")
    kernel = kernel_source.select_kernel(parsed, None)
    launch = probe_compile.read_launch_event(str(CAPTURE / "autotune.log"), {kernel["name"]})
    plan = offline_compile.plan_compile(kernel, launch=launch)
    assert plan.signature == {"x_ptr": "*fp32", "bias_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32",
                              "n_cols": "i32", "scale": "fp32", "BLOCK": "constexpr"}
    assert plan.config_source == "captured winner" and plan.constexprs == {"BLOCK": 1024}
    ttir = sorted((H200 / "user_autotune_kernel").rglob("scale_bias_relu_kernel.ttir"))
    assert ttir, "the committed H200 Triton cache lost scale_bias_relu_kernel.ttir"
    (func,) = kernel_ir.parse_ir_text(ttir[0].read_text())["functions"]
    jit_div = {a["name"] for a in func["args"] if a["attrs"].get("tt.divisibility") == 16}
    assert jit_div == {name for name, pairs in plan.attrs.items() if ["tt.divisibility", 16] in pairs}
    assert jit_div == {"x_ptr", "bias_ptr", "out_ptr", "n_elements", "n_cols"}


@slow
@needs_offline_triton
def test_probe_a_captured_standalone_file_needs_no_signature(run_script, tmp_path):
    doc, md, _ = probe_run(run_script, tmp_path, CAPTURE / "scale_bias_relu_kernel.py", "--arch", "gfx942",
                           "--variants", "baseline,pointer_range")
    assert doc["origin"] == "hand-written" and doc["kernel"] == "scale_bias_relu_kernel"
    base = doc["base"]
    assert base["signature"]["scale"] == "fp32" and base["config"]["kwargs"] == {"BLOCK": 1024}
    assert base["config_source"] == "captured winner" and base["config"]["num_warps"] == 4
    res = results(doc)
    assert res[("baseline", "gfx942")]["status"] == "ok"
    if TRITON >= (3, 6):
        assert res[("pointer_range", "gfx942")]["summary"]["verdict"] == "buffer"


@needs_offline_triton
def test_kernel_importing_a_sibling_jit_helper(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "tko_test_helpers.py").write_text(
        "import triton\n\n@triton.jit\ndef twice(x):\n    return x * 2\n")
    kernel = tmp_path / "uses_helper.py"
    kernel.write_text(
        "import triton\nimport triton.language as tl\nfrom tko_test_helpers import twice\n\n"
        "@triton.jit\ndef double_kernel(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, twice(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)\n")
    out = offline_compile.compile_kernel_file(kernel, "gfx942", signature="x_ptr=*fp32,n=i32",
                                              config={"BLOCK": 256})
    assert out.kernel == "double_kernel"
    assert "arith.mulf" in out.asm["ttir"]  # the helper's x * 2, inlined
    assert "v_add_f32" in out.asm["amdgcn"]  # ... which LLVM turns into x + x


def test_linker_stand_in_for_old_triton_without_ld_lld(monkeypatch, tmp_path):
    """Triton < 3.5 shells out to ld.lld; the stand-in copies the object (checked for real on 3.4.0)."""
    import subprocess
    import sys

    monkeypatch.setattr(offline_compile, "package_version", lambda name: "3.4.0")
    monkeypatch.delenv("TRITON_HIP_LLD_PATH", raising=False)
    env, note = offline_compile.hip_linker_env({"backend": "hip"})
    if not env:
        pytest.skip("an ld.lld exists on this machine")
    assert offline_compile.hip_linker_env({"backend": "cuda"}) == ({}, None)
    stub = env["TRITON_HIP_LLD_PATH"]
    assert "hsaco is not loadable" in note
    version = subprocess.run([stub, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("LLD")
    (tmp_path / "in.o").write_bytes(b"\x7fELF-object")
    subprocess.run([stub, "-flavor", "gnu", "-shared", str(tmp_path / "in.o"), "-o", str(tmp_path / "out")],
                   check=True)
    assert (tmp_path / "out").read_bytes() == b"\x7fELF-object"
    assert sys.executable in Path(stub).read_text().splitlines()[0]


def test_kernel_file_with_future_import_loads(tmp_path):
    from tko.compile import offline_compile

    src = tmp_path / "k.py"
    src.write_text("from __future__ import annotations\nimport triton\nimport triton.language as tl\n\n\n"
                   "@triton.jit\ndef add_kernel(x_ptr, n, BLOCK: tl.constexpr):\n"
                   "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                   "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)\n")
    namespace, notes = offline_compile.load_module_namespace(src)
    assert "add_kernel" in namespace and notes == []


TUTORIALS_CAPTURE = Path(__file__).resolve().parents[1] / "examples" / "recorded_h200" / "triton_tutorials" / \
    "autotune_kernels"


@needs_offline_triton
def test_an_offline_compile_under_the_interpreter_compiles_the_kernel(monkeypatch, tmp_path):
    """A user checking a program on a CPU sets TRITON_INTERPRET=1 and the chain's steps inherit it:
    @triton.jit then gives an InterpretedFunction, which has no cache_key to compile. The load and
    the probe's workers turn the interpreter off."""
    monkeypatch.setenv("TKO_CACHE_DIR", "off")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = offline_compile.compile_kernel_file(KERNELS / "autotuned_scale.py", "sm_90",
                                              signature="x_ptr=*fp16,out_ptr=*fp16,n=i32,alpha=fp32")
    assert out.kernel == "scale_kernel" and ".target sm_90" in out.asm["ptx"]
    assert os.environ["TRITON_INTERPRET"] == "1"                         # the user's setting is back
    assert "TRITON_INTERPRET" not in offline_compile.worker_env(None)


def test_a_captured_files_launched_kernel_is_the_default_kernel():
    for name in ("softmax_kernel", "_layer_norm_fwd_fused", "matmul_kernel"):
        _, parsed = kernel_source.read_kernel_file(TUTORIALS_CAPTURE / f"{name}.py")
        assert len(parsed["kernels"]) >= 3
        assert kernel_source.select_kernel(parsed, None)["name"] == name
        assert kernel_source.select_kernel(parsed, "matmul_kernel")["name"] == "matmul_kernel"  # a name decides
