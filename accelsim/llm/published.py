"""Published large-model training results the LLM model is validated against (each cited).

MEGATRON_TABLE1: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", SC'21 (arXiv:2104.04473), Table 1: GPT models with vocabulary
51,200 and sequence 2048 on DGX A100 (80 GB) nodes of Selene, achieved teraFLOP/s per GPU
(their eq. 3, which counts the recomputed forward pass). The shapes, GPU counts, batch sizes
and TFLOPS column were checked on 2026-11-23 against a public transcription of Table 1 (137,
138, 142, 135, 138, 140, 148, 155, 163, 163 teraFLOP/s per GPU). Micro-batch sizes, interleaving (layers
per virtual stage) and full ("uniform") recomputation from the paper's artifact scripts,
NVIDIA/Megatron-LM ``examples/sc21/run_table_1.sh``.

FP8LM_*: Peng et al., "FP8-LM: Training FP8 Large Language Models", arXiv:2310.18313 (v2),
Tables 1, 5, 7 and 8, read on 2026-11-23 from the ar5iv rendering of the paper
(https://ar5iv.labs.arxiv.org/html/2310.18313; a stored clipping of that page, the tables as
HTML) and cross-checked against a public summary that quotes Table 5's memory and throughput
(bzhng-development/summary-of-some-paper-in-cuda,
docs/low-precision/FP8-LM-TrainingFP8LargeLanguageModels.md). H100 80 GB (Azure NDv5). Every
number below is the paper's; nothing is derived. The paper prints "GB"; the Table 7 volumes
match a byte count in units of 2^30 to 0.2 % and units of 1e9 to 7 % only (docs/llm.md), so the
validation reads every FP8-LM "GB" as GiB (PyTorch's convention).

Run configuration not printed in the paper, from the authors' public launch scripts
(Azure/MS-AMP-Examples ``gpt3/pretrain_6b7_megatron.sh``, ``pretrain_13b_megatron.sh``; the
same arguments for bf16, te and msamp): ``--sequence-parallel --use-flash-attn
--use-distributed-optimizer --no-gradient-accumulation-fusion``, no activation recomputation,
GPT-2 BPE vocabulary (``gpt2-vocab.json``), sequence 2048, dropout 0.
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

#: FP8-LM Table 1: model shapes, their TP / PP (sequence parallelism on for all), and the
#: training batch in tokens ("4M", "1M", read as 2^22 and 2^20: 2048 and 512 sequences of 2048;
#: the authors' GPT-7B script sets --global-batch-size 2048):
#: name -> (layers, hidden, heads, tp, pp, batch_tokens)
FP8LM_TABLE1 = {
    "gpt-7b": (32, 4096, 32, 1, 1, 4 * 2 ** 20),
    "gpt-13b": (40, 5120, 40, 2, 1, 4 * 2 ** 20),
    "gpt-175b": (96, 12288, 96, 8, 4, 1 * 2 ** 20),
}
FP8LM_SEQ = 2048  # section 3.1.2: "the input sequence length is set to 2048"
FP8LM_VOCAB = 50257  # GPT-2 BPE (MS-AMP-Examples gpt3/*.sh: gpt2-vocab.json)

#: FP8-LM Table 5, "System-level performance on Nvidia H100 GPUs 80GB": (model, tp, pp, dp,
#: micro_batch, scheme, GPU memory GB, throughput samples/s, TFLOPS, MFU %, weight-related
#: communication rate %, weight-related communication volume GB). Schemes: the paper's BF16 ->
#: ``bf16``, FP8 (TE) -> ``te-fp8``, FP8 (Ours) -> ``fp8-lm``. Weight-related communication
#: "contains the all-gather operator on weights and the reduce-scatter operator on weight
#: gradients".
FP8LM_TABLE5 = (
    ("gpt-7b", 1, 1, 32, 2, "bf16", 69.6, 159.2, 445, 45.0, 10.1, 37.2),
    ("gpt-7b", 1, 1, 32, 2, "te-fp8", 77.3, 224.5, 627, 31.7, 9.7, 37.2),
    ("gpt-7b", 1, 1, 32, 2, "fp8-lm", 49.4, 219.8, 615, 31.1, 7.9, 13.9),
    ("gpt-7b", 1, 1, 32, 4, "fp8-lm", 69.3, 230.5, 645, 32.6, 10.4, 13.9),
    ("gpt-13b", 2, 1, 16, 2, "bf16", 68.2, 79.3, 420, 42.5, 11.1, 34.3),
    ("gpt-13b", 2, 1, 16, 2, "te-fp8", 76.4, 111.7, 592, 29.9, 7.1, 34.3),
    ("gpt-13b", 2, 1, 16, 2, "fp8-lm", 48.9, 109.5, 575, 29.1, 3.9, 12.4),
    ("gpt-13b", 2, 1, 16, 4, "fp8-lm", 67.8, 121.5, 644, 32.5, 9.3, 12.4),
    ("gpt-175b", 8, 4, 4, 1, "bf16", 66.1, 22.4, 386, 39.0, 8.8, 23.4),
    ("gpt-175b", 8, 4, 4, 1, "te-fp8", 69.6, 28.7, 493, 24.9, 3.9, 23.4),
    ("gpt-175b", 8, 4, 4, 1, "fp8-lm", 40.3, 27.1, 473, 23.9, 2.5, 8.2),
    ("gpt-175b", 8, 4, 4, 4, "fp8-lm", 57.7, 39.3, 677, 34.2, 10.9, 8.2),
)

#: FP8-LM Table 7, "Activation-related communication volume reduction in sequence and tensor
#: parallelism, including the all-gather operator on activation and the reduce-scatter on
#: activation gradients": (model, tp, pp, dp, micro_batch, scheme, rate %, volume GB)
FP8LM_TABLE7 = (
    ("gpt-13b", 2, 1, 16, 2, "bf16", 12.9, 4.7),
    ("gpt-13b", 2, 1, 16, 2, "fp8-lm", 5.3, 3.1),
    ("gpt-175b", 8, 4, 4, 1, "bf16", 14.9, 5.9),
    ("gpt-175b", 8, 4, 4, 1, "fp8-lm", 5.2, 3.9),
)

#: FP8-LM Table 8, GPU memory across GPUs with its ZeRO distribution: (model, tp, pp, dp,
#: micro_batch, scheme, min GB, max GB); the max is Table 5's memory column
FP8LM_TABLE8 = (
    ("gpt-7b", 1, 1, 32, 2, "bf16", 69.07, 69.63),
    ("gpt-7b", 1, 1, 32, 2, "te-fp8", 76.97, 77.28),
    ("gpt-7b", 1, 1, 32, 2, "fp8-lm", 49.06, 49.36),
    ("gpt-13b", 2, 1, 16, 2, "bf16", 67.98, 68.18),
    ("gpt-13b", 2, 1, 16, 2, "te-fp8", 73.68, 76.36),
    ("gpt-13b", 2, 1, 16, 2, "fp8-lm", 48.45, 48.85),
    ("gpt-175b", 8, 4, 4, 1, "bf16", 65.60, 66.12),
    ("gpt-175b", 8, 4, 4, 1, "te-fp8", 69.04, 69.57),
    ("gpt-175b", 8, 4, 4, 1, "fp8-lm", 38.64, 40.28),
)


# --------------------------------------------------------------------------- fit rows and labels
#: Labels every validation row carries (docs/validation.md): ``fit`` (a fit script consumed it),
#: ``checked`` (held out from every fit), ``reference`` (reproduced by construction).
FIT, CHECKED, REFERENCE = "fit", "checked", "reference"

#: Megatron Table 1 rows ``scripts/llm_fit.py`` fits network_efficiency and memory_efficiency
#: on: all ten.
MEGATRON_FIT: frozenset[str] = frozenset(r[0] for r in MEGATRON_TABLE1)

#: FP8-LM Table 5 memory rows ``scripts/llm_fit.py`` fits memory_reserve_GiB on, as (model,
#: scheme, micro_batch): BF16 and FP8-LM at the micro-batch the paper compares them at. The
#: Transformer Engine rows and FP8-LM's micro-batch-4 rows are held out.
FP8LM_MEMORY_FIT: frozenset[tuple[str, str, int]] = frozenset({
    ("gpt-7b", "bf16", 2), ("gpt-7b", "fp8-lm", 2),
    ("gpt-13b", "bf16", 2), ("gpt-13b", "fp8-lm", 2),
    ("gpt-175b", "bf16", 1), ("gpt-175b", "fp8-lm", 1),
})


#: ``accelsim/data/llm_published.toml`` rows ``scripts/fit_host_overhead.py`` fits serve's
#: per-request host overhead on (``accelsim.serving.policy.REQUEST_OVERHEAD_S``): TensorRT-LLM
#: 0.14's online-serving Llama-3.1-8B TP1 mean-TTFT rows at 2 requests/s (three length pairs).
#: Held out: the same runs' ITL rows (a per-request overhead leaves every decode step as it is,
#: so nothing is fitted to them) and the Llama-3.1-70B TP4 rows.
HOST_OVERHEAD_FIT: frozenset[str] = frozenset(
    f"trtllm014-h100-llama3.1-8b-tp1-qps2-{lengths}-ttft"
    for lengths in ("467-256", "467-16", "202-214"))


def host_overhead_label(case_id: str) -> str:
    return FIT if case_id in HOST_OVERHEAD_FIT else CHECKED


def megatron_label(name: str) -> str:
    return FIT if name in MEGATRON_FIT else CHECKED


def fp8lm_label(model: str, scheme: str, micro_batch: int, quantity: str) -> str:
    """Only the memory column of the :data:`FP8LM_MEMORY_FIT` rows is fitted; every other
    FP8-LM number (throughput, volumes, gains, the other memories) is held out."""
    fitted = quantity == "memory_per_gpu" and (model, scheme, micro_batch) in FP8LM_MEMORY_FIT
    return FIT if fitted else CHECKED
