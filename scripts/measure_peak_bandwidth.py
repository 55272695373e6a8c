#!/usr/bin/env python3
"""Measure this GPU's device-to-device copy bandwidth once and store it for "% of peak".

A large dst.copy_(src) (at least 1 GiB, random data) is timed with triton.testing.do_bench
(median); bytes read plus bytes written over that time is the copy bandwidth, the ceiling a
memory-bound kernel is compared against. The record goes into a device_peak/1 store, one record
per device name and arch (a new measurement replaces the old one): --out, else $TKO_PEAKS_FILE,
else ~/.cache/hygon-triton-kernel-optimizer/device_peaks.json. The benchmark template and the
reports read it through tko.measure.peaks.lookup, which falls back to references/device_peaks.yaml.

--lookup NAME ARCH prints (as JSON) the peak a report would use for that device, and where it
comes from, without measuring anything.

Examples:
  python scripts/measure_peak_bandwidth.py
  python scripts/measure_peak_bandwidth.py --out ./device_peaks.json --size-gib 2
  python scripts/measure_peak_bandwidth.py --lookup "NVIDIA H200" sm_90
  python scripts/measure_peak_bandwidth.py --lookup "BW200, UBB BW1000" gfx936
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.measure import peaks  # noqa: E402
from tko.base.errors import ArgumentParser, InputError, run_main  # noqa: E402

TOOL = "measure_peak_bandwidth.py"


def build_parser() -> ArgumentParser:
    intro, examples = __doc__.split("Examples:", 1)
    p = ArgumentParser(prog=TOOL, description=intro.strip(), epilog="examples:" + examples,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, metavar="FILE",
                   help=f"store to update (default: ${peaks.STORE_ENV}, else {peaks.DEFAULT_STORE})")
    p.add_argument("--size-gib", type=float, default=1.0,
                   help="size of the copied buffer in GiB, at least 1 (default %(default)s)")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16", "int32"),
                   help="element type of the buffer (default %(default)s)")
    p.add_argument("--device", type=int, default=None, metavar="INDEX", help="GPU index")
    p.add_argument("--warmup-ms", type=float, default=50.0, help="do_bench warm-up, ms")
    p.add_argument("--rep-ms", type=float, default=300.0, help="do_bench repetition time, ms")
    p.add_argument("--lookup", nargs=2, metavar=("NAME", "ARCH"), default=None,
                   help="print the peak known for this device and where it comes from; no measuring")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.lookup:
        name, arch = args.lookup
        peak = peaks.lookup(name, arch, store=args.out)
        print(json.dumps({"device": name, "arch": arch, "peak": peak,
                          "description": peaks.describe(peak)}, indent=2))
        return 0
    if not args.size_gib >= 1.0:
        raise InputError(f"--size-gib {args.size_gib}: the copy must be at least 1 GiB so the "
                         "caches do not count")
    if args.warmup_ms <= 0 or args.rep_ms <= 0:
        raise InputError("--warmup-ms and --rep-ms must be positive")
    record = peaks.measure_copy(int(args.size_gib * (1 << 30)), dtype=args.dtype,
                                warmup_ms=args.warmup_ms, rep_ms=args.rep_ms, index=args.device)
    path = peaks.record_measurement(record, args.out, tool=TOOL)
    print(f"{record['name']} ({record['arch']}): copy {record['copy_gbps']:.1f} GB/s "
          f"(median {record['median_ms']:.4f} ms for {record['bytes_moved']} bytes read + written; "
          f"p20-p80 {record['copy_gbps_p20']:.0f}-{record['copy_gbps_p80']:.0f} GB/s) -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
