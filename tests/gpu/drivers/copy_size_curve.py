"""Copy bandwidth against buffer size on one GPU: is a short kernel's copy floor the 1 GiB peak?

    python tests/gpu/drivers/copy_size_curve.py --json-out OUT/copy_size_curve.json

The speed-of-light floor divides a kernel's bytes by the copy peak measured on a 1 GiB buffer.
A copy of a few MB may not reach that rate (launch latency and ramp-up are a larger share), so a
short kernel could sit above its floor for no fault of its own. This times dst.copy_(src) with the
project's timing core (do_bench median, L2 flushed between repetitions) from 1 MiB to 2 GiB and
prints GB/s and the share of the 1 GiB rate. Not a pytest test: it needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from tko.measure import peaks  # noqa: E402

SIZES_MIB = (1, 4, 16, 64, 128, 256, 512, 1024, 2048)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json-out", required=True)
    p.add_argument("--rep-ms", type=float, default=100.0)
    args = p.parse_args()
    rows = [peaks.measure_copy(mib << 20, rep_ms=args.rep_ms, warmup_ms=20) for mib in SIZES_MIB]
    ref = next(r for r in rows if r["buffer_bytes"] == 1 << 30)["copy_gbps"]
    print("| buffer MiB | bytes moved MB | median us | copy GB/s | of 1 GiB rate |")
    print("|---|---|---|---|---|")
    for mib, r in zip(SIZES_MIB, rows):
        r["share_of_1gib"] = r["copy_gbps"] / ref
        print(f"| {mib} | {r['bytes_moved'] / 1e6:.1f} | {r['median_ms'] * 1e3:.1f} | "
              f"{r['copy_gbps']:.0f} | {r['share_of_1gib'] * 100:.1f} % |")
    Path(args.json_out).write_text(json.dumps({"schema": "copy_size_curve/1", "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
