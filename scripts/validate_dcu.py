#!/usr/bin/env python3
"""Check on this machine the assumptions the code makes about a Hygon DCU, its DTK tools and its
Triton build (references/dcu_notes.md, "Not yet verified on a DCU").

Each check runs in a subprocess with a timeout and changes nothing on the machine (children get
their own environment copy, with the Triton / Inductor caches inside --out). Checks that need a DCU,
a GPU or a missing tool are skipped with the reason, so the same command runs on a CPU or an NVIDIA
/ AMD GPU. Writes OUT/dcu_validation.json (dcu_validation/1) and OUT/dcu_validation_raw.tar.gz (every
tool's stdout/stderr and the ISA files: send it back), then prints the pass / fail / skipped table.
Exit 0 when no check failed, 1 when one did, 2 on bad usage.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.base import artifact  # noqa: E402
from tko.env import dcu_validate  # noqa: E402
from tko.base.errors import ArgumentParser, InputError, run_main  # noqa: E402

TOOL = "validate_dcu.py"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog=TOOL, description=__doc__.split("\n\n")[0],
                       example="python scripts/validate_dcu.py --out dcu_check --timeout 300")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--timeout", type=float, default=dcu_validate.DEFAULT_TIMEOUT_S, metavar="S",
                   help="timeout of each subprocess, seconds (default %(default)s)")
    p.add_argument("--only", default=None, metavar="ID,...",
                   help="run only these checks: " + ", ".join(dcu_validate.CHECK_IDS))
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if not args.timeout > 0:
        raise InputError(f"--timeout must be > 0, got {args.timeout}")
    only = [i.strip() for i in args.only.split(",") if i.strip()] if args.only is not None else None
    if only is not None:
        if not only:
            raise InputError("--only: no check id given")
        dcu_validate.select(only)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise InputError(f"--out {args.out}: exists and is not a folder")
    payload = dcu_validate.run_all(args.out, timeout=args.timeout, only=only)
    path = os.path.join(args.out, "dcu_validation.json")
    artifact.write_artifact(path, dcu_validate.SCHEMA, TOOL, payload)
    print(f"{TOOL}: wrote {path} and {os.path.join(args.out, payload['archive'])}")
    for line in dcu_validate.table_lines(payload):
        print(line)
    return 1 if payload["counts"][dcu_validate.FAIL] else 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
