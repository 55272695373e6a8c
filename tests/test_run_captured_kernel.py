"""run_captured_kernel.py: result lines -> kernel_run/1; crashes, hangs and silence are failures.

The fake kernels below print what the standalone runner prints (tko.measure.standalone.RESULT_PREFIX +
JSON); the real outputs of the runner on an H200 are checked at the end.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tko.base.contracts import contract_problems
from tko.measure.kernel_run import parse_result_lines
from tko.measure.standalone import RESULT_PREFIX

CAP = Path(__file__).resolve().parent / "fixtures" / "capture_h200"


def fake_kernel(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "triton_poi_fake_0.py"
    path.write_text(textwrap.dedent(f"""
        import json, sys, time
        PREFIX = {RESULT_PREFIX!r}
        argv = sys.argv[1:]
    """) + textwrap.dedent(body))
    return path


def result(ms, best=True, **extra):
    rec = {"kernel": "triton_poi_fake_0", "config": {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1},
           "best": best, "ok": True, "ms": ms, "bytes": 4_000_000, "gb_per_s": 4e6 / (ms * 1e-3) / 1e9,
           "statistic": "median", "timer": "triton.testing.do_bench", "launch": "inductor"}
    rec.update(extra)
    return rec


def load(path: Path) -> dict:
    doc = json.loads(path.read_text())
    assert contract_problems(doc) == []
    return doc


def test_result_lines_become_kernel_run_json(tmp_path, run_script):
    lines = [result(0.0125), result(0.0150, best=False, config={"XBLOCK": 512, "num_warps": 8, "num_stages": 1})]
    kernel = fake_kernel(tmp_path, f"""
        print("compiling...")
        for rec in {lines!r}:
            print(PREFIX + json.dumps(rec))
            print("human line for", rec["config"])
        print("argv", argv, file=sys.stderr)
    """)
    out = tmp_path / "run.json"
    proc = run_script("run_captured_kernel.py", kernel, "--all-configs", "--warmup", "5", "--rep", "20",
                      "--json-out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = load(out)
    assert doc["schema"] == "kernel_run/1" and doc["status"] == "ok" and doc["error"] is None
    assert doc["command"][2:] == ["--all-configs", "--warmup", "5.0", "--rep", "20.0"]
    assert [r["ms"] for r in doc["results"]] == [0.0125, 0.0150]
    assert doc["best"]["ms"] == 0.0125 and doc["fastest"]["config"]["XBLOCK"] == 1024
    assert doc["kernel"] == "triton_poi_fake_0" and doc["timer"] == "triton.testing.do_bench"
    assert doc["stderr_tail"] == [] and doc["problems"] == []
    assert "0.0125 ms" in proc.stdout


def test_best_is_the_captured_winner_not_the_fastest(tmp_path, run_script):
    lines = [result(0.02), result(0.01, best=False)]
    kernel = fake_kernel(tmp_path, f"""
        for rec in {lines!r}:
            print(PREFIX + json.dumps(rec))
    """)
    out = tmp_path / "run.json"
    assert run_script("run_captured_kernel.py", kernel, "--json-out", out).returncode == 0
    doc = load(out)
    assert doc["best"]["ms"] == 0.02 and doc["fastest"]["ms"] == 0.01


def test_crashing_kernel_fails_with_its_stderr(tmp_path, run_script):
    kernel = fake_kernel(tmp_path, """
        print("starting", file=sys.stderr)
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    """)
    out = tmp_path / "run.json"
    proc = run_script("run_captured_kernel.py", kernel, "--json-out", out)
    assert proc.returncode == 1
    err_lines = proc.stderr.strip().splitlines()
    assert len(err_lines) == 1 and "exited with code 1" in err_lines[0]
    doc = load(out)
    assert doc["status"] == "failed" and doc["returncode"] == 1 and doc["results"] == []
    assert doc["stderr_tail"][-1] == "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_hanging_kernel_times_out(tmp_path, run_script):
    kernel = fake_kernel(tmp_path, """
        print("warming up", flush=True)
        time.sleep(60)
    """)
    out = tmp_path / "run.json"
    proc = run_script("run_captured_kernel.py", kernel, "--timeout", "2", "--json-out", out, timeout=60)
    assert proc.returncode == 1 and "timed out after 2 s" in proc.stderr
    doc = load(out)
    assert doc["status"] == "timeout" and doc["timed_out"] and doc["returncode"] is None
    assert doc["seconds"] < 30 and doc["stdout_tail"] == ["warming up"]


def test_no_result_line_is_a_failure_not_an_empty_success(tmp_path, run_script):
    kernel = fake_kernel(tmp_path, """
        print("done, 0.0123 ms")  # prose is not a result
    """)
    out = tmp_path / "run.json"
    proc = run_script("run_captured_kernel.py", kernel, "--json-out", out)
    assert proc.returncode == 1 and "no result line" in proc.stderr
    assert load(out)["status"] == "failed"


def test_failed_config_and_malformed_lines(tmp_path, run_script):
    bad = {"kernel": "triton_poi_fake_0", "config": {"XBLOCK": 4096}, "best": False, "ok": False,
           "error": "OutOfResources: shared memory"}
    kernel = fake_kernel(tmp_path, f"""
        print(PREFIX + json.dumps({result(0.01)!r}))
        print(PREFIX + json.dumps({bad!r}))
        print(PREFIX + '{{"kernel": "x", "config": ')
        print(PREFIX + json.dumps({{"kernel": "x", "config": {{}}, "ms": 0}}))
        sys.exit(1)
    """)
    out = tmp_path / "run.json"
    proc = run_script("run_captured_kernel.py", kernel, "--all-configs", "--json-out", out)
    assert proc.returncode == 1
    doc = load(out)
    assert doc["status"] == "failed" and "OutOfResources" in doc["error"]
    assert [r["ok"] for r in doc["results"]] == [True, False]
    assert len(doc["problems"]) == 2


def test_parse_result_lines_finds_prefix_anywhere_in_a_line():
    text = "noise\n[rank0]: " + RESULT_PREFIX + json.dumps(result(0.5)) + "\n" + RESULT_PREFIX + "{}\n"
    results, problems = parse_result_lines(text)
    assert [r["ms"] for r in results] == [0.5] and len(problems) == 1


@pytest.mark.parametrize("args, message", [
    (["missing.py", "--json-out", "x.json"], "no such kernel file"),
    (["K", "--timeout", "0", "--json-out", "x.json"], "--timeout must be positive"),
    (["K"], "the following arguments are required: --json-out"),
])
def test_bad_input_exits_2(tmp_path, run_script, args, message):
    kernel = fake_kernel(tmp_path, "")
    args = [str(kernel) if a == "K" else a for a in args]
    proc = run_script("run_captured_kernel.py", *args, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 or "usage:" in proc.stderr


@pytest.mark.parametrize("path", sorted(CAP.glob("*/run_*.json")), ids=lambda p: p.parent.name + "/" + p.name)
def test_real_h200_runs(path):
    """kernel_run/1 written on the H200 by the GPU suite: every standalone file ran."""
    doc = load(path)
    assert doc["status"] == "ok" and doc["returncode"] == 0
    best = doc["best"]
    assert best["ok"] and best["ms"] > 0
    assert best.get("timer", "triton.testing.do_bench") == "triton.testing.do_bench"  # run 1 predates --timer
    assert best["launch"] in ("inductor", "jit")
    # bandwidth under the H200's measured copy rate (4246 GB/s, tests/fixtures/inductor_h200/summary.json)
    assert 0 < best["gb_per_s"] < 4300
    assert Path(doc["kernel_file"]).name.startswith(doc["kernel"][:40])


def test_h200_standalone_times_match_the_program():
    """Kernels of 40 us or more: the standalone do_bench median is within 10 % of the profiler's
    mean kernel time in the original program (GPU run 1); tiny kernels are launch-bound."""
    results = json.loads((CAP / "results_run1.json").read_text())
    rows = [s for s in results["standalone"] if s["status"] == "ok"]
    assert len(rows) >= 10
    big = [s for s in rows if s["profiler_mean_us"] >= 40]
    assert big and all(0.9 <= s["ratio"] <= 1.1 for s in big), big
    tiny = [s for s in rows if s["profiler_mean_us"] < 2]
    assert tiny and all(s["standalone_us"] > 2 * s["profiler_mean_us"] for s in tiny)


def test_runner_profiler_timer_reads_kernel_durations_from_a_real_trace(tmp_path):
    # the runner's profiler timer picks its kernel's device durations out of a chrome trace;
    # here a real H200 torch.profiler trace (tests/fixtures/profiles)
    import gzip

    from tko.measure.standalone import TIMER_CHOICES, runner_text

    namespace = {"__name__": "runner_under_test"}
    exec(compile(runner_text({"kernel": "k", "function": "k", "args": [], "configs": []}), "runner", "exec"), namespace)
    assert namespace["_TKO_TIMER_CHOICES"] == TIMER_CHOICES
    trace = tmp_path / "trace.json"
    raw = gzip.open(CAP.parent / "profiles" / "h200_eager_stack.trace.json.gz").read()
    trace.write_bytes(raw)
    events = [e for e in json.loads(raw)["traceEvents"] if e.get("cat") == "kernel"]
    name = next(e["name"] for e in events if "softmax_warp_forward" in e["name"])
    expected = sorted(float(e["dur"]) for e in events if e["name"] == name)
    got = namespace["_tko_kernel_events_us"](str(trace), name)
    assert sorted(got) == expected and len(got) == 3 and all(d > 0 for d in got)
    # a prefix selects when no name matches exactly; an unknown name selects nothing
    assert len(namespace["_tko_kernel_events_us"](str(trace), "void (anonymous namespace)::softmax_warp_forward")) == 3
    assert namespace["_tko_kernel_events_us"](str(trace), "triton_poi_fused_0") == []


FAKE_AUTOTUNER = '''
class FakeAutotuner:
    """What the runner touches of Inductor's CachingAutotuner: precompile adds a half-R0_BLOCK
    config when dynamic_scale_rblock is on (as Inductor does when registers limit occupancy)."""
    def __init__(self, always_two=False):
        self.configs, self.launchers, self.inductor_meta, self.always_two = None, [], {}, always_two
        self.ran = []

    def precompile(self):
        self.launchers = list(self.configs)
        if self.always_two or self.inductor_meta.get("dynamic_scale_rblock", True):
            self.launchers.append("R0_BLOCK halved")

    def run(self, *args, stream):
        self.ran.append((args, stream))


triton_red_fake_0 = FakeAutotuner(always_two=ALWAYS_TWO)
'''


@pytest.mark.parametrize("always_two", [False, True])
def test_runner_launches_exactly_the_config_it_names(tmp_path, monkeypatch, always_two):
    # Inductor's dynamic R0_BLOCK halving would add a config and autotune between the two at the
    # first launch; the runner turns it off, and refuses when a second launcher appears anyway
    from tko.measure.standalone import runner_text

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    spec = {"kernel": "triton_red_fake_0", "function": "triton_red_fake_0", "launch": "inductor", "args": [],
            "configs": []}
    path = tmp_path / "triton_red_fake_0.py"
    path.write_text(FAKE_AUTOTUNER.replace("ALWAYS_TWO", repr(always_two)) + runner_text(spec))
    namespace = {"__name__": "runner_under_test", "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    cfg = {"flat": {"XBLOCK": 1, "R0_BLOCK": 2048, "num_warps": 16}, "grid": None}
    if always_two:
        with pytest.raises(RuntimeError, match="2 launchers for one config"):
            namespace["_tko_inductor_call"](spec, cfg, [], "cpu")
        return
    call = namespace["_tko_inductor_call"](spec, cfg, [], "cpu")
    call()


@pytest.mark.parametrize("run", ["results_run4.json", "results_run5.json"])
def test_real_h200_standalone_against_the_program_by_its_own_instrument(run):
    # run_gpu_suite.py's verdicts recomputed from the recorded times; and what they show: by the
    # profiler's device time, every kernel of 15 us or more and every ~1 us kernel is within 10 % of
    # the program, and the program time lies between the L2-warm and L2-flushed standalone times
    import sys

    sys.path.insert(0, str(CAP.parents[1] / "gpu" / "drivers"))
    from run_gpu_suite import verdict

    rows = json.loads((CAP / run).read_text())["standalone"]
    assert rows and all(r["status"] == "ok" for r in rows)
    for r in rows:
        assert verdict(r) == {"within_10pct": r["within_10pct"], "in_l2_bracket": r["in_l2_bracket"]}
        assert r["ratio_profiler"] == pytest.approx(r["profiler_us"] / r["profiler_mean_us"])
    kernels = [r for r in rows if r["example"] != "dynamic_shapes" or r["file"].startswith("mean of")]
    for r in kernels:
        if r["profiler_mean_us"] >= 15 or r["profiler_mean_us"] < 1.5:
            assert r["within_10pct"], (r["kernel"], r["ratio_profiler"], r["ratio_flushed"])
        # do_bench's events add the launch latency the device time does not have
        assert r["ratio_do_bench"] > r["ratio_profiler"]
    misses = [r["kernel"] for r in kernels if not r["within_10pct"]]
    assert len(misses) <= 2 and all(r["in_l2_bracket"] for r in kernels if r["kernel"] in misses)


def test_timer_lists(tmp_path, run_script):
    import argparse

    from tko.measure.standalone import runner_text

    namespace = {"__name__": "runner_under_test"}
    exec(compile(runner_text({"kernel": "k", "function": "k", "args": [], "configs": []}), "runner", "exec"), namespace)
    timers = namespace["_tko_timers"]
    assert timers("do_bench, profiler_flushed") == {"do_bench", "profiler_flushed"}
    assert timers("both") == {"do_bench", "cudagraph"}
    assert timers("all") == {"do_bench", "cudagraph", "profiler", "profiler_flushed"}
    with pytest.raises(argparse.ArgumentTypeError, match="unknown timer bogus"):
        timers("do_bench,bogus")
    kernel = fake_kernel(tmp_path, "print('never run')")
    proc = run_script("run_captured_kernel.py", kernel, "--timer", "do_bench,bogus", "--json-out", tmp_path / "r.json")
    assert proc.returncode == 2 and "unknown timer bogus" in proc.stderr and not (tmp_path / "r.json").exists()


def test_an_unavailable_profiler_timer_loses_only_itself(capsys):
    # a torch build whose profiler records no device activity: that timer is reported on stderr and
    # left out, the others stand (the kernel run does not fail)
    from tko.measure.standalone import runner_text

    namespace = {"__name__": "runner_under_test"}
    exec(compile(runner_text({"kernel": "k", "function": "k", "args": [], "configs": []}), "runner", "exec"), namespace)

    class FakeJit:
        __name__ = "k"
        arg_names = ["x"]

        def run(self, *args, **kwargs):
            pass

    namespace["k"] = FakeJit()

    def profiler_ms(call, name, rep, flush):
        assert name == "k"
        if flush:
            raise RuntimeError("the profiler saw no kernel named k")
        return 0.002

    got = namespace["_tko_gpu_timings"](lambda: None, {"kernel": "k", "function": "k"},
                                        {"profiler", "profiler_flushed"}, 1.0, 1.0, profiler_ms=profiler_ms)
    assert got == [("torch.profiler", 0.002)]
    assert "k: timer profiler_flushed unavailable (RuntimeError: the profiler saw no kernel named k)" in \
        capsys.readouterr().err


def test_gpu_timings_call_triton_testing_as_documented(monkeypatch):
    # the do_bench / do_bench_cudagraph calls, stood in for on a CPU: their keyword arguments
    # and the order of the result lines
    import inspect

    import triton.testing

    from tko.measure.standalone import runner_text

    seen = []

    def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        seen.append(("do_bench", warmup, rep, return_mode))
        return 0.5

    def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
        seen.append(("cudagraph", rep, return_mode))
        return 0.25

    for real, fake in ((triton.testing.do_bench, do_bench), (triton.testing.do_bench_cudagraph, do_bench_cudagraph)):
        assert {"rep", "return_mode"} <= set(inspect.signature(real).parameters)   # the real ones take them
    monkeypatch.setattr(triton.testing, "do_bench", do_bench)
    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", do_bench_cudagraph)
    namespace = {"__name__": "runner_under_test"}
    exec(compile(runner_text({"kernel": "k", "function": "k", "args": [], "configs": []}), "runner", "exec"), namespace)
    got = namespace["_tko_gpu_timings"](lambda: None, {"kernel": "k", "function": "k"},
                                        namespace["_tko_timers"]("both"), 10.0, 50.0)
    assert got == [("triton.testing.do_bench", 0.5), ("triton.testing.do_bench_cudagraph", 0.25)]
    assert seen == [("do_bench", 10.0, 50.0, "median"), ("cudagraph", 50.0, "median")]


@pytest.mark.parametrize("path,timer,expected", [
    # a runner of this version: any list, as given
    (None, "do_bench,profiler_flushed", ("do_bench,profiler_flushed", [])),
    # run 4 of the H200 suite: one value of six, no lists (the smallest superset is chosen)
    ("examples/recorded_h200/user_autotune_kernel/autotune_kernels/scale_bias_relu_kernel.py",
     "do_bench,profiler_flushed", ("all", [])),
    ("examples/recorded_h200/user_autotune_kernel/autotune_kernels/scale_bias_relu_kernel.py",
     "profiler", ("profiler", [])),
    # run 3: do_bench, cudagraph or both
    ("tests/fixtures/capture_h200/pointwise_chain/triton_poi_fused_add_gelu_mul_0.py",
     "do_bench,profiler_flushed", ("do_bench", ["profiler_flushed"])),
    ("tests/fixtures/capture_h200/pointwise_chain/triton_poi_fused_add_gelu_mul_0.py",
     "all", ("both", ["profiler", "profiler_flushed"])),
])
def test_timer_request_fits_the_files_runner(path, timer, expected):
    # standalone files written by earlier versions are still run, with the timers they have
    from conftest import ROOT
    from tko.measure.standalone import runner_text, runner_version, timer_for_runner

    text = runner_text({"kernel": "k"}) if path is None else (ROOT / path).read_text()
    assert timer_for_runner(runner_version(text), timer) == expected
    assert timer_for_runner(runner_version("def k(): pass  # no runner options at all"), "do_bench,profiler") == (None, ["profiler"])


def test_an_old_runner_runs_without_the_timers_it_lacks(tmp_path, run_script):
    kernel = fake_kernel(tmp_path, f"""
        assert not any(a.startswith("--tim") for a in argv), argv   # predates --timer: would reject it
        print(PREFIX + json.dumps({result(0.0125)!r}))
    """)
    out = tmp_path / "run.json"
    proc = run_script("run_captured_kernel.py", kernel, "--timer", "do_bench,profiler_flushed", "--json-out", out)
    assert proc.returncode == 0, proc.stderr
    doc = load(out)
    assert doc["status"] == "ok" and doc["timers_dropped"] == ["profiler_flushed"]
    assert "--timer" not in doc["command"]


def test_a_fresh_runner_is_the_runner_module_with_its_version_marker():
    from tko.measure import standalone_runner
    from tko.measure.standalone import RUNNER_VERSION, replace_spec, runner_text, runner_version

    text = runner_text({"kernel": "k", "configs": []})
    assert runner_version(text) == RUNNER_VERSION == standalone_runner.RUNNER_VERSION
    assert runner_version(replace_spec(text, {"kernel": "k", "configs": [{"flat": {}}]})) == RUNNER_VERSION
    module_text = Path(standalone_runner.__file__).read_text()
    body = module_text.split(standalone_runner.STAMP_BEGIN + "\n", 1)[1].split(standalone_runner.STAMP_END)[0]
    assert body.strip() in text                       # stamped verbatim, not a second copy to keep


def test_the_stamped_runner_needs_nothing_from_this_package():
    # a standalone file runs where tko is not installed: every global its runner functions read is
    # defined in the stamped text itself (or is a builtin / the file's own __file__ and kernel)
    import builtins
    import dis

    from tko.measure.standalone import runner_text

    namespace: dict = {"__name__": "standalone_under_test"}
    exec(compile(runner_text({"kernel": "k", "function": "k", "args": [], "configs": []}), "runner", "exec"),
         namespace)
    funcs = [v for k, v in namespace.items() if k.startswith("_tko_") and callable(v)]
    assert len(funcs) >= 10 and "_tko_cpu_wall_bench" in namespace

    def global_loads(code):
        for ins in dis.get_instructions(code):
            if ins.opname == "LOAD_GLOBAL":
                yield ins.argval
        for const in code.co_consts:
            if hasattr(const, "co_code"):
                yield from global_loads(const)

    missing = {name for f in funcs for name in global_loads(f.__code__)
               if name not in namespace and not hasattr(builtins, name) and name != "__file__"}
    assert not missing, missing
    assert "tko" not in {ins.argval for f in funcs for ins in dis.get_instructions(f)
                         if ins.opname == "IMPORT_NAME"}
