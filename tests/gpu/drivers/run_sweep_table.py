"""The tuning table on a real GPU: Inductor's winner vs the sweep's best, per kernel kind, twice.

    python tests/gpu/drivers/run_sweep_table.py --work /tmp/sweeptable --out "$OUT" [--budget-s 420]

1. measure the copy peak once (measure_peak_bandwidth.py, stored where the sweep's % of peak reads it);
2. per case (memory-bound pointwise chain, row reductions (softmax + LayerNorm, 8192 columns), softmax
   over long rows (65536 columns, a looped reduction), atomic-heavy index_add), capture the compiled
   example with autotune_capture_patch.py (forced re-tune, private Inductor cache);
3. sweep every captured kernel with sweep_captured_kernel.py over all visible GPUs, twice (run 1 and
   run 2, same settings); on a machine with several GPUs the first kernel is swept again on GPU 0
   alone and on all GPUs with a long --rep (--scaling-rep), so the gain of spreading variants over
   GPUs is measured, not assumed.
Prints the table last; writes results.json and sweeps.tar.gz (sweep JSON, Markdown, best files,
capture logs; no saved tensors) under --out.  It stops starting new sweeps after --budget-s seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

CASES = [  # case, example, example args
    ("pointwise", "pointwise_chain", []),
    ("row_reduction", "row_reduction", []),
    ("long_row_softmax", "row_reduction", ["--cols", "65536"]),
    ("scatter", "scatter_index_add", []),
]


def run(cmd, env, log: Path, timeout: float):
    t0 = time.time()
    try:
        proc = subprocess.run([str(c) for c in cmd], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout, cwd=str(ROOT))
        out, rc = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rc = 124
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(map(str, cmd))}\n{out}\n[rc={rc} {time.time() - t0:.1f}s]\n")
    return rc, out


def captured_kernels(cap: Path) -> list[tuple[str, str]]:
    """(kernel, standalone file) of each captured kernel's first launch, in launch order."""
    from tko.read.autotune_events import read_events

    seen, out = set(), []
    if not (cap / "autotune.log").is_file():
        return out
    for ev in read_events(cap / "autotune.log"):
        if ev.get("event") == "launch" and ev.get("standalone_file") and ev["kernel"] not in seen:
            seen.add(ev["kernel"])
            out.append((ev["kernel"], ev["standalone_file"]))
    return out


def sweep_row(doc: dict) -> dict:
    rows = {r["name"]: r for r in doc.get("variants", [])}
    base = rows.get("baseline") or {}
    best = rows.get((doc.get("best") or {}).get("name")) or {}
    counts = (doc.get("summary") or {}).get("status_counts") or {}
    return {"winner_config": base.get("config"), "winner_ms": base.get("median_ms"),
            "winner_pct": base.get("pct_of_copy_peak"), "best": best.get("name"), "best_ms": best.get("median_ms"),
            "best_pct": best.get("pct_of_copy_peak"), "best_x": best.get("x_vs_baseline"),
            "best_within_noise": (doc.get("best") or {}).get("within_noise"),
            "apply": (doc.get("best") or {}).get("apply"), "noise_rel": (doc.get("baseline") or {}).get("noise_rel"),
            "device_spread_rel": (doc.get("baseline") or {}).get("device_spread_rel"),
            "counts": counts, "failed": [(r["name"], r.get("reason")) for r in doc.get("variants", [])
                                         if r.get("status") != "ok"],
            "wall_s": doc.get("wall_s"), "timing_s": doc.get("timing_s"),
            "compile_s": (doc.get("compile") or {}).get("seconds"),
            "self_difference": [d for s in doc.get("slots") or [] for d in s.get("self_difference") or []][:2],
            "devices": len(doc.get("devices") or []), "slots": len(doc.get("slots") or []),
            # where each variant's worker time went: (variant, slot, {phase: s}), slowest first
            "phases": sorted(([r["name"], r.get("slot"), r.get("phase_s") or {}] for r in doc.get("variants", [])),
                             key=lambda t: -sum(t[2].values()))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/sweeptable")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/sweeptable_out"))
    ap.add_argument("--budget-s", type=float, default=420)
    ap.add_argument("--cases", default=",".join(c for c, _, _ in CASES))
    ap.add_argument("--max-kernels", type=int, default=3, help="kernels swept per case (launch order)")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--scaling-rep", type=float, default=1000.0,
                    help="do_bench rep (ms) of the one-GPU vs all-GPU sweep of the first kernel")
    opts = ap.parse_args()
    start = time.time()
    work, out = Path(opts.work), Path(opts.out)
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "sweep_log.txt"
    import torch
    import triton

    n_gpus = torch.cuda.device_count()
    results: dict = {"versions": {"torch": torch.__version__, "triton": triton.__version__,
                                  "device": torch.cuda.get_device_name(0), "gpus": n_gpus},
                     "cases": {}, "rows": []}
    peaks_file = work / "device_peaks.json"
    env = dict(os.environ, PYTHONUNBUFFERED="1", TKO_PEAKS_FILE=str(peaks_file))
    rc, text = run([sys.executable, ROOT / "scripts/measure_peak_bandwidth.py", "--out", peaks_file], env, log, 120)
    results["peak"] = json.loads(peaks_file.read_text()) if rc == 0 and peaks_file.exists() else {"rc": rc}
    wanted = [c for c in CASES if c[0] in opts.cases.split(",")]
    for case, example, extra in wanted:
        cdir = work / case
        cap = cdir / "capture"
        cenv = dict(env, TORCHINDUCTOR_CACHE_DIR=str(cdir / "inductor_cache"))
        rc, _ = run([sys.executable, ROOT / "scripts/autotune_capture_patch.py", "--dir", cap, "--force-retune",
                     ROOT / "examples" / f"{example}.py", "--", "--steps", "3", "--warmup", "2", *extra],
                    cenv, log, 300)
        kernels = captured_kernels(cap)
        results["cases"][case] = {"example": example, "args": extra, "rc_capture": rc,
                                  "kernels": [k for k, _ in kernels]}
        for kernel, path in kernels[:opts.max_kernels]:
            for run_no in range(1, opts.runs + 1):
                if time.time() - start > opts.budget_s:
                    results["rows"].append({"case": case, "kernel": kernel, "run": run_no, "skipped": "time budget"})
                    continue
                stem = cdir / f"{kernel}.run{run_no}"
                rc, _ = run([sys.executable, ROOT / "scripts/sweep_captured_kernel.py", path, "--devices", "all",
                             "--work-dir", f"{stem}.work", "--json-out", f"{stem}.json",
                             "--markdown-out", f"{stem}.md", "--best-out", f"{stem}.best.py"], cenv, log, 400)
                doc = json.loads(Path(f"{stem}.json").read_text()) if Path(f"{stem}.json").exists() else {}
                results["rows"].append({"case": case, "kernel": kernel, "run": run_no, "rc": rc, **sweep_row(doc)})
            (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    # the gain of several GPUs: the first kernel swept on GPU 0 alone and on all GPUs, both with
    # --rep SCALING_REP so that timing, the part more GPUs divide, is a visible share of the wall
    first = next((r for r in results["rows"] if r.get("rc") == 0), None)
    if n_gpus > 1 and first:
        case_dir = work / first["case"]
        path = dict(captured_kernels(case_dir / "capture"))[first["kernel"]]
        cenv = dict(env, TORCHINDUCTOR_CACHE_DIR=str(case_dir / "inductor_cache"))   # warm: timing is compared
        for label, devices in (("one_gpu", "0"), ("all_gpus", "all")):
            stem = case_dir / f"{first['kernel']}.scaling_{label}"
            rc, _ = run([sys.executable, ROOT / "scripts/sweep_captured_kernel.py", path, "--devices", devices,
                         "--rep", str(opts.scaling_rep), "--work-dir", f"{stem}.work", "--json-out", f"{stem}.json",
                         "--markdown-out", f"{stem}.md", "--best-out", f"{stem}.best.py"], cenv, log, 500)
            doc = json.loads(Path(f"{stem}.json").read_text()) if Path(f"{stem}.json").exists() else {}
            results[label] = {"kernel": first["kernel"], "rc": rc, **sweep_row(doc)}
    results["seconds"] = round(time.time() - start, 1)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    with tarfile.open(out / "sweeps.tar.gz", "w:gz") as tar:
        for case, _, _ in wanted:
            cdir = work / case
            for f in sorted(cdir.glob("*")):
                if f.is_file():
                    tar.add(f, arcname=f"{case}/{f.name}")
            for f in sorted(cdir.glob("*.work/*.log")):     # worker logs: where a slow variant's time went
                tar.add(f, arcname=f"{case}/{f.parent.name}/{f.name}")
            for f in sorted((cdir / "capture").glob("*")):
                if f.is_file():
                    tar.add(f, arcname=f"{case}/capture/{f.name}")
    fmt = lambda v, w, p=3: f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"
    print(f"\npeak: {results['peak']}")
    print("\n== Inductor winner vs sweep best (do_bench median; % of measured copy peak) ==")
    print(f"{'case':17} {'kernel':44} {'run':>3} {'win ms':>8} {'win %':>6} {'best variant':28} {'best ms':>8} "
          f"{'best %':>6} {'x':>6} {'noise':>6} {'gpu±':>6} {'ok/fail/err':>11} {'wall s':>7} {'gpus':>4}")
    for r in results["rows"]:
        if "skipped" in r:
            print(f"{r['case']:17} {r['kernel'][:44]:44} {r['run']:>3} skipped ({r['skipped']})")
            continue
        c = r["counts"]
        print(f"{r['case']:17} {r['kernel'][:44]:44} {r['run']:>3} {fmt(r['winner_ms'], 8, 4)} "
              f"{fmt(r['winner_pct'], 6, 1)} {str(r['best'])[:28]:28} {fmt(r['best_ms'], 8, 4)} "
              f"{fmt(r['best_pct'], 6, 1)} {fmt(r['best_x'], 6)} {fmt(r['noise_rel'], 6)} "
              f"{fmt(r.get('device_spread_rel'), 6)} "
              f"{c.get('ok', 0):>3}/{c.get('failed', 0)}/{c.get('error', 0):<5} {fmt(r['wall_s'], 7, 1)} "
              f"{r['devices']:>4}")
    if results.get("one_gpu") and results.get("all_gpus"):
        o, a = results["one_gpu"], results["all_gpus"]
        ratio = (a["timing_s"] / o["timing_s"]) if a.get("timing_s") and o.get("timing_s") else None
        print(f"\nscaling (--rep {opts.scaling_rep:g} ms), {o['kernel']}: one GPU timing {o['timing_s']} s, "
              f"wall {o['wall_s']} s; {a['slots']} GPUs timing {a['timing_s']} s, wall {a['wall_s']} s; "
              f"timing ratio {fmt(ratio, 5)}")
        for label, r in (("one GPU", o), ("all GPUs", a)):
            slow = ", ".join(f"{n} (slot {slot}: " + " ".join(f"{k} {v:.2f}" for k, v in ph.items()) + ")"
                             for n, slot, ph in r.get("phases", [])[:3])
            print(f"  {label}: slowest variants {slow}")
    print(f"\nsweep table seconds: {results['seconds']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
