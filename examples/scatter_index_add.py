"""Scatter-heavy message passing: gather rows by edge index, weight them, index_add into nodes.

Inductor lowers index_add to an atomic-add kernel whose speed depends on the real index
distribution; a model rewrite (sorted segment reduction) is often the better fix than tuning.
"""

import torch

from _repro import maybe_compile, parse_args, run_steps


def f(node_feat, edge_src, edge_dst, edge_w):
    msg = node_feat[edge_src] * edge_w[:, None]
    out = torch.zeros_like(node_feat)
    return out.index_add_(0, edge_dst, msg)


def main():
    args = parse_args(__doc__, lambda p: p.add_argument("--nodes", type=int, default=100_000))
    torch.manual_seed(0)
    n, e, d = args.nodes, args.nodes * 8, 64
    node_feat = torch.randn(n, d, device=args.device)
    # Skewed destinations (power-law-ish), as in real graphs: hot rows contend on atomics.
    edge_dst = (torch.rand(e, device=args.device) ** 3 * n).long().clamp_(max=n - 1)
    edge_src = torch.randint(0, n, (e,), device=args.device)
    edge_w = torch.rand(e, device=args.device)
    g = maybe_compile(f, args)
    run_steps(lambda: g(node_feat, edge_src, edge_dst, edge_w), args, "scatter_index_add")


if __name__ == "__main__":
    main()
