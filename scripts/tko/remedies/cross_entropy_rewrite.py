"""Large-vocabulary cross entropy -> a chunked linear + cross-entropy op, inside the unchanged program.

:func:`rewrite` rewrites an FX graph (the torch-level graph Dynamo hands Inductor, or a
``torch.fx.symbolic_trace``) where it finds, each intermediate used once::

    logits = F.linear(h, W[, b])          # or h @ W.T / h @ W.t() / h @ W.transpose(0, 1) / torch.mm / .mT
    logits = logits.view(-1, V)           # optional: view / reshape / flatten of (B, T, V) logits to (B*T, V)
    loss = F.cross_entropy(logits, y[, ignore_index=i][, reduction='mean' | 'sum'])   # or nn.CrossEntropyLoss

into ``loss = linear_cross_entropy(h, W, b, y, i, reduction)``: the op ``tko::linear_cross_entropy``
(a ``torch.library.custom_op`` with its own fake and autograd) loops over chunks of rows, computing
each chunk's logits (in the input dtype, as ``F.linear`` does), its log-softmax and loss in fp32 (as
``F.cross_entropy`` does for fp16/bf16 logits) and, when the loss needs gradients, the chunk's
gradient of the logits, from which it makes grad h and accumulates grad W (in W's dtype, in place,
one rounding per chunk, as Liger does: an fp32 V x D accumulator would cost what it saves) in the forward; the
backward only scales them by the loss's gradient (Liger-Kernel's FusedLinearCrossEntropy). The
N x V logits never exist at once: a chunk holds ``chunk_rows`` x V of them, by default <= 256 MiB in
fp32 and at most an eighth of the rows (:func:`default_chunk_rows`). ``mean`` divides by the count of targets not equal to
``ignore_index``, as ``F.cross_entropy`` does; the loss has the logits' dtype.

Left alone: ``label_smoothing``, a class ``weight``, ``reduction='none'``, the deprecated
``size_average`` / ``reduce``, logits used by anything besides the loss (or a view of them that is),
a view that does not keep the class dim last, probability (floating) targets, logits of another
dtype than h and W (autocast: the cast is not the op's), and a projection other than the forms above.
Where the graph carries Dynamo's ``example_value`` metadata these are checked on it; a symbolically
traced graph has none: a view of the logits is then left alone, and the op checks h is 2-D and the
targets are class indices at run time.

What it costs (H200, torch 2.11, compiled, bf16, 8192 tokens, hidden 2048, forward + grad h and
grad W, the op called directly): vocabulary 128256, peak memory over the inputs 1537 MiB against
2538 MiB for Inductor's F.cross_entropy(h @ W.T, y), at 31.6 ms against 20.9 ms a step (smaller
GEMMs, the chunk's softmax in eager ops, grad W read and written once per chunk); vocabulary 32000,
level memory (660 against 658 MiB) at 8.0 against 4.7 ms. Memory is the gain, not speed; the loss
was equal and the gradients within one bf16 ulp.

The trial arm ``ce_chunked`` (``TKO_CE_CHUNKED_REWRITE=1``) runs it as an Inductor pre-grad pass
(:mod:`tko.remedies.graph_rewrites`); AOT autograd differentiates the op through its registered
autograd, so the saved activations are grad h and grad W, not the logits. Trials record each arm's
``peak_memory_mb``. It prints ``TKO_CE_CHUNKED: replaced N cross-entropy pattern(s)`` at exit on stderr.
"""

from __future__ import annotations

import operator

from . import fx_match

ARM = "ce_chunked"
PREFIX = "TKO_CE_CHUNKED"
ENV = "TKO_CE_CHUNKED_REWRITE"
NOUN = "cross-entropy pattern"
NOT_FOUND = ("no torch.compile'd F.cross_entropy(F.linear(h, W[, b]) or h @ W.T[, .view(-1, V)], y) "
             "with mean or sum reduction, no weight or label smoothing, logits used only by the loss")
CHUNK_BYTES = 256 << 20     # a chunk's fp32 logits at most this (one row at least)
MIN_CHUNKS = 8
OP_NAME = "tko::linear_cross_entropy"
_OP = []


def default_chunk_rows(vocab: int, rows_total: int | None = None) -> int:
    """Rows per chunk: the chunk's fp32 logits within CHUNK_BYTES and at most an eighth of the rows
    (else a chunk's temporaries outweigh what it saves), a multiple of 64 when >= 64."""
    rows = max(1, CHUNK_BYTES // (4 * max(1, int(vocab))))
    if rows_total:
        rows = min(rows, max(1, -(-int(rows_total) // MIN_CHUNKS)))
    return rows - rows % 64 if rows >= 64 else rows


def _forward(h, weight, bias, target, ignore_index: int, reduction: str, chunk_rows: int, compute_grad: bool):
    """(loss, grad h, grad W, grad b) of cross_entropy(linear(h, weight, bias), target), chunk by chunk;
    the grads are empty tensors unless compute_grad (grad b also without a bias)."""
    import torch
    import torch.nn.functional as F

    if h.dim() != 2 or target.dim() != 1 or target.is_floating_point():
        raise ValueError(f"{OP_NAME}: h must be (N, D) and target (N,) class indices; got h {tuple(h.shape)}, "
                         f"target {tuple(target.shape)} {target.dtype}")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"{OP_NAME}: reduction must be 'mean' or 'sum', not {reduction!r}")
    n, d = h.shape
    v = weight.shape[0]
    rows = chunk_rows if chunk_rows > 0 else default_chunk_rows(v, n)
    valid = target != ignore_index
    count = valid.sum()
    total = torch.zeros((), dtype=torch.float32, device=h.device)
    empty = h.new_empty(0)
    # zeros, not empty: every row is written below, but no garbage can reach a GEMM output (N x D: cheap)
    grad_h = torch.zeros(n, d, dtype=h.dtype, device=h.device) if compute_grad else empty
    grad_w = torch.zeros_like(weight) if compute_grad else None
    grad_b = torch.zeros(v, dtype=torch.float32, device=h.device) if compute_grad and bias is not None else None
    # the gradient of one row's loss: 1/count for mean (0/0 -> nan, as F.cross_entropy), 1 for sum
    scale = (1.0 / count.to(torch.float32)) if reduction == "mean" else torch.ones((), device=h.device)
    for start in range(0, n, rows):
        hc, tc, vc = h[start:start + rows], target[start:start + rows], valid[start:start + rows]
        safe = torch.where(vc, tc, torch.zeros_like(tc))[:, None]
        # the input dtype's GEMM, then log-softmax in fp32 read straight from it (one fp32 chunk written)
        logp = torch.log_softmax(F.linear(hc, weight, bias), dim=-1, dtype=torch.float32)
        total -= torch.where(vc[:, None], logp.gather(1, safe), torch.zeros_like(safe, dtype=logp.dtype)).sum()
        if not compute_grad:
            continue
        # d loss_i / d logits_i = (softmax_i - onehot(target_i)) * s_i, s_i the row's scale (0 when ignored);
        # s_i is applied to the rows x D operands and results, never as a pass over the rows x V chunk
        g = logp.exp_()
        g.scatter_add_(1, safe, torch.full_like(safe, -1, dtype=g.dtype))
        s_rows = torch.where(vc, scale, torch.zeros_like(scale))[:, None]
        gc = g.to(h.dtype)
        out = grad_h[start:start + rows]
        torch.mm(gc, weight, out=out)
        out.copy_(out.float() * s_rows)                   # scaled in fp32: 1/count is not a bf16 number
        grad_w.addmm_(gc.t(), (hc.float() * s_rows).to(h.dtype))   # in place: no V x D temporary
        if grad_b is not None:
            grad_b += (s_rows.t() @ g).squeeze(0)
    loss = (total / count.to(torch.float32) if reduction == "mean" else total).to(h.dtype)
    if not compute_grad:        # outputs must not alias each other: three empty tensors
        return loss, empty, h.new_empty(0), h.new_empty(0)
    return loss, grad_h, grad_w, grad_b.to(bias.dtype) if grad_b is not None else empty


def op():
    """``torch.ops.tko.linear_cross_entropy`` (registered on first use, once per process)."""
    if _OP:
        return _OP[0]
    import torch

    lib_op = torch.library.custom_op(
        OP_NAME, _forward, mutates_args=(),
        schema="(Tensor h, Tensor weight, Tensor? bias, Tensor target, int ignore_index, str reduction, "
               "int chunk_rows, bool compute_grad) -> (Tensor, Tensor, Tensor, Tensor)")

    @lib_op.register_fake
    def _fake(h, weight, bias, target, ignore_index, reduction, chunk_rows, compute_grad):
        loss, empty = h.new_empty(()), h.new_empty(0)
        if not compute_grad:
            return loss, empty, h.new_empty(0), h.new_empty(0)
        return (loss, torch.empty_like(h), torch.empty_like(weight),
                torch.empty_like(bias) if bias is not None else h.new_empty(0))

    def setup_context(ctx, inputs, output):
        ctx.has_bias, ctx.computed = inputs[2] is not None, inputs[7]
        ctx.save_for_backward(*output[1:])

    def backward(ctx, grad_loss, *_unused):
        if not ctx.computed:
            raise RuntimeError(f"{OP_NAME}: called with compute_grad=False, then differentiated")
        grad_h, grad_w, grad_b = ctx.saved_tensors
        return (grad_loss * grad_h, grad_loss * grad_w, grad_loss * grad_b if ctx.has_bias else None,
                None, None, None, None, None)

    lib_op.register_autograd(backward, setup_context=setup_context)
    _OP.append(torch.ops.tko.linear_cross_entropy.default)
    return _OP[0]


def linear_cross_entropy(h, weight, bias, target, ignore_index: int = -100, reduction: str = "mean",
                         chunk_rows: int = 0, compute_grad: bool = True):
    """h's leading dims flattened, then the op; returns the loss (the pass inserts the same calls)."""
    return op()(h.flatten(0, -2), weight, bias, target, ignore_index, reduction, chunk_rows, compute_grad)[0]


def _targets():
    import torch
    import torch.nn.functional as F

    return {"linear": {F.linear, torch._C._nn.linear},
            "matmul": {operator.matmul, torch.matmul, torch.mm},
            "transpose": {torch.t, torch.transpose, torch.Tensor.t, torch.Tensor.transpose},
            "t": {torch.t, torch.Tensor.t},
            "view": {torch.reshape, torch.Tensor.view, torch.Tensor.reshape, torch.flatten, torch.Tensor.flatten},
            "cross_entropy": {F.cross_entropy}}


_METHODS = {"matmul": {"matmul", "mm"}, "transpose": {"t", "transpose"}, "view": {"view", "reshape", "flatten"},
            "linear": set(), "cross_entropy": set()}


def _is(node, kind: str, t: dict) -> bool:
    return fx_match.is_call(node, kind, t, _METHODS)






def _meta(node):
    """Dynamo's example value of a node (a fake tensor), or None (a symbolically traced graph)."""
    return getattr(node, "meta", {}).get("example_value") if hasattr(node, "op") else None


def _same(a, b) -> bool:
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return a is b or statically_known_true(a == b)


def _weight_of(wt, t: dict):
    """W when wt is a 2-D W transposed (W.T, W.mT, W.t(), W.transpose(0, 1)), else None."""
    if getattr(wt, "op", None) == "call_function" and wt.target is getattr and len(wt.args) == 2 \
            and wt.args[1] in ("T", "mT"):
        w = wt.args[0]
    elif _is(wt, "transpose", t) and wt.args:
        w = wt.args[0]
        if wt.target not in ("t",) and wt.target not in t["t"] \
                and {fx_match.arg(wt, 1, "dim0"), fx_match.arg(wt, 2, "dim1")} not in ({0, 1}, {-2, -1}, {0, -1}, {-2, 1}):
            return None
    else:
        return None
    m = _meta(w)
    return w if hasattr(w, "op") and (m is None or m.dim() == 2) else None


def _projection(node, t: dict):
    """(h, W, b, the transpose node or None) of a single-use projection node, else None."""
    if not hasattr(node, "op") or not fx_match.single_use(node):
        return None
    if _is(node, "linear", t) and len(node.args) >= 1:
        return node.args[0], fx_match.arg(node, 1, "weight"), fx_match.arg(node, 2, "bias"), None
    if _is(node, "matmul", t) and len(node.args) == 2:
        w = _weight_of(node.args[1], t)
        return (node.args[0], w, None, node.args[1]) if w is not None else None
    return None


def _flattens_to_rows(view, logits) -> bool:
    """The view makes 2-D logits with the class dim last (known from the metadata only)."""
    out, src = _meta(view), _meta(logits)
    if out is None or src is None or out.dim() != 2 or src.dim() < 2 or not _same(out.shape[-1], src.shape[-1]):
        return False
    if view.target in ("flatten",) or getattr(view.target, "__name__", "") == "flatten":
        return fx_match.arg(view, 1, "start_dim", 0) in (0,) and fx_match.arg(view, 2, "end_dim", -1) in (-2, src.dim() - 2)
    return True


def _loss_args(loss):
    """(target, ignore_index, reduction) of an F.cross_entropy call the op computes equally, else None."""
    names = ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing")
    call = dict(zip(names, loss.args))
    call.update(loss.kwargs)
    if call.get("weight") is not None or call.get("size_average") is not None or call.get("reduce") is not None:
        return None
    if call.get("label_smoothing", 0.0) not in (0, 0.0) or call.get("reduction", "mean") not in ("mean", "sum"):
        return None
    ignore = call.get("ignore_index", -100)
    if not isinstance(ignore, int) or "target" not in call:
        return None
    return call["target"], ignore, call.get("reduction", "mean")


def match(loss, t: dict) -> dict | None:
    """The pattern ending at ``loss`` (the cross_entropy call): h, W, b, target, options, nodes to drop."""
    if not _is(loss, "cross_entropy", t) or not loss.args:
        return None
    found = _loss_args(loss)
    if found is None:
        return None
    target, ignore, reduction = found
    logits, dead = loss.args[0], [loss]
    if _is(logits, "view", t) and fx_match.single_use(logits):
        if not _flattens_to_rows(logits, logits.args[0]):
            return None
        dead.append(logits)
        logits = logits.args[0]
    elif (m := _meta(logits)) is not None and m.dim() != 2:
        return None
    proj = _projection(logits, t)
    if proj is None:
        return None
    h, w, b, wt = proj
    metas = [_meta(n) for n in (logits, h, w, target)]
    if all(x is not None for x in metas):
        lm, hm, wm, tm = metas
        bm = _meta(b) if b is not None else None
        if len({lm.dtype, hm.dtype, wm.dtype, *([bm.dtype] if bm is not None else [])}) != 1 \
                or not lm.dtype.is_floating_point or tm.is_floating_point() or tm.dim() != 1:
            return None
    elif any(x is not None for x in metas):
        return None
    lossm = _meta(loss)
    dead.append(logits)
    return {"h": h, "w": w, "b": b, "target": target, "ignore_index": ignore, "reduction": reduction,
            "compute_grad": True if lossm is None else bool(lossm.requires_grad), "dead": dead,
            "maybe_dead": [wt] if wt is not None else []}


def _rewrite(graph, m: dict) -> None:
    op()                        # registered before AOT autograd traces the graph
    loss = m["dead"][0]
    with graph.inserting_before(loss):
        # linear_cross_entropy's body, as graph nodes: a call of the helper bypasses AOTAutograd's cache
        flat = graph.call_method("flatten", (m["h"], 0, -2))
        outs = graph.call_function(op(), (flat, m["w"], m["b"], m["target"], m["ignore_index"],
                                          m["reduction"], 0, m["compute_grad"]))
        new = graph.call_function(operator.getitem, (outs, 0))
    if "example_value" in loss.meta:
        new.meta["example_value"] = loss.meta["example_value"]
    loss.replace_all_uses_with(new)
    for node in m["dead"] + m["maybe_dead"]:     # the loss first, then backwards
        if not node.users:
            graph.erase_node(node)


def rewrite(graph) -> int:
    """Rewrite every match in ``graph`` (a torch.fx.Graph); returns how many."""
    return fx_match.rewrite_all(graph, _targets(), match, _rewrite)


if "torch" in __import__("sys").modules:    # imported by a program using torch (the model-code patch imports it
    op()                                     # inside a compiled function): registered now, not while Dynamo traces
