"""collect_inductor_artifacts.py on real H200 Inductor output (tests/fixtures/inductor_h200/).

The traps (symlinks out of a root, hostile kernel names, a planted link in --out) are built in a
temporary copy of the real cache at test time; they are synthetic by construction.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tko.read.autotune_log import parse_files
from tko.read.autotune_summary import summarize
from tko.base.contracts import contract_problems

H200 = Path(__file__).resolve().parent / "fixtures" / "inductor_h200"
ROW = H200 / "row_reduction"
ROW_KERNEL = "triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online_sub_0"


def _collect(run_script, out, *args):
    res = run_script("collect_inductor_artifacts.py", *args, "--out", out)
    assert res.returncode == 0, res.stderr
    doc = json.loads((Path(out) / "manifest.json").read_text())
    assert doc["schema"] == "artifact_manifest/1"
    assert contract_problems(doc) == []
    return doc


def _files_under(path: Path) -> set[Path]:
    return {p for p in path.rglob("*") if p.is_file() or p.is_symlink()}


def test_row_reduction_every_artifact_with_sources_and_sizes(run_script, tmp_path):
    out = tmp_path / "arts"
    doc = _collect(run_script, out, "--log", ROW / "log_profile.txt", "--cache-root",
                   ROW / "inductor_cache")
    (k,) = doc["kernels"]
    assert k["kernel"] == ROW_KERNEL and k["dir"] == ROW_KERNEL
    kinds = {a["kind"] for a in k["artifacts"]}
    assert {"output_code", "kernel_module", "triton_json", "triton_ttgir", "triton_ptx",
            "triton_cubin", "triton_source", "triton_group"} <= kinds
    for art in k["artifacts"]:
        copied = out / art["path"]
        assert copied.is_file() and copied.stat().st_size == art["size"]
        assert copied.read_bytes() == Path(art["source"]).read_bytes()
    # the module defines the kernel; the log named it by its path on the H200, found by its tail
    (module,) = [a for a in k["artifacts"] if a["kind"] == "kernel_module"]
    assert f"def {ROW_KERNEL}(" in (out / module["path"]).read_text()
    assert any(old.startswith("/tmp/indfx/row_reduction/") for old in doc["relocated"])
    # the log benchmarked four configs (two declared, two from dynamic R0_BLOCK scaling):
    # each compiled config is one cache entry, labelled from its .json and TTIR
    entries = k["triton_cache_entries"]
    assert len(entries) == 4
    assert {e["label"]["num_warps"] for e in entries} == {16}
    assert sorted(max(e["label"]["range_ends"]) for e in entries) == [1024, 2048, 4096, 8192]
    assert all(e["backend"] == "cuda" and e["label"]["target"] == "cuda:90" for e in entries)
    summary = summarize(parse_files([ROW / "log_profile.txt"]))
    timed = {c["config"]["kwargs"]["R0_BLOCK"] for c in summary["kernels"][0]["configs"]}
    assert timed == {1024, 2048, 4096, 8192}
    # the cache keeps Triton's names, so an ISA scanner can walk the tree
    for e in entries:
        folder = out / e["path"]
        assert (folder / f"{ROW_KERNEL}.json").is_file()
        assert (folder / f"__grp__{ROW_KERNEL}.json").is_file()
    missing = {m["kind"]: m["reason"] for m in k["missing"]}
    assert "cuda:90" in missing["amdgcn"]           # the run was on NVIDIA
    assert "best_config" in missing                 # the run disabled the autotune cache
    assert "llir" in missing                        # pruned from the fixture
    assert "output_code" not in missing and "kernel_module" not in missing


def test_debug_tree_output_code_and_several_configs(run_script, tmp_path):
    pc = H200 / "pointwise_chain"
    doc = _collect(run_script, tmp_path / "o", "--log", pc / "log_profile.txt", "--cache-root",
                   pc / "inductor_cache")
    (k,) = doc["kernels"]
    debug = [a for a in k["artifacts"] if a["kind"] == "debug_output_code"]
    assert len(debug) == 1 and debug[0]["path"].endswith("/output_code.py")
    assert "torch_compile_debug" in debug[0]["source"]
    labels = sorted((e["label"]["num_warps"], e["label"]["range_ends"]) for e in
                    k["triton_cache_entries"])
    assert labels == [(4, [1024]), (8, [512])]


def test_hand_written_autotune_kernel_entries_match_the_configs_tried(run_script, tmp_path):
    ua = H200 / "user_autotune_kernel"
    doc = _collect(run_script, tmp_path / "o", "--log", ua / "log_profile.txt",
                   "--triton-cache", ua / "triton_cache", "--kernel", "scale_bias_relu_kernel")
    (k,) = doc["kernels"]
    compiled = sorted((e["label"]["range_ends"][-1], e["label"]["num_warps"])
                      for e in k["triton_cache_entries"])
    tried = summarize(parse_files([ua / "log_profile.txt"]))["kernels"][0]["configs"]
    assert compiled == sorted((c["config"]["kwargs"]["BLOCK"], c["config"]["num_warps"])
                              for c in tried)


def test_kernel_filter_and_unknown_kernel(run_script, tmp_path):
    mlp = H200 / "mlp_train_step"
    everything = _collect(run_script, tmp_path / "all", "--log", mlp / "log_profile.txt",
                          "--cache-root", mlp / "inductor_cache")
    names = [k["kernel"] for k in everything["kernels"]]
    assert len(names) == 9 and "triton_poi_fused_gelu_1" in names
    one = _collect(run_script, tmp_path / "one", "--log", mlp / "log_profile.txt", "--cache-root",
                   mlp / "inductor_cache", "--kernel", "triton_poi_fused_gelu_1",
                   "--kernel", "no_such_kernel")
    assert [k["kernel"] for k in one["kernels"]] == ["triton_poi_fused_gelu_1", "no_such_kernel"]
    ghost = one["kernels"][1]
    assert ghost["artifacts"] == []
    assert {"output_code", "kernel_module", "triton_cache"} <= {m["kind"] for m in ghost["missing"]}
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == [
        "manifest.json", "output_code", "triton_poi_fused_gelu_1"]
    # a part of a name picks every kernel that contains it (as scan_amdgcn.py --kernel does)
    part = _collect(run_script, tmp_path / "part", "--log", mlp / "log_profile.txt",
                    "--cache-root", mlp / "inductor_cache", "--kernel", "gelu")
    assert [k["kernel"] for k in part["kernels"]] == [
        "triton_poi_fused_gelu_1", "triton_poi_fused_gelu_gelu_backward_2"]


def test_wrapper_modules_are_copied_once_and_listed_per_kernel(run_script, tmp_path):
    mlp = H200 / "mlp_train_step"
    doc = _collect(run_script, tmp_path / "o", "--log", mlp / "log_profile.txt", "--cache-root",
                   mlp / "inductor_cache")
    wrappers = {a["path"] for k in doc["kernels"] for a in k["artifacts"]
                if a["kind"] == "output_code"}
    # a training step compiles two graphs, forward and backward: two wrapper modules
    assert len(wrappers) == 2 and all(w.startswith("output_code/") for w in wrappers)
    assert sorted(p.name for p in (tmp_path / "o" / "output_code").iterdir()) == sorted(
        Path(w).name for w in wrappers)
    for k in doc["kernels"]:
        (mine,) = [a for a in k["artifacts"] if a["kind"] == "output_code"]
        assert f"async_compile.triton('{k['kernel']}'" in (tmp_path / "o" / mine["path"]).read_text()


@pytest.fixture
def trap_tree(tmp_path):
    """A copy of the real row_reduction cache with hostile additions (synthetic traps)."""
    root = tmp_path / "cache"
    shutil.copytree(ROW / "inductor_cache", root)
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.txt").write_text("SECRET-CONTENT")
    # 1. a stage file of a real entry that links out of the root
    entry = next(p for p in root.rglob(f"{ROW_KERNEL}.json") if p.parent.name.isupper())
    os.symlink(secret / "secret.txt", entry.parent / f"{ROW_KERNEL}.amdgcn")
    # 2. a whole cache entry that is a link to a folder outside, holding a plausible entry
    fake = secret / "entry"
    fake.mkdir()
    (fake / f"{ROW_KERNEL}.json").write_text('{"name": "SECRET-CONTENT", "num_warps": 1}')
    os.symlink(fake, entry.parent.parent / ("A" * 52))
    # 3. a module folder that links out, with a module defining the kernel
    mod = secret / "mods"
    mod.mkdir()
    (mod / "cxx.py").write_text(f"@triton.jit\ndef {ROW_KERNEL}(x):\n    SECRET-CONTENT\n")
    os.symlink(mod, root / "zz")
    # 4. a link inside the root to a file inside the root is fine
    module = next(p for p in root.rglob("*.py") if f"def {ROW_KERNEL}(" in p.read_text())
    os.symlink(module, module.parent / "clink.py")
    # 5. a log naming a file outside every root
    log = tmp_path / "logs" / "log_profile.txt"
    log.parent.mkdir()
    (secret / "evil.py").write_text("SECRET-CONTENT")
    log.write_text((ROW / "log_profile.txt").read_text()
                   + f"Output code written to: {secret / 'evil.py'}\n")
    return {"root": root, "secret": secret, "log": log, "tmp": tmp_path}


def test_symlinks_never_followed_out_of_a_root(run_script, trap_tree):
    out = trap_tree["tmp"] / "arts"
    doc = _collect(run_script, out, "--log", trap_tree["log"], "--cache-root", trap_tree["root"])
    for f in _files_under(out):
        assert b"SECRET-CONTENT" not in f.read_bytes(), f
    refused = {Path(r["path"]).name for r in doc["refused"]}
    assert {f"{ROW_KERNEL}.amdgcn", "A" * 52, "zz", "evil.py"} <= refused
    (k,) = doc["kernels"]
    assert len(k["triton_cache_entries"]) == 4  # the linked-in fake entry is not one of them
    # the in-root link is allowed, and is the same file as the module it points to
    assert "clink.py" not in refused
    modules = [a for a in k["artifacts"] if a["kind"] == "kernel_module"]
    assert len(modules) == 1


def test_hostile_kernel_name_stays_inside_out(run_script, trap_tree):
    base = trap_tree["tmp"]
    before = _files_under(base)
    out = base / "deep" / "arts"
    doc = _collect(run_script, out, "--cache-root", trap_tree["root"],
                   "--kernel", "../../x", "--kernel", "/etc/passwd", "--kernel", ROW_KERNEL)
    created = _files_under(base) - before
    assert created and all(out in p.parents for p in created)
    dirs = [k["dir"] for k in doc["kernels"]]
    assert all("/" not in d and not d.startswith(".") for d in dirs)
    assert not (base / "x").exists() and not (base / "deep" / "x").exists()


def test_planted_link_in_out_is_not_written_through(run_script, trap_tree):
    out = trap_tree["tmp"] / "arts"
    victim = trap_tree["tmp"] / "victim"
    victim.mkdir()
    (out / ROW_KERNEL).mkdir(parents=True)
    os.symlink(victim, out / ROW_KERNEL / "kernel_module")
    doc = _collect(run_script, out, "--cache-root", trap_tree["root"], "--kernel", ROW_KERNEL)
    assert list(victim.iterdir()) == []
    assert any("outside" in r["reason"] for r in doc["refused"])


def test_bad_usage_exits_2(run_script, tmp_path):
    res = run_script("collect_inductor_artifacts.py", "--out", tmp_path / "o")
    assert res.returncode == 2 and "nothing to collect" in res.stderr
    res = run_script("collect_inductor_artifacts.py", "--log", tmp_path / "nope.txt",
                     "--out", tmp_path / "o")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    res = run_script("collect_inductor_artifacts.py", "--cache-root", tmp_path / "nope",
                     "--out", tmp_path / "o")
    assert res.returncode == 2 and "not a directory" in res.stderr
    res = run_script("collect_inductor_artifacts.py", "--cache-root", ROW / "inductor_cache",
                     "--out", ROW / "inductor_cache")
    assert res.returncode == 2 and "also a folder to collect from" in res.stderr


def test_capture_dir_standalone_and_saved_inputs(run_script, tmp_path):
    """The capture folder's plumbing; the folder is assembled here (synthetic): the events file
    of tests/fixtures/autotune_logs as autotune.log, plus the files it names."""
    pc = H200 / "pointwise_chain"
    kernel = "triton_poi_fused_add_gelu_mul_0"
    cap = tmp_path / "autotune_kernels"
    cap.mkdir()
    events = (Path(__file__).parent / "fixtures" / "autotune_logs" / "autotune_events_contract.jsonl")
    lines = events.read_text().splitlines()
    launch = json.loads(lines[2])
    launch["args"][1]["saved"] = f"{kernel}.inputs/arg1.pt"  # as autotune_capture_patch names it
    lines[2] = json.dumps(launch)
    (cap / "autotune.log").write_text("\n".join(lines) + "\n")
    module = next(p for p in (pc / "inductor_cache").rglob("*.py")
                  if f"def {kernel}(" in p.read_text() and "async_compile" not in p.read_text())
    (cap / f"{kernel}.py").write_bytes(module.read_bytes())  # named autotune_kernels/<kernel>.py
    (cap / f"{kernel}__s2.py").write_bytes(module.read_bytes())  # a second argument signature
    (cap / f"{kernel}.inputs").mkdir()
    (cap / f"{kernel}.inputs" / "arg1.pt").write_bytes(b"\x00" * 64)
    (cap / f"{kernel}.inputs" / "arg2.pt").write_bytes(b"\x00" * 64)
    (cap / f"{kernel}_meta.json").write_text("{}")
    (cap / f"{kernel}0.py").write_text("another kernel")  # a longer name is not this kernel
    doc = _collect(run_script, tmp_path / "o", "--log", pc / "log_profile.txt", "--cache-root",
                   pc / "inductor_cache", "--capture-dir", cap)
    names = [k["kernel"] for k in doc["kernels"]]
    # the log's kernel and the capture log's kernels
    assert names[0] == kernel and {"triton_red_fused_sum_0", "triton_per_fused_scatter_2"} <= set(names)
    k = doc["kernels"][0]
    by_kind = {}
    for a in k["artifacts"]:
        by_kind.setdefault(a["kind"], []).append(a["path"])
    assert sorted(by_kind["capture_standalone"]) == [f"{kernel}/capture/{kernel}.py",
                                                     f"{kernel}/capture/{kernel}__s2.py"]
    assert sorted(by_kind["capture_input"]) == [f"{kernel}/capture/{kernel}.inputs/arg1.pt",
                                                f"{kernel}/capture/{kernel}.inputs/arg2.pt"]
    assert by_kind["capture_file"] == [f"{kernel}/capture/{kernel}_meta.json"]
    assert "capture_standalone" not in {m["kind"] for m in k["missing"]}
    other = next(x for x in doc["kernels"] if x["kernel"] == "triton_red_fused_sum_0")
    assert "capture_standalone" in {m["kind"] for m in other["missing"]}


def test_hip_cache_entry_compiled_offline_is_collected_and_scannable(run_script, tmp_path):
    """A real gfx942 Triton cache entry, compiled here by the installed Triton without a GPU."""
    pytest.importorskip("triton")
    cache = tmp_path / "triton_cache"
    script = tmp_path / "compile_gfx942.py"
    script.write_text(
        "import triton, triton.language as tl\n"
        "from triton.compiler import ASTSource\n"
        "from triton.backends.compiler import GPUTarget\n"
        "@triton.jit\n"
        "def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):\n"
        "    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)\n"
        "    xmask = xindex < xnumel\n"
        "    tl.store(out_ptr0 + xindex, tl.load(in_ptr0 + xindex, xmask) + 1.0, xmask)\n"
        "attrs = {(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]]}\n"
        "sig = {'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}\n"
        "for block, warps in ((1024, 4), (256, 1)):\n"
        "    src = ASTSource(triton_poi_fused_add_0, sig, {(3,): block}, attrs)\n"
        "    triton.compile(src, target=GPUTarget('hip', 'gfx942', 64), options={'num_warps': warps})\n")
    from tko.compile.offline_compile import hip_linker_env

    linker, _ = hip_linker_env({"backend": "hip"})  # Triton < 3.5 without ld.lld: the stand-in
    res = subprocess_run(script, {"TRITON_CACHE_DIR": str(cache), "TRITON_DEFAULT_FP_FUSION": "1", **linker})
    assert res.returncode == 0, res.stderr[-2000:]
    out = tmp_path / "arts"
    doc = _collect(run_script, out, "--triton-cache", cache)
    (k,) = doc["kernels"]
    assert k["kernel"] == "triton_poi_fused_add_0"
    labels = sorted((e["label"]["num_warps"], e["label"]["range_ends"][-1], e["label"]["target"])
                    for e in k["triton_cache_entries"])
    assert labels == [(1, 256, "hip:gfx942"), (4, 1024, "hip:gfx942")]
    assert all(e["missing_stages"] == [] for e in k["triton_cache_entries"])
    assert "amdgcn" not in {m["kind"] for m in k["missing"]}
    scan = run_script("scan_amdgcn.py", out, "--kernel", "triton_poi_fused_add_0", "--json-out",
                      tmp_path / "isa.json", "--quiet")
    assert scan.returncode == 0, scan.stderr
    isa = json.loads((tmp_path / "isa.json").read_text())
    scanned = {Path(x["source"]).parent.name for x in isa["kernels"] if x["format"] == "amdgcn"}
    assert scanned == {e["key"] for e in k["triton_cache_entries"]}


def subprocess_run(script: Path, env: dict):
    import subprocess
    import sys

    full = dict(os.environ)
    full.update(env)
    return subprocess.run([sys.executable, str(script)], env=full, capture_output=True, text=True,
                          timeout=300)


CAPTURE = Path(__file__).resolve().parent / "fixtures" / "capture_h200"


def test_real_capture_folder_with_the_inductor_run(run_script, tmp_path):
    """The capture log names its standalone file by its path on the H200; it is found by name."""
    doc = _collect(run_script, tmp_path / "o", "--log", ROW / "log_profile.txt", "--cache-root",
                   ROW / "inductor_cache", "--capture-dir", CAPTURE / "row_reduction")
    (k,) = doc["kernels"]
    (standalone,) = [a for a in k["artifacts"] if a["kind"] == "capture_standalone"]
    assert standalone["path"] == f"{ROW_KERNEL}/capture/{ROW_KERNEL}.py"
    assert (tmp_path / "o" / standalone["path"]).read_bytes() == (
        CAPTURE / "row_reduction" / f"{ROW_KERNEL}.py").read_bytes()
    # run_<kernel>.json (a standalone run's result) is not named <kernel>.*: not this kernel's
    assert not [a for a in k["artifacts"] if a["kind"] == "capture_file"]
    assert {m["kind"] for m in k["missing"]} == {"best_config", "amdgcn", "llir"}


def test_real_capture_folder_every_signature(run_script, tmp_path):
    cap = CAPTURE / "dynamic_shapes"
    doc = _collect(run_script, tmp_path / "o", "--capture-dir", cap)
    (k,) = doc["kernels"]
    got = sorted(Path(a["path"]).name for a in k["artifacts"] if a["kind"] == "capture_standalone")
    assert len(got) == 2 and got == sorted(p.name for p in cap.glob(f"{k['kernel']}*.py"))
    assert {m["kind"] for m in k["missing"]} == {"kernel_module", "triton_cache", "best_config"}


def test_cache_layouts_of_other_torch_and_triton_versions(tmp_path):
    """triton/<device>/<key> (torch <= 2.10) and 64-hex keys (triton <= 3.2): a real entry of the
    H200 run moved into those layouts."""
    from tko.read.inductor_files import Root, path_key, triton_cache_entries, triton_dirs

    real_entry = next(p.parent for p in (ROW / "inductor_cache").rglob(f"{ROW_KERNEL}.json")
                      if p.parent.name.isupper())
    meta = json.loads((real_entry / f"{ROW_KERNEL}.json").read_text())
    assert path_key(meta["hash"]) == real_entry.name  # the 3.3+ folder name is base32(sha256)
    root = tmp_path / "torchinductor_user"
    shutil.copytree(real_entry, root / "triton" / "0" / meta["hash"])           # <= 3.2 name
    shutil.copytree(real_entry, root / "triton" / "1" / real_entry.name)        # 3.3+ name
    (root / "triton" / "0" / "not_a_key").mkdir()
    refused: list = []
    r = Root(root, refused)
    entries = [e for d in triton_dirs(r) for e in triton_cache_entries(r, d)]
    assert sorted(len(e.key) for e in entries) == [52, 64]
    assert all(e.name == ROW_KERNEL and meta["hash"] in e.keys() for e in entries)
    assert refused == []


def test_a_region_compiled_for_the_cpu_is_named_by_its_cpp_kernels(run_script, tmp_path):
    """Inductor's CPU output code (torch 2.13, a real capture: tests/fixtures/inductor_cpu) defines its
    kernels with async_compile.cpp_pybinding: no Triton kernel, and the manifest names the C++ one.
    A Triton run's manifest names none."""
    from tko.read import inductor_files

    cpu = Path(__file__).resolve().parent / "fixtures" / "inductor_cpu" / "pointwise_chain"
    doc = _collect(run_script, tmp_path / "cpu", "--log", cpu / "log_profile.txt", "--cache-root",
                   cpu / "inductor_cache")
    assert doc["kernels"] == [] and doc["cpu_kernels"] == ["cpp_fused_add_gelu_mul_0"]
    (code,) = (cpu / "inductor_cache").rglob("*.py")
    assert inductor_files.kernels_in_output_code(code.read_text()) == {}
    gpu = _collect(run_script, tmp_path / "gpu", "--log", ROW / "log_profile.txt", "--cache-root",
                   ROW / "inductor_cache")
    assert gpu["kernels"] and gpu["cpu_kernels"] == []
