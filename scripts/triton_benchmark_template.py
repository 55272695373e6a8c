#!/usr/bin/env python3
"""Editable standalone Triton benchmark for controlled kernel experiments.

Copy this file, edit the sections marked "EDIT HERE" (kernel, reference, inputs, launch, variants,
sweep grid), and run it. For every size and dtype it:

  1. checks every variant against a float64 reference on fresh random inputs (never zeros), with
     the outputs poisoned first so an element the kernel never writes fails; NaN never passes;
     tolerance by dtype (relative norm error plus an element-wise bound);
  2. times the variants that passed with triton.testing.do_bench (median, p20, p80), cycling through
     several input sets whose total size exceeds twice the L2 cache, and re-checks the timed outputs;
  3. reports bytes moved (Inductor's rule: every tensor argument once, in/out twice), GB/s and % of
     the device's copy bandwidth (tko.measure.peaks: the measurement stored by measure_peak_bandwidth.py,
     else references/device_peaks.yaml; or --peak-gbps), and ranks the variants that passed;
     variants within the run-to-run noise of the best are flagged as ties. A variant that fails its
     check is reported as failed and never ranked.

AMDGCN_USE_BUFFER_OPS: when set to 1 (or true/yes/on) it is removed from the environment before
Triton is imported, and the run says so: on the validated torch 2.9.0 / triton 3.3.0 / gfx938
stack, hand-written Triton autotune kernels failed LLVM lowering with it forced to 1. Pass
--keep-buffer-ops to keep it (a deliberate buffer-op experiment). Note that Triton >= 3.6 turns
buffer ops on by default when the variable is unset; the run reports the effective setting.

Without a GPU the kernels run in the Triton interpreter (TRITON_INTERPRET=1 is set when no GPU is
visible and the variable is not set): correctness is checked, timing is reported as unavailable,
and the exit code is 0. --cpu-timer times the interpreted kernels with the host clock instead, to
exercise the timing and ranking path on a CPU; those numbers say nothing about a GPU.

Shared core: the checks, timing, byte count, ranking, peak lookup and JSON writing come from the
bundle's tko package (scripts/tko), found next to this file, in --tko-path, or in $TKO_SCRIPTS. A
copy of this file on its own falls back to the small inline core at the end of the file (the same
checks and do_bench timing; no peak lookup, so pass --peak-gbps for "% of peak") and says so.

The kernel can be compiled offline for an AMD target, without a GPU, to read its loads and
stores: probe_compile.py triton_benchmark_template.py --arch gfx942 --kernel fused_silu_mul_kernel
--config 'BLOCK_SIZE=1024,HINTS=1,EVEN=0,num_warps=4' --signature
'x_ptr=*bf16,y_ptr=*bf16,out_ptr=*bf16,n_elements=i32' --json-out probe.json

Exit code: 0 when every size/dtype case has at least one variant that passed its check; 1 when
some case has none (or a failure outside the variants); 2 for bad arguments.

Examples:
  python triton_benchmark_template.py
  python triton_benchmark_template.py --sweep --dtype bf16 --size 16777216 --json-out bench.json
  python triton_benchmark_template.py --only 'hints|baseline' --markdown-out bench.md
  TRITON_INTERPRET=1 python triton_benchmark_template.py --size 4113 --dtype fp32
"""

# --------------------------------------------------------------------------- environment first
# Everything here runs before triton is imported: the buffer-op switch and the interpreter
# switch are read when Triton is imported or when a kernel is decorated.
import os
import sys

BUFFER_OPS_ENV = "AMDGCN_USE_BUFFER_OPS"
_TRUTHY = ("1", "true", "yes", "on", "y")
_QUIET = any(a in ("-h", "--help") for a in sys.argv[1:])


def _prepare_environment(argv: list, as_script: bool) -> dict:
    """Clear the buffer-op switch and pick the interpreter when there is no GPU (script runs only:
    importing this file, e.g. to compile its kernel offline, changes nothing)."""
    keep = "--keep-buffer-ops" in argv
    before = os.environ.get(BUFFER_OPS_ENV)
    if not as_script:
        return {"env_before": before, "action": "unset" if before is None else "kept",
                "message": None, "keep_requested": keep, "auto_interpret": False}
    if before is not None and before.strip().lower() in _TRUTHY and not keep:
        del os.environ[BUFFER_OPS_ENV]
        action = "cleared"
        message = (f"{BUFFER_OPS_ENV}={before} cleared before importing triton (raw Triton autotune "
                   f"kernels failed that lowering on torch 2.9.0 / triton 3.3.0 / gfx938); pass "
                   f"--keep-buffer-ops to keep it")
    elif before is None:
        action, message = "unset", None
    else:
        action = "kept"
        message = f"{BUFFER_OPS_ENV}={before} kept" + (" (--keep-buffer-ops)" if keep else "")
    auto_interpret = False
    if "TRITON_INTERPRET" not in os.environ:       # an explicit value is the user's choice
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
            auto_interpret = True
    state = {"env_before": before, "action": action, "message": message,
             "keep_requested": keep, "auto_interpret": auto_interpret}
    if not _QUIET:
        if message:
            print(f"[bench] {message}", file=sys.stderr)
        if auto_interpret:
            print("[bench] no GPU visible: running the kernels in the Triton interpreter "
                  "(TRITON_INTERPRET=1) to check correctness; timing is unavailable", file=sys.stderr)
    return state


ENV_STATE = _prepare_environment(sys.argv[1:], as_script=__name__ == "__main__")

import argparse  # noqa: E402
import json  # noqa: E402
# math: imported by the inline core at the end of this file
import re  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Callable, Optional  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

TOOL = "triton_benchmark_template.py"
SCHEMA = "benchmark/1"


# =========================================================================== EDIT HERE: kernel
# The example: a fused SiLU-gate product, out = silu(x) * y, as in a SwiGLU MLP. Pointwise and
# memory-bound: 2 reads and 1 write per element, so GB/s against the copy bandwidth is the measure.
KERNEL_NAME = "fused_silu_mul"


@triton.jit
def fused_silu_mul_kernel(x_ptr, y_ptr, out_ptr, n_elements,
                          BLOCK_SIZE: tl.constexpr, HINTS: tl.constexpr, EVEN: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if HINTS:
        # Facts the compiler cannot prove alone: non-negative offsets (what AMD buffer ops need)
        # and contiguous, block-aligned runs (wide vector loads).
        tl.assume(pid >= 0)
        tl.assume(n_elements > 0)
        offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK_SIZE), BLOCK_SIZE)
    if EVEN:
        # No mask: only valid when n_elements is a multiple of BLOCK_SIZE (see `requires`).
        x = tl.load(x_ptr + offsets).to(tl.float32)
        y = tl.load(y_ptr + offsets).to(tl.float32)
        tl.store(out_ptr + offsets, (x * tl.sigmoid(x) * y).to(out_ptr.dtype.element_ty))
    else:
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
        y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
        tl.store(out_ptr + offsets, (x * tl.sigmoid(x) * y).to(out_ptr.dtype.element_ty), mask=mask)


# =========================================================================== EDIT HERE: inputs
def make_inputs(size: int, dtype: torch.dtype, generator: torch.Generator) -> dict:
    """Kernel inputs (tensors and scalars) by argument name, on ``generator.device``.

    Random data, never zeros: zeros hide unwritten outputs and wrong indexing.
    """
    device = generator.device
    x = torch.randn(size, generator=generator, dtype=torch.float32, device=device) * 2.0
    y = torch.randn(size, generator=generator, dtype=torch.float32, device=device)
    return {"x_ptr": x.to(dtype), "y_ptr": y.to(dtype), "n_elements": size}


def make_outputs(inputs: dict) -> dict:
    """Output tensors by argument name (their contents are overwritten with poison)."""
    return {"out_ptr": torch.empty_like(inputs["x_ptr"])}


# =========================================================================== EDIT HERE: reference
def reference(inputs: dict) -> dict:
    """Expected outputs by output name, computed in float64."""
    x = inputs["x_ptr"].double()
    y = inputs["y_ptr"].double()
    return {"out_ptr": x * torch.sigmoid(x) * y}


# Tolerance dtype per output when it differs from the output's own dtype, e.g. {"out_ptr": "tf32"}
# for a float32 result of a tl.dot with Triton's default (tf32) input precision.
TOLERANCE_DTYPE: dict = {}

# Argument order of the kernel; names starting with "in_out_ptr" count twice in the byte rule.
ARG_ORDER = ("x_ptr", "y_ptr", "out_ptr", "n_elements")


# =========================================================================== EDIT HERE: launch
def launch(variant: "Variant", inputs: dict, outputs: dict) -> None:
    n_elements = inputs["n_elements"]

    def grid(meta):
        return (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)

    args = {**inputs, **outputs}
    fused_silu_mul_kernel[grid](*(args[name] for name in ARG_ORDER), **variant.meta,
                                num_warps=variant.num_warps, num_stages=variant.num_stages,
                                **variant.extras)


# =========================================================================== EDIT HERE: variants
@dataclass
class Variant:
    name: str
    meta: dict                          # constexpr arguments of the kernel
    num_warps: int = 4
    num_stages: int = 1
    extras: dict = field(default_factory=dict)   # backend options, e.g. {"waves_per_eu": 2} (AMD)
    backends: Optional[tuple] = None    # run only on these: "cuda", "hip" (None: everywhere)
    requires: Optional[Callable[[dict], bool]] = None   # inputs -> applicable?
    requires_text: str = ""

    def config(self) -> dict:
        return {"meta": dict(self.meta), "num_warps": self.num_warps,
                "num_stages": self.num_stages, "extras": dict(self.extras)}


def _even(block: int):
    return lambda inputs: inputs["n_elements"] % block == 0


VARIANTS = [
    # The first variant is the baseline every speedup is quoted against.
    Variant("baseline", {"BLOCK_SIZE": 1024, "HINTS": False, "EVEN": False}, num_warps=4),
    Variant("hints", {"BLOCK_SIZE": 1024, "HINTS": True, "EVEN": False}, num_warps=4),
    Variant("even_unmasked", {"BLOCK_SIZE": 1024, "HINTS": True, "EVEN": True}, num_warps=4,
            requires=_even(1024), requires_text="n_elements % 1024 == 0"),
    Variant("block4096_w8", {"BLOCK_SIZE": 4096, "HINTS": False, "EVEN": False}, num_warps=8),
    Variant("block512_w2", {"BLOCK_SIZE": 512, "HINTS": False, "EVEN": False}, num_warps=2),
    Variant("waves_per_eu2", {"BLOCK_SIZE": 1024, "HINTS": False, "EVEN": False}, num_warps=4,
            extras={"waves_per_eu": 2}, backends=("hip",)),
]

# --sweep: the cross product of these (EVEN variants need n_elements % BLOCK_SIZE == 0).
SWEEP_GRID = {
    "BLOCK_SIZE": [256, 512, 1024, 2048, 4096],
    "num_warps": [2, 4, 8],
    "num_stages": [1, 2],
    "HINTS": [False, True],
    "waves_per_eu": [None, 2],          # AMD only; None = not set
}

DEFAULT_DTYPES = ("bfloat16",)
DEFAULT_SIZES_GPU = (1 << 20, 1 << 24, (1 << 24) + 17)
DEFAULT_SIZES_INTERPRETER = (4096, 4113)


def sweep_variants() -> list:
    import itertools

    keys = list(SWEEP_GRID)
    out = []
    for values in itertools.product(*(SWEEP_GRID[k] for k in keys)):
        cfg = dict(zip(keys, values))
        block, wpe = cfg["BLOCK_SIZE"], cfg["waves_per_eu"]
        name = (f"sweep_b{block}_w{cfg['num_warps']}_s{cfg['num_stages']}"
                f"{'_hints' if cfg['HINTS'] else ''}{f'_wpe{wpe}' if wpe else ''}")
        out.append(Variant(name, {"BLOCK_SIZE": block, "HINTS": cfg["HINTS"], "EVEN": False},
                           num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                           extras={"waves_per_eu": wpe} if wpe else {},
                           backends=("hip",) if wpe else None))
    return out


# =========================================================================== machinery
# Nothing below needs editing for a new kernel.

def _put_tko_on_path(tko_path: Optional[str]) -> None:
    """--tko-path, $TKO_SCRIPTS or this file's folder, where one holds the tko package."""
    for cand in (tko_path, os.environ.get("TKO_SCRIPTS"), os.path.dirname(os.path.abspath(__file__))):
        if cand and os.path.isdir(os.path.join(cand, "tko")) and cand not in sys.path:
            sys.path.insert(0, cand)


def load_core(tko_path: Optional[str], no_tko: bool) -> tuple:
    """The tko core when importable, else the inline fallback; plus a record of which."""
    if no_tko:
        return InlineCore(), {"source": "inline", "path": None,
                              "note": "--no-tko: the inline fallback core is used"}
    _put_tko_on_path(tko_path)
    try:
        from tko.base import artifact
        from tko.measure import bench, peaks
    except ImportError as exc:
        return InlineCore(), {"source": "inline", "path": None,
                              "note": f"tko not importable ({exc}): using the inline fallback core "
                                      f"(no peak lookup; pass --tko-path <skill>/scripts or "
                                      f"--peak-gbps)"}
    import tko

    return TkoCore(bench, peaks, artifact), {"source": "tko", "path": os.path.dirname(
        os.path.dirname(os.path.abspath(tko.__file__))), "note": None}


class TkoCore:
    def __init__(self, bench, peaks, artifact):
        self.bench, self.peaks, self.artifact = bench, peaks, artifact
        self.poison_ = bench.poison_
        self.bytes_of = bench.bytes_of
        self.rank_variants = bench.rank_variants
        self.rotation_count = bench.rotation_count
        self.device_l2_bytes = bench.device_l2_bytes

    def check(self, out, ref, dtype):
        return self.bench.check_outputs(out, ref, dtype).to_dict()

    def time(self, fn, warmup_ms, rep_ms, rotate, bench=None):
        timing = self.bench.time_fn(fn, warmup_ms, rep_ms, rotate=rotate, bench=bench).to_dict()
        if bench is not None:
            timing["timer"] = "cpu wall clock (--cpu-timer)"
        return timing

    def lookup_peak(self, name, arch, store):
        peak = self.peaks.lookup(name, arch, store=store)
        return peak, self.peaks.describe(peak)

    def write_json(self, path, payload):
        self.artifact.write_artifact(path, SCHEMA, TOOL, payload)

    def refused_options(self, extras, device):
        """The line naming the backend options of ``extras`` that the installed backend's options
        dataclass lacks (tko.read.triton_stack); None when it has them all."""
        from tko.read import triton_stack

        accepted, backend = triton_stack.installed_accepted(device.get("arch"), device["backend"] == "hip")
        return triton_stack.drop_unaccepted(dict(extras), accepted, backend)[1]


def device_info(interpret: bool) -> dict:
    if interpret:
        return {"backend": "interpreter", "device": "cpu", "name": None, "arch": None,
                "index": None, "l2_bytes": None}
    idx = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(idx)
    gcn = getattr(props, "gcnArchName", None)
    if torch.version.hip or (gcn and str(gcn).startswith("gfx")):
        backend, arch = "hip", str(gcn).split(":")[0] if gcn else None
    else:
        backend, arch = "cuda", f"sm_{props.major}{props.minor}"
    return {"backend": backend, "device": "cuda", "name": props.name, "arch": arch,
            "arch_full": str(gcn) if gcn else arch, "index": idx,
            "l2_bytes": getattr(props, "L2_cache_size", None),
            "compute_units": getattr(props, "multi_processor_count", None)}


def buffer_ops_state(backend: str) -> dict:
    state = {k: ENV_STATE[k] for k in ("env_before", "action", "keep_requested", "message")}
    state["env_now"] = os.environ.get(BUFFER_OPS_ENV)
    effective, source = None, None
    try:
        from triton import knobs

        for group in ("amd", "hcu"):  # hcu: Hygon FlagTree builds
            inst = getattr(knobs, group, None)
            if inst is not None and hasattr(inst, "use_buffer_ops"):
                effective, source = bool(inst.use_buffer_ops), f"triton.knobs.{group}.use_buffer_ops"
                break
    except Exception:
        pass
    if source is None:
        # Triton <= 3.3 has no knobs: buffer ops only when the variable is exactly "1".
        effective, source = state["env_now"] == "1", "environment (triton < 3.4 rule)"
    state["effective"] = effective
    state["effective_source"] = source
    state["applies"] = backend == "hip"
    if effective and state["action"] == "cleared":
        state["note"] = (f"this Triton turns buffer ops on when {BUFFER_OPS_ENV} is unset; set "
                         f"{BUFFER_OPS_ENV}=0 to turn them off")
    return state


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__)[:400]


def select_variants(args, parser) -> list:
    variants = sweep_variants() if args.sweep else list(VARIANTS)
    if args.sweep and not args.no_baseline:
        variants = [VARIANTS[0]] + variants
    if args.only:
        try:
            pattern = re.compile(args.only)
        except re.error as exc:
            parser.error(f"--only {args.only!r}: not a regular expression ({exc})")
        variants = [v for v in variants if pattern.search(v.name)]
    if not variants:
        parser.error(f"no variant matches --only {args.only!r}")
    return variants


def run_case(core, variants, size, dtype, device, args, seeds, timing_seeds, peak) -> dict:
    """One size x dtype: every variant checked, timed and ranked (see the _case_* steps)."""
    dname = str(dtype).replace("torch.", "")

    def generator(stream=seeds):
        return torch.Generator(device=device["device"]).manual_seed(next(stream))

    probe_inputs = make_inputs(size, dtype, generator())
    probe_outputs = make_outputs(probe_inputs)
    named = {**probe_inputs, **probe_outputs}
    num_bytes = core.bytes_of([named[n] for n in ARG_ORDER], names=list(ARG_ORDER))
    set_bytes = sum(v.numel() * v.element_size() for v in named.values() if isinstance(v, torch.Tensor))
    timing_ok = device["backend"] != "interpreter" or args.cpu_timer
    case = {"size": size, "dtype": dname, "bytes": num_bytes, "set_bytes": set_bytes,
            "rotate_sets": None, "results": [], "noise_rel": None, "baseline": variants[0].name}

    def check_once(variant):
        inputs = make_inputs(size, dtype, generator())
        outputs = make_outputs(inputs)
        for t in outputs.values():
            core.poison_(t)
        launch(variant, inputs, outputs)
        sync()
        refs = reference(inputs)
        names = list(outputs)
        return core_check(core, [outputs[n] for n in names], [refs[n] for n in names],
                          [_tol_dtype(n, outputs[n]) for n in names])

    rotate = None
    if timing_ok:
        def timing_set():
            inputs = make_inputs(size, dtype, generator(timing_seeds))
            return inputs, make_outputs(inputs)

        rotate = _case_rotation(core, device, set_bytes, args, timing_set, case)

    for variant in variants:
        res = _case_result(variant)
        case["results"].append(res)
        reason = _case_skip_reason(variant, device, probe_inputs, size, core)
        if reason is not None:
            res["status"], res["reason"] = "skipped", reason
            continue
        if _case_checks(res, check_once, variant, args.checks) and timing_ok:
            _case_timing(core, res, variant, rotate, args, num_bytes, peak)
    _case_noise(core, case, variants, rotate, args)
    _case_ranking(core, case, variants)
    return case


def _tol_dtype(name, tensor):
    return TOLERANCE_DTYPE.get(name, tensor.dtype)


def _case_rotation(core, device, set_bytes, args, timing_set, case) -> list:
    """The input/output sets timing rotates through (enough to defeat L2), noted in ``case``."""
    l2 = device.get("l2_bytes")
    free = None
    if device["backend"] != "interpreter":
        try:
            free = torch.cuda.mem_get_info()[0]
        except Exception:
            pass
    n_sets = args.rotate_sets or core.rotation_count(
        set_bytes, l2, factor=args.rotate_factor, max_sets=args.max_rotate_sets,
        budget_bytes=int(free * 0.5) if free else None)
    rotate = [timing_set() for _ in range(n_sets)]
    case["rotate_sets"] = n_sets
    case["l2_bytes"] = l2
    return rotate


def _case_result(variant) -> dict:
    """A variant's result record before it is run."""
    return {"name": variant.name, "config": variant.config(), "status": None, "reason": None,
            "checks": [], "post_timing_check": None, "timing": None, "median_ms": None,
            "p20_ms": None, "p80_ms": None, "gb_per_s": None, "pct_of_peak": None,
            "rank": None, "x_best": None, "x_vs_baseline": None, "ties_best": None}


def _case_skip_reason(variant, device, probe_inputs, size, core=None) -> str | None:
    """Why the variant does not run on this backend or at this size (None when it runs)."""
    if variant.backends and device["backend"] not in variant.backends:
        return f"runs only on {'/'.join(variant.backends)}; this run: {device['backend']}"
    if variant.extras and core is not None and device["backend"] in ("hip", "cuda"):
        refused = core.refused_options(variant.extras, device)
        if refused:
            return refused
    if variant.requires is not None and not variant.requires(probe_inputs):
        return f"needs {variant.requires_text or 'a condition'}; not met at size {size}"
    return None


def _case_checks(res, check_once, variant, checks) -> bool:
    """Up to ``checks`` correctness checks (stopping at the first failure); sets the status.
    True when the variant passed them all."""
    try:
        for _ in range(checks):
            chk = check_once(variant)
            res["checks"].append(chk)
            if not chk["passed"]:
                break
    except Exception as exc:  # a compile or launch failure is this variant's result
        res["status"], res["reason"] = "error", _short(exc)
        return False
    failed = next((c for c in res["checks"] if not c["passed"]), None)
    if failed:
        res["status"], res["reason"] = "failed", failed["reason"]
        return False
    res["status"] = "passed"
    return True


def _case_timing(core, res, variant, rotate, args, num_bytes, peak) -> None:
    """Time a checked variant, check it again after timing, and fill its times and bandwidth."""
    try:
        res["timing"], post = time_variant(core, variant, rotate, args, _tol_dtype)
    except Exception as exc:
        res["status"], res["reason"] = "error", "timing: " + _short(exc)
        return
    res["post_timing_check"] = post
    if not post["passed"]:
        res["status"], res["reason"] = "failed", "after timing: " + post["reason"]
        return
    res["median_ms"] = res["timing"]["median_ms"]
    res["p20_ms"] = res["timing"]["p20_ms"]
    res["p80_ms"] = res["timing"]["p80_ms"]
    res["gb_per_s"] = num_bytes / (res["median_ms"] * 1e-3) / 1e9
    if peak:
        res["pct_of_peak"] = 100.0 * res["gb_per_s"] / peak["peak_gbps"]


def _case_noise(core, case, variants, rotate, args) -> None:
    """Run-to-run noise: the first timed variant timed again, after all the others."""
    first = next((r for r in case["results"] if r["median_ms"] is not None), None)
    if first is None:
        return
    variant = next(v for v in variants if v.name == first["name"])
    try:
        again, _ = time_variant(core, variant, rotate, args, _tol_dtype)
        case["retime_ms"] = {"variant": first["name"], "first": first["median_ms"],
                             "again": again["median_ms"]}
        case["noise_rel"] = abs(again["median_ms"] - first["median_ms"]) / min(
            again["median_ms"], first["median_ms"])
    except Exception as exc:
        case["retime_ms"] = {"variant": first["name"], "error": _short(exc)}


def _case_ranking(core, case, variants) -> None:
    """Rank the variants that ran (ties within the noise) and fill rank / x_best / speedup."""
    ranking = core.rank_variants(
        [{"name": r["name"], "passed": r["status"] == "passed", "reason": r["reason"],
          "median_ms": r["median_ms"], "p20_ms": r["p20_ms"], "p80_ms": r["p80_ms"]}
         for r in case["results"] if r["status"] != "skipped"], noise_rel=case["noise_rel"] or 0.0)
    case["ranking"] = ranking
    by_name = {r["name"]: r for r in case["results"]}
    base = by_name.get(variants[0].name)
    for entry in ranking["ranked"]:
        r = by_name[entry["name"]]
        r["rank"], r["x_best"], r["ties_best"] = entry["rank"], entry["x_best"], entry["ties_best"]
        if base and base["median_ms"]:
            r["x_vs_baseline"] = base["median_ms"] / r["median_ms"]


def core_check(core, outs, refs, dtypes) -> dict:
    results = [core.check(o, r, d) for o, r, d in zip(outs, refs, dtypes)]
    bad = next((r for r in results if not r["passed"]), None)
    if len(results) == 1:
        return results[0]
    merged = dict(bad or results[0])
    merged["rel_err"] = max((r["rel_err"] for r in results if r["rel_err"] is not None), default=None)
    merged["outputs"] = results
    return merged


def sync() -> None:
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        torch.cuda.synchronize()


def host_clock_bench(fn, warmup, rep, quantiles):
    """--cpu-timer: do_bench's contract on the host clock (tko.measure.bench.cpu_wall_bench)."""
    return cpu_wall_bench(fn, warmup, rep, quantiles, min_calls=5, max_calls=1000)


def time_variant(core, variant, rotate, args, tol_dtype):
    for _, outputs in rotate:
        for t in outputs.values():
            core.poison_(t)
    timing = core.time(lambda inputs, outputs: launch(variant, inputs, outputs),
                       args.warmup_ms, args.rep_ms, rotate,
                       bench=host_clock_bench if args.cpu_timer else None)
    sync()
    # Re-check what the timed runs wrote: a moving error under repetition is a race.
    used = min(timing["calls"], len(rotate))
    checks = []
    for i in sorted({0, used - 1}):
        inputs, outputs = rotate[i]
        refs = reference(inputs)
        names = list(outputs)
        checks.append(core_check(core, [outputs[n] for n in names], [refs[n] for n in names],
                                 [tol_dtype(n, outputs[n]) for n in names]))
    post = next((c for c in checks if not c["passed"]), checks[0])
    return timing, post


def _fmt(value, spec, none="-"):
    if value is None:
        return none
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return format(value, spec)


def markdown_report(doc: dict) -> str:
    dev = doc["device"]
    lines = [f"# Benchmark: {doc['kernel']}", ""]
    lines.append(f"- device: {dev.get('name') or dev['backend']} ({dev.get('arch') or '-'}, "
                 f"backend {dev['backend']})")
    lines.append(f"- timing: {'triton.testing.do_bench median (p20-p80)' if doc['timing']['available'] else 'unavailable: ' + doc['timing']['reason']}")
    lines.append(f"- peak: {doc['peak_description']}")
    lines.append(f"- {BUFFER_OPS_ENV}: {doc['buffer_ops']['action']} (before: "
                 f"{doc['buffer_ops']['env_before']}; effective buffer ops: "
                 f"{doc['buffer_ops']['effective']})")
    lines.append(f"- core: {doc['core']['source']}")
    for case in doc["cases"]:
        lines += ["", f"## size {case['size']}, {case['dtype']}: {case['bytes']} bytes per launch"
                  + (f", {case['rotate_sets']} rotating input sets" if case.get("rotate_sets") else ""),
                  ""]
        if case.get("noise_rel") is not None:
            lines += [f"Run-to-run noise (first timed variant timed twice): "
                      f"{100 * case['noise_rel']:.1f}%", ""]
        lines.append("| rank | variant | status | ms (p20-p80) | GB/s | % peak | vs baseline | rel err | note |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        ordered = sorted(case["results"], key=lambda r: (r["rank"] is None, r["rank"] or 0))
        for r in ordered:
            rel = r["checks"][-1]["rel_err"] if r["checks"] else None
            ms = (f"{r['median_ms']:.4f} ({r['p20_ms']:.4f}-{r['p80_ms']:.4f})"
                  if r["median_ms"] is not None else "-")
            note = r["reason"] or ("tie with best (within noise)" if r["ties_best"] else "")
            lines.append(
                f"| {r['rank'] or '-'} | {r['name']} | {r['status']} | {ms} | "
                f"{_fmt(r['gb_per_s'], '.1f')} | {_fmt(r['pct_of_peak'], '.1f')} | "
                f"{_fmt(r['x_vs_baseline'], '.3f')} | {_fmt(rel, '.2e')} | "
                f"{note.replace('|', '/')} |")
    lines += ["", "Failed, skipped and errored variants are never ranked."]
    return "\n".join(lines) + "\n"


def parse_dtype(text: str) -> torch.dtype:
    names = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32",
             "float": "float32", "fp64": "float64"}
    name = names.get(text.lower(), text.lower())
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise argparse.ArgumentTypeError(f"unknown dtype {text!r}")
    return dtype


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    intro, examples = __doc__.split("Examples:", 1)

    class Parser(argparse.ArgumentParser):
        def error(self, message):  # one line, exit 2, a near flag named (the file travels alone)
            import difflib

            flags = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
            words = [w.split("=")[0] for w in message.split() if w.startswith("--") and w not in flags]
            near = [f for w in words[:1] for f in flags if f.startswith(w)] or \
                [m for w in words[:1] for m in difflib.get_close_matches(w, flags, n=1)]
            hint = f" (did you mean {near[0]}?)" if near else ""
            self.exit(2, f"{self.prog}: error: {message}{hint}\n")

    p = Parser(prog=TOOL, description=intro.strip(), epilog="examples:" + examples,
               formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--size", type=positive_int, action="append", default=None,
                   help="problem size (repeatable); default: "
                        f"{', '.join(map(str, DEFAULT_SIZES_GPU))} on a GPU, "
                        f"{', '.join(map(str, DEFAULT_SIZES_INTERPRETER))} in the interpreter")
    p.add_argument("--dtype", type=parse_dtype, action="append", default=None,
                   help=f"dtype (repeatable; bf16, fp16, fp32); default {', '.join(DEFAULT_DTYPES)}")
    p.add_argument("--sweep", action="store_true",
                   help="time the SWEEP_GRID cross product (plus the baseline) instead of VARIANTS")
    p.add_argument("--no-baseline", action="store_true", help="with --sweep: leave the baseline out")
    p.add_argument("--only", metavar="REGEX", help="keep the variants whose name matches")
    p.add_argument("--list", action="store_true", help="list the variants and exit")
    p.add_argument("--checks", type=positive_int, default=2,
                   help="correctness checks per variant, each on fresh random inputs (default 2)")
    p.add_argument("--seed", type=int, default=0, help="seed of all random inputs (default 0)")
    p.add_argument("--warmup-ms", type=float, default=25.0, help="do_bench warm-up, ms (default 25)")
    p.add_argument("--rep-ms", type=float, default=100.0, help="do_bench repetition, ms (default 100)")
    p.add_argument("--rotate-factor", type=float, default=2.0,
                   help="rotating input sets total at least this many times L2 (default 2)")
    p.add_argument("--max-rotate-sets", type=positive_int, default=64,
                   help="at most this many rotating input sets (default 64)")
    p.add_argument("--rotate-sets", type=positive_int, default=None,
                   help="cycle exactly this many input sets (default: from the L2 size)")
    p.add_argument("--cpu-timer", action="store_true",
                   help="in the interpreter, time with the host clock anyway: runs the whole "
                        "timing and ranking path on a CPU; the numbers say nothing about a GPU")
    p.add_argument("--peak-gbps", type=float, default=None,
                   help="peak bandwidth for %% of peak (overrides the lookup)")
    p.add_argument("--peak-store", metavar="FILE", default=None,
                   help="measurement store to read (default: $TKO_PEAKS_FILE or ~/.cache/...)")
    p.add_argument("--json-out", metavar="FILE", help="write the benchmark/1 JSON here")
    p.add_argument("--markdown-out", metavar="FILE", help="write the Markdown table here")
    p.add_argument("--keep-buffer-ops", action="store_true",
                   help=f"keep {BUFFER_OPS_ENV}=1 (read before triton is imported)")
    p.add_argument("--tko-path", metavar="DIR",
                   help="folder holding the tko package (the bundle's scripts/)")
    p.add_argument("--no-tko", action="store_true", help="use the inline fallback core")
    p.add_argument("--row-kernels", action="store_true",
                   help="as the first flag: sweep the bundled row kernels against Inductor "
                        "instead (the flags after it go to rowkernel_sweep.py; needs tko)")
    return p


def run_row_kernels(argv: list) -> int:
    """``--row-kernels [FLAGS]``: the bundled row kernels against Inductor over row lengths
    (scripts/rowkernel_sweep.py, which needs the tko package), instead of this file's kernel."""
    import runpy

    _put_tko_on_path(None)
    try:
        from tko.base import resources
    except ImportError:
        print("triton_benchmark_template.py: error: --row-kernels needs the tko package (run it from the "
              "skill's scripts/, or set TKO_SCRIPTS=<skill>/scripts)", file=sys.stderr)
        return 2
    front = resources.scripts_dir() / "rowkernel_sweep.py"
    sys.argv = [str(front), *argv]
    try:
        runpy.run_path(str(front), run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def _timing_reason(interpret: bool, cpu_timer: bool) -> Optional[str]:
    if not interpret or cpu_timer:
        return None
    return ("kernels run in the Triton interpreter (TRITON_INTERPRET=1"
            + (", set because no GPU is visible" if ENV_STATE["auto_interpret"] else "")
            + "): correctness only, no device to time on")


def _peak(core, args, device, interpret: bool) -> tuple:
    """(peak record or None, one line saying where the peak came from)."""
    if args.peak_gbps:
        return ({"peak_gbps": args.peak_gbps, "basis": "given", "source": "--peak-gbps", "kind": "given"},
                f"peak {args.peak_gbps:.1f} GB/s given by --peak-gbps")
    if interpret:
        return None, "no device: no peak"
    if core.peaks is None:
        return None, "no peak lookup without tko: pass --peak-gbps"
    return core.lookup_peak(device["name"], device["arch"], args.peak_store)


def _run_cases(core, variants, device, args, peak, sizes, dtypes) -> list:
    # Check inputs and timing inputs draw from separate seed streams, so the checks see the same
    # data whether or not the run times anything.
    base = args.seed * 1_000_003
    counter = iter(range(base, base + 10**9))
    timing_counter = iter(range(base + 10**9, base + 2 * 10**9))
    return [run_case(core, variants, size, dtype, device, args, counter, timing_counter, peak)
            for dtype in dtypes for size in sizes]


def _document(core_info, device, args, timing_reason, peak, peak_text, sizes, dtypes, variants,
              cases) -> dict:
    counts: dict = {}
    for case in cases:
        for r in case["results"]:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
    unranked = [f"{c['size']}/{c['dtype']}" for c in cases
                if not any(r["status"] == "passed" for r in c["results"])]
    warnings = ["no variant passed its check for: " + ", ".join(unranked)] if unranked else []
    bops = buffer_ops_state(device["backend"])
    if bops.get("note") and bops["applies"]:
        warnings.append(bops["note"])
    return {
        "kernel": KERNEL_NAME,
        "template": os.path.abspath(__file__),
        "core": core_info,
        "device": device,
        "buffer_ops": bops,
        "timing": {"available": timing_reason is None, "reason": timing_reason,
                   "timer": (None if timing_reason else "cpu wall clock (--cpu-timer)"
                             if args.cpu_timer else "triton.testing.do_bench"),
                   "statistic": "median", "quantiles": ["p20", "p80"],
                   "warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms,
                   "rotate_factor": args.rotate_factor},
        "peak": peak,
        "peak_description": peak_text,
        "settings": {"sizes": sizes, "dtypes": [str(d).replace("torch.", "") for d in dtypes],
                     "checks": args.checks, "seed": args.seed, "sweep": args.sweep,
                     "only": args.only, "variants": [v.name for v in variants]},
        "cases": cases,
        "summary": {"cases": len(cases), "status_counts": counts,
                    "best": {f"{c['size']}/{c['dtype']}": c["ranking"]["best"] for c in cases}},
        "warnings": warnings,
        "unranked": unranked,
    }


def _parse(argv: list):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.row_kernels:
        parser.error("--row-kernels must come first (the flags after it are rowkernel_sweep.py's)")
    if args.warmup_ms <= 0 or args.rep_ms <= 0 or args.rotate_factor <= 0:
        parser.error("--warmup-ms, --rep-ms and --rotate-factor must be positive")
    if args.tko_path and not os.path.isdir(os.path.join(args.tko_path, "tko")):
        parser.error(f"--tko-path {args.tko_path}: no tko package in that folder")
    return args, select_variants(args, parser)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--row-kernels"]:
        return run_row_kernels(argv[1:])
    args, variants = _parse(argv)
    if args.list:
        for v in variants:
            print(f"{v.name}: {json.dumps(v.config())}"
                  + (f" backends={list(v.backends)}" if v.backends else "")
                  + (f" requires {v.requires_text}" if v.requires_text else ""))
        return 0
    core, core_info = load_core(args.tko_path, args.no_tko)
    if core_info["note"]:
        print(f"[bench] {core_info['note']}", file=sys.stderr)
    interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    device = device_info(interpret)
    timing_reason = _timing_reason(interpret, args.cpu_timer)
    peak, peak_text = _peak(core, args, device, interpret)
    sizes = args.size or list(DEFAULT_SIZES_INTERPRETER if interpret else DEFAULT_SIZES_GPU)
    dtypes = args.dtype or [getattr(torch, d) for d in DEFAULT_DTYPES]
    cases = _run_cases(core, variants, device, args, peak, sizes, dtypes)
    doc = _document(core_info, device, args, timing_reason, peak, peak_text, sizes, dtypes, variants, cases)
    unranked = doc.pop("unranked")
    if args.json_out:
        core.write_json(args.json_out, doc)
    md = markdown_report(doc)
    if args.markdown_out:
        _write_text(args.markdown_out, md)
    if timing_reason:
        print(f"[bench] timing unavailable: {timing_reason}", file=sys.stderr)
    for w in doc["warnings"]:
        print(f"[bench] warning: {w}", file=sys.stderr)
    print(md, end="")
    return 1 if unranked else 0


def _write_text(path: str, text: str) -> None:
    # Temp file + rename: a reader never sees half a report.
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".bench.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# =========================================================================== inline fallback core
# Used only when this file runs without the tko package: the same rules as tko.measure.bench, from the
# copy of scripts/tko/measure/bench.py generated below; no peak store; its own JSON writer.


class InlineCore(TkoCore):
    def __init__(self):
        names = ("poison_", "bytes_of", "rank_variants", "rotation_count", "device_l2_bytes",
                 "check_outputs", "time_fn")
        super().__init__(SimpleNamespace(**{n: globals()[n] for n in names}), None, None)

    def refused_options(self, extras, device):
        return None     # without tko the backend's options are not read: Triton itself refuses

    def write_json(self, path, payload):
        import platform
        from datetime import datetime, timezone

        def clean(obj):
            if isinstance(obj, float) and not math.isfinite(obj):
                return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
            if isinstance(obj, dict):
                return {str(k): clean(v) for k, v in obj.items()}
            if isinstance(obj, (list, tuple)):
                return [clean(v) for v in obj]
            return obj

        doc = {"schema": SCHEMA, "tool": TOOL,
               "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "versions": {"python": platform.python_version(), "platform": sys.platform,
                            "torch": torch.__version__, "triton": triton.__version__, "tko": None}}
        doc.update(payload)
        _write_text(path, json.dumps(clean(doc), indent=2, default=str) + "\n")


# ==== inline core: generated from scripts/tko/measure/bench.py by `python -m tko.measure.embed --write`; do not edit ====

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

class ToolFailure(Exception):  # tko.base.errors.ToolFailure, where the package is absent
    exit_code = 1

# --------------------------------------------------------------------------- tolerances


@dataclass(frozen=True)
class Tolerance:
    """Pass bounds for one output dtype.

    ``rel_norm`` bounds ``||out - ref|| / ||ref||``. Element-wise, every element must satisfy
    ``|out - ref| <= rtol * |ref| + atol * rms(ref)``: ``atol`` is relative to the root mean square
    of the reference so that the bound does not depend on the scale of the data.
    """

    rel_norm: float
    rtol: float
    atol: float
    label: str


# Relative norm errors that correct kernels land well under: float32 arithmetic far under 1e-5;
# tf32 / a float32 tl.dot (Triton's default input precision) near 3e-4; fp16 storage about 3e-4;
# bf16 storage about 2e-3.
_TOLERANCES = {
    "float64": Tolerance(1e-12, 1e-9, 1e-12, "float64"),
    "float32": Tolerance(1e-5, 1e-4, 1e-5, "float32"),
    "tf32": Tolerance(1e-3, 1e-2, 1e-3, "tf32 / float32 dot"),
    "float16": Tolerance(1e-3, 1e-2, 1e-3, "float16"),
    "bfloat16": Tolerance(1e-2, 5e-2, 1e-2, "bfloat16"),
    "float8": Tolerance(1e-1, 2.5e-1, 1e-1, "float8"),
}


def quantum_near_zero(dtype: Any) -> float:
    """The spacing of a float dtype's subnormals (``smallest_normal * eps``; float16: 2^-24 =
    5.96e-8), 0 for anything else. Two results rounded to the dtype from nearly equal values can
    differ by one such step however small the values; under it a relative bound means nothing."""
    import torch

    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        return 0.0
    info = torch.finfo(dtype)
    return float(info.smallest_normal * info.eps)


def dtype_name(dtype: Any) -> str:
    """'torch.bfloat16' / torch.bfloat16 / 'bf16' -> 'bfloat16'."""
    text = str(dtype).replace("torch.", "").lower()
    aliases = {"fp64": "float64", "double": "float64", "fp32": "float32", "float": "float32",
               "fp16": "float16", "half": "float16", "bf16": "bfloat16",
               "fp32_dot": "tf32", "ieee": "float32"}
    return aliases.get(text, text)


def tolerance_for(dtype: Any) -> Tolerance:
    """Tolerance for an output dtype; ``"tf32"`` for float32 outputs of a tf32 / default dot.

    Integer and bool outputs must match exactly.
    """
    name = dtype_name(dtype)
    if name.startswith("float8"):
        return _TOLERANCES["float8"]
    if name in _TOLERANCES:
        return _TOLERANCES[name]
    if name.startswith(("int", "uint", "bool")):
        return Tolerance(0.0, 0.0, 0.0, f"{name} (exact)")
    raise ValueError(f"no tolerance known for dtype {dtype!r}")


# --------------------------------------------------------------------------- poison

# Quiet NaNs with a payload no arithmetic produces (hardware and libm return the canonical NaN),
# stored through an integer view of the same width. Integer outputs get a sentinel value.
_POISON_BITS = {
    8: 0x7FF8DBADDBADDBAD,   # float64
    4: 0x7FC0DBAD,           # float32
    2: None,                 # per dtype below
    1: 0x7F,                 # float8 e4m3fn NaN (no room for a payload)
}
_POISON_BITS_16 = {"float16": 0x7E5B, "bfloat16": 0x7FDB}
_INT_SENTINEL = {1: -0x5B, 2: -0x5BAD, 4: -0x5BADDBAD, 8: -0x5BADDBADDBADDBAD}


def _int_view_dtype(size: int):
    import torch

    return {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]


def _poison_pattern(tensor) -> tuple[Any, int]:
    """(integer dtype of the view, bit pattern written) for a tensor's dtype."""
    size = tensor.element_size()
    if tensor.dtype.is_floating_point:
        name = dtype_name(tensor.dtype)
        if size == 2:
            bits = _POISON_BITS_16.get(name)
        elif size == 1 and name.endswith("fnuz"):
            bits = 0x80                       # the only NaN of the fnuz float8 formats
        else:
            bits = _POISON_BITS[size]
        if bits is None:
            raise ValueError(f"cannot poison dtype {tensor.dtype}")
        if bits >= 1 << (8 * size - 1):       # keep the value in the signed range of the view
            bits -= 1 << (8 * size)
        return _int_view_dtype(size), bits
    if tensor.dtype.is_complex:
        raise ValueError(f"cannot poison dtype {tensor.dtype}")
    if str(tensor.dtype) == "torch.bool":
        return None, 1
    if str(tensor.dtype).startswith("torch.uint"):
        return tensor.dtype, (1 << (8 * size - 1)) - 0x25
    return tensor.dtype, _INT_SENTINEL[size]


def poison_(tensor):
    """Fill ``tensor`` in place with the poison pattern of its dtype and return it.

    Floating outputs get a NaN with a private payload, so :func:`check_outputs` can count the
    elements a kernel did not write separately from NaNs it computed.
    """
    view_dtype, bits = _poison_pattern(tensor)
    if view_dtype is None:             # bool: nothing distinguishable; True is the odd value out
        tensor.fill_(True)
    elif tensor.dtype.is_floating_point:
        tensor.view(view_dtype).fill_(bits)
    else:
        tensor.fill_(bits)
    return tensor


def poisoned_mask(tensor):
    """Bool tensor: True where ``tensor`` still holds the poison pattern."""
    view_dtype, bits = _poison_pattern(tensor)
    if view_dtype is None:
        return tensor == True  # noqa: E712 - elementwise
    if tensor.dtype.is_floating_point:
        return tensor.view(view_dtype) == bits
    return tensor == bits


# --------------------------------------------------------------------------- check


@dataclass
class CheckResult:
    passed: bool
    reason: str
    rel_err: float | None
    max_abs: float | None
    nan_count: int
    unwritten_count: int
    mismatch_count: int       # elements outside the element-wise bound (NaN and unwritten included)
    numel: int
    dtype: str
    tolerance: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _check_one(out, ref, tol: Tolerance, name: str, slack: float = 0.0) -> CheckResult:
    import torch

    dname = dtype_name(out.dtype)
    base = dict(numel=out.numel(), dtype=dname, tolerance=asdict(tol) | ({"abs_slack": slack} if slack else {}))
    if tuple(out.shape) != tuple(ref.shape):
        return CheckResult(False, f"{name}shape {tuple(out.shape)} != reference {tuple(ref.shape)}",
                           None, None, 0, 0, out.numel(), **base)
    ref64 = ref.detach().to(device=out.device, dtype=torch.float64)
    if torch.isnan(ref64).any():
        return CheckResult(False, f"{name}reference contains NaN: fix the reference or the inputs",
                           None, None, 0, 0, 0, **base)
    unwritten = poisoned_mask(out)
    if not out.dtype.is_floating_point:
        # An integer sentinel is also a valid value: where the reference holds it, a written
        # element cannot be told apart, so only elements that should differ from it count.
        unwritten &= ref64 != float(_poison_pattern(out)[1])
    unwritten_count = int(unwritten.sum())
    out64 = out.detach().to(torch.float64)
    nan = torch.isnan(out64) & ~unwritten
    nan_count = int(nan.sum())
    bad = unwritten | nan
    diff = (out64 - ref64).abs()
    finite = ~bad
    max_abs = float(diff[finite].max()) if bool(finite.any()) else None
    ref_norm = float(torch.linalg.vector_norm(ref64))
    diff_norm = float(torch.linalg.vector_norm(torch.where(bad, torch.zeros_like(diff), diff)))
    if bad.any():
        rel_err = math.inf
    elif ref_norm == 0.0:
        rel_err = 0.0 if diff_norm == 0.0 else math.inf
    else:
        rel_err = diff_norm / ref_norm
    rms = ref_norm / math.sqrt(max(1, ref64.numel()))
    bound = tol.rtol * ref64.abs() + tol.atol * rms + slack
    outside = (diff > bound) | bad
    mismatch_count = int(outside.sum())
    # the slack, spread over every element, is what the norm test allows on top
    rel_norm = tol.rel_norm + (slack * math.sqrt(max(1, ref64.numel())) / ref_norm if slack and ref_norm else 0.0)
    if unwritten_count:
        reason = f"{name}{unwritten_count} of {out.numel()} elements never written (still poisoned)"
    elif nan_count:
        reason = f"{name}{nan_count} NaN in the output (NaN never passes)"
    elif not rel_err <= rel_norm:
        reason = f"{name}relative error {rel_err:.3g} > {rel_norm:g} ({tol.label})"
    elif mismatch_count:
        reason = (f"{name}{mismatch_count} elements outside |out-ref| <= {tol.rtol:g}*|ref| + "
                  f"{tol.atol:g}*rms(ref)" + (f" + {slack:.3g}" if slack else "") +
                  f" (max abs error {max_abs:.3g})")
    else:
        return CheckResult(True, "ok", rel_err, max_abs, 0, 0, 0, **base)
    return CheckResult(False, reason, rel_err, max_abs, nan_count, unwritten_count,
                       mismatch_count, **base)


def check_outputs(out, ref, dtype: Any = None, tolerance: Tolerance | None = None,
                  abs_slack: float | Sequence[float] = 0.0) -> CheckResult:
    """Check a kernel output (or a sequence of outputs) against a reference.

    ``dtype`` picks the tolerance (default: the output's dtype; pass ``"tf32"`` for a float32
    output of a float32 ``tl.dot``). The reference may have any floating dtype; it is compared
    in float64. Outputs should have been filled with :func:`poison_` before the run.
    ``abs_slack`` (one per output for a sequence) widens every element's bound by that much: the
    run-to-run difference of a reference that is not deterministic (float atomics), see
    :func:`self_difference`.
    """
    if isinstance(out, (list, tuple)):
        if not isinstance(ref, (list, tuple)) or len(ref) != len(out):
            return CheckResult(False, "outputs and references differ in number", None, None,
                               0, 0, 0, 0, "mixed")
        slacks = list(abs_slack) if isinstance(abs_slack, (list, tuple)) else [abs_slack] * len(out)
        results = [check_outputs(o, r, dtype, tolerance, sl) for o, r, sl in zip(out, ref, slacks)]
        for i, res in enumerate(results):
            if not res.passed:
                res.reason = f"output {i}: {res.reason}"
        worst = next((r for r in results if not r.passed), None)
        rels = [r.rel_err for r in results if r.rel_err is not None]
        maxes = [r.max_abs for r in results if r.max_abs is not None]
        return CheckResult(
            passed=worst is None,
            reason="ok" if worst is None else worst.reason,
            rel_err=max(rels) if rels else None,
            max_abs=max(maxes) if maxes else None,
            nan_count=sum(r.nan_count for r in results),
            unwritten_count=sum(r.unwritten_count for r in results),
            mismatch_count=sum(r.mismatch_count for r in results),
            numel=sum(r.numel for r in results),
            dtype=",".join(r.dtype for r in results),
            tolerance=(worst or results[0]).tolerance if results else {},
        )
    tol = tolerance or tolerance_for(dtype if dtype is not None else out.dtype)
    return _check_one(out, ref, tol, "", float(abs_slack or 0.0))


# A second ordering of float atomics differs from the reference about as much as a re-run of the
# reference does; the margin covers orderings the few re-runs did not show.
NONDETERMINISM_MARGIN = 4.0


def self_difference(runs: Sequence[Any], ref: Any) -> dict:
    """How far re-runs of the reference kernel land from its first output (float atomics are
    not deterministic). Returns ``max_abs`` (over the runs), ``runs`` and ``slack`` (the
    element-wise widening :func:`check_outputs` should apply: ``max_abs`` x the margin)."""
    import torch

    worst = 0.0
    for out in runs:
        if out.dtype.is_floating_point:
            d = (out.detach().to(torch.float64) - ref.detach().to(device=out.device, dtype=torch.float64)).abs()
            d = d[~torch.isnan(d)]
            if d.numel():
                worst = max(worst, float(d.max()))
        elif not torch.equal(out, ref):
            worst = math.inf            # an integer output that changes between runs: no slack fixes that
    slack = worst * NONDETERMINISM_MARGIN if math.isfinite(worst) else 0.0
    return {"runs": len(runs), "max_abs": worst if math.isfinite(worst) else None, "slack": slack,
            "integer_changed": not math.isfinite(worst)}


# --------------------------------------------------------------------------- bytes


def bytes_of(args: Sequence[Any] | Mapping[str, Any], names: Sequence[str] | None = None,
             num_in_out_args: int | None = None) -> int:
    """Bytes one launch moves by Inductor's rule: every tensor argument once, in/out twice.

    ``args`` is a sequence (with ``names`` or ``num_in_out_args``) or a name -> value mapping.
    An argument is in/out when its name starts with ``in_out_ptr`` (Inductor's naming) or it is
    among the first ``num_in_out_args``. Uses Inductor's own ``get_num_bytes`` when importable.
    """
    if isinstance(args, Mapping):
        names = list(args.keys())
        values = list(args.values())
    else:
        values = list(args)
    if names is not None:
        if len(names) != len(values):
            raise ValueError(f"{len(names)} names for {len(values)} arguments")
        in_out = [str(n).startswith("in_out_ptr") for n in names]
    else:
        in_out = [i < (num_in_out_args or 0) for i in range(len(values))]
    # get_num_bytes wants the in/out arguments first; the sum does not depend on the order.
    ordered = [v for v, io in zip(values, in_out) if io] + [v for v, io in zip(values, in_out) if not io]
    n_io = sum(in_out)
    try:
        from torch._inductor.runtime.runtime_utils import get_num_bytes
    except Exception:  # torch without Inductor, or an older layout
        get_num_bytes = None
    if get_num_bytes is not None:
        return int(get_num_bytes(*ordered, num_in_out_args=n_io))
    return int(sum(_tensor_bytes(v) * (2 if i < n_io else 1) for i, v in enumerate(ordered)))


def _tensor_bytes(value: Any) -> int:
    if hasattr(value, "numel") and hasattr(value, "element_size"):
        return int(value.numel()) * int(value.element_size())
    return 0


def gb_per_s(num_bytes: int | None, ms: float | None) -> float | None:
    if not num_bytes or not ms or ms <= 0:
        return None
    return num_bytes / (ms * 1e-3) / 1e9


# --------------------------------------------------------------------------- timing


class TimingUnavailable(ToolFailure):
    """No device to time on (a CPU-only machine, the Triton interpreter)."""


@dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    rotate_sets: int
    calls: int                 # calls of fn made by the timer (estimate + warm-up + timed)
    sets_used: int             # distinct rotating sets those calls touched
    timer: str
    warmup_ms: float
    rep_ms: float

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def spread(self) -> float:
        """(p80 - p20) / median: the run's own noise."""
        return (self.p80_ms - self.p20_ms) / self.median_ms if self.median_ms > 0 else math.inf


def timing_unavailable_reason() -> str | None:
    """Why ``time_fn`` cannot time here, or None when a device timer is available."""
    import os

    # as tko.base.interpreter.interpreter_on: this module is copied whole into the benchmark template
    # (tko.measure.embed), where only its ToolFailure import has a stand-in
    if os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on"):
        return "TRITON_INTERPRET=1: kernels run in the Triton interpreter on the CPU, not on a device"
    try:
        import torch
    except Exception as exc:
        return f"torch not importable ({type(exc).__name__})"
    if not torch.cuda.is_available():
        return "no GPU visible to torch (torch.cuda.is_available() is False)"
    return None


def _call(fn: Callable, item: Any):
    if isinstance(item, Mapping):
        return fn(**item)
    if isinstance(item, (list, tuple)):
        return fn(*item)
    return fn(item)


def time_fn(fn: Callable, warmup_ms: float = 25, rep_ms: float = 100,
            rotate: Sequence[Any] | None = None, bench: Callable | None = None) -> Timing:
    """Median, p20 and p80 (ms) of ``fn`` with ``triton.testing.do_bench``.

    With ``rotate``, each call takes the next item (cycled): a tuple is passed as positional
    arguments, a mapping as keyword arguments, anything else as the single argument; without it
    ``fn`` is called with no arguments. ``bench`` replaces ``do_bench`` (same signature); without
    it a device is required, else :class:`TimingUnavailable` is raised.
    """
    sets = list(rotate) if rotate is not None else [()]
    if not sets:
        raise ValueError("rotate is empty")
    timer = "custom"
    if bench is None:
        reason = timing_unavailable_reason()
        if reason:
            raise TimingUnavailable(reason)
        from triton.testing import do_bench as bench
        timer = "triton.testing.do_bench"
    state = {"calls": 0}
    used: set[int] = set()

    def step():
        i = state["calls"] % len(sets)
        state["calls"] += 1
        used.add(i)
        return _call(fn, sets[i])

    q = bench(step, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.2, 0.8])
    median, p20, p80 = (float(v) for v in q)
    return Timing(median, p20, p80, len(sets), state["calls"], len(used), timer,
                  float(warmup_ms), float(rep_ms))


# Copied into every standalone kernel file (tko/measure/embed.py): no annotations, which a kernel module
# without ``from __future__ import annotations`` would evaluate, and only the standard library.
def cpu_wall_bench(fn, warmup=0, rep=0, quantiles=None, min_calls=3, max_calls=100):
    """``triton.testing.do_bench``'s contract on the host clock, for interpreter runs (no device).

    Untimed calls for ``warmup`` ms (at least one when it is positive), then at least
    ``min_calls`` timed calls, more until
    ``rep`` ms of wall time or ``max_calls``. Returns the median in ms, or the ``quantiles``.
    The host clock times the interpreter, not a kernel: callers label it as such.
    """
    import time

    deadline = time.perf_counter() + warmup * 1e-3
    if warmup > 0:
        fn()
    while time.perf_counter() < deadline:
        fn()
    times = []
    deadline = time.perf_counter() + rep * 1e-3
    while len(times) < min_calls or (time.perf_counter() < deadline and len(times) < max_calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    picks = [times[min(len(times) - 1, int(round(q * (len(times) - 1))))] for q in (quantiles or [0.5])]
    return picks if quantiles else picks[0]


def device_l2_bytes(device: Any = None) -> int | None:
    """L2 size of a torch device from ``get_device_properties`` (None where torch lacks it)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(device if device is not None else
                                                 torch.cuda.current_device())
    except Exception:
        return None
    value = getattr(props, "L2_cache_size", None)
    return int(value) if value else None


def rotation_count(set_bytes: int, l2_bytes: int | None, factor: float = 2.0,
                   max_sets: int = 64, budget_bytes: int | None = None) -> int:
    """How many input sets to cycle so that together they exceed ``factor`` x L2.

    One set when it alone already exceeds that, or when the L2 size is unknown; never more
    than ``max_sets`` or than fit in ``budget_bytes``.
    """
    if set_bytes <= 0 or not l2_bytes:
        return 1
    need = int(math.floor(factor * l2_bytes / set_bytes)) + 1
    n = max(1, min(need, max_sets))
    if budget_bytes:
        n = max(1, min(n, budget_bytes // set_bytes))
    return n


# --------------------------------------------------------------------------- ranking


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def rank_variants(results: Iterable[Any], noise_rel: float = 0.0) -> dict:
    """Rank timed variants that passed their check; everything else is listed as excluded.

    Each result has ``name``, ``passed`` (bool), ``median_ms`` and optionally ``p20_ms`` /
    ``p80_ms`` (dicts or objects). Two variants tie when their medians differ by no more than
    ``noise_rel`` (e.g. the measured difference between two timings of one variant) or their
    p20-p80 ranges overlap. Returns ``{"ranked": [...], "excluded": [...], "best": name|None}``;
    each ranked entry has ``rank``, ``name``, ``median_ms``, ``x_best`` (times the best median),
    ``ties_best`` and ``ties`` (names within noise of it).
    """
    timed, excluded = [], []
    for res in results:
        name = _get(res, "name")
        ms = _get(res, "median_ms")
        if not _get(res, "passed", False):
            excluded.append({"name": name, "reason": "failed its check: " +
                             str(_get(res, "reason") or "no passing check")})
        elif ms is None or not math.isfinite(float(ms)) or float(ms) <= 0:
            excluded.append({"name": name, "reason": "not timed"})
        else:
            timed.append(res)
    timed.sort(key=lambda r: float(_get(r, "median_ms")))

    def interval(r):
        m = float(_get(r, "median_ms"))
        lo, hi = _get(r, "p20_ms"), _get(r, "p80_ms")
        return (float(lo) if lo is not None else m, float(hi) if hi is not None else m)

    def tie(a, b) -> bool:
        ma, mb = float(_get(a, "median_ms")), float(_get(b, "median_ms"))
        if abs(ma - mb) <= noise_rel * min(ma, mb):
            return True
        (alo, ahi), (blo, bhi) = interval(a), interval(b)
        return alo <= bhi and blo <= ahi

    ranked = []
    best = timed[0] if timed else None
    for i, res in enumerate(timed):
        ms = float(_get(res, "median_ms"))
        ranked.append({
            "rank": i + 1,
            "name": _get(res, "name"),
            "median_ms": ms,
            "x_best": ms / float(_get(best, "median_ms")),
            "ties_best": i > 0 and tie(res, best),
            "ties": [_get(o, "name") for o in timed if o is not res and tie(res, o)],
        })
    return {"ranked": ranked, "excluded": excluded,
            "best": _get(best, "name") if best is not None else None,
            "best_is_clear": bool(ranked) and not any(r["ties_best"] for r in ranked),
            "noise_rel": noise_rel}


# ==== end of the inline core ====


def _run() -> int:
    try:
        return main()
    except KeyboardInterrupt:
        print(f"{TOOL}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # an output path that cannot be written
        if os.environ.get("TKO_DEBUG") == "1":
            raise
        print(f"{TOOL}: error: {_short(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if os.environ.get("TKO_DEBUG") == "1":
            raise
        print(f"{TOOL}: error: unexpected {_short(exc)} (set TKO_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(_run())
