"""Which remedy arms a trial runs, and why: :func:`plan_arms` over facts, and the facts reader.

Facts come from an investigation (``investigation/1`` and the per-kernel ``report.json`` it
indexes), one kernel report (``investigation_report/1``), a ``triton_env/1`` record (its
``--smoke`` results) or a plain JSON object ``{"kernels": {name: {fact: value}}, "program":
{fact: value}, "program_rules": [...], "disable_targets": [...], "rewrites": {arm: "file:line"},
"buffer_ops_smoke_ok": bool, "pins": path, "device": name}``; ``device`` is the device the capture's kernels ran on (a check_env
record's first device, a report's ``sections.env.device``). :func:`plan_arms` is pure: the same
facts and environment give the same plan.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import InputError

BUFFER_OPS_ENV = {"AMDGCN_USE_BUFFER_OPS": "1", "HCUGCN_USE_BUFFER_OPS": "1"}
CFG = "torch._inductor.config."


@dataclass
class ArmSpec:
    name: str
    settings: dict = field(default_factory=dict)   # inductor.<name> / dynamo.<name> -> value
    env: dict = field(default_factory=dict)        # environment variables
    bootstrap: list = field(default_factory=list)  # extra launcher flags
    proposed_by: str = ""
    change: str = ""                               # the concrete change, for "what to change"
    skip: str | None = None                        # why it does not run, when it does not
    priority: str | None = None                    # user / step / facts / always / low (tko.chains.trials.arm_priority)


@dataclass
class Facts:
    kernels: dict = field(default_factory=dict)    # kernel -> {fact: value}
    program: dict = field(default_factory=dict)
    program_rules: list = field(default_factory=list)
    kernel_rules: dict = field(default_factory=dict)  # kernel -> [rule ids that fired]
    disable_targets: list = field(default_factory=list)
    rewrites: dict = field(default_factory=dict)   # catalog arm -> file:line of its pattern in the model code
    buffer_ops_smoke_ok: bool | None = None
    pins: str | None = None
    launch_overrides: str | None = None            # launch_overrides/1 of hand-written kernels (pinned arm)
    device: str | None = None                      # the device the capture's kernels ran on
    given: bool = False


def _set_text(settings: dict) -> str:
    parts = []
    for name, value in settings.items():
        root, _, rest = name.partition(".")
        prefix = "torch._inductor.config." if root == "inductor" else "torch._dynamo.config."
        parts.append(f"{prefix}{rest} = {value!r}")
    return "set " + ", ".join(parts)


def _kernels_with(facts: Facts, fact: str) -> list[str]:
    return sorted(k for k, f in facts.kernels.items() if f.get(fact) is True)


def _reduction_reason(facts: Facts) -> str | None:
    if not facts.given:
        return "no facts given"
    found = [f"{k}: {fact}" for fact in ("multi_pass", "dynamic_sizes") for k in _kernels_with(facts, fact)]
    return "; ".join(found) if found else None


def _small_ceilings(facts: Facts, kernels: list[str]) -> str | None:
    """When every kernel in ``kernels`` can save under ``min_end_to_end_gain`` of the step, in words;
    else None. A kernel's bound is its measured ceiling (its report's ``ceiling``: share x (1 -
    1/headroom)), else its share (no kernel saves more than its share). An arm only such kernels
    propose cannot move the step beyond its noise: it runs after the others (on an H200 a
    cross-entropy step ran four reduction arms for a 6.9 % kernel whose ceiling was 1.3 % while the
    budget dropped the chunked cross entropy and max-autotune)."""
    from ..base.decide import threshold

    cut, bounds = threshold("min_end_to_end_gain"), []
    for kernel in kernels:
        f = facts.kernels.get(kernel, {})
        bound = f.get("ceiling") if f.get("headroom_measured") is True else f.get("share")
        if not isinstance(bound, (int, float)) or isinstance(bound, bool) or not bound < cut:
            return None
        bounds.append(bound)
    if not bounds:
        return None
    return f"at most {max(bounds):.1%} of the step end to end, under the {cut:.0%} cut (min_end_to_end_gain)"


def _launch_bound_reason(facts: Facts) -> str:
    if "many_tiny_launches" in facts.program_rules:
        return "program.many_tiny_launches"
    if facts.program.get("host_bound") is True:  # graphs cut the host's launch time first
        busy = facts.program.get("gpu_busy_share")
        return "program.host_bound" + (f" (the GPU busy {busy:.0%} of the step)" if isinstance(busy, float) else "")
    bound = sorted(k for k, rules in facts.kernel_rules.items() if "launch_bound" in rules)
    return f"{bound[0]}: launch_bound" if bound else "always tried on a GPU"


def _one_flag_arms(facts: Facts) -> list[ArmSpec]:
    coord = {"inductor.coordinate_descent_tuning": True}
    mat = {"inductor.max_autotune": True, "inductor.max_autotune_pointwise": True,
           "inductor.triton.cudagraphs": False}
    library = "library_dominated" in facts.program_rules   # Inductor's GEMM templates race the library's
    detail = facts.program.get("library_detail")
    return [
        ArmSpec("baseline", proposed_by="the repro as the user runs it", change="nothing"),
        ArmSpec("coordinate_descent", coord, proposed_by="one-flag remedy (always tried)",
                change=_set_text(coord)),
        ArmSpec("max_autotune_no_cudagraphs", mat,
                proposed_by=(f"program.library_dominated ({detail}): Inductor's GEMM templates against the "
                             "library GEMMs" if isinstance(detail, str) else "program.library_dominated")
                if library else "one-flag remedy (always tried)", priority="step" if library else None,
                change=_set_text(mat) + ' (torch.compile(mode="max-autotune-no-cudagraphs"))'),
    ]


def _gpu_arms(facts: Facts, env: dict) -> list[ArmSpec]:
    graphs = {"inductor.triton.cudagraphs": True}
    by = _launch_bound_reason(facts)
    arm = ArmSpec("cudagraphs", graphs, proposed_by=by, priority="step" if by.startswith("program.") else None,
                  change=_set_text(graphs) + ' (torch.compile(mode="reduce-overhead"))')
    if not env.get("gpu"):
        arm.skip = "no GPU: CUDA/HIP graphs need one"
    return [arm]


def _reduction_arms(facts: Facts) -> list[ArmSpec]:
    reason = _reduction_reason(facts)
    static = {"dynamo.automatic_dynamic_shapes": False, "dynamo.assume_static_by_default": True}
    arms = [ArmSpec("multi_kernel", {"inductor.triton.multi_kernel": 1}),
            ArmSpec("mix_order_reduction", {"inductor.triton.mix_order_reduction": "toggle"}),
            ArmSpec("cooperative_reductions", {"inductor.triton.cooperative_reductions": True}),
            ArmSpec("static_shapes", static, bootstrap=["--static-shapes"])]
    small = _small_ceilings(facts, sorted({k for f in ("multi_pass", "dynamic_sizes") for k in _kernels_with(facts, f)}))
    for arm in arms:
        arm.proposed_by = reason + (f" ({small})" if small else "") if reason else ""
        arm.priority = "low" if small else None
        arm.change = _set_text(arm.settings)
        if arm.name == "static_shapes":
            arm.change += " and compile with torch.compile(..., dynamic=False)"
        if reason is None:
            arm.skip = "no kernel is a multi-pass reduction or compiled for dynamic sizes"
    return arms


def _eager_arm(facts: Facts, disable: list[str]) -> ArmSpec:
    targets = list(disable) or list(facts.disable_targets)
    if targets:
        flags = [x for t in targets for x in ("--disable", t)]
        by = "--disable" if disable else "facts: model code of the hot kernel"
        return ArmSpec("eager_fallback", bootstrap=flags, proposed_by=by,
                       change="wrap " + ", ".join(targets) + " in torch._dynamo.disable")
    return ArmSpec("eager_fallback", bootstrap=["--eager-compile"],
                   proposed_by="no region named: all compiled regions run eagerly",
                   change="drop torch.compile (run the compiled regions eagerly)")


def _replace_arm(facts: Facts, env: dict) -> ArmSpec:
    from ..remedies.row_replace import row_pattern

    found = {k: row_pattern(k) for k in _kernels_with(facts, "multi_pass")} if facts.given else {}
    found = {k: op for k, op in found.items() if op}
    ops = sorted(set(found.values())) or ["softmax", "log_softmax", "layer_norm", "rms_norm"]
    arm = ArmSpec("replace", bootstrap=["--replace-rows", ",".join(ops)],
                  proposed_by="; ".join(f"{k}: multi-pass {op}" for k, op in sorted(found.items()))
                  or ("facts: no multi-pass row kernel" if facts.given else "no facts given: tried"),
                  change="route " + ", ".join(ops) + " to the bundled row kernels "
                         "(tko.remedies.rowkernels, one pass or chunked by row length; torch.ops.tko.*)")
    small = _small_ceilings(facts, sorted(found))
    if small:
        arm.proposed_by, arm.priority = f"{arm.proposed_by} ({small})", "low"
    if not env.get("gpu"):
        arm.skip = "no GPU: the bundled row kernels run on a GPU"
    elif facts.given and not found:
        arm.skip = "no multi-pass softmax / log-softmax / LayerNorm / RMSNorm kernel"
    return arm


def _rewrite_arm(facts: Facts, arm_name: str) -> ArmSpec:
    """A model-level rewrite of references/rewrite_catalog.yaml, run as an FX pass inside the
    unchanged program (tko.remedies.graph_rewrites); proposed when a kernel's name or the model
    code shows the pattern."""
    from ..read.rewrite_catalog import bundled, by_kernel_names
    from ..remedies import graph_rewrites

    entries = [e for e in bundled() if e.get("arm") == arm_name]   # e.g. sdpa: attention by hand, a causal mask
    entry, ids = entries[0], " / ".join(e["id"] for e in entries)
    mod = graph_rewrites.module(arm_name)
    kernels = [(k, None) for k in facts.kernels]
    hits = [(e["id"], f["kernel"]) for e in entries for f in by_kernel_names(e, kernels)] if facts.given else []
    found = [kernel for _, kernel in hits]
    found += [f"the model code ({facts.rewrites[arm_name]})"] if arm_name in facts.rewrites else []
    named = " / ".join(dict.fromkeys(i for i, _ in hits)) if hits and arm_name not in facts.rewrites else ids
    arm = ArmSpec(arm_name, env={mod.ENV: "1"},
                  proposed_by=(f"{named} in " + ", ".join(found)) if found
                  else (f"facts: no kernel shows {ids}" if facts.given else "no facts given: tried"),
                  change=f"{entry['replacement']} (an Inductor pre-grad pass here; in the model: "
                         f"references/rewrite_catalog.yaml {entry['id']})")
    arm.priority = "step" if found else None   # a catalog rewrite the program shows: a step-level change
    if facts.given and not found:
        arm.skip = (f"neither a Triton kernel's name (rewrite_catalog.yaml kernel_names) nor the model code "
                    f"shows {ids}")
    return arm


def _rewrite_arms(facts: Facts) -> list[ArmSpec]:
    from ..remedies import graph_rewrites

    return [_rewrite_arm(facts, name) for name in graph_rewrites.REWRITES]


def _buffer_ops_arm(facts: Facts, env: dict) -> ArmSpec:
    arm = ArmSpec("buffer_ops", env=dict(BUFFER_OPS_ENV), proposed_by="check_env.py --smoke",
                  change="set " + " ".join(f"{k}=1" for k in BUFFER_OPS_ENV) + " in the environment")
    if not env.get("hip"):
        arm.skip = "not a HIP build of torch (buffer ops are an AMD/Hygon compile option)"
    elif facts.buffer_ops_smoke_ok is not True:
        arm.skip = ("no check_env.py --smoke record compiled with the flag set" if facts.buffer_ops_smoke_ok is None
                    else "check_env.py --smoke failed to compile with the flag set")
    return arm


def _pinned_arm(facts: Facts, pins: str | None) -> ArmSpec:
    path = pins or facts.pins
    arm = ArmSpec("pinned", proposed_by="--pins" if pins else "facts: pins file",
                  change=f"pin the kernel configs of {path} (the sweep's best configs)")
    if path:
        arm.env = {"TKO_PINS": os.path.abspath(path)}
    if facts.launch_overrides:  # hand-written kernels: the sweep's best launch arguments
        arm.env["TKO_LAUNCH_OVERRIDES"] = os.path.abspath(facts.launch_overrides)
        arm.change = (arm.change + "; " if path else "") + \
            f"launch the hand-written kernels with the arguments of {facts.launch_overrides}"
    if not arm.env:
        arm.skip = "no pins file (--pins, or --pins-from-sweep SWEEP.json)"
    return arm


def plan_arms(facts: Facts | None, env: dict, disable: list[str] | None = None,
              pins: str | None = None) -> list[ArmSpec]:
    """Every arm, in run order; those that do not apply carry ``skip`` with the reason.

    ``env``: ``gpu`` (a CUDA/HIP device is visible) and ``hip`` (torch.version.hip)."""
    facts = facts or Facts()
    arms = [*_one_flag_arms(facts), *_gpu_arms(facts, env), *_reduction_arms(facts),
            _eager_arm(facts, disable or []), _replace_arm(facts, env), *_rewrite_arms(facts), _buffer_ops_arm(facts, env),
            _pinned_arm(facts, pins)]
    _skip_without_compiled_region(arms, facts)
    return arms


# arms that act only through torch.compile (Inductor settings, Dynamo, FX passes): the row kernels'
# replace, buffer ops (a Triton compile option) and launch overrides reach hand-written kernels too
_COMPILE_ONLY = ("coordinate_descent", "max_autotune_no_cudagraphs", "cudagraphs", "multi_kernel",
                 "mix_order_reduction", "cooperative_reductions", "static_shapes", "eager_fallback")


def _skip_without_compiled_region(arms: list[ArmSpec], facts: Facts) -> None:
    from ..remedies import graph_rewrites

    if facts.program.get("hand_written_only") is not True:
        return
    for arm in arms:
        if (arm.skip is None and arm.name in _COMPILE_ONLY) or arm.name in graph_rewrites.REWRITES:
            arm.skip = ("the capture saw only hand-written Triton kernels (no torch.compile region): "
                        "an Inductor setting or FX pass changes nothing here")


ARM_NAMES = [a.name for a in plan_arms(None, {})]


def restrict(plan: list[ArmSpec], names: list[str]) -> list[ArmSpec]:
    """Keep the arms named (the baseline always); an unknown name is an input error."""
    unknown = [n for n in names if n not in ARM_NAMES]
    if unknown:
        raise InputError(f"--arms: unknown arm {', '.join(unknown)} (known: {', '.join(ARM_NAMES)})")
    return [a for a in plan if a.name == "baseline" or a.name in names]


# ----------------------------------------------------------------------------- facts


def _values(facts: dict) -> dict:
    return {k: (v.get("value") if isinstance(v, dict) and "value" in v else v) for k, v in facts.items()}


def _from_report(doc: dict, facts: Facts) -> None:
    kernel = doc.get("kernel") or "?"
    facts.kernels[kernel] = _values(doc.get("facts") or {})
    env = (doc.get("sections") or {}).get("env") or {}
    if isinstance(env, dict) and isinstance(env.get("device"), str):
        facts.device = facts.device or env["device"]
    decision = doc.get("decision") or {}
    facts.kernel_rules[kernel] = [f.get("rule") for f in decision.get("fired") or []]
    _from_program(doc.get("program"), facts)
    frames = ((doc.get("sections") or {}).get("model_code") or {}).get("frames") or []
    for frame in frames:
        target = frame.get("disable_target") if isinstance(frame, dict) else None
        if target and target not in facts.disable_targets:
            facts.disable_targets.append(target)


def _from_program(program: dict | None, facts: Facts) -> None:
    if not program:
        return
    facts.program.update(_values(program.get("facts") or {}))
    for rule in [program.get("rule"), *[f.get("rule") for f in program.get("fired") or []]]:
        if rule and rule not in facts.program_rules:
            facts.program_rules.append(rule)


def _from_investigation(doc: dict, base: Path, facts: Facts) -> None:
    from ..base.artifact import read_artifact

    _from_program(doc.get("program"), facts)
    for kernel in doc.get("kernels") or []:
        for target in kernel.get("disable_targets") or []:
            if target not in facts.disable_targets:
                facts.disable_targets.append(target)
        report = base / (kernel.get("dir") or "") / "report.json"
        if kernel.get("dir") and report.is_file():
            _from_report(read_artifact(report, "investigation_report"), facts)
    # online the capture is OUT/capture; offline, the folder it was read from
    captured = doc.get("capture_dir") if isinstance(doc.get("capture_dir"), str) else None
    for env in dict.fromkeys([base / "capture" / "triton_env.json"]
                             + ([Path(captured) / "triton_env.json"] if captured else [])):
        if env.is_file():
            _from_triton_env(read_artifact(env, "triton_env"), facts)
    if (base / "pins.json").is_file():
        facts.pins = str(base / "pins.json")
    if (base / "launch_overrides.json").is_file():
        facts.launch_overrides = str(base / "launch_overrides.json")


def _from_triton_env(doc: dict, facts: Facts) -> None:
    from ..verdict.evidence import Env

    facts.device = Env.read(doc).device or facts.device
    runs = (doc.get("smoke") or {}).get("runs") or []
    flagged = [(r.get("variants") or {}).get("1") for r in runs]
    flagged = [v for v in flagged if isinstance(v, dict)]
    if flagged:
        facts.buffer_ops_smoke_ok = any(v.get("ok") is True for v in flagged)


def _from_plain(doc: dict, base: Path, facts: Facts) -> None:
    for kernel, values in (doc.get("kernels") or {}).items():
        facts.kernels[kernel] = _values(values or {})
    facts.program.update(_values(doc.get("program") or {}))
    facts.program_rules += [r for r in doc.get("program_rules") or [] if r not in facts.program_rules]
    facts.disable_targets += [t for t in doc.get("disable_targets") or [] if t not in facts.disable_targets]
    rewrites = doc.get("rewrites") if isinstance(doc.get("rewrites"), dict) else {}
    facts.rewrites.update({k: str(v) for k, v in rewrites.items() if isinstance(k, str)})
    if doc.get("buffer_ops_smoke_ok") is not None:
        facts.buffer_ops_smoke_ok = bool(doc["buffer_ops_smoke_ok"])
    if doc.get("pins"):
        facts.pins = str(base / doc["pins"])
    if isinstance(doc.get("launch_overrides"), str):
        facts.launch_overrides = str(base / doc["launch_overrides"])
    if isinstance(doc.get("device"), str):
        facts.device = doc["device"]


def load_facts(paths: list[str]) -> Facts | None:
    """Merge the facts of every file given; None when none was given."""
    from ..base.artifact import load_json

    if not paths:
        return None
    facts = Facts(given=True)
    for path in paths:
        doc = load_json(path)
        if not isinstance(doc, dict):
            raise InputError(f"{path}: expected a JSON object of facts")
        base = Path(path).resolve().parent
        schema = str(doc.get("schema") or "").split("/")[0]
        if schema == "investigation":
            _from_investigation(doc, base, facts)
        elif schema == "investigation_report":
            _from_report(doc, facts)
        elif schema == "triton_env":
            _from_triton_env(doc, facts)
        elif not schema:
            _from_plain(doc, base, facts)
        else:
            raise InputError(f"{path}: a {doc['schema']} artifact holds no facts for remedies "
                             "(give investigation.json, a kernel report.json or triton_env.json)")
    return facts
