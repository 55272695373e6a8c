"""Where the skill's data lives: the rules, peaks, contracts, templates and script fronts.

In a checkout (or an editable install) they are the skill root's own `references/`, `templates/`
and `scripts/`. A regular `pip install .` copies them into the package as `tko/_bundle/` (see
setup.py), so an installed core finds them from any working directory.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_SOURCE_ROOT = Path(__file__).resolve().parents[3]
_MARKER = Path("references") / "decision_rules.yaml"


def skill_root() -> Path:
    """The folder holding references/, templates/ and scripts/."""
    if (_SOURCE_ROOT / _MARKER).is_file():
        return _SOURCE_ROOT
    bundle = Path(str(resources.files("tko") / "_bundle"))
    if (bundle / _MARKER).is_file():
        return bundle
    raise FileNotFoundError(f"neither {_SOURCE_ROOT} nor {bundle} holds {_MARKER}: a broken install "
                            "(reinstall with pip install .)")


def reference(name: str) -> Path:
    return skill_root() / "references" / name


def templates_dir() -> Path:
    return skill_root() / "templates"


def scripts_dir() -> Path:
    """The argparse fronts (run as `python <dir>/<name>.py`)."""
    return skill_root() / "scripts"
