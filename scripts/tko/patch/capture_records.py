"""What the capture writes of a kernel, as JSON: its configs, arguments (tensor dtype, shape, stride;
scalars), bytes, device, tool versions, and the triton_meta / inductor_meta it was compiled with.
Pure functions of the objects they are given; the capture (:mod:`tko.patch.capture`) calls them."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from ..base.config import TritonConfig, is_block_key


_KIND_BY_HEURISTIC = {
    "POINTWISE": "pointwise", "REDUCTION": "reduction", "PERSISTENT_REDUCTION": "persistent_reduction",
    "SPLIT_SCAN": "split_scan", "TEMPLATE": "template", "USER_AUTOTUNE": "user", "FIXED": "fixed",
    "FOREACH": "foreach", "COOPERATIVE_REDUCTION": "reduction",
}
# inductor_meta keys worth keeping (the rest is compile-time configuration noise).
_META_KEYS = ("kernel_name", "grid_type", "num_load", "num_store", "num_reduction", "kernel_num_gb",
              "mutated_arg_names", "atomic_add_found", "no_x_dim", "coordinate_descent_tuning",
              "max_autotune", "max_autotune_pointwise", "autotune_pointwise", "force_disable_caches",
              "tiling_scores", "RSPLIT_SIZE", "persistent_reduction", "spill_threshold",
              "store_cubin", "deterministic", "backend_hash")


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return _finite(obj)
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "item") and callable(obj.item):
        try:
            return obj.item()
        except Exception:
            pass
    return repr(obj)


# ---------------------------------------------------------------------------
# describing configs, arguments, devices


def config_flat(cfg: Any) -> dict:
    """A ``triton.Config`` as flat ``{meta..., num_warps, num_stages[, num_ctas, maxnreg, ...]}``
    (options at Triton's defaults left out; values as the config holds them)."""
    return TritonConfig.from_triton(cfg).flat()


def config_record(cfg: Any) -> dict:
    """The ``autotune_event/1`` config shape (AMD options and num_ctas/maxnreg go to extras)."""
    return TritonConfig.from_triton(cfg).mapped(_jsonable_scalar).record()


def _json_flat(cfg: Any) -> dict:
    """:func:`config_flat` with every value JSON-able."""
    return TritonConfig.from_triton(cfg).mapped(_jsonable_scalar).flat()


def launch_grid(grid: Any, meta: dict) -> list[int] | None:
    """A launch's grid as ints: a grid function evaluated on ``meta`` (the launch's arguments and
    constexprs by name), as ``JITFunction.run`` does. Raises what the grid function raises."""
    if grid is None:
        return None
    g = grid(dict(meta)) if callable(grid) else grid
    return [int(x) for x in (g if isinstance(g, (list, tuple)) else [g])]


def standalone_config(flat: dict, grid: list | None, moves: dict | None = None) -> dict:
    """A standalone spec's config: flat config, grid, and the program's grid per block move (the sweep's)."""
    return dict({"flat": flat, "grid": grid}, **({"grid_moves": moves} if moves else {}))


def grid_moves(grid: Any, meta: dict, flat: dict) -> dict | None:
    """``{"BLOCK_SIZE_M=64": [gx, ...], ...}``: the program's own grid for each move the sweep makes of
    a block constexpr (x2 and /2), when the launch computes its grid from its meta-parameters
    (``kernel[lambda META: ...]``). A block the function does not read (its grid the same at both
    moves) is left out: the function may take it from elsewhere, and the sweep's own rules decide.
    None for a fixed grid."""
    if not callable(grid):
        return None
    moves = {}
    try:
        base = launch_grid(grid, meta)
    except Exception:
        return None
    for key, value in flat.items():
        if not is_block_key(key, value):
            continue
        mine = {}
        for new in (value * 2, value // 2):
            if new < 1 or new == value:
                continue
            try:
                mine[f"{key}={new}"] = launch_grid(grid, dict(meta, **{key: new}))
            except Exception:  # a grid function that cannot take this value: the sweep's rules decide
                continue
        if any(g != base for g in mine.values()):
            moves.update(mine)
    return moves or None


def _jsonable_scalar(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def config_from_hashable(items: Any) -> dict | None:
    """``triton_config_to_hashable`` tuples back to the event config shape."""
    try:
        return TritonConfig.from_flat({str(k): v for k, v in items}).mapped(_jsonable_scalar).record()
    except Exception:
        return None


def describe_arg(name: str, arg: Any) -> dict:
    if arg is None:
        return {"name": name, "kind": "none"}
    if hasattr(arg, "shape") and hasattr(arg, "stride") and hasattr(arg, "dtype"):
        try:
            esize = arg.element_size()
            storage_numel = arg.untyped_storage().nbytes() // max(1, esize)
        except Exception:
            storage_numel = None
        return {"name": name, "kind": "tensor", "shape": list(arg.shape), "stride": list(arg.stride()),
                "dtype": str(arg.dtype).replace("torch.", ""), "storage_numel": storage_numel,
                "storage_offset": int(arg.storage_offset()), "device": str(arg.device)}
    if isinstance(arg, (bool, int, float)):
        return {"name": name, "kind": "scalar", "value": _finite(arg), "dtype": type(arg).__name__}
    if hasattr(arg, "item") and callable(arg.item):
        try:
            value = arg.item()
            return {"name": name, "kind": "scalar", "value": _finite(value), "dtype": type(value).__name__}
        except Exception:
            pass
    return {"name": name, "kind": "other", "repr": repr(arg)[:200]}


def tensor_bytes(arg: Any) -> int:
    try:
        return int(arg.numel()) * int(arg.element_size())
    except Exception:
        return 0


def num_bytes_estimate(names: list[str], args: tuple, inductor_meta: dict | None) -> tuple[int | None, str]:
    """Inductor's ``kernel_num_gb`` when present, else its ``get_num_bytes`` rule."""
    gb = (inductor_meta or {}).get("kernel_num_gb")
    if isinstance(gb, (int, float)) and gb > 0:
        return int(round(gb * 1e9)), "kernel_num_gb"
    total = 0
    for name, arg in zip(names, args):
        if hasattr(arg, "element_size"):
            total += tensor_bytes(arg) * (2 if str(name).startswith("in_out_ptr") else 1)
    return total, "get_num_bytes"


def gb_per_s(num_bytes: int | None, ms: Any) -> float | None:
    if not num_bytes or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
        return None
    return num_bytes / (ms * 1e-3) / 1e9


def versions() -> dict:
    out = {}
    for mod in ("torch", "triton"):
        m = sys.modules.get(mod)
        out[mod] = getattr(m, "__version__", None) if m else None
    return out


# ---------------------------------------------------------------------------
# triton_meta / inductor_meta to JSON


def _signature_names(triton_meta: dict) -> list[str]:
    sig = triton_meta.get("signature") or {}
    return list(sig.keys()) if isinstance(sig, dict) else []


def _hints(triton_meta: dict) -> dict:
    """Per argument name: the attribute pairs of ``triton_meta["configs"]`` (all three encodings)."""
    names = _signature_names(triton_meta)
    out: dict[str, list] = {}
    for entry in triton_meta.get("configs") or []:
        if isinstance(entry, dict):
            for key, attrs in entry.items():
                idx = key[0] if isinstance(key, tuple) and key else key
                name = names[idx] if isinstance(idx, int) and idx < len(names) else str(idx)
                out.setdefault(name, []).extend([list(a) if isinstance(a, (list, tuple)) else a
                                                 for a in (attrs or [])])
            continue
        props = getattr(entry, "arg_properties", None)  # AttrsDescriptor, triton 3.1-3.2
        if isinstance(props, dict):
            for attr, idxs in props.items():
                for idx in idxs:
                    name = names[idx] if isinstance(idx, int) and idx < len(names) else str(idx)
                    out.setdefault(name, []).append([attr, 16 if "divisib" in attr else 1])
            continue
        div = getattr(entry, "divisible_by_16", None)  # instance_descriptor, triton 3.0
        for idx in div or ():
            name = names[idx] if isinstance(idx, int) and idx < len(names) else str(idx)
            out.setdefault(name, []).append(["tt.divisibility", 16])
    return out


def triton_meta_record(triton_meta: dict) -> dict:
    sig = triton_meta.get("signature") or {}
    if not isinstance(sig, dict):
        sig = {}
    device = triton_meta.get("device")
    return _clean({
        "signature": {str(k): str(v) for k, v in sig.items()},
        "constants": {str(k): _jsonable_scalar(v) for k, v in (triton_meta.get("constants") or {}).items()},
        "hints": _hints(triton_meta),
        "device": device if isinstance(device, (int, str)) else getattr(device, "index", None),
        "device_type": triton_meta.get("device_type") or getattr(device, "type", None),
    })


def inductor_meta_record(obj: Any) -> dict:
    meta = getattr(obj, "inductor_meta", None) or {}
    out = {}
    for key in _META_KEYS:
        if key in meta:
            value = meta[key]
            try:
                json.dumps(value)
            except TypeError:
                value = _json_default(value) if not isinstance(value, dict) else repr(value)
            out[key] = value
    mutated = getattr(obj, "mutated_arg_names", None)
    if mutated is not None:
        out["mutated_arg_names"] = list(mutated)
    return out


def size_hints_record(size_hints: Any, kind: str = "") -> dict | None:
    """Size hints as a dict; list-era hints (torch <= 2.5) are keyed x / y / z, or x, r for reductions."""
    if size_hints is None:
        return None
    if isinstance(size_hints, dict):
        return {str(k): v for k, v in size_hints.items()}
    hints = list(size_hints)
    if "reduction" in kind and len(hints) == 2:
        names = ["x", "r"]
    else:
        names = ["z", "y", "x"][-len(hints):] if len(hints) <= 3 else [f"d{i}" for i in range(len(hints))]
    return dict(zip(names, hints))


def kernel_kind(obj: Any) -> str:
    htype = getattr(obj, "heuristic_type", None)
    name = getattr(htype, "name", None) or str(htype or "")
    kind = _KIND_BY_HEURISTIC.get(name.upper())
    if kind:
        return kind
    if getattr(obj, "custom_kernel", False):
        return "user"
    return "unknown"


def inductor_kernel_name(obj: Any) -> str:
    meta = getattr(obj, "inductor_meta", None) or {}
    name = meta.get("kernel_name")
    if name:
        return str(name)
    fn = getattr(obj, "fn", None)
    return str(getattr(fn, "__name__", None) or type(obj).__name__)


def inductor_configs(obj: Any) -> list:
    """Configs of a CachingAutotuner at any stage (``configs`` is None after precompile)."""
    if getattr(obj, "configs", None):
        return list(obj.configs)
    launchers = getattr(obj, "launchers", None) or []
    if launchers:
        return [launcher.config for launcher in launchers]
    results = getattr(obj, "compile_results", None) or []
    return [r.config for r in results if hasattr(r, "config")]


def _from_cache(obj: Any) -> bool | None:
    info = getattr(obj, "autotune_cache_info", None)
    if isinstance(info, dict) and info.get("autotune_cache_state"):
        return info["autotune_cache_state"] == "hit"
    return None


_STATISTIC_BY_BENCHMARKER = {"InductorBenchmarker": "min", "TritonBenchmarker": "median",
                             "TorchProfilerBenchmarker": "mean"}


def inductor_statistic() -> tuple[str, str]:
    """(statistic, benchmarker) of ``CachingAutotuner.bench`` in this process.

    torch >= 2.5 has one module-level ``benchmarker``: InductorBenchmarker (default from 2.7:
    minimum), TritonBenchmarker (do_bench median) or TorchProfilerBenchmarker (mean); 2.4 calls
    ``do_bench_gpu`` (median).
    """
    try:
        from torch._inductor.runtime import benchmarking

        name = type(benchmarking.benchmarker).__name__
        return _STATISTIC_BY_BENCHMARKER.get(name, "unknown"), name
    except Exception:
        return "median", "do_bench"


