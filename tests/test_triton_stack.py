"""The DCU Triton stacks: check_env.py reading each stack's installed backend (stand-in installs built
from the real option dataclasses, tests/fixtures/triton_stacks/), the one place that decides which
backend options may be passed, and its users (sweep, pins, compile probe)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tko.compile import compile_probe, offline_compile, probe_variants
from tko.base import config
from tko.patch import pins
from tko.measure import sweep_plan
from tko.read import triton_stack
from tko.base.contracts import contract_problems

FIX = Path(__file__).resolve().parent / "fixtures" / "triton_stacks"
sys.path.insert(0, str(FIX))
import make_fake_install  # noqa: E402

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def dataclass_fields(fixture: str) -> dict:
    """``{field: default}`` of the options dataclass in a fixture, read with ``ast`` (not by importing
    it): the independent reading the run-time one is compared with."""
    tree = ast.parse(make_fake_install.excerpt(fixture))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    out = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign):
            try:
                out[node.target.id] = ast.literal_eval(node.value)
            except ValueError:
                out[node.target.id] = None
    return out


DAS = dataclass_fields("triton_das_hcu_hipoptions.py.txt")
FT30 = dataclass_fields("flagtree_hcu30_hipoptions.py.txt")
FT36 = dataclass_fields("flagtree_hcu36_hipoptions.py.txt")


@pytest.fixture(scope="module")
def installs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("stacks")
    return {name: make_fake_install.build(name, root / name) for name in make_fake_install.STACKS}


def check_env(site: Path, cwd: Path, *args) -> tuple[subprocess.CompletedProcess, dict]:
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, str(SCRIPTS / "check_env.py"), "--out", "env.json", *args],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    doc = json.loads((cwd / "env.json").read_text())
    assert contract_problems(doc) == []
    return res, doc


# --------------------------------------------------------------------------- check_env on each stack

EXPECTED = {
    # stack: (name, options fixture fields, buffer-op variable, HCU options offered, archive, tuner)
    "triton-das": ("triton-das", DAS, "AMDGCN_USE_BUFFER_OPS",
                   {"schedule_hint", "sched_latency", "buffer_cache_swizzle", "mmac_layout_force",
                    "enable_v_mmac_cluster"}, True, True),
    "flagtree-hcu": ("flagtree-hcu", FT30, "HCUGCN_USE_BUFFER_OPS", set(), False, False),
    "flagtree-hcu-3.6": ("flagtree-hcu", FT36, "AMDGCN_USE_BUFFER_OPS",
                         {"schedule_hint", "sched_latency", "mmac_layout_force"}, False, False),
    "dtk": ("dtk", None, "AMDGCN_USE_BUFFER_OPS", set(), False, False),
}


@pytest.mark.parametrize("stack", list(EXPECTED))
def test_check_env_records_the_stack_its_backend_accepts(installs, tmp_path, stack):
    name, fields, variable, hcu_offered, archive, tuner = EXPECTED[stack]
    res, doc = check_env(installs[stack], tmp_path)
    rec = doc["triton_stack"]
    assert rec["name"] == name
    assert rec["triton_version"] == make_fake_install.STACKS[stack]["version"]
    assert rec["buffer_ops"]["variable"] == variable
    if fields is None:          # the DTK wheel: its backend source is not public, nothing to read
        assert rec["options"] is None and rec["options_error"] and rec["tunable"] == {}
    else:
        # read at run time through triton.backends = the dataclass fields of the real source text
        assert rec["backend"] == "hcu" and rec["options"] == sorted(fields)
        assert doc["triton"]["backend_options"]["hcu"]["fields"]["waves_per_eu"] == fields["waves_per_eu"] == 1
        hcu_only = {t.name for t in triton_stack.TUNABLE if t.scope == "hcu"}
        assert set(rec["tunable"]) & hcu_only == hcu_offered
        assert rec["tunable"]["waves_per_eu"] == [2, 4]          # 1 is this backend's default
        for option in hcu_only - hcu_offered:
            assert option in rec["left_out"]
    assert (rec["failed_kernels_dir"] == "~/.triton/cache/failed_kernels") is archive
    assert (rec["tuner"] is not None) is tuner
    # the summary table, and --show of the file, print the same stack
    title = next(ln for ln in res.stdout.splitlines() if ln.startswith("triton stack: "))
    assert title.startswith(f"triton stack: {name} (") and rec["triton_version"] in title
    assert ("extras" in res.stdout) is (archive or tuner)
    shown = subprocess.run([sys.executable, str(SCRIPTS / "check_env.py"), "--show", "env.json"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and title in shown.stdout


def test_compile_target_is_native_where_an_hcu_backend_is_installed(installs):
    code = ("import sys; sys.path.insert(0, %r); from tko.read import triton_stack; from tko.compile import compile_probe, offline_compile; "
            "print(triton_stack.compile_arch('gfx936')); print(triton_stack.compile_arch('gfx942')); "
            "print(compile_probe.target_backends(['gfx938'])['gfx938'][1]); "
            "print(offline_compile.make_target('gfx938')[1:3])" % str(SCRIPTS))
    res = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(installs["triton-das"])},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["('gfx936', None)", "('gfx942', None)", "hcu",
                                       "({'backend': 'hip', 'arch': 'gfx938', 'warp_size': 64}, None)"]
    # upstream Triton (this machine's): the proxy, said so
    arch, note = triton_stack.compile_arch("gfx936")
    assert arch == "gfx942" and "proxy gfx942" in note


# --------------------------------------------------------------------------- classification on facts

@pytest.mark.parametrize("triton, buffer_ops, name", [
    # DTK 25.04 wheel: +das version, compiler_hcu.py next to the amd backend (an sglang log's path)
    ({"importable": True, "version": "3.1.0+das.opt1.dtk25042", "backends": ["amd"],
      "backend_files": {"amd": ["compiler.py", "compiler_hcu.py", "driver.py"]}}, {}, "dtk"),
    ({"importable": True, "version": "3.3.0+das", "backends": []}, {}, "dtk"),
    # FlagTree 3.6 without its dist-info: its knob class is knobs.hcu
    ({"importable": True, "version": "3.6.0", "backends": ["hcu"],
      "buffer_ops_knob": {"knob": "triton.knobs.hcu.use_buffer_ops"}}, {}, "flagtree-hcu"),
    ({"importable": True, "version": "3.9.0", "backends": ["amd", "nvidia"]}, {}, "upstream"),
    ({"importable": False}, {}, None),
])
def test_stack_name_from_facts(triton, buffer_ops, name):
    assert triton_stack.classify(triton, buffer_ops)["name"] == name


@pytest.mark.parametrize("wrong", ["x", 7, None, [1], {"a": 1}, True])
def test_classify_reads_wrong_typed_fields_as_absent(wrong):
    for key in ("version", "backends", "backend_files", "backend_options", "buffer_ops_knob", "flagtree_version"):
        rec = triton_stack.classify({"importable": True, "version": "3.6.0", key: wrong}, {"variable": wrong})
        assert rec["name"] in triton_stack.STACK_NAMES
    assert triton_stack.classify(wrong, wrong)["name"] is None


# --------------------------------------------------------------------------- what may be passed

def test_offered_options_follow_the_backends_fields():
    offered, left_out = triton_stack.offered_options(DAS, "hcu", arch="gfx938", uses_dot=False)
    assert offered == {"waves_per_eu": [2, 4], "buffer_cache_swizzle": [True]}
    assert "sched_latency" not in offered and "tl.dot only" in left_out
    offered, left_out = triton_stack.offered_options(DAS, "hcu", arch="gfx936", uses_dot=True)
    assert offered["sched_latency"] == ["mmac5-ds10", "mmac5-ds6"] and offered["kpack"] == [2]
    assert left_out is None
    offered, left_out = triton_stack.offered_options(FT30, "hcu", arch="gfx936", uses_dot=True)
    assert set(offered) == {"waves_per_eu", "matrix_instr_nonkdim", "kpack"}
    assert "schedule_hint, sched_latency, buffer_cache_swizzle, mmac_layout_force, enable_v_mmac_cluster " \
           "(not options of the installed hcu backend)" in left_out
    upstream = {"waves_per_eu": 0, "matrix_instr_nonkdim": 0, "kpack": 1, "schedule_hint": ""}
    offered, left_out = triton_stack.offered_options(upstream, "amd", uses_dot=True)
    assert offered["waves_per_eu"] == [1, 2, 4] and "schedule_hint (act on HCU backends only)" in left_out
    assert triton_stack.offered_options(None, None)[0] == {}


def test_drop_unaccepted_keeps_meta_parameters_and_names_what_it_dropped():
    flat = {"XBLOCK": 1024, "waves_per_eu": 2, "schedule_hint": "attention", "num_warps": 4}
    kept, line = triton_stack.drop_unaccepted(flat, FT30, "hcu")
    assert kept == {"XBLOCK": 1024, "waves_per_eu": 2, "num_warps": 4}
    assert line == "left out schedule_hint='attention': not options of the installed hcu backend"
    assert triton_stack.drop_unaccepted(flat, DAS, "hcu") == (flat, None)
    assert triton_stack.drop_unaccepted(flat, None, None) == (flat, None)   # unknown: nothing refused
    assert set(config.HCU_OPTIONS) <= set(DAS) | set(FT30)   # every HCU option is a real field


def test_pins_leave_out_what_the_backend_lacks():
    pin = {"kwargs": {"XBLOCK": 8, "waves_per_eu": 2, "sched_latency": "mmac5-ds10"}, "num_warps": 4}
    cfg, line = pins.backend_checked(pin, FT30, "hcu")
    assert cfg == {"kwargs": {"XBLOCK": 8, "waves_per_eu": 2}, "num_warps": 4}
    assert "sched_latency='mmac5-ds10'" in line
    assert pins.backend_checked(pin, FT36, "hcu") == (pin, None)


# --------------------------------------------------------------------------- sweep

CAP = Path(__file__).resolve().parent / "fixtures" / "capture_h200"


def test_sweep_offers_the_hcu_options_the_backend_has(tmp_path):
    red = CAP / "row_reduction" / "triton_red_fused__softmax_exp_native_layer_norm_prepare_softmax_online_sub_0.py"
    das = sweep_plan.build_plan(red, tmp_path / "d", hip=True, backend_options=(DAS, "hcu"))
    names = [v.name for v in das.variants]
    assert names[-3:] == ["waves_per_eu=2", "waves_per_eu=4", "buffer_cache_swizzle=True"]
    assert das.variants[-1].flat["buffer_cache_swizzle"] is True
    assert any("matrix_instr_nonkdim, kpack, schedule_hint" in n and "tl.dot only" in n for n in das.notes)
    assert das.backend_options == {"backend": "hcu", "accepted": sorted(DAS)}
    ft = sweep_plan.build_plan(red, tmp_path / "f", hip=True, backend_options=(FT30, "hcu"))
    assert [v.name for v in ft.variants][-2:] == ["waves_per_eu=2", "waves_per_eu=4"]
    assert any("buffer_cache_swizzle" in n and "not options of the installed hcu backend" in n for n in ft.notes)


def test_sweep_never_passes_an_option_the_backend_lacks():
    variants = [sweep_plan.Variant("baseline", "baseline", "", {"XBLOCK": 1, "schedule_hint": "attention"}, None, "f"),
                sweep_plan.Variant("waves_per_eu=2", "config", "", {"XBLOCK": 1, "waves_per_eu": 2}, None, "f")]
    notes: list = []
    sweep_plan._without_unaccepted(variants, (FT30, "hcu"), notes)
    assert variants[0].flat == {"XBLOCK": 1} and variants[1].flat == {"XBLOCK": 1, "waves_per_eu": 2}
    assert notes == ["baseline: left out schedule_hint='attention': not options of the installed hcu backend"]


# --------------------------------------------------------------------------- compile probe

KERNELS = Path(__file__).resolve().parent / "fixtures" / "kernels"


def _plan_of(path: Path, signature: str, cfg: str):
    from tko.read import kernel_source

    text, parsed = kernel_source.read_kernel_file(path)
    kernel = kernel_source.select_kernel(parsed, None)
    plan = offline_compile.plan_compile(kernel, config=offline_compile.parse_config_flag(cfg), signature=signature)
    return kernel, text, plan


def test_probe_option_variants_per_target_backend():
    kernel, text, plan = _plan_of(KERNELS / "add_kernel.py", "x_ptr=*fp32,y_ptr=*fp32,output_ptr=*fp32,n_elements=i32",
                                  "BLOCK_SIZE=1024,num_warps=4")
    backends = {"gfx936": (DAS, "hcu"), "gfx942": ({"waves_per_eu": 0, "kpack": 1}, "amd"), "sm_90": ({}, "nvidia")}
    offered, line = compile_probe.offered_for_targets(backends, text)
    assert offered == {"waves_per_eu": [2, 4, 1], "buffer_cache_swizzle": [True]}
    variants = probe_variants.build_variants(["baseline", "options"], kernel, text, plan, (offered, line))
    assert [v.name for v in variants] == ["baseline", "waves_per_eu=2", "waves_per_eu=4", "waves_per_eu=1",
                                          "buffer_cache_swizzle=True"]
    swizzle = variants[-1]
    assert swizzle.config["extras"] == {"buffer_cache_swizzle": True} and swizzle.config["kwargs"] == {"BLOCK_SIZE": 1024}
    assert compile_probe._target_skip(swizzle, *backends["gfx936"]) is None
    assert "buffer_cache_swizzle=True" in compile_probe._target_skip(swizzle, *backends["gfx942"])
    assert compile_probe._target_skip(variants[1], *backends["sm_90"])       # no waves_per_eu on CUDA
    (kpack,) = probe_variants.build_variants(["kpack"], kernel, text, plan, (offered, line))
    assert kpack.skipped and "tl.dot only" in kpack.skipped


@pytest.mark.slow
def test_probe_option_variants_compile_offline_with_registers_side_by_side(tmp_path):
    """A real offline compile for gfx942: waves_per_eu changes VGPRs / occupancy, reported per variant."""
    kernel = tmp_path / "dot.py"
    kernel.write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def mm(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):\n"
        "    rm = tl.arange(0, BM)\n    rn = tl.arange(0, BN)\n    rk = tl.arange(0, BK)\n"
        "    acc = tl.zeros((BM, BN), dtype=tl.float32)\n"
        "    for k in range(0, K, BK):\n"
        "        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])\n"
        "        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])\n"
        "        acc += tl.dot(a, b)\n"
        "    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)\n")
    res = subprocess.run([sys.executable, str(SCRIPTS / "probe_compile.py"), str(kernel), "--arch", "gfx942",
                          "--variants", "baseline,waves_per_eu", "--signature", "a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,K=i32",
                          "--config", "BM=128,BN=128,BK=64,num_warps=4", "--json-out", "p.json", "--markdown-out", "p.md",
                          "--jobs", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "p.json").read_text())
    assert contract_problems(doc) == []
    assert doc["backend_options"]["gfx942"]["backend"] == "amd"
    rows = {r["variant"]: r for r in doc["results"]}
    assert set(rows) == {"baseline", "waves_per_eu=1", "waves_per_eu=2", "waves_per_eu=4"}
    assert all(r["status"] == "ok" and r["options"].get("waves_per_eu") in (None, 1, 2, 4) for r in rows.values())
    assert rows["waves_per_eu=4"]["options"]["waves_per_eu"] == 4
    vgprs = {name: r["summary"]["vgpr"] for name, r in rows.items()}
    # a higher occupancy target caps the registers: the compiles really differ
    assert vgprs["waves_per_eu=4"] < vgprs["baseline"]
    assert rows["waves_per_eu=4"]["summary"]["waves_per_simd"] >= rows["baseline"]["summary"]["waves_per_simd"]
    md = (tmp_path / "p.md").read_text()
    assert "## Registers" in md and f"| `waves_per_eu=4` | {vgprs['waves_per_eu=4']} · " in md
    assert any(f.startswith("waves_per_eu=4 on gfx942: registers VGPR") for f in doc["findings"])


def test_benchmark_template_skips_a_variant_whose_options_the_backend_lacks():
    """The template's launch overrides (``Variant.extras``) ask the same place before a launch."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_template", SCRIPTS / "triton_benchmark_template.py")
    template = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(template)
    core, _ = template.load_core(str(SCRIPTS), False)
    hip = {"backend": "hip", "arch": "gfx942"}
    cuda = {"backend": "cuda", "arch": "sm_90"}
    wpe = template.Variant("wpe", {"BLOCK_SIZE": 1024}, extras={"waves_per_eu": 2})
    hint = template.Variant("hint", {"BLOCK_SIZE": 1024}, extras={"schedule_hint": "attention"})
    assert template._case_skip_reason(wpe, hip, {}, 1, core) is None          # upstream amd has it
    assert "waves_per_eu=2" in template._case_skip_reason(wpe, cuda, {}, 1, core)
    # schedule_hint is a field of upstream's HIPOptions from some release on: skipped exactly where it is not
    accepted, _ = triton_stack.installed_accepted("gfx942", True)
    assert (template._case_skip_reason(hint, hip, {}, 1, core) is None) is ("schedule_hint" in accepted)
    assert template._case_skip_reason(wpe, cuda, {}, 1, template.InlineCore()) is None
