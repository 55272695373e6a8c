"""tko.remedies.rowkernel_sweep and scripts/rowkernel_sweep.py on the CPU.

The bundled kernels only run on a CPU in the Triton interpreter, which Triton takes at import, so
the end-to-end sweep (bundled vs Inductor's default mode, the C++ backend here) runs the front in a
child started with ``TRITON_INTERPRET=1``, as tests/test_rowkernels.py does; the rest (refusals,
failures, the comparison, the renderers, the flags) runs in this process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from tko.remedies import rowkernel_sweep as rs
from tko.remedies import row_plan, row_refs, rowkernels as rk

FRONT = Path(__file__).resolve().parents[1] / "scripts" / "rowkernel_sweep.py"
SVG = "{http://www.w3.org/2000/svg}"
LIMIT = row_plan.ROW_LIMITS["interpreter"].max_row_elements          # 16384: 20000 runs chunked


def _front(*args, cwd, env=None, timeout=120):
    env = dict(os.environ if env is None else env)
    env.pop("TKO_DEBUG", None)
    return subprocess.run([sys.executable, str(FRONT), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _interpreted(out: Path, *flags, env: dict | None = None) -> tuple:
    """The front in the interpreter on 3 rows, bundled and Inductor default, writing all three outputs."""
    base = {k: v for k, v in os.environ.items() if k != rk.BACKWARD_ENV}
    env = dict(base, TRITON_INTERPRET="1", **(env or {}))
    res = _front(*flags, "--rows", 3, "--modes", "bundled,inductor_default", "--peak-gbps", 100, "--warmup-ms", 1,
                 "--rep-ms", 5, "--json-out", out / "s.json", "--markdown-out", out / "s.md",
                 "--svg-out", out / "s.svg", cwd=out, env=env, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out, res


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """The front in the interpreter: softmax and rms_norm, fp16 and bf16, 3 rows of 100, 1000 and
    20000 (above the interpreter's limit), bundled and Inductor default."""
    assert 1000 <= LIMIT < 20000
    return _interpreted(tmp_path_factory.mktemp("sweep"), "--ops", "softmax,rms_norm", "--dtypes", "fp16,bf16",
                        "--cols", "100,1000,20000")


def test_one_short_row_sweeps_end_to_end_in_the_interpreter(tmp_path):
    """The fast tier's run of the front: one op, one dtype, one short row, both modes, all three outputs."""
    out, res = _interpreted(tmp_path, "--ops", "softmax", "--dtypes", "fp16", "--cols", "100")
    rows = json.loads((out / "s.json").read_text())["rows"]
    assert sorted((r["mode"], r["status"], r["correct"], r["n_cols"]) for r in rows) == [
        ("bundled", "ok", True, 100), ("inductor_default", "ok", True, 100)]
    assert ET.parse(out / "s.svg").getroot().tag == f"{SVG}svg"
    assert res.stdout.strip().endswith((out / "s.md").read_text().strip().splitlines()[-1])


@pytest.mark.slow
def test_interpreted_sweep_rows_are_correct_and_refusals_say_why(interpreted):
    out, _ = interpreted
    doc = json.loads((out / "s.json").read_text())
    assert doc["schema"] == "rowkernel_sweep/1" and doc["peak"]["copy_gbps"] == 100
    assert doc["device"]["interpreter"] is True and doc["timer"].startswith("cpu wall clock")
    rows = doc["rows"]
    assert len(rows) == 2 * 2 * 3 * 2
    assert {(r["op"], r["dtype"], r["n_cols"], r["mode"]) for r in rows} == {
        (o, d, n, m) for o in ("softmax", "rms_norm") for d in ("fp16", "bf16") for n in (100, 1000, 20000)
        for m in ("bundled", "inductor_default")}
    for r in rows:
        assert set(rs.ROW_KEYS) <= set(r) and r["n_rows"] == 3
        if r["mode"] == "bundled":   # over the one-pass limit: the chunked form, timed and checked
            chunked = r["n_cols"] > LIMIT
            assert (r["plan"]["form"], r["plan"]["chunk"]) == (("chunked", 4096) if chunked else ("one_pass", None))
        assert r["status"] == "ok" and r["correct"] is True and r["reason"] is None, r
        assert r["ms"] > 0 and r["max_abs_err"] is not None
        assert r["gbps"] == pytest.approx(r["bytes"] / (r["ms"] * 1e-3) / 1e9)
        assert r["pct_of_copy"] == pytest.approx(r["gbps"])          # of a 100 GB/s peak
        default = next(d for d in rows if d["mode"] == "inductor_default" and
                       (d["op"], d["dtype"], d["n_cols"]) == (r["op"], r["dtype"], r["n_cols"]))
        assert r["x_vs_inductor_default"] == pytest.approx(default["ms"] / r["ms"])
    by = {(r["op"], r["dtype"], r["n_cols"], r["mode"]): r for r in rows}
    assert by["softmax", "fp16", 100, "bundled"]["bytes"] == 2 * 3 * 100 * 2
    assert by["rms_norm", "bf16", 1000, "inductor_default"]["bytes"] == (2 * 3 + 1) * 1000 * 2
    assert by["softmax", "fp16", 1000, "bundled"]["plan"]["block"] == 1024
    assert by["softmax", "fp16", 20000, "bundled"]["plan"]["block"] == 32768
    chunked = [c for c in doc["comparison"] if c["n_cols"] == 20000]
    assert len(doc["comparison"]) == 12 and len(chunked) == 4
    assert all(c["bundled_status"] == "ok" and c["bundled_speedup"] is not None
               and c["best_inductor_mode"] == "inductor_default" for c in chunked)


@pytest.mark.slow
def test_default_direction_is_forward_only(interpreted):
    out, res = interpreted
    doc = json.loads((out / "s.json").read_text())
    assert {r["direction"] for r in doc["rows"]} == {"fwd"}
    assert {c["direction"] for c in doc["comparison"]} == {"fwd"}
    assert doc["settings"]["directions"] == ["fwd"] and "bytes_bwd" not in doc["settings"]
    assert all("grad_errors" not in r for r in doc["rows"])
    text = (out / "s.md").read_text()
    assert "backward" not in text and text.count("## Runs") == 1
    assert "data-direction" not in (out / "s.svg").read_text()
    assert " bwd:" not in res.stderr


@pytest.fixture(scope="module")
def interpreted_bwd(tmp_path_factory):
    """The front in the interpreter, both directions: softmax and layer_norm (dx, dweight,
    dbias), fp16, 3 rows of 100 and 20000 (chunked forward, refused backward), bundled and Inductor default; the
    environment asks for the torch backward, which the bundled mode must override."""
    return _interpreted(tmp_path_factory.mktemp("sweep_bwd"), "--ops", "softmax,layer_norm", "--dtypes", "fp16",
                        "--cols", "100,20000", "--direction", "fwd,bwd", env={rk.BACKWARD_ENV: "torch"})


@pytest.mark.slow
def test_interpreted_backward_rows_time_the_kernels_and_check_every_gradient(interpreted_bwd):
    out, res = interpreted_bwd
    doc = json.loads((out / "s.json").read_text())
    assert doc["settings"]["directions"] == ["fwd", "bwd"] and doc["settings"]["bytes_bwd"] == rs.BYTES_BWD
    rows = {(r["op"], r["n_cols"], r["mode"], r["direction"]): r for r in doc["rows"]}
    assert len(rows) == len(doc["rows"]) == 2 * 2 * 2 * 2
    for op, grads in (("softmax", ["dx"]), ("layer_norm", ["dx", "dweight", "dbias"])):
        refused = rows[op, 20000, "bundled", "bwd"]
        assert refused["status"] == "refused" and "exceeds" in refused["reason"] and refused["ms"] is None
        for mode in ("bundled", "inductor_default"):
            r = rows[op, 100, mode, "bwd"]
            assert r["status"] == "ok" and r["correct"] is True and r["ms"] > 0, r
            assert list(r["grad_errors"]) == grads and r["max_abs_err"] == max(r["grad_errors"].values())
            assert r["pct_of_copy"] == pytest.approx(r["bytes"] / (r["ms"] * 1e-3) / 1e9)
        assert rows[op, 20000, "inductor_default", "bwd"]["correct"] is True
        # the kernel, though the default and the environment say torch
        assert rk.BACKWARD == "torch"
        assert rows[op, 100, "bundled", "bwd"]["plan"]["backward"] == [f"{op}_bwd: kernel"]
    # y, dy, dx; layer_norm adds weight read, mean + rstd (fp32 per row), dweight and dbias
    assert rows["softmax", 100, "bundled", "bwd"]["bytes"] == 3 * 3 * 100 * 2
    assert rows["layer_norm", 100, "bundled", "bwd"]["bytes"] == 3 * 3 * 100 * 2 + 2 * 3 * 4 + 4 * 100 * 2
    assert rows["layer_norm", 100, "bundled", "fwd"]["bytes"] == (2 * 3 + 2) * 100 * 2
    assert sorted((c["op"], c["n_cols"], c["direction"]) for c in doc["comparison"]) == sorted(
        (o, n, d) for o in ("softmax", "layer_norm") for n in (100, 20000) for d in ("fwd", "bwd"))
    assert "softmax fp16 100 bundled bwd: ok" in res.stderr


@pytest.mark.slow
def test_interpreted_backward_has_its_own_tables_and_dashed_series(interpreted_bwd):
    out, res = interpreted_bwd
    text = (out / "s.md").read_text()
    head, runs = text.split("## Runs\n", 1)
    assert "Backward times the backward call alone" in head and rs.BYTES_BWD in head
    assert "## Bundled vs the best Inductor mode, backward" in head
    fwd, bwd = runs.split("## Runs, backward\n", 1)
    for table in (fwd, bwd):
        lines = table.strip().splitlines()
        assert lines[0] == rs.RUN_HEADER and len(lines) == 2 + 8
    assert res.stdout.rstrip().splitlines()[-1] == bwd.strip().splitlines()[-1]
    root = ET.parse(out / "s.svg").getroot()
    for p in root.findall(f"{SVG}g[@class='panel']"):
        series = p.findall(f"{SVG}path[@class='series']")
        dashed = [s for s in series if s.get("data-direction") == "bwd"]
        assert len(series) == 4 and len(dashed) == 2 and all(s.get("stroke-dasharray") for s in dashed)
    assert root.find(f"{SVG}g[@class='legend'][@data-direction='bwd']") is not None


def test_backward_with_a_wrong_gradient_is_flagged_and_a_refused_plan_is_not_timed(monkeypatch):
    if row_plan.interpreting():
        pytest.skip("this process imported Triton in the interpreter")
    real = rs.torch_fn

    def wrong(op):
        f = real(op)
        if op == "softmax":      # the same forward; dx gets an extra 0.5 * dy
            return lambda x: f(x) + 0.5 * (x - x.detach())
        return lambda x, w: f(x, w) + (w - w.detach())    # rms_norm: dweight gets sum(dy) more

    run = dict(elements=256, rows=None, peak_gbps=None, warmup_ms=0.1, rep_ms=0.5, on_gpu=False,
               direction="bwd")
    good = rs.run_case("rms_norm", "fp16", 64, ["bundled", "eager"], **run)
    assert good[0]["status"] == "refused" and "TRITON_INTERPRET" in good[0]["reason"] and good[0]["ms"] is None
    assert good[1]["status"] == "ok" and good[1]["correct"] is True and good[1]["direction"] == "bwd"
    assert good[1]["bytes"] == 3 * 4 * 64 * 2 + 4 * 4 + 2 * 64 * 2
    monkeypatch.setattr(rs, "torch_fn", wrong)
    (sm,) = rs.run_case("softmax", "fp16", 64, ["eager"], **run)
    assert sm["status"] == "ok" and sm["correct"] is False and sm["grad_errors"]["dx"] > 0.1
    (rms,) = rs.run_case("rms_norm", "fp16", 64, ["eager"], **run)
    assert rms["correct"] is False and rms["grad_errors"]["dx"] < 1e-3 and rms["grad_errors"]["dweight"] > 0.1
    (fwd,) = rs.run_case("softmax", "fp16", 64, ["eager"], **dict(run, direction="fwd"))
    assert fwd["correct"] is True and fwd["direction"] == "fwd"     # the forward is unchanged


def test_budget_skips_cases_in_either_direction(monkeypatch):
    real = rs.run_case

    def slow(*args, **kwargs):
        out = real(*args, **kwargs)
        time.sleep(0.05)
        return out

    monkeypatch.setattr(rs, "run_case", slow)
    payload = rs.sweep(["softmax"], ["fp32"], [8, 16], ["eager"], rows=2, warmup_ms=0.1, rep_ms=0.5,
                       budget_s=0.01, directions=["fwd", "bwd"])
    got = [(r["n_cols"], r["direction"], r["status"]) for r in payload["rows"]]
    assert got == [(8, "fwd", "ok"), (8, "bwd", "skipped"), (16, "fwd", "skipped"), (16, "bwd", "skipped")]
    assert all("budget" in r["reason"] for r in payload["rows"][1:])
    verdicts = {(c["n_cols"], c["direction"]): c["verdict"] for c in payload["comparison"]}
    assert verdicts == {(8, "fwd"): "no bundled row", (8, "bwd"): "not run: time budget of 0.01 s spent",
                        (16, "fwd"): "not run: time budget of 0.01 s spent",
                        (16, "bwd"): "not run: time budget of 0.01 s spent"}
    with pytest.raises(ValueError, match="unknown direction 'up'"):
        rs.sweep(["softmax"], ["fp32"], [8], ["eager"], rows=2, directions=["up"])


@pytest.mark.slow
def test_interpreted_svg_has_a_line_per_mode_in_each_panel(interpreted):
    out, _ = interpreted
    root = ET.parse(out / "s.svg").getroot()
    panels = root.findall(f"{SVG}g[@class='panel']")
    assert sorted((p.get("data-op"), p.get("data-dtype")) for p in panels) == [
        ("rms_norm", "bf16"), ("rms_norm", "fp16"), ("softmax", "bf16"), ("softmax", "fp16")]
    for p in panels:
        series = {s.get("data-mode"): s.get("d") for s in p.findall(f"{SVG}path[@class='series']")}
        assert set(series) == {"bundled", "inductor_default"}
        # both have a point at each of the three lengths (20000: the chunked form)
        assert len(re.findall(r"[ML]", series["bundled"])) == 3
        assert len(re.findall(r"[ML]", series["inductor_default"])) == 3
        assert len(p.findall(f"{SVG}circle")) == 6


@pytest.mark.slow
def test_interpreted_markdown_has_one_table_line_per_row_and_is_printed_last(interpreted):
    out, res = interpreted
    text = (out / "s.md").read_text()
    runs = text.split("## Runs", 1)[1].strip().splitlines()
    assert runs[0] == rs.RUN_HEADER and set(runs[1]) <= set("|-")
    body = runs[2:]
    assert len(body) == 24 and all(line.startswith("| softmax |") or line.startswith("| rms_norm |")
                                   for line in body)
    assert not any("| refused |" in line for line in body)
    assert all(line.count(" | ") == rs.RUN_HEADER.count(" | ") for line in body)
    assert res.stdout.rstrip().splitlines()[-1] == body[-1]


def test_cpu_tensor_refused_without_the_interpreter_and_eager_checked():
    if row_plan.interpreting():
        pytest.skip("this process imported Triton in the interpreter")
    rows = rs.run_case("layer_norm", "bf16", 50, ["bundled", "eager"], elements=200, rows=None,
                       peak_gbps=None, warmup_ms=0.1, rep_ms=0.5, on_gpu=False)
    bundled, eager = rows
    assert (bundled["status"], bundled["n_rows"]) == ("refused", 4) and "TRITON_INTERPRET" in bundled["reason"]
    assert eager["status"] == "ok" and eager["correct"] is True and eager["pct_of_copy"] is None
    assert eager["bytes"] == (2 * 4 + 2) * 50 * 2 and eager["gbps"] > 0


def test_a_failing_or_wrong_mode_is_recorded_and_the_sweep_goes_on(monkeypatch):
    real = rs.torch_fn

    def fake(op):
        if op == "softmax":
            def boom(x):
                raise RuntimeError("boom\nsecond line")
            return boom
        if op == "log_softmax":
            return lambda x: torch.zeros_like(x)
        if op == "layer_norm":
            def compile_error(x, w, b):
                raise ValueError("backend='inductor' raised:\n\nLoweringException: no lowering\nmore")
            return compile_error
        return real(op)

    monkeypatch.setattr(rs, "torch_fn", fake)
    payload = rs.sweep(["softmax", "log_softmax", "layer_norm", "rms_norm"], ["fp16"], [8, 16], ["eager"],
                       rows=2, warmup_ms=0.1, rep_ms=0.5)
    status = {(r["op"], r["n_cols"]): r for r in payload["rows"]}
    assert len(status) == 8
    assert status["layer_norm", 8]["reason"] == \
        "ValueError: backend='inductor' raised: LoweringException: no lowering"
    assert all(status["softmax", n]["status"] == "failed" and status["softmax", n]["reason"] == "RuntimeError: boom"
               for n in (8, 16))
    wrong = status["log_softmax", 8]
    assert wrong["status"] == "ok" and wrong["correct"] is False and wrong["max_abs_err"] > 0.5
    assert status["rms_norm", 16]["correct"] is True


def _row(mode, ms, status="ok", correct=True, n=1024, reason=None):
    return dict({k: None for k in rs.ROW_KEYS}, op="softmax", dtype="fp16", n_cols=n, n_rows=8, mode=mode,
                status=status, ms=ms, correct=correct, reason=reason)


def test_compare_picks_the_fastest_correct_inductor_mode_and_needs_a_2_percent_win():
    rows = [_row("bundled", 1.00, n=1), _row("inductor_default", 1.5, n=1), _row("max_autotune", 1.01, n=1),
            _row("bundled", 1.00, n=2), _row("inductor_default", 1.05, n=2),
            _row("max_autotune", 0.5, correct=False, n=2), _row("coordinate_descent", 1.10, n=2),
            _row("bundled", None, "refused", None, n=3, reason="too long"), _row("inductor_default", 2.0, n=3),
            _row("bundled", 1.0, n=4), _row("eager", 0.5, n=4),
            _row("bundled", 2.0, n=5), _row("coordinate_descent", 1.0, n=5)]
    got = {c["n_cols"]: c for c in rs.compare({"rows": rows})}
    assert got[1]["best_inductor_mode"] == "max_autotune" and got[1]["bundled_beats_inductor"] is False
    assert got[1]["verdict"].startswith("within 2 %")
    assert got[2]["best_inductor_mode"] == "inductor_default"          # the wrong 0.5 ms does not count
    assert got[2]["bundled_beats_inductor"] is True and got[2]["bundled_speedup"] == pytest.approx(1.05)
    assert got[3]["bundled_beats_inductor"] is False and got[3]["verdict"] == "bundled refused: too long"
    assert got[4]["bundled_beats_inductor"] is None and got[4]["verdict"] == "no Inductor mode run"
    assert got[5]["bundled_beats_inductor"] is False and got[5]["verdict"].startswith("coordinate_descent 2.00x")


def test_a_case_skipped_in_every_mode_says_not_run_not_that_inductor_failed():
    why = "time budget of 140 s spent"
    modes = ["bundled", *rs.INDUCTOR_MODES]
    rows = [*(_row(m, None, "skipped", None, n=4096, reason=why) for m in modes),
            _row("bundled", 1.0, n=1024), *(_row(m, None, "failed", None, n=1024, reason="boom") for m in modes[1:])]
    got = {c["n_cols"]: c for c in rs.compare({"rows": rows})}
    assert got[4096]["verdict"] == f"not run: {why}"
    assert got[4096]["bundled_beats_inductor"] is None and got[4096]["best_inductor_mode"] is None
    assert got[1024]["verdict"] == "no Inductor mode timed correctly"      # run, and failed
    text = rs.markdown({"device": {"name": "H200"}, "peak": {"copy_gbps": None}, "timer": "t",
                        "settings": {"bytes": rs.BYTES_FWD}, "rows": rows})
    assert f"| not run: {why} |" in text


def test_check_tolerates_one_rounding_not_more():
    x = rs.make_inputs("softmax", "fp16", 4, 64, "cpu")[0]
    ref = row_refs.softmax_ref(x)
    nudged = (ref.view(torch.int16) + 1).view(torch.float16)      # one ulp up (softmax is positive)
    assert bool((nudged != ref).all())
    assert rs.check(nudged, ref, "fp16")[0] is True
    ok, err = rs.check(ref + 0.01, ref, "fp16")
    assert ok is False and err == pytest.approx(0.01, rel=0.1)
    assert rs.check(ref[:2], ref, "fp16") == (False, None)


def test_svg_without_a_peak_plots_gbps_and_escapes_text():
    rows = [dict(_row("bundled", 1.0, n=n), gbps=10.0 * n, pct_of_copy=None) for n in (1024, 4096)]
    rows[0]["op"] = rows[1]["op"] = "soft<max>&"
    doc = rs.svg({"rows": rows, "peak": {"copy_gbps": None}})
    root = ET.fromstring(doc)
    assert "GB/s" in "".join(root.itertext()) and "soft<max>&" in "".join(root.itertext())
    (path,) = root.iter(f"{SVG}path")
    ys = [float(v) for v in re.findall(r",([0-9.]+)", path.get("d"))]
    assert ys[1] < ys[0]                                          # more GB/s is drawn higher


@pytest.mark.parametrize("args, says", [
    (["--modes", "bundled,warp"], "'warp'"),
    (["--direction", "fwd,sideways"], "--direction: unknown 'sideways'"),
    (["--direction", ","], "--direction: empty list"),
    (["--no-such-flag"], "unrecognized arguments"),
    (["--cols", "1024,abc"], "--cols"),
    (["--rows", "0"], "--rows must be positive"),
    (["--peaks", "missing.json"], "no such file"),
    (["--peak-gbps", "1", "--peaks", "x.json"], "not allowed with"),
])
def test_front_bad_input_is_one_line_exit_2(args, says, tmp_path):
    res = _front(*args, cwd=tmp_path)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(lines) <= 2 and says in lines[-1], res.stderr        # argparse may add its usage line
    assert lines[-1].startswith("rowkernel_sweep.py: error:")
    assert not list(tmp_path.iterdir())
