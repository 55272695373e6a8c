#!/usr/bin/env python3
"""Record the local Torch / Triton / HIP-CUDA / DCU tool environment as triton_env.json.

Run this first.  It checks that torch, triton and the HIP (or CUDA) runtime are
importable, lists the GPUs and flags an arch outside the expected DCU set
(gfx936, gfx938 unless --expect-arch says otherwise), finds the ROCm/DTK
install and the profiling / ISA tools, records AMDGCN_USE_BUFFER_OPS and what
this Triton does when it is unset, and with --smoke compiles a tiny kernel
with the flag unset and set to 1, each in its own process.  Nothing here
forces the flag.

Examples:
  python scripts/check_env.py --out triton_env.json
  python scripts/check_env.py --out triton_env.json --smoke
  python scripts/check_env.py --smoke --smoke-target gfx942     # offline compile, no GPU needed
  python scripts/check_env.py --expect-arch gfx928 --expect-arch gfx936
  python scripts/check_env.py --show triton_env.json               # summary of a recorded run
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.env import children, env_probe, smoke  # noqa: E402
from tko.base.errors import ArgumentParser, InputError, run_main  # noqa: E402
from tko.base import archs, artifact, atomic  # noqa: E402

SCHEMA = "triton_env/1"
TOOL = "check_env.py"


def build_parser() -> ArgumentParser:
    intro, examples = __doc__.split("Examples:", 1)
    p = ArgumentParser(prog=TOOL, description=intro.strip(), epilog="examples:" + examples,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="triton_env.json",
                   help="JSON output path (default: ./triton_env.json)")
    p.add_argument("--expect-arch", action="append", default=None, metavar="ARCH",
                   help="an expected GPU arch (repeatable); default: "
                        + ", ".join(archs.EXPECTED_DCU_ARCHS))
    p.add_argument("--smoke", action="store_true",
                   help="compile (and on a GPU launch) a tiny kernel with AMDGCN_USE_BUFFER_OPS "
                        "unset and =1, each in its own subprocess")
    p.add_argument("--smoke-target", action="append", default=[], metavar="ARCH",
                   help="also compile the smoke kernel offline for this target, e.g. gfx942, "
                        "gfx90a or sm_90 (repeatable; implies --smoke)")
    p.add_argument("--tool-timeout", type=float, default=children.TOOL_TIMEOUT_S, metavar="S",
                   help="timeout of each external tool, seconds (default %(default)s)")
    p.add_argument("--smoke-timeout", type=float, default=smoke.SMOKE_TIMEOUT_S, metavar="S",
                   help="timeout of each smoke subprocess, seconds (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="do not print the summary")
    p.add_argument("--show", metavar="JSON",
                   help="print the summary of a recorded triton_env.json (e.g. one brought back "
                        "from a remote DCU node) and exit; probes nothing")
    return p


def _check_arch(text: str, flag: str) -> str:
    name = archs.normalize(text)
    if not (name.startswith("gfx") and len(name) > 3) and not (
            name.startswith("sm_") and name[3:].isascii() and name[3:].isdigit()):
        raise InputError(f"{flag} {text!r}: expected an arch such as gfx936, gfx942 or sm_90")
    return name


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.show:
        doc = artifact.read_artifact(args.show, "triton_env/1")
        try:
            lines = env_probe.summary_lines(doc)
        except (AttributeError, TypeError, KeyError, ValueError) as exc:
            raise InputError(f"{args.show}: a field of this triton_env/1 file has the wrong type "
                             f"or is missing ({type(exc).__name__}: {exc})") from None
        for line in lines:
            print(line)
        return 0
    expected = [_check_arch(a, "--expect-arch") for a in args.expect_arch] if args.expect_arch \
        else list(archs.EXPECTED_DCU_ARCHS)
    targets = [_check_arch(a, "--smoke-target") for a in args.smoke_target]
    for t in targets:
        try:
            smoke.target_for(t)
        except ValueError as exc:
            raise InputError(f"--smoke-target: {exc}") from None
    for name, value in (("--tool-timeout", args.tool_timeout), ("--smoke-timeout", args.smoke_timeout)):
        if not value > 0:
            raise InputError(f"{name} must be > 0, got {value}")
    atomic.check_outputs(args.out)
    payload = env_probe.probe(expected, smoke=args.smoke or bool(targets), smoke_targets=targets,
                              tool_timeout=args.tool_timeout, smoke_timeout=args.smoke_timeout)
    doc = artifact.write_artifact(args.out, SCHEMA, TOOL, payload)
    if not args.quiet:
        print(f"{TOOL}: wrote {args.out}")
        for line in env_probe.summary_lines(doc):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
