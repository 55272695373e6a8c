"""DCU validation kit: the checks behind ``validate_dcu.py``.

Each check confirms one assumption the code makes about a Hygon DCU, its DTK tools or the Triton build
on it (``references/dcu_notes.md``, "Not yet verified on a DCU"). Every check runs its work in a
subprocess with a timeout (its own process group, killed on timeout), writes that process's stdout
and stderr under ``<raw>/<check id>/`` and is judged by a pure function (``judge_*``) that the CPU
tests feed the public DCU samples. Nothing here installs anything or changes the environment of
this process: each child gets its own copy of the environment, with the Triton / Inductor caches
pointed into the output folder.

A check needs a platform: ``any`` (runs everywhere), ``gpu`` (a GPU torch sees), ``dcu`` (a Hygon
arch) or ``tool`` (the named tool found). One that cannot run here is ``skipped`` with the reason.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..base import archs
from ..read import dcu_tools, isa, profile_formats, triton_stack
from ..base import fronts
from . import buffer_ops, children, env_probe, pitfalls, toolchain
from ..measure import peaks
from ..base.artifact import positive_float
from ..base.errors import InputError

SCHEMA = "dcu_validation/1"
PASS, FAIL, SKIP = "pass", "fail", "skipped"
DEFAULT_TIMEOUT_S = 300.0
PROXY_ARCH = "gfx942"
SCRIPTS_DIR = Path(__file__).resolve().parents[2]
BUFFER_VARS = ("AMDGCN_USE_BUFFER_OPS", "HCUGCN_USE_BUFFER_OPS")
COPY_RATIO_RANGE = (0.8, 1.1)     # measured copy / BW1000 recorded copy that counts as agreement


def verdict(status: str, reason: str, **details: Any) -> dict:
    return {"status": status, "reason": reason, "details": details}


# --------------------------------------------------------------------------- judging functions

def judge_arch_string(arch_full: str | None, compute_units: Any = None) -> dict:
    """gcnArchName (``gfx936:sramecc+:xnack-``) and CU count as torch reports them."""
    if not arch_full or not str(arch_full).strip():
        return verdict(FAIL, "no gcnArchName reported")
    text = str(arch_full).strip()
    if not re.fullmatch(r"gfx[0-9a-f]+(:[a-z0-9_]+[+-])*", text):
        return verdict(FAIL, f"gcnArchName {text!r} is not of the form gfxNNN[:feature+/-]...")
    arch = archs.normalize(text)
    known = archs.info(arch)
    if known is None or known.vendor != "hygon":
        return verdict(FAIL, f"arch {arch} (from {text!r}) is not a Hygon DCU arch", arch=arch)
    if not isinstance(compute_units, int) or compute_units <= 0:
        return verdict(FAIL, f"{arch}: no positive compute-unit count ({compute_units!r})", arch=arch)
    return verdict(PASS, f"{arch} ({known.product}), {compute_units} CUs", arch=arch,
                   arch_full=text, compute_units=compute_units)


def judge_rocminfo(text: str, torch_arch: str | None = None, torch_cus: int | None = None) -> dict:
    """rocminfo names a Hygon GPU agent with CUs, wave64 and 64 KiB LDS; it agrees with torch."""
    try:
        parsed = dcu_tools.parse_rocminfo(text)
    except Exception as exc:  # a parser crash on a damaged file is a failure of the sample
        return verdict(FAIL, f"rocminfo output not readable: {type(exc).__name__}: {exc}")
    gpus = parsed.get("gpus") or []
    if not gpus:
        return verdict(FAIL, "rocminfo lists no GPU agent (output truncated or no device)")
    dev = gpus[0]
    base = judge_arch_string(dev.get("arch_full"), dev.get("compute_units"))
    if base["status"] != PASS:
        return verdict(FAIL, f"rocminfo: {base['reason']}", device=dev)
    problems = []
    if dev.get("wave_size") != 64:
        problems.append(f"wavefront {dev.get('wave_size')} (expected 64)")
    if dev.get("lds_per_block_bytes") != 64 * 1024:
        problems.append(f"GROUP segment {dev.get('lds_per_block_bytes')} bytes (expected 65536)")
    if torch_arch and archs.normalize(str(torch_arch)) != dev["arch"]:
        problems.append(f"torch says {archs.normalize(str(torch_arch))}, rocminfo {dev['arch']}")
    if torch_cus and dev.get("compute_units") != torch_cus:
        problems.append(f"torch says {torch_cus} CUs, rocminfo {dev.get('compute_units')}")
    if problems:
        return verdict(FAIL, "rocminfo: " + "; ".join(problems), device=dev)
    return verdict(PASS, f"rocminfo: {dev['arch']}, {dev['compute_units']} CUs, wave64, LDS 64 KiB",
                   device=dev, banner=parsed.get("banner"))


def judge_tool_version(tool: str, text: str) -> dict:
    """A DTK tool's version output gives a version (hipcc: the dcc version)."""
    if tool == "hy-smi":
        return judge_hysmi(text)
    if tool == "hipcc":
        parsed = dcu_tools.parse_hipcc_version(text)
        version = parsed.get("version")
        if not version or not re.match(r"\d+(\.\d+)+", str(version)):
            return verdict(FAIL, "hipcc --version: no version line parsed", parsed=parsed)
        return verdict(PASS, f"hipcc {version} ({parsed.get('flavor') or 'unknown flavor'})",
                       version=version, parsed=parsed)
    version = dcu_tools.first_version(text)
    if not version:
        first = children.first_lines(text, 1)
        return verdict(FAIL, f"{tool}: no version parsed from {first[0][:80]!r}" if first
                       else f"{tool}: empty version output")
    return verdict(PASS, f"{tool} {version}", version=version)


def judge_hysmi(text: str) -> dict:
    """The default hy-smi table: a known header style and at least one card row."""
    parsed = dcu_tools.parse_hysmi_table(text)
    devices = parsed.get("devices") or []
    if not parsed.get("style"):
        return verdict(FAIL, "hy-smi: no HCU/DCU table header found", parsed=parsed)
    if not devices:
        return verdict(FAIL, f"hy-smi: {parsed['style']} header but no card rows (truncated?)",
                       parsed=parsed)
    return verdict(PASS, f"hy-smi: {len(devices)} card(s), {parsed['style']} header",
                   style=parsed["style"], cards=len(devices), complete=parsed.get("complete"))


def judge_smoke(variants: dict) -> dict:
    """Smoke kernel per buffer-op setting: each compiled, ran and gave the right result; the ISA
    says which of buffer_* / global_* each setting produced."""
    if not variants or not isinstance(variants, dict):
        return verdict(FAIL, "no smoke run recorded")
    parts, failed, ops = [], [], {}
    for name, rec in variants.items():
        rec = rec if isinstance(rec, dict) else {"error": f"not a smoke record: {rec!r:.60}"}
        counts = rec.get("memory_ops")
        counts = [str(k) for k in counts] if isinstance(counts, dict) else []
        kind = ("buffer" if any(k.startswith("buffer_") for k in counts) else
                "global" if any(k.startswith(("global_", "flat_")) for k in counts) else "none")
        ops[name] = kind
        if not rec.get("ok"):
            diagnostics = rec.get("diagnostics")
            first = diagnostics[0] if isinstance(diagnostics, list) and diagnostics else "?"
            why = rec.get("error") or first
            failed.append(f"{name}: failed at {rec.get('stage')} ({str(why)[:120]})")
        else:
            parts.append(f"{name}: {kind}")
    if failed:
        return verdict(FAIL, "; ".join(failed), ops=ops)
    return verdict(PASS, "; ".join(parts), ops=ops)


def scan_listing(text: str) -> dict | None:
    """Family counts of an AMDGCN listing (None when it is not one)."""
    try:
        res = isa.scan_text(text, "amdgcn")
    except InputError:
        return None
    fams: dict[str, int] = {}
    for k in res["kernels"]:
        for fam, n in k["families"].items():
            fams[fam] = fams.get(fam, 0) + n
    return {"arch": res.get("arch"), "kernels": [k["name"] for k in res["kernels"]],
            "families": {f: n for f, n in fams.items() if n}}


MEMORY_FAMILIES = ("buffer_load", "buffer_store", "global_load", "global_store", "flat_load",
                   "flat_store")


def judge_isa(dcu_text: str, proxy_text: str | None = None) -> dict:
    """The DCU's listing reads as Hygon AMDGCN; its memory families match the gfx942 proxy's."""
    scan = scan_listing(dcu_text)
    if scan is None or not scan["kernels"]:
        return verdict(FAIL, "DCU listing: not an AMDGCN listing with a kernel body")
    known = archs.info(scan["arch"]) if scan["arch"] else None
    if known is None or known.vendor != "hygon":
        return verdict(FAIL, f"DCU listing targets {scan['arch']}, not a Hygon arch", dcu=scan)
    if "mfma" in scan["families"]:
        return verdict(FAIL, f"{scan['arch']} listing holds v_mfma_* (Hygon uses v_mmac_*)", dcu=scan)
    if proxy_text is None:
        return verdict(PASS, f"{scan['arch']}: {_fams(scan)}", dcu=scan)
    proxy = scan_listing(proxy_text)
    if proxy is None:
        return verdict(FAIL, f"{PROXY_ARCH} proxy listing not readable", dcu=scan)
    mine = {f for f in MEMORY_FAMILIES if scan["families"].get(f)}
    theirs = {f for f in MEMORY_FAMILIES if proxy["families"].get(f)}
    if mine != theirs:
        return verdict(FAIL, f"memory families differ: {scan['arch']} {sorted(mine)} vs "
                             f"{PROXY_ARCH} {sorted(theirs)}", dcu=scan, proxy=proxy)
    return verdict(PASS, f"{scan['arch']} and {PROXY_ARCH} agree: {sorted(mine)}", dcu=scan, proxy=proxy)


def _fams(scan: dict) -> str:
    return ", ".join(f"{f} {n}" for f, n in sorted(scan["families"].items())) or "no families"


def judge_profile(text: str, kernel: str | None = None) -> dict:
    """A hipprof / rocprofv3 summary or trace CSV lists kernels (and the expected one)."""
    try:
        fmt = profile_formats.detect_format(text)
        parsed = (profile_formats.parse_stats_csv(text) if fmt == "stats_csv" else
                  profile_formats.parse_dispatch_csv(text) if fmt == "dispatch_csv" else None)
    except InputError as exc:
        return verdict(FAIL, f"profile not readable: {exc}")
    if parsed is None:
        return verdict(FAIL, f"profile format {fmt!r}: expected a stats or dispatch CSV")
    names = [r.name for r in (parsed.kernel_stats or [])] + [d.name for d in (parsed.dispatches or [])]
    if not names:
        return verdict(FAIL, "profile holds no kernel rows" + (
            f" ({parsed.problems[0]})" if parsed.problems else ""), format=fmt)
    if kernel and not any(kernel in n for n in names):
        return verdict(FAIL, f"kernel {kernel} not among the {len(names)} profiled names", format=fmt)
    return verdict(PASS, f"{fmt}: {len(names)} kernel row(s)", format=fmt, kernels=names[:10],
                   problems=parsed.problems[:5])


def judge_kernel_run(doc: dict) -> dict:
    """A kernel_run/1 of the captured standalone kernel: ok, timed, results checked."""
    if not isinstance(doc, dict):
        return verdict(FAIL, f"kernel run record is not an object ({type(doc).__name__})")
    if doc.get("status") != "ok":
        return verdict(FAIL, f"run {doc.get('status')}: {doc.get('error')}")
    best = doc.get("best") if isinstance(doc.get("best"), dict) else {}
    ms = positive_float(best.get("ms"))
    if not best.get("ok") or ms is None:
        return verdict(FAIL, "no timed result for the captured config")
    return verdict(PASS, f"{doc.get('kernel')}: {ms:.4f} ms ({best.get('timer')})",
                   kernel=doc.get("kernel"), ms=best["ms"], timer=best.get("timer"))


def judge_triton_stack(stack: dict, platform_kind: str) -> dict:
    """The Triton stack is recognised and, on a DCU, one that targets it with readable options."""
    name = stack.get("name")
    if name is None:
        return verdict(FAIL, f"no Triton stack: {'; '.join(stack.get('why') or ['triton not importable'])}",
                       stack=stack)
    line = (f"{name}: triton {stack.get('triton_version')}, backend {stack.get('backend') or 'none'}"
            f" ({len(stack['options'])} options)" if stack.get("options") is not None else
            f"{name}: triton {stack.get('triton_version')}, backend options not read "
            f"({stack.get('options_error')})")
    if platform_kind == "dcu" and name == "upstream":
        return verdict(FAIL, f"{line}: upstream Triton cannot target a Hygon arch; install the DTK's "
                       "Triton, FlagTree hcu or triton-das", stack=stack)
    if platform_kind == "dcu" and stack.get("options") is None:
        return verdict(FAIL, line, stack=stack)
    return verdict(PASS, line, stack=stack)


def judge_clang_mllvm(text: str, rc: Any, options: list[str]) -> dict:
    """Whether a clang accepted the HCU backend's ``-mllvm`` options (FlagTree#820: DTK clang 17
    prints ``Unknown command line argument '-check-valu-data-forward-hazards=0'``)."""
    rejected = [o for o in options if f"Unknown command line argument '{o}" in text
                or f"Unknown command line argument '-{o.lstrip('-')}" in text]
    if rejected:
        return verdict(FAIL, f"clang rejects {', '.join(rejected)}", rejected=rejected)
    if rc != 0:
        first = children.first_lines(text, 1)
        return verdict(FAIL, f"clang failed (rc {rc}): {first[0][:160] if first else 'no output'}")
    return verdict(PASS, f"clang accepts {', '.join(options)}")


def judge_copy_peak(measured_gbps: Any, peak: dict | None) -> dict:
    """The measured copy bandwidth against the recorded BW1000 copy figure."""
    if positive_float(measured_gbps) is None:
        return verdict(FAIL, f"no copy bandwidth measured ({measured_gbps!r:.60})")
    measured_gbps = positive_float(measured_gbps)
    ref = positive_float(peak.get("copy_gbps")) if isinstance(peak, dict) else None
    if not ref:
        return verdict(SKIP, f"measured {measured_gbps:.1f} GB/s; no recorded copy figure to compare")
    ratio = measured_gbps / ref
    lo, hi = COPY_RATIO_RANGE
    line = f"{measured_gbps:.1f} GB/s = {ratio:.2f}x the recorded {ref:.1f} GB/s"
    if not lo <= ratio <= hi:
        return verdict(FAIL, f"{line} (outside {lo}-{hi})", measured_gbps=measured_gbps, ratio=ratio)
    return verdict(PASS, line, measured_gbps=measured_gbps, reference_gbps=ref, ratio=ratio)


# --------------------------------------------------------------------------- running children

@dataclass
class Context:
    raw: Path                     # everything under it goes into the archive
    work: Path                    # scratch (caches of the children), not archived
    timeout: float
    platform: dict
    state: dict


def child_env(ctx: Context, check_id: str, unset: tuple = (), **extra: str) -> dict:
    """A copy of this environment for one child, caches pointed into the output folder."""
    env = dict(os.environ)
    for name in unset:
        env.pop(name, None)
    env["TRITON_CACHE_DIR"] = str(ctx.work / check_id / "triton_cache")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(ctx.work / check_id / "inductor_cache")
    env.update(extra)
    return env


def run_logged(ctx: Context, check_id: str, name: str, argv: list, env: dict | None = None,
               cwd: str | None = None) -> dict:
    """Run one command (own process group, killed at the timeout); keep its stdout and stderr."""
    fronts.check([str(a) for a in argv])
    where = ctx.raw / check_id
    where.mkdir(parents=True, exist_ok=True)
    res = children.run_command([str(a) for a in argv], timeout=ctx.timeout, env=env, cwd=cwd)
    (where / f"{name}.stdout.txt").write_text(res["stdout"], encoding="utf-8")
    (where / f"{name}.stderr.txt").write_text(res["stderr"], encoding="utf-8")
    (where / f"{name}.command.json").write_text(json.dumps(
        {k: res[k] for k in ("argv", "rc", "timed_out", "error", "seconds")}, indent=1), encoding="utf-8")
    return res


def run_probe_child(ctx: Context, check_id: str, name: str, kind: str, args: dict,
                    env: dict | None = None) -> dict:
    """An ``env_probe`` child (torch / smoke) in a fresh interpreter; its JSON or a failure record."""
    code = (f"import sys; sys.path.insert(0, {str(SCRIPTS_DIR)!r}); from tko.env import children; "
            f"children.child_main({kind!r}, {json.dumps(args)!r})")
    res = run_logged(ctx, check_id, name, [sys.executable, "-c", code], env=env)
    payload = children.child_payload(res["stdout"])
    if payload is not None:
        return payload
    why = res["error"] or f"exited with status {res['rc']} before reporting"
    tail = children.last_lines(res["stderr"], 1)
    return {"child_failed": True, "error": why + (f": {tail[0][:200]}" if tail else "")}


def platform_from_torch(info: dict) -> dict:
    """kind (dcu / amd / nvidia / cpu), arch and the reason DCU-only checks are skipped."""
    if not isinstance(info, dict):
        return {"kind": "cpu", "arch": None, "device": None,
                "reason": f"no GPU visible (the torch record is not an object: {info!r:.60})"}
    listed = info.get("devices") if isinstance(info.get("devices"), list) else []
    # a device without a text arch (or not an object) is one the checks cannot use
    devices = [d for d in listed if isinstance(d, dict) and isinstance(d.get("arch"), str) and d["arch"]]
    if info.get("child_failed") or not info.get("importable"):
        return {"kind": "cpu", "arch": None, "device": None,
                "reason": f"no GPU visible (torch not importable: {info.get('error')})"}
    if not devices:
        return {"kind": "cpu", "arch": None, "device": None, "reason": "no GPU visible"}
    dev = devices[0]
    known = archs.info(dev["arch"])
    vendor = known.vendor if known else ("nvidia" if archs.is_nvidia(dev["arch"]) else "amd")
    kind = "dcu" if vendor == "hygon" else vendor
    return {"kind": kind, "arch": dev["arch"], "device": dev,
            "reason": None if kind == "dcu" else f"not a DCU: arch {dev['arch']}"}


# --------------------------------------------------------------------------- the checks

@dataclass(frozen=True)
class Check:
    id: str
    needs: str                    # any / gpu / dcu / tool
    title: str
    run: Callable[[Context], dict]
    tool: str | None = None


def _check_arch_torch(ctx: Context) -> dict:
    p = ctx.platform
    if p["kind"] != "dcu":
        return verdict(SKIP, p["reason"])
    dev = p["device"]
    return judge_arch_string(dev.get("arch_full"), dev.get("compute_units"))


def _check_arch_rocminfo(ctx: Context) -> dict:
    path, _ = toolchain.find_tool("rocminfo", "dcu")
    res = run_logged(ctx, "arch_rocminfo", "rocminfo", [path])
    if res["error"]:
        return verdict(FAIL, f"rocminfo: {res['error']}")
    dev = ctx.platform.get("device") or {}
    return judge_rocminfo(res["stdout"], dev.get("arch_full"), dev.get("compute_units"))


def dtk_llvm_objdump() -> str | None:
    """DTK's llvm-objdump (not a system one on PATH)."""
    roots = [os.environ[v] for v in ("ROCM_PATH", "DTK_HOME") if os.environ.get(v)]
    for root in roots + list(toolchain.DCU_ROOTS):
        cand = os.path.join(root, "llvm", "bin", "llvm-objdump")
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def find(tool: str) -> str | None:
    return dtk_llvm_objdump() if tool == "llvm-objdump" else toolchain.find_tool(tool, "dcu")[0]


def _tool_check(tool: str) -> Callable[[Context], dict]:
    def run(ctx: Context) -> dict:
        cid = "tool_" + tool.replace("-", "_")
        argv = [find(tool)] + ([] if tool == "hy-smi" else ["--version"])
        res = run_logged(ctx, cid, tool, argv)
        if res["timed_out"] or (res["error"] and not res["stdout"]):
            return verdict(FAIL, f"{tool}: {res['error']}")
        result = judge_tool_version(tool, res["stdout"] + "\n" + res["stderr"])
        result["details"]["path"] = argv[0]
        return result
    return run


SMOKE_VARIANTS = {"unset": {}, "AMDGCN_USE_BUFFER_OPS=1": {"AMDGCN_USE_BUFFER_OPS": "1"},
                  "HCUGCN_USE_BUFFER_OPS=1": {"HCUGCN_USE_BUFFER_OPS": "1"}}


def smoke_runs(ctx: Context) -> dict:
    """The smoke kernel compiled and launched on the device once per buffer-op setting, each in its
    own process with a fresh Triton cache kept under the raw folder (its .amdgcn is the ISA file)."""
    if "smoke" not in ctx.state:
        runs = {}
        for i, (name, extra) in enumerate(SMOKE_VARIANTS.items()):
            where = ctx.raw / "smoke_buffer_ops" / f"variant{i}"
            where.mkdir(parents=True, exist_ok=True)
            env = child_env(ctx, "smoke_buffer_ops", BUFFER_VARS, TRITON_CACHE_DIR=str(where / "triton_cache"),
                            **extra)
            res = run_probe_child(ctx, "smoke_buffer_ops", f"variant{i}", "smoke",
                                  {"mode": "local", "targets": [None], "stderr_dir": str(where)}, env)
            rec = (res.get("results") or [res])[0]
            rec["cache_dir"] = str(where / "triton_cache")
            runs[name] = rec
        ctx.state["smoke"] = runs
    return ctx.state["smoke"]


def _check_smoke(ctx: Context) -> dict:
    return judge_smoke(smoke_runs(ctx))


def proxy_listing(ctx: Context) -> tuple[str | None, dict]:
    """The smoke kernel compiled offline for gfx942 (buffer-op variables unset): its .amdgcn."""
    if "proxy" not in ctx.state:
        where = ctx.raw / "proxy_compile"
        where.mkdir(parents=True, exist_ok=True)
        env = child_env(ctx, "proxy_compile", BUFFER_VARS, TRITON_CACHE_DIR=str(where / "triton_cache"))
        res = run_probe_child(ctx, "proxy_compile", "compile", "smoke",
                              {"mode": "offline", "targets": [PROXY_ARCH], "stderr_dir": str(where)}, env)
        rec = (res.get("results") or [res])[0]
        files = sorted(glob.glob(str(where / "triton_cache" / "**" / "*.amdgcn"), recursive=True))
        text = Path(files[0]).read_text(encoding="utf-8", errors="replace") if files else None
        ctx.state["proxy"] = (text, rec)
    return ctx.state["proxy"]


def _check_proxy(ctx: Context) -> dict:
    text, rec = proxy_listing(ctx)
    if not rec.get("ok") or text is None:
        why = rec.get("error") or (rec.get("diagnostics") or ["no .amdgcn in the Triton cache"])[0]
        return verdict(FAIL, f"offline {PROXY_ARCH} compile failed: {str(why)[:160]}")
    scan = scan_listing(text)
    if scan is None:
        return verdict(FAIL, f"{PROXY_ARCH} listing not readable")
    return verdict(PASS, f"{scan['arch']}: {_fams(scan)}", proxy=scan)


def disassemble(ctx: Context, hsaco: str) -> str | None:
    """An hsaco's listing through the DTK's llvm-objdump, else dccobjdump (which writes *.ISA)."""
    objdump = dtk_llvm_objdump()
    if objdump:
        res = run_logged(ctx, "isa_vs_proxy", "llvm_objdump", [objdump, "-d", hsaco])
        if res["rc"] == 0 and res["stdout"].strip():
            return res["stdout"]
    dcc = find("dccobjdump")
    if dcc:
        where = ctx.raw / "isa_vs_proxy" / "dccobjdump"
        where.mkdir(parents=True, exist_ok=True)
        res = run_logged(ctx, "isa_vs_proxy", "dccobjdump", [dcc, "-d", hsaco], cwd=str(where))
        side = sorted(where.glob("*.ISA"))
        if side:
            return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in side)
        return res["stdout"] or None
    return None


def _check_isa(ctx: Context) -> dict:
    smoke = smoke_runs(ctx)["unset"]
    cache = smoke.get("cache_dir") or ""
    listings = sorted(glob.glob(os.path.join(cache, "**", "*.amdgcn"), recursive=True))
    if listings:
        text = Path(listings[0]).read_text(encoding="utf-8", errors="replace")
    else:
        hsaco = sorted(glob.glob(os.path.join(cache, "**", "*.hsaco"), recursive=True))
        if not hsaco:
            return verdict(FAIL, "no .amdgcn or .hsaco in the smoke run's Triton cache")
        text = disassemble(ctx, hsaco[0])
        if text is None:
            return verdict(FAIL, "only an .hsaco in the cache and no DTK llvm-objdump / dccobjdump")
    proxy_text, _ = proxy_listing(ctx)
    return judge_isa(text, proxy_text)


TINY_PROGRAM = '''\
import torch

def f(x, y):
    return torch.relu(x * 2.0 + y)

x = torch.randn(1 << 20, device="cuda")
y = torch.randn_like(x)
out = torch.compile(f)(x, y)
torch.cuda.synchronize()
torch.testing.assert_close(out, f(x, y))
print("tiny program ok")
'''


def capture_run(ctx: Context) -> dict:
    """The tiny torch.compile program run under the capture patch; its first standalone kernel run
    through run_captured_kernel.py. Returns the kernel_run/1 document or {"capture_error": ...}."""
    if "capture" not in ctx.state:
        where = ctx.raw / "capture_run"
        where.mkdir(parents=True, exist_ok=True)
        program = where / "tiny_program.py"
        program.write_text(TINY_PROGRAM, encoding="utf-8")
        cap = where / "autotune_kernels"
        env = child_env(ctx, "capture_run")
        res = run_logged(ctx, "capture_run", "capture", [sys.executable, SCRIPTS_DIR / "autotune_capture_patch.py",
                                                         "--dir", cap, "--force-retune", program], env=env)
        kernels = sorted(p for p in cap.glob("triton_*.py")) if cap.is_dir() else []
        if res["rc"] != 0 or not kernels:
            why = res["error"] or children.last_lines(res["stderr"], 1) or ["no standalone kernel written"]
            ctx.state["capture"] = {"capture_error": f"capture failed: {why if isinstance(why, str) else why[0]}"}
            return ctx.state["capture"]
        out = where / "kernel_run.json"
        run_logged(ctx, "capture_run", "run_captured_kernel",
                   [sys.executable, SCRIPTS_DIR / "run_captured_kernel.py", kernels[0], "--json-out", out,
                    "--timeout", ctx.timeout], env=env)
        try:
            ctx.state["capture"] = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            ctx.state["capture"] = {"capture_error": f"no kernel_run/1 written ({type(exc).__name__})"}
    return ctx.state["capture"]


def _check_capture(ctx: Context) -> dict:
    doc = capture_run(ctx)
    # kernel_run/1 has its own "error" field (null when the run was ok): a failure to capture is a
    # separate key so that an ok run is never read as a failure.
    return verdict(FAIL, doc["capture_error"]) if "capture_error" in doc else judge_kernel_run(doc)


def _profiler() -> tuple[str | None, str | None]:
    for tool in ("hipprof", "rocprofv3"):
        path = find(tool)
        if path:
            return tool, path
    return None, None


def _check_profile(ctx: Context) -> dict:
    tool, path = _profiler()
    doc = capture_run(ctx)
    if "capture_error" in doc or not doc.get("command"):
        return verdict(FAIL, f"nothing to profile: {doc.get('capture_error') or 'no kernel command'}")
    where = ctx.raw / "profile"
    where.mkdir(parents=True, exist_ok=True)
    env = child_env(ctx, "capture_run")
    if tool == "hipprof":
        argv = [path, "--hip-trace", "--stats", *doc["command"]]
        patterns = ("*.hipkernel.csv",)
    else:
        argv = [path, "--kernel-trace", "--stats", "-d", where / "rocprofv3", "-o", "run", "--",
                *doc["command"]]
        patterns = ("**/*kernel_stats.csv", "**/*kernel_trace.csv")
    res = run_logged(ctx, "profile", tool, argv, env=env, cwd=str(where))
    files = [f for pat in patterns for f in sorted(glob.glob(str(where / pat), recursive=True))]
    if not files:
        why = res["error"] or (children.last_lines(res["stderr"], 1) or ["no CSV written"])[0]
        return verdict(FAIL, f"{tool}: no kernel CSV ({why[:160]})")
    text = Path(files[0]).read_text(encoding="utf-8", errors="replace")
    out = judge_profile(text, doc.get("kernel"))
    out["details"].update(tool=tool, file=os.path.relpath(files[0], ctx.raw))
    return out


def stack_record(ctx: Context) -> dict:
    """The ``triton_stack`` record of this machine's Triton (one probe child, cached)."""
    if "stack" not in ctx.state:
        info = env_probe.import_record(
            run_probe_child(ctx, "triton_stack", "triton", "triton", {}, child_env(ctx, "triton_stack")), "triton")
        pkg = env_probe.triton_record_facts(info)
        ctx.state["stack"] = triton_stack.classify(info, buffer_ops.buffer_ops_record(info, pkg))
    return ctx.state["stack"]


def _check_triton_stack(ctx: Context) -> dict:
    return judge_triton_stack(stack_record(ctx), ctx.platform["kind"])


def hcu_clang() -> str | None:
    """The clang an HCU backend runs (triton-das / FlagTree ``path_to_rocm_clang``):
    ``TRITON_HIP_CLANG_PATH``, else ``<rocm>/aillvm/bin/clang-18`` for a DTK root, ``<rocm>/llvm/bin/clang``."""
    given = os.environ.get("TRITON_HIP_CLANG_PATH")
    if given:
        return given if os.path.isfile(given) else None
    roots = [os.environ["ROCM_PATH"]] if os.environ.get("ROCM_PATH") else list(toolchain.DCU_ROOTS)
    for root in roots:
        for rel in ("aillvm/bin/clang-18", "aillvm/bin/clang", "llvm/bin/clang"):
            cand = os.path.join(root, rel)
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
    return None


TINY_IR = "define amdgpu_kernel void @tko_probe() {\n  ret void\n}\n"


def _machine_check(ctx: Context, check: dict) -> dict:
    """One ``machine`` check of a pitfall (kind ``clang_mllvm``)."""
    if check.get("kind") != "clang_mllvm":
        return verdict(SKIP, f"machine check {check.get('kind')!r} is not one this kit runs")
    clang = hcu_clang()
    if clang is None:
        return verdict(SKIP, "no clang of an HCU backend found (TRITON_HIP_CLANG_PATH, <ROCM_PATH>/aillvm)")
    where = ctx.raw / "pitfalls"
    where.mkdir(parents=True, exist_ok=True)
    ir = where / "tiny.ll"
    ir.write_text(TINY_IR, encoding="utf-8")
    arch = ctx.platform.get("arch") or "gfx936"
    options = [str(o) for o in check.get("options") or []]
    argv = [clang, "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}"] + [f"-mllvm={o}" for o in options] \
        + [str(ir), "-S", "-o", str(where / "tiny.s")]
    res = run_logged(ctx, "pitfalls", "clang_mllvm", argv)
    out = judge_clang_mllvm(res["stdout"] + "\n" + res["stderr"], res["rc"], options)
    out["details"]["clang"] = clang
    return out


def _check_pitfalls(ctx: Context) -> dict:
    """The known pitfalls of this stack and arch: machine checks run, smoke errors matched."""
    found = pitfalls.match(stack_record(ctx), ctx.platform.get("arch"))
    smoke = ctx.state.get("smoke") or {}
    errors = " ".join(str(r.get("error")) + " " + " ".join(map(str, r.get("diagnostics") or []))
                      for r in smoke.values() if isinstance(r, dict))
    by_error = set(pitfalls.error_matches(errors)) if errors.strip() else set()
    confirmed, cleared, results = [], [], {}
    for entry in found:
        if entry["id"] in by_error:
            confirmed.append(f"{entry['id']} (smoke compile error)")
        if entry.get("machine_check"):
            res = _machine_check(ctx, entry["machine_check"])
            results[entry["id"]] = res
            if res["status"] == FAIL:
                confirmed.append(f"{entry['id']} ({res['reason']})")
            elif res["status"] == PASS:
                cleared.append(entry["id"])
    listed = ", ".join(f"{e['id']} ({e['status']})" for e in found) or "none"
    details = {"found": found, "machine_checks": results}
    if confirmed:
        return verdict(FAIL, "confirmed here: " + "; ".join(confirmed), **details)
    if cleared:
        return verdict(PASS, f"not confirmed here: {', '.join(cleared)}; on this stack: {listed}", **details)
    return verdict(SKIP, f"nothing checkable here; on this stack: {listed}", **details)


def _check_copy_peak(ctx: Context) -> dict:
    where = ctx.raw / "copy_peak"
    where.mkdir(parents=True, exist_ok=True)
    store = where / "device_peaks.json"
    res = run_logged(ctx, "copy_peak", "measure", [sys.executable, SCRIPTS_DIR / "measure_peak_bandwidth.py",
                                                   "--out", store], env=child_env(ctx, "copy_peak"))
    try:
        devices = json.loads(store.read_text(encoding="utf-8")).get("devices") or []
    except (OSError, json.JSONDecodeError):
        why = res["error"] or (children.last_lines(res["stderr"], 1) or ["no record written"])[0]
        return verdict(FAIL, f"measure_peak_bandwidth: {why[:160]}")
    rec = devices[-1] if devices else {}
    # The table only: the store of this machine could hold an earlier measurement of the same device.
    peak = peaks.lookup(rec.get("name"), rec.get("arch"), store=ctx.work / "no_store.json")
    out = judge_copy_peak(rec.get("copy_gbps"), peak)
    out["details"].update(device=rec.get("name"), arch=rec.get("arch"),
                          reference=peaks.describe(peak) if peak else None)
    return out


CHECKS: tuple[Check, ...] = (
    Check("arch_torch", "any", "torch gcnArchName and CU count", _check_arch_torch),
    Check("arch_rocminfo", "dcu", "rocminfo arch, CUs, wave64, LDS", _check_arch_rocminfo, "rocminfo"),
    *(Check("tool_" + t.replace("-", "_"), "tool", f"{t} found, version parsed", _tool_check(t), t)
      for t in ("hy-smi", "hipcc", "hipprof", "rocprofv3", "dccobjdump", "llvm-objdump")),
    Check("triton_stack", "any", "Triton stack recognised, backend options read", _check_triton_stack),
    Check("smoke_buffer_ops", "dcu", "smoke kernel, buffer-op variables unset / set", _check_smoke),
    Check("pitfalls", "any", "known DCU pitfalls of this stack (references/dcu_pitfalls.yaml)", _check_pitfalls),
    Check("proxy_compile", "any", f"offline {PROXY_ARCH} proxy compile of the smoke kernel", _check_proxy),
    Check("isa_vs_proxy", "dcu", f"Triton cache ISA vs the {PROXY_ARCH} proxy", _check_isa),
    Check("capture_run", "gpu", "torch.compile capture, standalone kernel run", _check_capture),
    Check("profile", "dcu", "hipprof / rocprofv3 on the captured kernel", _check_profile),
    Check("copy_peak", "dcu", "copy peak vs the BW1000 figure", _check_copy_peak),
)
CHECK_IDS = tuple(c.id for c in CHECKS)


def select(only: list[str] | None) -> list[Check]:
    if not only:
        return list(CHECKS)
    unknown = [i for i in only if i not in CHECK_IDS]
    if unknown:
        raise InputError(f"--only: unknown check id {unknown[0]!r}; known: {', '.join(CHECK_IDS)}")
    return [c for c in CHECKS if c.id in only]


def skip_reason(check: Check, platform: dict) -> str | None:
    """Why a check cannot run here (None: it can)."""
    if check.needs == "gpu" and platform["kind"] == "cpu":
        return platform["reason"]
    if check.needs == "dcu" and platform["kind"] != "dcu":
        return platform["reason"]
    if check.tool and not find(check.tool):
        return f"{check.tool} not found"
    if check.id == "profile" and _profiler()[0] is None:
        return "hipprof not found (nor rocprofv3)"
    return None


def run_check(ctx: Context, check: Check) -> dict:
    start = time.monotonic()
    why = skip_reason(check, ctx.platform)
    if why:
        result = verdict(SKIP, why)
    else:
        try:
            result = check.run(ctx)
        except Exception as exc:  # a check's own bug is that check's failure, not the kit's
            result = verdict(FAIL, f"check raised {type(exc).__name__}: {exc}")
    raw = sorted(os.path.relpath(p, ctx.raw) for p in (ctx.raw / check.id).rglob("*") if p.is_file()) \
        if (ctx.raw / check.id).is_dir() else []
    return {"id": check.id, "title": check.title, "needs": check.needs, "status": result["status"],
            "reason": result["reason"], "seconds": round(time.monotonic() - start, 3),
            "raw_files": raw, "details": result["details"]}


def probe_platform(ctx: Context) -> dict:
    info = run_probe_child(ctx, "platform", "torch", "torch", {}, child_env(ctx, "platform"))
    platform = platform_from_torch(info)
    platform["torch"] = {k: info.get(k) for k in ("version", "hip", "cuda", "backend", "device_count")}
    return platform


def run_all(out_dir: str | os.PathLike, timeout: float = DEFAULT_TIMEOUT_S,
            only: list[str] | None = None) -> dict:
    """Run the selected checks; write the raw folder and its archive; return the payload."""
    checks = select(only)
    out = Path(out_dir)
    raw, work = out / "dcu_validation_raw", out / "work"
    shutil.rmtree(raw, ignore_errors=True)
    raw.mkdir(parents=True)
    work.mkdir(parents=True, exist_ok=True)
    ctx = Context(raw=raw, work=work, timeout=timeout, platform={}, state={})
    ctx.platform = probe_platform(ctx)
    results = [run_check(ctx, c) for c in checks]
    try:
        stack = stack_record(ctx)
    except Exception as exc:  # the record is extra: its own failure must not lose the checks
        stack = {"name": None, "why": [f"stack not read: {type(exc).__name__}: {exc}"]}
    counts = {s: sum(r["status"] == s for r in results) for s in (PASS, FAIL, SKIP)}
    archive = out / "dcu_validation_raw.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(raw, arcname="dcu_validation_raw")
    return {"out_dir": str(out.resolve()), "timeout_s": timeout, "only": list(only) if only else None,
            "platform": {k: v for k, v in ctx.platform.items()}, "triton_stack": stack,
            "checks": results, "counts": counts,
            "archive": archive.name, "raw_dir": raw.name}


def table_lines(payload: dict) -> list[str]:
    """The pass / fail / skipped table of a dcu_validation/1 payload."""
    try:
        return _table_lines(payload)
    except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
        raise InputError(f"dcu_validation/1 payload: a field has the wrong type or is missing "
                         f"({type(exc).__name__}: {exc})") from None


def _table_lines(payload: dict) -> list[str]:
    rows = [(c["id"], c["status"], c["reason"]) for c in payload["checks"]]
    w1 = max([len("check")] + [len(r[0]) for r in rows])
    w2 = max([len("status")] + [len(r[1]) for r in rows])
    lines = [f"{'check':<{w1}}  {'status':<{w2}}  reason", f"{'-' * w1}  {'-' * w2}  {'-' * 6}"]
    lines += [f"{i:<{w1}}  {s:<{w2}}  {r}" for i, s, r in rows]
    c = payload["counts"]
    lines.append(f"{c[PASS]} pass, {c[FAIL]} fail, {c[SKIP]} skipped "
                 f"(platform: {payload['platform']['kind']}"
                 f"{', ' + payload['platform']['arch'] if payload['platform'].get('arch') else ''})")
    return lines
