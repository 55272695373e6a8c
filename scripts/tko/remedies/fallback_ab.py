"""End-to-end A/B of a repro with and without ``torch._dynamo.disable`` on named regions.

Both arms run through ``fallback_bootstrap.py`` in fresh processes, interleaved (A B A B ...) so
clock drift and thermal state hit both alike. Time comes from the repro's own steady-state line
(``--metric-regex``, default ``<float> ms/step`` as printed by the example repros); without one the
whole process wall time is used and flagged, since it includes compilation. Outputs are compared
when the repro saves its result to ``$TKO_AB_OUTPUT`` (the examples do).
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..base import subproc
from ..base.errors import InputError, ToolFailure

BOOTSTRAP = Path(__file__).resolve().with_name("fallback_bootstrap.py")
DEFAULT_METRIC = r"([0-9]+(?:\.[0-9]+)?)\s*ms/step"


@dataclass
class Arm:
    name: str
    disable: list[str]
    ms: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    metric_from: str = "repro"
    output: str | None = None

    def summary(self) -> dict:
        values = self.ms
        return {
            "name": self.name, "disable": self.disable, "runs": len(values), "ms": values,
            "median_ms": statistics.median(values) if values else None,
            "spread": (max(values) / min(values)) if values and min(values) > 0 else None,
            "metric_from": self.metric_from, "wall_s": self.wall_s,
        }


def split_command(cmd: list[str]) -> tuple[str, list[str]]:
    """``python repro.py args`` -> (repro.py, args); the A/B always runs the script itself."""
    if not cmd:
        raise InputError("no repro command after '--' (e.g. -- python repro.py --steps 20)")
    if Path(cmd[0]).name.startswith("python") and len(cmd) > 1:
        cmd = cmd[1:]
    if cmd[0] == "-m":
        raise InputError("'python -m module' repros are not supported; pass the script path")
    script = Path(cmd[0])
    if script.suffix != ".py" or not script.is_file():
        raise InputError(f"{cmd[0]}: not a Python script file")
    return str(script), cmd[1:]


def run_arm_once(arm: Arm, script: str, args: list[str], metric: re.Pattern, timeout: float,
                 workdir: Path, index: int) -> None:
    out_file = workdir / f"{arm.name}_{index}.pt"
    env = dict(os.environ, TKO_AB_OUTPUT=str(out_file), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, str(BOOTSTRAP)]
    for target in arm.disable:
        cmd += ["--disable", target]
    cmd += [script, *args]
    done = subproc.run(cmd, timeout=timeout, env=env)
    if done.timed_out:
        raise ToolFailure(f"arm {arm.name}: repro did not finish within {timeout:.0f} s")
    wall = done.seconds
    if done.returncode == 3 and "TKO_FALLBACK error" in done.stderr:
        raise InputError(done.stderr.strip().splitlines()[-1].split("error: ", 1)[-1])
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise ToolFailure(f"arm {arm.name}: repro exited {done.returncode}: {tail}")
    arm.wall_s.append(round(wall, 3))
    matches = metric.findall(done.stdout)
    if matches:
        arm.ms.append(float(matches[-1]))
    else:
        arm.metric_from = "process wall time (includes compile)"
        arm.ms.append(wall * 1e3)
    if out_file.exists():
        arm.output = str(out_file)


def compare_outputs(a_path: str | None, b_path: str | None, rtol: float | None, atol: float | None) -> dict:
    if not a_path or not b_path:
        return {"checked": False, "passed": None,
                "reason": "the repro saved no output (set by $TKO_AB_OUTPUT; see examples/_repro.py)"}
    import torch

    a = torch.load(a_path, weights_only=False)
    b = torch.load(b_path, weights_only=False)
    kwargs = {} if rtol is None else {"rtol": rtol, "atol": atol or 0.0}
    try:
        torch.testing.assert_close(b, a, equal_nan=False, **kwargs)
    except AssertionError as exc:
        first = str(exc).strip().splitlines()
        return {"checked": True, "passed": False, "reason": " ".join(first[:3])}
    return {"checked": True, "passed": True, "reason": "outputs equal within torch.testing tolerances"
            if rtol is None else f"outputs equal within rtol={rtol}, atol={atol or 0.0}"}


def visible_device() -> dict:
    """The device the repro's processes will see (they inherit this environment)."""
    try:
        import torch

        if torch.cuda.is_available():
            backend = "hip" if getattr(torch.version, "hip", None) else "cuda"
            return {"type": backend, "name": torch.cuda.get_device_name(0),
                    "count": torch.cuda.device_count()}
    except Exception as exc:  # a broken torch: the repro will say more
        return {"type": "cpu", "name": None, "count": 0, "note": f"torch: {type(exc).__name__}"}
    return {"type": "cpu", "name": None, "count": 0}


def run_ab(cmd: list[str], disable: list[str], runs: int = 3, metric_regex: str = DEFAULT_METRIC,
           timeout: float = 1800.0, rtol: float | None = None, atol: float | None = None) -> dict:
    if not disable:
        raise InputError("name at least one region with --disable (module:Name or __main__:Name)")
    for target in disable:
        if ":" not in target or not target.split(":", 1)[1]:
            raise InputError(f"--disable {target!r}: expected module:Name, module:Class.method or __main__:Name")
    if runs < 1:
        raise InputError("--runs must be at least 1")
    try:
        metric = re.compile(metric_regex)
    except re.error as exc:
        raise InputError(f"--metric-regex: {exc}") from None
    script, args = split_command(cmd)
    device = visible_device()
    compiled, fallback = Arm("compiled", []), Arm("fallback", list(disable))
    with tempfile.TemporaryDirectory(prefix="tko_ab_") as tmp:
        for i in range(runs):
            for arm in (compiled, fallback):
                run_arm_once(arm, script, args, metric, timeout, Path(tmp), i)
        check = compare_outputs(compiled.output, fallback.output, rtol, atol)
    if device["type"] == "cpu":  # after the runs: a bad target stays a one-line error
        print("eager_fallback_ab.py: warning: no GPU visible: both arms ran the repro on the CPU, which "
              "says nothing about its GPU kernels", file=sys.stderr)
    a, b = compiled.summary(), fallback.summary()
    speedup = (a["median_ms"] / b["median_ms"]) if a["median_ms"] and b["median_ms"] else None
    noise = max(a["spread"] or 1.0, b["spread"] or 1.0)
    if speedup is None:
        verdict = "unknown"
    elif max(speedup, 1 / speedup) <= noise:
        verdict = "no difference beyond run-to-run spread"
    else:
        verdict = "fallback faster" if speedup > 1 else "compiled faster"
    if check["passed"] is False:
        verdict += "; OUTPUTS DIFFER: the fallback is not a valid replacement"
    return {"command": cmd, "script": script, "disable": disable, "device": device, "arms": [a, b],
            "speedup_fallback_over_compiled": speedup, "noise_spread": noise,
            "verdict": verdict, "output_check": check, "advice": spread_advice(verdict, noise)}


# a spread above this hides differences worth a decision (an H200 repro of 50 steps at 0.06 ms/step
# spread 2.36x between processes)
WIDE_SPREAD = 1.10


def spread_advice(verdict: str, noise: float) -> str | None:
    if not verdict.startswith("no difference") or noise <= WIDE_SPREAD:
        return None
    return (f"the runs spread {noise:.2f}x (max/min): too wide to decide; run more steps per process "
            "(a per-step time of a few ms or more) or more --runs")


def markdown(result: dict) -> str:
    from ..base import markdown as md

    lines = ["# Eager-fallback A/B", "", f"Command: {md.code(' '.join(result['command']))}",
             f"Disabled: {', '.join(md.code(d) for d in result['disable'])}", ""]
    rows = []
    for arm in result["arms"]:
        med = f"{arm['median_ms']:.4f}" if arm["median_ms"] is not None else "n/a"
        spread = f"{arm['spread']:.3f}" if arm["spread"] else "n/a"
        rows.append([md.text(arm["name"]), str(arm["runs"]), med, spread, md.text(arm["metric_from"])])
    lines += md.table(["arm", "runs", "median ms", "spread (max/min)", "time from"], rows)
    sp = result["speedup_fallback_over_compiled"]
    lines += ["", f"Speedup of the fallback: {sp:.3f}x" if sp else "Speedup: n/a",
              f"Verdict: {md.text(result['verdict'])}",
              *([f"Advice: {md.text(result['advice'])}"] if result.get("advice") else []),
              f"Output check: {md.text(result['output_check']['reason'])}", ""]
    return "\n".join(lines)
