"""Hand-written attention -> ``F.scaled_dot_product_attention``, inside the unchanged program.

:func:`rewrite` rewrites an FX graph (the torch-level graph Dynamo hands Inductor, or a
``torch.fx.symbolic_trace``) where it finds, each intermediate used once::

    s = q @ k.transpose(-2, -1)          # matmul / torch.matmul / torch.bmm
    s = s * scale   |  s / d             # optional: one Python number
    s = s.masked_fill(mask, -inf)        # optional: boolean mask, fill <= MASK_FILL_MAX; or s + bias
    p = softmax(s, dim=-1)               # F.softmax / torch.softmax / Tensor.softmax; dtype=torch.float32
                                         # or s.float() allowed (the fp32 upcast), p.to(q.dtype) after it
    p = dropout(p, p=0.0 | training=False)  # optional: a dropout that does nothing
    o = p @ v

into ``o = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask | bias, scale=scale)`` (scale 1.0
when the graph has none: SDPA's default is 1/sqrt(E)). ``k.transpose(2, 3)`` counts as the last two
dims when k's recorded rank is 4. An active dropout between softmax and the second matmul, a softmax
over another dim or with another dtype, and a finite mask fill are left alone.

A causal mask becomes ``is_causal=True`` (no ``attn_mask``: SDPA's causal kernels, flash among them,
which take no explicit mask): the mask's value at the call being compiled is read (its graph ancestors
run on the real inputs Dynamo recorded, or on the module's attributes), and when it blocks exactly the
keys after each query (``_CHECKS``) the graph checks that on every later call: it asserts
it (``torch._assert_async``: a different mask fails the run instead of giving other outputs) and,
where the assert is compiled out (Inductor on ROCm; torch before Inductor lowered it: 2.7 decomposes
it to nothing), the attention's output is NaN, which the trials' output check reports. The check (one
reduction over the mask, one elementwise pass over the output) counts against the arm: the model
change itself, ``is_causal=True``, has none. ``TKO_SDPA_CAUSAL=0``
keeps the causal mask explicit; a trial run the guard failed gets its arm retried so
(:func:`retry_env`). Grouped-query attention (transformers' ``repeat_kv`` or ``repeat_interleave`` of the key/value
heads) with a causal or no mask passes the shared heads and ``enable_gqa=True`` (FlashAttention and the
math kernel take it; the memory-efficient one, which a mask needs, does not). An
``F.scaled_dot_product_attention`` call the program makes itself with a
causal ``attn_mask`` (which keeps SDPA off FlashAttention) gets the same swap, guarded the same way
(:func:`match_masked_sdpa`).

The trial arm ``sdpa`` (``TKO_SDPA_REWRITE=1``) runs it as an Inductor pre-grad pass
(:mod:`tko.remedies.graph_rewrites`), so AOT autograd differentiates the replacement (SDPA's own
backward), and prints ``TKO_SDPA: replaced N attention pattern(s)`` at exit on stderr.
"""

from __future__ import annotations

import operator

from . import fx_match

ARM = "sdpa"
PREFIX = "TKO_SDPA"
ENV = "TKO_SDPA_REWRITE"
NOUN = "attention pattern"
NOT_FOUND = ("no torch.compile'd q @ k.transpose(-2, -1), scale, mask, softmax(dim=-1), @ v "
             "with single-use intermediates")
MASK_FILL_MAX = -1e4     # a fill at or under this is "masked out" (softmax weight exp(-1e4) == 0)
CAUSAL_ENV = "TKO_SDPA_CAUSAL"
EVAL_NODES_MAX = 64      # a mask made by more graph nodes than this is not evaluated at compile time
NOT_CAUSAL_MSG = "TKO_SDPA: the attention mask is no longer causal; the is_causal=True rewrite does not hold"
_RANDOM = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "bernoulli",
           "normal", "multinomial", "dropout", "uniform_", "normal_", "bernoulli_", "exponential_"}
_OPERATOR_IN_PLACE = {"setitem", "delitem", "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imod", "imul",
                      "imatmul", "ior", "ipow", "irshift", "isub", "itruediv", "ixor"}
_said = {"causal": 0, "gqa": 0}


def _targets():
    import torch
    import torch.nn.functional as F

    return {"matmul": {operator.matmul, torch.matmul, torch.bmm},
            "softmax": {F.softmax, torch.softmax, torch.Tensor.softmax},
            "transpose": {torch.transpose, torch.Tensor.transpose},
            "masked_fill": {torch.masked_fill, torch.Tensor.masked_fill},
            "mul": {operator.mul, torch.mul}, "div": {operator.truediv, torch.div},
            "add": {operator.add, torch.add}, "sdpa": {F.scaled_dot_product_attention}}


_METHODS = {k: k for k in ("matmul", "softmax", "transpose", "masked_fill", "mul", "div", "add")}
_METHODS["sdpa"] = ()


def _is(node, kind: str, t: dict) -> bool:
    return fx_match.is_call(node, kind, t, _METHODS)






def _key_of(kt, t: dict):
    """k when kt is k transposed over its last two dims (``transpose(-2, -1)``, or ``transpose(2, 3)``
    of a 4-D k: positive dims are read against k's recorded rank), else None."""
    if not _is(kt, "transpose", t) or not fx_match.single_use(kt):
        return None
    dims = {fx_match.arg(kt, 1, "dim0"), fx_match.arg(kt, 2, "dim1")}
    value = fx_match.example_value(kt.args[0])
    if value is not None and all(isinstance(d, int) for d in dims):
        dims = {d - value.dim() if d >= 0 else d for d in dims}
    return kt.args[0] if dims == {-2, -1} else None


def _cast_of(node, up: bool):
    """The input of a single-use dtype cast, else None: with ``up``, ``x.float()`` /
    ``x.to(torch.float32)`` (the scores upcast for the softmax); else ``x.to(<dtype>)`` /
    ``x.type(<dtype>)`` / ``x.type_as(t)`` (the weights cast back before ``@ v``)."""
    import torch

    if getattr(node, "op", None) != "call_method" or not fx_match.single_use(node) or node.kwargs:
        return None
    if up:
        if node.target == "float" and len(node.args) == 1:
            return node.args[0]
        return node.args[0] if node.target == "to" and node.args[1:] == (torch.float32,) else None
    if node.target == "type_as" and len(node.args) == 2:
        return node.args[0]
    dtype = node.args[1] if len(node.args) == 2 else None
    read = getattr(dtype, "op", None) == "call_function" and dtype.target is getattr and dtype.args[1:] == ("dtype",)
    return node.args[0] if node.target in ("to", "type") and (isinstance(dtype, torch.dtype) or read) else None


def _inactive_dropout(node):
    """The input of a dropout that does nothing (p == 0, or training False), else None."""
    import torch.nn.functional as F

    if getattr(node, "op", None) != "call_function" or node.target is not F.dropout or not fx_match.single_use(node):
        return None
    p, training = fx_match.arg(node, 1, "p", 0.5), fx_match.arg(node, 2, "training", True)
    return node.args[0] if (isinstance(p, (int, float)) and p == 0) or training is False else None


def _scale_of(node, t: dict):
    """(input, scale) when node multiplies or divides by one Python number, else None."""
    if not (_is(node, "mul", t) or _is(node, "div", t)) or not fx_match.single_use(node) or len(node.args) != 2:
        return None
    a, b = node.args
    if _is(node, "div", t):
        if fx_match.yields_number(b):       # e.g. math.sqrt(head_dim) of a traced shape: a float at run time
            return a, ("div", b)
        return (a, 1.0 / float(b)) if isinstance(b, (int, float)) and b else None
    if isinstance(b, (int, float)):
        return a, float(b)
    if isinstance(a, (int, float)):
        return b, float(a)
    for x, n in ((a, b), (b, a)):           # e.g. self.scale lifted under dynamic=True: (x).item()
        if fx_match.yields_number(n) and not fx_match.yields_number(x):
            return x, ("mul", n)
    return None


def _mask_of(node, t: dict):
    """(input, kind, mask node) for a masked_fill with a masking fill or an additive tensor, else None."""
    if _is(node, "masked_fill", t) and fx_match.single_use(node):
        value = fx_match.arg(node, 2, "value")
        if isinstance(value, (int, float)) and value <= MASK_FILL_MAX:
            return node.args[0], "bool", fx_match.arg(node, 1, "mask")
    if _is(node, "add", t) and fx_match.single_use(node) and len(node.args) == 2 and all(hasattr(a, "op") for a in node.args):
        return node.args[0], "additive", node.args[1]
    return None


def match(out, t: dict) -> dict | None:
    """The pattern ending at ``out`` (the second matmul): q, k, v, scale, mask, nodes to drop."""
    if not _is(out, "matmul", t) or len(out.args) != 2:
        return None
    probs, v = out.args
    dead = [out]
    for look_through in (_inactive_dropout, lambda n: _cast_of(n, up=False)):
        inner = look_through(probs)
        if inner is not None:
            dead.append(probs)
            probs = inner
    dtype = probs.kwargs.get("dtype")
    if not _is(probs, "softmax", t) or not fx_match.single_use(probs) or fx_match.arg(probs, 1, "dim") != -1 \
            or (dtype is not None and str(dtype) != "torch.float32") or (len(probs.args) > 2 and probs.args[2] is not None):
        return None
    node, scale, mask = probs.args[0], 1.0, None
    dead.append(probs)
    if _cast_of(node, up=True) is not None:     # the scores upcast to float32: SDPA keeps fp32 inside
        dead.append(node)
        node = _cast_of(node, up=True)
    found = _mask_of(node, t)
    if found:
        dead.append(node)
        node, kind, mask = found[0], found[1], found[2]
        mask = (kind, mask)
    found = _scale_of(node, t)
    if found:
        dead.append(node)
        node, scale = found
    if not _is(node, "matmul", t) or not fx_match.single_use(node) or len(node.args) != 2:
        return None
    q, kt = node.args
    k = _key_of(kt, t)
    if k is None:
        return None
    return {"q": q, "k": k, "v": v, "scale": scale, "mask": mask, "dead": dead + [node, kt]}


# Each says (a 0-d bool tensor) whether a mask, broadcast over the (n_q, n_k) scores, blocks exactly
# the keys after each query, as SDPA's is_causal does (top-left aligned: key j hidden from query i when
# j > i): "bool", masked_fill's mask, True where blocked; "keep", SDPA's own boolean attn_mask, True
# where a query may attend; "additive", 0 where open and <= MASK_FILL_MAX where blocked. Builtins and
# tensor methods only: inlined into the graph as the guard (fx_match.inline).
def _keep_is_causal(mask, n_q, n_k):
    import torch

    return (mask == mask.new_ones(n_q, n_k, dtype=torch.bool).tril()).all()


def _bool_is_causal(mask, n_q, n_k):
    import torch

    return (mask == mask.new_ones(n_q, n_k, dtype=torch.bool).triu(1)).all()


def _additive_is_causal(mask, n_q, n_k):
    import torch

    blocked = mask.new_ones(n_q, n_k, dtype=torch.bool).triu(1)
    return torch.where(blocked, mask <= MASK_FILL_MAX, mask == 0).all()


_CHECKS = {"bool": _bool_is_causal, "additive": _additive_is_causal, "keep": _keep_is_causal}


def _real_value(node):
    """The value ``node`` has at the call being compiled: its graph ancestors run on the real inputs
    Dynamo recorded (a placeholder's ``grapharg``) or the module's attributes; None when one is
    unknown, random or in place (it would change a real input), or the ancestors are many."""
    import contextlib

    import torch
    from torch.fx.node import map_arg

    seen, stack = set(), [node]
    while stack and len(seen) <= EVAL_NODES_MAX:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    if len(seen) > EVAL_NODES_MAX:
        return None
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
    except ImportError:     # pragma: no cover - every supported torch has it
        unset_fake_temporarily = contextlib.nullcontext
    values, gm = {}, node.graph.owning_module
    try:
        with torch.no_grad(), unset_fake_temporarily():
            for n in (n for n in node.graph.nodes if n in seen):
                values[n] = _run_node(n, gm, lambda a: map_arg(a, values.__getitem__))
    except Exception:       # any op the mask's making does not take on its own: not evaluated
        return None
    return values[node]


def _run_node(n, gm, resolve):
    if n.op == "placeholder":    # a symbolic size's own value at this call: the real tensors' shapes agree
        value = n.meta["grapharg"].example
        return value if isinstance(value, (int, float)) or hasattr(value, "shape") else _this_call(value)
    if n.op == "get_attr":
        value = gm
        for part in n.target.split("."):
            value = getattr(value, part)
        return value
    name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
    if getattr(n.target, "__module__", None) in ("_operator", "operator"):   # and_, or_, not_ read; iadd writes
        in_place = name in _OPERATOR_IN_PLACE
    else:                                                                    # add_, masked_fill_, torch.relu_
        in_place = (name.endswith("_") and not name.endswith("__")) or name == "__setitem__" or "out" in n.kwargs
    if name in _RANDOM or in_place or n.op not in ("call_function", "call_method", "call_module"):
        raise ValueError(f"{n.op} {name}: not evaluated")    # random, or it would change a real input
    args, kwargs = resolve(n.args), resolve(n.kwargs)
    if n.op == "call_method":
        return getattr(args[0], n.target)(*args[1:], **kwargs)
    fn = gm.get_submodule(n.target) if n.op == "call_module" else n.target
    return fn(*args, **kwargs)


def _reads_causal(m: dict) -> bool:
    """The matched mask is causal for the call being compiled (q's and k's recorded lengths, the
    mask's real value)."""
    import os

    if not m["mask"] or os.environ.get(CAUSAL_ENV) == "0":
        return False
    q, k = fx_match.example_value(m["q"]), fx_match.example_value(m["k"])
    lengths = tuple(map(_this_call, (q.shape[-2], k.shape[-2]))) if q is not None and k is not None else ()
    if len(lengths) != 2 or not all(isinstance(n, int) for n in lengths):
        return False
    kind, node = m["mask"]
    value = _real_value(node)
    if not hasattr(value, "shape"):
        return False
    try:
        return bool(_CHECKS[kind](value, *lengths))
    except RuntimeError:    # a mask that does not broadcast over the scores: not ours to judge
        return False


def _this_call(size):
    """A number as a Python one: a symbolic one (dynamic shapes) by its value at the call being
    compiled, without a guard (the graph's own check reads the sizes on every call)."""
    if isinstance(size, (int, float)):
        return size
    hint = getattr(getattr(size, "node", None), "hint", None)
    return hint if isinstance(hint, (int, float)) else None


def _causal_guard(graph, m: dict, guarded: dict):
    """The node saying, on every call, that the mask is still causal (one per mask node and graph),
    asserted where it is made."""
    import torch

    kind, node = m["mask"]
    if node not in guarded:
        n_q = graph.call_method("size", (m["q"], -2))
        n_k = graph.call_method("size", (m["k"], -2))
        guarded[node] = fx_match.inline(graph, _CHECKS[kind], (node, n_q, n_k))
        graph.call_function(torch._assert_async, (guarded[node], NOT_CAUSAL_MSG))
    return guarded[node]


def _grouped(node):
    """(kv, n_rep, the nodes that repeat) when ``node`` repeats each head of a 4-D ``kv`` n_rep times
    over dim 1 (transformers' ``repeat_kv``: ``kv[:, :, None].expand(b, h, n_rep, s, d).reshape(b,
    h * n_rep, s, d)``, or ``kv.repeat_interleave(n_rep, dim=1)``), every step used once; else None."""
    chain, x = [node], None
    if getattr(node, "op", None) == "call_method" and node.target == "repeat_interleave" and fx_match.single_use(node):
        if isinstance(fx_match.arg(node, 1, "repeats"), int) and fx_match.arg(node, 2, "dim") == 1:
            x = node.args[0]
    elif getattr(node, "op", None) == "call_method" and node.target in ("reshape", "view") and fx_match.single_use(node):
        expand = node.args[0]
        if getattr(expand, "op", None) == "call_method" and expand.target == "expand" and fx_match.single_use(expand):
            item = expand.args[0]
            index = item.args[1] if getattr(item, "target", None) is operator.getitem else None
            full = slice(None)
            if isinstance(index, tuple) and len(index) == 5 and index[2] is None and \
                    all(i == full for i in index[:2] + index[3:]) and fx_match.single_use(item):
                x, chain = item.args[0], [node, expand, item]
    kv, out = fx_match.example_value(x) if x is not None else None, fx_match.example_value(node)
    if kv is None or out is None or kv.dim() != 4 or out.dim() != 4 or not isinstance(out.shape[1], int) \
            or out.shape[1] % kv.shape[1] or out.shape[1] == kv.shape[1] or tuple(out.shape[2:]) != tuple(kv.shape[2:]):
        return None
    return x, out.shape[1] // kv.shape[1], chain


def _rewrite(graph, m: dict, guarded: dict) -> None:
    import torch
    import torch.nn.functional as F

    out = m["dead"][0]
    causal = _reads_causal(m)
    grouped, repeats = {}, []
    gk, gv = (_grouped(m["k"]), _grouped(m["v"])) if causal or not m["mask"] else (None, None)
    if gk and gv and gk[1] == gv[1]:    # GQA: SDPA reads the shared heads (flash and math take it, no mask)
        m["k"], m["v"], grouped, repeats = gk[0], gv[0], {"enable_gqa": True}, gk[2] + gv[2]
        _said["gqa"] += 1
    with graph.inserting_before(out):
        attn_mask = ok = None
        if causal:
            ok = _causal_guard(graph, m, guarded)
            _said["causal"] += 1
        elif m["mask"]:
            kind, node = m["mask"]
            attn_mask = graph.call_function(torch.logical_not, (node,)) if kind == "bool" else node
        if isinstance(m["scale"], tuple):   # computed at run time: a factor, or a divisor to invert
            how, number = m["scale"]
            m["scale"] = number if how == "mul" else graph.call_function(operator.truediv, (1.0, number))
        kwargs = {"is_causal": True} if causal else {"attn_mask": attn_mask}
        sdpa = graph.call_function(F.scaled_dot_product_attention, (m["q"], m["k"], m["v"]),
                                   {**kwargs, **grouped, "scale": m["scale"]})
        if ok is not None:      # NaN where the assert is compiled out (ROCm; Inductor before its lowering)
            sdpa = graph.call_function(torch.where, (ok, sdpa, float("nan")))
    fx_match.swap(graph, out, sdpa, m["dead"])
    for node in repeats:        # the repeated heads, now read by nothing
        if not node.users:
            graph.erase_node(node)


_SDPA_OPTIONAL = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")   # after q, k, v, in order


def match_masked_sdpa(node, t: dict) -> dict | None:
    """An ``F.scaled_dot_product_attention`` call the program makes with an explicit mask that is
    causal (its value read now, as for the hand-written form), ``is_causal`` off; else None."""
    import torch

    if not _is(node, "sdpa", t) or len(node.args) < 3:
        return None
    options = {**dict(zip(_SDPA_OPTIONAL, node.args[3:])), **node.kwargs}
    mask = options.get("attn_mask")
    value = fx_match.example_value(mask) if hasattr(mask, "op") else None
    if value is None or options.get("is_causal", False) is not False:
        return None
    m = {"q": node.args[0], "k": node.args[1], "node": node, "options": options,
         "mask": ("keep" if value.dtype == torch.bool else "additive", mask)}
    return m if _reads_causal(m) else None


def _causal_sdpa(graph, m: dict, guarded: dict) -> None:
    """The program's own SDPA call with ``is_causal=True`` in place of its causal mask, guarded."""
    import torch

    node = m["node"]
    options = {k: v for k, v in m["options"].items() if k != "attn_mask"}
    with graph.inserting_before(node):
        ok = _causal_guard(graph, m, guarded)
        sdpa = graph.call_function(node.target, node.args[:3], {**options, "is_causal": True})
        checked = graph.call_function(torch.where, (ok, sdpa, float("nan")))
    _said["causal"] += 1
    fx_match.swap(graph, node, checked, [node])


def rewrite(graph) -> int:
    """Rewrite every match in ``graph`` (a torch.fx.Graph): hand-written attention, then SDPA calls
    given a causal mask; returns how many."""
    guarded = {}
    t = _targets()
    hand = fx_match.rewrite_all(graph, t, match, lambda g, m: _rewrite(g, m, guarded))
    return hand + fx_match.rewrite_all(graph, t, match_masked_sdpa, lambda g, m: _causal_sdpa(g, m, guarded))


def retry_env(said: str, nan_outputs: bool = False) -> dict | None:
    """The environment an arm retries with after this pass's causal guard tripped: a run that failed
    on it (``said``: its stderr; a device assert on a GPU), or one whose outputs came out NaN where the
    assert is compiled out (``said``: the pass's line, which took is_causal); else None."""
    tripped = any(s in said for s in (NOT_CAUSAL_MSG, "device-side assert"))
    poisoned = nan_outputs and "with is_causal=True" in said
    return {CAUSAL_ENV: "0"} if tripped or poisoned else None


def change_text(said: str) -> str | None:
    """The change the trial measured when the pass's line says its swaps took is_causal=True."""
    if "with is_causal=True" not in said:
        return None
    return ("F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale) with no attn_mask: the masks "
            "the program passed were causal (asserted on every call of the trial), and SDPA's causal kernels, "
            "FlashAttention among them, never read a mask (an Inductor pre-grad pass here; in the model: "
            "references/rewrite_catalog.yaml sdpa_causal_mask)")


def detail() -> str:
    """What the pass's stderr line adds: how many swaps took ``is_causal=True``."""
    n, gqa = _said["causal"], _said["gqa"]
    return ((f", {n} with is_causal=True (the causal mask asserted on every call)" if n else "")
            + (f", {gqa} reading the shared key/value heads (enable_gqa=True)" if gqa else ""))
