"""Kernel -> model code, read from real TORCH_LOGS="+inductor,output_code" logs of H200 runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from tko.read import model_code

RECORDED = ROOT / "examples" / "recorded_h200"


def origins_of(path: Path):
    return model_code.read_origins(path.read_text(encoding="utf-8"))


def test_dynamic_shapes_kernel_maps_to_both_lines_of_f():
    origins = origins_of(RECORDED / "dynamic_shapes" / "log_profile.txt")
    mc = model_code.kernel_model_code(origins, "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0")
    assert mc["compile_id"] == "0/0"
    assert mc["source_nodes"] == ["silu", "h", "norm", "clamp_min", "truediv"]
    assert mc["aten_ops"] == ["aten.silu", "aten.mul", "aten.linalg_vector_norm", "aten.clamp_min", "aten.div"]
    where = [(Path(f["file"]).name, f["line"], f["function"], f["nodes"]) for f in mc["frames"]]
    assert where == [("dynamic_shapes.py", 10, "f", ["silu", "h"]),
                     ("dynamic_shapes.py", 11, "f", ["norm", "clamp_min", "truediv"])]
    assert mc["frames"][0]["code"] == "h = torch.nn.functional.silu(x) * w"
    assert mc["unmapped_nodes"] == []


def test_scatter_kernels_split_between_the_fill_and_the_index_add():
    origins = origins_of(RECORDED / "scatter_index_add" / "log_profile.txt")
    fill = model_code.kernel_model_code(origins, "triton_poi_fused_zeros_like_0")
    assert [(f["line"], f["code"]) for f in fill["frames"]] == [(14, "out = torch.zeros_like(node_feat)")]
    scatter = model_code.kernel_model_code(origins, "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1")
    codes = {f["code"] for f in scatter["frames"]}
    assert "msg = node_feat[edge_src] * edge_w[:, None]" in codes and any("index_add_" in c for c in codes)
    assert "aten.index_add" in scatter["aten_ops"]


def test_backward_kernels_point_at_the_forward_line_of_the_module():
    # nn.Module forward + backward (MLP train step): every kernel, the backward ones too, comes from
    # `return x + self.down(gelu(self.up(self.norm(x))))` at line 17 of MLP.forward
    origins = origins_of(FIXTURES / "inductor_h200" / "mlp_train_step" / "log_profile.txt")
    assert len(origins.kernels) == 9
    for kernel in origins.kernels:
        mc = model_code.kernel_model_code(origins, kernel)
        assert [(Path(f["file"]).name, f["line"], f["function"]) for f in mc["frames"]] == \
            [("mlp_train_step.py", 17, "forward")], kernel
    back = model_code.kernel_model_code(origins, "triton_poi_fused_gelu_gelu_backward_2")
    assert back["aten_ops"] == ["aten.gelu", "aten.gelu_backward"] and "gelu" in back["frames"][0]["nodes"]


def test_module_text_gives_source_nodes_without_frames():
    module = (RECORDED / "dynamic_shapes" / "inductor_cache" / "lx"
              / "clxtkptwyye7sdohhc7cd6tsuwsljwmqplwy2zbaj2cbsqsm4zse.py").read_text()
    origins = model_code.read_origins("", [module])
    mc = model_code.kernel_model_code(origins, "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0")
    assert mc["source_nodes"] == ["silu", "h", "norm", "clamp_min", "truediv"]
    assert mc["frames"] == [] and mc["unmapped_nodes"] == mc["source_nodes"]
    assert model_code.kernel_model_code(origins, "no_such_kernel") is None


def test_enclosing_qualname_finds_methods_and_nested_functions(tmp_path):
    src = tmp_path / "model.py"
    src.write_text("import torch\n\n"
                   "class Block(torch.nn.Module):\n"
                   "    def forward(self, x):\n"
                   "        return x * 2\n\n"
                   "def f(x):\n"
                   "    def inner(y):\n"
                   "        return y + 1\n"
                   "    return inner(x)\n")
    assert model_code.enclosing_qualname(src, 5) == "Block.forward"
    assert model_code.enclosing_qualname(src, 9) == "f.<locals>.inner"
    assert model_code.enclosing_qualname(src, 10) == "f"
    assert model_code.enclosing_qualname(src, 1) is None
    assert model_code.enclosing_qualname(tmp_path / "absent.py", 3) is None


def test_collect_manifest_and_report_name_the_model_code(run_script, tmp_path):
    ex = RECORDED / "dynamic_shapes"
    kernel = "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0"
    proc = run_script("collect_inductor_artifacts.py", "--log", ex / "log_profile.txt", "--cache-root",
                      ex / "inductor_cache", "--out", tmp_path / "art", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "art" / "manifest.json").read_text())
    (entry,) = [k for k in manifest["kernels"] if k["kernel"] == kernel]
    assert [f["line"] for f in entry["model_code"]["frames"]] == [10, 11]
    rep = run_script("make_investigation_report.py", "--kernel", kernel, "--out", tmp_path / "rep.md",
                     "--artifacts", tmp_path / "art" / "manifest.json", "--repro", "python examples/dynamic_shapes.py",
                     cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert json.loads((tmp_path / "rep.json").read_text())["repro"] == "python examples/dynamic_shapes.py"
    text = (tmp_path / "rep.md").read_text()
    assert "## Model code behind the kernel" in text
    assert "dynamic_shapes.py:10` | `" in text and "h = torch.nn.functional.silu(x) * w" in text
    # without a log there is no model code, and the report says so as a gap, not an error
    rep = run_script("make_investigation_report.py", "--kernel", kernel, "--out", tmp_path / "rep2.md", cwd=tmp_path)
    assert rep.returncode == 0 and "no artifact manifest" in (tmp_path / "rep2.md").read_text()


@pytest.mark.parametrize("text", ["", "garbage\n[0/0] no prefix\n", "V1130 05:28:05.903000 1 x.py:1] [0/0] [__output_code] "
                                  "# Topologically Sorted Source Nodes: [a], Original ATen: [aten.add]\n"])
def test_partial_or_foreign_logs_give_nothing_not_errors(text):
    origins = model_code.read_origins(text)
    assert origins.kernels == {}


def test_output_code_of_older_torch():
    # the output-code layout of torch 2.3/2.4 (public Inductor logs): "# Source Nodes:", a blank line
    # before the definition, and 'triton_' as async_compile.triton's first argument
    module = ("# kernel path: /tmp/torchinductor_u/dd/cddy.py\n"
              "# Source Nodes: [add], Original ATen: [aten.add]\n"
              "# add => add\n"
              "triton_poi_fused_add_0 = async_compile.triton('triton_', '''\n"
              "import triton\n"
              "''', device_str='cuda')\n"
              "# kernel path: /tmp/torchinductor_u/qt/cqtc.py\n"
              "# Source Nodes: [], Original ATen: [aten.sum]\n"
              "\n"
              "triton_per_fused_sum_0 = async_compile.triton('triton_', '''\n")
    origins = model_code.read_origins("", [module])
    assert origins.kernels["triton_poi_fused_add_0"]["source_nodes"] == ["add"]
    assert origins.kernels["triton_per_fused_sum_0"] == {"compile_id": "module", "source_nodes": [],
                                                         "aten_ops": ["aten.sum"]}
