"""Evidence from the remedy trials (``remedy_trials/1``): the arms measured end to end, the winner
by the least change among ties, the noise, and the facts the decision rules read."""


from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base.decide import Fact
from .evidence import (Evidence, _bool, _int, _list, _list_or_none, _num, _obj, _str)

# ----------------------------------------------------------------------------- measured remedies

# The config arms of try_remedies.py: when none beat the baseline, Triton tuning was tried and did not help.
TUNING_ARMS = ("coordinate_descent", "max_autotune_no_cudagraphs", "pinned")
STACK_JOIN = "+"  # a stacked arm: the winning setting arm and a rewrite arm, run together


def stack_parts(name) -> list:
    """The arms a (stacked) arm name is made of; ``[name]`` for a plain or unnamed arm."""
    return name.split(STACK_JOIN) if isinstance(name, str) else [name]


def _noise_pct(noise: Any) -> float | None:
    """A max/min spread (1.03) as +- percent (3.0)."""
    return round(100.0 * (noise - 1.0), 2) if _num(noise) is not None and noise >= 1.0 else None


@dataclass(frozen=True)
class Arm:
    """One ``arms[]`` entry of a ``remedy_trials/1``; ``index`` is its place in ``arms``."""
    index: int
    name: str | None
    status: str | None
    reason: str | None
    median_ms: int | float | None
    x_baseline: int | float | None
    spread: int | float | None
    noise: int | float | None
    beyond_noise: bool | None
    outputs: str | None           # outputs.result: equal / different / unknown
    outputs_reason: str | None
    change: str | None
    proposed_by: str | None
    targets: list[str] | None = None   # the kernels a pins / launch-overrides arm changes; None: all
    peak_memory_mb: int | float | None = None   # the largest peak of its runs (torch.cuda.max_memory_allocated)

    @classmethod
    def read(cls, index: int, a: dict) -> Arm:
        out = _obj(a.get("outputs"))
        return cls(index=index, name=_str(a.get("name")), status=_str(a.get("status")), reason=_str(a.get("reason")),
                   median_ms=_num(a.get("median_ms")), x_baseline=_num(a.get("x_baseline")),
                   spread=_num(a.get("spread")), noise=_num(a.get("noise")),
                   beyond_noise=_bool(a.get("beyond_noise")), outputs=_str(out.get("result")),
                   outputs_reason=_str(out.get("reason")), change=_str(a.get("change")),
                   proposed_by=_str(a.get("proposed_by")),
                   targets=[t for t in _list(a.get("targets")) if isinstance(t, str)]
                   if isinstance(a.get("targets"), list) else None, peak_memory_mb=_num(a.get("peak_memory_mb")))

    def x_text(self) -> str:
        return f"{self.name} {self.x_baseline:.2f}x"


@dataclass(frozen=True)
class RemedyTrials:
    """A ``remedy_trials/1`` (try_remedies.py): every arm of the program measured end to end."""
    arms: list[Arm]
    noise: int | float | None
    runs: int | None
    metric_from: str | None
    device: str | None
    command: list | None

    @classmethod
    def read(cls, doc: dict) -> RemedyTrials:
        arms = [Arm.read(i, a) for i, a in enumerate(_list(doc.get("arms"))) if isinstance(a, dict)]
        return cls(arms=arms, noise=_num(doc.get("noise")), runs=_int(doc.get("runs")),
                   metric_from=_str(doc.get("metric_from")), device=_str(_obj(doc.get("device")).get("name")),
                   command=_list_or_none(doc.get("command")))


def trial_device_mismatch(trial_device: dict, capture_device: str | None) -> str | None:
    """How the device remedy trials ran (or would run) on differs from the one the capture's
    kernels ran on, in words ("on cpu, not on the capture's NVIDIA H200"); None when they agree
    or the capture's device is unknown and the trials had a GPU. ``trial_device`` is a
    ``remedy_trials/1`` ``device`` (tko.chains.trials.device_env). A run without a GPU times CPU
    Inductor, not the program's GPU kernels, whatever the capture says."""
    dev = _obj(trial_device)
    name, gpu = _str(dev.get("name")), _bool(dev.get("gpu"))
    where = f"the capture's {capture_device}" if capture_device else "a GPU"
    if gpu is False or name == "cpu":
        return f"on {name or 'cpu'} (no GPU), not on {where}"
    if capture_device and name and name != capture_device:
        return f"on {name}, not on {where}"
    return None


def _outcome(trials: RemedyTrials) -> dict:
    """The arms that ran, the winner (the fastest arm beyond noise with equal outputs, as
    try_remedies.py picks it), the faster arms that do not count."""
    ran = [a for a in trials.arms if a.name != "baseline" and a.status == "ok" and a.x_baseline is not None]
    # "beyond noise" needs the baseline's own spread (two counted runs of it); files written
    # before that rule judged some arms from their own spread alone
    baseline = next((a for a in trials.arms if a.name == "baseline"), None)
    base = baseline if baseline and baseline.spread is not None else None
    judged = [a for a in ran if base and a.beyond_noise is not None]
    faster = [a for a in judged if a.beyond_noise is True and a.x_baseline > 1.0]
    undecided = [a for a in ran if a not in judged and a.x_baseline > 1.0  # faster, noise unknown
                 and a.outputs != "different"]
    # faster by a margin worth a second look, but inside a noisy baseline: not a "no" either
    inside = [a for a in judged if a.beyond_noise is False and a.outputs != "different" and a.noise is not None
              and a.x_baseline >= _inside_noise_candidate_x()]
    equal = [a for a in faster if a.outputs == "equal"]
    winner, tied = _least_change_of_ties(equal)
    noise = _decisive_noise(judged, base) if base else None
    noise_pct = _noise_pct(noise)
    if winner:
        what = f"{winner.change or winner.name}: {winner.x_baseline:.2f}x end to end, outputs equal"
        what += _memory_text(winner, baseline)
        if tied:
            what += (f" ({', '.join(a.x_text() for a in tied)} tied with it, under the clear lead"
                     f" of {_lead_pct():g} %: the smaller change is kept)")
    elif faster:  # faster beyond noise, but no output check passed: never "nothing beat it"
        best = max(faster, key=lambda a: a.x_baseline)
        what = (f"not taken: {best.x_text()} beyond run-to-run noise, but its outputs are "
                f"{best.outputs or 'unknown'}: compare them to the baseline's (the repro must return or save "
                "its result, TKO_AB_OUTPUT) before applying it")
    elif undecided:
        what = _undecided_text(max(undecided, key=lambda a: a.x_baseline).x_text())
    elif inside:
        best = max(inside, key=lambda a: a.x_baseline)
        what = (f"not decided: {best.x_text()}, but inside the run-to-run noise (+-{_noise_pct(best.noise):.1f} %);"
                " re-measure with more runs (--runs / --max-runs) or more timed steps per run")
    elif ran and noise_pct is None:
        what = "nothing tried was faster than the baseline (one counted run of it: the run-to-run noise is unknown)"
    elif ran:
        what = f"nothing tried beat the baseline beyond run-to-run noise (+-{noise_pct:.1f} %)"
    else:
        what = "no remedy arm finished a run: nothing measured"
    return {"ran": ran, "faster": faster, "undecided": undecided, "inside": inside, "winner": winner,
            "memory_change": _less_memory(ran, baseline),
            "tuning": [a for a in ran if a.name in TUNING_ARMS],
            "noise": noise, "noise_pct": noise_pct, "not_equal": [a for a in faster if a is not winner and a.outputs != "equal"],
            "what_to_change": what}


def _memory_text(arm: Arm, base: Arm | None) -> str:
    """"; peak memory A -> B MiB (+N %)" when the arm's peak differs from the baseline's by
    ``peak_memory_change`` or more (a speed-up that doubles memory is not free); else ""."""
    from ..base.decide import threshold

    a, b = arm.peak_memory_mb, base.peak_memory_mb if base else None
    if not a or not b or abs(a / b - 1.0) < threshold("peak_memory_change"):
        return ""
    return "; " + _peak_text(a, b)


def _peak_text(a: float, b: float) -> str:
    return f"peak memory {b:.0f} -> {a:.0f} MiB ({100.0 * (a / b - 1.0):+.0f} %)"


def _less_memory(ran: list[Arm], base: Arm | None) -> str | None:
    """The arm with equal outputs and the lowest peak memory, when that is ``peak_memory_change`` or
    more under the baseline's, with its speed: a remedy for a program that runs out of memory (the
    chunked cross entropy: -28 % at 0.56x), said whether or not it wins on time; else None."""
    from ..base.decide import threshold

    b = base.peak_memory_mb if base else None
    kept = [a for a in ran if a.outputs == "equal" and a.peak_memory_mb and b
            and a.peak_memory_mb <= (1.0 - threshold("peak_memory_change")) * b]
    if not kept:
        return None
    a = min(kept, key=lambda arm: arm.peak_memory_mb)
    speed = "beyond" if a.beyond_noise else "inside" if a.beyond_noise is False else "noise unknown:"
    return (f"{a.change or a.name}: {_peak_text(a.peak_memory_mb, b)} at {a.x_baseline:.2f}x the baseline's "
            f"speed ({speed} run-to-run noise), outputs equal")


def _least_change_of_ties(equal: list[Arm]) -> tuple[Arm | None, list[Arm]]:
    """(the winner, the faster arms of larger change it was kept over). An arm of a larger
    change class (threshold ``remedy_change_classes``) counts only when it beats every winning
    arm of a smaller class by ``clear_lead_x`` (or the noise of either, if larger); of the rest,
    the fastest wins. A lead of a few tenths of a percent is no reason to route ops to a library
    when one flag does as well."""
    if not equal:
        return None, []
    from ..base.decide import threshold

    classes = list(threshold("remedy_change_classes").values())
    lead = float(threshold("clear_lead_x"))

    def rank(a: Arm) -> int:  # a stacked arm (``cudagraphs+sdpa``) is of its largest part's class
        return max(next((i for i, names in enumerate(classes) if part in names), len(classes))
                   for part in stack_parts(a.name))

    def outranked(b: Arm) -> bool:
        return any(rank(a) < rank(b) and b.x_baseline / a.x_baseline <= max(lead, a.noise or 1.0, b.noise or 1.0)
                   for a in equal)

    kept = [a for a in equal if not outranked(a)]
    winner = max(kept, key=lambda a: a.x_baseline)
    return winner, sorted((a for a in equal if a not in kept and a.x_baseline > winner.x_baseline),
                          key=lambda a: -a.x_baseline)


def _lead_pct() -> float:
    from ..base.decide import threshold

    return round(100.0 * (float(threshold("clear_lead_x")) - 1.0), 2)


def _decisive_noise(judged: list[Arm], base: Arm) -> float | None:
    """The noise that decided: the fastest faster arm's (its spread and the baseline's), else the
    baseline's own spread. Never a slow arm's: a 58x slower arm's 4.3x spread (an H200
    dynamic-shape trial) says nothing of whether anything beat the baseline."""
    quicker = [a for a in judged if a.x_baseline > 1.0 and a.noise is not None]
    return max(quicker, key=lambda a: a.x_baseline).noise if quicker else base.spread


def _inside_noise_candidate_x() -> float:
    from ..base.decide import threshold

    return float(threshold("inside_noise_candidate_x"))


def _undecided_text(candidate: str) -> str:
    """What to change when the fastest arm could not be judged against the run-to-run noise."""
    return (f"not decided: {candidate}, but the baseline got one counted run, so the run-to-run"
            " noise is unknown; run try_remedies.py again with a larger --budget-s (or --runs 3)")


def trial_outcome(doc: dict) -> dict:
    """What a ``remedy_trials/1`` document measured (:func:`_outcome`; the arms as :class:`Arm`)."""
    return _outcome(RemedyTrials.read(doc))


def trial_facts(doc: dict | None, label: str, kernel: str | None = None) -> dict[str, Fact]:
    """Facts of a ``remedy_trials/1`` document, for the kernel rules and the program rules. For
    ``kernel``, a winner that changed other kernels only (its ``targets``) is no winner of this one:
    it is given as ``remedy_winner_elsewhere``."""
    if not doc:
        return {}
    trials = RemedyTrials.read(doc)
    o = _outcome(trials)
    facts: dict[str, Fact] = {}

    def put(name, value, where):
        if value is not None:
            facts[name] = Fact(value, f"{label}: {where}")

    put("trials_ran", bool(o["ran"]), "arms[] (status ok, besides the baseline)")
    put("trials_noise_pct", o["noise_pct"], f"noise {trials.noise}")
    if o["ran"]:
        put("remedy_tried", ", ".join(a.x_text() for a in o["ran"]), "arms[].x_baseline")
    w = o["winner"]
    if w and kernel is not None and w.targets is not None and kernel not in w.targets:
        put("remedy_winner_elsewhere", f"{w.change or w.name}: {w.x_baseline:.2f}x end to end, changing "
            + ", ".join(w.targets), f"arms[{w.index}].targets")
        w = None
    if w:
        i = w.index
        # a stacked arm (setting+rewrite) decides as its rewrite: the larger change names the verdict
        put("remedy_winner", stack_parts(w.name)[-1],
            f"arms[{i}] {w.name} (fastest ok arm, beyond_noise, outputs equal)")
        put("remedy_x", w.x_baseline, f"arms[{i}].x_baseline")
        put("remedy_change", w.change or w.name, f"arms[{i}].change")
        put("remedy_noise_pct", _noise_pct(w.noise), f"arms[{i}].noise {w.noise}")
    elif o["undecided"]:
        put("remedy_undecided", ", ".join(a.x_text() for a in o["undecided"]),
            "arms[] with x_baseline > 1, the baseline under two counted runs (noise unknown)")
    elif o["inside"]:
        put("remedy_inside_noise", ", ".join(f"{a.x_text()} (noise +-{_noise_pct(a.noise):.1f} %)"
                                             for a in o["inside"]),
            "arms[] with x_baseline >= inside_noise_candidate_x, not beyond_noise")
        put("remedy_inside_noise_x", max(a.x_baseline for a in o["inside"]), "arms[].x_baseline (largest of those)")
    elif o["ran"] and not o["winner"] and not o["not_equal"]:  # a faster arm of unchecked outputs is no "none"
        put("remedy_none_faster", True, "no arm with x_baseline > 1 beyond noise")
    if o["not_equal"]:
        put("remedy_faster_outputs_differ", ", ".join(
            f"{a.x_text()} (outputs {a.outputs or 'unknown'})" for a in o["not_equal"]),
            "arms[] faster beyond noise, outputs not equal")
    unjudged = o["undecided"] + o["inside"]
    if o["tuning"] and not any(a in unjudged for a in o["tuning"]):  # unjudged: no claim either way
        gained = [a for a in o["tuning"] if a in o["faster"]]
        put("tuning_measured_no_faster", not gained, "arms[] " + ", ".join(str(a.name) for a in o["tuning"])
            + (" (none beyond noise)" if not gained else ""))
        put("tuning_arms", ", ".join(a.x_text() for a in o["tuning"]), "arms[].x_baseline")
    graphs = [a for a in o["ran"] if a.name == "cudagraphs"]
    if graphs:  # CUDA graphs measured: the host-bound advice reads it
        put("cudagraphs_x", graphs[0].x_baseline, f"arms[{graphs[0].index}].x_baseline (cudagraphs)")
    if graphs and graphs[0] not in unjudged:  # inside the noise or undecided: no claim either way
        put("cudagraphs_faster", graphs[0] in o["faster"], "cudagraphs among the arms faster beyond noise")
    replaced = [a for a in o["ran"] if a.name == "replace"]
    if replaced and replaced[0] not in unjudged:  # measured in the program: the offer stands only if it helped
        put("replace_measured_no_faster", replaced[0] not in o["faster"],
            f"arms[] replace {replaced[0].x_baseline:.2f}x")
    return facts


TRIAL_ROW = ("name", "status", "reason", "median_ms", "x_baseline", "spread", "noise_pct", "beyond_noise", "outputs",
             "outputs_reason", "change", "proposed_by", "peak_memory_mb")


def trials_section(doc: dict, label: str) -> dict:
    """The measured trial table a report shows (every arm, the baseline first)."""
    trials = RemedyTrials.read(doc)
    o = _outcome(trials)
    rows = [{k: _noise_pct(a.noise) if k == "noise_pct" else getattr(a, k) for k in TRIAL_ROW} for a in trials.arms]
    return {"label": label, "rows": rows, "winner": o["winner"].name if o["winner"] else None,
            "what_to_change": o["what_to_change"], "memory_change": o["memory_change"],
            "noise": trials.noise, "noise_pct": o["noise_pct"],
            "runs": trials.runs, "metric_from": trials.metric_from, "device": trials.device,
            "command": trials.command, "not_equal": [a.name for a in o["not_equal"]]}


def from_trials(ev: Evidence, doc: dict | None, label: str) -> None:
    """End-to-end remedy trials (try_remedies.py): program-level, attached to every kernel."""
    if doc is None:
        return
    ev.sections["trials"] = trials_section(doc, label)
    ev.facts.update(trial_facts(doc, label, ev.kernel))


