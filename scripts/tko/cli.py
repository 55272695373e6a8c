"""Console entry points (`tko-investigate`, `tko-check-env`, ...): each runs its script front as
`python scripts/<name>.py` would, so the two ways of calling a step cannot drift apart.

:data:`SCRIPTS` is the one list of them: pyproject.toml's ``[project.scripts]`` table is generated
from it (``cd scripts && python -m tko.cli --write``), and tests/test_scripts_cli.py fails while the
two differ.
"""

from __future__ import annotations

import argparse
import re
import runpy
import sys

from .base import resources

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


def console_scripts() -> dict[str, str]:
    """pyproject.toml's ``[project.scripts]`` table: ``tko-<name with dashes>`` for each of :data:`SCRIPTS`."""
    return {f"tko-{name.replace('_', '-')}": f"tko.cli:{name}" for name in SCRIPTS}


_TABLE = re.compile(r"^\[project\.scripts\]\n(?:[^\[\n].*\n|\n)*?(?=\n*^\[|\Z)", re.M)


def with_console_scripts(pyproject: str) -> str:
    """The text of a pyproject.toml with its ``[project.scripts]`` table regenerated."""
    table = "[project.scripts]\n" + "".join(f'{k} = "{v}"\n' for k, v in console_scripts().items())
    if len(_TABLE.findall(pyproject)) != 1:
        raise LookupError("expected one [project.scripts] table in pyproject.toml")
    return _TABLE.sub(lambda _: table, pyproject, count=1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate (or check) pyproject.toml's [project.scripts].")
    parser.add_argument("--write", action="store_true", help="rewrite the table in place")
    opts = parser.parse_args(argv)
    path = resources.skill_root() / "pyproject.toml"
    text = path.read_text(encoding="utf-8")
    fresh = with_console_scripts(text)
    if opts.write:
        if fresh != text:
            from .base.atomic import write_text

            write_text(path, fresh)
        print(f"{path.name}: [project.scripts] {'regenerated' if fresh != text else 'already current'}")
        return 0
    if fresh != text:
        print(f"{path.name}: [project.scripts] out of date; run `python -m tko.cli --write` in scripts/",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
