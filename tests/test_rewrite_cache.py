"""A rewrite arm's later runs read the compile caches its first run wrote, as the baseline's do.

On the H200 (torch 2.11) every rewrite arm's cached first step took about twice the baseline's
(2.0-2.8 s against 1.0-1.3 s, examples/recorded_h200/rewrites/*/trials.json): Inductor's cache key
pickles its whole config, the pre-grad pass with it, and the pass held a module (no pickle: a bypass);
AOTAutograd's cache also bypassed graphs calling a Python helper, or a tensor method on a node with no
example value."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest

from conftest import ROOT
from tko.remedies import attention_rewrite, cross_entropy_rewrite, graph_rewrites


def test_the_pass_pickles_the_same_whatever_it_counted():
    first, later = graph_rewrites._Counter(attention_rewrite), graph_rewrites._Counter(attention_rewrite)
    later.replaced, later.graphs = 3, 2
    assert pickle.dumps(first) == pickle.dumps(later)
    assert pickle.dumps(first) != pickle.dumps(graph_rewrites._Counter(cross_entropy_rewrite))
    assert pickle.loads(pickle.dumps(first)).__dict__ == first.__getstate__()


def test_fill_example_values_gives_added_nodes_their_fake_value():
    """The values a rewrite's new nodes get are what their ops give on Dynamo's fake inputs."""
    import torch
    import torch.nn.functional as F

    def fn(q, k, v, mask):
        s = (q @ k.transpose(-2, -1)).masked_fill(mask, float("-inf"))
        return torch.softmax(s, dim=-1) @ v

    graphs = []

    def backend(gm, example_inputs):
        before = set(gm.graph.nodes)
        assert graph_rewrites.apply(attention_rewrite, gm.graph) == 1
        graphs.append([n for n in gm.graph.nodes if n not in before])
        gm.recompile()
        return gm

    torch._dynamo.reset()
    q = torch.randn(2, 3, 8, 4)
    torch.compile(fn, backend=backend)(q, q, q, torch.ones(8, 8, dtype=torch.bool).triu(1))
    added = {n.target if isinstance(n.target, str) else n.target.__name__: n for n in graphs[0]}
    value = {name: n.meta.get("example_value") for name, n in added.items()}
    assert tuple(value["scaled_dot_product_attention"].shape) == (2, 3, 8, 4)
    assert value["all"].shape == () and value["all"].dtype == torch.bool          # the guard's verdict
    assert tuple(value["triu"].shape) == (8, 8) and value["size"] == 8
    assert "_assert_async" in added and value["_assert_async"] is None            # fake tensors do not assert
    assert added["scaled_dot_product_attention"].target is F.scaled_dot_product_attention


SCRIPT = """
import json, sys, torch
sys.path[:0] = [{scripts!r}, {example!r}]
from tko.remedies import graph_rewrites
graph_rewrites.install_from_env({{"TKO_SDPA_REWRITE": "1"}})
import model
torch.manual_seed(0)
m = model.HandAttention(64, 4)
x = torch.randn(2, 16, 64, requires_grad=True)
torch.compile(m)(x, model.causal_mask(16, "cpu")).sum().backward()
from torch._dynamo.utils import counters
print(json.dumps({{**counters["inductor"], **counters["aot_autograd"]}}))
"""


@pytest.mark.slow
def test_a_second_process_of_the_sdpa_arm_reads_both_caches(tmp_path):
    script = SCRIPT.format(scripts=str(ROOT / "scripts"), example=str(ROOT / "examples" / "attention_by_hand"))
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), TRITON_CACHE_DIR=str(tmp_path / "triton"))
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "TKO_SDPA: replaced 1 attention pattern(s) in 1 graph(s), 1 with is_causal=True" in proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first.get("fxgraph_cache_miss") and not first.get("autograd_cache_bypass"), first
    assert second.get("fxgraph_cache_hit") == first["fxgraph_cache_miss"] and second.get("autograd_cache_hit") == 1, second
