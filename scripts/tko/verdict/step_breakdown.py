"""Where the step's time goes, before any single kernel: the ``step`` section of an investigation.

From a ``kernel_profile/1`` (and the remedy trials, when they ran): the step time where known, the
GPU's busy and idle time on the trace timeline (idle = host/launch gaps, compile left out), GPU
kernel time by class (``references/kernel_classes.yaml``, via :mod:`tko.read.kernel_classes`),
whether library compute dominates (``library_dominated_share`` of decision_rules.yaml), and what can
move the dominant library kernels. :func:`program_facts` gives the same numbers as facts for the
``library_dominated`` and ``host_bound_step`` program rules; :func:`markdown` renders the section and
its stacked bar.
"""

from __future__ import annotations

import re

from ..base import markdown as md
from ..base.decide import Fact, threshold
from ..read import kernel_classes

FP32_GEMM = re.compile(r"f32f32|sgemm|_ffma_|\bs\d{3,4}gemm|Cijk_\w*_S(B)?_|_fp32_|float32", re.IGNORECASE)
LIBRARY_IDS = ("library_gemm", "attention", "convolution")


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def class_shares(doc: dict) -> dict:
    """The breakdown plus ``library_share`` and ``triton_share`` (of GPU kernel time)."""
    b = kernel_classes.breakdown(doc)
    b["library_share"] = sum(c["share"] for c in b["classes"] if c["library"])
    b["triton_share"] = sum(c["share"] for c in b["classes"] if c["id"].startswith("triton"))
    return b


def library_detail(b: dict) -> str:
    parts = [f"{c['label']} {c['share']:.1%} in {c['kernels']} kernel(s)" for c in b["classes"] if c["library"]]
    return ", ".join(parts) or "none"


def _gemm_names(doc: dict) -> list[str]:
    return [r.get("name", "") for r in kernel_classes._rows(doc)
            if kernel_classes.classify(r["name"], r.get("origin")) == "library_gemm"]


def levers(doc: dict, b: dict, trials: dict | None = None) -> list[str]:
    """What can move the library kernels that hold the time, largest class first."""
    out = []
    for c in sorted((c for c in b["classes"] if c["library"]), key=lambda c: -c["share"]):
        if c["id"] == "library_gemm":
            out += _gemm_levers(doc, trials)
        elif c["id"] == "attention":
            out.append("attention already runs a fused library kernel: its dtype (bf16/fp16), head size (a multiple "
                       "of 8, <= 256) and the SDPA backend it selects (torch.nn.attention.sdpa_kernel) set its speed")
        elif c["id"] == "convolution":
            out.append("convolutions: channels_last memory format (model.to(memory_format=torch.channels_last)), "
                       "bf16/fp16, and torch.backends.cudnn.benchmark = True for fixed shapes")
    return out


def _gemm_levers(doc: dict, trials: dict | None) -> list[str]:
    names = _gemm_names(doc)
    out = []
    fp32 = [n for n in names if FP32_GEMM.search(n) and "tf32" not in n.lower()]
    if fp32:
        out.append(f"{len(fp32)} of the {len(names)} GEMM kernels run in fp32 (their names say f32/sgemm/ffma: no "
                   "tensor cores): TF32 (torch.set_float32_matmul_precision('high')) or bf16 autocast is the largest "
                   "lever; compare outputs with dtype tolerances")
    else:
        out.append("a dtype or layout change: bf16/fp16 (or fp8 where the model allows), matrix sizes that are "
                   "multiples of 16, contiguous operands (no transpose copies)")
    arm = next((a for a in (trials or {}).get("arms") or [] if str(a.get("name", "")).startswith("max_autotune")), None)
    measured = (f" (measured by the trials: {arm['name']} {arm['x_baseline']:.3f}x end to end)"
                if arm and _num(arm.get("x_baseline")) else " (the trials' max_autotune_no_cudagraphs arm measures it)")
    out.append("Inductor's Triton GEMM templates under max-autotune, benchmarked against the library GEMM per shape: "
               "torch.compile(mode='max-autotune-no-cudagraphs')" + measured)
    return out


def program_facts(doc: dict, label: str, trials: dict | None = None) -> dict:
    """Facts of the ``library_dominated`` and ``host_bound_step`` program rules (and of each kernel's
    library rules)."""
    b = class_shares(doc)
    if not b["classes"]:
        return {}
    where = f"{label}: ranking by class (references/kernel_classes.yaml)"
    facts = {"library_share": Fact(round(b["library_share"], 6), f"{where}, library classes summed"),
             "library_detail": Fact(library_detail(b), where),
             "triton_share": Fact(round(b["triton_share"], 6), f"{where}, Triton classes summed"),
             "library_levers": Fact("; ".join(levers(doc, b, trials)) or "none known", where)}
    summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
    tl, _ = _timeline(summary)
    if tl:
        bound = host_bound(tl)
        tw = f"{label}: summary.timeline (the steady window, compilation left out)"
        facts["gpu_busy_share"] = Fact(round(tl["busy_share"], 6), f"{tw}: busy_us / active window")
        facts["host_bound"] = Fact(bound["host_bound"], f"{tw}: busy share under host_bound_busy_share, idle "
                                                        "time not one gap (host_bound_largest_gap_share)")
    return facts


def host_bound(tl: dict | None, rules: dict | None = None) -> dict:
    """Whether the host sets the step on a :func:`_timeline`: the GPU busy under
    ``host_bound_busy_share`` of the window with the idle time spread over many gaps (one gap
    holding ``host_bound_largest_gap_share`` of it or more is a pause, ``one_gap``)."""
    idle_cut = threshold("host_bound_busy_share", rules)
    gap_cut = threshold("host_bound_largest_gap_share", rules)
    one_gap = _largest_gap_share(tl)
    idle = bool(tl and tl["busy_share"] < idle_cut)
    return {"host_bound": idle and one_gap < gap_cut, "host_bound_busy_share": idle_cut,
            "largest_gap_share": one_gap, "one_gap": idle and one_gap >= gap_cut}


def _step_time(timeline: dict | None, trials: dict | None) -> dict | None:
    """ms per step: the trials' baseline median (measured end to end), else the ProfilerStep ranges."""
    base = next((a for a in (trials or {}).get("arms") or [] if a.get("name") == "baseline"), None)
    if base and _num(base.get("median_ms")):
        return {"ms": base["median_ms"], "source": "remedy trials: baseline median ms/step"}
    if timeline and _num(timeline.get("step_us")):
        return {"ms": timeline["step_us"] / 1e3,
                "source": f"profile: median of {timeline.get('profiler_steps')} ProfilerStep ranges"}
    return None


def _timeline(summary: dict) -> tuple[dict | None, str | None]:
    tl = summary.get("timeline")
    if not isinstance(tl, dict) or not _num(tl.get("window_us")):
        why = ("a summary table has no timeline" if summary.get("share_denominator")
               else "the profile has no timeline section (made from a summary, or before profile_kernels.py "
                    "recorded one): profile again with a Chrome trace")
        return None, why
    active = tl["window_us"] - (tl.get("compile_gap_us") or 0.0)
    if active <= 0:
        return None, "the kernel window is all compilation"
    out = dict(tl)
    out["active_us"] = round(active, 3)
    out["busy_share"] = tl["busy_us"] / active
    out["idle_share"] = (tl.get("idle_us") or 0.0) / active
    return out, None


def summarize(doc: dict | None, label: str, trials: dict | None = None, rules: dict | None = None) -> dict | None:
    """The ``step`` section of ``investigation/1``; None without a profile."""
    if not isinstance(doc, dict):
        return None
    summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
    b = class_shares(doc)
    tl, tl_missing = _timeline(summary)
    cut = threshold("library_dominated_share", rules)
    step = {"profile": label, "kernel_time_us": b["kernel_time_us"], "unlisted_us": b["unlisted_us"],
            "step_time": _step_time(tl, trials), "timeline": tl, "timeline_missing": tl_missing,
            "classes": b["classes"], "library_share": round(b["library_share"], 6),
            "triton_share": round(b["triton_share"], 6), "library_dominated": b["library_share"] >= cut,
            "library_dominated_share": cut, "levers": levers(doc, b, trials) if b["library_share"] >= cut else []}
    step.update(host_bound(tl, rules))
    step["headline"] = headline(step)
    return step


def _largest(step: dict, prefix: str) -> dict | None:
    tops = [t for c in step["classes"] if c["id"].startswith(prefix) for t in c["top"]]
    return max(tops, key=lambda t: t["share"]) if tops else None


def headline(step: dict) -> str:
    """One paragraph: where the time goes and, when library compute dominates, what moves it."""
    ranked = sorted(step["classes"], key=lambda c: -c["share"])
    where = ", ".join(f"{c['label']} {c['share']:.1%}" for c in ranked[:4]) or "no kernel time"
    text = f"GPU kernel time by class: {where}."
    tl = step.get("timeline")
    if tl:
        where = "steady window after the last compilation" if tl.get("window") == "after the last compilation" \
            else "kernel window, compilation left out"
        text += (f" The GPU was busy {_pct(tl['busy_share'])} of the {_ms(tl['active_us'])} ms {where}; "
                 f"{_pct(tl['idle_share'])} was idle between kernels (host/launch gaps).")
    step["where"] = text
    if step.get("host_bound"):
        text += (f" **The host sets the step: the GPU is idle {_pct(tl['idle_share'])} of the window** (under "
                 f"{step['host_bound_busy_share']:.0%} busy), so no kernel change can save more than the "
                 f"{_pct(tl['busy_share'])} the GPU is busy: look at the host first (Python and launch overhead, "
                 "CPU-side collectives, data loading, synchronizations; CUDA/HIP graphs or one larger compiled "
                 "region cut launch overhead).")
    if step.get("one_gap"):
        text += (f" One gap of {_ms(tl['largest_gaps_us'][0])} ms holds {_pct(step['largest_gap_share'])} of that idle "
                 "time: a synchronization, data loading or the profiler's own step boundary, not launch overhead "
                 "spread over the step (profile more steps, or with a schedule, to see the steady step).")
    if step.get("library_dominated") and step.get("host_bound"):
        text += (f" Of the GPU's kernel time, library kernels hold {step['library_share']:.1%} "
                 f"and Triton kernels {step['triton_share']:.1%}.")
    elif step.get("library_dominated"):
        top = _largest(step, "triton")
        small = (f" (the largest Triton kernel holds {top['share']:.1%}: at most {top['share']:.1%} end to end "
                 "even if it vanished)" if top else "")
        text += (f" **Library kernels dominate: {step['library_share']:.1%} of GPU kernel time**; Triton kernels "
                 f"hold {step['triton_share']:.1%}{small}, so the lever is the library kernels, not Triton tuning: "
                 + "; ".join(step["levers"]) + ".")
    return text


def _largest_gap_share(tl: dict | None) -> float:
    """The largest idle gap's share of all idle time (0 without idle time)."""
    gaps = (tl or {}).get("largest_gaps_us") or []
    idle = (tl or {}).get("idle_us") or 0.0
    return gaps[0] / idle if gaps and idle > 0 else 0.0


def _pct(share: float) -> str:
    """A share as a percent, with a decimal under 10 % (0.05 % is not 0 %)."""
    return f"{share:.0%}" if share >= 0.1 else f"{share * 100:.2g}%"


def _ms(us: float) -> str:
    return f"{us / 1e3:,.0f}" if us >= 1e5 else f"{us / 1e3:.3g}"


def chart(step: dict) -> str | None:
    """A stacked bar of the step: each class's kernel time and, with a timeline, the idle gaps."""
    from ..base.svg_chart import stacked_bar

    segs = [(c["label"], c["total_us"]) for c in step["classes"]]
    tl = step.get("timeline")
    if tl and _num(tl.get("idle_us")):
        segs.append(("idle (host/launch gaps)", tl["idle_us"]))
    title = "Where the step's GPU time goes" + (" (kernels and idle gaps)" if tl else " (kernel time)")
    return stacked_bar(title, segs, unit="us") if segs else None


def markdown(step: dict | None, missing: str | None = None) -> list[str]:
    """The section investigation.md leads with; ``missing``: why there is no profile, when known."""
    if not step:
        return ["## Where the step's time goes", "", "No profile: the step's breakdown is unknown ("
                + md.text(missing or "profile_kernels.py on a trace of the program") + ").", ""]
    lines = ["## Where the step's time goes", "", step["headline"], ""]
    st = step.get("step_time")
    lines.append(f"Step time: {st['ms']:.4g} ms ({md.text(st['source'])})." if st else
                 "Step time: unknown (no remedy trials and no ProfilerStep ranges in the profile).")
    if not step.get("timeline"):
        lines.append(f"GPU busy/idle: unknown ({md.text(step.get('timeline_missing'))}).")
    lines.append("")
    rows = [[md.text(c["label"]), f"{c['total_us'] / 1e3:.3f}", f"{c['share']:.1%}", str(c["kernels"]),
             str(c["calls"]), md.text(", ".join(f"{t['name'][:60]} ({t['share']:.1%})" for t in c["top"][:2]))]
            for c in sorted(step["classes"], key=lambda c: -c["share"])]
    lines += md.table(["class", "GPU ms", "share of kernel time", "kernels", "launches", "largest"], rows)
    total = sum(c["share"] for c in step["classes"])
    lines += ["", f"Classes sum to {total:.1%} of {step['kernel_time_us'] / 1e3:.3f} ms of GPU kernel time "
              f"(profile `{md.text(step['profile'])}`; patterns and their sources: references/kernel_classes.yaml)."]
    svg = chart(step)
    return lines + (["", svg] if svg else []) + [""]
