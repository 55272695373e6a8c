"""Decision rules on facts gathered from real H200 artifacts (profiles, capture logs, kernel files,
standalone runs), firing where the numbers say and staying silent where they do not."""

from __future__ import annotations

import json

import pytest

from tko.verdict import report

H200_COPY_PEAK = 4246.0  # GB/s, measured in tests/fixtures/inductor_h200/summary.json


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """Run the real scripts once over the fixtures; returns a builder of one kernel's report."""
    import subprocess
    import sys

    from conftest import FIXTURES, SCRIPTS

    tmp = tmp_path_factory.mktemp("real")
    cache = {}

    def script(name, *args):
        proc = subprocess.run([sys.executable, str(SCRIPTS / name), *map(str, args)], capture_output=True,
                              text=True, timeout=600, cwd=tmp)
        assert proc.returncode == 0, (name, proc.stderr)

    def doc(path):
        return json.loads((tmp / path).read_text())

    def build(example, kernel, capture_dir, run=None):
        key = (example, capture_dir)
        if key not in cache:
            out = tmp / f"{example}_{capture_dir.name}"
            out.mkdir()
            script("profile_kernels.py", "--trace", FIXTURES / "inductor_h200" / example / "trace.json.gz",
                   "--json-out", out / "profile.json", "--markdown-out", out / "profile.md")
            script("summarize_autotune_log.py", capture_dir / "autotune.log" if (capture_dir / "autotune.log").exists()
                   else capture_dir / "autotune_kernels" / "autotune.log",
                   "--json-out", out / "summary.json", "--markdown-out", out / "summary.md")
            cache[key] = out
        out = cache[key]
        standalone = next(p for p in [capture_dir / f"{kernel}.py", capture_dir / "autotune_kernels" / f"{kernel}.py"]
                          if p.exists())
        script("inspect_triton_meta.py", standalone, "--json-out", out / f"meta_{kernel}.json")
        docs = {"profile": doc(out / "profile.json"), "autotune_summary": doc(out / "summary.json"),
                "meta": doc(out / f"meta_{kernel}.json"), "run": json.loads(run.read_text()) if run else None}
        return report.build(kernel, docs, {k: k for k in docs}, peak_override=H200_COPY_PEAK)

    return build


def fired(rep):
    return {f["rule"] for f in rep["decision"]["fired"]}


def test_pointwise_at_copy_bandwidth_is_left_alone(artifacts, fixtures_dir):
    cap = fixtures_dir / "capture_h200" / "pointwise_chain"
    rep = artifacts("pointwise_chain", "triton_poi_fused_add_gelu_mul_0", cap,
                    cap / "run_triton_poi_fused_add_gelu_mul_0.json")
    # 3742.8 GB/s standalone / 4246 GB/s copy peak = 0.881
    assert rep["facts"]["pct_copy_peak"]["value"] == pytest.approx(3742.8 / 4246.0, abs=0.002)
    assert rep["decision"]["rule"] == "at_copy_bandwidth"
    assert not {"atomic_or_scatter_heavy", "not_hot", "initializer"} & fired(rep)


def test_row_reduction_rereads_its_input_but_runs_near_copy_bandwidth(artifacts, fixtures_dir):
    kernel = "triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online_sub_0"
    cap = fixtures_dir / "capture_h200" / "row_reduction"
    rep = artifacts("row_reduction", kernel, cap, cap / f"run_{kernel}.json")
    assert rep["facts"]["multi_pass"]["value"] is True          # in_ptr0 loaded in more than one place
    assert "multi_pass_reduction" not in fired(rep)               # ... yet 3734 GB/s = 88 % of copy
    assert rep["decision"]["rule"] == "at_copy_bandwidth"


def test_index_add_is_a_model_rewrite_and_its_zero_fill_is_not_hot(artifacts):
    from conftest import ROOT

    cap = ROOT / "examples" / "recorded_h200" / "scatter_index_add"
    hot = artifacts("scatter_index_add", "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1", cap)
    assert hot["decision"]["rule"] == "atomic_or_scatter_heavy"
    assert hot["facts"]["atomics"]["value"] >= 1 and "not_hot" not in fired(hot)
    fill = artifacts("scatter_index_add", "triton_poi_fused_zeros_like_0", cap)
    assert {"not_hot", "initializer"} <= fired(fill)              # 4.5 % of GPU time; stores only
    assert fill["decision"]["rule"] == "not_hot"
    assert "atomic_or_scatter_heavy" not in fired(fill)


def test_mlp_triton_kernels_are_not_hot_next_to_its_gemms(artifacts, fixtures_dir):
    cap = fixtures_dir / "capture_h200" / "mlp_train_step"
    rep = artifacts("mlp_train_step", "triton_poi_fused_gelu_1", cap, cap / "run_triton_poi_fused_gelu_1.json")
    # cuBLAS/CUTLASS GEMMs take ~94 % of kernel time; this GELU 0.7 %.
    assert rep["facts"]["share"]["value"] < 0.01
    assert rep["decision"]["rule"] == "not_hot"
    assert "memory_inefficient" not in fired(rep)


@pytest.mark.parametrize("listing", ["gfx90a-nopr/matmul_spill.amdgcn", "sm90/index_add.ptx"])
def test_isa_facts_from_the_scanner_totals_and_from_an_old_scan_without_them(fixtures_dir, listing):
    from tko.read.isa import scan_path

    records = scan_path(fixtures_dir / "isa" / listing)
    name = records[0]["name"]
    new = report.build(name, {"isa": {"kernels": records}}, {"isa": "isa_scan.json"})
    old_records = [{k: v for k, v in r.items() if k != "totals"} for r in records]
    old = report.build(name, {"isa": {"kernels": old_records}}, {"isa": "isa_scan.json"})
    for fact in ("matrix_ops", "spills"):
        assert new["facts"][fact]["value"] == old["facts"][fact]["value"] == records[0]["totals"][fact]
        assert new["facts"][fact]["source"] == f"isa_scan.json: kernels[0].totals.{fact}"
    assert old["facts"]["matrix_ops"]["source"] == "isa_scan.json: kernels[0].families (mfma/mmac/mma/wgmma)"
    assert new["facts"].get("atomics") == (
        {"value": records[0]["totals"]["atomics"], "source": "isa_scan.json: kernels[0].totals.atomics"}
        if records[0]["totals"]["atomics"] else None)
