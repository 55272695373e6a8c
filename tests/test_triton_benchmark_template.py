"""triton_benchmark_template.py end to end: the Triton interpreter on a CPU, do_bench on a GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tko.base.artifact import read_artifact
from tko.base.contracts import contract_problems

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
TEMPLATE = "triton_benchmark_template.py"
# --cpu-timer runs the timing, re-check and ranking path on interpreted kernels (host clock).
CPU_ARGS = ("--size", "4096", "--size", "4113", "--dtype", "bf16", "--dtype", "fp32",
            "--checks", "2", "--seed", "7", "--cpu-timer", "--rotate-sets", "3",
            "--warmup-ms", "1", "--rep-ms", "5")


def _interp_env():
    return {"TRITON_INTERPRET": "1", "AMDGCN_USE_BUFFER_OPS": "1"}


def _run_copy(path, *args, env=None, cwd=None):
    full = dict(os.environ)
    full.pop("TKO_DEBUG", None)
    full.pop("TKO_SCRIPTS", None)
    full.update(env or {})
    return subprocess.run([sys.executable, str(path), *map(str, args)], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """The template as shipped, in the interpreter, with AMDGCN_USE_BUFFER_OPS=1 set."""
    tmp = tmp_path_factory.mktemp("bench")
    env = dict(os.environ)
    env.pop("TKO_DEBUG", None)
    env.update(_interp_env())
    res = subprocess.run([sys.executable, str(SCRIPTS / TEMPLATE), *CPU_ARGS,
                          "--json-out", str(tmp / "b.json"), "--markdown-out", str(tmp / "b.md")],
                         cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    return res, tmp


def _results(doc, size, dtype):
    case = next(c for c in doc["cases"] if c["size"] == size and c["dtype"] == dtype)
    return case, {r["name"]: r for r in case["results"]}


def test_template_checks_every_variant_in_the_interpreter(cpu_run):
    res, tmp = cpu_run
    assert res.returncode == 0, res.stderr
    doc = read_artifact(tmp / "b.json", "benchmark/1")
    assert contract_problems(doc) == []
    assert doc["core"]["source"] == "tko"
    assert doc["device"]["backend"] == "interpreter"
    assert doc["timing"]["available"] and doc["timing"]["timer"] == "cpu wall clock (--cpu-timer)"
    assert len(doc["cases"]) == 4
    for case in doc["cases"]:
        assert case["bytes"] == 3 * case["size"] * (2 if case["dtype"] == "bfloat16" else 4)
        assert case["rotate_sets"] == 3 and case["noise_rel"] is not None
        timed = {}
        for r in case["results"]:
            if r["status"] == "skipped":
                continue
            assert r["status"] == "passed", (case["size"], case["dtype"], r)
            assert len(r["checks"]) == 2 and all(c["unwritten_count"] == 0 for c in r["checks"])
            assert r["post_timing_check"]["passed"]
            assert r["timing"]["sets_used"] == 3 and r["timing"]["calls"] >= 6
            assert r["gb_per_s"] == pytest.approx(case["bytes"] / r["median_ms"] / 1e6)
            timed[r["name"]] = r
        base = timed["baseline"]["median_ms"]
        for r in timed.values():
            assert r["x_vs_baseline"] == pytest.approx(base / r["median_ms"])
        ranked = case["ranking"]["ranked"]
        assert [e["name"] for e in ranked] == sorted(timed, key=lambda n: timed[n]["median_ms"])
        assert [timed[e["name"]]["rank"] for e in ranked] == list(range(1, len(ranked) + 1))
    # the unmasked variant only where the size allows it; the AMD-only option never here
    _, r4096 = _results(doc, 4096, "float32")
    _, r4113 = _results(doc, 4113, "float32")
    assert r4096["even_unmasked"]["status"] == "passed"
    assert r4113["even_unmasked"]["status"] == "skipped"
    assert "4113" in r4113["even_unmasked"]["reason"]
    assert r4113["waves_per_eu2"]["status"] == "skipped"
    # fresh inputs per check: the two checks of one variant saw different data
    c1, c2 = r4113["baseline"]["checks"]
    assert c1["rel_err"] != c2["rel_err"]
    # bf16 storage error is orders of magnitude above float32 arithmetic error
    _, b4113 = _results(doc, 4113, "bfloat16")
    assert b4113["baseline"]["checks"][0]["rel_err"] > 100 * c1["rel_err"]
    assert c1["rel_err"] < 1e-6 and b4113["baseline"]["checks"][0]["rel_err"] < 1e-2
    md = (tmp / "b.md").read_text()
    assert "| 1 |" in md and "## size 4113, float32" in md and "| - | waves_per_eu2 | skipped |" in md


def test_buffer_ops_variable_cleared_by_default(cpu_run):
    res, tmp = cpu_run
    doc = read_artifact(tmp / "b.json", "benchmark/1")
    bops = doc["buffer_ops"]
    assert bops["env_before"] == "1" and bops["action"] == "cleared"
    assert bops["env_now"] is None                    # the process itself no longer sees it
    assert "AMDGCN_USE_BUFFER_OPS=1 cleared before importing triton" in res.stderr
    assert bops["applies"] is False                   # the interpreter is not an AMD target


@pytest.mark.slow
def test_copied_alone_uses_inline_core_keeps_buffer_ops_and_agrees(cpu_run, tmp_path):
    res0, tmp0 = cpu_run
    doc0 = read_artifact(tmp0 / "b.json", "benchmark/1")

    alone = tmp_path / "my_bench.py"
    shutil.copy(SCRIPTS / TEMPLATE, alone)
    # A machine without the bundle: an installed copy (pip install -e .) is shadowed by a tko
    # package that cannot be imported.
    shadow = tmp_path / "no_bundle" / "tko"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("no tko on this machine")\n')
    res = _run_copy(alone, *CPU_ARGS, "--keep-buffer-ops", "--json-out", tmp_path / "b.json",
                    env={**_interp_env(), "PYTHONPATH": str(shadow.parent)}, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "tko not importable" in res.stderr and "inline fallback" in res.stderr
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["schema"] == "benchmark/1" and contract_problems(doc) == []
    assert doc["core"]["source"] == "inline"
    assert doc["buffer_ops"]["action"] == "kept" and doc["buffer_ops"]["env_now"] == "1"
    assert all(c["ranking"]["ranked"] for c in doc["cases"])
    # same seed, same inputs: the inline core (a generated copy of tko.measure.bench) gives the same checks
    for case0, case in zip(doc0["cases"], doc["cases"]):
        for r0, r in zip(case0["results"], case["results"]):
            assert r["status"] == r0["status"] and r["checks"] == r0["checks"]


@pytest.mark.slow
def test_edited_copy_with_a_bug_is_reported_failed_and_never_ranked(tmp_path):

    text = (SCRIPTS / TEMPLATE).read_text()
    good_grid = 'return (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)'
    assert good_grid in text
    broken = tmp_path / "broken_bench.py"
    broken.write_text(text.replace(good_grid, 'return (n_elements // meta["BLOCK_SIZE"],)'))
    res = _run_copy(broken, "--size", "4113", "--size", "4096", "--dtype", "fp32", "--checks", "1",
                    "--only", "baseline|block512", "--tko-path", SCRIPTS,
                    "--json-out", tmp_path / "b.json", env={"TRITON_INTERPRET": "1"}, cwd=tmp_path)
    assert res.returncode == 1, res.stderr          # a case where no variant passed
    doc = read_artifact(tmp_path / "b.json", "benchmark/1")
    assert doc["core"]["source"] == "tko"
    # no GPU and no --cpu-timer: checked, not timed, and said so
    assert doc["timing"]["available"] is False and "interpreter" in doc["timing"]["reason"]
    assert "timing unavailable" in res.stderr
    case, by_name = _results(doc, 4113, "float32")
    assert by_name["baseline"]["checks"][0]["unwritten_count"] == 4113 - 4 * 1024
    assert by_name["block512_w2"]["checks"][0]["unwritten_count"] == 4113 - 8 * 512
    for r in by_name.values():
        assert r["status"] == "failed" and "never written" in r["reason"]
        assert r["rank"] is None
    assert {e["name"] for e in case["ranking"]["excluded"]} == {"baseline", "block512_w2"}
    assert "no variant passed its check for: 4113/float32" in doc["warnings"]
    _, ok = _results(doc, 4096, "float32")          # whole blocks: the bug does not show
    assert all(r["status"] == "passed" for r in ok.values())


@pytest.mark.slow
def test_sweep_grid_and_bad_arguments(run_script, tmp_path):
    res = run_script(TEMPLATE, "--sweep", "--list", cwd=tmp_path, env={"TRITON_INTERPRET": "1"})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("baseline:")
    assert len(lines) == 1 + 5 * 3 * 2 * 2 * 2
    assert sum("backends=['hip']" in ln for ln in lines) == 5 * 3 * 2 * 2
    res = run_script(TEMPLATE, "--only", "no_such_variant", cwd=tmp_path,
                     env={"TRITON_INTERPRET": "1"})
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].startswith(f"{TEMPLATE}: error: no variant matches")


def test_shipped_variants_compile_offline_for_amd_and_nvidia(monkeypatch):
    """Every variant of the example compiles for gfx942 (the DCU proxy) and sm_90, without a GPU,
    with vector loads and stores (the JIT's pointer hints passed as a launch would give them)."""
    import importlib.util
    import re

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    spec = importlib.util.spec_from_file_location("tko_template_under_test", SCRIPTS / TEMPLATE)
    tmpl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tmpl)                   # imported, not run: the environment is untouched
    assert tmpl.ENV_STATE["auto_interpret"] is False
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from tko.compile.offline_compile import hip_linker_env

    for key, value in hip_linker_env({"backend": "hip"})[0].items():  # Triton < 3.5 without ld.lld
        monkeypatch.setenv(key, value)
    pointer = [["tt.divisibility", 16], ["tt.pointer_range", 32]]
    attrs = {(0,): pointer, (1,): pointer, (2,): pointer, (3,): [["tt.divisibility", 16]]}
    seen = set()
    for target in (GPUTarget("hip", "gfx942", 64), GPUTarget("cuda", 90, 32)):
        for v in tmpl.VARIANTS:
            if v.backends and target.backend not in v.backends:
                continue
            sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "out_ptr": "*bf16", "n_elements": "i32",
                   **{k: "constexpr" for k in v.meta}}
            compiled = triton.compile(ASTSource(tmpl.fused_silu_mul_kernel, sig, dict(v.meta), attrs),
                                      target=target, options={"num_warps": v.num_warps,
                                                              "num_stages": v.num_stages, **v.extras})
            if target.backend == "hip":
                asm = compiled.asm["amdgcn"]
                assert re.search(r"(buffer|global)_load_dwordx[24]", asm), v.name
                assert re.search(r"(buffer|global)_store_dwordx[24]", asm), v.name
            else:
                asm = compiled.asm["ptx"]
                assert re.search(r"ld\.global(\.\w+)*\.v[24]", asm), v.name
            seen.add((target.backend, v.name))
    assert ("hip", "waves_per_eu2") in seen and ("cuda", "waves_per_eu2") not in seen
    assert len(seen) == 2 * len(tmpl.VARIANTS) - 1


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_template_times_and_ranks_on_gpu(run_script, tmp_path):
    sizes = (1 << 22, (1 << 22) + 17)
    res = run_script(TEMPLATE, "--size", sizes[0], "--size", sizes[1], "--dtype", "bf16",
                     "--json-out", tmp_path / "b.json", "--markdown-out", tmp_path / "b.md",
                     cwd=tmp_path, env={"AMDGCN_USE_BUFFER_OPS": "1"})
    assert res.returncode == 0, res.stderr
    doc = read_artifact(tmp_path / "b.json", "benchmark/1")
    assert contract_problems(doc) == []
    assert doc["timing"]["available"] and doc["device"]["backend"] in ("cuda", "hip")
    assert doc["buffer_ops"]["action"] == "cleared"
    for case in doc["cases"]:
        l2 = case.get("l2_bytes")
        if l2:
            assert case["rotate_sets"] * case["set_bytes"] > 2 * l2 or case["rotate_sets"] == 64
        ranked = case["ranking"]["ranked"]
        assert ranked and ranked[0]["name"] == case["ranking"]["best"]
        assert case["noise_rel"] is not None
        for r in case["results"]:
            if r["status"] == "skipped":
                continue
            assert r["status"] == "passed", r
            assert r["post_timing_check"]["passed"]
            assert r["timing"]["sets_used"] >= 2
            assert r["p20_ms"] <= r["median_ms"] <= r["p80_ms"]
            assert r["gb_per_s"] == pytest.approx(case["bytes"] / r["median_ms"] / 1e6)
            if doc["peak"] and doc["peak"]["basis"] == "copy_gbps":
                # nothing streams faster than a copy of the same bytes, give or take noise
                assert r["pct_of_peak"] < 125
    assert "| 1 |" in (tmp_path / "b.md").read_text()


@pytest.mark.slow
def test_row_kernels_mode_runs_the_bundled_kernel_sweep_and_needs_tko(tmp_path):
    out = tmp_path / "rows.json"
    res = _run_copy(SCRIPTS / TEMPLATE, "--row-kernels", "--ops", "softmax", "--dtypes", "fp16", "--cols", "100,20000",
                    "--rows", "3", "--modes", "bundled,eager", "--json-out", out, env=_interp_env(), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["schema"] == "rowkernel_sweep/1"
    rows = {(r["n_cols"], r["mode"]): r for r in doc["rows"]}
    assert rows[(100, "bundled")]["status"] == "ok" and rows[(100, "bundled")]["correct"] is True
    # past the interpreter's one-pass limit (16384) the chunked two-pass form runs, and is checked
    long = rows[(20000, "bundled")]
    assert long["status"] == "ok" and long["correct"] is True and long["plan"]["form"] == "chunked"
    # where tko cannot be imported: one line, exit 2 (a tko beside the copy that fails to import
    # stands for a missing one; an installed skill would otherwise be found and run)
    alone = tmp_path / "alone" / TEMPLATE
    (alone.parent / "tko").mkdir(parents=True)
    (alone.parent / "tko" / "__init__.py").write_text("raise ImportError('no tko here')\n")
    shutil.copy(SCRIPTS / TEMPLATE, alone)
    res = _run_copy(alone, "--row-kernels", "--ops", "softmax", cwd=alone.parent, env={"TRITON_INTERPRET": "1"})
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "needs the tko package" in res.stderr


def test_the_inline_core_is_the_generated_copy_of_tko_bench():
    # the template copied alone uses this copy: it must be tko/measure/bench.py as it is now, not a drifted
    # hand copy (`cd scripts && python -m tko.measure.embed --write` regenerates it)
    from tko.measure import embed

    text = embed.TEMPLATE.read_text()
    assert embed.with_inline_bench(text) == text, "inline core out of date: run python -m tko.measure.embed --write"
    block = embed.template_block(text)
    assert "def check_outputs(" in block and "def poisoned_mask(" in block and "_TOLERANCES = {" in block
    assert embed.main([]) == 0
