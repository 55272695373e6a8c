"""Fuzzing the readers of a captured standalone file's ``_TKO_SPEC`` (recorded arguments and
configs): the byte model, the sweep's plan, the compile plan of probe_compile and inspect.

Each seed is a real standalone file written by the capture patch on the H200; one to three
values of its spec, at any depth, are replaced by a hostile JSON value.  Only InputError may
escape a reader, and a script exits 0, or 2 with one line.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, ROOT
from fuzzing import JSON, assert_ok_or_one_line, fuzz_settings, json_paths, put, run_script
from tko.measure import byte_model, standalone, sweep_plan
from tko.read import kernel_source
from tko.compile import offline_compile
from tko.base.errors import InputError

# no shrinking: a failing case is a whole kernel file, and each example runs three readers
FUZZ = settings(fuzz_settings(), phases=[Phase.explicit, Phase.reuse, Phase.generate])
SEEDS = sorted(p for p in [*ROOT.glob("examples/recorded_h200/*/autotune_kernels/*.py"),
                           *FIXTURES.glob("capture_h200/*/*.py")]
               if "_TKO_SPEC = " in p.read_text(encoding="utf-8"))
HOSTILE = JSON | st.sampled_from([10**400, -10**400, -1, 0, 2**63, float("nan"), float("inf"), "", [], {},
                                  "../../x", "a\nb", "*fp32", "i64", "float16", "cuda:0"])


def _spec(text: str) -> dict:
    line = re.search(r"^_TKO_SPEC = .*$", text, re.M).group(0)
    return json.loads(eval(line.split("loads(", 1)[1][:-1]))  # the repr of the JSON text


def _with_spec(text: str, spec: dict) -> str:
    """``text`` with ``spec`` written as the capture writes it, NaN and huge numbers included."""
    blob = json.dumps(spec, sort_keys=True, allow_nan=True, default=repr)
    line = f"_TKO_SPEC = __import__(\"json\").loads({blob!r})"
    return re.sub(r"^_TKO_SPEC = .*$", lambda _m: line, text, count=1, flags=re.M)


@st.composite
def mutated_file(draw) -> tuple[Path, str]:
    seed = draw(st.sampled_from(SEEDS))
    text = seed.read_text(encoding="utf-8")
    spec = copy.deepcopy(_spec(text))
    # the program's grid per block move, as a capture of a grid function records it: fuzzed as well
    flat = spec["configs"][0]["flat"]
    spec["configs"][0].setdefault("grid_moves", {f"{k}={2 * v}": [1] for k, v in flat.items()
                                                 if isinstance(v, int) and "BLOCK" in k.upper()})
    paths = [p for p, _ in json_paths(spec)]
    for _ in range(draw(st.integers(1, 3))):
        put(spec, draw(st.sampled_from(paths)), draw(HOSTILE))
    return seed, _with_spec(text, spec)


def test_the_seeds_are_real_standalone_files_and_read_as_today():
    assert len(SEEDS) >= 8
    for seed in SEEDS:
        text = seed.read_text(encoding="utf-8")
        spec = kernel_source.parse_kernel_source(text, str(seed))["standalone_spec"]
        assert spec == _spec(text) and spec["configs"] and spec["args"]
        assert _spec(_with_spec(text, spec)) == spec
        model = byte_model.model_for_file(text, seed)
        assert model["unique_bytes"] > 0, seed


def _readers(path: Path, text: str, work: Path) -> None:
    """Each spec reader on one file; an InputError is an accepted answer."""
    for read in (lambda: byte_model.model_for_file(text, path),
                 lambda: sweep_plan.build_plan(path, work / "sweep"),
                 lambda: _compile_plan(path)):
        try:
            read()
        except InputError:
            pass


def _compile_plan(path: Path) -> None:
    _, parsed = kernel_source.read_kernel_file(path)
    chosen = kernel_source.select_kernel(parsed, None)
    launch = offline_compile.launch_from_standalone_spec(parsed["standalone_spec"])
    offline_compile.plan_compile(chosen, launch=launch)


@FUZZ
@given(case=mutated_file())
def test_fuzz_spec_readers_are_total(case):
    seed, text = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / seed.name
        path.write_text(text, encoding="utf-8")
        _readers(path, text, Path(tmp))


@FUZZ
@given(case=mutated_file())
def test_fuzz_inspect_on_a_mutated_standalone_file(capsys, case):
    seed, text = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / seed.name
        path.write_text(text, encoding="utf-8")
        rc, err = run_script("inspect_triton_meta", [path, "--json-out", Path(tmp) / "meta.json"], capsys)
        assert_ok_or_one_line(rc, err)


@pytest.mark.parametrize("value", [None, 5, "x", [1], {"a": 1}])
def test_a_spec_that_is_not_an_object_is_an_input_error(tmp_path, value):
    seed = SEEDS[0]
    path = tmp_path / seed.name
    path.write_text(_with_spec(seed.read_text(encoding="utf-8"), value), encoding="utf-8")
    with pytest.raises(InputError):
        sweep_plan.read_standalone(path) if value != {"a": 1} else byte_model.model_for_file(path.read_text(), path)
    assert standalone.runner_version(path.read_text()) == standalone.runner_version(seed.read_text())


def test_put_replaces_only_a_path_that_is_still_there():
    from fuzzing import put

    doc = {"a": [1, {"b": 2}]}
    assert put(doc, ("a", 1, "b"), 3) and doc == {"a": [1, {"b": 3}]}
    assert not put(doc, ("a", 5), 0) and not put(doc, ("a", 0, "x"), 0) and not put(doc, ("z",), 0)
    doc["a"] = {"k": 1}
    assert not put(doc, ("a", 0), 9) and doc == {"a": {"k": 1}}


@pytest.mark.parametrize("path,value,needle", [
    (("args",), 10**400, "'args' or 'configs' is not a list"),
    (("args", 0, "name"), [[None]], "args[0] has a name, kind or dtype that is not a string"),
    (("args", 0, "shape"), [1, "2"], "args[0] is a tensor without integer shape and stride"),
    (("args", 0, "storage_numel"), 10**400, "args[0] has a wrong-typed dtype, storage size"),
    (("configs", 0, "flat", "num_stages"), "cuda:0", "configs[0].flat has a num_warps, num_stages"),
    (("configs", 0, "grid"), [1.5], "configs[0].grid is not a list of integers"),
    (("num_bytes",), float("nan"), "'num_bytes' is not a number"),
    (("function",), "", "'function' is not a name"),
])
def test_a_damaged_spec_is_one_input_error_naming_the_field(tmp_path, capsys, path, value, needle):
    seed = SEEDS[0]
    text = seed.read_text(encoding="utf-8")
    spec = _spec(text)
    assert put(spec, path, value)
    bad = tmp_path / seed.name
    bad.write_text(_with_spec(text, spec), encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(needle)):
        byte_model.model_for_file(bad.read_text(), bad)
    rc, err = run_script("sweep_captured_kernel", [bad, "--json-out", tmp_path / "s.json", "--markdown-out",
                                                    tmp_path / "s.md", "--best-out", tmp_path / "b.py"], capsys)
    assert rc == 2 and len(err) == 1 and needle in err[0] and str(bad) in err[0], err
