"""Started by Python in every process of a program the skill runs (this folder is prepended to
``PYTHONPATH``, which child processes inherit): torchrun's ranks, ``torch.multiprocessing.spawn``
workers, the Python processes a shell script starts. The user's script still runs as the real
``__main__``, exactly as typed.

``$TKO_SITE_HOOKS`` lists ``module:function`` entries of the skill's package (``tko.patch.capture:
install``, ...), called in order with ``$TKO_SITE_SCRIPTS`` (the folder holding ``tko``) on the
path only while they import; a hook that fails says so on stderr and never stops the program. An
existing ``sitecustomize`` further down the path runs afterwards, as it would have without this one.
Processes of the multiprocessing and Inductor machinery (resource tracker, compile workers) and
the skill's own launchers (``$TKO_SITE_SKIP_ARGV0``, which install the same hooks themselves) get
no hook. This file imports nothing from the skill at module level.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _say(msg):
    try:
        sys.stderr.write(f"tko-site: {msg}\n")
    except Exception:
        pass


def _skip():
    argv0 = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    skip = [s for s in os.environ.get("TKO_SITE_SKIP_ARGV0", "").split(",") if s]
    return argv0 in skip


def _run_hooks():
    hooks = [h.strip() for h in os.environ.get("TKO_SITE_HOOKS", "").split(",") if h.strip()]
    scripts = os.environ.get("TKO_SITE_SCRIPTS")
    if not hooks or not scripts or _skip():
        return
    sys.path.insert(0, scripts)
    try:
        import importlib

        from tko.base import ranks

        if ranks.is_helper():
            return
        for hook in hooks:
            module, _, func = hook.partition(":")
            try:
                getattr(importlib.import_module(module), func)()
            except Exception as exc:  # never break the program
                _say(f"{hook} failed: {type(exc).__name__}: {exc}")
    except Exception as exc:
        _say(f"hooks not installed: {type(exc).__name__}: {exc}")
    finally:
        if scripts in sys.path:
            sys.path.remove(scripts)


def _chain():
    """Run the next ``sitecustomize`` on the path (the one this file hides), if any."""
    try:
        import importlib.machinery
        import importlib.util

        rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules["_tko_chained_sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception as exc:
        _say(f"the existing sitecustomize failed: {type(exc).__name__}: {exc}")


_run_hooks()
_chain()
