"""accelsim.engine.stack_ops: one software stack applied by the one lowering to every
description of a model -- the transformer path (`predict --workload gpt2-small`), the same
layers as a layer list, and `explore` on that list give one step and one memory peak."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accelsim.arch import build_system
from accelsim.dse.explore import explore
from accelsim.engine import LlmParams, Options, Plan, simulate
from accelsim.engine.lower import lower_workload
from accelsim.engine.run import predict_workload, update_efficiency
from accelsim.engine.stack import FUSED_ELEMENTWISE_BYTES, MEGATRON, PYTORCH
from accelsim.errors import InputError
from accelsim.perf.gemm import FITTED
from accelsim.paths import REPO_ROOT
from accelsim.workload import load_workload

H100 = build_system(REPO_ROOT / "arch_configs" / "h100-sxm.toml")
GPT2 = load_workload(REPO_ROOT / "workloads" / "gpt2-small.toml")
#: the same layers without [workload.transformer]: what an ONNX import of the model gives
LAYERS = replace(GPT2, transformer=None)
PLAN = Plan(tp=1, pp=1, dp=1, micro_batch=8, global_batch=8, optimizer="adamw")


def _three(stack):
    params = LlmParams(stack=stack, memory_reserve_GiB=0.0)
    system = H100.with_fusion(stack.fused)
    t = simulate(H100, GPT2, PLAN, "bf16", Options(stack=params))
    lay = simulate(system, LAYERS, PLAN, "bf16", Options(stack=params, fusion=stack.fused))
    ex = explore(system, LAYERS, 8, "bf16", optimizer="adamw", strategies=("data",),
                 stack=params)
    return t, lay, ex


@pytest.mark.parametrize("stack", [MEGATRON, PYTORCH], ids=lambda s: s.name)
def test_gpt2_small_step_is_one_answer_three_ways(stack):
    """One GPT-2-small step on one H100 (bf16, batch 8, AdamW): time and memory within 2 %
    whichever way it is described (it was 24.2 / 37.0 / 37.0 ms: the layer list had no
    vocabulary padding, unfused non-causal attention, perf's element-wise model and another
    update efficiency)."""
    t, lay, ex = _three(stack)
    step = t.iteration_time_s
    assert lay.step.step_s == pytest.approx(step, rel=0.02)
    assert ex.step_s == pytest.approx(lay.step.step_s, rel=1e-9)  # one lowering, one schedule
    mem = t.memory.total_bytes
    assert lay.memory_bytes == pytest.approx(mem, rel=0.02)
    assert ex.best["memory_per_chip_bytes"] == pytest.approx(lay.memory_bytes, rel=1e-9)
    # one model-FLOPs count (the causal flash kernel's triangle on both)
    assert lay.model_flops == t.model_flops
    # the same update efficiency whichever front-end asks (one number per stack)
    assert lay.step.weight_update_s == pytest.approx(t.optimizer_s, rel=1e-9)
    assert ex.best["weight_update_s"] == pytest.approx(t.optimizer_s, rel=1e-9)


def test_update_efficiency_is_the_stacks():
    assert update_efficiency(H100, LlmParams(stack=MEGATRON)) == MEGATRON.elementwise_efficiency
    hbm = H100.chip.memory_bandwidth_Bps
    eager = update_efficiency(H100, LlmParams(stack=PYTORCH)) * hbm
    assert eager == pytest.approx(2484e9, rel=1e-3)  # the fused AdamW kernel, measured


def test_the_stack_pads_the_vocabulary_and_eager_runs_it_as_stated():
    """Megatron-LM pads the LM head to a multiple of 128 (50257 -> 50304); eager PyTorch runs
    the stated 50257, cuBLAS's unaligned path (docs/perf.md)."""
    head = {s.name: [op for op in lower_workload(LAYERS, 8, "bf16", s)
                     if op.name == "lm_head"][0].layer.n for s in (MEGATRON, PYTORCH)}
    assert head == {"megatron": 50304, "pytorch": 50257}
    assert [op for op in lower_workload(LAYERS, 8, "bf16") if op.name == "lm_head"][0].layer.n \
        == 50257  # no stack: what the layers say


def test_fused_bytes_are_korthikantis_per_layer_count():
    """The per-kind bytes sum to the transformer path's per-layer count: two LayerNorms and
    two residual adds 22 bytes per hidden element, the GeLU 16 per 4 FFN elements."""
    f = FUSED_ELEMENTWISE_BYTES
    assert 2 * f["layernorm"] + 2 * f["add"] == 22 and 4 * f["gelu"] == 16


def test_an_attention_layer_needs_a_stack():
    with pytest.raises(InputError, match=r"h\.0\.attn\.sdpa.*stack"):
        predict_workload(H100, LAYERS, 1, "bf16", fusion=True, optimizer="adamw")
    with pytest.raises(InputError, match=r"h\.0\.attn\.sdpa.*stack"):
        explore(H100, LAYERS, 1, "bf16", optimizer="adamw", strategies=("data",))


def test_a_cnn_keeps_perfs_fusion_rule_and_takes_the_stacks_update():
    """Megatron's fused element-wise kernels are a transformer's: ResNet-50's adds stay fused
    into cuDNN's epilogues (perf's rule) under the megatron stack; only the update streams at
    the stack's efficiency (0.45 of HBM, against perf's fitted 0.68 without a stack)."""
    resnet = load_workload(REPO_ROOT / "workloads" / "resnet50.toml")
    bare = predict_workload(H100, resnet, 64, "fp16", fusion=True)
    meg = predict_workload(H100, resnet, 64, "fp16", fusion=True,
                           stack=LlmParams(memory_reserve_GiB=0.0))
    assert meg.phases.compute_s == pytest.approx(bare.phases.compute_s, rel=1e-12)
    assert meg.memory_bytes == pytest.approx(bare.memory_bytes, rel=1e-12)
    ratio = FITTED.memory_efficiency / MEGATRON.elementwise_efficiency
    assert meg.step.weight_update_s == pytest.approx(bare.step.weight_update_s * ratio,
                                                     rel=1e-9)
