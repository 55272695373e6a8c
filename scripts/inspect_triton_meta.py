#!/usr/bin/env python3
"""Report what a Triton kernel file declares and does: parameters, hints, memory ops, configs.

    python scripts/inspect_triton_meta.py KERNEL.py [--ir file.ttir --ir file.ttgir ...] \
        --json-out meta.json [--kernel NAME]

The file is read with `ast`, never executed, so Inductor output of any torch version (and
hand-written @triton.jit files) can be inspected on any machine.  With --ir, the hints that reached
the compiled IR (tt.divisibility / tt.pointer_range per argument, llvm.intr.assume) are reported too.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.base.errors import ArgumentParser, InputError, run_main  # noqa: E402

SCHEMA = "triton_meta/1"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="inspect_triton_meta.py", example='python scripts/inspect_triton_meta.py autotune_kernels/triton_poi_fused_add_0.py --json-out meta.json', description=__doc__.split("\n\n")[0])
    p.add_argument("kernel_file", help="kernel .py: Inductor output, a captured standalone kernel, or "
                                       "a hand-written @triton.jit file")
    p.add_argument("--ir", action="append", default=[], metavar="FILE",
                   help=".ttir / .ttgir / .llir of the same kernel (repeatable)")
    p.add_argument("--kernel", help="report only this jit function")
    p.add_argument("--json-out", required=True)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from pathlib import Path

    from tko.read import kernel_ir, kernel_source
    from tko.base.artifact import write_artifact
    from tko.base import inputs
    from tko.base.atomic import check_outputs

    check_outputs(args.json_out)

    _, parsed = kernel_source.read_kernel_file(args.kernel_file)
    kernels = parsed["kernels"]
    if args.kernel:
        kernels = [kernel_source.select_kernel(parsed, args.kernel)]
    try:
        entry = kernel_source.select_kernel({"kernels": kernels}, None)
    except InputError:  # several kernels (e.g. Inductor output code): none is "the" entry
        entry = None
    ir_reports = []
    for ir_path in args.ir:
        p = Path(ir_path)
        try:
            text = inputs.read_text(p, "an IR file (.ttir / .ttgir / .llir)")
        except UnicodeDecodeError:
            raise InputError(f"{ir_path}: not a text file") from None
        stage = p.suffix.lstrip(".") if p.suffix in (".ttir", ".ttgir", ".llir", ".mlir") else None
        ir = kernel_ir.parse_ir_text(text, stage)
        if not ir["functions"] and ir["stage"] != "llir":
            raise InputError(f"{ir_path}: no tt.func found; expected a .ttir or .ttgir file")
        names = {f["name"] for f in ir["functions"]}
        target = next((k for k in kernels if k["name"] in names), entry)
        if target is None:
            raise InputError(f"{ir_path}: its function ({', '.join(sorted(names)) or 'none'}) is not one of "
                             f"the file's kernels; name one with --kernel")
        report = kernel_ir.attach_ir(target, ir, str(p))
        target.setdefault("ir", []).append(report)
        ir_reports.append({"file": str(p), "kernel": target["name"], "stage": report["stage"]})
    findings = []
    for k in kernels:
        prefix = f"{k['name']}: " if len(kernels) > 1 else ""
        findings += [prefix + f for f in k["findings"]]
        for report in k.get("ir", []):
            findings += [prefix + f for f in report["findings"]]
    payload = {
        "source": os.path.abspath(args.kernel_file),
        "origin": parsed["origin"],
        "entry_kernel": entry["name"] if entry else None,
        "kernels": kernels,
        "ir_files": ir_reports,
        "findings": findings,
    }
    write_artifact(args.json_out, SCHEMA, "inspect_triton_meta.py", payload)
    for k in kernels:
        meta = k["triton_meta"]
        enc = f", triton_meta {meta['encoding']}" if meta else ""
        ptrs = sum(1 for p in k["params"] if p["kind"] == "pointer")
        print(f"{k['name']}: {k['kind']}{enc}; {ptrs} pointer args, {len(k['memory_ops'])} loads/stores, "
              f"{len(k['atomics'])} atomics, {len(k['reductions'])} reductions, "
              f"{len(k['hint_calls'])} hint calls, {len(k['configs'])} configs")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog="inspect_triton_meta.py"))
