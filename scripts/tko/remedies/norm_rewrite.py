"""Hand-written RMSNorm / LayerNorm -> ``F.rms_norm`` / ``F.layer_norm``, inside the unchanged program.

:func:`rewrite` rewrites an FX graph (the torch-level graph Dynamo hands Inductor, or a
``torch.fx.symbolic_trace``) where it finds, each intermediate used only inside the pattern::

    ms = h.pow(2).mean(-1, keepdim=True)      # h ** 2, h * h, torch.square; torch.mean, dim=-1
    y = h * torch.rsqrt(ms + eps)              # or h / torch.sqrt(ms + eps), (ms + eps).rsqrt()
    y = y * w                                  # optional: w of shape (d,) and y's dtype, either side

into ``y = F.rms_norm(h, (d,), w, eps)``, and::

    m = x.mean(-1, keepdim=True)
    v = x.var(-1, keepdim=True, unbiased=False)  # correction=0, or ((x - m) ** 2).mean(-1, keepdim=True)
                                                 # or v, m = torch.var_mean(x, -1, keepdim=True, correction=0)
    y = (x - m) / torch.sqrt(v + eps)            # or (x - m) * torch.rsqrt(v + eps)
    y = y * w + b                                # optional: w, b of shape (d,) and y's dtype

into ``y = F.layer_norm(x, (d,), w, b, eps)``. ``h`` is the input as the hand form computes it: an
fp32 upcast (``x.float()``, ``x.to(torch.float32)``) stays where it is and is the functional op's
input, and a downcast after the normalization (``.to(x.dtype)``, ``.type_as(x)``) stays too, with a
weight multiplied after it: the functional op computes in the dtype the hand form computed in, so
the output dtype and the rounding points are the same. A cast to the dtype a tensor already has is
looked through. ``d`` is the last dim of the node's example value (``meta["example_value"]``); a node
without one is left alone, and so are a normalization over another dim than the last, ``keepdim``
False, an unbiased variance, an eps that is not a Python number and a weight of another shape or
dtype (the multiply then stays after the replaced normalization). Under ``dynamic=True`` Dynamo lifts
a module's float ``self.eps`` to a graph input read with ``.item()``: that node is passed on as the
op's eps, so a later change of the attribute still reaches the op.

The trial arm ``rms_norm_fn`` (``TKO_NORM_REWRITE=1``) runs it as an Inductor pre-grad pass
(:mod:`tko.remedies.graph_rewrites`), so AOT autograd differentiates the replacement, and prints
``TKO_NORM: replaced N normalization(s)`` at exit on stderr.
"""

from __future__ import annotations

import operator

from . import fx_match

ARM = "rms_norm_fn"
PREFIX = "TKO_NORM"
ENV = "TKO_NORM_REWRITE"
NOUN = "normalization"
NOT_FOUND = ("no torch.compile'd x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) or "
             "(x - mean) / sqrt(var + eps) over the last dim with a Python-number eps and "
             "intermediates used only inside it")

_METHODS = {"mul": "mul", "div": "div", "add": "add", "sub": "sub", "pow": "pow", "mean": "mean",
            "var": "var", "var_mean": None, "rsqrt": "rsqrt", "sqrt": "sqrt", "square": "square"}


def _targets():
    import torch

    return {"mul": {operator.mul, torch.mul}, "div": {operator.truediv, torch.div},
            "add": {operator.add, torch.add}, "sub": {operator.sub, torch.sub},
            "pow": {operator.pow, torch.pow}, "mean": {torch.mean}, "var": {torch.var}, "var_mean": {torch.var_mean},
            "rsqrt": {torch.rsqrt}, "sqrt": {torch.sqrt}, "square": {torch.square}}


def _is(node, kind: str, t: dict) -> bool:
    return fx_match.is_call(node, kind, t, _METHODS)






def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _operands(node, kind: str, t: dict):
    """(a, b) when node is a two-operand ``kind`` with no extra arguments, else None."""
    if not _is(node, kind, t) or len(node.args) != 2 or node.kwargs:
        return None
    return node.args


def _other(node, kind: str, t: dict, pred):
    """For a commutative two-operand ``kind``: (operand satisfying pred, the other one), else None."""
    ops = _operands(node, kind, t)
    if ops is None:
        return None
    a, b = ops
    if pred(a):
        return a, b
    if pred(b):
        return b, a
    return None


def _last_dim(node, dim) -> bool:
    """dim (an int or a one-element list/tuple) is the last dim of node's input."""
    if isinstance(dim, (list, tuple)) and len(dim) == 1:
        dim = dim[0]
    if not isinstance(dim, int) or isinstance(dim, bool):
        return False
    if dim == -1:
        return True
    v = fx_match.example_value(node.args[0]) if node.args else None
    return v is not None and dim == v.dim() - 1


def _mean_of(node, t: dict):
    """x when node is ``x.mean(-1, keepdim=True)`` (no dtype), else None."""
    if not _is(node, "mean", t) or not node.args or not hasattr(node.args[0], "op"):
        return None
    dim, keepdim = fx_match.arg(node, 1, "dim"), fx_match.arg(node, 2, "keepdim", False)
    if keepdim is not True or not _last_dim(node, dim) or fx_match.arg(node, 3, "dtype") is not None:
        return None
    return node.args[0]


def _square_of(node, t: dict):
    """x when node is x ** 2, x.pow(2), x * x or torch.square(x), else None."""
    if _is(node, "pow", t) and len(node.args) == 2 and not node.kwargs and node.args[1] in (2, 2.0) \
            and not isinstance(node.args[1], bool):
        return node.args[0]
    ops = _operands(node, "mul", t)
    if ops and ops[0] is ops[1] and hasattr(ops[0], "op"):
        return ops[0]
    if _is(node, "square", t) and len(node.args) == 1 and not node.kwargs:
        return node.args[0]
    return None


def _var_of(node, t: dict):
    """x when node is the biased variance of x over the last dim with keepdim, else None."""
    if not (_is(node, "var", t) or _is(node, "var_mean", t)) or not node.args or not hasattr(node.args[0], "op"):
        return None
    dim = fx_match.arg(node, 1, "dim")
    unbiased = node.args[2] if len(node.args) > 2 and isinstance(node.args[2], bool) else node.kwargs.get("unbiased")
    keepdim = node.args[3] if len(node.args) > 3 else node.kwargs.get("keepdim", False)
    correction = node.kwargs.get("correction")
    biased = (unbiased is False and correction is None) or (unbiased is None and correction in (0, 0.0))
    if not biased or keepdim is not True or not _last_dim(node, dim):
        return None
    return node.args[0]


def _var_mean_of(v, m, t: dict):
    """(x, var_mean node) when v, m are items 0, 1 of one biased ``torch.var_mean(x, -1, keepdim=True)``."""
    if not all(getattr(n, "op", None) == "call_function" and n.target is operator.getitem for n in (v, m)):
        return None
    vm = v.args[0]
    if m.args[0] is not vm or v.args[1] != 0 or m.args[1] != 1 or not _is(vm, "var_mean", t) \
            or len(vm.users) != 2 or _var_of(vm, t) is None:
        return None
    return vm.args[0], vm


def _inv_std(core, t: dict):
    """(h, stat, eps, dead) when ``core`` is ``h * rsqrt(stat + eps)`` (either side) or
    ``h / sqrt(stat + eps)`` with eps a Python number (or a node yielding one), else None."""
    found = None
    if _is(core, "div", t):
        ops = _operands(core, "div", t)
        if ops and _is(ops[1], "sqrt", t):
            found = ops[0], ops[1]
    else:
        found = _other(core, "mul", t, lambda n: _is(n, "rsqrt", t))
        if found:
            found = found[1], found[0]
    if not found:
        return None
    h, root = found
    if len(root.args) != 1 or root.kwargs or not hasattr(h, "op"):
        return None
    added = _other(root.args[0], "add", t, lambda n: hasattr(n, "op") and not fx_match.yields_number(n))
    if not added or not (_number(added[1]) or fx_match.yields_number(added[1])):
        return None
    eps = added[1] if fx_match.yields_number(added[1]) else float(added[1])
    return h, added[0], eps, [root, root.args[0]]


def _rms(core, t: dict) -> dict | None:
    found = _inv_std(core, t)
    if not found:
        return None
    h, ms, eps, dead = found
    sq = _mean_of(ms, t)
    if sq is None or _square_of(sq, t) is not h:
        return None
    return {"kind": "rms", "x": h, "eps": eps, "dead": [core, *dead, ms, sq]}


def _layer(core, t: dict) -> dict | None:
    found = _inv_std(core, t)
    if not found:
        return None
    c, v, eps, dead = found
    centered = _operands(c, "sub", t)
    if not centered:
        return None
    x, m = centered
    both = _var_mean_of(v, m, t)
    if both and both[0] is x:
        return {"kind": "layer", "x": x, "eps": eps, "dead": [core, *dead, v, c, m, both[1]]}
    if _mean_of(m, t) is not x:
        return None
    dead = [core, *dead, v, c, m]
    if _var_of(v, t) is x:
        pass
    else:
        sq = _mean_of(v, t)
        c2 = _square_of(sq, t) if sq is not None else None
        if c2 is None:
            return None
        if c2 is not c:          # its own x - mean(x): the same x and a mean of x over the last dim
            ops = _operands(c2, "sub", t)
            if not ops or ops[0] is not x or (ops[1] is not m and _mean_of(ops[1], t) is not x):
                return None
            dead += [c2] + ([ops[1]] if ops[1] is not m else [])
        dead += [sq]
    return {"kind": "layer", "x": x, "eps": eps, "dead": dead}


def _inside(dead: list) -> bool:
    """Every node of the pattern but its output is used only inside the pattern."""
    ids = set(dead)
    return len(ids) == len(dead) and all(set(n.users) <= ids for n in dead[1:])


def _affine(node, d: int, dtype, t: dict):
    """w when node (one user) multiplies its input by a (d,) tensor of ``dtype``, as (kind, w, user)."""
    def fits(n):
        v = fx_match.example_value(n)
        return v is not None and tuple(v.shape) == (d,) and v.dtype == dtype

    if len(node.users) != 1:
        return None
    user = next(iter(node.users))
    for kind in ("mul", "add"):
        found = _other(user, kind, t, lambda n: n is node)
        if found and hasattr(found[1], "op") and fits(found[1]):
            return kind, found[1], user
    return None


def _no_op_cast(node) -> bool:
    """A cast (.to / .type / .float / .type_as) to the dtype its input already has."""
    if node.op != "call_method" or node.target not in ("to", "type", "float", "type_as") or not node.args:
        return False
    a, b = fx_match.example_value(node.args[0]), fx_match.example_value(node)
    return a is not None and b is not None and a.dtype == b.dtype and a.shape == b.shape


def match(core, t: dict) -> dict | None:
    """The normalization whose last step is ``core`` (the multiply by rsqrt / divide by sqrt): kind,
    input, eps, d, weight, bias, the output node and the nodes to drop (output first)."""
    m = _layer(core, t) or _rms(core, t)
    if not m:
        return None
    v = fx_match.example_value(core)
    if v is None or fx_match.example_value(m["x"]) is None or not v.dtype.is_floating_point:
        return None
    d, dtype = v.shape[-1], v.dtype
    tail, out, weight, bias = [], core, None, None
    while len(out.users) == 1 and _no_op_cast(next(iter(out.users))):
        out = next(iter(out.users))
        tail.append(out)
    found = _affine(out, d, dtype, t)
    if found and found[0] == "mul":
        weight, out = found[1], found[2]
        tail.append(out)
        found = _affine(out, d, dtype, t) if m["kind"] == "layer" else None
    if found and found[0] == "add" and m["kind"] == "layer":
        bias, out = found[1], found[2]
        tail.append(out)
    if not tail or tail[-1] is not out:     # a cast looked through, then nothing absorbed: stop at core
        tail, out, weight, bias = [], core, None, None
    dead = list(reversed(tail)) + m["dead"]
    if not _inside(dead):
        return None
    return {**m, "d": int(d), "weight": weight, "bias": bias, "out": out, "dead": dead}


def _rewrite(graph, m: dict) -> None:
    import torch.nn.functional as F

    out = m["out"]
    with graph.inserting_before(out):
        if m["kind"] == "rms":
            new = graph.call_function(F.rms_norm, (m["x"], (m["d"],), m["weight"], m["eps"]))
        else:
            new = graph.call_function(F.layer_norm, (m["x"], (m["d"],), m["weight"], m["bias"], m["eps"]))
    fx_match.swap(graph, out, new, m["dead"])


def rewrite(graph) -> int:
    """Rewrite every match in ``graph`` (a torch.fx.Graph); returns how many."""
    t = _targets()
    found, taken = [], set()
    for node in list(graph.nodes):
        m = match(node, t) if node.op in ("call_function", "call_method") else None
        if m and not taken & set(m["dead"]):
            taken |= set(m["dead"])
            found.append(m)
    for m in found:
        _rewrite(graph, m)
    return len(found)
