"""Find what TorchInductor and Triton left on disk for a kernel.

* wrapper modules ("output code"): the ``Output code written to: <path>`` log lines, and
  ``TORCH_COMPILE_DEBUG`` trees ``torch_compile_debug/run_*/torchinductor/<graph>/output_code.py``;
* kernel modules: ``<cache-root>/<2 chars>/<hash>.py`` holding ``@triton.jit def <kernel>``
  (the output code names them in ``# kernel path: <path>`` comments);
* Triton cache entries: ``<root>/<key>/`` with ``<name>.json`` and the stage files
  (``.source .ttir .ttgir .llir .amdgcn .hsaco .ptx .cubin``) and ``__grp__<name>.json``;
  ``<key>`` is 64 hex digits in triton <= 3.2 and 52 base32 characters from 3.3;
* ``.best_config`` files (Inductor's autotune cache) next to the kernel modules.

Walking never follows a symlink out of its root: :class:`Root` resolves every path and
checks containment, and records what it refused.  A regular file with more than one hard link
is refused too: its other names cannot be found, so it may be a file from outside the roots.
Nothing here imports torch or triton.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..base import inputs
from . import model_code
from ..base.errors import InputError

OUTPUT_CODE_LINE = re.compile(r"Output code written to: (?P<path>\S+\.py)")
DEBUG_TRACE_LINE = re.compile(r" debug trace: (?P<path>\S+)")
KERNEL_PATH_COMMENT = re.compile(r"^# kernel path: (?P<path>\S+\.py)\s*$", re.M)
ASYNC_TRITON = re.compile(r"async_compile\.triton\(\s*['\"](?P<name>\w+)['\"]")
JIT_DEF = re.compile(r"@triton\.jit\s*\ndef (?P<name>\w+)\(")
# Inductor's CPU backend: ``cpp_fused_add_0 = async_compile.cpp_pybinding([...], '''...`` (or ``.cpp(``)
ASYNC_CPP = re.compile(r"^(?P<name>\w+) = async_compile\.cpp(?:_pybinding)?\(", re.M)
CACHE_KEY = re.compile(r"^(?:[0-9a-f]{64}|[A-Z2-7]{52})$")
MAKE_RANGE = re.compile(r"tt\.make_range \{end = (\d+) : i32")
# Triton truncates the kernel name in cache file names to 150 characters (3.2+).
NAME_LIMIT = 150

STAGES_COMMON = ("json", "ttir", "ttgir", "llir")
STAGES_BY_BACKEND = {"hip": ("amdgcn", "hsaco"), "cuda": ("ptx", "cubin")}
LABEL_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "waves_per_eu",
              "matrix_instr_nonkdim", "kpack", "shared", "constants", "triton_version")


def safe_component(name: str, limit: int = 120) -> str:
    """A kernel or folder name made safe as ONE path component (no separators, no dots-only)."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:limit]
    return cleaned if cleaned.strip("_") else "_" + cleaned + "unnamed"


def path_key(hex_hash: str) -> str:
    """Triton >= 3.3 cache folder name of a sha256 hex hash (``_base32`` in triton/runtime/cache.py)."""
    try:
        return base64.b32encode(bytes.fromhex(hex_hash)).decode("ascii").rstrip("=")
    except ValueError:
        return hex_hash


class Root:
    """A directory we may read from; every path handed out resolves inside it."""

    def __init__(self, path: str | Path, refused: list[dict]):
        self.given = Path(path)
        self.real = Path(os.path.realpath(path))
        self.refused = refused

    def inside(self, path: Path) -> Path | None:
        """The real path of ``path`` when it stays inside this root, else None (recorded)."""
        real = Path(os.path.realpath(path))
        if real == self.real or self.real in real.parents:
            return self._single_link(path, real)
        why = "symlink leaves" if Path(path).is_symlink() else "lies outside"
        self.refused.append({"path": str(path), "target": str(real),
                             "reason": f"{why} its root {self.given}"})
        return None

    def _single_link(self, path: Path, real: Path) -> Path | None:
        """``real`` unless it is a regular file with more than one name: a hard link may be a
        second name of a file outside the root, which no path check can see, so it is refused."""
        try:
            st = os.stat(real)
        except OSError:
            return real
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            self.refused.append({"path": str(path), "target": str(real),
                                 "reason": f"hard link ({st.st_nlink} names): another name may lie "
                                           f"outside its root {self.given}"})
            return None
        return real

    def files(self, start: Path | None = None, max_depth: int | None = None):
        """Yield (path, real path) of regular files under ``start``; symlinks are checked."""
        start = Path(start or self.given)
        base_depth = len(start.parts)
        for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
            here = Path(dirpath)
            if max_depth is not None and len(here.parts) - base_depth >= max_depth:
                dirnames[:] = []
            for d in list(dirnames):
                if (here / d).is_symlink():
                    # not followed; say so when it points out of the root
                    dirnames.remove(d)
                    self.inside(here / d)
            for f in sorted(filenames):
                p = here / f
                real = self.inside(p) if p.is_symlink() else self._single_link(p, p)
                if real is not None and real.is_file():
                    yield p, real

    def children(self, path: Path) -> list[Path]:
        try:
            return sorted(c for c in path.iterdir())
        except OSError:
            return []


def read_text(path: Path, limit: int = 4_000_000) -> str:
    try:
        with inputs.open_input(path) as fh:  # a FIFO in a cache folder reads as empty, never blocks
            return fh.read(limit).decode("utf-8", errors="replace")
    except (InputError, OSError):
        return ""


# ---------------------------------------------------------------------------
# logs and modules

def log_references(log_text: str) -> dict:
    """Paths a +inductor / output_code log names: output code files and debug trace dirs."""
    outputs = list(dict.fromkeys(m.group("path") for m in OUTPUT_CODE_LINE.finditer(log_text)))
    traces = list(dict.fromkeys(m.group("path") for m in DEBUG_TRACE_LINE.finditer(log_text)))
    return {"output_code": outputs, "debug_traces": traces}


def kernels_in_output_code(text: str) -> dict[str, str | None]:
    """{kernel name: kernel module path from its '# kernel path:' comment, or None}."""
    result: dict[str, str | None] = {}
    pending_path = None
    for line in text.splitlines():
        m = KERNEL_PATH_COMMENT.match(line)
        if m:
            pending_path = m.group("path")
            continue
        a = ASYNC_TRITON.search(line)
        if a:
            result.setdefault(a.group("name"), pending_path)
            pending_path = None
    return result


def cpu_kernels_in_output_code(text: str) -> list[str]:
    """The C++ kernels (Inductor's CPU backend) an output code module defines: a compiled region
    whose tensors were on the CPU."""
    return list(dict.fromkeys(m.group("name") for m in ASYNC_CPP.finditer(text)))


def kernels_in_module(text: str) -> list[str]:
    """Names of the @triton.jit functions a kernel module defines."""
    if ASYNC_TRITON.search(text):
        return []  # a wrapper module embeds kernel sources as strings; it defines none itself
    return list(dict.fromkeys(m.group("name") for m in JIT_DEF.finditer(text)))


@dataclass
class CacheEntry:
    """One Triton cache folder (one compiled config of one kernel)."""

    key: str
    path: Path
    name: str
    files: list[tuple[Path, Path]] = field(default_factory=list)  # (path, real path)

    @cached_property
    def meta(self) -> dict:
        """``<name>.json``, read on first use (a user's cache can hold thousands of entries)."""
        meta_file = next((real for p, real in self.files if p.name == f"{self.name}.json"), None)
        try:
            meta = json.loads(read_text(meta_file)) if meta_file else {}
        except json.JSONDecodeError:
            meta = {}
        return meta if isinstance(meta, dict) else {}

    def label(self) -> dict:
        label = {k: self.meta[k] for k in LABEL_KEYS if k in self.meta}
        target = self.meta.get("target")
        if isinstance(target, dict):
            label["target"] = f"{target.get('backend')}:{target.get('arch')}"
        stage = next((real for p, real in self.files if p.name.endswith(".ttir")), None)
        if stage is not None:
            ends = sorted({int(x) for x in MAKE_RANGE.findall(read_text(stage))})
            if ends:
                label["range_ends"] = ends  # block sizes as compiled (constexprs are folded)
        return label

    def backend(self) -> str | None:
        target = self.meta.get("target")
        if isinstance(target, dict):
            return target.get("backend")
        names = {p.suffix for p, _ in self.files}
        if ".amdgcn" in names or ".hsaco" in names:
            return "hip"
        if ".ptx" in names or ".cubin" in names:
            return "cuda"
        return None

    def keys(self) -> set[str]:
        keys = {self.key}
        if isinstance(self.meta.get("hash"), str):
            keys |= {self.meta["hash"], path_key(self.meta["hash"])}
        return keys


def triton_cache_entries(root: Root, start: Path | None = None) -> list[CacheEntry]:
    """Every key folder under ``start`` (a Triton cache dir, or Inductor's ``triton/`` parent)."""
    start = Path(start or root.given)
    entries: list[CacheEntry] = []
    frontier = [start]
    for _ in range(3):  # <cache-root>/triton/<device>/<key>
        nxt = []
        for d in frontier:
            for child in root.children(d):
                if child.is_symlink():
                    root.inside(child)
                    continue
                if not child.is_dir():
                    continue
                if CACHE_KEY.match(child.name):
                    entry = _entry(root, child)
                    if entry is not None:
                        entries.append(entry)
                else:
                    nxt.append(child)
        frontier = nxt
    return entries


def _entry(root: Root, folder: Path) -> CacheEntry | None:
    files = list(root.files(folder, max_depth=1))
    grp = next((p for p, _ in files if p.name.startswith("__grp__") and p.name.endswith(".json")),
               None)
    if grp is not None:
        name = grp.name[len("__grp__"):-len(".json")]
    else:
        metas = [p for p, _ in files if p.suffix == ".json"]
        if not metas:
            return None
        name = metas[0].stem
    return CacheEntry(key=folder.name, path=folder, name=name, files=files)


def entry_matches(entry: CacheEntry, kernel: str) -> bool:
    return entry.name == kernel or (len(kernel) > NAME_LIMIT and entry.name == kernel[:NAME_LIMIT])


def _module_dirs(root: Root) -> list[Path]:
    """``<root>/<xx>/`` folders, and ``<root>/<sub>/<xx>/`` (force_disable_caches puts a run's
    modules in a fresh ``tmp*`` sub-folder)."""
    found = []
    for sub in root.children(root.given):
        if sub.is_symlink():
            root.inside(sub)
            continue
        if not sub.is_dir():
            continue
        if len(sub.name) == 2:
            found.append(sub)
        elif sub.name not in ("triton", "fxgraph", "aotautograd", "cache", "locks"):
            found += [d for d in root.children(sub)
                      if len(d.name) == 2 and d.is_dir() and not d.is_symlink()]
    return found


def kernel_modules(root: Root) -> dict[str, list[tuple[Path, Path]]]:
    """{kernel name: [(path, real path)]} for the ``<xx>/<hash>.py`` modules of a cache root."""
    found: dict[str, list[tuple[Path, Path]]] = {}
    for sub in _module_dirs(root):
        for path, real in root.files(sub, max_depth=1):
            if path.suffix != ".py":
                continue
            for name in kernels_in_module(read_text(real)):
                found.setdefault(name, []).append((path, real))
    return found


def triton_dirs(root: Root) -> list[Path]:
    """Inductor's Triton caches under a cache root: ``triton/`` and ``<sub>/triton/``."""
    dirs = [root.given / "triton"] if (root.given / "triton").is_dir() else []
    for sub in root.children(root.given):
        if sub.is_dir() and not sub.is_symlink() and (sub / "triton").is_dir():
            dirs.append(sub / "triton")
    return [d for d in dirs if not d.is_symlink() or root.inside(d) is not None]


def relocate(raw: str, roots: list[Root]) -> Path | None:
    """Find a path a log names on this machine: as named, or re-rooted under one of ``roots``
    (logs and caches copied from the machine that ran the model keep their old absolute paths).
    """
    named = Path(raw)
    if named.exists():
        return named
    parts = named.parts[1:] if named.is_absolute() else named.parts
    for k in range(min(len(parts), 6), 1, -1):  # longest matching tail first, two parts at least
        for root in roots:
            candidate = root.given.joinpath(*parts[-k:])
            if candidate.exists():
                return candidate
    return None


def best_config_files(root: Root, module_dirs: set[Path]) -> list[tuple[Path, Path, dict]]:
    """(path, real path, parsed JSON) of ``.best_config`` files in the given module folders."""
    result = []
    for d in sorted(module_dirs):
        for path, real in root.files(d, max_depth=1):
            if path.suffix == ".best_config":
                try:
                    doc = json.loads(read_text(real))
                except json.JSONDecodeError:
                    doc = {}
                result.append((path, real, doc if isinstance(doc, dict) else {}))
    return result


def debug_output_codes(root: Root) -> list[tuple[Path, Path]]:
    """``output_code.py`` files of TORCH_COMPILE_DEBUG trees under ``root``."""
    return [(p, real) for p, real in root.files() if p.name == "output_code.py"
            and "torchinductor" in p.parts]


# ---------------------------------------------------------------------------
# collecting into an output tree

def safe_filename(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:200]
    return cleaned if cleaned.strip(".") and not cleaned.startswith(".") else "_" + cleaned


@dataclass
class Sources:
    log: Path | None = None
    capture_dir: Path | None = None
    cache_root: Path | None = None
    triton_caches: list[Path] = field(default_factory=list)
    debug_dirs: list[Path] = field(default_factory=list)


class Collector:
    """Copy every artifact of the chosen kernels into ``out/<kernel>/...`` and describe them."""

    def __init__(self, sources: Sources, out: Path):
        self.sources = sources
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.out_real = Path(os.path.realpath(self.out))
        self.refused: list[dict] = []
        self.notes: list[str] = []
        self.used_dirs: dict[str, str] = {"output_code": "", "debug": "", "manifest.json": ""}
        self.shared: dict[Path, dict | None] = {}

    # -- writing, never outside --out
    def _dest(self, kernel_dir: str, *parts: str) -> Path:
        dest = self.out.joinpath(kernel_dir, *parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        parent_real = Path(os.path.realpath(dest.parent))
        if parent_real != self.out_real and self.out_real not in parent_real.parents:
            raise OSError(f"refusing to write {dest}: its folder resolves outside {self.out}")
        if dest.is_symlink():
            dest.unlink()  # a planted link must not redirect the write
        return dest

    def copy(self, kernel_dir: str, parts: list[str], source: Path, real: Path, kind: str,
             label: dict | None = None) -> dict | None:
        from ..base import atomic

        try:
            dest = self._dest(kernel_dir, *parts)
            atomic.write_bytes(dest, real.read_bytes())
        except OSError as exc:
            self.refused.append({"path": str(source), "reason": str(exc)})
            return None
        item = {"kind": kind, "source": str(source), "path": dest.relative_to(self.out).as_posix(),
                "size": dest.stat().st_size}
        if label:
            item["label"] = label
        return item

    def copy_shared(self, parts: list[str], source: Path, real: Path, kind: str) -> dict | None:
        """Copy a file many kernels share (a wrapper module) once, to ``OUT/<parts>``."""
        if real not in self.shared:
            self.shared[real] = self.copy("", parts, source, real, kind)
        item = self.shared[real]
        return dict(item) if item else None

    def kernel_dir(self, kernel: str) -> str:
        base = safe_component(kernel)
        name, n = base, 1
        while name in self.used_dirs and self.used_dirs[name] != kernel:
            n += 1
            name = f"{base}-{n}"
        self.used_dirs[name] = kernel
        return name


def _reason_no_best_config() -> str:
    return ("no .best_config beside the kernel module: the autotune cache was off "
            "(TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 / autotune_local_cache=False) or the kernel "
            "had a single config")


def _in_capture(raw: str, capture: Root) -> Path | None:
    """A file the capture log names (absolute, relative to the capture folder or to the run's
    working folder): the first form that exists."""
    named = Path(raw)
    candidates = [named] if named.is_absolute() else [capture.given / named]
    candidates.append(capture.given / named.name)
    found = next((c for c in candidates if c.exists()), None)
    return found or relocate(raw, [capture])


def _within(path: Path, roots: list[Root]) -> Path | None:
    real = Path(os.path.realpath(path))
    return real if any(real == r.real or r.real in real.parents for r in roots) else None


@dataclass
class _Scan:
    """What discovery found, shared by the later steps: the roots we walk, the wrapper modules
    (``output_codes``: ``(path, real, kernels)``; ``debug_codes``: ``(root, path, real,
    kernels)``), the kernel modules and Triton cache entries of the roots, and the log paths
    found under another folder (``relocated``)."""
    sources: Sources
    col: Collector
    capture_facts: dict
    cache_root: Root | None
    capture: Root | None
    debug_roots: list[Root]
    search_roots: list[Root]
    log_text: str
    output_codes: list[tuple[Path, Path, dict]] = field(default_factory=list)
    debug_codes: list[tuple[Root, Path, Path, dict]] = field(default_factory=list)
    relocated: dict[str, str] = field(default_factory=dict)
    modules: dict = field(default_factory=dict)
    entries: list[CacheEntry] = field(default_factory=list)
    triton_roots: list[tuple[Root, Path]] = field(default_factory=list)
    cpu_kernels: list[str] = field(default_factory=list)


@dataclass
class _KernelCopy:
    """One kernel's part of the manifest while its artifacts are copied."""
    kernel: str
    kdir: str
    artifacts: list[dict] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)

    def add(self, item: dict | None) -> None:
        if item is not None:
            self.artifacts.append(item)

    def has(self, kind: str) -> bool:
        return any(a["kind"] == kind for a in self.artifacts)

    def lacks(self, kind: str, reason: str) -> None:
        self.missing.append({"kind": kind, "reason": reason})


def _discover(sources: Sources, col: Collector, capture_facts: dict) -> _Scan:
    """The roots, the wrapper modules the log names, the debug trees, the kernel modules and
    the Triton cache entries."""
    refused = col.refused
    cache_root = Root(sources.cache_root, refused) if sources.cache_root else None
    capture = Root(sources.capture_dir, refused) if sources.capture_dir else None
    debug_roots = [Root(d, refused) for d in sources.debug_dirs]
    log_root = Root(sources.log.parent, refused) if sources.log else None
    scan = _Scan(sources, col, capture_facts, cache_root, capture, debug_roots,
                 [r for r in (cache_root, log_root, *debug_roots) if r is not None],
                 read_text(sources.log, limit=1 << 31) if sources.log else "")
    if sources.log:
        _discover_logged(scan)
    for root in scan.debug_roots:
        for p, real in debug_output_codes(root):
            scan.debug_codes.append((root, p, real, kernels_in_output_code(read_text(real))))
    scan.modules = kernel_modules(cache_root) if cache_root else {}
    _discover_cache_entries(scan)
    return scan


def _discover_logged(scan: _Scan) -> None:
    """Wrapper modules named by the log (they must lie inside a root we were given) and the
    TORCH_COMPILE_DEBUG trees it names under a root we search."""
    col, refused = scan.col, scan.col.refused
    refs = log_references(scan.log_text)
    for raw in refs["output_code"]:
        p = relocate(raw, scan.search_roots)
        if p is None:
            col.notes.append(f"{raw}: named by the log ('Output code written to:') but not "
                             "found, nor its tail under --cache-root or the log's folder")
            continue
        real = _within(p, scan.search_roots)
        if real is None:
            refused.append({"path": str(p), "target": os.path.realpath(p),
                            "reason": "named by the log but outside --cache-root and the "
                                      "log's folder"})
            continue
        if str(p) != raw:
            scan.relocated[raw] = str(p)
        if real.is_file():
            text = read_text(real)
            scan.output_codes.append((p, real, kernels_in_output_code(text)))
            scan.cpu_kernels += [k for k in cpu_kernels_in_output_code(text) if k not in scan.cpu_kernels]
    for raw in refs["debug_traces"]:
        trace = relocate(raw, scan.search_roots)
        if trace is None or not trace.is_dir() or _within(trace, scan.debug_roots) is not None:
            continue
        if _within(trace, scan.search_roots) is not None:
            scan.debug_roots.append(Root(trace, refused))


def _discover_cache_entries(scan: _Scan) -> None:
    """The Triton cache entries under the cache root and every --triton-cache, once each."""
    cache_root = scan.cache_root
    seen_entries: set[Path] = set()
    scan.triton_roots = [(cache_root, d) for d in triton_dirs(cache_root)] if cache_root else []
    for tc in scan.sources.triton_caches:
        scan.triton_roots.append((Root(tc, scan.col.refused), Path(tc)))
    for root, start in scan.triton_roots:
        for entry in triton_cache_entries(root, start):
            real = Path(os.path.realpath(entry.path))
            if real not in seen_entries:
                seen_entries.add(real)
                scan.entries.append(entry)


def _select(scan: _Scan, only: list[str] | None) -> list[str]:
    """Which kernels: those this run's log / capture mention (else all the cache holds); a
    --kernel NAME picks the one so named, else every known kernel whose name contains NAME."""
    mentioned: list[str] = []
    for _, _, found in scan.output_codes:
        mentioned += list(found)
    for _, _, _, found in scan.debug_codes:
        mentioned += list(found)
    mentioned += list(scan.capture_facts)
    entry_names = sorted({e.name for e in scan.entries})
    known = list(dict.fromkeys(mentioned + sorted(scan.modules) + entry_names))
    if only:
        names = []
        for want in only:
            names += [want] if want in known else ([n for n in known if want in n] or [want])
    else:
        names = mentioned or sorted(scan.modules) or entry_names
    return list(dict.fromkeys(names))


def _copy_output_codes(scan: _Scan, k: _KernelCopy) -> list[str]:
    """The wrapper modules defining the kernel; returns their '# kernel path:' hints."""
    hinted: list[str] = []
    for p, real, found in scan.output_codes:
        if k.kernel in found:
            k.add(scan.col.copy_shared(["output_code", safe_filename(p.name)], p, real,
                                       "output_code"))
            if found[k.kernel]:
                hinted.append(found[k.kernel])
    for root, p, real, found in scan.debug_codes:
        if k.kernel in found:
            rel = p.relative_to(root.given).parts
            k.add(scan.col.copy_shared(["debug", *map(safe_filename, rel[:-1]),
                                        safe_filename(p.name)], p, real, "debug_output_code"))
            if found[k.kernel]:
                hinted.append(found[k.kernel])
    if scan.sources.log and not k.has("output_code"):
        k.lacks("output_code", "no 'Output code written to:' file of the log defines it (log it "
                               "with TORCH_LOGS=output_code or +inductor)")
    return hinted


def _copy_kernel_modules(scan: _Scan, k: _KernelCopy, hinted: list[str]) -> dict[Path, Path]:
    """Kernel modules: '# kernel path:' hints first, then the scan of the cache root; returns
    ``{real: path}``."""
    cache_root = scan.cache_root
    module_files: dict[Path, Path] = {}
    for raw in hinted:
        p = relocate(raw, [cache_root]) if cache_root else None
        if p is None:
            continue
        if str(p) != raw:
            scan.relocated[raw] = str(p)
        real = cache_root.inside(p)
        if real is not None and k.kernel in kernels_in_module(read_text(real)):
            module_files.setdefault(real, p)
    for p, real in scan.modules.get(k.kernel, []):
        module_files.setdefault(real, p)
    for real, p in module_files.items():
        k.add(scan.col.copy(k.kdir, ["kernel_module", safe_filename(p.name)], p, real,
                            "kernel_module"))
    if not module_files:
        k.lacks("kernel_module", "no --cache-root given" if not cache_root
                else f"no {scan.sources.cache_root}/<xx>/<hash>.py defines it")
    return module_files


def _copy_best_configs(scan: _Scan, k: _KernelCopy, module_files: dict[Path, Path],
                       entry_keys: set[str]) -> set[str]:
    """The ``.best_config`` files beside the modules; returns the cache keys they name."""
    winner_keys: set[str] = set()
    if scan.cache_root and module_files:
        dirs = {p.parent for p in module_files.values()}
        for p, real, doc in best_config_files(scan.cache_root, dirs):
            hash_ = doc.get("triton_cache_hash")
            stems = {m.stem for m in module_files.values()}
            ours = (hash_ in entry_keys) if hash_ else (
                p.stem in stems or all(set(kernels_in_module(read_text(x))) <= {k.kernel}
                                       for x in p.parent.glob("*.py")))
            if not ours:
                continue
            if hash_:
                winner_keys.add(hash_)
            label = {key: v for key, v in doc.items() if key not in ("configs_hash",)}
            k.add(scan.col.copy(k.kdir, ["best_config", safe_filename(p.name)], p, real,
                                "best_config", label))
    if not k.has("best_config"):
        k.lacks("best_config", _reason_no_best_config())
    return winner_keys


def _copy_cache_entry(scan: _Scan, k: _KernelCopy, e: CacheEntry, winner: bool) -> dict:
    """One Triton cache entry's files; returns its ``triton_cache_entries`` item."""
    label = e.label()
    files = []
    for p, real in e.files:
        ext = p.name.rsplit(".", 1)[-1] if "." in p.name else "file"
        kind = "triton_group" if p.name.startswith("__grp__") else f"triton_{ext}"
        item = scan.col.copy(k.kdir, ["triton_cache", safe_filename(e.key),
                                      safe_filename(p.name)], p, real, kind, {"key": e.key, **label})
        if item:
            item["entry"] = e.key
            k.add(item)
            files.append(item["path"])
    backend = e.backend()
    expected = list(STAGES_COMMON) + list(STAGES_BY_BACKEND.get(backend or "", ()))
    present = {p.name.rsplit(".", 1)[-1] for p, _ in e.files if p.stem == e.name}
    return {"key": e.key, "name": e.name, "backend": backend,
            "path": f"{k.kdir}/triton_cache/{safe_filename(e.key)}",
            "label": label, "winner": winner, "files": files,
            "missing_stages": [s for s in expected if s not in present]}


def _note_missing_stages(scan: _Scan, k: _KernelCopy, entry_docs: list[dict]) -> None:
    """What the kernel's Triton cache entries lack: all of them, the AMDGCN, a common stage."""
    if not entry_docs:
        where = [str(r) for _, r in scan.triton_roots] or ["(no Triton cache given)"]
        k.lacks("triton_cache", f"no cache folder holds {k.kernel}.json under {', '.join(where)}")
        return
    backends = sorted({d["backend"] or "unknown" for d in entry_docs})
    stages = {s for d in entry_docs for s in
              (STAGES_COMMON + STAGES_BY_BACKEND.get(d["backend"] or "", ()))
              if s not in d["missing_stages"]}
    targets = sorted({d["label"].get("target", "?") for d in entry_docs})
    if "amdgcn" not in stages:
        k.lacks("amdgcn", f"the Triton cache entries target {', '.join(targets)}; AMDGCN is "
                          "produced only when compiling for a HIP (gfx) target"
                          if "hip" not in backends else
                          "HIP cache entries without an .amdgcn file (TRITON_STORE_BINARY_ONLY?)")
    for s in STAGES_COMMON:
        if s not in stages:
            k.lacks(s, f"no cache entry of {k.kernel} has a .{s} file")


def _capture_wanted(capture: Root, kernel: str, fact) -> list[tuple[str, str]]:
    """The capture's files of a kernel, ``(kind, path)``: standalone files (one per argument
    signature: <kernel>.py, <kernel>__s2.py, ...), saved inputs (<kernel>.inputs/), other
    files named after it."""
    wanted = [("capture_standalone", f) for f in (fact.standalone_files if fact else [])]
    wanted += [("capture_input", s) for s in (fact.saved_inputs if fact else [])]
    standalone = re.compile(re.escape(kernel) + r"(?:__s\d+)?\.py$")
    prefix = tuple(kernel + sep for sep in "._-")
    for child in capture.children(capture.given):
        if not (child.name.startswith(prefix) or child.name == kernel):
            continue
        if child.is_dir() and not child.is_symlink():
            kind = "capture_input" if child.name == kernel + ".inputs" else "capture_file"
            wanted += [(kind, str(p.relative_to(capture.given))) for p, _ in capture.files(child)]
        elif child.is_dir():
            capture.inside(child)  # a linked folder: refused when it leaves the root
        else:
            wanted.append(("capture_standalone" if standalone.match(child.name)
                           else "capture_file", child.name))
    return wanted


def _copy_capture(scan: _Scan, k: _KernelCopy) -> None:
    """The capture folder's files of the kernel, each once."""
    capture = scan.capture
    seen_real: set[Path] = set()
    for kind, raw in _capture_wanted(capture, k.kernel, scan.capture_facts.get(k.kernel)):
        p = _in_capture(raw, capture)
        if p is None:
            continue
        real = capture.inside(p)
        if real is None or real in seen_real or not real.is_file():
            continue
        seen_real.add(real)
        rel = real.relative_to(capture.real).parts
        k.add(scan.col.copy(k.kdir, ["capture", *map(safe_filename, rel[:-1]),
                                     safe_filename(rel[-1])], p, real, kind))
    if not k.has("capture_standalone"):
        k.lacks("capture_standalone", f"no standalone {k.kernel}.py in {scan.sources.capture_dir}")


def _model_code(scan: _Scan, k: _KernelCopy, origins) -> dict | None:
    """The model code the kernel came from, and a note when the log lacks it."""
    origin = model_code.kernel_model_code(origins, k.kernel)
    if origin is None and scan.sources.log:
        k.lacks("model_code", "no output code names its source nodes (log with "
                              "TORCH_LOGS=+inductor,output_code)")
    elif origin is not None and not origin["frames"]:
        k.lacks("model_code_frames", "its source nodes are not in a logged FX graph "
                                     "(TORCH_LOGS=+inductor logs the pre- and post-grad graphs "
                                     "with their '# File:' lines)")
    return origin


def _copy_kernel(scan: _Scan, kernel: str, origins) -> dict:
    """Copy one kernel's artifacts; returns its ``kernels`` item of the manifest."""
    k = _KernelCopy(kernel, scan.col.kernel_dir(kernel))
    hinted = _copy_output_codes(scan, k)
    module_files = _copy_kernel_modules(scan, k, hinted)
    mine = [e for e in scan.entries if entry_matches(e, kernel)]
    entry_keys = set().union(*(e.keys() for e in mine)) if mine else set()
    winner_keys = _copy_best_configs(scan, k, module_files, entry_keys)
    entry_docs = [_copy_cache_entry(scan, k, e, bool(winner_keys & e.keys())) for e in mine]
    _note_missing_stages(scan, k, entry_docs)
    if scan.capture is not None:
        _copy_capture(scan, k)
    origin = _model_code(scan, k, origins)
    return {"kernel": kernel, "dir": k.kdir, "artifacts": k.artifacts,
            "triton_cache_entries": entry_docs, "model_code": origin, "missing": k.missing}


def _manifest(scan: _Scan, out: Path, kernels: list[dict]) -> dict:
    sources, col = scan.sources, scan.col
    unique_refused = list({(r["path"], r["reason"]): r for r in col.refused}.values())
    return {
        "out_dir": str(out),
        "roots": {"log": str(sources.log) if sources.log else None,
                  "capture_dir": str(sources.capture_dir) if sources.capture_dir else None,
                  "cache_root": str(sources.cache_root) if sources.cache_root else None,
                  "triton_caches": [str(t) for t in sources.triton_caches],
                  "debug_dirs": [str(r.given) for r in scan.debug_roots]},
        "kernels": kernels,
        "refused": unique_refused,
        "relocated": scan.relocated,
        "cpu_kernels": scan.cpu_kernels,
        "notes": col.notes,
    }


def collect(sources: Sources, out: Path, only: list[str] | None = None,
            capture_facts: dict | None = None) -> dict:
    """Find and copy the artifacts; returns the ``artifact_manifest/1`` payload.

    ``capture_facts`` maps kernel names to :class:`tko.read.autotune_log.KernelFacts` read from
    the capture log (its standalone file and saved inputs).
    """
    col = Collector(sources, out)
    scan = _discover(sources, col, capture_facts or {})
    names = _select(scan, only)
    origins = model_code.read_origins(
        scan.log_text, [read_text(real) for _, real, _ in scan.output_codes]
        + [read_text(real) for _, _, real, _ in scan.debug_codes])
    kernels = [_copy_kernel(scan, kernel, origins) for kernel in names]
    return _manifest(scan, out, kernels)
