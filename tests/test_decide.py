"""Each decision rule fires on the evidence it names and stays silent just outside it."""

from __future__ import annotations

import pytest

from tko.base import decide
from tko.base.decide import Fact
from tko.base.errors import InputError

RULES = decide.load_rules()


def facts(**kw):
    return {k: Fact(v, f"test:{k}") for k, v in kw.items()}


# A hot, memory-bound pointwise kernel at 55 % of copy bandwidth: the baseline that tunes.
HOT = dict(share=0.30, calls=10, mean_us=120.0, pct_copy_peak=0.55, loads=3, stores=1, atomics=0,
           scatter=False, matrix_ops=0, name_is_gemm=False, valu_per_byte=0.4, multi_pass=False)


def fired_ids(d):
    return {f.rule for f in d.fired}


def test_hot_memory_inefficient_kernel_is_tuned_with_cited_evidence():
    d = decide.decide(facts(**HOT), RULES, kernel="triton_poi_fused_add_0")
    assert d.verdict == "tune_triton" and d.rule == "memory_inefficient"
    firing = next(f for f in d.fired if f.rule == "memory_inefficient")
    assert {e["fact"] for e in firing.evidence} == {"share", "pct_copy_peak"}
    assert "30.0%" in firing.says and "55%" in firing.says


@pytest.mark.parametrize("override,rule,verdict", [
    (dict(share=0.01), "not_hot", "leave_as_is"),
    (dict(loads=0, stores=1), "initializer", "leave_as_is"),
    (dict(pct_copy_peak=0.91), "at_copy_bandwidth", "leave_as_is"),
    (dict(atomics=4), "atomic_or_scatter_heavy", "rewrite_model"),
    (dict(scatter=True), "atomic_or_scatter_heavy", "rewrite_model"),
    (dict(name_is_gemm=True, matrix_ops=0), "scalarized_gemm", "disable_compiled_region"),
    (dict(mean_us=3.0, calls=640), "launch_bound", "rewrite_model"),
    (dict(pct_copy_peak=0.2, valu_per_byte=9.0), "arithmetic_bound", "rewrite_model"),
    (dict(multi_pass=True, pct_copy_peak=0.3), "multi_pass_reduction", "disable_compiled_region"),
    (dict(multi_pass=True, pct_copy_peak=0.1, dynamic_sizes=True, dynamic_size_args="ks0"),
     "dynamic_shape_multi_pass", "rewrite_model"),
    # a measured A/B outranks every inference, even "not hot" and "at copy bandwidth"
    (dict(fallback_speedup=1.3, fallback_beyond_noise=True, fallback_outputs_equal=True),
     "fallback_measured_faster", "disable_compiled_region"),
    (dict(share=0.01, pct_copy_peak=0.95, fallback_speedup=1.3, fallback_beyond_noise=True,
          fallback_outputs_equal=True), "fallback_measured_faster", "disable_compiled_region"),
])
def test_rule_fires_and_decides(override, rule, verdict):
    d = decide.decide(facts(**{**HOT, **override}), RULES)
    assert rule in fired_ids(d)
    assert (d.rule, d.verdict) == (rule, verdict)


@pytest.mark.parametrize("override,rule", [
    (dict(share=0.05), "not_hot"),                                # at the cut is hot
    (dict(loads=1, stores=1), "initializer"),
    (dict(pct_copy_peak=0.79), "at_copy_bandwidth"),
    (dict(atomics=0, scatter=False), "atomic_or_scatter_heavy"),
    (dict(name_is_gemm=True, matrix_ops=64), "scalarized_gemm"),  # uses the matrix cores
    (dict(mean_us=3.0, calls=5), "launch_bound"),                 # tiny but rare
    (dict(pct_copy_peak=0.2, valu_per_byte=3.95), "arithmetic_bound"),  # tanh-GELU PTX, memory-bound
    (dict(multi_pass=True, pct_copy_peak=0.7), "multi_pass_reduction"),
    (dict(mean_us=8.8, calls=23), "launch_bound"),                # slow, not at the launch floor
    (dict(multi_pass=True, pct_copy_peak=0.1, dynamic_sizes=False), "dynamic_shape_multi_pass"),
    (dict(multi_pass=False, pct_copy_peak=0.1, dynamic_sizes=True), "dynamic_shape_multi_pass"),
    (dict(multi_pass=True, pct_copy_peak=0.6, dynamic_sizes=True), "dynamic_shape_multi_pass"),
    (dict(fallback_speedup=1.3, fallback_beyond_noise=False, fallback_outputs_equal=True), "fallback_measured_faster"),
    (dict(fallback_speedup=1.3, fallback_beyond_noise=True, fallback_outputs_equal=False), "fallback_measured_faster"),
    (dict(fallback_speedup=0.8, fallback_beyond_noise=True, fallback_outputs_equal=True), "fallback_measured_faster"),
])
def test_rule_stays_silent_just_outside_its_evidence(override, rule):
    assert rule not in fired_ids(decide.decide(facts(**{**HOT, **override}), RULES))


def test_priority_orders_competing_rules():
    # cold AND atomic: not hot wins (do not spend effort on a cold kernel at all)
    d = decide.decide(facts(**{**HOT, "share": 0.01, "atomics": 8}), RULES)
    assert {"not_hot", "atomic_or_scatter_heavy"} <= fired_ids(d)
    assert d.rule == "not_hot"


def test_missing_facts_become_gaps_not_errors():
    d = decide.decide(facts(share=0.4), RULES)
    assert d.rule == "hot_without_bandwidth_number" and d.verdict == "tune_triton"
    assert any("pct_copy_peak" in g for g in d.gaps)
    empty = decide.decide({}, RULES)
    assert empty.verdict is None and any("no deciding rule fired" in g for g in empty.gaps)


@pytest.mark.parametrize("override,rule", [
    (dict(vendor="hygon", memory_verdict="global"), "buffer_ops_candidate"),
    (dict(probe_buffer_variant="pointer_range"), "buffer_variant_found"),
    (dict(n_configs=6, spread=1.01), "autotune_space_flat"),
    (dict(n_configs=1, from_cache=True), "single_config"),
    (dict(spills=12), "spills"),
    (dict(fallback_speedup=0.8, fallback_beyond_noise=True, fallback_outputs_equal=True), "fallback_measured_slower"),
    (dict(fallback_speedup=1.3, fallback_beyond_noise=True, fallback_outputs_equal=False), "fallback_outputs_differ"),
])
def test_advice_adds_steps_without_changing_the_decision(override, rule):
    d = decide.decide(facts(**{**HOT, **override}), RULES)
    assert rule in fired_ids(d) and d.rule == "memory_inefficient"


def test_advice_silent_outside_evidence():
    d = decide.decide(facts(**{**HOT, "vendor": "nvidia", "memory_verdict": "global", "n_configs": 6,
                               "spread": 1.4, "spills": 0}), RULES)
    assert not {"buffer_ops_candidate", "autotune_space_flat", "spills"} & fired_ids(d)
    d = decide.decide(facts(**{**HOT, "vendor": "amd", "memory_verdict": "buffer"}), RULES)
    assert "buffer_ops_candidate" not in fired_ids(d)


def test_single_config_note_mentions_cache():
    d = decide.decide(facts(**{**HOT, "n_configs": 1, "from_cache": True}), RULES)
    says = next(f.says for f in d.fired if f.rule == "single_config")
    assert "autotune cache" in says


@pytest.mark.parametrize("bad", [
    {"rules": [{"id": "x", "verdict": "maybe", "priority": 1, "when": []}]},
    {"rules": [{"id": "x", "verdict": "tune_triton", "when": []}]},
    {"rules": [{"id": "x", "verdict": "tune_triton", "priority": 1, "when": [{"fact": "a", "approx": 1}]}]},
    {"rules": [{"id": "x", "verdict": "tune_triton", "priority": 1, "when": [{"fact": "a", "lt": "nope"}]}]},
    ["not a mapping"],
])
def test_malformed_rules_are_input_errors(bad):
    with pytest.raises(InputError):
        decide.validate_rules(bad)


def test_every_threshold_cites_a_source():
    for name, t in RULES["thresholds"].items():
        assert isinstance(t, dict) and t.get("source"), name


@pytest.mark.parametrize("example,verdict", [
    ("tiny_launches", "rewrite_model"),         # 64 kernels of ~1 us, each 1.5 %, together 100 %
    ("pointwise_chain", None), ("scatter_index_add", None), ("row_reduction", None),
    # 207 short launches, but 1.1 % of the time; 93.8 % in cuBLAS/CUTLASS GEMMs: library-dominated
    ("mlp_train_step", "rewrite_model"),
    ("dynamic_shapes", None),                   # 8.3 us mean: slow kernels, not launch-bound
])
def test_program_rules_on_recorded_h200_profiles(example, verdict):
    import json

    from conftest import ROOT
    from tko.verdict import program_evidence

    profile = json.loads((ROOT / "examples" / "recorded_h200" / example / "profile" / "profile.json").read_text())
    program = program_evidence.program_decision(profile, "profile.json")
    assert program["verdict"] == verdict
    if example == "mlp_train_step":
        assert program["rule"] == "library_dominated"
        assert program["facts"]["library_share"]["value"] == pytest.approx(0.938, abs=0.001)
    elif verdict:
        assert program["rule"] == "many_tiny_launches"
        assert program["facts"]["tiny_kernel_share"]["value"] == pytest.approx(1.0)
        assert program["facts"]["tiny_kernel_launches"]["value"] == 1600
        assert "1600 launches of 65 kernels" in program["says"]
        firing = program["fired"][0]
        assert {e["fact"] for e in firing["evidence"]} == {"tiny_kernel_share", "tiny_kernel_launches"}
        assert all("profile.json: ranking[" in e["source"] for e in firing["evidence"])


def test_a_fallback_measured_slower_lifts_the_disable_verdict():
    """multi-pass at 30 % would say 'disable the region'; an A/B that measured the fallback 0.8x
    (beyond its spread) rules that out, and the kernel is tuned instead."""
    structural = {**HOT, "multi_pass": True, "pct_copy_peak": 0.3}
    assert decide.decide(facts(**structural), RULES).rule == "multi_pass_reduction"
    measured = {**structural, "fallback_speedup": 0.8, "fallback_beyond_noise": True, "fallback_outputs_equal": True}
    d = decide.decide(facts(**measured), RULES)
    assert (d.rule, d.verdict) == ("memory_inefficient", "tune_triton")
    assert "fallback_measured_slower" in fired_ids(d)
    inside_noise = {**measured, "fallback_beyond_noise": False}
    assert decide.decide(facts(**inside_noise), RULES).rule == "multi_pass_reduction"
    gemm = {**HOT, "name_is_gemm": True, "matrix_ops": 0}
    assert decide.decide(facts(**gemm), RULES).rule == "scalarized_gemm"
    assert decide.decide(facts(**{**gemm, "fallback_speedup": 0.8, "fallback_beyond_noise": True}), RULES).rule \
        == "memory_inefficient"


def test_no_ab_is_not_a_gap():
    d = decide.decide(facts(**HOT), RULES)
    assert not [g for g in d.gaps if "fallback" in g]
