#!/usr/bin/env python3
"""Summarize autotune logs: per kernel, configs ranked by time, winner, spread, GB/s, regs/spills.

Reads any mix of: the capture log autotune.log (autotune_event/1 JSON Lines), Triton's
TRITON_PRINT_AUTOTUNING=1 output, Inductor's kernel_autotune metric table CSV, and
TORCH_LOGS="+inductor" debug lines. Lines that cannot be read whole are listed in the JSON
`skipped` list and counted on stderr. An empty or unrecognisable file is an error (exit 2); among
several files it is listed in `skipped`, unless none of them holds an autotune record.

    python summarize_autotune_log.py autotune_kernels/autotune.log log_profile.txt \
        --json-out autotune_summary.json --markdown-out autotune_summary.md
"""

from __future__ import annotations

import functools
import gc
import os
import sys

from tko.base import artifact, atomic, inputs
from tko.read.autotune_summary import default_spread_threshold, render_markdown, summarize
from tko.read.autotune_log import parse_files, paused_gc
from tko.base.errors import ArgumentParser, InputError, exit_now, run_main

SCHEMA = "autotune_summary/2"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="summarize_autotune_log.py", example='python scripts/summarize_autotune_log.py autotune_kernels/autotune.log --json-out autotune_summary.json --markdown-out autotune_summary.md',
                       description=__doc__.split("\n\n")[0],
                       epilog="Output contract: references/json_contracts.md, autotune_summary/2.")
    p.add_argument("logs", nargs="+", metavar="LOG",
                   help="autotune.log, log_profile.txt, metric_table_kernel_autotune.csv, ...; a capture "
                        "folder stands for the autotune.log in it")
    p.add_argument("--json-out", metavar="PATH", help="write the autotune_summary/2 JSON here")
    p.add_argument("--markdown-out", metavar="PATH", help="write a Markdown report here")
    p.add_argument("--spread-threshold", type=float, default=None, metavar="RATIO",
                   help="flag a kernel 'flat_spread' when slowest/fastest config time is below "
                        "RATIO: tuning it is pointless (default: small_autotune_spread of "
                        "references/decision_rules.yaml, 1.03)")
    return p


def log_in(path: str) -> str:
    """A capture folder (TRITON_CAPTURE_DIR, or the folder above it) stands for its autotune.log."""
    if not os.path.isdir(path):
        return path
    for candidate in (os.path.join(path, "autotune.log"), os.path.join(path, "autotune_kernels", "autotune.log")):
        if os.path.isfile(candidate):
            return candidate
    raise InputError(f"{path}: a folder with no autotune.log (nor autotune_kernels/autotune.log) in it")


def summarize_logs(args, held: list | None = None) -> tuple[int, int, int]:
    """Parse, summarize and write the outputs; (kernels, skipped lines, over-long lines among them).  ``held``: a list that
    keeps the parsed logs and the summary for the process exit to free (:func:`exit_now`);
    without it they are gone when this returns, so the garbage collector resumes on an empty heap."""
    parsed = parse_files([log_in(path) for path in args.logs])
    summary = summarize(parsed, args.spread_threshold)
    if held is not None:
        held += (parsed, summary)
        gc.freeze()  # out of the collector's sight: resuming it would walk millions of held objects (~1 s)
    if args.json_out:
        artifact.write_artifact(args.json_out, SCHEMA, "summarize_autotune_log.py", summary)
    markdown = render_markdown(summary)
    if args.markdown_out:
        atomic.write_text(args.markdown_out, markdown)
    if not args.json_out and not args.markdown_out:
        sys.stdout.write(markdown)
    overlong = sum(i.get("overlong_lines", 0) for i in summary["inputs"])
    return len(summary["kernels"]), len(summary["skipped"]), overlong


def main(argv=None, held: list | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.spread_threshold is None:
        args.spread_threshold = default_spread_threshold()
    if not args.spread_threshold >= 1.0:
        raise InputError(f"--spread-threshold must be >= 1.0, got {args.spread_threshold}")
    atomic.check_outputs(args.json_out, args.markdown_out)
    with paused_gc():  # one pause for the whole run: each resume would walk every object again
        kernels, skipped, overlong = summarize_logs(args, held)
    print(f"summarize_autotune_log.py: {kernels} kernels"
          + (f", {skipped} unreadable lines skipped (listed in the JSON 'skipped')" if skipped else "")
          + (f", of them {overlong} over-long line{'s' * (overlong > 1)} skipped unread (over the "
             f"{inputs.MAX_LINE_BYTES}-byte line cap)" if overlong else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    # the parsed logs and the summary are freed by the exit, not object by object (exit_now)
    exit_now(run_main(functools.partial(main, held=[]), prog="summarize_autotune_log.py"))
