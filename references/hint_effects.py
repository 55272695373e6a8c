"""Compile small kernels offline and show which hints turn global_* into buffer_* or widen loads.

Regenerates references/hint_effects_measured.yaml (summarised in optimization_patterns.md section 1)
for the installed Triton. No GPU is needed: upstream Triton's AMD backend compiles for gfx942 /
gfx90a on a CPU machine (Triton >= 3.5 links in-process; <= 3.4 needs ld.lld, see dcu_notes.md).

    python references/hint_effects.py [--arch gfx942] [--json-out effects.json] [--yaml]

`--yaml` prints the entry as it appears in hint_effects_measured.yaml. The entries for other Triton
versions were made the same way with that wheel alone in a virtual environment, e.g.
`python -m venv v && v/bin/pip install --no-deps triton==3.5.1 &&
AMDGCN_USE_BUFFER_OPS=1 v/bin/python references/hint_effects.py --yaml`. Triton <= 3.4 links with
`ld.lld` even to compute a cache key; without ROCm pass `--stub-linker` (a stand-in that copies its
input: the asm is real, the hsaco is not).

Each case is compiled twice: with `tt.pointer_range=32` on the pointer arguments (what a JIT launch
of a < 2 GiB tensor gets on Triton >= 3.6 with buffer ops on) and without it (what an offline
compile, or an Inductor kernel whose triton_meta lacks it, gets). AMDGCN_USE_BUFFER_OPS is left as
the environment has it; the output records the value.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

_SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")
if os.path.isdir(os.path.join(_SCRIPTS, "tko")):  # the skill's checkout; else the installed tko
    sys.path.insert(0, _SCRIPTS)

from tko.read.isa_amdgcn import memory_op_counts  # noqa: E402
from tko.compile.offline_compile import lld_stand_in  # noqa: E402


def _data_ops(asm: str) -> list[str]:
    """The distinct buffer / global / flat load and store mnemonics, as scan_amdgcn counts them."""
    return sorted(m for m in memory_op_counts(asm)["mnemonics"] if m.split("_")[1] in ("load", "store"))


def _kernels():
    # Module-level names: older Tritons (3.3) resolve `tl` through the kernel's globals.
    global tl
    import triton
    import triton.language as tl

    @triton.jit
    def pid_block(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    @triton.jit
    def pid_block_assume_pid(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        tl.assume(pid < 4096)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    @triton.jit
    def minus_shift(x_ptr, y_ptr, n, shift, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK) - shift
        m = (offs < n) & (offs >= 0)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    @triton.jit
    def i64_pid(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    @triton.jit
    def times_stride(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs * stride, mask=m) * 2, mask=m)

    @triton.jit
    def times_stride_assume(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
        tl.assume(stride >= 0)
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs * stride, mask=m) * 2, mask=m)

    @triton.jit
    def base_arg(x_ptr, y_ptr, n, base, BLOCK: tl.constexpr):
        offs = base + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    @triton.jit
    def multiple_of_arg(x_ptr, y_ptr, n, base, BLOCK: tl.constexpr):
        base = tl.multiple_of(base, 16)
        offs = base + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    @triton.jit
    def multiple_of_start(x_ptr, y_ptr, n, base, BLOCK: tl.constexpr):
        start = tl.multiple_of(base + tl.program_id(0) * BLOCK, 16)
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    @triton.jit
    def modulo_arg(x_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(y_ptr + i, tl.load(x_ptr + i % cols, mask=m) * 2, mask=m)

    @triton.jit
    def modulo_arg_hinted(x_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        offs = tl.max_contiguous(tl.multiple_of(i % cols, 16), 16)   # true when cols % 16 == 0
        m = i < n
        tl.store(y_ptr + i, tl.load(x_ptr + offs, mask=m) * 2, mask=m)

    @triton.jit
    def tensor_descriptor(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        xd = tl.make_tensor_descriptor(x_ptr, [n], [1], [BLOCK])
        yd = tl.make_tensor_descriptor(y_ptr, [n], [1], [BLOCK])
        yd.store([pid * BLOCK], xd.load([pid * BLOCK]) * 2)

    @triton.jit
    def block_ptr(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        xb = tl.make_block_ptr(x_ptr, (n,), (1,), (pid * BLOCK,), (BLOCK,), (0,))
        yb = tl.make_block_ptr(y_ptr, (n,), (1,), (pid * BLOCK,), (BLOCK,), (0,))
        tl.store(yb, tl.load(xb, boundary_check=(0,)) * 2, boundary_check=(0,))

    # (kernel, dtype, extra scalar args, which scalar args carry tt.divisibility=16)
    return [
        (pid_block, "fp32", [], []),
        (pid_block_assume_pid, "fp32", [], []),
        (minus_shift, "fp32", ["shift"], []),
        (i64_pid, "fp32", [], []),
        (times_stride, "fp32", ["stride"], []),
        (times_stride_assume, "fp32", ["stride"], []),
        (base_arg, "fp16", ["base"], []),
        ("base_arg_div16", base_arg, "fp16", ["base"], ["base"]),
        (multiple_of_arg, "fp16", ["base"], []),
        (multiple_of_start, "fp16", ["base"], []),
        (modulo_arg, "fp16", ["cols"], []),
        (modulo_arg_hinted, "fp16", ["cols"], []),
        (tensor_descriptor, "fp32", [], []),
        (block_ptr, "fp32", [], []),
    ]


def _verdict(ops: list[str]) -> str:
    kinds = {op.split("_", 1)[0] for op in ops}
    if not kinds:
        return "none"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def measure(arch: str) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    div = [["tt.divisibility", 16]]
    pr32 = div + [["tt.pointer_range", 32]]
    cases = {}
    for entry in _kernels():
        if isinstance(entry[0], str):
            name, fn, dtype, scalars, div_scalars = entry
        else:
            fn, dtype, scalars, div_scalars = entry
            name = fn.__name__
        signature = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "n": "i32"}
        signature.update({s: "i32" for s in scalars})
        signature["BLOCK"] = "constexpr"
        names = list(signature)
        result = {}
        for mode, ptr_attrs in (("pr32", pr32), ("no_pr32", div)):
            attrs = {(0,): ptr_attrs, (1,): ptr_attrs, (2,): div}
            attrs.update({(names.index(s),): div for s in div_scalars})
            try:
                src = ASTSource(fn, signature, constexprs={"BLOCK": 1024}, attrs=attrs)
                kernel = triton.compile(src, target=GPUTarget("hip", arch, 64), options={"num_warps": 4})
                ops = _data_ops(kernel.asm["amdgcn"])
                result[mode] = {"verdict": _verdict(ops), "ops": ops}
            except Exception as exc:  # a rejected form is a result, not a crash
                lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
                result[mode] = {"verdict": "error", "error": lines[-1] if lines else type(exc).__name__}
        cases[name] = result
    return {
        "triton": triton.__version__,
        "arch": arch,
        "AMDGCN_USE_BUFFER_OPS": os.environ.get("AMDGCN_USE_BUFFER_OPS"),
        "cases": cases,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="gfx942", help="upstream AMD target (gfx942, gfx90a, ...)")
    parser.add_argument("--json-out", help="also write the result as JSON")
    parser.add_argument("--stub-linker", action="store_true",
                        help="Triton <= 3.4 without ROCm: link with a stand-in (asm only)")
    parser.add_argument("--yaml", action="store_true",
                        help="print the entry for hint_effects_measured.yaml instead of the table")
    args = parser.parse_args(argv)
    if args.stub_linker:
        os.environ["TRITON_HIP_LLD_PATH"] = lld_stand_in()  # copies the object: asm only
    try:
        result = measure(args.arch)
    except ImportError as exc:
        print(f"error: triton is needed to compile: {exc}", file=sys.stderr)
        return 2
    if args.yaml:
        print(yaml_block(result))
        return _write_json(result, args.json_out)
    width = max(len(n) for n in result["cases"])
    print(f"triton {result['triton']}  arch {result['arch']}  "
          f"AMDGCN_USE_BUFFER_OPS={result['AMDGCN_USE_BUFFER_OPS']}")
    for name, modes in result["cases"].items():
        cells = []
        for mode in ("pr32", "no_pr32"):
            r = modes[mode]
            cells.append(f"{mode}: {r['verdict']} " + (",".join(r.get("ops", [])) or r.get("error", "")))
        print(f"{name:<{width}}  " + "  |  ".join(cells))
    return _write_json(result, args.json_out)


def _write_json(result: dict, path: str | None) -> int:
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
    return 0


_WIDTH_ORDER = ("ubyte", "ushort", "short", "dword", "dwordx2", "dwordx3", "dwordx4")


def yaml_block(result: dict) -> str:
    """One entry of hint_effects_measured.yaml: per case, verdict and widest data load per mode."""
    env = result["AMDGCN_USE_BUFFER_OPS"]
    lines = [f'- triton: "{result["triton"]}"', f"  arch: {result['arch']}",
             f"  AMDGCN_USE_BUFFER_OPS: {'unset' if env is None else repr(str(env))}",
             f"  linker: {'stub' if os.environ.get('TRITON_HIP_LLD_PATH') else 'wheel'}", "  cases:"]
    width = max(len(n) for n in result["cases"]) + 1
    for name, modes in result["cases"].items():
        cells = []
        for mode in ("pr32", "no_pr32"):
            r = modes[mode]
            loads = [op.rsplit("_", 1)[1] for op in r.get("ops", []) if "_load_" in op]
            widest = max(loads, key=_WIDTH_ORDER.index) if loads else ""
            cells.append(f"{mode}: {(r['verdict'] + ' ' + widest).strip()}")
        lines.append(f"    {name + ':':<{width}} {{{', '.join(cells)}}}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
