"""The smoke compile of the environment probe: a tiny kernel compiled in its own child per
buffer-ops setting (Triton <= 3.3 reads ``AMDGCN_USE_BUFFER_OPS`` once per process), its memory ops counted."""


from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from typing import Any, Sequence

from ..base import archs
from ..read import dcu_tools
from ..read.isa_amdgcn import memory_op_counts
from .children import DIAGNOSTIC_LINE, exc_record, last_lines, run_child
from .buffer_ops import BUFFER_OPS_ENV, buffer_ops_knob

SMOKE_TIMEOUT_S = 300.0
# --------------------------------------------------------------------------- smoke compile

_PTX_MEM = re.compile(r"\b(ld|st)\.global\b")


def count_memory_ops(asm: str, kind: str) -> dict:
    """Counts of memory-instruction families in AMDGCN (``buffer_load`` ...: the ISA scanner's
    :func:`tko.read.isa_amdgcn.memory_op_counts`) or PTX (``ld.global``)."""
    if kind == "amdgcn":
        return memory_op_counts(asm)["ops"]
    counts: dict[str, int] = {}
    for m in _PTX_MEM.finditer(asm):
        key = f"{m.group(1)}.global"
        counts[key] = counts.get(key, 0) + 1
    return counts


def target_for(arch: str) -> tuple[str, Any, int]:
    """(backend, arch, warp_size) of a GPUTarget for 'gfx942' / 'sm_90' / '90'."""
    name = archs.normalize(arch)
    if name.startswith("sm_"):
        digits = name[3:]
        if not (digits.isascii() and digits.isdigit()):     # int() refuses '²'
            raise ValueError(f"bad NVIDIA arch {arch!r}")
        return "cuda", int(digits), 32
    if not name.startswith("gfx"):
        raise ValueError(f"unknown target {arch!r}: expected gfxNNN or sm_NN")
    known = archs.info(name)
    return "hip", name, known.wave_size if known else 64


def child_smoke(args: dict) -> dict:
    """Smoke-compile for each requested target in this process (one flag setting)."""
    common: dict[str, Any] = {"mode": args["mode"], "buffer_ops_env": os.environ.get(BUFFER_OPS_ENV)}
    targets = args.get("targets") or [None]
    try:
        import triton
        common["triton_version"] = str(getattr(triton, "__version__", None))
        common["buffer_ops_effective"] = buffer_ops_knob(triton).get("value")
        from tko.compile import smoke_kernel
    except BaseException as exc:
        rec = {"ok": False, "stage": "import", **common, **exc_record(exc)}
        return {"results": [dict(rec) for _ in targets]}
    results = []
    for i, target in enumerate(targets):
        out: dict[str, Any] = {"ok": False, "stage": "compile", **common}
        start = time.monotonic()
        with _StderrCapture(os.path.join(args["stderr_dir"], f"stderr_{i}.txt")) as captured:
            try:
                if args["mode"] == "local":
                    _smoke_local(triton, smoke_kernel, out)
                else:
                    _smoke_offline(triton, smoke_kernel, target, out)
            except BaseException as exc:
                out.update(exc_record(exc))
        out.update(_stderr_fields(captured.text))
        out["seconds"] = round(time.monotonic() - start, 3)
        results.append(out)
    return {"results": results}


def _stderr_fields(text: str) -> dict:
    out: dict[str, Any] = {}
    diagnostics = [l.strip() for l in dcu_tools.clean_text(text).split("\n") if DIAGNOSTIC_LINE.search(l)]
    if diagnostics:
        out["diagnostics"] = diagnostics[:5]
    if text.strip():
        out["stderr_tail"] = last_lines(text)
    return out


class _StderrCapture:
    """Send file descriptor 2 to a file (MLIR/LLVM write there directly, not via
    sys.stderr).  The file is named by the parent, so that what LLVM printed
    before aborting the process is still readable afterwards."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        sys.stderr.flush()
        self._tmp = open(self.path, "w+b")
        self._saved = os.dup(2)
        os.dup2(self._tmp.fileno(), 2)
        self.text = ""
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._tmp.seek(0)
        self.text = self._tmp.read().decode("utf-8", errors="replace")
        self._tmp.close()
        return False


def _record_asm(compiled, out: dict) -> None:
    asm = getattr(compiled, "asm", {}) or {}
    kind = "amdgcn" if "amdgcn" in asm else ("ptx" if "ptx" in asm else None)
    out["asm_kind"] = kind
    if kind:
        text = asm[kind]
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        out["memory_ops"] = count_memory_ops(text, kind)
        if kind == "amdgcn":
            m = re.search(r'\.amdgcn_target\s+"([^"]+)"', text)
            out["amdgcn_target"] = m.group(1) if m else None


def _smoke_local(triton, smoke_kernel, out: dict) -> None:
    import torch
    out["stage"] = "device"
    target = triton.runtime.driver.active.get_current_target()
    out["target"] = {"backend": target.backend, "arch": str(target.arch),
                     "warp_size": target.warp_size}
    n = 1000                                    # not a multiple of BLOCK: exercises the mask
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    out["stage"] = "compile"
    grid = (triton.cdiv(n, smoke_kernel.BLOCK),)
    compiled = smoke_kernel.scale_shift[grid](x, y, n, BLOCK=smoke_kernel.BLOCK)
    out["stage"] = "launch"
    torch.cuda.synchronize()
    out["launched"] = True
    _record_asm(compiled, out)
    out["stage"] = "check"
    expected = x * 2.0 + 1.0
    out["max_abs_err"] = float((y - expected).abs().max().item())
    out["result_ok"] = bool(torch.equal(y, expected))
    out["ok"] = out["result_ok"]
    out["stage"] = "done"


def _smoke_offline(triton, smoke_kernel, arch: str, out: dict) -> None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    backend, target_arch, warp = target_for(arch)
    out["target"] = {"backend": backend, "arch": str(target_arch), "warp_size": warp}
    out["launched"] = False
    # Mimic what a JIT launch would attach: 16-byte alignment always, and on HIP
    # the 32-bit pointer range whenever buffer ops are on for this process.
    hints = [["tt.divisibility", 16]]
    if backend == "hip" and out.get("buffer_ops_effective"):
        hints.append(["tt.pointer_range", 32])
    out["pointer_hints"] = hints
    out["stage"] = "compile"
    attrs = {(i,): hints for i in smoke_kernel.POINTER_ARGS}
    try:
        src = ASTSource(smoke_kernel.scale_shift, dict(smoke_kernel.SIGNATURE),
                        constexprs={"BLOCK": smoke_kernel.BLOCK}, attrs=attrs)
    except TypeError:
        # Triton <= 3.2 spells the arguments differently; compile without hints there.
        sig = {k: v for k, v in smoke_kernel.SIGNATURE.items() if v != "constexpr"}
        src = ASTSource(smoke_kernel.scale_shift, sig, constants={"BLOCK": smoke_kernel.BLOCK})
        out["pointer_hints"] = None
    compiled = triton.compile(src, target=GPUTarget(backend, target_arch, warp),
                              options={"num_warps": 4})
    _record_asm(compiled, out)
    out["ok"] = True
    out["stage"] = "done"


def _failed_child_results(res: dict, mode: str, targets: Sequence[str | None], work: str) -> list[dict]:
    """Per-target records when the smoke child died (LLVM abort, segfault) or hung."""
    results = []
    for i, _ in enumerate(targets):
        rec: dict[str, Any] = {"ok": False, "stage": "subprocess", "mode": mode,
                               "error": res.get("error"), "error_lines": res.get("error_lines", [])}
        rec.update({k: v for k, v in res.items() if k.startswith("child_")})
        path = os.path.join(work, f"stderr_{i}.txt")
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                rec.update(_stderr_fields(fh.read().decode("utf-8", errors="replace")))
        else:
            rec["error"] = f"not run: the subprocess ended at an earlier target ({res.get('error')})"
        results.append(rec)
    return results


def smoke_env(variant: str) -> dict:
    """The child environment of one smoke variant: the flag unset, or set to '1'."""
    env = dict(os.environ)
    env.pop(BUFFER_OPS_ENV, None)
    if variant != "unset":
        env[BUFFER_OPS_ENV] = variant
    return env


def run_smoke(mode: str, targets: Sequence[str | None],
              timeout: float = SMOKE_TIMEOUT_S) -> list[dict]:
    """Smoke runs, one per target, each with the flag unset and set to 1.

    Each flag setting runs in its own subprocess (the flag is read at import on
    old Triton); the offline targets of one setting share that subprocess.
    """
    by_variant = {}
    for variant in ("unset", "1"):
        env = smoke_env(variant)
        # A fresh Triton cache per child: a cached binary would hide a compile failure.
        work = tempfile.mkdtemp(prefix="tko_smoke_")
        env["TRITON_CACHE_DIR"] = os.path.join(work, "triton_cache")
        try:
            res = run_child("smoke", {"mode": mode, "targets": list(targets), "stderr_dir": work},
                            env=env, timeout=timeout * max(1, len(targets)))
            results = res.pop("results", None)
            if not isinstance(results, list) or len(results) != len(targets):
                results = _failed_child_results(res, mode, targets, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for r in results:
            r.update({k: v for k, v in res.items() if k.startswith("child_")})
        by_variant[variant] = results
    runs = []
    for i, target in enumerate(targets):
        variants = {v: by_variant[v][i] for v in by_variant}
        record = {"mode": mode, "target_requested": target, "variants": variants}
        known = archs.info(target) if target else None
        if known and not known.upstream_triton and not all(r.get("ok") for r in variants.values()):
            record["proxy_note"] = (f"{known.name} ({known.product}) is not an upstream Triton target: "
                                    f"a DTK/FlagTree Triton compiles it; upstream Triton can compile "
                                    f"the proxy {known.proxy} (--smoke-target {known.proxy})")
        runs.append(record)
    return runs


