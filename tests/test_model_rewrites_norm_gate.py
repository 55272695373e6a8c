"""Hand-written norms and gated activations: the FX rewrites swap in F.rms_norm / F.layer_norm and one
GEMM over the concatenated gate and up weights with equal outputs and gradients on the CPU, leave
unequal forms alone, their trial arms are planned from the facts, and a trial of each runs the
unchanged example end to end."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT
from fx_rewrite import compiled_with_rewrite
from tko.base import contracts
from tko.chains import trial_plan
from tko.read import rewrite_catalog
from tko.remedies import gate_rewrite, graph_rewrites, norm_rewrite

EXAMPLES = ROOT / "examples"
ON_THIS_MACHINE = ("--allow-device-mismatch",)     # a CPU trial of a CPU program
TOL = {"float32": dict(atol=1e-5, rtol=1e-5), "bfloat16": dict(atol=2e-2, rtol=2e-2)}


def _close(a, b, dtype: str) -> None:
    """Equal within the dtype: bf16 rounds at every hand-written step (the functional op computes in
    fp32 inside), so its absolute tolerance scales with the tensor's largest entry."""
    import torch

    tol = dict(TOL[dtype])
    if dtype == "bfloat16":
        tol["atol"] = max(tol["atol"], 2e-2 * b.float().abs().max().item())
    torch.testing.assert_close(a, b, **tol)


@pytest.fixture(scope="module")
def rms_example():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import rms_norm
        yield rms_norm
    finally:
        sys.path.remove(str(EXAMPLES))

def _same_outputs_and_grads(mod, fn, *inputs, dtype="float32"):
    """Compile ``fn`` with the rewrite: one replacement, outputs and gradients of every input equal."""

    def run(f):
        leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
        out = f(*leaves)
        out.float().square().sum().backward()
        return out, [t.grad for t in leaves]

    ref, ref_grads = run(fn)
    compiled, counts = compiled_with_rewrite(fn, mod, dynamic=False)
    out, grads = run(compiled)
    assert counts == [1], counts
    assert out.dtype == ref.dtype
    _close(out, ref, dtype)
    for g, rg in zip(grads, ref_grads):
        _close(g, rg, dtype)


def _left_alone(mod, fn, *inputs):
    import torch

    compiled, counts = compiled_with_rewrite(fn, mod, dynamic=False)
    torch.testing.assert_close(compiled(*inputs), fn(*inputs))
    assert counts and not any(counts), counts


# ---------------------------------------------------------------- norm

def _hf_rms(weight, eps=1e-6):
    import torch

    class LlamaRMSNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight, self.variance_epsilon = torch.nn.Parameter(weight), eps

        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * hidden_states.to(input_dtype)

    return LlamaRMSNorm()


def _norm_forms():
    import torch

    def rms_plain(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def rms_sqrt(x, w):
        return w * (x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-5))

    def rms_pow_op(x, w):
        return x * ((x ** 2).mean(dim=-1, keepdim=True) + 1e-6).rsqrt() * w

    def rms_type_as(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(x) * w

    def ln_var(x, w, b):
        m = x.mean(-1, keepdim=True)
        v = x.var(-1, keepdim=True, unbiased=False)
        return (x - m) / torch.sqrt(v + 1e-5) * w + b

    def ln_centered(x, w, b):
        d = x - x.mean(dim=-1, keepdim=True)
        return d * torch.rsqrt((d ** 2).mean(-1, keepdim=True) + 1e-5) * w + b

    def ln_var_mean(x, w, b):
        v, m = torch.var_mean(x, -1, keepdim=True, correction=0)
        return (x - m) * torch.rsqrt(v + 1e-5) * w + b

    def ln_fp32(x, w, b):
        xf = x.float()
        m = xf.mean(-1, keepdim=True)
        v = ((xf - m) ** 2).mean(-1, keepdim=True)
        return ((xf - m) / torch.sqrt(v + 1e-5)).to(x.dtype) * w + b

    return {"rms_plain": rms_plain, "rms_sqrt": rms_sqrt, "rms_pow_op": rms_pow_op, "rms_type_as": rms_type_as,
            "ln_var": ln_var, "ln_centered": ln_centered, "ln_var_mean": ln_var_mean, "ln_fp32": ln_fp32}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("form", sorted(_norm_forms()))
def test_norm_forms_keep_outputs_and_gradients(form, dtype):
    import torch

    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    fn = _norm_forms()[form]
    x, w, b = torch.randn(6, 32, dtype=dt), torch.randn(32, dtype=dt), torch.randn(32, dtype=dt)
    _same_outputs_and_grads(norm_rewrite, fn, *((x, w) if form.startswith("rms") else (x, w, b)), dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_llama_rmsnorm_module_and_the_example(rms_example, dtype):
    import torch

    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    x, w = torch.randn(4, 16, 64, dtype=dt), torch.randn(64, dtype=dt)
    module = _hf_rms(w.clone())
    _same_outputs_and_grads(norm_rewrite, lambda h: module(h), x, dtype=dtype)
    _same_outputs_and_grads(norm_rewrite, rms_example.rms_norm, x, w, dtype=dtype)


def test_a_lifted_eps_under_dynamic_shapes_is_passed_on():
    """``dynamic=True`` lifts ``self.eps`` to an input read with ``.item()``: still one replacement per
    norm (RMS and layer), equal outputs and gradients across batch sizes, and a changed eps reaches the op."""
    import torch

    class LayerNormByHand(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w, self.b, self.eps = torch.nn.Parameter(torch.randn(d)), torch.nn.Parameter(torch.randn(d)), 1e-5

        def forward(self, x):
            m = x.mean(-1, keepdim=True)
            v = (x - m).pow(2).mean(-1, keepdim=True)
            return (x - m) * torch.rsqrt(v + self.eps) * self.w + self.b

    torch.manual_seed(0)
    for module in (_hf_rms(torch.randn(64)), LayerNormByHand(64)):
        codes = []
        compiled, counts = compiled_with_rewrite(module, norm_rewrite, codes, dynamic=True)
        for rows in (4, 9, 5):
            x = torch.randn(rows, 64)
            xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
            out, ref = compiled(xa), module(xb)
            out.square().sum().backward()
            ref.square().sum().backward()
            torch.testing.assert_close(out, ref)
            torch.testing.assert_close(xa.grad, xb.grad)
        assert counts and all(c == 1 for c in counts), counts
        assert "rms_norm" in codes[0] or "layer_norm" in codes[0], codes[0]
        # torch >= 2.9 lifts the attribute (torch 2.7 folds it in and guards on it): the lifted form is matched
        assert "item()" in codes[0] or torch.torch_version.TorchVersion(torch.__version__) < "2.9", codes[0]
        name = "variance_epsilon" if hasattr(module, "variance_epsilon") else "eps"
        setattr(module, name, 0.5)          # a large eps: a constant folded in would differ visibly
        x = torch.randn(3, 64)
        torch.testing.assert_close(compiled(x), module(x))


def test_the_norm_replacement_keeps_the_dtype_steps():
    """An fp32 upcast stays the op's input; a downcast and the weight after it stay outside the op."""
    import torch

    fn = _norm_forms()["rms_type_as"]
    gm = torch.fx.symbolic_trace(fn)
    assert norm_rewrite.rewrite(gm.graph) == 0          # no example values: d unknown, left alone

    seen = []

    def backend(gm, example_inputs):
        norm_rewrite.rewrite(gm.graph)
        gm.recompile()
        seen.append(gm.code)
        return gm

    torch._dynamo.reset()
    torch.compile(fn, backend=backend)(torch.randn(2, 8, dtype=torch.bfloat16), torch.randn(8, dtype=torch.bfloat16))
    code = seen[0]
    assert "rms_norm(xf, (8,), None, 1e-06)" in code and "type_as" in code and "rsqrt" not in code
    torch._dynamo.reset()
    seen.clear()
    torch.compile(_norm_forms()["rms_plain"], backend=backend)(torch.randn(2, 8), torch.randn(8))
    assert "rms_norm(l_x_, (8,), l_w_, 1e-06)" in seen[0]


def test_norm_forms_that_are_not_equal_are_left_alone():
    import torch

    x, w = torch.randn(6, 32), torch.randn(32)

    def over_dim0(x, w):
        return x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + 1e-6) * w

    def eps_tensor(x, eps):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    def no_keepdim(x):
        return x / torch.sqrt(x.pow(2).mean(-1) + 1e-6)[:, None]

    def unbiased(x):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5)

    def stat_reused(x):
        ms = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(ms + 1e-6), ms

    def fourth_power(x):
        return x * torch.rsqrt(x.pow(4).mean(-1, keepdim=True) + 1e-6)

    def other_input(x, y):
        return x * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)

    _left_alone(norm_rewrite, over_dim0, x, w)
    _left_alone(norm_rewrite, eps_tensor, x, torch.tensor(1e-6))
    _left_alone(norm_rewrite, no_keepdim, x)
    _left_alone(norm_rewrite, unbiased, x)
    _left_alone(norm_rewrite, stat_reused, x)
    _left_alone(norm_rewrite, fourth_power, x)
    _left_alone(norm_rewrite, other_input, x, torch.randn(6, 32))


def test_a_weight_of_another_shape_stays_a_multiply():
    import torch

    def per_row_weight(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    torch.manual_seed(0)
    x, w = torch.randn(6, 32), torch.randn(6, 1)
    _same_outputs_and_grads(norm_rewrite, per_row_weight, x, w)


# ---------------------------------------------------------------- gate

def _gate_module(act="silu", bias=False, hidden=32, inter=48):
    import torch
    import torch.nn.functional as F

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = torch.nn.Linear(hidden, inter, bias=bias)
            self.up_proj = torch.nn.Linear(hidden, inter, bias=bias)
            self.down_proj = torch.nn.Linear(inter, hidden, bias=False)

        def forward(self, x):
            g = self.gate_proj(x)
            a = F.silu(g) if act == "silu" else F.gelu(g, approximate="tanh")
            return self.down_proj(a * self.up_proj(x))

    return Mlp()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("act, bias", [("silu", False), ("gelu", True)])
def test_gate_module_keeps_outputs_and_weight_gradients(act, bias, dtype):
    import torch

    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    model = _gate_module(act, bias).to(dt)
    ref_model = _gate_module(act, bias).to(dt)
    ref_model.load_state_dict(model.state_dict())
    x = torch.randn(3, 5, 32, dtype=dt)
    compiled, counts = compiled_with_rewrite(model, gate_rewrite, dynamic=False)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    out, ref = compiled(xa), ref_model(xb)
    assert counts == [1]
    _close(out, ref, dtype)
    out.float().square().sum().backward()
    ref.float().square().sum().backward()
    _close(xa.grad, xb.grad, dtype)
    for name, p in model.named_parameters():           # both weights (and biases) get their gradient
        assert p.grad is not None, name
        _close(p.grad, dict(ref_model.named_parameters())[name].grad, dtype)


def test_gate_matmul_forms():
    import torch
    import torch.nn.functional as F

    def matmul_form(x, wg, wu):
        return (x @ wu.t()) * F.gelu(x @ wg.T, approximate="tanh")

    def transpose_form(x, wg, wu):
        return F.silu(torch.matmul(x, wg.transpose(0, 1))) * torch.matmul(x, wu.transpose(0, 1))

    torch.manual_seed(0)
    x, wg, wu = torch.randn(4, 16), torch.randn(24, 16), torch.randn(24, 16)
    for fn in (matmul_form, transpose_form):
        _same_outputs_and_grads(gate_rewrite, fn, x, wg, wu)


def test_gate_forms_that_are_not_equal_are_left_alone():
    import torch
    import torch.nn.functional as F

    def other_inputs(x, y, wg, wu):
        return F.silu(F.linear(x, wg)) * F.linear(y, wu)

    def used_twice(x, wg, wu):
        g = F.linear(x, wg)
        return F.silu(g) * F.linear(x, wu), g

    def shapes_differ(x, wg, wu):
        return F.silu(F.linear(x, wg)) * F.linear(x, wu)[..., :24]

    def one_bias(x, wg, wu, b):
        return F.silu(F.linear(x, wg, b)) * F.linear(x, wu)

    def other_act(x, wg, wu):
        return torch.tanh(F.linear(x, wg)) * F.linear(x, wu)

    x, y, wg, wu = torch.randn(4, 16), torch.randn(4, 16), torch.randn(24, 16), torch.randn(24, 16)
    _left_alone(gate_rewrite, other_inputs, x, y, wg, wu)
    _left_alone(gate_rewrite, used_twice, x, wg, wu)
    _left_alone(gate_rewrite, shapes_differ, x, wg, torch.randn(32, 16))
    _left_alone(gate_rewrite, one_bias, x, wg, wu, torch.randn(24))
    _left_alone(gate_rewrite, other_act, x, wg, wu)


# ---------------------------------------------------------------- catalog, plan, check

@pytest.mark.parametrize("name, rid", [
    # Inductor's names for these patterns (CPU: cpp_fused_..., the same op list as triton_...), read
    # from a torch.compile of each form (bf16, forward and backward) on torch 2.13
    ("cpp_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm_by_hand"),
    ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm_by_hand"),
    ("cpp_fused_add_div_mean_mul_sqrt_sub_var_0", "norm_by_hand"),
    ("cpp_fused__to_copy_add_mean_mul_rsqrt_sub_0", "norm_by_hand"),
    ("cpp_fused_mul_silu_0", "gated_activation"),
    ("triton_poi_fused_mul_silu_0", "gated_activation"),
    ("cpp_fused_gelu_mul_0", "gated_activation"),
    ("cpp_fused_mul_silu_silu_backward_0", "gated_activation"),
])
def test_catalog_kernel_names_of_the_hand_forms(name, rid):
    assert rid in [f["id"] for f in rewrite_catalog.detect([(name, 0.1)], [], [])]


@pytest.mark.parametrize("name", ["cpp_fused_native_layer_norm_0", "cpp_fused_mul_silu_split_1",
                                  "cpp_fused_gelu_mul_split_1", "triton_poi_fused_add_0"])
def test_catalog_kernel_names_of_the_replaced_forms_propose_nothing(name):
    assert not {"norm_by_hand", "gated_activation"} & {f["id"] for f in rewrite_catalog.detect([(name, 0.1)], [], [])}


@pytest.mark.parametrize("arm, env, kernel", [
    ("rms_norm_fn", "TKO_NORM_REWRITE", "triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0"),
    ("gate_up_fused", "TKO_GATE_REWRITE", "triton_poi_fused_mul_silu_0"),
])
def test_arm_planned_from_the_facts(arm, env, kernel):
    assert arm in trial_plan.ARM_NAMES and graph_rewrites.module(arm).ARM == arm
    facts = trial_plan.Facts(kernels={kernel: {}}, given=True)
    spec = {a.name: a for a in trial_plan.plan_arms(facts, {"gpu": True})}[arm]
    assert spec.skip is None and spec.env == {env: "1"} and kernel in spec.proposed_by
    plain = trial_plan.Facts(kernels={"triton_poi_fused_add_0": {}}, given=True)
    assert "kernel_names" in {a.name: a for a in trial_plan.plan_arms(plain, {"gpu": True})}[arm].skip


@pytest.mark.parametrize("env, prefix, noun", [("TKO_NORM_REWRITE", "TKO_NORM", "normalization"),
                                               ("TKO_GATE_REWRITE", "TKO_GATE", "gated projection")])
def test_an_arm_that_replaced_nothing_is_not_applied(env, prefix, noun):
    rec = {"status": "ok"}
    graph_rewrites.check_trial(rec, {env: "1"}, f"{prefix}: replaced 0 {noun}(s) in 2 graph(s)\n")
    assert rec["status"] == "not applied" and f"no {noun} was replaced" in rec["error"]
    rec = {"status": "ok"}
    graph_rewrites.check_trial(rec, {env: "1"}, f"{prefix}: replaced 2 {noun}(s) in 1 graph(s)\n")
    assert rec["status"] == "ok" and rec["replaced"].startswith("replaced 2")


def test_the_installed_pass_survives_torch_compiles_config_copy(monkeypatch, capsys):
    """torch.compile deep-copies Inductor's config: the pass is the one counter, counted and reported."""
    import copy

    import torch
    import torch._inductor.config as cfg

    reports = []
    monkeypatch.setattr("atexit.register", reports.append)
    with cfg.patch(pre_grad_custom_pass=None):   # a ConfigModule: monkeypatch's undo deletes the key
        graph_rewrites.install_from_env({"TKO_NORM_REWRITE": "1"})
        assert copy.deepcopy(cfg.pre_grad_custom_pass) is cfg.pre_grad_custom_pass
        cfg.get_config_copy()
        torch._dynamo.reset()
        torch.compile(_norm_forms()["rms_plain"])(torch.randn(2, 8), torch.randn(8))
    reports[0]()
    assert "TKO_NORM: replaced 1 normalization(s) in 1 graph(s)" in capsys.readouterr().err


def test_reference_checks_are_not_model_code(tmp_path):
    """A catalog pattern computed only as the reference of an output check is not reported."""
    src = tmp_path / "kern.py"
    src.write_text(
        "import torch\n\n"
        "def main(x, w, out):\n"
        "    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w\n"
        "    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)\n"
        "    assert torch.allclose(out, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)\n\n"
        "def model(x, w):\n"
        "    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w\n"
        "    assert torch.isfinite(y).all()\n"
        "    return y\n")
    found = rewrite_catalog.detect([], [src], [])
    norm = next(f for f in found if f["id"] == "norm_by_hand")
    assert [(h["function"], h["line"]) for h in norm["found_by"]] == [("model", 9)]
    bundled = rewrite_catalog.detect([], [EXAMPLES / "handwritten" / "handwritten_kernels.py"], [])
    assert "norm_by_hand" not in [f["id"] for f in bundled]
    assert "norm_by_hand" in [f["id"] for f in rewrite_catalog.detect([], [EXAMPLES / "rms_norm.py"], [])]


# ---------------------------------------------------------------- end to end

@pytest.mark.slow
@pytest.mark.parametrize("example, args, arm, noun", [
    ("gated_mlp.py", ("--tokens", "32", "--hidden", "32", "--inter", "64", "--train"), "gate_up_fused",
     "gated projection"),
    ("rms_norm.py", ("--rows", "32", "--cols", "64", "--dtype", "bf16", "--train"), "rms_norm_fn", "normalization"),
    # the other rewrites of the registry, each in a real trial process as well
    ("large_vocab_ce.py", ("--tokens", "64", "--hidden", "32", "--vocab", "512"), "ce_chunked", "cross-entropy pattern"),
    ("scatter_index_add.py", ("--nodes", "500"), "segment_reduce", "scatter-add pattern"),
    ("attention_by_hand/step.py", ("--batch", "1", "--seq", "16", "--train"), "sdpa", "attention pattern"),
    # SDPA already, given its causal mask as attn_mask: the same arm swaps in is_causal=True
    ("attention_by_hand/sdpa_mask_step.py", ("--batch", "1", "--seq", "16", "--train"), "sdpa", "attention pattern"),
])
def test_trial_of_the_arm_on_the_example(run_script, tmp_path, example, args, arm, noun):
    """Every rewrite arm in a real trial process on the CPU: installed, one pattern replaced, outputs equal."""
    proc = run_script("try_remedies.py", *ON_THIS_MACHINE, "--out", tmp_path / "t", "--runs", "1", "--max-runs", "1",
                      "--arms", arm,
                      "--", sys.executable, EXAMPLES / example, "--device", "cpu", "--steps", "2", "--warmup", "1",
                      *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "t" / "trials.json").read_text())
    assert contracts.contract_problems(doc) == []
    rec = {a["name"]: a for a in doc["arms"]}[arm]
    assert rec["status"] == "ok", rec
    causal = ", 1 with is_causal=True (the causal mask asserted on every call)" if arm == "sdpa" else ""
    assert rec["replaced"] and set(rec["replaced"]) == {f"replaced 1 {noun}(s) in 1 graph(s){causal}"}
    assert rec["outputs"]["result"] == "equal", rec["outputs"]
