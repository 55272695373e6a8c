#!/usr/bin/env python3
"""Rank GPU kernels by device time from a profile, and say what launched each one.

Sources (one of):
  --trace trace.json[.gz]        torch.profiler / Kineto Chrome trace
  --hipprof FILE                 hipprof .hipkernel.csv, or its console log (repeat the flag to
                                 add the .hiptrace.csv HIP API summary of the same run)
  --rocprof FILE                 rocprofv3 kernel_trace.csv (or legacy rocprof results.csv),
                                 or a rocprofv3 --stats kernel_stats.csv
  --nsys FILE                    nsys stats -r cuda_gpu_kern_sum --format csv
  -- python repro.py args...     run the script under torch.profiler (no change to it needed);
                                 the trace is kept next to the JSON

Examples:
  python scripts/profile_kernels.py --hipprof result_123.hipkernel.csv --json-out p.json --markdown-out p.md
  python scripts/profile_kernels.py --json-out p.json --markdown-out p.md -- python repro.py --steps 5
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tko.base import markdown as md, subproc  # noqa: E402
from tko.base.errors import ArgumentParser, InputError, ToolFailure, run_main  # noqa: E402

SCHEMA = "kernel_profile/1"
TOOL = "profile_kernels.py"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog=TOOL, description=__doc__.split("\n\n")[0],
                       epilog=__doc__.split("\n\n", 1)[1],
                       formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    src = p.add_argument_group("profile source (exactly one, or a command after --)")
    src.add_argument("--trace", help="torch.profiler Chrome trace (.json or .json.gz)")
    src.add_argument("--hipprof", action="append", default=[],
                     help="hipprof .hipkernel.csv / .hiptrace.csv / console log (repeatable)")
    src.add_argument("--rocprof", help="rocprofv3 kernel_trace.csv, rocprof results.csv or a --stats csv")
    src.add_argument("--nsys", help="nsys stats cuda_gpu_kern_sum CSV")
    p.add_argument("--pmc", help="hipprof PMC text (pmc_results_<pid>.txt) to join per kernel")
    p.add_argument("--json-out", required=True, help="kernel_profile/1 JSON output")
    p.add_argument("--markdown-out", help="Markdown table output")
    p.add_argument("--top", type=int, default=20, help="kernels listed (default 20; totals cover all)")
    p.add_argument("--triton-name", action="append", default=[], metavar="REGEX",
                   help="kernel names matching REGEX are Triton kernels (user @triton.jit names)")
    p.add_argument("--capture-log", action="append", default=[], metavar="LOG",
                   help="autotune.log of a capture of the same program: every kernel it recorded "
                        "(hand-written @triton.jit ones included) is a Triton kernel (repeatable)")
    p.add_argument("--include-compile", action="store_true",
                   help="keep kernels launched during compilation/autotuning (Chrome trace)")
    p.add_argument("--within", metavar="REGEX",
                   help="rank only kernels launched inside a range whose name matches REGEX "
                        "(Chrome trace; e.g. ProfilerStep or a record_function name)")
    run = p.add_argument_group("running a command (after --)")
    run.add_argument("--trace-out", help="where the recorded trace goes (default: next to --json-out)")
    run.add_argument("--with-stack", action="store_true",
                     help="record Python frames too (bigger trace, slower run)")
    run.add_argument("--record-shapes", action="store_true",
                     help="record op inputs too; also exports the args of Inductor's launch ranges "
                          "(kernel file, config, num_warps)")
    run.add_argument("--timeout", type=float, default=None, help="seconds before the command is stopped")
    return p


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


# --------------------------------------------------------------------------- running a command

def bootstrap_command(cmd: list[str], trace_out: Path, with_stack: bool,
                      record_shapes: bool = False) -> list[str]:
    """``python [-X ...] repro.py args`` -> the same interpreter running the profiler bootstrap;
    a launcher (torchrun, ``python -m torch.distributed.run``, a shell script) runs as typed."""
    from tko.patch import site_route

    if site_route.is_multi_process_launcher(cmd):
        return list(cmd)
    bootstrap = str(Path(__file__).resolve().parent / "tko" / "patch" / "profile_bootstrap.py")
    first = os.path.basename(cmd[0])
    if re.match(r"^python(\d+(\.\d+)*)?(\.exe)?$", first):
        interp, rest = cmd[0], cmd[1:]
    elif cmd[0].endswith(".py"):
        interp, rest = sys.executable, cmd
    else:
        raise InputError(f"the command after -- must be 'python script.py ...', 'python -m module ...', "
                         f"torchrun or a shell script (got {cmd[0]!r})")
    if not rest:
        raise InputError("no script given after the python interpreter")
    if rest[0].startswith("-") and rest[0] != "-m":
        raise InputError(f"interpreter option {rest[0]!r} is not supported here; put the script first")
    opts = [str(trace_out)] + (["--with-stack"] if with_stack else []) + (
        ["--record-shapes"] if record_shapes else [])
    return [interp, bootstrap, *opts, "--", *rest]


def ranks_dir(trace_out: Path) -> Path:
    """Where each process of the program writes its own trace (``trace.<tag>.json``)."""
    return trace_out.with_name(trace_out.name.split(".")[0] + ".ranks")


def _profile_env(folder: Path, with_stack: bool, record_shapes: bool) -> dict:
    from tko.patch import site_route

    opts = ",".join(o for o, on in (("with_stack", with_stack), ("record_shapes", record_shapes)) if on)
    return dict(os.environ, **site_route.site_env(["tko.patch.rank_profile:start"], TKO_PROFILE_DIR=str(folder),
                                                  TKO_PROFILE_OPTS=opts))


def record_trace(cmd: list[str], trace_out: Path, with_stack: bool, record_shapes: bool,
                 timeout: float | None) -> dict:
    """Run the command under the profiler: the bootstrap for a script (its own trace), and in every
    other Python process it starts (spawned ranks, torchrun's workers) the site route's profiler."""
    import shutil

    full = bootstrap_command(cmd, trace_out, with_stack, record_shapes)
    trace_out.parent.mkdir(parents=True, exist_ok=True)
    folder = ranks_dir(trace_out)
    if trace_out.exists():
        trace_out.unlink()  # never rank a stale trace from an earlier run
    shutil.rmtree(folder, ignore_errors=True)
    try:
        done = subproc.run(full, timeout=timeout, capture=False,  # the repro's output stays on the console
                           env=_profile_env(folder, with_stack, record_shapes))
    except FileNotFoundError:
        raise InputError(f"{cmd[0]}: interpreter not found") from None
    if done.timed_out:
        raise ToolFailure(f"command ran past --timeout {timeout:g} s")
    info = {"command": cmd, "returncode": done.returncode, "trace_file": str(trace_out)}
    if folder.is_dir() and any(folder.glob("trace.*.json")):
        info["ranks_dir"] = str(folder)
    elif not trace_out.exists():
        raise ToolFailure(f"the command exited with status {done.returncode} and wrote no trace "
                          f"({trace_out})")
    return info


def rank_view(run_info: dict, trace_out: Path) -> dict | None:
    """The cross-rank view of a multi-process run; the slowest rank's trace becomes the one ranked
    (copied to ``trace_out``; a script's own trace, when it holds no kernel, is kept beside it)."""
    import shutil

    from tko.read import rank_view as rv

    if not run_info.get("ranks_dir"):
        return None
    view = rv.build(run_info["ranks_dir"])
    ranked = [r for r in view["ranks"] if r.get("rank") is not None]
    if not ranked and trace_out.exists():
        return None  # one process only: its bootstrap trace is the profile, as before
    if trace_out.exists():
        shutil.move(str(trace_out), str(trace_out.with_name(trace_out.name.split(".")[0] + ".launcher.trace.json")))
    shutil.copyfile(view["slowest"]["trace"], trace_out)
    return view


def write_rank_view(run_info: dict, trace_out: Path, json_out: Path) -> dict | None:
    """Write ``<json-out stem>.ranks.json`` (``rank_view/1``) before the kernels are ranked, so a
    run whose ranks launched no GPU kernel (gloo on the CPU) still says where its time went."""
    from tko.base.artifact import dumps, make_artifact
    from tko.base.atomic import write_text

    view = rank_view(run_info, trace_out)
    if view is None:
        return None
    run_info["trace_file"] = view["slowest"]["trace"]
    write_text(json_out.with_name(json_out.stem + ".ranks.json"), dumps(make_artifact("rank_view/1", TOOL, view)))
    print(f"{TOOL}: {len(view['ranks'])} rank(s); {view['verdict']}", file=sys.stderr)
    return view


# --------------------------------------------------------------------------- building the report

def _api_rows(stats, top):
    total = sum(r.total_ns for r in stats) or 1.0
    rows = sorted(stats, key=lambda r: -r.total_ns)
    return [{"name": r.name, "calls": r.calls, "total_us": round(r.total_ns / 1000.0, 3),
             "share": r.total_ns / total} for r in rows[:top]]


def _device_info(props) -> list[dict]:
    keep = ("id", "name", "computeMajor", "computeMinor", "totalGlobalMem", "numSms", "gcnArchName",
            "warpSize", "maxSharedMemoryPerBlock")
    return [{k: d[k] for k in keep if k in d} for d in props if isinstance(d, dict)]


def _regex(flag: str, pattern: str):
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InputError(f"{flag} {pattern!r}: bad regular expression ({exc})") from None


def _read_sources(sources: list[tuple[str, str]], run_info: dict | None, problems: list, formats: list):
    """(path, parsed) of the one kernel profile among the inputs, and the HIP API statistics."""
    from tko.read import profile_formats as pf

    kernel_src = None
    api_stats = None
    for flag, path in sources:
        parsed = pf.read_profile(path)
        formats.append({"flag": flag, "path": str(path), "format": parsed.format})
        problems += [f"{Path(path).name}: {m}" for m in parsed.problems]
        if parsed.trace is not None:
            problems += [f"{Path(path).name}: {m}" for m in parsed.trace.problems]
        if parsed.format == "hipprof_pmc":
            raise InputError(f"{path}: is hipprof PMC text; pass it with --pmc next to a kernel profile")
        has_kernels = bool(parsed.kernel_stats) or bool(parsed.dispatches) or (
            parsed.trace is not None and parsed.trace.kernels)
        if parsed.api_stats:
            api_stats = parsed.api_stats
        if has_kernels:
            if kernel_src is not None:
                raise InputError(f"{path}: a second kernel profile; give one kernel source per run")
            kernel_src = (path, parsed)
        elif parsed.trace is not None:
            msg = (f"{path}: the trace holds no GPU kernel events (cat 'kernel'); record it with "
                   "ProfilerActivity.CUDA (also HIP on ROCm/DTK torch) on a GPU")
            if run_info:
                raise ToolFailure(msg.replace(f"{path}: the trace", "the recorded trace"))
            raise InputError(msg)
        elif not parsed.api_stats:
            raise InputError(f"{path}: holds no kernel rows")
    if kernel_src is None:
        raise InputError("no kernel statistics among the inputs (a .hiptrace.csv / 'HIP API statistics' "
                         "table lists API calls only; pass the .hipkernel.csv of the same run)")
    return kernel_src, api_stats


def _join_pmc(args, rows: list, summary: dict, problems: list, formats: list) -> None:
    from tko.read import profile_formats as pf
    from tko.read import profile_rank as pr

    pmc = pf.read_profile(args.pmc)
    if pmc.format != "hipprof_pmc":
        raise InputError(f"{args.pmc}: is not hipprof PMC text (found {pmc.format})")
    problems += [f"{Path(args.pmc).name}: {m}" for m in pmc.problems]
    summary["pmc_kernels_joined"] = pr.join_pmc(rows, pmc.pmc)
    formats.append({"flag": "--pmc", "path": str(args.pmc), "format": pmc.format})


def analyse(args, sources: list[tuple[str, str]], run_info: dict | None) -> dict:
    from tko.read import profile_rank as pr

    triton_names = [_regex("--triton-name", pat) for pat in args.triton_name]
    if args.capture_log:
        from tko.read import captured_kernels

        triton_names += captured_kernels.name_patterns(captured_kernels.captured_names(args.capture_log))
    problems: list[str] = []
    formats: list[dict] = []
    (path, parsed), api_stats = _read_sources(sources, run_info, problems, formats)
    payload: dict = {"source": {"inputs": formats}}
    if run_info:
        payload["source"].update(run_info)
        if run_info["returncode"] != 0:
            problems.append(f"the command exited with status {run_info['returncode']}; "
                            "the trace covers the run up to that point")
    within = None
    if args.within:
        if parsed.trace is None:
            raise InputError("--within needs a Chrome trace (summary tables and kernel traces have no ranges)")
        within = _regex("--within", args.within)
    rows, summary, rank_problems = pr.rank_profile(parsed, args.include_compile, triton_names, within)
    problems += rank_problems
    if parsed.trace is not None:
        payload["device"] = _device_info(parsed.trace.device_properties)
    if summary["dispatches"] == 0:
        if summary.get("excluded_outside_dispatches"):
            raise InputError(f"{path}: no kernel was launched inside a range matching --within {args.within!r}")
        raise InputError(f"{path}: every kernel was launched during compilation; "
                         "pass --include-compile to rank them anyway")
    rows, summary, ranking = pr.finish(rows, summary, args.top)
    if args.capture_log:  # a hand-written kernel: the program's line that launches it
        from tko.read import captured_kernels

        sites = captured_kernels.launch_sites(args.capture_log)
        for row in rows:
            if row["name"] in sites:
                row["launch_site"] = sites[row["name"]]
    if args.pmc:
        _join_pmc(args, rows, summary, problems, formats)
    payload["summary"] = summary
    payload["kernels"] = rows
    payload["ranking"] = ranking
    if api_stats:
        payload["api_stats"] = _api_rows(api_stats, args.top)
    payload["problems"] = problems
    return payload


# --------------------------------------------------------------------------- Markdown

WIDTH = 90  # characters of a name or path a cell shows by default


def _us(v) -> str:
    if v is None:
        return "–"
    return f"{v:,.1f}" if v >= 100 else f"{v:.2f}"


def _pct(share) -> str:
    """Percent with enough digits that a small non-zero share does not read as 0."""
    p = share * 100
    return f"{p:.1f}%" if p >= 1 or p == 0 else f"{p:.2g}%"


def render_markdown(doc: dict) -> str:
    s = doc["summary"]
    src = doc["source"]
    lines = ["# GPU kernel profile", ""]
    for inp in src["inputs"]:
        lines.append(f"- source: {md.code(inp['path'], 300)} ({md.text(inp['format'], WIDTH)})")
    if src.get("command"):
        lines.append(f"- command: {md.code(' '.join(src['command']), 300)} (exit {src['returncode']})")
    for d in doc.get("device", []):
        lines.append(f"- device: {md.text(d.get('name', '?'), WIDTH)}")
    lines.append(f"- GPU kernel time: {_us(s['kernel_time_us'])} µs in {s['dispatches']} dispatches of "
                 f"{s['kernels']} kernels; Triton share {_pct(s['triton_share'])}")
    if s.get("gpu_busy_us") is not None:
        util = s.get("gpu_utilization")
        lines.append(f"- GPU busy: {_us(s['gpu_busy_us'])} µs of a {_us(s['wall_span_us'])} µs span"
                     + (f" ({util * 100:.1f}%)" if util is not None else ""))
    if s.get("excluded_outside_dispatches"):
        lines.append(f"- left out: {s['excluded_outside_dispatches']} dispatches "
                     f"({_us(s['excluded_outside_us'])} µs) launched outside the --within ranges")
    if s.get("excluded_compile_dispatches"):
        lines.append(f"- left out: {s['excluded_compile_dispatches']} dispatches "
                     f"({_us(s['excluded_compile_us'])} µs) launched during compilation/autotuning")
    by = ", ".join(f"{md.text(k, WIDTH)} {_us(v)} µs" for k, v in s["time_by_origin_us"].items())
    lines += [f"- by origin: {by}", ""]
    lines += _kernel_table(doc["kernels"])
    if s.get("shown") is not None and s["shown"] < s["kernels"]:
        more = s["kernels"] - s["shown"]
        lines.append(f"\n{more} more kernel{'s' if more > 1 else ''} not listed (--top {s['shown']}).")
    inductor = [k for k in doc["kernels"] if k.get("inductor", {}).get("kernel_file")]
    if inductor:
        lines += ["", "## Inductor kernel files", ""]
        lines += _inductor_table(inductor)
    if doc.get("api_stats"):
        lines += ["", "## Host API calls", ""]
        lines += md.table(["API", "calls", "total µs", "share"],
                          [[md.code(a["name"], 60), a["calls"], _us(a["total_us"]), f"{a['share'] * 100:.2f}%"]
                           for a in doc["api_stats"]], align=[None, "right", "right", "right"])
    if doc.get("ranks"):
        from tko.read.rank_view import markdown_lines

        lines += [""] + markdown_lines(doc["ranks"])
    if doc.get("problems"):
        lines += ["", "## Problems", ""] + [f"- {md.text(p, 300)}" for p in doc["problems"]]
    return "\n".join(lines) + "\n"


def _kernel_table(kernels: list[dict]) -> list[str]:
    """The ranked kernels; a "launched from" column when the trace named the launching ops (or the
    capture log the program lines that launch hand-written kernels)."""
    has_op = any("launch_op" in k or "launch_site" in k for k in kernels)
    header = ["#", "kernel", "origin", "calls", "total µs", "mean µs", "min µs", "max µs", "share"]
    rows = [[k["rank"], md.code(k["name"], WIDTH), md.text(k["origin"], WIDTH), k["calls"], _us(k["total_us"]),
             _us(k["mean_us"]), _us(k["min_us"]), _us(k["max_us"]), f"{k['share'] * 100:.2f}%"]
            + ([md.text(k.get("launch_op") or k.get("launch_site") or "–", 60)] if has_op else [])
            for k in kernels]
    align = ["right", None, None] + ["right"] * 6 + ([None] if has_op else [])
    return md.table(header + (["launched from"] if has_op else []), rows, align=align)


def _inductor_table(kernels: list[dict]) -> list[str]:
    rows = []
    for k in kernels:
        ind = k["inductor"]
        rows.append([k["rank"], md.code(k["name"], 60), md.text(ind.get("kernel_kwargs", "–"), 40),
                     md.text(ind.get("num_warps", "–"), WIDTH), md.text(ind.get("num_stages", "–"), WIDTH),
                     md.code(ind["kernel_file"], 300)])
    return md.table(["#", "kernel", "config", "num_warps", "num_stages", "file"], rows,
                    align=["right", None, None, "right", "right", None])


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, cmd = split_command(argv)
    args = build_parser().parse_args(own)
    sources: list[tuple[str, str]] = []
    if args.trace:
        sources.append(("--trace", args.trace))
    sources += [("--hipprof", h) for h in args.hipprof]
    if args.rocprof:
        sources.append(("--rocprof", args.rocprof))
    if args.nsys:
        sources.append(("--nsys", args.nsys))
    if args.top is not None and args.top < 0:
        raise InputError("--top must be >= 0")
    run_info = view = None
    from tko.base.atomic import check_outputs
    json_out = Path(args.json_out)
    trace_out = Path(args.trace_out) if args.trace_out else json_out.with_name(json_out.stem + ".trace.json")
    check_outputs(args.json_out, args.markdown_out, trace_out if cmd else None)
    if cmd:
        if sources:
            raise InputError("give either a profile file or a command after --, not both")
        run_info = record_trace(cmd, trace_out, args.with_stack, args.record_shapes, args.timeout)
        view = write_rank_view(run_info, trace_out, json_out)
        sources.append(("--", str(trace_out)))
    elif not sources:
        raise InputError("no profile given: pass --trace, --hipprof, --rocprof or --nsys, "
                         "or a command after --")
    kinds = {flag for flag, _ in sources}
    if len(kinds - {"--hipprof"}) > 1 or (len(kinds) > 1 and "--hipprof" in kinds):
        raise InputError("give one profile source per run (--hipprof may repeat for the same run)")

    payload = analyse(args, sources, run_info)
    if view is not None:
        payload["ranks"] = view

    from tko.base.artifact import dumps, make_artifact
    from tko.base.atomic import write_text
    doc = make_artifact(SCHEMA, TOOL, payload)
    markdown = render_markdown(doc) if args.markdown_out else None
    write_text(args.json_out, dumps(doc))
    if markdown is not None:
        write_text(args.markdown_out, markdown)
    top = doc["kernels"][0] if doc["kernels"] else None
    if top:
        print(f"{TOOL}: {doc['summary']['kernels']} kernels, top {top['name'][:60]} "
              f"{top['share'] * 100:.1f}% ({top['origin']}); wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
