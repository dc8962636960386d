"""FSDP2's mixed precision (accelsim.engine.mixed_precision): the pure 16-bit step (param dtype
bf16, no autocast) against hand counts of its kernels' bytes and of what it saves in memory
against autocast over fp32 weights; the defaults as torchtitan and Composer run them; the
refusals in one line."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from accelsim.arch import build_system
from accelsim.arch.schemes import get_scheme
from accelsim.cli import main
from accelsim.engine import LlmParams, Plan, eager, predict, pytorch_kernels
from accelsim.engine.decoder import Decoder
from accelsim.engine.graph import Stream
from accelsim.engine.mixed_precision import MixedPrecision, resolve
from accelsim.engine.stack import MEGATRON, PYTORCH, EagerKernel
from accelsim.errors import InputError
from accelsim.workload.gpt import GptConfig
from accelsim.workload.hf_config import resolve_model

H100 = build_system("dgx-h100")
GPT = GptConfig(layers=4, hidden=512, heads=8, seq=512, vocab=1024, flash_attention=True)
LLAMA = Decoder(resolve_model("llama3-8b"), 2048)
FSDP = Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, optimizer="adamw", fsdp=True)


def _bytes(kernels) -> float:
    return sum(k.bytes for k in kernels)


def test_pure_bf16_gpt_layer_has_no_casts_and_a_bf16_residual():
    b, e = 2, 2
    T, h, f = GPT.seq * b, GPT.hidden, GPT.ffn_size
    fwd, bwd = eager.layer_kernels(GPT, b, "bf16", autocast=False)
    assert not [k.name for k in fwd + bwd if "cast" in k.name]
    adds = [k for k in fwd if k.name.startswith("residual_add")]
    assert [(k.bytes, k.kind) for k in adds] == [(3 * e * T * h, EagerKernel.ADD)] * 2
    # eager.py's kernels term by term: two LayerNorms (2 e), SDPA's four strided copies (2 e
    # each), two residual adds (3 e), GELU (2 e per FFN element) forward; backward the norms
    # (3 e + 2 e), SDPA's six copies and the stack and permute of dQ, dK, dV (3 h wide), the
    # adds' gradients (3 e), GELU's (3 e) and the four bias gradients (a reduction each)
    assert _bytes(fwd) == 2 * 2 * e * T * h + 4 * 2 * e * T * h + 2 * 3 * e * T * h \
        + 2 * e * T * f
    assert _bytes(bwd) == 2 * 5 * e * T * h + (6 * 2 + 2 * 3 * 2) * e * T * h \
        + 2 * 3 * e * T * h + 3 * e * T * f + e * T * (3 * h + h + f + h)
    # under autocast the same layer moves an fp32 residual stream and casts every weight
    af, _ = eager.layer_kernels(GPT, b, "bf16", autocast=True)
    assert [k.bytes for k in af if k.name == "residual_add1"] == [(2 * 4 + e) * T * h]
    assert any(k.name == "qkv_weight_cast" for k in af)


def _llama_pure_hand_count(T, h, a, kv, d, f, e=2, r=4):
    """One Llama layer's element-wise bytes without autocast (16-bit stream), (forward,
    backward), from eager_llama's formulas: RMSNorm upcasts, runs its fp32 chain, casts back
    and multiplies the bf16 weight; no weight casts; residual adds all 16-bit."""
    chain_f = T * h * (2 * r + r) + r * T + 2 * r * T + 2 * r * T + (2 * r * T * h + r * T)
    chain_b = ((8 * T * h + 4 * T) + 12 * T * h + (4 * T * h + 4 * T) + (8 + 8 + 12) * T
               + (4 * T + 4 * T * h) + (8 + 8 + 12) * T * h + 12 * T * h)
    casts = 2 * T * h * (e + r)
    norm_f = chain_f + casts + (2 * e * T * h + e * h)
    norm_b = chain_b + casts + (2 * e * T * h + e * h) + 3 * e * T * h + (e * T * h + e * h)
    rot_f = sum(10 * n * e + 2 * T * d * e for n in (T * a * d, T * kv * d))
    rot_b = sum(15 * n * e + 2 * T * d * e for n in (T * a * d, T * kv * d))
    q = a * d
    sdpa_f = 2 * T * (kv * d + q) * e + 4 * T * q * 2 * e
    sdpa_b = 6 * T * q * 2 * e + 2 * T * (q + 2 * kv * d) * 2 * e + 2 * T * (q + kv * d) * e
    res = 3 * e * T * h
    glu_f, glu_b = 5 * T * f * e, 13 * T * f * e
    return (2 * norm_f + rot_f + sdpa_f + 2 * res + glu_f,
            2 * norm_b + rot_b + sdpa_b + 2 * res + glu_b)


def test_pure_bf16_llama_layer_matches_the_hand_count():
    m = LLAMA
    fwd, bwd = pytorch_kernels.layer_kernels(PYTORCH, m, 2, "bf16", autocast=False)
    assert not [k.name for k in fwd + bwd if "weight_cast" in k.name or "grad_cast" in k.name]
    assert (_bytes(fwd), _bytes(bwd)) == _llama_pure_hand_count(
        m.seq * 2, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_size)


def _linear_params(m: Decoder) -> int:
    h, a, kv, d, f = m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_size
    return m.layers * (h * (a + 2 * kv) * d + a * d * h + 3 * h * f)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_pure_bf16_memory_drops_by_the_hand_computed_amount(recompute):
    m, plan = LLAMA, replace(FSDP, recompute=recompute)
    params = LlmParams(stack=PYTORCH)
    auto = predict(m, replace(plan, autocast=True), "bf16", H100, params).memory
    pure = predict(m, plan, "bf16", H100, params).memory  # the default under FSDP
    T, h, V, L, N = m.seq, m.hidden, m.vocab, m.layers, plan.dp
    # weights: autocast's 16-bit copies of the linear weight matrices (2 bytes each, counted
    # over the 8 shards as ZeRO-3's account does); the fp32 shards and the gathered bf16 units
    # are the same; gradients and AdamW moments too
    assert auto.weights_bytes - pure.weights_bytes == pytest.approx(2 * _linear_params(m) / N)
    assert auto.grads_bytes == pure.grads_bytes
    assert auto.optimizer_bytes == pure.optimizer_bytes
    # activations: per layer each RMSNorm's normalized output fp32 -> bf16 (2 norms x 2 B),
    # or with full checkpointing each layer's kept input fp32 -> bf16 (2 B) -- the recomputed
    # layer's own saved tensors once; at the head the final norm's fp32 input (2 B) and the
    # LM head weight's 16-bit autocast copy (V h x 2 B)
    per_layer = 2 * 2 * h * T
    layers = L * per_layer if recompute == "none" else L * 2 * h * T + per_layer
    assert auto.activations_bytes - pure.activations_bytes == pytest.approx(
        layers + 2 * T * h + 2 * V * h)


def test_gather_and_reduce_bytes_are_the_policy_dtypes():
    params = LlmParams(stack=PYTORCH)

    def moved(p, op):
        return sum(t.bytes for t in p.step.tasks if t.op == op)

    b16 = predict(GPT, replace(FSDP, dp=8), "bf16", H100, params)
    f32 = predict(GPT, replace(FSDP, fsdp_param_dtype="fp32"), "bf16", H100, params)
    assert (b16.mixed_precision, f32.mixed_precision) == (
        MixedPrecision(False, "bf16"), MixedPrecision(True, "fp32"))
    assert moved(f32, "fsdp_all_gather") == pytest.approx(2 * moved(b16, "fsdp_all_gather"))
    assert moved(f32, "fsdp_reduce_scatter") == pytest.approx(moved(b16, "fsdp_reduce_scatter"))
    half = predict(GPT, replace(FSDP, fsdp_reduce_dtype="bf16"), "bf16", H100, params)
    assert moved(b16, "fsdp_reduce_scatter") == pytest.approx(
        2 * moved(half, "fsdp_reduce_scatter"))
    assert sum(t.bytes for t in half.step.tasks if t.stream == Stream.FSDP) == pytest.approx(
        moved(b16, "fsdp_all_gather"))


@pytest.mark.parametrize("plan, scheme, stack, want", [
    (FSDP, "bf16", PYTORCH, MixedPrecision(False, "bf16")),  # torchtitan's FSDP2
    (replace(FSDP, fsdp=False), "bf16", PYTORCH, MixedPrecision(True)),  # one GPU / DDP
    (FSDP, "fp32", PYTORCH, MixedPrecision(False, "fp32")),
    (FSDP, "torchao-fp8-rowwise", PYTORCH, MixedPrecision(True, "bf16")),
    (FSDP, "te-fp8", MEGATRON, MixedPrecision(False, "bf16")),
    (replace(FSDP, autocast=True, fsdp_param_dtype="bf16"), "bf16", PYTORCH,
     MixedPrecision(True, "bf16")),  # Composer's DEFAULT / PURE with amp_bf16 (the MPT rows)
    (replace(FSDP, fsdp_param_dtype="fp32"), "bf16", PYTORCH, MixedPrecision(True, "fp32")),
])
def test_defaults_resolve_in_one_place(plan, scheme, stack, want):
    assert resolve(plan, get_scheme(scheme).formats("adamw"), stack) == want


@pytest.mark.parametrize("kw, scheme, stack, word", [
    (dict(fsdp_param_dtype="fp16"), "bf16", PYTORCH, "scheme bf16 computes in bf16"),
    (dict(fsdp_param_dtype="bf16"), "fp32", PYTORCH, "computes in fp32"),
    (dict(autocast=False, fsdp=False), "bf16", PYTORCH, "one GPU or DDP runs autocast"),
    (dict(autocast=False, fsdp_param_dtype="fp32"), "bf16", PYTORCH, "computes in fp32"),
    (dict(autocast=True), "fp32", PYTORCH, "autocast runs 16-bit GEMMs"),
    (dict(autocast=True), "bf16", MEGATRON, "pytorch stacks'"),
    (dict(autocast=False), "torchao-fp8-rowwise", PYTORCH, "modelled under autocast"),
])
def test_combinations_pytorch_does_not_run_are_refused(kw, scheme, stack, word):
    with pytest.raises(InputError, match=word):
        resolve(replace(FSDP, **kw), get_scheme(scheme).formats("adamw"), stack)


@pytest.mark.parametrize("kw, word", [
    (dict(fsdp_param_dtype="int8"), "fsdp_param_dtype must be one of"),
    (dict(fsdp_param_dtype="bf16", fsdp=False), "needs fsdp"),
    (dict(autocast="off"), "autocast must be True or False")])
def test_plan_refuses_bad_values(kw, word):
    with pytest.raises(InputError, match=word):
        replace(FSDP, **kw)


ARGV = ["llm", "--system", "dgx-h100", "--model", "llama3-8b", "--seq", "1024", "--gpus", "8",
        "--micro-batch", "1", "--global-batch", "8", "--scheme", "bf16"]


@pytest.mark.parametrize("extra, word", [
    (["--fsdp", "--fsdp-param-dtype", "fp16"], "fsdp_param_dtype fp16"),
    (["--fsdp", "--fsdp-param-dtype", "fp32", "--autocast", "off"], "autocast off"),
    (["--stack", "pytorch", "--autocast", "off"], "autocast off"),
    (["--fsdp", "--stack", "megatron", "--autocast", "on"], "autocast on"),
    (["--fsdp", "--fsdp-param-dtype", "int8"], "--fsdp-param-dtype"),
    (["--fsdp", "--autocast", "yes"], "--autocast"),
    (["--search", "--autocast", "on"], "--autocast")])  # the search would drop it
def test_bad_flags_are_one_line_errors(capsys, extra, word):
    assert main(ARGV + extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and word in err[0]


def test_the_default_is_printed_and_in_the_json(capsys):
    assert main(ARGV + ["--fsdp"]) == 0
    out = capsys.readouterr().out
    assert "autocast off" in out and "param bf16, reduce fp32" in out
    assert main(ARGV + ["--fsdp", "--autocast", "on", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["fsdp_param_dtype"], d["fsdp_reduce_dtype"], d["autocast"]) == (
        "bf16", "fp32", True)
    assert main(ARGV + ["--stack", "pytorch", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["fsdp_param_dtype"], d["fsdp_reduce_dtype"], d["autocast"]) == (None, None, True)
