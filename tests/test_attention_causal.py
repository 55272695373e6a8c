"""A causal mask in hand-written attention: the sdpa rewrite reads its value when the graph is
compiled, swaps in ``is_causal=True`` (no explicit mask: SDPA's causal kernels) with outputs and
gradients equal, and asserts on every later call that the mask is still causal; a mask that is not
causal (padding, random, bottom-right aligned) stays an explicit ``attn_mask``."""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT
from fx_rewrite import compiled_with_rewrite
from tko.remedies import attention_rewrite, graph_rewrites

EXAMPLE = ROOT / "examples" / "attention_by_hand"


@pytest.fixture(scope="module")
def example():
    sys.path.insert(0, str(EXAMPLE))
    try:
        import hf_eager
        import model
        yield model, hf_eager
    finally:
        sys.path.remove(str(EXAMPLE))


def _swapped(module, args, grads_of=()):
    """(the rewritten graph's code, outputs equal to the module's, the compiled callable)."""
    import torch

    ref = module(*args)
    ref.float().sum().backward()
    want = [t.grad.clone() for t in grads_of]
    for t in grads_of:
        t.grad = None
    codes = []
    compiled, counts = compiled_with_rewrite(module, attention_rewrite, codes=codes)
    out = compiled(*args)
    assert counts == [1]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    out.float().sum().backward()
    for t, w in zip(grads_of, want):
        torch.testing.assert_close(t.grad, w, atol=1e-5, rtol=1e-5)
    return codes[0], compiled


def test_the_example_causal_mask_becomes_is_causal_and_a_changed_mask_fails(example):
    import torch

    model, _ = example
    torch.manual_seed(0)
    m = model.HandAttention(64, 4)
    x = torch.randn(2, 16, 64, requires_grad=True)
    mask = model.causal_mask(16, "cpu")
    before = attention_rewrite._said["causal"]
    code, compiled = _swapped(m, (x, mask), grads_of=(x,))
    assert "is_causal = True" in code and "logical_not" not in code and "_assert_async" in code
    assert attention_rewrite._said["causal"] == before + 1
    assert f", {before + 1} with is_causal=True" in attention_rewrite.detail()
    torch.testing.assert_close(compiled(x, mask), m(x, mask), atol=1e-5, rtol=1e-5)   # the guard passes
    opened = mask.clone()
    opened[5, 9] = False                # query 5 now sees key 9: not causal, same shape, same graph
    with pytest.raises(RuntimeError, match="no longer causal"):
        compiled(x, opened)


class _Causal:
    """Causal masks as programs write them, each in a module taking (q, k, v[, mask])."""

    @staticmethod
    def modules(hf_eager):
        import torch
        import torch.nn.functional as F

        class Additive(torch.nn.Module):        # Hugging Face's eager form: scores + (0 / -inf)
            def forward(self, q, k, v, mask):
                return F.softmax(torch.matmul(q, k.transpose(2, 3)) * 0.25 + mask, dim=-1) @ v

        class Buffer(torch.nn.Module):          # nanoGPT: a tril buffer, sliced and compared in forward
            def __init__(self):
                super().__init__()
                self.register_buffer("bias", torch.tril(torch.ones(32, 32)).view(1, 1, 32, 32))

            def forward(self, q, k, v):
                t = q.size(-2)
                att = (q @ k.transpose(-2, -1)) * 0.25
                att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
                return F.softmax(att, dim=-1) @ v

        class Built(torch.nn.Module):           # made inside forward from q's length
            def forward(self, q, k, v):
                t = q.shape[-2]
                blocked = torch.triu(torch.ones(t, t, dtype=torch.bool, device=q.device), diagonal=1)
                return F.softmax((q @ k.transpose(-2, -1)).masked_fill(blocked, -1e9), dim=-1) @ v

        class Combined(torch.nn.Module):        # positions compared, & a key-padding mask, inverted
            def forward(self, q, k, v, keep):
                pos = torch.arange(q.shape[-2])
                allowed = (pos[None, :] <= pos[:, None]) & keep[:, None, None, :]
                return F.softmax((q @ k.transpose(-2, -1)).masked_fill(~allowed, float("-inf")), dim=-1) @ v

        n = 16
        finfo_min = torch.zeros(n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), torch.finfo(torch.float32).min)
        return [("additive -inf", Additive(), [hf_eager.additive_causal_mask(n, "cpu", torch.float32)]),
                ("additive finfo.min", Additive(), [finfo_min]),
                ("batched additive", Additive(), [hf_eager.additive_causal_mask(n, "cpu", torch.float32).expand(2, 1, n, n)]),
                ("buffer slice == 0", Buffer(), []),
                ("positions & no padding", Combined(), [torch.ones(2, n, dtype=torch.bool)]),
                ("built in forward", Built(), [])]


def test_causal_masks_as_programs_write_them(example):
    import torch

    _, hf_eager = example
    for label, module, extra in _Causal.modules(hf_eager):
        q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
        code, _ = _swapped(module, (q, k, v, *extra), grads_of=(q, k, v))
        assert "is_causal = True" in code and "attn_mask" not in code, label


def _not_causal():
    import torch

    n = 16
    causal = torch.ones(n, n, dtype=torch.bool).triu(1)
    padding = torch.zeros(2, 1, 1, n, dtype=torch.bool)
    padding[1, ..., 12:] = True
    shifted = causal.clone()
    shifted[3, 3] = True                # the diagonal blocked once
    return [("padding", padding, n), ("shifted", shifted, n), ("longer keys, bottom-right", torch.ones(4, n, dtype=torch.bool).triu(n - 4 + 1), 4)]


def test_masks_that_are_not_causal_stay_explicit(monkeypatch):
    import torch
    import torch.nn.functional as F

    class Masked(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return F.softmax((q @ k.transpose(-2, -1)).masked_fill(mask, float("-inf")), dim=-1) @ v

    for label, mask, n_q in _not_causal():
        q = torch.randn(2, 4, n_q, 8, requires_grad=True)
        k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(2))
        code, _ = _swapped(Masked(), (q, k, v, mask), grads_of=(q, k, v))
        assert "is_causal" not in code and "attn_mask = logical_not" in code, label
    monkeypatch.setenv(attention_rewrite.CAUSAL_ENV, "0")
    q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
    code, _ = _swapped(Masked(), (q, k, v, torch.ones(16, 16, dtype=torch.bool).triu(1)), grads_of=(q, k, v))
    assert "is_causal" not in code, "TKO_SDPA_CAUSAL=0 keeps the causal mask explicit"


def test_a_mask_made_in_place_is_not_evaluated_and_stays_explicit():
    """Reading the mask runs its graph ancestors on the real inputs: an in-place op among them would
    change the program's own tensor, so such a mask is not read (the buffer is left as it was)."""
    import torch
    import torch.nn.functional as F

    class InPlace(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("blocked", torch.zeros(16, 16, dtype=torch.bool))

        def forward(self, q, k, v):
            mask = self.blocked.logical_or_(torch.ones(16, 16, dtype=torch.bool).triu(1))
            return F.softmax((q @ k.transpose(-2, -1)).masked_fill(mask, float("-inf")), dim=-1) @ v

    m = InPlace()
    q = torch.randn(2, 4, 16, 8)
    codes = []
    compiled, counts = compiled_with_rewrite(m, attention_rewrite, codes=codes)
    m.blocked.zero_()
    calls = []
    real = attention_rewrite._run_node
    attention_rewrite._run_node = lambda n, gm, resolve: calls.append(n.target) or real(n, gm, resolve)
    try:
        out = compiled(q, q, q)
    finally:
        attention_rewrite._run_node = real
    assert counts == [1] and "is_causal" not in codes[0] and "logical_or_" in calls
    m.blocked.zero_()
    torch.testing.assert_close(out, InPlace()(q, q, q), atol=1e-5, rtol=1e-5)


def test_a_mask_whose_value_is_unknown_stays_explicit():
    """A symbolic trace records no input values: the mask cannot be read, so it stays explicit."""
    import torch
    import torch.nn.functional as F

    class Masked(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return F.softmax((q @ k.transpose(-2, -1)).masked_fill(mask, float("-inf")), dim=-1) @ v

    gm = torch.fx.symbolic_trace(Masked())
    assert attention_rewrite.rewrite(gm.graph) == 1
    gm.recompile()
    assert "is_causal" not in gm.code and "attn_mask" in gm.code


def test_under_inductor_the_causal_swap_trains_equal_and_the_guard_survives(example, monkeypatch):
    """The trial's path: the pre-grad pass inside Inductor (AOT autograd, Inductor's CPU code); the
    guard is not dropped as dead code: a changed mask fails the call or gives NaN."""
    import torch
    import torch._inductor.config as cfg

    model, _ = example
    monkeypatch.setattr("atexit.register", lambda fn: None)
    torch.manual_seed(0)
    m = model.HandAttention(64, 4)
    x = torch.randn(2, 16, 64, requires_grad=True)
    mask = model.causal_mask(16, "cpu")
    ref = m(x, mask)
    ref.sum().backward()
    want, x.grad = x.grad.clone(), None
    before = attention_rewrite._said["causal"]
    with cfg.patch(pre_grad_custom_pass=None):
        graph_rewrites.install(attention_rewrite)
        torch._dynamo.reset()
        compiled = torch.compile(m)
        out = compiled(x, mask)
        out.sum().backward()
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(x.grad, want, atol=1e-5, rtol=1e-5)
        assert attention_rewrite._said["causal"] == before + 1
        opened = mask.clone()
        opened[5, 9] = False
        try:
            changed = compiled(x, opened)
        except RuntimeError as e:   # Inductor lowers the assert (torch >= 2.9 or so)
            assert "no longer causal" in str(e)
        else:                       # Inductor decomposes it to nothing (torch 2.7): the output says so
            assert changed.isnan().all()
    torch._dynamo.reset()


def test_where_the_assert_is_compiled_out_a_changed_mask_gives_nan(example, monkeypatch):
    """Inductor on ROCm compiles device asserts out, and torch 2.7's Inductor decomposes the assert to
    nothing: the attention's output is NaN on such a call, so the trials' output check sees it."""
    import torch

    model, _ = example
    monkeypatch.setattr(torch, "_assert_async", lambda *args: None)
    monkeypatch.setattr("fx_rewrite.assert_cacheable", lambda nodes: None)     # the stand-in is not cacheable
    torch.manual_seed(0)
    m = model.HandAttention(64, 4)
    x = torch.randn(2, 16, 64)
    mask = model.causal_mask(16, "cpu")
    codes = []
    compiled, counts = compiled_with_rewrite(m, attention_rewrite, codes=codes)
    torch.testing.assert_close(compiled(x, mask), m(x, mask), atol=1e-5, rtol=1e-5)
    assert counts == [1] and "is_causal = True" in codes[0] and "torch.where" in codes[0]
    opened = mask.clone()
    opened[5, 9] = False
    assert compiled(x, opened).isnan().all() and not m(x, opened).isnan().any()


@pytest.mark.slow
@pytest.mark.parametrize("guard", ["assert", "nan"])
def test_a_trial_whose_mask_stops_being_causal_retries_with_the_mask_explicit(run_script, fixtures_dir, tmp_path,
                                                                              guard):
    """The whole path on the CPU: the first call's mask is causal, the next ones are padded; the sdpa
    arm's first run fails its guard (its assert, or where that is compiled out its NaN outputs), the
    arm retries with TKO_SDPA_CAUSAL=0 and is measured, outputs equal. (On a transformers Llama train
    step whose first batch had no padding: the same.)"""
    env = {"MASK_STEP_NO_ASSERT": "1" if guard == "nan" else "0"}
    proc = run_script("try_remedies.py", "--allow-device-mismatch", "--out", tmp_path / "t", "--runs", "1",
                      "--max-runs", "1", "--arms", "sdpa", "--", sys.executable,
                      fixtures_dir / "repros" / "mask_changes_step.py", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    import json

    doc = json.loads((tmp_path / "t" / "trials.json").read_text())
    sdpa = {a["name"]: a for a in doc["arms"]}["sdpa"]
    assert sdpa["status"] == "ok" and sdpa["outputs"]["result"] == "equal", sdpa
    assert sdpa["settings"]["env"] == {"TKO_SDPA_REWRITE": "1", "TKO_SDPA_CAUSAL": "0"}
    assert sdpa["replaced"][-1] == "replaced 1 attention pattern(s) in 1 graph(s)"      # the retry: mask explicit
    import torch
    from torch._inductor.decomposition import decompositions

    dropped = torch.ops.aten._assert_async.msg in decompositions    # torch 2.7's Inductor: the NaN shows it
    said = "no longer causal" if guard == "assert" and not dropped else "its outputs were NaN where the baseline's"
    assert any(n.startswith("sdpa: run 1 failed its rewrite's guard") and said in n for n in doc["notes"]), doc["notes"]
    assert len(sdpa["logs"]) == 2 and len(sdpa["ms"]) == 1


def test_an_sdpa_call_given_a_causal_mask_takes_is_causal():
    """A program that already calls F.scaled_dot_product_attention but passes its causal mask
    explicitly (True where a query may attend, or additive) keeps SDPA off its flash kernels: the arm
    swaps in is_causal=True, guarded; a padding mask, or is_causal already on, is left alone."""
    import torch
    import torch.nn.functional as F

    class Masked(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)

    class Positional(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, mask, 0.0, False, scale=0.3)

    n = 16
    keep = torch.ones(n, n, dtype=torch.bool).tril()
    additive = torch.zeros(n, n).masked_fill(~keep, float("-inf"))
    for label, module, mask in (("bool keep", Masked(), keep), ("additive", Masked(), additive),
                                ("positional", Positional(), keep)):
        q, k, v = (torch.randn(2, 4, n, 8, requires_grad=True) for _ in range(3))
        code, compiled = _swapped(module, (q, k, v, mask), grads_of=(q, k, v))
        assert "is_causal = True" in code and "attn_mask" not in code and "scale = 0.3" in code, label
        opened = mask.clone()
        opened[3, 9] = True if mask.dtype == torch.bool else 0.0
        with pytest.raises(RuntimeError, match="no longer causal"):
            compiled(q, k, v, opened)
    padding = torch.ones(2, 1, 1, n, dtype=torch.bool)
    padding[1, ..., 12:] = False
    q = torch.randn(2, 4, n, 8)
    for module, args in ((Masked(), (q, q, q, padding)),):
        compiled, counts = compiled_with_rewrite(module, attention_rewrite)
        compiled(*args)
        assert counts == [0]

    class AlreadyCausal(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    compiled, counts = compiled_with_rewrite(AlreadyCausal(), attention_rewrite)
    compiled(q, q, q)
    assert counts == [0]


def test_the_catalog_finds_an_sdpa_call_given_a_causal_mask(tmp_path):
    from tko.read import rewrite_catalog

    src = tmp_path / "model.py"
    src.write_text("import torch\nimport torch.nn.functional as F\n\n\n"
                   "def attend(q, k, v):\n"
                   "    keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()\n"
                   "    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)\n\n\n"
                   "def already(q, k, v):   # causal through the flag: nothing to change\n"
                   "    return F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True)\n")
    found = {f["id"]: f for f in rewrite_catalog.detect([], [src], [])}
    hits = found["sdpa_causal_mask"]["found_by"]
    assert [(h["function"], h["line"]) for h in hits] == [("attend", 7)]
    assert found["sdpa_causal_mask"]["arm"] == "sdpa" and "attention_by_hand" not in found


class _Grouped:
    """Grouped-query attention as transformers writes it: 2 key/value heads repeated for 4 query heads
    (repeat_kv, or repeat_interleave), then the hand-written form with a causal mask."""

    @staticmethod
    def module(repeat: str):
        import torch
        import torch.nn.functional as F

        def repeat_kv(x, n_rep):
            if repeat == "interleave":
                return x.repeat_interleave(n_rep, dim=1)
            b, h, s, d = x.shape
            return x[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)

        class Grouped(torch.nn.Module):
            def forward(self, q, k, v, mask):
                k, v = repeat_kv(k, 2), repeat_kv(v, 2)
                s = torch.matmul(q, k.transpose(2, 3)) * 0.35
                return F.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v

        return Grouped()


@pytest.mark.parametrize("repeat", ["expand", "interleave"])
def test_grouped_query_attention_reads_the_shared_heads(repeat):
    """With is_causal the swap passes the 2 shared key/value heads and enable_gqa=True (FlashAttention
    and the math kernel take it): the repeated copies are gone. With an explicit mask it keeps the
    repeated heads (the memory-efficient kernel, the one a mask allows, does not take GQA)."""
    import torch

    q = torch.randn(2, 4, 16, 8, requires_grad=True)
    k, v = (torch.randn(2, 2, 16, 8, requires_grad=True) for _ in range(2))
    causal = torch.ones(16, 16, dtype=torch.bool).triu(1)
    code, _ = _swapped(_Grouped.module(repeat), (q, k, v, causal), grads_of=(q, k, v))
    assert "enable_gqa = True" in code and "is_causal = True" in code
    assert "expand" not in code and "repeat_interleave" not in code
    padding = causal | torch.zeros(16, dtype=torch.bool).index_fill(0, torch.tensor([14, 15]), True)
    for t in (q, k, v):
        t.grad = None
    code, _ = _swapped(_Grouped.module(repeat), (q, k, v, padding), grads_of=(q, k, v))
    assert "enable_gqa" not in code and "attn_mask" in code


def test_dynamic_lengths_read_the_mask_at_the_compiled_call_and_check_every_length(example):
    """Under dynamic shapes the lengths are symbols: the mask is read at the length compiled, and the
    graph's check runs at every length the one graph serves."""
    import torch

    model, _ = example
    torch.manual_seed(0)
    m = model.HandAttention(64, 4)
    codes = []
    compiled, counts = compiled_with_rewrite(m, attention_rewrite, codes=codes, dynamic=True)
    for n in (16, 24):
        x = torch.randn(2, n, 64)
        torch.testing.assert_close(compiled(x, model.causal_mask(n, "cpu")), m(x, model.causal_mask(n, "cpu")),
                                   atol=1e-5, rtol=1e-5)
    assert counts == [1] and "is_causal = True" in codes[0]
    opened = model.causal_mask(24, "cpu")
    opened[5, 9] = False
    with pytest.raises(RuntimeError, match="no longer causal"):
        compiled(torch.randn(2, 24, 64), opened)


def test_a_mask_made_from_a_symbolic_length_is_read_at_its_value(example):
    """Under dynamic shapes a mask made in forward from the sequence length reads the length as a
    graph input (a SymInt): its value at the compiled call is used (transformers builds its causal
    mask so, and its dynamic graphs were never read)."""
    import torch

    _, hf_eager = example
    built = next(mod for label, mod, _ in _Causal.modules(hf_eager) if label == "built in forward")
    codes = []
    compiled, counts = compiled_with_rewrite(built, attention_rewrite, codes=codes, dynamic=True)
    for n in (16, 24):
        q = torch.randn(2, 4, n, 8)
        torch.testing.assert_close(compiled(q, q, q), built(q, q, q), atol=1e-5, rtol=1e-5)
    assert counts == [1] and "is_causal = True" in codes[0]
    assert ": torch.SymInt" in codes[0]      # the length came in as a graph input
