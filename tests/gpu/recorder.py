"""One recorder of the real GPU examples: the example repros (``examples/<name>.py``) run on a
GPU, then the part of each recording its readers need kept in the repository.

Three recordings of the same examples, for three kinds of reader:

- ``inductor`` -> ``tests/fixtures/inductor_h200``: TorchInductor's own output under
  ``TORCH_LOGS="+inductor,output_code"`` (caches off, the kernel_autotune metric table,
  ``TRITON_PRINT_AUTOTUNING``, a torch.profiler trace of the whole run) and the copy peak: the
  parsers' fixtures.
- ``capture`` -> ``tests/fixtures/capture_h200``: the capture patch's log, standalone files and
  their standalone runs, made and checked by ``tests/gpu/drivers/run_gpu_suite.py``.
- ``investigate`` -> ``examples/recorded_h200``: ``investigate.py`` online per example, kept for
  ``investigate.py --from-capture``.

On the GPU machine (``run`` prints a table last and leaves one archive under ``--out``)::

    python tests/gpu/recorder.py run inductor --work /tmp/rec --out "$OUT" [--examples a,b]
    python tests/gpu/recorder.py run capture --work /tmp/rec --out "$OUT" [--budget-s 480]
    python tests/gpu/recorder.py run investigate --work /tmp/rec --out "$OUT" [--budget-s S]

Anywhere, from the ``--out`` folder that ``run`` left::

    python tests/gpu/recorder.py keep inductor OUT tests/fixtures/inductor_h200
    python tests/gpu/recorder.py keep capture OUT [OUT2 ...] tests/fixtures/capture_h200

``run investigate`` keeps as it goes (``--slim a,b`` as below), since its work folder holds
hundreds of MB that would not come back from a GPU machine: its archive holds
``recorded_h200/<example>/`` ready to copy over ``examples/recorded_h200``.  From a work folder
at hand, ``keep investigate WORK DST [--slim tiny_launches]`` does the same.

``keep`` only drops files (and gzip-compresses profiler traces, which every parser here reads
either way); it edits none.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts"))

from tko.base import subproc  # noqa: E402

EXAMPLES = ("pointwise_chain", "row_reduction", "scatter_index_add", "tiny_launches",
            "mlp_train_step", "dynamic_shapes", "user_autotune_kernel")
ARCHIVE = {"inductor": "inductor_fixtures.tar.gz", "capture": "capture.tar.gz",
           "investigate": "recorded.tar.gz"}


# --------------------------------------------------------------------------- shared pieces

def run_logged(cmd: list, env: dict, log: Path, timeout: float, cwd: Path = ROOT,
               header: bool = True) -> int:
    """Run ``cmd`` (its process group killed past ``timeout``) with stdout and stderr appended to
    ``log`` as they come, between the command line and its return code unless ``header`` is
    False. Returns the return code, 124 on timeout."""
    cmd = [str(c) for c in cmd]
    if header:
        with open(log, "a") as fh:
            fh.write(f"$ {' '.join(cmd)}\n")
    done = subproc.run(cmd, timeout=timeout, env=env, cwd=str(cwd), output=log)
    rc = 124 if done.timed_out else done.returncode
    if header:
        with open(log, "a") as fh:
            fh.write(f"\n[rc={rc} {done.seconds:.1f}s]\n")
    return rc


def copy_kept(src: Path, dst: Path, keep: Callable[[Path], bool]) -> list[Path]:
    """Copy every file under ``src`` whose relative path ``keep`` accepts to the same place under
    ``dst``; a profiler trace (``*trace.json``) becomes ``.gz`` (mtime 0: the same bytes on every
    run). Returns the relative paths written."""
    written = []
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if not path.is_file() or path.is_symlink() or not keep(rel):
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.name.endswith("trace.json"):
            target = target.with_name(target.name + ".gz")
            with open(path, "rb") as fi, gzip.GzipFile(str(target), "wb", mtime=0) as fo:
                shutil.copyfileobj(fi, fo)
        else:
            shutil.copy2(path, target)
        written.append(target.relative_to(dst))
    return written


def pack(folder: Path, archive: Path, arcname: str, skip_suffixes: Iterable[str] = (".pt",)) -> None:
    """``folder`` as ``archive`` (tar.gz), without saved tensors."""
    skip = set(skip_suffixes)
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=arcname, filter=lambda info: None if Path(info.name).suffix in skip else info)


def unpacked(src: Path, archive_name: str, tmp: str) -> Path:
    """The recording at ``src``: a folder as it is, or the archive ``run`` left in it (or ``src``
    itself when it is that archive) extracted under ``tmp``."""
    tar_path = src if src.is_file() else src / archive_name
    if not tar_path.is_file():
        return src
    with tarfile.open(tar_path) as tar:
        tar.extractall(tmp, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(tmp)
    return Path(tmp)


def versions() -> dict:
    """torch, triton and the GPU of this run, for the recording's summary."""
    import torch
    import triton

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"torch": torch.__version__, "triton": triton.__version__, "device": gpu,
            "date": time.strftime("%Y-%m-%d", time.gmtime())}


# --------------------------------------------------------------------------- inductor

# Runs an example as __main__ under torch.profiler; the trace covers warm-up and steady state.
PROFILE_BOOTSTRAP = r"""
import os, runpy, sys, torch
trace, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=acts, record_shapes=True, with_stack=False) as prof:
    runpy.run_path(script, run_name="__main__")
prof.export_chrome_trace(trace)
"""


def inductor_env(name: str, exdir: Path) -> dict:
    """The logging and caches a user of this skill would have, caches off so every kernel tunes."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(exdir / "inductor_cache"),
               TORCH_LOGS="+inductor,output_code", TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
               TORCHINDUCTOR_ENABLED_METRIC_TABLES="kernel_autotune", TRITON_PRINT_AUTOTUNING="1",
               PYTHONUNBUFFERED="1")
    env.pop("TRITON_CACHE_DIR", None)
    if name == "pointwise_chain":
        env["TORCH_COMPILE_DEBUG"] = "1"
    if name == "user_autotune_kernel":
        env["TRITON_CACHE_DIR"] = str(exdir / "triton_cache")
    return env


def run_inductor(work: Path, out: Path, examples: list[str], budget_s: float, steps: int = 10) -> int:
    start, results = time.time(), []
    for name in examples:
        if time.time() - start > budget_s:
            results.append({"example": name, "skipped": "time budget"})
            continue
        exdir = work / name
        exdir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-c", PROFILE_BOOTSTRAP, exdir / "trace.json", ROOT / "examples" / f"{name}.py",
               "--steps", str(steps), "--warmup", "3"]
        t0 = time.time()
        rc = run_logged(cmd, inductor_env(name, exdir), exdir / "log_profile.txt", 900, cwd=exdir,
                        header=False)  # the log as a user's run writes it
        results.append({"example": name, "rc": rc, "seconds": round(time.time() - t0, 1)})
    peak = work / "device_peaks.json"
    rc = run_logged([sys.executable, ROOT / "scripts" / "measure_peak_bandwidth.py", "--out", peak],
                    dict(os.environ), work / "peak_log.txt", 300)
    results.append({"copy_peak": str(peak.name) if rc == 0 else f"failed rc={rc}"})
    (work / "summary.json").write_text(json.dumps({**versions(), "results": results}, indent=2))
    pack(work, out / ARCHIVE["inductor"], "inductor_h200")
    print(json.dumps(results, indent=1))
    return 0 if all(r.get("rc", 0) == 0 for r in results) else 1


def keep_inductor(rel: Path) -> bool:
    """What the parser tests read: not LLVM IR, launcher .so files, locks, debug-tree duplicates,
    nor the tiny_launches trace and Triton cache and the user kernel's trace (tens of MB)."""
    parts = rel.parts
    if rel.suffix in {".llir", ".so", ".lock"} or any(p.endswith(".debug") for p in parts):
        return False
    if parts[0] == "tiny_launches" and (rel.name == "trace.json" or "triton" in parts):
        return False
    return not (parts[0] == "user_autotune_kernel" and rel.name == "trace.json")


# --------------------------------------------------------------------------- capture

KEEP_TINY = 4  # tiny_launches: its first kernels; the other 60 are the same kernel at other sizes
STANDALONE = {  # example -> standalone file stems kept
    "pointwise_chain": ["triton_poi_fused_add_gelu_mul_0"],
    "row_reduction": ["triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online_sub_0"],
    "scatter_index_add": ["triton_poi_fused_zeros_like_0"],
    "tiny_launches": ["triton_poi_fused_abs_mul_sign_sqrt_sub_0"],
    "mlp_train_step": ["triton_per_fused_native_layer_norm_0", "triton_poi_fused_gelu_1"],
    "dynamic_shapes": ["triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0",
                       "triton_red_fused_clamp_min_div_linalg_vector_norm_mul_silu_0__s2"],
    "user_autotune_kernel": ["scale_bias_relu_kernel"],
}


def run_capture(work: Path, out: Path, examples: list[str], budget_s: float) -> int:
    """run_gpu_suite.py (capture, checks, standalone runs; it writes capture.tar.gz itself)."""
    cmd = [sys.executable, ROOT / "tests" / "gpu" / "drivers" / "run_gpu_suite.py", "--work", work,
           "--out", out, "--budget-s", str(budget_s), "--examples", ",".join(examples), "--timer", "all"]
    done = subproc.run([str(c) for c in cmd], timeout=budget_s + 600, capture=False)
    return done.returncode


def tiny_log(lines: list[str]) -> list[str]:
    """The capture-log lines of the first KEEP_TINY kernels."""
    names: list[str] = []
    kept = []
    for line in lines:
        name = json.loads(line)["kernel"]
        if name not in names and len(names) < KEEP_TINY:
            names.append(name)
        if name in names:
            kept.append(line)
    return kept


def keep_capture(outs: list[Path], dst: Path) -> None:
    """Per example its capture log, overhead summary and chosen standalone files with their runs;
    the N-th OUT's results.json / suite_log.txt / stdout.txt as ``*_runN.*``. A later OUT
    overrides an earlier one's files."""
    for run_no, out in enumerate(outs, 1):
        with tempfile.TemporaryDirectory() as tmp:
            root = unpacked(out, ARCHIVE["capture"], tmp)
            for example, stems in STANDALONE.items():
                kept = {"with_capture.json", *(f"{s}.py" for s in stems), *(f"run_{s}.json" for s in stems)}
                copy_kept(root / example, dst / example, lambda rel: rel.name in kept and len(rel.parts) == 1)
                log = root / example / "autotune.log"
                if log.is_file():
                    lines = log.read_text().splitlines()
                    lines = tiny_log(lines) if example == "tiny_launches" else lines
                    (dst / example / "autotune.log").write_text("\n".join(lines) + "\n")
        for name in ("results.json", "suite_log.txt", "stdout.txt"):
            if (out / name).is_file():
                stem, ext = name.split(".")
                shutil.copy(out / name, dst / f"{stem}_run{run_no}.{ext}")


# --------------------------------------------------------------------------- investigate

DROP_DIRS = {"fxgraph", "aotautograd"}
DROP_SUFFIXES = {".so", ".llir", ".cubin", ".pt", ".lock"}


def run_investigate(work: Path, out: Path, examples: list[str], budget_s: float,
                    slim: frozenset[str] = frozenset()) -> int:
    """investigate.py online per example; prints one line per investigated kernel: share of GPU
    time, decision, rule."""
    rc, start, done = 0, time.time(), []
    for name in examples:
        if time.time() - start > budget_s:
            print(f"{name}: skipped (time budget)")
            continue
        cmd = [sys.executable, ROOT / "scripts" / "investigate.py", "--out", work / name, "--top", "2",
               "--probe-arch", "none", *(["--smoke"] if name == "pointwise_chain" else []),
               "--", sys.executable, ROOT / "examples" / f"{name}.py", "--steps", "20"]
        code = run_logged(cmd, dict(os.environ), work / "investigate_log.txt", 900)
        rc |= code
        done.append((name, code))
    print("\n== investigate.py online, per example ==")
    for name, code in done:
        index = work / name / "investigation.json"
        kernels = json.loads(index.read_text()).get("kernels", []) if index.is_file() else []
        for k in kernels or [{}]:
            share = f"{100 * k['share']:.1f}%" if isinstance(k.get("share"), (int, float)) else "-"
            print(f"{name:22} {code:>3}  {str(k.get('kernel', '-'))[:48]:48} {share:>6}  "
                  f"{str(k.get('verdict')):24} {k.get('rule')}")
    with tempfile.TemporaryDirectory() as tmp:
        keep_investigate(work, Path(tmp) / "recorded_h200", slim)
        pack(Path(tmp) / "recorded_h200", out / ARCHIVE["investigate"], "recorded_h200")
    return rc


def slim_keep(rel: Path, investigated: set[str]) -> bool:
    """What a slim copy keeps: the ranked profile (not the trace), the capture log, the standalone
    files and Triton cache entries of the investigated kernels, the environment and peak records."""
    parts = rel.parts
    if parts[0] == "inductor_cache":
        return "triton" in parts and rel.name.split(".")[0].removeprefix("__grp__") in investigated
    if parts[0] == "profile":
        return rel.name in ("profile.json", "profile.md")
    if parts[0] == "autotune_kernels":
        return rel.name == "autotune.log" or (len(parts) == 2 and rel.stem in investigated)
    return len(parts) == 1 and rel.name in ("triton_env.json", "device_peaks.json", "repro_command.json")


def keep_investigate(src: Path, dst: Path, slim: frozenset[str] = frozenset()) -> None:
    """Per example its ``capture/`` less Inductor's FX-graph and AOT caches, launcher .so files,
    LLVM IR, cubins and saved tensors (slim examples: :func:`slim_keep`), and each kernel's
    standalone run (``kernels/<k>/run.json``) as ``runs/<k>.json``, so that the offline run can
    cite GPU timings it cannot make."""
    for example in sorted(p for p in src.iterdir() if (p / "capture").is_dir()):
        out = dst / example.name
        if out.exists():
            shutil.rmtree(out)
        investigated = {p.parent.name for p in (example / "kernels").glob("*/run.json")}

        def keep(rel: Path, name=example.name, investigated=investigated) -> bool:
            if rel.suffix in DROP_SUFFIXES or DROP_DIRS & set(rel.parts):
                return False
            return name not in slim or slim_keep(rel, investigated)

        copy_kept(example / "capture", out, keep)
        for run_json in sorted((example / "kernels").glob("*/run.json")):
            (out / "runs").mkdir(parents=True, exist_ok=True)
            shutil.copy2(run_json, out / "runs" / f"{run_json.parent.name}.json")


# --------------------------------------------------------------------------- command line

RUN = {"inductor": run_inductor, "capture": run_capture, "investigate": run_investigate}


def keep(recording: str, sources: list[Path], dst: Path, slim: frozenset[str]) -> int:
    if recording == "capture":
        keep_capture(sources, dst)
        return 0
    if len(sources) != 1:
        raise SystemExit(f"keep {recording}: one source folder, got {len(sources)}")
    with tempfile.TemporaryDirectory() as tmp:
        if recording == "inductor":
            root = unpacked(sources[0], ARCHIVE["inductor"], tmp)
            root = root / "inductor_h200" if (root / "inductor_h200").is_dir() else root
            copy_kept(root, dst, keep_inductor)
        else:
            keep_investigate(sources[0], dst, slim)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="record on this GPU machine")
    r.add_argument("recording", choices=sorted(RUN))
    r.add_argument("--work", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True, help="folder for the archive to copy back")
    r.add_argument("--examples", default=",".join(EXAMPLES), help="comma-separated example names")
    r.add_argument("--budget-s", type=float, default=480.0, help="start no new example after this")
    r.add_argument("--slim", default="", help="investigate: as keep --slim")
    k = sub.add_parser("keep", help="keep what the readers need of a recording")
    k.add_argument("recording", choices=sorted(RUN))
    k.add_argument("paths", type=Path, nargs="+", metavar="PATH", help="the sources, then the destination")
    k.add_argument("--slim", default="", help="investigate: comma-separated examples to keep only the "
                   "ranked profile, the capture log and the investigated kernels of")
    a = p.parse_args(argv)
    if a.cmd == "run":
        unknown = [n for n in a.examples.split(",") if n and n not in EXAMPLES]
        if unknown:
            p.error(f"unknown examples: {', '.join(unknown)} (known: {', '.join(EXAMPLES)})")
        a.work.mkdir(parents=True, exist_ok=True)
        a.out.mkdir(parents=True, exist_ok=True)
        names = [n for n in a.examples.split(",") if n]
        if a.recording == "investigate":
            return run_investigate(a.work, a.out, names, a.budget_s, _names(a.slim))
        return RUN[a.recording](a.work, a.out, names, a.budget_s)
    if len(a.paths) < 2:
        p.error("keep: SRC... DST")
    return keep(a.recording, a.paths[:-1], a.paths[-1], _names(a.slim))


def _names(text: str) -> frozenset[str]:
    return frozenset(n for n in text.split(",") if n)


if __name__ == "__main__":
    sys.exit(main())
