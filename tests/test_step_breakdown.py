"""The whole step first: kernel classes, the GPU timeline, library dominance and each kernel's
end-to-end ceiling (Amdahl), on real H200 recordings and on the issue's cases."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from tko.base import decide
from tko.base.errors import InputError
from tko.read import kernel_classes
from tko.verdict import program_evidence, report, step_breakdown

MLP = ROOT / "examples" / "recorded_h200" / "mlp_train_step" / "profile" / "profile.json"


@pytest.mark.parametrize("name, origin, cls", [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
     "library", "library_gemm"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(cutlass_80_simt_sgemm_128x256_8x4_nt_align1::Params)",
     "library", "library_gemm"),
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB1", "library", "library_gemm"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "library", "library_gemm"),
    ("ampere_sgemm_128x64_nn", "library", "library_gemm"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>>(Flash_fwd_params)",
     "library", "attention"),
    ("fmha_cutlassF_f16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params)", "library", "attention"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32", "library", "convolution"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "library", "collective"),
    ("Memcpy DtoD (Device -> Device)", "other", "copy_fill"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >",
     "library", "copy_fill"),
    ("void at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)", "library", "copy_fill"),
    ("triton_poi_fused_gelu_1", "triton", "triton_inductor"),
    ("triton_tem_fused_mm_0", "triton", "triton_inductor"),
    ("scale_bias_relu_kernel", "triton", "triton_hand"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float> > >", "library", "other"),
    ("my_custom_kernel", "other", "other"),
])
def test_classifier_names_each_class(name, origin, cls):
    assert kernel_classes.classify(name, origin) == cls


def test_every_class_has_a_source_and_the_last_takes_everything():
    classes = kernel_classes.load_classes()
    assert all(c.source for c in classes)
    assert classes[-1].id == "other" and not classes[-1].names


def test_bad_class_file_is_one_input_error(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("classes:\n  - id: x\n    source: s\n    names: ['(']\n  - id: other\n    source: s\n")
    with pytest.raises(InputError, match="bad pattern"):
        kernel_classes.load_classes(bad)
    bad.write_text("classes:\n  - id: x\n    source: s\n    names: [gemm]\n")
    with pytest.raises(InputError, match="must match every kernel"):
        kernel_classes.load_classes(bad)


def test_mlp_recording_is_library_gemm_dominated_and_shares_sum():
    doc = json.loads(MLP.read_text())
    step = step_breakdown.summarize(doc, "profile/profile.json")
    shares = {c["id"]: c["share"] for c in step["classes"]}
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-9)
    total = sum(c["total_us"] for c in step["classes"])
    assert total == pytest.approx(doc["summary"]["kernel_time_us"], abs=0.01)
    assert shares["library_gemm"] == pytest.approx(0.938, abs=0.001)
    assert shares["triton_inductor"] == pytest.approx(doc["summary"]["triton_share"], abs=1e-6)
    assert step["library_dominated"] and step["library_share"] == pytest.approx(0.938, abs=0.001)
    # fp32 GEMMs (f32f32 / sgemm / ffma): TF32 or bf16 named as the lever, and max-autotune templates
    assert "TF32" in step["levers"][0] and "max-autotune" in step["levers"][1]
    assert "Library kernels dominate: 93.8% of GPU kernel time" in step["headline"]
    assert "the largest Triton kernel holds 1.2%" in step["headline"]
    assert step["timeline"] is None and "no timeline" in step["timeline_missing"]
    md = "\n".join(step_breakdown.markdown(step))
    assert md.startswith("## Where the step's time goes") and "<svg" in md and "Classes sum to 100.0%" in md


def test_mlp_program_finding_is_library_dominated_not_triton_tuning():
    doc = json.loads(MLP.read_text())
    program = program_evidence.program_decision(doc, "profile.json")
    assert (program["verdict"], program["rule"]) == ("rewrite_model", "library_dominated")
    assert program["says"].startswith("94% of GPU kernel time is in library kernels (library GEMM 93.8% in 5 kernel(s))")
    assert "Triton kernels hold 3.7%" in program["says"]


def _profile(rows: list[tuple[str, str, float]]) -> dict:
    total = sum(t for _, _, t in rows)
    ranking = [{"rank": i, "name": n, "origin": o, "calls": 10, "total_us": t, "mean_us": t / 10, "share": t / total}
               for i, (n, o, t) in enumerate(rows, 1)]
    return {"schema": "kernel_profile/1", "summary": {"kernel_time_us": total, "dispatches": 10 * len(rows)},
            "kernels": ranking, "ranking": ranking}


def _sweep(best_x: float) -> dict:
    return {"schema": "variant_sweep/1", "best": {"name": "BLOCK_1024"}, "baseline": {"noise_rel": 0.01},
            "variants": [{"name": "baseline", "x_vs_baseline": 1.0, "status": "ok"},
                         {"name": "BLOCK_1024", "x_vs_baseline": best_x, "status": "ok"}]}


def test_a_5_percent_kernel_with_a_1_1x_sweep_is_left_with_its_ceiling():
    doc = _profile([("triton_poi_fused_add_0", "triton", 5.0), ("triton_red_fused_sum_1", "triton", 60.0),
                    ("void at::native::reduce_kernel<1>", "library", 35.0)])
    rep = report.build("triton_poi_fused_add_0", {"profile": doc, "benchmark": _sweep(1.1)},
                       {"profile": "profile.json", "benchmark": "sweep.json"})
    assert (rep["decision"]["verdict"], rep["decision"]["rule"]) == ("leave_as_is", "ceiling_under_cut")
    facts = {k: v["value"] for k, v in rep["facts"].items()}
    assert facts["headroom"] == pytest.approx(1.1) and facts["ceiling"] == pytest.approx(0.05 * (1 - 1 / 1.1), rel=1e-3)
    says = rep["decision"]["fired"][0]["says"]
    assert "5.0% of GPU time with at most 1.10x left (sweep: best variant BLOCK_1024 at 1.10x)" in says
    assert "at most 0.45% of the GPU time end to end (5.0% x (1 - 1/1.10))" in says and "under the 2%" in says


def test_a_measured_headroom_with_a_large_ceiling_does_not_leave():
    doc = _profile([("triton_poi_fused_add_0", "triton", 50.0), ("void at::native::reduce_kernel<1>", "library", 50.0)])
    rep = report.build("triton_poi_fused_add_0", {"profile": doc, "benchmark": _sweep(1.5)},
                       {"profile": "profile.json", "benchmark": "sweep.json"})
    assert "ceiling_under_cut" not in [f["rule"] for f in rep["decision"]["fired"]]
    assert rep["facts"]["ceiling"]["value"] == pytest.approx(0.5 * (1 - 1 / 1.5), rel=1e-3)


def test_projection_cross_entropy_step_never_tunes_the_small_triton_kernel():
    """Issue #32: 85 % of GPU time in library GEMMs, a 7.9 % Triton kernel was told to keep tuning."""
    doc = _profile([("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", "library", 85.0),
                    ("triton_red_fused__log_softmax_nll_loss_0", "triton", 7.9),
                    ("void at::native::reduce_kernel<1>", "library", 7.1)])
    rep = report.build("triton_red_fused__log_softmax_nll_loss_0", {"profile": doc}, {"profile": "profile.json"})
    assert (rep["decision"]["verdict"], rep["decision"]["rule"]) == ("leave_as_is", "library_dominated_small_kernel")
    says = rep["decision"]["fired"][0]["says"]
    assert says.startswith("85% of GPU kernel time is in library kernels (library GEMM 85.0% in 1 kernel(s))")
    assert "this Triton kernel holds 7.9%, so tuning it saves at most 7.9% end to end" in says
    assert rep["program"]["rule"] == "library_dominated"
    # bf16 GEMM: no fp32 lever; the dtype/layout and max-autotune levers are named
    assert "TF32" not in rep["program"]["says"] and "max-autotune" in rep["program"]["says"]


def test_wording_never_contradicts_the_numbers():
    """Every percentage a ceiling rule prints is the fact it was computed from."""
    doc = _profile([("triton_poi_fused_add_0", "triton", 6.0), ("triton_red_fused_sum_1", "triton", 94.0)])
    for x in (1.05, 1.2, 1.3, 1.6, 3.0):
        rep = report.build("triton_poi_fused_add_0", {"profile": doc, "benchmark": _sweep(x)},
                           {"profile": "profile.json", "benchmark": "sweep.json"})
        ceiling = 0.06 * (1 - 1 / x)
        left = rep["decision"]["rule"] == "ceiling_under_cut"
        assert left == (ceiling < 0.02), (x, rep["decision"]["rule"])
        if left:
            assert f"{ceiling:.2%}" in rep["decision"]["fired"][0]["says"]
        else:
            assert rep["decision"]["verdict"] != "leave_as_is" or rep["decision"]["rule"] != "ceiling_under_cut"


def test_recorded_trace_timeline_separates_compile_from_idle(run_script, tmp_path):
    trace = ROOT / "examples" / "recorded_h200" / "pointwise_chain" / "profile" / "profile.trace.json.gz"
    proc = run_script("profile_kernels.py", "--trace", trace, "--json-out", tmp_path / "p.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "p.json").read_text())
    tl = doc["summary"]["timeline"]
    # busy, idle and compile gaps tile the window, which is the steady state after the last compile
    assert tl["busy_us"] + tl["idle_us"] + tl["compile_gap_us"] == pytest.approx(tl["window_us"], rel=1e-6)
    assert tl["window"] == "after the last compilation" and tl["compile_gap_us"] == 0
    assert 0 < tl["idle_us"] < 10_000 and 0 < tl["busy_us"] <= doc["summary"]["gpu_busy_kernels_only_us"]
    step = step_breakdown.summarize(doc, "p.json")
    assert step["timeline"]["busy_share"] + step["timeline"]["idle_share"] == pytest.approx(1.0)
    assert "The GPU was busy 20% of the 5.85 ms steady window after the last compilation" in step["headline"]
    # 84 % of the idle time is one 3.9 ms gap between profiled iterations: not called host-bound
    assert step["one_gap"] and not step["host_bound"] and "One gap of 3.93 ms holds 84%" in step["headline"]
    assert not step["library_dominated"]


def test_idle_spread_over_many_gaps_is_host_bound_and_named_before_the_library():
    doc = {"summary": {"timeline": {"window": "after the last compilation", "window_us": 149266.5,
                                    "busy_us": 4568.8, "idle_us": 144697.7, "idle_gaps": 876, "compile_gap_us": 0.0,
                                    "largest_gaps_us": [18325.3, 2958.4, 2639.8]}},
           "ranking": [{"name": "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3", "origin": "other",
                        "total_us": 900.0, "calls": 200},
                       {"name": "triton_per_fused_gelu_0", "origin": "triton", "total_us": 100.0, "calls": 20}]}
    step = step_breakdown.summarize(doc, "p.json")
    assert step["host_bound"] and step["library_dominated"] and not step["one_gap"]
    text = step["headline"]
    assert "busy 3.1% of the 149 ms steady window" in text and "The host sets the step" in text
    assert "the lever is the library kernels" not in text   # the GPU is idle: no kernel lever comes first


def test_recorded_two_rank_trace_is_host_bound_not_library_bound(run_script, tmp_path):
    # examples/recorded_h200/ddp_two_ranks: 53 % of kernel time in fp32 library GEMMs, GPU idle
    # most of the steady window over hundreds of gaps (gloo all-reduce and Python on the host)
    trace = ROOT / "examples" / "recorded_h200" / "ddp_two_ranks" / "profile.trace.json.gz"
    proc = run_script("profile_kernels.py", "--trace", trace, "--json-out", tmp_path / "p.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    step = step_breakdown.summarize(json.loads((tmp_path / "p.json").read_text()), "p.json")
    tl = step["timeline"]
    assert tl["window"] == "after the last compilation" and tl["idle_gaps"] > 500
    assert step["library_dominated"] and step["host_bound"] and not step["one_gap"]
    assert tl["busy_share"] < 0.05 and step["largest_gap_share"] < 0.2
    assert "The host sets the step" in step["headline"]
    assert "the lever is the library kernels" not in step["headline"]


def test_a_matmul_kernel_is_swept_then_left_when_its_sweep_finds_nothing():
    """The tutorial matmul on an H200: 47.5 % of GPU time at 12 % of copy bandwidth. Memory rules
    would keep telling the user to tune it; as matmul_bound it is swept (tiles), and the recorded
    sweep's best was the launched config, so its ceiling is 0 and it is left."""
    inv = ROOT / "examples" / "recorded_h200" / "triton_tutorials" / "investigation"
    doc = json.loads((inv / "profile.json").read_text())
    sol_doc = json.loads((inv / "kernels" / "matmul_kernel" / "sol.json").read_text())
    sol_doc["classification"]["class"] = "matmul_bound"      # what speed_of_light.py says of it now
    sweep = json.loads((inv / "kernels" / "matmul_kernel" / "sweep.json").read_text())
    assert sweep["best"]["name"] == "baseline"
    labels = {"profile": "profile.json", "sol": "sol.json", "benchmark": "sweep.json"}
    rep = report.build("matmul_kernel", {"profile": doc, "sol": sol_doc}, labels)
    assert (rep["decision"]["verdict"], rep["decision"]["rule"]) == ("tune_triton", "sol_matmul_bound")
    assert "memory_inefficient" != rep["decision"]["rule"] and "no memory gap" in rep["decision"]["fired"][0]["says"]
    rep = report.build("matmul_kernel", {"profile": doc, "sol": sol_doc, "benchmark": sweep}, labels)
    assert (rep["decision"]["verdict"], rep["decision"]["rule"]) == ("leave_as_is", "ceiling_under_cut")
    assert rep["facts"]["headroom"]["value"] == pytest.approx(1.0)


def test_a_matmul_kernel_the_library_gemm_beats_is_told_to_call_the_library():
    """The same recording, with the library GEMM of its shapes timed beside it (as speed_of_light.py
    now does for a tl.dot kernel on a GPU): a clear library lead over the kernel's best measured
    config is a model rewrite (call torch.matmul), its headroom from the library; within the lead
    cut the sweep still decides."""
    inv = ROOT / "examples" / "recorded_h200" / "triton_tutorials" / "investigation"
    doc = json.loads((inv / "profile.json").read_text())
    sweep = json.loads((inv / "kernels" / "matmul_kernel" / "sweep.json").read_text())
    labels = {"profile": "profile.json", "sol": "sol.json", "benchmark": "sweep.json"}
    lead_min = decide.threshold("library_gemm_lead_min")

    def with_library(kernel_ms, library_ms):
        sol_doc = json.loads((inv / "kernels" / "matmul_kernel" / "sol.json").read_text())
        sol_doc["classification"]["class"] = "matmul_bound"
        sol_doc["classification"]["numbers"].update(library_gemm_ms=library_ms, kernel_do_bench_ms=kernel_ms,
                                                    kernel_over_library=kernel_ms / library_ms)
        return report.build("matmul_kernel", {"profile": doc, "sol": sol_doc, "benchmark": sweep}, labels)

    rep = with_library(0.40, 0.20)                               # the library twice as fast
    assert (rep["decision"]["verdict"], rep["decision"]["rule"]) == ("rewrite_model", "sol_matmul_library_faster")
    assert rep["facts"]["library_gemm_lead"]["value"] == pytest.approx(2.0)
    assert rep["facts"]["headroom"]["value"] == pytest.approx(2.0)
    assert "library GEMM of the same shapes" in rep["facts"]["headroom_source"]["value"]
    assert "Call torch.matmul" in rep["decision"]["fired"][0]["says"] and "0.2 ms" in rep["decision"]["fired"][0]["says"]
    template = dict(doc, ranking=[dict(r, name="triton_tem_fused_mm_0") if r.get("name") == "matmul_kernel" else r
                                  for r in doc.get("ranking") or []])
    sol_doc = json.loads((inv / "kernels" / "matmul_kernel" / "sol.json").read_text())
    sol_doc["classification"]["class"] = "matmul_bound"
    sol_doc["classification"]["numbers"].update(library_gemm_ms=0.2, kernel_do_bench_ms=0.4, kernel_over_library=2.0)
    rep = report.build("triton_tem_fused_mm_0", {"profile": template, "sol": sol_doc}, labels)
    assert rep["facts"]["kernel_class"]["value"] == "triton_inductor"        # Inductor's template: its backends
    assert (rep["decision"]["verdict"], rep["decision"]["rule"]) == ("tune_triton", "sol_matmul_template_library_faster")
    assert "max_autotune_gemm_backends = 'ATEN'" in rep["decision"]["fired"][0]["says"]
    rep = with_library(0.20 * lead_min * 0.99, 0.20)             # a lead inside the cut: the sweep's answer stands
    assert (rep["decision"]["verdict"], rep["decision"]["rule"]) == ("leave_as_is", "ceiling_under_cut")
    assert rep["facts"]["library_gemm_lead"]["value"] < lead_min and rep["facts"]["headroom"]["value"] == 1.0


def _host_bound_doc() -> dict:
    # the two-rank H200 window: the GPU busy 3.1 % of 149 ms over 876 gaps, library GEMMs 90 % of kernel time
    doc = {"summary": {"timeline": {"window": "after the last compilation", "window_us": 149266.5,
                                    "busy_us": 4568.8, "idle_us": 144697.7, "idle_gaps": 876, "compile_gap_us": 0.0,
                                    "largest_gaps_us": [18325.3, 2958.4, 2639.8]},
                       "kernel_time_us": 1000.0, "dispatches": 30},
           "ranking": [{"name": "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3", "origin": "other",
                        "total_us": 900.0, "calls": 20, "share": 0.9},
                       {"name": "triton_per_fused_gelu_0", "origin": "triton", "total_us": 100.0, "calls": 10,
                        "share": 0.1}]}
    doc["kernels"] = doc["ranking"]
    return doc


def _trials_with_cudagraphs(ms: list[float]) -> dict:
    base = {"name": "baseline", "status": "ok", "ms": [10.0, 10.1, 9.9], "median_ms": 10.0, "x_baseline": 1.0,
            "spread": 1.02, "counted": 3}
    x = 10.0 / sorted(ms)[len(ms) // 2]
    graphs = {"name": "cudagraphs", "status": "ok", "ms": ms, "median_ms": sorted(ms)[len(ms) // 2],
              "x_baseline": x, "spread": max(ms) / min(ms), "noise": 1.03, "beyond_noise": abs(x - 1) > 0.03,
              "outputs": {"result": "equal"}, "change": "set torch._inductor.config.triton.cudagraphs = True"}
    return {"schema": "remedy_trials/1", "arms": [base, graphs]}


def test_a_host_bound_step_is_told_to_cut_host_time_before_the_library_levers():
    doc = _host_bound_doc()
    facts = step_breakdown.program_facts(doc, "p.json")
    assert facts["host_bound"].value is True and facts["gpu_busy_share"].value == pytest.approx(0.0306, abs=1e-4)
    program = program_evidence.program_decision(doc, "p.json")
    fired = [f["rule"] for f in program["fired"]]
    assert program["rule"] == "host_bound_step" and "library_dominated" in fired   # both hold; the host first
    assert program["says"].startswith("The host sets the step: the GPU runs kernels 3% of the steady window")
    assert "CUDA/HIP graphs" in program["says"] and "library 90.0%" in program["says"]
    # one long pause is no host-bound step: the library rule decides
    doc["summary"]["timeline"]["largest_gaps_us"] = [140000.0]
    assert program_evidence.program_decision(doc, "p.json")["rule"] == "library_dominated"


def test_a_host_bound_step_where_graphs_were_measured_no_faster_is_not_told_to_try_them():
    doc = _host_bound_doc()
    program = program_evidence.program_decision(doc, "p.json", trials=_trials_with_cudagraphs([9.95, 10.05, 10.0]))
    assert program["rule"] == "host_bound_step_graphs_measured", program["fired"]
    assert "measured at 1.00x end to end" in program["says"] and "profile the host side" in program["says"]
    assert "host_bound_step" not in [f["rule"] for f in program["fired"]]
    # graphs measured faster: the measured remedy decides, neither host rule speaks for it
    program = program_evidence.program_decision(doc, "p.json", trials=_trials_with_cudagraphs([6.0, 6.1, 5.9]))
    assert program["rule"] == "remedy_measured_faster_program", program["fired"]
    assert not {"host_bound_step", "host_bound_step_graphs_measured"} & {f["rule"] for f in program["fired"]}


def test_the_recorded_default_investigation_is_told_to_cut_host_time():
    # examples/recorded_h200/default_investigation: attention by hand, train, 20 steps, on an H200; the
    # GPU busy 35 % of the window, library GEMMs 53.5 % of kernel time; its trials dropped cudagraphs up
    # front (the plan ran before host_bound proposed it) and nothing they ran beat the baseline
    rec = ROOT / "examples" / "recorded_h200" / "default_investigation" / "attention_by_hand_train"
    doc = json.loads((rec / "capture" / "profile" / "profile.json").read_text())
    trials = json.loads((rec / "trials" / "trials.json").read_text())
    program = program_evidence.program_decision(doc, "profile.json", trials=trials)
    assert program["facts"]["gpu_busy_share"]["value"] == pytest.approx(0.350, abs=0.001)
    assert program["rule"] == "host_bound_step" and "library_dominated" in [f["rule"] for f in program["fired"]]
    assert "the GPU runs kernels 35% of the steady window" in program["says"]
    graphs = next(a for a in trials["arms"] if a["name"] == "cudagraphs")
    assert graphs["status"] == "skipped" and trials["plan"]["priority"]["cudagraphs"] == "always"


def test_a_host_bound_step_whose_graphs_arm_sits_inside_the_noise_still_says_cut_host_time():
    # the cudagraphs arm ran but its runs do not judge it (inside the noise): no claim that graphs failed
    trials = _trials_with_cudagraphs([9.0, 9.5, 10.5])
    trials["arms"][1]["beyond_noise"] = False
    program = program_evidence.program_decision(_host_bound_doc(), "p.json", trials=trials)
    assert "cudagraphs_faster" not in program["facts"] and program["facts"]["cudagraphs_x"]["value"] > 1
    assert program["rule"] == "host_bound_step", program["fired"]
