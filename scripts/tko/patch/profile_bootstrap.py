"""Run a Python script (or ``-m module``) as ``__main__`` under torch.profiler.

Usage (by profile_kernels.py, in a subprocess with the user's interpreter)::

    python profile_bootstrap.py TRACE_OUT [--with-stack] [--record-shapes] [--cpu-only] -- script.py args...
    python profile_bootstrap.py TRACE_OUT -- -m package.module args...

The profiler starts before the script runs and the Chrome trace is exported when it ends,
also when it raises or calls sys.exit, so the script needs no change.  This file imports
nothing from the bundle: it runs in whatever environment the user's interpreter has.
"""

import os
import runpy
import sys


def _fail(msg):
    sys.stderr.write(f"profile_bootstrap: error: {msg}\n")
    sys.exit(2)


# A range of this name marks kernels launched while Triton's Autotuner benchmarks configs (its
# do_bench launches and L2 flushes): the readers leave them out as they leave compilation out.
AUTOTUNE_MARK = "triton Autotuner benchmark (tko_autotune)"


def _mark_autotuning(torch):
    """Wrap ``triton.runtime.autotuner.Autotuner._bench`` in a profiler range, when Triton is there."""
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return
    try:
        from triton.runtime.autotuner import Autotuner
    except Exception:
        return
    bench = getattr(Autotuner, "_bench", None)
    if bench is None or getattr(bench, "_tko_marked", False):
        return

    def _bench(self, *args, **kwargs):
        with torch.profiler.record_function(AUTOTUNE_MARK):
            return bench(self, *args, **kwargs)

    _bench._tko_marked = True
    Autotuner._bench = _bench


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        _fail("usage: profile_bootstrap.py TRACE_OUT [--with-stack] [--record-shapes] [--cpu-only] -- script.py args...")
    cut = argv.index("--")
    opts, target = argv[:cut], argv[cut + 1:]
    if not opts or not target:
        _fail("need a trace path before '--' and a script after it")
    trace_out = opts[0]
    with_stack = "--with-stack" in opts[1:]
    cpu_only = "--cpu-only" in opts[1:]
    record_shapes = "--record-shapes" in opts[1:]

    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    gpu = (not cpu_only) and torch.cuda.is_available()
    if gpu:
        activities.append(ProfilerActivity.CUDA)  # also HIP on ROCm/DTK builds of torch
    else:
        sys.stderr.write("profile_bootstrap: note: no GPU visible to torch; recording CPU activity only\n")

    if target[0] == "-m":
        if len(target) < 2:
            _fail("'-m' needs a module name")
        sys.argv = [target[1]] + target[2:]
        run = lambda: runpy.run_module(target[1], run_name="__main__", alter_sys=True)  # noqa: E731
    else:
        script = target[0]
        if not os.path.isfile(script):
            _fail(f"{script}: no such script")
        sys.argv = list(target)
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        run = lambda: runpy.run_path(script, run_name="__main__")  # noqa: E731

    _mark_autotuning(torch)
    prof = profile(activities=activities, with_stack=with_stack, record_shapes=record_shapes)
    prof.__enter__()
    exported = False

    def export():
        nonlocal exported
        if exported:
            return
        exported = True
        try:
            if gpu:
                torch.cuda.synchronize()
        except Exception:
            pass
        prof.__exit__(None, None, None)
        tmp = trace_out + ".part"
        prof.export_chrome_trace(tmp)
        os.replace(tmp, trace_out)  # a reader never sees half a trace
        sys.stderr.write(f"profile_bootstrap: trace written to {trace_out}\n")

    try:
        run()
    finally:
        export()


if __name__ == "__main__":
    main()
