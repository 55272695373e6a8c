"""Build one kernel's investigation report: evidence -> decision -> Markdown + JSON twin."""

from __future__ import annotations


from ..base import resources
from ..base import decide, markdown
from . import ceiling, evidence, program_evidence, sol_evidence, trial_evidence
from ..env import pitfalls
from ..base.artifact import read_artifact
from ..base.errors import InputError

TEMPLATES = resources.templates_dir()

DECISION_TEXT = {
    "leave_as_is": "leave the kernel as it is (no tuning)",
    "tune_triton": "continue Triton tuning",
    "disable_compiled_region": "disable the compiled region (@torch._dynamo.disable on the smallest region)",
    "rewrite_model": "rewrite the model code",
    None: "undecided: not enough evidence",
}

# (report key, schema names accepted, evidence adapter)
INPUTS = {
    "profile": ("kernel_profile", program_evidence.from_profile),
    "autotune_summary": ("autotune_summary", evidence.from_summary),
    "meta": ("triton_meta", evidence.from_meta),
    "isa": ("isa_scan", evidence.from_isa),
    "run": ("kernel_run", evidence.from_run),
    "probe": ("compile_probe", evidence.from_probe),
    "benchmark": (("benchmark", "variant_sweep"), evidence.from_benchmark_or_sweep),
    "ab": ("fallback_ab", evidence.from_ab),
    "artifacts": ("artifact_manifest", program_evidence.from_manifest),
    "trials": ("remedy_trials", trial_evidence.from_trials),
    "sol": ("speed_of_light", sol_evidence.from_sol),
}
ADAPTER_ORDER = ("profile", "autotune_summary", "meta", "isa", "run", "probe", "benchmark", "ab", "artifacts",
                 "trials", "sol")


def md_text(value) -> str:
    """Untrusted text for a Markdown paragraph or table cell (see :mod:`tko.base.markdown`)."""
    return markdown.text(value)


def md_code(value) -> str:
    """Untrusted text as an inline code span that survives a table cell."""
    return markdown.code(value)


def md_dims(value) -> str:
    """A recorded shape, stride or grid: a list of integers as written (``[8192, 4096]``), a
    number as it is, anything else (text from a hand-edited log) as escaped text."""
    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if isinstance(value, list) and all(map(number, value)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value) if number(value) else markdown.text(value)


def load_inputs(paths: dict[str, str | None]) -> dict[str, dict | None]:
    docs = {}
    for key, path in paths.items():
        if key == "env":
            docs[key] = read_artifact(path, "triton_env") if path else None
        elif key in INPUTS:
            docs[key] = read_artifact(path, INPUTS[key][0]) if path else None
    return docs


def impact_text(ev: evidence.Evidence) -> str:
    parts = []
    t = ev.sections.get("timing", {})
    runs = ev.sections.get("tuning_runs")
    if runs and runs.get("rows"):
        if runs.get("interpreter"):
            parts.append(f"{len(runs['rows'])} variants checked in Triton's interpreter ({runs['label']}): "
                         "correct or not, no speed measured.")
        elif runs.get("best") and runs.get("best_x"):
            noise = runs.get("noise_rel")
            parts.append(f"Best measured variant `{runs['best']}`: {runs['best_x']:.3f}x the baseline"
                         + (f" (run-to-run noise {100 * noise:.1f}%)" if noise is not None else "") + ".")
        else:
            parts.append(f"{len(runs['rows'])} variants measured ({runs['label']}); none beat the baseline.")
    ab = ev.sections.get("fallback_ab")
    if ab and ab.get("speedup_fallback_over_compiled"):
        parts.append(f"Eager fallback: {ab['speedup_fallback_over_compiled']:.3f}x end to end "
                     f"({ab['verdict']}).")
    trials = ev.sections.get("trials")
    if trials:
        parts.insert(0, f"End to end ({trials['label']}): {trials['what_to_change']}.")
    sol = ev.sections.get("speed_of_light")
    if sol and sol.get("class") not in (None, "unmeasured"):
        parts.append(f"Speed of light: {sol['class']} ({sol['says']})")
    if not parts:
        base = t.get("standalone_ms") or t.get("autotune_winner_ms")
        parts.append("No change measured yet" + (f"; baseline {base:.4f} ms per launch." if base else "."))
    return " ".join(parts)


def device_identity(ev: evidence.Evidence, docs: dict[str, dict | None], device_name: str | None,
                    arch: str | None, peaks_file: str | None = None) -> tuple[str | None, str | None]:
    """The device the kernel's numbers were measured on, for its copy peak: check_env's record,
    else the profile's device, else the ISA scan's arch, else the one device of the peaks file
    named on the command line (``peaks_file``)."""
    if device_name is None and arch is None:
        device_name, arch = program_evidence.profile_device(docs.get("profile"))
    if arch is None and ev.sections.get("isa"):
        arch = ev.sections["isa"].get("arch")
    if device_name is None and arch is None and peaks_file:
        from ..measure import peaks

        records = peaks.load_store(peaks_file)
        if len(records) == 1:
            device_name, arch = evidence._str(records[0].get("name")), evidence._str(records[0].get("arch"))
    return device_name, arch


def check_trials_device(ev: evidence.Evidence, trials: dict | None, capture_device: str | None, label: str,
                        allowed: bool) -> None:
    """Remedy trials timed on another device than the kernels' (or on no GPU) are refused, or,
    with ``allowed`` (--allow-device-mismatch), shown flagged and listed as a gap."""
    if trials is None:
        return
    why = trial_evidence.trial_device_mismatch(evidence._obj(trials.get("device")), capture_device)
    if why is None:
        return
    if not allowed:
        raise InputError(f"{label}: the remedy trials were timed {why}, so they say nothing of these kernels: "
                         "run try_remedies.py on the program's GPU, or pass --allow-device-mismatch to show them "
                         "flagged")
    ev.sections["trials"]["device_mismatch"] = why
    ev.gaps.append(f"{label}: the remedy trials were timed {why} (--allow-device-mismatch): they decide for that "
                   "device")


def build(kernel: str, docs: dict[str, dict | None], labels: dict[str, str],
          peak_override: float | None = None, rules: dict | None = None, peaks_file: str | None = None,
          allow_device_mismatch: bool = False) -> dict:
    ev = evidence.Evidence(kernel)
    device_name, arch = evidence.from_env(ev, docs.get("env"))
    for key in ADAPTER_ORDER:
        INPUTS[key][1](ev, docs.get(key), labels.get(key, key))
    device_name, arch = device_identity(ev, docs, device_name, arch, peaks_file)
    check_trials_device(ev, docs.get("trials"), device_name, labels.get("trials", "trials"), allow_device_mismatch)
    if peak_override:
        peak = {"peak_gbps": peak_override, "copy_gbps": peak_override, "basis": "copy_gbps",
                "source": "--peak-gbps", "kind": "given", "where": "command line",
                "device": device_name, "arch": arch}
    else:
        from ..measure import peaks

        peak = peaks.lookup(device_name, arch) if (device_name or arch) else None
    evidence.from_peak(ev, peak, device_name, arch)
    evidence.name_facts(ev)
    ceiling.add_facts(ev, docs.get("profile"), labels.get("profile", "profile"))
    ev.sections["pitfalls"] = pitfalls.for_report(docs.get("env"), ev.sections)
    decision = decide.decide(ev.facts, rules, kernel=kernel)
    gaps = list(dict.fromkeys(ev.gaps + decision.gaps))
    program = program_evidence.program_decision(docs.get("profile"), labels.get("profile", "profile"), rules,
                                        trials=docs.get("trials"), trials_label=labels.get("trials", "trials.json"))
    return {
        "kernel": kernel,
        "decision": decision.as_dict(),
        "decision_text": DECISION_TEXT.get(decision.verdict, decision.verdict)
        + (": apply the measured change" if str(decision.rule).startswith("remedy_measured_faster") else ""),
        "program": program,
        "facts": {k: {"value": f.value, "source": f.source} for k, f in sorted(ev.facts.items())},
        "sections": ev.sections,
        "impact": impact_text(ev),
        "gaps": gaps,
        "inputs": {k: labels.get(k) for k, v in docs.items() if v is not None},
    }


def launch_latency_x(timing: dict, rules: dict | None = None) -> float | None:
    """do_bench's time over the profiler's device time when it is above the rules'
    ``launch_latency_ratio``: then launch latency, not the kernel, fills a single timed launch."""
    ms, device_ms = timing.get("standalone_ms"), timing.get("standalone_device_ms")
    if not ms or not device_ms:
        return None
    try:
        over = ms > decide.threshold("launch_latency_ratio", rules) * device_ms
    except TypeError:  # a number of the wrong type in an input: no flag
        return None
    return ms / device_ms if over else None


def timing_note(sections: dict) -> str | None:
    """Which of a kernel's times decides and why they differ, when the report shows more than one
    (the profile's, the standalone run's, Inductor's autotuning)."""
    t, prof = sections.get("timing") or {}, sections.get("profile") or {}
    shown = [v for v in (prof.get("mean_us"), t.get("standalone_ms"), t.get("autotune_winner_ms")) if v is not None]
    if len(shown) < 2:
        return None
    # the same choice as evidence.from_peak: the standalone GB/s when the run gave one
    if "standalone_gb_per_s" in t:
        decides = "the standalone time (the captured winner alone on its captured inputs) gives the bandwidth"
    elif t.get("autotune_winner_gb_per_s") is not None:
        decides = "no standalone run: the autotune winner's time gives the bandwidth"
    else:
        decides = "no time with a byte count: no bandwidth"
    return (f"{decides} the rules judge ({t.get('gb_per_s_source') or 'n/a'}); the profile's time, the kernel "
            "inside the program, gives its share of GPU time. They differ by what surrounds the launch: in "
            "the program the kernel runs between its neighbours with the L2 as they leave it; alone, do_bench "
            "flushes the L2 and counts the launch latency, which is much of a short kernel's time (the profiler's "
            "device time, when shown, has none); the autotune time is Inductor's quick benchmark while compiling, "
            "which only ranks configs.")


def recording_paths(files: list, repro: str | None) -> dict:
    """Each model-code file as the report shows it: relative to the folder the recorded program ran
    from (the file whose path ends in the repro's script path names it), else to the folder the
    files share; a file outside it keeps its path. The paths are the recording machine's."""
    import posixpath
    import shlex

    files = [f for f in files if isinstance(f, str)]
    try:
        script = next((w for w in shlex.split(repro or "") if w.endswith(".py")), None)
    except ValueError:  # unbalanced quotes in a hand-given --repro
        script = None
    root = None
    if script and not posixpath.isabs(script):
        suffix = "/" + posixpath.normpath(script)
        root = next((f[: -len(suffix)] for f in files if f.endswith(suffix)), None)
    if root is None:
        dirs = [posixpath.dirname(f) for f in files if posixpath.isabs(f)]
        root = posixpath.commonpath(dirs) if dirs else None
    if root in (None, "", "/"):
        return {f: f for f in files}
    return {f: posixpath.relpath(f, root) if f.startswith(root.rstrip("/") + "/") else f for f in files}


def what_to_change(report: dict, json_out: str | None = None) -> dict:
    """The kernel report's "What to change": ``text`` (the trials' measured change, else the
    decision and what it rests on) and ``command`` (without trials: the one that measures the
    remedies end to end)."""
    trials = (report.get("sections") or {}).get("trials")
    if trials:
        return {"text": f"Measured end to end ({trials['label']}): {trials['what_to_change']}.", "command": None}
    rule = (report.get("decision") or {}).get("rule")
    repro = report.get("repro") or "python repro.py ..."
    return {"text": "Nothing was measured end to end (no remedy trials given), so no change is shown to help yet. "
                    f"By the evidence below: {report['decision_text']}" + (f" (rule {rule})." if rule else "."),
            "command": f"python scripts/try_remedies.py --out trials --facts {json_out or 'report.json'} -- {repro}"}


def render_markdown(report: dict, rules: dict | None = None, json_out: str | None = None) -> str:
    """The Markdown of a :func:`build` report; ``rules`` as given to it (default: the bundled file);
    ``json_out`` its JSON twin, named in the "What to change" command."""
    import jinja2  # lazy: only the report needs it

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.ChainableUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["cell"] = md_text
    env.filters["code"] = md_code
    env.filters["dims"] = md_dims
    template = env.get_template("investigation_report.md.j2")
    sections = report["sections"]
    return tidy_markdown(template.render(
        trials=sections.get("trials"), sol=sections.get("speed_of_light"),
        sol_chart=sol_chart(report["kernel"], sections.get("speed_of_light")),
        kernel=report["kernel"], decision=report["decision"], decision_text=report["decision_text"],
        program=report.get("program"), program_text=DECISION_TEXT.get((report.get("program") or {}).get("verdict")),
        facts=report["facts"], impact=report["impact"], gaps=report["gaps"],
        profile=sections.get("profile"), timing=sections.get("timing", {}), autotune=sections.get("autotune"),
        launch_latency_x=launch_latency_x(sections.get("timing") or {}, rules),
        meta=sections.get("meta"), isa=sections.get("isa"), probe=sections.get("probe"),
        inputs=sections.get("inputs"), env=sections.get("env"), tuning_runs=sections.get("tuning_runs"),
        fallback_ab=sections.get("fallback_ab"), model_code=sections.get("model_code"), repro=report.get("repro"),
        timing_note=timing_note(sections), what_to_change=what_to_change(report, json_out),
        paths=recording_paths([f.get("file") for f in (sections.get("model_code") or {}).get("frames") or []],
                              report.get("repro")),
        pitfalls=sections.get("pitfalls"),
    ))


def sol_chart(kernel: str, sol: dict | None) -> str | None:
    """The speed-of-light bars (kernel, twin, floors) drawn again from the numbers with
    ``tko.base.svg_chart``: the SVG text of an input file is never pasted into the report."""
    if not sol:
        return None
    from ..measure.speed_of_light import chart_bars
    from ..base.svg_chart import kernel_bars

    numbers = {k: v for k, v in (sol.get("numbers") or {}).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    floor = numbers.get("copy_floor_ms")
    return kernel_bars(f"{kernel}: {sol.get('class') or 'unmeasured'}", chart_bars(numbers), reference=floor)


def _block(line: str) -> str:
    if line.startswith("|"):
        return "table"
    if line.startswith("- "):
        return "list"
    if line.startswith("#"):
        return "heading"
    return "text" if line.strip() else "blank"


def tidy_markdown(text: str) -> str:
    """One blank line between blocks of different kinds (headings, tables, lists, paragraphs)."""
    out: list[str] = []
    for line in text.splitlines():
        kind = _block(line)
        if kind == "blank":
            if out and out[-1] != "":
                out.append("")
            continue
        if out and out[-1] != "" and (kind == "heading" or _block(out[-1]) in ("heading",)
                                      or kind != _block(out[-1])):
            out.append("")
        out.append(line)
    return "\n".join(out).strip() + "\n"
