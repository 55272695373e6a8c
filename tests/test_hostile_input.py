"""Hostile input: every parser is total; bad input is one line on stderr and exit 2.

Each defect found has a direct test; each parser also gets a bounded fuzz test asserting that
nothing but the project's own InputError escapes it.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import JSON, SCALARS, assert_one_line_exit_2, fuzz_settings, run_script
from tko.base import artifact, decide, errors
from tko.read import kernel_source
from tko.read.autotune_log import parse_files
from tko.read.autotune_summary import render_markdown, summarize
from tko.base.errors import InputError
from tko.read.profile_formats import parse_chrome_trace
from tko.read.profile_rank import attribute_launches, rank_profile

RECORDED = Path(__file__).resolve().parents[1] / "examples" / "recorded_h200"

FUZZ = fuzz_settings()


# --------------------------------------------------------------------------- 1. autotune.log

GOOD = {"schema": "autotune_event/1", "kernel": "good", "event": "autotune", "pid": 1, "time": 1.0,
        "timings": [{"config": {"kwargs": {"XBLOCK": 64}, "num_warps": 4, "num_stages": 1},
                     "ms": 0.5}]}
LAUNCH = {"schema": "autotune_event/1", "kernel": "k", "event": "launch", "pid": 1, "time": 1.0}
BAD_LINES = {
    "args_bool": '{"schema":"autotune_event/1","kernel":"k","event":"launch","args": true}',
    "num_bytes_nan": '{"schema":"autotune_event/1","kernel":"k","event":"launch","num_bytes": NaN}',
    "num_bytes_inf": '{"schema":"autotune_event/1","kernel":"k","event":"launch",'
                     '"num_bytes": Infinity}',
    "configs_kwargs_bool": '{"schema":"autotune_event/1","kernel":"k","event":"kernel",'
                           '"configs": [{"kwargs": true}]}',
    "tensor_without_shape": json.dumps({**LAUNCH, "args": [{"name": "x", "kind": "tensor",
                                                           "dtype": "float32"}]}),
    "winner_kwargs_list": json.dumps({**GOOD, "kernel": "w", "winner": {"kwargs": [1]}}),
    "kernel_num_gb_nan": '{"schema":"autotune_event/1","kernel":"k","event":"kernel",'
                         '"inductor_meta": {"kernel_num_gb": NaN}}',
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_wrong_typed_autotune_line_is_skipped_and_reported(tmp_path, capsys, case):
    log = tmp_path / "autotune.log"
    log.write_text(json.dumps(GOOD) + "\n" + BAD_LINES[case] + "\n")
    out = tmp_path / "s.json"
    rc, err = run_script("summarize_autotune_log", [str(log), "--json-out", str(out)], capsys)
    assert rc == 0, err
    doc = json.loads(out.read_text())
    assert [s["where"] for s in doc["skipped"]] == [f"{log}:2"]
    assert "good" in [k["kernel"] for k in doc["kernels"]]


def test_a_timing_with_a_bad_config_is_skipped_but_the_rest_of_the_event_kept(tmp_path):
    event = dict(GOOD, timings=GOOD["timings"] + [{"config": {"kwargs": True}, "ms": 1.0}])
    log = tmp_path / "autotune.log"
    log.write_text(json.dumps(event) + "\n")
    summary = summarize(parse_files([log]))
    assert len(summary["skipped"]) == 1
    assert len(summary["kernels"][0]["configs"]) == 1


def test_collect_and_probe_readers_skip_wrong_typed_events(tmp_path):
    from tko.read.autotune_events import read_events

    log = tmp_path / "autotune.log"
    log.write_text("\n".join([json.dumps(GOOD)] + list(BAD_LINES.values())) + "\n")
    assert [e["kernel"] for e in read_events(log)] == ["good"]


def test_an_integer_past_a_floats_range_never_raises(tmp_path):
    # JSON integers have no bound: 10**400 in any numeric field of a real event line
    import re

    from tko.read.autotune_events import read_events

    line = (RECORDED / "pointwise_chain" / "autotune_kernels" / "autotune.log").read_text().splitlines()[0]
    numbers = list(re.finditer(r"(?<=: )-?[0-9][0-9.e+-]*", line))
    assert len(numbers) > 5
    for m in numbers:
        log = tmp_path / "autotune.log"
        log.write_text(line[:m.start()] + "1" + "0" * 400 + line[m.end():] + "\n")
        read_events(log)
        render_markdown(summarize(parse_files([log])))


EVENT_KEYS = ["args", "num_bytes", "configs", "winner", "timings", "grid", "inductor_meta",
              "device", "kind", "standalone_file", "source_file", "from_cache", "pid", "time",
              "statistic", "benchmarker", "message", "bytes_source"]


def _events():
    tensor = st.fixed_dictionaries({"kind": st.just("tensor")},
                                   optional={"shape": JSON, "stride": JSON, "name": JSON,
                                             "dtype": JSON, "saved": JSON})
    config = st.dictionaries(st.sampled_from(["kwargs", "num_warps", "num_stages", "extras",
                                              "XBLOCK"]), JSON, max_size=4)
    value = JSON | st.lists(tensor | config | JSON, max_size=3) | config \
        | st.lists(st.fixed_dictionaries({"config": config, "ms": JSON}), max_size=3)
    return st.builds(
        lambda kind, fields: {"schema": "autotune_event/1", "kernel": "k", "event": kind, **fields},
        st.sampled_from(["kernel", "autotune", "coordesc", "launch", "cache_hit", "note"]),
        st.dictionaries(st.sampled_from(EVENT_KEYS), value, max_size=5))


@FUZZ
@given(events=st.lists(_events(), min_size=1, max_size=4))
def test_fuzz_autotune_log_parser_is_total(events):
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "autotune.log"
        log.write_text("\n".join([json.dumps(GOOD)] + [json.dumps(e) for e in events]) + "\n")
        summary = summarize(parse_files([log]))
        render_markdown(summary)
        artifact.dumps(summary)


# --------------------------------------------------------------------------- 2. Chrome traces

KERNEL = {"ph": "X", "cat": "kernel", "name": "k0", "ts": 10.0, "dur": 2.0, "pid": 0, "tid": 7,
          "args": {"correlation": 5, "External id": 3}}
RUNTIME = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 9.0, "dur": 0.5,
           "pid": 1, "tid": 1, "args": {"correlation": 5, "External id": 3}}


@pytest.mark.parametrize("bad", [
    {"ph": "s", "id": [1], "cat": "ac2g", "pid": 1, "tid": 1, "ts": 9.0},
    {"ph": "f", "id": 1, "cat": "ac2g", "pid": [1], "tid": 1, "ts": 10.0},
    dict(KERNEL, pid=[0]),
    dict(KERNEL, args={"correlation": [5]}),
    dict(RUNTIME, args={"correlation": {"a": 1}}),
    dict(KERNEL, ts="nan"),
    dict(KERNEL, dur=float("inf")),
])
def test_wrong_typed_trace_event_is_skipped_and_counted(tmp_path, capsys, bad):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [KERNEL, RUNTIME, bad]}))
    out = tmp_path / "p.json"
    rc, err = run_script("profile_kernels", ["--trace", str(trace), "--json-out", str(out)], capsys)
    assert rc == 0, err
    doc = json.loads(out.read_text())
    assert any("1 malformed trace event(s) skipped" in p for p in doc["problems"])
    assert [k["name"] for k in doc["kernels"]] == ["k0"]


def test_truncated_gzip_trace_is_one_line_exit_2(tmp_path, capsys):
    data = gzip.compress(json.dumps({"traceEvents": [KERNEL, RUNTIME] * 500}).encode())
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(data[: len(data) // 2])
    rc, err = run_script("profile_kernels", ["--trace", str(trace), "--json-out",
                                             str(tmp_path / "p.json")], capsys)
    assert_one_line_exit_2(rc, err, str(trace), "truncated gzip")


TRACE_KEYS = ["ph", "cat", "name", "ts", "dur", "pid", "tid", "id", "args"]


def _trace_events():
    args = st.dictionaries(st.sampled_from(["correlation", "External id", "device", "stream",
                                            "kernel_backend", "kernel_hash", "grid"]), JSON,
                           max_size=4)
    value = st.sampled_from(["X", "s", "f", "t", "kernel", "cuda_runtime", "cpu_op"]) | JSON | args
    base = st.sampled_from([KERNEL, RUNTIME, {"ph": "s", "id": 1, "cat": "ac2g", "pid": 1,
                                              "tid": 1, "ts": 9.0}])
    return st.builds(lambda b, over: {**b, **over}, base,
                     st.dictionaries(st.sampled_from(TRACE_KEYS), value, max_size=3))


@FUZZ
@given(events=st.lists(_trace_events(), max_size=6))
def test_fuzz_chrome_trace_parser_is_total(events):
    try:
        trace = parse_chrome_trace({"traceEvents": [KERNEL, RUNTIME] + events})
    except InputError:
        return
    attribute_launches(trace)
    from tko.read.profile_formats import Parsed

    rank_profile(Parsed(format="chrome_trace", trace=trace))


# --------------------------------------------------------------------------- 3. deep JSON

@pytest.mark.parametrize("script,argv", [
    ("check_env", ["--show", "{f}"]),
    ("compare_profiles", ["{f}", "{f}", "--json-out", "{o}"]),
    ("profile_kernels", ["--trace", "{f}", "--json-out", "{o}"]),
    ("make_investigation_report", ["--kernel", "k", "--profile", "{f}", "--out", "{o}.md"]),
])
def test_deeply_nested_json_is_one_line_exit_2(tmp_path, capsys, script, argv):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000)
    out = tmp_path / "o.json"
    rc, err = run_script(script, [a.format(f=deep, o=out) for a in argv], capsys)
    assert_one_line_exit_2(rc, err, str(deep), "nested too deeply")


@FUZZ
@given(text=st.text(max_size=40) | st.builds(lambda n, c: c * n, st.integers(1, 5000),
                                             st.sampled_from(["[", "{\"a\":", "[1,"])))
def test_fuzz_load_json_is_total(text):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.json"
        path.write_text(text)
        try:
            artifact.load_json(path)
        except InputError:
            pass


# --------------------------------------------------------------------------- 4. typed fields

def _profile(**fields) -> dict:
    doc = artifact.make_artifact("kernel_profile/1", "profile_kernels.py",
                                 {"source": {}, "summary": {"kernel_time_us": 1.0}, "problems": [],
                                  "kernels": [{"name": "k", "total_us": 1.0, "calls": 1}],
                                  "ranking": []})
    doc.update(fields)
    return doc


@pytest.mark.parametrize("fields,message", [
    ({"kernels": "x"}, "field 'kernels' must be a list of objects"),
    ({"summary": []}, "field 'summary' must be an object"),
    ({"kernels": [{"name": 3}]}, "field 'kernels[0].name' must be a string"),
    ({"ranking": [{"name": "k", "total_us": "fast"}]}, "field 'ranking[0].total_us' must be a number"),
])
def test_wrong_field_type_is_named_at_read_time(tmp_path, capsys, fields, message):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_profile(**fields)))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_profile()))
    rc, err = run_script("compare_profiles", [str(good), str(bad), "--json-out",
                                              str(tmp_path / "c.json")], capsys)
    assert_one_line_exit_2(rc, err, f"{bad}: {message}")
    rc, err = run_script("make_investigation_report", ["--kernel", "k", "--profile", str(bad),
                                                       "--out", str(tmp_path / "r.md")], capsys)
    assert_one_line_exit_2(rc, err, f"{bad}: {message}")


def test_check_env_show_wrong_field_types_is_one_line_exit_2(tmp_path, capsys):
    for fields, needle in (({"devices": "x"}, "field 'devices' must be a list of objects"),
                           ({"python": {"version": "3"}, "torch": {"importable": True, "hip": 1},
                             "native_runtime": {"hip": []}}, "wrong type")):
        path = tmp_path / "env.json"
        path.write_text(json.dumps(artifact.make_artifact("triton_env/1", "check_env.py", fields)))
        rc, err = run_script("check_env", ["--show", str(path)], capsys)
        assert_one_line_exit_2(rc, err, str(path), needle)


@FUZZ
@given(fields=st.dictionaries(st.sampled_from(["source", "summary", "kernels", "ranking",
                                               "problems", "device", "api_stats"]),
                              JSON | st.lists(st.dictionaries(
                                  st.sampled_from(["name", "origin", "calls", "total_us"]), JSON,
                                  max_size=4), max_size=2), max_size=4))
def test_fuzz_read_artifact_kernel_profile_is_total(fields):
    from tko.read import profile_compare

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.json"
        path.write_text(json.dumps(_profile(**fields)))
        try:
            doc = artifact.read_artifact(path, "kernel_profile")
        except InputError:
            return
        payload = profile_compare.compare(doc, doc, 1, 1)
        profile_compare.markdown(payload, 10)


# --------------------------------------------------------------------------- 5. rules, permissions

@pytest.mark.parametrize("content,needle", [
    (b"rules: [x]\n", "malformed rules"),
    ("rules: [caf\u00e9]\n".encode("latin-1"), "not a UTF-8 text file"),
    (bytes(range(256)), "not a UTF-8 text file"),
    (b"rules:\n  - id: a\n    verdict: [\n", "not valid YAML"),
])
def test_bad_rules_file_is_one_line_exit_2(tmp_path, capsys, content, needle):
    rules = tmp_path / "rules.yaml"
    rules.write_bytes(content)
    rc, err = run_script("make_investigation_report", ["--kernel", "k", "--rules", str(rules),
                                                       "--out", str(tmp_path / "r.md")], capsys)
    assert_one_line_exit_2(rc, err, str(rules), needle)


def test_rules_directory_is_one_line_exit_2(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        decide.load_rules(tmp_path)


@FUZZ
@given(data=st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=3)
                         | st.dictionaries(st.sampled_from(["rules", "id", "verdict", "priority",
                                                            "when", "any", "fact", "lt", "eq",
                                                            "thresholds", "program_rules"]),
                                           kids, max_size=4), max_leaves=10),
       junk=st.text(max_size=20))
def test_fuzz_load_rules_is_total(data, junk):
    import yaml

    with tempfile.TemporaryDirectory() as tmp:
        for text in (yaml.safe_dump({"rules": data}), yaml.safe_dump(data), junk):
            path = Path(tmp) / "rules.yaml"
            path.write_text(text)
            try:
                decide.load_rules(path)
            except InputError:
                pass


def test_unreadable_input_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    env = tmp_path / "env.json"
    env.write_text("{}")
    real = os.open

    def deny(path, *args, **kwargs):  # as a file of mode 000 would for a user other than root
        if os.fspath(path) == str(env):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    rc, err = run_script("check_env", ["--show", str(env)], capsys)
    assert_one_line_exit_2(rc, err, str(env), "Permission denied")


@pytest.mark.parametrize("exc,needle", [
    (PermissionError(13, "Permission denied", "in.log"), "in.log: Permission denied"),
    (IsADirectoryError(21, "Is a directory", "some_dir"), "some_dir: Is a directory"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
     "not UTF-8 text"),
    (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
])
def test_run_main_maps_input_os_errors_to_one_line_exit_2(capsys, exc, needle):
    def main(argv):
        raise exc

    assert errors.run_main(main, [], prog="t") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("t: error: ") and needle in err[0], err


def test_long_expression_in_kernel_file_is_one_line_exit_2(tmp_path, capsys):
    kernel = tmp_path / "k.py"
    terms = " + ".join(f"x{i}" for i in range(5000))
    kernel.write_text("import triton\n@triton.jit\ndef k(X):\n    y = " + terms + "\n")
    rc, err = run_script("inspect_triton_meta", [str(kernel), "--json-out",
                                                 str(tmp_path / "m.json")], capsys)
    assert_one_line_exit_2(rc, err, str(kernel))


@FUZZ
@given(body=st.lists(st.sampled_from(["x = 1", "y = tl.load(X + tl.arange(0, 16))",
                                      "tl.store(X, y)", "for i in range(3):", "    pass", "(",
                                      "z = " + " * ".join(["a"] * 300), "if x:", "\tq = 2"]),
                     max_size=6))
def test_fuzz_kernel_source_is_total(body):
    text = "import triton\nimport triton.language as tl\n@triton.jit\ndef k(X):\n" \
        + "".join(f"    {line}\n" for line in body) + "    return\n"
    try:
        kernel_source.parse_kernel_source(text, "k.py")
    except InputError:
        pass


def test_json_out_directory_is_one_line_exit_2(tmp_path, capsys):
    with pytest.raises(InputError, match="is a directory"):
        artifact.write_artifact(tmp_path, "kernel_profile/1", "t", {})
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [KERNEL, RUNTIME]}))
    rc, err = run_script("profile_kernels", ["--trace", str(trace), "--json-out", str(tmp_path)],
                         capsys)
    assert_one_line_exit_2(rc, err, str(tmp_path), "is a directory")



@pytest.mark.parametrize("tag", ["kernel_profile/\u00b2", "kernel_profile/" + "9" * 5000, "kernel_profile/x"])
def test_a_schema_tag_with_an_odd_version_is_one_line_exit_2(tmp_path, capsys, tag):
    doc = tmp_path / "p.json"
    doc.write_text(json.dumps({"schema": tag, "kernels": []}))
    with pytest.raises(InputError, match="expected kernel_profile/1"):
        artifact.read_artifact(doc, "kernel_profile/1")
    assert artifact.schema_name(tag)[1] is None


def test_an_artifact_holding_a_value_nested_too_deeply_is_an_input_error(tmp_path):
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    out = tmp_path / "a.json"
    out.write_text("kept\n")
    with pytest.raises(InputError, match="nested too deeply to write"):
        artifact.write_artifact(out, "kernel_profile/1", "t", {"kernels": [], "x": deep})
    assert out.read_text() == "kept\n" and [p.name for p in tmp_path.iterdir()] == ["a.json"]
