"""Shared core of the hygon-triton-kernel-optimizer scripts.

Every script in ``scripts/`` is a thin argparse front over this package.  The
package imports nothing heavy at import time: torch and triton are imported
lazily by the modules that need them, so parsing a log or an AMDGCN file works
on a machine that has neither.

The modules live in one subpackage per stage a kernel goes through (ARCHITECTURE.md). The stages
are floors, lowest first: a module imports from its own floor or a lower one, never a higher one,
and the modules here at the root (``cli``) stand above them all (tests/test_architecture.py).
"""

__version__ = "0.1.0"

FLOORS = ("base", "read", "compile", "measure", "patch", "env", "remedies", "verdict", "chains")
