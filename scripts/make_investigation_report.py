#!/usr/bin/env python3
"""Merge the scripts' JSON outputs into one kernel's investigation report (Markdown + JSON twin).

    python scripts/make_investigation_report.py --autotune-summary autotune_summary.json \
        --meta meta.json --isa isa_scan.json --kernel triton_poi_fused_add_0 \
        --out triton_investigation.md [--profile profile.json --env triton_env.json --run run.json
        --probe probe.json --benchmark sweep.json --ab ab.json --trials trials.json --sol sol.json]

Every input is optional except --kernel and --out: a missing input becomes a listed gap.
The decision comes from references/decision_rules.yaml; each fired rule cites its evidence.
Measured evidence decides first: a remedy trial (try_remedies.py) that beat the baseline beyond
noise with equal outputs, then the speed-of-light class (speed_of_light.py) of a timed kernel;
the rules inferred from the source and the ISA decide only where nothing was measured.
Trials timed on another device than the kernels' (--env, else the profile's device) or on no GPU
are refused unless --allow-device-mismatch (then shown flagged).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tko.base import atomic
from tko.base.artifact import write_artifact
from tko.base.errors import ArgumentParser, InputError, run_main

TOOL = "make_investigation_report.py"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog=TOOL, example='python scripts/make_investigation_report.py --autotune-summary autotune_summary.json --meta meta.json --isa isa_scan.json --kernel triton_poi_fused_add_0 --out triton_investigation.md', description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", required=True, help="kernel name, e.g. triton_poi_fused_add_0")
    p.add_argument("--out", required=True, help="Markdown report path")
    p.add_argument("--json-out", default=None, help="JSON twin (default: --out with .json)")
    p.add_argument("--autotune-summary", help="summarize_autotune_log.py output")
    p.add_argument("--meta", help="inspect_triton_meta.py output")
    p.add_argument("--isa", help="scan_amdgcn.py output")
    p.add_argument("--profile", help="profile_kernels.py output")
    p.add_argument("--env", help="check_env.py output")
    p.add_argument("--run", help="run_captured_kernel.py output")
    p.add_argument("--probe", help="probe_compile.py output")
    p.add_argument("--benchmark", help="triton_benchmark_template.py or sweep output")
    p.add_argument("--ab", help="eager_fallback_ab.py output")
    p.add_argument("--artifacts", help="collect_inductor_artifacts.py manifest.json (the model code behind the kernel)")
    p.add_argument("--trials", help="try_remedies.py trials.json (remedy_trials/1): end-to-end remedies of the program")
    p.add_argument("--sol", help="speed_of_light.py output (speed_of_light/1): the kernel against its memory twin and floor")
    p.add_argument("--peak-gbps", type=float, default=None,
                   help="copy bandwidth to judge GB/s against (default: measured store, then references/device_peaks.yaml)")
    p.add_argument("--peaks", default=None, metavar="FILE",
                   help="measured peaks store (measure_peak_bandwidth.py; a capture's device_peaks.json): "
                        "sets $TKO_PEAKS_FILE for this report")
    p.add_argument("--rules", default=None, help="decision rules YAML (default: references/decision_rules.yaml)")
    p.add_argument("--repro", default=None, help="the repro command line, for the eager-fallback A/B suggestion")
    p.add_argument("--allow-device-mismatch", action="store_true",
                   help="use --trials timed on another device than the kernels' (or on no GPU): shown flagged")
    return p


def main(argv=None) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    from tko.base import decide
    from tko.verdict import report

    json_out = a.json_out or str(Path(a.out).with_suffix(".json"))
    atomic.check_outputs(json_out, a.out)

    paths = {"autotune_summary": a.autotune_summary, "meta": a.meta, "isa": a.isa, "profile": a.profile,
             "env": a.env, "run": a.run, "probe": a.probe, "benchmark": a.benchmark, "ab": a.ab,
             "artifacts": a.artifacts, "trials": a.trials, "sol": a.sol}
    docs = report.load_inputs(paths)
    labels = {k: Path(v).name for k, v in paths.items() if v}
    rules = decide.load_rules(Path(a.rules)) if a.rules else None
    if a.peaks:
        if not os.path.isfile(a.peaks):
            raise InputError(f"--peaks {a.peaks}: no such file")
        os.environ["TKO_PEAKS_FILE"] = a.peaks
    result = report.build(a.kernel, docs, labels, peak_override=a.peak_gbps, rules=rules, peaks_file=a.peaks,
                          allow_device_mismatch=a.allow_device_mismatch)
    result["repro"] = a.repro
    markdown = report.render_markdown(result, rules, json_out=json_out)
    write_artifact(json_out, "investigation_report/1", TOOL, result)
    atomic.write_text(a.out, markdown)
    print(f"{a.kernel}: {result['decision_text']}"
          + (f" (rule {result['decision']['rule']})" if result["decision"]["rule"] else ""))
    print(f"report: {a.out}; JSON: {json_out}; {len(result['gaps'])} gap(s)")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, prog=TOOL))
