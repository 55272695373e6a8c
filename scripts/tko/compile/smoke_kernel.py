"""The tiny pointwise kernel check_env's ``--smoke`` compiles (and launches on a GPU).

Imported only inside the smoke subprocess: importing this module imports
triton.  Triton's JIT reads the kernel's source from a file, so it lives in a
module of its own rather than in a string.
"""

import triton
import triton.language as tl

BLOCK = 256
SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
POINTER_ARGS = (0, 1)


@triton.jit
def scale_shift(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2.0 + 1.0, mask=mask)
