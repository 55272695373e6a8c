"""What the model-rewrite tests share: a callable compiled with a backend that runs one arm's FX
rewrite on Dynamo's graph, as the trials' pre-grad pass does."""

from __future__ import annotations


def compiled_with_rewrite(fn, rewrite_module, codes=None, **compile_kwargs):
    """(fn compiled so that each graph Dynamo captures goes through ``rewrite_module.rewrite`` and
    runs as rewritten, the count replaced per graph); each rewritten graph's code is appended to
    ``codes`` when given."""
    import torch

    counts = []

    def backend(gm, example_inputs):
        counts.append(rewrite_module.rewrite(gm.graph))
        gm.graph.lint()
        gm.recompile()
        if codes is not None:
            codes.append(gm.code)
        return gm

    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, **compile_kwargs), counts
