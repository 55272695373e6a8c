"""Parser scale: summarize_autotune_log.py on a ~100 MB capture log and scan_amdgcn.py on a
~50 MB AMDGCN listing, each against a bare pass over the same file (json.loads per line; one
regex over the text), in one run. Prints time ratios and peak RSS.

    python tests/bench/bench_parsers.py [--log-mb 100] [--isa-mb 50] [--keep DIR] [--repeat N]

The inputs are built by replicating real lines (examples/recorded_h200/*/autotune_kernels/
autotune.log; tests/fixtures/isa/*/*.amdgcn) with renamed kernels. Each measured command runs
in its own Python process; its peak RSS is that process's ``resource.getrusage`` ru_maxrss.

Target (issue 15): summarize_autotune_log.py within 4x of the bare pass, under 500 MiB peak RSS;
scan_amdgcn.py within 4x of its bare pass.
The summary of a large log is written compact (``artifact.COMPACT_ABOVE``) and its Markdown
caps kernels and rows (``autotune_log.MD_MAX_*``),
so the run also times those paths.  ``--repeat N`` measures the summarize pair (bare pass, then
summarize) N times on the same input: on a shared machine one figure is not to be trusted.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
TARGET_RATIO, TARGET_MIB = 4.0, 500

_MEASURE = r"""
import resource, runpy, sys, time
t = time.perf_counter()
code = sys.argv[1]
sys.argv = sys.argv[2:] if code == "-" else ["bench"] + sys.argv[2:]
try:
    if code == "-":
        runpy.run_path(sys.argv[0], run_name="__main__")
    else:
        exec(compile(code, "<bench>", "exec"), {"__name__": "__main__"})
except SystemExit as exc:
    if exc.code not in (0, None):
        raise
sys.stderr.write("BENCH %.6f %d\n" % (time.perf_counter() - t,
                 resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
"""

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


def measure(code: str, argv: list[str]) -> tuple[float, int]:
    """(seconds, peak RSS in MiB) of ``code`` (or, with code "-", the script argv[0])."""
    proc = subprocess.run([sys.executable, "-c", _MEASURE, code, *argv], capture_output=True, text=True)
    line = [x for x in proc.stderr.splitlines() if x.startswith("BENCH ")]
    if proc.returncode != 0 or not line:
        raise SystemExit(f"benchmark command failed ({proc.returncode}): {argv}\n{proc.stderr[-2000:]}")
    _, seconds, rss_kib = line[-1].split()
    return float(seconds), int(rss_kib) // 1024


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


def measure_summary(log: Path, work: Path) -> None:
    """One bare json.loads pass and one summarize_autotune_log.py run over ``log``, printed."""
    bare_s, bare_mb = measure(BARE_JSON, [str(log)])
    sum_s, sum_mb = measure("-", [str(SCRIPTS / "summarize_autotune_log.py"), str(log),
                                  "--json-out", str(work / "summary.json"),
                                  "--markdown-out", str(work / "summary.md")])
    print(f"summarize_autotune_log.py: {sum_s:.2f} s, peak RSS {sum_mb} MiB; bare json.loads "
          f"{bare_s:.2f} s, {bare_mb} MiB; ratio {sum_s / bare_s:.2f}x; summary "
          f"{(work / 'summary.json').stat().st_size / 1e6:.0f} MB JSON, "
          f"{(work / 'summary.md').stat().st_size / 1e6:.1f} MB Markdown")
    print(f"  target within {TARGET_RATIO:g}x and under {TARGET_MIB} MiB: time "
          f"{'met' if sum_s <= TARGET_RATIO * bare_s else 'not met'}, memory "
          f"{'met' if sum_mb < TARGET_MIB else 'not met'}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--log-mb", type=float, default=100.0)
    p.add_argument("--isa-mb", type=float, default=50.0)
    p.add_argument("--keep", type=Path, default=None, help="folder for the inputs (default: a temp dir)")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="measure summarize_autotune_log.py against its bare pass N times")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = a.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        log, isa = work / "autotune.log", work / "big.amdgcn"
        t = time.perf_counter()
        events, kernels = build_log(log, a.log_mb)
        copies = build_listing(isa, a.isa_mb)
        print(f"inputs: {log.stat().st_size / 1e6:.0f} MB log ({events} events, ~{kernels} kernels), "
              f"{isa.stat().st_size / 1e6:.0f} MB listing ({copies} copies of the fixtures), "
              f"built in {time.perf_counter() - t:.1f} s")
        for _ in range(max(1, a.repeat)):
            measure_summary(log, work)
        rx_s, rx_mb = measure(BARE_REGEX, [str(isa)])
        scan_s, scan_mb = measure("-", [str(SCRIPTS / "scan_amdgcn.py"), str(isa), "--quiet",
                                        "--json-out", str(work / "isa.json")])
        print(f"scan_amdgcn.py: {scan_s:.2f} s, peak RSS {scan_mb} MiB; bare regex pass {rx_s:.2f} s, "
              f"{rx_mb} MiB; ratio {scan_s / rx_s:.2f}x")
        print(f"  target within {TARGET_RATIO:g}x: time "
              f"{'met' if scan_s <= TARGET_RATIO * rx_s else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
