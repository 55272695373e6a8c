"""The index of an investigation: ``investigation.md`` and ``investigation.json`` (the step breakdown,
the model-level rewrites, the measured trials and what to change, the kernel table and its chart,
the next steps)."""


from __future__ import annotations

from pathlib import Path

from ..base import atomic
from ..base import markdown as md
from ..base.artifact import dumps
from ..verdict.report import DECISION_TEXT
from ..base.layout import PROFILE_DIR
from .pipeline import load_doc

def compiled_for_cpu(result: dict) -> str | None:
    """When no Triton kernel was found and Inductor wrote C++ kernels: the program ran its compiled
    region on the CPU (a model or inputs never moved to the GPU), in one sentence; else None."""
    cpu = result.get("cpu_kernels") or []
    if result.get("kernels") or not cpu:
        return None
    shown = ", ".join(cpu[:3]) + (f" and {len(cpu) - 3} more" if len(cpu) > 3 else "")
    return (f"Inductor compiled the program for the CPU ({len(cpu)} C++ kernel(s): {shown}) and no Triton "
            "kernel ran: its tensors are on the CPU. Move the model and its inputs to the GPU (.to('cuda'); "
            "ROCm and DTK builds of torch use the same name) and run the investigation again")


def next_steps(result: dict) -> list[str]:
    """What to run next, per kernel decision and for the whole program: commands, not advice."""
    repro = " ".join(result.get("repro") or []) or "python <repro> ..."
    before = Path(result.get("capture_dir") or ".") / PROFILE_DIR / "profile.json"
    compare = (f"`python scripts/profile_kernels.py --json-out after.json -- {repro}`, then "
               f"`python scripts/compare_profiles.py {before if before.is_file() else '<profile before>'} after.json`")
    cpu = compiled_for_cpu(result)
    if cpu:
        return [cpu]
    steps = []
    program = result.get("program") or {}
    trials = result.get("trials") or {}
    measured = str(program.get("rule") or "").startswith("remedy_measured_faster")
    if measured:
        patches = winner_patches(result)
        apply = ("apply " + ", ".join(f"`{h['patch']}` (`git apply` in {h.get('apply_in')})" for _, h in patches)
                 if patches else "apply it in the model's setup")
        steps.append(f"whole program ({program['rule']}): {trials.get('what_to_change') or program.get('says')}; "
                     f"{apply}, then {compare}")
    elif program.get("verdict") == "rewrite_model":
        steps.append(f"whole program ({program['rule']}): change the model as its finding says, then {compare} "
                     "(add --steps-before/--steps-after if the runs differ in steps)")
    for k in result.get("kernels", []):
        name, where = k["kernel"], ", ".join(k.get("where") or []) or "model code unknown"
        if str(k.get("rule") or "").startswith("remedy_measured_faster"):
            if not measured:
                steps.append(f"`{name}`: apply the measured remedy: {trials.get('what_to_change') or k.get('rule')}")
            continue
        if k.get("verdict") == "tune_triton":
            if k.get("sweep"):
                steps.append(f"`{name}`: swept, see `{k['sweep']}` and the report's best variant and how to apply it")
            elif k.get("standalone"):
                steps.append(f"`{name}`: on a GPU, `python scripts/sweep_captured_kernel.py {k['standalone']} "
                             f"--json-out {k['dir']}/sweep.json --markdown-out {k['dir']}/sweep.md --best-out "
                             f"{k['dir']}/best.py`, then remake its report with `--benchmark {k['dir']}/sweep.json`")
            else:
                steps.append(f"`{name}`: capture it (no standalone file) and sweep it on a GPU")
        elif k.get("verdict") == "disable_compiled_region":
            targets = " ".join(f"--disable {t}" for t in k.get("disable_targets") or []) or "--disable <module>:<function>"
            steps.append(f"`{name}` ({where}): `python scripts/eager_fallback_ab.py {targets} --json-out "
                         f"{k['dir']}/ab.json -- {repro}`; keep the fallback only if it is faster end to end with "
                         "equal outputs")
        elif k.get("verdict") == "rewrite_model":
            steps.append(_rewrite_step(result, k, where, compare, repro))
        elif k.get("verdict") is None:
            steps.append(f"`{name}`: undecided; its report lists the missing evidence")
    offline = offline_step(result, repro)
    return steps + ([offline] if offline else [])


def offline_step(result: dict, repro: str) -> str | None:
    """Offline, what only the program's GPU can add, with the command that adds it."""
    if result.get("mode") != "offline":
        return None
    missing = [] if result.get("trials") else ["the remedies end to end, none ran or were recorded"]
    if any(k.get("sol_class") in (None, "unmeasured") for k in result.get("kernels", [])):
        missing.append("each kernel against its copy floor, not timed")
    if not missing:
        return None
    return (f"on the GPU the program runs on, measure what this offline run could not ({'; '.join(missing)}): "
            f"`python scripts/investigate.py --out investigation -- {repro}`")


def trials_markdown(trials: dict | None) -> list[str]:
    """The measured trial table the index leads with, and its "what to change" line."""
    if not trials:
        return []
    def num(v, fmt):
        return format(v, fmt) if isinstance(v, (int, float)) and not isinstance(v, bool) else "n/a"

    how = "recorded with the capture" if trials.get("recorded") else "run by this investigation"
    rows = []
    for a in trials.get("arms") or []:
        noise = f"+-{a['noise_pct']:.1f} %" if isinstance(a.get("noise_pct"), (int, float)) else "n/a"
        mark = " (winner)" if a.get("name") == trials.get("winner") else ""
        rows.append([md.text(a.get("name")) + mark, num(a.get("median_ms"), ".4f"), num(a.get("x_baseline"), ".3f"),
                     noise, md.text(a.get("outputs") or "n/a"), num(a.get("peak_memory_mb"), ".0f"),
                     md.text(a.get("status"))])
    return (["## Measured end to end", "",
             f"Remedy trials ({how}: `{trials['path']}`, {trials.get('runs')} run(s) per arm on "
             f"{md.text(trials.get('device') or '?')}):", ""]
            + ([f"Plan, said before the rounds: {md.text(trials['plan'])}", ""] if trials.get("plan") else [])
            + md.table(["arm", "ms/step", "x baseline", "noise", "outputs", "peak MiB", "status"], rows)
            + ["", f"**What to change:** {md.text(trials.get('what_to_change'))}.", ""]
            + ([f"**Less memory:** {md.text(trials['memory_change'])}.", ""] if trials.get("memory_change") else []))


def _rewrite_step(result: dict, k: dict, where: str, compare: str, repro: str) -> str:
    """A kernel told to rewrite the model: the patch of a catalog rewrite whose pattern this kernel
    shows, measured first inside the unchanged program by its arm; else the report's advice."""
    name = k["kernel"]
    for f in result.get("rewrites") or []:
        if not any(h.get("how") == "kernel_name" and h.get("kernel") == name for h in f.get("found_by") or []):
            continue
        patch = next((h for h in f.get("found_by") or [] if h.get("patch")), None)
        if patch:
            measure = (f"measure it first inside the unchanged program: `python scripts/try_remedies.py --arms "
                       f"{f['arm']} -- {repro}`; then " if f.get("arm") else "")
            return (f"`{name}` ({where}): {measure}apply `{patch['patch']}` (`git apply` in {patch.get('apply_in')}), "
                    f"then {compare}")
    return f"`{name}` ({where}): rewrite that code as its report says (`{k.get('rule')}`), then {compare}"


def winner_patches(result: dict) -> list[tuple[str, dict]]:
    """(rewrite id, model-code hit) of each patch of the trials' winner (alone or stacked:
    ``cudagraphs+sdpa``) when it is a rewrite arm whose change was written in the model's own names."""
    winner = (result.get("trials") or {}).get("winner")
    arms = set(winner.split("+")) if isinstance(winner, str) else set()
    return [(f.get("id"), h) for f in result.get("rewrites") or [] if f.get("arm") in arms
            for h in f.get("found_by") or [] if isinstance(h, dict) and h.get("patch")]


def winner_patch_markdown(result: dict) -> list[str]:
    """Where the winning rewrite's change is, as a patch."""
    patches = winner_patches(result)
    return [f"The winning arm's change in the model's code (`{rid}`): `{h['patch']}`, to apply with `git apply` "
            f"or `patch -p1` in {md.code(h.get('apply_in'))}." for rid, h in patches] + ([""] if patches else [])


def what_to_change_markdown(result: dict) -> list[str]:
    """The index's "What to change" when no trials measured one (their table says it otherwise):
    that nothing was measured end to end, and what the kernels' evidence says."""
    if result.get("trials"):
        return []
    why = ("offline: no remedy trials ran here, and the capture recorded none" if result.get("mode") == "offline"
           else "the remedy trials did not run; see Steps")
    decided = "; ".join(f"`{k['kernel']}`: {k.get('decision_text') or 'undecided'}"
                        + (f" (`{k['rule']}`)" if k.get("rule") else "") for k in result.get("kernels", []))
    return ["## What to change", "",
            f"Nothing was measured end to end ({why}), so no change is shown to help yet. By each kernel's "
            f"evidence: {decided or 'no kernel investigated'}. Next steps says how to measure it.", ""]


def _sol_text(r: dict) -> str:
    """A kernel's speed of light in the index: its class and time over the floor, or the floor
    it was not timed against."""
    text = r.get("sol_class") or "n/a"
    if isinstance(r.get("sol_over_floor"), (int, float)):
        return text + f" ({r['sol_over_floor']:.2f}x floor)"
    if isinstance(r.get("sol_copy_floor_ms"), (int, float)):
        return text + f" (copy floor {r['sol_copy_floor_ms']:.4g} ms" + ("; offline, not timed)" if r.get("sol_offline")
                                                                         else "; kernel not timed)")
    return text


def index_chart(result: dict) -> str | None:
    """Each hot kernel's share of GPU time and its time over the copy floor (tko.base.svg_chart)."""
    from ..base.svg_chart import hot_kernels_chart

    rows = [{"name": k["kernel"], "share": k.get("share") if isinstance(k.get("share"), (int, float)) else None,
             "gap": k.get("sol_over_floor"),
             "missing": (f"not timed (floor {1000 * k['sol_copy_floor_ms']:.1f} us)"
                         if isinstance(k.get("sol_copy_floor_ms"), (int, float)) else None)}
            for k in result.get("kernels", [])]
    if not any(r["share"] is not None or r["gap"] is not None or r["missing"] for r in rows):
        return None  # no profile and no speed of light: a chart of nothing known
    return hot_kernels_chart("Hot kernels: share of GPU time and time over the copy floor", rows) if rows else None


def step_section(cap: Path, out: Path, trials: dict | None) -> dict | None:
    """``investigation/1`` ``step``: where the step's time goes (tko.verdict.step_breakdown), from the
    profile the kernels were ranked by (the one made here from a trace, else the capture's)."""
    from ..verdict import step_breakdown

    path = out / "profile.json" if (out / "profile.json").is_file() else cap / PROFILE_DIR / "profile.json"
    label = str(path.relative_to(out) if path.is_relative_to(out) else path)
    return step_breakdown.summarize(load_doc(path), label, trials)


def rewrite_section(cap: Path, out: Path, result: dict) -> list[dict]:
    """``investigation/1`` ``rewrites``: the catalog's model-level rewrites found (tko.chains.rewrites)."""
    from . import rewrites

    path = out / "profile.json" if (out / "profile.json").is_file() else cap / PROFILE_DIR / "profile.json"
    found = rewrites.section(result, out, load_doc(path))
    rewrites.write_patches(found, out)
    return found


def index_markdown(result: dict) -> str:
    from ..verdict.step_breakdown import markdown as step_markdown
    from .rewrites import markdown as rewrite_markdown

    lines = ["# Investigation", "", f"Capture: `{result['capture_dir']}` ({result['mode']})", ""]
    lines += step_markdown(result.get("step"), _profile_missing(result))
    lines += rewrite_markdown(result.get("rewrites"), " ".join(result.get("repro") or []) or "python <repro> ...",
                              result.get("step"))
    lines += trials_markdown(result.get("trials")) + winner_patch_markdown(result)
    lines += what_to_change_markdown(result)
    program = result.get("program") or {}
    if result.get("ranks"):
        from ..read.rank_view import markdown_lines

        lines += markdown_lines(result["ranks"]) + [""]
    if program.get("verdict"):
        lines += [f"**Whole program: {DECISION_TEXT.get(program['verdict'], program['verdict'])}** "
                  f"(rule `{program['rule']}`): {md.text(program['says'])}", ""]
    lines += md.table(["kernel", "share of GPU time", "model code", "decision", "rule", "speed of light", "gaps",
                       "report"], [_index_row(r) for r in result["kernels"]])
    if not result["kernels"]:  # a placeholder row under the header, written as it always was
        lines.append("| (no Triton kernel found in the profile or the autotune log) | | | | | | | |")
    chart = index_chart(result)
    if chart:
        lines += ["", chart]
    lines += ["", "## Next steps", ""] + ([f"- {n}" for n in result["next_steps"]] if result.get("next_steps") else
                                         ["- nothing to run: no kernel decision and no whole-program finding asks "
                                          "for a change, and nothing is left to measure"])
    lines += ["", "## Steps", ""] + _wall_line(result) + md.table(["step", "status", "seconds", "note"], [
        [s["name"], s["status"], "" if s["seconds"] is None else s["seconds"], md.text((s["error"] or "")[:200])]
        for s in result["steps"]])
    return "\n".join(lines) + "\n"


def _profile_missing(result: dict) -> str | None:
    """Why the run has no profile, when its profile step did not end ok (its last such step)."""
    step = next((s for s in reversed(result.get("steps") or []) if s.get("name") == "profile"), None)
    if not step or step.get("status") == "ok":
        return None
    return f"the profile step {step.get('status')}: {(step.get('error') or '')[:200]}"


def _wall_line(result: dict) -> list[str]:
    """The investigation's wall time, against its target when it ran the program."""
    wall, deadline = result.get("wall_s"), result.get("deadline_s")
    if not isinstance(wall, (int, float)):
        return []
    target = (f" against the {deadline:.0f} s target (--deadline-s)" + (": over it" if wall > deadline else "")
              if isinstance(deadline, (int, float)) else "")
    return [f"Wall time: {wall:.0f} s{target}.", ""]


def _index_row(r: dict) -> list[str]:
    """One hot kernel of the index: its share, model code, decision, speed of light, report link."""
    share = f"{100 * r['share']:.1f}%" if isinstance(r.get("share"), (int, float)) else "n/a"
    where = ", ".join(r.get("where") or []) or "n/a"
    return [f"`{r['kernel']}`", share, md.text(where), r.get("decision_text") or "n/a", r.get("rule") or "",
            _sol_text(r),
            r.get("gaps") if r.get("gaps") is not None else "", f"[{r['dir']}/report.md]({r['dir']}/report.md)"]


def write_index(out: Path, result: dict) -> None:
    from ..base.artifact import make_artifact

    atomic.write_text(out / "investigation.json", dumps(make_artifact("investigation/1", "investigate.py", result)))
    atomic.write_text(out / "investigation.md", index_markdown(result))
