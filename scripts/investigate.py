#!/usr/bin/env python3
"""The whole investigation in one command.

    python scripts/investigate.py --out investigation -- python repro.py --steps 20   # on the GPU
    python scripts/investigate.py --from-capture examples/recorded_h200/pointwise_chain --out investigation  # anywhere

Online: env check, capture run (autotune_capture_patch + Inductor logs), profile run, peak copy
bandwidth, then the offline part, and on a GPU the end-to-end remedy trials of the repro
(try_remedies.py, once, within --trials-budget-s: by default what is left of --deadline-s, 10 minutes
for the whole investigation; OUT/trials/trials.json) before the reports, which decide from them first. A --from-capture folder with trials/trials.json (or trials.json) shows those.
Offline (--from-capture): summarize, collect, and for the top-N
Triton kernels inspect, scan, compile-probe (offline, for --probe-arch targets; hot kernels only,
compiles kept between runs), the standalone
run where a GPU is present (else a recorded run), the speed of light (speed_of_light.py: timed on
a GPU, else built and checked offline), on a GPU a variant sweep of each kernel the rules
say to tune, and one report per kernel plus an index (investigation.md). A failed step is recorded
and becomes a gap, and the exit status is 1 with the first failure on stderr (2 when no report could
be made because a step refused its input; a capture whose logs are empty is refused before anything
runs); a repro that fails under capture stops the chain.
--out must be new or empty (--force clears what a run writes there).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tko.base.errors import ArgumentParser, InputError, run_main

TOOL = "investigate.py"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog=TOOL, example=['python scripts/investigate.py --out investigation -- python repro.py --steps 20', 'python scripts/investigate.py --from-capture examples/recorded_h200/pointwise_chain --out investigation'], description=__doc__.split("\n\n")[0],
                       epilog="Online mode: the repro command follows '--'.")
    p.add_argument("--from-capture", metavar="DIR", help="offline: a recorded capture directory")
    p.add_argument("--out", default="investigation", help="output folder (default ./investigation)")
    p.add_argument("--top", type=int, default=3, help="Triton kernels to investigate (default 3)")
    p.add_argument("--probe-arch", action="append", default=None, metavar="ARCH",
                   help="offline compile-probe target (repeatable; default gfx942, the DCU proxy; 'none' skips)")
    p.add_argument("--probe-variants", default=None,
                   help="probe_compile.py --variants for each hot kernel (default: the hint variants the "
                        "decision and the sweep read; 'all' for probe_compile.py's full set)")
    p.add_argument("--no-run", action="store_true", help="do not time standalone kernels")
    p.add_argument("--no-sweep", action="store_true",
                   help="on a GPU, do not sweep variants of kernels the rules say to tune")
    p.add_argument("--no-trials", action="store_true",
                   help="online: do not run the end-to-end remedy trials (try_remedies.py) of the repro")
    p.add_argument("--deadline-s", type=float, default=600.0,
                   help="online: the whole investigation's target wall time; without --trials-budget-s the trials "
                        "get what is left of it when they start, less 30 s for the reports, at least 180 s "
                        "(default 600)")
    p.add_argument("--trials-budget-s", type=float, default=None,
                   help="online: wall-time budget of all remedy trial runs (default: from --deadline-s)")
    p.add_argument("--trials-runs", type=int, default=2,
                   help="online: runs per remedy arm, interleaved; arms still undecided get up to 2 more "
                        "(default 2)")
    p.add_argument("--smoke", action="store_true", help="online: check_env --smoke")
    p.add_argument("--peak-gbps", type=float, default=None, help="copy bandwidth to judge GB/s against")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per step")
    p.add_argument("--force", action="store_true",
                   help="reuse a non-empty --out: clear what this run writes there first")
    return p


def main(argv=None) -> int:
    started = time.perf_counter()
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    a = build_parser().parse_args(argv)
    if bool(a.from_capture) == bool(cmd):
        raise InputError("give either --from-capture DIR or a repro command after '--', not both or neither")
    if a.top < 1:
        raise InputError("--top must be at least 1")
    if a.trials_runs < 1 or (a.trials_budget_s is not None and a.trials_budget_s <= 0):
        raise InputError("--trials-runs must be at least 1 and --trials-budget-s positive")
    if not a.deadline_s > 0:  # nan too
        raise InputError(f"--deadline-s {a.deadline_s:g}: must be positive")
    from tko.chains import chain_steps, investigation_index, pipeline
    from tko.base.atomic import check_outputs

    check_outputs(folders=(a.out,))  # before resolve(): a symlink loop there is the user's path
    out = Path(a.out).resolve()
    chain_steps.prepare_out(out, a.force, keep=Path(a.from_capture) if a.from_capture else None)
    chain = chain_steps.Chain(out, timeout=a.timeout)
    if cmd:
        cap = out / "capture"
        pipeline.capture_online(chain, cmd, cap, a.smoke)
        mode = "online"
    else:
        cap = Path(a.from_capture).resolve()
        if not cap.is_dir():
            raise InputError(f"{a.from_capture}: no such capture directory")
        mode = "offline"
    archs = [x for x in (a.probe_arch or ["gfx942"]) if x.lower() != "none"]
    trials = (pipeline.TrialOptions(cmd, runs=a.trials_runs, budget_s=a.trials_budget_s, deadline_s=a.deadline_s,
                                    started=started)
              if cmd and not a.no_trials else None)
    kernels, program, trial_summary = pipeline.offline(chain, cap, out, a.top, archs, not a.no_run, a.peak_gbps,
                                                       a.probe_variants, sweep=not a.no_sweep, repro=cmd or None,
                                                       trials=trials)
    result = {"mode": mode, "capture_dir": str(cap), "out_dir": str(out), "command": cmd or None,
              "repro": pipeline.repro_command(cap), "program": program, "trials": trial_summary, "kernels": kernels,
              "steps": [s.as_dict() for s in chain.steps]}
    result["cpu_kernels"] = pipeline.cpu_kernels(out)
    result["step"] = investigation_index.step_section(cap, out, trial_summary)
    result["rewrites"] = investigation_index.rewrite_section(cap, out, result)
    ranks = pipeline.ranks_summary(cap, out)
    if ranks:
        result["ranks"] = ranks
    result["next_steps"] = investigation_index.next_steps(result)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    result["deadline_s"] = a.deadline_s if cmd else None
    investigation_index.write_index(out, result)
    print("\n".join(console_summary(result, out, time.perf_counter() - started)), flush=True)
    failed = [s for s in chain.steps if s.status == "failed"]
    print(f"{TOOL}: {len(kernels)} kernel report(s) in {out}/investigation.md; "
          f"{len(failed)} step(s) failed" + (f" ({', '.join(s.name for s in failed)})" if failed else ""))
    return exit_status(kernels, failed, investigation_index.compiled_for_cpu(result))


def console_summary(result: dict, out: Path, seconds: float) -> list[str]:
    """What the console gets at the end (investigation.md holds the rest): per hot kernel its
    share and decision, the program's finding and a measured change, the next commands, where
    the reports are."""
    from tko.chains import rewrites

    steps = result["steps"]
    counts = {status: sum(s["status"] == status for s in steps) for status in ("failed", "skipped")}
    lines = [f"[investigate] done in {seconds:.1f} s: {len(result['kernels'])} kernel report(s), {len(steps)} steps "
             f"({counts['failed']} failed, {counts['skipped']} skipped)"]
    step = result.get("step") or {}
    if step.get("where"):
        lines.append("  where the time goes: " + step["where"] + (" Library kernels dominate: see the whole-program "
                                                                  "line." if step.get("library_dominated") else ""))
    for k in result["kernels"]:
        share = f"{100 * k['share']:.1f}% of GPU time" if isinstance(k.get("share"), (int, float)) else "share unknown"
        where = f"; model code {', '.join(k['where'])}" if k.get("where") else ""
        decision = k.get("decision_text") or "undecided (see its report's gaps)"
        lines.append(f"  {k['kernel']} ({share}): {decision}" + (f" [{k['rule']}]" if k.get("rule") else "") + where)
    program, trials = result.get("program") or {}, result.get("trials") or {}
    if program.get("verdict"):
        lines.append(f"  whole program [{program.get('rule')}]: {program.get('says')}")
    if result.get("ranks"):
        lines.append(f"  ranks: {result['ranks']['verdict']}")
    if trials.get("what_to_change"):
        lines.append(f"  what to change (measured end to end): {trials['what_to_change']}")
    if trials.get("memory_change"):
        lines.append(f"  less memory (measured end to end): {trials['memory_change']}")
    patches = [f"{h['patch']} ({rewrites.measured_brief(f)})" for f in result.get("rewrites") or []
               for h in f.get("found_by") or [] if h.get("patch")]
    if patches:
        lines.append(f"  model rewrites written as patches (in the model's own names): {', '.join(patches)}")
    shown = (result.get("next_steps") or [])[:5]
    lines += ["  next:"] + [f"    - {n}" for n in shown] if shown else ["  next: nothing to change for these kernels"]
    if len(result.get("next_steps") or []) > len(shown):
        lines.append(f"    ... {len(result['next_steps']) - len(shown)} more in investigation.md")
    lines.append(f"  report: {out / 'investigation.md'} (each kernel: {out / 'kernels'}/<kernel>/report.md)")
    return lines


def exit_status(kernels: list, failed: list, cpu: str | None = None) -> int:
    """0 when every hot kernel has its report; else the reason on stderr, one line, and 2 when no
    report could be made because an input was refused (a step that exited 2), else 1: a failed
    step leaves a gap in the reports, and the run is not a success whatever it wrote."""
    if kernels and not failed:
        return 0
    first = failed[0] if failed else None
    why = (cpu if cpu and not kernels else f"{first.name} failed: {first.error}" if first
           else "no Triton kernel found in the profile or the autotune log")
    more = f" (and {len(failed) - 1} more failed step(s), listed in investigation.md)" if len(failed) > 1 else ""
    print(f"{TOOL}: error: " + ("no kernel report: " if not kernels else "") + why + more, file=sys.stderr)
    bad_input = not kernels and (bool(cpu) or any((s.error or "").startswith("exit 2:") for s in failed))
    return 2 if bad_input else 1


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
