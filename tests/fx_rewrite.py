"""What the model-rewrite tests share: a callable compiled with a backend that runs one arm's FX
rewrite on Dynamo's graph, as the trials' pre-grad pass does."""

from __future__ import annotations


def assert_cacheable(nodes) -> None:
    """Each node AOTAutograd's cache takes (else it bypasses the whole graph: each trial run of the
    arm compiles again); nothing to check on a torch without that cache."""
    try:
        from torch._functorch._aot_autograd.autograd_cache import check_node_safe
    except ImportError:
        return
    for node in nodes:
        check_node_safe(node)


def compiled_with_rewrite(fn, rewrite_module, codes=None, **compile_kwargs):
    """(fn compiled so that each graph Dynamo captures goes through the rewrite as the trials' pass
    applies it (``graph_rewrites.apply``), every node it adds cacheable, and runs as rewritten; the
    count replaced per graph); each rewritten graph's code is appended to ``codes`` when given."""
    import torch

    from tko.remedies import graph_rewrites

    counts = []

    def backend(gm, example_inputs):
        before = set(gm.graph.nodes)
        counts.append(graph_rewrites.apply(rewrite_module, gm.graph))
        assert_cacheable([n for n in gm.graph.nodes if n not in before])
        gm.recompile()
        if codes is not None:
            codes.append(gm.code)
        return gm

    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, **compile_kwargs), counts
