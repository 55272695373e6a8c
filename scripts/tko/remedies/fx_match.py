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
