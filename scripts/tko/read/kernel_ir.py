"""Triton IR text (TTIR / TTGIR / LLIR): the kernel functions and their argument attributes, attached
to a kernel read from source."""


from __future__ import annotations

import re

# --------------------------------------------------------------------------- IR

_FUNC_RE = re.compile(r"tt\.func\s+(?:public\s+|private\s+)?@([\w$.]+)\s*\(")
_LLVM_FUNC_RE = re.compile(r"llvm\.func\s+@([\w$.]+)\s*\(")


def _split_args(text: str, start: int) -> tuple[str, int]:
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            if depth == 0:
                return text[start:i], i
            depth -= 1
    return text[start:], len(text)


def _top_level_split(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def parse_ir_text(text: str, stage: str | None = None) -> dict:
    """Function arguments with their tt.* attributes, and assume counts, from TTIR/TTGIR/LLIR."""
    text = text.replace("\r", "")
    funcs = []
    for m in _FUNC_RE.finditer(text):
        body, _ = _split_args(text, m.end())
        args = []
        for position, raw in enumerate(_top_level_split(body)):
            am = re.match(r"\s*%([\w$.]+)\s*:\s*(.*)", raw, re.S)
            if not am:
                continue
            ssa, rest = am.group(1), am.group(2)
            loc = re.search(r'loc\("([^"]+)"', rest)
            type_text = re.split(r"\s*(\{|loc\()", rest, maxsplit=1)[0].strip()
            attrs = {}
            attr_block = re.search(r"\{([^{}]*)\}", rest)
            if attr_block:
                for key, val in re.findall(r"([\w.]+)\s*=\s*([-\w]+)", attr_block.group(1)):
                    attrs[key] = int(val) if re.fullmatch(r"-?\d+", val) else val
            name = loc.group(1) if loc else ssa
            args.append({"position": position, "name": name, "ssa": ssa, "type": type_text,
                         "attrs": attrs})
        funcs.append({"name": m.group(1), "args": args})
    if stage is None:
        stage = "ttgir" if "ttg." in text or "triton_gpu." in text else (
            "ttir" if "tt.func" in text else ("llir" if "define " in text else "unknown"))
    return {
        "stage": stage,
        "functions": funcs,
        "assume_count": len(re.findall(r"llvm\.intr\.assume|call void @llvm\.assume", text)),
        "buffer_ops": len(re.findall(r"\bamdg(?:pu)?\.buffer_(?:load|store|atomic)\w*", text)),
        "tt_loads": len(re.findall(r"\btt\.load\b", text)),
        "tt_stores": len(re.findall(r"\btt\.store\b", text)),
    }


def attach_ir(kernel: dict, ir: dict, path: str) -> dict:
    """Match an IR function to the kernel and report the hints that reached the IR."""
    func = next((f for f in ir["functions"] if f["name"] == kernel["name"]), None)
    if func is None and len(ir["functions"]) == 1:
        func = ir["functions"][0]
    entry = {"file": path, "stage": ir["stage"], "function": func["name"] if func else None,
             "assume_count": ir["assume_count"], "buffer_ops": ir["buffer_ops"],
             "tt_loads": ir["tt_loads"], "tt_stores": ir["tt_stores"], "args": {}, "findings": []}
    if func is None:
        entry["findings"].append(f"{path}: no function matches {kernel['name']}")
        return entry
    param_names = [p["name"] for p in kernel["params"]]
    runtime = [p for p in kernel["params"] if p["kind"] != "constexpr"
               and "constant" not in p]
    for arg in func["args"]:
        name = arg["name"]
        if name not in param_names:
            # Unnamed SSA values (%arg0) follow the runtime parameters in order.
            name = runtime[arg["position"]]["name"] if arg["position"] < len(runtime) else name
        entry["args"][name] = {"type": arg["type"],
                               "tt.divisibility": arg["attrs"].get("tt.divisibility"),
                               "tt.pointer_range": arg["attrs"].get("tt.pointer_range")}
    for name, hints in (kernel.get("pointer_hints") or {}).items():
        got = entry["args"].get(name)
        if got is None:
            continue
        if hints["tt.pointer_range"] and not got["tt.pointer_range"]:
            entry["findings"].append(f"{name}: triton_meta declares tt.pointer_range but the "
                                     f"{ir['stage']} lacks it")
        if got["tt.pointer_range"] and not hints["tt.pointer_range"]:
            entry["findings"].append(f"{name}: tt.pointer_range={got['tt.pointer_range']} reached the "
                                     f"{ir['stage']} (not declared in triton_meta: added by JIT specialisation or by the "
                                     f"compile call)")
    no_pr = [n for n, a in entry["args"].items() if a["type"].startswith("!tt.ptr")
             and not a["tt.pointer_range"]]
    if no_pr:
        entry["findings"].append(f"{ir['stage']}: no tt.pointer_range on {', '.join(no_pr)}")
    if ir["stage"] == "ttgir" and ir["tt_loads"] + ir["tt_stores"] and ir["buffer_ops"] == 0:
        entry["findings"].append("ttgir: loads/stores were not converted to buffer ops")
    return entry
