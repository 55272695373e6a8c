"""Speed-of-light classes on hand-given numbers, and the script offline on real captures."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tko.base import contracts
from tko.measure import speed_of_light as sol

ROOT = Path(__file__).resolve().parents[1]
SOL = ROOT / "tests" / "fixtures" / "sol_h200"
GELU = ROOT / "examples" / "recorded_h200" / "pointwise_chain" / "autotune_kernels" / \
    "triton_poi_fused_add_gelu_mul_0.py"
TH = sol.thresholds_from_rules()
PEAK = 4246.1
# long-row softmax, fp16 4096 x 32768: 512 MiB one pass, 768 MiB as written (two passes over the input)
ONE_PASS = 2 * 4096 * 32768 * 2
MODEL_2PASS = {"unique_bytes": ONE_PASS, "one_pass_bytes": ONE_PASS, "multi_pass_bytes": ONE_PASS * 3 // 2,
               "max_passes": 2, "inductor_bytes": ONE_PASS}
MODEL_1PASS = {"unique_bytes": 201334784, "one_pass_bytes": 201334784, "multi_pass_bytes": 201334784,
               "max_passes": 1, "inductor_bytes": 201334784}


def _numbers(kernel_ms, twin_ms, model):
    return sol.measured_numbers(kernel_ms, twin_ms, sol.floors(model, PEAK), model)


def test_thresholds_come_from_the_decision_rules():
    assert set(TH) == set(sol.THRESHOLD_NAMES)
    assert TH["sol_at_floor_ratio"] > 1 and 0 < TH["sol_above_peak_noise"] < 1


def test_at_floor():
    floor = MODEL_1PASS["unique_bytes"] / (PEAK * 1e9) * 1e3
    n = _numbers(floor * 1.04, floor * 1.02, MODEL_1PASS)
    c = sol.classify(n, TH, twin_valid=True)
    assert c["class"] == "at_floor"
    assert c["numbers"]["kernel_pct_of_copy"] == pytest.approx(100 / 1.04)
    assert "1.04x the copy floor" in c["says"]


def test_arithmetic_bound_names_the_costly_ops():
    floor = MODEL_1PASS["unique_bytes"] / (PEAK * 1e9) * 1e3
    n = _numbers(floor * 2.0, floor * 1.05, MODEL_1PASS)
    costly = {"source": {"libdevice.erf": 1, "*": 3}, "isa": [
        {"arch": "gfx942", "kernel_valu": 142, "kernel_transcendental": 4, "twin_valu": 15, "twin_transcendental": 0}]}
    c = sol.classify(n, TH, twin_valid=True, costly=costly)
    assert c["class"] == "arithmetic_bound"
    assert c["says"].index("libdevice.erf x1") < c["says"].index("* x3")
    assert "142 VALU" in c["says"]
    assert c["remedy"]["at_most_x"] == pytest.approx(2.0 / 1.05)


def test_access_pattern_bound_multi_pass_bound_from_the_bytes():
    floor = ONE_PASS / (PEAK * 1e9) * 1e3
    n = _numbers(floor * 2.1, floor * 2.0, MODEL_2PASS)   # the measured softmax: about 48 % of copy
    facts = {"multi_pass": True, "passes": {"in_ptr0": 2}, "programs": 4096, "compute_units": 132}
    c = sol.classify(n, TH, twin_valid=True, facts=facts)
    assert c["class"] == "access_pattern_bound"
    cause = c["causes"][0]
    assert cause["cause"] == "multi_pass" and cause["remedy"] == "one pass instead of 2"
    assert cause["at_most_x"] == pytest.approx(1.5)        # bytes bound below twin / floor = 2.0
    assert "one pass instead of 2: at most 1.50x" in c["says"]


def test_access_pattern_bound_small_grid_transposed_and_atomics():
    floor = MODEL_1PASS["unique_bytes"] / (PEAK * 1e9) * 1e3
    n = _numbers(floor * 3.0, floor * 2.9, MODEL_1PASS)
    facts = {"strided_args": ["in_ptr1"], "atomics": ["atomic_add"], "scatter": ["out_ptr0"],
             "programs": 66, "compute_units": 132}
    c = sol.classify(n, TH, twin_valid=True, facts=facts)
    causes = {x["cause"]: x for x in c["causes"]}
    assert c["class"] == "access_pattern_bound"
    assert set(causes) == {"strided", "scatter", "atomics", "small_grid"}
    assert causes["small_grid"]["at_most_x"] == pytest.approx(132 / 66)   # under twin / floor (2.9)
    assert causes["strided"]["at_most_x"] == pytest.approx(2.9)


def test_kernel_no_slower_than_its_twin_is_access_bound():
    floor = MODEL_1PASS["unique_bytes"] / (PEAK * 1e9) * 1e3
    c = sol.classify(_numbers(floor * 1.3, floor * 1.24, MODEL_1PASS), TH, twin_valid=True, facts={})
    assert c["class"] == "access_pattern_bound" and c["causes"][0]["cause"] == "unknown"


@pytest.mark.parametrize("kernel_ms,twin_ms,valid,peak,above,missing", [
    (None, None, True, PEAK, False, "kernel_ms"),          # offline
    (0.2, None, True, PEAK, False, "twin_ms"),             # twin not timed
    (0.2, 0.1, False, PEAK, False, "twin_ms"),             # twin invalid: never used
    (0.2, 0.1, True, None, False, "copy_floor_ms"),        # no peak
    (0.01, 0.01, True, PEAK, True, "valid_floor"),         # faster than physics
])
def test_unmeasured(kernel_ms, twin_ms, valid, peak, above, missing):
    model = MODEL_1PASS
    n = sol.measured_numbers(kernel_ms, twin_ms, sol.floors(model, peak), model)
    c = sol.classify(n, TH, twin_valid=valid, above_peak=above)
    assert c["class"] == "unmeasured"
    assert missing in c["missing"]
    if kernel_ms is None:
        assert c["gpu_run_adds"] and "GPU run would add" in c["says"]
    if above:
        assert "L2-resident or over-counted" in c["says"]


def test_pick_ms_prefers_the_flushed_profiler_time():
    run = {"status": "ok", "results": [
        {"ok": True, "best": True, "timer": "triton.testing.do_bench", "ms": 0.30},
        {"ok": True, "best": True, "timer": "torch.profiler.l2_flushed", "ms": 0.27}]}
    assert sol.pick_ms(run) == (0.27, "torch.profiler.l2_flushed")
    assert sol.pick_ms({"status": "failed", "results": []}) == (None, None)


def test_script_offline_on_a_real_capture(tmp_path, run_script):
    out = tmp_path / "sol.json"
    md = tmp_path / "sol.md"
    proc = run_script("speed_of_light.py", GELU, "--offline", "--arch", "gfx942", "--peak-gbps", PEAK,
                      "--json-out", out, "--markdown-out", md)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "speed_of_light/1"
    assert contracts.contract_problems(doc) == []
    assert doc["offline"] and doc["classification"]["class"] == "unmeasured"
    assert doc["validity"]["valid"] and doc["twin"]["replaced"]["libdevice.tanh"] == 1
    assert doc["floors"]["copy_floor_ms"] == pytest.approx(201334784 / (PEAK * 1e9) * 1e3)
    twin = Path(doc["twin_file"])
    assert twin.is_file() and "libdevice.tanh" not in twin.read_text().split("def triton_poi", 1)[1].split("# ----")[0]
    text = md.read_text()
    svg = text[text.index("<svg"):text.index("</svg>") + 6]
    root = ET.fromstring(svg)
    assert [r.get("data-label") for r in root.iter("{http://www.w3.org/2000/svg}rect")] == ["copy floor"]
    assert "GPU run would add" in text


@pytest.mark.slow
def test_script_offline_softmax_reports_the_census_difference(tmp_path, run_script):
    kernel = next((SOL / "softmax_long_rows" / "autotune_kernels").glob("triton_red_*.py"))
    out = tmp_path / "sol.json"
    proc = run_script("speed_of_light.py", kernel, "--offline", "--json-out", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["facts"]["multi_pass"] and doc["floors"]["passes"] == 2
    assert doc["floors"]["passes_floor_ms"] == pytest.approx(1.5 * doc["floors"]["one_pass_floor_ms"])
    v = doc["validity"]
    # timed on the captured H200: sm_90 decides; a gfx942 difference is reported, not hidden
    assert v["decided_by"] == ["sm_90"] and "sm_90" in v["valid_on"]
    assert v["valid"] == (not v["invalid_on"] or "sm_90" not in v["invalid_on"])
    for arch in v["invalid_on"]:
        assert any(r.startswith(arch) for r in v["reasons"])


@pytest.mark.parametrize("args,message", [
    (["missing.py", "--json-out", "x.json"], "no such kernel file"),
    ([str(GELU), "--peak-gbps", "-1", "--json-out", "x.json"], "--peak-gbps must be positive"),
    ([str(Path(__file__)), "--offline", "--json-out", "x.json"], "no @triton.jit"),
])
def test_bad_input_exits_2(tmp_path, run_script, args, message):
    proc = run_script("speed_of_light.py", *args, cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


TUTORIAL = ROOT / "examples" / "recorded_h200" / "triton_tutorials"


def test_a_kernel_that_calls_tl_dot_is_matmul_bound_not_access_bound():
    """The Triton tutorial's autotuned fp16 matmul on an H200 (investigation/kernels/matmul_kernel):
    6.9x its copy floor, near the tensor cores' rate. Its memory twin keeps the dot, so the memory
    classes read a compute-bound GEMM as an access-pattern gap; the tl.dot fact names it for what it is."""
    recorded = json.loads((TUTORIAL / "investigation" / "kernels" / "matmul_kernel" / "sol.json").read_text())
    n = recorded["classification"]["numbers"]
    assert recorded["classification"]["class"] == "access_pattern_bound"        # as the H200 run said before
    text = (TUTORIAL / "autotune_kernels" / "matmul_kernel.py").read_text()
    facts = sol.static_facts({"name": "matmul_kernel", "line": _def_line(text, "matmul_kernel")}, {"args": []}, {}, text)
    assert facts["dot"] is True
    c = sol.classify(n, TH, twin_valid=True, facts=facts)
    assert c["class"] == "matmul_bound" and "6.91x the copy floor" in c["says"] and "no gap" in c["says"]
    softmax = (TUTORIAL / "autotune_kernels" / "softmax_kernel.py").read_text()
    assert "tl.dot(" in softmax                                # the file holds the matmul too
    assert sol.static_facts({"name": "softmax_kernel", "line": _def_line(softmax, "softmax_kernel")},
                            {"args": []}, {}, softmax)["dot"] is False
    assert sol.classify(n, TH, twin_valid=True, facts={"dot": False})["class"] == "access_pattern_bound"


def _def_line(text: str, name: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith(f"def {name}("))


def test_a_run_of_the_same_file_and_timers_stands_for_timing_the_kernel_again(tmp_path, monkeypatch):
    """investigate.py times each kernel in its ``run`` step, then in speed_of_light: the second
    timing of the same file with the same timers is left out; any other run is not taken."""
    from tko.measure import kernel_run

    calls = []

    def fake_run_kernel(path, timer=None, timeout=None, **kw):
        calls.append(Path(path).name)
        return {"kernel_file": str(path), "status": "ok", "command": [], "results": [
            {"ok": True, "best": True, "timer": "torch.profiler.l2_flushed", "ms": 0.040}]}

    monkeypatch.setattr(sol, "gpu_available", lambda: (True, "test"))
    monkeypatch.setattr(kernel_run, "run_kernel", fake_run_kernel)
    given = {"kernel_file": str(GELU), "status": "ok",
             "command": ["python", str(GELU), "--all-configs", "--timer", "do_bench,profiler_flushed"],
             "results": [{"ok": True, "best": True, "timer": "triton.testing.do_bench", "ms": 0.061},
                         {"ok": True, "best": True, "timer": "torch.profiler.l2_flushed", "ms": 0.052}]}

    def analyse(run):
        calls.clear()
        return sol.analyse(GELU, twin_path=tmp_path / "twin.py", arches=["gfx942"], peak_gbps=PEAK,
                           floor_basis="peak", kernel_run=run, kernel_run_label="run.json")

    doc = analyse(given)
    assert calls == ["twin.py"]                                    # the twin only
    assert doc["runs"]["kernel"]["ms"] == 0.052 and doc["runs"]["kernel"]["source"] == "run.json"
    assert "kernel times from run.json (this file, the same timers), not timed again" in doc["notes"]
    for other, why in ((dict(given, command=["python", str(GELU), "--timer", "do_bench"]),
                        "it was not timed with profiler_flushed"),
                       (dict(given, kernel_file=str(tmp_path / "other.py")), "not this file"),
                       (dict(given, status="failed"), "its status is 'failed'")):
        doc = analyse(other)
        assert calls == [GELU.name, "twin.py"] and doc["runs"]["kernel"]["ms"] == 0.040
        assert any(n.startswith("run.json not used (") and why in n for n in doc["notes"]), doc["notes"]


def test_a_tl_dot_kernel_is_timed_against_the_library_gemm_of_its_shapes(tmp_path, monkeypatch):
    """On a GPU, a matmul kernel's speed of light times torch.matmul of its operand shapes beside it,
    by the same timer as the kernel's (do_bench); the ratio goes into the numbers and the class text."""
    from tko.measure import kernel_run, library_gemm

    matmul = ROOT / "examples" / "recorded_h200" / "triton_tutorials" / "autotune_kernels" / "matmul_kernel.py"
    monkeypatch.setattr(sol, "gpu_available", lambda: (True, "test"))
    monkeypatch.setattr(kernel_run, "run_kernel", lambda path, **kw: {
        "kernel_file": str(path), "status": "ok", "command": [], "results": [
            {"ok": True, "best": True, "timer": "torch.profiler.l2_flushed", "ms": 0.201},
            {"ok": True, "best": True, "timer": "triton.testing.do_bench", "ms": 0.210}]})
    timed = []
    monkeypatch.setattr(library_gemm, "time_library_gemm",
                        lambda shapes, **kw: timed.append(shapes) or {"ms": 0.150, "timer": "triton.testing.do_bench",
                                                                      "call": library_gemm.describe(shapes),
                                                                      "tflops": 2 * 4096 ** 3 / 0.150e-3 / 1e12})
    doc = sol.analyse(matmul, twin_path=tmp_path / "twin.py", arches=["gfx942"], peak_gbps=PEAK, floor_basis="peak")
    assert [(s["m"], s["n"], s["k"], s["dtype"]) for s in timed] == [(4096, 4096, 4096, "float16")]
    c = doc["classification"]
    assert c["class"] == "matmul_bound" and doc["runs"]["library_gemm"]["ms"] == 0.150
    assert c["numbers"]["kernel_over_library"] == pytest.approx(0.210 / 0.150)        # do_bench on both sides
    assert "the library GEMM of the same shapes (torch.matmul) takes 0.15 ms, the kernel 0.21 ms" in c["says"]
    assert c["numbers"]["kernel_tflops"] == pytest.approx(2 * 4096 ** 3 / 0.210e-3 / 1e12)     # 654 TFLOP/s
    assert "(916.3 against 654.5 TFLOP/s)" in c["says"]
    monkeypatch.setattr(library_gemm, "time_library_gemm", lambda shapes, **kw: 1 // 0)
    doc = sol.analyse(matmul, twin_path=tmp_path / "twin.py", arches=["gfx942"], peak_gbps=PEAK, floor_basis="peak")
    assert doc["runs"]["library_gemm"] is None and "kernel_over_library" not in doc["classification"]["numbers"]
    assert any("not timed: ZeroDivisionError" in n for n in doc["notes"])
