"""A transformer attention block with attention written by hand: q @ k^T, a scale, a causal mask,
softmax, @ v. F.scaled_dot_product_attention computes the same without the L x L score matrix."""

import math

import torch
import torch.nn.functional as F


class HandAttention(torch.nn.Module):
    def __init__(self, d=1024, heads=16):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x, mask):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        return x + self.proj(y.transpose(1, 2).reshape(b, n, d))


def causal_mask(n: int, device) -> torch.Tensor:
    """True above the diagonal: the positions a query may not see."""
    return torch.triu(torch.ones(n, n, dtype=torch.bool, device=device), diagonal=1)
