"""tko.remedies.row_replace: which Inductor kernels are row ops, the trial's ``replace`` arm, and the swap
itself run end to end through the trial launcher (the kernels in the Triton interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tko.remedies import row_replace
from tko.chains import trial_plan
from tko.chains.trial_plan import Facts, plan_arms

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU = {"gpu": True, "hip": False}


@pytest.mark.parametrize("name, op", [  # kernel names of the H200 captures under tests/fixtures
    ("triton_red_fused__softmax_exp_prepare_softmax_online_sub_0", "softmax"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "rms_norm"),
    ("triton_per_fused_native_layer_norm_0", "layer_norm"),
    ("triton_red_fused__log_softmax_0", "log_softmax"),
    ("triton_per_fused_native_layer_norm_native_layer_norm_backward_0", None),  # backward: no kernel for it
    ("triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0", None),
    ("triton_poi_fused__softmax_0", None),                                    # not a reduction
])
def test_row_pattern_of_inductor_kernel_names(name, op):
    assert row_replace.row_pattern(name) == op


def test_the_replace_arm_follows_multi_pass_row_kernels():
    facts = Facts(kernels={"triton_red_fused__softmax_exp_prepare_softmax_online_sub_0": {"multi_pass": True},
                           "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0": {"multi_pass": False}},
                  given=True)
    arm = {a.name: a for a in plan_arms(facts, GPU)}["replace"]
    assert arm.skip is None and arm.bootstrap == ["--replace-rows", "softmax"]
    assert "multi-pass softmax" in arm.proposed_by and "tko.remedies.rowkernels" in arm.change
    one_pass = Facts(kernels={"triton_red_fused__softmax_0": {"multi_pass": False}}, given=True)
    assert "no multi-pass softmax" in {a.name: a for a in plan_arms(one_pass, GPU)}["replace"].skip
    assert "no GPU" in {a.name: a for a in plan_arms(None, {"gpu": False})}["replace"].skip
    assert {a.name: a for a in plan_arms(None, GPU)}["replace"].bootstrap[1].split(",") == list(row_replace.OPS)
    assert "replace" in trial_plan.ARM_NAMES


def test_unknown_row_op_is_refused():
    with pytest.raises(ValueError, match="unknown row op soft"):
        row_replace.parse_ops("soft,rms_norm")
    assert row_replace.parse_ops("all") == list(row_replace.OPS)


def _env(tmp_path):
    # a fresh Inductor cache: a graph cached before an op's schema changed would call the old one
    return dict(os.environ, TRITON_INTERPRET="1", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))


def _launch(tmp_path, *flags, compile=False):
    env = _env(tmp_path)
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "tko", "remedies", "fallback_bootstrap.py"), *flags,
           os.path.join(ROOT, "tests", "fixtures", "repros", "row_replace_repro.py"), *(["--compile"] if compile else [])]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def test_the_swap_routes_eager_calls_and_passes_over_the_rest(tmp_path):
    proc = _launch(tmp_path, "--replace-rows", "softmax,layer_norm,rms_norm")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "checks ok" in proc.stdout
    line = next(l for l in proc.stderr.splitlines() if l.startswith("TKO_REPLACE:"))
    # f runs 4 times (1 checked + 3 timed; two softmax calls each, one F.softmax with _stacklevel),
    # the reference line adds a norm each, and the softmax that needs autograd is routed too (its
    # backward runs once, as the torch formula: the default); passed over: the float64 reference
    # softmax twice and dim=0
    assert "softmax: kernel 9," in line and "layer_norm: kernel 5," in line and "rms_norm: kernel 5," in line
    assert "softmax: passed over 3," in line and line.endswith("softmax_bwd: torch 1")
    assert "torch.softmax" in proc.stderr and "torch.nn.functional.layer_norm" in proc.stderr
    plain = _launch(tmp_path)
    assert plain.returncode == 0 and "TKO_REPLACE" not in plain.stderr


TRAINING_PROGRAM = """
import sys
import torch
import torch.nn.functional as F

def step(x, w, b, scores):
    attn = torch.softmax(scores, dim=-1)                       # causal: -inf above the diagonal
    h = F.rms_norm(F.layer_norm(x, (x.shape[-1],), w, b), (x.shape[-1],), w)
    return (attn @ h).square().sum() + F.log_softmax(x, dim=-1).sum() / 7

def grads(dtype, fn):
    g = torch.Generator().manual_seed(0)
    x, scores = torch.randn(6, 40, generator=g), torch.randn(6, 6, generator=g)
    scores = scores.masked_fill(torch.ones(6, 6).triu(1).bool(), float("-inf"))
    w, b = torch.randn(40, generator=g), torch.randn(40, generator=g)
    leaves = [t.to(dtype).requires_grad_(True) for t in (x, w, b, scores)]
    fn(*leaves).backward()
    return [t.grad for t in leaves]

fn = torch.compile(step) if "--compile" in sys.argv else step
for _ in range(2):
    got = grads(torch.float32, fn)
want = grads(torch.float64, step)   # float64 is passed over: torch's own ops and autograd
for a, b in zip(got, want):
    torch.testing.assert_close(a, b.float(), rtol=1e-4, atol=1e-4)
print("training ok")
"""


@pytest.mark.parametrize("compile, backward", [(False, "torch"),
                                               pytest.param(True, "torch", marks=pytest.mark.slow),
                                               pytest.param(True, "kernel", marks=pytest.mark.slow)],
                         ids=["eager", "compiled", "compiled-kernel-backward"])
def test_a_training_step_runs_forward_and_backward_on_the_kernels(tmp_path, compile, backward):
    script = tmp_path / "train_step.py"
    script.write_text(TRAINING_PROGRAM)
    env = dict(_env(tmp_path), TKO_ROW_BACKWARD=backward)
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "tko", "remedies", "fallback_bootstrap.py"), "--replace-rows", "all",
           str(script), *(["--compile"] if compile else [])]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "training ok" in proc.stdout
    line = next(l for l in proc.stderr.splitlines() if l.startswith("TKO_REPLACE:"))
    # two float32 steps, each op once a step: two forward launches per op, and two backward calls
    # (the torch formula eagerly; traced once into the compiled backward; or the kernel when chosen)
    bwd = {"kernel": "kernel 2", "torch": "torch (traced into a compiled backward) 1" if compile else "torch 2"}[backward]
    for op in row_replace.OPS:
        assert f"{op}: kernel 2," in line and f"{op}_bwd: {bwd}" in line, line
    # the float64 step (eager) passes over each op once; routed calls are noted only when eager
    assert "softmax: passed over 1," in line and "reference" not in line, line
    assert ("softmax: routed 2," in line) != compile, line


@pytest.mark.slow
def test_the_swap_inside_torch_compile_keeps_the_custom_op(tmp_path):
    proc = _launch(tmp_path, "--replace-rows", "softmax", compile=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(l for l in proc.stderr.splitlines() if l.startswith("TKO_REPLACE:"))
    # the op ran at each compiled call, not only at trace (8), and the eager autograd softmax once
    assert "softmax: kernel 9," in line and "softmax: routed 1," in line and "softmax_bwd: torch 1" in line, line


def test_a_bad_op_list_stops_the_launcher_with_one_line(tmp_path):
    proc = _launch(tmp_path, "--replace-rows", "softmaxx")
    assert proc.returncode == 3 and "unknown row op softmaxx" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("example, status", [("softmax_long_rows_replace", "ok"), ("rms_norm", "not applied")])
def test_a_replace_run_whose_kernels_never_launched_is_not_applied(example, status):
    # stderr of the replace runs recorded on the H200: long-row softmax routed 53 launches; the
    # RMS norm repro writes its math by hand, so nothing reached the kernels (0.995x, a no-op)
    from types import SimpleNamespace

    from tko.chains import trials

    log = os.path.join(ROOT, "examples", "recorded_h200", "trials", example, "logs", "replace_1.log")
    stderr = open(log, encoding="utf-8").read().split("--- stderr ---", 1)[1]
    record = {"status": "ok", "error": None}
    arm = SimpleNamespace(spec=SimpleNamespace(bootstrap=["--replace-rows", "softmax"]))
    trials._check_replaced(record, arm, stderr)
    assert record["status"] == status
    if status == "not applied":
        assert "never ran" in record["error"] and "no softmax/norm call" in record["error"]
    else:
        assert record["replaced"].startswith("softmax: kernel 53")
    other = {"status": "ok"}
    trials._check_replaced(other, SimpleNamespace(spec=SimpleNamespace(bootstrap=[])), stderr)
    assert other == {"status": "ok"}


def test_the_report_offers_the_row_kernel_for_a_measured_multi_pass_softmax():
    # the H200 speed-of-light run of the long-row softmax (tests/fixtures/sol_h200/table)
    import json

    from tko.base import decide
    from tko.verdict import evidence, sol_evidence

    sol = json.loads(open(os.path.join(ROOT, "tests", "fixtures", "sol_h200", "table",
                                       "softmax_long_rows_rep1.json")).read())
    kernel = sol["kernel"]
    ev = evidence.Evidence(kernel)
    sol_evidence.from_sol(ev, sol, "sol.json")
    evidence.name_facts(ev)
    facts = {**ev.facts, "share": decide.Fact(0.9, "hand"), "multi_pass": decide.Fact(True, "meta.json"),
             "pct_copy_peak": decide.Fact(0.48, "run.json")}
    d = decide.decide(facts, decide.load_rules())
    assert (d.verdict, d.rule) == ("rewrite_model", "row_kernel_replacement")
    says = d.fired[0].says
    numbers = sol["classification"]["numbers"]
    gain = numbers["kernel_ms"] / numbers["one_pass_floor_ms"]
    assert f"at most {gain:.2f}x" in says and "tko.remedies.rowkernels.softmax" in says and "--arms replace" in says
    # the same kernel read once per row (not multi-pass): no offer
    d = decide.decide({**facts, "multi_pass": decide.Fact(False, "meta.json")}, decide.load_rules())
    assert d.rule != "row_kernel_replacement"
    # nothing timed: the inferred rule offers it and says it was not measured
    plain = {k: v for k, v in facts.items() if not k.startswith("sol_")}
    d = decide.decide(plain, decide.load_rules())
    assert d.rule == "row_kernel_replacement_unmeasured" and "not timed" in d.fired[0].says


def _sol_at(cols, kernel_ms, arch="sm_90"):
    """The H200 speed-of-light run of the long-row softmax, its rows reshaped to ``cols`` columns
    (same bytes) and its kernel time set to ``kernel_ms``."""
    import copy
    import json

    sol = json.loads(open(os.path.join(ROOT, "tests", "fixtures", "sol_h200", "table",
                                       "softmax_long_rows_rep1.json")).read())
    sol = copy.deepcopy(sol)
    for a in sol["byte_model"]["args"]:
        a["shape"] = [(1 << 27) // cols, cols]
    sol["classification"]["numbers"]["kernel_ms"] = kernel_ms
    sol["peak"]["arch"] = arch
    return sol


def _offer(sol, kernel=None):
    from tko.base import decide
    from tko.verdict import evidence, sol_evidence

    ev = evidence.Evidence(kernel or sol["kernel"])
    sol_evidence.from_sol(ev, sol, "sol.json")
    evidence.name_facts(ev)
    facts = {**ev.facts, "share": decide.Fact(0.9, "hand"), "multi_pass": decide.Fact(True, "meta.json"),
             "pct_copy_peak": decide.Fact(0.48, "run.json")}
    return ev.facts, decide.decide(facts, decide.load_rules())


def test_rows_past_the_one_pass_limit_are_offered_the_chunked_kernel_only_under_its_floor():
    from tko.remedies.row_replace import bundled_form

    # the form the bundled kernel takes, by arch: sm_90 keeps 32k on chip, gfx936 16k, an unknown
    # CUDA arch 8k; past 2^20 columns nothing
    assert [bundled_form("softmax", n, "sm_90") for n in (32768, 32769, 65536, 1 << 20, (1 << 20) + 1)] == \
        ["one_pass", "chunked", "chunked", "chunked", "refused"]
    assert [bundled_form("rms_norm", n, "gfx936") for n in (16384, 16385)] == ["one_pass", "chunked"]
    assert bundled_form("layer_norm", 16384, "sm_120") == "chunked" and bundled_form("gelu", 1024, "sm_90") is None
    one_pass_ms = _sol_at(32768, 0.266)["classification"]["numbers"]["one_pass_floor_ms"]
    # 32k on the H200: the one-pass offer, as before
    facts, d = _offer(_sol_at(32768, 0.266))
    assert facts["row_kernel_form"].value == "one_pass" and d.rule == "row_kernel_replacement"
    assert facts["sol_bundled_floor_ms"].value == pytest.approx(one_pass_ms)
    # 64k, Inductor's softmax at 0.2523 ms (coordinate descent, rowkernel_sweep_h200/call5_chunked):
    # the chunked kernel reads the row twice, a floor 1.5x the one-pass one, still 1.32x under it
    facts, d = _offer(_sol_at(65536, 0.2523))
    assert facts["row_kernel_form"].value == "chunked" and facts["sol_row_cols"].value == 65536
    assert facts["sol_bundled_floor_ms"].value == pytest.approx(1.5 * one_pass_ms)
    assert facts["sol_bundled_gain"].value == pytest.approx(0.2523 / (1.5 * one_pass_ms))
    assert (d.verdict, d.rule) == ("rewrite_model", "row_kernel_replacement_chunked")
    assert "rows of 65536 elements" in d.fired[0].says and f"{facts['sol_bundled_gain'].value:.2f}x" in d.fired[0].says
    # Inductor's RMSNorm at 64k ran at 0.140 ms (90 % of copy, its pass 2 from L2): under the
    # chunked floor, and the chunked kernel measured slower (0.71x): no offer
    facts, d = _offer(_sol_at(65536, 0.140), "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0")
    assert facts["row_pattern"].value == "rms_norm" and facts["sol_bundled_gain"].value < 1
    assert not d.rule.startswith("row_kernel_replacement")
    # past the chunked cap: refused, no floor and no offer
    facts, d = _offer(_sol_at(1 << 21, 0.5))
    assert facts["row_kernel_form"].value == "refused" and "sol_bundled_gain" not in facts
    assert not d.rule.startswith("row_kernel_replacement")


def test_no_offer_once_the_replace_arm_was_measured_no_faster():
    # the rms_norm trials recorded on the H200: replace ran at 0.995x, not beyond noise
    import json

    from tko.base import decide
    from tko.verdict import trial_evidence

    root = os.path.join(ROOT, "examples", "recorded_h200", "trials")
    slow = json.loads(open(os.path.join(root, "rms_norm", "trials.json")).read())
    facts = {"share": decide.Fact(0.9, "hand"), "multi_pass": decide.Fact(True, "meta.json"),
             "pct_copy_peak": decide.Fact(0.48, "run.json"),
             "row_pattern": decide.Fact("softmax", "kernel name")}
    assert decide.decide(facts, decide.load_rules()).rule == "row_kernel_replacement_unmeasured"
    measured = {**facts, **trial_evidence.trial_facts(slow, "trials.json")}
    assert measured["replace_measured_no_faster"].value is True
    assert not decide.decide(measured, decide.load_rules()).rule.startswith("row_kernel_replacement")
    fast = json.loads(open(os.path.join(root, "softmax_long_rows_replace", "trials.json")).read())
    assert trial_evidence.trial_facts(fast, "trials.json")["replace_measured_no_faster"].value is False
