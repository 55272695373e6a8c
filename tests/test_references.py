"""The reference documents stay usable: what they tell a reader to run, set or open exists.

Checks, on the three procedural references (investigation_workflow.md, optimization_patterns.md,
dcu_notes.md):
- every skill script a command mentions exists in scripts/ or is a specified one not written yet,
  and every flag given to it is in its `--help` (or, while it does not exist, in its specified flags);
- every environment variable is read by this project, by the installed torch/triton sources, or is
  in a short list of variables of other builds with their source; a variable that does not exist is
  only ever mentioned as not existing;
- every referenced document / section (`dcu_notes.md` §3.1) exists;
- the AMDGCN_USE_BUFFER_OPS default table agrees with its machine-readable copy, with the installed
  Triton's source, and with check_env's version rule;
- device_peaks.yaml agrees with its source excerpt and with the table in dcu_notes.md;
- the hint-effect table agrees with hint_effects_measured.yaml, whose runs for the installed Triton
  agree with a fresh run of references/hint_effects.py.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFS = ROOT / "references"
SCRIPTS = ROOT / "scripts"
DOCS = ("investigation_workflow.md", "optimization_patterns.md", "dcu_notes.md")

# Scripts the documents name, with the flags the documents give them. A script
# that exists is checked against its real --help instead; one that does not exist yet may only be
# given these flags.
SPEC_FLAGS: dict[str, set[str]] = {
    "check_env": {"--out", "--smoke", "--smoke-target", "--expect-arch"},
    "autotune_capture_patch": set(),
    "summarize_autotune_log": {"--json-out", "--markdown-out", "--spread-threshold"},
    "collect_inductor_artifacts": {"--log", "--capture-dir", "--cache-root", "--out", "--kernel",
                                   "--triton-cache"},
    "inspect_triton_meta": {"--json-out", "--ir"},
    "scan_amdgcn": {"--kernel", "--arch", "--json-out"},
    "probe_compile": {"--arch", "--json-out", "--markdown-out", "--variants", "--timeout"},
    "run_captured_kernel": {"--all-configs", "--timeout", "--warmup", "--rep", "--json-out"},
    "profile_kernels": {"--trace", "--hipprof", "--rocprof", "--json-out", "--markdown-out", "--top"},
    # specified as planned: while one is absent, the documents must mark it "(planned)"
    "triton_benchmark_template": {"--keep-buffer-ops"},
    "make_investigation_report": {"--autotune-summary", "--meta", "--isa", "--kernel", "--out"},
    "investigate": {"--from-capture"},
}
PLANNED = {"triton_benchmark_template", "make_investigation_report", "investigate"}

# Environment variables the documents mention that neither this project nor the installed
# torch/triton read, with where they exist.
OTHER_BUILD_ENV = {
    "HCUGCN_USE_BUFFER_OPS": "flagos-ai/FlagTree main branch third_party/hcu/backend/compiler.py",
    "TRITON_HIP_LLD_PATH": "triton <= 3.4 AMD backend (knobs.amd.lld_path); in-process linking from 3.5",
    "HCUGCN_ENABLE_DUMP": "flagos-ai/FlagTree main branch third_party/hcu/backend/compiler.py",
    "TRITON_ENABLE_GLOBAL_TO_LOCAL": "flagos-ai/FlagTree main branch third_party/hcu/backend/compiler.py",
    "TRITON_HIP_USE_NEW_STREAM_PIPELINE": "flagos-ai/FlagTree main branch third_party/hcu/backend/compiler.py",
    "TRITON_HIP_CLANG_PATH": "HYGON-AI/triton-das and FlagTree third_party/hcu/backend (path_to_rocm_clang)",
    "TRITON_BUFFER_CACHE_SWIZZLE": "HYGON-AI/triton-das python/triton/knobs.py (amd_knobs)",
    "TRITON_HCUTUNE": "HYGON-AI/triton-das third_party/hcu/backend/hcutune_cli.py",
    "TRITON_HCUTUNE_WORLD_SIZE": "HYGON-AI/triton-das third_party/hcu/backend/hcutune_cli.py",
    "TRITON_HCUTUNE_LOCAL_RANK": "HYGON-AI/triton-das third_party/hcu/backend/hcutune_cli.py",
    "TRITON_HCUTUNE_COMPILE_ONLY": "HYGON-AI/triton-das third_party/hcu/backend/hcutune_cli.py",
    "TRITON_HCUTUNE_CONFIGS_SHARDING": "HYGON-AI/triton-das third_party/hcu/backend/hcutune_cli.py",
    "TRITON_HCUTUNE_ALWAYS_TUNING": "HYGON-AI/triton-das third_party/hcu/backend/hcutune_cli.py",
    "TRITON_BACKENDS_IN_TREE": "triton >= 3.6 backends/__init__.py; DTK wheels need it (flagos-ai/Torch-FL#82)",
}
# Variables people use that do not exist: the documents may name them only to say so.
NONEXISTENT_ENV = {"TORCHINDUCTOR_TRACE"}
_ENV_RE = re.compile(r"\b(?:TRITON|TORCHINDUCTOR|TORCH|AMDGCN|HCUGCN|HIP|ROCM|ROCR|HSA|MLIR|LLVM"
                     r"|CUDA|PYTORCH|TKO)_[A-Z0-9_]+\b")


def _text(name: str) -> str:
    return (REFS / name).read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- command extraction

_FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.S | re.M)
_INLINE = re.compile(r"`([^`]+)`")
_SCRIPT_TOKEN = re.compile(r"^(?:\S*/)?([A-Za-z_][A-Za-z0-9_]*)\.py$")


def _commands(text: str) -> list[str]:
    """Command-like strings: each line of a fenced block (continuations joined) and each inline span."""
    commands = []
    for block in _FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line)   # shell comments
            if line.strip():
                commands.append(line)
    prose = _FENCE.sub("", text)
    commands.extend(span.replace("\n", " ") for span in _INLINE.findall(prose))
    return commands


def _script_uses(text: str) -> list[tuple[str, list[str], str]]:
    """(script name, flags passed to it, command) for every skill script a command names."""
    uses = []
    for cmd in _commands(text):
        tokens = cmd.split()
        for i, tok in enumerate(tokens):
            m = _SCRIPT_TOKEN.match(tok)
            if not m:
                continue
            name = m.group(1)
            if "scripts/tko/" in tok:
                continue  # a core module, not a script (checked by test_links_and_local_files_resolve)
            in_scripts_dir = "scripts/" in tok
            if not in_scripts_dir and name not in SPEC_FLAGS and not (SCRIPTS / f"{name}.py").exists():
                continue  # someone else's file (repro.py, output_code.py, a kernel file)
            flags = []
            for later in tokens[i + 1:]:
                if later == "--":      # the user's command follows
                    break
                if _SCRIPT_TOKEN.match(later) and _SCRIPT_TOKEN.match(later).group(1) in SPEC_FLAGS:
                    break
                if re.match(r"^--[a-z][a-z0-9-]*", later):
                    flags.append(re.match(r"^--[a-z][a-z0-9-]*", later).group(0))
            uses.append((name, flags, cmd.strip()))
            break
    return uses


@functools.lru_cache(maxsize=None)
def _help_text(name: str) -> str:
    proc = subprocess.run([sys.executable, str(SCRIPTS / f"{name}.py"), "--help"],
                          capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert proc.returncode == 0, f"{name}.py --help failed: {proc.stderr.strip()[-300:]}"
    return proc.stdout


@pytest.mark.parametrize("doc", DOCS)
def test_doc_names_commands(doc):
    # Guards the extraction itself: the workflow must be found to name its scripts.
    names = {name for name, _, _ in _script_uses(_text(doc))}
    if doc == "investigation_workflow.md":
        assert {"check_env", "summarize_autotune_log", "collect_inductor_artifacts",
                "inspect_triton_meta", "scan_amdgcn", "probe_compile", "run_captured_kernel",
                "profile_kernels", "make_investigation_report", "investigate"} <= names
    else:
        assert names, f"{doc} names no script"


@pytest.mark.parametrize("doc", DOCS)
def test_scripts_and_flags_exist(doc):
    problems = []
    for name, flags, cmd in _script_uses(_text(doc)):
        path = SCRIPTS / f"{name}.py"
        if not path.exists() and name not in SPEC_FLAGS:
            problems.append(f"{name}.py is neither in scripts/ nor specified: {cmd}")
            continue
        if not flags:
            continue
        if path.exists():
            helptext = _help_text(name)
            missing = [f for f in flags if not re.search(re.escape(f) + r"(?![a-z0-9-])", helptext)]
            where = "--help"
        else:
            missing = [f for f in flags if f not in SPEC_FLAGS[name]]
            where = "its specified flags"
        if missing:
            problems.append(f"{name}.py: {missing} not in {where}: {cmd}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS)
def test_planned_scripts_are_marked(doc):
    text = _text(doc)
    for name in PLANNED:
        if (SCRIPTS / f"{name}.py").exists() or f"{name}.py" not in text:
            continue
        for line_no, line in enumerate(text.splitlines(), 1):
            if f"{name}.py" in line:
                window = "\n".join(text.splitlines()[max(0, line_no - 4): line_no + 3])
                assert "(planned)" in window, f"{doc}:{line_no}: {name}.py is not marked (planned)"


# ----------------------------------------------------------------------------- environment variables

def _files_text(paths) -> str:
    chunks = []
    for p in paths:
        try:
            chunks.append(p.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            pass
    return "\n".join(chunks)


@functools.lru_cache(maxsize=None)
def _project_env_names() -> frozenset:
    files = list(SCRIPTS.rglob("*.py")) + [ROOT / "SKILL.md", ROOT / "README.md"]
    return frozenset(_ENV_RE.findall(_files_text(files)))


@functools.lru_cache(maxsize=None)
def _installed_env_names() -> frozenset:
    """Every environment-variable-like name in the installed torch (compiler parts) and triton."""
    import importlib.util
    texts = []
    for pkg, subdirs in (("torch", ("_inductor", "_dynamo", "_logging", "compiler", "utils",
                                    "_utils_internal.py", "_functorch")),
                         ("triton", ("",))):
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            pytest.skip(f"{pkg} is not installed: cannot check its environment variables")
        base = Path(list(spec.submodule_search_locations)[0])
        for sub in subdirs:
            target = base / sub
            files = [target] if target.is_file() else list(target.rglob("*.py"))
            texts.append(_files_text(files))
    return frozenset(_ENV_RE.findall("\n".join(texts)))


@pytest.mark.parametrize("doc", DOCS)
def test_env_vars_exist(doc):
    names = set(_ENV_RE.findall(_text(doc)))
    assert names, f"{doc}: no environment variable found (extraction broken?)"
    unknown = []
    for name in sorted(names - NONEXISTENT_ENV):
        if name in OTHER_BUILD_ENV:
            continue
        if name in _project_env_names():
            continue
        if name in {"TRITON_CAPTURE_DIR", "TRITON_CAPTURE_FORCE_RETUNE"} and \
                not (SCRIPTS / "autotune_capture_patch.py").exists():
            continue  # specified for the capture patch, which reads them once it exists
        if name in _installed_env_names():
            continue
        unknown.append(name)
    assert not unknown, f"{doc}: not read by this project, torch or triton: {unknown}"


def test_nonexistent_env_vars_are_only_named_as_such():
    for name in NONEXISTENT_ENV:
        assert name not in _installed_env_names(), \
            f"{name} exists in the installed torch/triton now: update the documents"
        for doc in DOCS:
            text = _text(doc)
            for block in _FENCE.findall(text):
                assert name not in block, f"{doc}: {name} used in a command block"
            if name in text:
                assert f"`{name}` does not exist" in text, f"{doc}: mentions {name} without saying it does not exist"


# ----------------------------------------------------------------------------- links and sections

_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")
_FILE_REF = re.compile(r"`((?:references/|tests/|scripts/)?[A-Za-z0-9_./-]+\.(?:md|yaml|py|txt))`")


def _resolve(name: str) -> Path | None:
    for base in (REFS, ROOT):
        if (base / name).exists():
            return base / name
    return None


@pytest.mark.parametrize("doc", DOCS)
def test_links_and_local_files_resolve(doc):
    text = _text(doc)
    missing = []
    for target, _ in _LINK.findall(text):
        if "://" not in target and _resolve(target) is None:
            missing.append(target)
    for name in _FILE_REF.findall(text):
        local = name.startswith(("references/", "tests/", "scripts/")) or (
            "/" not in name and (name.endswith((".md", ".yaml")) or name.startswith("hint_effects")))
        if not local or name in ("SKILL.md", "README.md"):
            continue  # source files of torch/triton/DTK, or top-level files written elsewhere
        is_script = (name.startswith("scripts/") and not name.startswith("scripts/tko/")) or (
            name.endswith(".py") and "/" not in name and Path(name).stem in SPEC_FLAGS)
        if is_script:
            continue  # checked by test_scripts_and_flags_exist
        if _resolve(name) is None:
            missing.append(name)
    for path in re.findall(r"`((?:examples|tests|references|scripts)/[A-Za-z0-9_./-]+)`", text):
        if "<" not in path and not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"{doc}: unresolved references {missing}"


def _sections(text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)\.?\s", text, re.M)}


@pytest.mark.parametrize("doc", DOCS)
def test_section_references_resolve(doc):
    text = _text(doc)
    bad = []
    for m in re.finditer(r"(`([a-z_]+\.md)` )?§(\d+(?:\.\d+)?)", text):
        target = m.group(2) or doc
        if m.group(2) is None:
            before = text[max(0, m.start() - 30): m.start()]
            if re.search(r"(Triton|torch|HIP|[a-z]+_[a-z]+)\s*$", before):
                continue  # a section of an outside document
        if m.group(3) not in _sections(_text(target)):
            bad.append(f"{target} §{m.group(3)}")
    assert not bad, f"{doc}: sections that do not exist: {bad}"


# ----------------------------------------------------------------------------- buffer-op defaults

def _yaml_block(text: str, marker: str):
    import yaml
    for block in _FENCE.findall(text):
        if block.lstrip().startswith(marker):
            return yaml.safe_load(block)
    raise AssertionError(f"no fenced block starting with {marker!r}")


def _buffer_ops_tables():
    text = _text("dcu_notes.md")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and re.fullmatch(r"\d+\.\d+( - \d+\.\d+)?", cells[1]) and cells[3] in ("on", "off"):
            versions = cells[1].replace(" ", "")
            rows.append({"build": cells[0], "versions": versions if "-" in versions else f"{versions}-{versions}",
                         "env": cells[2].strip("`"), "default": cells[3] == "on"})
    machine = _yaml_block(text, "# buffer_ops_defaults")
    return rows, machine


def _covers(entry: dict, version: tuple) -> bool:
    lo, hi = (tuple(int(x) for x in part.split(".")) for part in entry["versions"].split("-"))
    return lo <= version[:2] <= hi


def test_buffer_ops_table_matches_machine_readable_copy():
    rows, machine = _buffer_ops_tables()
    assert len(rows) >= 4, "the Markdown table of buffer-op defaults was not found"
    assert rows == machine


def test_buffer_ops_table_agrees_with_check_env_rule():
    from tko.env.buffer_ops import buffer_ops_by_version as rule
    _, machine = _buffer_ops_tables()
    for entry in (e for e in machine if e["build"] == "upstream"):
        for end in entry["versions"].split("-"):
            assert rule(end + ".0") == entry["default"], (entry, end)


def test_buffer_ops_table_agrees_with_installed_triton():
    import importlib.util
    from tko.base.versions import parse_version

    spec = importlib.util.find_spec("triton")
    if spec is None:
        pytest.skip("triton is not installed")
    pkg = Path(list(spec.submodule_search_locations)[0])
    if not (pkg / "backends" / "amd" / "compiler.py").exists() or (pkg / "backends" / "hcu").exists():
        pytest.skip("not an upstream Triton with the AMD backend")
    from importlib.metadata import version as dist_version
    version = parse_version(dist_version("triton"))
    _, machine = _buffer_ops_tables()
    rows = [e for e in machine if e["build"] == "upstream" and _covers(e, version)]
    assert rows, f"installed triton {version} is not covered by the buffer_ops_defaults table: add a row"
    sources = _files_text([pkg / "knobs.py", pkg / "backends" / "amd" / "compiler.py"])
    m = re.search(r'env_bool\(\s*"AMDGCN_USE_BUFFER_OPS"\s*(?:,\s*(True|False))?\s*\)', sources)
    if m:
        actual = m.group(1) == "True"
    else:
        m = re.search(r'environ\.get\(\s*"AMDGCN_USE_BUFFER_OPS"\s*,\s*"(\d)"\s*\)', sources)
        assert m, "installed triton reads AMDGCN_USE_BUFFER_OPS in a way this test does not know"
        actual = m.group(1) == "1"
    assert rows[0]["default"] == actual


# ----------------------------------------------------------------------------- device peaks

PEAK_FIELDS = ("name", "arch", "hbm_read_gbps", "copy_gbps", "peak_bf16_tflops", "peak_fp32_tflops",
               "launch_us", "source", "kind")


def _peaks():
    import yaml
    return yaml.safe_load((REFS / "device_peaks.yaml").read_text(encoding="utf-8"))["devices"]


def test_device_peaks_schema():
    from tko.base import archs

    records = _peaks()
    assert {r["name"] for r in records} >= {"BW1000", "H200"}
    for r in records:
        assert set(PEAK_FIELDS) <= set(r), r.get("name")
        assert r["kind"] in ("measured", "datasheet")
        assert archs.info(r["arch"]) is not None, r["arch"]
        assert isinstance(r["source"], str) and len(r["source"]) > 20
        if r["kind"] == "measured":
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(r["date"])), r
        numbers = [r[f] for f in PEAK_FIELDS[2:7]]
        assert all(v is None or (isinstance(v, (int, float)) and v > 0) for v in numbers), r
        assert any(v is not None for v in numbers), r
    keys = [(r["name"], r["kind"]) for r in records]
    assert len(keys) == len(set(keys)), "one record per (device, kind)"


def test_bw1000_peaks_match_source_excerpt():
    raw = (REFS / "sources" / "kra_machine_gfx936_bw1000_excerpt.json.txt").read_text(encoding="utf-8")
    excerpt = json.loads("\n".join(ln for ln in raw.splitlines() if not ln.startswith("#")))
    bw = next(r for r in _peaks() if r["name"] == "BW1000" and r["kind"] == "measured")
    assert excerpt["device"]["gcnArchName"].split(":")[0] == bw["arch"]
    assert bw["hbm_read_gbps"] == excerpt["peaks"]["hbm_read"]["value"]
    assert bw["hbm_theoretical_gbps"] == excerpt["peaks"]["hbm_read"]["theoretical"]
    assert bw["copy_gbps"] == excerpt["peaks"]["hbm_copy"]["value"]
    assert bw["peak_bf16_tflops"] == excerpt["peaks"]["mmac_bf16"]["value"]
    assert bw["peak_fp32_tflops"] == excerpt["peaks"]["valu_fma_f32"]["value"]
    assert bw["launch_us"] == excerpt["launch"]["launch_stream"]["best_us"]


def _cell_number(cell: str):
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)", cell)
    return float(m.group(1)) if m else None


def test_dcu_notes_peak_table_matches_yaml():
    text = _text("dcu_notes.md")
    section = text.split("## 6.", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[7] in ("measured", "datasheet"):
            rows.append(cells)
    records = _peaks()
    assert len(rows) == len(records)
    fields = ("hbm_read_gbps", "copy_gbps", "peak_bf16_tflops", "peak_fp32_tflops", "launch_us")
    for cells in rows:
        rec = next(r for r in records if r["name"] == cells[0] and r["kind"] == cells[7])
        assert rec["arch"] == cells[1]
        for field, cell in zip(fields, cells[2:7]):
            expected = rec[field]
            assert _cell_number(cell) == (None if expected is None else float(expected)), (cells[0], field)


# ----------------------------------------------------------------------------- hint effects

_WIDTHS = ("ubyte", "ushort", "short", "dword", "dwordx2", "dwordx3", "dwordx4", "b32", "b64", "b128")


def _widest_load(ops: list[str]) -> str | None:
    loads = [op.rsplit("_", 1)[1] for op in ops if "_load_" in op]
    return max(loads, key=_WIDTHS.index) if loads else None


def _hint_runs() -> list[dict]:
    import yaml
    runs = yaml.safe_load((REFS / "hint_effects_measured.yaml").read_text(encoding="utf-8"))
    assert isinstance(runs, list) and len(runs) >= 4, "hint_effects_measured.yaml has too few runs"
    for run in runs:
        run["AMDGCN_USE_BUFFER_OPS"] = str(run["AMDGCN_USE_BUFFER_OPS"])
    return runs


# Columns of the summary table in optimization_patterns.md section 1: (versions, switch, mode).
_SUMMARY_COLUMNS = ((("3.3.1", "3.4.0", "3.5.1"), "1", "pr32"), (("3.3.1", "3.4.0", "3.5.1"), "1", "no_pr32"),
                    (("3.6.0", "3.8.0", "3.9.0"), "unset", "pr32"), (("3.6.0", "3.8.0", "3.9.0"), "unset", "no_pr32"))


def test_hint_effects_summary_table_matches_measured_runs():
    runs = {(r["triton"], r["AMDGCN_USE_BUFFER_OPS"]): r["cases"] for r in _hint_runs() if r["arch"] == "gfx942"}
    section = _text("optimization_patterns.md").split("## 1.", 1)[1].split("\n## ", 1)[0]
    rows = 0
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not re.fullmatch(r"`[a-z0-9_]+`", cells[0]):
            continue
        case, rows = cells[0].strip("`"), rows + 1
        for (versions, env, mode), cell in zip(_SUMMARY_COLUMNS, cells[2:]):
            for version in versions:
                assert (version, env) in runs, f"no measured run for triton {version} with switch {env}"
                verdict = runs[(version, env)][case][mode].split()[0]
                # the cell's first word holds for every version of the column unless it names one
                assert cell.split(";")[0].strip() == verdict or f"{verdict} ({version})" in cell, \
                    (case, version, env, mode, cell, verdict)
    assert rows >= 8, "summary table not found"


def test_hint_effects_stated_equivalences_hold():
    runs = {(r["triton"], r["arch"], r["AMDGCN_USE_BUFFER_OPS"]): r["cases"] for r in _hint_runs()}
    # "With the switch unset, 3.3.1-3.5.1 give global everywhere, and so does 3.9.0 with =0"
    for key in (("3.3.1", "gfx942", "unset"), ("3.4.0", "gfx942", "unset"), ("3.5.1", "gfx942", "unset"),
                ("3.9.0", "gfx942", "0")):
        verdicts = {m.split()[0] for modes in runs[key].values() for m in modes.values()}
        assert verdicts <= {"global", "error"}, (key, verdicts)
    # "3.9.0 with =1 equals its default"; "gfx90a gives the same as gfx942"
    assert runs[("3.9.0", "gfx942", "1")] == runs[("3.9.0", "gfx942", "unset")]
    assert runs[("3.9.0", "gfx90a", "unset")] == runs[("3.9.0", "gfx942", "unset")]
    assert runs[("3.5.1", "gfx90a", "1")] == runs[("3.5.1", "gfx942", "1")]
    # section 3: the hints widen loads in every run (the claimed facts are true in these kernels)
    order = ("ubyte", "ushort", "short", "dword", "dwordx2", "dwordx3", "dwordx4")
    for key, cases in runs.items():
        for plain, hinted in (("modulo_arg", "modulo_arg_hinted"), ("base_arg", "multiple_of_start"),
                              ("base_arg", "base_arg_div16")):
            for mode in ("pr32", "no_pr32"):
                assert order.index(cases[hinted][mode].split()[1]) > order.index(cases[plain][mode].split()[1]), \
                    (key, plain, hinted, mode)
            assert cases["multiple_of_arg"] == cases["base_arg"], key   # on an argument: no effect
    # "pr32 matters there only for 64-bit offsets (i64_pid) and descriptor / block-pointer forms"
    for version in ("3.3.1", "3.4.0", "3.5.1"):
        differs = {case for case, m in runs[(version, "gfx942", "1")].items()
                   if m["pr32"].split()[0] != m["no_pr32"].split()[0]}
        assert differs <= {"i64_pid", "tensor_descriptor", "block_ptr"}, (version, differs)


@pytest.mark.parametrize("env_value", ["unset", "0", "1"])
def test_hint_effects_runs_match_a_fresh_compile(tmp_path, env_value):
    pytest.importorskip("triton")
    from importlib.metadata import version as dist_version

    installed = dist_version("triton")
    matching = [r for r in _hint_runs() if r["triton"] == installed and r["arch"] == "gfx942"
                and r["AMDGCN_USE_BUFFER_OPS"] == env_value]
    if not matching:
        pytest.skip(f"no run recorded for triton {installed} with AMDGCN_USE_BUFFER_OPS={env_value}")
    expected = matching[0]["cases"]
    env = {k: v for k, v in os.environ.items() if k != "AMDGCN_USE_BUFFER_OPS"}
    if env_value != "unset":
        env["AMDGCN_USE_BUFFER_OPS"] = env_value
    out = tmp_path / "effects.json"
    proc = subprocess.run([sys.executable, str(REFS / "hint_effects.py"), "--arch", "gfx942",
                           "--json-out", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    measured = json.loads(out.read_text())["cases"]
    assert set(measured) == set(expected)
    for case, modes in expected.items():
        for mode, cell in modes.items():
            got = measured[case][mode]
            want = cell.split()
            assert got["verdict"] == want[0], (case, mode, got)
            if len(want) > 1:
                assert _widest_load(got["ops"]) == want[1], (case, mode, got["ops"])


# ----------------------------------------------------------------------------- artifact field paths

# Output file names the documents use -> the schema tag documented in json_contracts.md.
ARTIFACT_SCHEMAS = {
    "triton_env": "triton_env/1", "autotune_summary": "autotune_summary/2",
    "manifest": "artifact_manifest/1", "meta": "triton_meta/1", "isa_scan": "isa_scan/1",
    "probe": "compile_probe/1", "run": "kernel_run/1", "profile": "kernel_profile/1",
    "ab": "fallback_ab/1", "bench": "benchmark/1",
}
_ARTIFACT = re.compile(r"`(?:[\w./<>-]*/)?([a-z_]+)\.json`")
_FIELD_PATH = re.compile(r"`([a-z_]+(?:\[\])?(?:\.[a-z_0-9]+(?:\[\])?)+|[a-z_]+\[\])`")


def _contract_sections() -> dict[str, str]:
    text = (REFS / "json_contracts.md").read_text(encoding="utf-8")
    sections = {}
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        m = re.match(r"`([a-z0-9_]+/\d+)`", part)
        if m:
            sections[m.group(1)] = part
    return sections


def _schema_of(stem: str) -> str | None:
    for prefix, tag in ARTIFACT_SCHEMAS.items():
        if stem == prefix or stem.startswith(prefix + "_"):
            return tag
    return None


@pytest.mark.parametrize("doc", DOCS)
def test_artifact_field_paths_are_documented(doc):
    from tko.base.artifact import HEADER_KEYS
    from tko.base.contracts import documented_fields

    sections, fields = _contract_sections(), documented_fields()
    problems, checked = [], 0
    for line in _text(doc).splitlines():
        mentions = list(_ARTIFACT.finditer(line))
        for i, m in enumerate(mentions):
            tag = _schema_of(m.group(1))
            if tag is None:
                continue  # e.g. a Triton cache <kernel>.json, not an artifact of this bundle
            if tag not in sections:
                continue  # contract not written yet; test_contracts.py covers the outputs
            end = mentions[i + 1].start() if i + 1 < len(mentions) else len(line)
            for path in _FIELD_PATH.findall(line[m.end():end]):
                parts = path.replace("[]", "").split(".")
                if parts[-1] in ("txt", "yaml", "py", "md", "json", "csv") or parts[0] in ("torch", "tl", "triton", "tt"):
                    continue  # a file name, an API or a Triton IR attribute (tt.divisibility), not a field
                for part in parts:
                    checked += 1
                    # a row of the section's field table, or a field name the rows spell out in
                    # backticks (`families`, `kernels[].mix`): not any word of the section's prose
                    if part in fields[tag] or part in HEADER_KEYS or re.search(
                            rf"`(?:[a-z_0-9]+(?:\[\])?\.)*{re.escape(part)}(?:\[\])?\??[`.]", sections[tag]):
                        continue
                    problems.append(f"{m.group(0)} {path}: '{part}' is not a field of the {tag} contract")
    assert not problems, "\n".join(problems)
    if doc != "dcu_notes.md":
        assert checked, f"{doc}: no artifact field path found (extraction broken?)"


# ----------------------------------------------------------------------------- decision thresholds

def test_quoted_decision_thresholds_match_rules():
    import yaml
    rules_path = REFS / "decision_rules.yaml"
    rules = yaml.safe_load(rules_path.read_text(encoding="utf-8"))
    thresholds = {k: v["value"] for k, v in rules["thresholds"].items()}
    rule_ids = {r["id"] for r in rules["rules"] + rules.get("program_rules", [])}
    text = _text("optimization_patterns.md")
    section = text.split("## 0.", 1)[1].split("\n## ", 1)[0]
    quoted = re.findall(r"`([a-z_]+)` ([0-9]+(?:\.[0-9]+)?)", section)
    quoted = [(name, value) for name, value in quoted if name in thresholds]
    assert len(quoted) >= 6, "the thresholds of decision_rules.yaml are no longer quoted in §0"
    for name, value in quoted:
        assert float(value) == float(thresholds[name]), f"§0 quotes {name} {value}, rules say {thresholds[name]}"
    named_rules = re.findall(r"^\| [^|]+ \| `([a-z_]+)`", section, re.M)
    assert named_rules and set(named_rules) <= rule_ids, set(named_rules) - rule_ids


def test_h200_measured_copy_matches_capture_summary():
    summary = ROOT / "tests" / "fixtures" / "inductor_h200" / "summary.json"
    runs = json.loads(summary.read_text(encoding="utf-8"))["results"]
    copy = next(r["copy_bandwidth"] for r in runs if "copy_bandwidth" in r)
    h200 = next(r for r in _peaks() if r["name"] == "H200" and r["kind"] == "measured")
    assert h200["copy_gbps"] == round(copy["gbps"], 1)


# ----------------------------------------------------------------------------- worked example

def test_worked_example_numbers_match_the_capture(tmp_path, run_script):
    capture = ROOT / "tests" / "fixtures" / "inductor_h200" / "scatter_index_add"
    text = _text("investigation_workflow.md")
    example = text.split("## Worked example", 1)[1].split("\n## ", 1)[0]

    proc = run_script("profile_kernels.py", "--trace", capture / "trace.json.gz",
                      "--json-out", tmp_path / "p.json", "--markdown-out", tmp_path / "p.md")
    assert proc.returncode == 0, proc.stderr
    kernels = {k["name"]: k for k in json.loads((tmp_path / "p.json").read_text())["kernels"]}
    scatter = kernels["triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1"]
    init = kernels["triton_poi_fused_zeros_like_0"]
    assert f"`share` {scatter['share']:.3f} ({scatter['calls']} calls, `mean_us` {scatter['mean_us']:.1f})" in example
    assert f"has {init['share']:.3f}" in example and f"{init['mean_us']:.2f} µs per call" in example

    proc = run_script("summarize_autotune_log.py", capture / "log_profile.txt",
                      "--json-out", tmp_path / "a.json", "--markdown-out", tmp_path / "a.md")
    assert proc.returncode == 0, proc.stderr
    tuned = {k["kernel"]: k for k in json.loads((tmp_path / "a.json").read_text())["kernels"]}
    s = tuned["triton_poi_fused_index_index_add_mul_unsqueeze_zeros_like_1"]
    assert f"`spread` {s['spread']:.2f}" in example and s["statistic"] == "min"
    ms = sorted(c["ms"] for c in s["configs"] if c["ms"] is not None)[:3]
    assert f"{ms[0]:.4f}-{ms[2]:.4f} ms" in example
    i = tuned["triton_poi_fused_zeros_like_0"]
    assert "flat_spread" in i["flags"] and f"({i['spread']:.3f})" in example
    assert f"timed at {i['fastest_ms']:.4f} ms" in example


# ----------------------------------------------------------------------------- source facts

# Facts the documents state with [SRC <version>]: (package, file, regex, versions it holds for,
# document, words of the claim). When the installed package is in range, the source must still say
# it; the claim must still be in the document (remove the row with the claim).
SOURCE_FACTS = [
    ("triton", "backends/amd/compiler.py", r"def get_tensor_specialization[\s\S]{0,200}is_within_2gb",
     ("3.6", "3.9"), "optimization_patterns.md", "`get_tensor_specialization` from 3.6"),
    ("triton", "backends/amd/compiler.py", r'"S" in desc:\s*\n\s*ret \+= \[\["tt.pointer_range", 32\]\]',
     ("3.6", "3.9"), "optimization_patterns.md", "turned into `tt.pointer_range=32` by `parse_attr`"),
    ("triton", "backends/amd/compiler.py", r"untyped_storage\(\)\.size\(\) <= MAX_INT_32",
     ("3.6", "3.9"), "optimization_patterns.md", "`arg.untyped_storage().size() <= 2**31-1`"),
    ("triton", "backends/amd/compiler.py", r"if not amd\.supports_tdm\(options\.arch\):\s*\n\s*passes\.ttir\.add_rewrite_tensor_descriptor_to_pointer",
     ("3.9", "3.9"), "optimization_patterns.md", "rewrites descriptors to plain pointers unless"),
    ("triton", "backends/nvidia/compiler.py", r"capability // 10 < 9:\s*\n\s*passes\.ttir\.add_rewrite_tensor_descriptor_to_pointer",
     ("3.9", "3.9"), "optimization_patterns.md", "descriptors are rewritten to pointers only below sm_90"),
    ("triton", "backends/amd/compiler.py", r"waves_per_eu: int = 0[\s\S]*num_stages: int = 2[\s\S]*kpack: int = 1",
     ("3.9", "3.9"), "optimization_patterns.md", "`num_stages` (default 2 on HIP)"),
    ("triton", "backends/amd/compiler.py", r'add_fn_attr\("amdgpu-waves-per-eu", f"\{options\.waves_per_eu\},\{options\.waves_per_eu\}"\)',
     ("3.9", "3.9"), "optimization_patterns.md", "`amdgpu-waves-per-eu=N,N`"),
    ("triton", "backends/amd/compiler.py", r"\(self\.arch == 'gfx950'\) and \(self\.kpack != 1\)",
     ("3.9", "3.9"), "optimization_patterns.md", "`kpack` is forced to 1 on gfx950"),
    ("triton", "language/semantic.py", r'set_attr\("tt\.divisibility"[\s\S]*set_attr\("tt\.contiguity"[\s\S]*set_attr\("tt\.constancy"',
     ("3.4", "3.9"), "optimization_patterns.md", "`tl.max_contiguous` sets `tt.contiguity`"),
    ("triton", "knobs.py", r'env_bool\("AMDGCN_USE_BUFFER_ATOMICS", True\)',
     ("3.6", "3.9"), "dcu_notes.md", "`AMDGCN_USE_BUFFER_ATOMICS` (default on"),
    ("triton", "knobs.py", r'env_bool\("AMDGCN_ANALYZE_SMALL_TENSOR_RANGE", False\)',
     ("3.6", "3.9"), "dcu_notes.md", "`AMDGCN_ANALYZE_SMALL_TENSOR_RANGE` (3.6+, default off)"),
    ("torch", "_inductor/config.py", r'"TORCHINDUCTOR_EMIT_POINTER_RANGE_32", "1"\) == "1"',
     ("2.13", "2.13"), "optimization_patterns.md", "env `TORCHINDUCTOR_EMIT_POINTER_RANGE_32`, default on"),
    ("torch", "_inductor/codegen/triton.py", r"self\.atomic_add_found or not config\.triton\.emit_pointer_range_32",
     ("2.13", "2.13"), "optimization_patterns.md", "skipped for kernels with atomics"),
    ("torch", "_inductor/runtime/triton_heuristics.py", r'TRITON_MAX_BLOCK\["X"\], waves_per_eu=2[\s\S]{0,300}4096[\s\S]{0,300}2048,\s*num_warps=8,\s*num_stages=2,\s*waves_per_eu=1',
     ("2.13", "2.13"), "optimization_patterns.md", "torch 2.13 adds on ROCm"),
    ("torch", "_inductor/runtime/triton_heuristics.py", r"elif reduction_hint == ReductionHint\.INNER:\s*\n\s*return configs \+ \[contiguous_config\]",
     ("2.13", "2.13"), "optimization_patterns.md", "picks the one extra config shape Inductor adds"),
    ("torch", "_inductor/config.py", r"use_block_ptr = False[\s\S]*use_tensor_descriptor = False",
     ("2.13", "2.13"), "optimization_patterns.md", "`config.triton.use_tensor_descriptor` (experimental, default off)"),
    ("torch", "compiler/__init__.py", r"def disable\(fn=None, recursive=True, \*, reason=None\)",
     ("2.13", "2.13"), "optimization_patterns.md", "`torch.compiler.disable(fn=None, recursive=True, *, reason=None)`"),
    ("torch", "_inductor/graph.py", r'log\.debug\("Output code written to: %s"',
     ("2.11", "2.13"), "investigation_workflow.md", "`+inductor` gives the `Benchmark all input configs` / `Output code written to:` lines"),
]


@pytest.mark.parametrize("fact", SOURCE_FACTS, ids=lambda f: f"{f[0]}:{f[1]}:{f[5][:30]}")
def test_source_facts_still_hold(fact):
    import importlib.util
    from importlib.metadata import version as dist_version
    from tko.base.versions import parse_version

    pkg, rel, pattern, (low, high), doc, claim = fact
    assert claim in _text(doc), f"{doc} no longer says {claim!r}: drop or update this row"
    spec = importlib.util.find_spec(pkg)
    if spec is None:
        pytest.skip(f"{pkg} not installed")
    installed = parse_version(dist_version(pkg))[:2]
    if not (parse_version(low)[:2] <= installed <= parse_version(high)[:2]):
        pytest.skip(f"{pkg} {installed} outside {low}-{high}, where the documents state this")
    source = (Path(list(spec.submodule_search_locations)[0]) / rel).read_text(encoding="utf-8")
    assert re.search(pattern, source), f"{pkg} {rel}: no longer matches {pattern!r}"


def test_buffer_ops_defaults_agree_with_measured_compiles():
    """A run with the switch unset converts something exactly when the table says the default is on."""
    from tko.base.versions import parse_version

    _, machine = _buffer_ops_tables()
    checked = 0
    for run in _hint_runs():
        if run["AMDGCN_USE_BUFFER_OPS"] != "unset":
            continue
        version = parse_version(run["triton"])
        rows = [e for e in machine if e["build"] == "upstream" and _covers(e, version)]
        assert len(rows) == 1, f"triton {run['triton']} is covered by {len(rows)} upstream rows"
        converted = any(m.split()[0] in ("buffer", "mixed") for modes in run["cases"].values()
                        for m in modes.values())
        assert converted == rows[0]["default"], (run["triton"], run["arch"])
        checked += 1
    assert checked >= 4
