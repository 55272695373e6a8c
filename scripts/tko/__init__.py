"""Shared core of the hygon-triton-kernel-optimizer scripts.

Every script in ``scripts/`` is a thin argparse front over this package.  The
package imports nothing heavy at import time: torch and triton are imported
lazily by the modules that need them, so parsing a log or an AMDGCN file works
on a machine that has neither.
"""

__version__ = "0.1.0"
