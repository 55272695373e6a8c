"""Config pins: applied to a matching autotuner, ignored (with a warning) when the source differs."""

from __future__ import annotations

import importlib.util
import json

import pytest
import triton

from tko.patch import pins
from tko.base.errors import InputError


class FakeFn:
    def __init__(self, name, src):
        self.__name__, self.src = name, src


class FakeAutotuner:
    """The parts of Inductor's CachingAutotuner a pin touches, with a precompile that records."""

    def __init__(self, name, src, configs):
        self.fn = FakeFn(name, src)
        self.inductor_meta = {"kernel_name": name, "dynamic_scale_rblock": True}
        self.configs = list(configs)
        self.compile_results, self.launchers, self.compiled = [], [], []

    def precompile(self, warm_cache_only=False):
        self.compiled = list(self.configs)
        self.launchers = [type("L", (), {"config": c})() for c in self.configs]
        self.configs = None


SRC = "def k(x_ptr, XBLOCK: tl.constexpr):\n    pass\n"
PIN = {"kernel": "k", "source_sha256": pins.source_hash(SRC),
       "config": {"kwargs": {"XBLOCK": 256}, "num_warps": 8, "num_stages": 1}}


def _configs():
    return [triton.Config({"XBLOCK": 128}, num_warps=4, num_stages=1),
            triton.Config({"XBLOCK": 1024}, num_warps=4, num_stages=1)]


def test_matching_pin_compiles_and_launches_only_the_pinned_config(capsys):
    cls = type("Tuner", (FakeAutotuner,), {})
    pins.wrap_precompile(cls, {"k": PIN})
    obj = cls("k", SRC, _configs())
    obj.precompile()
    assert [(c.kwargs, c.num_warps) for c in obj.compiled] == [({"XBLOCK": 256}, 8)]
    assert len(obj.launchers) == 1 and obj.launchers[0].config.found_by_coordesc is True
    assert obj.inductor_meta["dynamic_scale_rblock"] is False
    assert "pinned k" in capsys.readouterr().err


def test_pin_with_other_source_is_ignored_with_one_warning(capsys):
    cls = type("Tuner", (FakeAutotuner,), {})
    pins.wrap_precompile(cls, {"k": PIN})
    obj = cls("k", SRC.replace("pass", "return"), _configs())
    obj.precompile()
    assert [c.kwargs["XBLOCK"] for c in obj.compiled] == [128, 1024]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pin for k ignored" in err[0] and "differs" in err[0]


def test_pin_never_applies_to_another_kernel():
    other = FakeAutotuner("other", SRC, _configs())
    assert pins.apply_pin(other, {"k": PIN}) is False and len(other.configs) == 2


def test_worker_compiled_results_keep_the_matching_binary():
    obj = FakeAutotuner("k", SRC, [])
    results = [type("R", (), {"config": c})() for c in [*_configs(), triton.Config({"XBLOCK": 256}, num_warps=8, num_stages=1)]]
    obj.compile_results, obj.configs = list(results), None
    assert pins.apply_pin(obj, {"k": PIN})
    assert obj.compile_results == [results[2]] and obj.configs is None
    # no binary with the pinned config (num_stages differs): compile the pin in this process
    fresh = FakeAutotuner("k", SRC, [])
    fresh.compile_results, fresh.configs = list(results[:2]), None
    assert pins.apply_pin(fresh, {"k": PIN})
    assert fresh.compile_results == [] and [c.kwargs for c in fresh.configs] == [{"XBLOCK": 256}]


def test_hash_of_file_source_equals_hash_of_live_jit_src(tmp_path):
    path = tmp_path / "kern.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                    "def kern(x_ptr, n, XBLOCK: tl.constexpr):\n    i = tl.arange(0, XBLOCK)\n"
                    "    tl.store(x_ptr + i, i, i < n)   \n\n\n# trailer\nVALUE = 1\n")
    spec = importlib.util.spec_from_file_location("kern_mod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert pins.source_hash(pins.function_source(path, "kern")) == pins.source_hash(module.kern.src)


def test_pins_from_a_real_sweep(fixtures_dir, tmp_path, run_script):
    sweep_path = fixtures_dir / "sweep_h200" / "zeros_like_sweep.json"
    kernel = fixtures_dir / "capture_h200" / "scatter_index_add" / "triton_poi_fused_zeros_like_0.py"
    doc = pins.pins_from_sweep(json.loads(sweep_path.read_text()), kernel)
    (pin,) = doc["pins"]
    assert pin["kernel"] == "triton_poi_fused_zeros_like_0"
    assert pin["config"] == {"kwargs": {"XBLOCK": 1024}, "num_warps": 16, "num_stages": 1}
    assert pin["source_sha256"] == pins.source_hash(pins.function_source(kernel, pin["kernel"]))
    with pytest.raises(InputError, match="not here"):
        pins.pins_from_sweep(json.loads(sweep_path.read_text()))  # the sweep machine's path
    proc = run_script("try_remedies.py", "--out", tmp_path, "--pins-from-sweep", sweep_path,
                      "--kernel-file", kernel)
    assert proc.returncode == 0, proc.stderr
    from tko.base import contracts

    written = json.loads((tmp_path / "pins.json").read_text())
    assert contracts.contract_problems(written) == [] and written["pins"][0]["config"] == pin["config"]
    assert pins.load_pins(tmp_path / "pins.json")["triton_poi_fused_zeros_like_0"]["source_sha256"] == \
        pin["source_sha256"]


def _unpickled(name):
    # what Inductor's CachingAutotuner.prepare_for_pickle leaves of a worker-compiled kernel
    obj = FakeAutotuner(name, SRC, [])
    obj.fn.fn, obj.fn._hash_lock = None, None
    obj.compile_results = [type("R", (), {"config": c})() for c in _configs()]
    obj.configs = None
    return obj


def test_a_worker_compiled_kernel_is_reloaded_before_the_pin_compiles_here(capsys):
    live = FakeFn("k", SRC)
    live.fn, live._hash_lock = (lambda: None), object()
    obj = _unpickled("k")
    assert pins.apply_pin(obj, {"k": PIN}, reload_kernel=lambda: type("T", (), {"fn": live})())
    assert obj.fn is live and [c.kwargs for c in obj.configs] == [{"XBLOCK": 256}]
    # no way to reload: the pin is not applied and the kernel keeps what the worker compiled
    stuck = _unpickled("k")
    assert pins.apply_pin(stuck, {"k": PIN}) is False
    assert len(stuck.compile_results) == 2 and "no way to reload" in capsys.readouterr().err
