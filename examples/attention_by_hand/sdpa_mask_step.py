"""step.py with attention already on F.scaled_dot_product_attention, but given the causal mask as
attn_mask (True where a query may attend) instead of is_causal=True: SDPA cannot use FlashAttention
with any mask. The sdpa trial arm should swap in is_causal=True (references/rewrite_catalog.yaml
sdpa_causal_mask)."""

import torch
import torch.nn.functional as F

import step
from model import HandAttention


class SdpaMaskAttention(HandAttention):
    def forward(self, x, keep):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        return x + self.proj(y.transpose(1, 2).reshape(b, n, d))


def causal_keep(n: int, device, dtype) -> torch.Tensor:
    """True on and below the diagonal: the positions a query may see."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


if __name__ == "__main__":
    step.main(SdpaMaskAttention, causal_keep, "attention_sdpa_mask")
