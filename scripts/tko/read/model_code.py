"""Which model code a generated kernel comes from: the one reader of Inductor's origin comments.

Two texts carry the link, both written under ``TORCH_LOGS="+inductor,output_code"``:

* the output code (the wrapper module, logged as ``[__output_code]`` lines or read from the
  module file) puts ``# Topologically Sorted Source Nodes: [silu, h, norm], Original ATen: [...]``
  above each ``<kernel> = async_compile.triton('<kernel>', ...`` definition;
* the FX graphs (``[__pre_grad_graphs]`` and ``[__post_grad_graphs]``) group their nodes under
  ``# File: /path/model.py:10 in f, code: h = torch.nn.functional.silu(x) * w`` comments.

Source-node names are those of the pre-grad graph (the user's variable and call names), so they
are looked up there first, then in the post-grad graph. Names are only unique within one compiled
graph, so everything is keyed by the compile id of the log line (``[0/0]``, ``[1/0]``, ...). A
backward kernel lists forward node names too (``gelu`` for ``gelu_backward``): those give its frame.
The forward and backward graphs of one compile share its id, so a backward-only node name that
the forward graph also uses takes the forward frame: read backward frames as "the forward code
this gradient belongs to".
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from ..base import inputs
from ..base.errors import InputError

LOG_LINE = re.compile(r"^[DIVWEC]\d{4} [\d:.]+\s+\d+ \S+\] \[(?P<cid>[^\]]+)\](?: \[(?P<artifact>__\w+)\])? ?(?P<body>.*)$")
FILE_COMMENT = re.compile(r"#\s*File: (?P<file>.+?):(?P<line>\d+) in (?P<func>[^,]+), code: (?P<code>.*)$")
NODE_DEF = re.compile(r"^\s+(?P<name>[A-Za-z_]\w*)(?:\s*:\s*\"[^\"]*\")?\s*=\s")
# torch >= 2.5 writes "Topologically Sorted Source Nodes", older ones "Source Nodes"; those also
# passed 'triton_' rather than the kernel's name as the first argument of async_compile.triton
SOURCE_NODES = re.compile(r"^#\s*(?:Topologically Sorted )?Source Nodes: \[(?P<nodes>[^\]]*)\], "
                          r"Original ATen: \[(?P<aten>[^\]]*)\]")
KERNEL_DEF = re.compile(r"^(?P<name>\w+) = async_compile\.triton\('\w+'")
GRAPH_ARTIFACTS = {"__pre_grad_graphs": 0, "__post_grad_graphs": 1}   # lookup order


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


class _Origins:
    def __init__(self) -> None:
        self.frames: dict[tuple[str, str], dict[str, dict]] = {}   # (cid, artifact) -> node -> frame
        self.kernels: dict[str, dict] = {}

    def graph_line(self, key: tuple[str, str], body: str, current: dict) -> None:
        if not body.strip():
            current.pop(key, None)                 # a blank line ends a '# File:' group
            return
        m = FILE_COMMENT.search(body)
        if m:
            current[key] = {"file": m["file"], "line": int(m["line"]), "function": m["func"].strip(),
                            "code": m["code"].strip()}
            return
        m = NODE_DEF.match(body)
        if m and key in current:
            self.frames.setdefault(key, {}).setdefault(m["name"], current[key])

    def code_line(self, cid: str, body: str, pending: dict) -> None:
        m = SOURCE_NODES.match(body)          # top level only: indented copies sit at call sites
        if m:
            pending[cid] = {"source_nodes": _split(m["nodes"]), "aten_ops": _split(m["aten"])}
            return
        m = KERNEL_DEF.match(body)
        if m:
            info = pending.pop(cid, None)
            if info is not None:
                self.kernels.setdefault(m["name"], {"compile_id": cid, **info})
        elif body and not body.startswith("#"):
            pending.pop(cid, None)             # the comment belonged to something else

    def frame_of(self, cid: str, node: str) -> dict | None:
        for artifact in sorted(GRAPH_ARTIFACTS, key=GRAPH_ARTIFACTS.get):
            frame = self.frames.get((cid, artifact), {}).get(node)
            if frame:
                return frame
        return None


def read_origins(log_text: str = "", modules: list[str] = ()) -> _Origins:
    """Parse a TORCH_LOGS log and (optionally) output-code module texts."""
    origins = _Origins()
    current: dict = {}
    pending: dict = {}
    for raw in log_text.splitlines():
        m = LOG_LINE.match(raw)
        if not m:
            continue
        artifact, body, cid = m["artifact"], m["body"], m["cid"]
        if artifact in GRAPH_ARTIFACTS:
            origins.graph_line((cid, artifact), body, current)
        elif artifact == "__output_code":
            origins.code_line(cid, body, pending)
    for text in modules:                        # modules carry no compile id: no frames, nodes only
        pending = {}
        for line in text.splitlines():
            origins.code_line("module", line, pending)
    return origins


@functools.lru_cache(maxsize=64)
def _parsed(path: str) -> ast.Module | None:
    # one parse per model file, however many kernels point into it
    try:
        return ast.parse(inputs.read_text(path, "a Python source file", errors="replace"))
    except (InputError, SyntaxError, ValueError):  # a path from the profile: gone, a FIFO, not Python
        return None


def enclosing_qualname(path: str | Path, line: int) -> str | None:
    """``Class.method`` or ``function`` defined around ``line`` of a Python file, when readable."""
    tree = _parsed(str(path))
    if tree is None:
        return None
    best: tuple[int, str] | None = None

    def visit(node, prefix: str) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                end = getattr(child, "end_lineno", None) or child.lineno
                if isinstance(child, ast.ClassDef):
                    visit(child, name + ".")
                elif child.lineno <= line <= end and (best is None or child.lineno >= best[0]):
                    best = (child.lineno, name)
                    visit(child, name + ".<locals>.")
    visit(tree, "")
    return best[1] if best else None


def kernel_model_code(origins: _Origins, kernel: str) -> dict | None:
    """Source nodes, ATen ops and the model frames (file, line, function, code, nodes) of a kernel."""
    info = origins.kernels.get(kernel)
    if info is None:
        return None
    frames: dict[tuple[str, int], dict] = {}
    unmapped = []
    for node in info["source_nodes"]:
        frame = origins.frame_of(info["compile_id"], node)
        if frame is None:
            unmapped.append(node)
            continue
        key = (frame["file"], frame["line"])
        entry = frames.setdefault(key, {**frame, "nodes": []})
        entry["nodes"].append(node)
    listed = sorted(frames.values(), key=lambda f: (f["file"], f["line"]))
    for f in listed:
        f["qualname"] = enclosing_qualname(f["file"], f["line"])
    return {"compile_id": info["compile_id"], "source_nodes": info["source_nodes"], "aten_ops": info["aten_ops"],
            "frames": listed, "unmapped_nodes": unmapped}
