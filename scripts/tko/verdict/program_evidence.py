"""Evidence of the whole program: the kernel profile (a kernel's row, the device it ran on, the
program rules over all kernels) and the model code behind each kernel (the artifact manifest)."""


from __future__ import annotations

from dataclasses import dataclass

from ..base import archs
from ..base.decide import Fact
from .evidence import (Evidence, _int, _list, _list_or_none, _num, _obj, _objs, _str, find_kernel)
from .trial_evidence import (trial_facts)

# ----------------------------------------------------------------------------- profile

@dataclass(frozen=True)
class ProfileRow:
    """One ``kernels[]`` or ``ranking[]`` row of a ``kernel_profile/1``."""
    rank: int | None
    name: str | None
    origin: str | None
    calls: int | float | None
    total_us: int | float | None
    mean_us: int | float | None
    share: int | float | None
    launch_op: str | None
    op_chain: list | None

    @classmethod
    def read(cls, rec: dict) -> ProfileRow:
        return cls(rank=_int(rec.get("rank")), name=_str(rec.get("name")), origin=_str(rec.get("origin")),
                   calls=_num(rec.get("calls")), total_us=_num(rec.get("total_us")),
                   mean_us=_num(rec.get("mean_us")), share=_num(rec.get("share")),
                   launch_op=_str(rec.get("launch_op")), op_chain=_list_or_none(rec.get("op_chain")))

    def mean(self) -> int | float | None:
        """mean_us, or total_us / calls for the compact ranking rows."""
        if self.mean_us is not None:
            return self.mean_us
        return self.total_us / self.calls if self.total_us is not None and self.calls else None


@dataclass(frozen=True)
class Profile:
    """The fields of a ``kernel_profile/1`` the evidence reads."""
    kernels: list[ProfileRow]
    ranking: list[ProfileRow]
    kernel_time_us: int | float | None
    dispatches: int | float | None
    device_name: str | None      # the trace's first deviceProperties entry
    device_arch: str | None

    @classmethod
    def read(cls, doc: dict) -> Profile:
        summary = _obj(doc.get("summary"))
        devices = _objs(doc.get("device"))
        name, arch = _trace_device(devices[0]) if devices else (None, None)
        return cls(kernels=[ProfileRow.read(r) for r in _objs(doc.get("kernels"))],
                   ranking=[ProfileRow.read(r) for r in _objs(doc.get("ranking"))],
                   kernel_time_us=_num(summary.get("kernel_time_us")), dispatches=_num(summary.get("dispatches")),
                   device_name=name, device_arch=arch)


def _trace_device(dev: dict) -> tuple[str | None, str | None]:
    """(name, arch) of a Chrome trace ``deviceProperties`` entry: a HIP trace's ``gcnArchName``,
    else an NVIDIA device's compute capability (``computeMajor`` 9, ``computeMinor`` 0: sm_90);
    an AMD device's compute capability is no arch name, so none is made of it."""
    name, gcn = _str(dev.get("name")), _str(dev.get("gcnArchName"))
    if gcn:
        return name, archs.normalize(gcn)
    major, minor = _int(dev.get("computeMajor")), _int(dev.get("computeMinor"))
    nvidia = name is not None and name.upper().startswith("NVIDIA")
    return name, (f"sm_{major}{minor}" if nvidia and major is not None and minor is not None else None)


def profile_device(doc: dict | None) -> tuple[str | None, str | None]:
    """(device name, arch) a ``kernel_profile/1`` recorded; (None, None) when it names none."""
    if not doc:
        return None, None
    prof = Profile.read(doc)
    return prof.device_name, prof.device_arch


def from_profile(ev: Evidence, doc: dict | None, label: str) -> None:
    if doc is None:
        ev.gaps.append("no profile (profile_kernels.py): profile rank and time share unknown")
        return
    prof = Profile.read(doc)
    # `kernels` holds the detailed top N; `ranking` (when present) every kernel, compactly.
    ranked, field_name = prof.kernels, "kernels"
    i, rec = find_kernel(ranked, ev.kernel, "name")
    if rec is None and prof.ranking:
        ranked, field_name = prof.ranking, "ranking"
        i, rec = find_kernel(ranked, ev.kernel, "name")
    if rec is None:
        ev.gaps.append(f"{label}: kernel not among the {len(ranked)} ranked kernels "
                       f"(run with a larger --top, or it did not run in the profiled program)")
        return
    where = f"{label}: {field_name}[{i}]"
    ev.sections["profile"] = {k: getattr(rec, k) for k in ("rank", "name", "origin", "calls", "total_us",
                                                            "mean_us", "share", "launch_op", "op_chain")}
    ev.sections["profile"]["kernel_time_us"] = prof.kernel_time_us
    ev.sections["profile"]["ranked"] = len(prof.ranking or prof.kernels)
    ev.fact("share", rec.share, f"{where}.share")
    ev.fact("calls", rec.calls, f"{where}.calls")
    ev.fact("mean_us", rec.mean_us, f"{where}.mean_us")


def program_facts(doc: dict, label: str, tiny_us: float) -> dict:
    """Facts about the whole profiled program (``program_rules``): how much GPU time sits in
    kernels too short to be anything but launch-bound."""
    prof = Profile.read(doc)
    ranked, field_name = (prof.ranking, "ranking") if prof.ranking else (prof.kernels, "kernels")
    timed = [k for k in ranked if k.mean() is not None]
    tiny = [k for k in timed if k.mean() < tiny_us]
    where = f"{label}: {field_name}[total_us / calls < {tiny_us:g}]"
    facts = {}
    if timed:
        facts["tiny_kernel_share"] = Fact(round(sum(k.share or 0.0 for k in tiny), 6), f"{where}.share, summed")
        facts["tiny_kernel_launches"] = Fact(sum(k.calls or 0 for k in tiny), f"{where}.calls, summed")
        facts["tiny_kernels"] = Fact(len(tiny), f"{where}: count of {len(timed)} kernels")
    from .step_breakdown import program_facts as class_facts

    facts.update(class_facts(doc, label))
    if prof.dispatches and prof.kernel_time_us is not None:
        facts["mean_kernel_us"] = Fact(round(prof.kernel_time_us / prof.dispatches, 3),
                                       f"{label}: summary.kernel_time_us / summary.dispatches")
    return facts


def program_decision(profile: dict | None, label: str, rules: dict | None = None,
                     trials: dict | None = None, trials_label: str = "trials.json") -> dict | None:
    """The ``program_rules`` of decision_rules.yaml on the whole profile and the remedy trials:
    what no single kernel shows (a program of tiny launches, a remedy measured end to end).
    None without a profile and without trials."""
    if not profile and not trials:
        return None
    from ..base.decide import _threshold, decide, load_rules

    rules = rules if rules is not None else load_rules()
    facts = program_facts(profile, label, _threshold("launch_bound_mean_us", rules.get("thresholds", {}))) \
        if profile else {}
    facts.update(trial_facts(trials, trials_label))
    decision = decide(facts, rules, scope="program_rules")
    chosen = next((f for f in decision.fired if f.rule == decision.rule), None)
    return {"verdict": decision.verdict, "rule": decision.rule, "says": chosen.says if chosen else None,
            "fired": [f.__dict__ for f in decision.fired],
            "facts": {k: {"value": f.value, "source": f.source} for k, f in facts.items()}}


@dataclass(frozen=True)
class ModelCode:
    """A manifest kernel's ``model_code``: the model lines the kernel was fused from."""
    aten_ops: list
    source_nodes: list
    frames: list[dict]
    unmapped_nodes: list

    @classmethod
    def read(cls, mc: dict) -> ModelCode:
        return cls(aten_ops=_list(mc.get("aten_ops")), source_nodes=_list(mc.get("source_nodes")),
                   frames=_objs(mc.get("frames")), unmapped_nodes=_list(mc.get("unmapped_nodes")))


@dataclass(frozen=True)
class ManifestKernel:
    """One ``kernels[]`` entry of an ``artifact_manifest/1``."""
    kernel: str | None
    model_code: ModelCode | None
    missing_model_code: str | None  # why the model code is missing, when the manifest says

    @classmethod
    def read(cls, rec: dict) -> ManifestKernel:
        mc = rec.get("model_code")
        why = next((m["reason"] for m in _objs(rec.get("missing")) if isinstance(m.get("reason"), str)
                    and str(m.get("kind", "")).startswith("model_code")), None)
        return cls(kernel=_str(rec.get("kernel")), model_code=ModelCode.read(mc) if isinstance(mc, dict) else None,
                   missing_model_code=why)


def from_manifest(ev: Evidence, doc: dict | None, label: str) -> None:
    """The model code the kernel comes from (collect_inductor_artifacts.py's ``model_code``)."""
    if doc is None:
        ev.gaps.append("no artifact manifest (collect_inductor_artifacts.py): the model code behind the kernel unknown")
        return
    kernels = [ManifestKernel.read(k) for k in _objs(doc.get("kernels"))]
    i, k = find_kernel(kernels, ev.kernel, "kernel")
    mc = k.model_code if k else None
    if not mc or not mc.frames:
        why = (k.missing_model_code if k else None) or "the kernel is not in the manifest"
        ev.gaps.append(f"{label}: model code unknown ({why})")
        return
    frames = []
    for f in mc.frames:
        # the report keys paths by file and joins a frame's nodes: a field of the wrong type reads as none
        text = {key: _str(f.get(key)) for key in ("file", "qualname", "function", "code")}
        target = f"__main__:{text['qualname']}" if text["qualname"] else None
        frames.append({**f, **text, "line": _int(f.get("line")), "nodes": _list(f.get("nodes")), "disable_target": target})
    ev.sections["model_code"] = {"source": f"{label}: kernels[{i}].model_code", "aten_ops": mc.aten_ops,
                                 "source_nodes": mc.source_nodes, "frames": frames,
                                 "unmapped_nodes": mc.unmapped_nodes}


