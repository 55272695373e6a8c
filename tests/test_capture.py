"""The capture path: real H200 capture logs, and the patch itself on a CPU.

CPU tests of the patch run real Triton code under ``TRITON_INTERPRET=1``: a hand-written
``@triton.autotune`` kernel, and a real Inductor kernel module captured on the H200
(``tests/fixtures/inductor_h200``) loaded into a real ``CachingAutotuner``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import loadable_by_this_torch
from tko.base.contracts import contract_problems, documented_fields

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
CAP = Path(__file__).resolve().parent / "fixtures" / "capture_h200"
EXAMPLES = sorted(p.name for p in CAP.iterdir() if p.is_dir())
# Header fields of whole-file artifacts that JSON Lines events do not carry.
_LINE_EXEMPT = ("missing header field 'tool'", "missing header field 'created'",
                "missing header field 'versions'")


def read_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def event_problems(ev: dict) -> list[str]:
    return [p for p in contract_problems(ev) if p not in _LINE_EXEMPT]


def check_config(cfg: dict) -> None:
    assert set(cfg) == {"kwargs", "num_warps", "num_stages", "extras"}, cfg
    assert isinstance(cfg["num_warps"], int) and isinstance(cfg["num_stages"], int)
    assert cfg["kwargs"] and all(isinstance(v, int) for v in cfg["kwargs"].values()), cfg


def check_event(ev: dict) -> None:
    assert event_problems(ev) == [], ev
    assert ev["schema"] == "autotune_event/1"
    assert isinstance(ev["pid"], int) and isinstance(ev["time"], float) and ev["kernel"]
    if ev["event"] == "kernel":
        assert ev["configs"], ev
        for cfg in ev["configs"]:
            check_config(cfg)
        assert ev["kind"] in ("pointwise", "reduction", "persistent_reduction", "triton_autotune", "user")
    elif ev["event"] in ("autotune", "coordesc"):
        assert ev["timings"] and ev["statistic"] in ("min", "median")
        timed = [t for t in ev["timings"] if t["ms"] is not None]
        for t in ev["timings"]:
            check_config(t["config"])
        fastest = min(timed, key=lambda t: t["ms"])
        assert ev["winner"] == fastest["config"]
        assert all(t["ms"] > 0 and t["gb_per_s"] > 0 for t in timed)
    elif ev["event"] == "launch":
        assert ev["num_bytes"] > 0 and ev["bytes_source"] in ("kernel_num_gb", "get_num_bytes")
        tensors = [a for a in ev["args"] if a["kind"] == "tensor"]
        assert tensors
        for a in tensors:
            assert len(a["shape"]) == len(a["stride"]) and a["storage_numel"] >= 1
        assert len(ev["grid"]) in (1, 2, 3) and all(g >= 1 for g in ev["grid"])
        check_config(ev["winner"])
        assert ev["device"]["name"] == "NVIDIA H200" and ev["device"]["arch"] == "sm_90"
        assert ev["standalone_file"].endswith(".py")


@pytest.mark.parametrize("example", EXAMPLES)
def test_h200_capture_log_is_well_formed(example):
    events = read_events(CAP / example / "autotune.log")
    assert events
    for ev in events:
        check_event(ev)
    by_kernel: dict[str, list[dict]] = {}
    for ev in events:
        by_kernel.setdefault(ev["kernel"], []).append(ev)
    for name, evs in by_kernel.items():
        kinds = [e["event"] for e in evs]
        assert kinds[0] == "kernel" and "launch" in kinds, (name, kinds)
        declared = evs[0]["configs"]
        if len(declared) > 1:  # several configs: the autotuner timed every one of them
            tune = next(e for e in evs if e["event"] == "autotune")
            assert len(tune["timings"]) >= len(declared)
            assert all(t["ms"] is not None for t in tune["timings"])
        launch = next(e for e in evs if e["event"] == "launch")
        assert launch["winner"] in declared


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_profiled_triton_kernel_is_in_the_log(example):
    """The profiler of the same run saw no Triton kernel that the capture missed."""
    events = read_events(CAP / example / "autotune.log")
    logged = {e.get("function") or e["kernel"] for e in events if e["event"] == "kernel"}
    profiled = json.loads((CAP / example / "with_capture.json").read_text())["kernels"]
    triton_names = {n for n in profiled if n.startswith("triton_") or n in logged}
    assert logged
    if example == "tiny_launches":  # the fixture keeps 4 of its 64 kernels
        assert len(triton_names) == 64 and logged <= triton_names
    else:
        assert triton_names == logged


def test_h200_run_summary_shows_full_coverage():
    results = json.loads((CAP / "results_run1.json").read_text())
    assert results["versions"]["device"] == "NVIDIA H200"
    for name, r in results["examples"].items():
        assert r["rc_capture"] == 0 and r["bad_lines"] == 0 and r["capture_errors"] == []
        assert r["missing_from_log"] == [] and r["multi_config_untimed"] == []
        assert r["kernels_logged"] >= r["triton_kernels_profiled"] >= 1


def test_dynamic_shapes_records_one_launch_per_signature():
    events = read_events(CAP / "dynamic_shapes" / "autotune.log")
    launches = [e for e in events if e["event"] == "launch"]
    shapes = {tuple(a["shape"]) for e in launches for a in e["args"] if a["name"] == "in_ptr0"}
    assert len(launches) == len(shapes) == 4  # seq 128, 257, 512, 1000
    assert sorted(Path(e["standalone_file"]).name for e in launches)[0].endswith("_0.py")


def test_user_autotune_kernel_log_has_quantiles():
    events = read_events(CAP / "user_autotune_kernel" / "autotune.log")
    tune = next(e for e in events if e["event"] == "autotune")
    assert tune["statistic"] == "median" and len(tune["timings"]) == 3
    for t in tune["timings"]:
        med, p20, p80 = t["quantiles_ms"]
        assert t["ms"] == med and p20 <= med <= p80


@pytest.mark.parametrize("path", sorted(CAP.glob("*/*.py")), ids=lambda p: p.name)
def test_standalone_files_are_source_plus_runner(path):
    text = path.read_text()
    compile(text, str(path), "exec")
    assert "@triton.jit" in text and "def _tko_main(" in text
    assert text.count('if __name__ == "__main__":') == 1  # the runner's; a user module's is disabled
    spec_line = next(line for line in text.splitlines() if line.startswith("_TKO_SPEC = "))
    import ast

    spec = json.loads(ast.literal_eval(spec_line.split(".loads(", 1)[1][:-1]))
    assert spec["configs"] and all(c["grid"] for c in spec["configs"])
    assert spec["args"] and spec["num_bytes"] > 0
    assert spec["launch"] in ("inductor", "jit")


# ---------------------------------------------------------------------------
# the patch on a CPU (TRITON_INTERPRET=1)

USER_PROGRAM = textwrap.dedent('''
    import os, sys, time
    sys.path.insert(0, {scripts!r})
    if os.environ.get("WITH_CAPTURE") == "1":
        import autotune_capture_patch
        if os.environ.get("BREAK_CAPTURE") == "1":
            from tko.patch import capture
            def broken(*a, **k):
                raise RuntimeError("capture broke")
            capture.emit = broken
            capture.describe_arg = broken   # the name the capture calls
    import torch, triton, triton.language as tl

    def bench(fn, quantiles=None, **kw):
        ts = []
        for _ in range(3):
            t = time.perf_counter(); fn(); ts.append((time.perf_counter() - t) * 1e3)
        ts.sort()
        return [ts[1], ts[0], ts[2]] if quantiles else ts[1]

    @triton.autotune(configs=[triton.Config({{"BLOCK": 64}}, num_warps=2),
                              triton.Config({{"BLOCK": 128}}, num_warps=4)], key=["n"], do_bench=bench)
    @triton.jit
    def gather_scale(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        i = tl.load(idx_ptr + offs, mask=m)
        tl.store(out_ptr + offs, tl.load(x_ptr + i, mask=m) * 2, mask=m)

    torch.manual_seed(0)
    x = torch.randn(1000); idx = torch.randint(0, 1000, (300,)); out = torch.empty(300)
    for _ in range(3):
        gather_scale[lambda meta: (triton.cdiv(300, meta["BLOCK"]),)](x, idx, out, 300)
    torch.save(out, sys.argv[1])

    if __name__ == "__main__":
        print("the program's own entry point ran")
''')


def _run_user_program(tmp_path, capture: bool, broken: bool = False):
    prog = tmp_path / "prog.py"
    prog.write_text(USER_PROGRAM.format(scripts=str(SCRIPTS)))
    env = dict(os.environ, TRITON_INTERPRET="1", TRITON_CAPTURE_DIR=str(tmp_path / "cap"),
               WITH_CAPTURE="1" if capture else "0", BREAK_CAPTURE="1" if broken else "0")
    out = tmp_path / f"out_{capture}_{broken}.pt"
    proc = subprocess.run([sys.executable, str(prog), str(out)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import torch

    return torch.load(out), proc


@pytest.fixture(scope="module")
def plain_user_output(tmp_path_factory):
    out, _ = _run_user_program(tmp_path_factory.mktemp("plain"), capture=False)
    return out


@pytest.mark.slow
def test_user_autotune_capture_and_standalone_run(tmp_path, run_script, plain_user_output):
    import torch

    plain = plain_user_output
    captured, _ = _run_user_program(tmp_path, capture=True)
    assert torch.equal(plain, captured)  # the patch does not change results
    cap = tmp_path / "cap"
    assert not (cap / "capture_errors.log").exists()
    events = read_events(cap / "autotune.log")
    assert [e["event"] for e in events] == ["kernel", "autotune", "launch"]  # 3 calls, 1 signature
    for ev in events:
        assert event_problems(ev) == []
    tune, launch = events[1], events[2]
    assert {json.dumps(t["config"]["kwargs"]) for t in tune["timings"]} == {'{"BLOCK": 64}', '{"BLOCK": 128}'}
    assert all(t["ms"] > 0 and len(t["quantiles_ms"]) == 3 for t in tune["timings"])
    assert tune["benchmarker"] == "custom do_bench"
    idx_arg = launch["args"][1]
    assert idx_arg["dtype"] == "int64" and idx_arg["saved"] == "gather_scale.inputs/arg1.pt"
    assert launch["saved_bytes"] == 300 * 8
    assert launch["num_bytes"] == 1000 * 4 + 300 * 8 + 300 * 4
    assert launch["grid"] == [300 // launch["winner"]["kwargs"]["BLOCK"] + 1]
    standalone = cap / "gather_scale.py"
    assert launch["standalone_file"] == str(standalone)
    # the standalone runs with the saved indices, all configs, without the program's main
    proc = run_script("run_captured_kernel.py", standalone, "--all-configs", "--rep", "1",
                      "--json-out", tmp_path / "run.json", env={"TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "run.json").read_text())
    assert contract_problems(doc) == []
    assert doc["status"] == "ok" and len(doc["results"]) == 2
    assert doc["best"]["config"]["BLOCK"] == launch["winner"]["kwargs"]["BLOCK"]
    assert doc["best"]["launch"] == "jit" and doc["best"]["timer"] == "perf_counter"
    assert "entry point ran" not in proc.stdout


@pytest.mark.slow
def test_capture_errors_never_reach_the_program(tmp_path, plain_user_output):
    import torch

    plain = plain_user_output
    broken, proc = _run_user_program(tmp_path, capture=True, broken=True)
    assert torch.equal(plain, broken)
    assert "capture broke" not in proc.stderr
    errors = (tmp_path / "cap" / "capture_errors.log").read_text().splitlines()
    assert errors and all("RuntimeError: capture broke" in line for line in errors)
    # a kernel whose capture failed is left alone afterwards: one error, not one per launch
    assert len(errors) == 1


INDUCTOR_PROGRAM = textwrap.dedent('''
    import importlib.util, os, sys
    sys.path.insert(0, {scripts!r})
    import autotune_capture_patch
    from torch._inductor.runtime import triton_helpers
    triton_helpers.set_driver_to_gpu = lambda: None  # no GPU backend here; the interpreter runs it
    import torch
    spec = importlib.util.spec_from_file_location("kernel_module", {module!r})
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kernel = mod.{name}
    a = torch.randn(17, 31); b = torch.randn(17, 31); out = torch.empty(17, 31)
    for _ in range(4):
        kernel.run(a, b, out, 527, stream=0)
    ref = a - 0.001 * torch.sign(b) * b.abs().sqrt()
    assert torch.allclose(out, ref, atol=1e-6), (out - ref).abs().max()
''')


def _tiny_kernel_module() -> Path:
    root = ROOT / "tests" / "fixtures" / "inductor_h200" / "tiny_launches"
    for path in root.rglob("*.py"):
        text = path.read_text()
        if "def triton_poi_fused_abs_mul_sign_sqrt_sub_0(" in text and "async_compile" not in text:
            return path
    raise AssertionError(f"tiny_launches kernel module not in the committed fixtures under {root}")


@pytest.mark.slow
def test_inductor_kernel_capture_on_cpu(tmp_path):
    module = loadable_by_this_torch(_tiny_kernel_module(), tmp_path / "module")
    prog = tmp_path / "prog.py"
    prog.write_text(INDUCTOR_PROGRAM.format(scripts=str(SCRIPTS), module=str(module),
                                            name="triton_poi_fused_abs_mul_sign_sqrt_sub_0"))
    env = dict(os.environ, TRITON_INTERPRET="1", TRITON_CAPTURE_DIR=str(tmp_path / "cap"))
    proc = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cap = tmp_path / "cap"
    assert not (cap / "capture_errors.log").exists()
    events = read_events(cap / "autotune.log")
    assert [e["event"] for e in events] == ["kernel", "launch"]  # 4 launches, one signature
    kernel, launch = events
    for ev in events:
        assert event_problems(ev) == []
    assert kernel["kind"] == "pointwise" and kernel["source_file"] == str(module)
    assert kernel["size_hints"] == {"x": 1024}
    assert kernel["triton_meta"]["signature"]["in_ptr0"] == "*fp32"
    assert kernel["triton_meta"]["hints"]["in_ptr0"] == [["tt.divisibility", 16]]
    assert kernel["inductor_meta"]["grid_type"] == "Grid1D"
    assert [a["name"] for a in launch["args"]] == ["in_ptr0", "in_ptr1", "out_ptr0", "xnumel"]
    assert launch["args"][3] == {"name": "xnumel", "kind": "scalar", "value": 527, "dtype": "int"}
    assert launch["num_bytes"] == 3 * 527 * 4 and launch["bytes_source"] == "get_num_bytes"
    assert launch["grid"] == [-(-527 // launch["winner"]["kwargs"]["XBLOCK"]), 1, 1]
    text = Path(launch["standalone_file"]).read_text()
    assert text.startswith(module.read_text().rstrip("\n"))


def test_log_writer_is_process_safe(tmp_path):
    """N processes appending M events each to one log give N*M intact lines."""
    n_proc, n_events = 6, 150
    code = textwrap.dedent(f'''
        import os, sys
        sys.path.insert(0, {str(SCRIPTS)!r})
        from tko.patch import capture  # emit() alone: no torch import, so the processes overlap
        pad = "x" * 2000  # lines of a few KB, like real launch events
        for i in range(int(sys.argv[1])):
            capture.emit("note", "k%d" % os.getpid(), message=pad, seq=i)
    ''')
    env = dict(os.environ, TRITON_CAPTURE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n_events)], env=env) for _ in range(n_proc)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    lines = (tmp_path / "autotune.log").read_text().splitlines()
    assert len(lines) == n_proc * n_events
    events = [json.loads(line) for line in lines]
    per_pid: dict[int, list[int]] = {}
    for ev in events:
        per_pid.setdefault(ev["pid"], []).append(ev["seq"])
    assert len(per_pid) == n_proc and all(v == list(range(n_events)) for v in per_pid.values())


@pytest.mark.slow
def test_force_retune_disables_inductor_caches(tmp_path):
    code = textwrap.dedent(f'''
        import os, sys
        sys.path.insert(0, {str(SCRIPTS)!r})
        import autotune_capture_patch
        from torch._inductor import config
        print(os.environ.get("TORCHINDUCTOR_FORCE_DISABLE_CACHES"), bool(config.force_disable_caches))
    ''')
    env = dict(os.environ, TRITON_CAPTURE_DIR=str(tmp_path), TRITON_CAPTURE_FORCE_RETUNE="1")
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    env.pop("TORCH_COMPILE_FORCE_DISABLE_CACHES", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.stdout.split() == ["1", "True"], proc.stderr


def test_contract_documents_every_event_field():
    spec = documented_fields()["autotune_event/1"]
    for example in EXAMPLES:
        for ev in read_events(CAP / example / "autotune.log"):
            assert set(ev) - {"versions"} <= set(spec)


def test_patch_script_help_and_bad_program(run_script, tmp_path):
    proc = run_script("autotune_capture_patch.py", "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "TRITON_CAPTURE_DIR" not in proc.stderr
    proc = run_script("autotune_capture_patch.py", "nope.py", cwd=tmp_path)
    assert proc.returncode == 2 and "no such program" in proc.stderr


def test_hot_path_records_each_signature_once(tmp_path, monkeypatch):
    """After a kernel's first launch per signature the wrapper only looks the kernel up."""
    from tko.patch import capture

    monkeypatch.setattr(capture, "_settings", capture.Settings({"TRITON_CAPTURE_DIR": str(tmp_path)}))
    monkeypatch.setattr(capture, "_patches", [])

    FakeAutotuner, _original = _fake_inductor_class(capture, None, {"in_ptr0": "*fp32", "xnumel": "i32"})
    kernel = FakeAutotuner()
    seen = []
    real_snapshot = capture._snapshot_args
    monkeypatch.setattr(capture, "_snapshot_args", lambda *a: seen.append(a[2]) or real_snapshot(*a))
    for n in [1000] * 50 + [2000] * 50 + [1000] * 10:
        assert kernel.run(None, n, stream=0) == n  # the original's result, unchanged
    assert kernel.calls == 110 and [a[1] for a in seen] == [1000, 2000]
    events = read_events(tmp_path / "autotune.log")
    assert [e["event"] for e in events] == ["kernel", "launch", "launch"]
    assert [e["grid"] for e in events[1:]] == [[8, 1, 1], [16, 1, 1]]
    capture.set_active(False)
    assert FakeAutotuner.run.__name__ == "run" and not hasattr(FakeAutotuner.run, "_tko_capture")


def test_same_kernel_name_from_two_modules_gets_two_files(monkeypatch):
    from tko.patch import capture

    monkeypatch.setattr(capture, "_stem_owners", {})
    first = capture.unique_stem("triton_poi_fused_add_0", "/cache/ab/cab.py")
    again = capture.unique_stem("triton_poi_fused_add_0", "/cache/ab/cab.py")
    other = capture.unique_stem("triton_poi_fused_add_0", "/cache/cd/ccd.py")
    assert first == again == "triton_poi_fused_add_0"
    assert other.startswith("triton_poi_fused_add_0__") and other != first


def _fake_inductor_class(capture, src: str | None, signature: dict):
    class Config:
        def __init__(self, block):
            self.kwargs, self.num_warps, self.num_stages = {"XBLOCK": block}, 4, 1

    class Launcher:
        def __init__(self, block):
            self.config = Config(block)

    class Fn:
        __name__ = "triton_poi_fake_0"

    class FakeAutotuner:
        def __init__(self):
            self.inductor_meta = {"kernel_name": "triton_poi_fake_0"}
            self.triton_meta = {"signature": signature}
            self.launchers = [Launcher(128)]
            self.fn = Fn()
            self.fn.src = src
            self.calls = 0

        def run(self, *args, stream=None, **kwargs):
            self.calls += 1
            return args[-1]

        def _interpret_args_grid(self, args, cfg):
            return args, (-(-args[-1] // cfg.kwargs["XBLOCK"]), 1, 1)

    original = FakeAutotuner.run
    capture._wrap_inductor(FakeAutotuner)
    return FakeAutotuner, original


STATIC_SRC = "def triton_poi_fake_0(in_ptr0, xnumel, XBLOCK : tl.constexpr):\n    xnumel = 1024\n    pass\n"
DYNAMIC_SRC = "def triton_poi_fake_0(in_ptr0, xnumel, XBLOCK : tl.constexpr):\n    xoffset = 0\n"


@pytest.mark.parametrize("src,static", [(STATIC_SRC, True), (DYNAMIC_SRC, False), (None, False)])
def test_a_kernel_with_nothing_left_to_record_leaves_the_capture_path(tmp_path, monkeypatch, src, static):
    """A static-shape Inductor kernel (its xnumel re-bound to a literal) has one signature: after
    its first launch its run is the original method again. Others keep the wrapper until the
    signature cap (here 2) is reached."""
    from tko.patch import capture

    monkeypatch.setattr(capture, "_settings", capture.Settings({"TRITON_CAPTURE_DIR": str(tmp_path),
                                                                "TRITON_CAPTURE_MAX_SIGNATURES": "2"}))
    monkeypatch.setattr(capture, "_patches", [])
    cls, original = _fake_inductor_class(capture, src, {"in_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"})
    kernel = cls()
    assert kernel.run(None, 1024, stream=0) == 1024
    assert ("run" in vars(kernel)) == static
    if static:
        assert vars(kernel)["run"].__func__ is original
    for n in (1024, 2048, 4096, 1024):
        assert kernel.run(None, n, stream=0) == n
    assert kernel.calls == 5 and "run" in vars(kernel)        # bypassed by now in every case
    launches = [e for e in read_events(tmp_path / "autotune.log") if e["event"] == "launch"]
    assert len(launches) == (1 if static else 2)


@pytest.mark.parametrize("example,kernel,static", [
    ("pointwise_chain", "triton_poi_fused_add_gelu_mul_0", True),
    ("dynamic_shapes", "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0", False),
    ("mlp_train_step", "triton_per_fused_native_layer_norm_0", True),
])
def test_static_shape_check_on_real_inductor_kernels(example, kernel, static):
    import ast
    import re as _re
    from types import SimpleNamespace

    from tko.patch.capture import static_inductor_kernel

    text = (CAP / example / f"{kernel}.py").read_text()
    signature = ast.literal_eval(_re.search(r"'signature': (\{[^}]*\})", text).group(1))
    body = text[text.index(f"def {kernel}("):]
    obj = SimpleNamespace(triton_meta={"signature": signature}, fn=SimpleNamespace(src=body),
                          inductor_meta={"kernel_name": kernel})
    assert static_inductor_kernel(obj) is static


def test_a_subclass_that_overrides_run_keeps_it(tmp_path, monkeypatch):
    # Inductor's DebugAutotuner overrides run and calls CachingAutotuner.run: binding the base
    # class's run on such an instance would skip the subclass's own work
    from tko.patch import capture

    monkeypatch.setattr(capture, "_settings", capture.Settings({"TRITON_CAPTURE_DIR": str(tmp_path)}))
    monkeypatch.setattr(capture, "_patches", [])
    cls, _original = _fake_inductor_class(capture, STATIC_SRC, {"in_ptr0": "*fp32", "xnumel": "i32"})

    class DebugFake(cls):
        debug_calls = 0

        def run(self, *args, **kwargs):
            self.debug_calls += 1
            return super().run(*args, **kwargs)

    kernel = DebugFake()
    for _ in range(3):
        assert kernel.run(None, 1024, stream=0) == 1024
    assert "run" not in vars(kernel) and kernel.debug_calls == 3 and kernel.calls == 3
    assert [e["event"] for e in read_events(tmp_path / "autotune.log")] == ["kernel", "launch"]
