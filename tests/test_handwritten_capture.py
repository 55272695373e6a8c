"""Hand-written ``@triton.jit`` kernels launched as ``kernel[grid](...)``: capture, reproducer,
summary and profile attribution.

The program below runs under ``TRITON_INTERPRET=1`` in a child process (Triton takes the flag at
import), once with the capture and once without, as tests/test_capture.py does for the
``@triton.autotune`` path: a fixed-config kernel (three argument signatures, an AMD option passed,
one tensor by keyword), a ``@triton.heuristics`` kernel and an ``@triton.autotune`` kernel whose
inner JIT launches belong to the Autotuner's own record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tko.base.contracts import contract_problems

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
_LINE_EXEMPT = ("missing header field 'tool'", "missing header field 'created'",
                "missing header field 'versions'")

PROGRAM = textwrap.dedent('''
    import os, sys
    sys.path.insert(0, {scripts!r})
    if os.environ.get("WITH_CAPTURE") == "1":
        import autotune_capture_patch
    import torch, triton, triton.language as tl


    @triton.jit
    def scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(out_ptr + offs, x * alpha + tl.load(y_ptr + offs, mask=m), mask=m)


    @triton.heuristics({{"BLOCK": lambda a: triton.next_power_of_2(a["n"]) // 4}})
    @triton.jit
    def heur_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


    def bench(fn, quantiles=None, **kw):
        fn()
        return [1.0, 1.0, 1.0] if quantiles else 1.0


    @triton.autotune(configs=[triton.Config({{"BLOCK": 64}}), triton.Config({{"BLOCK": 128}})], key=["n"],
                     do_bench=bench)
    @triton.jit
    def tuned_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3.0, mask=m)


    def main(out_file):
        torch.manual_seed(0)
        x, y = torch.randn(1000), torch.randn(1000)
        a, b, c = torch.empty(1000), torch.empty(1000), torch.empty(1000)
        for n in (1000, 1000, 900, 800):
            scale_add[(triton.cdiv(n, 128),)](x, y, a, n, 0.5, BLOCK=128, num_warps=2, waves_per_eu=2)  # SITE_A
        for _ in range(2):
            heur_copy[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)](x, out_ptr=b, n=1000)  # SITE_H
            tuned_copy[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, c, 1000)
        torch.save({{"a": a, "b": b, "c": c}}, out_file)


    if __name__ == "__main__":
        main(sys.argv[1])
''')


def site_line(text: str, marker: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


def run_program(folder: Path, capture: bool, **env_extra: str):
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    prog = folder / "prog.py"
    prog.write_text(PROGRAM.format(scripts=str(SCRIPTS)))
    env = dict(os.environ, TRITON_INTERPRET="1", TRITON_CAPTURE_DIR=str(folder / "cap"),
               WITH_CAPTURE="1" if capture else "0", TRITON_CAPTURE_MAX_SIGNATURES="2", **env_extra)
    out = folder / "out.pt"
    proc = subprocess.run([sys.executable, str(prog), str(out)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return torch.load(out), prog


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    if not _interpreter_records_plain_launches():
        pytest.skip("Triton < 3.6: the interpreter's plain launches are not captured (a GPU's are)")
    root = tmp_path_factory.mktemp("handwritten")
    plain, _ = run_program(root / "plain", capture=False)
    outputs, prog = run_program(root / "captured", capture=True)
    cap = root / "captured" / "cap"
    events = [json.loads(line) for line in (cap / "autotune.log").read_text().splitlines()]
    return {"plain": plain, "outputs": outputs, "prog": prog, "cap": cap, "events": events}


def by_kernel(events: list[dict], name: str) -> list[dict]:
    return [e for e in events if e["kernel"] == name]


@pytest.mark.slow
def test_capture_records_plain_jit_launches_without_changing_results(captured):
    import torch

    for key in ("a", "b", "c"):
        assert torch.equal(captured["plain"][key], captured["outputs"][key])
    assert not (captured["cap"] / "capture_errors.log").exists()
    for ev in captured["events"]:
        assert [p for p in contract_problems(ev) if p not in _LINE_EXEMPT] == [], ev
    text = captured["prog"].read_text()
    evs = by_kernel(captured["events"], "scale_add")
    # four launches, three signatures (n = 1000, 900, 800), TRITON_CAPTURE_MAX_SIGNATURES=2
    assert [e["event"] for e in evs] == ["kernel", "launch", "launch"]
    kernel, first, second = evs
    assert kernel["kind"] == first["kind"] == "triton_jit" and kernel["function"] == "scale_add"
    assert kernel["source_file"] == str(captured["prog"])
    assert kernel["source_line"] == site_line(text, "def scale_add(")
    assert len(kernel["source_hash"]) == 16 and first["source_hash"] == kernel["source_hash"]
    assert first["launch_site"] == {"file": str(captured["prog"]), "line": site_line(text, "# SITE_A"),
                                    "function": "main"}
    assert first["winner"] == {"kwargs": {"BLOCK": 128}, "num_warps": 2, "num_stages": 3,
                               "extras": {"waves_per_eu": 2}}
    assert first["options"] == {"num_warps": 2, "waves_per_eu": 2} and first["defaulted"] == ["num_stages"]
    assert first["grid"] == [8] and second["grid"] == [8]
    assert [a["name"] for a in first["args"]] == ["x_ptr", "y_ptr", "out_ptr", "n", "alpha"]
    assert first["args"][3]["value"] == 1000 and second["args"][3]["value"] == 900
    assert first["num_bytes"] == 3 * 1000 * 4 and first["bytes_source"] == "get_num_bytes"
    assert Path(first["standalone_file"]).name == "scale_add.py"
    assert Path(second["standalone_file"]).name == "scale_add__s2.py"


@pytest.mark.slow
def test_heuristics_launch_is_recorded_with_its_final_constexprs(captured):
    text = captured["prog"].read_text()
    evs = by_kernel(captured["events"], "heur_copy")
    assert [e["event"] for e in evs] == ["kernel", "launch"]
    launch = evs[1]
    assert launch["heuristics"] == ["BLOCK"] and launch["winner"]["kwargs"] == {"BLOCK": 256}
    assert launch["defaulted"] == ["num_warps", "num_stages"] and launch["winner"]["num_warps"] == 4
    assert launch["grid"] == [4]  # the callable grid, evaluated on the bound arguments
    assert launch["keyword_args"] == ["out_ptr", "n"]
    assert launch["launch_site"]["line"] == site_line(text, "# SITE_H")


@pytest.mark.slow
def test_autotuned_kernel_is_recorded_once_by_the_autotuner_record(captured):
    evs = by_kernel(captured["events"], "tuned_copy")
    assert [e["event"] for e in evs] == ["kernel", "autotune", "launch"]
    assert {e.get("kind") for e in evs if e["event"] == "kernel"} == {"triton_autotune"}
    assert not any(e.get("kind") == "triton_jit" for e in evs)


CHECK_REPRO = textwrap.dedent('''
    import json, os, sys
    import torch
    path = sys.argv[1]
    ns = {"__name__": "repro", "__file__": path}
    exec(compile(open(path).read(), path, "exec"), ns)
    spec = ns["_TKO_SPEC"]
    here = os.path.dirname(path)
    torch.manual_seed(0)
    args = [ns["_tko_make_arg"](d, here, "cpu") for d in spec["args"]]
    extra = {k: ns["_tko_make_arg"](d, here, "cpu") for k, d in spec["extra_kwargs"].items()}
    call = ns["_tko_jit_call"](spec, spec["configs"][0], args, here, "cpu")
    call()
    named = dict(zip([d["name"] for d in spec["args"]], args))
    print(json.dumps({"spec": {k: spec.get(k) for k in ("kind", "launch", "launch_site", "source_hash")},
                      "names": sorted(named), "extra": sorted(extra)}))
    if spec["kernel"] == "scale_add":
        ref = named["x_ptr"] * named["alpha"] + named["y_ptr"]
        n = named["n"]
        assert torch.allclose(named["out_ptr"][:n], ref[:n]), "scale_add output differs"
''')


@pytest.mark.slow
def test_reproducer_runs_the_captured_launch_and_its_output_matches(captured, tmp_path, run_script):
    cap = captured["cap"]
    check = tmp_path / "check.py"
    check.write_text(CHECK_REPRO)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(check), str(cap / "scale_add.py")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["spec"]["kind"] == "triton_jit" and info["spec"]["launch"] == "jit"
    assert info["spec"]["launch_site"]["function"] == "main"
    # the heuristics kernel: its constexpr comes from the record, its keyword tensors by keyword
    res = run_script("run_captured_kernel.py", cap / "heur_copy.py", "--rep", "1", "--json-out",
                     tmp_path / "run.json", env={"TRITON_INTERPRET": "1"})
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["status"] == "ok" and doc["best"]["config"]["BLOCK"] == 256 and doc["best"]["launch"] == "jit"


@pytest.mark.slow
def test_summarize_reads_a_plain_jit_log(captured, tmp_path, run_script):
    res = run_script("summarize_autotune_log.py", captured["cap"] / "autotune.log", "--json-out",
                     tmp_path / "s.json", "--markdown-out", tmp_path / "s.md")
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    kinds = {k["kernel"]: k["kind"] for k in doc["kernels"]}
    assert kinds == {"scale_add": "triton_jit", "heur_copy": "triton_jit", "tuned_copy": "triton_autotune"}
    scale = next(k for k in doc["kernels"] if k["kernel"] == "scale_add")
    assert scale["winner_from"] == "only_config" and len(scale["launches"]) == 2
    assert scale["standalone_file"].endswith("scale_add.py")
    assert scale["launches"][0]["launch_site"]["line"] == site_line(captured["prog"].read_text(), "# SITE_A")
    assert f"Launch site: `{captured['prog']}:{scale['launches'][0]['launch_site']['line']}`" in \
        (tmp_path / "s.md").read_text()


# ---------------------------------------------------------------------------- profile attribution

NSYS = (" ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n"
        '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)",'
        '"StdDev (ns)","Name"\n'
        '"60.0","3,000,000","3","1,000,000.0","1,000,000.0","900,000","1,100,000","100,000.0","scale_add"\n'
        '"40.0","2,000,000","2","1,000,000.0","1,000,000.0","1,000,000","1,000,000","0.0","my_rmsnorm_fwd"\n')


def _log(path: Path, *names: str) -> Path:
    lines = [json.dumps({"schema": "autotune_event/1", "event": "kernel", "kernel": n, "function": n, "pid": 1,
                         "time": 1.0, "kind": "triton_jit"}) for n in names]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_profile_ranks_kernels_the_capture_recorded_as_triton(tmp_path, run_script):
    # a profile made-up in nsys's kernel-summary layout (tests/test_profile_kernels.py documents it)
    csv = tmp_path / "kern_sum.csv"
    csv.write_text(NSYS)
    log = _log(tmp_path / "autotune.log", "scale_add")
    without = run_script("profile_kernels.py", "--nsys", csv, "--json-out", tmp_path / "a.json", cwd=tmp_path)
    with_log = run_script("profile_kernels.py", "--nsys", csv, "--capture-log", log, "--json-out",
                          tmp_path / "b.json", cwd=tmp_path)
    assert without.returncode == 0 and with_log.returncode == 0, with_log.stderr
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert [k["origin"] for k in a["kernels"]] == ["other", "other"] and a["summary"]["triton_share"] == 0
    assert [k["origin"] for k in b["kernels"]] == ["triton", "other"]
    assert b["summary"]["triton_share"] == pytest.approx(0.6)


def test_profile_refuses_a_missing_capture_log(tmp_path, run_script):
    csv = tmp_path / "kern_sum.csv"
    csv.write_text(NSYS)
    res = run_script("profile_kernels.py", "--nsys", csv, "--capture-log", tmp_path / "nope.log",
                     "--json-out", tmp_path / "a.json", cwd=tmp_path)
    assert res.returncode == 2 and "no such capture log" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_investigation_takes_captured_kernels_from_an_older_profile():
    from tko.chains import pipeline

    profile = {"kernels": [{"name": "scale_add", "origin": "other"}, {"name": "elementwise", "origin": "other"},
                           {"name": "triton_poi_fused_0", "origin": "triton"}]}
    summary = {"kernels": [{"kernel": "scale_add"}, {"kernel": ["not", "a", "name"]}]}
    assert pipeline.top_kernels(profile, summary, 5) == ["scale_add", "triton_poi_fused_0"]


# ---------------------------------------------------------------------------- the wrapper's own logic

tl = __import__("types").SimpleNamespace(constexpr="constexpr")  # the annotation a JIT kernel carries


def fake_kernel(x_ptr, n, BLOCK: tl.constexpr = 8):  # the signature a FakeJIT launches
    pass


class FakeJIT:
    """The parts of Triton's JITFunction the capture touches: ``fn``, ``run(*args, grid, warmup,
    **kwargs)`` that compiles a new specialization through ``_do_compile``, ``kernel[grid]``."""

    def __init__(self, cost: int = 0):
        self.fn, self.cost, self.compiled, self.launches = fake_kernel, cost, set(), 0

    def run(self, *args, grid, warmup, **kwargs):
        spec = tuple(type(a).__name__ for a in args) + tuple(sorted(kwargs.items()))
        if spec not in self.compiled:
            self._do_compile(spec)
        self.launches += sum(range(self.cost))  # a launch's own host work
        return spec

    def _do_compile(self, spec):
        self.compiled.add(spec)

    def __getitem__(self, grid):
        return lambda *a, **k: self.run(*a, grid=grid, warmup=False, **k)


class PlainJIT(FakeJIT):
    run = FakeJIT.run  # the same code, never wrapped


@pytest.fixture
def fake_capture(tmp_path, monkeypatch):
    from tko.patch import capture, jit_capture

    monkeypatch.setattr(capture, "_settings", capture.Settings({"TRITON_CAPTURE_DIR": str(tmp_path / "cap"),
                                                                "TRITON_CAPTURE_STANDALONE": "0"}))
    monkeypatch.setattr(capture, "_patches", [])
    monkeypatch.setattr(capture, "_states", {})
    monkeypatch.setattr(jit_capture, "_watch", 4)
    cls = type("FakeJITWrapped", (FakeJIT,), {"run": FakeJIT.run, "_do_compile": FakeJIT._do_compile})
    # the wrapper reads capture._states through its own reference: wrap after the monkeypatch
    jit_capture._wrap_jit(cls)
    jit_capture._wrap_compile(cls)
    yield cls, tmp_path / "cap" / "autotune.log"
    jit_capture._rearm_classes.discard(cls)


def _launches(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "launch"]


def test_quiet_kernel_bypasses_the_wrapper_and_a_new_compile_rearms_it(fake_capture):
    import torch

    cls, log = fake_capture
    k, t = cls(), torch.zeros(4)
    for _ in range(6):
        k[(1,)](t, 10, BLOCK=8)
    assert len(_launches(log)) == 1 and "run" in k.__dict__  # 4 quiet launches: bypassed
    k[(1,)](t, 20, BLOCK=8)       # same specialization, bypassed: not recorded
    k[(1,)](t, 20, BLOCK=16)      # compiles: re-arms (this launch runs inside the original)
    assert "run" not in k.__dict__
    k[(1,)](t, 20, BLOCK=16)
    launches = _launches(log)
    assert [(e["args"][1]["value"], e["winner"]["kwargs"]["BLOCK"]) for e in launches] == [(10, 8), (20, 16)]
    assert k.launches == 0 and len(k.compiled) == 2


def test_a_bypassed_kernel_launches_through_the_original_run(fake_capture):
    """The steady state costs nothing: a bypassed kernel's ``run`` is the original method bound
    on the instance, the wrapper is not on its path. (Timing it here is not possible: on this
    shared CPU two identical loops differ by 0.5-2.3x block to block; the 1 % budget is measured
    on a GPU: tests/gpu/test_handwritten_gpu.py.)"""
    import torch

    cls, _ = fake_capture
    k = cls()
    for _ in range(5):
        k[(1,)](torch.zeros(4), 10, BLOCK=8)
    bound = k.__dict__["run"]
    assert bound.__self__ is k and bound.__func__ is FakeJIT.run
    assert getattr(cls.run, "_tko_capture", False) and cls.run.__wrapped__ is FakeJIT.run


def test_launch_advice_names_the_site_the_arguments_and_a_heuristic():
    from tko.measure import launch_advice

    spec = {"kind": "triton_jit", "function": "rms", "source_file": "/p/k.py", "source_line": 12,
            "launch_site": {"file": "/p/prog.py", "line": 30, "function": "main"}, "heuristics": ["BLOCK_N"]}
    old = {"BLOCK_N": 1024, "num_warps": 4, "num_stages": 3}
    text = launch_advice.launch_text(spec, dict(old, num_warps=8), old, [64], [64], 1.31)
    assert text == ("change the launch at /p/prog.py:30 to rms[grid](..., num_warps=8) "
                    "(measured 1.31x the captured launch's speed on the captured inputs)")
    text = launch_advice.launch_text(spec, dict(old, BLOCK_N=2048), old, [32], [64], None)
    assert text.startswith("change the @triton.heuristics of rms (/p/k.py:12) to give BLOCK_N=2048")
    assert "the grid must follow: [64] -> [32]" in text
    # a launch whose grid function (recorded at capture) already gives that grid: nothing to change there
    spec["configs"] = [{"flat": old, "grid": [64], "grid_moves": {"BLOCK_N=2048": [32], "BLOCK_N=512": [128]}}]
    text = launch_advice.launch_text(spec, dict(old, BLOCK_N=2048), old, [32], [64], None)
    assert text.endswith("; the launch's grid function follows the block ([64] -> [32]): keep it")


def test_the_reproducer_launches_the_jit_kernel_under_heuristics_and_autotune():
    """A standalone file launches the @triton.jit kernel itself: through a @triton.heuristics (or an
    Autotuner) the swept constexprs would be computed over again and never take effect."""
    from tko.measure import standalone_runner

    class Wrapper:
        def __init__(self, fn, **attrs):
            self.fn, self.arg_names = fn, ["x_ptr", "n", "BLOCK"]
            self.__dict__.update(attrs)

        def run(self, *a, **k):
            pass

    jit = Wrapper(fake_kernel)
    heuristics = Wrapper(jit, values={"BLOCK": lambda args: 64})
    autotuner = Wrapper(heuristics, configs=[])
    assert standalone_runner._tko_jit_function(heuristics) is jit
    assert standalone_runner._tko_jit_function(autotuner) is jit
    assert standalone_runner._tko_jit_function(jit) is jit


TUTORIALS = ROOT / "examples" / "triton_tutorials" / "tutorial_kernels.py"


def _interpreter_records_plain_launches() -> bool:
    """Triton >= 3.6's interpreter launches through ``InterpretedFunction.run`` (captured); earlier ones
    through ``GridExecutor``, and their Autotuner asks for a GPU benchmarker even with one config."""
    from triton.runtime import interpreter

    return hasattr(interpreter.InterpretedFunction, "run")


@pytest.mark.skipif(not _interpreter_records_plain_launches(), reason="Triton < 3.6: the interpreter's plain "
                    "launches are not captured (a GPU's are)")

def test_the_tutorial_classics_are_captured_with_their_launch_sites(tmp_path, run_script, monkeypatch):
    """The Triton tutorials' softmax, layer norm and autotuned matmul (the example checks its own
    outputs against torch): each captured once, with its kind and the line that launches it; each
    reproducer runs under the interpreter."""
    cap = tmp_path / "cap"
    env = dict(os.environ, TRITON_INTERPRET="1", TRITON_CAPTURE_DIR=str(cap))
    proc = subprocess.run([sys.executable, str(SCRIPTS / "autotune_capture_patch.py"), str(TUTORIALS), "--",
                           "--device", "cpu", "--rows", "32", "--cols", "64", "--steps", "1", "--warmup", "1"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = TUTORIALS.read_text()
    events = [json.loads(line) for line in (cap / "autotune.log").read_text().splitlines()]
    launches = {e["kernel"]: e for e in events if e["event"] == "launch"}
    assert sorted(launches) == ["_layer_norm_fwd_fused", "matmul_kernel", "softmax_kernel"]
    sites = {"softmax_kernel": "softmax_kernel[(n_rows,)]", "_layer_norm_fwd_fused": "_layer_norm_fwd_fused[(M,)]",
             "matmul_kernel": "matmul_kernel[grid]"}
    for name, marker in sites.items():
        assert launches[name]["launch_site"]["line"] == site_line(text, marker), name
        assert launches[name]["launch_site"]["file"] == str(TUTORIALS)
    assert launches["matmul_kernel"]["kind"] == "triton_autotune"
    assert launches["softmax_kernel"]["kind"] == "triton_jit"
    assert launches["softmax_kernel"]["winner"]["kwargs"] == {"BLOCK_SIZE": 64}
    assert launches["_layer_norm_fwd_fused"]["winner"]["num_warps"] == 1      # min(max(64 // 256, 1), 8)
    assert not (cap / "capture_errors.log").exists()
    for name in sites:
        res = run_script("run_captured_kernel.py", cap / f"{name}.py", "--rep", "1", "--json-out",
                         tmp_path / f"{name}.json", env={"TRITON_INTERPRET": "1"})
        assert res.returncode == 0, res.stderr[-2000:]
        assert json.loads((tmp_path / f"{name}.json").read_text())["status"] == "ok", name
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    sweep_block_moves_launch_the_programs_grid(cap / "matmul_kernel.py", tmp_path / "sweep")


def sweep_block_moves_launch_the_programs_grid(matmul: Path, work: Path) -> None:
    """The matmul's grid is ``cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)`` over one axis: a block
    move launches the grid the program's own grid function gives (evaluated at capture); the
    recorded grid at a smaller block leaves tiles unwritten, which the output gate catches."""
    import torch  # noqa: F401 (the sweep's worker imports it too)
    from tko.measure import sweep, sweep_plan, sweep_results

    winner = sweep_plan.read_standalone(matmul)[2]["configs"][0]
    flat, grid0, moves = winner["flat"], winner["grid"], winner["grid_moves"]
    bm, bn = flat["BLOCK_SIZE_M"], flat["BLOCK_SIZE_N"]
    assert (bm, bn, grid0) == (32, 32, [2])                                # M=32, N=64
    assert moves == {f"BLOCK_SIZE_M={bm // 2}": [4], f"BLOCK_SIZE_M={bm * 2}": [2],
                     f"BLOCK_SIZE_N={bn // 2}": [4], f"BLOCK_SIZE_N={bn * 2}": [1]}  # BLOCK_SIZE_K: not in the grid
    plan = sweep_plan.build_plan(matmul, work, hip=False)
    by_name = {v.name: v for v in plan.variants}
    assert by_name[f"BLOCK_SIZE_M={bm // 2}"].grid == [4] and by_name[f"BLOCK_SIZE_N={bn * 2}"].grid == [1]
    assert "the program's grid function" in by_name[f"BLOCK_SIZE_M={bm // 2}"].description
    stale = sweep_plan.Variant("recorded_grid", "config", "BLOCK_SIZE_M /2 at the recorded grid",
                               dict(flat, BLOCK_SIZE_M=bm // 2), grid0, plan.kernel_file)
    keep = ("baseline", f"BLOCK_SIZE_M={bm // 2}", f"BLOCK_SIZE_N={bn * 2}")
    plan.variants = [by_name[n] for n in keep] + [stale]
    run = sweep.run_sweep(plan, [None], 1, 1.0, 2.0, work, interpret=True, retime_baseline=False)
    passed = {n: r["passed"] for n, r in run["records"].items()}
    assert passed == {"baseline": True, f"BLOCK_SIZE_M={bm // 2}": True, f"BLOCK_SIZE_N={bn * 2}": True,
                      "recorded_grid": False}
    assert run["records"]["recorded_grid"]["check"]["unwritten_count"] > 0
    payload = sweep_results.assemble(plan, run, devices=[None], workers_per_device=1, warmup_ms=1.0, rep_ms=2.0,
                                     interpret=True, wall_s=1.0, compile_info=None, probe_file=None)
    reasons = {r["name"]: r["reason"] for r in payload["variants"]}
    assert reasons["recorded_grid"].endswith(f"BLOCK_SIZE_M changed but the launch kept the recorded grid {grid0}: the "
                                             "capture recorded no grid for this block (a grid function's grids are "
                                             "recorded as grid_moves; a fixed grid is not); either the grid must "
                                             "follow the block or the kernel needs the block to cover its data "
                                             "(a whole row)")
    assert reasons[f"BLOCK_SIZE_M={bm // 2}"] is None


DTYPE_PROGRAM = textwrap.dedent('''
    import sys
    sys.path.insert(0, {scripts!r})
    import autotune_capture_patch
    import torch, triton, triton.language as tl

    @triton.jit
    def cast_copy(x_ptr, out_ptr, n, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m).to(OUT_DTYPE), mask=m)

    x = torch.randn(100)
    out = torch.empty(100, dtype=torch.float16)
    cast_copy[(1,)](x, out, 100, OUT_DTYPE=tl.float16, BLOCK=128)
    assert torch.equal(out, x.half())
''')


@pytest.mark.skipif(not _interpreter_records_plain_launches(), reason="Triton < 3.6: the interpreter's plain "
                    "launches are not captured (a GPU's are)")
def test_a_dtype_constexpr_is_relaunched_as_a_dtype(tmp_path, run_script):
    """Liger passes tl.bfloat16 as a constexpr: the record holds its repr, the reproducer the dtype."""
    prog = tmp_path / "prog.py"
    prog.write_text(DTYPE_PROGRAM.format(scripts=str(SCRIPTS)))
    env = dict(os.environ, TRITON_INTERPRET="1", TRITON_CAPTURE_DIR=str(tmp_path / "cap"))
    proc = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    launch = next(json.loads(line) for line in (tmp_path / "cap" / "autotune.log").read_text().splitlines()
                  if json.loads(line)["event"] == "launch")
    assert launch["winner"]["kwargs"]["OUT_DTYPE"] == "triton.language.float16"
    res = run_script("run_captured_kernel.py", tmp_path / "cap" / "cast_copy.py", "--rep", "1", "--json-out",
                     tmp_path / "run.json", env={"TRITON_INTERPRET": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "ok"


def test_grid_moves_come_from_the_grid_function_and_only_for_blocks_it_reads():
    from tko.patch.capture_records import grid_moves, launch_grid

    meta = {"n": 1000, "BLOCK": 128, "BLOCK_K": 32, "num_warps": 4}
    flat = {"BLOCK": 128, "BLOCK_K": 32, "num_warps": 4}
    assert launch_grid(lambda m: (-(-m["n"] // m["BLOCK"]), 3), meta) == [8, 3]
    assert grid_moves(lambda m: (-(-m["n"] // m["BLOCK"]),), meta, flat) == {"BLOCK=256": [4], "BLOCK=64": [16]}
    # BLOCK taken from a closure: the grid does not follow the move, so the sweep's own rules decide
    assert grid_moves(lambda m: (-(-1000 // 128),), meta, flat) is None
    assert grid_moves((8,), meta, flat) is None                              # a fixed grid
    assert grid_moves(lambda m: 1 // 0, meta, flat) is None                  # a grid function that raises
    only_small = lambda m: (8 if m["BLOCK"] > 128 else -(-m["n"] // m["BLOCK"]),)  # noqa: E731
    assert grid_moves(only_small, meta, flat) == {"BLOCK=256": [8], "BLOCK=64": [16]}


ROWPKG_PROGRAM = ROOT / "tests" / "fixtures" / "repros" / "rowpkg_program.py"


@pytest.mark.parametrize("configs", ["1", "2"])
def test_a_packaged_kernel_autotuned_over_heuristics_is_captured_and_reruns(tmp_path, configs):
    """tests/fixtures/kernels/rowpkg, laid out as kernel libraries are (attorch's layers: relative
    imports, a module named ``types``, @triton.autotune over @triton.heuristics): the launch's grid
    follows the heuristic's block, the standalone file is written with the heuristic's constexpr in
    its configs and reruns in the interpreter. Two configs need a benchmarker, which the interpreter
    lacks without a GPU driver: the host clock stands in, said in the record (Triton >= 3.4)."""
    if not _interpreter_records_plain_launches():
        pytest.skip("Triton < 3.6: the interpreter launches through GridExecutor and its Autotuner asks "
                    "for a GPU benchmarker even with one config (a GPU's launches are captured)")
    cap = tmp_path / "cap"
    env = dict(os.environ, TRITON_INTERPRET="1", TRITON_CAPTURE_DIR=str(cap), ROWPKG_CONFIGS=configs)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, str(SCRIPTS / "autotune_capture_patch.py"), str(ROWPKG_PROGRAM)],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
    assert not (cap / "capture_errors.log").exists(), (cap / "capture_errors.log").read_text()
    events = [json.loads(line) for line in (cap / "autotune.log").read_text().splitlines()]
    (launch,) = [e for e in events if e["event"] == "launch"]
    cols = launch["winner"]["kwargs"]["BLOCK_COLS"]
    assert launch["grid"] == [3, -(-100 // cols)]            # rows: cdiv(40, BLOCK_ROWS=16) from the heuristic
    tuned = [e for e in events if e["event"] == "autotune"]
    if configs == "2":
        assert tuned[0]["benchmarker"] == "host clock in Triton's interpreter (no GPU driver)"
    else:
        assert tuned == []
    standalone = Path(launch["standalone_file"])
    text = standalone.read_text()
    assert "__package__ = 'rowpkg'" in text and "_tko_sys.path.insert(0, " + repr(str(ROWPKG_PROGRAM.parents[1] / "kernels")) in text
    from tko.read import kernel_source

    spec = kernel_source.read_kernel_file(standalone)[1]["standalone_spec"]
    assert spec["heuristics"] == ["BLOCK_ROWS"] and spec["configs"][0]["flat"]["BLOCK_ROWS"] == 16
    # the sweep's moves of the heuristic's block launch the program's grid for it too
    assert spec["configs"][0]["grid_moves"]["BLOCK_ROWS=8"] == [5, -(-100 // cols)]
    assert spec["configs"][0]["grid_moves"]["BLOCK_ROWS=32"] == [2, -(-100 // cols)]
    run = subprocess.run([sys.executable, str(SCRIPTS / "run_captured_kernel.py"), str(standalone), "--rep", "1",
                          "--json-out", str(tmp_path / "run.json")], env=dict(env, ROWPKG_CONFIGS="2"),
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "ok"
    if configs == "1":  # the probe reads the file's own launch record: the keyword flag NEGATE included
        probe = subprocess.run([sys.executable, str(SCRIPTS / "probe_compile.py"), str(standalone), "--arch", "gfx942",
                                "--variants", "baseline", "--launch-event", str(cap / "autotune.log"),
                                "--json-out", str(tmp_path / "probe.json")],
                               env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert probe.returncode == 0, probe.stdout[-2000:] + probe.stderr[-2000:]
        assert "the captured file's own launch record is used" in probe.stdout
