"""Memory per GPU against published accounting: Korthikanti et al. 2022 (activations per layer,
Table 2; first pipeline stage, section 4.2.3), Rajbhandari et al. SC'20 (ZeRO model states,
Figure 1) and FP8-LM (16 -> 6 bytes per parameter)."""

from __future__ import annotations

import dataclasses

import pytest

from accelsim.arch.schemes import get_scheme
from accelsim.engine import ParamCounts, Plan, param_bytes
from accelsim.engine.memory import memory
from accelsim.engine.memory import activation_bytes_per_layer, in_flight_layers, model_state_bytes
from accelsim.workload.gpt import GptConfig


def adamw_formats(name):
    """The AdamW state formats of scheme ``name`` (what an LLM plan trains with)."""
    return get_scheme(name).formats("adamw")

BF16 = adamw_formats("bf16")
# Korthikanti et al. Table 3's 530B model (h 20480, a 128, s 2048, L 105)
M530 = GptConfig(layers=105, hidden=20480, heads=128, seq=2048, vocab=51200)


def _plan(t=8, p=1, b=1, **kw):
    return Plan(tp=t, pp=p, dp=1, micro_batch=b, global_batch=64 * b, **kw)


@pytest.mark.parametrize("t", [1, 2, 8])
@pytest.mark.parametrize("b", [1, 4])
def test_korthikanti_table2(t, b):
    s, h, a = 2048, 20480, 128
    sbh = s * b * h
    act = lambda **kw: activation_bytes_per_layer(M530, _plan(t=t, b=b, **kw), BF16)  # noqa: E731
    assert act() == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)), rel=1e-12)
    assert act(sequence_parallel=True) == pytest.approx(sbh / t * (34 + 5 * a * s / h), rel=1e-12)
    assert act(sequence_parallel=True, recompute="selective") == pytest.approx(34 * sbh / t,
                                                                              rel=1e-12)
    assert act(recompute="selective") == pytest.approx(sbh * (10 + 24 / t), rel=1e-12)
    assert act(recompute="full") == pytest.approx(2 * sbh, rel=1e-12)


def test_first_stage_holds_L_layers_and_the_interleave_factor():
    # Korthikanti 4.2.3: 1F1B stores p micro-batches x L/p layers = L layers' worth;
    # interleaved: x (1 + (p-1)/(p v))
    plan = Plan(tp=8, pp=35, dp=1, micro_batch=1, global_batch=70)
    assert in_flight_layers(M530, plan) == pytest.approx(105)
    inter = Plan(tp=8, pp=35, dp=1, micro_batch=1, global_batch=70, interleave=3)
    assert in_flight_layers(M530, inter) == pytest.approx(105 * (1 + 34 / 105))
    few = Plan(tp=8, pp=35, dp=1, micro_batch=1, global_batch=7)  # only 7 micro-batches
    assert in_flight_layers(M530, few) == pytest.approx(3 * 7)


def test_flash_attention_keeps_no_score_matrix():
    flash = GptConfig(layers=105, hidden=20480, heads=128, seq=2048, vocab=51200,
                      flash_attention=True)
    sbh = 2048 * 20480
    assert activation_bytes_per_layer(flash, _plan(t=8), BF16) == pytest.approx(
        sbh * (10 + 24 / 8))


@pytest.mark.parametrize("t", [1, 8])
def test_no_dropout_keeps_no_masks(t):
    # Korthikanti Table 2 without its dropout terms: the two 1-byte residual masks (34 -> 32)
    # and, of the 5as/h score bytes, the mask and the dropout's own output (-> 2as/h: at p = 0
    # PyTorch's dropout returns its input)
    s, h, a = 2048, 20480, 128
    sbh = s * h
    m = dataclasses.replace(M530, hidden_dropout=0.0, attention_dropout=0.0)
    act = lambda **kw: activation_bytes_per_layer(m, _plan(t=t, **kw), BF16)  # noqa: E731
    assert act() == pytest.approx(sbh * (8 + 24 / t + 2 * a * s / (h * t)), rel=1e-12)
    assert act(sequence_parallel=True) == pytest.approx(sbh / t * (32 + 2 * a * s / h),
                                                        rel=1e-12)
    only_attn = dataclasses.replace(M530, attention_dropout=0.0)
    assert activation_bytes_per_layer(only_attn, _plan(t=t), BF16) == pytest.approx(
        sbh * (10 + 24 / t + 2 * a * s / (h * t)), rel=1e-12)


def test_llama_layer_without_dropout_by_hand():
    # a Llama-3-405B-like layer (GQA 8 KV heads of 128, SwiGLU ffn 53248, flash attention)
    # under tp 8 with sequence parallelism, per sbh/t element: norm inputs 4, QKV and FC1
    # inputs 2 + 2, Q 2 + K and V 2 x 2 x 8/128, projection input 2, gate and up outputs
    # 2 x 2 x f/h, FC2 input 2 f/h; no dropout masks (Llama's config: attention_dropout 0)
    from accelsim.engine.decoder import Decoder
    from accelsim.workload.transformer import PRESETS

    cfg = dataclasses.replace(PRESETS["llama3-70b"], layers=126, hidden=16384, heads=128,
                              head_dim=128, ffn_size=53248)
    assert cfg.hidden_dropout == cfg.attention_dropout == 0.0
    model = Decoder(cfg, 8192, flash_attention=True)
    s, h, f, t = 8192, 16384, 53248, 8
    per = 4 + 2 + 2 + (2 + 2 * 2 * 8 / 128) + 2 + 4 * f / h + 2 * f / h
    plan = Plan(tp=t, pp=16, dp=1, micro_batch=1, global_batch=16, sequence_parallel=True)
    assert activation_bytes_per_layer(model, plan, BF16) == pytest.approx(s * h / t * per,
                                                                          rel=1e-12)
    with_dropout = Decoder(dataclasses.replace(cfg, hidden_dropout=0.1), 8192,
                           flash_attention=True)
    assert activation_bytes_per_layer(with_dropout, plan, BF16) == pytest.approx(
        s * h / t * (per + 2), rel=1e-12)


def test_embedding_mask_only_with_hidden_dropout():
    m = GptConfig(layers=4, hidden=1024, heads=8, seq=1024, vocab=50000, flash_attention=True)
    plan = Plan(tp=1, pp=2, dp=1, micro_batch=1, global_batch=8)
    drop = memory(m, plan, BF16).activations_bytes
    none = memory(dataclasses.replace(m, hidden_dropout=0.0), plan, BF16).activations_bytes
    # 2 layers x 2 micro-batches x 2 masks, and the embedding's mask x 2 micro-batches
    assert drop - none == pytest.approx(1024 * 1024 * (2 * 2 * 2 + 2))


def test_bytes_per_parameter_fp8_lm():
    # FP8-LM section 2.3: 16 bytes per parameter with the FP32 optimizer path, 6 with precision
    # decoupling (FP16 master 2 + FP8 gradient 1 + FP8 m 1 + FP16 v 2)
    assert adamw_formats("bf16").bytes_per_param == 16
    assert adamw_formats("te-fp8").bytes_per_param == 16
    assert adamw_formats("fp8-lm").bytes_per_param == 6
    # Megatron bf16 keeps the working copy (2 B) and an fp32 gradient buffer on top of fp32
    # master + moments
    assert adamw_formats("bf16").weight_bytes + adamw_formats("bf16").bytes_per_param == 18


def test_fp8_lm_states_only_for_linear_weights():
    # MS-AMP makes the linear layers' weight matrices FP8 tensors; embeddings, LayerNorms and
    # biases keep bf16's 2 + 4 + 12 bytes (ZeRO-1 over dp shards the 12)
    m = GptConfig(layers=24, hidden=2048, heads=16, seq=2048, vocab=51200)
    plan = Plan(tp=2, pp=2, dp=4, micro_batch=1, global_batch=8, zero=1)
    mem = memory(m, plan, adamw_formats("fp8-lm"))
    lin, rest = mem.linear_params, mem.params - mem.linear_params
    assert lin == 12 * (4 * 2048 ** 2 + 2 * 2048 * 8192) / 2
    assert mem.grads_bytes == pytest.approx(lin * 1 + rest * 4)
    assert mem.weights_bytes == pytest.approx(mem.params * 2)
    assert mem.optimizer_bytes == pytest.approx(lin * 5 / 4 + rest * 12 / 4)


def test_param_bytes_prices_linear_weights_and_the_rest_apart():
    c = ParamCounts(linear=1000, rest=10)
    fp8, bf = adamw_formats("fp8-lm"), BF16
    # FP8-LM: FP8 gradients (1 B) on the linear weight matrices, bf16's fp32 buffer (4 B) on the
    # rest; a scheme without other_scheme prices everything alike
    assert param_bytes(c, fp8, lambda s: s.grad_bytes) == 1000 * 1 + 10 * 4
    assert param_bytes(c, fp8, lambda s: s.optimizer_bytes) == 1000 * 5 + 10 * 12
    assert param_bytes(c, bf, lambda s: s.grad_bytes) == 1010 * 4
    te = adamw_formats("te-fp8")
    assert param_bytes(c, te, lambda s: s.weight_bytes) == 1010 * 2
    # Transformer Engine's FP8 weight + transpose cache sits on the linear weights only
    w, g, o = model_state_bytes(c, te, zero=0, dp=1)
    assert (w, g, o) == (1000 * 4 + 10 * 2, 1010 * 4, 1010 * 12)
    assert c.total == 1010
    with pytest.raises(ValueError, match="ParamCounts.rest must be >= 0, got -1"):
        ParamCounts(linear=1, rest=-1)


def test_scheme_other_is_read_only_by_param_bytes():
    # one owner for the linear / rest split: no other function of the room reads scheme.other
    # (each copy of ``lin * X + rest * scheme.other.X`` was a place to drift)
    import ast
    from pathlib import Path

    import accelsim

    readers = set()
    for f in sorted(Path(accelsim.__file__).parent.rglob("*.py")):
        tree = ast.parse(f.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef):
                if any(isinstance(n, ast.Attribute) and n.attr == "other" for n in ast.walk(fn)):
                    readers.add(f"{f.name}:{fn.name}")
    assert readers == {"states.py:param_bytes"}


def test_zero_figure1():
    # Rajbhandari et al. SC'20 Figure 1: 7.5B parameters, 64-way DP, K = 12, fp16 weights and
    # gradients (2 + 2 B): baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB
    psi = 7.5e9
    zero_paper = dataclasses.replace(BF16, name="zero-fp16", grad_bytes=2)
    got = [sum(model_state_bytes(ParamCounts(linear=psi, rest=0), zero_paper, z, 64)) / 1e9
           for z in (0, 1, 2, 3)]
    assert [round(x, 1) for x in got] == [120.0, 31.4, 16.6, 1.9]


def test_memory_shrinks_with_every_sharding_knob():
    m = GptConfig(layers=24, hidden=2048, heads=16, seq=2048, vocab=51200)
    base = dict(tp=2, pp=2, dp=4, micro_batch=2, global_batch=64)
    totals = [memory(m, Plan(**base, zero=z), BF16).total_bytes for z in (0, 1, 2, 3)]
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4
    acts = [memory(m, Plan(**base, recompute=r), BF16).activations_bytes
            for r in ("none", "selective", "full")]
    assert acts == sorted(acts, reverse=True)
    sp = memory(m, Plan(**base, sequence_parallel=True), BF16).activations_bytes
    assert sp < acts[0]
    fp8 = memory(m, Plan(**base), adamw_formats("fp8-lm")).total_bytes
    assert fp8 < totals[0]


def test_stage_params_add_up_to_the_model():
    m = GptConfig(layers=24, hidden=2048, heads=16, seq=2048, vocab=51200)
    one = memory(m, Plan(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1), BF16)
    assert one.params == m.n_params
    t4 = memory(m, Plan(tp=4, pp=1, dp=1, micro_batch=1, global_batch=1), BF16)
    h, f = 2048, 8192
    split = 24 * (4 * h * h + 2 * h * f + 3 * h + f) + 51200 * h  # column/row/vocab-parallel
    assert t4.params == pytest.approx(split / 4 + (m.n_params - split), rel=1e-12)


@pytest.mark.parametrize("kw,msg", [
    (dict(tp=3), "heads 16 not divisible by tp 3"),
    (dict(pp=25), "24 layers cannot fill pp 25 stages"),
    (dict(pp=5, interleave=2, global_batch=5), "layers 24 not divisible by pp x interleave"),
])
def test_invalid_split_names_the_value(kw, msg):
    m = GptConfig(layers=24, hidden=2048, heads=16, seq=2048, vocab=51200)
    plan = Plan(**{**dict(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1), **kw})
    with pytest.raises(ValueError, match=msg):
        memory(m, plan, BF16)


@pytest.mark.parametrize("kw,msg", [
    (dict(global_batch=10, micro_batch=4), "not a multiple of micro-batch x dp"),
    (dict(interleave=2), "needs pipeline parallelism"),
    (dict(recompute="some"), "recompute must be one of"),
    (dict(zero=4), "zero must be one of"),
    (dict(tp=0), r"tp must be an integer in \[1, 10,000,000\], got 0"),
    # the flags' bounds (accelsim.bounds); a string is not a bool ("off" was truthy)
    (dict(dp=10_000_001), r"plan dp must be an integer in \[1, 10,000,000\]"),
    (dict(sequence_parallel="off"), "plan sequence_parallel must be True or False, got 'off'"),
    (dict(overlap_grad_reduce=1), "plan overlap_grad_reduce must be True or False, got 1"),
])
def test_bad_plan(kw, msg):
    with pytest.raises(ValueError, match=msg):
        Plan(**{**dict(tp=1, pp=1, dp=1, micro_batch=1, global_batch=8), **kw})


def test_cli_dropout_flag(capsys):
    """``llm --dropout P`` sets both dropouts of the model: a GPT (default 0.1) at 0 drops
    the two 1-byte residual masks per layer and the embedding's, of every micro-batch in
    flight (pp 1: one), on one GPU."""
    import json

    from accelsim.cli import main

    base = ["llm", "--system", "dgx-h100", "--layers", "4", "--hidden", "1024", "--heads", "8",
            "--seq", "1024", "--vocab", "8192", "--flash-attention", "--scheme", "bf16",
            "--tp", "1", "--pp", "1", "--dp", "1", "--global-batch", "1", "--clock", "boost",
            "--json"]
    got = {}
    for flag in ([], ["--dropout", "0.1"], ["--dropout", "0"]):
        assert main(base + flag) == 0
        got[" ".join(flag)] = json.loads(capsys.readouterr().out)["activations_GiB"]
    assert got[""] == got["--dropout 0.1"]
    masks = 1024 * 1024 * (4 * 2 + 1)  # 4 layers x 2 masks + the embedding's, 1 B each
    assert (got[""] - got["--dropout 0"]) * 2 ** 30 == pytest.approx(masks, rel=1e-9)
    assert main(base + ["--dropout", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "dropout probability in [0, 1)" in err[0]
