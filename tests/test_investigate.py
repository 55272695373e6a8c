"""investigate.py --from-capture: the offline chain on a real H200 capture, end to end."""

from __future__ import annotations

import json
import shutil

import pytest

from tko.base import contracts


def recorded_capture(fixtures_dir, tmp_path, example):
    """Lay a real fixture out as a capture directory (the layout investigate.py records)."""
    src = fixtures_dir / "inductor_h200" / example
    cap = tmp_path / "capture"
    (cap / "profile").mkdir(parents=True)
    shutil.copy(src / "log_profile.txt", cap / "log_profile.txt")
    shutil.copytree(src / "inductor_cache", cap / "inductor_cache")
    shutil.copy(src / "trace.json.gz", cap / "profile" / "trace.json.gz")
    return cap


@pytest.mark.slow
def test_offline_chain_reports_the_hot_kernels(run_script, fixtures_dir, tmp_path):
    cap = recorded_capture(fixtures_dir, tmp_path, "scatter_index_add")
    proc = run_script("investigate.py", "--from-capture", cap, "--out", tmp_path / "inv", "--top", "2",
                      "--probe-arch", "gfx942", "--probe-variants", "baseline,pointer_range",
                      "--peak-gbps", "4246", cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    index = json.loads((tmp_path / "inv" / "investigation.json").read_text())
    assert contracts.contract_problems(index) == []
    assert {s["status"] for s in index["steps"]} <= {"ok", "skipped"}
    # the zeros_like kernel (4.5 %, under the hot_share cut) is not compile-probed; this capture
    # holds no standalone files (nothing to run or to time against its twin)
    skipped = {s["name"]: s["error"] for s in index["steps"] if s["status"] == "skipped"}
    assert skipped.pop("probe triton_poi_fused_zeros_like_0").startswith("not hot: 4.5% of GPU time")
    assert all(name.split()[0] in ("run", "speed_of_light") for name in skipped), skipped
    kernels = {k["kernel"]: k for k in index["kernels"]}
    # Profile order of the real trace: the index_add kernel (93.8 %) then zeros_like (4.5 %).
    assert list(kernels) == ["triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1",
                             "triton_poi_fused_zeros_like_0"]
    assert kernels["triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1"]["verdict"] == "rewrite_model"
    assert kernels["triton_poi_fused_zeros_like_0"]["verdict"] == "leave_as_is"
    kdir = tmp_path / "inv" / "kernels" / "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1"
    for name in ("meta.json", "isa_scan.json", "probe.json", "report.md", "report.json"):
        assert (kdir / name).is_file(), name
    probe = json.loads((kdir / "probe.json").read_text())
    assert {r["variant"] for r in probe["results"]} == {"baseline", "pointer_range"}
    md = (tmp_path / "inv" / "investigation.md").read_text()
    assert "rewrite the model code" in md and "93.8%" in md


def test_neither_mode_nor_both_is_exit_2(run_script, tmp_path):
    proc = run_script("investigate.py", "--out", tmp_path / "o", cwd=tmp_path)
    assert proc.returncode == 2 and "either --from-capture" in proc.stderr
    proc = run_script("investigate.py", "--from-capture", tmp_path / "nope", cwd=tmp_path)
    assert proc.returncode == 2 and "no such capture directory" in proc.stderr


def test_directory_without_capture_is_exit_2(run_script, tmp_path):
    (tmp_path / "empty").mkdir()
    proc = run_script("investigate.py", "--from-capture", tmp_path / "empty", "--out", tmp_path / "o", cwd=tmp_path)
    assert proc.returncode == 2 and "not a capture directory" in proc.stderr
    # a folder of captures (the bundled examples): the error names them
    from conftest import ROOT

    proc = run_script("investigate.py", "--from-capture", ROOT / "examples" / "recorded_h200", "--out", tmp_path / "o",
                      cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "it holds captures: dynamic_shapes, mlp_train_step, pointwise_chain" in proc.stderr


@pytest.mark.parametrize("example,kernel,verdict,rule", [
    # Recorded on an H200: 3714 GB/s standalone against a measured 4222 GB/s copy peak (88 %).
    ("pointwise_chain", "triton_poi_fused_add_gelu_mul_0", "leave_as_is", "at_copy_bandwidth"),
    pytest.param("scatter_index_add", "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1", "rewrite_model",
     "atomic_or_scatter_heavy", marks=pytest.mark.slow),
    # 106 us standalone, 3713 GB/s of a measured 4243 GB/s copy peak
    pytest.param("row_reduction", "triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online_sub_0",
     "leave_as_is", "at_copy_bandwidth", marks=pytest.mark.slow),
    # compiled with dynamic=True: the 768-wide norm is a two-pass loop at 10 % of copy bandwidth
    pytest.param("dynamic_shapes", "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0", "rewrite_model",
     "dynamic_shape_multi_pass", marks=pytest.mark.slow),
    # each of the 64 kernels is 1.5 %: not hot alone; the program finding says launch-bound
    pytest.param("tiny_launches", "triton_poi_fused_abs_mul_sign_sqrt_sub_50", "leave_as_is", "not_hot", marks=pytest.mark.slow),
    # cuBLAS GEMMs hold the time; the Triton kernels are ~1 % each
    pytest.param("mlp_train_step", "triton_poi_fused_gelu_gelu_backward_2", "leave_as_is", "not_hot", marks=pytest.mark.slow),
    # a hand-written @triton.autotune kernel: 3886 GB/s standalone of a measured 4240 GB/s copy peak
    pytest.param("user_autotune_kernel", "scale_bias_relu_kernel", "leave_as_is", "at_copy_bandwidth", marks=pytest.mark.slow),
])
def test_bundled_recorded_capture_gives_the_main_job_report(run_script, tmp_path, example, kernel, verdict, rule):
    from conftest import ROOT

    cap = ROOT / "examples" / "recorded_h200" / example
    proc = run_script("investigate.py", "--from-capture", cap, "--out", tmp_path / "inv", "--probe-arch", "none",
                      cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    index = json.loads((tmp_path / "inv" / "investigation.json").read_text())
    first = index["kernels"][0]
    assert (first["kernel"], first["verdict"], first["rule"]) == (kernel, verdict, rule)
    report = json.loads((tmp_path / "inv" / first["dir"] / "report.json").read_text())
    assert report["sections"]["env"]["device"] == "NVIDIA H200"
    if example == "pointwise_chain":
        pct = report["facts"]["pct_copy_peak"]
        assert pct["value"] == pytest.approx(3714.1 / 4222.0, abs=0.01)
        assert "store" in pct["source"]
        assert report["sections"]["timing"]["standalone_ms"] == pytest.approx(0.0542, abs=0.0005)
    assert not (tmp_path / "inv" / "capture").exists()  # offline: the capture stays where it is
    steps = index["next_steps"]
    # offline, the last step is always what a GPU would measure (no trials were run or recorded)
    assert steps[-1].startswith("on the GPU the program runs on, measure what this offline run could not")
    steps = steps[:-1]
    if example in ("pointwise_chain", "row_reduction", "user_autotune_kernel"):
        assert steps == []                                   # leave as is: nothing to run
    elif example == "mlp_train_step":                        # the GEMMs hold the step: change them
        assert len(steps) == 1 and steps[0].startswith("whole program (library_dominated)")
    elif example == "tiny_launches":
        assert len(steps) == 1 and steps[0].startswith("whole program (many_tiny_launches)")
        assert "-- python examples/tiny_launches.py --steps 20" in steps[0]
    else:
        assert f"`{kernel}` ({example}.py:" in steps[0] and "compare_profiles.py " + str(cap / "profile" / "profile.json") in steps[0]
    program = index["program"]
    expected = {"tiny_launches": ("rewrite_model", "many_tiny_launches"),
                "mlp_train_step": ("rewrite_model", "library_dominated")}.get(example, (None, None))
    assert (program["verdict"], program["rule"]) == expected
    md = (tmp_path / "inv" / "investigation.md").read_text()
    # the step's breakdown comes first, its classes summing to the profile's kernel time
    assert md.index("## Where the step's time goes") < md.index("## What to change")
    assert sum(c["share"] for c in index["step"]["classes"]) == pytest.approx(1.0, abs=1e-6)
    assert index["step"]["library_dominated"] == (example == "mlp_train_step")
    assert ("**Whole program: rewrite the model code** (rule `many_tiny_launches`)" in md) == (example == "tiny_launches")
    assert ("**Whole program: rewrite the model code** (rule `library_dominated`)" in md) == (example == "mlp_train_step")
    # each kernel report carries the program finding too: "not hot" alone is not the whole story
    kernel_md = (tmp_path / "inv" / first["dir"] / "report.md").read_text()
    assert ("**Whole program: rewrite the model code**" in kernel_md) == (example in ("tiny_launches", "mlp_train_step"))
    assert report["program"]["rule"] == program["rule"]
    if rule == "dynamic_shape_multi_pass":
        assert "Compiled for symbolic sizes (ks0)" in report["decision"]["fired"][0]["says"]
        # the model code behind it, from the recorded TORCH_LOGS: both lines of f
        assert first["where"] == ["dynamic_shapes.py:10", "dynamic_shapes.py:11"]
        assert "| dynamic_shapes.py:10, dynamic_shapes.py:11 |" in md
        kernel_md = (tmp_path / "inv" / first["dir"] / "report.md").read_text()
        assert ("eager_fallback_ab.py --disable __main__:f --json-out ab.json -- python examples/dynamic_shapes.py "
                "--steps 20`") in kernel_md


def test_next_steps_name_the_command_for_each_decision(tmp_path):
    from tko.chains import investigation_index

    result = {"capture_dir": str(tmp_path), "repro": ["python", "model.py", "--steps", "5"], "program": None,
              "kernels": [
                  {"kernel": "k_tune", "dir": "kernels/k_tune", "verdict": "tune_triton", "standalone": "/c/k_tune.py"},
                  {"kernel": "k_swept", "dir": "kernels/k_swept", "verdict": "tune_triton", "sweep": "kernels/k_swept/sweep.json"},
                  {"kernel": "k_off", "dir": "kernels/k_off", "verdict": "disable_compiled_region",
                   "where": ["model.py:12"], "disable_targets": ["__main__:Block.forward"]},
                  {"kernel": "k_keep", "dir": "kernels/k_keep", "verdict": "leave_as_is"},
                  {"kernel": "k_unknown", "dir": "kernels/k_unknown", "verdict": None}]}
    steps = investigation_index.next_steps(result)
    assert steps[0].startswith("`k_tune`: on a GPU, `python scripts/sweep_captured_kernel.py /c/k_tune.py --json-out "
                               "kernels/k_tune/sweep.json")
    assert steps[1] == "`k_swept`: swept, see `kernels/k_swept/sweep.json` and the report's best variant and how to apply it"
    assert ("`python scripts/eager_fallback_ab.py --disable __main__:Block.forward --json-out kernels/k_off/ab.json -- "
            "python model.py --steps 5`") in steps[2]
    assert steps[3] == "`k_unknown`: undecided; its report lists the missing evidence" and len(steps) == 4


@pytest.mark.slow
def test_offline_index_says_what_was_not_measured_here(run_script, tmp_path):
    from conftest import ROOT

    cap = ROOT / "examples" / "recorded_h200" / "pointwise_chain"
    proc = run_script("investigate.py", "--from-capture", cap, "--out", tmp_path / "inv", "--probe-arch", "none",
                      cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    inv = tmp_path / "inv"
    index = json.loads((inv / "investigation.json").read_text())
    md = (inv / "investigation.md").read_text()
    first = index["kernels"][0]
    sol = json.loads((inv / first["dir"] / "sol.json").read_text())
    floor = sol["classification"]["numbers"]["copy_floor_ms"]
    # offline the speed of light is built, not timed: the index shows the floor the report shows
    assert sol["offline"] and first["sol_class"] == "unmeasured" and floor > 0
    row = next(ln for ln in md.splitlines() if ln.startswith(f"| `{first['kernel']}`"))
    assert f"copy floor {floor:.4g} ms" in row and "no floor" not in md
    # nothing was timed on this machine: the report lists it as a gap
    report = json.loads((inv / first["dir"] / "report.json").read_text())
    assert first["gaps"] == len(report["gaps"]) >= 1
    assert any("speed of light not timed" in g for g in report["gaps"])
    # what to change and what to run next, read first by an agent (SKILL.md)
    what = md.split("## What to change\n", 1)[1].split("\n## ", 1)[0]
    assert "Nothing was measured end to end" in what
    assert md.index("## What to change") < md.index("| kernel | share of GPU time")
    steps = md.split("## Next steps\n", 1)[1].split("\n## ", 1)[0]
    repro = " ".join(json.loads((cap / "repro_command.json").read_text())["command"])
    assert f"python scripts/investigate.py --out investigation -- {repro}" in steps
    assert index["next_steps"] and all(s.strip("- ") in steps for s in index["next_steps"])
