"""GPT generator: exact parameter counts against published models, FLOPs against Narayanan et
al. SC'21 eq. (3), the TOML round trip through the strict loader, and the workload command."""

from __future__ import annotations

import tomllib

import pytest

from accelsim.cli import main
from accelsim.workload import load_workload, workload_from_dict
from accelsim.workload.gpt import (PRESETS, GptConfig, narayanan_flops, narayanan_params,
                                   workload_toml)

# Narayanan et al. SC'21 Table 1 (V = 51,200, s = 2048): layers, hidden, heads, params (B)
TABLE1 = [(24, 2304, 24, 1.7), (30, 3072, 32, 3.6), (36, 4096, 32, 7.5), (40, 6144, 48, 18.4),
          (48, 8192, 64, 39.1), (60, 10240, 80, 76.1), (80, 12288, 96, 145.6),
          (96, 16384, 128, 310.1), (105, 20480, 128, 529.6), (128, 25600, 160, 1008.0)]


def test_gpt2_small_exact_parameter_count():
    # HuggingFace gpt2: GPT2LMHeadModel.num_parameters() = 124,439,808 (tied lm_head)
    cfg = PRESETS["gpt2-small"]
    assert cfg.n_params == 124_439_808
    assert cfg.workload().n_params == 124_439_808
    untied = GptConfig(layers=12, hidden=768, heads=12, seq=1024, vocab=50257,
                       tied_embeddings=False)
    assert untied.n_params == 124_439_808 + 50257 * 768


def test_gpt3_175b_as_in_its_paper():
    # Brown et al. 2020 Table 2.1: 175.0B (rounded), L 96, d_model 12288, 96 heads, ctx 2048
    cfg = PRESETS["gpt3-175b"]
    l, h, V, s = 96, 12288, 50257, 2048
    assert cfg.n_params == l * (12 * h * h + 13 * h) + (V + s) * h + 2 * h
    assert abs(cfg.n_params / 175.0e9 - 1) < 0.005
    assert cfg.head_dim == 128


@pytest.mark.parametrize("layers,hidden,heads,billions", TABLE1)
def test_narayanan_table1_sizes(layers, hidden, heads, billions):
    cfg = GptConfig(layers=layers, hidden=hidden, heads=heads, seq=2048, vocab=51200)
    assert round(cfg.n_params / 1e9, 1) == billions
    # their closed form omits only the final LayerNorm (2h)
    assert cfg.n_params - 2 * hidden == pytest.approx(narayanan_params(layers, hidden, 2048,
                                                                       51200), rel=1e-12)


@pytest.mark.parametrize("layers,hidden,heads,billions", TABLE1[:4])
def test_flops_match_narayanan_eq3(layers, hidden, heads, billions):
    cfg = GptConfig(layers=layers, hidden=hidden, heads=heads, seq=2048, vocab=51200)
    B = 512
    head = 2 * B * 2048 * hidden * 51200  # the LM head is not recomputed
    recomputed = cfg.model_flops(B) + cfg.model_flops(B) / 3 - head
    assert recomputed == pytest.approx(narayanan_flops(B, layers, hidden, 2048, 51200), rel=1e-12)


def test_flash_causal_skips_the_masked_half():
    full = GptConfig(layers=2, hidden=64, heads=4, seq=128, vocab=100)
    flash = GptConfig(layers=2, hidden=64, heads=4, seq=128, vocab=100, flash_attention=True)
    bidir = GptConfig(layers=2, hidden=64, heads=4, seq=128, vocab=100, flash_attention=True,
                      causal=False)
    att = 3 * 2 * 2 * 4 * 2 * 128 * 128 * 16  # 3 passes x 2 FLOP x layers x heads x 2 matmuls
    assert full.model_flops(1) - flash.model_flops(1) == pytest.approx(att * (1 - 129 / 256))
    assert bidir.model_flops(1) == full.model_flops(1)
    # the layer list states the kernel choice on its one attention op (an SDPA node)
    sdpa = {g: {x.name: x for x in g.workload().layers}["h.0.attn.sdpa"]
            for g in (full, flash, bidir)}
    assert (sdpa[full].flash_attention, sdpa[full].causal) == (False, True)
    assert (sdpa[flash].flash_attention, sdpa[flash].causal) == (True, True)
    assert (sdpa[bidir].flash_attention, sdpa[bidir].causal) == (True, False)


def test_toml_round_trip_through_the_strict_loader():
    cfg = GptConfig(layers=3, hidden=96, heads=4, seq=32, vocab=500, ffn=200,
                    tied_embeddings=False, name="tiny-gpt")
    wl = workload_from_dict(tomllib.loads(workload_toml(cfg)), "gen.toml")
    assert wl.layers == cfg.workload().layers
    assert wl.n_params == cfg.n_params == wl.published_params


@pytest.mark.parametrize("kw,msg", [
    (dict(hidden=100, heads=3), "not a multiple of heads"),
    (dict(layers=0), r"layers must be an integer in \[1, 10,000\], got 0"),
    (dict(layers=10_001), r"GptConfig.layers must be an integer in \[1, 10,000\]"),
    (dict(positions=8), "positions 8 < seq"),
    (dict(ffn=-1), "ffn must be an integer >= 0"),
])
def test_bad_config_is_a_one_line_error(kw, msg):
    base = dict(layers=2, hidden=96, heads=4, seq=32, vocab=500)
    with pytest.raises(ValueError, match=msg):
        GptConfig(**{**base, **kw})


def test_workload_gpt_command(tmp_path, capsys):
    out = tmp_path / "g.toml"
    assert main(["workload", "gpt", "--preset", "gpt2-small", "--out", str(out)]) == 0
    assert load_workload(out).n_params == 124_439_808
    assert "124,439,808" in capsys.readouterr().out
    assert main(["workload", "gpt", "--layers", "2", "--hidden", "64", "--out",
                 str(tmp_path / "x.toml")]) == 2
    assert "--heads, --seq, --vocab required" in capsys.readouterr().err
    assert main(["workload", "gpt", "--layers", "2", "--hidden", "65", "--heads", "4", "--seq",
                 "8", "--vocab", "10", "--out", str(tmp_path / "y.toml")]) == 2
    err = capsys.readouterr().err
    assert "not a multiple of heads" in err and err.count("\n") == 1


def test_layer_list_flops_equal_the_closed_count():
    # two independent counts: the generic per-layer lowering of the explicit layer list and
    # GptConfig.model_flops (3 x forward GEMMs); the explicit list keeps full s x s matmuls
    cfg = PRESETS["gpt2-small"]
    per_phase = cfg.workload().flops(4)
    assert sum(per_phase.values()) == cfg.model_flops(4)
    assert per_phase["fwd"] == per_phase["bwd_data"] == per_phase["wgrad"]


def test_fp8lm_table5_tflops_use_narayanan_without_recomputation():
    # FP8-LM Table 5: TFLOPS x GPUs / (samples/s) = FLOPs per sample; every row (all schemes,
    # micro-batches) agrees with 72 s l h^2 (1 + s/6h + V/12lh) within 1.5 %, and its MFU is
    # TFLOPS over the dense peak of the scheme's GEMM precision (H100 SXM: bf16 989.4, fp8 1979)
    from accelsim.llm.published import FP8LM_SEQ, FP8LM_TABLE1, FP8LM_TABLE5, FP8LM_VOCAB
    from accelsim.workload.gpt import narayanan_model_flops

    for name, tp, pp, dp, b, scheme, _mem, sps, tflops, mfu, *_ in FP8LM_TABLE5:
        layers, hidden, *_ = FP8LM_TABLE1[name]
        per_sample = tflops * 1e12 * tp * pp * dp / sps
        formula = narayanan_model_flops(1, layers, hidden, FP8LM_SEQ, FP8LM_VOCAB)
        assert per_sample == pytest.approx(formula, rel=0.015), (name, scheme, b)
        peak = 989.4 if scheme == "bf16" else 1978.9
        assert 100 * tflops / peak == pytest.approx(mfu, abs=0.1), (name, scheme, b)
