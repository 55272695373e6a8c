"""On a GPU machine (the H200): investigate.py on a two-rank torchrun program (issue #33).

Both ranks share one GPU over gloo (examples/ddp_two_ranks picks NCCL only with a GPU per rank):
the capture records rank-tagged kernels per rank, the profile writes a trace per rank and the
cross-rank view, the report opens with "Ranks", and the remedy trials' baseline runs every rank.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_investigate_torchrun_two_ranks(tmp_path):
    out = tmp_path / "inv"
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    cmd = [sys.executable, str(ROOT / "scripts" / "investigate.py"), "--out", str(out), "--trials-runs", "2",
           "--", torchrun, "--standalone", "--nproc_per_node", "2",
           str(ROOT / "examples" / "ddp_two_ranks" / "train.py"), "--steps", "20"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    print(done.stdout[-4000:], done.stderr[-4000:])
    cap = out / "capture"
    events = [json.loads(x) for x in (cap / "autotune_kernels" / "autotune.log").read_text().splitlines()]
    assert events and all(e.get("rank") == 0 and e.get("world_size") == 2 for e in events)
    assert (cap / "autotune_kernels" / "rank1" / "autotune.log").is_file()
    view = json.loads((cap / "profile" / "profile.ranks.json").read_text())
    assert [r["rank"] for r in view["ranks"]] == [0, 1]
    assert all(r["basis"] == "gpu kernels" for r in view["ranks"])
    profile = json.loads((cap / "profile" / "profile.json").read_text())
    assert profile["kernels"] and profile["ranks"]["slowest"]["rank"] in (0, 1)
    inv = json.loads((out / "investigation.json").read_text())
    assert inv["ranks"]["verdict"]
    assert "## Ranks" in (out / "investigation.md").read_text()
    trials = json.loads((out / "trials" / "trials.json").read_text())
    base = trials["arms"][0]
    assert base["name"] == "baseline" and base["status"] == "ok", base
