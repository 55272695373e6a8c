"""Hand-written attention: the catalog finds it (model code, Inductor kernel names), the FX rewrite
swaps in F.scaled_dot_product_attention with equal outputs and gradients on the CPU, the sdpa trial
arm is planned from the facts, and the investigation shows it with before/after and measurements."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT
from fx_rewrite import compiled_with_rewrite
from tko.base.errors import InputError
from tko.chains import rewrites, trial_plan
from tko.read import rewrite_catalog
from tko.remedies import attention_rewrite, graph_rewrites

EXAMPLE = ROOT / "examples" / "attention_by_hand"


@pytest.fixture(scope="module")
def model_mod():
    sys.path.insert(0, str(EXAMPLE))
    try:
        import model
        yield model
    finally:
        sys.path.remove(str(EXAMPLE))

def test_the_swap_keeps_outputs_and_gradients(model_mod):
    import torch

    torch.manual_seed(0)
    m = model_mod.HandAttention(64, 4)
    x = torch.randn(2, 16, 64, requires_grad=True)
    mask = model_mod.causal_mask(16, "cpu")
    ref = m(x, mask)
    ref.sum().backward()
    ref_grad = x.grad.clone()
    x.grad = None
    compiled, counts = compiled_with_rewrite(m, attention_rewrite)
    out = compiled(x, mask)
    assert counts == [1]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    out.sum().backward()
    torch.testing.assert_close(x.grad, ref_grad, atol=1e-5, rtol=1e-5)


class HFEager:
    """Hugging Face's eager_attention_forward (transformers models/llama): transpose(2, 3), an additive
    mask, the softmax upcast to float32 and cast back, dropout (off in eval)."""

    @staticmethod
    def module(upcast: str):
        import torch
        from torch import nn

        class Eager(nn.Module):
            def __init__(self):
                super().__init__()
                self.scaling, self.attention_dropout = 8 ** -0.5, 0.1

            def forward(self, query, key, value, attention_mask):
                attn_weights = torch.matmul(query, key.transpose(2, 3)) * self.scaling
                attn_weights = attn_weights + attention_mask
                if upcast == "dtype":
                    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
                else:
                    attn_weights = nn.functional.softmax(attn_weights.float(), dim=-1).type_as(query)
                attn_weights = nn.functional.dropout(attn_weights, p=self.attention_dropout, training=self.training)
                return torch.matmul(attn_weights, value)

        return Eager()


@pytest.mark.parametrize("upcast", ["dtype", "float"])
def test_hugging_face_eager_attention_with_its_fp32_upcast_is_swapped_under_dynamo(upcast):
    import torch

    m = HFEager.module(upcast).eval()
    q, k, v = (torch.randn(2, 4, 16, 8, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    mask = torch.zeros(16, 16, dtype=torch.bfloat16).masked_fill(
        torch.ones(16, 16, dtype=torch.bool).triu(1), float("-inf"))
    ref = m(q, k, v, mask)
    ref.float().sum().backward()
    ref_grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    compiled, counts = compiled_with_rewrite(m, attention_rewrite)
    out = compiled(q, k, v, mask)
    assert counts == [1]
    bf16 = {"atol": 2e-2, "rtol": 2e-2}     # two bf16 roundings apart (the hand form rounds p before @ v)
    torch.testing.assert_close(out, ref, **bf16)
    out.float().sum().backward()
    for got, want in zip((q.grad, k.grad, v.grad), ref_grads):
        torch.testing.assert_close(got, want, **bf16)
    torch._dynamo.reset()
    compiled, counts = compiled_with_rewrite(HFEager.module(upcast).train(), attention_rewrite)   # dropout on: left alone
    compiled(q, k, v, mask)
    assert counts == [0]


def test_symbolic_trace_with_a_runtime_scale_and_an_additive_mask():
    import math

    import torch
    import torch.nn.functional as F

    class Additive(torch.nn.Module):
        def forward(self, q, k, v, bias):
            s = torch.matmul(q, k.transpose(-1, -2)) * 0.125 + bias
            return torch.softmax(s, -1) @ v

    class RuntimeScale(torch.nn.Module):
        def forward(self, q, k, v):
            return F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v

    q, k, v = (torch.randn(2, 3, 8, 16) for _ in range(3))
    bias = torch.randn(8, 8)
    for mod, args in ((Additive(), (q, k, v, bias)), (RuntimeScale(), (q, k, v))):
        gm = torch.fx.symbolic_trace(mod)
        assert attention_rewrite.rewrite(gm.graph) == 1
        gm.recompile()
        assert "scaled_dot_product_attention" in gm.code
        torch.testing.assert_close(gm(*args), mod(*args), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scale_first", [False, True])
def test_a_lifted_scale_attribute_under_dynamic_shapes_is_the_sdpa_scale(scale_first):
    """``dynamic=True`` lifts a module's float ``self.scaling`` (transformers' eager attention multiplies
    by one) to an input read with ``.item()``: swapped, equal at two lengths, and a changed attribute
    reaches SDPA (the factor is passed on, not folded in)."""
    import torch

    class Scaled(torch.nn.Module):
        scaling = 0.125

        def forward(self, q, k, v):
            s = q @ k.transpose(-2, -1)
            s = self.scaling * s if scale_first else s * self.scaling
            return torch.softmax(s, dim=-1) @ v

    torch.manual_seed(0)
    m = Scaled()
    codes = []
    compiled, counts = compiled_with_rewrite(m, attention_rewrite, codes=codes, dynamic=True)
    for n in (8, 12, 10):
        q, k, v = (torch.randn(2, 3, n, 16) for _ in range(3))
        torch.testing.assert_close(compiled(q, k, v), m(q, k, v), atol=1e-5, rtol=1e-5)
    assert counts and all(c == 1 for c in counts), counts
    assert "scaled_dot_product_attention" in codes[0], codes[0]
    # torch >= 2.9 lifts the attribute (torch 2.7 folds 0.125 in and guards on it): the lifted form is matched
    assert "item()" in codes[0] or torch.torch_version.TorchVersion(torch.__version__) < "2.9", codes[0]
    m.scaling = 0.5
    torch.testing.assert_close(compiled(q, k, v), m(q, k, v), atol=1e-5, rtol=1e-5)


def test_forms_that_are_not_equal_are_left_alone():
    import torch
    import torch.nn.functional as F

    class Dropout(torch.nn.Module):
        def forward(self, q, k, v):
            return F.dropout(F.softmax(q @ k.transpose(-2, -1), dim=-1), 0.1) @ v

    class FiniteFill(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return F.softmax((q @ k.transpose(-2, -1)).masked_fill(mask, -1.0), dim=-1) @ v

    class OtherDim(torch.nn.Module):
        def forward(self, q, k, v):
            return F.softmax(q @ k.transpose(-2, -1), dim=-2) @ v

    class Reused(torch.nn.Module):
        def forward(self, q, k, v):
            p = F.softmax(q @ k.transpose(-2, -1), dim=-1)
            return p @ v, p

    for mod in (Dropout(), FiniteFill(), OtherDim(), Reused()):
        gm = torch.fx.symbolic_trace(mod)
        assert attention_rewrite.rewrite(gm.graph) == 0, type(mod).__name__


def test_catalog_entries_have_sources_and_detect_the_example():
    entries = rewrite_catalog.load_catalog()
    assert {e["id"] for e in entries} >= {"attention_by_hand", "norm_by_hand", "large_vocab_cross_entropy",
                                          "gated_activation", "scatter_add", "tiny_launches"}
    assert all(e["source"] and e["conditions"] for e in entries)
    found = rewrite_catalog.detect([("triton_per_fused__softmax_div_masked_fill_0", 0.31)],
                                   [EXAMPLE / "model.py"], [])
    att = next(f for f in found if f["id"] == "attention_by_hand")
    code = next(h for h in att["found_by"] if h["how"] == "model_code")
    assert code["function"] == "forward" and "F.softmax(att, dim=-1)" in \
        next(s["text"] for s in code["snippet"] if s["line"] == code["line"])
    assert att["found_by"][0] == {"how": "kernel_name", "kernel": "triton_per_fused__softmax_div_masked_fill_0",
                                  "share": 0.31}
    assert att["arm"] == "sdpa"


@pytest.mark.parametrize("name, rid", [
    ("triton_red_fused_add_mean_mul_pow_rsqrt_0", "norm_by_hand"),
    ("triton_red_fused__log_softmax_nll_loss_0", "large_vocab_cross_entropy"),
    ("triton_poi_fused_mul_silu_1", "gated_activation"),
    ("triton_poi_fused_index_add_mul_1", "scatter_add"),
])
def test_catalog_kernel_names(name, rid):
    assert rid in [f["id"] for f in rewrite_catalog.detect([(name, 0.1)], [], [])]


def test_bad_catalog_is_one_input_error(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("rewrites:\n  - id: x\n    pattern: p\n")
    with pytest.raises(InputError, match="missing detect, replacement"):
        rewrite_catalog.load_catalog(bad)


def test_sdpa_arm_planned_from_the_facts():
    names = [a.name for a in trial_plan.plan_arms(None, {})]
    assert "sdpa" in names
    facts = trial_plan.Facts(kernels={"triton_per_fused__softmax_div_masked_fill_0": {}}, given=True)
    arm = {a.name: a for a in trial_plan.plan_arms(facts, {"gpu": True})}["sdpa"]
    assert arm.skip is None and arm.env == {"TKO_SDPA_REWRITE": "1"}
    assert "triton_per_fused__softmax_div_masked_fill_0" in arm.proposed_by
    plain = trial_plan.Facts(kernels={"triton_poi_fused_add_0": {}}, given=True)
    assert {a.name: a for a in trial_plan.plan_arms(plain, {"gpu": True})}["sdpa"].skip


def test_an_arm_that_replaced_nothing_is_not_applied():
    rec = {"status": "ok"}
    graph_rewrites.check_trial(rec, {"TKO_SDPA_REWRITE": "1"}, "TKO_SDPA: replaced 0 attention pattern(s) in 2 graph(s)\n")
    assert rec["status"] == "not applied" and "no attention pattern was replaced" in rec["error"]
    rec = {"status": "ok"}
    graph_rewrites.check_trial(rec, {"TKO_SDPA_REWRITE": "1"}, "TKO_SDPA: replaced 1 attention pattern(s) in 1 graph(s)\n")
    assert rec["status"] == "ok" and rec["replaced"].startswith("replaced 1")


def test_investigation_section_shows_before_after_and_the_measured_gain(tmp_path):
    trials = {"schema": "remedy_trials/1", "arms": [
        {"name": "baseline", "status": "ok", "median_ms": 9.25, "peak_memory_mb": 2310.0},
        {"name": "sdpa", "status": "ok", "median_ms": 5.0, "x_baseline": 1.85, "beyond_noise": True,
         "outputs": {"result": "equal"}, "peak_memory_mb": 820.0,
         "replaced": ["replaced 1 attention pattern(s) in 1 graph(s)",
                      "replaced 1 attention pattern(s) in 1 graph(s), 1 with is_causal=True (the causal mask "
                      "asserted on every call)"]}]}
    (tmp_path / "trials").mkdir()
    (tmp_path / "trials" / "trials.json").write_text(json.dumps(trials))
    profile = {"ranking": [{"name": "triton_per_fused__softmax_div_masked_fill_0", "origin": "triton", "share": 0.4}]}
    result = {"repro": ["python", str(EXAMPLE / "step.py")], "kernels": [], "program": None,
              "trials": {"path": "trials/trials.json"}}
    found = rewrites.section(result, tmp_path, profile)
    assert [f["id"] for f in found] == ["attention_by_hand"]
    assert found[0]["measured"]["x_baseline"] == 1.85
    md = "\n".join(rewrites.markdown(found, "python step.py"))
    assert "`model.py:" in md and "F.softmax(att, dim=-1)" in md and "F.scaled_dot_product_attention(q, k, v" in md
    assert "1.850x (9.25 -> 5 ms/step, beyond run-to-run noise)" in md and "peak memory 2310 -> 820 MiB" in md
    assert "The pass: replaced 1 attention pattern(s) in 1 graph(s), 1 with is_causal=True" in md   # the last run's
    assert "write `is_causal=True` in place of the `attn_mask=` argument" in md
    # an arm no faster than the baseline is told nothing to write: the trial says what it measured, no more
    found[0]["measured"].update(x_baseline=0.98, beyond_noise=False)
    md = "\n".join(rewrites.markdown(found, "python step.py"))
    assert "so that is what was measured." in md and "write `is_causal=True`" not in md


def test_a_rewrite_pass_joins_a_pass_already_set(monkeypatch, capsys):
    """The pre-grad pass a program set itself still runs, before the rewrite; the count is reported."""
    import torch
    import torch._inductor.config as cfg

    seen = []
    monkeypatch.setattr("atexit.register", lambda fn: seen.append(fn))
    with cfg.patch(pre_grad_custom_pass=lambda graph: seen.append(graph)):
        graph_rewrites.install_from_env({"TKO_SDPA_REWRITE": "1"})
        gm = torch.fx.symbolic_trace(torch.nn.Linear(4, 4))
        cfg.pre_grad_custom_pass(gm.graph)
    assert seen[1] is gm.graph          # the program's own pass ran
    seen[0]()                            # the exit report
    assert "TKO_SDPA: replaced 0 attention pattern(s) in 1 graph(s)" in capsys.readouterr().err
