"""Apply ``references/decision_rules.yaml`` to one kernel's facts.

Facts arrive as ``{name: Fact(value, source)}``; every fired rule lists the facts it used with
their sources, so a decision in a report can always be traced to a number in an artifact.
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import inputs, resources
from .errors import InputError

RULES_PATH = resources.reference("decision_rules.yaml")
VERDICTS = ("leave_as_is", "tune_triton", "disable_compiled_region", "rewrite_model", "advice")
OPERATORS = ("lt", "le", "gt", "ge", "eq", "ne", "in", "present", "missing")


@dataclass(frozen=True)
class Fact:
    value: Any
    source: str


@dataclass
class Firing:
    rule: str
    verdict: str
    priority: int | None
    says: str
    evidence: list[dict]


@dataclass
class Decision:
    verdict: str | None
    rule: str | None
    fired: list[Firing] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "verdict": self.verdict,
            "rule": self.rule,
            "fired": [f.__dict__ for f in self.fired],
            "gaps": self.gaps,
        }


def load_rules(path: Path = RULES_PATH) -> dict:
    import yaml  # lazy: only the decision step needs pyyaml

    try:
        # libyaml's loader where pyyaml has it: the rules load in a few ms instead of ~50
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load(inputs.read_text(path, "a YAML rules file"), Loader=loader)
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file (expected YAML rules)") from None
    except RecursionError:
        raise InputError(f"{path}: YAML nested too deeply to read") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({_yaml_problem(exc)})") from None
    try:
        validate_rules(data, path)
    except (AttributeError, TypeError, KeyError) as exc:
        raise InputError(f"{path}: malformed rules ({type(exc).__name__}: {exc}); every rule must "
                         "be a mapping with 'id', 'verdict', 'priority' and 'when' conditions") from None
    return data


def _yaml_problem(exc: Exception) -> str:
    """A YAML error in one line: what is wrong and where."""
    mark = getattr(exc, "problem_mark", None)
    what = getattr(exc, "problem", None) or " ".join(str(exc).split())
    return f"{what} at line {mark.line + 1}, column {mark.column + 1}" if mark else what


def validate_rules(data: Any, path: Path | str = "rules") -> None:
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise InputError(f"{path}: expected a mapping with a 'rules' list")
    thresholds = data.get("thresholds", {})
    if not isinstance(data.get("program_rules", []), list):
        raise InputError(f"{path}: 'program_rules' must be a list")
    for rule in data["rules"] + data.get("program_rules", []):
        rid = rule.get("id", "?")
        if rule.get("verdict") not in VERDICTS:
            raise InputError(f"{path}: rule {rid}: verdict must be one of {', '.join(VERDICTS)}")
        if rule["verdict"] != "advice" and not isinstance(rule.get("priority"), int):
            raise InputError(f"{path}: rule {rid}: a deciding rule needs an integer priority")
        for cond in _flatten(rule.get("when", [])):
            ops = [k for k in cond if k != "fact"]
            if "fact" not in cond or len(ops) != 1 or ops[0] not in OPERATORS:
                raise InputError(f"{path}: rule {rid}: bad condition {cond!r}")
            ref = cond[ops[0]]
            if isinstance(ref, str) and ops[0] in ("lt", "le", "gt", "ge") and ref not in thresholds:
                raise InputError(f"{path}: rule {rid}: unknown threshold {ref!r}")


def _flatten(conds):
    for cond in conds:
        if "any" in cond:
            yield from _flatten(cond["any"])
        else:
            yield cond


@functools.lru_cache(maxsize=1)
def _bundled_thresholds() -> tuple[tuple[str, Any], ...]:
    # read once per process: the scanners ask for a cut per kernel
    thresholds = load_rules().get("thresholds") or {}
    return tuple((name, _threshold(name, thresholds)) for name in thresholds)


def threshold(name: str, rules: dict | None = None) -> Any:
    """The value of one threshold of ``rules`` (default: the bundled decision_rules.yaml), so
    code outside the rules reads the same cut the rules do."""
    if rules is None:
        table = dict(_bundled_thresholds())
        if name not in table:
            raise InputError(f"{RULES_PATH}: no threshold {name!r}")
        return table[name]
    thresholds = rules.get("thresholds") or {}
    if name not in thresholds:
        raise InputError(f"decision rules lack the threshold {name!r}")
    return _threshold(name, thresholds)


def _threshold(ref, thresholds):
    if isinstance(ref, str) and ref in thresholds:
        t = thresholds[ref]
        return t["value"] if isinstance(t, dict) else t
    return ref


def _holds(cond: dict, facts: dict[str, Fact], thresholds: dict, used: dict, missing: set) -> bool:
    if "any" in cond:
        results = [_holds(c, facts, thresholds, used, missing) for c in cond["any"]]
        return any(results)
    name = cond["fact"]
    op = next(k for k in cond if k != "fact")
    fact = facts.get(name)
    present = fact is not None and fact.value is not None
    if op == "missing":
        return (not present) == bool(cond[op])
    if op == "present":
        if present:
            used[name] = fact
        return present == bool(cond[op])
    if not present:
        missing.add(name)
        return False
    value = fact.value
    ref = _threshold(cond[op], thresholds)
    try:
        ok = {
            "lt": lambda: value < ref, "le": lambda: value <= ref,
            "gt": lambda: value > ref, "ge": lambda: value >= ref,
            "eq": lambda: value == ref, "ne": lambda: value != ref,
            "in": lambda: value in ref,
        }[op]()
    except TypeError:
        return False
    if ok:
        used[name] = fact
    return ok


class _SafeDict(dict):
    def __missing__(self, key):
        return "{" + key + "}"


def _format(text: str, values: dict) -> str:
    class Fmt(string.Formatter):
        def format_field(self, value, spec):
            try:
                return super().format_field(value, spec)
            except (ValueError, TypeError, OverflowError):  # OverflowError: an int past a float's range
                return str(value)

        def get_value(self, key, args, kwargs):
            return kwargs[key] if key in kwargs else "{" + str(key) + "}"

    return Fmt().vformat(text, (), _SafeDict(values))


def decide(facts: dict[str, Fact], rules: dict | None = None, kernel: str = "", scope: str = "rules") -> Decision:
    """Fire every rule on ``facts``; the lowest-priority deciding rule gives the verdict.

    ``scope`` is ``rules`` (one kernel's facts) or ``program_rules`` (the whole profile's)."""
    rules = rules if rules is not None else load_rules()
    thresholds = rules.get("thresholds", {})
    threshold_values = {k: _threshold(k, thresholds) for k in thresholds}
    fired: list[Firing] = []
    all_missing: set[str] = set()
    for rule in rules.get(scope, []):
        used: dict[str, Fact] = {}
        missing: set[str] = set()
        if all(_holds(c, facts, thresholds, used, missing) for c in rule.get("when", [])):
            values = {**threshold_values, "kernel": kernel,
                      **{k: f.value for k, f in facts.items()}}
            values["from_cache_note"] = (", its config came from an autotune cache"
                                         if facts.get("from_cache") and facts["from_cache"].value else "")
            fired.append(Firing(
                rule=rule["id"], verdict=rule["verdict"], priority=rule.get("priority"),
                says=_format(rule.get("says", ""), values),
                evidence=[{"fact": k, "value": f.value, "source": f.source} for k, f in used.items()],
            ))
        elif rule["verdict"] != "advice":
            all_missing |= missing
    deciding = sorted((f for f in fired if f.verdict != "advice"), key=lambda f: f.priority)
    chosen = deciding[0] if deciding else None
    optional = set(rules.get("optional_facts") or [])
    gaps = [f"fact '{m}' unknown ({rules.get('facts', {}).get(m, 'no source listed')}): "
            f"rules using it could not be evaluated" for m in sorted(all_missing - optional)]
    if chosen is None:
        gaps.append("no deciding rule fired: not enough evidence for a decision")
    return Decision(chosen.verdict if chosen else None, chosen.rule if chosen else None, fired, gaps)
