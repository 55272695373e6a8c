"""Parser scale: summarize_autotune_log.py on a ~100 MB capture log and scan_amdgcn.py on a
~50 MB AMDGCN listing, each against a bare pass over the same file (json.loads per line; one
regex over the text), in one run. Prints time ratios and peak RSS.

    python tests/bench/bench_parsers.py [--log-mb 100] [--isa-mb 50] [--keep DIR] [--repeat N]

The inputs are built by replicating real lines (examples/recorded_h200/*/autotune_kernels/
autotune.log; tests/fixtures/isa/*/*.amdgcn) with renamed kernels. Each measured command runs
in its own Python process, timed from its start to its exit (interpreter start and teardown
included, on both sides of a ratio); its peak RSS is that process's ru_maxrss (``os.wait4``).

Target (issue 15): summarize_autotune_log.py within 4x of the bare pass, under 500 MiB peak RSS;
scan_amdgcn.py within 4x of its bare pass.
The summary of a large log is written compact (``artifact.COMPACT_ABOVE``) and its Markdown
caps kernels and rows (``autotune_log.MD_MAX_*``),
so the run also times those paths.  ``--repeat N`` (default 5) measures each pair (bare pass,
then the tool) N times, interleaved; the verdict is the median of the pairs' ratios (see
:func:`verdict`): on a shared machine one figure is not to be trusted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
TARGET_RATIO, TARGET_MIB = 4.0, 500

BARE_JSON = """
import json, sys
n = 0
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        if line.strip():
            json.loads(line)
            n += 1
"""

BARE_REGEX = """
import re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
n = sum(1 for _ in re.finditer(r"^\\s*([a-z_][a-z0-9_]*)\\s+(.*)$", text, re.MULTILINE))
"""


def measure(code: str, argv: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of a fresh Python process running ``code`` (or, with code "-",
    the script argv[0]) from its start to its exit, teardown included (a script that skips it
    gains that time, as its user does); both sides of a ratio pay the same interpreter start."""
    cmd = [sys.executable, *argv] if code == "-" else [sys.executable, "-c", code, *argv]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed ({proc.returncode}): {argv}\n{err.decode()[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def build_log(path: Path, target_mb: float) -> tuple[int, int]:
    """A capture log of about ``target_mb`` MB: the recorded lines, every copy with renamed
    kernels. Returns (events, kernels)."""
    lines = []
    for log in sorted(ROOT.glob("examples/recorded_h200/*/autotune_kernels/autotune.log")):
        lines += [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    names = sorted({r["kernel"] for r in lines})
    events = copies = 0
    target = int(target_mb * 1e6)
    with open(path, "w") as fh:
        while fh.tell() < target:
            for rec in lines:
                rec = dict(rec, kernel=f"{rec['kernel']}_c{copies}")
                if "function" in rec:
                    rec["function"] = rec["kernel"]
                fh.write(json.dumps(rec) + "\n")
                events += 1
            copies += 1
    return events, len(names) * copies


def build_listing(path: Path, target_mb: float) -> int:
    """An AMDGCN listing of about ``target_mb`` MB: the fixture listings with renamed kernels."""
    texts = [(p.stem, p.read_text()) for p in sorted(ROOT.glob("tests/fixtures/isa/*/*.amdgcn"))]
    target = int(target_mb * 1e6)
    copies = 0
    with open(path, "w") as fh:
        while fh.tell() < target:
            for stem, text in texts:
                names = set(re.findall(r"^\s*\.globl\s+(\S+)", text, re.MULTILINE))
                for name in names:
                    text = re.sub(rf"\b{re.escape(name)}\b", f"{name}_c{copies}", text)
                fh.write(text + "\n")
            copies += 1
    return copies


def measure_pair(label: str, bare: tuple[str, list[str]], tool: list[str]) -> dict:
    """One bare pass, then one run of the tool, printed: wall and CPU seconds of each, the tool's
    peak RSS."""
    bare_s, bare_cpu, bare_mb = measure(*bare)
    tool_s, tool_cpu, tool_mb = measure("-", tool)
    print(f"  {label}: {tool_s:.2f} s ({tool_cpu:.2f} s CPU), peak RSS {tool_mb} MiB; bare pass {bare_s:.2f} s "
          f"({bare_cpu:.2f} s CPU), {bare_mb} MiB; ratio {tool_s / bare_s:.2f}x ({tool_cpu / bare_cpu:.2f}x CPU)")
    return {"wall": (tool_s, bare_s), "cpu": (tool_cpu, bare_cpu), "mib": tool_mb}


def instructions(code: str, argv: list[str]) -> int:
    """Instructions a fresh Python process runs (valgrind's callgrind; 50-200x slower than a
    plain run): the same count on a quiet or a loaded machine."""
    cmd = [sys.executable, *argv] if code == "-" else [sys.executable, "-c", code, *argv]
    proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={os.devnull}", *cmd],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"valgrind failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return int(found.group(1))


def instruction_ratio(label: str, bare: tuple[str, list[str]], tool: list[str]) -> None:
    bare_n, tool_n = instructions(*bare), instructions("-", tool)
    print(f"{label}: {tool_n / 1e9:.2f} G instructions against a bare pass of {bare_n / 1e9:.2f} G = "
          f"{tool_n / bare_n:.2f}x (cache and memory stalls are not in this count)")


def verdict(label: str, pairs: list[dict], max_mib: int | None = None) -> None:
    """The median of the pairs' ratios, in wall and in CPU seconds, against the target: a pair's two
    runs follow each other, so a machine whose speed drifts by 1.5x within a minute (a shared VM)
    moves both alike, where a ratio of separate minimums would pair a fast moment with a slow one.
    CPU time leaves out the time the process waited for a core."""
    parts = []
    for kind in ("wall", "cpu"):
        ratios = sorted(p[kind][0] / p[kind][1] for p in pairs)
        mid = len(ratios) // 2
        median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
        parts.append(f"{kind} {median:.2f}x {'met' if median <= TARGET_RATIO else 'NOT met'} "
                     f"(pairs {', '.join(f'{r:.2f}' for r in ratios)})")
    line = f"{label}, median of {len(pairs)} pairs, target {TARGET_RATIO:g}x: " + "; ".join(parts)
    if max_mib is not None:
        mib = max(p["mib"] for p in pairs)
        line += f"; peak RSS {mib} MiB, target {max_mib} MiB {'met' if mib < max_mib else 'NOT met'}"
    print(line)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log-mb", type=float, default=100.0)
    p.add_argument("--isa-mb", type=float, default=50.0)
    p.add_argument("--keep", type=Path, default=None, help="folder for the inputs (default: a temp dir)")
    p.add_argument("--repeat", type=int, default=5, metavar="N",
                   help="pairs (bare pass, then the tool) measured per parser, interleaved (default 5)")
    p.add_argument("--instructions", action="store_true",
                   help="also count the instructions of one bare pass and one summarize run under valgrind "
                        "(about 25 minutes for the 100 MB log): a figure machine load cannot move")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = a.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        log, isa = work / "autotune.log", work / "big.amdgcn"
        t = time.perf_counter()
        if not (a.keep and log.is_file() and isa.is_file()):  # --keep: reuse the inputs built before
            build_log(log, a.log_mb)
            build_listing(isa, a.isa_mb)
        print(f"inputs: {log.stat().st_size / 1e6:.0f} MB log, {isa.stat().st_size / 1e6:.0f} MB listing, "
              f"ready in {time.perf_counter() - t:.1f} s")
        summary = [str(SCRIPTS / "summarize_autotune_log.py"), str(log), "--json-out", str(work / "summary.json"),
                   "--markdown-out", str(work / "summary.md")]
        scan = [str(SCRIPTS / "scan_amdgcn.py"), str(isa), "--quiet", "--json-out", str(work / "isa.json")]
        sums, scans = [], []
        for _ in range(max(1, a.repeat)):
            sums.append(measure_pair("summarize_autotune_log.py", (BARE_JSON, [str(log)]), summary))
            scans.append(measure_pair("scan_amdgcn.py", (BARE_REGEX, [str(isa)]), scan))
        print(f"summary: {(work / 'summary.json').stat().st_size / 1e6:.0f} MB JSON, "
              f"{(work / 'summary.md').stat().st_size / 1e6:.1f} MB Markdown")
        verdict("summarize_autotune_log.py", sums, TARGET_MIB)
        verdict("scan_amdgcn.py", scans)
        if a.instructions:
            instruction_ratio("summarize_autotune_log.py", (BARE_JSON, [str(log)]), summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
