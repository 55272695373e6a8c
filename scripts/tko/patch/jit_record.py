"""What the capture records of a plain ``@triton.jit`` launch (the slow half of ``jit_capture``).

:func:`snapshot` runs BEFORE the launch (a launch may write its own inputs): the kernel's
parameters split into the positional ones, those passed by keyword and the constexprs; the
compile options passed (``num_warps``, ``num_stages``, AMD's ``waves_per_eu``,
``matrix_instr_nonkdim``, ``kpack``, ...); the grid (a callable grid evaluated on the bound
arguments, as ``JITFunction.run`` does); index tensors saved. :func:`record_launch` runs after
it: the ``kernel`` event (first signature), the standalone file and the ``launch`` event.
"""

from __future__ import annotations

import hashlib
import inspect
import textwrap
from typing import Any

from ..base.config import TritonConfig
from . import capture, capture_records

KIND = "triton_jit"
_RUN_KEYWORDS = ("grid", "warmup")
# Triton's defaults when a launch passes none (triton/backends/nvidia/compiler.py CUDAOptions:
# num_warps=4, num_stages=3; triton/backends/amd/compiler.py HIPOptions: num_warps=4, num_stages=2).
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = {"cuda": 3, "hip": 2}


def param_info(obj: Any) -> tuple[list[str], set[str], dict]:
    """(parameter names, constexpr names, defaults) of a JIT kernel's Python function."""
    fn = getattr(obj, "fn", None)
    sig = inspect.signature(fn)
    names, constexprs, defaults = [], set(), {}
    for p in sig.parameters.values():
        names.append(p.name)
        ann = p.annotation
        text = ann if isinstance(ann, str) else getattr(ann, "__name__", repr(ann))
        if "constexpr" in str(text):
            constexprs.add(p.name)
        if p.default is not inspect.Parameter.empty:
            defaults[p.name] = p.default
    return names, constexprs, defaults


def def_location(obj: Any) -> tuple[str | None, int | None, str | None]:
    """(file, line of the ``def``, source from the ``def`` on, dedented) of a JIT kernel."""
    fn = getattr(obj, "fn", None)
    code = getattr(fn, "__code__", None)
    filename = getattr(code, "co_filename", None)
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return filename, getattr(code, "co_firstlineno", None), None
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("def ", "async def ")):
            return filename, start + i, textwrap.dedent("".join(lines[i:]))
    return filename, start, textwrap.dedent("".join(lines))


def source_hash(obj: Any) -> str | None:
    """sha256 (16 hex digits) of the kernel's source from its ``def`` on: decorators, launch
    arguments and the rest of the module do not change it; an edit of the kernel does."""
    src = def_location(obj)[2]
    return hashlib.sha256(src.encode("utf-8")).hexdigest()[:16] if src is not None else None


def jit_name(obj: Any) -> str:
    fn = getattr(obj, "fn", None)
    return str(getattr(fn, "__name__", None) or getattr(obj, "__name__", None) or "kernel")


def _default_stages() -> int:
    dev = capture.device_record() or {}
    return DEFAULT_NUM_STAGES.get(dev.get("backend") or "cuda", 3)


def _grid(grid: Any, bound: dict, name: str) -> list | None:
    try:
        return capture_records.launch_grid(grid, bound)
    except Exception as exc:
        capture.log_error(f"grid {name}", exc)
        return None


def split_params(info: dict, args: tuple, kwargs: dict) -> tuple[dict, list[str], list[str], dict]:
    """(bound values with defaults, positional names, keyword names, options) of one launch.

    Positional: the leading non-constexpr parameters passed by position (a standalone copy passes
    them so); keyword: every other non-constexpr parameter; constexprs go to the config."""
    names, constexprs = info["names"], info["constexprs"]
    bound = {n: v for n, v in info["defaults"].items()}
    bound.update(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k in names})
    options = {k: v for k, v in kwargs.items() if k not in names and k not in _RUN_KEYWORDS}
    positional = []
    for n, _a in zip(names, args):
        if n in constexprs:
            break
        positional.append(n)
    keyword = [n for n in names if n not in positional and n not in constexprs and n in bound]
    return bound, positional, keyword, options


def _plain(value: Any) -> Any:
    """A ``tl.constexpr(0)`` passed as a launch argument (Liger's casting modes) as its value."""
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        return value.value
    return value


def launch_flat(info: dict, bound: dict, options: dict) -> tuple[dict, list[str]]:
    """The launch as a flat config (constexprs, then the options passed, Triton's defaults for
    num_warps / num_stages when none was passed) and the names so defaulted."""
    flat = {n: capture_records._jsonable_scalar(_plain(bound[n])) for n in info["names"]
            if n in info["constexprs"] and n in bound}
    flat.update({k: capture_records._jsonable_scalar(v) for k, v in options.items()})
    defaulted = [k for k in ("num_warps", "num_stages") if flat.get(k) is None]
    if "num_warps" in defaulted:
        flat["num_warps"] = DEFAULT_NUM_WARPS
    if "num_stages" in defaulted:
        flat["num_stages"] = _default_stages()
    return flat, defaulted


def snapshot(obj: Any, st: capture.KernelState, args: tuple, kwargs: dict, site: dict | None,
             heuristics: list[str]) -> dict:
    """Everything recorded of a launch, taken before it runs."""
    from ..measure import standalone

    info = st.standalone
    bound, positional, keyword, options = split_params(info, args, kwargs)
    described = [capture_records.describe_arg(n, bound[n]) for n in positional + keyword]
    values = [bound[n] for n in positional + keyword]
    stem = capture.unique_stem(standalone.standalone_stem(st.name, len(st.signatures)),
                               f"{info.get('def_file')}:{info.get('def_line')}")
    saved = standalone.save_index_tensors(capture.settings().capture_dir, stem, described, tuple(values),
                                          capture.settings().max_save_bytes, capture.log_error)
    flat, defaulted = launch_flat(info, bound, options)
    num_bytes, source = capture_records.num_bytes_estimate(positional + keyword, tuple(values), None)
    return {"described": described, "npos": len(positional), "keyword": keyword, "flat": flat,
            "defaulted": defaulted, "options": {k: capture_records._jsonable_scalar(v) for k, v in options.items()},
            "grid": _grid(kwargs.get("grid"), bound, st.name),
            "grid_moves": capture_records.grid_moves(kwargs.get("grid"), bound, flat),
            "num_bytes": num_bytes, "bytes_source": source,
            "stem": stem, "saved": saved, "site": site, "heuristics": heuristics}


def site_text(site: dict | None) -> str | None:
    return f"{site['file']}:{site['line']}" if site else None


def record_launch(obj: Any, st: capture.KernelState, snap: dict) -> None:
    """The ``kernel`` event (first signature of the kernel), the standalone file, the ``launch`` event."""
    from ..measure import standalone

    info, flat = st.standalone, snap["flat"]
    winner = TritonConfig.from_flat(flat).mapped(capture_records._jsonable_scalar).record()
    common = {"kind": KIND, "source_file": info.get("def_file"), "source_line": info.get("def_line"),
              "source_hash": info.get("source_hash"), "launch_site": snap["site"],
              "heuristics": snap["heuristics"] or None}
    if not info.get("kernel_emitted"):
        info["kernel_emitted"] = True
        capture.emit("kernel", st.name, function=jit_name(obj), configs=[winner],
                     device=capture.device_record(), versions=capture_records.versions(), **common)
    described, npos = snap["described"], snap["npos"]
    path = None
    if capture.settings().standalone:
        extra_spec = {"kind": KIND, "launch_site": snap["site"], "source_hash": info.get("source_hash"),
                      "source_line": info.get("def_line"), "heuristics": snap["heuristics"] or None}
        path = standalone.write_user_standalone(
            capture.settings().capture_dir, snap["stem"], obj, st.name, described[:npos],
            {d["name"]: d for d in described[npos:]}, [capture_records.standalone_config(flat, snap["grid"], snap["grid_moves"])],
            snap["num_bytes"], snap["bytes_source"], capture.device_record(), extra_spec=extra_spec)
    capture.emit("launch", st.name, args=described, keyword_args=snap["keyword"] or None, grid=snap["grid"],
                 num_bytes=snap["num_bytes"], bytes_source=snap["bytes_source"], winner=winner,
                 options=snap["options"] or None, defaulted=snap["defaulted"] or None,
                 device=capture.device_record(), standalone_file=str(path) if path else None,
                 saved_bytes=snap["saved"] or None, **common)

