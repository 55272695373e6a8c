"""One sweep worker: a process bound to one device that checks and times variants from a queue.

The parent (``tko.measure.sweep``) starts it with ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` set to one
device and talks to it over stdin/stdout, one JSON object per line (stdout lines carry
:data:`MESSAGE_PREFIX` so that prints of the kernel module cannot be mistaken for answers).

At start the worker builds the captured arguments once with the standalone file's own input
builder (``_tko_make_arg``: saved index tensors, random normal floats, seed 0), keeps a copy of every
tensor's storage, runs the captured winner once and keeps its outputs as the reference.  Each
variant then runs on the SAME tensors: every storage restored from the copy (in-place ``in_out_ptr``
arguments included), pure outputs poisoned, one checked launch compared with the reference by
``tko.measure.bench.check_outputs``, then timing by ``tko.measure.bench.time_fn`` (do_bench median, p20, p80; the
same warm-up and repetition for every variant).  Under ``TRITON_INTERPRET=1`` the kernel runs on the
CPU and the wall-clock numbers are not performance numbers.

Mode ``compile`` only compiles each variant (Inductor: ``precompile``; hand-written:
``JITFunction.warmup``) so that the Triton cache is warm before the timing workers launch.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

from ..base.archs import torch_device_arch
from ..base.interpreter import interpreter_on

MESSAGE_PREFIX = "TKO_SWEEP "
SELF_CHECK_RUNS = 4          # re-runs of the winner that measure its own run-to-run difference
INTERPRETER_TIMER = "interpreter: not a performance number"


def _send(obj: dict) -> None:
    sys.stdout.write(MESSAGE_PREFIX + json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def _interpreter_allows_inductor_modules() -> None:
    """Inductor kernel modules call ``set_driver_to_gpu()`` at import, which raises without a GPU;
    under the interpreter there is no driver to pick, so in this worker process it does nothing."""
    if not interpreter_on():
        return
    try:
        from torch._inductor.runtime import triton_helpers
    except Exception:
        return
    triton_helpers.set_driver_to_gpu = lambda: None


def load_namespace(path: str) -> dict:
    """Execute a standalone file as a module (its runner's ``__main__`` block does not run)."""
    _interpreter_allows_inductor_modules()
    namespace = {"__name__": "_tko_sweep_variant", "__file__": path, "__builtins__": __builtins__}
    with open(path, encoding="utf-8") as fh:
        exec(compile(fh.read(), path, "exec"), namespace)
    return namespace


def _env_applied(env: dict):
    """Context manager: ``env`` set for the duration of one variant."""
    import contextlib

    @contextlib.contextmanager
    def scope():
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update({k: str(v) for k, v in env.items()})
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return scope()


def _merge_spread(runs: list[dict]) -> dict:
    """One ``self_difference`` record from several single-run records."""
    changed = any(r["integer_changed"] for r in runs)
    worst = max((r["max_abs"] or 0.0) for r in runs) if not changed else None
    return {"runs": len(runs), "max_abs": worst, "integer_changed": changed,
            "slack": max(r["slack"] for r in runs) if not changed else 0.0}


class Worker:
    def __init__(self, base_file: str, device: str, warmup_ms: float, rep_ms: float, rotate_max: int,
                 compile_only: bool = False):
        import torch

        self.torch = torch
        self.device = device
        self.warmup_ms, self.rep_ms = warmup_ms, rep_ms
        self.here = os.path.dirname(os.path.abspath(base_file))
        self.namespaces: dict[str, dict] = {}
        base = self.namespace(base_file)
        self.spec = base["_TKO_SPEC"]
        self.make_arg = base["_tko_make_arg"]
        torch.manual_seed(0)
        self.arg_sets, self.saved = [], []
        if not (compile_only and self.spec.get("launch") == "inductor"):  # Inductor compiles without them
            self.arg_sets = [self._build_args()]
            self.saved = [self._storages(self.arg_sets[0])]
        self.names = [d.get("name") or f"arg{i}" for i, d in enumerate(self.spec["args"])]
        self.rotate_max = rotate_max
        self.slack: list[float] | float = 0.0     # per output, from the winner's re-runs (find_outputs)

    # ---------------------------------------------------------------- arguments

    def _build_args(self) -> list:
        return [self.make_arg(d, self.here, self.device) for d in self.spec["args"]]

    def _storages(self, args: list) -> dict:
        return {i: a.untyped_storage().clone() for i, a in enumerate(args) if self.torch.is_tensor(a)}

    def restore(self, set_no: int = 0) -> None:
        for i, storage in self.saved[set_no].items():
            self.arg_sets[set_no][i].untyped_storage().copy_(storage)

    def namespace(self, path: str) -> dict:
        if path not in self.namespaces:
            self.namespaces[path] = load_namespace(path)
        return self.namespaces[path]

    def make_call(self, variant: dict, args: list):
        ns = self.namespace(variant["file"])
        spec = ns["_TKO_SPEC"]
        cfg = {"flat": variant["flat"], "grid": variant.get("grid")}
        if spec["launch"] == "inductor":
            return ns["_tko_inductor_call"](spec, cfg, args, self.device)
        return ns["_tko_jit_call"](spec, cfg, args, self.here, self.device)

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    # ---------------------------------------------------------------- outputs and reference

    def find_outputs(self, baseline: dict) -> dict:
        """Which tensor arguments the kernel writes, which of them may be poisoned; the reference
        and how much the winner's own re-runs differ from it."""
        from .bench import poison_, self_difference

        torch = self.torch
        args = self.arg_sets[0]
        tensors = [i for i, a in enumerate(args) if torch.is_tensor(a)]
        meta_mutated = set(self.spec.get("mutated_arg_names") or [])
        with _env_applied(baseline.get("env") or {}):
            call = self.make_call(baseline, args)
            self.restore()
            call()
            self.sync()
            first = {i: args[i].clone() for i in tensors}
            pristine = self._build_pristine()
            written = [i for i in tensors if not _same(first[i], pristine[i])
                       or self.names[i].startswith(("out_ptr", "in_out_ptr")) or self.names[i] in meta_mutated]
            # an output that the kernel only writes gives the same result when it starts poisoned;
            # one it also reads (in/out) does not: that one is restored, never poisoned
            self.restore()
            for i in written:
                if not self.names[i].startswith("in_out_ptr"):
                    poison_(args[i])
            call()
            self.sync()
        poisonable = [i for i in written if not self.names[i].startswith("in_out_ptr") and _same(args[i], first[i])]
        self.outputs = written
        self.poisonable = poisonable
        self.reference = [first[i] for i in written]
        if not written:
            raise RuntimeError("the captured winner wrote none of its tensor arguments")
        # re-runs of the winner: float atomics give a slightly different result each time, and a
        # variant is held to the winner's own spread, not to bit-exactness it cannot have
        # (compared run by run, so no extra copy of a large output is kept)
        per_run: dict = {i: [] for i in written}
        with _env_applied(baseline.get("env") or {}):
            for _ in range(SELF_CHECK_RUNS):
                self.restore()
                for i in poisonable:
                    poison_(args[i])
                call()
                self.sync()
                for i in written:
                    per_run[i].append(self_difference([args[i]], first[i]))
        spread = [_merge_spread(per_run[i]) for i in written]
        self.slack = [d["slack"] for d in spread]
        return {"outputs": [self.names[i] for i in written],
                "poisoned": [self.names[i] for i in poisonable],
                "restored_in_out": [self.names[i] for i in written if i not in poisonable],
                "self_difference": [dict(d, output=self.names[i]) for d, i in zip(spread, written)]}

    def _build_pristine(self) -> dict:
        torch = self.torch
        out = {}
        for i, a in enumerate(self.arg_sets[0]):
            if torch.is_tensor(a):
                t = torch.empty(0, dtype=a.dtype, device=a.device).set_(
                    self.saved[0][i].clone(), a.storage_offset(), a.shape, a.stride())
                out[i] = t
        return out

    # ---------------------------------------------------------------- one variant

    def run_variant(self, variant: dict, timed: bool = True) -> dict:
        from .bench import check_outputs, poison_

        record: dict[str, Any] = {"name": variant["name"]}
        # where a variant's seconds go: loading/compiling it, its first launch and check, timing
        phases = record["phase_s"] = {}
        args = self.arg_sets[0]
        t0 = time.perf_counter()
        try:
            with _env_applied(variant.get("env") or {}):
                call = self.make_call(variant, args)
                phases["prepare"] = round(time.perf_counter() - t0, 4)
                self.restore()
                for i in self.poisonable:
                    poison_(args[i])
                call()
                self.sync()
                t1 = time.perf_counter()
                phases["first_launch"] = round(t1 - t0 - phases["prepare"], 4)
                check = check_outputs([args[i] for i in self.outputs], self.reference,
                                      abs_slack=self.slack)
                self.sync()
                phases["check"] = round(time.perf_counter() - t1, 4)
                record["check"] = check.to_dict()
                record["passed"] = check.passed
                if not check.passed or not timed:
                    return record
                t1 = time.perf_counter()
                record["timing"] = self.time_variant(variant, call)
                phases["timing"] = round(time.perf_counter() - t1, 4)
        except Exception as exc:
            record.update(passed=False, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
                          error_tail=traceback.format_exc().splitlines()[-6:])
        return record

    def time_variant(self, variant: dict, call) -> dict:
        from .bench import bytes_of, device_l2_bytes, rotation_count, time_fn

        torch = self.torch
        if not self.device.startswith("cuda"):
            return time_fn(call, self.warmup_ms, self.rep_ms, bench=_cpu_bench).to_dict() | {
                "timer": INTERPRETER_TIMER}
        # rotate through several argument sets when one fits in L2, so that L2 does not serve it
        set_bytes = bytes_of(self.arg_sets[0])
        want = rotation_count(set_bytes, device_l2_bytes(), max_sets=self.rotate_max,
                              budget_bytes=int(torch.cuda.mem_get_info()[0] * 0.5))
        while len(self.arg_sets) < want:
            new = self._build_args()
            for i, storage in self.saved[0].items():
                new[i].untyped_storage().copy_(storage)
            self.arg_sets.append(new)
            self.saved.append(self.saved[0])
        calls = [call] + [self.make_call(variant, s) for s in self.arg_sets[1:want]]
        self.restore()
        return time_fn(lambda c: c(), self.warmup_ms, self.rep_ms, rotate=[(c,) for c in calls]).to_dict()

    def compile_only(self, variant: dict) -> dict:
        """Compile without a timed launch, to warm the Triton cache."""
        started = time.time()
        try:
            with _env_applied(variant.get("env") or {}):
                ns = self.namespace(variant["file"])
                spec = ns["_TKO_SPEC"]
                if spec["launch"] == "inductor":
                    cfg = {"flat": variant["flat"], "grid": variant.get("grid")}
                    ns["_tko_inductor_call"](spec, cfg, [], self.device)  # precompiles; launches nothing
                else:
                    jit = ns["_tko_jit_function"](ns[spec["function"]])
                    kwargs = {k: self.make_arg(d, self.here, self.device)
                              for k, d in spec.get("extra_kwargs", {}).items()}
                    kwargs.update(variant["flat"])
                    jit.warmup(*self.arg_sets[0], grid=tuple(variant.get("grid") or (1,)), **kwargs)
            return {"name": variant["name"], "ok": True, "seconds": round(time.time() - started, 3)}
        except Exception as exc:
            return {"name": variant["name"], "ok": False, "seconds": round(time.time() - started, 3),
                    "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}


def _same(a, b) -> bool:
    """Bitwise equal (NaN payloads included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        from .bench import _int_view_dtype

        view = _int_view_dtype(a.element_size())
        return bool((a.contiguous().view(view) == b.contiguous().view(view)).all())
    return bool((a == b).all())


def _cpu_bench(fn, warmup=0, rep=0, quantiles=None):
    """The host-clock timer of interpreter runs: no warm-up (each call is slow), at most 50 calls."""
    from .bench import cpu_wall_bench

    return cpu_wall_bench(fn, 0, rep, quantiles, min_calls=3, max_calls=50)


def main() -> int:
    """Read the setup line, then one task per line; answer each with one message line."""
    setup = json.loads(sys.stdin.readline())
    mode = setup.get("mode", "run")
    try:
        worker = Worker(setup["base_file"], setup["device"], float(setup.get("warmup_ms", 25)),
                        float(setup.get("rep_ms", 100)), int(setup.get("rotate_max", 8)),
                        compile_only=mode == "compile")
        info = {} if mode == "compile" else worker.find_outputs(setup["baseline"])
        import torch

        name, arch = "cpu", None
        if setup["device"].startswith("cuda"):
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            name = props.name
            arch = torch_device_arch(props, bool(getattr(torch.version, "hip", None)))[0]
        _send({"ready": True, "device_name": name, "device_arch": arch, **info})
    except Exception as exc:
        _send({"ready": False, "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
               "error_tail": traceback.format_exc().splitlines()[-6:]})
        return 1
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        if mode == "compile":
            _send(worker.compile_only(task))
        else:
            _send(_profiled(lambda: worker.run_variant(task, timed=task.get("timed", True)), task["name"]))
    return 0


def _profiled(fn, name: str):
    """``TKO_SWEEP_PROFILE_S=<s>``: a variant whose untimed phases (all but timing) take longer than
    that has its cProfile top functions written to this worker's log: where a slow first launch went."""
    limit = os.environ.get("TKO_SWEEP_PROFILE_S")
    if not limit:
        return fn()
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    result = prof.runcall(fn)
    phases = dict(result.get("phase_s") or {})
    phases.pop("timing", None)
    if sum(phases.values()) > float(limit):
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(30)
        print(f"== {name}: untimed phases {phases}\n{text.getvalue()}", file=sys.stderr, flush=True)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
