#!/usr/bin/env python3
"""Compare two ranked profiles (before and after a change): GPU kernel time, launches, and the
kernels that changed, appeared or went away.

    python scripts/profile_kernels.py --json-out before.json -- python repro.py --steps 20
    # ... change the model (rewrite, @torch._dynamo.disable, a config) ...
    python scripts/profile_kernels.py --json-out after.json -- python repro.py --steps 20
    python scripts/compare_profiles.py before.json after.json --json-out cmp.json --markdown-out cmp.md

Give --steps-before/--steps-after when the two runs profiled different numbers of steps; times are
then per step. Writes ``profile_comparison/1``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.base.errors import ArgumentParser, run_main  # noqa: E402

SCHEMA = "profile_comparison/1"
TOOL = "compare_profiles.py"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog=TOOL, example='python scripts/compare_profiles.py before/profile.json after/profile.json --json-out compare.json --markdown-out compare.md', description=__doc__.split("\n\n")[0])
    p.add_argument("before", help="kernel_profile/1 JSON of the run before the change")
    p.add_argument("after", help="kernel_profile/1 JSON of the run after it")
    p.add_argument("--steps-before", type=int, default=1, help="steps the first profile covers (default 1: totals)")
    p.add_argument("--steps-after", type=int, default=1, help="steps the second profile covers")
    p.add_argument("--json-out", required=True)
    p.add_argument("--markdown-out", default=None)
    p.add_argument("--top", type=int, default=25, help="kernels listed in the Markdown (default 25)")
    return p


def main(argv=None) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    from tko.read import profile_compare
    from tko.base.artifact import read_artifact, write_artifact
    from tko.base.atomic import check_outputs, write_text

    check_outputs(a.json_out, a.markdown_out)
    before = read_artifact(a.before, "kernel_profile")
    after = read_artifact(a.after, "kernel_profile")
    payload = profile_compare.compare(before, after, a.steps_before, a.steps_after,
                                      labels=(a.before, a.after))
    payload["inputs"] = {"before": os.path.abspath(a.before), "after": os.path.abspath(a.after)}
    markdown = profile_compare.markdown(payload, a.top) if a.markdown_out else None
    write_artifact(a.json_out, SCHEMA, TOOL, payload)
    if markdown is not None:
        write_text(a.markdown_out, markdown)
    print(payload["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
