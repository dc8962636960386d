"""Published large-model training results the LLM model is validated against (each cited).

MEGATRON_TABLE1: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", SC'21 (arXiv:2104.04473), Table 1: GPT models with vocabulary
51,200 and sequence 2048 on DGX A100 (80 GB) nodes of Selene, achieved teraFLOP/s per GPU
(their eq. 3, which counts the recomputed forward pass). The shapes, GPU counts, batch sizes
and TFLOPS column were checked on 2026-11-23 against a public transcription of Table 1 (137,
138, 142, 135, 138, 140, 148, 155, 163, 163 teraFLOP/s per GPU). Micro-batch sizes, interleaving (layers
per virtual stage) and full ("uniform") recomputation from the paper's artifact scripts,
NVIDIA/Megatron-LM ``examples/sc21/run_table_1.sh``.

FP8LM_175B: Peng et al., "FP8-LM: Training FP8 Large Language Models", arXiv:2310.18313
(Tables 5, 7, 8 as quoted in accelsim issue 15): GPT-175B on H100 at micro-batch 1, BF16
(Megatron-LM) vs FP8-LM: memory per GPU 66.1 -> 40.3 GB, weight-related communication
23.4 -> 8.2 GB, activation-related communication 5.9 -> 3.9 GB, throughput +21 % (same
micro-batch) and +75 % when the saved memory buys micro-batch 4. The parallel configuration
assumed here (TP 4, PP 8, DP 4, sequence parallel, selective recomputation, distributed
optimizer) is not transcribed from the paper in this session; see docs/llm.md.
"""

from __future__ import annotations

# (name, layers, hidden, heads, tp, pp, gpus, micro_batch, global_batch, interleave, torch DDP
#  (gradient all-reduce overlapped with backward; "local" DDP reduces after it), TFLOPS/GPU)
MEGATRON_TABLE1 = (
    ("gpt-1.7b", 24, 2304, 24, 1, 1, 32, 16, 512, 1, True, 137),
    ("gpt-3.6b", 30, 3072, 32, 2, 1, 64, 16, 512, 1, True, 138),
    ("gpt-7.5b", 36, 4096, 32, 4, 1, 128, 16, 512, 1, True, 142),
    ("gpt-18.4b", 40, 6144, 48, 8, 1, 256, 8, 1024, 1, True, 135),
    ("gpt-39.1b", 48, 8192, 64, 8, 2, 512, 4, 1536, 1, False, 138),
    ("gpt-76.1b", 60, 10240, 80, 8, 4, 1024, 2, 1792, 3, False, 140),
    ("gpt-145.6b", 80, 12288, 96, 8, 8, 1536, 2, 2304, 2, False, 148),
    ("gpt-310.1b", 96, 16384, 128, 8, 16, 1920, 1, 2160, 2, False, 155),
    ("gpt-529.6b", 105, 20480, 128, 8, 35, 2520, 1, 2520, 3, False, 163),
    ("gpt-1008b", 128, 25600, 160, 8, 64, 3072, 1, 3072, 1, False, 163),
)
MEGATRON_SEQ, MEGATRON_VOCAB = 2048, 51200

#: GPT-175B (GPT-3 shape: 96 layers, hidden 12288, 96 heads, sequence 2048) on H100
FP8LM_175B = {
    "memory_GB": {"bf16": 66.1, "fp8-lm": 40.3},
    "weight_comm_GB": {"bf16": 23.4, "fp8-lm": 8.2},
    "activation_comm_GB": {"bf16": 5.9, "fp8-lm": 3.9},
    "throughput_gain_mb1": 1.21,  # fp8-lm / bf16, micro-batch 1 both
    "throughput_gain_mb4": 1.75,  # fp8-lm at micro-batch 4 / bf16 at micro-batch 1
}
FP8LM_ASSUMED_PLAN = dict(tp=4, pp=8, dp=4, sequence_parallel=True, recompute="selective",
                          zero=1)
