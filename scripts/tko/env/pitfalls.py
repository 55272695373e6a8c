"""Known DCU pitfalls (``references/dcu_pitfalls.yaml``) matched against a Triton stack and a kernel.

A pitfall *matches* when the recorded stack (the ``triton_stack`` record of check_env.py), Triton
version and device arch are among those it was seen on, and its kernel conditions all hold or a
recorded compile error shows its ``error_text``; it *may apply* when a fact it needs is not recorded
(no device arch, no captured config or source) or when nothing recorded confirms it. The
investigation report lists both with source, symptom and workaround; validate_dcu.py runs the
``machine`` checks on the machine.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..base import resources
from ..base.errors import InputError
from ..base.versions import parse_version

PITFALLS_PATH = resources.reference("dcu_pitfalls.yaml")
_RANGE_ITEM = re.compile(r"^\s*(>=|<=|==|<|>)\s*(\d+(?:\.\d+)*)\s*$")
_COMPARE = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b,
            "<": lambda a, b: a < b, ">": lambda a, b: a > b}


def load(path: str | Path = PITFALLS_PATH) -> list[dict]:
    """The entries of a pitfalls file, each checked for the fields the matching reads."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: cannot read the pitfalls file ({type(exc).__name__})") from None
    entries = doc.get("pitfalls") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise InputError(f"{path}: no 'pitfalls' list")
    for i, p in enumerate(entries):
        missing = [k for k in ("id", "title", "source", "symptom", "workaround")
                   if not isinstance(p, dict) or k not in p]
        if missing:
            raise InputError(f"{path}: pitfalls[{i}] lacks {', '.join(missing)}")
        for key in ("stacks", "archs"):
            if not isinstance(p.get(key) or [], list):
                raise InputError(f"{path}: pitfalls[{i}].{key} must be a list")
        for item in filter(None, str(p.get("triton") or "").split(",")):
            if not _RANGE_ITEM.match(item):
                raise InputError(f"{path}: pitfalls[{i}].triton {p['triton']!r}: expected e.g. '>=3.6,<3.7'")
    return entries


def in_range(version: str | None, spec: str | None) -> bool | None:
    """Whether ``version`` is inside ``spec`` (``>=3.6,<3.7``); None when the version is unknown."""
    if not spec:
        return True
    v = parse_version(version)
    if not v:
        return None
    for item in str(spec).split(","):
        op, bound = _RANGE_ITEM.match(item).groups()
        b = tuple(int(x) for x in bound.split("."))
        if not _COMPARE[op](v[:len(b)], b):
            return False
    return True


def stack_matches(p: dict, stack: dict | None, arch: str | None) -> tuple[bool | None, list[str]]:
    """(whether the stack, Triton version and arch are ones the pitfall was seen on, the reasons);
    None when one of them is unknown."""
    stack = stack or {}
    why, unknown = [], False
    name = stack.get("name")
    if p.get("stacks"):
        if name is None:
            unknown = True
        elif name not in p["stacks"]:
            return False, []
        else:
            why.append(f"stack {name}")
    hit = in_range(stack.get("triton_version"), p.get("triton"))
    if hit is False:
        return False, []
    unknown |= hit is None
    if p.get("triton") and hit:
        why.append(f"triton {stack.get('triton_version')} ({p['triton']})")
    if p.get("archs"):
        if arch is None:
            unknown = True
        elif arch not in p["archs"]:
            return False, []
        else:
            why.append(f"arch {arch}")
    return (None if unknown else True), why


def kernel_matches(p: dict, kernel: dict) -> tuple[bool | None, list[str]]:
    """(whether the kernel conditions of ``check.kernel`` hold for ``kernel`` (:func:`kernel_view`),
    the reasons); None when a fact a condition needs is unknown."""
    cond = ((p.get("check") or {}).get("kernel")) or {}
    why, unknown = [], False
    if "num_warps" in cond:
        warps = kernel.get("num_warps")
        if warps is None:
            unknown = True
        elif warps != cond["num_warps"]:
            return False, []
        else:
            why.append(f"num_warps={warps}")
    for name, value in (cond.get("constexprs") or {}).items():
        have = (kernel.get("constexprs") or {}).get(name)
        if kernel.get("constexprs") is None or name not in kernel["constexprs"]:
            unknown = True
        elif have != value:
            return False, []
        else:
            why.append(f"{name}={have}")
    if cond.get("source_regex"):
        if kernel.get("source") is None:
            unknown = True
        elif not re.search(cond["source_regex"], kernel["source"]):
            return False, []
        else:
            why.append(f"source matches {cond['source_regex']!r}")
    return (None if unknown else True), why


def _error_hit(p: dict, errors: list[str]) -> str | None:
    """The ``check.error_text`` needle found in one of the recorded compile errors, if any."""
    for needle in ((p.get("check") or {}).get("error_text")) or []:
        if any(needle in e for e in errors):
            return needle
    return None


def match(stack: dict | None, arch: str | None, kernel: dict | None = None,
          entries: list[dict] | None = None) -> list[dict]:
    """The pitfalls that match (``status`` ``matches``) or may apply (``may apply``), with reasons.

    It *matches* when the stack, version and arch are known and fit and either its kernel conditions
    all hold or a recorded compile error shows its ``error_text``; a pitfall known only by an error
    or a machine check, with no such error recorded, *may apply* on a fitting stack."""
    kernel = kernel or {}
    out = []
    for p in load() if entries is None else entries:
        on_stack, why = stack_matches(p, stack, arch)
        if on_stack is False:
            continue
        on_kernel, kwhy = kernel_matches(p, kernel)
        if on_kernel is False:
            continue
        hit = _error_hit(p, [e for e in kernel.get("errors") or [] if isinstance(e, str)])
        has_kernel_cond = bool((p.get("check") or {}).get("kernel"))
        confirmed = bool(on_kernel and has_kernel_cond) or hit is not None
        status = "matches" if on_stack and confirmed else "may apply"
        if hit:
            kwhy.append(f"a compile error shows {hit!r}")
        if status != "matches":
            kwhy.append("a stack, arch or kernel fact it needs is not recorded"
                        if on_stack is None or on_kernel is None
                        else "nothing recorded here confirms it (validate_dcu.py checks what it can)")
        out.append({"id": p["id"], "title": p["title"], "status": status, "why": why + kwhy,
                    "symptom": p["symptom"], "workaround": p["workaround"], "source": p["source"],
                    "machine_check": ((p.get("check") or {}).get("machine"))})
    return out


def _config(sections: dict) -> dict | None:
    from ..base.config import TritonConfig

    for cfg in ((sections.get("timing") or {}).get("standalone_config"),
                ((sections.get("autotune") or {}).get("winner") or {}).get("config"),
                (sections.get("autotune") or {}).get("winner")):
        if isinstance(cfg, dict) and cfg:
            try:
                return TritonConfig.from_record(cfg).record()
            except (TypeError, ValueError, AttributeError):
                continue
    return None


def kernel_view(sections: dict) -> dict:
    """The kernel facts the conditions read, from the report's evidence sections: the captured
    winner's ``num_warps`` and constexprs, and the kernel source when its file is here."""
    cfg = _config(sections)
    source = None
    for path in ((sections.get("autotune") or {}).get("standalone_file"),
                 (sections.get("meta") or {}).get("source")):
        if isinstance(path, str) and Path(path).is_file():
            try:
                source = Path(path).read_text(encoding="utf-8", errors="replace")
                break
            except OSError:
                continue
    rows = (sections.get("probe") or {}).get("rows") or []
    errors = [r.get("error") for r in rows if isinstance(r, dict) and isinstance(r.get("error"), str)]
    return {"num_warps": cfg.get("num_warps") if cfg else None,
            "constexprs": cfg.get("kwargs") if cfg else None, "source": source, "errors": errors}


def for_report(env: dict | None, sections: dict) -> dict | None:
    """The report's ``pitfalls`` section: the stack it was matched against and the entries found;
    None without an environment record."""
    from ..read import triton_stack

    if not isinstance(env, dict):
        return None
    recorded = env.get("triton_stack")
    if isinstance(recorded, dict):
        stack = {k: recorded.get(k) if isinstance(recorded.get(k), str) else None
                 for k in ("name", "triton_version")}
    else:  # a record older than the stack field: classified from its facts
        stack = triton_stack.classify(env.get("triton"), env.get("buffer_ops"))
    devices = env.get("devices") if isinstance(env.get("devices"), list) else []
    arch = devices[0].get("arch") if devices and isinstance(devices[0], dict) else None
    arch = arch if isinstance(arch, str) else None
    entries = load()
    return {"stack": stack.get("name"), "triton": stack.get("triton_version"), "arch": arch,
            "known": len(entries), "found": match(stack, arch, kernel_view(sections), entries)}


def error_matches(text: str, entries: list[dict] | None = None) -> list[str]:
    """Ids of the pitfalls whose ``check.error_text`` occurs in a compile error text."""
    found = []
    for p in load() if entries is None else entries:
        needles = ((p.get("check") or {}).get("error_text")) or []
        if any(n in text for n in needles):
            found.append(p["id"])
    return found


def describe(entry: dict) -> str:
    """One line for a human: id, status, why, workaround."""
    return (f"{entry['id']} ({entry['status']}: {'; '.join(entry['why']) or 'stack'}): {entry['symptom']} "
            f"-> {entry['workaround']}")
