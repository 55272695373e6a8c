"""A gated activation's two GEMMs -> one GEMM over the concatenated weight, inside the unchanged program.

:func:`rewrite` rewrites an FX graph (the torch-level graph Dynamo hands Inductor, where an
``nn.Linear`` call is ``F.linear`` on its parameters) where it finds, each intermediate used once::

    g = F.linear(x, Wg, bg)           # or x @ Wg.T / x @ Wg.t() / x @ Wg.transpose(0, 1), no bias
    u = F.linear(x, Wu, bu)           # the same x; both biases or neither; Wg, Wu of one shape and dtype
    y = act(g) * u                    # act: F.silu / F.gelu (its approximate kept), either side of *

into::

    gu = F.linear(x, torch.cat([Wg, Wu], 0), torch.cat([bg, bu], 0))
    g, u = gu.chunk(2, -1)
    y = act(g) * u

The concatenation copies both weights on every call (autograd splits the weight gradient back to
Wg and Wu): the trial measures one wider GEMM plus that copy against two GEMMs; in the model the
fused weight would be one parameter. Different inputs to the two projections, a projection or
activation output used elsewhere, an activation with other arguments, one bias only, or weights
whose shapes or dtypes differ (or are unknown: no ``meta["example_value"]``) are left alone.

The trial arm ``gate_up_fused`` (``TKO_GATE_REWRITE=1``) runs it as an Inductor pre-grad pass
(:mod:`tko.remedies.graph_rewrites`), so AOT autograd differentiates the replacement, and prints
``TKO_GATE: replaced N gated projection(s)`` at exit on stderr.
"""

from __future__ import annotations

import operator

from . import fx_match

ARM = "gate_up_fused"
PREFIX = "TKO_GATE"
ENV = "TKO_GATE_REWRITE"
NOUN = "gated projection"
NOT_FOUND = ("no torch.compile'd silu/gelu(F.linear(x, Wg)) * F.linear(x, Wu) (or x @ W.T) on one x "
             "with weights of one shape and single-use intermediates")


def _targets():
    import torch
    import torch.nn.functional as F

    return {"linear": {F.linear}, "matmul": {operator.matmul, torch.matmul},
            "act": {F.silu, F.gelu}, "mul": {operator.mul, torch.mul},
            "t": {torch.t}, "transpose": {torch.transpose}}


_METHODS = {"matmul": "matmul", "mul": "mul", "t": "t", "transpose": "transpose", "act": None, "linear": None}


def _is(node, kind: str, t: dict) -> bool:
    return fx_match.is_call(node, kind, t, _METHODS)






def _transposed(node, t: dict):
    """W when node is W.T / W.t() / torch.t(W) / W.transpose(0, 1) of a 2-D W, else None."""
    if getattr(node, "op", None) == "call_function" and node.target is getattr and node.args[1:] == ("T",):
        w = node.args[0]
    elif _is(node, "t", t) and len(node.args) == 1:
        w = node.args[0]
    elif _is(node, "transpose", t) and {fx_match.arg(node, 1, "dim0"), fx_match.arg(node, 2, "dim1")} in ({0, 1}, {-2, -1}, {0, -1}, {-2, 1}):
        w = node.args[0]
    else:
        return None
    v = fx_match.example_value(w)
    return w if v is not None and v.dim() == 2 and len(node.users) == 1 else None


def _projection(node, t: dict):
    """(x, W, b, dead) when node is F.linear(x, W, b) or x @ W.T, used once; else None."""
    if len(node.users) != 1:
        return None
    if _is(node, "linear", t):
        x, w, b = fx_match.arg(node, 0, "input"), fx_match.arg(node, 1, "weight"), fx_match.arg(node, 2, "bias")
        if len(node.args) + len(node.kwargs) > 3 or not hasattr(w, "op") or (b is not None and not hasattr(b, "op")):
            return None
        return x, w, b, [node]
    if _is(node, "matmul", t) and len(node.args) == 2 and not node.kwargs:
        x, wt = node.args
        w = _transposed(wt, t)
        return (x, w, None, [node, wt]) if w is not None else None
    return None


def match(out, t: dict) -> dict | None:
    """The gated projection ending at ``out`` (the multiply): x, both weights and biases, the
    activation node, and the nodes to drop."""
    if not _is(out, "mul", t) or len(out.args) != 2 or out.kwargs:
        return None
    for act, up in (out.args, reversed(out.args)):
        if not _is(act, "act", t) or len(act.users) != 1 or len(act.args) != 1 or not hasattr(up, "op"):
            continue
        if set(act.kwargs) - {"approximate", "inplace"} or act.kwargs.get("inplace"):
            continue
        gate, upm = _projection(act.args[0], t), _projection(up, t)
        if not gate or not upm or gate[0] is not upm[0] or not hasattr(gate[0], "op"):
            continue
        (x, wg, bg, dead_g), (_, wu, bu, dead_u) = gate, upm
        if (bg is None) != (bu is None) or wg is wu:
            continue
        vg, vu = fx_match.example_value(wg), fx_match.example_value(wu)
        if vg is None or vu is None or vg.shape != vu.shape or vg.dtype != vu.dtype or vg.dim() != 2:
            continue
        if bg is not None:
            bvg, bvu = fx_match.example_value(bg), fx_match.example_value(bu)
            if bvg is None or bvu is None or bvg.shape != bvu.shape or bvg.dtype != bvu.dtype:
                continue
        return {"x": x, "wg": wg, "wu": wu, "bg": bg, "bu": bu, "act": act, "out": out,
                "dead": [out, act, *dead_g, *dead_u]}
    return None


def _rewrite(graph, m: dict) -> None:
    import torch
    import torch.nn.functional as F

    out, act = m["out"], m["act"]
    with graph.inserting_before(out):
        w = graph.call_function(torch.cat, ([m["wg"], m["wu"]], 0))
        b = graph.call_function(torch.cat, ([m["bg"], m["bu"]], 0)) if m["bg"] is not None else None
        gu = graph.call_function(F.linear, (m["x"], w, b))
        halves = graph.call_function(torch.chunk, (gu, 2, -1))
        g = graph.call_function(operator.getitem, (halves, 0))
        u = graph.call_function(operator.getitem, (halves, 1))
        a = graph.call_function(act.target, (g,), dict(act.kwargs))
        new = graph.call_function(operator.mul, (a, u))
    fx_match.swap(graph, out, new, m["dead"])


def rewrite(graph) -> int:
    """Rewrite every match in ``graph`` (a torch.fx.Graph); returns how many."""
    return fx_match.rewrite_all(graph, _targets(), match, _rewrite)
