"""The ``$TKO_SITE_HOOKS`` entries of the patch floor, run in each process of a program.

* :func:`capture`: the autotune capture patch (``tko.patch.capture``), configured by the same
  ``TRITON_CAPTURE_*`` variables. Rank 0 and a process without a rank record into
  ``$TRITON_CAPTURE_DIR`` itself; rank R > 0 into ``$TRITON_CAPTURE_DIR/rank<R>/`` (its own
  ``autotune.log`` and standalone files), from the moment its rank is known (at start under
  torchrun; at ``init_process_group`` for spawned workers). Every record carries the rank tags.
* :func:`pins`: the config pins of ``$TKO_PINS`` (``tko.patch.pins``).
"""

from __future__ import annotations

from pathlib import Path

from ..base import ranks

RANK_DIR = "rank{rank}"


def capture() -> None:
    from . import capture as cap

    ranks.watch()
    cap.install()
    base = cap.settings().capture_dir

    def per_rank(ident: dict) -> None:
        if ident["rank"]:
            s = cap.settings()
            s.capture_dir = Path(base) / RANK_DIR.format(rank=ident["rank"])
            cap._set_capture_off(cap.check_capture_dir(s))

    ranks.on_rank(per_rank)


def pins() -> None:
    import os

    from . import pins as pn

    if os.environ.get("TKO_PINS"):
        pn.install_from_env(os.environ)
