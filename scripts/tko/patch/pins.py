"""Per-kernel config pins: make one Inductor kernel launch exactly one recorded config.

A pins file (``config_pins/1``) lists ``{kernel, source_sha256, config, source}``. When the
environment variable ``TKO_PINS`` names one, :func:`install_from_env` wraps
``CachingAutotuner.precompile`` so that a kernel whose name and Triton source match a pin compiles
and launches only the pinned config (no autotuning between configs, no coordinate descent, no
extra halved-RBLOCK launcher). A pin whose source hash differs from the kernel's is ignored with one
warning line on stderr: the config was chosen for other code.

The hash is over the ``@triton.jit`` function's source as ``JITFunction.src`` holds it (from
``def`` to the end of the body), with trailing whitespace removed (:func:`source_hash`), so the
hash of a captured standalone file (:func:`function_source`) and of the live kernel agree.

A pinned backend option (``waves_per_eu``, an HCU option) that the installed backend's options
dataclass lacks is left out of the compile with one warning line (:func:`backend_checked`).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import os
import sys
import threading
from pathlib import Path
from typing import Any

from ..base.config import CONFIG_FIELDS, TritonConfig
from ..base.errors import InputError
from ..base import inputs

SCHEMA = "config_pins/1"
ENV_VAR = "TKO_PINS"
# Launch options that are attributes of a triton.Config (pre_hook, a callable, is never pinned).
CONFIG_OPTIONS = tuple(k for k in CONFIG_FIELDS if k != "pre_hook")
PREFIX = "TKO_PINS"


def source_hash(src: str) -> str:
    lines = [line.rstrip() for line in src.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def function_source(path: str | os.PathLike, name: str) -> str:
    """The text of top-level function ``name`` in a file, from ``def`` to the end of its body."""
    p = Path(path)
    try:
        text = inputs.read_text(p, "a kernel .py file")
        tree = ast.parse(text, str(p))
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot read the kernel source ({type(exc).__name__}: {exc})") from None
    lines = text.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return "".join(lines[node.lineno - 1:node.end_lineno])
    raise InputError(f"{p}: defines no top-level function {name!r}")


def split_config(flat: dict) -> dict:
    """A flat sweep config ``{XBLOCK, num_warps, ...}`` as ``{kwargs: {...}, num_warps, ...}``: the
    arguments of the ``triton.Config`` call (AMD options stay in kwargs, as Inductor passes them)."""
    kwargs, keywords = TritonConfig.from_flat(flat).triton_args()
    return {"kwargs": kwargs, **keywords}


def _best_variant(sweep: dict) -> dict:
    best = sweep.get("best") or {}
    name = best.get("name")
    if not name or name == "baseline":
        raise InputError("the sweep found no variant better than the captured config: nothing to pin")
    variant = next((v for v in sweep.get("variants", []) if v.get("name") == name), None)
    if variant is None:
        raise InputError(f"the sweep's best variant {name!r} is not among its variants")
    if variant.get("kind") != "config" or variant.get("env") or variant.get("source_diff"):
        raise InputError(f"the sweep's best variant {name!r} is a {variant.get('kind')} change, "
                         "not a config: apply it as the sweep's best.apply says")
    return variant


def pins_from_sweep(sweep: dict, kernel_file: str | os.PathLike | None = None,
                    origin: str | None = None) -> dict:
    """The pins payload for a ``variant_sweep/1`` document's best config variant.

    ``kernel_file`` overrides the sweep's ``kernel_file`` (a sweep made on another machine names
    a path of that machine)."""
    variant = _best_variant(sweep)
    config = variant.get("config") or {}
    # a config is flat: meta-parameters and options are numbers or strings, never containers
    if not isinstance(config, dict) or any(isinstance(v, (dict, list)) for v in config.values()):
        raise InputError(f"the sweep's best variant {variant['name']!r} has a config that is not an object "
                         "of numbers and strings")
    kernel = sweep.get("kernel")
    path = Path(kernel_file or sweep.get("kernel_file") or "")
    if not kernel or not path.is_file():
        raise InputError(f"kernel file {str(path) or '?'} of the sweep is not here; "
                         "pass the captured standalone file (--kernel-file)")
    return {"pins": [{
        "kernel": kernel,
        "source_sha256": source_hash(function_source(path, kernel)),
        "config": split_config(config),
        "source": {"sweep": origin, "variant": variant["name"], "kernel_file": str(path),
                   "x_vs_baseline": variant.get("x_vs_baseline")},
    }]}


def write_pins(path: str | os.PathLike, tool: str, entries: list[dict]) -> Path:
    """Write a ``config_pins/1`` file of ``entries`` (the ``pins`` of :func:`pins_from_sweep`)."""
    from ..base.artifact import write_artifact

    write_artifact(path, SCHEMA, tool, {"pins": entries})
    return Path(path)


def load_pins(path: str | os.PathLike) -> dict[str, dict]:
    """``{kernel: pin}`` from a pins file."""
    from ..base.artifact import read_artifact

    doc = read_artifact(path, SCHEMA)
    pins = {}
    for i, pin in enumerate(doc.get("pins") or []):
        if not isinstance(pin, dict) or not pin.get("kernel") or not isinstance(pin.get("config"), dict):
            raise InputError(f"{path}: a pin needs 'kernel' and a 'config' object")
        # the config becomes a triton.Config at compile time: a malformed one is refused here
        if not isinstance(pin["config"].get("kwargs", {}), dict):
            raise InputError(f"{path}: field 'pins[{i}].config.kwargs' must be an object")
        pins[str(pin["kernel"])] = pin
    return pins


def kernel_name(obj: Any) -> str:
    name = (getattr(obj, "inductor_meta", None) or {}).get("kernel_name")
    return str(name or getattr(getattr(obj, "fn", None), "__name__", "") or "")


def _kernel_src(obj: Any) -> str | None:
    fn = getattr(obj, "fn", None)
    src = getattr(fn, "src", None)
    return src if isinstance(src, str) else None


def pinned_config(template: Any, config: dict) -> Any:
    """A copy of one of the kernel's own configs carrying the pinned values (any Config class)."""
    cfg = copy.copy(template)
    cfg.kwargs = dict(config.get("kwargs") or {})
    for key in CONFIG_OPTIONS:
        if key in config and hasattr(cfg, key):
            setattr(cfg, key, config[key])
    # coordinate descent skips a config marked as its result: the pin stays what it says
    cfg.found_by_coordesc = True
    return cfg


def backend_checked(config: dict, accepted: dict | None = None,
                    backend: str | None = None) -> tuple[dict, str | None]:
    """The pin's config without the backend options the compiling backend lacks (default: the
    installed one, ``tko.read.triton_stack``), and the line naming them."""
    from ..read import triton_stack

    if accepted is None and backend is None:
        try:
            import torch

            hip = bool(getattr(torch.version, "hip", None))
        except Exception:
            hip = True
        accepted, backend = triton_stack.installed_accepted(None, hip)
    kwargs, line = triton_stack.drop_unaccepted(dict(config.get("kwargs") or {}), accepted, backend)
    return dict(config, kwargs=kwargs), line


def same_config(a: Any, b: Any) -> bool:
    return TritonConfig.from_triton(a) == TritonConfig.from_triton(b)


def _warn(message: str) -> None:
    print(f"{PREFIX}: {message}", file=sys.stderr)


def _template_config(obj: Any) -> Any:
    if getattr(obj, "configs", None):
        return obj.configs[0]
    results = getattr(obj, "compile_results", None) or []
    return results[0].config if results and hasattr(results[0], "config") else None


def _live_function(obj: Any, reload_kernel: Any = None) -> bool:
    """Make ``obj.fn`` compilable in this process; False when it cannot be.

    A kernel compiled in Inductor's worker pool arrives here unpickled: its JITFunction lost the
    Python function and its hash lock (CachingAutotuner.prepare_for_pickle), so compiling the pinned
    config in the parent needs the kernel reloaded, as Inductor does for coordinate descent."""
    fn = getattr(obj, "fn", None)
    if fn is None or getattr(fn, "fn", True) is not None:
        if fn is not None and hasattr(fn, "_hash_lock") and fn._hash_lock is None:
            fn._hash_lock = threading.RLock()
        return fn is not None
    reload_kernel = reload_kernel or getattr(obj, "_reload_kernel", None)
    if not callable(reload_kernel):
        return False
    obj.fn = reload_kernel().fn
    return getattr(obj.fn, "fn", None) is not None


def apply_pin(obj: Any, pins: dict[str, dict], reload_kernel: Any = None) -> bool:
    """Narrow a CachingAutotuner (before precompile) to its pinned config; True when pinned."""
    done = getattr(obj, "_tko_pin", None)
    if done is not None:  # decided already (pinned config, or False: ignored)
        return done is not False
    pin = pins.get(kernel_name(obj))
    if pin is None:
        return False
    name, src = kernel_name(obj), _kernel_src(obj)
    have = source_hash(src) if src is not None else None
    if have != pin.get("source_sha256"):
        _warn(f"pin for {name} ignored: kernel source sha256 {str(have)[:12]} differs from the pin's "
              f"{str(pin.get('source_sha256'))[:12]} (the config was chosen for other code)")
        obj._tko_pin = False
        return False
    template = _template_config(obj)
    if template is None:
        _warn(f"pin for {name} ignored: the kernel has no config to start from")
        return False
    config, left_out = backend_checked(pin["config"])
    if left_out:
        _warn(f"pin for {name}: {left_out}")
    cfg = pinned_config(template, config)
    results = getattr(obj, "compile_results", None) or []
    kept = [r for r in results if same_config(getattr(r, "config", None), cfg)]
    if not kept and not _live_function(obj, reload_kernel):
        _warn(f"pin for {name} ignored: compiled in a worker without the pinned config, and this torch "
              "gives no way to reload the kernel to compile it here")
        obj._tko_pin = False
        return False
    if results:
        # compiled by a worker already: keep the matching binary, else compile the pin here
        obj.compile_results = kept[:1]
    if not kept:
        obj.configs = [cfg]
    else:
        kept[0].config.found_by_coordesc = True
    if isinstance(getattr(obj, "inductor_meta", None), dict):
        obj.inductor_meta["dynamic_scale_rblock"] = False  # no second, halved-RBLOCK launcher
    obj._tko_pin = cfg
    _warn(f"pinned {name} to {config}")
    return True


def _trim_launchers(obj: Any) -> None:
    cfg = getattr(obj, "_tko_pin", None)
    launchers = getattr(obj, "launchers", None) or []
    if cfg and len(launchers) > 1:
        same = [la for la in launchers if same_config(getattr(la, "config", None), cfg)]
        obj.launchers = same[:1] or launchers[:1]


def wrap_precompile(cls: Any, pins: dict[str, dict]) -> None:
    """Patch ``cls.precompile`` (once) to apply ``pins`` before compiling."""
    orig = cls.precompile
    if getattr(orig, "_tko_pins", False):
        return

    def precompile(self, *args, **kwargs):
        if not kwargs.get("warm_cache_only") and not (args and args[0]):
            try:
                apply_pin(self, pins, kwargs.get("reload_kernel") or (args[1] if len(args) > 1 else None))
            except Exception as exc:  # a pin must never break the program
                _warn(f"pin for {kernel_name(self)} not applied: {type(exc).__name__}: {exc}")
        result = orig(self, *args, **kwargs)
        _trim_launchers(self)
        return result

    precompile._tko_pins = True
    precompile.__wrapped__ = orig
    cls.precompile = precompile


def install_from_env(env: dict | None = None) -> int:
    """Install the pins named by ``$TKO_PINS``; returns how many pins were loaded (0: none)."""
    path = (os.environ if env is None else env).get(ENV_VAR)
    if not path:
        return 0
    return install(load_pins(path))


def install(pins: dict[str, dict]) -> int:
    """Apply ``pins`` (of :func:`load_pins`) to every Inductor kernel compiled from now on."""
    from torch._inductor.runtime import triton_heuristics as th

    wrap_precompile(th.CachingAutotuner, pins)
    return len(pins)
