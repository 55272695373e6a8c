#!/usr/bin/env python3
"""Collect a kernel's Inductor and Triton artifacts into one tree with a manifest.

For each kernel (all the log or capture mention, or the --kernel ones) copies the output code
("Output code written to:" in the log; TORCH_COMPILE_DEBUG output_code.py), the kernel module
<cache-root>/<xx>/<hash>.py, every Triton cache entry (one per compiled config, file names kept,
so scan_amdgcn.py can read the tree), the .best_config files, and the captured standalone file
and saved inputs, into OUT/<kernel>/..., and writes OUT/manifest.json (artifact_manifest/1):
every artifact with its source, size and kind, and what is missing from the expected set.

    python collect_inductor_artifacts.py --log log_profile.txt --capture-dir ./autotune_kernels \
        --cache-root /tmp/torchinductor_$USER --out ./triton_artifacts
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tko.base.artifact import write_artifact
from tko.base.errors import ArgumentParser, InputError, run_main
from tko.read.inductor_files import Sources, collect
from tko.base import inputs
from tko.base.atomic import check_outputs

SCHEMA = "artifact_manifest/1"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="collect_inductor_artifacts.py", example='python scripts/collect_inductor_artifacts.py --log log_profile.txt --capture-dir autotune_kernels --cache-root /tmp/torchinductor_$USER --out triton_artifacts', description=__doc__.split("\n\n")[0],
                       epilog="Output contract: references/json_contracts.md, artifact_manifest/1.")
    p.add_argument("--log", type=Path, help="log_profile.txt of the run (TORCH_LOGS=+inductor or "
                                            "output_code)")
    p.add_argument("--capture-dir", type=Path, help="TRITON_CAPTURE_DIR of the capture patch "
                                                    "(holds autotune.log)")
    p.add_argument("--cache-root", type=Path,
                   help="TORCHINDUCTOR_CACHE_DIR (default of torch: /tmp/torchinductor_<user>)")
    p.add_argument("--triton-cache", type=Path, action="append", default=[], metavar="DIR",
                   help="a TRITON_CACHE_DIR to search too (repeatable)")
    p.add_argument("--debug-dir", type=Path, action="append", default=[], metavar="DIR",
                   help="a torch_compile_debug folder (default: the one beside --log, if any)")
    p.add_argument("--kernel", action="append", default=[], metavar="NAME",
                   help="collect only this kernel; a NAME that is no kernel's full name picks "
                        "every kernel whose name contains it (repeatable)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    return p


def _existing_dir(path: Path | None, flag: str) -> Path | None:
    if path is None:
        return None
    if not path.is_dir():
        raise InputError(f"{flag} {path}: not a directory")
    return path


def _check_log(log: Path) -> None:
    """Exit 2 for a --log that is missing or unreadable; say on stderr when it is empty or
    binary (nothing in it will name an output-code file)."""
    try:
        with inputs.open_input(log, "a log file") as fh:
            head = fh.read(65536)
    except InputError as exc:
        raise InputError(f"--log {exc}") from None
    except OSError as exc:
        raise InputError(f"--log {log}: cannot read ({exc.strerror or exc})") from None
    if not head:
        print(f"collect_inductor_artifacts.py: warning: --log {log} is empty", file=sys.stderr)
    elif b"\0" in head or head.decode("utf-8", "replace").count("\ufffd") > len(head) // 100:
        print(f"collect_inductor_artifacts.py: warning: --log {log} is not a text log "
              "(binary data); no output-code lines can be found in it", file=sys.stderr)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if not (args.log or args.capture_dir or args.cache_root or args.triton_cache):
        raise InputError("nothing to collect from: give --log, --capture-dir, --cache-root or "
                         "--triton-cache")
    if args.log is not None:
        _check_log(args.log)
    debug_dirs = [_existing_dir(d, "--debug-dir") for d in args.debug_dir]
    if not debug_dirs and args.log is not None and (args.log.parent / "torch_compile_debug").is_dir():
        debug_dirs = [args.log.parent / "torch_compile_debug"]
    sources = Sources(log=args.log, capture_dir=_existing_dir(args.capture_dir, "--capture-dir"),
                      cache_root=_existing_dir(args.cache_root, "--cache-root"),
                      triton_caches=[_existing_dir(t, "--triton-cache") for t in args.triton_cache],
                      debug_dirs=debug_dirs)
    check_outputs(folders=(args.out,))
    roots = [sources.capture_dir, sources.cache_root, *sources.triton_caches, *debug_dirs]
    out_real = os.path.realpath(args.out)
    for root in filter(None, roots):
        if os.path.realpath(root) == out_real:
            raise InputError(f"--out {args.out}: is also a folder to collect from; pick a new one")
    facts = {}
    if sources.capture_dir is not None:
        log = sources.capture_dir / "autotune.log"
        if log.is_file() and log.stat().st_size:
            from tko.read.autotune_log import parse_files

            try:
                facts = parse_files([log]).facts
            except InputError as exc:
                print(f"collect_inductor_artifacts.py: warning: {exc}", file=sys.stderr)
    manifest = collect(sources, args.out, args.kernel or None, facts)
    write_artifact(args.out / "manifest.json", SCHEMA, "collect_inductor_artifacts.py", manifest)
    n_files = sum(len(k["artifacts"]) for k in manifest["kernels"])
    print(f"collect_inductor_artifacts.py: {len(manifest['kernels'])} kernels, {n_files} files "
          f"-> {os.path.join(str(args.out), 'manifest.json')}"
          + (f"; {len(manifest['refused'])} paths refused" if manifest["refused"] else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog="collect_inductor_artifacts.py"))
