"""Whole-model PTQ (accelsim.train.ptq_model, ``accelsim ptq``): the direct cast is the cast of
both operands, Algorithm 1's scales are calibrated per Linear GEMM site, SmoothQuant moves the
scale into the weights without changing the float64 product, and the command's table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from accelsim.cli import main
from accelsim.numerics import quantize
from accelsim.train.ptq_model import PTQDatapath, smoothing


def test_direct_cast_is_both_operands_cast():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
    got = PTQDatapath("direct").gemm("fwd", a, "act", b, "weight", "body", "site")
    assert np.array_equal(got, quantize(a, "hif8", None, saturate=True) @ quantize(b, "hif8", None, saturate=True))


def test_pts_calibrates_each_site_once_and_reuses_it():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((16, 8)) * 40.0, rng.standard_normal((8, 4)) * 1e-3
    dp = PTQDatapath("pts")
    dp.calibrating = True
    y_cal = dp.gemm("fwd", a, "act", b, "weight", "body", "s1")
    dp.calibrating = False
    assert "s1" in dp.sites
    assert np.array_equal(dp.gemm("fwd", a, "act", b, "weight", "body", "s1"), y_cal)
    ref = a @ b
    direct = PTQDatapath("direct").gemm("fwd", a, "act", b, "weight", "body", "s1")
    assert np.mean((y_cal - ref) ** 2) <= np.mean((direct - ref) ** 2)  # (0, 0) is in the search


def test_smoothquant_factors_keep_the_product():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((10, 6)) * np.array([1, 50, 1, 1, 0.01, 1]), rng.standard_normal((6, 3))
    s = smoothing(x, w, 0.5)
    np.testing.assert_allclose((x / s) @ (w * s[:, None]), x @ w, rtol=1e-12)
    assert np.allclose(np.abs(x / s).max(axis=0), np.abs(w * s[:, None]).max(axis=1))  # alpha 0.5: balanced


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="PTQ method"):
        PTQDatapath("awq")


def test_ptq_command_table(capsys):
    assert main(["ptq", "--model", "mlp", "--dataset", "digits", "--steps", "30", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in rows] == ["fp32", "direct", "pts", "smoothquant"]
    assert rows[0]["val_loss_delta"] == 0.0
    assert all(np.isfinite(r["val_loss"]) and 0 <= r["test_accuracy"] <= 1 for r in rows)


def test_ptq_with_batchnorm_adds_retuned_rows(capsys):
    """HFP8 app. C: with BatchNorm each datapath is also measured with its BN statistics
    re-tuned on the quantized network; the preserved statistics are restored in between."""
    assert main(["ptq", "--model", "cnn", "--dataset", "digits", "--steps", "4", "--format", "hfp8-143",
                 "--json"]) == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(rows) == ["fp32", "fp32+bn-retune", "direct", "direct+bn-retune", "pts", "pts+bn-retune",
                          "smoothquant", "smoothquant+bn-retune"]
    assert rows["direct"]["format"] == "hfp8-143" and rows["fp32+bn-retune"]["format"] == "fp32"
