"""Standalone kernel files: ``<capture dir>/<kernel>.py`` = the kernel's module source + a runner.

The runner appended here is self-contained (it imports only torch, triton and the
standard library), so a captured kernel runs on a machine that has neither the
capture patch nor this bundle.  It rebuilds the recorded arguments (random
normal floats, saved contents for integer tensors, ``as_strided`` for strides
and storage offsets), launches the best config (``--all-configs``: every
recorded config), times each with ``triton.testing.do_bench`` (median) and
prints one line per config: :data:`RESULT_PREFIX` + JSON, then a human line.

Inductor kernels launch through the module's own ``CachingAutotuner`` (a fresh
copy of the module per config, reduced to that one config), which keeps
Inductor's launcher and grid rules; ``--launch jit`` (and hand-written kernels)
launch the ``@triton.jit`` function with the recorded grid instead.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

from ..base import atomic
from . import embed, standalone_runner

RESULT_PREFIX = standalone_runner.RESULT_PREFIX
RUNNER_VERSION = standalone_runner.RUNNER_VERSION
INPUTS_SUFFIX = ".inputs"
_INDEX_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
_MAIN_GUARD = re.compile(r"""^if\s+__name__\s*==\s*['"]__main__['"]\s*:""", re.M)
_FUTURE = re.compile(r"^from\s+__future__\s+import\s+.*$", re.M)


TIMER_CHOICES = standalone_runner.TIMER_CHOICES


def timer_arg(text: str) -> str:
    """argparse type of ``--timer``: one of TIMER_CHOICES or a comma list of them (passed on as is)."""
    import argparse

    names = [t.strip() for t in str(text).split(",") if t.strip()]
    bad = [t for t in names if t not in TIMER_CHOICES]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"unknown timer {', '.join(bad) or repr(text)}; choose from "
                                         f"{', '.join(TIMER_CHOICES)} (or a comma list)")
    return ",".join(names)


_SINGLE_TIMERS = TIMER_CHOICES[:4]


_VERSION_LINE = re.compile(r"^_TKO_RUNNER_VERSION = (\d+)\s*$", re.M)


def runner_version(runner_text: str) -> int:
    """The runner version a standalone file was stamped with (its ``_TKO_RUNNER_VERSION``).

    Files stamped before the marker existed are read by what their runner defines: 4 takes
    comma lists of timers, 3 one value of all six, 2 ``--timer`` do_bench / cudagraph / both,
    1 no ``--timer`` (do_bench only).
    """
    marked = _VERSION_LINE.search(runner_text)
    if marked:
        return int(marked.group(1))
    if "def _tko_timers" in runner_text:
        return 4
    if "_TKO_TIMER_CHOICES" in runner_text:
        return 3
    return 2 if '"--timer"' in runner_text else 1


def timer_for_runner(version: int, timer: str) -> tuple[str | None, list[str]]:
    """The ``--timer`` value a runner of ``version`` accepts for the timers asked for, and the
    timers it cannot give (files written by earlier versions are still run)."""
    wanted: list[str] = []
    for name in timer.split(","):
        for t in {"both": ("do_bench", "cudagraph"), "all": _SINGLE_TIMERS}.get(name, (name,)):
            if t not in wanted:
                wanted.append(t)
    if version >= 4:                                           # comma lists
        return timer, []
    if version == 3:                                           # one value of all six
        if len(wanted) == 1:
            return wanted[0], []
        return ("both" if set(wanted) <= {"do_bench", "cudagraph"} else "all"), []
    if version == 2:                                           # do_bench, cudagraph or both
        kept = [t for t in wanted if t in ("do_bench", "cudagraph")]
        dropped = [t for t in wanted if t not in kept]
        if not kept:
            return None, dropped
        return (kept[0] if len(kept) == 1 else "both"), dropped
    return None, [t for t in wanted if t != "do_bench"]        # do_bench only


def standalone_stem(kernel: str, sig_no: int = 1) -> str:
    """File stem of a kernel's standalone copy; later argument signatures get ``__s<N>``."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", kernel)[:150] or "kernel"
    return stem if sig_no <= 1 else f"{stem}__s{sig_no}"


def save_index_tensors(capture_dir: Path, stem: str, described: list[dict], args: tuple,
                       budget: int, log_error: Callable[..., None]) -> int:
    """Save integer/bool tensors (they drive indexing) as ``<stem>.inputs/arg<N>.pt``.

    Each saved file holds the whole flat storage so ``as_strided`` rebuilds the
    exact view.  ``budget`` bounds the bytes saved per kernel; a tensor over it
    is marked ``save_skipped`` and the runner fills it with zeros (always in range).
    Marks ``described[i]["saved"]`` in place; returns the bytes written.
    """
    used = 0
    capturing = _stream_capturing()
    for i, (desc, arg) in enumerate(zip(described, args)):
        if desc.get("kind") != "tensor" or desc.get("dtype") not in _INDEX_DTYPES:
            continue
        if capturing and str(desc.get("device", "")).startswith("cuda"):
            # a copy to the host is illegal while a CUDA graph is being recorded
            desc["save_skipped"] = "a CUDA graph was being captured at the first launch"
            continue
        try:
            import torch

            nbytes = arg.untyped_storage().nbytes()
            if used + nbytes > budget:
                desc["save_skipped"] = f"storage of {nbytes} bytes over the {budget}-byte budget"
                continue
            numel = nbytes // max(1, arg.element_size())
            flat = torch.empty(0, dtype=arg.dtype, device=arg.device).set_(
                arg.untyped_storage(), 0, (numel,), (1,))
            buf = io.BytesIO()
            torch.save(flat.detach().cpu().clone(), buf)
            rel = f"{stem}{INPUTS_SUFFIX}/arg{i}.pt"
            atomic.write_bytes(Path(capture_dir) / rel, buf.getvalue())
            desc["saved"] = rel
            used += nbytes
        except Exception as exc:  # recorded, never raised: capture must not break the program
            desc["save_skipped"] = f"{type(exc).__name__}: {exc}"
            log_error(f"save input {stem} arg{i}", exc)
    return used


def _stream_capturing() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())
    except Exception:
        return False


def runner_text(spec: dict) -> str:
    """The runner appended to a standalone file: a header with the version marker and the
    kernel's spec, a copy of ``bench.cpu_wall_bench``, and ``standalone_runner``'s stamped part."""
    runner_src = Path(standalone_runner.__file__).read_text(encoding="utf-8")
    start, stop = embed.between(runner_src, standalone_runner.STAMP_BEGIN, standalone_runner.STAMP_END)
    blob = json.dumps(spec, sort_keys=True, allow_nan=False, default=repr)
    header = "\n".join([
        "",
        "# " + "-" * 93,
        "# Standalone runner, stamped from tko/measure/standalone_runner.py. Needs only torch and triton:",
        "#   python THIS_FILE.py [--all-configs] [--warmup MS] [--rep MS] [--launch auto|inductor|jit] [--timer T]",
        "# One line per config: the prefix below + JSON (kernel, config, ms, bytes, gb_per_s), then a human line.",
        "if \"_tko_own_file\" in globals():  # the copy's own path again (its saved inputs lie beside it)",
        "    __file__ = _tko_own_file",
        f"_TKO_RUNNER_VERSION = {RUNNER_VERSION}",
        f"_TKO_RESULT_PREFIX = {RESULT_PREFIX!r}",
        f"_TKO_SPEC = __import__(\"json\").loads({blob!r})",
        f"_TKO_TIMER_CHOICES = {TIMER_CHOICES!r}",
        "", "", "",
    ])
    timer = embed.function_source(embed.BENCH, "cpu_wall_bench", "_tko_cpu_wall_bench")
    body = runner_src[start:stop].strip("\n")
    return (header + timer + "\n\n" + body + "\n\n\n"
            + 'if __name__ == "__main__":\n    raise SystemExit(_tko_main())\n')


_SPEC_LINE = re.compile(r"^_TKO_SPEC = .*$", re.M)


def replace_spec(text: str, spec: dict) -> str:
    """A standalone file's text with its ``_TKO_SPEC`` replaced (e.g. another config first)."""
    if len(_SPEC_LINE.findall(text)) != 1:
        raise ValueError("not a standalone file: expected exactly one _TKO_SPEC line")
    blob = json.dumps(spec, sort_keys=True, allow_nan=False, default=repr)
    line = f"_TKO_SPEC = __import__(\"json\").loads({blob!r})"
    return _SPEC_LINE.sub(lambda _m: line, text, count=1)


def _spec(kernel: str, function: str, launch: str, source_file: str | None, args: list[dict],
          extra_kwargs: dict, configs: list[dict], num_bytes: int | None, bytes_source: str | None,
          device: dict | None) -> dict:
    import sys

    versions = {m: getattr(sys.modules.get(m), "__version__", None) for m in ("torch", "triton")}
    return {"kernel": kernel, "function": function, "launch": launch, "source_file": source_file,
            "args": args, "extra_kwargs": extra_kwargs, "configs": configs, "num_bytes": num_bytes,
            "bytes_source": bytes_source, "device": device, "captured_with": versions}


def write_inductor_standalone(capture_dir: Path, stem: str, obj: Any, kernel: str, args: list[dict],
                              configs: list[dict], num_bytes: int | None, bytes_source: str | None,
                              device: dict | None) -> Path | None:
    filename = getattr(obj, "filename", None)
    if not filename or not os.path.isfile(filename):
        return None
    source = Path(filename).read_text(encoding="utf-8")
    function = getattr(getattr(obj, "fn", None), "__name__", None) or kernel
    spec = _spec(kernel, function, "inductor", filename, args, {}, configs, num_bytes, bytes_source, device)
    path = Path(capture_dir) / f"{stem}.py"
    atomic.write_text(path, source.rstrip("\n") + "\n" + runner_text(spec))
    return path


def package_of(module_dir: str) -> tuple[str | None, str]:
    """(the dotted package a folder is, the folder to import it from); (None, the folder itself)
    when it holds no ``__init__.py``."""
    parts, folder = [], Path(module_dir).resolve()
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.append(folder.name)
        folder = folder.parent
    return (".".join(reversed(parts)), str(folder)) if parts else (None, module_dir)


def user_module_source(source: str, module_dir: str, module_name: str | None = None) -> str:
    """A hand-written kernel's module made safe to run as a captured copy.

    Its own ``if __name__ == "__main__":`` entry point is disabled, and its folder
    goes on ``sys.path`` (after any ``from __future__`` line) so sibling imports resolve. A module
    of a package (its folder holds ``__init__.py``) gets the package's parent folder instead and its
    ``__package__``: its relative imports resolve, and a sibling named as a standard module (a
    package's ``types.py``) does not shadow it.
    """
    source = _MAIN_GUARD.sub('if False:  # the module\'s own entry point, disabled in the captured copy', source)
    # the module's body sees its own __file__ (paths relative to it resolve as in the original);
    # the runner appended after it gets the copy's back (runner_text's header)
    original = os.path.join(module_dir, module_name) if module_name else None
    package, root = package_of(module_dir)
    path_line = f"import sys as _tko_sys; _tko_sys.path.insert(0, {root!r})\n"
    if package:
        path_line += f"__package__ = {package!r}\n"
    if original:
        path_line += f"_tko_own_file, __file__ = __file__, {original!r}\n"
    futures = list(_FUTURE.finditer(source))
    cut = futures[-1].end() + 1 if futures else 0
    return source[:cut] + path_line + source[cut:]


def write_user_standalone(capture_dir: Path, stem: str, jit: Any, kernel: str, args: list[dict],
                          extra_kwargs: dict, configs: list[dict], num_bytes: int | None,
                          bytes_source: str | None, device: dict | None,
                          extra_spec: dict | None = None) -> Path | None:
    """A hand-written kernel's module with the runner appended; ``extra_spec`` adds fields to the
    spec (a plain JIT launch: ``kind``, ``launch_site``, ``source_hash``, ``source_line``)."""
    code = getattr(getattr(jit, "fn", None), "__code__", None)
    filename = getattr(code, "co_filename", None)
    if not filename or not os.path.isfile(filename):
        return None
    source = user_module_source(Path(filename).read_text(encoding="utf-8"),
                                os.path.dirname(os.path.abspath(filename)), os.path.basename(filename))
    function = getattr(jit, "__name__", None) or kernel
    spec = _spec(kernel, function, "jit", filename, args, extra_kwargs, configs, num_bytes, bytes_source, device)
    spec.update({k: v for k, v in (extra_spec or {}).items() if k not in spec})
    path = Path(capture_dir) / f"{stem}.py"
    atomic.write_text(path, source.rstrip("\n") + "\n" + runner_text(spec))
    return path
