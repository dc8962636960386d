"""One set of bounds (accelsim.bounds), checked at the library boundary: the Python API refuses
what a CLI flag or a config file refuses, with an InputError naming the field and the value
(issue 33, items 7 and 10). CLI cases live in tests/test_cli_hostile.py, config files in
tests/data/bad_configs."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest

from accelsim import bounds
from accelsim.arch import build_system
from accelsim.errors import Infeasible, InputError

H100 = build_system("h100-sxm")


# ---- the flags are built from the same numbers the library checks --------------------------

def _refuses(parse, text: str) -> bool:
    try:
        parse(text)
    except argparse.ArgumentTypeError:
        return True
    return False


@pytest.mark.parametrize("flag_type, lo, hi", [
    ("dimension", 1, bounds.MAX_DIM),
    ("model_layers", 1, bounds.MAX_MODEL_LAYERS),
    ("chip_count", 1, bounds.MAX_CHIPS),
    ("train_steps", 1, bounds.MAX_TRAIN_STEPS),
])
def test_integer_flags_stop_exactly_at_the_library_bound(flag_type, lo, hi):
    from accelsim.commands import _common

    parse = getattr(_common, flag_type)
    assert parse(str(lo)) == lo and parse(str(hi)) == hi
    assert _refuses(parse, str(lo - 1)) and _refuses(parse, str(hi + 1))


def test_memory_reserve_flag_and_llm_params_share_one_bound():
    from accelsim.commands._common import memory_reserve_GiB
    from accelsim.engine.plan import LlmParams

    lo, hi = bounds.MEMORY_RESERVE_GiB
    for v in (lo, hi):
        assert memory_reserve_GiB(repr(v)) == v == LlmParams(memory_reserve_GiB=v).memory_reserve_GiB
    for v in (-1e-9, hi * (1 + 1e-9), float("nan")):
        assert _refuses(memory_reserve_GiB, repr(v))
        with pytest.raises(InputError, match="memory_reserve_GiB must be a finite number in"):
            LlmParams(memory_reserve_GiB=v)


def test_si_ranges_are_the_file_ranges_converted():
    """A config value at either end of its file range builds; the dataclass checks agree with
    the loader (the same multiplication by the unit)."""
    r = bounds.SI_RANGES
    assert r["frequency_Hz"] == (1e-3 * 1e9, 100.0 * 1e9)
    assert r["memory_capacity_bytes"] == (1e-3 * 2**20, 1e6 * 2**30)  # MiB low end, GiB top
    assert r["latency_s"] == (1e-3 * 1e-9, 1e9 * 1e-9)
    for key in ("rows", "cols", "cores", "chips"):
        assert r[key] == bounds.PLAUSIBLE[key]


# ---- hardware built or changed in Python keeps the config's ranges --------------------------

@pytest.mark.parametrize("change, match", [
    (lambda s: s.with_fusion("off"), "fusion must be True or False, got 'off'"),
    (lambda s: s.with_winograd(1), "winograd must be True or False, got 1"),
    (lambda s: dataclasses.replace(s, chip=dataclasses.replace(s.chip, split_k="no")),
     "Chip.split_k must be True or False"),
    (lambda s: s.with_power_limit(-5), r"power limit \(W\) must be a finite number in"),
    (lambda s: s.with_power_limit(100), "must be above the chip's static power, 120 W"),
    (lambda s: s.with_link_bandwidth(float("nan")), "Link.bandwidth_Bps must be a finite number"),
    (lambda s: s.with_link_bandwidth(1e300), r"Link.bandwidth_Bps must be a finite number in \["),
    (lambda s: dataclasses.replace(s, chip=dataclasses.replace(
        s.chip, core=dataclasses.replace(s.chip.core, frequency_Hz=1e300))),
     r"Core.frequency_Hz must be a finite number in \[1e\+06, 1e\+11\], got 1e\+300"),
    (lambda s: dataclasses.replace(s, chip=dataclasses.replace(s.chip, cores=0)),
     r"Chip.cores must be an integer in \[1, 1,000,000\], got 0"),
    (lambda s: dataclasses.replace(s, chip=dataclasses.replace(s.chip, memory_capacity_bytes=-1)),
     "Chip.memory_capacity_bytes must be a finite number in"),
    (lambda s: dataclasses.replace(s, chips=2), "boards x chips_per_board must equal chips"),
])
def test_a_system_changed_in_python_is_checked_like_a_file(change, match):
    with pytest.raises(InputError, match=match):
        change(H100)


def test_fusion_off_was_true_and_is_now_refused_everywhere():
    """predict(..., fusion='off') ran fused (bool('off') is True); every door refuses it."""
    import accelsim
    from accelsim.engine.plan import Plan
    from accelsim.engine.run import Options

    wl = accelsim.load_workload("tiny-cnn")
    with pytest.raises(InputError, match="fusion must be True or False, got 'off'"):
        accelsim.predict(H100, wl, 8, "fp16", fusion="off")
    with pytest.raises(InputError, match="Options.fusion must be True or False"):
        Options(fusion="off")
    with pytest.raises(InputError, match="plan sequence_parallel must be True or False"):
        Plan(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1, sequence_parallel="off")
    on = accelsim.predict(H100, wl, 8, "fp16", fusion=True).as_dict()
    off = accelsim.predict(H100, wl, 8, "fp16", fusion=False).as_dict()
    assert (on["fusion"], off["fusion"]) == ("on", "off")
    assert on["step_time_s"] < off["step_time_s"]  # fused element-wise layers save kernels


# ---- memory: a negative reserve cannot make memory that does not exist "fit" ----------------

def test_a_negative_reserve_is_refused_and_infer_counts_the_one_it_is_given():
    from accelsim.engine.decoder import Decoder
    from accelsim.engine.inference import InferencePlan, infer
    from accelsim.engine.plan import LlmParams
    from accelsim.engine.run import predict_workload
    from accelsim.workload import load_workload
    from accelsim.workload.hf_config import resolve_model

    d = Decoder(resolve_model("gpt2-small"), 1024)
    bare = infer(d, H100, InferencePlan(), "bf16", 1, context=64)  # default: no reserve
    r = infer(d, H100, InferencePlan(), "bf16", 1, context=64,
              params=LlmParams(memory_reserve_GiB=5.0))
    assert bare.as_dict()["memory_reserve_GiB"] == 0.0
    assert r.as_dict()["memory_GiB_per_gpu"] - bare.as_dict()["memory_GiB_per_gpu"] == \
        pytest.approx(5.0, rel=1e-12)
    with pytest.raises(InputError, match="memory_reserve_GiB must be a finite number in"):
        LlmParams(memory_reserve_GiB=-5)
    with pytest.raises(InputError, match="memory_reserve_bytes must be a finite number in"):
        predict_workload(H100, load_workload("tiny-cnn"), 8, "fp16", fusion=True,
                         memory_reserve_bytes=-5 * 2**30)


# ---- item 7: bad input gets a clear error, never a silent answer ----------------------------

def test_a_gemm_that_cannot_fit_the_chip_is_infeasible_naming_bytes_and_capacity():
    from accelsim.perf.gemm import gemm_kernel_time, gemm_time

    m = n = k = 2**24
    need = (m * k + k * n + m * n) * 2  # fp16 operands and result
    cap = H100.chip.memory_capacity_bytes
    with pytest.raises(Infeasible, match=f"needs {need:,} bytes .* more than the {cap:,} bytes"):
        gemm_time(H100, m, n, k, "fp16")
    # the largest square fp16 GEMM that fits is timed; one element more per side is refused
    side = int((cap / 6) ** 0.5)
    assert gemm_time(H100, side, side, side, "fp16").time_s > 0
    with pytest.raises(Infeasible):
        gemm_time(H100, side + 1, side + 1, side + 1, "fp16")
    # copies count: 4 GEMMs that fit one by one do not fit together
    g = gemm_kernel_time(H100, side, side, side, "fp16", count=4)
    assert g.compulsory_bytes > cap
    with pytest.raises(Infeasible):
        gemm_time(H100, side, side, side, "fp16", count=4)
    with pytest.raises(InputError, match="unknown precision 'fp9'"):
        gemm_time(H100, 8, 8, 8, "fp9")


def test_more_parameter_tensors_than_parameters_is_refused():
    """10^12 tensors of 10^3 parameters priced 10^12 per-tensor overheads (860,000,000 ms)."""
    from accelsim.netsim import UpdateParams, gradient_reduction_times

    s64 = build_system("hfp8-64chip")
    with pytest.raises(InputError, match="n_tensors 1,000,000,000,000 is more than n_params 1,000"):
        gradient_reduction_times(s64, 1000, "fp16", n_tensors=10**12)
    with pytest.raises(InputError, match="n_tensors 1 is more than n_params 0"):
        gradient_reduction_times(s64, 0, "fp16", n_tensors=1)
    ok = gradient_reduction_times(s64, 1000, "fp16", n_tensors=1000,
                                  update=UpdateParams(per_tensor_overhead_s=1e-6))
    assert ok.weight_update_s >= 1000 * 1e-6
    with pytest.raises(InputError, match="per_tensor_overhead_s must be a finite number in"):
        UpdateParams(per_tensor_overhead_s=float("nan"))


def test_training_steps_have_a_stated_limit():
    from accelsim.train.trainer import TrainConfig

    assert TrainConfig(recipe="fp32", steps=bounds.MAX_TRAIN_STEPS).steps == 10**6
    with pytest.raises(InputError, match=r"steps must be an integer in \[1, 1,000,000\]"):
        TrainConfig(recipe="fp32", steps=10**12)
    with pytest.raises(InputError, match="seed must be an integer in"):
        TrainConfig(recipe="fp32", seed=-1)


# ---- sizes from config.json and the API keep the flags' bounds ------------------------------

def test_model_sizes_from_any_door_keep_the_flag_bounds(tmp_path):
    from accelsim.errors import ConfigError
    from accelsim.workload.gpt import GptConfig
    from accelsim.workload.hf_config import load_hf_config
    from accelsim.workload.transformer import TransformerConfig

    with pytest.raises(InputError, match=r"TransformerConfig.hidden must be an integer in \[1, "):
        TransformerConfig(name="t", layers=2, hidden=2**40, heads=1, vocab=100, seq=16)
    with pytest.raises(InputError, match=r"GptConfig.layers must be an integer in \[1, 10,000\]"):
        GptConfig(layers=10**5, hidden=64, heads=1, seq=16, vocab=100)
    base = json.loads((Path(__file__).parent / "data" / "hf_configs" / "gpt2.json").read_text())
    for key, value, msg in (("n_embd", 2**40, "must be at most 2,147,483,647"),
                            ("n_layer", 10**9, "must be at most 10,000")):
        p = tmp_path / "config.json"
        p.write_text(json.dumps({**base, key: value}))
        with pytest.raises(ConfigError, match=msg) as err:
            load_hf_config(p)
        assert err.value.key == key and err.value.value == value


# ---- BlockFormat validates its block shape and scale kind -----------------------------------

@pytest.mark.parametrize("kw, match", [
    (dict(block=(0, 32)), r"block rows must be an integer in \[1, "),
    (dict(block=(1, 32, 1)), r"block must be a \(rows, cols\) tuple"),
    (dict(block=[1, 32]), r"block must be a \(rows, cols\) tuple"),
    (dict(scale="e8m0"), "scale must be a ScaleKind"),
    (dict(scale_roundings=("rne",)), r"scale_roundings must be a non-empty tuple of floor, ceil"),
    (dict(scale_roundings=()), "scale_roundings must be a non-empty tuple"),
    (dict(element="e9m9"), "element"),
])
def test_block_format_validates_itself(kw, match):
    from accelsim.numerics.block import BLOCK_FORMATS, BlockFormat

    mx = BLOCK_FORMATS["mxfp8-e4m3"]
    fields = {f.name: getattr(mx, f.name) for f in dataclasses.fields(BlockFormat)}
    with pytest.raises(InputError, match=match):
        BlockFormat(**{**fields, **kw})


def test_block_format_scale_rules_follow_what_the_quantizer_implements():
    from accelsim.numerics.block import BLOCK_FORMATS, BlockFormat, ScaleKind

    nv, ds = BLOCK_FORMATS["nvfp4"], BLOCK_FORMATS["dsv3-fp8-act"]
    with pytest.raises(InputError, match="defined for e2m1 elements"):
        dataclasses.replace(nv, name="nv-e4m3", element="e4m3fn")
    with pytest.raises(InputError, match=r"tuple of rne \(the FP32 scale's\)"):
        dataclasses.replace(ds, scale_roundings=("rz",))  # the FP32 path never read it
    assert all(isinstance(b, BlockFormat) and b.scale in ScaleKind for b in BLOCK_FORMATS.values())


# ---- knobs that cannot change the answer are refused ----------------------------------------

def test_link_knobs_on_a_system_without_those_links_are_refused():
    from accelsim.arch import Unbuildable
    from accelsim.netsim import gradient_reduction_times
    from accelsim.netsim.topology import resolve

    with pytest.raises(Unbuildable, match="h100-sxm is one chip: no off-chip link"):
        build_system("h100-sxm", chip_GBps=100)
    with pytest.raises(Unbuildable, match="dgx-h100 is one board of 8 chip"):
        build_system("dgx-h100", inter_board_GBps=10)
    with pytest.raises(InputError, match="one chip: no gradient reduction to compress"):
        gradient_reduction_times(H100, 10**6, "fp16", compression=4.0)
    with pytest.raises(InputError, match="'ring' has no board-to-board links"):
        resolve("ring", 8, bandwidth_Bps=1e10, inter_board_Bps=1e9)
    # where the links exist, the knob changes the answer
    slow = build_system("hfp8-64chip", link_GBps=4, inter_board_GBps=0.5)
    assert gradient_reduction_times(slow, 10**7, "fp16").total_s > \
        gradient_reduction_times(build_system("hfp8-64chip", link_GBps=4), 10**7, "fp16").total_s
