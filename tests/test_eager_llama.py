"""Dense decoders other than the GPT block on the pytorch stacks: the eager Llama block's kernel
inventory against a hand count of its docstring's formulas, a Llama-class FSDP step on the
eager and compiled stacks, the compiled stack between the eager one and the ideal, and the
refusals that stay."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accelsim.arch import build_system
from accelsim.engine import LlmParams, Plan, compiled, eager, predict, pytorch_kernels
from accelsim.engine.decoder import Decoder
from accelsim.engine.stack import (PYTORCH, PYTORCH_COMPILE, STREAM_EFFICIENCY, KernelKind,
                                   kernel_Bps)
from accelsim.errors import InputError
from accelsim.paths import REPO_ROOT
from accelsim.workload.hf_config import resolve_model
from accelsim.workload.gpt import GptConfig

H100 = build_system(REPO_ROOT / "arch_configs" / "h100-sxm.toml")
DGX_H100 = build_system(REPO_ROOT / "arch_configs" / "dgx-h100.toml")
LLAMA = Decoder(resolve_model("llama3-8b"), 2048)
ONE = Plan(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1, optimizer="adamw")
FSDP = Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, optimizer="adamw", fsdp=True)
GPT2 = GptConfig(layers=12, hidden=768, heads=12, seq=1024, vocab=50257, flash_attention=True)


def _hand_count(T, h, a, kv, d, f, e=2, r=4):
    """One Llama layer's element-wise bytes under bf16 autocast, (forward, backward), from
    eager_llama's docstring, term by term."""
    norm_f = T * h * (8 + 4 + 8 + 8) + 4 * T + 8 * T + 8 * T + 4 * T + 4 * h + T * h * (r + e)
    norm_b = (T * h * (e + r) + (8 * T * h + 4 * h) + 12 * T * h + (4 * T * h + 4 * h)
              + (8 * T * h + 4 * T) + 12 * T * h + (4 * T * h + 4 * T) + (8 + 8 + 12) * T
              + (4 * T + 4 * T * h) + (8 + 8 + 12) * T * h + 12 * T * h)
    rot_f = sum(10 * n * e + 2 * T * d * e for n in (T * a * d, T * kv * d))
    rot_b = sum(15 * n * e + 2 * T * d * e for n in (T * a * d, T * kv * d))
    q = a * d
    sdpa_f = 2 * T * (kv * d + q) * e + 4 * T * q * 2 * e
    sdpa_b = 6 * T * q * 2 * e + 2 * T * (q + 2 * kv * d) * 2 * e + 2 * T * (q + kv * d) * e
    res_f, res_b = T * h * (2 * r + e), T * h * 3 * r + T * h * (r + e)
    glu_f, glu_b = 5 * T * f * e, 13 * T * f * e
    weights = (q + 2 * kv * d) * h + q * h + 2 * f * h + f * h
    cast = weights * (r + e)
    return (2 * norm_f + rot_f + sdpa_f + 2 * res_f + glu_f + cast,
            2 * norm_b + rot_b + sdpa_b + 2 * res_b + glu_b + cast)


def test_llama_layer_kernels_match_the_hand_count():
    fwd, bwd = pytorch_kernels.layer_kernels(PYTORCH, LLAMA, 2, "bf16")
    c = LLAMA.config
    f_hand, b_hand = _hand_count(2 * 2048, c.hidden, c.heads, c.kv_heads, c.head_dim,
                                 c.ffn_size)
    assert sum(k.bytes for k in fwd) == f_hand
    assert sum(k.bytes for k in bwd) == b_hand
    # no bias gradients or casts; one kernel per op: 7 per RMSNorm, 5 per rotated tensor
    assert not any("bias" in k.name for k in fwd + bwd)
    assert len(fwd) == 2 * 7 + 2 * 5 + 2 + 4 + 2 + 2 + 4
    # the GPT block keeps its own inventory, untouched
    assert pytorch_kernels.layer_kernels(PYTORCH, Decoder.of(GPT2), 8, "bf16") \
        == eager.layer_kernels(GPT2, 8, "bf16")


@pytest.mark.parametrize("stack", [PYTORCH, PYTORCH_COMPILE])
def test_llama_fsdp_step_runs_on_the_pytorch_stacks(stack):
    r = predict(LLAMA, FSDP, "bf16", DGX_H100, LlmParams(stack=stack))
    assert r.iteration_time_s > 0 and r.memory.total_bytes > 0
    assert r.memory.reserve_bytes == pytest.approx(0.4 * 2**30)
    full = predict(LLAMA, replace(FSDP, recompute="full"), "bf16", DGX_H100,
                   LlmParams(stack=stack))
    assert full.iteration_time_s > r.iteration_time_s
    assert full.memory.activations_bytes < r.memory.activations_bytes


@pytest.mark.parametrize("model, mb", [(LLAMA, 1), (GPT2, 8)])
def test_compile_is_faster_than_eager_and_slower_than_the_ideal(model, mb):
    plan = replace(ONE, micro_batch=mb, global_batch=mb)
    pe = predict(model, plan, "bf16", H100, LlmParams(stack=PYTORCH))
    pc = predict(model, plan, "bf16", H100, LlmParams(stack=PYTORCH_COMPILE))
    assert pc.iteration_time_s < pe.iteration_time_s
    bw = H100.chip.memory_bandwidth_Bps * STREAM_EFFICIENCY
    floor = PYTORCH_COMPILE.floor_s(KernelKind.ELEMENTWISE)
    for kernels in (compiled.layer_kernels(model, mb, "bf16"),
                    compiled.head_kernels(model, mb, "bf16")):
        nbytes = sum(k.bytes for k in kernels[0] + kernels[1])
        t = sum(eager.stream_s(k, bw, floor)[0] for k in kernels)
        assert t >= nbytes / bw  # no group beats a plain copy of its bytes
    ew = {name: sum(o.time_s for o in r.layer_ops if o.op == "elementwise")
          for name, r in (("eager", pe), ("compile", pc))}
    ideal = sum(k.bytes for k in sum(compiled.layer_kernels(model, mb, "bf16"), ())) / bw
    assert ideal <= ew["compile"] < ew["eager"]
    assert kernel_Bps("layernorm", bw) < bw


def test_sliding_window_runs_through_the_flash_kernel():
    mistral = Decoder(replace(LLAMA.config, name="swa", sliding_window=512), 4096)
    full = Decoder(replace(LLAMA.config, name="full"), 4096)
    plan = replace(ONE, optimizer="adamw")
    rw = predict(mistral, plan, "bf16", H100, LlmParams(stack=PYTORCH))
    rf = predict(full, plan, "bf16", H100, LlmParams(stack=PYTORCH))
    attn = {n: sum(o.time_s for o in r.layer_ops if o.op == "attention")
            for n, r in (("swa", rw), ("full", rf))}
    assert attn["swa"] < attn["full"]


MIXTRAL = Decoder(resolve_model("mixtral-8x7b"), 1024)


@pytest.mark.parametrize("model, plan, match", [
    (Decoder(resolve_model("deepseek-v3"), 1024), ONE, "has multi-head latent attention"),
    (LLAMA, replace(ONE, recompute="selective"), "recompute selective"),
    (LLAMA, replace(ONE, tp=2, dp=1), "tp 2"),
])
@pytest.mark.parametrize("stack", [PYTORCH, PYTORCH_COMPILE])
def test_refusals_stay_clear(model, plan, match, stack):
    with pytest.raises(InputError, match=match):
        predict(model, plan, "bf16", DGX_H100, LlmParams(stack=stack))


@pytest.mark.parametrize("stack, scheme, plan, match", [
    (PYTORCH_COMPILE, "bf16", ONE, "stack pytorch-compile is not modelled"),
    (PYTORCH, "torchao-fp8-rowwise", ONE, "scheme torchao-fp8-rowwise is not modelled"),
    (PYTORCH, "bf16", replace(ONE, dp=2, ep=2, global_batch=2), "ep 2 is not modelled"),
])
def test_moe_runs_eager_only(stack, scheme, plan, match):
    with pytest.raises(InputError, match=match):
        predict(MIXTRAL, plan, scheme, DGX_H100, LlmParams(stack=stack))


def test_moe_layer_kernels_match_the_hand_count():
    """Mixtral's feed-forward block (eager_moe's docstring) in place of the dense MLP's."""
    c, T = MIXTRAL.config, 1024
    m, h, e, r = c.moe, c.hidden, 2, 4
    E, k, f = m.n_experts, m.top_k, m.expert_ffn_size
    n = R = T * k  # one GPU, balanced, dropless: every routed row
    fwd = (T * E * (e + r) + 8 * T * E + 4 * T * E + 12 * n + 8 * n + 16 * n + 16 * n + 16 * n
           + 2 * n * h * e + 5 * R * f * e + R * h * (e + r) + 8 * R * h + 4 * R
           + R * h * (r + e) + T * h * e + 2 * T * h * e + 3 * n * h * e
           + (r + e) * (h * E + E * 3 * h * f))
    bwd = (4 * n + 16 * n + 4 * T * E + 16 * n + 12 * T * E + T * E * (r + e)
           + 13 * R * f * e + 2 * n * h * e + R * h * (e + r) + 8 * R * h + 4 * R + 12 * R * h
           + 4 * R * h + 4 * R + R * h * (r + e) + T * h * e + 3 * n * h * e + 3 * T * h * e
           + (e + r) * (h * E + E * 3 * h * f))
    moe = pytorch_kernels.layer_kernels(PYTORCH, MIXTRAL, 1, "bf16", moe=True)
    dense = pytorch_kernels.layer_kernels(PYTORCH, MIXTRAL, 1, "bf16")
    # the dense MLP's kernels: SwiGLU (5, 13 Tfe) and its two linear layers' weight casts
    mlp = (5 * T * c.ffn_size * e + 3 * h * c.ffn_size * (r + e),
           13 * T * c.ffn_size * e + 3 * h * c.ffn_size * (r + e))
    for phase, hand in ((0, fwd), (1, bwd)):
        got = sum(x.bytes for x in moe[phase]) - sum(x.bytes for x in dense[phase])
        assert got == hand - mlp[phase]
    r1 = predict(MIXTRAL, ONE, "bf16", H100, LlmParams(stack=PYTORCH))
    assert r1.iteration_time_s > 0 and r1.memory.activations_bytes > 0


# ---- torchao.float8 -----------------------------------------------------------------------------
def _linear_shapes(c):
    q, kv = c.heads * c.head_dim, c.kv_heads * c.head_dim
    return [(c.hidden, q + 2 * kv), (q, c.hidden), (c.hidden, 2 * c.ffn_size),
            (c.ffn_size, c.hidden)]


def test_fp8_tensorwise_adds_exactly_the_documented_cast_kernels():
    c, M = LLAMA.config, 2 * 2048
    bf16 = pytorch_kernels.layer_kernels(PYTORCH, LLAMA, 2, "bf16")
    fp8 = pytorch_kernels.layer_kernels(PYTORCH, LLAMA, 2, "fp8", "tensorwise")
    # eager, one cast of n elements (float8.py's docstring): abs 2sn, amax sn, four 16-byte
    # scale kernels, to fp32 (s + 4)n for 16 bits, * scale 8n + 4, clamp 8n, to fp8 5n:
    # 33 n + 68 either way; Float8Linear runs no autocast weight cast (fp32 -> bf16, 6 bytes)
    cast = 33
    f_extra = sum(cast * M * k + 68 + cast * k * n + 68 - 6 * k * n
                  for k, n in _linear_shapes(c))
    b_extra = sum(cast * (2 * M * n + k * n + M * k) + 4 * 68 + 2 * (k * n + M * n + M * k)
                  for k, n in _linear_shapes(c))
    assert sum(k.bytes for k in fp8[0]) - sum(k.bytes for k in bf16[0]) == f_extra
    assert sum(k.bytes for k in fp8[1]) - sum(k.bytes for k in bf16[1]) == b_extra
    # kernels: 10 per 16-bit cast, 9 per fp32 weight cast; backward 3 transposes per layer
    assert len(fp8[0]) - len(bf16[0]) == 4 * (10 + 9) - 4
    assert len(fp8[1]) - len(bf16[1]) == 4 * (3 * 10 + 9 + 3)
    # compiled (torchao's roofline with fusion): input (e + 2) MK, the weight's amax w KN and
    # two (w + 1) KN casts, the output gradient (e + 2) MN, three 16-byte amax second stages
    cb = pytorch_kernels.layer_kernels(PYTORCH_COMPILE, LLAMA, 2, "bf16")
    cf = pytorch_kernels.layer_kernels(PYTORCH_COMPILE, LLAMA, 2, "fp8", "tensorwise")
    e, w = 2, 4
    assert sum(k.bytes for k in cf[0] + cf[1]) - sum(k.bytes for k in cb[0] + cb[1]) == sum(
        (e + 2) * M * k + w * k * n + 2 * (w + 1) * k * n + (e + 2) * M * n + 3 * 16
        - 6 * k * n for k, n in _linear_shapes(c))


def test_fp8_schemes_run_on_the_pytorch_stacks_only():
    for stack in (PYTORCH, PYTORCH_COMPILE):
        # torchao.float8 runs under autocast: its bf16 reference too
        bf = predict(LLAMA, replace(FSDP, autocast=True), "bf16", DGX_H100,
                     LlmParams(stack=stack))
        for scheme in ("torchao-fp8-tensorwise", "torchao-fp8-rowwise"):
            r = predict(LLAMA, FSDP, scheme, DGX_H100, LlmParams(stack=stack))
            # the four linear layers' GEMMs at the FP8 rate; the LM head stays bf16
            gemm = {o.op: o.time_s for o in r.layer_ops if o.phase.value == "fwd"}
            ref = {o.op: o.time_s for o in bf.layer_ops if o.phase.value == "fwd"}
            assert gemm["fc1"] < ref["fc1"]
            # torchao saves the bf16 input: activations as bf16's
            assert r.memory.activations_bytes == bf.memory.activations_bytes
    from accelsim.engine.stack import MEGATRON

    with pytest.raises(InputError, match="torchao.float8 runs on the pytorch stacks"):
        predict(LLAMA, ONE, "torchao-fp8-rowwise", H100, LlmParams(stack=MEGATRON))
    with pytest.raises(InputError, match="Transformer Engine"):
        predict(LLAMA, ONE, "te-fp8", H100, LlmParams(stack=PYTORCH))


def test_fsdp_without_a_stack_runs_llama_and_torchao_fp8_on_pytorch():
    import argparse

    from accelsim.commands import llm

    parser = argparse.ArgumentParser()
    llm.add_arguments(parser)
    for scheme in ("bf16", "torchao-fp8-rowwise"):
        args = parser.parse_args(["--system", "dgx-h100", "--scheme", scheme, "--optimizer",
                                  "adamw", "--global-batch", "16", "--fsdp"])
        assert llm._params(args, LLAMA).stack is PYTORCH


def test_llm_cli_runs_llama_on_the_compile_stack_and_refuses_in_one_line(capsys):
    import json

    from accelsim.cli import main

    argv = ["llm", "--system", "dgx-h100", "--model", "llama3-8b", "--seq", "2048", "--dp", "8",
            "--fsdp", "--micro-batch", "1", "--global-batch", "8", "--optimizer", "adamw",
            "--stack", "pytorch-compile"]
    assert main(argv + ["--scheme", "torchao-fp8-tensorwise", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["memory_reserve_GiB"] == pytest.approx(0.4) and d["iteration_time_s"] > 0
    assert main([a if a != "llama3-8b" else "mixtral-8x7b" for a in argv]
                + ["--scheme", "bf16", "--fsdp-reduce-dtype", "fp32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MoE on the pytorch stacks" in err[0]
