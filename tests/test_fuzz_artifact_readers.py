"""Fuzzing every artifact reader: a real artifact with one value changed, at any depth.

Each test starts from a real artifact (recorded on the H200, or written here from a recorded
capture by the script that writes it), replaces the value at one random path with a hostile JSON
value (another type, NaN, infinity, an integer past a float's range, a negative, an empty list or
object, deep nesting, a long string, newlines and HTML) or deletes it, and runs the script that
reads it: it writes its report (exit 0) or prints one line on stderr and exits 2.
"""

from __future__ import annotations

import copy
import importlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, ROOT
from fuzzing import JSON, fuzz_settings, json_paths, run_script
from tko.base import artifact, errors
from tko.base.errors import InputError

FUZZ = fuzz_settings()
RECORDED = ROOT / "examples" / "recorded_h200"
CHAIN = RECORDED / "pointwise_chain"
KERNEL = "triton_poi_fused_add_gelu_mul_0"
STANDALONE = CHAIN / "autotune_kernels" / f"{KERNEL}.py"


# --------------------------------------------------------------------------- hostile values

class Deep:
    """``n`` nested lists, written as raw JSON text (json.dumps itself would recurse too deep)."""

    def __init__(self, n: int):
        self.n = n

    def __repr__(self) -> str:
        return f"Deep({self.n})"


DELETE = object()  # the mutation that removes the key (or list item) instead

HOSTILE = st.one_of(
    JSON,
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 10**400, -10**400, 2**63, -1, -1.5, 0, 0.0,
                     5e-324, [], {}, [{}], [[]], "", True, False, None]),
    st.integers(10, 2000).map(Deep),
    st.integers(1000, 200000).map(lambda n: "x" * n),
    st.sampled_from(["a\nb\r\n# heading\n| x | y |", "<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                     "`code` **b** [l](javascript:alert(1))", "\u0000\u202e\ufeff", "../../../etc/passwd",
                     "{kernel}{0}%s%d", "\n" * 50]),
    st.just(DELETE),
)


def dumps(doc) -> str:
    """JSON text of ``doc``, a :class:`Deep` written as that many nested lists."""
    deep: list[int] = []

    def mark(obj):
        if isinstance(obj, Deep):
            deep.append(obj.n)
            return f"@@deep{len(deep) - 1}@@"
        raise TypeError(type(obj).__name__)

    text = json.dumps(doc, default=mark)
    for i, n in enumerate(deep):
        text = text.replace(f'"@@deep{i}@@"', "[" * n + "]" * n)
    return text


def paths(value):
    """Every path below ``value`` (object keys and list indices), the schema tag excepted."""
    return [p for p, _ in json_paths(value) if p != ("schema",)]


def mutated(doc, path, value):
    out = copy.deepcopy(doc)
    target = out
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


def draw_mutation(data, doc):
    """(path, value, mutated document), drawn."""
    path = data.draw(st.sampled_from(paths(doc)), label="path")
    value = data.draw(HOSTILE, label="value")
    return path, value, mutated(doc, path, value)


def load(path: Path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- running a script

def assert_report_or_one_line(rc: int, err: list[str], what) -> None:
    assert rc in (0, 2), (what, err)
    if rc == 2:
        assert len(err) == 1, (what, err)


@pytest.fixture(scope="module", autouse=True)
def _compiled_once():
    """The report template compiled and the bundled rules parsed once per module, not once per
    example: the fuzz tests run a script hundreds of times, and neither is what they test."""
    import jinja2

    from tko.base import decide

    class Memory(jinja2.BytecodeCache):
        def __init__(self):
            self.codes = {}

        def load_bytecode(self, bucket):
            if bucket.key in self.codes:
                bucket.bytecode_from_string(self.codes[bucket.key])

        def dump_bytecode(self, bucket):
            self.codes[bucket.key] = bucket.bytecode_to_string()

    cache, init, load_rules, rules = Memory(), jinja2.Environment.__init__, decide.load_rules, {}

    def environment(self, *args, **kwargs):
        kwargs.setdefault("bytecode_cache", cache)
        init(self, *args, **kwargs)

    def cached_rules(path=decide.RULES_PATH):
        if path != decide.RULES_PATH:
            return load_rules(path)
        if not rules:
            rules["bundled"] = load_rules(path)
        return copy.deepcopy(rules["bundled"])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jinja2.Environment, "__init__", environment)
        mp.setattr(decide, "load_rules", cached_rules)
        yield


# --------------------------------------------------------------------------- the real artifacts

@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """The artifacts no capture records, written by their scripts from the pointwise_chain capture:
    autotune_summary/2, triton_meta/1, artifact_manifest/1, isa_scan/1."""
    out = tmp_path_factory.mktemp("made")
    steps = [
        ("summarize_autotune_log", [CHAIN / "autotune_kernels" / "autotune.log", "--json-out", out / "summary.json"]),
        ("inspect_triton_meta", [STANDALONE, "--json-out", out / "meta.json"]),
        ("collect_inductor_artifacts", ["--out", out / "arts", "--log", CHAIN / "log_profile.txt", "--capture-dir",
                                        CHAIN / "autotune_kernels", "--cache-root", CHAIN / "inductor_cache"]),
        ("scan_amdgcn", [out / "arts", "--kernel", KERNEL, "--json-out", out / "isa.json"]),
    ]
    for name, argv in steps:
        assert importlib.import_module(name).main([str(a) for a in argv]) in (0, None), name
    # benchmark/1: the template in Triton's interpreter with the host clock (its own process: it
    # sets the interpreter up at import)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "triton_benchmark_template.py"), "--size", "4096",
                           "--cpu-timer", "--json-out", str(out / "bench.json")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    # autotune_summary/1: one launch per kernel under ``launch``, where /2 lists ``launches``
    v1 = load(out / "summary.json")
    v1["schema"] = "autotune_summary/1"
    for k in v1["kernels"]:
        k["launch"] = (k.pop("launches", None) or [None])[0]
    (out / "summary_v1.json").write_text(json.dumps(v1))
    return {"summary": out / "summary.json", "meta": out / "meta.json", "manifest": out / "arts" / "manifest.json",
            "isa": out / "isa.json", "bench": out / "bench.json", "summary_v1": out / "summary_v1.json"}


def report_inputs(made: dict[str, Path]) -> dict[str, Path]:
    """One real artifact per input of make_investigation_report.py (flag -> file)."""
    return {
        "--autotune-summary": made["summary"], "--meta": made["meta"], "--isa": made["isa"],
        "--artifacts": made["manifest"],
        "--profile": CHAIN / "profile" / "profile.json", "--env": CHAIN / "triton_env.json",
        "--run": CHAIN / "runs" / f"{KERNEL}.json", "--peaks": CHAIN / "device_peaks.json",
        "--probe": FIXTURES / "sweep" / "tiny_inductor_probe.json",
        "--benchmark": FIXTURES / "sweep_h200" / "long_row_softmax_sweep_1gpu.json",
        "--ab": RECORDED / "dynamic_shapes" / "fallback_ab.json",
        "--trials": RECORDED / "trials" / "layernorm_fwd_bwd" / "trials.json",
        "--sol": FIXTURES / "sol_h200" / "table" / "call2" / "pointwise_chain_rep1.json",
    }


def make_report(inputs: dict[str, Path], out: Path, capsys) -> tuple[int, list[str]]:
    argv = ["--kernel", KERNEL, "--out", out / "report.md"]
    for flag, path in inputs.items():
        argv += [flag, path]
    return run_script("make_investigation_report", argv, capsys)


@pytest.fixture
def peaks_env(monkeypatch):
    # --peaks sets $TKO_PEAKS_FILE for the process: put it back after the test
    monkeypatch.setenv("TKO_PEAKS_FILE", str(CHAIN / "device_peaks.json"))


def test_the_unmutated_artifacts_give_todays_report(made, tmp_path, capsys, peaks_env):
    rc, err = make_report(report_inputs(made), tmp_path, capsys)
    assert rc == 0, err
    doc = load(tmp_path / "report.json")
    # the eager fallback measured 4.69x end to end (layernorm trials) decides over the kernel at its floor
    assert (doc["decision"]["verdict"], doc["decision"]["rule"]) == ("disable_compiled_region",
                                                                     "remedy_measured_faster_eager")
    assert doc["facts"]["remedy_x"]["value"] == pytest.approx(4.687, abs=0.001)
    assert doc["facts"]["sol_class"]["value"] == "at_floor"
    assert doc["facts"]["memory_verdict"]["value"] == "global"
    assert doc["facts"]["share"]["value"] == pytest.approx(0.876, abs=0.001)
    assert doc["facts"]["pct_copy_peak"]["value"] == pytest.approx(0.880, abs=0.001)
    assert doc["sections"]["trials"]["winner"] == "eager_fallback"
    assert doc["sections"]["tuning_runs"]["best"] == "num_warps=8"
    assert doc["gaps"] == []
    assert "## Speed of light" in (tmp_path / "report.md").read_text()


REPORT_FLAGS = ("--autotune-summary", "--meta", "--isa", "--artifacts", "--profile", "--env", "--run", "--peaks",
                "--probe", "--benchmark", "--ab", "--trials", "--sol")


# (flag, the file fuzzed when not the one report_inputs gives it)
REPORT_CASES = [(flag, None) for flag in REPORT_FLAGS] + [
    ("--benchmark", "bench"), ("--autotune-summary", "summary_v1"),
    # an access-pattern-bound kernel (causes with bounds), an arithmetic-bound one (costly ops),
    # trials with a replace arm
    ("--sol", FIXTURES / "sol_h200" / "table" / "softmax_long_rows_rep1.json"),
    ("--sol", FIXTURES / "sol_h200" / "table" / "gelu_erf_rep1.json"),
    ("--trials", RECORDED / "trials" / "softmax_long_rows_replace" / "trials.json")]


@pytest.mark.parametrize("flag,other", REPORT_CASES)
@FUZZ
@given(data=st.data())
def test_fuzz_make_investigation_report(made, capsys, peaks_env, flag, other, data):
    inputs = report_inputs(made)
    source = other if isinstance(other, Path) else made[other] if other else inputs[flag]
    path, value, doc = draw_mutation(data, load(source))
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "bad.json"
        bad.write_text(dumps(doc))
        rc, err = make_report({**inputs, flag: bad}, Path(tmp), capsys)
        assert_report_or_one_line(rc, err, (flag, path, value))
        if rc == 0:
            assert (Path(tmp) / "report.md").is_file() and (Path(tmp) / "report.json").is_file()


# --------------------------------------------------------------------------- speed_of_light.py

@pytest.fixture(scope="module")
def offline_once():
    """speed_of_light.py's offline work (parse, twin, ISA census, byte model) done once and
    reused: the fuzzed inputs are the artifacts it reads, not the kernel file."""
    from tko.measure import byte_model, twins
    from tko.read import kernel_source

    def memo(fn):
        seen = {}

        def call(*args, **kwargs):
            key = repr((args, sorted(kwargs.items())))
            if key not in seen:
                seen[key] = fn(*args, **kwargs)
            return copy.deepcopy(seen[key])

        return call

    with pytest.MonkeyPatch.context() as mp:
        for module, name in ((kernel_source, "read_kernel_file"), (twins, "write_twin_file"),
                             (twins, "check_twin"), (byte_model, "model_for_file")):
            mp.setattr(module, name, memo(getattr(module, name)))
        yield


SOL_INPUTS = {"--sweep": FIXTURES / "sweep_h200" / "long_row_softmax_sweep_1gpu.json",
              "--remedy": CHAIN / "runs" / f"{KERNEL}.json", "--peaks": CHAIN / "device_peaks.json"}


def speed_of_light(inputs: dict, out: Path, twin: Path, capsys) -> tuple[int, list[str]]:
    argv = [STANDALONE, "--offline", "--json-out", out / "sol.json", "--markdown-out", out / "sol.md",
            "--twin-out", twin]
    for flag, path in inputs.items():
        argv += [flag, path]
    return run_script("speed_of_light", argv, capsys)


def test_speed_of_light_on_the_unmutated_artifacts(offline_once, tmp_path, capsys):
    rc, err = speed_of_light(SOL_INPUTS, tmp_path, tmp_path / "twin.py", capsys)
    assert rc == 0, err
    doc = load(tmp_path / "sol.json")
    assert doc["classification"]["class"] == "unmeasured" and doc["offline"] is True
    assert doc["sweep_ms"] == pytest.approx(1.14584, abs=1e-5)     # the sweep's best ranked median
    assert doc["remedy_ms"] == pytest.approx(0.054208, abs=1e-6)    # the run's best do_bench time
    assert doc["peak"]["copy_gbps"] == pytest.approx(4222.0, abs=0.1)
    assert "best sweep variant" in doc["chart_svg"]


@pytest.mark.parametrize("flag", sorted(SOL_INPUTS))
@FUZZ
@given(data=st.data())
def test_fuzz_speed_of_light(offline_once, tmp_path, capsys, flag, data):
    path, value, doc = draw_mutation(data, load(SOL_INPUTS[flag]))
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "bad.json"
        bad.write_text(dumps(doc))
        rc, err = speed_of_light({**SOL_INPUTS, flag: bad}, Path(tmp), tmp_path / "twin.py", capsys)
        assert_report_or_one_line(rc, err, (flag, path, value))
        if rc == 0:
            assert (Path(tmp) / "sol.md").is_file()


# --------------------------------------------------------------------------- config pins

PINS_FILE = RECORDED / "trials" / "softmax_long_rows_pinned" / "pins.json"
PIN_SRC = "def k(x_ptr, XBLOCK: tl.constexpr):\n    pass\n"


class FakeAutotuner:
    """The parts of Inductor's CachingAutotuner a pin touches (as tests/test_pins.py has them)."""

    def __init__(self, name, src, configs):
        self.fn = type("Fn", (), {"__name__": name, "src": src})()
        self.inductor_meta = {"kernel_name": name, "dynamic_scale_rblock": True}
        self.configs = list(configs)
        self.compile_results, self.launchers = [], []


def pins_doc() -> dict:
    """The recorded pins file, its pin naming the fake kernel ``k`` with ``k``'s source hash."""
    from tko.patch import pins

    doc = load(PINS_FILE)
    doc["pins"][0].update(kernel="k", source_sha256=pins.source_hash(PIN_SRC))
    return doc


def apply_pins_file(path: Path) -> bool:
    import triton

    from tko.patch import pins

    loaded = pins.load_pins(path)
    tuner = FakeAutotuner("k", PIN_SRC, [triton.Config({"XBLOCK": 128}, num_warps=4, num_stages=1)])
    return pins.apply_pin(tuner, loaded)


def test_the_unmutated_pins_file_pins_its_config(tmp_path, capsys):
    path = tmp_path / "pins.json"
    path.write_text(json.dumps(pins_doc()))
    assert apply_pins_file(path) is True
    assert "pinned k to {'kwargs': {'R0_BLOCK': 1024, 'XBLOCK': 1}, 'num_warps': 16" in capsys.readouterr().err


@FUZZ
@given(data=st.data())
def test_fuzz_pins_file_loads_and_applies_or_is_one_input_error(data):
    path, value, doc = draw_mutation(data, pins_doc())
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "pins.json"
        bad.write_text(dumps(doc))
        try:
            assert apply_pins_file(bad) in (True, False)
        except InputError:
            pass


@pytest.fixture
def pins_script_env(monkeypatch, tmp_path):
    """apply_config_pins.py in this process: $TKO_PINS, sys.argv, sys.path and Inductor's
    CachingAutotuner.precompile put back after the test; a program that does nothing."""
    from torch._inductor.runtime import triton_heuristics

    monkeypatch.setenv("TKO_PINS", "")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(triton_heuristics.CachingAutotuner, "precompile",
                        triton_heuristics.CachingAutotuner.precompile)
    program = tmp_path / "program.py"
    program.write_text("print('program ran')\n")
    return program


def run_pins_script(pins_path: Path, program: Path, capsys) -> tuple[int, list[str], str]:
    """(exit code, stderr lines, stdout) of apply_config_pins.py --pins PINS PROGRAM."""
    module = importlib.import_module("apply_config_pins")
    capsys.readouterr()
    try:
        rc = errors.run_main(module.main, ["--pins", str(pins_path), str(program)], prog="apply_config_pins.py")
    except SystemExit as exc:  # argparse's usage errors
        rc = exc.code
    captured = capsys.readouterr()
    return rc, captured.err.strip().splitlines(), captured.out


def test_apply_config_pins_on_the_recorded_pins_file(pins_script_env, capsys):
    rc, err, out = run_pins_script(PINS_FILE, pins_script_env, capsys)
    assert rc == 0, err
    assert err == [f"apply_config_pins: 1 pin(s) loaded from {PINS_FILE}"] and out == "program ran\n"


@FUZZ
@given(data=st.data())
def test_fuzz_apply_config_pins_script(pins_script_env, capsys, data):
    path, value, doc = draw_mutation(data, load(PINS_FILE))
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "pins.json"
        bad.write_text(dumps(doc))
        rc, err, out = run_pins_script(bad, pins_script_env, capsys)
        assert_report_or_one_line(rc, err, (path, value))
        if rc == 0:
            assert out == "program ran\n" and not any("not applied" in line for line in err), err


# --------------------------------------------------------------------------- investigate.py --from-capture

@pytest.fixture(scope="module")
def capture_outputs(made, tmp_path_factory) -> dict[str, Path]:
    """What the pipeline reads back in its own process: the capture's profile, repro command and
    recorded trials, the autotune summary and a kernel's report.json."""
    out = tmp_path_factory.mktemp("report")
    inputs = report_inputs(made)
    argv = ["--kernel", KERNEL, "--out", out / "report.md"]
    for flag, path in inputs.items():
        argv += [flag, path]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TKO_PEAKS_FILE", str(CHAIN / "device_peaks.json"))
        assert importlib.import_module("make_investigation_report").main([str(a) for a in argv]) == 0
    return {"profile/profile.json": CHAIN / "profile" / "profile.json",
            "repro_command.json": CHAIN / "repro_command.json",
            "trials/trials.json": inputs["--trials"], "autotune_summary.json": made["summary"],
            "report.json": out / "report.json"}


def pipeline_readers(cap: Path, out: Path) -> dict:
    """The in-process readers of investigate.py --from-capture, on a capture and its outputs."""
    from tko.verdict import program_evidence
    from tko.chains import investigation_index, pipeline

    profile, summary = pipeline.load_doc(cap / "profile" / "profile.json"), pipeline.load_doc(out / "autotune_summary.json")
    kernels = pipeline.top_kernels(profile, summary, 3)
    for name in kernels:  # each becomes a folder under --out/kernels
        assert isinstance(name, str) and name not in ("", ".", "..") and Path(name).name == name, name
    trials = pipeline.recorded_trials(cap)
    program = program_evidence.program_decision(profile, "profile/profile.json", trials=pipeline.load_trials(trials))
    result = {"mode": "offline", "capture_dir": str(cap), "out_dir": str(out), "command": None,
              "repro": pipeline.repro_command(cap), "program": program,
              "trials": pipeline.trials_summary(trials, out, recorded=True),
              "kernels": [pipeline._kernel_entry(k, out / "kernels" / k, out, pipeline.load_doc(out / "report.json"),
                                                 STANDALONE) for k in kernels], "steps": []}
    result["next_steps"] = investigation_index.next_steps(result)
    investigation_index.index_markdown(result)
    return result


def lay_out(files: dict[str, Path], root: Path, bad: tuple[str, str] | None = None) -> tuple[Path, Path]:
    """A capture folder and an --out folder holding ``files`` (one replaced by the text ``bad``)."""
    cap, out = root / "cap", root / "out"
    for name, src in files.items():
        where = out if name in ("autotune_summary.json", "report.json") else cap
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        text = bad[1] if bad and bad[0] == name else src.read_text(encoding="utf-8")
        (where / name).write_text(text, encoding="utf-8")
    return cap, out


def test_pipeline_readers_on_the_recorded_capture(capture_outputs, tmp_path):
    result = pipeline_readers(*lay_out(capture_outputs, tmp_path))
    assert [k["kernel"] for k in result["kernels"]] == [KERNEL]
    assert result["kernels"][0]["verdict"] == "disable_compiled_region"
    assert result["kernels"][0]["sol_class"] == "at_floor"
    assert result["repro"] == ["python", "examples/pointwise_chain.py", "--steps", "20"]
    assert result["trials"]["winner"] == "eager_fallback"
    assert result["program"]["rule"] == "remedy_measured_faster_eager"


@pytest.mark.parametrize("name", ["profile/profile.json", "repro_command.json", "trials/trials.json",
                                  "autotune_summary.json", "report.json"])
@FUZZ
@given(data=st.data())
def test_fuzz_pipeline_readers(capture_outputs, name, data):
    path, value, doc = draw_mutation(data, load(capture_outputs[name]))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            pipeline_readers(*lay_out(capture_outputs, Path(tmp), (name, dumps(doc))))
        except InputError:
            pass


CAPTURE_JSON = sorted(str(p.relative_to(CHAIN)) for p in CHAIN.rglob("*.json"))


def investigate(cap: Path, out: Path, capsys) -> tuple[int, list[str], dict | None]:
    """investigate.py --from-capture CAP (no compile probe: the slowest step reads no artifact);
    (exit code, stderr lines, investigation.json or None)."""
    rc, err = run_script("investigate", ["--from-capture", cap, "--out", out, "--probe-arch", "none"], capsys)
    index = out / "investigation.json"
    return rc, err, load(index) if index.is_file() else None


def assert_steps_refuse_or_report(rc: int, err: list[str], index: dict | None, what) -> None:
    """exit 0; or 1 with each failed step a one-line refusal of its input (exit 2), never a crash;
    or 2 with one line."""
    assert rc in (0, 1, 2), (what, err)
    assert not any("unexpected" in line or "Traceback" in line for line in err), (what, err)
    if rc == 2:
        assert len(err) == 1, (what, err)
    if rc == 1:
        failed = [s for s in index["steps"] if s["status"] == "failed"]
        assert failed and all(s["error"].startswith("exit 2: ") for s in failed), (what, failed)


@pytest.mark.slow
def test_investigate_from_the_unmutated_capture(tmp_path, capsys):
    rc, err, index = investigate(CHAIN, tmp_path / "out", capsys)
    assert rc == 0, err
    assert [k["kernel"] for k in index["kernels"]] == [KERNEL]
    assert all(s["status"] in ("ok", "skipped") for s in index["steps"])
    assert index["repro"] == ["python", "examples/pointwise_chain.py", "--steps", "20"]


@pytest.mark.slow
@settings(FUZZ, max_examples=max(3, FUZZ.max_examples // 25))
@given(data=st.data())
def test_fuzz_investigate_from_capture(tmp_path_factory, capsys, data):
    name = data.draw(st.sampled_from(CAPTURE_JSON), label="file")
    path, value, doc = draw_mutation(data, load(CHAIN / name))
    root = tmp_path_factory.mktemp("capture")
    cap = root / "pointwise_chain"
    shutil.copytree(CHAIN, cap)
    (cap / name).write_text(dumps(doc))
    rc, err, index = investigate(cap, root / "out", capsys)
    assert_steps_refuse_or_report(rc, err, index, (name, path, value))


# --------------------------------------------------------------------------- defects the fuzzing found

def test_an_integer_past_a_floats_range_reads_as_missing_in_the_report(made, tmp_path, capsys, peaks_env):
    # was OverflowError: the copy peak divided the GB/s, a trial's median formatted with %.4f
    inputs = report_inputs(made)
    peaks, trials = load(inputs["--peaks"]), load(inputs["--trials"])
    peaks["devices"][0]["copy_gbps"] = 10**400
    trials["arms"][0]["median_ms"] = 10**400
    for name, doc in (("peaks", peaks), ("trials", trials)):
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    rc, err = make_report({**inputs, "--peaks": tmp_path / "peaks.json", "--trials": tmp_path / "trials.json"},
                          tmp_path, capsys)
    assert rc == 0, err
    report = load(tmp_path / "report.json")
    assert report["sections"]["trials"]["rows"][0]["median_ms"] is None
    assert "| baseline | ok | n/a |" in (tmp_path / "report.md").read_text()


def test_a_model_code_frame_whose_nodes_are_not_a_list_shows_none(made, tmp_path, capsys, peaks_env):
    # was TypeError: the template joined frames[].nodes = null
    inputs = report_inputs(made)
    manifest = load(inputs["--artifacts"])
    manifest["kernels"][0]["model_code"]["frames"][1]["nodes"] = None
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    rc, err = make_report({**inputs, "--artifacts": tmp_path / "manifest.json"}, tmp_path, capsys)
    assert rc == 0, err
    assert "| `f` | `return y * 0.5 + residual` |  |" in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize("ranked,best", [
    ([{"median_ms": 2.0}, float("nan")], 2.0),             # was AttributeError: a row that is no object
    (5, None),                                             # was TypeError: ranked not a list
    ([{"median_ms": 10**400}, {"median_ms": 3.0}], 3.0),   # was OverflowError in the chart
    ([{"median_ms": float("nan")}, {"median_ms": True}], None),
])
def test_best_sweep_ms_reads_only_finite_positive_times(ranked, best):
    from tko.measure.speed_of_light import best_sweep_ms

    assert best_sweep_ms({"ranking": {"ranked": ranked}}) == best


@pytest.mark.parametrize("results", [
    [{"ok": True, "best": True}],                          # was KeyError: no ms
    [{"ok": True, "best": True, "ms": "fast"}],            # was ValueError
    [{"ok": True, "best": True, "ms": None}],              # was TypeError
    [{"ok": True, "best": True, "ms": 10**400}],           # was OverflowError
    [7],                                                   # was AttributeError
])
def test_pick_ms_reads_a_result_without_a_time_as_untimed(results):
    from tko.measure.speed_of_light import pick_ms

    assert pick_ms({"status": "ok", "results": results}) == (None, None)
    assert pick_ms({"status": "ok", "results": results + [{"ok": True, "best": True, "ms": 0.5,
                                                           "timer": "triton.testing.do_bench"}]}) \
        == (0.5, "triton.testing.do_bench")


def test_speed_of_light_with_a_nan_in_the_sweep_ranking(offline_once, tmp_path, capsys):
    sweep = load(SOL_INPUTS["--sweep"])
    sweep["ranking"]["ranked"][1] = float("nan")
    (tmp_path / "sweep.json").write_text(json.dumps(sweep))
    rc, err = speed_of_light({**SOL_INPUTS, "--sweep": tmp_path / "sweep.json"}, tmp_path, tmp_path / "t.py", capsys)
    assert rc == 0, err
    assert load(tmp_path / "sol.json")["sweep_ms"] == pytest.approx(1.14584, abs=1e-5)


def test_a_pin_whose_kwargs_are_not_an_object_is_refused_at_load(tmp_path, pins_script_env, capsys):
    # was TypeError inside precompile ("pins not applied" at compile time), and the script ran
    # the program with the broken file
    from tko.patch import pins

    doc = pins_doc()
    doc["pins"][0]["config"]["kwargs"] = float("nan")
    path = tmp_path / "pins.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"field 'pins\[0\]\.config\.kwargs' must be an object"):
        pins.load_pins(path)
    rc, err, out = run_pins_script(path, pins_script_env, capsys)
    assert rc == 2 and out == ""
    assert err == [f"apply_config_pins.py: error: {path}: field 'pins[0].config.kwargs' must be an object"]


def test_apply_config_pins_refuses_a_pins_file_of_the_wrong_shape(tmp_path, pins_script_env, capsys):
    # was: "pins not applied: InputError: ..." on stderr, then the program ran without its pins
    doc = load(PINS_FILE)
    doc["pins"] = float("nan")
    path = tmp_path / "pins.json"
    path.write_text(json.dumps(doc))
    rc, err, out = run_pins_script(path, pins_script_env, capsys)
    assert (rc, out) == (2, "")
    assert err == [f"apply_config_pins.py: error: {path}: field 'pins' must be a list of objects"]


@pytest.mark.parametrize("text", ["[1, 2]", "[" * 5000 + "]" * 5000, "7"])
def test_pipeline_reads_a_json_that_is_no_object_as_missing(tmp_path, text):
    # was AttributeError ('list' object has no attribute 'get') and RecursionError
    from tko.chains import pipeline

    (tmp_path / "x.json").write_text(text)
    assert pipeline.load_doc(tmp_path / "x.json") is None


@pytest.mark.parametrize("rows,names", [
    ([{"name": float("nan"), "origin": "triton"}, {"name": "k1", "origin": "triton"}], ["k1"]),  # was TypeError
    ([{"origin": "triton"}, 3, {"name": "k1", "origin": "triton"}], ["k1"]),         # was KeyError, AttributeError
    ([{"name": n, "origin": "triton"} for n in ("../../x", "a/b", ".", "", "x" * 4056, "a\0b")], ["k0"]),
])
def test_top_kernels_keeps_only_names_that_can_be_a_folder(rows, names):
    # an unsafe name was a folder outside --out, an OSError (name too long) or a ValueError (NUL)
    from tko.chains import pipeline

    assert pipeline.top_kernels({"kernels": rows}, {"kernels": [{"kernel": "k0"}]}, 3) == names


@pytest.mark.parametrize("command", [float("nan"), "python x.py", ["python", 3], {"a": 1}])
def test_a_repro_command_that_is_no_list_of_strings_reads_as_not_recorded(tmp_path, command):
    # was TypeError in next_steps (" ".join of a float) and shlex.join of the report step
    from tko.chains import pipeline

    (tmp_path / "repro_command.json").write_text(json.dumps({"command": command}))
    assert pipeline.repro_command(tmp_path) is None


def test_a_report_json_with_wrong_typed_fields_reads_as_missing_in_the_index(tmp_path):
    # was AttributeError ('float' object has no attribute 'get') on facts.share = NaN
    from tko.chains import pipeline

    rep = {"decision": {"verdict": 3}, "facts": {"share": float("nan")}, "gaps": "x",
           "sections": {"model_code": {"frames": [{"line": 3}, 7]}, "speed_of_light": {"numbers": {
               "kernel_over_floor": 10**400}}}}
    entry = pipeline._kernel_entry("k", tmp_path / "kernels" / "k", tmp_path, rep, tmp_path / "k.py")
    assert (entry["verdict"], entry["share"], entry["where"], entry["sol_over_floor"], entry["gaps"]) \
        == (None, None, [], None, 0)


def test_the_unmutated_benchmark_and_v1_summary_read_as_the_others(made, tmp_path, capsys, peaks_env):
    inputs = {**report_inputs(made), "--benchmark": made["bench"], "--autotune-summary": made["summary_v1"]}
    rc, err = make_report(inputs, tmp_path, capsys)
    assert rc == 0, err
    doc = load(tmp_path / "report.json")
    case = load(made["bench"])["cases"][0]
    assert doc["sections"]["tuning_runs"]["best"] == case["ranking"]["best"]
    assert [r["name"] for r in doc["sections"]["tuning_runs"]["rows"]] == [r["name"] for r in case["results"]]
    launch = load(made["summary"])["kernels"][0]["launches"][0]
    assert doc["sections"]["inputs"]["grid"] == launch["grid"]
    assert doc["decision"]["rule"] == "remedy_measured_faster_eager"


def test_a_huge_integer_in_isa_mix_or_a_sol_cause_bound_reads_as_missing(made, tmp_path, capsys, peaks_env):
    # was OverflowError: the template formats mix.valu_per_byte with %.2f and causes[].at_most_x with %.2f
    inputs = report_inputs(made)
    isa, sol = load(inputs["--isa"]), load(inputs["--sol"])
    isa["kernels"][0]["mix"]["valu_per_byte"] = 10**400
    sol["classification"]["causes"] = [{"cause": "strided", "detail": "x", "remedy": "r", "at_most_x": 10**400}]
    for name, doc in (("isa", isa), ("sol", sol)):
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    rc, err = make_report({**inputs, "--isa": tmp_path / "isa.json", "--sol": tmp_path / "sol.json"}, tmp_path, capsys)
    assert rc == 0, err
    md = (tmp_path / "report.md").read_text()
    assert "- strided (x) -> r\n" in md and "vector ALU per byte" not in md


def test_a_rule_text_formats_an_integer_past_a_floats_range_as_digits():
    # was OverflowError from "{x:.2f}" with x = 10**400
    from tko.base import decide

    assert decide._format("{x:.2f} and {y}", {"x": 10**400, "y": 1}) == "1" + "0" * 400 + " and 1"


PINNED_SWEEP = RECORDED / "trials" / "softmax_long_rows_pinned" / "pinned_sweep.json"
SOFTMAX_KERNEL = (FIXTURES / "sol_h200" / "softmax_long_rows" / "autotune_kernels"
                  / "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0.py")


def test_pins_from_the_recorded_sweep_are_the_recorded_pins():
    from tko.patch import pins

    got = pins.pins_from_sweep(load(PINNED_SWEEP), SOFTMAX_KERNEL)["pins"][0]
    recorded = load(PINS_FILE)["pins"][0]
    assert {k: got[k] for k in ("kernel", "config")} == {k: recorded[k] for k in ("kernel", "config")}


@FUZZ
@given(data=st.data())
def test_fuzz_pins_from_sweep_gives_loadable_pins_or_one_input_error(data):
    # try_remedies.py --pins-from-sweep and investigate.py read a variant_sweep/1 into a pins file
    from tko.patch import pins

    path, value, doc = draw_mutation(data, load(PINNED_SWEEP))
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "sweep.json"
        bad.write_text(dumps(doc))
        try:
            entries = pins.pins_from_sweep(artifact.read_artifact(bad, "variant_sweep"), SOFTMAX_KERNEL)["pins"]
            # a config nested too deeply to encode is refused when written (write_artifact), as one error
            written = pins.write_pins(Path(tmp) / "pins.json", "t", entries)
        except InputError:
            return
        pins.load_pins(written)


def test_a_sweep_whose_best_config_is_not_an_object_gives_no_pins():
    # was AttributeError ('float' object has no attribute 'items') in split_config
    from tko.patch import pins

    sweep = load(PINNED_SWEEP)
    best = next(v for v in sweep["variants"] if v["name"] == sweep["best"]["name"])
    for config in (float("nan"), {"R0_BLOCK": [[[1024]]]}):  # the second: RecursionError writing it, when deep
        best["config"] = config
        with pytest.raises(InputError, match="best variant 'R0_BLOCK=1024' has a config that is not an object"):
            pins.pins_from_sweep(sweep, SOFTMAX_KERNEL)


def test_apply_config_pins_reads_the_pins_file_once(tmp_path, pins_script_env, capsys, monkeypatch):
    # the file was read twice (check, then install): a file nested close to the recursion limit
    # passed the check and failed the install, and the program ran without its pins
    from tko.patch import pins

    reads = []
    real = pins.load_pins
    monkeypatch.setattr(pins, "load_pins", lambda path: reads.append(path) or real(path))
    rc, err, out = run_pins_script(PINS_FILE, pins_script_env, capsys)
    assert rc == 0 and reads == [str(PINS_FILE)], err


# --------------------------------------------------------------------------- read_artifact itself

@pytest.mark.parametrize("name", sorted(artifact.FIELD_TYPES))
@FUZZ
@given(data=st.data())
def test_fuzz_read_artifact_checks_every_schema(name, data):
    # the FIELD_TYPES checks of any artifact: its fields (and theirs) any value, at one read
    keys = sorted(artifact.FIELD_TYPES[name])
    fields = data.draw(st.dictionaries(st.sampled_from(keys), HOSTILE.filter(lambda v: v is not DELETE)
                                       | st.lists(st.dictionaries(st.sampled_from(keys + ["name", "total_us"]),
                                                                  HOSTILE.filter(lambda v: v is not DELETE),
                                                                  max_size=3), max_size=2), max_size=4))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.json"
        path.write_text(dumps({"schema": f"{name}/1", **fields}))
        try:
            assert artifact.read_artifact(path, name)["schema"] == f"{name}/1"
        except InputError:
            pass
