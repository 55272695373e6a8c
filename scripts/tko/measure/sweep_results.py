"""The results of a config sweep: each variant against the captured config (time, GB/s, outputs),
ranked beyond noise into ``variant_sweep/1``, how to apply the best, its standalone file, and the
Markdown."""


from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from . import launch_advice, standalone
from .sweep_worker import INTERPRETER_TIMER
from ..base.config import is_block_key
from .sweep_plan import (Plan, Variant, config_text)

# --------------------------------------------------------------------------- results

def _rel(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return abs(a - b) / min(a, b)


def _baseline_block(run: dict) -> dict:
    """The winner's times: its median, the re-time, the noise they give, per-slot medians."""
    base_timing = (run["records"].get("baseline") or {}).get("timing") or {}
    base_ms = base_timing.get("median_ms")
    retime_ms = ((run.get("retime") or {}).get("timing") or {}).get("median_ms")
    retime_rel = _rel(base_ms, retime_ms)
    # half the winner's own p20-p80 range: two back-to-back medians agree far better than two
    # processes do (0.01-0.3 % vs 0.3-0.9 % between runs on an H200), so the retime alone flatters
    spread_rel = ((base_timing["p80_ms"] - base_timing["p20_ms"]) / (2 * base_ms)
                  if base_ms and base_timing.get("p20_ms") is not None and base_timing.get("p80_ms") is not None
                  else None)
    known = [n for n in (retime_rel, spread_rel) if n is not None]
    noise = max(known) if known else None
    # the winner as timed by each worker on its own device (several workers), else the one timing
    slot_base = {s["slot"]: (s.get("baseline") or {}).get("median_ms") for s in run["slots"]}
    slot_medians = [v for v in slot_base.values() if v]
    device_spread = (max(slot_medians) - min(slot_medians)) / min(slot_medians) if len(slot_medians) > 1 else None
    return {"median_ms": base_ms, "retime_median_ms": retime_ms, "noise_rel": noise,
            "retime_rel": retime_rel, "spread_rel": spread_rel,
            "retime_slot": (run.get("retime") or {}).get("slot"),
            "per_slot_ms": {k: v for k, v in slot_base.items() if v}, "device_spread_rel": device_spread}


def _shared_notes(devices: list, workers_per_device: int) -> list[str]:
    shared = []
    if len(devices) > 1:
        shared.append(f"variants ran on {len(devices)} devices: each is compared with the winner timed on its "
                      "own device (x vs baseline), and ranked by that ratio")
    if workers_per_device > 1:
        shared.append(f"{workers_per_device} workers shared each device, so timings may overlap other "
                      "variants' runs; use --workers-per-device 1 for final numbers")
    return shared


def _variant_row(v: Variant, rec: dict | None, base: dict, num_bytes, peak, interpret: bool,
                 flat0: dict | None = None, grid0: list | None = None) -> dict:
    """One variant's row: its status, timing and the ratio to the winner timed on its device."""
    from .bench import gb_per_s
    from . import peaks

    base_ms, noise = base["median_ms"], base["noise_rel"]
    rec = rec or {"passed": False, "error": "not run (no worker took it)"}
    timing = rec.get("timing")
    ms = (timing or {}).get("median_ms")
    status = "ok" if rec.get("passed") and timing else ("error" if rec.get("error") else "failed")
    ref_ms = base["per_slot_ms"].get(rec.get("slot")) or base_ms
    row = v.to_json()
    row.update(status=status, check=rec.get("check"), error=rec.get("error"), timing=timing,
               median_ms=ms, p20_ms=(timing or {}).get("p20_ms"), p80_ms=(timing or {}).get("p80_ms"),
               baseline_ms_same_device=ref_ms,
               x_vs_baseline=(ref_ms / ms) if ms and ref_ms else None,
               gb_per_s=gb_per_s(num_bytes, ms) if not interpret else None,
               slot=rec.get("slot"), device_index=rec.get("device_index"), device_name=rec.get("device_name"),
               seconds=rec.get("seconds"), phase_s=rec.get("phase_s"))
    row["pct_of_copy_peak"] = peaks.percent_of_peak(row["gb_per_s"], peak)
    row["within_noise"] = (v.name != "baseline" and ms is not None and noise is not None
                           and _rel(ms, ref_ms) is not None and _rel(ms, ref_ms) <= noise)
    row["reason"] = (rec.get("check") or {}).get("reason") if status == "failed" else rec.get("error")
    unwritten = status == "failed" and (rec.get("check") or {}).get("unwritten_count")
    note = _kept_grid_note(v, flat0 or {}, grid0) if unwritten and grid0 and v.grid == grid0 else None
    if note:
        row["reason"] = f"{row['reason']}; {note}" if row["reason"] else note
    return row


def _kept_grid_note(v: Variant, flat0: dict, grid0: list) -> str | None:
    """Why a block move can leave outputs unwritten: it launched the recorded grid. Which of the two
    causes holds is not known here (the tutorials' softmax launches one program per row whatever its
    block: a block under the row length leaves the rest of each row unwritten)."""
    moved = [k for k, val in v.flat.items() if is_block_key(k, val) and flat0.get(k) != val]
    if not moved:
        return None
    return (f"{', '.join(moved)} changed but the launch kept the recorded grid {grid0}: the capture recorded "
            "no grid for this block (a grid function's grids are recorded as grid_moves; a fixed grid is not); "
            "either the grid must follow the block or the kernel needs the block to cover its data (a whole row)")


def _rank(rows: list[dict], base_ms: float | None, noise: float | None) -> dict:
    """Rank the rows that ran (times on the winner's scale); the errors are listed as excluded."""
    from .bench import rank_variants

    def on_baseline_scale(r: dict, key: str):
        # a time measured on another device, scaled by how the winner ran there
        value, ref = r[key], r["baseline_ms_same_device"]
        return value * base_ms / ref if value is not None and ref and base_ms else value

    ranking = rank_variants([{"name": r["name"], "passed": r["status"] == "ok",
                              "median_ms": on_baseline_scale(r, "median_ms"), "p20_ms": on_baseline_scale(r, "p20_ms"),
                              "p80_ms": on_baseline_scale(r, "p80_ms"),
                              "reason": r["reason"] if r["status"] == "failed" else None} for r in rows
                             if r["status"] != "error"], noise_rel=noise or 0.0)
    for r in rows:
        if r["status"] == "error":
            ranking["excluded"].append({"name": r["name"], "reason": "error: " + str(r["error"])})
    return ranking


def _best_and_summary(plan: Plan, rows: list[dict], best_name, noise: float | None,
                      interpret: bool) -> tuple[bool, dict]:
    """Whether the best is within noise of the winner, and the summary block."""
    best = next((r for r in rows if r["name"] == best_name), None)
    within_noise = bool(best and best_name != "baseline" and noise is not None and best["x_vs_baseline"]
                        and best["x_vs_baseline"] - 1.0 <= noise)
    ok = [r for r in rows if r["status"] == "ok"]
    best_text = str(best_name) + (f" ({best['x_vs_baseline']:.3f}x baseline" + (", within noise" if within_noise else "")
                                  + ")" if best and best.get("x_vs_baseline") else "")
    if interpret:
        best_text += " [interpreter: not a performance number]"
    counts = {k: sum(1 for r in rows if r["status"] == k) for k in ("ok", "failed", "error")}
    summary = {"text": f"{len(plan.variants)} variants, {len(ok)} passed and timed, "
                       f"{len(rows) - len(ok)} failed or errored; best {best_text}",
               "variants": len(plan.variants), "status_counts": counts, "best": best_text, "noise_rel": noise}
    return within_noise, summary


def assemble(plan: Plan, run: dict, *, devices: list, workers_per_device: int, warmup_ms: float, rep_ms: float,
             interpret: bool, wall_s: float, compile_info: dict | None, probe_file: str | None) -> dict:
    from . import peaks

    num_bytes = plan.spec.get("num_bytes")
    base = _baseline_block(run)
    noise = base["noise_rel"]
    first_slot = next((s for s in run["slots"] if s.get("device_name")), {})
    peak = None
    if not interpret and first_slot:
        peak = peaks.lookup(first_slot["device_name"], first_slot.get("device_arch"))
    first = plan.variants[0]
    rows = [_variant_row(v, run["records"].get(v.name), base, num_bytes, peak, interpret, first.flat, first.grid)
            for v in plan.variants]
    ranking = _rank(rows, base["median_ms"], noise)
    best_name = ranking["best"]
    within_noise, summary = _best_and_summary(plan, rows, best_name, noise, interpret)
    return {
        "kernel_file": plan.kernel_file,
        "kernel": plan.kernel,
        "launch": plan.launch,
        "probe_file": probe_file,
        "captured_device": plan.spec.get("device") or {},
        "backend_options": plan.backend_options,
        "devices": [{"index": d} for d in devices] if not interpret else [{"index": None, "name": "cpu"}],
        "workers_per_device": workers_per_device,
        "slots": run["slots"],
        "interpreter": interpret,
        "timer": INTERPRETER_TIMER if interpret else "triton.testing.do_bench (median, p20, p80)",
        "warmup_ms": warmup_ms,
        "rep_ms": rep_ms,
        "num_bytes": num_bytes,
        "peak": peak,
        "compile": compile_info,
        "variants": rows,
        "ranking": ranking,
        "baseline": base,
        "best": {"name": best_name, "within_noise": within_noise, "file": None, "apply": None},
        "notes": plan.notes + _shared_notes(devices, workers_per_device)
        + ([f"timing: {INTERPRETER_TIMER}; the ranking is only a test of the path"] if interpret else []),
        "wall_s": round(wall_s, 3),
        "timing_s": run.get("timing_s"),
        "summary": summary,
        "cases": [{k: r[k] for k in ("name", "status", "median_ms", "x_vs_baseline", "gb_per_s")} for r in rows],
    }


def how_to_apply(row: dict, plan: Plan) -> str:
    if row["kind"] == "baseline" and launch_advice.is_plain_launch(plan.spec):
        return f"keep the launch at {launch_advice.site_text(plan.spec)} as it is"
    if row["kind"] == "baseline":
        return "keep the captured config: " + config_text(plan.variants[0].flat)
    if row["kind"] == "config" and launch_advice.is_plain_launch(plan.spec):
        base = plan.variants[0]
        return launch_advice.launch_text(plan.spec, row["config"], base.flat, row.get("grid"), base.grid,
                                         row.get("x_vs_baseline"))
    if row["kind"] == "config":
        # an @triton.autotune over @triton.heuristics: the heuristics' blocks are not the config's to pin
        heur, base = set(plan.spec.get("heuristics") or []), plan.variants[0].flat
        pinned = {k: v for k, v in row["config"].items() if k not in heur}
        text = "pin " + config_text(pinned)
        computed = {k: v for k, v in row["config"].items() if k in heur and base.get(k) != v}
        if computed:
            same = pinned == {k: v for k, v in base.items() if k not in heur}
            text = launch_advice.heuristics_text(plan.spec, computed) + ("" if same else "; and " + text)
        if plan.launch == "inductor":
            # an Inductor kernel's configs are generated, not written by the user; its own
            # coordinate-descent tuner walks the same neighbourhood (block sizes x2 and /2,
            # num_warps; num_stages for matmuls) from the winner and keeps what is faster
            text += (" (an Inductor kernel: set torch._inductor.config.coordinate_descent_tuning = True, "
                     "or TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1, and check in a new capture that its "
                     "winner became this config; or use the best-variant file for a hand-written copy)")
            if larger_reduction_block(row["config"], plan.variants[0].flat):
                text += ("; note: the sweep timed it with Inductor's dynamic R0_BLOCK halving off, which in "
                         "a program (TORCHINDUCTOR_DYNAMIC_SCALE_RBLOCK=1, the default) adds a config with "
                         "R0_BLOCK halved when registers limit occupancy and keeps the faster of the two")
        return text
    if row["kind"] == "env":
        return "set " + " ".join(f"{k}={v}" for k, v in row["env"].items()) + " in the environment"
    return "apply this source edit:\n" + (row["source_diff"] or "")


def larger_reduction_block(config: dict, winner: dict) -> bool:
    """A reduction config with a larger R*_BLOCK, or a larger XBLOCK next to one, than the winner's."""
    rkeys = [k for k in config if k.startswith("R") and k.endswith("_BLOCK")]
    if not rkeys:
        return False
    return any(isinstance(config.get(k), int) and isinstance(winner.get(k), int) and config[k] > winner[k]
               for k in rkeys + ["XBLOCK"])


def write_best(plan: Plan, payload: dict, path: str | Path) -> str | None:
    """The standalone file with the best variant's source and config; saved inputs by absolute path."""
    name = payload["best"]["name"]
    if name is None:
        return None
    variant = next(v for v in plan.variants if v.name == name)
    text = Path(variant.file).read_text(encoding="utf-8")
    spec = json.loads(json.dumps(plan.spec))
    here = os.path.dirname(plan.kernel_file)
    for desc in spec["args"]:
        if desc.get("saved"):
            desc["saved"] = os.path.join(here, desc["saved"])
    spec["configs"] = [{"flat": variant.flat, "grid": variant.grid}] + [
        c for c in spec["configs"][1:] if c.get("flat") != variant.flat]
    text = standalone.replace_spec(text, spec)
    if variant.env:
        # first, before triton is imported: some Triton versions read these at import
        line = f"__import__(\"os\").environ.update({variant.env!r})  # the sweep's best variant needs this\n"
        futures = list(re.finditer(r"^from\s+__future__\s+import\s+.*$", text, re.M))
        cut = futures[-1].end() + 1 if futures else 0
        text = text[:cut] + line + text[cut:]
    from ..base.atomic import write_text

    write_text(path, text)
    row = next(r for r in payload["variants"] if r["name"] == name)
    payload["best"]["file"] = str(Path(path).resolve())
    payload["best"]["apply"] = how_to_apply(row, plan)
    if payload["interpreter"]:  # the interpreter ran it: the path is checked, no speed was measured
        payload["best"]["apply"] = ("interpreter run (TRITON_INTERPRET=1): its times are not a speed; sweep on a "
                                    "GPU before changing anything (the change this variant would be: "
                                    + how_to_apply(dict(row, x_vs_baseline=None), plan) + ")")
    elif payload["best"]["within_noise"]:
        payload["best"]["apply"] = ("within the noise of the captured winner: re-measure before changing "
                                    "anything; if it holds, " + payload["best"]["apply"])
    return str(path)


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(payload: dict) -> str:
    from ..base import markdown as md

    interp = payload["interpreter"]
    lines = [f"# Variant sweep: {md.code(payload['kernel'])}", "",
             f"Kernel file {md.code(payload['kernel_file'])} ({md.text(payload['launch'])} launch). Timer: {payload['timer']}, "
             f"warm-up {payload['warmup_ms']:g} ms, rep {payload['rep_ms']:g} ms, the same for every variant. "
             f"{len(payload['slots'])} worker(s) over {len(payload['devices'])} device(s); wall time "
             f"{payload['wall_s']:.1f} s, of which timing {_fmt(payload.get('timing_s'), '.1f')} s.", ""]
    if interp:
        lines += ["**Interpreter run (TRITON_INTERPRET=1): the times below are not performance numbers.**", ""]
    b = payload["baseline"]
    pct = lambda v: _fmt(None if v is None else 100 * v, ".2f")  # noqa: E731
    lines += [f"Baseline {_fmt(b['median_ms'], '.4f')} ms, re-timed at the end {_fmt(b['retime_median_ms'], '.4f')} ms"
              f" ({pct(b.get('retime_rel'))}%); half its p20-p80 range {pct(b.get('spread_rel'))}%: noise "
              f"{pct(b['noise_rel'])}%, the larger. Differences inside the noise are marked `~`."]
    if b.get("per_slot_ms"):
        lines[-1] += (" Each worker timed the winner on its own device first ("
                      + ", ".join(f"{k} {v:.4f} ms" for k, v in sorted(b["per_slot_ms"].items()))
                      + f"; spread {pct(b.get('device_spread_rel'))}%); x vs baseline compares on the same device.")
    lines.append("")
    lines += ["| rank | variant | ms (p20-p80) | x vs baseline | GB/s | % copy peak | check | device |",
              "|---|---|---|---|---|---|---|---|"]
    ranks = {r["name"]: r for r in payload["ranking"]["ranked"]}
    order = [r["name"] for r in payload["ranking"]["ranked"]] + [
        v["name"] for v in payload["variants"] if v["name"] not in ranks]
    rows = {v["name"]: v for v in payload["variants"]}
    for name in order:
        v = rows[name]
        r = ranks.get(name)
        check = "pass" if v["status"] == "ok" else f"**{md.text(v['status'])}**: " + md.text(v.get("reason"), 140)
        x = _fmt(v["x_vs_baseline"], ".3f") + (" ~" if v.get("within_noise") else "")
        ms = (f"{v['median_ms']:.4f} ({v['p20_ms']:.4f}-{v['p80_ms']:.4f})" if v["median_ms"] else "-")
        lines.append(f"| {r['rank'] if r else '-'} | {md.code(name)} | {ms} | {x} | {_fmt(v['gb_per_s'], '.1f')} | "
                     f"{_fmt(v['pct_of_copy_peak'], '.1f')} | {check} | "
                     f"{md.text(v.get('device_name') or '-')} {md.text(v.get('slot') or '')} |")
    best = payload["best"]
    lines += ["", f"## Best: {md.code(best['name'])}" + (" (within noise of the baseline)" if best["within_noise"] else ""), ""]
    if best.get("file"):
        lines.append(f"Runnable file: {md.code(best['file'])}")
    if best.get("apply"):
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", best["apply"])), default=0))
        lines += ["", fence + "diff" if "apply this source edit" in best["apply"] else fence,
                  best["apply"], fence]
    if payload["notes"]:
        lines += ["", "## Notes", ""] + [f"- {md.text(n)}" for n in payload["notes"]]
    return "\n".join(lines) + "\n"
