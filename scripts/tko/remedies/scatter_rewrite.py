"""Scatter-add into a fresh zero tensor -> a sorted segment reduction, inside the unchanged program.

:func:`rewrite` rewrites an FX graph (the torch-level graph Dynamo hands Inductor, or a
``torch.fx.symbolic_trace``) where it finds, the zero tensor used by nothing before the scatter::

    out = torch.zeros(n, ...) | torch.zeros_like(x) | x.new_zeros(n, ...)
    out = out.index_add_(0, idx, src)                          # or .index_add, torch.index_add
    out = out.scatter_add_(0, idx[:, None].expand_as(src), src)  # or .unsqueeze(1) / .view(-1, 1),
                                                               #    .expand(-1, d) / .expand(src.shape)

into ``out = segment_sum(idx, src, n)``::

    order = idx.argsort(stable=True)
    offsets = torch.searchsorted(idx[order], torch.arange(n + 1))   # segment k: idx == k
    out = torch.segment_reduce(src[order], "sum", offsets=offsets, axis=0, unsafe=True)

Why this form (measured, not guessed): ``torch.segment_reduce`` exists since torch 1.11, compiles
with ``fullgraph=True`` under Inductor on CPU and CUDA (an aten fallback kernel: no atomics), and has
its own backward, so ``src.grad == grad_out[idx]`` as for ``index_add``. Offsets from
``searchsorted`` over ``n + 1`` boundaries keep every shape static, where
``torch.bincount(idx, minlength=n)`` lengths have a data-dependent size. The other atomic-free form,
a cumulative sum over the sorted rows differenced at the segment ends, needs fp64 to stay exact on
long segments and was slower still (H200, the example below: 3.6 ms forward, 9.7 ms with backward).
The summation order changes: compare with a float tolerance. An index outside ``[0, n)``, which
``index_add`` rejects, is dropped.

What it costs (H200, torch 2.11, compiled, ``examples/scatter_index_add.py``: 100k x 64 nodes, 800k
edges): the aten segment kernel walks a segment in one thread, so at the example's power-law
destinations (longest segment 17k rows) it took 1.9 ms forward (2.8 ms with backward) against 0.21 ms
(0.65 ms) for Inductor's atomic index_add; at uniform destinations 0.36 ms (1.09 ms) against 0.11 ms
(0.28 ms), the argsort and permuted gather of every call dominating. The segment reduction alone, on
rows already sorted, took 0.08 ms against 0.39 ms for eager index_add at uniform destinations. So the
arm pays where the sort is shared (indices reused across calls or layers, which this per-call pass
cannot see) or atomics are far worse than here; the trial measures it, it does not assume it.

Left alone: a dim other than 0, an ``alpha``, an ``out`` that is not a fresh zero tensor (an input,
``ones``, a clone) or is read before the scatter, a ``scatter_add`` index that is not one index per
row expanded over the row, integer sources (segment_reduce takes floating types), and (where Dynamo's
``example_value`` metadata says so) an ``out`` whose trailing dims differ from ``src``'s.

The trial arm ``segment_reduce`` (``TKO_SEGMENT_REDUCE_REWRITE=1``) runs it as an Inductor pre-grad
pass (:mod:`tko.remedies.graph_rewrites`) and prints ``TKO_SEGMENT_REDUCE: replaced N scatter-add
pattern(s)`` at exit on stderr.
"""

from __future__ import annotations

import operator

from . import fx_match

ARM = "segment_reduce"
PREFIX = "TKO_SEGMENT_REDUCE"
ENV = "TKO_SEGMENT_REDUCE_REWRITE"
NOUN = "scatter-add pattern"
NOT_FOUND = ("no torch.compile'd torch.zeros / zeros_like / new_zeros then index_add(0, idx, src) or "
             "scatter_add(0, idx expanded over the row, src) with the zeros read by nothing before it")


def segment_sum(idx, src, n):
    """``torch.zeros(n, *src.shape[1:]).index_add_(0, idx, src)`` as a sorted segment reduction."""
    import torch

    order = idx.argsort(stable=True)
    bounds = idx.new_ones(n + 1).cumsum(0) - 1      # arange(n + 1), as tensor methods: traced on torch 2.7 too
    offsets = torch.searchsorted(idx[order], bounds)
    return torch.segment_reduce(src[order], "sum", offsets=offsets, axis=0, unsafe=True)


def _targets():
    import torch

    return {"index_add": {torch.index_add, torch.Tensor.index_add, torch.Tensor.index_add_},
            "scatter_add": {torch.scatter_add, torch.Tensor.scatter_add, torch.Tensor.scatter_add_},
            "zeros": {torch.zeros}, "zeros_like": {torch.zeros_like}, "new_zeros": {torch.Tensor.new_zeros},
            "unsqueeze": {torch.unsqueeze, torch.Tensor.unsqueeze},
            "view": {torch.Tensor.view, torch.Tensor.reshape, torch.reshape},
            "expand": {torch.Tensor.expand, torch.Tensor.expand_as}}


_METHODS = {"index_add": {"index_add", "index_add_"}, "scatter_add": {"scatter_add", "scatter_add_"},
            "zeros": set(), "zeros_like": set(), "new_zeros": {"new_zeros"}, "unsqueeze": {"unsqueeze"},
            "view": {"view", "reshape"}, "expand": {"expand", "expand_as"}}
_INPLACE = {"index_add_", "scatter_add_"}


def _is(node, kind: str, t: dict) -> bool:
    return fx_match.is_call(node, kind, t, _METHODS)




def _meta(node):
    return getattr(node, "meta", {}).get("example_value") if hasattr(node, "op") else None


def _inplace(node) -> bool:
    return getattr(node.target, "__name__", node.target) in _INPLACE


def _rows_of(zeros, t: dict):
    """How the zero tensor's row count is had: ("int", n), ("node", n node) or ("size0", x), else None."""
    if zeros.kwargs.get("out") is not None:
        return None
    if _is(zeros, "zeros_like", t):
        return ("size0", zeros.args[0]) if zeros.args and set(zeros.kwargs) <= {"dtype", "device", "layout",
                                                                                  "requires_grad"} else None
    if _is(zeros, "zeros", t):
        sizes = zeros.args
    elif _is(zeros, "new_zeros", t):
        sizes = zeros.args[1:]
    else:
        return None
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    if not sizes:
        return None
    first = sizes[0]
    return ("int", first) if isinstance(first, int) else (("node", first) if hasattr(first, "op") else None)


def _row_index(index, src, t: dict):
    """idx when a scatter_add index is idx (N,) made (N, 1) then expanded over src's rows, else None."""
    if not _is(index, "expand", t) or len(index.users) != 1 or not index.args:
        return None
    col = index.args[0]
    if getattr(index.target, "__name__", index.target) == "expand_as":
        if fx_match.arg(index, 1, "other") is not src:
            return None
    elif (im := _meta(index)) is None or (sm := _meta(src)) is None or tuple(im.shape) != tuple(sm.shape):
        sizes = index.args[1:]
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = sizes[0]
        if len(sizes) != 2 or sizes[0] != -1:      # expand(-1, d) only, unless the metadata shows src's shape
            return None
    if len(col.users) != 1:
        return None
    if _is(col, "unsqueeze", t) and fx_match.arg(col, 1, "dim") in (1, -1):
        return col.args[0]
    if _is(col, "view", t) and list(col.args[1:]) in ([-1, 1], [(-1, 1)], [[-1, 1]]):
        return col.args[0]
    if getattr(col, "op", None) == "call_function" and col.target is operator.getitem and len(col.args) == 2:
        key = col.args[1]
        if isinstance(key, tuple) and len(key) == 2 and key[0] == slice(None) and key[1] is None:
            return col.args[0]
    return None


def _before(a, b) -> bool:
    """a comes before b in their graph."""
    a = a.next
    while a.op != "root":
        if a is b:
            return True
        a = a.next
    return False


def match(node, t: dict) -> dict | None:
    """The pattern ending at ``node`` (the index_add / scatter_add): idx, src, n, nodes to drop."""
    scatter = _is(node, "scatter_add", t)
    if not (scatter or _is(node, "index_add", t)) or len(node.args) < 4 or node.kwargs:
        return None
    out, dim, index, src = node.args[:4]
    if dim != 0 or len(node.args) > 4 or not hasattr(out, "op"):
        return None
    rows = _rows_of(out, t)
    if rows is None:
        return None
    idx = _row_index(index, src, t) if scatter else index
    if idx is None:
        return None
    om, sm = _meta(out), _meta(src)
    if sm is not None and not sm.is_floating_point():
        return None
    if om is not None and sm is not None and tuple(om.shape[1:]) != tuple(sm.shape[1:]):
        return None
    others = [u for u in out.users if u is not node]
    if others and (not _inplace(node) or any(_before(u, node) for u in others)):
        return None     # read before the scatter, or a fresh zeros also used as zeros
    return {"node": node, "out": out, "idx": idx, "src": src, "rows": rows,
            "dead": [node, out] + ([index, index.args[0]] if scatter else [])}


def _rewrite(graph, m: dict) -> None:
    node = m["node"]
    with graph.inserting_before(node):
        kind, value = m["rows"]
        n = graph.call_method("size", (value, 0)) if kind == "size0" else value
        new = fx_match.inline(graph, segment_sum, (m["idx"], m["src"], n))
    if "example_value" in node.meta:
        new.meta["example_value"] = node.meta["example_value"]
    node.replace_all_uses_with(new)
    m["out"].replace_all_uses_with(new, delete_user_cb=lambda user: user is not node)
    for dead in m["dead"]:
        if not dead.users:
            graph.erase_node(dead)


def rewrite(graph) -> int:
    """Rewrite every match in ``graph`` (a torch.fx.Graph); returns how many."""
    return fx_match.rewrite_all(graph, _targets(), match, _rewrite)
