#!/usr/bin/env python3
"""Try remedies end to end on a repro: one fresh process per arm and run, interleaved, unchanged repro.

Arms: baseline, coordinate_descent, max_autotune_no_cudagraphs, cudagraphs (GPU), reduction knobs
(multi_kernel, mix_order_reduction, cooperative_reductions, static_shapes; when the facts name a
multi-pass or dynamic-size kernel, or no facts are given), eager_fallback, buffer_ops (HIP, after a
passing check_env.py --smoke), pinned (--pins). Writes OUT/trials.json (remedy_trials/1), OUT/trials.md
and OUT/logs/<arm>_<run>.log; the "what to change" line names the fastest arm that beat the
baseline beyond run-to-run noise with equal outputs. --pins-from-sweep writes a config_pins/1 file
from a sweep's best config (alone, or as the pinned arm of the trial). The trials run on the GPU the
program runs on: without one, or on another device than the capture's (--facts), they are refused
unless --allow-device-mismatch.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tko.base.errors import ArgumentParser, InputError, run_main

TOOL = "try_remedies.py"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog=TOOL, allow_abbrev=False, description=__doc__.split("\n\n")[0],
                       example="python scripts/try_remedies.py --out trials --runs 3 "
                               "-- python examples/pointwise_chain.py --steps 50")
    p.add_argument("--out", required=True, help="output directory (trials.json, trials.md, logs/)")
    p.add_argument("--runs", type=int, default=3, help="runs per arm, interleaved (default 3)")
    p.add_argument("--max-runs", type=int, default=None,
                   help="after --runs rounds, further rounds of the baseline and the arms still undecided (faster, "
                        "but one counted baseline run or inside the run-to-run noise), up to this many runs each, "
                        "while --budget-s lasts (default: --runs + 2; --max-runs equal to --runs turns it off)")
    p.add_argument("--budget-s", type=float, default=1800.0, help="wall-time budget of all runs (default 1800)")
    p.add_argument("--arms", default=None, help="comma-separated arms to run (baseline always runs)")
    p.add_argument("--facts", action="append", default=[], metavar="JSON",
                   help="investigation.json, a kernel report.json, triton_env.json or a plain facts JSON")
    p.add_argument("--pins", default=None, help="config_pins/1 file for the pinned arm")
    p.add_argument("--pins-from-sweep", default=None, metavar="SWEEP.json",
                   help="write OUT/pins.json from a variant_sweep/1 best config (and use it)")
    p.add_argument("--kernel-file", default=None, help="the swept kernel's standalone file, when the "
                                                       "sweep's path is another machine's")
    p.add_argument("--disable", action="append", default=[], metavar="TARGET",
                   help="eager_fallback region: module:Name, module:Class.method or __main__:Name")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per process (default 1800)")
    p.add_argument("--metric-regex", default=None, help="regex whose group 1 is the repro's ms/step")
    p.add_argument("--allow-device-mismatch", action="store_true",
                   help="run although this machine's device is not the one the capture's kernels ran on "
                        "(--facts), or is no GPU: the trials then time this machine, and trials.json says so")
    return p


def parse(argv):
    cmd = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    return build_parser().parse_args(argv), cmd


def write_pins(a) -> str:
    from tko.patch import pins
    from tko.base.artifact import read_artifact

    sweep = read_artifact(a.pins_from_sweep, "variant_sweep")
    payload = pins.pins_from_sweep(sweep, a.kernel_file, origin=os.path.abspath(a.pins_from_sweep))
    path = pins.write_pins(Path(a.out) / "pins.json", TOOL, payload["pins"])
    print(f"{TOOL}: wrote {path} ({payload['pins'][0]['kernel']}: {payload['pins'][0]['config']})",
          file=sys.stderr)
    return str(path)


def main(argv=None) -> int:
    a, cmd = parse(list(sys.argv[1:] if argv is None else argv))
    if not a.budget_s > 0 or not a.timeout > 0:  # nan too
        raise InputError("--budget-s and --timeout must be positive")
    if a.pins_from_sweep:
        a.pins = write_pins(a)
        if not cmd:
            return 0
    if not cmd:
        raise InputError("no repro command after '--' (e.g. -- python repro.py --steps 20)")
    for target in a.disable:
        if ":" not in target or not target.split(":", 1)[1]:
            raise InputError(f"--disable {target!r}: expected module:Name, module:Class.method or __main__:Name")
    from tko.verdict import trial_evidence
    from tko.remedies import fallback_ab
    from tko.chains import trial_plan, trials

    facts = trial_plan.load_facts(a.facts)
    device = trials.device_env()
    plan = trial_plan.plan_arms(facts, device, disable=a.disable, pins=a.pins)
    if a.arms:
        plan = trial_plan.restrict(plan, [n.strip() for n in a.arms.split(",") if n.strip()])
    mismatch = trial_evidence.trial_device_mismatch(device, facts.device if facts else None)
    if mismatch and not a.allow_device_mismatch:
        raise InputError(f"the trials would be timed {mismatch}: they measure the program on the GPU it runs "
                         "on (SKILL.md section 5); run them there, or pass --allow-device-mismatch")
    if mismatch:
        device["mismatch"] = mismatch
        print(f"{TOOL}: warning: timing {mismatch} (--allow-device-mismatch)", file=sys.stderr)
    trials.run_trials(cmd, a.out, plan, runs=a.runs, budget_s=a.budget_s, timeout=a.timeout,
                      metric_regex=a.metric_regex or fallback_ab.DEFAULT_METRIC, device=device, tool=TOOL,
                      max_runs=a.runs + 2 if a.max_runs is None else a.max_runs)
    print((Path(a.out) / "trials.md").read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
