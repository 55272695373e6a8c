"""What the fuzz tests share: their bounded settings, JSON values of every type, a script run the
way its ``__main__`` runs it, the checks of the one-line error, and the paths into a document."""

from __future__ import annotations

import importlib
import os
from typing import Any, Iterator

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tko.base import errors


# The fast tier (slow tests deselected: the README's command) runs FAST_EXAMPLES per fuzz test, the
# full tier FULL_EXAMPLES; ``TKO_FUZZ_EXAMPLES=N`` runs N for a deep pass. conftest sets full_tier.
FAST_EXAMPLES, FULL_EXAMPLES = 20, 100
full_tier = True


def fuzz_settings():
    """Settings of every fuzz test: bounded by the tier (see FAST_EXAMPLES), or ``TKO_FUZZ_EXAMPLES``."""
    examples = os.environ.get("TKO_FUZZ_EXAMPLES") or (FULL_EXAMPLES if full_tier else FAST_EXAMPLES)
    return settings(max_examples=int(examples), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much, HealthCheck.data_too_large])


# JSON values of every type, NaN and infinities included (Python's json writes and reads them).
SCALARS = (st.none() | st.booleans() | st.integers(-2**40, 2**40)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))


def json_values(scalars=SCALARS):
    """Lists and objects of ``scalars``, a few levels deep."""
    return st.recursive(scalars, lambda kids: st.lists(kids, max_size=3)
                        | st.dictionaries(st.text(max_size=6), kids, max_size=3), max_leaves=8)


JSON = json_values()


def run_script(name: str, argv: list, capsys) -> tuple[int, list[str]]:
    """Run scripts/<name>.py's main the way its __main__ does; (exit code, stderr lines)."""
    module = importlib.import_module(name)
    capsys.readouterr()
    rc = errors.run_main(module.main, [str(a) for a in argv], prog=f"{name}.py")
    return rc, capsys.readouterr().err.strip().splitlines()


def assert_one_line_exit_2(rc: int, err: list[str], *needles: str) -> None:
    assert rc == 2, err
    assert len(err) == 1, err
    for needle in needles:
        assert needle in err[0], err


def assert_ok_or_one_line(rc: int, err: list[str]) -> None:
    """A script on hostile input: success, or exit 2 with exactly one line that is the input's
    fault (never 1, never a traceback, never the "unexpected" line of a bug)."""
    assert rc in (0, 2), err
    if rc == 2:
        assert len(err) == 1, err
        assert "unexpected" not in err[0], err


def json_paths(value: Any, prefix: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """Every (path, value) of a JSON document's nodes, the root excluded, parents first."""
    items = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield prefix + (key,), child
        yield from json_paths(child, prefix + (key,))


def put(doc: Any, path: tuple, value: Any) -> bool:
    """Replace the value at ``path`` in ``doc``; False (nothing changed) when an earlier change
    removed the path or put another kind of container there."""
    node = doc
    for key in path:
        if isinstance(node, dict) and isinstance(key, str) and key in node \
                or isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            parent, node = node, node[key]
        else:
            return False
    parent[path[-1]] = value
    return True
