"""The Markdown twin of a ``remedy_trials/1`` document (``trials.md``)."""

from __future__ import annotations

from ..base import markdown as md


def _num(value, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else "n/a"


def _yes_no(value) -> str:
    return {True: "yes", False: "no"}.get(value, "n/a")


def _status(arm: dict) -> str:
    if arm["status"] == "ok":
        return f"ok, stopped early: {arm['stopped_early']}" if arm.get("stopped_early") else "ok"
    reason = arm.get("reason") or ""
    return f"{arm['status']}: {reason}" if reason else str(arm["status"])


def markdown(doc: dict) -> str:
    lines = ["# Remedy trials", "", f"Command: {md.code(' '.join(doc['command']))}",
             f"Device: {md.text(doc['device'].get('name', '?'))}; {doc['runs']} run(s) per arm, interleaved"
             f"{_extra_runs(doc)}; "
             f"step time from: {md.text(doc.get('metric_from') or 'n/a')}", ""]
    plan = doc.get("plan")
    if isinstance(plan, dict) and plan.get("text"):
        lines += [f"Plan (said before the rounds): {md.text(plan['text'])}", ""]
    rows = []
    for arm in doc["arms"]:
        out = arm["outputs"]
        outputs = out["result"] if out["result"] == "equal" else f"{out['result']}: {out.get('reason') or ''}"
        rows.append([md.text(arm["name"]), md.text(_status(arm)), _num(arm["median_ms"], ".4f"),
                     _num(arm["x_baseline"], ".3f"), _num(arm["spread"], ".3f"), _yes_no(arm["beyond_noise"]),
                     md.text(outputs), _num(arm.get("peak_memory_mb"), ".0f"), _num(arm["first_step_s"], ".2f"),
                     md.text(arm["proposed_by"] or "")])
    lines += md.table(["arm", "status", "ms/step", "x baseline", "spread", "beyond noise", "outputs", "peak MiB",
                       "first step s", "proposed by"], rows)
    lines += ["", "Peak MiB: the largest of the arm's runs (torch.cuda.max_memory_allocated; n/a without a GPU). "
              "First step s: the arm's first run, its compile into empty caches of its own (later runs "
              "read those caches)."]
    lines += ["", f"What to change: {md.text(doc['what_to_change'])}"]
    if doc.get("memory_change"):
        lines += [f"Less memory: {md.text(doc['memory_change'])}"]
    lines += [f"Note: {md.text(n)}" for n in doc.get("notes") or []]
    return "\n".join(lines) + "\n"


def _extra_runs(doc: dict) -> str:
    """", up to N for arms still undecided" when extra rounds were allowed."""
    extra = doc.get("max_runs")
    return f" (up to {extra} for arms still undecided)" if isinstance(extra, int) and extra > doc["runs"] else ""
