"""What every model-level rewrite (``tko.remedies.graph_rewrites``) needs to read an FX graph: is a
node a call of one of these functions or methods, its arguments, its users, the example value Dynamo
recorded, and the loop that finds every match first and then rewrites them."""

from __future__ import annotations


def is_call(node, kind: str, functions: dict, methods: dict) -> bool:
    """``node`` calls one of ``functions[kind]`` or a method named in ``methods[kind]`` (a name or
    a set of names)."""
    if node is None or not hasattr(node, "op"):
        return False
    if node.op == "call_function":
        return node.target in functions[kind]
    names = methods.get(kind)
    return node.op == "call_method" and node.target in ({names} if isinstance(names, str) else (names or ()))


def arg(node, i: int, name: str, default=None):
    """Positional argument ``i`` or keyword ``name`` of a call node."""
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def single_use(node) -> bool:
    return len(node.users) == 1


def example_value(node):
    """The tensor Dynamo recorded for ``node`` (``val`` in an exported graph), or None (a
    symbolically traced graph has none)."""
    meta = getattr(node, "meta", None) or {}
    v = meta.get("example_value", meta.get("val"))
    return v if hasattr(v, "shape") and hasattr(v, "dtype") else None


def yields_number(node) -> bool:
    """A node that yields a Python number, never a tensor: a call of a ``math`` function, or one Dynamo
    recorded a number for; under dynamic shapes a symbolic one (``torch._sym_sqrt`` of a head dim, or
    ``.item()`` of the 0-d input Dynamo lifts a module's float attribute such as ``self.eps`` to)."""
    import torch

    if getattr(node, "op", None) not in ("call_function", "call_method"):
        return False
    value = (node.meta or {}).get("example_value")
    return getattr(node.target, "__module__", None) == "math" or (
        isinstance(value, (int, float, torch.SymInt, torch.SymFloat)) and not isinstance(value, bool))


def rewrite_all(graph, targets: dict, match, apply) -> int:
    """Find every match in ``graph`` first (``match(node, targets)``), then rewrite each
    (``apply(graph, m)``); returns how many."""
    found = [m for m in (match(n, targets) for n in list(graph.nodes)) if m]
    for m in found:
        apply(graph, m)
    return len(found)


def swap(graph, out, new, dead) -> None:
    """``new`` takes ``out``'s place (its example value and every use); the ``dead`` nodes of the
    matched pattern are erased last first, so each has no user left."""
    if "example_value" in out.meta:
        new.meta["example_value"] = out.meta["example_value"]
    out.replace_all_uses_with(new)
    at = {n: i for i, n in enumerate(graph.nodes)}
    for node in sorted(dead, key=at.__getitem__, reverse=True):
        graph.erase_node(node)


def inline(graph, fn, inputs: tuple):
    """Insert ``fn``'s body, traced (``torch.fx.symbolic_trace``), at the graph's insert point with
    its parameters bound to ``inputs`` (nodes or constants); returns the node of its result. A
    replacement written as a Python helper (builtins, tensor methods, ``torch.ops``) so lands as those
    calls, which AOTAutograd's cache takes, where a call of the helper would bypass the cache."""
    import torch

    body = torch.fx.symbolic_trace(fn).graph
    params = [n for n in body.nodes if n.op == "placeholder"]
    return graph.graph_copy(body, dict(zip(params, inputs, strict=True)))


def fill_example_values(graph) -> int:
    """Give each call node a rewrite added its example value (its op run on its inputs' example
    values, under their fake mode), as Dynamo records one for every node: AOTAutograd's cache judges a
    method call safe only on a node whose value is a tensor, and bypasses the whole graph otherwise.
    Returns how many were filled; a graph without fake values (a symbolic trace) is left as it is."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.fx.node import map_arg

    fakes = (n.meta.get("example_value") for n in graph.nodes)
    mode = next((v.fake_mode for v in fakes if isinstance(v, FakeTensor)), None)
    if mode is None:
        return 0
    filled, missing = 0, object()
    for node in graph.nodes:
        if node.op not in ("call_function", "call_method") or "example_value" in node.meta:
            continue
        args, kwargs = map_arg((node.args, node.kwargs), lambda a: a.meta.get("example_value", missing))
        if any(v is missing for v in _leaves((args, kwargs))):
            continue
        try:
            with mode:
                value = (getattr(args[0], node.target)(*args[1:], **kwargs) if node.op == "call_method"
                         else node.target(*args, **kwargs))
        except Exception:   # an op fake tensors do not run (an assert): no value, as before
            continue
        node.meta["example_value"] = value
        filled += 1
    return filled


def _leaves(tree):
    if isinstance(tree, (list, tuple)):
        for t in tree:
            yield from _leaves(t)
    elif isinstance(tree, dict):
        for t in tree.values():
            yield from _leaves(t)
    else:
        yield tree
