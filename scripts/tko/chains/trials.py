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

Every arm compiles into caches of its own (``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR``,
:func:`cache_env`), emptied when the trials start and kept across that arm's runs: its first run
compiles (its first-step time is the compile cost reported), later runs read the cache. After the
baseline's first run :func:`plan_estimate` says what the whole plan costs and, when it does not fit
``--budget-s``, which arms run (:func:`arm_priority`: arms a user flag or a fact proposed before
arms always tried); the others are skipped up front with the estimate as their reason. After each
round :func:`sequential` stops an arm clearly behind or clearly ahead of the baseline (thresholds
``trial_sequential_stop`` of ``references/decision_rules.yaml``); extra rounds go to the faster arms
it has not decided.
"""

from __future__ import annotations

import hashlib
import json
import math
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
from ..verdict.trial_evidence import STACK_JOIN, trial_outcome
from ..remedies import graph_rewrites
from ..remedies.fallback_ab import BOOTSTRAP, DEFAULT_METRIC, split_command
from ..base.subproc import failure_line
from . import trial_ranks
from .trial_compare import OutputCheck
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
    stopped: dict | None = None   # the sequential() decision it sits out the rounds with
    cache: dict = field(default_factory=dict)     # TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR of its runs

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
    caches: dict | None = None        # where the arms' compile caches are (cache_env)
    user_cache: dict | None = None    # the user's CACHE_VARS, read before torch is imported (user_cache_env)
    check: OutputCheck = field(default_factory=OutputCheck)  # each run's outputs compared once


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


CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def cache_env(arm_name: str, out: Path, env: dict | None = None) -> dict:
    """The compile caches of one arm's runs: ``OUT/caches/<arm>`` (Inductor) and its ``triton``
    folder. A cache folder the user set (``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``) stays
    where the caches go: the arm's is a folder of its own inside it (``tko_trials/<key>/<arm>``, the
    key naming this trials folder), so arms never share one and the user's own entries are untouched."""
    env = os.environ if env is None else env
    key = hashlib.sha1(str(out.resolve()).encode()).hexdigest()[:10]
    user = {var: env.get(var) for var in CACHE_VARS}
    ind = (Path(user["TORCHINDUCTOR_CACHE_DIR"]) / "tko_trials" / key / arm_name
           if user["TORCHINDUCTOR_CACHE_DIR"] else out / "caches" / arm_name)
    tri = (Path(user["TRITON_CACHE_DIR"]) / "tko_trials" / key / arm_name
           if user["TRITON_CACHE_DIR"] else ind / "triton")
    return {"TORCHINDUCTOR_CACHE_DIR": str(ind), "TRITON_CACHE_DIR": str(tri)}


def user_cache_env() -> dict:
    """The cache folders the user set, read before anything imports Inductor: importing
    ``torch._inductor`` (torch 2.13: through ``torch._dynamo.package``) sets ``TORCHINDUCTOR_CACHE_DIR``
    to its default in this process, which is no choice of the user's."""
    return {var: os.environ.get(var) for var in CACHE_VARS}


def prepare_caches(arms: list[Arm], out: Path, user: dict | None = None) -> dict:
    """Give every arm that runs empty caches of its own (a first run compiles, as the user's first run
    does) inside ``user`` (:func:`user_cache_env`; default: read now); returns ``remedy_trials/1``
    ``caches``."""
    import shutil

    user = user_cache_env() if user is None else user
    for arm in arms:
        arm.cache = cache_env(arm.name, out, user)
        for folder in dict.fromkeys(arm.cache.values()):
            try:
                shutil.rmtree(folder, ignore_errors=True)
                Path(folder).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"cannot make the compile cache {folder} of arm {arm.name}: {exc}") from None
    given = [v for v in CACHE_VARS if user.get(v)]
    return {"source": ("inside the user's " + " and ".join(given)) if given else "the trials' output folder",
            "root": str(Path(cache_env("baseline", out, user)["TORCHINDUCTOR_CACHE_DIR"]).parent),
            "kept_across_runs": True}


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


# A run still going when the budget ends is killed this long after it (at most TRIAL_OVERRUN_S, 5 % of
# the budget): investigate.py keeps 30 s for its reports past the trials, so its deadline holds.
TRIAL_OVERRUN_S = 15.0


def run_once(arm: Arm, index: int, ctx: Context, limit_s: float | None = None) -> dict:
    """One run of ``arm``, killed past ``limit_s`` (the budget's end and the overrun allowed) or
    ``--timeout``, the sooner."""
    tag = f"{arm.name}_{index}"
    meas_path, out_path = ctx.work / f"{tag}.json", ctx.work / f"{tag}.pt"
    ab_path = ctx.work / f"{tag}.ab.pt"
    env = dict(os.environ, **arm.cache, **arm.spec.env, TKO_TRIAL_OUT=str(meas_path), TKO_TRIAL_OUTPUTS=str(out_path),
               TKO_AB_OUTPUT=str(ab_path), TKO_TRIAL_TIMING=ctx.timing, PYTHONUNBUFFERED="1",
               **trial_ranks.site_env(arm.spec, arm.settings))
    log = ctx.out_dir / "logs" / f"{tag}.log"
    limit = ctx.timeout if limit_s is None else min(ctx.timeout, max(1.0, limit_s))
    rc, stdout, stderr, wall = _spawn(_command(arm, ctx), env, log, limit)
    record = {"run": index, "status": "ok", "error": None, "ms": None, "wall_s": round(wall, 3),
              "first_step_s": None, "log": str(log), "counted": True, "outputs": [],
              "metric_from": None}
    meas = trial_ranks.read_measurements(meas_path)
    if meas.get("ranks"):
        record["ranks"] = meas["ranks"]
    record["first_step_s"] = meas.get("first_step_s")
    record["applied"] = meas.get("settings")
    if rc is None:
        why = "the trials' budget ended" if limit < ctx.timeout else "--timeout"
        record["status"], record["error"] = "timeout", f"no exit within {limit:.0f} s ({why}; process group killed)"
    elif rc != 0:
        record["status"], record["error"] = "failed", f"exit {rc}: {failure_line(stderr) or '(no output)'}"
        if retry := graph_rewrites.retry_env(arm.spec.env, stderr):
            record["retry_env"] = retry
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


def overrun_s(budget_s: float) -> float:
    """How long past the budget's end a run may go before it is killed."""
    return min(TRIAL_OVERRUN_S, 0.05 * budget_s)


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


def reference_load_s(base: Arm, ctx: Context) -> float:
    """The reference run's outputs loaded for the checks to come, timed: a run's check loads as much
    and compares it, about twice that (the plan counts it; 560 MB of outputs a run on an H200's CPU)."""
    paths = base.runs[0].get("outputs") if base.runs else None
    if not paths:
        return 0.0
    start = time.perf_counter()
    ctx.check.reference(paths)
    return 2 * (time.perf_counter() - start)


def _estimate(arm: Arm, base: Arm) -> float:
    """A run's wall time and its output check: the slowest of the arm's runs after its first (its caches are warm then),
    its first while it has one, and before it ran the baseline's first (a cold compile, as the arm's
    first run will be)."""
    walls = [r["wall_s"] + r.get("check_s", 0.0) for r in arm.runs]
    if walls:
        return max(walls[1:] or walls)
    return base.runs[0]["wall_s"] if base.runs else 0.0


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
    """Interleaved rounds (A B C A B C ...); before each round after the first, the arms that
    :func:`sequential` decides sit it out, and when every arm is decided the rounds end. Returns
    notes on what the budget cut and which arms stopped early."""
    notes = []
    for index in range(1, runs + 1):
        if index > 1 and not settle(arms, runs, index, ctx, notes):
            if arms[0].status == "ok" and any(a.stopped for a in arms[1:]):
                notes.append(f"round(s) {index}-{runs} not run: every arm was decided after {index - 1} run(s)")
            break
        for arm in (arms if index == 1 else round_order(arms)):
            if arm.stopped is None:
                _run_in_budget(arm, arms[0], index, budget_s, ctx, t0, notes)
    return notes


def _run_in_budget(arm: Arm, base: Arm, index: int, budget_s: float, ctx: Context, t0: float,
                   notes: list[str]) -> None:
    """Run ``arm`` once more if its usual wall time still fits the budget."""
    if arm.status != "ok":
        return
    # a run's number is new to its arm: the late, extra and stacked rounds each count the baseline's runs
    index = max(index, 1 + max((r["run"] for r in arm.runs), default=-1))
    est = _estimate(arm, base)
    if time.perf_counter() - t0 + est > budget_s:
        if not any(r["run"] > 0 for r in arm.runs):  # not run yet: it does not fit
            arm.status = "skipped"
            arm.reason = f"budget: {budget_s:g} s would be exceeded (a run takes about {est:.1f} s)"
        else:
            notes.append(f"{arm.name}: run {index} not started, budget {budget_s:g} s spent")
        return
    left = budget_s - (time.perf_counter() - t0)
    record = run_once(arm, index, ctx, limit_s=left + overrun_s(budget_s))
    arm.runs.append(record)
    if record.get("retry_env"):
        _retry_with(arm, record, notes)
        return _run_in_budget(arm, base, index + 1, budget_s, ctx, t0, notes)
    if record["status"] != "ok":
        arm.status, arm.reason = record["status"], record["error"]
    elif record.get("outputs") and base.runs[0].get("outputs"):
        start = time.perf_counter()   # on the budget's clock, kept for the end; the next run's estimate counts it
        ctx.check.compare([base] if arm is base else [base, arm])
        record["check_s"] = round(time.perf_counter() - start, 3)
        if arm is not base and _nan_retry(arm, record, ctx):
            _retry_with(arm, record, notes)
            _run_in_budget(arm, base, index + 1, budget_s, ctx, t0, notes)


def _nan_retry(arm: Arm, record: dict, ctx: Context) -> bool:
    """A run whose outputs came out NaN where the reference's are not, when its rewrite names that as its
    own guard (the sdpa arm's causal check, where the assert is compiled out): sets ``retry_env``."""
    from .trial_compare import flatten, has_nan, load_outputs

    if arm.outputs.get("result") != "different" or has_nan(ctx.check.ref or {}) \
            or not has_nan(flatten(load_outputs(record["outputs"]))):
        return False
    retry = graph_rewrites.retry_env(arm.spec.env, record.get("replaced") or "", nan_outputs=True)
    if retry:
        record["retry_env"] = retry
        record["error"] = "its outputs were NaN where the baseline's are not: " + (record.get("replaced") or "")
    return bool(retry)


def _retry_with(arm: Arm, record: dict, notes: list[str]) -> None:
    """A run its rewrite's own guard failed (e.g. the sdpa arm's causal mask changed between calls):
    the run is not counted, and the arm's later runs add the environment the rewrite names."""
    import dataclasses

    retry = record.pop("retry_env")
    record["counted"] = False
    arm.spec = dataclasses.replace(arm.spec, env={**arm.spec.env, **retry})
    said = " ".join(f"{k}={v}" for k, v in retry.items())
    notes.append(f"{arm.name}: run {record['run']} failed its rewrite's guard ({record['error']}); "
                 f"not counted, the arm's runs from here on add {said}")
    print(f"{arm.name}: {notes[-1].split(': ', 1)[1]}", file=sys.stderr)


# ----------------------------------------------------------------------------- sequential stop


def _stop_rule() -> dict:
    from ..base.decide import threshold

    rule = threshold("trial_sequential_stop")
    return {k: float(rule[k]) for k in ("alpha", "alpha_large_effect", "large_effect_x")}


def sequential(arm: Arm, base: Arm) -> dict | None:
    """The sequential test of ``arm`` against the baseline on their counted runs (two or more each;
    None before): ``decision`` ``behind`` / ``ahead`` when every run of one is slower than every run
    of the other, the ratio of medians is beyond the run-to-run noise (``beyond_noise``, as the table
    reads it) and the exact one-sided permutation probability of that separation, 1/C(m+n, m), is at
    most ``alpha``, or at most ``alpha_large_effect`` with a large effect (at least
    ``large_effect_x`` and the noise squared); else ``decision`` None."""
    a, b = arm.ms(), base.ms()
    if arm is base or len(a) < 2 or len(b) < 2:
        return None
    x, noise, beyond = against_baseline(a, statistics.median(b), _spread(b))
    if x is None or noise is None:
        return None
    rule = _stop_rule()
    side = "ahead" if max(a) < min(b) else "behind" if min(a) > max(b) else None
    ways = math.comb(len(a) + len(b), len(a))
    p = 1.0 / ways
    effect = max(x, 1.0 / x)
    large = effect >= max(rule["large_effect_x"], noise ** 2)
    decided = bool(side and beyond
                   and (p <= rule["alpha"] or (p <= rule["alpha_large_effect"] and large)))
    found = {"decision": side if decided else None, "runs": [len(a), len(b)], "p": round(p, 4),
             "x_baseline": round(x, 4), "noise": round(noise, 4), "separated": side is not None,
             "large_effect": large}
    if decided:
        found["text"] = (f"{len(a)} runs against the baseline's {len(b)}, every one "
                         f"{'faster' if side == 'ahead' else 'slower'}: {x:.2f}x, beyond the run-to-run noise "
                         f"(+-{100 * (noise - 1):.1f} %); exact rank test p = 1/{ways} = {p:.3f}"
                         + (f" <= {rule['alpha']:g}" if p <= rule["alpha"] else
                            f" with a large effect ({effect:.2f}x >= {max(rule['large_effect_x'], noise ** 2):.2f}x)"))
    return found


def _decided(arm: Arm, base: Arm) -> dict | None:
    found = sequential(arm, base) if arm.status == "ok" else None
    return found if found and found["decision"] else None


def settle(arms: list[Arm], runs: int, index: int, ctx: Context, notes: list[str]) -> bool:
    """Before round ``index``: every arm the sequential test decides sits the round out (and the
    ones it no longer decides run again); returns whether any arm still runs."""
    base = arms[0]
    for arm in arms[1:]:
        was, arm.stopped = arm.stopped, _decided(arm, base)
        if arm.stopped and not was:
            where = "behind" if arm.stopped["decision"] == "behind" else "ahead of"
            line = f"{arm.name}: stopped after {len(arm.ms())} run(s), clearly {where} the baseline ({arm.stopped['text']})"
            notes.append(line)
            print(line, file=sys.stderr, flush=True)
        elif was and not arm.stopped:
            print(f"{arm.name}: runs again: the baseline's latest runs no longer decide it", file=sys.stderr)
    active = sum(a.status == "ok" and a.stopped is None for a in arms[1:])
    ctx.total = ctx.done + ((runs - index + 1) * (1 + active) if active and base.status == "ok" else 0)
    return bool(active) and base.status == "ok"


def undecided_arms(arms: list[Arm]) -> list[Arm]:
    """The faster arms that the runs do not decide yet, fastest first: faster by the table but
    without a counted second baseline run, inside the run-to-run noise by at least
    ``inside_noise_candidate_x`` (:func:`tko.verdict.evidence.trial_outcome`), or beyond the noise
    but not yet by the sequential test (:func:`sequential`). Arms it decides are not among them."""
    outcome = trial_outcome({"arms": _rows(arms)})
    if outcome["winner"]:
        return []
    found = {a.index: a for a in outcome["undecided"] + outcome["inside"]
             + [a for a in outcome["faster"] if a.outputs != "different"]}
    pending = sorted(found.values(), key=lambda a: -a.x_baseline)
    return [arms[a.index] for a in pending if arms[a.index].status == "ok" and not _decided(arms[a.index], arms[0])]


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
            arm.stopped = None
            _run_in_budget(arm, arms[0], index, budget_s, ctx, t0, notes)
    return notes


def stop_records(arms: list[Arm], notes: list[str]) -> None:
    """After the last round: an arm keeps ``stopped_early`` only while all the runs still decide it
    as they did when it stopped (the baseline ran on); otherwise the claim is withdrawn, with a note."""
    for arm in arms[1:]:
        if arm.stopped is None:
            continue
        now = _decided(arm, arms[0])
        if not now or now["decision"] != arm.stopped["decision"]:
            notes.append(f"{arm.name}: stopped after {len(arm.ms())} run(s) as clearly {arm.stopped['decision']}, "
                         "but the baseline's later runs no longer decide it: read its row as measured")
            arm.stopped = None
        else:
            arm.stopped = now


def late_rounds(arms: list[Arm], live: list[Arm], runs: int, budget_s: float, ctx: Context, t0: float) -> list[str]:
    """The arms the plan dropped up front (highest priority first) that the budget left by the
    rounds still fits, each ``runs`` times after a baseline run; appended to ``live``. A plan is an
    estimate from one run, and arms that the sequential test decided early sit rounds out: on an
    H200 the plan dropped cudagraphs and the rounds ended with 164 of 375 s unused."""
    notes, base = [], live[0]
    for name in ctx.plan.get("dropped") or []:
        arm = next((a for a in arms if a.name == name), None)
        if arm is None or base.status != "ok":
            continue
        check = max((r.get("check_s", 0.0) for r in base.runs), default=0.0)   # its own output checks
        need = ctx.plan["run_s"] * (runs - 1 + first_run_x(name)) + runs * (_estimate(base, base) + check)
        left = budget_s - (time.perf_counter() - t0)
        if need > left:     # the row says why the late round did not take it either
            arm.reason = f"{arm.reason}; after the rounds {max(left, 0):.0f} s were left, about {need:.0f} s needed"
            continue
        arm.status, arm.reason = "ok", None
        live.append(arm)
        note = f"late round: {name} (dropped up front; {left:.0f} s of the budget left, about {need:.0f} s needed)"
        notes.append(note)
        print(note, file=sys.stderr, flush=True)
        ctx.total += 2 * runs
        for i in range(runs):
            _run_in_budget(base, base, max(r["run"] for r in base.runs) + 1, budget_s, ctx, t0, notes)
            _run_in_budget(arm, base, i + 1, budget_s, ctx, t0, notes)
    return notes


# ----------------------------------------------------------------------------- the stacked arm

def stacked_spec(arms: list[Arm]) -> ArmSpec | None:
    """The winning setting arm (a config-class change: a flag, a mode, pins) with the rewrite arm
    that kept outputs equal and was not measurably slower, fastest first, as one arm: a rewrite that
    cuts GPU time shows in a host-bound step only once the setting has cut the host time (on an H200
    the sdpa arm halved peak memory at 0.998x while CUDA graphs ran the same step 1.37x faster).
    None when the trials have no such pair. Needs ``outputs`` set (:meth:`OutputCheck.compare`)."""
    from ..base.decide import threshold

    rows = {r["name"]: r for r in _rows(arms)}
    outcome = trial_outcome({"arms": list(rows.values())})
    win = arms[outcome["winner"].index] if outcome["winner"] else None
    if win is None or win.name not in (threshold("remedy_change_classes").get("config") or []):
        return None
    fits = [a for a in arms[1:] if a.name in graph_rewrites.REWRITES and a.status == "ok"
            and (a.outputs or {}).get("result") == "equal" and rows[a.name]["x_baseline"]
            and not (rows[a.name]["beyond_noise"] and rows[a.name]["x_baseline"] < 1)]
    if not fits:
        return None
    rw = max(fits, key=lambda a: rows[a.name]["x_baseline"])
    return ArmSpec(name=f"{win.name}{STACK_JOIN}{rw.name}", settings={**win.spec.settings, **rw.spec.settings},
                   env={**win.spec.env, **rw.spec.env}, bootstrap=[*win.spec.bootstrap, *rw.spec.bootstrap],
                   proposed_by=(f"stacked: {win.name} won at {rows[win.name]['x_baseline']:.3f}x; {rw.name} kept "
                                f"outputs equal at {rows[rw.name]['x_baseline']:.3f}x"),
                   change=f"{win.spec.change}; and {rw.spec.change}", priority="facts")


def stack_round(arms: list[Arm], runs: int, budget_s: float, ctx: Context, t0: float) -> tuple[Arm | None, list[str]]:
    """Run :func:`stacked_spec`'s arm ``runs`` times, each after a baseline run, while the budget
    lasts; returns it (None when there is none) and notes."""
    spec = stacked_spec(arms)
    if spec is None:
        return None, []
    left, need = budget_s - (time.perf_counter() - t0), 2 * _estimate(arms[0], arms[0])
    if need > left:   # a baseline run and the stacked arm's first (about a baseline run) do not fit
        return None, [f"stacked round: {spec.name} not run ({spec.proposed_by}): {max(left, 0):.0f} s of the "
                      f"budget left, about {need:.0f} s needed"]
    arm = resolve_settings(spec)
    prepare_caches([arm], ctx.out_dir, ctx.user_cache)
    note = f"stacked round: {arm.name} ({spec.proposed_by}), interleaved with the baseline"
    print(note, file=sys.stderr, flush=True)
    notes, start = [note], max(r["run"] for r in arms[0].runs) + 1
    ctx.total += 2 * runs
    for i in range(runs):
        _run_in_budget(arms[0], arms[0], start + i, budget_s, ctx, t0, notes)
        _run_in_budget(arm, arms[0], i + 1, budget_s, ctx, t0, notes)
    return arm, notes


# ----------------------------------------------------------------------------- the plan

PRIORITIES = ("user", "step", "facts", "always", "low")
PRIORITY_WORDS = {"user": "proposed by a user flag",
                  "step": "proposed by the step's facts",
                  "facts": "proposed by the facts", "always": "always tried",
                  "low": "proposed only by kernels of too small a ceiling"}
ALWAYS_TRIED = ("always tried", "no facts given", "no region named")


def arm_priority(spec: ArmSpec) -> str:
    """``user`` (a flag the user gave: ``--pins``, ``--disable``), ``step`` (a catalog rewrite the
    program shows, max-autotune for a library-dominated step, graphs for a host-bound one: set by
    tko.chains.trial_plan), ``facts`` (a kernel fact, a smoke record), ``always`` (tried without a
    fact) or ``low`` (proposed only by kernels whose measured ceiling is under the cut);
    ``ArmSpec.priority`` when set."""
    if spec.priority in PRIORITIES:
        return spec.priority
    by = spec.proposed_by or ""
    if by.startswith("--"):
        return "user"
    if not by or any(words in by for words in ALWAYS_TRIED):
        return "always"
    return "facts"


def first_run_x(name: str) -> float:
    """How many baseline runs an arm's first run costs (its compile into empty caches of its own):
    ``trial_first_run_x`` of references/decision_rules.yaml, 1 for an arm it does not name."""
    from ..base.decide import threshold

    table = threshold("trial_first_run_x")
    value = table.get(name) if isinstance(table, dict) else None
    return float(value) if isinstance(value, (int, float)) and value >= 1 else 1.0


def plan_estimate(arms: list[Arm], runs: int, budget_s: float, elapsed_s: float | None = None,
                  max_runs: int | None = None, check_s: float = 0.0) -> dict:
    """What the whole plan costs, said before its rounds start: the baseline's first run times one
    process (compile included), every arm (the baseline too) then runs ``runs`` times in rounds, an
    arm's first run at :func:`first_run_x` of that (max-autotune compiles for minutes). When that does
    not fit the budget (``elapsed_s``, the time spent so far, included), the arms are kept in priority
    order (:func:`arm_priority`; the plan's order among equals) while each fits what is left (a cheaper
    arm after one that does not fit is still kept) and the others are named in ``dropped``, lowest
    priority last (:func:`late_rounds` runs them if the rounds leave the budget). ``check_s``: the
    output check each run gets after it (the reference's load time, twice: a run's outputs loaded and
    compared)."""
    run_s = max(r["wall_s"] for r in arms[0].runs)
    spent = run_s if elapsed_s is None else elapsed_s
    first_x = {a.name: first_run_x(a.name) if i else 1.0 for i, a in enumerate(arms)}
    cost = {name: run_s * (runs - 1 + x) + runs * check_s for name, x in first_x.items()}
    need = spent + sum(cost.values())
    fits = need <= budget_s
    ranked = [arms[0]] + sorted(arms[1:], key=lambda a: PRIORITIES.index(arm_priority(a.spec)))
    room = budget_s - spent - cost[arms[0].name]
    kept, left_for = (ranked, {}) if fits else (ranked[:1], {})
    for arm in ranked[1:] if not fits else []:
        if cost[arm.name] <= room:  # a cheaper arm after a costly one that does not fit still runs
            room -= cost[arm.name]
            kept.append(arm)
        else:
            left_for[arm.name] = [round(cost[arm.name], 1), round(max(room, 0.0), 1)]
    n_fit = len(kept) - 1
    dropped = [a.name for a in ranked[1:] if not any(a is k for k in kept)]
    kept_need = spent + sum(cost[a.name] for a in kept)
    extra = (max_runs or runs) - runs
    slow = [f"{name} x{x:g}" for name, x in first_x.items() if x > 1]
    text = (f"plan: {len(arms)} arm(s) (baseline included) x {runs} run(s), a run about {run_s:.0f} s"
            + (f" and its output check about {check_s:.0f} s" if check_s >= 1 else "")
            + (f" (a first run: {', '.join(slow)})" if slow else "") + f": about "
            f"{need:.0f} s in all ({spent:.0f} s spent so far included) against --budget-s {budget_s:g}")
    if fits:
        text += (f"; then up to {extra} extra round(s) of the faster arms not yet decided, while the budget lasts"
                 if extra > 0 else "")
    else:
        text += (f": {n_fit} arm(s) besides the baseline fit (about {kept_need:.0f} s); dropped up front, lowest "
                 f"priority last: {', '.join(dropped)} (run after the rounds if the budget left fits them); "
                 f"--budget-s {1.1 * need:.0f} would run them all")
    return {"arms": len(arms), "runs": runs, "max_runs": max_runs or runs, "run_s": round(run_s, 1), "check_s": round(check_s, 1),
            "elapsed_s": round(spent, 1), "estimate_s": round(need, 1), "budget_s": budget_s, "fits": fits,
            "kept": [a.name for a in arms if any(a is k for k in kept)], "dropped": dropped, "kept_estimate_s": round(kept_need, 1),
            "priority": {a.name: arm_priority(a.spec) for a in arms[1:]}, "cost_and_room_s": left_for,
            "text": text}


def apply_plan(arms: list[Arm], plan: dict) -> list[Arm]:
    """Skip the arms ``plan`` dropped, each with the estimate as its reason; returns the arms kept."""
    kept = [a for a in arms if a.name in plan["kept"]]
    rank = {name: PRIORITIES.index(p) for name, p in plan["priority"].items()}
    for arm in arms:
        if arm.name not in plan["dropped"]:
            continue
        ahead = [f"{a.name} ({PRIORITY_WORDS[plan['priority'][a.name]]})" for a in kept[1:]
                 if rank[a.name] <= rank[arm.name]]
        cost, room = (plan.get("cost_and_room_s") or {}).get(arm.name, [None, None])
        arm.status = "skipped"
        arm.reason = (f"budget: {plan['arms']} arms x {plan['runs']} runs x {plan['run_s']:.0f} s (first runs "
                      f"of compile-heavy arms longer) = {plan['estimate_s'] - plan['elapsed_s']:.0f} s (+ "
                      f"{plan['elapsed_s']:.0f} s spent) > --budget-s {plan['budget_s']:g}; "
                      + (f"kept first: {', '.join(ahead)}" if ahead else "no arm fits beside the baseline")
                      + (f"; its {cost:.0f} s did not fit the {room:.0f} s left" if cost is not None else "")
                      + f": this arm is {PRIORITY_WORDS[plan['priority'][arm.name]]}")
    return kept


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
    rows = [summarize(a, base_ms, _spread(base)) for a in arms]
    for arm, row in zip(arms, rows):
        row["sequential"] = sequential(arm, arms[0])
    return rows


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


def against_baseline(values: list[float], base_ms: float | None,
                     base_spread: float | None) -> tuple[float | None, float | None, bool | None]:
    """(x_baseline, noise, beyond_noise) of an arm's counted ms against the baseline's median and
    spread: the noise is the larger max/min spread of the two, beyond it when max(x, 1/x) exceeds it."""
    median = statistics.median(values) if values else None
    x = base_ms / median if base_ms and median else None
    # The baseline's own process-to-process spread is required: an arm's spread alone says nothing
    # of the baseline (on the H200 one baseline moved 13 % between device calls at a 1.3 % arm spread).
    known = [s for s in (base_spread, _spread(values)) if s is not None]
    noise = max(known) if base_spread is not None else None
    beyond = None if x is None or noise is None else max(x, 1 / x) > noise
    return x, noise, beyond


def summarize(arm: Arm, base_ms: float | None, base_spread: float | None) -> dict:
    values = arm.ms()
    median = statistics.median(values) if values else None
    spread = _spread(values)
    x, noise, beyond = against_baseline(values, base_ms, base_spread)
    beyond = None if arm.name == "baseline" else beyond
    # the first run compiles into the arm's empty caches: its first step is the compile cost; later
    # runs read those caches (first_step_cached_s)
    firsts = [(r["run"], r["first_step_s"]) for r in arm.runs if r.get("first_step_s") is not None]
    stop = arm.stopped
    spec = arm.spec
    return {
        "name": arm.name, "status": arm.status, "reason": arm.reason,
        "settings": {"config": arm.settings, "absent": arm.absent, "env": spec.env,
                     "bootstrap": spec.bootstrap},
        "proposed_by": spec.proposed_by, "ms": values, "median_ms": median,
        "change": graph_rewrites.change_said(spec.env, next((r.get("replaced") for r in reversed(arm.runs)
                                                             if r.get("replaced")), None), spec.change),
        "spread": spread, "x_baseline": x, "beyond_noise": beyond, "noise": noise,
        "first_step_s": firsts[0][1] if firsts else None, "first_step_run": firsts[0][0] if firsts else None,
        "first_step_cached_s": statistics.median(f for _, f in firsts[1:]) if len(firsts) > 1 else None,
        "stopped_early": stop["decision"] if stop else None, "stop_reason": stop["text"] if stop else None,
        "cache_dir": arm.cache.get("TORCHINDUCTOR_CACHE_DIR"),
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
    user_cache = user_cache_env()  # before resolve_settings imports Inductor's config
    if runs < 1:
        raise InputError("--runs must be at least 1")
    max_runs = runs if max_runs is None else max_runs
    if max_runs < runs:
        raise InputError(f"--max-runs {max_runs} is below --runs {runs}")
    if not budget_s > 0 or not timeout > 0:  # nan too
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
        ctx.user_cache = user_cache
        ctx.caches = prepare_caches(live, out, user_cache)
        t0 = time.perf_counter()
        reference_run(live[0], ctx)
        check_s = reference_load_s(live[0], ctx)
        ctx.plan = plan_estimate(live, runs, budget_s, time.perf_counter() - t0, max_runs, check_s)
        print(ctx.plan["text"], file=sys.stderr, flush=True)
        live = apply_plan(live, ctx.plan)
        ctx.total = ctx.done + runs * len(live)
        notes = []
        if ctx.plan["dropped"] and len(live) == 1:  # no arm left beside it: more baseline runs decide nothing
            notes.append("no arm fits the budget beside the baseline: " + ctx.plan["text"])
        else:
            notes += run_rounds(live, runs, budget_s, ctx, t0)
            notes += late_rounds(arms, live, runs, budget_s, ctx, t0)
            notes += extra_rounds(live, runs, max_runs, budget_s, ctx, t0)
            ctx.check.compare(arms)  # the rewrite arms' outputs, which the stacked arm needs equal
            stacked, more = stack_round(live, runs, budget_s, ctx, t0)
            live += [stacked] if stacked else []
            arms += [stacked] if stacked else []
            notes += more
            stop_records(live, notes)
            notes += budget_advice(live, runs, budget_s)
        noise_note = ctx.check.compare(arms)
    return finish(cmd, out, arms, runs, budget_s, device or {}, ctx, notes + noise_note, tool)


def cache_notes(rows: list[dict]) -> list[str]:
    """Runs that compiled again instead of reading the caches their first run wrote (thresholds
    ``trial_cache_reuse``): the baseline's later runs as slow to start as its first (every run of the
    program compiles), or an arm's later runs much slower to start than the baseline's."""
    from ..base.decide import threshold

    rule = threshold("trial_cache_reuse")
    base = next((r for r in rows if r.get("name") == "baseline"), {})
    cold, warm = base.get("first_step_s"), base.get("first_step_cached_s")
    notes = []
    if cold and warm and cold >= rule["min_compile_s"] and warm >= rule["cold_fraction"] * cold:
        notes.append(f"baseline: its later runs' first step took {warm:.2f} s against {cold:.2f} s for its first "
                     "(empty caches): the program's compile is not read back from the caches, every run compiles "
                     "again (TORCH_LOGS=+inductor says why a cache is bypassed)")
    for r in rows:
        mine = r.get("first_step_cached_s")
        # CUDA graphs record in every process by design: a slower first step is not a missed cache
        graphs = (r.get("settings") or {}).get("config", {}).get("inductor.triton.cudagraphs")
        if r is base or not (mine and warm) or graphs:
            continue
        if mine >= rule["arm_over_baseline_x"] * warm and mine - warm >= rule["min_excess_s"]:
            notes.append(f"{r['name']}: its later runs' first step took {mine:.2f} s against the baseline's {warm:.2f} s: "
                         f"they compiled or tuned again rather than read the arm's caches, about {mine - warm:.1f} s "
                         "more of the budget a run (TORCH_LOGS=+inductor says why a cache is bypassed)")
    return notes


def finish(cmd, out: Path, arms: list[Arm], runs: int, budget_s: float, device: dict, ctx: Context,
           notes: list[str], tool: str) -> dict:
    rows = _rows(arms)
    notes = notes + cache_notes(rows)
    outcome = trial_outcome({"arms": rows})  # the winner, its words and the noise, as reports read them
    noise = outcome["noise"]  # null under two counted baseline runs: unknown, not zero
    winner = outcome["winner"]
    payload = {"command": cmd, "script": ctx.script, "runs": runs, "max_runs": ctx.max_runs or runs,
               "budget_s": budget_s,
               "timeout_s": ctx.timeout, "device": device, "metric_from": ctx.metric_from,
               "order": ctx.order, "arms": rows, "noise": noise,
               "winner": winner.name if winner else None, "what_to_change": outcome["what_to_change"],
               "memory_change": outcome["memory_change"], "plan": ctx.plan, "caches": ctx.caches,
               "compare_s": round(ctx.check.seconds, 2), "notes": notes}
    from .trial_report import markdown

    doc = write_artifact(out / "trials.json", SCHEMA, tool, payload)
    atomic.write_text(out / "trials.md", markdown(doc))
    return doc
