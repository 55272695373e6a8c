"""Memory twins of real captured kernels: same memory ops, the arithmetic gone, compiled offline."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tko.read import kernel_source
from tko.measure import twins

ROOT = Path(__file__).resolve().parents[1]
REC = ROOT / "examples" / "recorded_h200"
GELU_TANH = REC / "pointwise_chain" / "autotune_kernels" / "triton_poi_fused_add_gelu_mul_0.py"
GELU_ERF = REC / "mlp_train_step" / "autotune_kernels" / "triton_poi_fused_gelu_1.py"
GELU_BWD = REC / "mlp_train_step" / "autotune_kernels" / "triton_poi_fused_gelu_gelu_backward_2.py"
SOFTMAX_LN = next((REC / "row_reduction" / "autotune_kernels").glob("triton_red_*.py"))
SCATTER = REC / "scatter_index_add" / "autotune_kernels" / \
    "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1.py"
HANDWRITTEN = REC / "user_autotune_kernel" / "autotune_kernels" / "scale_bias_relu_kernel.py"
NORM_2PASS = REC / "dynamic_shapes" / "autotune_kernels" / \
    "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0.py"
SOL_FIXTURES = sorted((ROOT / "tests" / "fixtures" / "sol_h200").rglob("triton_*.py"))
ALL = [GELU_TANH, GELU_ERF, GELU_BWD, SOFTMAX_LN, SCATTER, HANDWRITTEN, NORM_2PASS]


def _kernel(text: str, name: str | None = None) -> dict:
    parsed = kernel_source.parse_kernel_source(text)
    return kernel_source.select_kernel(parsed, name or parsed["standalone_spec"]["function"])


def _norm(expr: str | None) -> str | None:
    # the twin's text is ast.unparse'd: compare expressions, not their parentheses
    return ast.unparse(ast.parse(expr)) if expr else expr


def _memory_ops(kernel: dict) -> list[tuple]:
    """(op, pointer, mask, kind) of every load/store and atomic, in source order."""
    ops = [(o["op"], _norm(o["pointer"]), _norm(o["mask"]), o["kind"]) for o in kernel["memory_ops"]]
    return ops + [(a["op"], _norm(a["pointer"]), a["kind"]) for a in kernel["atomics"]]


def _calls(source: str) -> set[str]:
    return {ast.unparse(n.func) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)}


def test_the_sol_fixture_kernels_are_there():
    # committed files: a moved folder must fail here, not parametrize the test below over nothing
    assert len(SOL_FIXTURES) >= 10, SOL_FIXTURES


@pytest.mark.parametrize("path", ALL + SOL_FIXTURES, ids=lambda p: p.name[:50])
def test_twin_keeps_every_load_store_pointer_and_mask(path):
    text = path.read_text()
    twin = twins.make_twin(text, path=str(path))
    before = _kernel(text)
    after = _kernel(twin.text, before["name"])
    assert _memory_ops(after) == _memory_ops(before)
    assert [p["name"] for p in after["params"]] == [p["name"] for p in before["params"]]
    # the runner and its spec are untouched: only the def changed
    assert kernel_source.standalone_spec(ast.parse(twin.text)) == kernel_source.standalone_spec(ast.parse(text))


def test_tanh_gelu_twin_has_no_tanh_and_multiplies_nothing():
    twin = twins.make_twin(GELU_TANH.read_text())
    assert twin.replaced == {"*": 7, "libdevice.tanh": 1}
    assert "libdevice.tanh" in _calls(GELU_TANH.read_text())
    assert not any("tanh" in c for c in _calls(twin.function_source))
    assert not re.search(r"\btmp\d+\s*\*", twin.function_source)
    # the index arithmetic is not data: x0 = xindex % 4096 stays a modulo
    assert "x0 = xindex % 4096" in twin.function_source


def test_erf_gelu_backward_twin_drops_erf_and_exp():
    twin = twins.make_twin(GELU_BWD.read_text())
    assert {"libdevice.erf", "libdevice.exp"} <= set(twin.replaced)
    assert not {c for c in _calls(twin.function_source) if c.startswith("libdevice.")}


def test_gather_index_arithmetic_stays_as_written():
    """index_add: the loaded index (tmp9 / tmp4) feeds addresses, so 64 * tmp9 must stay a product."""
    twin = twins.make_twin(SCATTER.read_text())
    assert "in_ptr2 + (x1 + 64 * tmp9)" in twin.function_source
    assert "x1 + 64 * tmp4" in twin.function_source
    assert {"tmp4", "tmp9"} <= set(twin.address_names)
    assert "tmp13 = tmp11 + tmp12" in twin.function_source     # the data product became a sum
    assert twin.replaced == {"*": 1}


def test_reductions_and_welford_helpers_are_kept():
    text = SOFTMAX_LN.read_text()
    twin = twins.make_twin(text)
    kept = {"triton_helpers.welford_reduce", "triton_helpers.welford", "triton_helpers.online_softmax_combine",
            "triton_helpers.online_softmax_reduce", "tl.where", "tl.broadcast_to"}
    assert kept <= _calls(twin.function_source)
    assert {"libdevice.exp", "libdevice.rsqrt"} <= set(twin.replaced)
    # both loops survive (two passes over in_ptr0)
    assert twin.function_source.count("for r0_offset in") == text.split("def ", 1)[1].count("for r0_offset in") == 2


def test_handwritten_kernel_twin():
    twin = twins.make_twin(HANDWRITTEN.read_text())
    assert twin.kernel == "scale_bias_relu_kernel"
    assert "x + scale + b" in twin.function_source
    assert "offs % n_cols" in twin.function_source    # an index modulo, not data
    assert "@triton.autotune" in twin.text             # decorators as captured


def test_loop_carried_accumulator_becomes_data():
    src = (
        "import triton\nimport triton.language as tl\n\n@triton.jit\n"
        "def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    acc = tl.zeros([BLOCK], tl.float32)\n"
        "    for i in range(0, n, BLOCK):\n"
        "        offs = i + tl.arange(0, BLOCK)\n"
        "        x = tl.load(x_ptr + offs, mask=offs < n)\n"
        "        acc = acc * 0.5 + tl.exp(x)\n"
        "    tl.store(out_ptr + tl.arange(0, BLOCK), acc)\n")
    twin = twins.make_twin(src)
    assert "acc = acc + 0.5 + x" in twin.function_source
    assert "offs = i + tl.arange(0, BLOCK)" in twin.function_source


def test_twin_text_is_what_the_runner_executes(tmp_path):
    """The Inductor launch re-executes the file's own text: the def in the file must be the twin."""
    out = tmp_path / GELU_TANH.name
    twins.write_twin_file(GELU_TANH, out)
    tree = ast.parse(out.read_text())
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "triton_poi_fused_add_gelu_mul_0"]
    assert len(defs) == 1
    assert not any("tanh" in c for c in _calls(ast.unparse(defs[0])))
    assert [ast.unparse(d) for d in defs[0].decorator_list][-1] == "triton.jit"


@pytest.mark.parametrize("path", [GELU_TANH, GELU_ERF, SCATTER, NORM_2PASS, HANDWRITTEN], ids=lambda p: p.name[:40])
def test_twin_compiles_for_gfx942_with_the_same_memory_census(tmp_path, path):
    pytest.importorskip("triton")
    out = tmp_path / path.name
    twins.write_twin_file(path, out)
    check = twins.check_twin(path, out, ["gfx942"])
    assert check["valid"], check["reasons"]
    entry = check["arches"][0]
    assert entry["kernel"]["global_load"] + entry["kernel"]["buffer_load"] > 0
    if path is not HANDWRITTEN and path is not SCATTER:   # nothing expensive to remove there
        assert entry["twin_mix"]["valu"] < entry["kernel_mix"]["valu"]
        assert entry["twin_mix"]["transcendental"] < entry["kernel_mix"]["transcendental"]


def test_a_twin_that_drops_a_load_is_invalid(tmp_path):
    """The census catches a twin whose compiled code differs: here a load edited away."""
    pytest.importorskip("triton")
    out = tmp_path / GELU_TANH.name
    twins.write_twin_file(GELU_TANH, out)
    text = out.read_text().replace("tmp19 = tl.load(in_ptr2 + x2, None).to(tl.float32)",
                                   "tmp19 = tl.full([XBLOCK], 1.0, tl.float32)")
    out.write_text(text)
    check = twins.check_twin(GELU_TANH, out, ["gfx942"])
    assert not check["valid"]
    assert any("global_load 3 -> 2" in r for r in check["reasons"])
