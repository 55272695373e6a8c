#!/usr/bin/env python3
"""Size sweep of the bundled row kernels against Inductor (``rowkernel_sweep/1``).

    python scripts/rowkernel_sweep.py [--ops softmax,rms_norm] [--dtypes fp16,bf16]
        [--cols 1024,...,65536] [--elements N | --rows N] [--modes bundled,inductor_default,...]
        [--direction fwd,bwd]
        [--peaks device_peaks.json | --peak-gbps N] [--warmup-ms MS] [--rep-ms MS] [--budget-s S]
        [--json-out sweep.json] [--markdown-out sweep.md] [--svg-out sweep.svg]

For each op (softmax, log_softmax, layer_norm, rms_norm), dtype and row length, times the bundled
kernel (tko.remedies.rowkernels; a refused row is recorded with its reason), torch.compile of the plain torch
op in Inductor's default mode, max-autotune-no-cudagraphs and coordinate-descent tuning (and, with
--modes eager, the op uncompiled), each checked against the fp32 reference. --direction bwd adds
(or, alone, runs only) the backward: the backward call timed alone on a forward run once before the
timed loop, the gradients checked against autograd of the fp32 reference. Bandwidth counts the
one-pass floor (input read once, output written once, weight and bias once; backward: y or x, dy
and dx once, the norms' weight, stats and parameter gradients once) and is given in % of the
copy peak: --peak-gbps, else the device_peak/1 store (--peaks, $TKO_PEAKS_FILE, the default store)
and references/device_peaks.yaml. Times are do_bench medians on a GPU; without one, a CPU wall clock
(the report says so). The Markdown table is printed last.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.base.errors import ArgumentParser, InputError, run_main  # noqa: E402

TOOL = "rowkernel_sweep.py"


def build_parser() -> ArgumentParser:
    from tko.remedies import rowkernel_sweep as rs

    p = ArgumentParser(prog=TOOL, description=__doc__.split("\n\n")[0],
                       example="python scripts/rowkernel_sweep.py --ops softmax,rms_norm --cols 1024,4096,65536 "
                               "--peaks device_peaks.json --json-out sweep.json --markdown-out sweep.md "
                               "--svg-out sweep.svg")
    p.add_argument("--ops", default=",".join(rs.OPS), help=f"comma list of {', '.join(rs.OPS)} (default: all)")
    p.add_argument("--dtypes", default=",".join(rs.DEFAULT_DTYPES),
                   help=f"comma list of {', '.join(rs.DTYPE_NAMES)} (default %(default)s)")
    p.add_argument("--cols", default=",".join(map(str, rs.DEFAULT_COLS)),
                   help="row lengths, comma list (default: powers of two 1024..65536)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--elements", type=int, default=rs.DEFAULT_ELEMENTS,
                      help="rows x cols of each input; rows = max(1, elements // cols) (default 2^27)")
    size.add_argument("--rows", type=int, default=None, help="a fixed row count instead of --elements")
    p.add_argument("--modes", default=",".join(rs.DEFAULT_MODES),
                   help=f"comma list of {', '.join(rs.MODES)} (default: all but eager)")
    p.add_argument("--direction", default=",".join(rs.DEFAULT_DIRECTIONS),
                   help="comma list of fwd (the op) and bwd (its backward call alone) (default %(default)s)")
    peak = p.add_mutually_exclusive_group()
    peak.add_argument("--peak-gbps", type=float, default=None, help="copy bandwidth to use, GB/s (read + write)")
    peak.add_argument("--peaks", default=None, metavar="FILE",
                      help="device_peak/1 store written by measure_peak_bandwidth.py")
    p.add_argument("--warmup-ms", type=float, default=25.0, help="do_bench warm-up, ms (default %(default)s)")
    p.add_argument("--rep-ms", type=float, default=100.0, help="do_bench repetition time, ms (default %(default)s)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="start no new case after this many seconds; the rest are recorded as skipped")
    p.add_argument("--json-out", default=None, help="where to write the rowkernel_sweep/1 JSON")
    p.add_argument("--markdown-out", default=None, help="where to write the Markdown report")
    p.add_argument("--svg-out", default=None, help="where to write the SVG chart (%% of copy vs row length)")
    return p


def _names(flag: str, value: str, known) -> list[str]:
    got = [v.strip() for v in value.split(",") if v.strip()]
    if not got:
        raise InputError(f"{flag}: empty list")
    bad = [g for g in got if g not in known]
    if bad:
        raise InputError(f"{flag}: unknown {bad[0]!r}; one of {', '.join(known)}")
    return list(dict.fromkeys(got))


def _cols(value: str) -> list[int]:
    try:
        cols = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--cols {value!r}: expected comma-separated integers") from None
    if not cols or any(not 1 <= c <= 1 << 24 for c in cols):
        raise InputError(f"--cols {value!r}: each row length must be in 1..{1 << 24}")
    return sorted(set(cols))


def resolve_peak(opts) -> tuple[float | None, dict | None, str]:
    """(copy GB/s, the lookup result, one line saying where it came from)."""
    from pathlib import Path

    from tko.measure import peaks
    from tko.measure.bench import timing_unavailable_reason

    if opts.peak_gbps is not None:
        return opts.peak_gbps, {"source": "--peak-gbps"}, f"copy peak {opts.peak_gbps:g} GB/s (--peak-gbps)"
    if opts.peaks and not Path(opts.peaks).is_file():
        raise InputError(f"--peaks {opts.peaks}: no such file")
    why = timing_unavailable_reason()
    if why:
        return None, None, f"no copy peak: {why}; pass --peak-gbps for % of copy"
    dev = peaks.current_device()
    found = peaks.lookup(dev["name"], dev["arch"], store=opts.peaks)
    if found and found.get("copy_gbps"):
        return found["copy_gbps"], found, peaks.describe(found)
    return None, found, (peaks.describe(found) + "; no copy figure, so % of copy is left empty"
                         if found else peaks.describe(None))


def main(argv=None) -> int:
    from tko.remedies import rowkernel_sweep as rs
    from tko.base.artifact import write_artifact
    from tko.base.atomic import check_outputs, write_text

    opts = build_parser().parse_args(argv)
    ops = _names("--ops", opts.ops, rs.OPS)
    dtypes = _names("--dtypes", opts.dtypes, rs.DTYPE_NAMES)
    modes = _names("--modes", opts.modes, rs.MODES)
    directions = _names("--direction", opts.direction, rs.DIRECTIONS)
    cols = _cols(opts.cols)
    for flag, value in (("--elements", opts.elements), ("--rows", opts.rows), ("--peak-gbps", opts.peak_gbps),
                        ("--warmup-ms", opts.warmup_ms), ("--rep-ms", opts.rep_ms), ("--budget-s", opts.budget_s)):
        if value is not None and not value > 0:
            raise InputError(f"{flag} must be positive")
    check_outputs(opts.json_out, opts.markdown_out, opts.svg_out)
    peak_gbps, peak, peak_line = resolve_peak(opts)
    print(peak_line, file=sys.stderr)

    def progress(r):
        shown = f"{r['ms']:.4f} ms, correct {r['correct']}" if r["ms"] else (r["reason"] or "")
        way = "" if r["direction"] == "fwd" else f" {r['direction']}"
        print(f"{r['op']} {r['dtype']} {r['n_cols']} {r['mode']}{way}: {r['status']} {shown}", file=sys.stderr,
              flush=True)

    payload = rs.sweep(ops, dtypes, cols, modes, elements=opts.elements, rows=opts.rows,
                       peak_gbps=peak_gbps, peak=peak, warmup_ms=opts.warmup_ms, rep_ms=opts.rep_ms,
                       budget_s=opts.budget_s, progress=progress, directions=directions)
    report = rs.markdown(payload)
    if opts.json_out:
        write_artifact(opts.json_out, rs.SCHEMA, TOOL, payload)
    if opts.markdown_out:
        write_text(opts.markdown_out, report)
    if opts.svg_out:
        write_text(opts.svg_out, rs.svg(payload) + "\n")
    print(report, end="")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
