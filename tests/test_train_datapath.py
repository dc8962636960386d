"""The datapath contract: every tensor entering a GEMM is representable in its format
(decode(encode(x)) == x, accelsim.numerics' codec), each GEMM runs on the recipe's engine with
the recipe's operand formats, and a run is bit-for-bit reproducible from its seed."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.arith import get_engine
from accelsim.train import (RECIPE_NAMES, Trainer, TrainConfig, build_model, get_recipe, load_dataset,
                            train)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", np.random.default_rng(0))


@pytest.fixture(scope="module")
def seq():
    return load_dataset("seq", np.random.default_rng(0))


def _one_step(recipe_name, model_name, data):
    recipe = get_recipe(recipe_name)
    model = build_model(model_name, data, np.random.default_rng(1))
    tr = Trainer(model, recipe, 0.05, np.random.default_rng(2), check=True)
    tr.step(data.x_train[:8], data.y_train[:8])
    return recipe, tr.dp.records


@pytest.mark.parametrize("model_name", ["mlp", "cnn", "transformer"])
@pytest.mark.parametrize("recipe_name", RECIPE_NAMES)
def test_every_gemm_operand_is_in_the_recipes_format_and_engine(recipe_name, model_name, digits):
    if recipe_name == "int4-fp4" and model_name == "transformer":
        with pytest.raises(ValueError, match="PACT quantizes non-negative"):
            _one_step(recipe_name, model_name, digits)
        return
    recipe, records = _one_step(recipe_name, model_name, digits)
    assert {r.kind for r in records} == {"fwd", "bwd", "wgrad"}
    for r in records:
        prec = recipe.precision(r.tag)
        assert r.a_representable and r.b_representable, r
        if prec.scaling == "s2fp8":  # the squeezed FP8 tensor is expanded to FP32 for the GEMM
            want_a = want_b = "fp32"
        else:
            want_a, want_b = prec.format(r.a_role), prec.format(r.b_role)
        assert (r.a_format, r.b_format) == (want_a, want_b), r
        assert r.engine == get_engine(prec.engine, **dict(prec.engine_overrides), a_format=want_a,
                                      b_format=want_b), r


def test_roles_of_the_three_gemms(digits):
    _, records = _one_step("hfp8", "mlp", digits)
    roles = {(r.kind, r.a_role, r.b_role) for r in records}
    assert roles == {("fwd", "act", "weight"), ("bwd", "grad", "weight"), ("wgrad", "act", "grad")}
    # mlp: 3 Linear layers -> 3 fwd, 3 wgrad, 2 bwd (the first layer's input gradient is unused)
    kinds = [r.kind for r in records]
    assert (kinds.count("fwd"), kinds.count("wgrad"), kinds.count("bwd")) == (3, 3, 2)
    # HFP8 app. B: first and last layer in DLFloat16, the middle one in 1-4-3 / 1-5-2
    by_tag = {(r.tag, r.kind): (r.a_format, r.b_format) for r in records}
    assert by_tag[("body", "fwd")] == ("hfp8-143", "hfp8-143")
    assert by_tag[("body", "bwd")] == ("hfp8-152", "hfp8-143")
    assert by_tag[("body", "wgrad")] == ("hfp8-143", "hfp8-152")
    assert by_tag[("first", "fwd")] == ("dlfloat16", "dlfloat16")
    assert by_tag[("last", "wgrad")] == ("dlfloat16", "dlfloat16")


def test_hfp8_round_off_update_keeps_weights_in_143(digits):
    recipe = get_recipe("hfp8")
    model = build_model("mlp", digits, np.random.default_rng(1))
    tr = Trainer(model, recipe, 0.05, np.random.default_rng(2))
    for i in range(3):
        tr.step(digits.x_train[8 * i:8 * i + 8], digits.y_train[8 * i:8 * i + 8])
    from accelsim.numerics import quantize
    from accelsim.train.layers import parameters

    for (layer, name), st in zip(parameters(model), tr.opt.state):
        w = layer.params[name]
        fmt = recipe.precision(layer.tag).weight if name == "W" else "fp32"
        np.testing.assert_array_equal(quantize(w, fmt), w)
        if name == "W":
            r = st["residual"]
            np.testing.assert_array_equal(quantize(r, "dlfloat16"), r)


def test_same_seed_same_bits_other_seed_differs():
    cfg = TrainConfig("hfp8", "mlp", "digits", steps=12, seed=7, eval_every=6)
    a = train(cfg, np.random.default_rng(7))
    b = train(cfg, np.random.default_rng(7))
    assert a.summary == b.summary
    assert a.history.equals(b.history)
    c = train(TrainConfig("hfp8", "mlp", "digits", steps=12, seed=8), np.random.default_rng(8))
    assert c.summary["final_train_loss"] != a.summary["final_train_loss"]


def test_stratified_split_is_fixed_by_seed(digits):
    again = load_dataset("digits", np.random.default_rng(0))
    np.testing.assert_array_equal(again.y_test, digits.y_test)
    assert len(digits.y_test) + len(digits.y_train) == 1797
    counts = np.bincount(digits.y_test, minlength=10)
    full = np.bincount(np.concatenate([digits.y_test, digits.y_train]), minlength=10)
    assert np.all(np.abs(counts - 0.2 * full) <= 0.5)


def test_bad_inputs_are_clear_errors(digits, seq):
    with pytest.raises(ValueError, match="unknown recipe 'fp9'"):
        get_recipe("fp9")
    with pytest.raises(ValueError, match="unknown model"):
        build_model("rnn", digits, np.random.default_rng(0))
    with pytest.raises(ValueError, match="needs an image dataset"):
        build_model("cnn", seq, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"steps must be an integer in \[1, 1,000,000\], got 0"):
        TrainConfig("fp32", steps=0)
    with pytest.raises(ValueError, match="act='fp7'"):
        get_recipe("fp32", body=__import__("accelsim.train", fromlist=["Precision"]).Precision(
            "fp7", "fp32", "fp32", "fp32-fma"))


@pytest.mark.parametrize("recipe_name", ["hfp8", "bf16-amp", "fp32"])
def test_batched_attention_gemm_has_the_bits_of_per_sample_matmuls(recipe_name):
    from accelsim.train import Datapath

    dp = Datapath(get_recipe(recipe_name), np.random.default_rng(0))
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 8, 70)), rng.standard_normal((5, 70, 6))  # K > one HFP8 chunk
    out = dp.gemm("bwd", a, "grad", b, "act", "body")
    ref = np.stack([dp.gemm("bwd", a[i], "grad", b[i], "act", "body") for i in range(5)])
    np.testing.assert_array_equal(out, ref)


def test_hfp8_gradient_overflow_is_an_inf_event_that_skips_and_halves(digits):
    # 1-5-2 tops out at 57344: a 2^30 loss scale overflows the activation gradients
    recipe = get_recipe("hfp8", init_loss_scale=2.0**30)
    model = build_model("mlp", digits, np.random.default_rng(1))
    tr = Trainer(model, recipe, 0.05, np.random.default_rng(2))
    from accelsim.train.layers import parameters

    before = [layer.params[k].copy() for layer, k in parameters(model)]
    tr.step(digits.x_train[:16], digits.y_train[:16])
    assert tr.dp.inf_events > 0 and tr.skipped == 1 and tr.loss_scale == 2.0**29
    for (layer, k), b in zip(parameters(model), before):  # a skipped step leaves the weights
        np.testing.assert_array_equal(layer.params[k], b)
    for i in range(1, 40):
        tr.step(digits.x_train[16 * i:16 * i + 16], digits.y_train[16 * i:16 * i + 16])
        if tr.skipped < i + 1:
            break
    assert tr.skipped < 40 and tr.loss_scale < 2.0**29  # it backs off until a step is clean


def test_stochastic_rounding_draws_from_the_passed_generator(digits):
    import dataclasses

    base = get_recipe("hfp8")
    recipe = dataclasses.replace(base, name="hfp8-sr", body=dataclasses.replace(base.body, grad_rounding="sr"))

    def run(seed):
        model = build_model("mlp", digits, np.random.default_rng(1))
        tr = Trainer(model, recipe, 0.05, np.random.default_rng(seed))
        for i in range(3):
            tr.step(digits.x_train[16 * i:16 * i + 16], digits.y_train[16 * i:16 * i + 16])
        return model.layers[3].params["W"].copy()  # the body (FP8) layer

    np.testing.assert_array_equal(run(5), run(5))
    assert not np.array_equal(run(5), run(6))


def test_amp_loss_scale_doubles_after_a_clean_window(digits):
    recipe = get_recipe("fp16-amp", scale_window=3, init_loss_scale=2.0**4)
    tr = Trainer(build_model("mlp", digits, np.random.default_rng(1)), recipe, 0.05, np.random.default_rng(2))
    scales = []
    for i in range(7):
        tr.step(digits.x_train[8 * i:8 * i + 8], digits.y_train[8 * i:8 * i + 8])
        scales.append(tr.loss_scale)
    assert scales == [16, 16, 32, 32, 32, 64, 64] and tr.skipped == 0


def test_data_parallel_workers_reduce_to_the_full_batch_gradient(digits):
    # equal shards: the mean of the workers' shard-mean gradients is the full-batch gradient
    from accelsim.train.layers import parameters

    grads = {}
    for workers in (1, 4):
        recipe = get_recipe("fp32", workers=workers)
        model = build_model("mlp", digits, np.random.default_rng(1))
        tr = Trainer(model, recipe, 0.05, np.random.default_rng(2), reference=True)
        tr.step(digits.x_train[:32], digits.y_train[:32])
        grads[workers] = [layer.grads[k] for layer, k in parameters(model)]
    for g1, g4 in zip(grads[1], grads[4]):
        np.testing.assert_allclose(g4, g1, rtol=1e-12, atol=1e-15)


def test_fp8lm_all_reduce_quantizes_the_weight_gradients(digits):
    # same workers, same per-worker gradients; only the all-reduce differs (FP32 mean vs E4M3
    # auto-scaled tree): different bits, within 3 E4M3 roundings (cast + 2 tree levels for N=4,
    # each <= 2^-4 relative) normwise
    from accelsim.train.layers import parameters

    out = {}
    for allreduce in ("fp32", "auto"):
        recipe = get_recipe("fp8-lm", allreduce=allreduce)
        model = build_model("mlp", digits, np.random.default_rng(1))
        tr = Trainer(model, recipe, 3e-3, np.random.default_rng(2))
        tr.step(digits.x_train[:32], digits.y_train[:32])
        out[allreduce] = [layer.grads[k] for layer, k in parameters(model) if k == "W"]
    for g32, g8 in zip(out["fp32"], out["auto"]):
        assert not np.array_equal(g8, g32)
        assert np.linalg.norm(g8 - g32) <= 3 * 2.0**-4 * np.linalg.norm(g32)
