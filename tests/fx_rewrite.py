"""What the model-rewrite tests share: a callable compiled with a backend that runs one arm's FX
rewrite on Dynamo's graph, as the trials' pre-grad pass does."""

from __future__ import annotations


def compiled_with_rewrite(fn, rewrite_module, **compile_kwargs):
    """(fn compiled so that each graph Dynamo captures goes through ``rewrite_module.rewrite`` and
    runs as rewritten, the count replaced per graph)."""
    import torch

    counts = []

    def backend(gm, example_inputs):
        counts.append(rewrite_module.rewrite(gm.graph))
        gm.graph.lint()
        gm.recompile()
        return gm

    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, **compile_kwargs), counts
