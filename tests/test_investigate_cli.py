"""investigate.py as a user meets it on the console: what it prints, its progress lines, its exit
status and where the reason for a failure goes (fast cases; the full chains are in
test_investigate.py, marked slow)."""

from __future__ import annotations

import os
import shutil

import pytest

from conftest import ROOT

RECORDED = ROOT / "examples" / "recorded_h200"


def copy_capture(tmp_path, example: str = "pointwise_chain"):
    cap = tmp_path / "capture"
    shutil.copytree(RECORDED / example, cap)
    return cap


@pytest.mark.parametrize("content,needle", [("", "empty"), ("\n\n", "empty")])
def test_an_empty_capture_log_is_exit_2_with_the_reason_on_stderr(run_script, tmp_path, content, needle):
    cap = copy_capture(tmp_path)
    (cap / "autotune_kernels" / "autotune.log").write_text(content)
    (cap / "log_profile.txt").write_text("")
    proc = run_script("investigate.py", "--from-capture", cap, "--out", tmp_path / "inv", cwd=tmp_path)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr)
    assert len(err) == 1 and needle in err[0] and "autotune.log" in err[0], err
    assert not (tmp_path / "inv").exists()  # refused before anything was written


def test_a_capture_log_without_records_is_exit_2_with_the_reason_on_stderr(run_script, tmp_path):
    cap = copy_capture(tmp_path)
    (cap / "autotune_kernels" / "autotune.log").write_text("not an autotune record\n")
    (cap / "log_profile.txt").write_text("")
    shutil.rmtree(cap / "profile")  # no profile either: the kernels come from the autotune log
    proc = run_script("investigate.py", "--from-capture", cap, "--out", tmp_path / "inv", cwd=tmp_path)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr)
    assert len(err) == 1 and "no autotune records" in err[0] and "summarize" in err[0], err


def test_the_console_gets_a_short_summary_and_counters_that_reach_the_total(run_script, tmp_path):
    """The decision per hot kernel, what to change and where the report is, not the whole
    investigation.md (SVG and all); every step numbered k/n with the last at n/n, skipped ones too."""
    import json
    import re

    out = tmp_path / "inv"
    proc = run_script("investigate.py", "--from-capture", RECORDED / "pointwise_chain", "--out", out,
                      "--probe-arch", "none", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    index = json.loads((out / "investigation.json").read_text())
    stdout = proc.stdout
    assert "<svg" not in stdout and "| step | status |" not in stdout
    for kernel in index["kernels"]:
        assert kernel["kernel"] in stdout and kernel["decision_text"] in stdout
        assert f"{100 * kernel['share']:.1f}%" in stdout
    assert str(out / "investigation.md") in stdout
    summary = stdout[stdout.index("[investigate] done"):]
    assert len(summary.splitlines()) < 25, summary

    counters = [(int(k), int(n)) for k, n in re.findall(r"^\[investigate\] step (\d+)/(\d+) ", stdout, re.M)]
    assert [k for k, _ in counters] == list(range(1, len(index["steps"]) + 1)), counters
    assert counters[-1][0] == counters[-1][1], counters
    assert all(k <= n for k, n in counters), counters
    skipped = [s for s in index["steps"] if s["status"] == "skipped"]
    assert skipped and any(s["name"].startswith("probe ") for s in skipped)  # --probe-arch none
    table = (out / "investigation.md").read_text().split("## Steps", 1)[1]
    assert "None" not in table
    # the wall time, offline: no target; the console's "done in" counts the same run
    done_s = float(re.search(r"\[investigate\] done in ([0-9.]+) s", stdout).group(1))
    assert index["deadline_s"] is None and 0 < index["wall_s"] <= done_s
    assert table.lstrip().startswith(f"Wall time: {index['wall_s']:.0f} s.\n")


def test_the_wall_time_is_held_against_the_deadline_online():
    from tko.chains.investigation_index import _wall_line

    assert _wall_line({"wall_s": 512.4, "deadline_s": 600.0}) == [
        "Wall time: 512 s against the 600 s target (--deadline-s).", ""]
    assert _wall_line({"wall_s": 640.0, "deadline_s": 600.0})[0].endswith("(--deadline-s): over it.")
    assert _wall_line({}) == [] and _wall_line({"wall_s": None}) == []


def test_only_hot_kernels_are_compile_probed(tmp_path, monkeypatch):
    """scatter_index_add's profile: the index_add kernel takes 94.7 % of GPU time, zeros_like 4.4 %,
    under the hot_share cut of the rules; the probe runs for the first only, with the hint variants."""
    import json

    from tko.chains import chain_steps, pipeline
    from tko.compile.probe_variants import HINT_VARIANTS
    from tko.base.decide import threshold

    cap = RECORDED / "scatter_index_add"
    profile = json.loads((cap / "profile" / "profile.json").read_text())
    shares = pipeline.profile_shares(profile)
    kernels = pipeline.top_kernels(profile, None, 3)
    hot = [k for k in kernels if shares[k] >= threshold("hot_share")]
    assert 0 < len(hot) < len(kernels)  # the capture has both kinds

    chain = chain_steps.Chain(tmp_path)
    started = []
    monkeypatch.setattr(chain, "start", lambda name, cmd, output=None: started.append((name, cmd)))
    ctx = pipeline.KernelCtx(cap, tmp_path, cap / "autotune_kernels", ["gfx942"], None, False, False, None,
                             shares=shares)
    for kernel in kernels:
        pipeline._probe(chain, ctx, kernel, cap / "autotune_kernels" / f"{kernel}.py", tmp_path)
    assert [name for name, _ in started] == [f"probe {k}" for k in hot]
    for _, cmd in started:
        assert cmd[cmd.index("--variants") + 1] == ",".join(HINT_VARIANTS)
    skipped = {s.name: s.error for s in chain.steps if s.status == "skipped"}
    assert set(skipped) == {f"probe {k}" for k in kernels if k not in hot}
    assert all(e.startswith("not hot: 4.4% of GPU time") for e in skipped.values()), skipped


def test_every_hot_kernels_probe_starts_before_any_kernels_gpu_steps(tmp_path, monkeypatch):
    """The probes (offline compiles) run beside the GPU steps of every kernel, not only their own;
    each is waited for once, and a stop (Ctrl-C) ends every probe still running."""
    import json

    from tko.chains import chain_steps, pipeline

    cap = RECORDED / "scatter_index_add"
    profile = json.loads((cap / "profile" / "profile.json").read_text())
    kernels = pipeline.top_kernels(profile, None, 3)
    assert len(kernels) >= 2
    order: list[str] = []

    class FakeProbe:
        def __init__(self, name):
            self.name, self.cancelled = name, False

        def wait(self):
            order.append(f"wait {self.name}")
            return False

        def cancel(self):
            self.cancelled = True

    def fake_run(name, cmd, **kw):
        order.append(name)
        if stop_at and name.startswith(stop_at):
            raise KeyboardInterrupt
        return False

    chain = chain_steps.Chain(tmp_path)
    probes = []
    probe_cmds = []
    monkeypatch.setattr(chain, "start", lambda name, cmd, output=None: order.append(f"start {name}")
                        or probe_cmds.append([str(c) for c in cmd]) or probes.append(FakeProbe(name)) or probes[-1])
    monkeypatch.setattr(chain, "run", fake_run)
    ctx = pipeline.KernelCtx(cap, tmp_path, cap / "autotune_kernels", ["gfx942"], None, False, False, None, shares={})
    stop_at = None
    gathered = pipeline._gather_all(chain, ctx, kernels, tmp_path / "profile.json")
    assert sorted(gathered) == sorted(kernels) and [p.name for p in probes] == [f"probe {k}" for k in kernels]
    jobs = {int(c[c.index("--jobs") + 1]) for c in probe_cmds}               # the probes share the CPUs
    assert jobs == {max(1, ((os.cpu_count() or 2) - 2) // len(kernels))}
    first_gpu_step = min(i for i, n in enumerate(order) if n.startswith("speed_of_light "))
    assert [n for n in order[:first_gpu_step] if n.startswith("start ")] == [f"start probe {k}" for k in kernels]
    assert order[-len(kernels):] == [f"wait probe {k}" for k in kernels]

    probes.clear()
    stop_at = f"speed_of_light {kernels[0]}"
    with pytest.raises(KeyboardInterrupt):
        pipeline._gather_all(chain, ctx, kernels, tmp_path / "profile.json")
    assert len(probes) == len(kernels) and all(p.cancelled for p in probes)


def test_speed_of_light_takes_the_kernels_times_from_its_run_step_on_a_gpu(tmp_path, monkeypatch):
    import json

    from tko.chains import chain_steps, pipeline

    cap = RECORDED / "scatter_index_add"
    kernel = pipeline.top_kernels(json.loads((cap / "profile" / "profile.json").read_text()), None, 1)[0]
    cmds = {}
    chain = chain_steps.Chain(tmp_path)
    monkeypatch.setattr(chain, "run", lambda name, cmd, **kw: cmds.__setitem__(name, [str(c) for c in cmd]) or False)
    kd = tmp_path / "kernels" / kernel
    for gpu, run, flag in ((True, kd / "run.json", True), (True, cap / "runs" / f"{kernel}.json", False),
                           (True, None, False), (False, kd / "run.json", False)):
        ctx = pipeline.KernelCtx(cap, tmp_path, cap / "autotune_kernels", [], None, True, gpu, None, shares={})
        pipeline._sol(chain, ctx, kernel, cap / "autotune_kernels" / f"{kernel}.py", kd, run)
        cmd = cmds[f"speed_of_light {kernel}"]
        assert ("--kernel-run" in cmd) == flag and ("--offline" in cmd) == (not gpu)
        if flag:
            assert cmd[cmd.index("--kernel-run") + 1] == str(kd / "run.json")


def test_a_background_steps_time_is_its_childs_not_the_wait(tmp_path):
    """A probe that ends in well under a second, waited for two seconds later, is recorded with its own
    time: the H200 investigations recorded their probes at the time the chain waited for them."""
    import sys
    import time

    from tko.chains import chain_steps

    chain = chain_steps.Chain(tmp_path, timeout=60)
    probe = chain.start("probe k", [sys.executable, "-c", "pass"])
    time.sleep(2.0)
    assert probe.wait() is True
    step = chain.steps[-1]
    assert step.status == "ok" and step.seconds < 1.5, step


def test_without_a_gpu_the_profile_and_the_copy_peak_are_skipped_and_the_report_says_why(tmp_path, monkeypatch):
    """On a CPU (a user's TRITON_INTERPRET=1 check) the capture runs; the steps that time a GPU are
    skipped with their reason, not failed twice, and the breakdown's section says why it is missing."""
    from tko.chains import chain_steps, investigation_index, pipeline

    repro = tmp_path / "repro.py"
    repro.write_text("print('ok')\n")
    chain = chain_steps.Chain(tmp_path)
    ran = []
    monkeypatch.setattr(chain, "run", lambda name, cmd, **kw: ran.append(name) or True)
    monkeypatch.setattr(pipeline, "gpu_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    pipeline.capture_online(chain, ["python", str(repro)], tmp_path / "capture", smoke=False)
    assert ran == ["check_env", "capture"]
    skipped = {s.name: s.error for s in chain.steps}
    assert skipped["profile"].startswith("no GPU here: the profiler times GPU kernels (the capture ran the "
                                         "kernels in Triton's interpreter")
    assert skipped["peak_bandwidth"] == "no GPU here: nothing to measure"
    assert not (tmp_path / "capture" / "profile").exists()   # no trace for a second profile step to read
    text = investigation_index.index_markdown({
        "capture_dir": "c", "mode": "online", "kernels": [], "steps": [s.as_dict() for s in chain.steps]})
    assert "No profile: the step's breakdown is unknown (the profile step skipped: no GPU here: the profiler " \
           "times GPU kernels" in text


def test_a_program_compiled_for_the_cpu_is_told_to_move_to_the_gpu():
    """No Triton kernel and C++ kernels in the output code: the one next step, and the exit line's reason."""
    from tko.chains import investigation_index

    result = {"kernels": [], "cpu_kernels": ["cpp_fused_add_0", "cpp_fused_mul_1", "cpp_fused_gelu_2",
                                             "cpp_fused_sum_3"], "repro": ["python", "r.py"]}
    line = investigation_index.compiled_for_cpu(result)
    assert line.startswith("Inductor compiled the program for the CPU (4 C++ kernel(s): cpp_fused_add_0, "
                           "cpp_fused_mul_1, cpp_fused_gelu_2 and 1 more) and no Triton kernel ran")
    assert investigation_index.next_steps(result) == [line]
    assert investigation_index.compiled_for_cpu(dict(result, kernels=[{"kernel": "k"}])) is None
    assert investigation_index.compiled_for_cpu(dict(result, cpu_kernels=[])) is None


@pytest.mark.parametrize("interpret", ["1", ""])
def test_a_failing_repro_stops_the_investigation_with_its_own_last_line(run_script, tmp_path, interpret):
    """The repro's own error is the exit line's cause; in Triton's interpreter the line says the
    program ran there (a kernel a GPU compiles may fail only there), outside it the line does not."""
    repro = tmp_path / "repro.py"
    repro.write_text("raise ValueError('the repro broke: float has no attribute to')\n")
    proc = run_script("investigate.py", "--out", tmp_path / "inv", "--", "python", repro,
                      env={"TRITON_INTERPRET": interpret}, timeout=120)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("investigate.py: error: the repro failed (exit 1")
    assert "ValueError: the repro broke: float has no attribute to" in last
    assert ("in Triton's interpreter (TRITON_INTERPRET=1 is set)" in last) == bool(interpret)


@pytest.mark.parametrize("value,on", [("1", True), ("true", True), ("ON", True), ("0", False), ("", False),
                                      ("off", False), (None, False)])
def test_the_interpreter_is_on_as_triton_reads_its_variable(value, on):
    from tko.base.interpreter import interpreter_on

    assert interpreter_on({} if value is None else {"TRITON_INTERPRET": value}) is on
