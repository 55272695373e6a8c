"""step.py with the attention in Hugging Face's eager form (hf_eager.py): the same projections, sizes
and flags; the mask additive. The sdpa trial arm should swap it as it swaps model.py's form."""

import step
from hf_eager import EagerAttention, additive_causal_mask

if __name__ == "__main__":
    step.main(EagerAttention, additive_causal_mask, "attention_hf_eager")
