#!/usr/bin/env python3
"""Count load/store/atomic/LDS/matrix instruction families in AMDGCN, PTX or SASS dumps.

INPUT is a listing (.amdgcn, .s, .ptx, .sass, .cubin), a Triton <name>.json
(its listing is read from the same folder), or a tree: a Triton cache directory,
a TorchInductor cache root, or the output folder of collect_inductor_artifacts.py.

Per kernel it reports exact instruction counts rolled into families (buffer_,
global_, flat_, ds_, s_load, scratch, mfma / Hygon v_mmac, s_waitcnt ...), the
access widths, registers, spills, LDS (from Triton's metadata, since the asm says
0), occupancy, a verdict (buffer / global / flat / mixed / none) with findings,
and the instruction mix per byte moved.

Example:
  python scan_amdgcn.py ./triton_artifacts --kernel triton_poi_fused_add_0 --json-out isa_scan.json
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.base.errors import ArgumentParser, InputError, run_main  # noqa: E402

SCHEMA = "isa_scan/1"


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="scan_amdgcn.py", example='python scripts/scan_amdgcn.py triton_artifacts --kernel triton_poi_fused_add_0 --json-out isa_scan.json', description=__doc__.split("\n\n")[0],
                            epilog="Output contract: references/json_contracts.md (isa_scan/1).")
    parser.add_argument("artifacts", metavar="INPUT",
                        help="listing, Triton <name>.json, or a folder to search")
    parser.add_argument("--kernel", help="keep kernels whose name equals this, else contains it")
    parser.add_argument("--arch", help="judge occupancy for this arch (default: the listing's "
                                       "own target), e.g. gfx942, gfx936")
    parser.add_argument("--json-out", help="write the isa_scan/1 JSON here")
    parser.add_argument("--sass", action="store_true",
                        help="in a tree, also disassemble .cubin files that have a .ptx next to "
                             "them (runs the bundled cuobjdump twice per file)")
    parser.add_argument("--quiet", action="store_true", help="no summary on stdout")
    return parser


def summary_lines(kernels: list[dict]) -> list[str]:
    lines = []
    for k in kernels:
        fam = k["families"]
        if k["format"] == "amdgcn":
            counts = (f"buffer {k['data_ops']['buffer']}  global {k['data_ops']['global']}  "
                      f"flat {k['data_ops']['flat']}  ds {fam['ds_read'] + fam['ds_write']}  "
                      f"spill {k['spill']['stores']}/{k['spill']['loads']}")
            occ = k["occupancy"].get("waves_per_simd")
            extra = f"  waves/SIMD {occ}" if occ is not None else ""
        else:
            counts = f"global {k['data_ops']['global']}"
            extra = ""
        lines.append(f"{k['name']} [{k['format']} {k['arch'] or '?'}] verdict={k['verdict']}  "
                     f"{counts}{extra}  ({k.get('source', '')})")
        for finding in k["findings"]:
            lines.append(f"  - {finding}")
    return lines


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from tko.base import archs
    from tko.base.artifact import write_artifact
    from tko.read.isa import scan_path
    from tko.base.atomic import check_outputs

    check_outputs(args.json_out)

    if args.arch and archs.info(args.arch) is None and \
            not re.fullmatch(r"gfx[0-9a-f]{3,4}|sm_\d+", archs.normalize(args.arch)):
        known = ", ".join(sorted(archs.ARCHS))
        raise InputError(f"unknown --arch {args.arch!r}; expected gfxNNN or sm_NN, e.g. {known}")
    try:
        kernels = scan_path(args.artifacts, kernel=args.kernel, arch=args.arch, sass=args.sass)
    except InputError as exc:
        if os.path.isfile(args.artifacts) and not str(exc).startswith(args.artifacts):
            raise InputError(f"{args.artifacts}: {exc}") from None
        raise
    verdicts: dict[str, int] = {}
    for k in kernels:
        verdicts[k["verdict"]] = verdicts.get(k["verdict"], 0) + 1
    payload = {
        "input": os.path.abspath(args.artifacts),
        "kernel_filter": args.kernel,
        "arch_requested": archs.normalize(args.arch) if args.arch else None,
        "kernels": kernels,
        "summary": {"kernels": len(kernels), "verdicts": verdicts,
                    "formats": sorted({k["format"] for k in kernels}),
                    "archs": sorted({k["arch"] for k in kernels if k["arch"]})},
    }
    if args.json_out:
        write_artifact(args.json_out, SCHEMA, "scan_amdgcn.py", payload)
    if not args.quiet:
        print("\n".join(summary_lines(kernels)))
        if args.json_out:
            print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog="scan_amdgcn.py"))
