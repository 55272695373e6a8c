"""What a new user trips on: stale output folders, a repro that fails at once, abbreviated or
mistyped flags, a folder where a log was expected, a kernel run that dies."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
CAPTURE = ROOT / "examples" / "recorded_h200" / "pointwise_chain"
CLI = sorted(p.name for p in SCRIPTS.glob("*.py"))


def run(script, *args, cwd=None, timeout=300):
    env = {k: v for k, v in os.environ.items() if k not in ("TKO_DEBUG", "PYTHONPATH")}
    return subprocess.run([sys.executable, str(SCRIPTS / script), *map(str, args)], cwd=cwd or ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("script", CLI)
def test_help_ends_with_a_runnable_example(script, tmp_path):
    out = run(script, "--help", cwd=tmp_path).stdout.lower()
    start = max(out.rfind("\nexample:"), out.rfind("\nexamples:"))
    assert start >= 0, f"{script} --help shows no example"
    assert f"python scripts/{script}" in out[start:] or f"python {script}" in out[start:], out[start:]


def help_examples(help_text: str) -> list[str]:
    """The lines of the example block that closes a --help (after its "example(s):" header)."""
    lines = help_text.splitlines()
    start = max(i for i, ln in enumerate(lines) if ln.lower().startswith(("example", "examples")))
    assert lines[start].rstrip().lower() in ("example:", "examples:"), f"header holds a command: {lines[start]!r}"
    block = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        block.append(line)
    return block


@pytest.mark.parametrize("script", CLI)
def test_help_examples_are_whole_commands_on_a_narrow_terminal(script, tmp_path):
    # argparse wraps an epilog to the terminal's width unless told to keep it: a wrapped
    # example breaks copy and paste mid-command
    env = {"COLUMNS": "50"}
    proc = subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**{k: v for k, v in os.environ.items()
                                                          if k not in ("TKO_DEBUG", "PYTHONPATH")}, **env})
    assert proc.returncode == 0, proc.stderr
    block = help_examples(proc.stdout)
    assert block, proc.stdout
    for line in block:
        words = shlex.split(line, comments=True)
        while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value prefixes
            words.pop(0)
        assert words[:1] == ["python"] and words[1].endswith(script), f"{script}: not a whole command: {line!r}"
        flags = [w.split("=")[0] for w in words[2:words.index("--") if "--" in words else None]
                 if w.startswith("--")]
        assert all(f" {f}" in proc.stdout for f in flags), (script, line)


@pytest.mark.parametrize("script", [s for s in CLI if s not in ("triton_benchmark_template.py",
                                                                 "autotune_capture_patch.py", "apply_config_pins.py")])
def test_abbreviated_flag_is_refused_with_the_full_name(script, tmp_path):
    from tko.base.errors import ArgumentParser  # noqa: F401  (the scripts' parser)

    help_text = run(script, "--help", cwd=tmp_path).stdout
    longs = [w.strip("[],") for w in help_text.split() if w.startswith("--") and len(w.strip("[],")) > 6
             and w.strip("[],") != "--help"]
    assert longs, help_text
    flag = longs[0]
    proc = run(script, flag[:5], "x", cwd=tmp_path)
    assert proc.returncode == 2
    assert "did you mean --" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_investigate_refuses_a_stale_out_and_force_clears_only_its_own(tmp_path):
    out = tmp_path / "inv"
    out.mkdir()
    (out / "investigation.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    (out / "rewrites").mkdir()
    (out / "rewrites" / "attention_by_hand-model-20.patch").write_text("an earlier run's patch")
    proc = run("investigate.py", "--from-capture", CAPTURE, "--out", out, "--probe-arch", "none")
    assert proc.returncode == 2 and "not empty" in proc.stderr and "--force" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert (out / "investigation.json").read_text() == "{}"
    proc = run("investigate.py", "--from-capture", CAPTURE, "--out", out, "--probe-arch", "none", "--force")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "notes.txt").read_text() == "mine"
    assert not (out / "rewrites" / "attention_by_hand-model-20.patch").exists()   # never read as this run's
    doc = json.loads((out / "investigation.json").read_text())
    assert doc["schema"] == "investigation/1" and doc["kernels"]
    assert "step 1/" in proc.stdout  # progress with a planned count


@pytest.mark.slow
def test_force_never_deletes_the_capture_it_reads(tmp_path):
    out = tmp_path / "inv"
    out.mkdir()
    subprocess.run(["cp", "-r", str(CAPTURE), str(out / "capture")], check=True)
    proc = run("investigate.py", "--from-capture", out / "capture", "--out", out, "--probe-arch", "none",
               "--force")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "capture" / "autotune_kernels" / "autotune.log").is_file()


@pytest.mark.slow
def test_a_repro_that_fails_stops_the_chain_with_its_cause_and_log(tmp_path):
    repro = tmp_path / "broken_repro.py"
    repro.write_text("import sys\nprint('loading weights')\nraise RuntimeError('weights.bin not found')\n")
    out = tmp_path / "inv"
    proc = run("investigate.py", "--out", out, "--", sys.executable, repro, timeout=600)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert "RuntimeError: weights.bin not found" in last and "log_profile.txt" in last, last
    assert "weights.bin not found" in proc.stderr.split("its last lines:")[1]
    assert "profile" not in [ln.split()[2] for ln in proc.stdout.splitlines()
                             if ln.startswith("[investigate] step ")], proc.stdout
    assert "weights.bin not found" in (out / "capture" / "log_profile.txt").read_text()


def test_summarize_reads_the_log_of_a_capture_folder(tmp_path):
    proc = run("summarize_autotune_log.py", CAPTURE, "--json-out", tmp_path / "s.json")
    assert proc.returncode == 0, proc.stderr
    direct = run("summarize_autotune_log.py", CAPTURE / "autotune_kernels" / "autotune.log",
                 "--json-out", tmp_path / "d.json")
    assert direct.returncode == 0, direct.stderr
    a, b = (json.loads((tmp_path / n).read_text()) for n in ("s.json", "d.json"))
    assert [k["kernel"] for k in a["kernels"]] == [k["kernel"] for k in b["kernels"]] != []
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run("summarize_autotune_log.py", empty)
    assert proc.returncode == 2 and "no autotune.log" in proc.stderr


def test_a_kernel_run_that_dies_says_why(tmp_path):
    kernel = tmp_path / "triton_poi_broken_0.py"
    kernel.write_text("raise ValueError('captured inputs missing: idx.pt')\n")
    proc = run("run_captured_kernel.py", kernel, "--json-out", tmp_path / "run.json")
    assert proc.returncode == 1
    assert "ValueError: captured inputs missing: idx.pt" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.skipif(__import__("conftest")._gpu_present(), reason="checks the machine without a GPU")
def test_a_captured_kernel_without_a_gpu_points_at_the_recorded_run(tmp_path):
    kernel = CAPTURE / "autotune_kernels" / "triton_poi_fused_add_gelu_mul_0.py"
    proc = run("run_captured_kernel.py", kernel, "--json-out", tmp_path / "run.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr and "RuntimeError" not in lines[0], lines
    assert "needs a GPU" in lines[0] and "NVIDIA H200" in lines[0]
    assert str(CAPTURE / "runs" / "triton_poi_fused_add_gelu_mul_0.json") in lines[0]
    assert f"--from-capture {CAPTURE}" in lines[0]
    assert not (tmp_path / "run.json").exists()


def test_a_dropped_timer_is_said(tmp_path):
    old = next(CAPTURE.glob("autotune_kernels/*.py"))
    from tko.measure.standalone import runner_version, timer_for_runner

    timer, dropped = timer_for_runner(runner_version(old.read_text()), "do_bench,profiler_flushed")
    if not dropped:
        pytest.skip("this recorded runner has every timer")  # then nothing is dropped to say
    proc = run("run_captured_kernel.py", old, "--timer", "do_bench,profiler_flushed", "--timeout", "120",
               "--json-out", tmp_path / "run.json")
    assert "predates timer(s) " + ", ".join(dropped) in proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(__import__("conftest")._gpu_present(), reason="checks the machine without a GPU")
def test_the_online_investigation_of_hand_written_kernels_on_a_cpu_under_the_interpreter(tmp_path):
    """The Triton tutorials run on the CPU under TRITON_INTERPRET=1 (a user's first check): the chain
    ends 0 with nothing failed: the GPU steps skipped with their reason, every probe and twin compiled
    for gfx942 although the interpreter is on in every step's environment."""
    out = tmp_path / "inv"
    env = {k: v for k, v in os.environ.items() if k not in ("TKO_DEBUG", "PYTHONPATH")}
    env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, str(SCRIPTS / "investigate.py"), "--out", str(out), "--",
                           sys.executable, str(ROOT / "examples" / "triton_tutorials" / "tutorial_kernels.py"),
                           "--device", "cpu", "--rows", "32", "--cols", "64", "--steps", "1", "--warmup", "1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "investigation.json").read_text())
    steps = {s["name"]: s for s in doc["steps"]}
    assert [s["name"] for s in doc["steps"] if s["status"] == "failed"] == []
    assert steps["profile"]["status"] == "skipped" and "no GPU here" in steps["profile"]["error"]
    kernels = ("softmax_kernel", "_layer_norm_fwd_fused", "matmul_kernel")
    for name in kernels:
        assert steps[f"probe {name}"]["status"] == "ok", steps[f"probe {name}"]
        sol = json.loads((out / "kernels" / name / "sol.json").read_text())
        assert sol["kernel"] == name and sol["validity"]["valid"], sol["validity"]["reasons"]
        probe = json.loads((out / "kernels" / name / "probe.json").read_text())
        status = {r["variant"]: r["status"] for r in probe["results"]}
        assert probe["kernel"] == name and status["baseline"] == "ok", status
        assert set(status.values()) <= {"ok", "skipped"}, status   # skipped: a variant that does not apply


@pytest.mark.slow
def test_a_compiled_model_left_on_the_cpu_is_told_so(tmp_path):
    """A model never moved to the GPU: Inductor writes C++ kernels and no Triton kernel runs. The
    run ends 2 with one line that says so and how to fix it, not "no autotune records"."""
    out = tmp_path / "inv"
    proc = run("investigate.py", "--out", out, "--", sys.executable, ROOT / "examples" / "pointwise_chain.py",
               "--device", "cpu", "--rows", "256", "--steps", "2", cwd=tmp_path, timeout=600)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("investigate.py: error: no kernel report: Inductor compiled the program for the CPU "
                           "(1 C++ kernel(s): cpp_fused_add_gelu_mul_0) and no Triton kernel ran"), last
    doc = json.loads((out / "investigation.json").read_text())
    assert doc["cpu_kernels"] == ["cpp_fused_add_gelu_mul_0"] and doc["next_steps"] == [last.split("report: ", 1)[1]]
