"""The investigation's "Model-level rewrites": catalog patterns found in the program
(``references/rewrite_catalog.yaml`` via :mod:`tko.read.rewrite_catalog`), each with the model
line before and the replacement after, and what the remedy trials measured for its arm (x end to
end, outputs, peak memory of the baseline and the arm).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..base import markdown as md
from ..read import rewrite_catalog
from ..verdict import evidence


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _sources(result: dict, out: Path) -> list[Path]:
    """The repro's script and the model-code files the kernel reports name, those that exist."""
    found: list[Path] = []
    repro = result.get("repro") or result.get("command") or []
    found += [Path(a) for a in repro if isinstance(a, str) and a.endswith(".py")]
    for k in result.get("kernels") or []:
        rep = _load(out / str(k.get("dir")) / "report.json") or {}
        mc = evidence._obj(evidence._obj(rep.get("sections")).get("model_code"))
        found += [Path(f["file"]) for f in evidence._objs(mc.get("frames")) if evidence._str(f.get("file"))]
    return model_sources(found)


def model_sources(files: list[Path]) -> list[Path]:
    """``files`` and the modules they import from their own folder: the Python files that exist,
    resolved, each once."""
    found = list(files) + [m for p in files for m in _local_imports(p)]
    seen, keep = set(), []
    for p in found:
        try:
            rp = p.resolve()
        except (OSError, RuntimeError):
            continue
        if rp not in seen and rp.is_file() and rp.suffix == ".py":
            seen.add(rp)
            keep.append(rp)
    return keep


def _local_imports(script: Path) -> list[Path]:
    """The modules a script imports from its own folder (``import model`` -> ``model.py`` beside it)."""
    import ast

    try:
        tree = ast.parse(script.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    return [script.parent / f"{name.split('.')[0]}.py" for name in sorted(names)
            if (script.parent / f"{name.split('.')[0]}.py").is_file()]


def _load(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _result(outputs) -> str | None:
    """``equal`` / ``different`` / ``unknown`` of a trials row's ``outputs`` (an object there)."""
    return outputs.get("result") if isinstance(outputs, dict) else outputs if isinstance(outputs, str) else None


def _measured(arm_name: str | None, trials_path: Path | None) -> dict | None:
    """The arm's row of the trials and the baseline's peak memory, when the trials ran it."""
    doc = _load(trials_path) if arm_name and trials_path else None
    arms = {a.get("name"): a for a in evidence._objs((doc or {}).get("arms"))}
    arm = arms.get(arm_name)
    if not arm:
        return None
    base = arms.get("baseline") or {}
    stack = next((a for n, a in arms.items() if isinstance(n, str) and n.endswith("+" + arm_name)), None)
    stacked = ({"arm": stack.get("name"), "status": stack.get("status"), "x_baseline": _num(stack.get("x_baseline")),
                "beyond_noise": stack.get("beyond_noise"), "outputs": _result(stack.get("outputs"))} if stack else None)
    return {"arm": arm_name, "stacked": stacked, "status": arm.get("status"), "reason": arm.get("reason"),
            "x_baseline": _num(arm.get("x_baseline")), "beyond_noise": arm.get("beyond_noise"),
            "outputs": _result(arm.get("outputs")),
            "outputs_reason": (arm.get("outputs") or {}).get("reason") if isinstance(arm.get("outputs"), dict) else None,
            "median_ms": _num(arm.get("median_ms")),
            "baseline_ms": _num(base.get("median_ms")), "peak_memory_mb": _num(arm.get("peak_memory_mb")),
            "baseline_peak_memory_mb": _num(base.get("peak_memory_mb")), "replaced": arm.get("replaced")}


def section(result: dict, out: Path, profile: dict | None) -> list[dict]:
    """``investigation/1`` ``rewrites``."""
    rows = evidence._objs((profile or {}).get("ranking") or (profile or {}).get("kernels"))
    kernels = [(r["name"], _num(r.get("share"))) for r in rows
               if evidence._str(r.get("name")) and r.get("origin") == "triton"]
    rules = [f.get("rule") for f in evidence._objs(evidence._obj(result.get("program")).get("fired"))]
    trials = result.get("trials") or {}
    tpath = (out / trials["path"]) if isinstance(trials.get("path"), str) else None
    found = rewrite_catalog.detect(kernels, _sources(result, out), rules)
    for f in found:
        f["measured"] = _measured(f.get("arm"), tpath if tpath and tpath.is_file() else None)
    return found


def _host_bound_text(m: dict, step: dict | None) -> str:
    """Why a rewrite that cuts GPU work may leave the step alone: the GPU waits on the host."""
    tl = (step or {}).get("timeline") or {}
    faster = (m.get("x_baseline") or 0) > 1 and m.get("beyond_noise")
    if faster or not (step or {}).get("host_bound") or _num(tl.get("busy_share")) is None:
        return ""
    return (f" The step is host-bound (the GPU busy {tl['busy_share']:.0%} of the window): a rewrite that cuts GPU "
            "time or memory shows in the step only once the host time is cut (CUDA graphs, fewer launches).")


def _measured_text(f: dict, repro: str, step: dict | None = None) -> str:
    m = f.get("measured")
    if not f.get("arm"):
        return "no trial arm: make the change in the model, then compare profiles (Next steps)."
    if not m:
        return (f"not measured here: `python scripts/try_remedies.py --arms {f['arm']} -- {repro}` measures it "
                "end to end inside the unchanged program.")
    if m.get("x_baseline") is None or m.get("status") not in (None, "ok"):
        # an arm that did not apply (or failed) measured the unchanged program: its speed says nothing
        return f"arm `{m['arm']}`: {md.text(m.get('status'))} ({md.text(m.get('reason') or m.get('replaced') or '')})."
    mem = f"; {_memory(m)}" if _memory(m) else ""
    noise = "beyond" if m.get("beyond_noise") else "inside" if m.get("beyond_noise") is False else "noise unknown:"
    return (f"measured end to end, arm `{m['arm']}`: {m['x_baseline']:.3f}x ({m['baseline_ms']:.4g} -> "
            f"{m['median_ms']:.4g} ms/step, {noise} run-to-run noise), outputs {md.text(m.get('outputs'))}{mem}."
            + _applied_text(m) + _host_bound_text(m, step) + _stacked_text(m.get("stacked")))


def measured_brief(f: dict) -> str:
    """What a found rewrite's arm measured, in a few words (the console's line for its patch)."""
    m = f.get("measured")
    if not f.get("arm"):
        return "no trial arm"
    if not m:
        return "not measured"
    if m.get("x_baseline") is None or m.get("status") not in (None, "ok"):
        return f"arm {m['arm']}: {m.get('status')}"
    mem = f", {_memory(m)}" if _memory(m) else ""
    return (f"{m['arm']} {m['x_baseline']:.2f}x end to end, {'a measured gain' if _won(m) else 'no measured gain'}, "
            f"outputs {m.get('outputs')}{mem}")


def _won(m: dict) -> bool:
    """The arm ran faster beyond the noise with outputs equal."""
    return bool((m.get("x_baseline") or 0) > 1 and m.get("beyond_noise") and m.get("outputs") == "equal")


def _memory(m: dict) -> str:
    """"peak memory A -> B MiB" of the arm against the baseline, "" when either is unknown."""
    if m.get("peak_memory_mb") is None or m.get("baseline_peak_memory_mb") is None:
        return ""
    return f"peak memory {m['baseline_peak_memory_mb']:.0f} -> {m['peak_memory_mb']:.0f} MiB"


def _applied_text(m: dict) -> str:
    """What the pass did in the arm's last run (e.g. how many attention swaps took is_causal=True)."""
    said = [r for r in (m.get("replaced") or []) if isinstance(r, str) and r]
    if not said:
        return ""
    text = f" The pass: {md.text(said[-1])}."
    if "with is_causal=True" in said[-1]:
        text += " The masks the program passed were causal, so that is what was measured"
        text += (": write `is_causal=True` in place of the `attn_mask=` argument (the patch keeps the mask "
                 "explicit: equal, but it does not open the flash kernels)." if _won(m) else ".")
    return text


def _stacked_text(st: dict | None) -> str:
    if not st or st.get("x_baseline") is None:
        return ""
    noise = "beyond" if st.get("beyond_noise") else "inside"
    return (f" Stacked with the winning setting, arm `{st['arm']}`: {st['x_baseline']:.3f}x ({noise} run-to-run "
            f"noise), outputs {md.text(st.get('outputs'))}.")


def markdown(found: list[dict] | None, repro: str, step: dict | None = None) -> list[str]:
    if not found:
        return []
    lines = ["## Model-level rewrites", "", "Patterns of `references/rewrite_catalog.yaml` found in this program:", ""]
    for f in found:
        lines += [f"### {f['id']}: {md.text(f['pattern'])}", ""]
        for how in f["found_by"]:
            if how["how"] == "kernel_name":
                share = f" ({how['share']:.1%} of GPU time)" if _num(how.get("share")) is not None else ""
                lines.append(f"- kernel `{how['kernel']}`{share}")
            elif how["how"] == "program_rule":
                lines.append(f"- program rule `{how['rule']}` fired")
            else:
                lines += _model_code_lines(how, f["after"])
        lines += ["", f"**Replacement:** {md.text(f['replacement'])}", "",
                  f"**When equal:** {md.text(f['conditions'])}", "",
                  f"**Measured:** {_measured_text(f, repro, step)}", "", f"Source: {md.text(f['source'])}", ""]
    return lines


def _model_code_lines(how: dict, template: str) -> list[str]:
    """A model-code hit: the lines the change replaces and the change in the model's own names
    (``change``, with its patch), else the lines around the anchor and the catalog's template."""
    change = how.get("change") if isinstance(how.get("change"), dict) else None
    where = f"`{Path(how['file']).name}:{how['line']}` (in `{how['function']}`)"
    if how.get("library"):
        where += f": {md.text(how['library'])}"
    if not change:
        why = f" (the catalog's template: {md.text(how['change_why'])})" if how.get("change_why") else ""
        return ([f"- {where}, before:", "", "```python"] + [f"{s['line']:>5}  {s['text']}" for s in how["snippet"]]
                + ["```", "", f"  after{why}:", "", "```python", f"{how['line']:>5}  {template}", "```"])
    patch = (f"; as a patch: `{how['patch']}`, to apply with `git apply` or `patch -p1` in {md.code(how['apply_in'])}"
             if how.get("patch") else "")
    out = [f"- {where}, lines {change['start']}-{change['end']}, before:", "", "```python"]
    out += [f"{s['line']:>5}  {s['text']}" for s in change["before"]] + ["```", "",
                                                                         f"  after, in the model's own names{patch}:",
                                                                         "", "```python"]
    out += [f"{change['start'] + n:>5}  {text}" for n, text in enumerate(change["after"])] + ["```", ""]
    return out + [f"  - {md.text(note)}" for note in change.get("notes") or []]


def write_patches(found: list[dict], out: Path, cwd: Path | None = None) -> None:
    """Each proposed change as a unified diff under ``out/rewrites/`` (``patch`` and ``apply_in`` added
    to its hit), against the file as it is now: ``git apply`` or ``patch -p1`` in the folder named."""
    import difflib
    import os

    from ..base import atomic

    cwd = (cwd or Path.cwd()).resolve()
    for f in found:
        for how in f.get("found_by") or []:
            change = how.get("change")
            if how.get("how") != "model_code" or not isinstance(change, dict) or how.get("library"):
                continue    # an installed library's file: its advice says how to change it without an edit
            path = Path(how["file"]).resolve()
            try:
                old = path.read_text(encoding="utf-8").splitlines(keepends=True)
            except (OSError, UnicodeDecodeError):
                continue
            base = cwd if path.is_relative_to(cwd) else path.parent
            rel = os.path.relpath(path, base)
            new = old[:change["start"] - 1] + [t + "\n" for t in change["after"]] + old[change["end"]:]
            name = f"{f['id']}-{path.stem}-{change['start']}.patch"
            atomic.write_text(out / "rewrites" / name,
                              "".join(difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}")))
            how["patch"], how["apply_in"] = f"rewrites/{name}", str(base)
