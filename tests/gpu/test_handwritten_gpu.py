"""On a GPU: hand-written @triton.jit kernels (examples/handwritten) through the whole investigation,
and the JIT capture's steady-state cost on a launch-bound loop of tiny kernels.

    python -m pytest -q -p no:cacheprovider tests/gpu/test_handwritten_gpu.py -m "slow or not slow" -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gpu_investigation import every_step_ok, investigate

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handwritten" / "handwritten_kernels.py"
KERNELS = ("scale_add_kernel", "rms_norm_kernel")
TUTORIALS = ROOT / "examples" / "triton_tutorials" / "tutorial_kernels.py"
TUTORIAL_KERNELS = ("softmax_kernel", "_layer_norm_fwd_fused", "matmul_kernel")


def _site_line(marker: str) -> int:
    return next(i for i, line in enumerate(EXAMPLE.read_text().splitlines(), 1) if marker in line)


def test_investigation_of_handwritten_kernels(run_script, tmp_path):
    inv, index = investigate(run_script, tmp_path, EXAMPLE, top=2, steps=20, budget_s=200)
    assert every_step_ok(index), index["steps"]
    profile = json.loads((inv / "capture" / "profile" / "profile.json").read_text())
    origins = {k["name"]: k["origin"] for k in profile["kernels"]}
    assert all(origins.get(k) == "triton" for k in KERNELS), origins
    assert profile["summary"]["triton_share"] > 0.5
    assert {k["kernel"] for k in index["kernels"]} == set(KERNELS)
    events = [json.loads(line) for line in (inv / "capture" / "autotune_kernels" / "autotune.log").read_text().splitlines()]
    launch = next(e for e in events if e["event"] == "launch" and e["kernel"] == "scale_add_kernel")
    assert launch["kind"] == "triton_jit" and launch["winner"]["num_warps"] == 1
    assert launch["launch_site"]["line"] == _site_line("scale_add_kernel[")
    sweep = inv / "kernels" / "scale_add_kernel" / "sweep.json"
    if sweep.is_file():  # swept when the rules said to tune it: the advice names the launch site
        best = json.loads(sweep.read_text())["best"]
        print("sweep best:", best)
        if best.get("name") not in (None, "baseline"):
            assert f"{EXAMPLE}:{launch['launch_site']['line']}" in best["apply"]


def test_investigation_of_the_tutorial_classics(run_script, tmp_path):
    """The Triton tutorials' softmax, layer norm and autotuned matmul: all three ranked Triton, one
    decision each, every step ok; the decisions are printed for the recorded table."""
    inv, index = investigate(run_script, tmp_path, TUTORIALS, top=3, steps=20, budget_s=150)
    assert every_step_ok(index), index["steps"]
    profile = json.loads((inv / "capture" / "profile" / "profile.json").read_text())
    origins = {k["name"]: k["origin"] for k in profile["kernels"]}
    assert all(origins.get(k) == "triton" for k in TUTORIAL_KERNELS), origins
    assert {k["kernel"] for k in index["kernels"]} == set(TUTORIAL_KERNELS)


OVERHEAD = textwrap.dedent('''
    import json, os, sys, time
    sys.path.insert(0, {scripts!r})
    import autotune_capture_patch
    from tko.patch import capture
    import torch, triton, triton.language as tl

    @triton.jit
    def tiny_a(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)

    @triton.jit
    def tiny_b(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)

    x = torch.zeros(1024, device="cuda")
    def block(kernel, active, n=500):
        capture.set_active(active)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            kernel[(4,)](x, 1024, BLOCK=256)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    for _ in range(3):          # warm both (compile); tiny_a is captured, then bypassed
        block(tiny_a, True); block(tiny_b, False)
    ratios = []
    for i in range(41):
        if i % 2:
            a = block(tiny_a, True); b = block(tiny_b, False)
        else:
            b = block(tiny_b, False); a = block(tiny_a, True)
        ratios.append(a / b)
    capture.set_active(True)
    ratios.sort()
    print(json.dumps({{"median": ratios[len(ratios) // 2], "ratios": ratios,
                      "bypassed": "run" in tiny_a.__dict__}}))
''')


def test_capture_costs_under_one_percent_on_a_launch_bound_loop(tmp_path):
    """Paired ratios in one process: blocks of 500 launches of a captured tiny kernel against the
    same kernel never captured, alternating; the median ratio is the capture's steady-state cost."""
    prog = tmp_path / "overhead.py"
    prog.write_text(OVERHEAD.format(scripts=str(ROOT / "scripts")))
    env = dict(os.environ, TRITON_CAPTURE_DIR=str(tmp_path / "cap"))
    proc = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(result)
    events = [json.loads(line) for line in (tmp_path / "cap" / "autotune.log").read_text().splitlines()]
    assert [(e["event"], e["kernel"]) for e in events] == [("kernel", "tiny_a"), ("launch", "tiny_a")]
    assert result["bypassed"] and result["median"] < 1.01, result


def test_sweep_of_the_poor_fixed_launch_and_its_launch_override(run_script, tmp_path):
    """The captured poor launch (BLOCK=64, num_warps=1) swept on the GPU: the advice names the launch
    site; the best arguments as a launch override run the unchanged example, which checks its outputs."""
    from tko.patch import launch_overrides
    from tko.measure import sweep_plan

    cap = tmp_path / "cap"
    env = dict(os.environ, TRITON_CAPTURE_DIR=str(cap))
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "autotune_capture_patch.py"), str(EXAMPLE),
                           "--", "--steps", "3"], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kernel_file = cap / "scale_add_kernel.py"
    res = run_script("sweep_captured_kernel.py", kernel_file, "--json-out", tmp_path / "sweep.json",
                     "--markdown-out", tmp_path / "sweep.md", "--best-out", tmp_path / "best.py", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads((tmp_path / "sweep.json").read_text())
    print(doc["summary"]["text"], doc["best"])
    site = f"{EXAMPLE}:{_site_line('BLOCK=64, num_warps=1)')}"
    assert site in doc["best"]["apply"]
    if doc["best"]["name"] == "baseline":
        pytest.skip("nothing beat the captured launch on this GPU: no override to apply")
    spec = sweep_plan.read_standalone(kernel_file)[2]
    entry = launch_overrides.overrides_from_sweep(doc, spec, origin=str(tmp_path / "sweep.json"))
    path = launch_overrides.write_overrides(tmp_path / "launch_overrides.json", "test", [entry])
    timed = {}
    for label, front in (("plain", []), ("override", [str(ROOT / "scripts" / "apply_config_pins.py"),
                                                        "--launch-overrides", str(path)])):
        cmd = [sys.executable, *front, str(EXAMPLE)] + (["--"] if front else []) + ["--steps", "50"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]  # the example checks both kernels' outputs
        timed[label] = float(run.stdout.split("ms/step")[0].split(":")[-1])
    print("ms/step", timed, "override applied:", entry["launch"])


ROWPKG = ROOT / "tests" / "fixtures" / "repros" / "rowpkg_program.py"


def test_investigation_of_a_packaged_kernel_autotuned_over_heuristics(run_script, tmp_path):
    """A kernel library's layout (tests/fixtures/kernels/rowpkg: relative imports, a module named
    ``types``, @triton.autotune over @triton.heuristics): captured with its standalone file, run and
    timed on the GPU, every step ok."""
    inv, index = investigate(run_script, tmp_path, ROWPKG, top=1, steps=20, budget_s=120)
    assert every_step_ok(index), index["steps"]
    assert [k["kernel"] for k in index["kernels"]] == ["scale_rows_kernel"]
    run = json.loads((inv / "kernels" / "scale_rows_kernel" / "run.json").read_text())
    assert run["status"] == "ok", run
