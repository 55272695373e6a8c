"""Byte model on real captures: gathered rows from the saved index, passes, the above-peak flag."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tko.measure import byte_model

ROOT = Path(__file__).resolve().parents[1]
SOL = ROOT / "tests" / "fixtures" / "sol_h200"
EMB_DIR = SOL / "embedding_fwd_bwd" / "autotune_kernels"
EMB_FWD = EMB_DIR / "triton_poi_fused_embedding_0.py"
EMB_BWD = EMB_DIR / "triton_poi_fused_embedding_dense_backward_1.py"
SCATTER = ROOT / "examples" / "recorded_h200" / "scatter_index_add" / "autotune_kernels" / \
    "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1.py"
GELU = ROOT / "examples" / "recorded_h200" / "pointwise_chain" / "autotune_kernels" / \
    "triton_poi_fused_add_gelu_mul_0.py"
SOFTMAX = SOL / "softmax_long_rows" / "autotune_kernels" / \
    "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0.py"


def _model(path: Path) -> dict:
    return byte_model.model_for_file(path.read_text(), path)


def _arg(model: dict, name: str) -> dict:
    return next(a for a in model["args"] if a["name"] == name)


def test_embedding_gather_counts_the_rows_the_saved_index_names():
    torch = pytest.importorskip("torch")
    model = _model(EMB_FWD)
    table = _arg(model, "in_ptr1")
    index = torch.load(str(EMB_FWD.with_suffix(".inputs") / "arg0.pt"))
    rows = table["shape"][0]
    expect = int(torch.unique(index.long() % rows).numel())
    assert table["gather"]["unique_rows"] == expect < rows
    assert table["touched_bytes"] == expect * table["gather"]["row_bytes"] < table["view_bytes"]
    assert not model["upper_bound"]
    # Inductor counts the whole table: its estimate is above the unique bytes
    assert model["inductor_bytes"] > model["unique_bytes"]
    assert model["unique_bytes"] == sum(a["counted_bytes"] for a in model["args"])


def test_embedding_backward_atomic_target_reads_and_writes_the_touched_rows():
    model = _model(EMB_BWD)
    out = _arg(model, "out_ptr0")
    assert out["role"] == "atomic"
    assert out["gather"]["unique_rows"] < out["gather"]["rows"]
    assert out["counted_bytes"] == 2 * out["touched_bytes"]


def test_gather_without_a_saved_index_is_an_upper_bound():
    model = _model(SCATTER)   # recorded without its <kernel>.inputs/ folder
    table = _arg(model, "in_ptr2")
    assert table["gather"]["index_args"] == ["in_ptr1"] and table["gather"]["unique_rows"] is None
    assert table["upper_bound"] and model["upper_bound"]
    assert table["touched_bytes"] == table["view_bytes"] == 100000 * 64 * 4


def test_gather_with_a_hand_saved_index(tmp_path):
    """The real index_add capture, given the saved index tensors it names: 500 distinct rows."""
    torch = pytest.importorskip("torch")
    kernel = tmp_path / SCATTER.name
    shutil.copy(SCATTER, kernel)
    inputs = kernel.with_suffix(".inputs")
    inputs.mkdir()
    src = torch.arange(800000, dtype=torch.int64) % 500          # rows read from in_ptr2
    dst = -(torch.arange(800000, dtype=torch.int64) % 7) - 1     # negative: wrapped like Inductor does
    torch.save(dst, str(inputs / "arg0.pt"))
    torch.save(src, str(inputs / "arg1.pt"))
    model = _model(kernel)
    assert _arg(model, "in_ptr2")["touched_bytes"] == 500 * 64 * 4
    assert _arg(model, "out_ptr0")["touched_bytes"] == 7 * 64 * 4
    assert not model["upper_bound"]
    assert model["unique_bytes"] < model["inductor_bytes"]


def test_pointwise_bytes_match_inductor_and_have_one_pass():
    model = _model(GELU)
    assert model["unique_bytes"] == model["inductor_bytes"] == 201334784
    assert model["max_passes"] == 1 and model["multi_pass_bytes"] == model["unique_bytes"]


def test_two_pass_softmax_reads_its_input_twice():
    model = _model(SOFTMAX)
    inp = _arg(model, "in_ptr0")
    assert model["passes"] == {"in_ptr0": 2}
    assert model["multi_pass_bytes"] == model["unique_bytes"] + inp["touched_bytes"]
    # fp16 4096 x 32768 in and out: one pass 512 MiB, as written 768 MiB -> at most 1.5x
    assert model["unique_bytes"] == 2 * 4096 * 32768 * 2
    assert model["multi_pass_bytes"] / model["unique_bytes"] == pytest.approx(1.5)


def test_view_elements_count_broadcast_once_and_follow_strides():
    assert byte_model.view_elements({"shape": [8, 4], "stride": [4, 1]}) == (32, 32)
    assert byte_model.view_elements({"shape": [8, 4], "stride": [0, 1]}) == (4, 4)      # broadcast rows
    assert byte_model.view_elements({"shape": [4, 8], "stride": [1, 4]}) == (32, 32)    # transposed
    assert byte_model.view_elements({"shape": [8], "stride": [2]}) == (15, 8)           # every other
    assert byte_model.view_elements({"shape": [0, 3], "stride": [3, 1]}) == (0, 0)


def test_above_peak_flags_a_rate_the_device_cannot_move():
    peak = 4246.1
    nbytes = 201334784
    at_peak_ms = nbytes / (peak * 1e9) * 1e3
    assert not byte_model.above_peak(nbytes, at_peak_ms, peak)
    assert not byte_model.above_peak(nbytes, at_peak_ms / 1.04, peak)      # inside the noise
    assert byte_model.above_peak(nbytes, at_peak_ms / 1.2, peak)
    assert not byte_model.above_peak(None, at_peak_ms, peak) and not byte_model.above_peak(nbytes, None, peak)
    check = byte_model.bandwidth_check({"unique_bytes": nbytes, "inductor_bytes": 2 * nbytes},
                                       at_peak_ms * 1.1, peak)
    assert not check["unique"]["above_peak"] and check["inductor"]["above_peak"]
    assert check["inductor"]["flag"] == byte_model.ABOVE_PEAK_TEXT
    assert check["unique"]["pct_of_copy"] == pytest.approx(100 / 1.1)


TUTORIALS = ROOT / "examples" / "recorded_h200" / "triton_tutorials" / "autotune_kernels"


@pytest.mark.parametrize("kernel, reads, writes, passes", [
    # the tutorials as captured on the H200 (4096 x 4096 fp16): pointers named X, Mean, and
    # addresses built in locals (row_start_ptr, a_ptrs) still count
    ("softmax_kernel", {"input_ptr": 1}, {"output_ptr"}, 1),
    ("_layer_norm_fwd_fused", {"X": 3, "W": 1, "B": 1}, {"Y", "Mean", "Rstd"}, 3),
    ("matmul_kernel", {"a_ptr": 1, "b_ptr": 1}, {"c_ptr"}, 1),
])
def test_hand_written_tutorial_kernels_count_every_tensor(kernel, reads, writes, passes):
    path = TUTORIALS / f"{kernel}.py"
    model = byte_model.model_for_file(path.read_text(), path)
    roles = {a["name"]: a for a in model["args"]}
    assert {n: a["passes"] for n, a in roles.items() if a["role"] == "read"} == reads
    assert {n for n, a in roles.items() if a["role"] == "written"} == writes
    assert model["unique_bytes"] == sum(a["view_bytes"] for a in model["args"])
    assert model["max_passes"] == passes
