"""The transformer model description (accelsim.workload.transformer): exact parameter counts
against published totals, the GPT presets against their one owner (accelsim.workload.gpt),
per-op FLOPs against closed forms written out here, and the structural rules (MoE layers,
KV cache, sliding windows)."""

from __future__ import annotations

import pytest

from accelsim.workload.gpt import PRESETS as GPT_PRESETS
from accelsim.workload.gpt import GptConfig
from accelsim.workload.transformer import (PRESETS, Mla, MlpKind, Moe, NormKind, OpKind,
                                           PositionKind, TransformerConfig)

# Published totals (PyTorch numel of the HF checkpoints / model cards):
#   gpt2 124,439,808 (openai-community/gpt2); Llama-3-8B 8,030,261,248 and 70B 70,553,706,496
#   (meta-llama model cards / safetensors index); Mixtral-8x7B 46,702,792,704 total and
#   12,879,925,248 active (issue 24; Mixtral paper: 46.7B / 12.9B).
#   DeepSeek-V3 671,026,419,200: the HF count of the main model (61 layers, embedding and head,
#   the routers' e_score_correction_bias) without the MTP module (V3 report: "671B total").
PUBLISHED = {
    "gpt2-small": (124_439_808, 124_439_808),
    "llama3-8b": (8_030_261_248, 8_030_261_248),
    "llama3-70b": (70_553_706_496, 70_553_706_496),
    "mixtral-8x7b": (46_702_792_704, 12_879_925_248),
    "deepseek-v3": (671_026_419_200, 37_552_297_472),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_parameter_counts_are_exact(name):
    total, active = PUBLISHED[name]
    cfg = PRESETS[name]
    assert cfg.n_params == total
    assert cfg.n_active_params == active
    assert sum(op.params for op in cfg.ops()) == total


def test_deepseek_v3_matches_the_published_rounded_numbers():
    cfg = PRESETS["deepseek-v3"]
    # V3 report, abstract: 671B total, 37B activated per token; DeepSeek's weight README
    # counts the activated 36.6B without the input embedding (lookup) but with the 0.9B head
    embed = cfg.vocab * cfg.hidden
    assert round(cfg.n_params / 1e9) == 671
    assert round((cfg.n_active_params - embed) / 1e8) == 366
    # MTP module: 11.5B unique parameters in DeepSeek's README (one MoE layer 11.51B + the
    # 2h x h projection + three norms here); HF's "685B" checkpoint also stores the MTP's own
    # copies of embedding and head: 671.03 + 11.61 + 2 x 0.93 = 684.5B
    assert cfg.mtp_params == 11_610_068_224
    assert round(sum(cfg.layer_params(3).values()) / 1e8) == 115
    assert round((cfg.n_params + cfg.mtp_params + 2 * embed) / 1e9, 1) == 684.5


def test_gpt_presets_come_from_workload_gpt():
    for name in ("gpt2-small", "gpt3-175b"):
        g = GPT_PRESETS[name]
        t = PRESETS[name]
        assert t == TransformerConfig.from_gpt(g)
        assert t.n_params == g.n_params
        assert t.as_gpt() == g
        assert (t.hidden_dropout, t.attention_dropout) == (0.1, 0.1)  # Megatron's, GPT-2's
    no_drop = GptConfig(layers=2, hidden=64, heads=4, seq=16, vocab=100, hidden_dropout=0.0)
    assert TransformerConfig.from_gpt(no_drop).as_gpt() == no_drop
    with pytest.raises(ValueError, match="GptConfig.hidden_dropout must be a dropout"):
        GptConfig(layers=2, hidden=64, heads=4, seq=16, vocab=100, hidden_dropout=1)


@pytest.mark.parametrize("flash", [False, True])
@pytest.mark.parametrize("name", ["gpt2-small", "gpt3-175b"])
def test_model_flops_equal_the_gpt_owner(name, flash):
    g = GptConfig(**{**GPT_PRESETS[name].__dict__, "flash_attention": flash})
    t = TransformerConfig.from_gpt(g)
    # a flash kernel skips the masked half; a score-matrix kernel computes all s^2 scores
    assert t.model_flops(4, g.seq, causal=flash) == g.model_flops(4)


def test_as_gpt_names_what_a_gpt_cannot_express():
    with pytest.raises(ValueError, match="kv_heads"):
        PRESETS["llama3-8b"].as_gpt()
    with pytest.raises(ValueError, match=r"head_dim = 192 \(GPT: 56\)"):
        PRESETS["deepseek-v3"].as_gpt()
    moe = TransformerConfig.from_gpt(GPT_PRESETS["gpt2-small"])
    moe = TransformerConfig(**{**moe.__dict__, "moe": Moe(n_experts=4, top_k=1,
                                                          expert_ffn_size=8)})
    with pytest.raises(ValueError, match="moe = Moe"):
        moe.as_gpt()


def test_llama3_8b_layer_breakdown():
    cfg = PRESETS["llama3-8b"]
    h, kv, d, f = 4096, 8, 128, 14336
    assert cfg.layer_params(0) == {"attn_norm": h, "attn": 2 * h * h + 2 * h * kv * d,
                                   "mlp_norm": h, "mlp": 3 * h * f}
    assert cfg.kv_heads == 8 and cfg.head_dim == 128
    # the "6N" identity: an untied bias-free dense model's linear FLOPs per token are 2 x its
    # parameters outside the embedding lookup and the norms
    norms = (2 * cfg.layers + 1) * h
    assert cfg.linear_flops_per_token == 2 * (cfg.n_params - cfg.vocab * h - norms)
    # Q.K^T and P.V: 2 x 2 x heads x head_dim FLOPs per attended key per layer
    assert cfg.attention_flops_per_key == 32 * 4 * 32 * 128
    assert cfg.flops_per_token(100) == cfg.linear_flops_per_token + 100 * 4 * 32 * 32 * 128


def test_mixtral_moe_structure_and_active_flops():
    cfg = PRESETS["mixtral-8x7b"]
    assert cfg.n_moe_layers == 32
    parts = cfg.layer_params(5)
    assert parts["router"] == 4096 * 8
    assert parts["experts"] == 8 * 3 * 4096 * 14336
    assert "mlp" not in parts and "shared_experts" not in parts
    norms = (2 * cfg.layers + 1) * 4096
    # per token: top-2 experts, the router, attention projections and the LM head
    assert cfg.linear_flops_per_token == 2 * (cfg.n_active_params - 32000 * 4096 - norms)


def test_deepseek_v3_layers_and_mla():
    cfg = PRESETS["deepseek-v3"]
    assert [cfg.is_moe_layer(i) for i in range(5)] == [False, False, False, True, True]
    assert cfg.n_moe_layers == 58
    dense, moe = cfg.layer_params(0), cfg.layer_params(3)
    assert dense["mlp"] == 3 * 7168 * 18432
    assert moe["router"] == 7168 * 256 + 256      # gate weight + e_score_correction_bias
    assert moe["experts"] == 256 * 3 * 7168 * 2048
    assert moe["shared_experts"] == 3 * 7168 * 2048
    # MLA projections (V2 paper section 2.1): W_DQ, q norm, W_UQ (+ W_QR), W_DKV (+ W_KR),
    # kv norm, W_UK and W_UV, W_O
    attn = (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * (512 + 64) + 512
            + 512 * 128 * (128 + 128) + 128 * 128 * 7168)
    assert dense["attn"] == moe["attn"] == attn
    ops = {op.name.split(".", 2)[2]: op for op in cfg.layer_ops(3)}
    assert ops["attn.scores"].flops(10) == 2 * 128 * 192 * 10
    assert ops["attn.values"].flops(10) == 2 * 128 * 128 * 10
    assert ops["experts.up"].flops() == 2 * 7168 * 2048 * 8
    assert ops["experts.up"].active_params == 8 * 7168 * 2048
    # the compressed cache: latent + decoupled rotary key per layer
    assert cfg.kv_cache_elements_per_token == 61 * (512 + 64)


def test_kv_cache_and_sliding_window():
    llama = PRESETS["llama3-8b"]
    assert llama.kv_cache_elements_per_token == 32 * 2 * 8 * 128   # 128 KiB/token in bf16
    assert llama.kv_cache_elements(1000) == 1000 * 65536
    win = TransformerConfig(name="w", layers=1, hidden=64, heads=4, vocab=10, seq=64,
                            sliding_window=3)
    assert win.attended_keys(5) == 1 + 2 + 3 + 3 + 3
    assert win.attended_keys(5, causal=False) == 5 * 3
    assert win.attended_keys(2) == 1 + 2
    assert win.kv_cache_elements(10) == 3 * win.kv_cache_elements_per_token
    assert llama.attended_keys(8) == 36 and llama.attended_keys(8, causal=False) == 64


def test_ops_are_in_forward_order_and_tied_head_has_no_parameters():
    cfg = PRESETS["gpt2-small"]
    names = [op.name for op in cfg.ops()]
    assert names[:3] == ["embed.tokens", "embed.positions", "embed.add"]
    assert names[-2:] == ["head.final_norm", "head.lm_head"]
    head = cfg.ops()[-1]
    assert head.tied and head.params == 0 and head.flops() == 2 * 768 * 50257
    layer = [op.name.split(".", 2)[2] for op in cfg.layer_ops(0)]
    assert layer == ["attn_norm.norm", "attn.q", "attn.k", "attn.v", "attn.scores",
                     "attn.softmax", "attn.values", "attn.o", "attn_residual.add",
                     "mlp_norm.norm", "mlp.up", "mlp.act", "mlp.down", "mlp_residual.add"]
    assert cfg.layer_ops(0)[1].kind is OpKind.LINEAR and cfg.layer_ops(0)[1].bias
    softmax = cfg.layer_ops(0)[5]
    assert softmax.elements(7) == 12 * 7


def test_element_wise_widths():
    cfg = PRESETS["llama3-8b"]
    ops = {op.name.split(".", 2)[2]: op for op in cfg.layer_ops(0)}
    assert ops["mlp.act"].kind is OpKind.SWIGLU and ops["mlp.act"].elements() == 14336
    assert ops["attn.rotary"].elements() == 128 * (32 + 8)
    assert ops["attn_norm.norm"].kind is OpKind.RMSNORM and ops["attn_norm.norm"].params == 4096
    moe = {op.name.split(".", 2)[2]: op for op in PRESETS["mixtral-8x7b"].layer_ops(0)}
    assert moe["experts.act"].elements() == 2 * 14336      # top-2 experts per token


def test_expert_capacity():
    moe = Moe(n_experts=8, top_k=2, expert_ffn_size=16, capacity_factor=1.25)
    assert moe.expert_capacity(4096) == 1280
    assert moe.expert_capacity(3) == 1                      # ceil(0.9375)
    assert Moe(n_experts=8, top_k=2, expert_ffn_size=16).expert_capacity(4096) is None


def test_enums_resolved_at_construction():
    cfg = TransformerConfig(name="t", layers=2, hidden=64, heads=4, vocab=100, seq=16,
                            mlp="swiglu", norm="rmsnorm", positions="none")
    assert cfg.mlp is MlpKind.SWIGLU and cfg.norm is NormKind.RMSNORM
    assert cfg.positions is PositionKind.NONE
    assert cfg.ffn_size == 256 and cfg.kv_heads == 4 and cfg.head_dim == 16
    # no position table, no rotary op
    assert [op.name for op in cfg.embedding_ops()] == ["embed.tokens"]
    assert not any(op.kind is OpKind.ROTARY for op in cfg.ops())


@pytest.mark.parametrize("kwargs, match", [
    (dict(heads=4, kv_heads=3), "not a multiple of kv_heads"),
    (dict(heads=3), "give head_dim"),
    (dict(mlp="relu"), "mlp must be one of gelu, swiglu, geglu"),
    (dict(layers=0), r"layers must be an integer in \[1, 10,000\], got 0"),
    # the bounds of the --layers / --hidden flags and of config.json files (accelsim.bounds)
    (dict(layers=10_001), r"layers must be an integer in \[1, 10,000\], got 10001"),
    (dict(hidden=2**31, heads=1), r"hidden must be an integer in \[1, 2,147,483,647\]"),
    (dict(tied_embeddings=1), "tied_embeddings must be true or false"),
    (dict(rotary_fraction=0), "rotary_fraction"),
    (dict(moe=Moe(n_experts=4, top_k=1, expert_ffn_size=8), mtp_layers=-1), "mtp_layers"),
    (dict(mtp_layers=1), "mtp_layers needs a MoE model"),
    (dict(hidden_dropout=1.0), r"hidden_dropout must be a dropout probability in \[0, 1\)"),
    (dict(attention_dropout=-0.1), "attention_dropout must be a dropout probability"),
    (dict(attention_dropout=True), "attention_dropout must be a dropout probability"),
])
def test_bad_configs_are_refused(kwargs, match):
    base = dict(name="t", layers=2, hidden=64, heads=4, vocab=100, seq=16)
    with pytest.raises(ValueError, match=match):
        TransformerConfig(**{**base, **kwargs})


@pytest.mark.parametrize("kwargs, match", [
    (dict(top_k=9), "top_k 9 > n_experts 8"),
    (dict(capacity_factor=0.0), "capacity_factor"),
    (dict(layer_freq=0), "layer_freq"),
])
def test_bad_moe_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Moe(**{**dict(n_experts=8, top_k=2, expert_ffn_size=16), **kwargs})


def test_mla_without_query_compression():
    cfg = TransformerConfig(name="m", layers=1, hidden=64, heads=2, vocab=10, seq=8,
                            mla=Mla(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
                                    v_head_dim=8))
    names = [op.name.split(".", 2)[2] for op in cfg.layer_ops(0)
             if op.kind is OpKind.LINEAR]
    assert names == ["attn.q", "attn.kv_a", "attn.kv_b", "attn.o", "mlp.up", "mlp.down"]
    assert cfg.layer_params(0)["attn"] == (64 * 2 * 12 + 64 * 20 + 2 * 16
                                           + 16 * 2 * 16 + 2 * 8 * 64)
