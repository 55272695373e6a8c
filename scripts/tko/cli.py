"""Console entry points (`tko-investigate`, `tko-check-env`, ...): each runs its script front as
`python scripts/<name>.py` would, so the two ways of calling a step cannot drift apart."""

from __future__ import annotations

import runpy
import sys

from . import resources

SCRIPTS = ["check_env", "summarize_autotune_log", "collect_inductor_artifacts", "profile_kernels",
           "inspect_triton_meta", "scan_amdgcn", "probe_compile", "run_captured_kernel",
           "sweep_captured_kernel", "triton_benchmark_template", "measure_peak_bandwidth",
           "compare_profiles", "eager_fallback_ab", "make_investigation_report", "investigate",
           "autotune_capture_patch", "apply_config_pins", "try_remedies", "speed_of_light", "validate_dcu",
           "rowkernel_sweep"]


def run_script(name: str) -> None:
    path = resources.scripts_dir() / f"{name}.py"
    sys.argv[0] = str(path)
    runpy.run_path(str(path), run_name="__main__")


def _entry(name: str):
    def entry() -> None:
        run_script(name)

    entry.__name__ = name
    return entry


for _name in SCRIPTS:
    globals()[_name] = _entry(_name)


def run_program(program: str, args: list[str]) -> None:
    """Run a user's script as ``python program args`` would, in this process (the wrappers that
    install a patch first: capture, config pins)."""
    import os

    sys.argv = [program, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
    runpy.run_path(program, run_name="__main__")
