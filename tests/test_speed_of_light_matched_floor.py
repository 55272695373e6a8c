"""The copy floor at the rate of a copy of the same bytes, not at the 1 GiB copy peak.

Measured on an H200 (tests/fixtures/sol_h200/copy_size_curve): a 34 MB copy runs at 60 % of the
1 GiB copy rate, 134 MB at 86 %, 268 MB at 93 %; a kernel moving under ~250 MB held to the peak's
floor looks slower than a plain copy of its bytes can be. On a GPU the floor is such a copy, timed
now; offline it stays at the peak, with a note. The GPU is faked here: gpu_available, run_kernel
and peaks.measure_copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tko.base import errors
from tko.measure import kernel_run, peaks, speed_of_light as sol

ROOT = Path(__file__).resolve().parents[1]
GELU = ROOT / "examples" / "recorded_h200" / "pointwise_chain" / "autotune_kernels" / \
    "triton_poi_fused_add_gelu_mul_0.py"
GELU_BYTES = 201334784
TH = sol.thresholds_from_rules()
PEAK = 4246.1
ONE_PASS = 2 * 4096 * 32768 * 2
MODEL_1PASS = {"unique_bytes": GELU_BYTES, "one_pass_bytes": GELU_BYTES, "multi_pass_bytes": GELU_BYTES,
               "max_passes": 1, "inductor_bytes": GELU_BYTES}
MODEL_2PASS = {"unique_bytes": ONE_PASS, "one_pass_bytes": ONE_PASS, "multi_pass_bytes": ONE_PASS * 3 // 2,
               "max_passes": 2, "inductor_bytes": ONE_PASS}


def _ms(nbytes, gbps):
    return nbytes / (gbps * 1e9) * 1e3


def test_floors_at_the_peak_without_a_matched_copy():
    fl = sol.floors(MODEL_1PASS, PEAK)
    assert fl["copy_floor_ms"] == pytest.approx(_ms(GELU_BYTES, PEAK))
    assert fl["copy_rate_basis"] == "peak" and fl["size_matched_copy"] is None
    assert fl["floor_rates"] == {"copy": {"basis": "peak", "gbps": PEAK, "bytes": GELU_BYTES}}
    assert sol.floors(MODEL_1PASS, None)["copy_rate_basis"] is None


def test_floors_at_the_matched_copy_rate_keep_the_peak():
    rec = {"copy_gbps": 3654.0, "median_ms": 0.0367, "bytes_moved": GELU_BYTES}
    fl = sol.floors(MODEL_1PASS, PEAK, {"copy": rec})
    assert fl["copy_floor_ms"] == pytest.approx(_ms(GELU_BYTES, 3654.0))
    assert fl["copy_floor_ms"] > sol.floors(MODEL_1PASS, PEAK)["copy_floor_ms"]
    assert fl["peak_gbps"] == PEAK and fl["copy_rate_basis"] == "size_matched_copy"
    assert fl["size_matched_copy"] == {"copy": rec}
    # without any peak, the matched copy still gives the floor
    assert sol.floors(MODEL_1PASS, None, {"copy": rec})["copy_floor_ms"] == pytest.approx(_ms(GELU_BYTES, 3654.0))
    # a record without a positive rate is no rate: the peak
    assert sol.floors(MODEL_1PASS, PEAK, {"copy": {"copy_gbps": 0}})["copy_rate_basis"] == "peak"


def test_multi_pass_floors_each_at_their_own_rate():
    fl = sol.floors(MODEL_2PASS, PEAK, {"copy": {"copy_gbps": 4150.0}, "one_pass": {"copy_gbps": 4150.0}})
    assert fl["one_pass_floor_ms"] == pytest.approx(_ms(ONE_PASS, 4150.0))
    assert fl["passes_floor_ms"] == pytest.approx(_ms(ONE_PASS * 1.5, PEAK))      # no matched copy: the peak
    assert {k: r["basis"] for k, r in fl["floor_rates"].items()} == \
        {"copy": "size_matched_copy", "one_pass": "size_matched_copy", "passes": "peak"}
    # a one-pass kernel has no one-pass or passes floor, whatever was measured
    one = sol.floors(MODEL_1PASS, PEAK, {"one_pass": {"copy_gbps": 1.0}, "passes": {"copy_gbps": 1.0}})
    assert one["one_pass_floor_ms"] is None and one["passes_floor_ms"] is None and one["size_matched_copy"] is None


def _fake_copy(calls, rate=None, fail=False):
    def measure_copy(nbytes, dtype="float32", warmup_ms=50, rep_ms=300, index=None):
        calls.append({"nbytes": nbytes, "dtype": dtype, "warmup_ms": warmup_ms, "rep_ms": rep_ms})
        if fail:
            raise errors.ToolFailure("out of memory (faked)")
        moved = 2 * nbytes
        return {"name": "NVIDIA H200", "arch": "sm_90", "copy_gbps": rate, "median_ms": _ms(moved, rate),
                "p20_ms": _ms(moved, rate), "p80_ms": _ms(moved, rate), "buffer_bytes": nbytes, "bytes_moved": moved,
                "dtype": dtype, "method": "faked", "measured_at": "2026-12-02T00:00:00+00:00"}
    return measure_copy


def test_size_matched_copies_move_each_floors_bytes_once(monkeypatch):
    calls = []
    monkeypatch.setattr(peaks, "measure_copy", _fake_copy(calls, 4100.0))
    out, notes = sol.size_matched_copies(MODEL_2PASS)
    # the copy and one-pass floors are the same bytes: one copy of half of them as the buffer
    assert [c["nbytes"] for c in calls] == [ONE_PASS // 2, ONE_PASS * 3 // 4]
    assert {(c["warmup_ms"], c["rep_ms"], c["dtype"]) for c in calls} == {(20, 100, "float32")}
    assert set(out) == {"copy", "one_pass", "passes"} and not notes
    assert out["passes"]["bytes"] == ONE_PASS * 3 // 2 and out["passes"]["bytes_moved"] == ONE_PASS * 3 // 2
    calls.clear()
    sol.size_matched_copies({"unique_bytes": 10, "max_passes": 1})
    assert calls[0]["nbytes"] == sol.MATCHED_MIN_BUFFER


def _fake_gpu(monkeypatch, kernel_ms, twin_ms):
    def run_kernel(path, timer=None, timeout=None, **kw):
        ms = twin_ms if "twin" in Path(path).name else kernel_ms
        return {"status": "ok", "results": [{"ok": True, "best": True, "timer": "torch.profiler.l2_flushed", "ms": ms}]}

    monkeypatch.setattr(sol, "gpu_available", lambda: (True, "NVIDIA H200 (faked)"))
    monkeypatch.setattr(kernel_run, "run_kernel", run_kernel)


def _analyse(tmp_path, **kw):
    return sol.analyse(GELU, twin_path=tmp_path / "twin.py", arches=["gfx942"], peak_gbps=PEAK, **kw)


@pytest.fixture
def slow_by_the_peak(monkeypatch):
    """A kernel at 1.46x the peak's floor (twin 1.40x): access-pattern bound by the peak; a copy of
    its bytes at PEAK * 1.2 / 1.46 puts it at 1.2x the matched floor."""
    assert 1.2 <= TH["sol_at_floor_ratio"] < 1.40 and TH["sol_twin_near_floor_ratio"] < 1.40
    floor = _ms(GELU_BYTES, PEAK)
    _fake_gpu(monkeypatch, 1.46 * floor, 1.40 * floor)
    return PEAK * 1.2 / 1.46


def test_analyse_classifies_against_the_size_matched_floor(tmp_path, monkeypatch, slow_by_the_peak):
    calls = []
    monkeypatch.setattr(peaks, "measure_copy", _fake_copy(calls, slow_by_the_peak))
    doc = _analyse(tmp_path)
    assert not doc["offline"] and calls == [{"nbytes": GELU_BYTES // 2, "dtype": "float32", "warmup_ms": 20,
                                             "rep_ms": 100}]
    fl, c = doc["floors"], doc["classification"]
    assert fl["copy_rate_basis"] == "size_matched_copy" and fl["peak_gbps"] == PEAK
    assert fl["size_matched_copy"]["copy"]["copy_gbps"] == pytest.approx(slow_by_the_peak)
    assert c["numbers"]["kernel_over_floor"] == pytest.approx(1.2)
    assert c["class"] == "at_floor"
    # the bandwidth check stays on the 1 GiB peak
    assert doc["bandwidth"]["unique"]["pct_of_copy"] == pytest.approx(100 / 1.46)
    md = sol.markdown(doc)
    assert f"a copy of the same 201.3 MB timed now, {slow_by_the_peak:.1f} GB/s (the 1 GiB peak: 4246.1 GB/s)" in md
    assert any("copies of the same bytes" in n and "torch.profiler.l2_flushed" in n for n in doc["notes"])


def test_analyse_falls_back_to_the_peak_when_the_copy_fails(tmp_path, monkeypatch, slow_by_the_peak):
    calls = []
    monkeypatch.setattr(peaks, "measure_copy", _fake_copy(calls, fail=True))
    doc = _analyse(tmp_path)
    assert len(calls) == 1
    fl, c = doc["floors"], doc["classification"]
    assert fl["copy_rate_basis"] == "peak" and fl["size_matched_copy"] is None
    assert c["numbers"]["kernel_over_floor"] == pytest.approx(1.46)
    assert c["class"] == "access_pattern_bound"
    assert any("size-matched copy of 201334784 bytes failed (ToolFailure: out of memory" in n for n in doc["notes"])
    assert any("1 GiB copy peak" in n and "60 %" in n for n in doc["notes"])
    assert "at the 1 GiB copy peak, 4246.1 GB/s (not size-matched" in sol.markdown(doc)


def test_analyse_floor_basis_peak_times_no_copy(tmp_path, monkeypatch, slow_by_the_peak):
    calls = []
    monkeypatch.setattr(peaks, "measure_copy", _fake_copy(calls, slow_by_the_peak))
    doc = _analyse(tmp_path, floor_basis="peak")
    assert calls == [] and doc["floors"]["copy_rate_basis"] == "peak"
    assert doc["classification"]["class"] == "access_pattern_bound"
    with pytest.raises(errors.InputError, match="floor basis"):
        _analyse(tmp_path, floor_basis="matched")


def test_offline_floor_is_the_peak_with_a_note(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(peaks, "measure_copy", _fake_copy(calls, 1.0))
    doc = _analyse(tmp_path, offline=True)
    assert calls == [] and doc["floors"]["copy_rate_basis"] == "peak"
    assert doc["floors"]["copy_floor_ms"] == pytest.approx(_ms(GELU_BYTES, PEAK))
    note = next(n for n in doc["notes"] if n.startswith("copy floor:"))
    assert "201.3 MB" in note and "under ~250 MB" in note and "34 MB copy runs at 60 %" in note
    assert "this floor is too low" in note
