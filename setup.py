"""Build hook: ship the skill's data (rules, peaks, contracts, templates, script fronts) in the
package as tko/_bundle/, so a regular `pip install .` works from any directory (tko.base.resources)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLED = {"references": None, "templates": None, "scripts": "*.py"}


class BuildPyWithBundle(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "tko" / "_bundle"
        for folder, pattern in BUNDLED.items():
            src, dst = ROOT / folder, target / folder
            if dst.exists():
                shutil.rmtree(dst)
            if pattern is None:
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                dst.mkdir(parents=True)
                for f in src.glob(pattern):
                    shutil.copy2(f, dst / f.name)


setup(cmdclass={"build_py": BuildPyWithBundle})
