"""Large-vocabulary cross entropy and scatter-add: the FX rewrites swap in the chunked linear +
cross-entropy op and a sorted segment reduction with equal outputs and gradients on the CPU, leave
unequal forms alone, compile under Inductor, the catalog's kernel names match what Inductor names
the patterns' kernels, and the ce_chunked / segment_reduce trial arms are planned from the facts."""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT
from fx_rewrite import compiled_with_rewrite
from tko.chains import trial_plan
from tko.read import rewrite_catalog
from tko.remedies import cross_entropy_rewrite as ce_rw
from tko.remedies import graph_rewrites
from tko.remedies import scatter_rewrite as sc_rw

torch = pytest.importorskip("torch")
F = torch.nn.functional
V, D = 300, 32

def _grads(out, inputs, grad_out=None):
    return torch.autograd.grad(out, [x for x in inputs if x is not None], grad_out)


@pytest.fixture
def lm():
    torch.manual_seed(0)
    h = torch.randn(2, 32, D, requires_grad=True)
    w = torch.randn(V, D, requires_grad=True)
    b = torch.randn(V, requires_grad=True)
    y = torch.randint(0, V, (2, 32))
    y[0, :5] = 7
    y[1, 3] = 7
    return h, w, b, y


def _ignored(y):
    """The targets with the 7s set to the default ignore_index (-100)."""
    return torch.where(y == 7, -100, y)


CE_FORMS = {
    "linear_bias_sum_ignore": (lambda h, w, b, y: F.cross_entropy(F.linear(h.view(-1, D), w, b), y.view(-1),
                                                                  ignore_index=7, reduction="sum"), True),
    "matmul_T_mean": (lambda h, w, b, y: F.cross_entropy(h.reshape(-1, D) @ w.T, _ignored(y).reshape(-1)), False),
    "lm_view_mean_ignore": (lambda h, w, b, y: F.cross_entropy((h @ w.t()).view(-1, V), y.view(-1),
                                                               ignore_index=7), False),
    "linear_flatten_mean": (lambda h, w, b, y: F.cross_entropy(F.linear(h, w, b).flatten(0, 1),
                                                               _ignored(y).flatten()), True),
    "module_transpose_sum": (lambda h, w, b, y: torch.nn.CrossEntropyLoss(reduction="sum")(
        torch.matmul(h.reshape(-1, D), w.transpose(0, 1)), _ignored(y).reshape(-1)), False),
}


@pytest.mark.parametrize("form", sorted(CE_FORMS))
def test_ce_swap_keeps_loss_and_gradients(lm, form):
    fn, has_bias = CE_FORMS[form]
    h, w, b, y = lm
    inputs = (h, w, b if has_bias else None)
    ref = fn(h, w, b, y)
    ref_grads = _grads(ref, inputs)
    compiled, counts = compiled_with_rewrite(fn, ce_rw)
    out = compiled(h, w, b, y)
    assert counts == [1]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    for got, want in zip(_grads(out, inputs), ref_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_ce_without_gradients_skips_the_gradient_work(lm):
    h, w, b, y = lm
    fn = CE_FORMS["lm_view_mean_ignore"][0]
    compiled, counts = compiled_with_rewrite(fn, ce_rw)
    with torch.no_grad():
        out, ref = compiled(h, w, b, y), fn(h, w, b, y)
    assert counts == [1]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    loss, gh, gw, gb = ce_rw.op()(h.detach().view(-1, D), w.detach(), None, y.view(-1), -100, "mean", 16, False)
    assert gh.numel() == gw.numel() == gb.numel() == 0


def test_ce_forms_that_are_not_equal_are_left_alone(lm):
    h, w, b, y = lm
    yf, yp = y.view(-1).clamp(min=0), torch.softmax(torch.randn(64, V), -1)
    forms = {
        "label_smoothing": lambda: F.cross_entropy(h.view(-1, D) @ w.T, yf, label_smoothing=0.1),
        "class_weight": lambda: F.cross_entropy(h.view(-1, D) @ w.T, yf, weight=b.detach().abs()),
        "reduction_none": lambda: F.cross_entropy(h.view(-1, D) @ w.T, yf, reduction="none"),
        "probability_targets": lambda: F.cross_entropy(h.view(-1, D) @ w.T, yp),
        "logits_used_twice": lambda: (lambda z: (F.cross_entropy(z, yf), z.argmax(-1)))(h.view(-1, D) @ w.T),
        "class_dim_not_last": lambda: F.cross_entropy(h @ w.T, torch.randint(0, 32, (2, V))),
        "untransposed_weight": lambda: F.cross_entropy(h.view(-1, D) @ w.T.contiguous(), yf),
    }
    for name, form in forms.items():
        compiled, counts = compiled_with_rewrite(lambda h, w, b, y: form(), ce_rw)
        compiled(h, w, b, y)
        assert counts and not any(counts), name


def test_ce_op_never_holds_the_full_logits():
    """Every tensor the op makes that has a vocabulary dim has at most chunk_rows rows."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Shapes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.shapes = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    self.shapes.append(tuple(t.shape))
            return out

    torch.manual_seed(0)
    n, rows = 256, 16
    h, w, b = torch.randn(n, D), torch.randn(V, D), torch.randn(V)
    y = torch.randint(0, V, (n,))
    with Shapes() as seen:          # the op's body, whose aten calls the mode sees one by one
        loss, gh, gw, gb = ce_rw._forward(h, w, b, y, -100, "mean", rows, True)
    with_vocab = [s for s in seen.shapes if len(s) == 2 and s[1] == V and s != (D, V)]     # not W.t()
    assert with_vocab and max(s[0] for s in with_vocab) == rows
    assert (n, V) not in seen.shapes
    ref = torch.func.grad_and_value(lambda h, w, b: F.cross_entropy(F.linear(h, w, b), y), argnums=(0, 1, 2))(h, w, b)
    torch.testing.assert_close(loss, ref[1], atol=1e-5, rtol=1e-5)
    for got, want in zip((gh, gw, gb), ref[0]):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    rows = ce_rw.default_chunk_rows(128256)
    assert 0 < rows * 128256 * 4 <= ce_rw.CHUNK_BYTES and rows % 64 == 0
    assert ce_rw.default_chunk_rows(10 ** 9) == 1
    assert ce_rw.default_chunk_rows(32000, 8192) == 1024 and ce_rw.default_chunk_rows(128256, 8192) == 512


def _real_inductor(mod, fn, *args):
    """fn compiled by Inductor (the default backend) with mod's rewrite as the pre-grad pass."""
    import torch._inductor.config as cfg

    counts = []
    torch._dynamo.reset()
    try:
        with cfg.patch(pre_grad_custom_pass=lambda graph: counts.append(mod.rewrite(graph))):
            return torch.compile(fn)(*args), counts
    finally:
        torch._dynamo.reset()


def test_ce_rewrite_compiles_under_inductor(lm):
    h, w, b, y = lm
    fn = CE_FORMS["linear_bias_sum_ignore"][0]
    ref = fn(h, w, b, y)
    ref_grads = _grads(ref, (h, w, b))
    out, counts = _real_inductor(ce_rw, fn, h, w, b, y)
    assert counts == [1]
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-5)
    for got, want in zip(_grads(out, (h, w, b)), ref_grads):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)


def _scatter_forms():
    def index_add_inplace(x, i, s):
        out = torch.zeros_like(x)
        return out.index_add_(0, i, s)

    def index_add_then_read(x, i, s):
        out = torch.zeros_like(x)
        out.index_add_(0, i, s)
        return out * 2

    def example(x, i, s):                  # examples/scatter_index_add.py's f, src gathered and weighted
        msg = x[i.flip(0)] * s[:, :1]
        return torch.zeros_like(x).index_add_(0, i, msg)

    return {"index_add_inplace": index_add_inplace, "index_add_then_read": index_add_then_read,
            "example": example,
            "torch_index_add": lambda x, i, s: torch.index_add(torch.zeros((10, 4)), 0, i, s),
            "new_zeros_index_add": lambda x, i, s: x.new_zeros(10, 4).index_add(0, i, s),
            "scatter_add_getitem": lambda x, i, s: torch.zeros(10, 4).scatter_add_(0, i[:, None].expand_as(s), s),
            "scatter_add_unsqueeze": lambda x, i, s: x.new_zeros(x.shape[0], 4).scatter_add(
                0, i.unsqueeze(1).expand(-1, 4), s)}


SCATTER_FORMS = _scatter_forms()


@pytest.fixture
def graph_data():
    torch.manual_seed(0)
    x = torch.randn(10, 4, requires_grad=True)
    i = (torch.rand(40) ** 3 * 10).long()       # skewed, as in examples/scatter_index_add.py
    s = torch.randn(40, 4, requires_grad=True)
    return x, i, s


@pytest.mark.parametrize("form", sorted(SCATTER_FORMS))
def test_scatter_swap_keeps_outputs_and_gradients(graph_data, form):
    fn = SCATTER_FORMS[form]
    x, i, s = graph_data
    ref = fn(x, i, s)
    grad_out = torch.randn_like(ref)
    ref_grads = _grads(ref, (x, s) if form == "example" else (s,), grad_out)
    compiled, counts = compiled_with_rewrite(fn, sc_rw)
    out = compiled(x, i, s)
    assert counts == [1]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    got = _grads(out, (x, s) if form == "example" else (s,), grad_out)
    for g, want in zip(got, ref_grads):
        torch.testing.assert_close(g, want, atol=1e-5, rtol=1e-5)
    if form not in ("example", "index_add_then_read"):
        torch.testing.assert_close(got[0], grad_out[i])        # index_add's gradient: grad_out[idx]


def test_scatter_forms_that_are_not_equal_are_left_alone(graph_data):
    x, i, s = graph_data
    xd = x.detach()
    forms = {
        "out_is_an_input": lambda: xd.clone().index_add_(0, i, s),
        "out_is_ones": lambda: torch.ones(10, 4).index_add_(0, i, s),
        "dim_1": lambda: torch.zeros(4, 10).index_add_(1, i, s.t()),
        "alpha": lambda: torch.zeros(10, 4).index_add_(0, i, s, alpha=2.0),
        "read_before": lambda: (lambda z: (z.sum(), z.index_add_(0, i, s)))(torch.zeros(10, 4)),
        "full_index": lambda: torch.zeros(10, 4).scatter_add_(0, torch.randint(0, 10, (40, 4)), s),
        "integer_src": lambda: torch.zeros(10, 4, dtype=torch.long).index_add_(0, i, s.detach().long()),
        "wider_out": lambda: torch.zeros(10, 6).scatter_add_(0, i[:, None].expand(-1, 4), s),
    }
    for name, form in forms.items():
        compiled, counts = compiled_with_rewrite(lambda x, i, s: form(), sc_rw)
        compiled(x, i, s)
        assert counts and not any(counts), name


def test_scatter_rewrite_compiles_under_inductor(graph_data):
    x, i, s = graph_data
    fn = SCATTER_FORMS["example"]
    ref = fn(x, i, s)
    ref_grads = _grads(ref.sum(), (x, s))
    out, counts = _real_inductor(sc_rw, fn, x, i, s)
    assert counts == [1]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    for got, want in zip(_grads(out.sum(), (x, s)), ref_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def _inductor_kernel_names(fn, *args) -> list[str]:
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    try:
        _, codes = run_and_get_code(torch.compile(fn), *args)
    finally:
        torch._dynamo.reset()
    return sorted({n for code in codes for n in re.findall(r"\b(?:cpp|triton_\w+?)_fused_\w+", code)})


def test_catalog_kernel_names_match_what_inductor_names_the_patterns(lm, graph_data):
    h, w, b, y = lm

    def ce_train(h, w, y):
        return torch.autograd.grad(F.cross_entropy((h @ w.T).view(-1, V), y.view(-1)), (h, w))

    x, i, s = graph_data
    for fn, args, rid in ((ce_train, (h, w, y), "large_vocab_cross_entropy"),
                          (SCATTER_FORMS["example"], (x.detach(), i, s.detach()), "scatter_add")):
        names = _inductor_kernel_names(fn, *args)
        assert names, rid
        hits = [f for f in rewrite_catalog.detect([(n, 0.1) for n in names], [], []) if f["id"] == rid]
        assert hits, (rid, names)
    # the recorded H200 profile of examples/scatter_index_add.py: its atomic kernel is the scatter_add entry
    profile = json.loads((ROOT / "examples/recorded_h200/scatter_index_add/profile/profile.json").read_text())
    top = profile["ranking"][0]["name"]
    assert top == "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1"
    assert "scatter_add" in [f["id"] for f in rewrite_catalog.detect([(top, 0.95)], [], [])]


@pytest.mark.parametrize("arm, rid, kernel, other", [
    ("ce_chunked", "large_vocab_cross_entropy", "triton_red_fused__log_softmax_nll_loss_forward_sub_1",  # H200
     "triton_poi_fused_add_0"),
    ("segment_reduce", "scatter_add", "triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1",
     "triton_poi_fused_zeros_like_0"),
])
def test_arms_planned_from_the_facts(arm, rid, kernel, other):
    mod = graph_rewrites.module(arm)
    assert mod.ARM == arm and arm in trial_plan.ARM_NAMES
    assert next(e for e in rewrite_catalog.load_catalog() if e["id"] == rid)["arm"] == arm
    facts = trial_plan.Facts(kernels={kernel: {}}, given=True)
    spec = {a.name: a for a in trial_plan.plan_arms(facts, {"gpu": True})}[arm]
    assert spec.skip is None and spec.env == {mod.ENV: "1"} and kernel in spec.proposed_by
    plain = trial_plan.Facts(kernels={other: {}}, given=True)
    assert {a.name: a for a in trial_plan.plan_arms(plain, {"gpu": True})}[arm].skip


@pytest.mark.parametrize("mod", [ce_rw, sc_rw])
def test_an_arm_that_replaced_nothing_is_not_applied(mod):
    rec = {"status": "ok"}
    graph_rewrites.check_trial(rec, {mod.ENV: "1"}, f"{mod.PREFIX}: replaced 0 {mod.NOUN}(s) in 3 graph(s)\n")
    assert rec["status"] == "not applied" and f"no {mod.NOUN} was replaced" in rec["error"]
    rec = {"status": "ok"}
    graph_rewrites.check_trial(rec, {mod.ENV: "1"}, f"{mod.PREFIX}: replaced 1 {mod.NOUN}(s) in 1 graph(s)\n")
    assert rec["status"] == "ok" and rec["replaced"].startswith("replaced 1")
