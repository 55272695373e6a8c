"""tests/gpu/recorder.py, the one recorder of the real GPU examples: its ``keep`` step (which
runs anywhere) gives back the committed recordings from what a run leaves, byte for byte, and
drops what they drop; its logged runs keep the child's output in order."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

sys.path.insert(0, str(ROOT / "tests" / "gpu"))
import recorder  # noqa: E402

RECORDED = ROOT / "examples" / "recorded_h200"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _as_recorded(committed: Path, dst: Path) -> None:
    """``committed`` as the GPU run left it: traces not yet compressed."""
    shutil.copytree(committed, dst)
    for gz in dst.rglob("*trace.json.gz"):
        gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()


def _junk(folder: Path, names: list[str]) -> None:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("dropped")


def test_keep_investigate_gives_back_the_committed_example_and_drops_the_rest(tmp_path):
    example = "pointwise_chain"
    committed = RECORDED / example
    work = tmp_path / "work"
    _as_recorded(committed, work / example / "capture")
    shutil.rmtree(work / example / "capture" / "runs")
    for run_json in (committed / "runs").glob("*.json"):  # where investigate.py writes them
        (work / example / "kernels" / run_json.stem).mkdir(parents=True)
        shutil.copy(run_json, work / example / "kernels" / run_json.stem / "run.json")
    _junk(work / example / "capture", ["inductor_cache/fxgraph/x/y", "inductor_cache/aotautograd/z",
                                       "inductor_cache/ab/launcher.so", "autotune_kernels/k.inputs/arg0.pt",
                                       "inductor_cache/triton/K/k.llir", "inductor_cache/triton/K/k.cubin"])
    out = tmp_path / "kept"
    assert recorder.main(["keep", "investigate", str(work), str(out)]) == 0
    assert _files(out / example) == _files(committed)
    again = tmp_path / "again"
    recorder.keep("investigate", [work], again, frozenset())
    assert _files(again) == _files(out)  # the same bytes on every run (gzip mtime 0)


def test_keep_investigate_slim_keeps_the_profile_log_and_investigated_kernels(tmp_path):
    work = tmp_path / "work"
    cap = work / "ex" / "capture"
    _junk(cap, ["profile/profile.json", "profile/profile.trace.json", "autotune_kernels/autotune.log",
                "autotune_kernels/hot.py", "autotune_kernels/cold.py", "inductor_cache/triton/K/hot.ptx",
                "inductor_cache/triton/K/__grp__hot.json", "inductor_cache/triton/J/cold.ptx",
                "inductor_cache/ab/cabc.py", "log_profile.txt", "triton_env.json"])
    _junk(work / "ex" / "kernels" / "hot", ["run.json"])
    recorder.keep("investigate", [work], tmp_path / "slim", frozenset({"ex"}))
    assert sorted(_files(tmp_path / "slim" / "ex")) == [
        "autotune_kernels/autotune.log", "autotune_kernels/hot.py", "inductor_cache/triton/K/__grp__hot.json",
        "inductor_cache/triton/K/hot.ptx", "profile/profile.json", "runs/hot.json", "triton_env.json"]


def test_keep_inductor_gives_back_the_committed_fixtures_from_the_archive(tmp_path):
    raw = tmp_path / "raw" / "inductor_h200"
    _as_recorded(FIXTURES / "inductor_h200", raw)
    _junk(raw, ["pointwise_chain/inductor_cache/tmp1/ab/k.llir", "row_reduction/x/launcher.so",
                "row_reduction/inductor_cache/lock.lock", "tiny_launches/trace.json",
                "tiny_launches/inductor_cache/tmp1/triton/K/k.ptx", "user_autotune_kernel/trace.json",
                "pointwise_chain/torch_compile_debug/run/model.debug/fx.py"])
    out = tmp_path / "out"
    recorder.pack(raw, out / recorder.ARCHIVE["inductor"], "inductor_h200")
    assert recorder.main(["keep", "inductor", str(out), str(tmp_path / "kept")]) == 0
    assert _files(tmp_path / "kept") == _files(FIXTURES / "inductor_h200")


def test_keep_capture_keeps_the_chosen_files_and_the_first_tiny_kernels(tmp_path):
    committed = FIXTURES / "capture_h200"
    suite = tmp_path / "suite_work"
    for example in recorder.STANDALONE:
        shutil.copytree(committed / example, suite / example)
        _junk(suite / example, ["triton_other_9.py", "k.inputs/arg0.pt", "plain.json"])
    log = suite / "tiny_launches" / "autotune.log"
    kept_lines = log.read_text().splitlines()
    extra = [json.dumps({**json.loads(kept_lines[0]), "kernel": f"triton_more_{i}"}) for i in range(3)]
    log.write_text("\n".join(kept_lines + extra) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    with tarfile.open(out / "capture.tar.gz", "w:gz") as tar:
        tar.add(suite, arcname=".")
    (out / "results.json").write_text("{}")
    dst = tmp_path / "kept"
    assert recorder.main(["keep", "capture", str(out), str(dst)]) == 0
    for example in recorder.STANDALONE:
        assert _files(dst / example) == _files(committed / example), example
    assert (dst / "results_run1.json").read_text() == "{}"


def test_run_logged_keeps_output_in_order_and_kills_a_hung_child(tmp_path):
    log = tmp_path / "log.txt"
    code = "import sys; print('one', flush=True); print('two', file=sys.stderr, flush=True); print('three')"
    assert recorder.run_logged([sys.executable, "-c", code], {}, log, 30, header=False) == 0
    assert log.read_text().split() == ["one", "two", "three"]
    rc = recorder.run_logged([sys.executable, "-c", "import time; time.sleep(30)"], {}, log, 1)
    assert rc == 124 and log.read_text().rstrip().endswith("s]") and "[rc=124" in log.read_text()


def test_the_suite_and_the_recorder_run_the_same_examples():
    assert all((ROOT / "examples" / f"{name}.py").is_file() for name in recorder.EXAMPLES)
    assert set(recorder.STANDALONE) == set(recorder.EXAMPLES)
    text = (ROOT / "tests" / "gpu" / "drivers" / "run_gpu_suite.py").read_text()
    assert "from recorder import EXAMPLES, run_logged" in text and "EXAMPLES = " not in text


def test_keep_with_unknown_examples_or_missing_paths_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        recorder.main(["run", "investigate", "--work", str(tmp_path), "--out", str(tmp_path),
                       "--examples", "nope"])
    assert exc.value.code == 2 and "unknown examples: nope" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        recorder.main(["keep", "inductor", str(tmp_path)])
    assert exc.value.code == 2
