"""The summary of parsed autotune logs (``autotune_summary/2``): per kernel its tunings deduplicated,
configs ranked with their spread and flags, and its Markdown rendering."""


from __future__ import annotations

import functools
import operator
from pathlib import Path
from typing import Any

from ..base.errors import InputError
from .autotune_records import (_INT_OR_NONE, KernelFacts, ParsedLogs, Timing, Tuning, _KWARG_PLAIN, _same_config, _timing_key, config_label)
from .autotune_log import (FMT_TRITON, paused_gc)

# ---------------------------------------------------------------------------
# summary

SPREAD_RULE = "small_autotune_spread"   # the threshold of references/decision_rules.yaml


@functools.lru_cache(maxsize=1)
def default_spread_threshold() -> float:
    """The ``flat_spread`` cut: ``small_autotune_spread`` of references/decision_rules.yaml."""
    from ..base.decide import load_rules

    entry = (load_rules().get("thresholds") or {}).get(SPREAD_RULE)
    value = entry.get("value") if isinstance(entry, dict) else entry
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InputError(f"decision rules lack the threshold {SPREAD_RULE}")
    return float(value)


FLAG_TEXT = {
    "single_config": "only one config was declared or timed: this kernel was never tuned here "
                     "(Inductor's own logs do not say whether an autotune cache supplied it; "
                     "the capture log does, as from_cache)",
    "from_cache": "an autotune cache supplied the config, so nothing was timed in this run",
    "flat_spread": "slowest/fastest is below the spread threshold: tuning these configs is pointless",
    "spills": "at least one config spills registers",
    "winner_spills": "the chosen config spills registers",
    "failed_configs": "some configs failed or were skipped (no time)",
    "no_timings": "the log names the configs but prints no per-config times",
    "winner_not_fastest": "the reported winner is not the fastest config timed here",
    "retuned": "the kernel was tuned more than once (several shapes, processes or runs)",
    "winners_disagree": "different tunings picked different winners",
    "coordesc_improved": "coordinate descent found a config faster than the autotune winner",
    "several_source_files": "the name belongs to more than one module (different graphs reuse names)",
}


def _same_tuning(a: Tuning, b: Tuning) -> bool:
    """The same benchmarking reported twice (e.g. +inductor lines and the metric table)."""
    if a.kernel != b.kernel or a.phase != b.phase or len(a.timings) != len(b.timings) \
            or not any(t.ms is not None for t in a.timings):
        return False  # without times two tunings cannot be told apart from two real ones
    times_b = {_timing_key(t): t.ms for t in b.timings}
    for t in a.timings:
        key = _timing_key(t)
        if key not in times_b:
            return False
        x, y = t.ms, times_b[key]
        if (x is None) != (y is None):
            return False
        if x is not None and abs(x - y) > 1e-6 + 1e-6 * abs(x):  # logs print 6 decimals
            return False
    return True


def _merge(into: Tuning, other: Tuning) -> None:
    by_key = {_timing_key(t): t for t in into.timings}
    for t in other.timings:
        mine = by_key[_timing_key(t)]
        for name in ("n_regs", "n_spills", "shared", "gb_per_s"):
            if getattr(mine, name) is None and getattr(t, name) is not None:
                setattr(mine, name, getattr(t, name))
    if into.winner is None and other.winner is not None:
        into.winner, into.winner_ms = other.winner, other.winner_ms
    if into.statistic == "unknown" and other.statistic != "unknown":
        into.statistic, into.statistic_basis = other.statistic, other.statistic_basis
    into.origins += [o for o in other.origins if o not in into.origins]


def _dedupe(tunings: list[Tuning]) -> list[Tuning]:
    kept: list[Tuning] = []
    groups: dict[tuple, list[Tuning]] = {}  # twins share kernel and phase: search only those
    for tuning in tunings:
        group = groups.setdefault((tuning.kernel, tuning.phase), [])
        twin = next((k for k in group if _same_tuning(k, tuning)), None)
        if twin is None:
            kept.append(tuning)
            group.append(tuning)
        else:
            _merge(twin, tuning)
    return kept


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def _timing_row(t: Timing, fastest: float | None, num_bytes: int | None) -> dict:
    ms, gbps = t.ms, t.gb_per_s
    if gbps is None and num_bytes and ms:
        gbps = num_bytes / 1e9 / (ms / 1e3)
    return {"config": t.config, "label": _label(t.config),
            "ms": None if ms is None else round(ms, 6),
            "x_fastest": round(ms / fastest, 4) if ms and fastest else None,
            "n_regs": t.n_regs, "n_spills": t.n_spills, "shared": t.shared,
            "gb_per_s": None if gbps is None else round(gbps, 2)}


def _label(config: dict) -> str:
    """``config_label(config)``; the label of a plain event record (int or str kwargs, no
    extras, int or no warps and stages) is made once per distinct record."""
    kwargs, warps, stages = config.get("kwargs"), config.get("num_warps"), config.get("num_stages")
    if type(kwargs) is dict and not config.get("extras") and type(warps) in _INT_OR_NONE \
            and type(stages) in _INT_OR_NONE and _KWARG_PLAIN.issuperset(map(type, kwargs.values())):
        return _plain_label(tuple(kwargs.items()), warps, stages)
    return config_label(config)


@functools.lru_cache(maxsize=4096)
def _plain_label(kwargs: tuple, warps: int | None, stages: int | None) -> str:
    # the key holds no bool or float, so equal keys are records with equal labels
    return config_label({"kwargs": dict(kwargs), "num_warps": warps, "num_stages": stages})


_timing_ms = operator.attrgetter("ms")


def _tuning_view(t: Tuning, num_bytes: int | None) -> dict:
    timed = [x for x in t.timings if x.ms is not None]
    # the timed configs by time (a stable sort: ties keep log order), then the untimed ones
    ranked = sorted(timed, key=_timing_ms)
    if len(timed) < len(t.timings):
        ranked += [x for x in t.timings if x.ms is None]
    fastest = ranked[0].ms if timed else None
    slowest = ranked[len(timed) - 1].ms if timed else None
    rows = [_timing_row(x, fastest, num_bytes) for x in ranked]
    for rank, row in enumerate(rows, 1):
        row["rank"] = rank if row["ms"] is not None else None
    winner = t.winner
    winner_ms = t.winner_ms
    if winner is None and timed:
        # Inductor and Triton both keep the config with the smallest time (the first of equals)
        winner, winner_ms = ranked[0].config, fastest
    win_row = None
    if winner is not None:
        match = next((i for i, x in enumerate(ranked) if _same_config(x.config, winner)), None)
        if match is None:
            win_row = _timing_row(Timing(winner, winner_ms), fastest, num_bytes)
            win_row["ms"] = _round(winner_ms)
        else:  # the winner's row, without its rank (its last item)
            win_row = dict(rows[match])
            del win_row["rank"]
    return {"phase": t.phase, "format": t.fmt, "origins": t.origins, "pid": t.pid,
            "statistic": t.statistic, "statistic_basis": t.statistic_basis,
            "duration_s": t.duration_s, "configs": rows, "winner": win_row,
            "fastest_ms": rows[0]["ms"] if timed else None,  # _round(fastest), as its row has it
            "slowest_ms": rows[len(timed) - 1]["ms"] if timed else None,
            "spread": _round(slowest / fastest, 4) if fastest and slowest and len(timed) > 1 else None,
            "timed": len(timed), "failed": len(t.timings) - len(timed) if t.fmt != FMT_TRITON else 0}


def summarize(parsed: ParsedLogs, spread_threshold: float | None = None) -> dict:
    """Per kernel: ranked configs, winner, spread, GB/s, regs/spills and flags.

    ``spread_threshold`` None: :func:`default_spread_threshold` (the rules file's)."""
    if spread_threshold is None:
        spread_threshold = default_spread_threshold()
    with paused_gc():
        return _summarize(parsed, spread_threshold)


def _summarize(parsed: ParsedLogs, spread_threshold: float) -> dict:
    tunings = _dedupe(parsed.tunings)
    names = list(dict.fromkeys([t.kernel for t in tunings] + list(parsed.facts)))
    by_kernel: dict[str, list[Tuning]] = {}
    for t in tunings:
        by_kernel.setdefault(t.kernel, []).append(t)
    kernels = [_kernel_summary(name, parsed.facts.get(name) or KernelFacts(), by_kernel.get(name, []),
                               spread_threshold) for name in names]
    kernels.sort(key=lambda k: -((k["winner"] or {}).get("ms") or 0.0))
    return {"inputs": parsed.inputs, "spread_threshold": spread_threshold,
            "flag_meanings": {f: FLAG_TEXT[f] for f in FLAG_TEXT},
            "kernels": kernels, "skipped": parsed.skipped}


# The fields of the headline tuning that the kernel's entry carries (autotune_summary/2 writes
# them once, there); :func:`full_tuning` puts them back.
HEADLINE_SHARED = ("statistic", "statistic_basis", "configs", "fastest_ms", "slowest_ms", "spread")


def full_tuning(kernel: dict, tuning: dict) -> dict:
    """A ``tunings[]`` entry of a summary kernel with every field, the headline's included."""
    if not tuning.get("headline"):
        return tuning
    shared = {key: kernel.get(key) for key in HEADLINE_SHARED}
    if "winner" not in tuning:
        shared["winner"] = kernel.get("winner")
    return {**shared, **tuning}


def _kernel_summary(name: str, fact: KernelFacts, mine: list[Tuning], spread_threshold: float) -> dict:
    """One kernel of the summary: its tunings, the config it runs, and the flags."""
    auto = [_tuning_view(t, fact.num_bytes) for t in mine if t.phase == "autotune"]
    coord = [_tuning_view(t, fact.num_bytes) for t in mine if t.phase == "coordesc"] \
        if len(auto) < len(mine) else []
    # the headline is the autotune that timed the most configs (the latest on a tie)
    head = auto[0] if len(auto) == 1 else \
        max(reversed(auto), key=lambda v: (v["timed"], len(v["configs"])), default=None)
    winner = head["winner"] if head else None
    final = coord[-1]["winner"] if coord and coord[-1]["winner"] else None
    chosen = final or winner
    chosen_from = "coordesc" if final else ("autotune" if winner else None)
    if chosen is None and len(fact.configs) == 1:
        # nothing was timed; the kernel runs its only (or cache-supplied) config
        chosen = _timing_row(Timing(fact.configs[0], None), None, fact.num_bytes)
        chosen_from = "from_cache" if fact.from_cache else "only_config"
    statistic = head["statistic"] if head else (coord[0]["statistic"] if coord else "unknown")
    configs = head["configs"] if head else []
    flags = _kernel_flags(fact, auto, coord, head, final, chosen, spread_threshold)
    entry = {
        "kernel": name,
        "kind": fact.kind,
        "source_files": fact.source_files,
        "standalone_file": fact.standalone_file,
        "declared_configs": fact.declared_configs,
        "from_cache": fact.from_cache,
        "statistic": statistic,
        "statistic_basis": head["statistic_basis"] if head else None,
        "winner": chosen,
        "winner_from": chosen_from,
        "fastest_ms": head["fastest_ms"] if head else None,
        "slowest_ms": head["slowest_ms"] if head else None,
        "spread": head["spread"] if head else None,
        "configs": configs,
        "num_bytes": fact.num_bytes,
        "bytes_source": fact.bytes_source,
        "launches": fact.launches,
        "tunings": auto,
        "coordesc": coord,
        "flags": flags,
        "notes": fact.notes,
    }
    for view in auto:
        view["headline"] = view is head
    if head:  # the headline's rows and figures are the kernel's own fields: written once
        for key in HEADLINE_SHARED:
            del head[key]
        if head["winner"] is chosen:
            del head["winner"]
    return entry


def _kernel_flags(fact: KernelFacts, auto: list[dict], coord: list[dict], head: dict | None,
                  final: dict | None, chosen: dict | None, spread_threshold: float) -> list[str]:
    """The flags of one kernel (FLAG_TEXT), in a fixed order."""
    winner = head["winner"] if head else None
    flags = []
    n_configs = max([fact.declared_configs or 0]
                    + [len(v["configs"]) for v in auto]) or None
    if n_configs == 1 or (n_configs is None and fact.configs and len(fact.configs) == 1):
        flags.append("single_config")
    if fact.from_cache:
        flags.append("from_cache")
    if head and head["spread"] is not None and head["spread"] < spread_threshold:
        flags.append("flat_spread")
    rows = [r for v in auto + coord for r in v["configs"]]
    if any((r["n_spills"] or 0) > 0 for r in rows):
        flags.append("spills")
    if chosen and (chosen.get("n_spills") or 0) > 0:
        flags.append("winner_spills")
    if any(v["failed"] for v in auto + coord):
        flags.append("failed_configs")
    if head and head["timed"] == 0 and head["configs"]:
        flags.append("no_timings")
    if head and winner and head["fastest_ms"] is not None and winner["ms"] is not None \
            and winner["ms"] > head["fastest_ms"] * (1 + 1e-9):
        flags.append("winner_not_fastest")
    if len(auto) > 1:
        flags.append("retuned")
        if len({config_label(v["winner"]["config"]) for v in auto if v["winner"]}) > 1:
            flags.append("winners_disagree")
    if final and winner and final["ms"] is not None and winner["ms"] is not None \
            and final["ms"] < winner["ms"] and config_label(final["config"]) != winner["label"]:
        flags.append("coordesc_improved")
    # module names are content hashes: one name in two cache folders is one module
    if len(fact.source_files) > 1 and len({Path(f).name for f in fact.source_files}) > 1:
        flags.append("several_source_files")
    return flags


def _cell(value: Any, fmt: str = "{}") -> str:
    return "–" if value is None else fmt.format(value)


# Markdown caps (the JSON always holds everything): kernels in the overview table, kernels
# given a section of their own, config rows per kernel.
MD_MAX_KERNELS = 1000
MD_MAX_SECTIONS = 200
MD_MAX_ROWS = 50


def render_markdown(summary: dict) -> str:
    from ..base import markdown as md

    lines = ["# Autotune summary", ""]
    inputs = ", ".join(f"{md.code(i['path'])} ({md.text(', '.join(f'{k}: {v}' for k, v in i['formats'].items()))})"
                       for i in summary["inputs"])
    lines += [f"Inputs: {inputs}.", "",
              f"Spread threshold: {summary['spread_threshold']} (a spread below it is flagged "
              "`flat_spread`). Kernels are ordered by the winner's time, slowest first; a time "
              "is per launch in ms, measured with the statistic shown.", ""]
    kernels = summary["kernels"]
    if len(kernels) > MD_MAX_KERNELS:
        lines += [f"{len(kernels)} kernels: the table and the sections below show the "
                  f"{MD_MAX_KERNELS} slowest; every kernel is in the JSON.", ""]
    elif len(kernels) > MD_MAX_SECTIONS:
        lines += [f"{len(kernels)} kernels: sections follow for the {MD_MAX_SECTIONS} slowest; "
                  "every kernel is in the JSON.", ""]
    lines += ["| kernel | configs timed | winner | ms | spread | statistic | flags |",
              "|---|---|---|---|---|---|---|"]
    for k in kernels[:MD_MAX_KERNELS]:
        w = k["winner"] or {}
        timed = sum(1 for c in k["configs"] if c["ms"] is not None)
        lines.append(f"| {md.code(k['kernel'])} | {timed}/{len(k['configs'])} | {md.text(w.get('label', '–'))} | "
                     f"{_cell(w.get('ms'), '{:.4f}')} | {_cell(k['spread'], '{:.3f}')} | "
                     f"{md.text(k['statistic'])} | {md.text(', '.join(k['flags']) or '–')} |")
    for k in kernels[:MD_MAX_SECTIONS]:
        lines += ["", f"## {md.code(k['kernel'])}", ""]
        if k["source_files"]:
            lines.append("Source: " + ", ".join(md.code(s) for s in k["source_files"]))
        if k["standalone_file"]:
            lines.append(f"Standalone copy: {md.code(k['standalone_file'])}")
        if k["declared_configs"] is not None:
            lines.append(f"Declared configs: {k['declared_configs']}")
        if k["statistic_basis"]:
            lines.append(f"Statistic: {md.text(k['statistic'])} ({md.text(k['statistic_basis'])})")
        if k["num_bytes"]:
            lines.append(f"Bytes per launch: {md.text(k['num_bytes'])} ({md.text(k['bytes_source'])})")
        if k["launches"]:
            first = k["launches"][0]
            args = ", ".join(
                f"{a.get('name')}: {a.get('dtype')}{list(a['shape'])}" if a.get("kind") == "tensor"
                else f"{a.get('name')}={a.get('value')}" for a in first["args"]
                if isinstance(a, dict))
            lines.append(f"Inputs (first launch, grid {md.text(first['grid'])}): {md.text(args)}"
                         + (f"; {len(k['launches'])} argument signatures" if len(k["launches"]) > 1
                            else ""))
            site = first.get("launch_site")
            if isinstance(site, dict):
                what = (" (an `@triton.autotune` kernel: its config list decides the launch)"
                        if k.get("kind") == "triton_autotune"
                        else " (a plain `kernel[grid](...)` launch: its arguments are the config)")
                lines.append(f"Launch site: {md.code(str(site.get('file')) + ':' + str(site.get('line')))}{what}")
        if k["configs"]:
            lines += ["", "| rank | config | ms | × fastest | n_regs | spills | shared | GB/s |",
                      "|---|---|---|---|---|---|---|---|"]
            for c in k["configs"][:MD_MAX_ROWS]:
                lines.append(f"| {_cell(c['rank'])} | {md.text(c['label'])} | {_cell(c['ms'], '{:.4f}')} | "
                             f"{_cell(c['x_fastest'], '{:.3f}')} | {_cell(c['n_regs'])} | "
                             f"{_cell(c['n_spills'])} | {_cell(c['shared'])} | "
                             f"{_cell(c['gb_per_s'], '{:.1f}')} |")
            if len(k["configs"]) > MD_MAX_ROWS:
                lines += ["", f"The table shows the {MD_MAX_ROWS} fastest of {len(k['configs'])} "
                              "configs; every config is in the JSON."]
        if k["winner"]:
            lines += ["", f"Winner ({md.text(k['winner_from'])}): {md.text(k['winner']['label'])}"
                      + (f" at {k['winner']['ms']:.4f} ms" if k["winner"]["ms"] is not None else "")]
        for c in k["coordesc"]:
            lines.append(f"Coordinate descent: {len(c['configs'])} probes"
                         + (f", best {md.text(c['winner']['label'])}" if c["winner"] else ""))
        if len(k["tunings"]) > 1:
            lines.append(f"Tuned {len(k['tunings'])} times; the table shows the tuning that timed "
                         "the most configs.")
        for flag in k["flags"]:
            lines.append(f"- **{flag}**: {FLAG_TEXT[flag]}")
        for note in k["notes"]:
            lines.append(f"- note: {md.text(note)}")
    if summary["skipped"]:
        lines += ["", "## Skipped lines", ""]
        lines += [f"- {md.code(s['where'])}: {md.text(s['reason'])}" for s in summary["skipped"][:200]]
        if len(summary["skipped"]) > 200:
            lines.append(f"- ... and {len(summary['skipped']) - 200} more (see the JSON)")
    return "\n".join(lines) + "\n"
