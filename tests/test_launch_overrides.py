"""Launch overrides (``launch_overrides/1``) of hand-written ``@triton.jit`` kernels: applied inside
the unchanged program by ``apply_config_pins.py --launch-overrides``, refused on a changed source
hash, and kept off a constexpr that sizes a fixed grid. The program runs under ``TRITON_INTERPRET=1``
in a child process; its kernel writes the BLOCK it was compiled with, so the output shows the launch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tko.base.errors import InputError
from tko.patch import launch_overrides

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

PROGRAM = textwrap.dedent('''
    import os, sys
    sys.path.insert(0, {scripts!r})
    if os.environ.get("WITH_CAPTURE") == "1":
        import autotune_capture_patch
    import torch, triton, triton.language as tl


    @triton.jit
    def block_probe(out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        tl.store(out_ptr + pid, BLOCK)


    @triton.jit
    def fixed_probe(out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        tl.store(out_ptr + pid, BLOCK)


    def main(out_file):
        n = 1024
        a = torch.zeros(64, dtype=torch.int32)
        b = torch.zeros(64, dtype=torch.int32)
        block_probe[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)](a, n, BLOCK=128, num_warps=2)
        fixed_probe[(triton.cdiv(n, 128),)](b, n, BLOCK=128)
        torch.save({{"a": a.tolist(), "b": b.tolist()}}, out_file)


    if __name__ == "__main__":
        main(sys.argv[1])
''')


def _run(folder: Path, *front: str, capture: bool = False):
    import torch

    prog = folder / "prog.py"
    prog.write_text(PROGRAM.format(scripts=str(SCRIPTS)))
    out = folder / f"out{len(list(folder.glob('out*.pt')))}.pt"
    env = dict(os.environ, TRITON_INTERPRET="1", TRITON_CAPTURE_DIR=str(folder / "cap"),
               WITH_CAPTURE="1" if capture else "0")
    cmd = [sys.executable, *front, str(prog)] + (["--"] if front else []) + [str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return torch.load(out), proc


@pytest.fixture(scope="module")
def hashes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("overrides")
    _run(folder, capture=True)
    events = [json.loads(line) for line in (folder / "cap" / "autotune.log").read_text().splitlines()]
    return folder, {e["kernel"]: e["source_hash"] for e in events if e["event"] == "kernel"}


def _overrides(folder: Path, name: str, entries: list[dict]) -> Path:
    return launch_overrides.write_overrides(folder / name, "test", entries)


@pytest.mark.slow
def test_override_applies_inside_the_unchanged_program(hashes):
    folder, h = hashes
    path = _overrides(folder, "ov.json", [
        {"kernel": "block_probe", "source_hash": h["block_probe"], "launch": {"BLOCK": 256, "num_warps": 4}},
        {"kernel": "fixed_probe", "source_hash": h["fixed_probe"], "launch": {"BLOCK": 256, "num_warps": 4}}])
    out, proc = _run(folder, str(SCRIPTS / "apply_config_pins.py"), "--launch-overrides", str(path))
    # the callable grid follows the new BLOCK: 1024 / 256 = 4 programs, each compiled with 256
    assert out["a"][:5] == [256, 256, 256, 256, 0]
    # a fixed grid keeps its BLOCK (8 programs of 128), num_warps alone changes
    assert out["b"][:9] == [128] * 8 + [0]
    lines = proc.stderr.strip().splitlines()
    assert "apply_config_pins: 2 launch override(s) loaded from" in lines[0]
    assert sum("fixed_probe: BLOCK not overridden at a launch with a fixed grid" in line for line in lines) == 1


@pytest.mark.slow
def test_override_of_a_changed_kernel_is_left_alone_with_one_warning(hashes):
    folder, h = hashes
    path = _overrides(folder, "stale.json", [
        {"kernel": "block_probe", "source_hash": "0" * 16, "launch": {"BLOCK": 256}}])
    out, proc = _run(folder, str(SCRIPTS / "apply_config_pins.py"), "--launch-overrides", str(path))
    assert out["a"][:9] == [128] * 8 + [0]
    warnings = [line for line in proc.stderr.splitlines() if "ignored" in line]
    assert len(warnings) == 1 and "block_probe" in warnings[0] and h["block_probe"] in warnings[0]


def test_a_malformed_overrides_file_is_refused_in_one_line(tmp_path, run_script):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"schema": "launch_overrides/1", "tool": "t", "created": "x", "versions": {},
                                "overrides": [{"kernel": "k", "source_hash": "ab", "launch": {"BLOCK": [1]}}]}))
    with pytest.raises(InputError, match=r"overrides\[0\].launch must be an object of numbers"):
        launch_overrides.load_overrides(path)
    prog = tmp_path / "p.py"
    prog.write_text("print('ran')\n")
    res = run_script("apply_config_pins.py", "--launch-overrides", path, prog)
    assert res.returncode == 2 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "must be an object of numbers" in res.stderr
    res = run_script("apply_config_pins.py", prog)
    assert res.returncode == 2 and "give --pins, --launch-overrides or both" in res.stderr


def test_override_from_a_sweep_of_a_plain_launch():
    spec = {"kernel": "scale_add", "kind": "triton_jit", "source_hash": "abcd" * 4,
            "launch_site": {"file": "/p/prog.py", "line": 30, "function": "main"},
            "configs": [{"flat": {"BLOCK": 128, "num_warps": 2, "num_stages": 3}, "grid": [8]}]}
    sweep = {"best": {"name": "BLOCK=256,num_warps=4"},
             "variants": [{"name": "BLOCK=256,num_warps=4", "kind": "config", "x_vs_baseline": 1.4,
                           "config": {"BLOCK": 256, "num_warps": 4, "num_stages": 3}}]}
    entry = launch_overrides.overrides_from_sweep(sweep, spec, origin="sweep.json")
    assert entry["launch"] == {"BLOCK": 256, "num_warps": 4} and entry["source_hash"] == spec["source_hash"]
    assert entry["source"]["launch_site"]["line"] == 30
    with pytest.raises(InputError, match="no plain @triton.jit launch"):
        launch_overrides.overrides_from_sweep(sweep, dict(spec, kind="triton_autotune"))
    with pytest.raises(InputError, match="nothing to override"):
        launch_overrides.overrides_from_sweep({"best": {"name": "baseline"}}, spec)


def test_pinned_arm_runs_the_launch_overrides_of_the_facts(tmp_path):
    from tko.chains import trial_plan

    facts = trial_plan.Facts(launch_overrides=str(tmp_path / "launch_overrides.json"))
    arm = trial_plan._pinned_arm(facts, None)
    assert arm.skip is None and arm.env == {"TKO_LAUNCH_OVERRIDES": str(tmp_path / "launch_overrides.json")}
    assert arm.change.startswith("launch the hand-written kernels with the arguments of")
    assert trial_plan._pinned_arm(trial_plan.Facts(), None).skip
    plain = trial_plan.Facts()
    trial_plan._from_plain({"launch_overrides": "lo.json"}, tmp_path, plain)
    assert plain.launch_overrides == str(tmp_path / "lo.json")


def test_a_winning_override_decides_only_the_kernels_it_changes(tmp_path):
    from tko.chains import trials
    from tko.verdict import trial_evidence

    path = tmp_path / "launch_overrides.json"
    path.write_text(json.dumps({"schema": "launch_overrides/1", "overrides": [
        {"kernel": "scale_add_kernel", "source_hash": "fb684dce5a21c799", "launch": {"BLOCK": 128, "num_warps": 2}}]}))
    assert trials.arm_targets({"TKO_LAUNCH_OVERRIDES": str(path)}) == ["scale_add_kernel"]
    assert trials.arm_targets({"OTHER": "1"}) is None
    # the H200 trial of examples/handwritten: pinned 1.68x, baseline noise +-0.6 %
    arm = {"status": "ok", "outputs": {"result": "equal"}, "spread": 1.006, "noise": 1.006}
    doc = {"schema": "remedy_trials/1", "noise": 1.006, "runs": 2, "arms": [
        dict(arm, name="baseline", median_ms=0.3858, x_baseline=1.0),
        dict(arm, name="pinned", median_ms=0.2300, x_baseline=1.677, beyond_noise=True,
             change="launch the hand-written kernels with the arguments of launch_overrides.json",
             targets=["scale_add_kernel"])]}
    own = trial_evidence.trial_facts(doc, "trials.json", "scale_add_kernel")
    assert own["remedy_winner"].value == "pinned" and own["remedy_x"].value == pytest.approx(1.677)
    other = trial_evidence.trial_facts(doc, "trials.json", "rms_norm_kernel")
    assert "remedy_winner" not in other and "remedy_none_faster" not in other
    assert "changing scale_add_kernel" in other["remedy_winner_elsewhere"].value
    assert trial_evidence.trial_facts(doc, "trials.json")["remedy_winner"].value == "pinned"   # the program's
