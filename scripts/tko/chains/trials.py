"""End-to-end trials of remedies on a repro: one fresh process per arm and run, interleaved.

Every process runs the user's repro unchanged through ``fallback_bootstrap.py`` (settings reach it
through the launcher and the environment). The first process is a reference run of the baseline
that times every compiled call with synchronization: when the repro prints its own steady-state
line (``--metric-regex``, default ``<float> ms/step``), that line is the metric and later processes
time only the first compiled call (so the repro's loop is not disturbed) and the reference run's
time is not counted; otherwise the bootstrap's step time (sum over compiled callables of their
median steady-state call, ``tko.remedies.trial_hooks``) is the metric and the reference run counts as a
baseline run. Outputs (the compiled callables' last outputs, plus ``$TKO_AB_OUTPUT`` when the
repro saves one) are compared with the reference run's, the tolerance widened by the baseline's
own run-to-run difference (float atomics).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..base import atomic, subproc
from ..base.artifact import write_artifact
from ..base.errors import InputError, ToolFailure
from ..verdict.trial_evidence import trial_outcome
from ..remedies import graph_rewrites
from ..remedies.fallback_ab import BOOTSTRAP, DEFAULT_METRIC, split_command
from ..base.subproc import failure_line
from . import trial_ranks
from .trial_plan import ArmSpec

SCHEMA = "remedy_trials/1"
METRIC_REPRO = "repro"
METRIC_BOOTSTRAP = "bootstrap (median steady-state call of each compiled callable, summed)"


@dataclass
class Arm:
    spec: ArmSpec
    settings: dict = field(default_factory=dict)
    absent: list = field(default_factory=list)
    runs: list = field(default_factory=list)      # one record per process
    status: str = "ok"
    reason: str | None = None
    outputs: dict = field(default_factory=lambda: {"result": "unknown", "reason": "not run"})

    @property
    def name(self) -> str:
        return self.spec.name

    def ms(self, counted_only: bool = True) -> list[float]:
        return [r["ms"] for r in self.runs if r.get("ms") is not None and (r["counted"] or not counted_only)]


@dataclass
class Context:
    script: str
    args: list
    out_dir: Path
    work: Path
    metric: re.Pattern
    timeout: float
    timing: str = "full"
    metric_from: str | None = None
    done: int = 0
    total: int = 0
    max_runs: int = 0                 # rounds allowed for arms still undecided after --runs
    order: list = field(default_factory=list)
    launcher: list | None = None      # torchrun / shell command run as typed (tko.chains.trial_ranks)
    plan: dict | None = None          # plan_estimate(), once the baseline's first run is timed


def device_env() -> dict:
    import torch

    gpu = bool(torch.cuda.is_available())
    name = torch.cuda.get_device_name(0) if gpu else "cpu"
    return {"gpu": gpu, "hip": bool(getattr(torch.version, "hip", None)), "name": name,
            "backend": ("hip" if torch.version.hip else "cuda") if gpu else "cpu"}


def resolve_settings(spec: ArmSpec) -> Arm:
    """Check each config name exists in this torch; ``"toggle"`` becomes the opposite of its default."""
    from ..remedies.trial_hooks import _config_owner

    arm = Arm(spec)
    for name, value in spec.settings.items():
        found = _config_owner(name)
        if found is None:
            arm.absent.append(name)
            continue
        arm.settings[name] = (not getattr(*found)) if value == "toggle" else value
    if spec.settings and not arm.settings:
        arm.status, arm.reason = "skipped", f"this torch has no {', '.join(arm.absent)}"
    if spec.skip:
        arm.status, arm.reason = "skipped", spec.skip
    return arm


def _command(arm: Arm, ctx: Context) -> list[str]:
    if ctx.launcher:  # a multi-process launcher runs as typed; the arm reaches each process by the site route
        return list(ctx.launcher)
    cmd = [sys.executable, str(BOOTSTRAP), *arm.spec.bootstrap]
    for name, value in arm.settings.items():
        cmd += ["--set", f"{name}={json.dumps(value)}"]
    return cmd + [ctx.script, *ctx.args]


def _spawn(cmd: list[str], env: dict, log: Path, timeout: float) -> tuple[int | None, str, str, float]:
    """Run in its own session; on timeout kill the whole process group. (rc or None, out, err, s)."""
    done = subproc.run(cmd, timeout=timeout, env=env, grace_s=1.0)
    atomic.write_text(log, f"$ {' '.join(cmd)}\n--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}")
    return (None if done.timed_out else done.returncode), done.stdout, done.stderr, done.seconds


def _measure(record: dict, stdout: str, meas: dict, ctx: Context) -> None:
    found = ctx.metric.findall(stdout)
    if ctx.metric_from in (None, METRIC_REPRO) and found:
        value = found[-1][0] if isinstance(found[-1], tuple) else found[-1]
        record["ms"], record["metric_from"] = float(value), METRIC_REPRO
    elif ctx.metric_from in (None, METRIC_BOOTSTRAP) and meas.get("step_ms") is not None:
        record["ms"], record["metric_from"] = float(meas["step_ms"]), METRIC_BOOTSTRAP
    else:
        record["status"] = "no step time"
        record["error"] = ("no step time: the repro printed no line matching the metric regex and "
                           "called no torch.compile'd callable more than twice")


def _check_replaced(record: dict, arm: Arm, stderr: str) -> None:
    """A replace arm whose row kernels never launched measured the baseline again: not applied."""
    if "--replace-rows" not in arm.spec.bootstrap:
        return
    from ..remedies.row_replace import PREFIX

    lines = [ln for ln in stderr.splitlines() if ln.startswith(PREFIX + ":")]
    record["replaced"] = lines[-1].split(":", 1)[1].strip() if lines else None
    if not re.search(r": kernel \d+", record["replaced"] or ""):
        record["status"] = "not applied"
        record["error"] = ("the bundled row kernels never ran: "
                           + (record["replaced"] or "no TKO_REPLACE line") + " (the program does not call "
                           "torch's softmax / layer_norm / rms_norm functions in a form they take)")


def run_once(arm: Arm, index: int, ctx: Context) -> dict:
    tag = f"{arm.name}_{index}"
    meas_path, out_path = ctx.work / f"{tag}.json", ctx.work / f"{tag}.pt"
    ab_path = ctx.work / f"{tag}.ab.pt"
    env = dict(os.environ, **arm.spec.env, TKO_TRIAL_OUT=str(meas_path), TKO_TRIAL_OUTPUTS=str(out_path),
               TKO_AB_OUTPUT=str(ab_path), TKO_TRIAL_TIMING=ctx.timing, PYTHONUNBUFFERED="1",
               **trial_ranks.site_env(arm.spec, arm.settings))
    log = ctx.out_dir / "logs" / f"{tag}.log"
    rc, stdout, stderr, wall = _spawn(_command(arm, ctx), env, log, ctx.timeout)
    record = {"run": index, "status": "ok", "error": None, "ms": None, "wall_s": round(wall, 3),
              "first_step_s": None, "log": str(log), "counted": True, "outputs": [],
              "metric_from": None}
    meas = trial_ranks.read_measurements(meas_path)
    if meas.get("ranks"):
        record["ranks"] = meas["ranks"]
    record["first_step_s"] = meas.get("first_step_s")
    record["applied"] = meas.get("settings")
    if rc is None:
        record["status"], record["error"] = "timeout", f"no exit within {ctx.timeout:g} s (process group killed)"
    elif rc != 0:
        record["status"], record["error"] = "failed", f"exit {rc}: {failure_line(stderr) or '(no output)'}"
    else:
        _measure(record, stdout, meas, ctx)
        _check_replaced(record, arm, stderr)
        graph_rewrites.check_trial(record, arm.spec.env, stderr)
    record["peak_memory_mb"] = meas.get("peak_memory_mb")
    record["outputs"] = [str(p) for p in (out_path, ab_path) if p.is_file()] + trial_ranks.rank_outputs(out_path, ab_path)
    ctx.done += 1
    ctx.order.append(f"{arm.name}#{index}")
    shown = f"{record['ms']:.4f} ms/step" if record["ms"] is not None else record["status"]
    print(f"[{ctx.done}/{ctx.total}] {arm.name} run {index}: {shown} ({wall:.1f} s)", file=sys.stderr)
    return record


def reference_run(base: Arm, ctx: Context) -> None:
    """Baseline run 0: fails loudly, and fixes where the step time comes from."""
    record = run_once(base, 0, ctx)
    base.runs.append(record)
    if record["status"] != "ok":
        raise ToolFailure(f"the baseline failed ({record['error']}); log: {record['log']}")
    ctx.metric_from = record["metric_from"]
    if ctx.metric_from == METRIC_REPRO:
        record["counted"] = False  # timed with a synchronization per call: not the repro's own loop
        ctx.timing = "first"


def _estimate(arm: Arm, base: Arm) -> float:
    walls = [r["wall_s"] for r in arm.runs] or [r["wall_s"] for r in base.runs]
    return max(walls)


def round_order(arms: list[Arm]) -> list[Arm]:
    """After the first round: the baseline, then the arms fastest so far, so that a budget that runs
    out cuts the runs least able to change the decision (a winner needs two runs of it and of the
    baseline)."""
    base, rest = arms[0], arms[1:]

    def median(arm: Arm) -> float:
        ms = arm.ms()
        return statistics.median(ms) if ms else float("inf")

    return [base] + sorted(rest, key=median)  # sorted is stable: ties keep the plan order


def run_rounds(arms: list[Arm], runs: int, budget_s: float, ctx: Context, t0: float) -> list[str]:
    """Interleaved rounds (A B C A B C ...); returns notes on what the budget cut."""
    notes = []
    for index in range(1, runs + 1):
        for arm in (arms if index == 1 else round_order(arms)):
            _run_in_budget(arm, arms[0], index, budget_s, ctx, t0, notes)
    return notes


def _run_in_budget(arm: Arm, base: Arm, index: int, budget_s: float, ctx: Context, t0: float,
                   notes: list[str]) -> None:
    """Run ``arm`` once more if its usual wall time still fits the budget."""
    if arm.status != "ok":
        return
    est = _estimate(arm, base)
    if time.perf_counter() - t0 + est > budget_s:
        if not any(r["run"] > 0 for r in arm.runs):  # not run yet: it does not fit
            arm.status = "skipped"
            arm.reason = f"budget: {budget_s:g} s would be exceeded (a run takes about {est:.1f} s)"
        else:
            notes.append(f"{arm.name}: run {index} not started, budget {budget_s:g} s spent")
        return
    record = run_once(arm, index, ctx)
    arm.runs.append(record)
    if record["status"] != "ok":
        arm.status, arm.reason = record["status"], record["error"]


def undecided_arms(arms: list[Arm]) -> list[Arm]:
    """The arms faster than the baseline that the table cannot decide yet (one counted baseline run,
    or inside the run-to-run noise by at least ``inside_noise_candidate_x``), fastest first, as
    :func:`tko.verdict.evidence.trial_outcome` reads them."""
    outcome = trial_outcome({"arms": _rows(arms)})
    if outcome["winner"]:
        return []
    pending = sorted(outcome["undecided"] + outcome["inside"], key=lambda a: -a.x_baseline)
    return [arms[a.index] for a in pending if arms[a.index].status == "ok"]


def extra_rounds(arms: list[Arm], runs: int, max_runs: int, budget_s: float, ctx: Context,
                 t0: float) -> list[str]:
    """Rounds past ``runs``, up to ``max_runs``, of the baseline and the arms still undecided,
    while the budget lasts: a faster arm inside a noisy baseline gets the runs that settle it
    (on an H200 two runs of a 0.05 ms/step baseline read 0.104 and 0.053 ms/step)."""
    notes = []
    for index in range(runs + 1, max_runs + 1):
        pending = undecided_arms(arms)
        if not pending or arms[0].status != "ok":
            break
        notes.append(f"extra round {index}: baseline and {', '.join(a.name for a in pending)} (not decided after "
                     f"{index - 1} runs)")
        ctx.total += 1 + len(pending)
        for arm in [arms[0]] + pending:
            _run_in_budget(arm, arms[0], index, budget_s, ctx, t0, notes)
    return notes


def plan_estimate(arms: list[Arm], runs: int, budget_s: float) -> dict:
    """What the whole plan costs, said before its rounds start: the baseline's first run times one
    process (compile included), every arm then runs ``runs`` times in rounds."""
    run_s = max(r["wall_s"] for r in arms[0].runs)
    need = run_s * (runs * len(arms) - 1)
    fit = int(max(0.0, budget_s - run_s) // max(run_s * runs, 1e-9))
    text = (f"plan: {len(arms)} arm(s) (baseline included) x {runs} run(s), a run about {run_s:.0f} s: about "
            f"{need + run_s:.0f} s in all against --budget-s {budget_s:g}"
            + ("" if need <= budget_s else f": about {min(fit, len(arms))} arm(s) fit, the rest are skipped; "
               f"--budget-s {1.1 * (need + run_s):.0f} would run them all"))
    return {"arms": len(arms), "runs": runs, "run_s": round(run_s, 1), "estimate_s": round(need + run_s, 1),
            "budget_s": budget_s, "fits": need <= budget_s, "text": text}


def budget_advice(arms: list[Arm], runs: int, budget_s: float) -> list[str]:
    """When the baseline got under two counted runs no arm can be judged: say what budget would do."""
    base = arms[0]
    counted = len(base.ms())
    if counted >= 2 or base.status != "ok":
        return []
    if runs < 2:
        return [f"--runs {runs} gives the baseline {counted} counted run(s), so no arm can be judged against"
                " the run-to-run noise; use --runs 2 or more"]
    reference = sum(r["wall_s"] for r in base.runs if not r["counted"])
    need = reference + runs * sum(_estimate(a, base) for a in arms if a.status in ("ok", "skipped"))
    return [f"the baseline got {counted} counted run(s) in {budget_s:g} s, so no arm can be judged against the"
            f" run-to-run noise; --budget-s {need * 1.1:.0f} would give each arm {runs} runs"]


def _spread(values: list[float]) -> float | None:
    return max(values) / min(values) if len(values) >= 2 and min(values) > 0 else None


def _rows(arms: list[Arm]) -> list[dict]:
    """Every arm summarized against the baseline (``arms[0]``): the ``arms`` of ``remedy_trials/1``."""
    base = arms[0].ms()
    base_ms = statistics.median(base) if base else None
    return [summarize(a, base_ms, _spread(base)) for a in arms]


def arm_targets(env: dict) -> list[str] | None:
    """The kernels an arm changes when it changes named kernels only (a pins or launch-overrides
    file in its environment); None for an arm that changes the whole program."""
    from ..patch import launch_overrides, pins

    named, found = [], False
    for var, load in (("TKO_PINS", pins.load_pins), ("TKO_LAUNCH_OVERRIDES", launch_overrides.load_overrides)):
        if env.get(var):
            found = True
            try:
                named += list(load(env[var]))
            except (InputError, OSError):   # the arm itself reports a file it cannot read
                pass
    return sorted(set(named)) if found else None


def summarize(arm: Arm, base_ms: float | None, base_spread: float | None) -> dict:
    values = arm.ms()
    median = statistics.median(values) if values else None
    spread = _spread(values)
    x = base_ms / median if base_ms and median else None
    # The baseline's own process-to-process spread is required: an arm's spread alone says nothing
    # of the baseline (on the H200 one baseline moved 13 % between device calls at a 1.3 % arm spread).
    known = [s for s in (base_spread, spread) if s is not None]
    noise = max(known) if base_spread is not None else None
    beyond = None if x is None or noise is None or arm.name == "baseline" else max(x, 1 / x) > noise
    firsts = [r["first_step_s"] for r in arm.runs if r.get("first_step_s") is not None]
    spec = arm.spec
    return {
        "name": arm.name, "status": arm.status, "reason": arm.reason,
        "settings": {"config": arm.settings, "absent": arm.absent, "env": spec.env,
                     "bootstrap": spec.bootstrap},
        "proposed_by": spec.proposed_by, "change": spec.change, "ms": values, "median_ms": median,
        "spread": spread, "x_baseline": x, "beyond_noise": beyond, "noise": noise,
        "first_step_s": statistics.median(firsts) if firsts else None,
        "wall_s": [r["wall_s"] for r in arm.runs], "outputs": arm.outputs,
        "metric_from": next((r["metric_from"] for r in arm.runs if r.get("metric_from")), None),
        "logs": [r["log"] for r in arm.runs],
        **({"replaced": [r.get("replaced") for r in arm.runs]} if "--replace-rows" in spec.bootstrap
           or graph_rewrites.active(spec.env) else {}),
        "peak_memory_mb": max((r["peak_memory_mb"] for r in arm.runs if r.get("peak_memory_mb") is not None),
                              default=None),
        **({"targets": targets} if (targets := arm_targets(spec.env)) is not None else {}),
    }


def run_trials(cmd: list[str], out_dir: str | os.PathLike, specs: list[ArmSpec], runs: int = 3,
               budget_s: float = 1800.0, timeout: float = 1800.0, metric_regex: str = DEFAULT_METRIC,
               device: dict | None = None, tool: str = "try_remedies.py", max_runs: int | None = None) -> dict:
    from .trial_compare import compare_arms

    if runs < 1:
        raise InputError("--runs must be at least 1")
    max_runs = runs if max_runs is None else max_runs
    if max_runs < runs:
        raise InputError(f"--max-runs {max_runs} is below --runs {runs}")
    if budget_s <= 0 or timeout <= 0:
        raise InputError("--budget-s and --timeout must be positive")
    try:
        metric = re.compile(metric_regex)
    except re.error as exc:
        raise InputError(f"--metric-regex: {exc}") from None
    script, args, launcher = trial_ranks.split(cmd, split_command)
    out = Path(out_dir)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    arms = [trial_ranks.refuse_unsupported(resolve_settings(s), launcher) for s in specs]
    live = [a for a in arms if a.status == "ok"]
    with tempfile.TemporaryDirectory(prefix=".trials_", dir=out) as work:
        ctx = Context(script, args, out, Path(work), metric, timeout, total=1 + runs * len(live),
                      max_runs=max_runs, launcher=launcher)
        t0 = time.perf_counter()
        reference_run(live[0], ctx)
        ctx.plan = plan_estimate(live, runs, budget_s)
        print(ctx.plan["text"], file=sys.stderr, flush=True)
        notes = run_rounds(live, runs, budget_s, ctx, t0)
        notes += extra_rounds(live, runs, max_runs, budget_s, ctx, t0)
        notes += budget_advice(live, runs, budget_s)
        noise_note = compare_arms(arms)
    return finish(cmd, out, arms, runs, budget_s, device or {}, ctx, notes + noise_note, tool)


def finish(cmd, out: Path, arms: list[Arm], runs: int, budget_s: float, device: dict, ctx: Context,
           notes: list[str], tool: str) -> dict:
    rows = _rows(arms)
    outcome = trial_outcome({"arms": rows})  # the winner, its words and the noise, as reports read them
    noise = outcome["noise"]  # null under two counted baseline runs: unknown, not zero
    winner = outcome["winner"]
    payload = {"command": cmd, "script": ctx.script, "runs": runs, "max_runs": ctx.max_runs or runs,
               "budget_s": budget_s,
               "timeout_s": ctx.timeout, "device": device, "metric_from": ctx.metric_from,
               "order": ctx.order, "arms": rows, "noise": noise,
               "winner": winner.name if winner else None, "what_to_change": outcome["what_to_change"],
               "plan": ctx.plan, "notes": notes}
    from .trial_report import markdown

    doc = write_artifact(out / "trials.json", SCHEMA, tool, payload)
    atomic.write_text(out / "trials.md", markdown(doc))
    return doc
