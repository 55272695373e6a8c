"""The whole investigation chain, as the scripts a user would run by hand, one step each.

Online (``investigate.py -- python repro.py``, needs the GPU the repro runs on): env check,
capture run (the capture patch, Inductor logs, a private Inductor cache), profile run, peak
bandwidth, then the offline part. Offline (``--from-capture DIR``): summarize, collect, and for
the top-N Triton kernels inspect, scan, compile-probe and, where a GPU exists or a recorded run
is present, the standalone timing; then one report per kernel and an index. On a GPU, a kernel
whose report says "continue Triton tuning" is swept (sweep_captured_kernel.py) and its report
remade with the measured variants.

A step that fails is recorded (status, the error's last line) and the chain goes on: its
absence shows up as a gap in the reports, and investigate.py exits non-zero. Only a repro that
fails under capture stops the chain: every later step needs its output. Every step is a subprocess running a script of
``scripts/``, so what ``investigate.py`` does can be repeated by hand from ``investigation.json``.
"""


from __future__ import annotations

import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..base import fronts, resources
from ..base import atomic
from ..base.interpreter import interpreter_on
from ..verdict import evidence, program_evidence, trial_evidence
from ..base.errors import InputError, ToolFailure
from ..base.layout import (CAPTURE_LOG, CAPTURE_KERNELS, INDUCTOR_CACHE, PROFILE_DIR, RUNS_DIR, ENV_FILE, PEAKS_FILE, REPRO_FILE)
from ..compile.probe_variants import HINT_VARIANTS
from ..base.decide import threshold
from .chain_steps import (Background, Chain)

SCRIPTS = resources.scripts_dir()


LISTING_SUFFIXES = {".amdgcn", ".s", ".ptx", ".sass", ".cubin"}


def has_listing(folder: Path) -> bool:
    return folder.is_dir() and any(f.suffix in LISTING_SUFFIXES for f in folder.rglob("*") if f.is_file())


def script(name: str) -> list[str]:
    return fronts.front_argv(name)


# Device files a CUDA or ROCm / DTK driver exposes: without any, torch sees no GPU, and asking it
# would cost this process an import of torch (about 2 s).
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def gpu_available() -> bool:
    if not any(os.path.exists(p) for p in GPU_DEVICE_FILES):
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def capture_online(chain: Chain, cmd: list[str], cap: Path, smoke: bool) -> None:
    """Run the repro under capture and under the profiler, recording a capture directory.

    ``python repro.py`` runs through the capture patch's launcher as before; a multi-process
    launcher (torchrun, ``python -m torch.distributed.run``, a shell script) runs as typed, the
    capture installed in each of its Python processes by the site route (``tko.patch.site_route``),
    as it is in the workers a script spawns."""
    from ..patch import site_route

    if not cmd or not cmd[-1]:
        raise InputError("no repro command after '--'")
    launcher = site_route.is_multi_process_launcher(cmd)
    argv = cmd[1:] if Path(cmd[0]).name.startswith("python") else cmd
    if not launcher and (not argv or not argv[0].endswith(".py") or not Path(argv[0]).is_file()):
        raise InputError(f"{argv[0] if argv else cmd[0]}: the repro must be a Python script (python repro.py ...) "
                         "or a launcher (torchrun ..., python -m torch.distributed.run ..., bash run.sh)")
    cap.mkdir(parents=True, exist_ok=True)
    atomic.write_text(cap / REPRO_FILE, json.dumps({"command": list(cmd) if launcher else ["python", *argv]}) + "\n")
    chain.planned = len(chain.steps) + 4  # check_env, capture, profile, peak_bandwidth
    chain.run("check_env", script("check_env.py") + ["--out", cap / ENV_FILE, "--quiet"]
              + (["--smoke"] if smoke else []), output=cap / ENV_FILE)
    # Triton's own cache inside Inductor's: hand-written kernels compile there too, where the
    # collect step finds their ISA (Inductor takes TRITON_CACHE_DIR as its Triton cache when set)
    caches = {"TORCHINDUCTOR_CACHE_DIR": str(cap / INDUCTOR_CACHE),
              "TRITON_CACHE_DIR": str(cap / INDUCTOR_CACHE / "triton" / "all")}
    env = {**caches, "TORCH_LOGS": "+inductor,output_code",
           "TRITON_CAPTURE_DIR": str(cap / CAPTURE_KERNELS), "TRITON_CAPTURE_FORCE_RETUNE": "1",
           **site_route.site_env(["tko.patch.site_hooks:capture"])}
    run = list(cmd) if launcher else script("autotune_capture_patch.py") + [
        "--dir", cap / CAPTURE_KERNELS, "--force-retune", argv[0], "--", *argv[1:]]
    if not chain.run("capture", run, env=env, log=cap / CAPTURE_LOG, output=cap / CAPTURE_KERNELS, stream=True):
        repro_failed(chain, cap / CAPTURE_LOG)
    if not gpu_available():  # the profiler and the copy peak time a GPU: nothing to record here
        why = ("no GPU here: the profiler times GPU kernels"
               + (" (the capture ran the kernels in Triton's interpreter: a check, not a timing)"
                  if interpreter_on() else ""))
        chain.skip("profile", why)
        chain.skip("peak_bandwidth", "no GPU here: nothing to measure")
        return
    (cap / PROFILE_DIR).mkdir(exist_ok=True)
    # the kernels the capture recorded are Triton kernels, hand-written @triton.jit ones included
    logged = ["--capture-log", cap / CAPTURE_KERNELS / "autotune.log"] \
        if (cap / CAPTURE_KERNELS / "autotune.log").is_file() else []
    chain.run("profile", script("profile_kernels.py") + ["--record-shapes", *logged,
        "--json-out", cap / PROFILE_DIR / "profile.json", "--markdown-out", cap / PROFILE_DIR / "profile.md",
        "--", *(list(cmd) if launcher else [sys.executable, *argv])],
        env=caches, output=cap / PROFILE_DIR / "profile.json")
    chain.run("peak_bandwidth", script("measure_peak_bandwidth.py") + ["--out", cap / PEAKS_FILE],
              output=cap / PEAKS_FILE)


def ranks_summary(cap: Path, out: Path) -> dict | None:
    """``investigation/1`` ``ranks``: the cross-rank view a multi-process profile run wrote
    (``profile.ranks.json``, ``rank_view/1``), without its per-rank collective lists."""
    for folder in (cap / PROFILE_DIR, out):
        doc = load_doc(folder / "profile.ranks.json")
        if doc and str(doc.get("schema", "")).startswith("rank_view/"):
            keep = ("world_size", "slowest", "compute_spread", "communication_share", "communication_bound",
                    "threshold", "verdict")
            view = {k: doc.get(k) for k in keep}
            view["ranks"] = [{k: v for k, v in r.items() if k != "collectives"}
                             for r in evidence._objs(doc.get("ranks"))]
            view["path"] = str(folder / "profile.ranks.json")
            return view
    return None


def repro_failed(chain: Chain, log: Path) -> None:
    """The repro itself failed: every later step needs its output, so stop here."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        lines = []
    print("[investigate] the repro failed under capture; its last lines:", file=sys.stderr)
    for line in lines[-12:]:
        print(f"  | {line}", file=sys.stderr)
    from ..base.subproc import failure_line

    cause = failure_line("\n".join(lines)) or "no output"
    # Triton's interpreter refuses some kernels a GPU compiles (a float argument used as a tensor, some
    # libdevice calls): say where it ran, so the user checks the program there, not the capture
    where = (" in Triton's interpreter (TRITON_INTERPRET=1 is set), which runs fewer kernels than a GPU does"
             if interpreter_on() else "")
    raise ToolFailure(f"the repro failed ({chain.steps[-1].error.split(':')[0]}){where}: {cause}; full log: {log}; "
                      "fix the repro (it must run as `python repro.py ...` on this machine), then run again")


def repro_command(cap: Path) -> list[str] | None:
    """The command an online capture ran (``repro_command.json``), when recorded."""
    command = (load_doc(cap / REPRO_FILE) or {}).get("command") if (cap / REPRO_FILE).is_file() else None
    # a command is a list of strings: anything else in the file reads as not recorded
    return command if isinstance(command, list) and all(isinstance(c, str) for c in command) else None


def load_doc(path: Path) -> dict | None:
    """A JSON object read back; None when unreadable, not JSON, nested too deeply or not an object."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _folder_name(name) -> bool:
    """A kernel name that can be one folder under --out/kernels (no separator, no '..', not too
    long for a file system): other names in a hand-edited file are skipped."""
    return (isinstance(name, str) and name not in ("", ".", "..") and not set(name) & {"/", "\\", "\0"}
            and len(name.encode("utf-8", "surrogatepass")) <= 240)


def top_kernels(profile: dict | None, summary: dict | None, top: int) -> list[str]:
    names: list[str] = []
    # a kernel the capture recorded is Triton even where a profile made without --capture-log says other
    captured = {n for n in (k.get("kernel") for k in evidence._objs((summary or {}).get("kernels")))
                if isinstance(n, str)}
    if profile:
        names = [k.get("name") for k in evidence._objs(profile.get("kernels"))
                 if k.get("origin") == "triton" or (isinstance(k.get("name"), str) and k["name"] in captured)]
        names = [n for n in names if _folder_name(n)]
    if not names and summary:
        names = [n for n in (k.get("kernel") for k in evidence._objs(summary.get("kernels"))) if _folder_name(n)]
    return names[:top]


def profile_shares(profile: dict | None) -> dict:
    """Each kernel's share of GPU time in a kernel_profile (a share of the wrong type: unknown)."""
    return {k.get("name"): evidence._num(k.get("share")) for k in evidence._objs((profile or {}).get("kernels"))}


def artifact_dir(out: Path, kernel: str) -> Path:
    """The kernel's folder under OUT/artifacts: the manifest's ``dir`` (collect cuts a long name to
    120 characters and numbers a clash: a 135-character Inductor name lost its ISA scan on an H200),
    else the name made safe the same way."""
    from ..read.inductor_files import safe_component

    for entry in evidence._objs((load_doc(out / "artifacts" / "manifest.json") or {}).get("kernels")):
        if entry.get("kernel") == kernel and _folder_name(entry.get("dir")):
            return out / "artifacts" / entry["dir"]
    return out / "artifacts" / safe_component(kernel)


def kernel_source(out: Path, cap: Path, kernel: str) -> Path | None:
    modules = sorted((artifact_dir(out, kernel) / "kernel_module").glob("*.py"))
    if modules:
        return modules[0]
    standalone = cap / CAPTURE_KERNELS / f"{kernel}.py"
    return standalone if standalone.is_file() else None


TRIALS_FILE = "trials.json"


# The default online investigation of a typical single-GPU program (<= 3 hot kernels) fits
# DEADLINE_S: the trials, last before the reports, get what is left of it (less REPORTS_S), at least
# TRIALS_MIN_BUDGET_S. On an H200 the steps before the trials took 115-130 s for one and two kernels
# (examples/recorded_h200/ddp_two_ranks and handwritten, investigation.json), a trial run 18-30 s
# (examples/recorded_h200/trials): about 400 s are left, a reference run and 2 rounds of 6 arms.
DEADLINE_S = 600.0
REPORTS_S = 30.0
TRIALS_MIN_BUDGET_S = 180.0   # the reference run and 2 rounds of the baseline and one arm, at 30 s a run


@dataclass
class TrialOptions:
    """investigate.py's remedy trials: run once per repro, online, on a GPU. ``budget_s`` None: what
    is left of ``deadline_s`` (counted from ``started``, a ``time.perf_counter()``) when they start."""
    cmd: list[str]
    runs: int = 2
    budget_s: float | None = None
    deadline_s: float = DEADLINE_S
    started: float | None = None

    def budget(self) -> tuple[float, str]:
        """(the trials' budget, where it comes from, in words)."""
        if self.budget_s is not None:
            return self.budget_s, "--trials-budget-s"
        spent = time.perf_counter() - self.started if self.started is not None else 0.0
        left = self.deadline_s - spent - REPORTS_S
        budget = max(TRIALS_MIN_BUDGET_S, left)
        return round(budget), (f"what is left of --deadline-s {self.deadline_s:g} after {spent:.0f} s, less {REPORTS_S:g} s "
                               f"for the reports" + (f", at least {TRIALS_MIN_BUDGET_S:g} s" if left < budget else ""))


def cpu_kernels(out: Path) -> list[str]:
    """The C++ kernels Inductor wrote for the CPU, as the collect step found them in the output code
    (``artifact_manifest/1`` ``cpu_kernels``): a compiled region whose tensors were on the CPU."""
    doc = load_doc(out / "artifacts" / "manifest.json") or {}
    return [k for k in doc.get("cpu_kernels") or [] if isinstance(k, str)]


def recorded_trials(cap: Path) -> Path | None:
    """A capture's recorded remedy trials: ``trials/trials.json``, else ``trials.json``."""
    for path in (cap / "trials" / TRIALS_FILE, cap / TRIALS_FILE):
        if path.is_file():
            return path
    return None


def _has_text(log: Path) -> bool:
    """Whether a capture log holds more than blanks (its first 64 KiB decide)."""
    from ..base import inputs

    with inputs.open_input(log, "a capture log") as fh:
        return bool(fh.read(1 << 16).strip())


def capture_logs(cap: Path) -> list[Path]:
    """The capture's logs that hold text, or InputError: none there (not a capture), or all
    empty (the capture recorded nothing: no later step has anything to read)."""
    kdir = cap / CAPTURE_KERNELS
    logs = [p for p in (kdir / "autotune.log", cap / CAPTURE_LOG) if p.is_file()]
    if not logs:
        inner = sorted(d.name for d in cap.iterdir() if d.is_dir() and ((d / CAPTURE_KERNELS / "autotune.log").is_file()
                                                                     or (d / CAPTURE_LOG).is_file()))
        raise InputError(f"{cap}: no {CAPTURE_KERNELS}/autotune.log and no {CAPTURE_LOG}: not a capture directory"
                         + (f" (it holds captures: {', '.join(inner)}; name one)" if inner else ""))
    logs = [p for p in logs if _has_text(p)]
    if not logs:  # summarize would refuse each; every later step reads what it finds
        raise InputError(f"{cap}: the capture recorded nothing: {CAPTURE_KERNELS}/autotune.log and {CAPTURE_LOG} "
                         "are empty or missing (did the repro run a compiled model or a Triton kernel?)")
    return logs


def _prepare(chain: Chain, cap: Path, out: Path, logs: list[Path]) -> tuple[Path, Path]:
    """Summarize, collect, and the profile: what every kernel's steps read."""
    kdir = cap / CAPTURE_KERNELS
    profile_json = cap / PROFILE_DIR / "profile.json"
    traces = [] if profile_json.is_file() or not (cap / PROFILE_DIR).is_dir() else \
        sorted((cap / PROFILE_DIR).glob("*.json*"))
    chain.planned = len(chain.steps) + 2 + bool(traces)  # summarize, collect (and profile)
    chain.run("summarize", script("summarize_autotune_log.py") + [*logs, "--json-out", out / "autotune_summary.json",
              "--markdown-out", out / "autotune_summary.md"], output=out / "autotune_summary.json")
    collect = script("collect_inductor_artifacts.py") + ["--out", out / "artifacts"]
    if (cap / CAPTURE_LOG).is_file():
        collect += ["--log", cap / CAPTURE_LOG]
    if kdir.is_dir():
        collect += ["--capture-dir", kdir]
    if (cap / INDUCTOR_CACHE).is_dir():
        collect += ["--cache-root", cap / INDUCTOR_CACHE]
    chain.run("collect", collect, output=out / "artifacts" / "manifest.json")
    if traces:
        logged = ["--capture-log", kdir / "autotune.log"] if (kdir / "autotune.log").is_file() else []
        chain.run("profile", script("profile_kernels.py") + ["--trace", traces[0], *logged, "--json-out", out / "profile.json",
                  "--markdown-out", out / "profile.md"], output=out / "profile.json")
        profile_json = out / "profile.json"
    return kdir, profile_json


@dataclass
class KernelCtx:
    cap: Path
    out: Path
    kdir: Path
    probe_archs: list[str]
    probe_variants: str | None
    run_kernels: bool
    local_gpu: bool
    peak_gbps: float | None
    shares: dict = field(default_factory=dict)  # kernel -> share of GPU time (the profile's), when known


# The steps every hot kernel gets, each run or recorded as skipped (the progress counter's plan).
KERNEL_STEPS = ("inspect", "scan", "probe", "run", "speed_of_light", "report")


def _sol(chain: Chain, ctx: KernelCtx, kernel: str, standalone: Path, kd: Path,
         run: Path | None = None) -> Path | None:
    """speed_of_light.py on the captured standalone kernel: timed on a GPU (the kernel's times from
    its ``run`` step when that ran here), else built, compiled and checked offline."""
    name = f"speed_of_light {kernel}"
    if not standalone.is_file():
        chain.skip(name, "no standalone file of this kernel was captured")
        return None
    cmd = script("speed_of_light.py") + [standalone, "--json-out", kd / "sol.json", "--markdown-out", kd / "sol.md",
                                         "--twin-out", kd / "sol_twin.py"]
    if not ctx.local_gpu:
        cmd.append("--offline")
    elif run is not None and run == kd / "run.json":  # timed here, not a recorded run
        cmd += ["--kernel-run", run]
    if ctx.peak_gbps:
        cmd += ["--peak-gbps", str(ctx.peak_gbps)]
    elif (ctx.cap / PEAKS_FILE).is_file():
        cmd += ["--peaks", ctx.cap / PEAKS_FILE]
    for arch in ctx.probe_archs:
        cmd += ["--arch", arch]
    return kd / "sol.json" if chain.run(name, cmd, output=kd / "sol.json") else None


def _not_hot(ctx: KernelCtx, kernel: str) -> str | None:
    """Why a kernel's probe (and, on a GPU, its timing) is skipped: its share is under hot_share, so
    its decision is not_hot whatever they measure; None for a hot kernel or an unknown share."""
    share, hot = ctx.shares.get(kernel), threshold("hot_share")
    if isinstance(share, (int, float)) and share < hot:
        return f"not hot: {share:.1%} of GPU time, under the {hot:.0%} cut (hot_share)"
    return None


def _probe(chain: Chain, ctx: KernelCtx, kernel: str, src: Path | None, kd: Path,
           jobs: int | None = None) -> Background | None:
    """probe_compile.py for the --probe-arch targets of a hot kernel, started in the background:
    offline compiles of every variant, and no step of the kernel but its report reads what it writes.
    ``jobs``: its parallel compiles (the probes of all kernels share the CPUs)."""
    name = f"probe {kernel}"
    if not ctx.probe_archs:
        chain.skip(name, "no compile target (--probe-arch none)")
        return None
    if src is None:
        chain.skip(name, "no source of this kernel was collected or captured")
        return None
    cold = _not_hot(ctx, kernel)
    if cold:  # its decision is not_hot whatever the ISA says
        chain.skip(name, cold)
        return None
    probe = script("probe_compile.py") + [src, "--kernel", kernel, "--json-out", kd / "probe.json",
                                         "--markdown-out", kd / "probe.md"]
    for arch in ctx.probe_archs:
        probe += ["--arch", arch]
    if ctx.probe_variants != "all":  # "all": probe_compile.py's own default set
        probe += ["--variants", ctx.probe_variants or ",".join(HINT_VARIANTS)]
    if (ctx.kdir / "autotune.log").is_file():
        probe += ["--launch-event", ctx.kdir / "autotune.log"]
    if jobs:
        probe += ["--jobs", str(jobs)]
    return chain.start(name, probe, output=kd / "probe.json")


def _run(chain: Chain, ctx: KernelCtx, kernel: str, standalone: Path, kd: Path) -> Path | None:
    """The standalone kernel timed here (on a GPU), else the capture's recorded run, if any."""
    name, recorded = f"run {kernel}", ctx.cap / RUNS_DIR / f"{kernel}.json"
    instead = f"; the recorded {recorded.relative_to(ctx.cap)} stands in" if recorded.is_file() else ""
    why = ("--no-run" if not ctx.run_kernels else "no GPU here" if not ctx.local_gpu
           else "no standalone file of this kernel was captured" if not standalone.is_file() else None)
    if why:
        chain.skip(name, why + instead)
        return recorded if recorded.is_file() else None
    cmd = script("run_captured_kernel.py") + [standalone, "--all-configs", "--timer", "do_bench,profiler_flushed",
                                              "--json-out", kd / "run.json"]
    return kd / "run.json" if chain.run(name, cmd, output=kd / "run.json") else None


def _static(chain: Chain, ctx: KernelCtx, kernel: str, profile_json: Path,
            probe_jobs: int | None = None) -> tuple[dict, Background | None]:
    """inspect and scan of one kernel (each run or skipped), and its probe started in the background:
    (the report's arguments so far, the probe)."""
    out = ctx.out
    kd = out / "kernels" / kernel
    kd.mkdir(parents=True, exist_ok=True)
    src = kernel_source(out, ctx.cap, kernel)
    args = {"--kernel": kernel, "--out": kd / "report.md", "--profile": profile_json,
            "--autotune-summary": out / "autotune_summary.json", "--env": ctx.cap / ENV_FILE,
            "--artifacts": out / "artifacts" / "manifest.json"}
    if src is None:
        chain.skip(f"inspect {kernel}", "no source of this kernel was collected or captured")
    elif chain.run(f"inspect {kernel}", script("inspect_triton_meta.py") + [
            src, "--json-out", kd / "meta.json"], output=kd / "meta.json"):
        args["--meta"] = kd / "meta.json"
    if not has_listing(artifact_dir(out, kernel)):
        chain.skip(f"scan {kernel}", "no ISA listing (.amdgcn/.ptx/.sass/.cubin) of this kernel was collected")
    elif chain.run(f"scan {kernel}", script("scan_amdgcn.py") + [out / "artifacts", "--kernel", kernel,
                   "--json-out", kd / "isa_scan.json"], output=kd / "isa_scan.json"):
        args["--isa"] = kd / "isa_scan.json"
    return args, _probe(chain, ctx, kernel, src, kd, probe_jobs)


def _gather_all(chain: Chain, ctx: KernelCtx, kernels: list[str], profile_json: Path) -> dict[str, dict]:
    """inspect, scan, probe, run and speed of light of each kernel (each run or skipped): the
    reports' arguments. Every kernel's probe (offline compiles: CPU only) starts first and runs
    beside every kernel's GPU steps; nothing but the reports and the sweep reads what it writes."""
    gathered: dict[str, dict] = {}
    probes: dict[str, Background | None] = {}
    # the probes share the CPUs, less two for the GPU steps beside them (their compiles and launches)
    jobs = max(1, ((os.cpu_count() or 2) - 2) // max(1, len(kernels)))
    try:
        for kernel in kernels:
            gathered[kernel], probes[kernel] = _static(chain, ctx, kernel, profile_json, jobs)
        for kernel in kernels:
            kd, standalone = ctx.out / "kernels" / kernel, ctx.kdir / f"{kernel}.py"
            cold = _not_hot(ctx, kernel) if ctx.local_gpu else None
            if cold:  # on a GPU the timing of a kernel that cannot move the step goes to the trials
                for step in ("run", "speed_of_light"):
                    chain.skip(f"{step} {kernel}", cold + ": the trials get its time")
                continue
            run = _run(chain, ctx, kernel, standalone, kd)
            found = {"--run": run, "--sol": _sol(chain, ctx, kernel, standalone, kd, run)}
            gathered[kernel].update({flag: path for flag, path in found.items() if path is not None})
    except BaseException:  # e.g. Ctrl-C: the probes' processes must not outlive the chain
        for probe in probes.values():
            if probe is not None:
                probe.cancel()
        raise
    for kernel, probe in probes.items():
        if probe is not None and probe.wait():
            gathered[kernel]["--probe"] = ctx.out / "kernels" / kernel / "probe.json"
    return gathered


def trial_facts_file(out: Path, gathered: dict[str, dict], program: dict | None,
                     pins_path: Path | None = None, cap: Path | None = None, repro: list | None = None) -> Path:
    """A plain facts file for try_remedies.py --facts (tko.chains.trial_plan reads it): per kernel the
    facts of its meta.json (multi_pass, dynamic_sizes) and its report's reach (share, ceiling,
    headroom_measured: REACH_FACTS), the program rules that fired, the
    model-code regions an eager fallback can disable, and whether the capture saw only hand-written
    Triton kernels (then no Inductor setting can change the program), and the catalog rewrites whose
    pattern the model code holds (their arms run though no kernel's name shows the pattern)."""
    from ..base.artifact import read_artifact
    from ..read.captured_kernels import HAND_WRITTEN_KINDS, kernel_kinds

    facts: dict = {"kernels": {}, "program": {}, "program_rules": [], "disable_targets": []}
    if program:
        facts["program"] = {k: v.get("value") for k, v in (program.get("facts") or {}).items()}
        facts["program_rules"] = [f["rule"] for f in program.get("fired") or []]
    kinds = kernel_kinds([cap / CAPTURE_KERNELS / "autotune.log"]) if cap is not None else {}
    if kinds:
        facts["program"]["hand_written_only"] = all(k in HAND_WRITTEN_KINDS for k in kinds.values())
    manifest = out / "artifacts" / "manifest.json"
    model_files = [Path(a) for a in repro or [] if isinstance(a, str) and a.endswith(".py")]
    for kernel, args in gathered.items():
        ev = evidence.Evidence(kernel)
        try:
            if args.get("--meta"):
                evidence.from_meta(ev, read_artifact(args["--meta"], "triton_meta"), "meta.json")
            if manifest.is_file():
                program_evidence.from_manifest(ev, read_artifact(manifest, "artifact_manifest"), "manifest.json")
        except (InputError, OSError):
            continue
        facts["kernels"][kernel] = {k: f.value for k, f in ev.facts.items()}
        facts["kernels"][kernel].update(_reach_facts(out / "kernels" / kernel / "report.json"))
        for frame in (ev.sections.get("model_code") or {}).get("frames", []):
            if frame.get("disable_target") and frame["disable_target"] not in facts["disable_targets"]:
                facts["disable_targets"].append(frame["disable_target"])
            if evidence._str(frame.get("file")):
                model_files.append(Path(frame["file"]))
    facts["rewrites"] = rewrites_in_model_code(model_files)
    if pins_path is not None:
        facts["pins"] = str(pins_path.resolve())   # tko.chains.trial_plan: the pinned arm runs these
    if (out / OVERRIDES_FILE).is_file():            # and these launch arguments of hand-written kernels
        facts["launch_overrides"] = str((out / OVERRIDES_FILE).resolve())
    path = out / "trials" / "facts.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(facts, indent=1, default=str) + "\n")
    return path


# what the kernel's report measured of its end-to-end reach: the plan runs first the arms that can move the step
REACH_FACTS = ("share", "ceiling", "headroom_measured")


def _reach_facts(report: Path) -> dict:
    from ..base.artifact import read_artifact

    try:
        values = (read_artifact(report, "investigation_report").get("facts") or {}) if report.is_file() else {}
    except (InputError, OSError):
        return {}
    values = {k: v.get("value") if isinstance(v, dict) else v for k, v in values.items()} if isinstance(values, dict) else {}
    return {k: values[k] for k in REACH_FACTS if k in values}


def rewrites_in_model_code(files: list[Path]) -> dict[str, str]:
    """Catalog arm -> ``file:line`` of the first model-code match, over the given files and the
    modules they import from their own folder."""
    from ..read import rewrite_catalog
    from .rewrites import model_sources

    found = {}
    for entry in rewrite_catalog.detect([], model_sources(files), []):
        hit = next((f for f in entry["found_by"] if f["how"] == "model_code"), None)
        if entry.get("arm") and hit:
            found[entry["arm"]] = f"{hit['file']}:{hit['line']}"
    return found


def run_trials(chain: Chain, opts: TrialOptions | None, cap: Path, out: Path, gathered: dict[str, dict],
               program: dict | None, local_gpu: bool, pins_path: Path | None = None) -> Path | None:
    """The remedy trials of the repro (online, on a GPU), or the capture's recorded ones."""
    if opts is None:
        path = recorded_trials(cap)
        why = trial_evidence.trial_device_mismatch(evidence._obj((load_trials(path) or {}).get("device")),
                                             capture_device(cap)) if path else None
        if why:
            chain.skip("trials", f"{path.name} of the capture was timed {why}: not used")
            return None
        return path
    if not local_gpu:
        chain.skip("trials", "no GPU: the remedy trials time the repro on the device it runs on")
        return None
    facts = trial_facts_file(out, gathered, program, pins_path, cap, opts.cmd)
    tdir = out / "trials"
    budget_s, why = opts.budget()
    print(f"[investigate] trials: --budget-s {budget_s:g} ({why})", flush=True)
    cmd = script("try_remedies.py") + ["--out", tdir, "--runs", str(opts.runs), "--budget-s", str(budget_s),
                                       "--facts", facts, "--timeout", str(chain.timeout)]
    if (cap / ENV_FILE).is_file():
        cmd += ["--facts", cap / ENV_FILE]
    saved = chain.timeout
    chain.timeout = max(saved, budget_s + saved)   # the last round may start just before the budget ends
    try:  # the plan line (what the trials cost, which arms run) reaches the console before the rounds
        ok = chain.run("trials", cmd + ["--", *opts.cmd], output=tdir / TRIALS_FILE, log=tdir / "trials.log",
                       echo="plan: ")
    finally:
        chain.timeout = saved
    return tdir / TRIALS_FILE if ok and (tdir / TRIALS_FILE).is_file() else None


def capture_device(cap: Path) -> str | None:
    """The device a capture's kernels ran on: its check_env record's, else its profile's."""
    env = load_doc(cap / ENV_FILE)
    return (evidence.Env.read(env).device if env else None) or \
        program_evidence.profile_device(load_doc(cap / PROFILE_DIR / "profile.json"))[0]


def load_trials(path: Path | None) -> dict | None:
    doc = load_doc(path) if path else None
    return doc if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("remedy_trials/") else None


def trials_summary(path: Path | None, out: Path, recorded: bool) -> dict | None:
    """``investigation/1`` ``trials``: where, the winner, what to change, and the measured table."""
    doc = load_trials(path)
    if not doc:
        return None
    section = trial_evidence.trials_section(doc, path.name)
    return {"path": str(path.relative_to(out)) if path.is_relative_to(out) else str(path), "recorded": recorded,
            "winner": section["winner"], "what_to_change": section["what_to_change"],
            "memory_change": section["memory_change"],
            "noise_pct": section["noise_pct"], "device": section["device"], "runs": section["runs"],
            "plan": (doc.get("plan") or {}).get("text") if isinstance(doc.get("plan"), dict) else None,
            "arms": [{k: r[k] for k in ("name", "status", "median_ms", "x_baseline", "noise_pct", "beyond_noise",
                                        "outputs", "change", "peak_memory_mb")} for r in section["rows"]]}


def write_sweep_pins(chain: Chain, ctx: KernelCtx, kernels: list[str]) -> Path | None:
    """``pins.json`` of every sweep whose best variant is a config (the pinned trial arm), or None."""
    from ..patch import launch_overrides, pins
    from ..base.artifact import read_artifact

    found, launches = [], []
    for kernel in kernels:
        kd = ctx.out / "kernels" / kernel
        if not (kd / "sweep.json").is_file():
            continue
        try:
            doc = read_artifact(kd / "sweep.json", "variant_sweep")
            spec = _standalone_spec(ctx.kdir / f"{kernel}.py")
            if spec.get("kind") == "triton_jit":  # a plain launch: new launch arguments, not a config pin
                launches.append(launch_overrides.overrides_from_sweep(doc, spec, origin=str(kd / "sweep.json")))
                continue
            found += pins.pins_from_sweep(doc, ctx.kdir / f"{kernel}.py", origin=str(kd / "sweep.json"))["pins"]
        except InputError as exc:   # e.g. nothing beat the captured config: no pin, said in the log
            print(f"[investigate] no pin for {kernel}: {exc}", flush=True)
    if launches:
        launch_overrides.write_overrides(ctx.out / OVERRIDES_FILE, "investigate.py", launches)
    if not found:
        return None
    return pins.write_pins(ctx.out / "pins.json", "investigate.py", found)


OVERRIDES_FILE = "launch_overrides.json"


def _standalone_spec(path: Path) -> dict:
    """The ``_TKO_SPEC`` of a captured standalone file ({} when there is none)."""
    from ..measure import sweep_plan

    try:
        return sweep_plan.read_standalone(path)[2] if path.is_file() else {}
    except InputError:
        return {}


def _report(chain: Chain, ctx: KernelCtx, kernel: str, args: dict, trials: Path | None, sweep: bool,
            repro: list[str] | None) -> dict:
    """The kernel's report (and, on a GPU, a sweep and the report again when it says to tune).

    A sweep made before (the pass ahead of the trials) is given to the report, not run again."""
    out, kd = ctx.out, ctx.out / "kernels" / kernel
    standalone = ctx.kdir / f"{kernel}.py"
    report = script("make_investigation_report.py")
    for flag, value in args.items():
        if flag in ("--env", "--profile") and not Path(value).is_file():
            continue
        report += [flag, value]
    if trials is not None:
        report += ["--trials", trials]
    if ctx.peak_gbps:
        report += ["--peak-gbps", str(ctx.peak_gbps)]
    if repro:
        report += ["--repro", shlex.join(map(str, repro))]
    env = {"TKO_PEAKS_FILE": str(ctx.cap / PEAKS_FILE)} if (ctx.cap / PEAKS_FILE).is_file() else None
    if not sweep and (kd / "sweep.json").is_file():
        report += ["--benchmark", kd / "sweep.json"]
    chain.run(f"report {kernel}", report, output=kd / "report.md", env=env)
    rep = load_doc(kd / "report.json")
    # A kernel the rules say to tune gets a correctness-gated sweep where a GPU can time it,
    # and its report is remade with the measured variants.
    verdict = ((rep or {}).get("decision") or {}).get("verdict")
    if sweep and verdict == "tune_triton" and ctx.local_gpu and standalone.is_file():
        cmd = script("sweep_captured_kernel.py") + [standalone, "--json-out", kd / "sweep.json",
                                                   "--markdown-out", kd / "sweep.md",
                                                   "--best-out", kd / f"best_{kernel}.py"]
        if (kd / "probe.json").is_file():
            cmd += ["--probe", kd / "probe.json"]
        chain.planned += 1  # the sweep; and the report again when it succeeds
        if chain.run(f"sweep {kernel}", cmd, output=kd / "sweep.json", env=env):
            chain.planned += 1
            chain.run(f"report {kernel} (with sweep)", report + ["--benchmark", kd / "sweep.json"],
                      output=kd / "report.md", env=env)
            rep = load_doc(kd / "report.json")
    return _kernel_entry(kernel, kd, out, rep, standalone)


def _kernel_entry(kernel: str, kd: Path, out: Path, rep: dict | None, standalone: Path) -> dict:
    # report.json is read back typed (evidence's readers): a field of the wrong type reads as missing
    rep = rep or {}
    sections, decision = evidence._obj(rep.get("sections")), evidence._obj(rep.get("decision"))
    frames = evidence._objs(evidence._obj(sections.get("model_code")).get("frames"))
    sol = evidence._obj(sections.get("speed_of_light"))
    return {"kernel": kernel, "dir": str(kd.relative_to(out)),
            "verdict": evidence._str(decision.get("verdict")),
            "decision_text": evidence._str(rep.get("decision_text")),
            "rule": evidence._str(decision.get("rule")),
            "share": evidence._num(evidence._obj(evidence._obj(rep.get("facts")).get("share")).get("value")),
            "where": [f"{Path(f['file']).name}:{f.get('line')}" for f in frames if evidence._str(f.get("file"))],
            "disable_targets": list(dict.fromkeys(f["disable_target"] for f in frames
                                                  if evidence._str(f.get("disable_target")))),
            "standalone": str(standalone) if standalone.is_file() else None,
            "sweep": str((kd / "sweep.json").relative_to(out)) if (kd / "sweep.json").is_file() else None,
            "sol_class": evidence._str(sol.get("class")),
            "sol_over_floor": evidence._num(evidence._obj(sol.get("numbers")).get("kernel_over_floor")),
            "sol_copy_floor_ms": evidence._num(evidence._obj(sol.get("numbers")).get("copy_floor_ms")),
            "sol_offline": evidence._bool(sol.get("offline")),
            "gaps": len(evidence._list(rep.get("gaps"))) if rep else None}


def offline(chain: Chain, cap: Path, out: Path, top: int, probe_archs: list[str], run_kernels: bool,
            peak_gbps: float | None, probe_variants: str | None = None, sweep: bool = True,
            repro: list[str] | None = None, trials: TrialOptions | None = None
            ) -> tuple[list[dict], dict | None, dict | None]:
    """Every kernel's evidence, then the remedy trials (once per repro), then the reports.
    Returns (kernel entries, program decision, trials summary)."""
    logs = capture_logs(cap)
    out.mkdir(parents=True, exist_ok=True)
    if repro is None:
        repro = repro_command(cap)
    kdir, profile_json = _prepare(chain, cap, out, logs)
    profile, summary = load_doc(profile_json), load_doc(out / "autotune_summary.json")
    label = str(profile_json.relative_to(cap) if profile_json.is_relative_to(cap) else profile_json.relative_to(out))
    kernels = top_kernels(profile, summary, top)
    ctx = KernelCtx(cap, out, kdir, probe_archs, probe_variants, run_kernels, gpu_available(), peak_gbps,
                    shares=profile_shares(profile))
    # inspect, scan, probe, run, speed of light, report per kernel (a sweep, when one runs, adds two)
    sweep_first = trials is not None and sweep and ctx.local_gpu  # a report pass ahead of the trials
    chain.planned = len(chain.steps) + len(kernels) * (len(KERNEL_STEPS) + sweep_first) + bool(trials)
    gathered = _gather_all(chain, ctx, kernels, profile_json)
    program = program_evidence.program_decision(profile, label)
    pins_path = None
    if sweep_first:
        # Sweep what the evidence says to tune before the trials, so that the pinned arm measures
        # the sweep's best configs end to end in the real program.
        for kernel, args in gathered.items():
            _report(chain, ctx, kernel, args, None, True, repro)
        pins_path = write_sweep_pins(chain, ctx, list(gathered))
        sweep = False
    trials_path = run_trials(chain, trials, cap, out, gathered, program, ctx.local_gpu, pins_path)
    if trials_path is not None:
        program = program_evidence.program_decision(profile, label, trials=load_trials(trials_path),
                                            trials_label=trials_path.name)
    reports = [_report(chain, ctx, kernel, args, trials_path, sweep, repro) for kernel, args in gathered.items()]
    return reports, program, trials_summary(trials_path, out, recorded=trials is None)


