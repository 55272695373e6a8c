"""profile_kernels.py on real profiler outputs: hipprof files from Hygon DCU machines,
the rocprofv3 documentation trace, and torch.profiler traces recorded on an NVIDIA H200.

Expected numbers were checked by hand against the fixture files (see each test).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from tko.read import profile_formats as pf
from tko.read import profile_rank as pr
from tko.base.contracts import contract_problems

PROFILES = Path(__file__).resolve().parent / "fixtures" / "profiles"


def run_profile(run_script, tmp_path, *args, name="p"):
    out_json = tmp_path / f"{name}.json"
    out_md = tmp_path / f"{name}.md"
    res = run_script("profile_kernels.py", *args, "--json-out", out_json, "--markdown-out", out_md,
                     cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out_json.read_text())
    assert contract_problems(doc) == []
    assert all(0.0 <= k["share"] <= 1.0 for k in doc["kernels"])
    assert [k["rank"] for k in doc["kernels"]] == list(range(1, len(doc["kernels"]) + 1))
    assert all(a["total_us"] >= b["total_us"] for a, b in zip(doc["kernels"], doc["kernels"][1:]))
    return doc, out_md.read_text()


def by_name(doc, name):
    return next(k for k in doc["kernels"] if k["name"] == name)


# --------------------------------------------------------------------------- hipprof

def test_hipprof_kernel_csv_gfx936_vllm(run_script, tmp_path):
    # Excerpt of 24 of 55 rows: shares are of the file's Total row (13218323221 ns), so the top
    # row's 8245061251 ns is 62.376 % as hipprof printed, not a share of the excerpt.
    doc, md = run_profile(run_script, tmp_path, "--hipprof", PROFILES / "hipprof_kernel_stats_gfx936_1.csv",
                          "--top", "30")
    s = doc["summary"]
    assert s["kernels"] == 24
    assert s["dispatches"] == 85589
    assert s["share_denominator"] == "total_row"
    assert s["kernel_time_us"] == pytest.approx(13218323.221)
    top = doc["kernels"][0]
    assert top["rank"] == 1 and top["name"].startswith("void at::native::vectorized_elementwise_kernel<4, "
                                                       "at::native::FillFunctor<int>")
    assert top["calls"] == 37575
    assert top["share"] == pytest.approx(8245061251 / 13218323221)
    assert round(top["share"] * 100, 3) == top["percentage_reported"] == 62.376
    assert top["origin"] == "library"
    assert doc["kernels"][1]["name"].startswith("void flash_fwd_kernel_16x64_prefetch")
    # the three Inductor kernels of the run: 111840 + 35680 + 3840 ns
    triton = [k for k in doc["kernels"] if k["origin"] == "triton"]
    assert sorted(k["name"] for k in triton) == ["triton_poi_fused_0", "triton_poi_fused_2", "triton_red_fused_1"]
    assert s["time_by_origin_us"]["triton"] == pytest.approx(151.36)
    assert s["triton_share"] == pytest.approx(151360 / 13218323221)
    assert by_name(doc, "triton_red_fused_1")["mean_us"] == pytest.approx(111.84)
    assert any(k["name"].startswith("Cijk_Alik_Bljk_BBH_MT256x256x16") and k["origin"] == "library"
               for k in doc["kernels"])
    assert doc["problems"] == []  # every printed percentage agrees with the times
    assert "| 1 | `void at::native::vectorized_elementwise_kernel" in md and "62.38%" in md


def test_hipprof_quoted_template_names_and_complete_total(run_script, tmp_path):
    doc, _ = run_profile(run_script, tmp_path, "--hipprof", PROFILES / "hipprof_kernel_stats_dcu_rocfft_2.csv")
    assert doc["summary"]["kernels"] == 10
    # a complete file: rows add up to the Total row exactly
    assert doc["summary"]["kernel_time_rows_us"] == doc["summary"]["kernel_time_us"] == pytest.approx(580388.963)
    top = doc["kernels"][0]
    assert top["name"] == ("void generate_random_interleaved_data_kernel<input_val_1D<unsigned long>, double>"
                           "(input_val_1D<unsigned long>, input_val_1D<unsigned long>, unsigned long, unsigned long, "
                           "input_val_1D<unsigned long>, rocfft_complex<double>*, input_val_1D<unsigned long>, "
                           "unsigned long, input_val_1D<unsigned long>, unsigned long)")
    assert top["calls"] == 11 and top["share"] == pytest.approx(396723838 / 580388963)
    last = doc["kernels"][-1]
    assert last["name"] == "twiddle_gen_large_dp" and last["total_us"] == pytest.approx(6.72)


def test_hipprof_kernel_and_api_files_of_one_run(run_script, tmp_path):
    doc, md = run_profile(run_script, tmp_path,
                          "--hipprof", PROFILES / "hipprof_kernel_stats_dcu_rocfft_1.csv",
                          "--hipprof", PROFILES / "hipprof_api_stats_hiptrace_dcu_rocfft_1.csv")
    s = doc["summary"]
    # 9 rows summing to the Total row: 1241577901 ns over 713 calls
    assert s["kernels"] == 9 and s["dispatches"] == 713
    assert s["kernel_time_us"] == pytest.approx(1241577.901)
    top = doc["kernels"][0]
    assert (top["name"], top["calls"], top["percentage_reported"]) == (
        "transpose_rtc_tile32x32_dim2_dp_CI_CI_diag_aligned", 202, 23.12)
    assert top["share"] == pytest.approx(287049622 / 1241577901)
    api = doc["api_stats"]
    assert api[0]["name"] == "hipEventSynchronize"
    assert api[0]["share"] == pytest.approx(0.616445855752009)  # the file's 61.6445855752009 %
    assert [a["name"] for a in api[:3]] == ["hipEventSynchronize", "hiprtcCompileProgram", "hipMemcpy"]
    assert "## Host API calls" in md


def test_api_only_file_is_refused(run_script, tmp_path):
    res = run_script("profile_kernels.py", "--hipprof", PROFILES / "hipprof_api_stats_hiptrace_dcu_rocfft_1.csv",
                     "--json-out", tmp_path / "x.json", cwd=tmp_path)
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and ".hipkernel.csv" in res.stderr
    assert not (tmp_path / "x.json").exists()


def _console_doc(run_script, tmp_path, path, name):
    doc, _ = run_profile(run_script, tmp_path, "--hipprof", path, name=name)
    return doc


def test_hipprof_console_log_with_terminal_noise(run_script, tmp_path):
    clean = PROFILES / "hipprof_stdout_stats_bw1000_gfx936_1.log"
    doc = _console_doc(run_script, tmp_path, clean, "clean")
    assert doc["source"]["inputs"][0]["format"] == "hipprof_console"
    (k,) = doc["kernels"]
    assert (k["name"], k["calls"], k["total_us"], k["share"]) == ("k_empty()", 24200, 105063.814, 1.0)
    assert k["mean_us"] == pytest.approx(105063814 / 24200 / 1000, abs=1e-3)  # ns resolution
    assert doc["api_stats"][0]["name"] == "hipMalloc" and doc["api_stats"][0]["calls"] == 1
    # The stored log lost its control characters; put colour codes on the table headers and
    # carriage-return progress redraws back in, as a terminal capture has them.
    text = clean.read_text()
    noisy = (text.replace("HIP_PROF:IP:", "\x1b[1;32mHIP_PROF:IP:").replace("statistics\n", "statistics\x1b[0m\r\n")
             .replace("HIP_PROF:dump json", "\rHIP_PROF:dump json").replace("|Name ", "\x1b[1m|Name "))
    assert noisy != text
    noisy_path = tmp_path / "noisy.log"
    noisy_path.write_bytes(noisy.encode())
    doc2 = _console_doc(run_script, tmp_path, noisy_path, "noisy")
    assert doc2["kernels"] == doc["kernels"] and doc2["api_stats"] == doc["api_stats"]


def test_pmc_counters_join_the_kernel_they_measured(run_script, tmp_path):
    doc, _ = run_profile(run_script, tmp_path, "--hipprof", PROFILES / "hipprof_kernel_stats_gfx936_1.csv",
                         "--pmc", PROFILES / "hipprof_pmc_text_gfx936_1.txt")
    assert doc["summary"]["pmc_kernels_joined"] == 1
    flash = doc["kernels"][1]
    pmc = flash["pmc"]
    assert pmc["dispatches"] == 3
    # mean of 0.143125, 0.143119, 0.143150 s: the same kernel hipprof timed at 143119124 ns average
    assert pmc["mean"]["kernel time (s)"] == pytest.approx((0.143125 + 0.143119 + 0.143150) / 3)
    assert pmc["mean"]["kernel time (s)"] * 1e6 == pytest.approx(flash["mean_us"], rel=1e-3)
    assert pmc["mean"]["vgpr count"] == 164 and pmc["mean"]["L2 cache hit rate (%)"] == pytest.approx(
        (98.461029 + 98.460696 + 97.760326) / 3)
    assert "pmc" not in doc["kernels"][0]


def test_pmc_text_parser_fields():
    parsed = pf.read_profile(PROFILES / "hipprof_pmc_text_gfx936_1.txt")
    assert parsed.format == "hipprof_pmc" and len(parsed.pmc) == 3 and parsed.problems == []
    first = parsed.pmc[0]
    assert first.kernel.startswith("_Z31flash_fwd_kernel_16x64_prefetchI44Flash_fwd_kernel")
    assert first.fields["kernel dispatch index"] == 0 and first.fields["grid size"] == 2097152
    assert first.fields["performance (Gflops)"] == pytest.approx(8150.893006)
    assert first.fields["signal handle"] == "0x0"


def test_mangled_and_demangled_names_meet():
    assert pr.mangled_base("_Z31flash_fwd_kernel_16x64_prefetchI44Flash_fwdEv16Flash_fwd_params") == \
        "flash_fwd_kernel_16x64_prefetch"
    assert pr.mangled_base("void flash_fwd_kernel_16x64_prefetch<X<96>, false>(Flash_fwd_params)") == \
        "flash_fwd_kernel_16x64_prefetch"
    assert pr.mangled_base("_ZN2at6native29vectorized_elementwise_kernelILi4EEEvi") == "vectorized_elementwise_kernel"
    assert pr.mangled_base("void at::native::vectorized_elementwise_kernel<4, F>(int, F)") == \
        "vectorized_elementwise_kernel"
    assert pr.mangled_base("triton_poi_fused_0") == "triton_poi_fused_0"


def test_malformed_rows_are_reported_and_skipped(run_script, tmp_path):
    text = (PROFILES / "hipprof_kernel_stats_dcu_rocfft_1.csv").read_text().splitlines()
    at = next(i for i, line in enumerate(text) if line.startswith('"c2r_even'))
    text.insert(at, '"broken_kernel","12","not-a-number","1","0.1"')
    text.insert(at, '"short_row","3"')
    bad = tmp_path / "bad.hipkernel.csv"
    bad.write_text("\n".join(text) + "\n")
    doc, md = run_profile(run_script, tmp_path, "--hipprof", bad)
    assert doc["summary"]["kernels"] == 9
    assert all(k["name"] not in ("broken_kernel", "short_row") for k in doc["kernels"])
    assert len(doc["problems"]) == 2
    assert any("malformed row skipped" in p and "not-a-number" in p for p in doc["problems"])
    assert "## Problems" in md


@pytest.mark.parametrize("content", [
    "hello,world\n1,2\n",
    '{"not": "a trace"}',
    "just some words\n",
    '{"traceEvents": [',
])
def test_unknown_or_broken_input_is_one_line_exit_2(run_script, tmp_path, content):
    bad = tmp_path / "input.txt"
    bad.write_text(content)
    res = run_script("profile_kernels.py", "--trace", bad, "--json-out", tmp_path / "o.json", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_usage_errors(run_script, tmp_path):
    res = run_script("profile_kernels.py", "--json-out", tmp_path / "o.json", cwd=tmp_path)
    assert res.returncode == 2 and "no profile given" in res.stderr
    res = run_script("profile_kernels.py", "--trace", "t.json", "--json-out", "o.json", "--",
                     "python", "x.py", cwd=tmp_path)
    assert res.returncode == 2 and "not both" in res.stderr
    res = run_script("profile_kernels.py", "--json-out", "o.json", "--", "python", "-I", "x.py", cwd=tmp_path)
    assert res.returncode == 2 and "-I" in res.stderr  # it would turn off the site route to the ranks
    res = run_script("profile_kernels.py", "--json-out", "o.json", "--", "bash", "run.sh", cwd=tmp_path)
    assert res.returncode == 1 and "wrote no trace" in res.stderr  # a launcher runs as typed; run.sh is missing
    res = run_script("profile_kernels.py", "--help", cwd=tmp_path)
    assert res.returncode == 0 and "--hipprof" in res.stdout and "-- python repro.py" in res.stdout


# --------------------------------------------------------------------------- rocprofv3

def test_rocprofv3_kernel_trace(run_script, tmp_path):
    # per-dispatch End - Start (ns): addition 16157 + 12830, subtract 10464 + 10905,
    # multiply 10183 + 11145, divide 10103 + 11547; all 8 sum to 93334 ns
    doc, md = run_profile(run_script, tmp_path, "--rocprof", PROFILES / "rocprofv3_kernel_trace_docs_1.csv")
    s = doc["summary"]
    assert s["kernel_time_us"] == pytest.approx(93.334) and s["dispatches"] == 8 and s["kernels"] == 4
    assert s["gpu_busy_us"] == pytest.approx(93.334)  # the dispatches do not overlap
    assert s["wall_span_us"] == pytest.approx((2414192765784969 - 2414192765353337) / 1000)
    top = doc["kernels"][0]
    assert top["name"] == "void addition_kernel<float>(float*, float const*, float const*, int, int)"
    assert (top["calls"], top["min_us"], top["max_us"]) == (2, 12.83, 16.157)
    assert top["share"] == pytest.approx(28987 / 93334)
    assert top["launch"]["grid_size"] == [1024, 1024, 1] and top["launch"]["workgroup_size"] == [64, 1, 1]
    assert top["streams"] == ["1", "2"]
    assert [k["name"].split("(")[0] for k in doc["kernels"][1:]] == ["divide_kernel", "subtract_kernel",
                                                                     "multiply_kernel"]
    assert "GPU busy: 93.33 µs of a 431.6 µs span" in md


def test_rocprofv3_stats_csv_with_min_max():
    text = ('"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"\n'
            '"triton_poi_fused_add_0",4,4000,1000.0,80.0,900,1100,50.0\n'
            '"Cijk_Ailk_Bljk_SB_MT64x64x8",1,1000,1000.0,20.0,1000,1000,0.0\n')
    parsed = pf.parse_stats_csv(pf.clean_text(text))
    rows, summary, problems = pr.rank_stats(parsed.kernel_stats, parsed.declared_total)
    assert problems == [] and summary["share_denominator"] == "rows"
    assert rows[0]["min_us"] == 0.9 and rows[0]["max_us"] == 1.1 and rows[0]["share"] == 0.8
    assert [r["origin"] for r in rows] == ["triton", "library"]


# --------------------------------------------------------------------------- classification

@pytest.mark.parametrize("name,origin", [
    ("triton_poi_fused_add_0", "triton"),
    ("triton_red_fused__softmax_1", "triton"),
    ("triton_per_fused_native_layer_norm_2", "triton"),
    ("triton_tem_fused_mm_3", "triton"),
    ("Cijk_Alik_Bljk_BBH_MT256x256x16_SE_ISA936", "library"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>>(int)", "library"),
    ("nvjet_tst_128x64_64x8_2x1_v_bz_coopA_TNN", "library"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", "library"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm>(Params)", "library"),
    ("MIOpenBatchNormFwdTrainSpatial", "library"),
    ("chunk_fwd_kernel_o", "other"),
])
def test_origin_classification(name, origin):
    assert pr.classify(name) == origin


def test_user_triton_names_by_regex(run_script, tmp_path):
    # the vLLM run's fla kernels (chunk_*) are Triton kernels hipprof cannot tell apart
    doc, _ = run_profile(run_script, tmp_path, "--hipprof", PROFILES / "hipprof_kernel_stats_gfx936_1.csv",
                         "--triton-name", "^chunk_")
    chunk = [k for k in doc["kernels"] if k["name"].startswith("chunk_")]
    assert chunk and all(k["origin"] == "triton" for k in chunk)
    assert doc["summary"]["time_by_origin_us"]["triton"] == pytest.approx(
        151.36 + sum(k["total_us"] for k in chunk))


# --------------------------------------------------------------------------- H200 Chrome traces

H200 = Path(__file__).resolve().parent / "fixtures" / "inductor_h200"


def test_h200_pointwise_chain_trace(run_script, tmp_path):
    # Hand check over the raw trace: 640 kernel events, 624 of them (19631.485 us) launched under
    # '... (dynamo_timed)' ranges (autotuning); of the 16 left, 13 are the Triton kernel
    # (642.748 us, 49.055..50.272 us each) and 3 the randn kernel (163.615 us).
    doc, md = run_profile(run_script, tmp_path, "--trace", H200 / "pointwise_chain" / "trace.json.gz")
    s = doc["summary"]
    assert (s["dispatches"], s["excluded_compile_dispatches"]) == (16, 624)
    assert s["launches_linked_by"] == {"correlation": 640}
    assert s["kernel_time_us"] == pytest.approx(806.363)
    assert s["excluded_compile_us"] == pytest.approx(19631.485)
    top = doc["kernels"][0]
    assert (top["name"], top["origin"], top["calls"]) == ("triton_poi_fused_add_gelu_mul_0", "triton", 13)
    assert top["total_us"] == pytest.approx(642.748)
    assert (top["min_us"], top["max_us"]) == (49.055, 50.272)
    assert top["share"] == pytest.approx(642.748 / 806.363)
    assert s["triton_share"] == pytest.approx(642.748 / 806.363)
    # launched by Inductor's wrapper inside the compiled graph
    assert top["launch_op"] == "## Call CompiledFxGraph None ##"
    assert top["op_chain"] == ["triton_poi_fused_add_gelu_mul_0", "## Call CompiledFxGraph None ##",
                               "Torch-Compiled Region: 0/0"]
    ind = top["inductor"]
    assert ind["kernel_kwargs"] == "XBLOCK=1024" and ind["num_warps"] == 4
    assert ind["kernel_file"].endswith("/z3/cz3nzuiozksedpz63tzlckodj2dbhr5p4z2crjnmbncjeqrxbn3l.py")
    # the same file is in the captured cache next to the trace
    assert list((H200 / "pointwise_chain" / "inductor_cache").glob("tmp*/z3/" + Path(ind["kernel_file"]).name))
    assert top["launch"]["grid"] == [32768, 1, 1] and top["launch"]["block"] == [128, 1, 1]
    second = doc["kernels"][1]
    assert second["origin"] == "library" and second["launch_op"] == "aten::normal_" and second["calls"] == 3
    assert doc["device"][0]["name"] == "NVIDIA H200"
    assert "left out: 624 dispatches" in md and "| 1 | `triton_poi_fused_add_gelu_mul_0` | triton | 13 |" in md


def test_h200_training_step_forward_and_backward_graphs(run_script, tmp_path):
    doc, _ = run_profile(run_script, tmp_path, "--trace", H200 / "mlp_train_step" / "trace.json.gz",
                         "--top", "40", name="all")
    s = doc["summary"]
    assert s["kernels"] == len(doc["kernels"]) == len(doc["ranking"]) == 22
    ks = {k["name"]: k for k in doc["kernels"]}
    assert doc["kernels"][0]["name"].startswith("sm80_xmma_gemm_f32f32") and doc["kernels"][0]["origin"] == "library"
    bwd = ks["triton_poi_fused_gelu_gelu_backward_2"]
    assert bwd["origin"] == "triton" and "CompiledFunctionBackward" in bwd["op_chain"]
    fwd = ks["triton_poi_fused_gelu_1"]
    assert "CompiledFunction" in fwd["op_chain"] and "CompiledFunctionBackward" not in fwd["op_chain"]
    sgd = next(k for k in doc["kernels"] if k["launch_op"] == "aten::_foreach_add_")
    assert sgd["op_chain"][1] == "Optimizer.step#SGD.step" and sgd["origin"] == "library"
    assert sum(k["total_us"] for k in doc["kernels"]) == pytest.approx(s["kernel_time_us"], abs=0.01)
    assert sum(k["share"] for k in doc["kernels"]) == pytest.approx(1.0)
    assert s["time_by_origin_us"]["triton"] == pytest.approx(
        sum(k["total_us"] for k in doc["kernels"] if k["origin"] == "triton"), abs=0.01)


def test_h200_include_compile_keeps_autotune_launches(run_script, tmp_path):
    doc, _ = run_profile(run_script, tmp_path, "--trace", H200 / "pointwise_chain" / "trace.json.gz",
                         "--include-compile", "--top", "0")
    s = doc["summary"]
    # totals still cover all: the Triton kernel, randn, and the fill kernel the autotuning
    # benchmarker runs between timed calls (412 of the 640 events) to flush the cache
    assert doc["kernels"] == [] and s["shown"] == 0 and s["kernels"] == 3
    fill = next(r for r in doc["ranking"] if "FillFunctor" in r["name"])
    assert fill["calls"] == 412 and fill["origin"] == "library"
    assert s["dispatches"] == 640 and s["excluded_compile_dispatches"] == 0
    assert s["kernel_time_us"] == pytest.approx(20437.848)


def test_cpu_only_trace_is_refused(run_script, tmp_path):
    # a trace with CPU ops only (what torch.profiler records on a machine without a GPU)
    trace = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0, "args": {}},
    ]}
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(trace))
    res = run_script("profile_kernels.py", "--trace", path, "--json-out", tmp_path / "o.json", cwd=tmp_path)
    assert res.returncode == 2 and "no GPU kernel events" in res.stderr


# --------------------------------------------------------------------------- running a command

_TINY = """
import sys, torch
x = torch.randn(64, 64)
with torch.profiler.record_function("user_range"):
    y = x @ x
if len(sys.argv) > 1 and sys.argv[1] == "fail":
    raise RuntimeError("boom")
print("ran", sys.argv[1:])
"""


def test_command_runs_under_the_profiler(run_script, tmp_path):
    # the script raises: the trace must still be exported (the normal exit is covered by the
    # gpu test below); one run, as importing torch costs seconds on a CI machine
    mode = "fail"
    pytest.importorskip("torch")
    script = tmp_path / "tiny.py"
    script.write_text(_TINY)
    out = tmp_path / "out"
    res = run_script("profile_kernels.py", "--json-out", out / "prof.json", "--", sys.executable, script, mode,
                     cwd=tmp_path, timeout=600)
    trace = out / "prof.trace.json"
    assert trace.exists()  # kept next to the JSON, also when the script raised
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert "user_range" in names and "aten::mm" in names  # the script really ran under the profiler
    if mode == "ok":
        assert "ran ['ok']" in res.stdout
    else:
        assert "RuntimeError: boom" in res.stderr
    import torch
    if not torch.cuda.is_available():
        # no GPU here: the run worked but there is nothing to rank
        assert res.returncode == 1 and "no GPU kernel events" in res.stderr
        assert len(res.stderr.strip().splitlines()[-1:]) == 1


@pytest.mark.gpu
def test_command_on_gpu_ranks_compiled_kernels(run_script, tmp_path):
    doc_path = tmp_path / "p.json"
    res = run_script("profile_kernels.py", "--json-out", doc_path, "--record-shapes", "--",
                     sys.executable, PROFILES / "repro_small_model.py", cwd=tmp_path, timeout=900)
    assert res.returncode == 0, res.stderr
    doc = json.loads(doc_path.read_text())
    assert contract_problems(doc) == [] and doc["source"]["returncode"] == 0
    assert Path(doc["source"]["trace_file"]).exists()
    ks = {k["name"]: k for k in doc["kernels"]}
    fused = ks["triton_per_fused_add_addmm_gelu_native_layer_norm_0"]
    assert fused["origin"] == "triton" and fused["calls"] == 4
    assert fused["launch_op"].startswith("## Call CompiledFxGraph")
    assert fused["inductor"]["kernel_file"].endswith(".py") and "XBLOCK" in fused["inductor"]["kernel_kwargs"]
    assert doc["kernels"][0]["launch_op"] == "aten::mm" and doc["kernels"][0]["origin"] == "library"
    assert "step" in doc["kernels"][0]["op_chain"]


def test_nsys_kernel_summary_layout(run_script, tmp_path):
    # Layout of `nsys stats --report cuda_gpu_kern_sum --format csv` as its report script documents
    # it (Time (%), Total Time (ns), Instances, Avg/Med/Min/Max/StdDev (ns), Name; a title line before
    # the header, thousands separators); the kernel rows are made up for this test, no real capture.
    text = (" ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n"
            '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)",'
            '"StdDev (ns)","Name"\n'
            '"75.0","3,000,000","3","1,000,000.0","1,000,000.0","900,000","1,100,000","100,000.0",'
            '"triton_poi_fused_add_0"\n'
            '"25.0","1,000,000","1","1,000,000.0","1,000,000.0","1,000,000","1,000,000","0.0",'
            '"void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"\n')
    path = tmp_path / "report_cuda_gpu_kern_sum.csv"
    path.write_text(text)
    doc, _ = run_profile(run_script, tmp_path, "--nsys", path)
    assert doc["source"]["inputs"][0]["format"] == "nsys_kern_sum"
    k = doc["kernels"][0]
    assert (k["name"], k["calls"], k["total_us"], k["min_us"], k["max_us"], k["share"]) == (
        "triton_poi_fused_add_0", 3, 3000.0, 900.0, 1100.0, 0.75)
    assert doc["kernels"][1]["origin"] == "library" and doc["problems"] == []


def test_external_id_links_kernels_when_runtime_events_are_missing(run_script, tmp_path):
    # Same H200 trace with every runtime call and flow event removed: the kernels' External id
    # still names the CPU op that launched them, so the ranking and attribution do not change.
    src = json.loads(gzip.open(H200 / "pointwise_chain" / "trace.json.gz").read())
    src["traceEvents"] = [e for e in src["traceEvents"]
                          if e.get("cat") not in ("cuda_runtime", "cuda_driver", "ac2g")]
    path = tmp_path / "no_runtime.json"
    path.write_text(json.dumps(src))
    doc, _ = run_profile(run_script, tmp_path, "--trace", path)
    assert doc["summary"]["launches_linked_by"] == {"external_id": 640}
    assert doc["summary"]["dispatches"] == 16  # the compile-phase launches are still recognised
    top = doc["kernels"][0]
    assert top["launch_op"] == "## Call CompiledFxGraph None ##" and top["total_us"] == pytest.approx(642.748)


def test_h200_python_stacks_name_the_user_code(run_script, tmp_path):
    # Recorded on the H200 by `profile_kernels.py --with-stack -- python repro_eager_stack.py`.
    # Hand check: 23 kernel events, 461.882 us; the q @ k^T GEMM ran 3 times, 93.823 + 93.567 +
    # 93.855 = 281.245 us.
    doc, md = run_profile(run_script, tmp_path, "--trace", PROFILES / "h200_eager_stack.trace.json.gz")
    s = doc["summary"]
    assert (s["dispatches"], s["kernels"]) == (23, 8) and s["kernel_time_us"] == pytest.approx(461.882)
    assert s["triton_share"] == 0.0 and set(s["time_by_origin_us"]) == {"library"}
    top = doc["kernels"][0]
    assert top["name"].startswith("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8")
    assert top["total_us"] == pytest.approx(281.245) and top["share"] == pytest.approx(281.245 / 461.882)
    assert top["launch_op"] == "aten::mm" and top["op_chain"] == ["aten::mm", "aten::matmul"]
    # the innermost Python frames are the user's functions, not the profiler bootstrap or runpy
    assert top["user_frame"].endswith("repro_eager_stack.py(13): attention_scores")
    assert top["python_stack"][1].endswith("repro_eager_stack.py(21): main")
    assert not any("profile_bootstrap" in f or "runpy" in f for k in doc["kernels"] for f in k["python_stack"])
    second = doc["kernels"][1]
    assert second["user_frame"].endswith("repro_eager_stack.py(17): layer")
    softmax = next(k for k in doc["kernels"] if "softmax_warp_forward" in k["name"])
    assert softmax["origin"] == "library"  # no library marker in its name: an aten:: op launched it
    assert softmax["python_stack"][0].startswith("<built-in method softmax")
    assert softmax["user_frame"].endswith("attention_scores")


def test_legacy_rocprof_dispatches_agree_with_its_stats_file(run_script, tmp_path):
    # One rocprof v1 run (ROCm 5.3): results.csv has 10 dispatches whose EndNs - BeginNs add up to
    # 261124944 ns, exactly the TotalDurationNs of results.stats.csv; both name the kernel with the
    # " [clone .kd]" suffix, which is dropped.
    per, _ = run_profile(run_script, tmp_path, "--rocprof", PROFILES / "rocprof_v1_results_nbody_1.csv", name="per")
    stats, _ = run_profile(run_script, tmp_path, "--rocprof", PROFILES / "rocprof_v1_results_stats_nbody_1.csv",
                           name="stats")
    (k,) = per["kernels"]
    (ks,) = stats["kernels"]
    assert k["name"] == ks["name"] == "bodyForce(Body*, float, int)"
    assert k["calls"] == ks["calls"] == 10
    assert k["total_us"] == ks["total_us"] == pytest.approx(261124.944)
    assert (k["min_us"], k["max_us"]) == (26060.585, 26316.649)
    assert k["launch"] == {"grid_size": 65536, "workgroup_size": 256, "lds_bytes": 0, "scratch_bytes": 0,
                           "vgpr": 20, "accum_vgpr": 4, "sgpr": 16}
    # first BeginNs to last EndNs
    assert per["summary"]["wall_span_us"] == pytest.approx((1591373077878145 - 1591372809872935) / 1000)


def test_ranking_covers_kernels_beyond_top(run_script, tmp_path):
    doc, _ = run_profile(run_script, tmp_path, "--hipprof", PROFILES / "hipprof_kernel_stats_gfx936_1.csv",
                         "--top", "3")
    assert len(doc["kernels"]) == 3 and len(doc["ranking"]) == 24
    assert doc["ranking"][:3] == [{k: e[k] for k in ("rank", "name", "origin", "calls", "total_us", "share")}
                                  for e in doc["kernels"]]
    red = pr.find_kernel(doc, "triton_red_fused_1")
    assert red["origin"] == "triton" and red["share"] == pytest.approx(111840 / 13218323221)
    assert red["rank"] == 1 + sum(1 for e in doc["ranking"] if e["total_us"] > red["total_us"])
    # a PMC/mangled spelling finds the demangled entry
    flash = pr.find_kernel(doc, "_Z31flash_fwd_kernel_16x64_prefetchI44Flash_fwd_kernel_16x64_prefetch_traitsEv")
    assert flash["rank"] == 2
    assert pr.find_kernel(doc, "no_such_kernel") is None


@pytest.mark.parametrize("raw,name", [
    ("bodyForce(Body*, float, int) [clone .kd]", "bodyForce(Body*, float, int)"),
    ("triton_poi_fused_add_0.kd", "triton_poi_fused_add_0"),
    ("  triton_poi_fused_add_0 ", "triton_poi_fused_add_0"),
    ("void at::native::foo<float>(float*)", "void at::native::foo<float>(float*)"),
])
def test_kernel_names_lose_code_object_suffixes(raw, name):
    assert pf.kernel_name(raw) == name


def test_within_keeps_only_kernels_inside_named_ranges(run_script, tmp_path):
    # Brute-force hand check over the raw trace: 169 kernels (18366.003 us) were launched inside a
    # 'CompiledFunctionBackward' range and outside any '(dynamo_timed)' one; 326 in all.
    doc, md = run_profile(run_script, tmp_path, "--trace", H200 / "mlp_train_step" / "trace.json.gz",
                          "--within", "CompiledFunctionBackward", "--top", "30")
    s = doc["summary"]
    assert (s["dispatches"], s["excluded_outside_dispatches"]) == (169, 326 - 169)
    assert s["kernel_time_us"] == pytest.approx(18366.003)
    assert all("CompiledFunctionBackward" in k["op_chain"] for k in doc["kernels"])
    assert "triton_poi_fused_gelu_1" not in {k["name"] for k in doc["kernels"]}  # a forward kernel
    assert "launched outside the --within ranges" in md
    res = run_script("profile_kernels.py", "--trace", H200 / "pointwise_chain" / "trace.json.gz",
                     "--within", "NoSuchRange", "--json-out", tmp_path / "none.json", cwd=tmp_path)
    assert res.returncode == 2 and "--within" in res.stderr
    res = run_script("profile_kernels.py", "--hipprof", PROFILES / "hipprof_kernel_stats_dcu_rocfft_1.csv",
                     "--within", "x", "--json-out", tmp_path / "none.json", cwd=tmp_path)
    assert res.returncode == 2 and "needs a Chrome trace" in res.stderr


def test_flow_events_link_kernels_without_correlation_args(run_script, tmp_path):
    # Same H200 trace with 'correlation' and 'External id' removed from every kernel event: only
    # the ac2g flow pairs ('s' on the runtime call, 'f' on the kernel) are left to link them.
    src = json.loads(gzip.open(H200 / "pointwise_chain" / "trace.json.gz").read())
    for e in src["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"].pop("correlation", None)
            e["args"].pop("External id", None)
    path = tmp_path / "flows_only.json"
    path.write_text(json.dumps(src))
    doc, _ = run_profile(run_script, tmp_path, "--trace", path)
    assert doc["summary"]["launches_linked_by"] == {"flow": 640}
    assert doc["summary"]["dispatches"] == 16
    assert doc["kernels"][0]["launch_op"] == "## Call CompiledFxGraph None ##"


def test_markdown_lists_inductor_kernel_files(run_script, tmp_path):
    _, md = run_profile(run_script, tmp_path, "--trace", H200 / "pointwise_chain" / "trace.json.gz", "--top", "1")
    assert "## Inductor kernel files" in md
    assert ("| 1 | `triton_poi_fused_add_gelu_mul_0` | XBLOCK=1024 | 4 | 1 | "
            "`/tmp/indfx/pointwise_chain/inductor_cache/") in md
    assert "1 more kernel not listed (--top 1)." in md


def _x(name, ts, dur, cat, corr=None, tid=1):
    ev = {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid}
    if corr is not None:
        ev["args"] = {"correlation": corr}
    return ev


def test_kernels_an_autotuner_launches_while_benchmarking_are_not_the_step(tmp_path):
    """Triton's Autotuner times its configs inside the program (profile_bootstrap marks that range):
    its launches and do_bench's L2 flushes are tuning, left out as compilation is."""
    from tko.patch import profile_bootstrap

    events = [_x(profile_bootstrap.AUTOTUNE_MARK, 0, 100, "user_annotation")]
    for i, (name, ts) in enumerate([("matmul_kernel", 10), ("flush_fill", 30), ("matmul_kernel", 50),
                                    ("matmul_kernel", 200), ("softmax_kernel", 300)]):
        events += [_x("cudaLaunchKernel", ts, 2, "cuda_runtime", corr=i), _x(name, ts + 5, 10, "kernel", corr=i, tid=7)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    rows, summary = pr.rank_profile(pf.read_profile(path))[:2]
    calls = {r["name"]: r["calls"] for r in rows}
    assert calls == {"matmul_kernel": 1, "softmax_kernel": 1}, calls
    both, _ = pr.rank_profile(pf.read_profile(path), include_compile=True)[:2]
    assert {r["name"]: r["calls"] for r in both}["matmul_kernel"] == 3


AUTOTUNED = '''
import torch, triton, triton.language as tl

def bench(fn, quantiles=None, **kw):
    fn()
    return [1.0, 1.0, 1.0] if quantiles else 1.0

@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"], do_bench=bench)
@triton.jit
def copy3(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3.0, mask=offs < n)

x = torch.randn(500)
out = torch.empty(500)
copy3[lambda meta: (triton.cdiv(500, meta["BLOCK"]),)](x, out, 500)
assert torch.equal(out, x * 3.0)
'''


def test_the_profiler_bootstrap_marks_the_autotuners_benchmarking(tmp_path):
    import os
    import subprocess

    from tko.patch import profile_bootstrap

    prog = tmp_path / "prog.py"
    prog.write_text(AUTOTUNED)
    trace = tmp_path / "trace.json"
    proc = subprocess.run([sys.executable, profile_bootstrap.__file__, str(trace), "--cpu-only", "--", str(prog)],
                          env=dict(os.environ, TRITON_INTERPRET="1"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = [e.get("name") for e in json.loads(trace.read_text())["traceEvents"]]
    assert names.count(profile_bootstrap.AUTOTUNE_MARK) == 2      # one range per config timed


def test_a_capture_log_names_the_line_that_launches_each_hand_written_kernel(run_script, tmp_path):
    """The recorded H200 tutorials: the trace names no launching op for a plain launch; the capture
    log gives each kernel the program's line, in the JSON and the "launched from" column."""
    rec = Path(__file__).resolve().parents[1] / "examples" / "recorded_h200" / "triton_tutorials"
    res = run_script("profile_kernels.py", "--trace", rec / "profile.trace.json.gz", "--capture-log",
                     rec / "autotune_kernels" / "autotune.log", "--json-out", tmp_path / "p.json",
                     "--markdown-out", tmp_path / "p.md")
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "p.json").read_text())
    assert contract_problems(doc) == []
    sites = {k["name"]: k.get("launch_site") for k in doc["kernels"] if k["origin"] == "triton"}
    assert sites == {"matmul_kernel": "examples/triton_tutorials/tutorial_kernels.py:141",
                     "_layer_norm_fwd_fused": "examples/triton_tutorials/tutorial_kernels.py:131",
                     "softmax_kernel": "examples/triton_tutorials/tutorial_kernels.py:119"}
    assert "| examples/triton_tutorials/tutorial_kernels.py:119 |" in (tmp_path / "p.md").read_text()
