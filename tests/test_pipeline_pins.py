"""investigate's pass ahead of the trials: the sweeps' best configs become one pins file that the
pinned arm runs, a sweep with nothing to pin is said and skipped."""

from __future__ import annotations

import json
import shutil

from tko.patch import pins
from tko.chains import chain_steps, pipeline, trial_plan


def test_sweep_pins_are_written_for_the_pinned_arm(fixtures_dir, tmp_path, capsys):
    kdir = tmp_path / "capture" / "autotune_kernels"
    kdir.mkdir(parents=True)
    name = "triton_poi_fused_zeros_like_0"
    shutil.copy(fixtures_dir / "capture_h200" / "scatter_index_add" / f"{name}.py", kdir)
    sweep = json.loads((fixtures_dir / "sweep_h200" / "zeros_like_sweep.json").read_text())
    (tmp_path / "kernels" / name).mkdir(parents=True)
    (tmp_path / "kernels" / name / "sweep.json").write_text(json.dumps(sweep))
    flat = dict(sweep, kernel="triton_other_0", best={"name": "baseline"})
    (tmp_path / "kernels" / "triton_other_0").mkdir()
    (tmp_path / "kernels" / "triton_other_0" / "sweep.json").write_text(json.dumps(flat))
    ctx = pipeline.KernelCtx(tmp_path / "capture", tmp_path, kdir, [], None, True, True, None)
    chain = chain_steps.Chain(tmp_path)
    path = pipeline.write_sweep_pins(chain, ctx, [name, "triton_other_0", "triton_unswept_0"])
    assert path == tmp_path / "pins.json"
    loaded = pins.load_pins(path)
    assert list(loaded) == [name]
    expected = pins.pins_from_sweep(sweep, kdir / f"{name}.py")["pins"][0]
    assert loaded[name]["config"] == expected["config"] and loaded[name]["source_sha256"] == expected["source_sha256"]
    assert "no pin for triton_other_0" in capsys.readouterr().out
    facts_path = pipeline.trial_facts_file(tmp_path, {}, None, path)
    facts = trial_plan.load_facts([str(facts_path)])
    arm = {a.name: a for a in trial_plan.plan_arms(facts, {"gpu": True})}["pinned"]
    assert arm.skip is None and arm.env["TKO_PINS"] == str(path.resolve())


def test_no_sweep_no_pins(tmp_path):
    ctx = pipeline.KernelCtx(tmp_path, tmp_path, tmp_path, [], None, True, True, None)
    assert pipeline.write_sweep_pins(chain_steps.Chain(tmp_path), ctx, ["k"]) is None
    assert not (tmp_path / "pins.json").exists()


def _capture_log(cap, kinds: dict) -> None:
    log = cap / "autotune_kernels" / "autotune.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps({"schema": "autotune_event/1", "event": "kernel", "kernel": k, "kind": v, "pid": 1,
                                       "time": 0.0}) + "\n" for k, v in kinds.items()))


def test_a_program_of_hand_written_kernels_only_skips_the_compile_arms(tmp_path):
    """No torch.compile region: Inductor settings, Dynamo and FX passes change nothing, so those arms
    are skipped with the reason; the arms that reach hand-written kernels stay."""
    cap = tmp_path / "cap"
    _capture_log(cap, {"scale_add_kernel": "triton_jit", "matmul_kernel": "triton_autotune"})
    overrides = tmp_path / "launch_overrides.json"
    overrides.write_text("{}")
    facts_path = pipeline.trial_facts_file(tmp_path, {}, None, None, cap)
    doc = json.loads(facts_path.read_text())
    assert doc["program"]["hand_written_only"] is True
    doc["launch_overrides"] = str(overrides)
    facts_path.write_text(json.dumps(doc))
    plan = {a.name: a for a in trial_plan.plan_arms(trial_plan.load_facts([str(facts_path)]), {"gpu": True})}
    for name in ("coordinate_descent", "max_autotune_no_cudagraphs", "cudagraphs", "eager_fallback"):
        assert "only hand-written Triton kernels" in plan[name].skip, name
    assert plan["baseline"].skip is None and plan["pinned"].skip is None
    assert "only hand-written" not in (plan["replace"].skip or "")


def test_one_inductor_kernel_keeps_the_compile_arms(tmp_path):
    cap = tmp_path / "cap"
    _capture_log(cap, {"scale_add_kernel": "triton_jit", "triton_poi_fused_add_0": "pointwise"})
    facts_path = pipeline.trial_facts_file(tmp_path, {}, None, None, cap)
    assert json.loads(facts_path.read_text())["program"]["hand_written_only"] is False
    plan = {a.name: a for a in trial_plan.plan_arms(trial_plan.load_facts([str(facts_path)]), {"gpu": True})}
    assert plan["coordinate_descent"].skip is None and plan["cudagraphs"].skip is None


def test_a_rewrite_found_in_the_model_code_runs_its_arm(tmp_path):
    """examples/large_vocab_ce.py: no Triton kernel's name shows the cross entropy (its kernels are
    Inductor's log-softmax pieces), but the script's model code holds it, so the facts carry the
    ce_chunked arm with the line and the plan runs it; the other rewrite arms stay skipped. Under a
    hand-written-only capture every rewrite arm is skipped for that (examples/liger/liger_ops.py)."""
    from conftest import ROOT

    script = ROOT / "examples" / "large_vocab_ce.py"
    facts_path = pipeline.trial_facts_file(tmp_path, {}, None, None, None, ["python", str(script), "--steps", "2"])
    doc = json.loads(facts_path.read_text())
    assert list(doc["rewrites"]) == ["ce_chunked"] and doc["rewrites"]["ce_chunked"].startswith(f"{script}:")
    plan = {a.name: a for a in trial_plan.plan_arms(trial_plan.load_facts([str(facts_path)]), {"gpu": True})}
    assert plan["ce_chunked"].skip is None and "the model code" in plan["ce_chunked"].proposed_by
    assert "nor the model code" in plan["sdpa"].skip
    cap = tmp_path / "cap"
    _capture_log(cap, {"scale_add_kernel": "triton_jit"})
    liger = ROOT / "examples" / "liger" / "liger_ops.py"
    facts_path = pipeline.trial_facts_file(tmp_path, {}, None, None, cap, ["python", str(liger)])
    assert list(json.loads(facts_path.read_text())["rewrites"]) == ["ce_chunked"]
    plan = {a.name: a for a in trial_plan.plan_arms(trial_plan.load_facts([str(facts_path)]), {"gpu": True})}
    assert "only hand-written Triton kernels" in plan["ce_chunked"].skip
    assert "only hand-written Triton kernels" in plan["sdpa"].skip
