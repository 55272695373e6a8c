#!/usr/bin/env python3
"""A/B a repro end to end with and without @torch._dynamo.disable on a named region.

    python scripts/eager_fallback_ab.py --disable __main__:f --runs 3 --json-out ab.json \
        -- python examples/pointwise_chain.py --steps 50

Both arms run in fresh processes, interleaved; the repro's own "<x> ms/step" line is the metric
(--metric-regex to change); outputs saved to $TKO_AB_OUTPUT by the repro are compared.
"""

from __future__ import annotations

import sys

from tko.base import atomic
from tko.base.artifact import write_artifact
from tko.base.errors import ArgumentParser, run_main

TOOL = "eager_fallback_ab.py"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog=TOOL, example='python scripts/eager_fallback_ab.py --disable __main__:f --runs 3 --json-out ab.json -- python repro.py --steps 50', description=__doc__.split("\n\n")[0],
                       epilog="Everything after '--' is the repro command.")
    p.add_argument("--disable", action="append", default=[], metavar="TARGET",
                   help="module:Name, module:Class.method or __main__:Name (repeatable)")
    p.add_argument("--runs", type=int, default=3, help="runs per arm, interleaved (default 3)")
    p.add_argument("--metric-regex", default=None, help="regex whose group 1 is the repro's ms/step")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    p.add_argument("--rtol", type=float, default=None)
    p.add_argument("--atol", type=float, default=None)
    p.add_argument("--json-out", required=True)
    p.add_argument("--markdown-out", default=None)
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    p = build_parser()
    a = p.parse_args(argv)
    from tko.remedies import fallback_ab

    result = fallback_ab.run_ab(cmd, a.disable, runs=a.runs,
                                metric_regex=a.metric_regex or fallback_ab.DEFAULT_METRIC,
                                timeout=a.timeout, rtol=a.rtol, atol=a.atol)
    write_artifact(a.json_out, "fallback_ab/1", TOOL, result)
    if a.markdown_out:
        atomic.write_text(a.markdown_out, fallback_ab.markdown(result))
    print(fallback_ab.markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
