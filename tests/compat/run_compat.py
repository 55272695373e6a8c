#!/usr/bin/env python3
"""Run the CPU tests of the torch/Triton-facing code against older torch + Triton pairs.

Each pair gets its own fresh virtual environment under ``--work`` (default /tmp/tko_compat):

    python3 tests/compat/run_compat.py                              # the default pairs
    python3 tests/compat/run_compat.py --pairs "2.7.1:3.3.1,2.9.1:3.5.1" --reuse
    python3 tests/compat/run_compat.py --pairs 2.13.0:latest -k "probe and not gfx938"

A pair is ``TORCH:TRITON``; TRITON may be ``latest`` (newest on the index) or ``torch`` (the
version the torch wheel pins). Versions are installed with pip as configured on the machine.

PyPI's Linux x86_64 torch wheels are CUDA builds. ``--deps slim`` (the default) installs the
torch wheel without its dependency set and then only the requirements that ``import torch``
needs on a CPU: every nvidia-* library that torch's own shared objects link against, but not
the ones loaded only on demand (cuSOLVER, NVRTC, NVTX). If torch then fails to import,
the skipped ones are installed too. ``--deps full`` installs torch's whole dependency set.

Wheels are downloaded first (timed and sized), then installed offline from that folder
(timed), then the tests run (timed). ``--reuse`` keeps a venv whose recorded pair and
dependency mode match, so a second run only runs the tests.

Output: one line per pair as it finishes, a table last, and a JSON file
(``--json-out``, default WORK/compat.json) with counts, times, sizes, failures and skips.
Exit status: 0 when every pair installed and had no failed or erroring test, 1 otherwise,
2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DEFAULT_PAIRS = "2.7.1:3.3.1,2.9.1:3.5.1,2.13.0:latest"

# The tests that drive torch and Triton on a CPU, by area.
DEFAULT_TESTS = [
    "tests/test_core.py",                       # version shim, artifacts, arch names
    "tests/test_capture.py",                    # capture patch under TRITON_INTERPRET=1
    "tests/test_run_captured_kernel.py",        # captured standalone files
    "tests/test_sweep_captured_kernel.py",      # sweeps of captured kernels in the interpreter
    "tests/test_triton_benchmark_template.py",  # benchmark template in the interpreter
    "tests/test_collect_inductor_artifacts.py", # Inductor cache / debug-tree files
    "tests/test_model_code.py",                 # Inductor output_code logs
    "tests/test_inspect_triton_meta.py",        # inspect
    "tests/test_probe_compile.py",              # offline compile for gfx942 / sm_90
    "tests/test_scan_amdgcn.py",                # ISA scan of offline-compiled kernels
    "tests/test_summarize_autotune_log.py",     # summarize
    "tests/test_rowkernels.py",                 # bundled row kernels, forward and backward, interpreter
    "tests/test_row_replace.py",                # their routing through the launcher, eager and compiled
    "tests/test_attention_rewrite.py",          # the sdpa arm's FX match on each Dynamo's graphs
    "tests/test_model_rewrites_norm_gate.py",   # the norm and gate arms' FX matches
]

TEST_DEPS = ["pytest", "hypothesis", "pyyaml", "jinja2", "numpy"]

# nvidia-* requirements of the CUDA torch wheels that no torch shared object lists as NEEDED:
# they are loaded only on demand (linalg on the GPU, runtime compilation, NVTX ranges).
# (NVSHMEM is NEEDED by libtorch_cuda.so from torch 2.8 on; cuDNN, cuBLAS, NCCL, cuSPARSE(Lt),
# cuFFT, cuRAND, cuFile, CUPTI and nvJitLink by every CUDA 12 build.)
SLIM_SKIP = ("nvidia-cusolver", "nvidia-cuda-nvrtc", "nvidia-nvtx")

# Evaluates the Requires-Dist lines of a wheel for the venv's interpreter (run inside the venv).
_REQS_CODE = r"""
import json, sys
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
out = []
for line in json.load(sys.stdin):
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    out.append({"name": req.name.lower().replace("_", "-"), "spec": str(req).split(";")[0].strip()})
json.dump(out, sys.stdout)
"""

_VERSIONS_CODE = r"""
import json, torch, triton
print(json.dumps({"torch": torch.__version__, "triton": triton.__version__,
                  "cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None)}))
"""


class UsageError(Exception):
    pass


def parse_pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        torch_v, sep, triton_v = item.partition(":")
        torch_v, triton_v = torch_v.strip(), triton_v.strip() or "torch"
        if not sep and not torch_v:
            raise UsageError(f"bad pair {item!r}: want TORCH:TRITON")
        if not re.fullmatch(r"\d+(\.\d+)*([a-z0-9.+]*)", torch_v):
            raise UsageError(f"bad torch version {torch_v!r} in {item!r}")
        if triton_v not in ("latest", "torch") and not re.fullmatch(r"\d+(\.\d+)*([a-z0-9.+]*)", triton_v):
            raise UsageError(f"bad triton version {triton_v!r} in {item!r}: want X.Y.Z, 'latest' or 'torch'")
        pairs.append((torch_v, triton_v))
    if not pairs:
        raise UsageError("no pairs given")
    return pairs


def tag_of(torch_v: str, triton_v: str) -> str:
    return f"torch{torch_v}-triton{triton_v}".replace("+", "_")


def du_mb(path: Path) -> float:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return round(total / 1e6, 1)


class Runner:
    def __init__(self, log: Path, verbose: bool):
        self.log = log
        self.verbose = verbose

    def run(self, cmd, *, timeout=None, env=None, cwd=None, input_text=None, check=True):
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"\n$ {' '.join(map(str, cmd))}\n")
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                              env=env, cwd=cwd, input=input_text)
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(proc.stdout)
            fh.write(proc.stderr)
            fh.write(f"[exit {proc.returncode}]\n")
        if self.verbose:
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        if check and proc.returncode != 0:
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-5:]
            raise RuntimeError(f"{Path(str(cmd[0])).name} {' '.join(map(str, cmd[1:4]))} ... "
                               f"exited {proc.returncode}: " + " | ".join(tail))
        return proc


def wheel_requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(name).decode("utf-8", "replace")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def install_pair(torch_v: str, triton_v: str, venv: Path, wheels: Path, deps: str, python: str,
                 r: Runner, row: dict) -> None:
    times = row["times"]
    t0 = time.monotonic()
    r.run([python, "-m", "venv", venv])
    pip = [venv / "bin" / "python", "-m", "pip"]
    times["venv_s"] = round(time.monotonic() - t0, 1)
    if wheels.exists():
        shutil.rmtree(wheels)
    wheels.mkdir(parents=True)
    dl = [*pip, "download", "--no-cache-dir", "-d", wheels]

    # Download: torch and triton alone first, then what they need.
    t0 = time.monotonic()
    r.run([*dl, "--no-deps", f"torch=={torch_v}"])
    torch_whl = next(wheels.glob("torch-*.whl"))
    reqs = json.loads(r.run([venv / "bin" / "python", "-c", _REQS_CODE],
                            input_text=json.dumps(wheel_requires(torch_whl))).stdout)
    pinned_triton = next((q["spec"] for q in reqs if q["name"] in ("triton", "pytorch-triton-rocm")), None)
    if triton_v == "torch":
        triton_spec = pinned_triton or "triton"
    elif triton_v == "latest":
        triton_spec = "triton"
    else:
        triton_spec = f"triton=={triton_v}"
    row["triton_pinned_by_torch"] = pinned_triton
    others = [q for q in reqs if q["name"] not in ("triton", "pytorch-triton-rocm")]
    skipped = [q["spec"] for q in others if deps == "slim" and q["name"].startswith(SLIM_SKIP)]
    kept = [q["spec"] for q in others if q["spec"] not in skipped]
    row["deps_skipped"] = skipped
    r.run([*dl, "--no-deps", triton_spec])
    # Torch's requirements with their own dependencies, plus what the tests need, in one resolve.
    r.run([*dl, *kept, *TEST_DEPS])
    times["download_s"] = round(time.monotonic() - t0, 1)
    files = sorted(p for p in wheels.iterdir() if p.is_file())
    row["download_mb"] = round(sum(p.stat().st_size for p in files) / 1e6, 1)
    row["download_files"] = len(files)

    # Install offline from the downloaded files; --no-deps so that the skipped ones stay out.
    t0 = time.monotonic()
    r.run([*pip, "install", "--no-index", "--no-deps", *files])
    times["install_s"] = round(time.monotonic() - t0, 1)

    t0 = time.monotonic()
    proc = r.run([venv / "bin" / "python", "-c", _VERSIONS_CODE], check=False)
    if proc.returncode != 0 and skipped:
        # The slim set was not enough for this build: add what was left out.
        row["deps_fallback"] = (proc.stderr.strip().splitlines() or ["import failed"])[-1]
        t1 = time.monotonic()
        r.run([*dl, *skipped])
        times["download_s"] = round(times["download_s"] + time.monotonic() - t1, 1)
        t1 = time.monotonic()
        r.run([*pip, "install", "--no-index", "--find-links", wheels, *skipped])
        times["install_s"] = round(times["install_s"] + time.monotonic() - t1, 1)
        files = sorted(p for p in wheels.iterdir() if p.is_file())
        row["download_mb"] = round(sum(p.stat().st_size for p in files) / 1e6, 1)
        row["download_files"] = len(files)
        row["deps_skipped"] = []
        proc = r.run([venv / "bin" / "python", "-c", _VERSIONS_CODE])
    elif proc.returncode != 0:
        raise RuntimeError("import torch, triton failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
    times["import_check_s"] = round(time.monotonic() - t0, 1)
    row["installed"] = json.loads(proc.stdout.strip().splitlines()[-1])


def parse_junit(path: Path) -> dict:
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "total": 0}
    failures, skips = [], []
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        cid = f"{case.get('classname', '')}::{case.get('name', '')}"
        counts["total"] += 1
        fail = case.find("failure")
        err = case.find("error")
        skip = case.find("skipped")
        if fail is not None or err is not None:
            node = fail if fail is not None else err
            kind = "failed" if fail is not None else "errors"
            counts[kind] += 1
            msg = (node.get("message") or "").strip().splitlines()
            failures.append({"test": cid, "kind": kind, "message": " ".join(msg[:3])[:500]})
        elif skip is not None:
            counts["skipped"] += 1
            skips.append({"test": cid, "reason": (skip.get("message") or "")[:300]})
        else:
            counts["passed"] += 1
    return {**counts, "failures": failures, "skips": skips}


def run_tests(venv: Path, repo: Path, tests: list[str], kexpr: str | None, work: Path, tag: str,
              timeout: float, extra: list[str], r: Runner, row: dict) -> None:
    junit = work / "results" / f"{tag}.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    if junit.exists():
        junit.unlink()
    basetemp = work / "tmp" / tag
    if basetemp.exists():
        shutil.rmtree(basetemp, ignore_errors=True)
    basetemp.parent.mkdir(parents=True, exist_ok=True)
    cache = work / "cache" / tag
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRITON_", "TORCHINDUCTOR_", "TORCH_LOGS", "TKO_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({
        "PYTHONPATH": str(repo / "scripts"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv),
    })
    # the full tier of the chosen files (pyproject's addopts would keep the fast tier only)
    cmd = [venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", "-m", "slow or not slow",
           f"--junitxml={junit}", f"--basetemp={basetemp}", *tests]
    if kexpr:
        cmd += ["-k", kexpr]
    cmd += extra
    t0 = time.monotonic()
    try:
        proc = r.run(cmd, timeout=timeout, env=env, cwd=repo, check=False)
        row["pytest_rc"] = proc.returncode
        tail = [ln for ln in proc.stdout.strip().splitlines() if ln.strip()][-1:]
        row["pytest_summary"] = tail[0] if tail else ""
    except subprocess.TimeoutExpired:
        row["pytest_rc"] = "timeout"
        row["error"] = f"tests ran past {timeout:.0f} s"
    row["times"]["tests_s"] = round(time.monotonic() - t0, 1)
    if junit.exists():
        row.update(parse_junit(junit))
    elif "error" not in row:
        row["error"] = f"pytest wrote no report (exit {row.get('pytest_rc')})"


def do_pair(torch_v: str, triton_v: str, args, tests: list[str]) -> dict:
    work: Path = args.work
    tag = tag_of(torch_v, triton_v)
    venv = work / "venvs" / tag
    wheels = work / "wheels" / tag
    log = work / "logs" / f"{tag}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    r = Runner(log, args.verbose)
    row = {"pair": f"{torch_v}:{triton_v}", "torch_req": torch_v, "triton_req": triton_v,
           "deps": args.deps, "venv": str(venv), "log": str(log), "reused": False, "times": {}}
    marker = venv / "tko_compat.json"
    t_all = time.monotonic()
    try:
        want = {"torch": torch_v, "triton": triton_v, "deps": args.deps}
        old = json.loads(marker.read_text()) if marker.exists() else None
        if args.reuse and old and all(old.get(k) == v for k, v in want.items()):
            row["reused"] = True
            for key in ("installed", "download_mb", "download_files", "deps_skipped",
                        "triton_pinned_by_torch", "deps_fallback"):
                if key in old:
                    row[key] = old[key]
            row["install_times_when_built"] = old.get("times", {})
        else:
            if venv.exists():
                shutil.rmtree(venv)
            install_pair(torch_v, triton_v, venv, wheels, args.deps, args.python, r, row)
            row["venv_mb"] = du_mb(venv)
            marker.write_text(json.dumps({**want, **{k: row[k] for k in
                              ("installed", "download_mb", "download_files", "deps_skipped",
                               "triton_pinned_by_torch", "times", "venv_mb") if k in row},
                              **({"deps_fallback": row["deps_fallback"]} if "deps_fallback" in row else {})},
                              indent=1))
            if not args.keep_wheels:
                shutil.rmtree(wheels, ignore_errors=True)
        if not args.install_only:
            run_tests(venv, args.repo, tests, args.k, work, tag, args.timeout, args.pytest_args, r, row)
    except Exception as exc:  # one pair's breakage must not stop the others
        row["error"] = f"{type(exc).__name__}: {exc}"[:1000]
    row["times"]["total_s"] = round(time.monotonic() - t_all, 1)
    if "venv_mb" not in row and venv.exists() and not row.get("reused"):
        row["venv_mb"] = du_mb(venv)
    elif row.get("reused") and marker.exists():
        row["venv_mb"] = json.loads(marker.read_text()).get("venv_mb")
    row["status"] = ("error" if "error" in row else "install-only" if args.install_only
                     else "ok" if row.get("failed", 0) + row.get("errors", 0) == 0 else "failed")
    return row


def fmt(v, width=0):
    if v is None:
        return "-"
    return str(v)


def table(rows: list[dict]) -> str:
    head = ["pair", "installed", "passed", "failed", "errors", "skipped", "download", "venv",
            "dl s", "inst s", "tests s", "total s", "status"]
    lines = []
    for row in rows:
        inst = row.get("installed") or {}
        t = row["times"]
        built = row.get("install_times_when_built", {})
        lines.append([
            row["pair"],
            f"{inst.get('torch', '?')} / {inst.get('triton', '?')}",
            fmt(row.get("passed")), fmt(row.get("failed")), fmt(row.get("errors")), fmt(row.get("skipped")),
            f"{row['download_mb']:.0f} MB" if row.get("download_mb") is not None else "-",
            f"{row['venv_mb']:.0f} MB" if row.get("venv_mb") is not None else "-",
            fmt(t.get("download_s", built.get("download_s") if built else None)) + ("*" if built else ""),
            fmt(t.get("install_s", built.get("install_s") if built else None)) + ("*" if built else ""),
            fmt(t.get("tests_s")), fmt(t.get("total_s")), row["status"],
        ])
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines]
    if any(row.get("reused") for row in rows):
        out.append("* reused venv: download/install seconds are those of the run that built it")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", default=DEFAULT_PAIRS,
                    help=f"comma-separated TORCH:TRITON pairs (default {DEFAULT_PAIRS})")
    ap.add_argument("--work", type=Path, default=Path("/tmp/tko_compat"),
                    help="folder for venvs, wheels, logs and results (default /tmp/tko_compat)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep a venv already built for the same pair and --deps")
    ap.add_argument("--deps", choices=("slim", "full"), default="slim",
                    help="slim: only the nvidia-* libraries torch links against (default); full: all")
    ap.add_argument("--tests", nargs="+", default=None, metavar="PATH",
                    help="test files or node ids, relative to the repo (default: the torch/Triton-facing set)")
    ap.add_argument("-k", default=None, help="pytest -k expression")
    ap.add_argument("--pytest-args", nargs=argparse.REMAINDER, default=[],
                    help="further pytest arguments (everything after this flag)")
    ap.add_argument("--repo", type=Path, default=ROOT, help="repository to test (default: this one)")
    ap.add_argument("--python", default=sys.executable, help="interpreter the venvs are made from")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds for one pair's tests (default 1800)")
    ap.add_argument("--keep-wheels", action="store_true", help="keep the downloaded wheels under WORK/wheels")
    ap.add_argument("--install-only", action="store_true", help="build the venvs, run no test")
    ap.add_argument("--json-out", type=Path, default=None, help="default WORK/compat.json")
    ap.add_argument("--show", type=int, default=25, help="failures listed per pair on the console (default 25)")
    ap.add_argument("--verbose", action="store_true", help="echo pip and pytest output")
    args = ap.parse_args(argv)
    try:
        pairs = parse_pairs(args.pairs)
    except UsageError as exc:
        ap.error(str(exc))
    args.work = args.work.resolve()
    args.repo = args.repo.resolve()
    tests = args.tests or DEFAULT_TESTS
    missing = [t for t in tests if not (args.repo / t.split("::", 1)[0]).exists()]
    if missing:
        ap.error(f"no such test file under {args.repo}: {', '.join(missing)}")
    args.work.mkdir(parents=True, exist_ok=True)
    json_out = args.json_out or args.work / "compat.json"

    rows = []
    t0 = time.monotonic()
    for torch_v, triton_v in pairs:
        print(f"[compat] {torch_v}:{triton_v} ...", flush=True)
        row = do_pair(torch_v, triton_v, args, tests)
        rows.append(row)
        inst = row.get("installed") or {}
        print(f"[compat] {row['pair']} ({inst.get('torch', '?')} / {inst.get('triton', '?')}): "
              f"{row['status']}, {row.get('passed', '-')} passed, {row.get('failed', '-')} failed, "
              f"{row.get('errors', '-')} errors, {row.get('skipped', '-')} skipped, "
              f"{row['times'].get('total_s')} s" + (f" -- {row['error']}" if "error" in row else ""),
              flush=True)
        fails = row.get("failures", [])
        for f in fails[:args.show]:
            print(f"    {f['kind']}: {f['test']}: {f['message'][:200]}", flush=True)
        if len(fails) > args.show:
            print(f"    ... {len(fails) - args.show} more in {json_out}", flush=True)
        doc = {"schema": "compat_run/1", "repo": str(args.repo), "work": str(args.work),
               "tests": tests, "k": args.k, "deps": args.deps, "python": args.python,
               "wall_s": round(time.monotonic() - t0, 1), "pairs": rows}
        json_out.write_text(json.dumps(doc, indent=1))
    print()
    print(table(rows))
    print(f"\njson: {json_out}   logs: {args.work / 'logs'}   wall: {time.monotonic() - t0:.0f} s")
    ok = all(row["status"] in ("ok", "install-only") for row in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
