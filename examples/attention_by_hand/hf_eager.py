"""Attention in the form of Hugging Face's eager attention (transformers models/llama
``eager_attention_forward``, its weights not returned): ``key.transpose(2, 3)``, an additive mask, the
softmax upcast to float32 and cast back, dropout. The sdpa trial arm swaps this form too."""

import torch
import torch.nn.functional as F

from model import HandAttention


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0):
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = F.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value)
    return attn_output


class EagerAttention(HandAttention):
    """HandAttention's projections around the eager form; ``mask`` is additive (0 or -inf)."""

    def forward(self, x, mask):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = eager_attention_forward(self, q, k, v, mask, (d // self.heads) ** -0.5)
        return x + self.proj(y.transpose(1, 2).reshape(b, n, d))


def additive_causal_mask(n: int, device, dtype) -> torch.Tensor:
    """0 where a query may see, -inf above the diagonal."""
    blocked = torch.triu(torch.ones(n, n, dtype=torch.bool, device=device), diagonal=1)
    return torch.zeros(n, n, device=device, dtype=dtype).masked_fill(blocked, float("-inf"))
