"""Does the chunked RMSNorm's pass 2 find its row in L2, and do the rows in flight decide it?

    TRITON_CACHE_DIR=D1 TORCHINDUCTOR_CACHE_DIR=D2 \\
      python tests/gpu/drivers/l2_rows_probe.py --out-dir OUT [--cols 65536] [--dtype fp16]
    ncu --clock-control none --profile-from-start off --csv --metrics dram__bytes_read.sum,dram__bytes_write.sum,\\
      lts__t_sector_hit_rate.pct -k regex:rms python tests/gpu/drivers/l2_rows_probe.py \\
      --out-dir OUT --once

The guarded RMSNorm (``_rms_norm_guarded_kernel``, 43 registers at 32 warps: one program per SM)
reads a 64k row at 89.6 % of copy and the chunked kernel (32 registers: two per SM) at 85.6 %, but at
128k the guarded one falls to 63.5 % and the chunked one holds 77.7 % (call17_row_guard). A row in
flight keeps its bytes in L2 until pass 2 reads them again: 132 SMs x 1 or 2 rows x 128 KiB (64k
fp16) is 16.5 or 33 MiB of the H200's 60 MB L2, and at 128k twice that. This times copies of the
guarded kernel with one lever at a time on the rows in flight and on what competes for L2:

- ``y_<hint>``: the output stored with no hint (``plain``), ``evict_first`` or the streaming
  ``.cs`` modifier, so that written rows leave L2 first;
- ``grid_<form>``: one program a row (``rows``, the library's), a persistent grid of 1 or 2
  programs per SM (``sm1`` / ``sm2``) walking the rows, or ``pipe``: one program per SM whose
  pass 2 over a row runs pass 1 of its next row (``_rms_norm_pipelined_probe``);
- ``reg_<n>``: ``auto`` or ``maxnreg`` 32 (two programs per SM fit at 32 warps);
- ``@CHUNKxWARPS``: another launch than the plan's 16384 x 32 (``probe-cs-rows-auto@8192x32``).

``split<S>[-fresh]@CHUNKxWARPS``: ``_rms_norm_split_probe``, each row in S parts on as many
programs, the parts' sums met in an fp32 slot per row (``-fresh``: the slots allocated at every
call instead of kept). split2 read 69-78 % of copy (call27_split_rows). split4 never finished
there: its compile launch ran on two programs, so a row's four parts fell to one program in
different rounds and it waited on itself. Every launch now has a multiple of S programs, all
resident at once: split4@8192x16 ran, at 80.0 % (call32).

``held<H>[-sm1]@CHUNKxWARPS``: ``_rms_norm_held_probe``, a row of four chunks all loaded in pass 1
and H of them kept in registers for pass 2 (the rest read again from L2); ``-sm1`` a persistent
grid of one program per SM. With all four held pass 2 reads only the weight, but a 64k fp16 row
is half an SM's registers: one row per SM, and at 32 warps (64 registers) ptxas spills.

``guarded`` / ``chunked`` are the library's kernels as the plan launches them (``probe_plain_rows_auto``
must read as ``guarded`` does); ``coordinate_descent``, ``max_autotune`` and ``inductor_default``
are Inductor's kernel in that mode. Every output is checked against the fp32 reference. With
``--once`` each kernel runs once after its warm-up, in the order printed, for ``ncu`` to count
DRAM bytes (pass 2 served from L2 reads the row from DRAM once). Not a pytest test: it needs a
GPU. Writes OUT/l2_rows_probe.{json,md}.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from tko.measure import peaks  # noqa: E402
from tko.remedies import row_plan, row_triton, rowkernels as rk, rowkernel_sweep as sweep  # noqa: E402
from tko.measure.bench import time_fn  # noqa: E402

CHUNK, WARPS = 16384, 32          # the sm_90 plan's RMSNorm launch (CHUNK_PLANS)
Y_HINTS = ("plain", "evict_first", "cs")
GRIDS = ("rows", "sm1", "sm2", "pipe")
REGS = ("auto", "32")


@triton.jit
def _guarded_row(X, Y, W, row, stride_x, stride_y, n_rows, n_cols, eps, CHUNK: tl.constexpr,
                 N_CHUNKS: tl.constexpr, Y_EVICT: tl.constexpr, Y_CS: tl.constexpr):
    # _rms_norm_guarded_kernel's body (HAS_W, no stats) on one row
    cols = tl.arange(0, CHUNK)
    ok = tl.full([CHUNK], 0, tl.int32) + row < n_rows
    x_off, y_off = row * stride_x, row * stride_y
    end = N_CHUNKS * CHUNK
    s2 = tl.zeros([CHUNK], dtype=tl.float32)
    start = 0
    while start < end:
        x = tl.load(X + (x_off + start + cols), mask=ok, other=0.0, eviction_policy="evict_last")
        x = x.to(tl.float32)
        s2 += x * x
        start += CHUNK
    rstd = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / n_cols + tl.cast(eps, tl.float32))
    start = 0
    while start < end:
        c = start + cols
        x = tl.load(X + (x_off + c), mask=ok, other=0.0, eviction_policy="evict_first")
        w = tl.load(W + c, eviction_policy="evict_last")
        y = (x.to(tl.float32) * rstd * w.to(tl.float32)).to(Y.dtype.element_ty)
        if Y_CS:
            tl.store(Y + (y_off + c), y, mask=ok, cache_modifier=".cs")
        elif Y_EVICT:
            tl.store(Y + (y_off + c), y, mask=ok, eviction_policy="evict_first")
        else:
            tl.store(Y + (y_off + c), y, mask=ok)
        start += CHUNK


@triton.jit
def _rms_norm_guarded_probe(X, Y, W, stride_x, stride_y, n_rows, n_cols, eps, CHUNK: tl.constexpr,
                            N_CHUNKS: tl.constexpr, Y_EVICT: tl.constexpr, Y_CS: tl.constexpr,
                            PERSIST: tl.constexpr):
    """``_rms_norm_guarded_kernel`` with the output's store hint switched, one program a row or
    a persistent grid walking the rows (see above)."""
    pid = tl.program_id(0)
    if PERSIST:
        for row in range(pid, n_rows, tl.num_programs(0)):
            _guarded_row(X, Y, W, row, stride_x, stride_y, n_rows, n_cols, eps, CHUNK, N_CHUNKS,
                         Y_EVICT, Y_CS)
    else:
        _guarded_row(X, Y, W, pid, stride_x, stride_y, n_rows, n_cols, eps, CHUNK, N_CHUNKS,
                     Y_EVICT, Y_CS)


@triton.jit
def _rms_norm_pipelined_probe(X, Y, W, stride_x, stride_y, n_rows, n_cols, eps, CHUNK: tl.constexpr,
                              N_CHUNKS: tl.constexpr, Y_EVICT: tl.constexpr, Y_CS: tl.constexpr):
    """A persistent grid whose pass 2 over one row also runs pass 1 of the program's next row,
    chunk by chunk: the next row's DRAM loads are in flight while this row is read back from L2
    and written, and only the reduction is left between rows."""
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    cols = tl.arange(0, CHUNK)
    end = N_CHUNKS * CHUNK
    ok = tl.full([CHUNK], 0, tl.int32) + pid < n_rows
    s2 = tl.zeros([CHUNK], dtype=tl.float32)
    start = 0
    while start < end:
        x = tl.load(X + (pid * stride_x + start + cols), mask=ok, other=0.0, eviction_policy="evict_last")
        x = x.to(tl.float32)
        s2 += x * x
        start += CHUNK
    for row in range(pid, n_rows, step):
        rstd = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / n_cols + tl.cast(eps, tl.float32))
        nxt = row + step
        ok = tl.full([CHUNK], 0, tl.int32) + row < n_rows
        ok_next = tl.full([CHUNK], 0, tl.int32) + nxt < n_rows
        s2 = tl.zeros([CHUNK], dtype=tl.float32)
        start = 0
        while start < end:
            c = start + cols
            xn = tl.load(X + (nxt * stride_x + c), mask=ok_next, other=0.0, eviction_policy="evict_last")
            xn = xn.to(tl.float32)
            s2 += xn * xn
            x = tl.load(X + (row * stride_x + c), mask=ok, other=0.0, eviction_policy="evict_first")
            w = tl.load(W + c, eviction_policy="evict_last")
            y = (x.to(tl.float32) * rstd * w.to(tl.float32)).to(Y.dtype.element_ty)
            if Y_CS:
                tl.store(Y + (row * stride_y + c), y, mask=ok, cache_modifier=".cs")
            elif Y_EVICT:
                tl.store(Y + (row * stride_y + c), y, mask=ok, eviction_policy="evict_first")
            else:
                tl.store(Y + (row * stride_y + c), y, mask=ok)
            start += CHUNK


@triton.jit
def _rms_norm_split_probe(X, Y, W, Acc, Cnt, stride_x, stride_y, n_rows, n_cols, eps,
                          CHUNK: tl.constexpr, N_CHUNKS: tl.constexpr, SPLIT: tl.constexpr):
    """A persistent grid over parts of rows (SPLIT per row, N_CHUNKS chunks each): a program sums
    its part's squares, adds them to the row's fp32 slot, waits for the row's other parts (the
    grid is no larger than what the GPU holds at once, and a row's parts run in the same round on
    programs pid ^ 1 ..., so the wait ends), then normalizes its part from L2. The last part to
    read the sum zeroes the slot and the counter again for the next launch."""
    pid = tl.program_id(0)
    n_units = n_rows * SPLIT
    cols = tl.arange(0, CHUNK)
    part = N_CHUNKS * CHUNK
    for u in range(pid, n_units, tl.num_programs(0)):
        row = u // SPLIT
        ok = tl.full([CHUNK], 0, tl.int32) + row < n_rows
        x_off = row * stride_x + (u % SPLIT) * part
        y_off = row * stride_y + (u % SPLIT) * part
        s2 = tl.zeros([CHUNK], dtype=tl.float32)
        start = 0
        while start < part:
            x = tl.load(X + (x_off + start + cols), mask=ok, other=0.0, eviction_policy="evict_last")
            x = x.to(tl.float32)
            s2 += x * x
            start += CHUNK
        tl.atomic_add(Acc + row, tl.sum(s2, axis=0), sem="relaxed")
        seen = tl.atomic_add(Cnt + row, 1, sem="acq_rel") + 1
        while seen < SPLIT:
            seen = tl.atomic_add(Cnt + row, 0, sem="acquire")
        total = tl.atomic_add(Acc + row, 0.0, sem="relaxed")
        if tl.atomic_add(Cnt + row, 1, sem="acq_rel") == 2 * SPLIT - 1:
            tl.atomic_xchg(Acc + row, 0.0, sem="relaxed")
            tl.atomic_xchg(Cnt + row, 0, sem="release")
        rstd = 1.0 / tl.sqrt(total / n_cols + tl.cast(eps, tl.float32))
        start = 0
        while start < part:
            c = start + cols
            x = tl.load(X + (x_off + c), mask=ok, other=0.0, eviction_policy="evict_first")
            w = tl.load(W + ((u % SPLIT) * part + c), eviction_policy="evict_last")
            y = (x.to(tl.float32) * rstd * w.to(tl.float32)).to(Y.dtype.element_ty)
            tl.store(Y + (y_off + c), y, mask=ok, cache_modifier=".cs")
            start += CHUNK


@triton.jit
def _held_sq(x):
    a = x.to(tl.float32)
    return tl.sum(a * a, axis=0)


@triton.jit
def _held_out(X, Y, W, x_off, y_off, c, x, rstd, ok, HELD: tl.constexpr):
    # pass 2 on one chunk: the chunk as pass 1 left it in registers, or (not HELD) read again
    if not HELD:
        x = tl.load(X + (x_off + c), mask=ok, other=0.0, eviction_policy="evict_first")
    w = tl.load(W + c, eviction_policy="evict_last")
    y = (x.to(tl.float32) * rstd * w.to(tl.float32)).to(Y.dtype.element_ty)
    tl.store(Y + (y_off + c), y, mask=ok, cache_modifier=".cs")


@triton.jit
def _held_row(X, Y, W, row, stride_x, stride_y, n_rows, n_cols, eps, CHUNK: tl.constexpr,
              HELD: tl.constexpr):
    cols = tl.arange(0, CHUNK)
    ok = tl.full([CHUNK], 0, tl.int32) + row < n_rows
    x_off, y_off = row * stride_x, row * stride_y
    x0 = tl.load(X + (x_off + cols), mask=ok, other=0.0, eviction_policy="evict_last")
    x1 = tl.load(X + (x_off + CHUNK + cols), mask=ok, other=0.0, eviction_policy="evict_last")
    x2 = tl.load(X + (x_off + 2 * CHUNK + cols), mask=ok, other=0.0, eviction_policy="evict_last")
    x3 = tl.load(X + (x_off + 3 * CHUNK + cols), mask=ok, other=0.0, eviction_policy="evict_last")
    s2 = _held_sq(x0) + _held_sq(x1) + _held_sq(x2) + _held_sq(x3)
    rstd = 1.0 / tl.sqrt(s2 / n_cols + tl.cast(eps, tl.float32))
    # the chunks read first are the ones given up first when HELD < 4
    _held_out(X, Y, W, x_off, y_off, cols, x0, rstd, ok, HELD >= 4)
    _held_out(X, Y, W, x_off, y_off, CHUNK + cols, x1, rstd, ok, HELD >= 3)
    _held_out(X, Y, W, x_off, y_off, 2 * CHUNK + cols, x2, rstd, ok, HELD >= 2)
    _held_out(X, Y, W, x_off, y_off, 3 * CHUNK + cols, x3, rstd, ok, HELD >= 1)


@triton.jit
def _rms_norm_held_probe(X, Y, W, stride_x, stride_y, n_rows, n_cols, eps, CHUNK: tl.constexpr,
                         HELD: tl.constexpr, PERSIST: tl.constexpr):
    """A row of four CHUNKs loaded at once in pass 1 and HELD of them kept in registers, as
    loaded, for pass 2 (the rest read again from L2): with all four held pass 2 reads only the
    weight, at the price of one row per SM (a 64k fp16 row is half the register file)."""
    pid = tl.program_id(0)
    if PERSIST:
        for row in range(pid, n_rows, tl.num_programs(0)):
            _held_row(X, Y, W, row, stride_x, stride_y, n_rows, n_cols, eps, CHUNK, HELD)
    else:
        _held_row(X, Y, W, pid, stride_x, stride_y, n_rows, n_cols, eps, CHUNK, HELD)


def split_fn(x, w, split: int, chunk: int, warps: int, fresh: bool):
    """``_rms_norm_split_probe`` on a grid of as many programs as the GPU holds at once (from the
    compiled kernel's registers and warps, a multiple of ``split``: a row's parts run in one
    round on programs that are all resident, or the first waits for ever), its workspace kept
    across calls (zeroed by the kernel) or, ``fresh``, allocated zeroed at every call."""
    n_rows, n_cols = x.shape
    props = torch.cuda.get_device_properties(x.device)
    work = torch.zeros(2, n_rows, device=x.device, dtype=torch.float32)
    consts = dict(CHUNK=chunk, N_CHUNKS=n_cols // (split * chunk), SPLIT=split, num_warps=warps)

    def launch(grid, ws):
        y = torch.empty_like(x)
        k = _rms_norm_split_probe[(grid,)](x, y, w, ws[0], ws[1].view(torch.int32), x.stride(0), y.stride(0),
                                           n_rows, n_cols, sweep.RMS_EPS, **consts)
        return y, k

    _, k = launch(split, work)      # compiles; one row's parts, on programs resident together
    threads = 32 * warps
    regs = -(-max(k.n_regs, 1) // 8) * 8 * threads          # registers are granted 8 a thread at a time
    smem = getattr(props, "shared_memory_per_multiprocessor", 228 * 1024)
    per_sm = min(65536 // regs, 2048 // threads, smem // (k.metadata.shared + 1024))
    grid = (props.multi_processor_count * per_sm) // split * split
    if grid < split:
        raise ValueError(f"split{split}: {per_sm} programs per SM cannot hold a row's parts at once")
    print(f"split{split}@{chunk}x{warps}: {k.n_regs} registers, {per_sm} programs per SM, grid {grid}", flush=True)

    def run():
        ws = torch.zeros(2, n_rows, device=x.device, dtype=torch.float32) if fresh else work
        return launch(grid, ws)[0]
    return run


def held_fn(x, w, held: int, persist: bool, chunk: int, warps: int):
    n_rows, n_cols = x.shape
    if n_cols != 4 * chunk:
        raise ValueError(f"held{held}: the row must be 4 chunks of {chunk}")
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    programs = min(n_rows, sms) if persist else n_rows

    def run():
        y = torch.empty_like(x)
        _rms_norm_held_probe[(programs,)](x, y, w, x.stride(0), y.stride(0), n_rows, n_cols,
                                          sweep.RMS_EPS, CHUNK=chunk, HELD=held, PERSIST=persist,
                                          num_warps=warps)
        return y
    return run


def probe_fn(x, w, y_hint: str, grid: str, regs: str, chunk: int = CHUNK, warps: int = WARPS):
    n_rows, n_cols = x.shape
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    per_sm = 1 if grid == "pipe" else int(grid[2:] or 0) if grid.startswith("sm") else 0
    programs = min(n_rows, sms * per_sm) if per_sm else n_rows
    extra = {} if regs == "auto" else {"maxnreg": int(regs)}

    def run():
        y = torch.empty_like(x)
        if grid == "pipe":
            _rms_norm_pipelined_probe[(programs,)](
                x, y, w, x.stride(0), y.stride(0), n_rows, n_cols, sweep.RMS_EPS, CHUNK=chunk,
                N_CHUNKS=n_cols // chunk, Y_EVICT=y_hint == "evict_first", Y_CS=y_hint == "cs",
                num_warps=warps, **extra)
            return y
        _rms_norm_guarded_probe[(programs,)](
            x, y, w, x.stride(0), y.stride(0), n_rows, n_cols, sweep.RMS_EPS, CHUNK=chunk,
            N_CHUNKS=n_cols // chunk, Y_EVICT=y_hint == "evict_first", Y_CS=y_hint == "cs",
            PERSIST=grid != "rows", num_warps=warps, **extra)
        return y
    return run


def library_fn(x, w, guarded: bool):
    plan = row_plan.RowPlan("rms_norm", x.shape[0], x.shape[-1], row_plan.next_pow2(x.shape[-1]), WARPS,
                      row_plan.device_limit(x.device), chunk=CHUNK,
                      n_chunks=row_plan.unrolled_chunks(x.shape[-1], CHUNK), row_guard=guarded)
    return lambda: row_triton.launch_forward(plan, x, w, None, sweep.RMS_EPS)[0]


def cases(x, w, variants):
    for name in variants:
        if name in ("guarded", "chunked"):
            yield name, library_fn(x, w, name == "guarded")
        elif name.startswith("held"):
            spec, _, launch = name.partition("@")
            chunk, warps = map(int, launch.split("x")) if launch else (CHUNK, WARPS)
            yield name, held_fn(x, w, int(spec[4]), spec.endswith("-sm1"), chunk, warps)
        elif name.startswith("split"):
            spec, _, launch = name.partition("@")
            chunk, warps = map(int, launch.split("x"))
            yield name, split_fn(x, w, int(spec[5]), chunk, warps, spec.endswith("fresh"))
        elif name in sweep.INDUCTOR_MODES:
            fn_c, _, _ = sweep.compiled(name, "rms_norm", lambda f: f(x, w))
            yield name, (lambda f=fn_c: f(x, w))
        else:
            spec, _, launch = name.partition("@")
            _, y_hint, grid, regs = spec.split("-")
            chunk, warps = map(int, launch.split("x")) if launch else (CHUNK, WARPS)
            yield name, probe_fn(x, w, y_hint, grid, regs, chunk, warps)


def main() -> int:
    default = ["guarded", "chunked", *(f"probe-{y}-{g}-{r}" for y, g, r in
                                       itertools.product(Y_HINTS, GRIDS, REGS)), "coordinate_descent"]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--cols", type=int, default=65536)
    p.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
    p.add_argument("--rep-ms", type=float, default=40.0)
    p.add_argument("--repeat", type=int, default=3, help="rounds over the kernels (noise)")
    p.add_argument("--variants", default=",".join(default))
    p.add_argument("--once", action="store_true", help="one checked run each, for ncu")
    args = p.parse_args()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = (1 << 27) // args.cols
    x, w = sweep.make_inputs("rms_norm", args.dtype, rows, args.cols, "cuda")
    ref = rk.REFERENCES["rms_norm"](x, w)
    copy = None if args.once else peaks.measure_copy(1 << 30, rep_ms=200)["copy_gbps"]
    lines = [f"copy {copy or 0:.1f} GB/s; {rows} x {args.cols} {args.dtype}; {torch.cuda.get_device_name()}",
             "| variant | us (per round) | % of copy | correct |", "|---|---|---|---|"]
    runs = []
    for name, fn in cases(x, w, args.variants.split(",")):
        rec = {"variant": name}
        try:
            ok, err = sweep.check(fn(), ref, args.dtype)
            rec.update(correct=ok, max_err=err)
            if args.once:
                torch.cuda.synchronize()
                print(f"ONCE {name}", flush=True)
                torch.cuda.profiler.start()     # ncu --profile-from-start off: this launch only
                fn()
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()
                runs.append(rec)
                continue
            times = [time_fn(fn, warmup_ms=10, rep_ms=args.rep_ms).median_ms for _ in range(args.repeat)]
            pct = 100 * sweep.moved_bytes((x, w)) / (min(times) * 1e-3) / 1e9 / copy
            rec.update(us=[round(v * 1e3, 2) for v in times], pct_of_copy=round(pct, 1))
            lines.append(f"| {name} | {' / '.join(f'{v * 1e3:.1f}' for v in times)} | {pct:.1f} % | {ok} |")
        except Exception as e:  # a launch that fails is a row of the table, not the end
            rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            lines.append(f"| {name} | failed: {rec['error']} |")
        print(lines[-1], flush=True)
        runs.append(rec)
    stem = "l2_rows_probe_once" if args.once else "l2_rows_probe"
    (out_dir / f"{stem}.md").write_text("\n".join(lines) + "\n")
    (out_dir / f"{stem}.json").write_text(json.dumps(
        {"schema": "l2_rows_probe/1", "copy_gbps": copy, "rows": rows, "cols": args.cols,
         "dtype": args.dtype, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
         "triton": triton.__version__, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
