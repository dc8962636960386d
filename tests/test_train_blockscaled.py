"""Block-scaled training recipes (issue 25 item 3): mxfp8, mxfp4, nvfp4, deepseek-fp8.

* the block quantization inside the datapath equals ``block_quantize``'s dequantized values,
  read out through a GEMM with an identity operand (each output sums one nonzero product, so the
  float32 BLAS / FP32 engine sums are exact) and, for NVFP4's 16x16 weight tiles, against tiles
  quantized through the 1-D path (a tile flattened into one 256-element block);
* stochastic rounding is reproducible from a seeded Generator and follows it;
* the random Hadamard transform is orthogonal (the wgrad GEMM's product is unchanged in exact
  arithmetic);
* the smoke test of the issue: 600 steps of mlp on digits within 3 pp of fp32 (blas level).
"""

from __future__ import annotations

import dataclasses
import json

import ml_dtypes
import numpy as np
import pytest

from accelsim.cli import main
from accelsim.numerics import block_quantize, get_block_format
from accelsim.train.datapath import Datapath, GemmLevel
from accelsim.train.recipes import Precision, get_recipe

BLOCK_RECIPES = ("mxfp8", "mxfp4", "nvfp4", "deepseek-fp8")


def _data(rng, shape):
    # magnitudes over ~12 binades, so blocks get different scales
    return rng.standard_normal(shape) * np.exp2(rng.integers(-6, 6, size=shape))


@pytest.mark.parametrize("level", [GemmLevel.BLAS, GemmLevel.ENGINE])
@pytest.mark.parametrize("recipe", ["mxfp8", "mxfp4"])
def test_operands_are_block_quantize_along_k(recipe, level):
    # A (act) blocked along its rows' K: A_q @ I; B (weight) blocked along K per column: I @ B_q
    rng = np.random.default_rng(1)
    dp = Datapath(get_recipe(recipe), np.random.default_rng(0), gemm=level)
    a, w = _data(rng, (8, 96)), _data(rng, (96, 40))
    fa, fw = get_recipe(recipe).body.act, get_recipe(recipe).body.weight
    got_a = dp.gemm("fwd", a, "act", np.eye(96), "weight", "body")
    want_a = block_quantize(a, fa, axis=1).dequantize()
    np.testing.assert_array_equal(got_a, want_a)
    got_w = dp.gemm("fwd", np.eye(96), "act", w, "weight", "body")
    want_w = block_quantize(w.T.copy(), fw, axis=-1).dequantize().T  # columns as rows: another layout
    np.testing.assert_array_equal(got_w, want_w)
    assert not np.array_equal(want_a, a)  # the formats did round


def test_deepseek_tiles():
    rng = np.random.default_rng(2)
    dp = Datapath(get_recipe("deepseek-fp8"), np.random.default_rng(0), gemm=GemmLevel.BLAS)
    a, w = _data(rng, (4, 256)), _data(rng, (256, 200))
    got = dp.gemm("fwd", a, "act", np.eye(256), "weight", "body")
    tiles = [block_quantize(a[:, k:k + 128], "dsv3-fp8-act", axis=-1).dequantize() for k in (0, 128)]
    np.testing.assert_array_equal(got, np.hstack(tiles).astype(np.float32))
    # 128 x 128 weight blocks, oracle from the report's definition with ml_dtypes' E4M3 cast:
    # scale = fp32(amax / 448) per block, element = e4m3(x / scale), value = element * scale
    got_w = dp.gemm("fwd", np.eye(256), "act", w, "weight", "body")
    w32 = w.astype(np.float32).astype(np.float64)
    want = np.zeros_like(w)
    for i in (0, 128):
        for j in (0, 128):
            blk = w32[i:i + 128, j:j + 128]
            scale = float(np.float32(np.abs(blk).max() / 448.0))
            elem = (blk / scale).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
            want[i:i + 128, j:j + 128] = elem * scale
    np.testing.assert_array_equal(got_w, want.astype(np.float32))


def test_nvfp4_weight_tiles_are_16x16_and_shared_by_fwd_and_bwd():
    rng = np.random.default_rng(3)
    w = _data(rng, (48, 32))
    dp = Datapath(get_recipe("nvfp4"), np.random.default_rng(0), gemm=GemmLevel.BLAS)
    fwd = dp.gemm("fwd", np.eye(48), "act", w, "weight", "body")
    bwd = dp.gemm("bwd", np.eye(32), "grad", w.T, "weight", "body")  # identity: SR leaves it exact
    # oracle through the 1-D path: each 16x16 tile flattened to one 256-element NVFP4 block
    tiles = w.reshape(3, 16, 2, 16).transpose(0, 2, 1, 3).reshape(3, 2, 256)
    flat = dataclasses.replace(get_block_format("nvfp4"), name="nvfp4-1x256", block=(1, 256))
    deq = block_quantize(tiles, flat, axis=-1).dequantize()
    want = deq.reshape(3, 2, 16, 16).transpose(0, 2, 1, 3).reshape(48, 32).astype(np.float32)
    np.testing.assert_array_equal(fwd, want)
    np.testing.assert_array_equal(bwd, want.T)
    # the engine level sees the same weight (tile scales repeated over each tile's 1x16 blocks)
    eng = Datapath(get_recipe("nvfp4"), np.random.default_rng(0), gemm=GemmLevel.ENGINE)
    np.testing.assert_allclose(eng.gemm("fwd", np.eye(48), "act", w, "weight", "body"), want, rtol=2.0**-23)


@pytest.mark.parametrize("recipe", ["mxfp4", "nvfp4"])
def test_stochastic_rounding_follows_the_generator(recipe):
    rng = np.random.default_rng(4)
    g, x = _data(rng, (64, 32)), _data(rng, (64, 24))  # 64 tokens

    def run(seed):
        dp = Datapath(get_recipe(recipe), np.random.default_rng(seed), gemm=GemmLevel.BLAS)
        return dp.gemm("wgrad", x.T.copy(), "act", g, "grad", "body")

    np.testing.assert_array_equal(run(7), run(7))
    assert not np.array_equal(run(7), run(8))
    # bwd without a Hadamard transform (nvfp4): the gradient is rounded by exactly the
    # Generator's stream, as block_quantize(rounding="sr") draws it
    if recipe == "nvfp4":
        dp = Datapath(get_recipe(recipe), np.random.default_rng(11), gemm=GemmLevel.BLAS)
        got = dp.gemm("bwd", g, "grad", np.eye(32), "weight", "body")
        want = block_quantize(g, "nvfp4", axis=-1, rounding="sr", rng=np.random.default_rng(11)).dequantize()
        np.testing.assert_array_equal(got, want.astype(np.float32))
        rne = block_quantize(g, "nvfp4", axis=-1).dequantize()
        assert not np.array_equal(want, rne)


def test_sr_is_unbiased_on_average():
    # SR's expectation is the input: the mean over many draws approaches x, RNE's error does not
    rng = np.random.default_rng(5)
    g = _data(rng, (4, 32))
    dp = Datapath(get_recipe("nvfp4"), np.random.default_rng(0), gemm=GemmLevel.BLAS)
    mean = np.mean([dp.gemm("bwd", g, "grad", np.eye(32), "weight", "body") for _ in range(400)], axis=0)
    rne = block_quantize(g, "nvfp4", axis=-1).dequantize()
    scale = np.abs(g).max(axis=1, keepdims=True)
    assert np.abs(mean - g).max() / scale.max() < 0.5 * np.abs(rne - g).max() / scale.max()


def test_hadamard_is_orthogonal_and_random():
    dp = Datapath(get_recipe("nvfp4"), np.random.default_rng(0))
    r1, r2 = dp.hadamard(16), dp.hadamard(16)
    np.testing.assert_allclose(r1 @ r1.T, np.eye(16), atol=1e-15)
    assert np.all(np.abs(r1) == 0.25) and not np.array_equal(r1, r2)


def test_engine_level_uses_the_block_engines():
    dp = Datapath(get_recipe("deepseek-fp8"), np.random.default_rng(0), check=True)
    rng = np.random.default_rng(6)
    x, w, g = rng.standard_normal((32, 64)), rng.standard_normal((64, 48)), rng.standard_normal((32, 48))
    dp.gemm("fwd", x, "act", w, "weight", "body")
    dp.gemm("bwd", g, "grad", w.T, "weight", "body")
    dp.gemm("wgrad", x.T, "act", g, "grad", "body")
    names = [(r.kind, r.engine.name) for r in dp.records]
    assert names == [("fwd", "dsv3-fp8"), ("bwd", "dsv3-fp8"), ("wgrad", "dsv3-fp8")]
    fmts = [(r.a_format, r.b_format, r.engine.b_format) for r in dp.records]
    assert fmts[2] == ("dsv3-fp8-act", "dsv3-fp8-act", "dsv3-fp8-act")  # 1x128 x 128x1 tiles
    assert fmts[0][1] == fmts[1][1] == "dsv3-fp8-weight"


def test_block_precision_validation():
    with pytest.raises(ValueError, match="engine"):
        Precision("mxfp8-e4m3", "mxfp8-e4m3", "mxfp8-e5m2", "fp32-fma")
    with pytest.raises(ValueError, match="block-scaled"):
        Precision("fp32", "fp32", "fp32", "fp32-fma", weight_tile=16)
    with pytest.raises(ValueError, match="power of two"):
        Precision("nvfp4", "nvfp4", "nvfp4", "b200-nvfp4", hadamard=12, hadamard_kinds=("wgrad",))


_FP32: list[float] = []


def _accuracy(recipe, capsys):
    # engine level (every GEMM on the block-scaled golden models; edge layers on h100-bf16):
    # ~3-5 s per 600-step run
    assert main(["train", "--recipe", recipe, "--model", "mlp", "--dataset", "digits", "--steps", "600",
                 "--seed", "0", "--gemm", "engine", "--json", "--no-progress"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])["test_accuracy"]


@pytest.mark.parametrize("recipe", BLOCK_RECIPES)
def test_recipes_train_within_3pp_of_fp32(recipe, capsys):
    if not _FP32:
        _FP32.append(_accuracy("fp32", capsys))
    assert _FP32[0] > 0.9
    assert _accuracy(recipe, capsys) >= _FP32[0] - 0.03
