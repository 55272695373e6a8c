"""sweep_captured_kernel.py: variants around a captured winner, the correctness gate, ranking, workers.

CPU tests capture the hand-written ``@triton.autotune`` kernels of ``tests/fixtures/sweep/sweep_kernels.py``
under ``TRITON_INTERPRET=1`` (as ``tests/test_capture.py`` does) and sweep the captured standalone
files in the Triton interpreter.  ``gather_scale`` is correct only for BLOCK <= 64 (a deliberate
mask bug), so its BLOCK=128 variant must fail the gate; ``add_inplace`` has an in/out argument.
The ``gpu`` test sweeps real H200 captures (``tests/fixtures/capture_h200``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import loadable_by_this_torch
from tko.base import config
from tko.measure import sweep, sweep_plan, sweep_results
from tko.base.contracts import contract_problems
from tko.base.versions import package_version, parse_version

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).resolve().parent / "fixtures" / "sweep"
CAP_H200 = Path(__file__).resolve().parent / "fixtures" / "capture_h200"
H200_SWEEPS = Path(__file__).resolve().parent / "fixtures" / "sweep_h200"
PROBE = FIX / "gather_scale_probe.json"


def _hip_waves() -> list[str]:
    """The waves_per_eu variants a HIP plan offers: the rules' values besides the installed AMD
    backend's default (1 on Triton 3.3, 0 from 3.5), which the baseline already runs."""
    from tko.read import triton_stack

    accepted = triton_stack.accepted_options(triton_stack.installed_backend_options(), "amd") or {}
    return [f"waves_per_eu={v}" for v in (1, 2, 4) if v != accepted.get("waves_per_eu")]


WAVES = _hip_waves()

@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Path:
    cap = tmp_path_factory.mktemp("sweep") / "cap"
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "autotune_capture_patch.py"), "--dir", str(cap),
                           str(FIX / "sweep_kernels.py")], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (cap / "gather_scale.py").is_file() and (cap / "add_inplace.py").is_file()
    return cap


def probe_doc() -> dict:
    return json.loads(PROBE.read_text())


def names(plan) -> list[str]:
    return [v.name for v in plan.variants]


# --------------------------------------------------------------------------- variant generation

def test_variant_set_from_captured_config(captured, tmp_path):
    plan = sweep_plan.build_plan(captured / "gather_scale.py", tmp_path, probe_doc=probe_doc(), hip=False)
    assert plan.spec["configs"][0]["flat"] == {"BLOCK": 64, "num_stages": 3, "num_warps": 2}
    assert plan.spec["configs"][0]["grid"] == [5]                     # cdiv(300, 64)
    assert names(plan) == ["baseline", "BLOCK=128", "BLOCK=128,num_warps=4", "BLOCK=32", "BLOCK=32,num_warps=1",
                           "num_warps=4", "num_warps=1"]
    by = {v.name: v for v in plan.variants}
    assert by["BLOCK=128"].grid == [3] and by["BLOCK=32"].grid == [10]   # BLOCK multiplies program_id
    # a block move with num_warps scaled alike: same grid as the block move, work per thread kept
    assert by["BLOCK=128,num_warps=4"].flat == {"BLOCK": 128, "num_stages": 3, "num_warps": 4}
    assert by["BLOCK=128,num_warps=4"].grid == [3]
    assert by["num_warps=4"].flat == {"BLOCK": 64, "num_stages": 3, "num_warps": 4}
    assert by["num_warps=4"].grid == [5]
    notes = "\n".join(plan.notes)
    # the real probe: only pointer_range changed the ISA (gfx942 buffer ops), and a JIT launch on
    # Triton >= 3.6 already gets it (before 3.6 a JIT launch cannot be given it);
    # assume / multiple_of / buffer_ops_off changed nothing
    if parse_version(package_version("triton")) >= (3, 6):
        assert "pointer_range: tt.pointer_range=32 is what a JIT launch on Triton >= 3.6 already adds" in notes
    else:
        assert ("pointer_range: tt.pointer_range is a compile attribute that a JIT launch before Triton 3.6 "
                "cannot be given; not swept") in notes
    for name in ("assume", "multiple_of", "buffer_ops_off"):
        assert f"probe variant {name}: same load/store code as baseline on every target; not swept" in notes
    assert "num_stages not swept: the kernel has no loop" in notes

    hip = sweep_plan.build_plan(captured / "gather_scale.py", tmp_path / "h", hip=True)
    assert names(hip) == names(plan) + WAVES
    assert sweep_plan.config_text(hip.variants[-1].flat) == \
        'triton.Config({"BLOCK": 64, "waves_per_eu": 4}, num_warps=2, num_stages=3)'

    inplace = sweep_plan.build_plan(captured / "add_inplace.py", tmp_path / "i", hip=False, max_variants=3)
    assert names(inplace) == ["baseline", "BLOCK=256", "BLOCK=256,num_warps=8"]
    assert inplace.dropped == ["BLOCK=64", "BLOCK=64,num_warps=2", "num_warps=8", "num_warps=2"]
    assert "--max-variants 3: not run: BLOCK=64, BLOCK=64,num_warps=2, num_warps=8, num_warps=2" in inplace.notes


def test_probe_source_edit_is_the_probes_edit(captured, tmp_path):
    # Had the probe seen multiple_of change the ISA, the sweep must run the probe's own edit.
    doc = probe_doc()
    for row in doc["results"]:
        if row["variant"] == "multiple_of":
            row["changes_vs_baseline"] = ["(marked changed by this test)"]
    plan = sweep_plan.build_plan(captured / "gather_scale.py", tmp_path, probe_doc=doc, hip=False)
    variant = next(v for v in plan.variants if v.name == "multiple_of")
    assert variant.kind == "source"
    inserted = next(v["inserted"] for v in doc["variants"] if v["name"] == "multiple_of")
    added = [ln[1:].strip() for ln in variant.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert added == [ln for lines in inserted.values() for ln in lines]
    assert added == ["offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)"]
    with pytest.raises(Exception, match="not 'add_inplace'"):
        sweep_plan.build_plan(captured / "add_inplace.py", tmp_path / "x", probe_doc=doc, hip=False)


def test_variant_set_of_real_inductor_captures(tmp_path):
    red = CAP_H200 / "row_reduction" / "triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online_sub_0.py"
    plan = sweep_plan.build_plan(red, tmp_path, hip=True)
    assert plan.launch == "inductor"
    assert plan.spec["configs"][0] == {"flat": {"R0_BLOCK": 2048, "XBLOCK": 1, "num_stages": 1, "num_warps": 16},
                                       "grid": [4096, 1, 1]}
    # a looped reduction: num_stages 1 -> 2 (0 is not a stage count); num_warps 16 is the cap
    # (no combined move above num_warps 16)
    assert names(plan) == ["baseline", "R0_BLOCK=4096", "R0_BLOCK=1024", "R0_BLOCK=1024,num_warps=8", "XBLOCK=2",
                           "num_warps=8", "num_stages=2", *WAVES]
    by = {v.name: v for v in plan.variants}
    assert by["XBLOCK=2"].grid == [2048, 1, 1] and by["R0_BLOCK=1024"].grid == [4096, 1, 1]
    per = CAP_H200 / "mlp_train_step" / "triton_per_fused_native_layer_norm_0.py"
    plan = sweep_plan.build_plan(per, tmp_path / "p", hip=False)
    # persistent: no loop, XBLOCK=1
    assert names(plan) == ["baseline", "XBLOCK=2", "XBLOCK=2,num_warps=2", "num_warps=2"]
    assert "num_stages not swept: the kernel has no loop, so software pipelining has nothing to do" in plan.notes


@pytest.mark.slow
def test_inductor_capture_swept_in_the_interpreter(tmp_path, monkeypatch):
    # a real H200 Inductor capture (17x31 floats) through the module's own CachingAutotuner
    # planned as on a HIP build, with the real gfx942 probe of this kernel (pointer_range -> buffer ops):
    # the interpreter ignores compile attributes, so this checks that every edited file loads and is right
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    tiny = loadable_by_this_torch(CAP_H200 / "tiny_launches" / "triton_poi_fused_abs_mul_sign_sqrt_sub_0.py",
                                  tmp_path / "captured")
    plan = sweep_plan.build_plan(tiny, tmp_path, hip=True, probe_doc=json.loads((FIX / "tiny_inductor_probe.json").read_text()))
    assert names(plan) == ["baseline", "XBLOCK=512", "XBLOCK=512,num_warps=8", "XBLOCK=128", "XBLOCK=128,num_warps=2",
                           "num_warps=8", "num_warps=2", *WAVES,
                           "pointer_range"]
    run = sweep.run_sweep(plan, [None], 1, 1.0, 2.0, tmp_path, interpret=True, retime_baseline=False)
    slot = run["slots"][0]
    assert slot["outputs"] == ["out_ptr0"] and slot["poisoned"] == ["out_ptr0"]
    assert {n: r["passed"] for n, r in run["records"].items()} == {n: True for n in names(plan)}
    assert all(r["check"]["numel"] == 17 * 31 and r["check"]["unwritten_count"] == 0
               for r in run["records"].values())


def test_inductor_pointer_range_is_a_triton_meta_edit(tmp_path):
    tiny = CAP_H200 / "tiny_launches" / "triton_poi_fused_abs_mul_sign_sqrt_sub_0.py"
    doc = json.loads((FIX / "tiny_inductor_probe.json").read_text())
    plan = sweep_plan.build_plan(tiny, tmp_path, hip=True, probe_doc=doc)
    variant = plan.variants[-1]
    assert variant.name == "pointer_range" and variant.kind == "source"
    removed = [ln for ln in variant.diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    added = [ln for ln in variant.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert len(removed) == len(added) == 1 and "triton_meta=" in added[0]
    assert "'configs': [{(0,): [['tt.divisibility', 16], ['tt.pointer_range', 32]], (1,): [['tt.divisibility', 16], " \
           "['tt.pointer_range', 32]], (2,): [['tt.divisibility', 16], ['tt.pointer_range', 32]]}]" in added[0]
    assert [c.split(":")[0] for c in variant.claims] == ["in_ptr0", "in_ptr1", "out_ptr0"]
    assert "storage of 2108 bytes" in variant.claims[0]            # 17 x 31 float32
    cuda = sweep_plan.build_plan(tiny, tmp_path / "c", hip=False, probe_doc=doc)
    assert "pointer_range" not in names(cuda)
    assert "probe variant pointer_range: tt.pointer_range acts on AMD (HIP) only; not swept here" in cuda.notes


def test_scaled_grid_and_grid_keys():
    assert sweep_plan.scaled_grid([5], 2) == [3] and sweep_plan.scaled_grid([5], 0.5) == [10]
    assert sweep_plan.scaled_grid([1, 7, 1], 2) == [1, 4, 1]
    assert sweep_plan.scaled_grid([4, 4], 2) is None            # which axis the block drives is unknown
    assert config.is_block_key("R0_BLOCK", 64) and config.is_block_key("BLOCK_K", 32)
    assert not config.is_block_key("num_warps", 4) and not config.is_block_key("GROUP_M", 8)


def test_worker_device_visibility_is_relative_to_ours():
    assert sweep.device_visibility(1, {}, hip=False) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert sweep.device_visibility(1, {"CUDA_VISIBLE_DEVICES": "2,3"}, hip=False) == {"CUDA_VISIBLE_DEVICES": "3"}
    assert sweep.device_visibility(0, {"HIP_VISIBLE_DEVICES": "5,6"}, hip=True) == {"HIP_VISIBLE_DEVICES": "5"}
    assert sweep.device_visibility(1, {"CUDA_VISIBLE_DEVICES": "4,7"}, hip=True) == {"HIP_VISIBLE_DEVICES": "7"}


# --------------------------------------------------------------------------- gate, ranking, workers

@pytest.mark.slow
def test_gate_rejects_wrong_variants_and_ranks_the_rest(captured, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    plan = sweep_plan.build_plan(captured / "gather_scale.py", tmp_path, hip=False)
    text = Path(plan.kernel_file).read_text()
    broken = text.replace("tl.load(x_ptr + i, mask=m) * 2", "tl.load(x_ptr + i, mask=m) * 2.5", 1)
    assert broken != text
    base = plan.variants[0]
    plan.variants.append(sweep_plan.source_variant("scale_2.5", "an edit that changes the result", plan.kernel_file,
                                              plan.kernel, text, broken, base.flat, base.grid, tmp_path))
    raising = text.replace("tl.load(x_ptr + i, mask=m) * 2", "tl.load(x_ptr + i, mask=m) * not_defined", 1)
    plan.variants.append(sweep_plan.source_variant("raises", "an edit that does not compile", plan.kernel_file,
                                              plan.kernel, text, raising, base.flat, base.grid, tmp_path))
    plan.variants.insert(1, plan.variants.pop())  # second: the variants after it need the replaced worker
    run = sweep.run_sweep(plan, [None], 1, 1.0, 2.0, tmp_path, interpret=True)
    payload = sweep_results.assemble(plan, run, devices=[None], workers_per_device=1, warmup_ms=1.0, rep_ms=2.0,
                             interpret=True, wall_s=1.0, compile_info=None, probe_file=None)
    rows = {r["name"]: r for r in payload["variants"]}
    assert rows["BLOCK=128"]["status"] == "failed"
    assert rows["BLOCK=128"]["check"]["unwritten_count"] == 128     # 2 blocks x 64 masked-off lanes
    # its grid was rescaled with the block ([5] -> [3]): the unwritten lanes are the kernel's own doing
    assert rows["BLOCK=128"]["grid"] != base.grid and "recorded grid" not in rows["BLOCK=128"]["reason"]
    assert rows["scale_2.5"]["status"] == "failed"
    assert rows["scale_2.5"]["check"]["unwritten_count"] == 0
    assert rows["scale_2.5"]["check"]["rel_err"] == pytest.approx(0.25, rel=1e-6)
    assert "-" in rows["scale_2.5"]["source_diff"] and "* 2.5" in rows["scale_2.5"]["source_diff"]
    assert rows["raises"]["status"] == "error" and "not_defined" in rows["raises"]["error"]
    passed = {n for n, r in rows.items() if r["status"] == "ok"}
    assert rows["BLOCK=128,num_warps=4"]["status"] == "failed"           # the same masked-off lanes
    assert passed == {"baseline", "BLOCK=32", "BLOCK=32,num_warps=1", "num_warps=4", "num_warps=1"}
    for n in passed:
        assert rows[n]["check"]["rel_err"] == 0.0 and rows[n]["median_ms"] > 0
    ranked = [r["name"] for r in payload["ranking"]["ranked"]]
    assert set(ranked) == passed
    times = [rows[n]["median_ms"] for n in ranked]
    assert times == sorted(times)
    assert {e["name"] for e in payload["ranking"]["excluded"]} == {"BLOCK=128", "BLOCK=128,num_warps=4", "scale_2.5",
                                                                   "raises"}
    assert payload["baseline"]["retime_median_ms"] > 0 and payload["baseline"]["noise_rel"] is not None
    assert run["slots"][0]["poisoned"] == ["out_ptr"] and run["slots"][0]["restored_in_out"] == []


@pytest.mark.slow
def test_in_out_argument_is_restored_not_poisoned(captured, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    plan = sweep_plan.build_plan(captured / "add_inplace.py", tmp_path, hip=False)
    run = sweep.run_sweep(plan, [None], 1, 1.0, 2.0, tmp_path, interpret=True, retime_baseline=False)
    slot = run["slots"][0]
    assert slot["outputs"] == ["x_ptr"] and slot["restored_in_out"] == ["x_ptr"] and slot["poisoned"] == []
    # a deterministic winner: its re-runs match its first output exactly, so no slack
    assert slot["self_difference"] == [{"output": "x_ptr", "runs": 4, "max_abs": 0.0, "slack": 0.0,
                                        "integer_changed": False}]
    # x += y timed many times: without the restore the checks after the first timing would fail
    assert all(r["passed"] and r["check"]["rel_err"] == 0.0 for r in run["records"].values()), run["records"]
    assert set(run["records"]) == {"baseline", "BLOCK=256", "BLOCK=256,num_warps=8", "BLOCK=64", "BLOCK=64,num_warps=2",
                                   "num_warps=8", "num_warps=2"}


def test_cli_two_workers_and_best_file_runs(captured, tmp_path, run_script):
    out = tmp_path / "out"
    proc = run_script("sweep_captured_kernel.py", captured / "gather_scale.py", "--probe", PROBE,
                      "--workers-per-device", "2", "--warmup", "1", "--rep", "2",
                      "--json-out", out / "sweep.json", "--markdown-out", out / "sweep.md",
                      "--best-out", out / "best_gather_scale.py", cwd=tmp_path, env={"TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["schema"] == "variant_sweep/1" and contract_problems(doc) == []
    assert doc["interpreter"] is True and doc["timer"] == "interpreter: not a performance number"
    assert len(doc["slots"]) == 2 and all(s["ready"] for s in doc["slots"])
    ran = [n for s in doc["slots"] for n in s["variants"]]
    assert sorted(ran) == sorted(v["name"] for v in doc["variants"])
    assert {v["slot"] for v in doc["variants"]} <= {"devcpu.w0", "devcpu.w1"}
    # two workers: each timed the winner first; every variant is compared with its own worker's
    per_slot = doc["baseline"]["per_slot_ms"]
    assert set(per_slot) == {"devcpu.w0", "devcpu.w1"} and all(s["baseline"]["passed"] for s in doc["slots"])
    # the winner is timed once per worker, not again as a variant: its record is one of those timings
    assert ran.count("baseline") == 1
    (base,) = [v for v in doc["variants"] if v["name"] == "baseline"]
    assert base["median_ms"] == per_slot[base["slot"]]
    for v in doc["variants"]:
        assert v["baseline_ms_same_device"] == per_slot[v["slot"]]
        if v["median_ms"]:
            assert v["x_vs_baseline"] == pytest.approx(per_slot[v["slot"]] / v["median_ms"])
    assert doc["baseline"]["noise_rel"] == max(doc["baseline"]["retime_rel"], doc["baseline"]["spread_rel"])
    assert doc["wall_s"] > 0
    status = {v["name"]: v["status"] for v in doc["variants"]}
    assert status == {"baseline": "ok", "BLOCK=128": "failed", "BLOCK=128,num_warps=4": "failed", "BLOCK=32": "ok",
                      "BLOCK=32,num_warps=1": "ok", "num_warps=4": "ok", "num_warps=1": "ok"}
    assert "BLOCK=128" not in [r["name"] for r in doc["ranking"]["ranked"]]
    best = doc["best"]
    assert best["name"] == doc["ranking"]["best"] and best["name"] in status and status[best["name"]] == "ok"
    # interpreter times rank the path, not a speed: the change is given, never as measured faster
    assert best["apply"].startswith("interpreter run (TRITON_INTERPRET=1): its times are not a speed; sweep on a GPU")
    assert "measured" not in best["apply"]
    assert doc["summary"]["status_counts"] == {"ok": 5, "failed": 2, "error": 0}
    for v in doc["variants"]:   # where each variant's seconds went; only passing variants are timed
        assert set(v["phase_s"]) == ({"prepare", "first_launch", "check"} | ({"timing"} if v["status"] == "ok" else set()))
    # the investigation report takes the sweep as its --benchmark input
    rep = run_script("make_investigation_report.py", "--kernel", "gather_scale", "--out", tmp_path / "rep.md",
                     "--benchmark", out / "sweep.json", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    report = (tmp_path / "rep.md").read_text()
    assert "sweep.json" in report and doc["best"]["name"] in report
    md = (out / "sweep.md").read_text()
    assert "not performance numbers" in md and "never written" in md and f"## Best: `{best['name']}`" in md
    # the best file runs on its own, with the best variant's config first
    best_cfg = next(v["config"] for v in doc["variants"] if v["name"] == best["name"])
    run = run_script("run_captured_kernel.py", best["file"], "--rep", "1", "--json-out", tmp_path / "run.json",
                     cwd=tmp_path, env={"TRITON_INTERPRET": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads((tmp_path / "run.json").read_text())
    assert result["status"] == "ok" and result["best"]["config"] == best_cfg


# --------------------------------------------------------------------------- errors

@pytest.mark.skipif(sys.platform == "win32", reason="posix paths")
def test_needs_a_gpu_or_the_interpreter(captured, tmp_path, run_script):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    proc = run_script("sweep_captured_kernel.py", captured / "gather_scale.py", "--json-out", tmp_path / "s.json",
                      "--markdown-out", tmp_path / "s.md", "--best-out", tmp_path / "b.py", cwd=tmp_path,
                      env={"TRITON_INTERPRET": "0"})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "GPU" in lines[0] and "TRITON_INTERPRET=1" in lines[0]
    assert not (tmp_path / "s.json").exists()


def test_bad_inputs_exit_2(tmp_path, run_script, captured):
    common = ["--json-out", tmp_path / "s.json", "--markdown-out", tmp_path / "s.md", "--best-out", tmp_path / "b.py"]
    proc = run_script("sweep_captured_kernel.py", FIX / "sweep_kernels.py", *common, cwd=tmp_path,
                      env={"TRITON_INTERPRET": "1"})
    assert proc.returncode == 2 and "not a captured standalone file" in proc.stderr
    proc = run_script("sweep_captured_kernel.py", captured / "gather_scale.py", "--max-variants", "0", *common,
                      cwd=tmp_path, env={"TRITON_INTERPRET": "1"})
    assert proc.returncode == 2 and "--max-variants must be at least 1" in proc.stderr
    proc = run_script("sweep_captured_kernel.py", captured / "gather_scale.py", "--probe",
                      CAP_H200 / "pointwise_chain" / "with_capture.json", *common, cwd=tmp_path,
                      env={"TRITON_INTERPRET": "1"})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    proc = run_script("sweep_captured_kernel.py", "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "--workers-per-device" in proc.stdout


# --------------------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.parametrize("example, kernel", [
    ("pointwise_chain", "triton_poi_fused_add_gelu_mul_0.py"),
    ("row_reduction", "triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online_sub_0.py"),
])
def test_gpu_sweep_of_h200_captures(example, kernel, tmp_path, run_script):
    out = tmp_path / example
    proc = run_script("sweep_captured_kernel.py", CAP_H200 / example / kernel, "--workers-per-device", "1",
                      "--json-out", out / "sweep.json", "--markdown-out", out / "sweep.md",
                      "--best-out", out / f"best_{kernel}", "--work-dir", out / "work", cwd=tmp_path, timeout=1200)
    print(proc.stdout, proc.stderr[-3000:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    print((out / "sweep.md").read_text())
    doc = json.loads((out / "sweep.json").read_text())
    assert contract_problems(doc) == []
    rows = {v["name"]: v for v in doc["variants"]}
    assert rows["baseline"]["status"] == "ok" and rows["baseline"]["check"]["rel_err"] == 0.0
    assert doc["interpreter"] is False and doc["baseline"]["noise_rel"] is not None
    for r in rows.values():
        if r["status"] == "ok":
            assert r["timing"]["timer"] == "triton.testing.do_bench" and r["gb_per_s"] > 0
            assert r["pct_of_copy_peak"] is not None          # the worker reports sm_90, not the product name
            assert set(r["phase_s"]) == {"prepare", "first_launch", "check", "timing"}
    for slot in doc["slots"]:                                 # deterministic kernels: no slack
        assert all(d["max_abs"] == 0.0 and d["slack"] == 0.0 for d in slot["self_difference"])
        assert slot["device_arch"].startswith(("sm_", "gfx"))
    if len(doc["slots"]) > 1:                                 # several GPUs: a winner timing per GPU
        assert set(doc["baseline"]["per_slot_ms"]) == {s["slot"] for s in doc["slots"]}
    assert doc["timing_s"] > 0 and doc["compile"]["jobs"] >= 1 and not doc["compile"]["failed"]
    run = run_script("run_captured_kernel.py", doc["best"]["file"], "--json-out", tmp_path / "run.json",
                     cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]


def test_real_h200_sweep_of_an_atomic_kernel_holds_variants_to_the_winners_spread(tmp_path, run_script):
    """index_add with float atomics on two H200s: the winner's own re-runs differ (1.2e-3), each
    worker's slack is 4x its measured spread, and all 11 variants pass with it."""
    from tko.base.contracts import contract_problems

    doc = json.loads((H200_SWEEPS / "index_add_sweep.json").read_text())
    assert contract_problems(doc) == []
    slack = {}
    for slot in doc["slots"]:
        (spread,) = slot["self_difference"]
        assert spread["max_abs"] > 0 and spread["slack"] == pytest.approx(4 * spread["max_abs"])
        slack[slot["slot"]] = spread["slack"]
    assert len(slack) == 2 and {d["index"] for d in doc["devices"]} == {0, 1}
    for v in doc["variants"]:
        assert v["status"] == "ok" and v["check"]["tolerance"]["abs_slack"] == slack[v["slot"]]
    assert doc["summary"]["status_counts"] == {"ok": 11, "failed": 0, "error": 0}
    assert doc["peak"]["source"] == "store" and doc["peak"]["peak_gbps"] == pytest.approx(4243.1, abs=1)
    # the investigation report takes the real sweep as its --benchmark evidence
    kernel = doc["kernel"]
    rep = run_script("make_investigation_report.py", "--kernel", kernel, "--out", tmp_path / "rep.md",
                     "--benchmark", H200_SWEEPS / "index_add_sweep.json", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    text = (tmp_path / "rep.md").read_text()
    assert "XBLOCK=64,num_warps=8" in text


def test_real_h200_sweeps_one_gpu_against_two():
    """The same long-row softmax plan on one GPU and on two: same variants, same ranking order of
    the clear losers, the timing phase divided between the two workers."""
    one = json.loads((H200_SWEEPS / "long_row_softmax_sweep_1gpu.json").read_text())
    two = json.loads((H200_SWEEPS / "long_row_softmax_sweep_2gpu.json").read_text())
    assert [v["name"] for v in one["variants"]] == [v["name"] for v in two["variants"]]
    assert {v["slot"] for v in one["variants"]} == {"dev0.w0"}
    assert {v["slot"] for v in two["variants"]} == {"dev0.w0", "dev1.w0"}
    ms1 = {v["name"]: v["median_ms"] for v in one["variants"]}
    ms2 = {v["name"]: v["median_ms"] for v in two["variants"]}
    for name in ms1:                      # the same kernel on another H200: within 1.5 %
        assert ms2[name] == pytest.approx(ms1[name], rel=0.015), name
    assert min(ms1, key=ms1.get) == min(ms2, key=ms2.get) == "num_warps=8"
    assert one["timing_s"] > 0 and two["timing_s"] > 0


def test_real_h200_scaling_after_the_one_config_fix():
    """Long-row softmax, --rep 1000, one GPU vs two (call 6). Before the fix two variants spent 3-4 s
    in their first launch while Inductor autotuned them against a config it had added (call 4); now
    each runs the config it names: no slow first launch, R0_BLOCK=2048 and XBLOCK=2 clearly slower
    than the winner, and the timing phase on two GPUs takes at most 0.7 of one GPU's."""
    one = json.loads((H200_SWEEPS / "long_row_softmax_scaling_1gpu_call6.json").read_text())
    two = json.loads((H200_SWEEPS / "long_row_softmax_scaling_2gpu_call6.json").read_text())
    before = json.loads((H200_SWEEPS / "table_call4.json").read_text())
    slow_before = [n for n, _slot, ph in before["one_gpu"]["phases"] + before["all_gpus"]["phases"]
                   if ph.get("first_launch_and_check", 0) > 2.0]
    assert sorted(set(slow_before)) == ["R0_BLOCK=2048", "XBLOCK=2"]
    for doc in (one, two):
        assert contract_problems(doc) == []
        rows = {v["name"]: v for v in doc["variants"]}
        assert all(v["phase_s"]["first_launch"] < 0.05 for v in rows.values())
        noise = doc["baseline"]["noise_rel"]
        for name in ("R0_BLOCK=2048", "XBLOCK=2"):
            assert rows[name]["status"] == "ok" and rows[name]["x_vs_baseline"] < 1 - noise, name
            assert rows[name]["within_noise"] is False, name
        assert [v["name"] for v in doc["variants"]].count("baseline") == 1
    # two workers: the winner's record is the first per-worker timing, not a second run
    (base,) = [v for v in two["variants"] if v["name"] == "baseline"]
    assert base["median_ms"] == two["baseline"]["per_slot_ms"][base["slot"]]
    assert {v["slot"] for v in two["variants"]} == {"dev0.w0", "dev1.w0"}
    assert two["timing_s"] <= 0.7 * one["timing_s"]
    assert one["best"]["name"] in ("baseline", "num_warps=8") and two["best"]["name"] in ("baseline", "num_warps=8")


def test_variants_on_two_gpus_are_judged_against_the_winner_on_their_own_gpu(captured, tmp_path):
    """GPU 1 runs everything 2 % slower than GPU 0. A variant on GPU 1 that is 1 % faster than the
    winner there is a real 1 % gain, and one on GPU 0 that equals the winner is no gain; compared
    across GPUs both would read wrong. Noise is the larger of the re-time and half the p20-p80."""
    plan = sweep_plan.build_plan(captured / "gather_scale.py", tmp_path, hip=False, max_variants=3)
    a, b = plan.variants[1].name, plan.variants[2].name

    def rec(slot, ms, spread=0.002):
        return {"passed": True, "slot": slot, "device_index": int(slot[3]), "device_name": "GPU",
                "timing": {"median_ms": ms, "p20_ms": ms * (1 - spread), "p80_ms": ms * (1 + spread)}}

    run = {"records": {"baseline": rec("dev0.w0", 1.000), a: rec("dev1.w0", 1.020 / 1.01), b: rec("dev0.w0", 1.000)},
           "slots": [{"slot": "dev0.w0", "baseline": {"median_ms": 1.000}},
                     {"slot": "dev1.w0", "baseline": {"median_ms": 1.020}}],
           "retime": {"slot": "dev0.w0", "timing": {"median_ms": 1.0005}}}
    payload = sweep_results.assemble(plan, run, devices=[0, 1], workers_per_device=1, warmup_ms=25, rep_ms=100,
                             interpret=True, wall_s=1.0, compile_info=None, probe_file=None)
    rows = {r["name"]: r for r in payload["variants"]}
    assert rows[a]["x_vs_baseline"] == pytest.approx(1.01) and rows[a]["baseline_ms_same_device"] == 1.020
    assert rows[b]["x_vs_baseline"] == pytest.approx(1.0)
    base = payload["baseline"]
    assert base["retime_rel"] == pytest.approx(0.0005) and base["spread_rel"] == pytest.approx(0.002)
    assert base["noise_rel"] == pytest.approx(0.002) and base["device_spread_rel"] == pytest.approx(0.02)
    assert payload["ranking"]["best"] == a and not rows[a]["within_noise"] and rows[b]["within_noise"]
    # across GPUs, a's raw 1.0099 ms would have lost to the winner's 1.000 ms
    assert rows[a]["median_ms"] > rows["baseline"]["median_ms"]


def test_worker_profiles_only_slow_untimed_phases(monkeypatch, capsys):
    from tko.measure.sweep_worker import _profiled

    def slow():
        sum(i * i for i in range(20000))
        return {"name": "v", "phase_s": {"prepare": 0.01, "first_launch": 3.1, "check": 0.02, "timing": 9.0}}

    monkeypatch.delenv("TKO_SWEEP_PROFILE_S", raising=False)
    assert _profiled(slow, "v")["phase_s"]["first_launch"] == 3.1 and capsys.readouterr().err == ""
    monkeypatch.setenv("TKO_SWEEP_PROFILE_S", "1.0")
    _profiled(slow, "v")
    err = capsys.readouterr().err
    assert err.startswith("== v: untimed phases {'prepare': 0.01, 'first_launch': 3.1, 'check': 0.02}")
    assert "slow" in err and "cumulative" in err
    # timing alone over the limit is not a slow first launch
    monkeypatch.setenv("TKO_SWEEP_PROFILE_S", "4.0")
    _profiled(slow, "v")
    assert capsys.readouterr().err == ""


def test_apply_text_warns_where_inductor_would_halve_r0_block():
    # a larger reduction block is timed with dynamic_scale_rblock off; in the program Inductor may
    # add the halved config back, so the apply text says so (and only there)
    winner = {"XBLOCK": 1, "R0_BLOCK": 1024, "num_warps": 16, "num_stages": 1}
    assert sweep_results.larger_reduction_block({**winner, "R0_BLOCK": 2048}, winner)
    assert sweep_results.larger_reduction_block({**winner, "XBLOCK": 2}, winner)
    assert not sweep_results.larger_reduction_block({**winner, "R0_BLOCK": 512}, winner)
    assert not sweep_results.larger_reduction_block({**winner, "num_warps": 8}, winner)
    assert not sweep_results.larger_reduction_block({"XBLOCK": 2048, "num_warps": 8}, {"XBLOCK": 1024, "num_warps": 4})
    doc = json.loads((H200_SWEEPS / "long_row_softmax_scaling_2gpu_call6.json").read_text())
    plan = sweep_plan.Plan(kernel_file="k.py", kernel="k", launch="inductor", spec={}, notes=[], dropped=[],
                      variants=[sweep_plan.Variant(name="baseline", kind="baseline", description="", flat=winner, grid=None,
                                                    file="k.py")])
    rows = {v["name"]: v for v in doc["variants"]}
    assert "halving off" in sweep_results.how_to_apply(rows["R0_BLOCK=2048"], plan)
    assert "halving off" not in sweep_results.how_to_apply(rows["num_warps=8"], plan)


def test_an_autotuned_kernels_heuristic_block_is_changed_in_its_heuristics_not_pinned():
    """attorch's layer norm: @triton.autotune over @triton.heuristics giving both blocks. A heuristic
    overwrites whatever a config pins, so the change names the heuristics, and pins only what the
    config sets (nothing when that is the captured one)."""
    from tko.measure.sweep_plan import Plan, Variant

    spec = {"kind": "triton_autotune", "function": "layer_norm_forward_kernel", "source_file": "/p/ln.py",
            "heuristics": ["BLOCK_SIZE_BATCH", "BLOCK_SIZE_FEAT"]}
    base = {"BLOCK_SIZE_BATCH": 1, "BLOCK_SIZE_FEAT": 64, "num_warps": 1, "num_stages": 3}
    plan = Plan("/c/ln.py", "layer_norm_forward_kernel", "jit", spec,
                [Variant("baseline", "baseline", "", base, [16], "/c/ln.py")], [], [])
    row = {"kind": "config", "config": dict(base, BLOCK_SIZE_BATCH=2)}
    assert sweep_results.how_to_apply(row, plan) == ("change the @triton.heuristics of layer_norm_forward_kernel "
                                                     "(/p/ln.py) to give BLOCK_SIZE_BATCH=2")
    row = {"kind": "config", "config": dict(base, BLOCK_SIZE_BATCH=2, num_warps=2)}
    assert sweep_results.how_to_apply(row, plan).endswith(
        "to give BLOCK_SIZE_BATCH=2; and pin triton.Config({}, num_warps=2, num_stages=3)")
    row = {"kind": "config", "config": dict(base, num_warps=4)}
    assert sweep_results.how_to_apply(row, plan) == "pin triton.Config({}, num_warps=4, num_stages=3)"
