#!/usr/bin/env python3
"""Compile a Triton kernel file for one or more targets across hint variants, without running it.

    python scripts/probe_compile.py KERNEL.py --arch gfx942 [--arch gfx90a --arch sm_90] \
        --json-out probe.json [--markdown-out probe.md] [--variants baseline,pointer_range,...]

Each (variant, target) compiles with a fresh Triton cache in a worker process (a few compiles each;
a line per finished compile says where it stands; a compile stored before from the same inputs is
read back: tko/compile/compile_cache.py); the AMDGCN (or PTX) of every compile is scanned, and one
table shows which change turns global_load into buffer_load or widens loads, and the VGPRs /
occupancy / spills of each compile.  gfx936 / gfx938 and other DCU archs compile for their upstream
proxy (said in the output), or as themselves where an HCU backend (FlagTree hcu, triton-das) is
installed.  Exit 0 when at least one compile succeeded, 1 when all failed, 2 on bad input.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.base.errors import ArgumentParser, InputError, ToolFailure, run_main  # noqa: E402

SCHEMA = "compile_probe/1"


def local_arch() -> str:
    """The arch of GPU 0, or a usage error when there is none."""
    try:
        import torch
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            from tko.base.archs import torch_device_arch

            arch = torch_device_arch(torch.cuda.get_device_properties(0), bool(getattr(torch.version, "hip", None)))[0]
            if arch:
                return arch
    except Exception:
        pass
    raise InputError("no GPU on this machine; name a compile target with --arch "
                     "(e.g. --arch gfx942 --arch gfx90a --arch sm_90)")


def build_parser() -> ArgumentParser:
    from tko.compile.probe_variants import DEFAULT_VARIANTS
    p = ArgumentParser(prog="probe_compile.py", example='python scripts/probe_compile.py autotune_kernels/triton_poi_fused_add_0.py --arch gfx942 --json-out probe.json', description=__doc__.split("\n\n")[0])
    p.add_argument("kernel_file", help="kernel .py (Inductor output or hand-written @triton.jit)")
    p.add_argument("--arch", action="append", default=[],
                   help="target (repeatable): gfx942, gfx90a, gfx938 (-> proxy), sm_90 ...; "
                        "default: the local GPU, compiled natively by the installed Triton")
    p.add_argument("--kernel", help="jit function to compile (default: the file's entry kernel)")
    p.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                   help="comma list of baseline, buffer_ops_on, buffer_ops_off, pointer_range, assume, "
                        "multiple_of, blocks, warps, options (each backend compile option the target's "
                        "backend accepts: waves_per_eu, matrix_instr_nonkdim, kpack, HCU ones; or one "
                        "option's name); join with '+' to combine (default: %(default)s)")
    p.add_argument("--config", help="base config, e.g. 'XBLOCK=1024,num_warps=4' (default: captured "
                                     "winner, first declared config, or a rule from size hints)")
    p.add_argument("--signature", help="argument types for hand-written kernels, e.g. "
                                       "'x_ptr=*fp32,y_ptr=*fp32,n=i32'")
    p.add_argument("--launch-event", help="autotune.log (or one JSON event) with a 'launch' event of "
                                          "this kernel: argument dtypes, scalar values, winner")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per compile (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=None, help="parallel compiles (default: CPU count)")
    p.add_argument("--keep-dir", help="keep every variant's source, IR and asm in this folder")
    p.add_argument("--json-out", required=True)
    p.add_argument("--markdown-out")
    return p


def read_launch_event(path: str, kernel_names: set[str]) -> dict:
    """The last 'launch' event for this kernel (plus the winner of its autotune event, if any)."""
    from tko.read.autotune_events import read_events

    launch, winner = None, None
    for event in read_events(path):
        if event.get("kernel") not in kernel_names:
            continue
        if event.get("event") == "launch":
            launch = event
        if isinstance(event.get("winner"), dict):
            winner = event["winner"]
    if launch is None:
        raise InputError(f"{path}: no 'launch' event for {' / '.join(sorted(kernel_names))}")
    launch = dict(launch)
    if winner and "winner" not in launch:
        launch["winner"] = winner
    return launch


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from tko.compile import compile_probe, offline_compile, probe_results
    from tko.read import kernel_source
    from tko.base.artifact import write_artifact
    from tko.base.atomic import write_text
    from tko.base.versions import package_version

    if not args.arch:
        local_arch()  # no GPU: a usage error asking for --arch
    # The local device compiles as the installed Triton targets it (a DTK Triton knows gfx936 itself).
    arches = args.arch or [offline_compile.LOCAL]
    variant_names = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variant_names:
        raise InputError("--variants is empty")
    if args.timeout <= 0:
        raise InputError("--timeout must be positive")
    config = offline_compile.parse_config_flag(args.config) if args.config else None
    signature = offline_compile.parse_signature_flag(args.signature) if args.signature else None
    launch = None
    if args.launch_event:
        _, parsed = kernel_source.read_kernel_file(args.kernel_file)
        if parsed.get("standalone_spec"):
            # a captured standalone file records its launch whole (keyword flags, heuristics' constexprs)
            from tko.base import inputs

            inputs.check_input(args.launch_event, "a launch event file")  # still refused when unusable
            print("probe_compile.py: the captured file's own launch record is used, not --launch-event",
                  flush=True)
        else:
            chosen = kernel_source.select_kernel(parsed, args.kernel)
            names = {chosen["name"], (chosen.get("inductor_facts") or {}).get("kernel_name")} - {None}
            launch = read_launch_event(args.launch_event, names)

    result = compile_probe.run_probe(args.kernel_file, arches, variant_names=variant_names, kernel=args.kernel,
                             config=config, signature=signature, launch=launch, timeout=args.timeout,
                             workers=args.jobs, keep_dir=args.keep_dir,
                             progress=lambda line: print(f"probe_compile.py: {line}", flush=True))
    payload = probe_results.assemble(result, arches, package_version("triton"))
    payload["kernel_file"] = os.path.abspath(args.kernel_file)
    if args.keep_dir:
        payload["work_dir"] = result["work_dir"]
    write_artifact(args.json_out, SCHEMA, "probe_compile.py", payload)
    if args.markdown_out:
        write_text(args.markdown_out, probe_results.markdown_table(payload))
    ok = sum(1 for r in payload["results"] if r["status"] == "ok")
    failed = sum(1 for r in payload["results"] if r["status"] == "error")
    print(f"probe_compile.py: {ok} compiled, {failed} failed, "
          f"{len(payload['results']) - ok - failed} skipped -> {args.json_out}")
    if ok == 0 and failed:
        raise ToolFailure(f"every compile failed; first error: "
                          f"{next(r['error'] for r in payload['results'] if r['status'] == 'error').splitlines()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog="probe_compile.py"))
