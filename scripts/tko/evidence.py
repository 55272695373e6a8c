"""Gather one kernel's evidence from the artifacts of the other scripts.

Each artifact is optional. ``gather`` returns the sections the report shows and the facts the
decision rules read (``tko.decide.Fact`` with the artifact and field each value came from);
an artifact that is absent or does not mention the kernel becomes a listed gap, never an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import archs
from .decide import Fact

GEMM_NAME = re.compile(r"(^|_)(mm|bmm|addmm|baddbmm|matmul|gemm)(_|$)")


@dataclass
class Evidence:
    kernel: str
    facts: dict[str, Fact] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)

    def fact(self, name: str, value: Any, source: str) -> None:
        if value is not None:
            self.facts[name] = Fact(value, source)


def find_kernel(records: list[dict], kernel: str, key: str) -> tuple[int, dict] | tuple[None, None]:
    """The record whose ``key`` names the kernel: exact name first, then a unique prefix match."""
    for i, rec in enumerate(records):
        if rec.get(key) == kernel:
            return i, rec
    prefixed = [(i, r) for i, r in enumerate(records) if str(r.get(key, "")).startswith(kernel)]
    return prefixed[0] if len(prefixed) == 1 else (None, None)


def from_profile(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no profile (profile_kernels.py): profile rank and time share unknown")
        return
    # `kernels` holds the detailed top N; `ranking` (when present) every kernel, compactly.
    ranked, field_name = doc.get("kernels", []), "kernels"
    i, rec = find_kernel(ranked, ev.kernel, "name")
    if rec is None and doc.get("ranking"):
        ranked, field_name = doc["ranking"], "ranking"
        i, rec = find_kernel(ranked, ev.kernel, "name")
    if rec is None:
        ev.gaps.append(f"{label}: kernel not among the {len(ranked)} ranked kernels "
                       f"(run with a larger --top, or it did not run in the profiled program)")
        return
    where = f"{label}: {field_name}[{i}]"
    ev.sections["profile"] = {k: rec.get(k) for k in ("rank", "name", "origin", "calls", "total_us",
                                                       "mean_us", "share", "launch_op", "op_chain")}
    ev.sections["profile"]["kernel_time_us"] = doc.get("summary", {}).get("kernel_time_us")
    ev.sections["profile"]["ranked"] = len(doc.get("ranking") or doc.get("kernels", []))
    ev.fact("share", rec.get("share"), f"{where}.share")
    ev.fact("calls", rec.get("calls"), f"{where}.calls")
    ev.fact("mean_us", rec.get("mean_us"), f"{where}.mean_us")


def program_facts(doc: dict, label: str, tiny_us: float) -> dict:
    """Facts about the whole profiled program (``program_rules``): how much GPU time sits in
    kernels too short to be anything but launch-bound."""
    ranked, field_name = (doc.get("ranking"), "ranking") if doc.get("ranking") else (doc.get("kernels") or [], "kernels")
    summary = doc.get("summary") or {}
    def mean_us(k: dict) -> float | None:
        if isinstance(k.get("mean_us"), (int, float)):
            return k["mean_us"]
        calls, total = k.get("calls"), k.get("total_us")        # the compact ranking rows
        return total / calls if isinstance(total, (int, float)) and calls else None

    timed = [k for k in ranked if mean_us(k) is not None]
    tiny = [k for k in timed if mean_us(k) < tiny_us]
    where = f"{label}: {field_name}[total_us / calls < {tiny_us:g}]"
    facts = {}
    if timed:
        facts["tiny_kernel_share"] = Fact(round(sum(k.get("share") or 0.0 for k in tiny), 6), f"{where}.share, summed")
        facts["tiny_kernel_launches"] = Fact(sum(k.get("calls") or 0 for k in tiny), f"{where}.calls, summed")
        facts["tiny_kernels"] = Fact(len(tiny), f"{where}: count of {len(timed)} kernels")
    if summary.get("dispatches") and summary.get("kernel_time_us") is not None:
        facts["mean_kernel_us"] = Fact(round(summary["kernel_time_us"] / summary["dispatches"], 3),
                                       f"{label}: summary.kernel_time_us / summary.dispatches")
    return facts


def program_decision(profile: dict | None, label: str, rules: dict | None = None,
                     trials: dict | None = None, trials_label: str = "trials.json") -> dict | None:
    """The ``program_rules`` of decision_rules.yaml on the whole profile and the remedy trials:
    what no single kernel shows (a program of tiny launches, a remedy measured end to end).
    None without a profile and without trials."""
    if not profile and not trials:
        return None
    from .decide import _threshold, decide, load_rules

    rules = rules if rules is not None else load_rules()
    facts = program_facts(profile, label, _threshold("launch_bound_mean_us", rules.get("thresholds", {}))) \
        if profile else {}
    facts.update(trial_facts(trials, trials_label))
    decision = decide(facts, rules, scope="program_rules")
    chosen = next((f for f in decision.fired if f.rule == decision.rule), None)
    return {"verdict": decision.verdict, "rule": decision.rule, "says": chosen.says if chosen else None,
            "fired": [f.__dict__ for f in decision.fired],
            "facts": {k: {"value": f.value, "source": f.source} for k, f in facts.items()}}


def from_manifest(ev: Evidence, doc: dict | None, label: str) -> None:
    """The model code the kernel comes from (collect_inductor_artifacts.py's ``model_code``)."""
    if doc is None:
        ev.gaps.append("no artifact manifest (collect_inductor_artifacts.py): the model code behind the kernel unknown")
        return
    i, k = find_kernel(doc.get("kernels", []), ev.kernel, "kernel")
    mc = (k or {}).get("model_code")
    if not mc or not mc.get("frames"):
        why = next((m["reason"] for m in (k or {}).get("missing", []) if m.get("kind", "").startswith("model_code")),
                   "the kernel is not in the manifest")
        ev.gaps.append(f"{label}: model code unknown ({why})")
        return
    frames = []
    for f in mc["frames"]:
        target = f"__main__:{f['qualname']}" if f.get("qualname") else None
        frames.append({**f, "disable_target": target})
    ev.sections["model_code"] = {"source": f"{label}: kernels[{i}].model_code", "aten_ops": mc.get("aten_ops", []),
                                 "source_nodes": mc.get("source_nodes", []), "frames": frames,
                                 "unmapped_nodes": mc.get("unmapped_nodes", [])}


def from_summary(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no autotune summary (summarize_autotune_log.py): configs tried unknown")
        return
    i, rec = find_kernel(doc.get("kernels", []), ev.kernel, "kernel")
    if rec is None:
        ev.gaps.append(f"{label}: kernel not in the autotune summary (no capture of it)")
        return
    where = f"{label}: kernels[{i}]"
    timed = [c for c in rec.get("configs", []) if c.get("ms") is not None]
    ev.sections["autotune"] = {k: rec.get(k) for k in (
        "kind", "winner", "winner_from", "fastest_ms", "slowest_ms", "spread", "configs", "flags",
        "statistic", "from_cache", "num_bytes", "bytes_source", "standalone_file", "notes")}
    launch = rec.get("launch")
    if launch:
        ev.sections["inputs"] = launch
    else:
        ev.gaps.append(f"{where}: no launch recorded (capture log without a launch event): input shapes unknown")
    ev.fact("n_configs", len(timed) or (1 if rec.get("winner") else None), f"{where}.configs (timed)")
    ev.fact("spread", rec.get("spread"), f"{where}.spread")
    ev.fact("from_cache", rec.get("from_cache"), f"{where}.from_cache")
    winner = rec.get("winner") or {}
    ev.sections.setdefault("timing", {})["autotune_winner_ms"] = winner.get("ms")
    if winner.get("gb_per_s") is not None:
        ev.sections["timing"]["autotune_winner_gb_per_s"] = winner["gb_per_s"]
        ev.sections["timing"].setdefault("gb_per_s_source", f"{where}.winner.gb_per_s")


def _entry(meta: dict, kernel: str) -> tuple[int, dict] | tuple[None, None]:
    kernels = meta.get("kernels", [])
    for i, k in enumerate(kernels):
        if k.get("name") == meta.get("entry_kernel"):
            return i, k
    return find_kernel(kernels, kernel, "name")


def from_meta(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no kernel metadata (inspect_triton_meta.py): pointer hints and access kinds unknown")
        return
    i, k = _entry(doc, ev.kernel)
    if k is None:
        ev.gaps.append(f"{label}: no @triton.jit function matches the kernel")
        return
    where = f"{label}: kernels[{i}]"
    ops = k.get("memory_ops", [])
    loads = [o for o in ops if o.get("op") == "load"]
    stores = [o for o in ops if o.get("op") == "store"]
    atomics = k.get("atomics", [])
    pointer_params = [p for p in k.get("params", []) if p.get("kind") == "pointer"]
    hints = k.get("pointer_hints") or {}
    ev.sections["meta"] = {
        "name": k.get("name"), "kind": k.get("kind"), "source": doc.get("source"),
        "pointers": [{"name": p["name"], "dtype": p.get("dtype"),
                      "divisibility": (hints.get(p["name"]) or {}).get("tt.divisibility"),
                      "pointer_range": (hints.get(p["name"]) or {}).get("tt.pointer_range")}
                     for p in pointer_params],
        "scalars": [{"name": p["name"], "dtype": p.get("dtype")} for p in k.get("params", [])
                    if p.get("kind") == "scalar"],
        "hint_calls": [h.get("text") for h in k.get("hint_calls", [])],
        "loads": len(loads), "stores": len(stores), "atomics": len(atomics),
        "gathers": sum(1 for o in ops if o.get("kind") == "gather"),
        "scatters": sum(1 for o in ops + atomics if o.get("kind") == "scatter"),
        "reductions": [r.get("op") for r in k.get("reductions", [])],
        "findings": k.get("findings", []),
        "inductor_facts": k.get("inductor_facts"),
    }
    ev.fact("loads", len(loads), f"{where}.memory_ops (op=load)")
    ev.fact("stores", len(stores), f"{where}.memory_ops (op=store)")
    ev.fact("atomics", len(atomics), f"{where}.atomics")
    ev.fact("scatter", any(o.get("kind") == "scatter" or o.get("indirect") for o in stores + atomics),
            f"{where}.memory_ops/atomics (kind=scatter or indirect offset)")
    # Multi-pass: an input pointer loaded at several places of a reduction kernel (Inductor's
    # looped reductions re-read the row once per pass).
    # Inductor passes the symbolic sizes of a dynamic-shape graph as ks0, ks1, ... scalars
    dynamic = [p["name"] for p in k.get("params", []) if p.get("kind") == "scalar"
               and re.fullmatch(r"ks\d+", str(p.get("name")))]
    ev.sections["meta"]["dynamic_size_args"] = dynamic
    ev.fact("dynamic_sizes", bool(dynamic), f"{where}.params (scalars named ks<N>: {dynamic or 'none'})")
    ev.fact("dynamic_size_args", ", ".join(dynamic) or None, f"{where}.params")
    if k.get("reductions"):
        bases: dict[str, int] = {}
        for o in loads:
            for b in o.get("bases", []):
                bases[b] = bases.get(b, 0) + 1
        reread = sorted(b for b, n in bases.items() if n > 1)
        ev.sections["meta"]["reread_inputs"] = reread
        ev.fact("multi_pass", bool(reread), f"{where}.memory_ops (same base loaded {reread or 'once'})")
    else:
        ev.fact("multi_pass", False, f"{where}.reductions (none)")


def _isa_record(doc: dict, kernel: str, num_warps: int | None) -> tuple[int, dict] | tuple[None, None]:
    matches = [(i, r) for i, r in enumerate(doc.get("kernels", [])) if r.get("name") == kernel]
    if not matches:
        found = find_kernel(doc.get("kernels", []), kernel, "name")
        matches = [found] if found[1] is not None else []
    if not matches:
        return None, None
    if num_warps is not None:
        for i, r in matches:
            if (r.get("triton_metadata") or {}).get("num_warps") == num_warps:
                return i, r
    return matches[0]


ISA_TOTALS = ("matrix_ops", "atomics", "spills")


def _isa_totals(rec: dict, where: str) -> tuple[dict[str, int], dict[str, str]]:
    """The scanner's ``totals`` of a kernel record, with the field each came from; a record
    written before ``totals`` existed (or with a malformed one) is summed from its families."""
    totals = rec.get("totals")
    if isinstance(totals, dict) and all(type(totals.get(k)) is int for k in ISA_TOTALS):
        return {k: totals[k] for k in ISA_TOTALS}, {k: f"{where}.totals.{k}" for k in ISA_TOTALS}
    from .isa import legacy_totals

    fam, res = rec.get("families"), rec.get("resources")
    summed = legacy_totals(fam if isinstance(fam, dict) else {}, res if isinstance(res, dict) else {})
    return summed, {"matrix_ops": f"{where}.families (mfma/mmac/mma/wgmma)",
                    "atomics": f"{where}.families (atomic)",
                    "spills": f"{where}.resources spill counts / local memory ops"}


def from_isa(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no ISA scan (scan_amdgcn.py): load/store instruction families unknown")
        return
    winner = (ev.sections.get("autotune") or {}).get("winner") or {}
    i, rec = _isa_record(doc, ev.kernel, (winner.get("config") or {}).get("num_warps"))
    if rec is None:
        ev.gaps.append(f"{label}: no listing of this kernel among {len(doc.get('kernels', []))} scanned")
        return
    where = f"{label}: kernels[{i}]"
    fam = rec.get("families", {})
    mix = rec.get("mix", {})
    info = archs.info(rec.get("arch") or "")
    ev.sections["isa"] = {k: rec.get(k) for k in ("name", "format", "arch", "source", "verdict",
                                                   "data_ops", "widths", "resources", "occupancy",
                                                   "findings")}
    ev.sections["isa"]["families"] = {k: v for k, v in fam.items() if v}
    ev.sections["isa"]["mix"] = mix
    ev.sections["isa"]["records_for_kernel"] = sum(1 for r in doc.get("kernels", []) if r.get("name") == ev.kernel)
    totals, sources = _isa_totals(rec, where)
    ev.fact("matrix_ops", totals["matrix_ops"], sources["matrix_ops"])
    if totals["atomics"] and "atomics" not in ev.facts:
        ev.fact("atomics", totals["atomics"], sources["atomics"])
    ev.fact("spills", totals["spills"], sources["spills"])
    ev.fact("valu_per_byte", mix.get("valu_per_byte"), f"{where}.mix.valu_per_byte")
    ev.fact("memory_verdict", rec.get("verdict"), f"{where}.verdict")
    ev.fact("vendor", info.vendor if info else ("nvidia" if rec.get("format") in ("ptx", "sass") else None),
            f"{where}.arch ({rec.get('arch')})")


def from_run(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no standalone run (run_captured_kernel.py): time outside the program unknown")
        return
    best = doc.get("best") or doc.get("fastest")
    if doc.get("status") != "ok" or not best:
        ev.gaps.append(f"{label}: standalone run {doc.get('status')}: {doc.get('error')}")
        return
    t = ev.sections.setdefault("timing", {})
    t.update({"standalone_ms": best.get("ms"), "standalone_config": best.get("config"),
              "standalone_bytes": best.get("bytes"), "standalone_gb_per_s": best.get("gb_per_s"),
              "fastest_config_ms": (doc.get("fastest") or {}).get("ms")})
    if best.get("gb_per_s") is not None:
        t["gb_per_s_source"] = f"{label}: best.gb_per_s"
    # the device time of a launch with L2 flushed (run_captured_kernel.py --timer ...,profiler_flushed)
    # is what DRAM delivers; do_bench's events add the launch latency, which for a kernel of a few
    # microseconds is most of its time (H200: 1.4-4.9x the device time below ~20 us)
    device = next((r for r in doc.get("results") or [] if r.get("best") and r.get("ok")
                   and r.get("timer") == "torch.profiler.l2_flushed"), None)
    if device and device.get("gb_per_s") is not None:
        t.update({"standalone_device_ms": device.get("ms"), "standalone_gb_per_s": device["gb_per_s"],
                  "gb_per_s_source": f"{label}: torch.profiler device time, L2 flushed (captured winner)"})


def from_peak(ev: Evidence, peak: dict | None, device_name: str | None, arch: str | None) -> None:
    t = ev.sections.setdefault("timing", {})
    gbps = t.get("standalone_gb_per_s", t.get("autotune_winner_gb_per_s"))
    ev.fact("gb_per_s", gbps, t.get("gb_per_s_source", "timing"))
    if not peak:
        ev.gaps.append(f"no peak bandwidth known for {device_name or 'the device'} {arch or ''}".rstrip()
                       + ": run measure_peak_bandwidth.py on it, so GB/s gets a % of peak")
        return
    t["peak"] = {k: peak.get(k) for k in ("peak_gbps", "basis", "source", "kind", "where", "device", "arch")}
    if gbps is not None and peak.get("copy_gbps"):
        ev.fact("pct_copy_peak", gbps / peak["copy_gbps"],
                f"{t.get('gb_per_s_source')} / copy peak {peak['copy_gbps']:.0f} GB/s ({peak['source']})")
        t["pct_copy_peak"] = gbps / peak["copy_gbps"]


def from_probe(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no compile probe (probe_compile.py): effect of hints on the ISA unknown")
        return
    results = doc.get("results", [])
    base = {r["arch"]: r for r in results if r.get("variant") == "baseline" and r.get("status") == "ok"}
    rows, found = [], None
    for r in results:
        s = r.get("summary") or {}
        rows.append({"variant": r.get("variant"), "arch": r.get("arch"), "compiled_for": r.get("compiled_for"),
                     "status": r.get("status"), "verdict": s.get("verdict"),
                     "buffer_load": s.get("buffer_load"), "global_load": s.get("global_load"),
                     "load_width": s.get("load_width"), "error": (r.get("error") or "")[:160] or None})
        b = base.get(r.get("arch"))
        if (found is None and b and r.get("status") == "ok" and r.get("variant") != "baseline"
                and s.get("buffer_load", 0) > (b.get("summary") or {}).get("buffer_load", 0)
                and s.get("verdict") == "buffer"):
            found = r.get("variant")
    ev.sections["probe"] = {"targets": doc.get("targets"), "rows": rows,
                            "findings": doc.get("findings", []), "triton_version": doc.get("triton_version")}
    ev.fact("probe_buffer_variant", found, f"{label}: results (first variant turning loads into buffer loads)")


def _variant_row(v: dict) -> dict:
    return {"name": v.get("name"), "status": v.get("status"), "median_ms": v.get("median_ms"),
            "x_vs_baseline": v.get("x_vs_baseline", v.get("speedup_vs_baseline")),
            "gb_per_s": v.get("gb_per_s"),
            "pct_of_peak": v.get("pct_of_copy_peak", v.get("pct_of_peak")),
            "within_noise": v.get("within_noise", v.get("ties_best")),
            "reason": v.get("reason") if v.get("status") != "passed" and v.get("status") != "ok" else None}


def from_benchmark_or_sweep(ev: Evidence, doc: dict | None, label: str) -> None:
    """Measured variants: a variant sweep of the captured kernel, or a benchmark-template run."""
    if doc is None:
        return
    schema = str(doc.get("schema", ""))
    if schema.startswith("variant_sweep/"):
        rows = [_variant_row(v) for v in doc.get("variants", [])]
        best = (doc.get("best") or {}).get("name")
        base = doc.get("baseline") or {}
        noise = base.get("noise_rel")
        timer = doc.get("timer")
        apply = (doc.get("best") or {}).get("apply")
    else:  # benchmark/1: one table per (size, dtype) case; show the first
        cases = doc.get("cases") or [{}]
        rows = [_variant_row(v) for v in cases[0].get("results", [])]
        best = (cases[0].get("ranking") or {}).get("best")
        noise = cases[0].get("noise_rel")
        timer = (doc.get("timing") or {}).get("timer")
        apply = None
    best_row = next((r for r in rows if r["name"] == best), None)
    ev.sections["tuning_runs"] = {"schema": schema, "label": label, "rows": rows, "best": best,
                                  "best_x": (best_row or {}).get("x_vs_baseline"), "noise_rel": noise,
                                  "timer": timer, "apply": apply,
                                  "failed": [r["name"] for r in rows if r["status"] in ("failed", "error")]}


def from_ab(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        return
    ev.sections["fallback_ab"] = {k: doc.get(k) for k in ("disable", "arms", "speedup_fallback_over_compiled",
                                                          "noise_spread", "verdict", "output_check")}
    # measured end to end: the eager fallback's speed-up, and whether it is beyond the run-to-run spread
    speedup, spread = doc.get("speedup_fallback_over_compiled"), doc.get("noise_spread")
    ev.fact("fallback_speedup", speedup, f"{label}: speedup_fallback_over_compiled")
    if isinstance(speedup, (int, float)) and isinstance(spread, (int, float)):
        ev.fact("fallback_beyond_noise", speedup > spread or 1.0 / speedup > spread,
                f"{label}: speedup {speedup:.3f} against noise_spread {spread:.3f}")
    check = doc.get("output_check") or {}
    ev.fact("fallback_outputs_equal", check.get("passed"), f"{label}: output_check.passed")


def from_env(ev: Evidence, doc: dict | None) -> tuple[str | None, str | None]:
    if doc is None:
        ev.gaps.append("no environment record (check_env.py): versions and device unknown")
        return None, None
    devices = doc.get("devices") or []
    dev = devices[0] if devices else {}
    ev.sections["env"] = {"torch": (doc.get("torch") or {}).get("version"),
                          "triton": (doc.get("triton") or {}).get("version"),
                          "device": dev.get("name"), "arch": dev.get("arch"),
                          "platform_kind": doc.get("platform_kind"),
                          "arch_check": (doc.get("arch_check") or {}).get("message"),
                          "buffer_ops": doc.get("buffer_ops")}
    return dev.get("name"), dev.get("arch")


def name_facts(ev: Evidence) -> None:
    from .row_replace import row_pattern

    ev.fact("name_is_gemm", bool(GEMM_NAME.search(ev.kernel)), "kernel name")
    # the row op a bundled one-pass kernel (tko.rowkernels) can replace: Inductor names kernels
    # after their aten ops
    ev.fact("row_pattern", row_pattern(ev.kernel), "kernel name (tko.row_replace.row_pattern)")


# ----------------------------------------------------------------------------- measured remedies

# The config arms of try_remedies.py: when none beat the baseline, Triton tuning was tried and did not help.
TUNING_ARMS = ("coordinate_descent", "max_autotune_no_cudagraphs", "pinned")


def _noise_pct(noise: Any) -> float | None:
    """A max/min spread (1.03) as +- percent (3.0)."""
    return round(100.0 * (noise - 1.0), 2) if isinstance(noise, (int, float)) and noise >= 1.0 else None


def _arm_x(arm: dict) -> str:
    return f"{arm['name']} {arm['x_baseline']:.2f}x"


def trial_outcome(doc: dict) -> dict:
    """What a ``remedy_trials/1`` document measured: the arms that ran, the winner (the fastest arm
    beyond noise with equal outputs, as try_remedies.py picks it), the faster arms that do not count."""
    arms = [a for a in doc.get("arms") or [] if isinstance(a, dict)]
    ran = [a for a in arms if a.get("name") != "baseline" and a.get("status") == "ok"
           and isinstance(a.get("x_baseline"), (int, float))]
    faster = [a for a in ran if a.get("beyond_noise") is True and a["x_baseline"] > 1.0]
    equal = [a for a in faster if (a.get("outputs") or {}).get("result") == "equal"]
    winner = max(equal, key=lambda a: a["x_baseline"]) if equal else None
    tuning = [a for a in ran if a["name"] in TUNING_ARMS]
    noise_pct = _noise_pct(doc.get("noise"))
    if winner:
        what = f"{winner.get('change') or winner['name']}: {winner['x_baseline']:.2f}x end to end, outputs equal"
    elif ran:
        what = ("nothing tried beat the baseline beyond run-to-run noise"
                + (f" (+-{noise_pct:.1f} %)" if noise_pct is not None else ""))
    else:
        what = "no remedy arm finished a run: nothing measured"
    return {"ran": ran, "faster": faster, "winner": winner, "tuning": tuning, "noise_pct": noise_pct,
            "not_equal": [a for a in faster if a is not winner and (a.get("outputs") or {}).get("result") != "equal"],
            "what_to_change": what}


def trial_facts(doc: dict | None, label: str) -> dict[str, Fact]:
    """Facts of a ``remedy_trials/1`` document, for the kernel rules and the program rules."""
    if not doc:
        return {}
    o = trial_outcome(doc)
    facts: dict[str, Fact] = {}

    def put(name, value, where):
        if value is not None:
            facts[name] = Fact(value, f"{label}: {where}")

    put("trials_ran", bool(o["ran"]), "arms[] (status ok, besides the baseline)")
    put("trials_noise_pct", o["noise_pct"], f"noise {doc.get('noise')}")
    if o["ran"]:
        put("remedy_tried", ", ".join(_arm_x(a) for a in o["ran"]), "arms[].x_baseline")
    w = o["winner"]
    if w:
        i = next(i for i, a in enumerate(doc["arms"]) if a is w)
        put("remedy_winner", w["name"], f"arms[{i}] (fastest ok arm, beyond_noise, outputs equal)")
        put("remedy_x", w["x_baseline"], f"arms[{i}].x_baseline")
        put("remedy_change", w.get("change") or w["name"], f"arms[{i}].change")
        put("remedy_noise_pct", _noise_pct(w.get("noise")), f"arms[{i}].noise {w.get('noise')}")
    elif o["ran"]:
        put("remedy_none_faster", True, "no arm with x_baseline > 1, beyond_noise and outputs equal")
    if o["not_equal"]:
        put("remedy_faster_outputs_differ", ", ".join(
            f"{_arm_x(a)} (outputs {(a.get('outputs') or {}).get('result', 'unknown')})" for a in o["not_equal"]),
            "arms[] faster beyond noise, outputs not equal")
    if o["tuning"]:
        gained = [a for a in o["tuning"] if a in o["faster"]]
        put("tuning_measured_no_faster", not gained, "arms[] " + ", ".join(a["name"] for a in o["tuning"])
            + (" (none beyond noise)" if not gained else ""))
        put("tuning_arms", ", ".join(_arm_x(a) for a in o["tuning"]), "arms[].x_baseline")
    replaced = [a for a in o["ran"] if a.get("name") == "replace"]
    if replaced:  # the bundled row kernels measured in the program: the offer stands only if they helped
        put("replace_measured_no_faster", replaced[0] not in o["faster"],
            f"arms[] replace {replaced[0]['x_baseline']:.2f}x")
    return facts


def trials_section(doc: dict, label: str) -> dict:
    """The measured trial table a report shows (every arm, the baseline first)."""
    o = trial_outcome(doc)
    rows = [{"name": a.get("name"), "status": a.get("status"), "reason": a.get("reason"),
             "median_ms": a.get("median_ms"), "x_baseline": a.get("x_baseline"), "spread": a.get("spread"),
             "noise_pct": _noise_pct(a.get("noise")), "beyond_noise": a.get("beyond_noise"),
             "outputs": (a.get("outputs") or {}).get("result"), "outputs_reason": (a.get("outputs") or {}).get("reason"),
             "change": a.get("change"), "proposed_by": a.get("proposed_by")}
            for a in doc.get("arms") or [] if isinstance(a, dict)]
    return {"label": label, "rows": rows, "winner": (o["winner"] or {}).get("name"),
            "what_to_change": o["what_to_change"], "noise": doc.get("noise"), "noise_pct": o["noise_pct"],
            "runs": doc.get("runs"), "metric_from": doc.get("metric_from"),
            "device": (doc.get("device") or {}).get("name"), "command": doc.get("command"),
            "not_equal": [a["name"] for a in o["not_equal"]]}


def from_trials(ev: Evidence, doc: dict | None, label: str) -> None:
    """End-to-end remedy trials (try_remedies.py): program-level, attached to every kernel."""
    if doc is None:
        return
    ev.sections["trials"] = trials_section(doc, label)
    ev.facts.update(trial_facts(doc, label))


# ----------------------------------------------------------------------------- speed of light


def _cause_text(causes: list[dict]) -> str:
    parts = []
    for c in causes or []:
        bound = f", at most {c['at_most_x']:.2f}x" if isinstance(c.get("at_most_x"), (int, float)) else ""
        parts.append(f"{c.get('cause')} ({c.get('detail')}" + (f"; {c['remedy']}" if c.get("remedy") else "")
                     + f"{bound})")
    return "; ".join(parts) or "no cause named"


def _costly_text(costly: dict | None) -> str:
    src = (costly or {}).get("source") or {}
    return ", ".join(f"{op} x{n}" for op, n in sorted(src.items(), key=lambda kv: -kv[1])) or "none named"


def from_sol(ev: Evidence, doc: dict | None, label: str) -> None:
    """speed_of_light.py: the kernel against its memory twin and its copy floor."""
    if doc is None:
        return
    c = doc.get("classification") or {}
    n = c.get("numbers") or {}
    model = doc.get("byte_model") or {}
    bw = doc.get("bandwidth") or {}
    above = [k for k, b in bw.items() if isinstance(b, dict) and b.get("above_peak")]
    ev.sections["speed_of_light"] = {
        "label": label, "kernel": doc.get("kernel"), "class": c.get("class"), "says": c.get("says"),
        "numbers": n, "causes": c.get("causes") or [], "offline": doc.get("offline"), "timer": doc.get("timer"),
        "twin_valid": (doc.get("validity") or {}).get("valid"), "peak_source": (doc.get("peak") or {}).get("source"),
        "unique_bytes": model.get("unique_bytes"), "inductor_bytes": model.get("inductor_bytes"),
        "bytes_upper_bound": model.get("upper_bound"), "bandwidth": bw, "above_peak": above,
        "chart_svg": doc.get("chart_svg")}
    where = f"{label}: classification"
    ev.fact("sol_class", c.get("class"), f"{where}.class")
    for key in ("kernel_ms", "twin_ms", "copy_floor_ms", "kernel_over_floor", "twin_over_floor", "kernel_over_twin"):
        ev.fact(f"sol_{key}", n.get(key), f"{where}.numbers.{key}")
    one_pass = n.get("one_pass_floor_ms")
    if n.get("passes_floor_ms") and one_pass and n.get("kernel_ms"):
        # a multi-pass kernel: what reading each input once could reach
        ev.fact("sol_one_pass_floor_ms", one_pass, f"{where}.numbers.one_pass_floor_ms")
        ev.fact("sol_one_pass_gain", n["kernel_ms"] / one_pass, f"{where}.numbers: kernel_ms / one_pass_floor_ms")
    if c.get("class") == "access_pattern_bound":
        ev.fact("sol_causes", _cause_text(c.get("causes")), f"{where}.causes")
    if c.get("class") == "arithmetic_bound":
        ev.fact("sol_costly_ops", _costly_text(c.get("costly_ops")), f"{where}.costly_ops.source")
    ev.fact("sol_unique_bytes", model.get("unique_bytes"), f"{label}: byte_model.unique_bytes")
    ev.fact("sol_inductor_bytes", model.get("inductor_bytes"), f"{label}: byte_model.inductor_bytes")
    if n.get("kernel_ms"):
        ev.fact("bytes_above_peak", bool(above), f"{label}: bandwidth.{'/'.join(above) or 'unique/inductor'}.above_peak")
