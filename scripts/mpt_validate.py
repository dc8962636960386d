"""MPT training throughput (MosaicML llm-foundry's benchmark tables) against ``accelsim llm``
with FSDP as PyTorch runs it: writes reports/mpt_validation.csv.

    python scripts/mpt_validate.py [--out reports/mpt_validation.csv]

Rows: accelsim/data/mpt/mpt_training_throughput.csv (19 FSDP FULL_SHARD runs, A100 and H100,
8 and 64 GPUs; its README gives the source). Each row is asked with every flag explicit:
the MPT block (GPT block, no biases, no position table -- ALiBi's bias costs nothing in the
triton flash kernel --, tied embeddings, ffn 4h), flash attention, ``--fsdp`` over all GPUs with
the row's micro-batch and global batch, resharding after forward, ``--fsdp-reduce-dtype`` from
the row's Composer mixed precision (DEFAULT: fp32 reduce, PURE: bf16), ``--fsdp-param-dtype
bf16`` with ``--autocast on`` on the pytorch stack (Composer's ``amp_bf16`` enters
``torch.autocast`` under FSDP too; ``--autocast off`` on megatron, which runs none), activation
checkpointing as ``--recompute full``; bf16 rows on ``--stack pytorch``, the two FP8 rows
(Transformer Engine) on ``--stack megatron`` (the stack that runs 8-bit GEMMs); the preset's
fixed clock (no power model), the analytic collectives. ``before`` is the same question with
FSDP mapped to ``--zero 3`` on the default stack, as ``llm`` answered it before FSDP existed.
Every row is ``fit``: scripts/fit_fsdp.py fits ``comm_contention`` (every stack's) on the A100
rows.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from accelsim.arch import build_system  # noqa: E402
from accelsim.engine.decoder import Decoder  # noqa: E402
from accelsim.engine.plan import LlmParams, Plan  # noqa: E402
from accelsim.engine.stack import PYTORCH, get_stack  # noqa: E402
from accelsim.engine.transformer import predict  # noqa: E402
from accelsim.workload.transformer import (MlpKind, NormKind, PositionKind,  # noqa: E402
                                           TransformerConfig)

#: the clock every row is timed at, passed explicitly (a changed default cannot move the table):
#: the power-limited one, as sustained training runs (issue 34 item 1)
CLOCK = "power"

DATA = ROOT / "accelsim" / "data" / "mpt" / "mpt_training_throughput.csv"
#: the scheme each llm-foundry precision runs as (amp_fp8: Transformer Engine's recipe)
SCHEME = {"amp_bf16": "bf16", "bf16": "bf16", "amp_fp8": "te-fp8"}
#: Composer's FSDP mixed precision -> MixedPrecisionPolicy reduce_dtype (mosaicml/composer
#: composer/trainer/mosaic_fsdp_utils.py, get_mixed_precision: DEFAULT = param_dtype the
#: autocast precision (bf16), reduce_dtype fp32; PURE = param and reduce dtypes bf16)
REDUCE = {"DEFAULT": "fp32", "PURE": "bf16"}
#: the param dtype both give (the autocast precision of amp_bf16 / amp_fp8: bf16)
PARAM = {"DEFAULT": "bf16", "PURE": "bf16"}
#: the tolerance a row is judged at (the issue's held-out target: within 15 %)
TOLERANCE = 0.15


def load() -> pd.DataFrame:
    return pd.read_csv(DATA)


def model_of(r) -> Decoder:
    """The MPT block: LayerNorm, GELU MLP (4h), multi-head attention, no biases, ALiBi (no
    position table), tied embeddings; flash attention (triton)."""
    cfg = TransformerConfig(name=r.id, layers=int(r.layers), hidden=int(r.hidden),
                            heads=int(r.heads), vocab=int(r.vocab), seq=int(r.seq),
                            ffn_size=int(r.ffn), mlp=MlpKind.GELU, norm=NormKind.LAYERNORM,
                            positions=PositionKind.NONE, tied_embeddings=True, qkv_bias=False,
                            out_bias=False, mlp_bias=False,
                            source="MosaicML llm-foundry MPT (mpt_training_throughput.csv)")
    return Decoder(cfg, int(r.seq), flash_attention=True)


def plan_of(r, *, fsdp: bool = True) -> Plan:
    """The row's plan: FSDP over every GPU (or, ``fsdp=False``, the old ``--zero 3`` map)."""
    return Plan(tp=1, pp=1, dp=int(r.gpus), micro_batch=int(r.micro_batch),
                global_batch=int(r.global_batch), interleave=1,
                recompute="full" if bool(r.activation_checkpointing) else "none",
                sequence_parallel=False, zero=0 if fsdp else 3, overlap_grad_reduce=False,
                grad_accumulation_fusion=True, optimizer="adamw", ep=1,
                overlap_moe_comm=False, fsdp=fsdp, hsdp=0, reshard_after_forward=True,
                fsdp_reduce_dtype=REDUCE[r.mixed_precision],
                fsdp_param_dtype=PARAM[r.mixed_precision] if fsdp else None,
                # Composer's amp_* precision runs torch.autocast (the pytorch stack's
                # kernels); the megatron stack runs none
                autocast=fsdp and stack_of(r).autocast)


def stack_of(r):
    return get_stack("pytorch" if SCHEME[r.precision] == "bf16" else "megatron")


def tokens_per_s_per_gpu(r, *, fsdp: bool = True, contention: float | None = None) -> float:
    """The row's predicted training tokens per second per GPU; ``contention`` overrides the
    stack's ``comm_contention`` (a fit's grid)."""
    stack = stack_of(r) if fsdp else get_stack("megatron")
    if contention is not None:
        stack = replace(stack, comm_contention=contention)
    system = build_system(ROOT / "arch_configs" / f"{r.system}.toml").with_clock(CLOCK)
    p = predict(model_of(r), plan_of(r, fsdp=fsdp), SCHEME[r.precision], system,
                LlmParams(stack=stack, network_efficiency=None,
                          # FSDP runs in PyTorch: its reserve on either stack (llm --fsdp's)
                          memory_reserve_GiB=PYTORCH.memory_reserve_GiB if fsdp else None),
                engine="analytic")
    return p.tokens_per_s / int(r.gpus)


def rows() -> list[dict]:
    out = []
    for r in load().itertuples(index=False):
        pub = float(r.published_tokens_per_s_per_gpu)
        pred = tokens_per_s_per_gpu(r)
        before = tokens_per_s_per_gpu(r, fsdp=False)
        err = pred / pub - 1
        out.append(dict(id=r.id, system=r.system, stack=stack_of(r).name, quantity=(
            "tokens/s/GPU"), published=pub, accelsim=round(pred, 1), error=round(err, 4),
            before_zero3=round(before, 1), before_error=round(before / pub - 1, 4),
            tolerance=TOLERANCE, in_target=abs(err) <= TOLERANCE, label=r.label,
            source=r.source))
    return out


def summary(df: pd.DataFrame) -> str:
    return (f"{len(df)} rows: before (--zero 3) MAE {df.before_error.abs().mean():.1%}, signed "
            f"{df.before_error.mean():+.1%}; after (--fsdp) MAE {df.error.abs().mean():.1%}, "
            f"signed {df.error.mean():+.1%}; {int(df.in_target.sum())} within "
            f"{TOLERANCE:.0%}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "mpt_validation.csv")
    args = ap.parse_args(argv)
    df = pd.DataFrame(rows())
    df.to_csv(args.out, index=False)
    with pd.option_context("display.width", 200):
        print(df.drop(columns=["source"]).to_string(index=False))
    print(summary(df))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
