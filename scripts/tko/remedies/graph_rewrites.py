"""Model-level rewrites applied inside the unchanged program: one registry of the FX graph passes
that a trial arm turns on.

Each rewrite is a module of ``tko.remedies`` holding ``ARM`` (the trial arm's name, also the
``arm`` of its ``references/rewrite_catalog.yaml`` entry), ``ENV`` (the variable that turns it on in
a trial process), ``PREFIX`` (its stderr line), ``NOUN`` (what it replaces, for that line) and
``rewrite(graph) -> int`` (replace every match in a ``torch.fx.Graph``, return how many). Every pass
runs as an Inductor pre-grad custom pass, so AOT autograd differentiates the replacement, and prints
``<PREFIX>: replaced N <NOUN>(s) in G graph(s)`` at exit (and what the module's optional
``detail()`` adds); a trial run whose pass replaced nothing
measured the baseline again and is ``not applied``.
"""

from __future__ import annotations

import atexit
import importlib
import re
import sys

from . import fx_match

# arm -> module under tko.remedies (each module's ARM is its key here)
REWRITES = {
    "sdpa": "attention_rewrite",
    "rms_norm_fn": "norm_rewrite",
    "gate_up_fused": "gate_rewrite",
    "ce_chunked": "cross_entropy_rewrite",
    "segment_reduce": "scatter_rewrite",
}


def module(arm: str):
    return importlib.import_module(f"{__package__}.{REWRITES[arm]}")


def active(env: dict) -> list:
    """The rewrite modules ``env`` turns on."""
    return [m for m in map(module, REWRITES) if env.get(m.ENV) == "1"]


class _Counter:
    def __init__(self, mod):
        self.mod, self.replaced, self.graphs = mod, 0, 0

    def __deepcopy__(self, memo):
        """torch.compile deep-copies Inductor's config, this pass with it: one counter, not a copy
        (a module does not copy, and a copy's counts would never be reported)."""
        return self

    def __getstate__(self) -> dict:
        """What Inductor's cache key pickles of this pass (torch <= 2.12 keys on the whole config): the
        rewrite's module and a hash of its source, never the counts, so every run of one arm keys the
        same and reads the compile cache (a module does not pickle: every compile was a cache bypass)."""
        import hashlib
        from pathlib import Path

        source = Path(self.mod.__file__).read_bytes() if getattr(self.mod, "__file__", None) else b""
        return {"rewrite": self.mod.__name__, "source": hashlib.sha256(source).hexdigest()}

    def __call__(self, graph) -> None:
        found = apply(self.mod, graph)
        self.replaced += found
        self.graphs += 1

    def report(self) -> None:
        detail = getattr(self.mod, "detail", lambda: "")()
        print(f"{self.mod.PREFIX}: replaced {self.replaced} {self.mod.NOUN}(s) in {self.graphs} graph(s){detail}",
              file=sys.stderr, flush=True)


def apply(mod, graph) -> int:
    """``mod.rewrite(graph)``, then the graph checked and each node it added given its example value
    (as Dynamo records them); returns how many it replaced."""
    found = mod.rewrite(graph)
    if found:
        graph.lint()
        fx_match.fill_example_values(graph)
    return found


def install(mod) -> None:
    """Add ``mod.rewrite`` to Inductor's pre-grad custom passes (any pass already set is kept)."""
    import torch._inductor.config as cfg

    counter = _Counter(mod)
    current = cfg.pre_grad_custom_pass
    passes = list(current) if isinstance(current, (list, tuple)) else ([current] if current else [])
    if passes:
        def chained(graph, _passes=tuple(passes) + (counter,)):
            for p in _passes:
                p(graph)
        cfg.pre_grad_custom_pass = chained
    else:
        cfg.pre_grad_custom_pass = counter
    atexit.register(counter.report)


def install_from_env(env: dict) -> None:
    for mod in active(env):
        install(mod)


def check_trial(record: dict, env: dict, stderr: str) -> None:
    """A run with a rewrite on that replaced nothing measured the baseline again: not applied."""
    for mod in active(env):
        lines = [ln for ln in stderr.splitlines() if ln.startswith(mod.PREFIX + ":")]
        said = lines[-1].split(":", 1)[1].strip() if lines else None
        record["replaced"] = said
        if not re.search(rf"replaced [1-9]\d* {re.escape(mod.NOUN)}", said or ""):
            record["status"] = "not applied"
            record["error"] = (f"no {mod.NOUN} was replaced: " + (said or f"no {mod.PREFIX} line")
                               + f" ({mod.NOT_FOUND})")
            return


def retry_env(env: dict, said: str, nan_outputs: bool = False) -> dict | None:
    """The environment to add for a retry of a failed run (``said``: its stderr) or of one whose
    outputs came out NaN (``said``: its pass's line), from the active rewrites that know their own
    failure (a module's optional ``retry_env(said, nan_outputs)``); None when none does."""
    import os

    effective = dict(os.environ, **env)     # what the run had: a retry must change it
    for mod in active(env):
        retry = getattr(mod, "retry_env", lambda _said, _nan: None)(said, nan_outputs)
        if retry and any(effective.get(k) != v for k, v in retry.items()):
            return retry
    return None


def change_said(env: dict, said: str | None, planned: str) -> str:
    """The change an arm measured, from what its pass said in the last run (a module's optional
    ``change_text(said)``: an attention swap that took is_causal=True measured that, not the
    explicit mask of the catalog's generic replacement); ``planned`` when no module says more."""
    for mod in active(env):
        text = getattr(mod, "change_text", lambda _said: None)(said or "")
        if text:
            return text
    return planned
