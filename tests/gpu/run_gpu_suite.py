"""The GPU driver: run every example repro under kernel capture on a real GPU and check the capture.

    python tests/gpu/run_gpu_suite.py --work /tmp/gpusuite --out "$OUT" [--budget-s 480]

Per example (pointwise chain, row reduction, scatter/index_add, tiny launches, MLP train step,
dynamic shapes, hand-written @triton.autotune kernel):
1. run it with ``autotune_capture_patch`` (TRITON_CAPTURE_FORCE_RETUNE=1, private Inductor cache),
   steady-state ms/step and torch.profiler kernel times of 20 more steps (profiled_example.py);
2. run it again without the patch (same cache) for the capture overhead ratio;
3. check every Triton kernel the profiler saw is in autotune.log (with configs, timings when it had
   several configs), every line is a well-formed autotune_event/1;
4. run the standalone files of the largest kernels with run_captured_kernel.py and compare the
   do_bench median with the profiler's mean kernel time in the original program.
Prints a table last; writes results.json and capture.tar.gz (logs + standalone files, no saved
tensors) under --out.  It stops starting new work after --budget-s seconds.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

EXAMPLES = {  # name -> extra args
    "pointwise_chain": [], "row_reduction": [], "scatter_index_add": [], "tiny_launches": [],
    "mlp_train_step": [], "dynamic_shapes": [], "user_autotune_kernel": [],
}
STEPS = 200
MAX_STANDALONE_PER_EXAMPLE = 5
MAX_SIGNATURES = 4          # standalone files (argument signatures) run per kernel


def run(cmd, env, log, timeout):
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, cwd=str(ROOT))
        out, rc = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out, rc = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or ""), 124
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(map(str, cmd))}\n{out}\n[rc={rc} {time.time() - t0:.1f}s]\n")
    return rc, out


def read_events(log: Path):
    from tko.contracts import contract_problems  # noqa: F401  (imported to fail early)

    events, bad = [], 0
    if not log.exists():
        return events, bad
    for line in log.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            bad += 1
    return events, bad


def event_problems(ev: dict) -> list[str]:
    from tko.contracts import documented_fields

    spec = documented_fields()["autotune_event/1"]
    probs = [f"missing {k}" for k, req in spec.items() if req and k not in ev]
    probs += [f"undocumented {k}" for k in ev if k not in spec]
    return probs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/gpusuite")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpusuite_out"))
    ap.add_argument("--budget-s", type=float, default=480)
    ap.add_argument("--examples", default=",".join(EXAMPLES))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--plain", action="store_true",
                    help="also run each example without the patch in its own process (cross-process ratio)")
    ap.add_argument("--timer", default="both", help="run_captured_kernel.py --timer")
    ap.add_argument("--max-standalone", type=int, default=MAX_STANDALONE_PER_EXAMPLE)
    opts = ap.parse_args()
    start = time.time()
    work, out = Path(opts.work), Path(opts.out)
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "suite_log.txt"
    results = {"examples": {}, "standalone": []}
    names = [n for n in opts.examples.split(",") if n]
    import torch
    import triton

    results["versions"] = {"torch": torch.__version__, "triton": triton.__version__,
                           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    for name in names:
        if time.time() - start > opts.budget_s:
            results["examples"][name] = {"skipped": "time budget"}
            continue
        exdir = work / name
        cap = exdir / "capture"
        env = dict(os.environ, PYTHONUNBUFFERED="1", TRITON_CAPTURE_DIR=str(cap),
                   TRITON_CAPTURE_FORCE_RETUNE="1", TORCHINDUCTOR_CACHE_DIR=str(exdir / "inductor_cache"))
        script = str(ROOT / "examples" / f"{name}.py")
        common = ["--steps", str(STEPS), "--warmup", "10", "--device", opts.device, *EXAMPLES[name]]
        rc1, _ = run([sys.executable, str(ROOT / "tests/gpu/profiled_example.py"), "--out",
                      str(exdir / "with_capture.json"), "--capture", script, "--", *common], env, log, 300)
        env_plain = {k: v for k, v in env.items() if not k.startswith("TRITON_CAPTURE")}
        rc2 = None
        if opts.plain:
            rc2, _ = run([sys.executable, str(ROOT / "tests/gpu/profiled_example.py"), "--out",
                          str(exdir / "plain.json"), script, "--", *common], env_plain, log, 300)
        with_cap = json.loads((exdir / "with_capture.json").read_text()) if rc1 == 0 else {}
        plain = json.loads((exdir / "plain.json").read_text()) if rc2 == 0 else {}
        events, bad = read_events(cap / "autotune.log")
        probs = sorted({p for ev in events for p in event_problems(ev)})
        by_kernel: dict = {}
        for ev in events:
            k = by_kernel.setdefault(ev["kernel"], {"events": set(), "configs": 0, "timed": 0, "standalone": None,
                                                     "function": None})
            k["events"].add(ev["event"])
            if ev["event"] == "kernel":
                k["configs"] = max(k["configs"], len(ev.get("configs") or []))
                k["function"] = ev.get("function") or ev["kernel"]
            if ev["event"] in ("autotune", "coordesc"):
                k["timed"] = max(k["timed"], len([t for t in ev.get("timings", []) if t.get("ms") is not None]))
            if ev["event"] == "launch" and ev.get("standalone_file"):
                k.setdefault("files", []).append(ev["standalone_file"])
        prof_kernels = with_cap.get("kernels", {})
        functions = {v.get("function") or k: k for k, v in by_kernel.items()}
        triton_seen = [n for n in prof_kernels if n.startswith("triton_") or n in functions]
        missing = [n for n in triton_seen if n not in functions and n not in by_kernel]
        untimed = [k for k, v in by_kernel.items() if v["configs"] > 1 and v["timed"] == 0]
        errors = (cap / "capture_errors.log").read_text().splitlines() if (cap / "capture_errors.log").exists() else []
        ratio = (with_cap["ms_per_step"] / plain["ms_per_step"]) if with_cap.get("ms_per_step") and plain.get(
            "ms_per_step") else None
        results["examples"][name] = {
            "rc_capture": rc1, "rc_plain": rc2, "ms_step_capture": with_cap.get("ms_per_step"),
            "ms_step_plain": plain.get("ms_per_step"), "overhead_ratio_processes": ratio,
            "overhead": with_cap.get("overhead"),
            "overhead_ratio": (with_cap.get("overhead") or {}).get("ratio_median"),
            "log_lines": len(events), "bad_lines": bad, "event_problems": probs,
            "kernels_logged": len(by_kernel), "triton_kernels_profiled": len(triton_seen),
            "missing_from_log": missing, "multi_config_untimed": untimed, "capture_errors": errors[:10],
            "kernels": {k: {**v, "events": sorted(v["events"])} for k, v in by_kernel.items()},
            "profiler": prof_kernels,
        }
        # standalone files of the largest kernels (by total profiled time)
        ranked = sorted(by_kernel.items(), key=lambda kv: -prof_kernels.get(kv[1]["function"] or kv[0], {}).get(
            "total_us", 0.0))
        for kname, info in ranked[:opts.max_standalone]:
            first_row = len(results["standalone"])
            for fpath in info.get("files", [])[:MAX_SIGNATURES]:
                if time.time() - start > opts.budget_s:
                    break
                jout = exdir / f"run_{Path(fpath).stem}.json"
                rc, text = run([sys.executable, str(ROOT / "scripts/run_captured_kernel.py"), fpath, "--timeout",
                                "120", "--warmup", "10", "--rep", "50", "--timer", opts.timer, "--json-out", str(jout)], env_plain, log, 150)
                doc = json.loads(jout.read_text()) if jout.exists() else {}
                best = doc.get("best") or {}
                graph = next((r for r in doc.get("results", []) if r.get("best") and r.get("ok")
                              and r.get("timer", "").endswith("cudagraph")), {})
                prof = prof_kernels.get(info["function"] or kname, {})
                sa_us = best.get("ms") * 1e3 if best.get("ms") else None
                cg_us = graph.get("ms") * 1e3 if graph.get("ms") else None
                pr_us = prof.get("mean_us")
                results["standalone"].append({
                    "example": name, "kernel": kname, "file": Path(fpath).name, "rc": rc,
                    "status": doc.get("status"), "error": doc.get("error"),
                    "standalone_us": sa_us, "profiler_mean_us": pr_us, "profiler_calls": prof.get("calls"),
                    "ratio": (sa_us / pr_us) if sa_us and pr_us else None,
                    "cudagraph_us": cg_us, "ratio_cudagraph": (cg_us / pr_us) if cg_us and pr_us else None,
                    "gb_per_s": best.get("gb_per_s"), "launch": best.get("launch")})
            # a dynamic-shape kernel runs at several sizes and the profiler's mean mixes them; the
            # example repros cycle their sizes evenly, so the mean over the signatures compares
            rows = [r for r in results["standalone"][first_row:] if r["standalone_us"]]
            if len(rows) > 1:
                prof_us = rows[0]["profiler_mean_us"]
                sa = sum(r["standalone_us"] for r in rows) / len(rows)
                cg = [r["cudagraph_us"] for r in rows if r["cudagraph_us"]]
                cg_us = sum(cg) / len(cg) if len(cg) == len(rows) else None
                results["standalone"].append({
                    "example": name, "kernel": kname, "file": f"mean of {len(rows)} signatures", "rc": 0,
                    "status": "ok", "error": None, "standalone_us": sa, "profiler_mean_us": prof_us,
                    "profiler_calls": rows[0]["profiler_calls"], "ratio": sa / prof_us if prof_us else None,
                    "cudagraph_us": cg_us, "ratio_cudagraph": cg_us / prof_us if cg_us and prof_us else None,
                    "gb_per_s": None, "launch": rows[0]["launch"]})
        (out / "results.json").write_text(json.dumps(results, indent=1, default=list))
    results["seconds"] = round(time.time() - start, 1)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=list))
    with tarfile.open(out / "capture.tar.gz", "w:gz") as tar:
        for name in names:
            cap = work / name / "capture"
            if cap.exists():
                for f in sorted(cap.rglob("*")):
                    if f.is_file() and f.suffix != ".pt":
                        tar.add(f, arcname=f"{name}/{f.relative_to(cap)}")
            for f in sorted((work / name).glob("*.json")):
                tar.add(f, arcname=f"{name}/{f.name}")
    # the table
    print("\n== capture per example ==")
    print("(ratio = ms/step with capture on / off, alternating blocks in one process; "
          "proc = with capture / plain run in another process)")
    print(f"{'example':22} {'rc':>5} {'events':>6} {'bad':>3} {'kern':>4} {'prof':>4} {'miss':>4} {'untimed':>7} "
          f"{'errs':>4} {'ms/step cap':>11} {'plain':>9} {'proc':>6} {'ratio':>6}")
    for name, r in results["examples"].items():
        if "skipped" in r:
            print(f"{name:22} skipped ({r['skipped']})")
            continue
        fmt = lambda v, w, p=4: f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"
        print(f"{name:22} {r['rc_capture']:>2}/{str(r['rc_plain']):<2} {r['log_lines']:>6} {r['bad_lines']:>3} "
              f"{r['kernels_logged']:>4} {r['triton_kernels_profiled']:>4} {len(r['missing_from_log']):>4} "
              f"{len(r['multi_config_untimed']):>7} {len(r['capture_errors']):>4} {fmt(r['ms_step_capture'], 11)} "
              f"{fmt(r['ms_step_plain'], 9)} {fmt(r['overhead_ratio_processes'], 6, 3)} {fmt(r['overhead_ratio'], 6, 3)}")
    print("\n== standalone vs original (profiler mean kernel time) ==")
    print("(prof us: mean kernel time in the original program; alone us: do_bench median, L2 flushed; "
          "graph us: do_bench_cudagraph median, no launch gaps)")
    print(f"{'example':20} {'kernel':50} {'status':7} {'prof us':>9} {'alone us':>9} {'ratio':>6} {'graph us':>9} "
          f"{'ratio':>6} {'GB/s':>7}")
    for s in results["standalone"]:
        fmt = lambda v, w, p=2: f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"
        label = s["kernel"][:43] + (" [mean]" if s["file"].startswith("mean of") else "")
        print(f"{s['example'][:20]:20} {label[:50]:50} {str(s['status'])[:7]:7} {fmt(s['profiler_mean_us'], 9)} "
              f"{fmt(s['standalone_us'], 9)} {fmt(s['ratio'], 6, 3)} {fmt(s['cudagraph_us'], 9)} "
              f"{fmt(s['ratio_cudagraph'], 6, 3)} {fmt(s['gb_per_s'], 7, 0)}")
    print(f"\nsuite seconds: {results['seconds']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
