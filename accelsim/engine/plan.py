"""A 3-D parallel training plan (tensor x pipeline x data parallel, micro-batching, interleaved
stages, recomputation, sequence parallelism, ZeRO stage) and the few global, physical
parameters of the LLM timing model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelsim.arch.schemes import OPTIMIZERS
from accelsim.bounds import (MAX_CHIPS, MAX_COUNT, MAX_DIM, MEMORY_RESERVE_GiB, check_bool,
                             check_number)
from accelsim.engine.stack import MEGATRON, Stack
from accelsim.engine.stages import StageSplit
from accelsim.ring import ALL_TO_ALL_EFFICIENCY
from accelsim.workload.gpt import GptConfig

if TYPE_CHECKING:
    from accelsim.engine.decoder import Decoder
from accelsim.errors import InputError, check_int

RECOMPUTE = ("none", "selective", "full")
#: context-parallel attention algorithms (Megatron-core / Transformer Engine ``cp_comm_type``:
#: ``p2p`` ring, ``all_gather``, ``a2a`` Ulysses)
CP_ALGOS = ("ring", "allgather", "ulysses")
ZERO_STAGES = (0, 1, 2, 3)
#: FSDP2's MixedPrecisionPolicy reduce_dtype choices (the gradient reduce-scatter's format)
FSDP_REDUCE_DTYPES = {"fp32": 4, "bf16": 2}
#: FSDP2's MixedPrecisionPolicy param_dtype choices (the gathered parameters' and compute
#: format), bytes per parameter
FSDP_PARAM_DTYPES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class Plan:
    """How ``tp x pp x dp`` GPUs train one global batch.

    Ranks are laid out as Megatron-LM does: tensor-parallel ranks adjacent (inside a node),
    then data-parallel, then pipeline stages (rank = t + tp * (d + dp * p)).
    ``interleave`` is the number of model chunks per pipeline stage (1: plain 1F1B).
    ``overlap_grad_reduce``: the gradient reduction runs during the last micro-batch's backward
    pass (PyTorch DDP buckets) instead of after the pipeline flush (Megatron's local DDP).
    ``optimizer``: ``adamw`` (default, as Megatron-LM trains), ``sgd-momentum`` or ``sgd``; with
    the scheme it fixes the formats of every training state
    (:meth:`accelsim.arch.Scheme.formats`).
    ``ep``: expert-parallel GPUs (mixture-of-experts models): the routed experts are split over
    ``ep`` data-parallel ranks, which exchange tokens by all-to-all; expert gradients are reduced
    over the ``dp / ep`` ranks that hold the same experts (Megatron-Core's expert parallelism).
    ``overlap_moe_comm``: each MoE layer's all-to-alls run beside the computation of another
    micro-batch (DeepSeek-V3's DualPipe, section 3.2.1; Megatron-Core's
    ``--overlap-moe-expert-parallel-comm``): only the part longer than the layer's forward +
    backward computation is exposed.
    ``grad_accumulation_fusion``: the weight-gradient GEMM accumulates into the main-gradient
    buffer in its epilogue (Megatron's default); off (``--no-gradient-accumulation-fusion``, as
    FP8-LM's public scripts run), every micro-batch writes its 16-bit weight gradient and a
    separate kernel adds it into the buffer.
    ``fsdp``: PyTorch FSDP (FULL_SHARD) over the data-parallel ranks instead of ZeRO: every
    decoder layer is one unit whose parameters are all-gathered before its forward and its
    backward pass, prefetched one unit ahead, and whose gradients are reduce-scattered as its
    backward pass ends, every micro-batch (:mod:`accelsim.engine.fsdp`). ``hsdp``: HSDP's
    shard-group size (0: the whole data-parallel group, plain FSDP): parameters are sharded
    within groups of ``hsdp`` ranks and the sharded gradients all-reduced across the ``dp /
    hsdp`` replicas. ``reshard_after_forward``: free each unit's gathered parameters after its
    forward pass (FSDP's default; off: keep them for the backward pass, no second gather).
    ``fsdp_reduce_dtype``: the gradient reduction's format (FSDP2's MixedPrecisionPolicy
    ``reduce_dtype``: ``fp32`` or ``bf16``). ``fsdp_param_dtype``: its ``param_dtype``, the
    gathered parameters' and the compute format (None: the run's compute format).
    ``autocast``: whether ``torch.autocast`` wraps the forward pass on the pytorch stacks (None:
    off under FSDP with a 16-bit param dtype, as torchtitan runs it; on otherwise). The one
    resolution of both: :func:`accelsim.engine.mixed_precision.resolve`.
    ``cp``: context-parallel GPUs (Megatron-core's ``context_parallel_size``): every sequence
    split over ``cp`` ranks placed right after the tensor-parallel ones (rank = t + tp * (c +
    cp * (d + dp * p))); each runs every GEMM and element-wise op on ``seq / cp`` tokens and
    1 / cp of the causal attention (two load-balanced chunks per rank); gradients and ZeRO
    shards span the ``dp x cp`` ranks holding the same parameters. ``cp_algo``: how the keys
    and values meet the queries (:mod:`accelsim.engine.context`): ``ring`` (KV blocks passed
    peer to peer under the attention), ``allgather`` (the full KV gathered per layer),
    ``ulysses`` (all-to-alls over heads).
    ``tp_comm_overlap``: Transformer Engine's userbuffers (Megatron-core's
    ``--tp-comm-overlap``): the sequence-parallel all-gathers and reduce-scatters run in
    chunks beside their GEMMs (:mod:`accelsim.engine.tp_overlap`); needs sequence parallelism
    and tp > 1, as Megatron does. ``pp_comm_overlap``: the pipeline's sends and receives on
    their own stream beside the next pass (Megatron-core's ``overlap_p2p_comm``, which it
    enables only for the interleaved schedule: needs pp > 1 and interleave > 1).
    ``first_stage_layers`` / ``last_stage_layers`` (None: not set; 0: a stage holding only
    the embedding / the output layer), ``account_for_embedding`` / ``account_for_loss``:
    Megatron-core's uneven pipeline splits (:mod:`accelsim.engine.stages`; :attr:`stage_split`).
    """

    tp: int
    pp: int
    dp: int
    micro_batch: int
    global_batch: int
    interleave: int = 1
    recompute: str = "none"
    sequence_parallel: bool = False
    zero: int = 0
    overlap_grad_reduce: bool = False
    grad_accumulation_fusion: bool = True
    optimizer: str = "adamw"
    ep: int = 1
    overlap_moe_comm: bool = False
    fsdp: bool = False
    hsdp: int = 0
    reshard_after_forward: bool = True
    fsdp_reduce_dtype: str = "fp32"
    fsdp_param_dtype: str | None = None
    autocast: bool | None = None
    cp: int = 1
    cp_algo: str = "ring"
    tp_comm_overlap: bool = False
    pp_comm_overlap: bool = False
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    account_for_embedding: bool = False
    account_for_loss: bool = False

    def __post_init__(self) -> None:
        for f in ("tp", "pp", "dp", "ep", "cp"):  # GPUs: at most a system's chips
            check_int(f"plan {f}", getattr(self, f), 1, MAX_CHIPS)
        for f in ("micro_batch", "global_batch", "interleave"):
            check_int(f"plan {f}", getattr(self, f), 1, MAX_COUNT)
        for f in ("sequence_parallel", "overlap_grad_reduce", "grad_accumulation_fusion",
                  "overlap_moe_comm", "fsdp", "reshard_after_forward", "tp_comm_overlap",
                  "pp_comm_overlap", "account_for_embedding", "account_for_loss"):
            check_bool(f"plan {f}", getattr(self, f))  # "off" is not False: refused
        self._check_fsdp()
        self._check_split()
        self._check_cp()
        self._check_overlap()
        if self.recompute not in RECOMPUTE:
            raise InputError(f"plan recompute must be one of {', '.join(RECOMPUTE)}, "
                             f"got {self.recompute!r}")
        if self.optimizer not in OPTIMIZERS:
            raise InputError(f"plan optimizer must be one of {', '.join(OPTIMIZERS)}, "
                             f"got {self.optimizer!r}")
        if self.zero not in ZERO_STAGES:
            raise InputError(f"plan zero must be one of 0, 1, 2, 3, got {self.zero!r}")
        if self.global_batch % (self.micro_batch * self.dp):
            raise InputError(f"global batch {self.global_batch} is not a multiple of "
                             f"micro-batch x dp = {self.micro_batch} x {self.dp}")
        if self.overlap_moe_comm and self.ep == 1:
            raise InputError("overlap_moe_comm needs expert parallelism (ep > 1): there is no "
                             "all-to-all to overlap")
        if self.dp % self.ep:
            raise InputError(f"ep {self.ep} must divide dp {self.dp} (experts are split over "
                             "data-parallel ranks)")
        if self.interleave > 1 and self.pp == 1:
            raise InputError(f"interleave {self.interleave} needs pipeline parallelism (pp > 1)")
        if self.interleave > 1 and self.n_micro % self.pp:
            raise InputError(f"interleaved schedule needs micro-batches per pipeline "
                             f"({self.n_micro}) to be a multiple of pp ({self.pp})")

    def _check_fsdp(self) -> None:
        check_int("plan hsdp", self.hsdp, 0, MAX_CHIPS)
        if self.fsdp_reduce_dtype not in FSDP_REDUCE_DTYPES:
            raise InputError(f"plan fsdp_reduce_dtype must be one of "
                             f"{', '.join(FSDP_REDUCE_DTYPES)}, got {self.fsdp_reduce_dtype!r}")
        if self.fsdp_param_dtype is not None and self.fsdp_param_dtype not in FSDP_PARAM_DTYPES:
            raise InputError(f"plan fsdp_param_dtype must be one of "
                             f"{', '.join(FSDP_PARAM_DTYPES)}, got {self.fsdp_param_dtype!r}")
        if self.autocast is not None:
            check_bool("plan autocast", self.autocast)
        if not self.fsdp:
            if self.fsdp_param_dtype is not None:
                raise InputError(f"plan fsdp_param_dtype {self.fsdp_param_dtype} needs fsdp")
            if self.hsdp:
                raise InputError(f"plan hsdp {self.hsdp} needs fsdp (HSDP is FSDP sharded "
                                 "within groups)")
            return
        used = [f"{k} {v}" for k, v, off in (("zero", self.zero, 0), ("pp", self.pp, 1),
                                             ("ep", self.ep, 1),
                                             ("overlap_grad_reduce", self.overlap_grad_reduce,
                                              False)) if v != off]
        if used:
            raise InputError(f"fsdp shards the model itself (its own overlap, no pipeline): "
                             f"drop {', '.join(used)}")
        if self.hsdp and self.dp % self.hsdp:
            raise InputError(f"hsdp shard group {self.hsdp} must divide dp {self.dp}")

    def _check_overlap(self) -> None:
        if self.tp_comm_overlap and (self.tp == 1 or not self.sequence_parallel):
            raise InputError(f"tp_comm_overlap overlaps the sequence-parallel all-gathers and "
                             f"reduce-scatters with their GEMMs: it needs tp > 1 (got "
                             f"{self.tp}) and sequence_parallel (got {self.sequence_parallel}), "
                             "as Megatron-core requires")
        if self.pp_comm_overlap and (self.pp == 1 or self.interleave == 1):
            raise InputError(f"pp_comm_overlap needs pp > 1 and interleave > 1 (got pp "
                             f"{self.pp}, interleave {self.interleave}): Megatron-core overlaps "
                             "pipeline sends only in its interleaved schedule")

    def _check_split(self) -> None:
        """The uneven split's rules that need no model (:mod:`accelsim.engine.stages`)."""
        given = []
        for f in ("first_stage_layers", "last_stage_layers"):
            if getattr(self, f) is not None:
                check_int(f"plan {f}", getattr(self, f), 0, MAX_COUNT)
                given.append(f)
        accounts = [f for f in ("account_for_embedding", "account_for_loss") if getattr(self, f)]
        if given and accounts:
            raise InputError(f"plan {' and '.join(given)} with {' and '.join(accounts)}: "
                             "give one kind of uneven split (Megatron-core refuses both)")
        if (given or accounts) and self.pp == 1:
            raise InputError(f"plan {' and '.join(given + accounts)} needs pipeline "
                             "parallelism (pp > 1)")

    @property
    def stage_split(self) -> StageSplit:
        """How the layers fall on the stages (all defaults: evenly)."""
        return StageSplit(self.first_stage_layers, self.last_stage_layers,
                          self.account_for_embedding, self.account_for_loss)

    def _check_cp(self) -> None:
        if self.cp_algo not in CP_ALGOS:
            raise InputError(f"plan cp_algo must be one of {', '.join(CP_ALGOS)}, "
                             f"got {self.cp_algo!r}")
        if self.cp == 1:
            return
        used = [k for k, on in (("fsdp", self.fsdp), (f"ep {self.ep}", self.ep > 1)) if on]
        if used:
            raise InputError(f"cp {self.cp} is modelled for Megatron's tensor / pipeline / data "
                             f"parallel plans: drop {', '.join(used)}")

    @property
    def dp_cp(self) -> int:
        """Ranks holding the same parameters: the data- and context-parallel ones (gradients
        reduced, ZeRO states sharded over them; Megatron-core's data-parallel-with-cp group)."""
        return self.dp * self.cp

    @property
    def shard_group(self) -> int:
        """Ranks one parameter is sharded over under FSDP (HSDP: the shard group)."""
        return self.hsdp or self.dp

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def n_micro(self) -> int:
        """Micro-batches per pipeline per iteration."""
        return self.global_batch // (self.micro_batch * self.dp)

    def check_model(self, model: GptConfig | Decoder) -> None:
        """Raise InputError when ``model`` cannot be split this way (invalid, not infeasible).
        Without an uneven split layers need not divide evenly over plain 1F1B stages (the
        first stages take one more); interleaved chunks must be equal; an uneven split follows
        Megatron-core's rules (:meth:`accelsim.engine.stages.StageSplit.check`)."""
        from accelsim.engine.decoder import Decoder

        model = Decoder.of(model)
        check_split(model, self.tp, self.pp)
        self.stage_split.check(model.layers, self.pp, self.interleave)
        if model.seq * self.micro_batch > MAX_DIM:
            raise InputError(f"seq x micro-batch = {model.seq * self.micro_batch:,} tokens per "
                             f"micro-batch: at most {MAX_DIM:,} (a GEMM dimension)")
        if self.sequence_parallel and model.seq % self.tp:
            raise InputError(f"sequence parallelism needs seq {model.seq} divisible by tp "
                             f"{self.tp}")
        model.check_split(self.tp, self.ep)
        self._check_cp_model(model)

    def _check_cp_model(self, model: Decoder) -> None:
        """Context parallelism's split rules: each rank takes two chunks of ``seq / (2 cp)``
        tokens (Megatron-core: "sequence length must be divisible by 2 x cp" for the causal
        load balance); Ulysses scatters the heads (and KV heads) of a tensor-parallel rank
        over the cp ranks."""
        c = self.cp
        if c == 1:
            return
        if model.seq % (2 * c):
            raise InputError(f"cp {c}: seq {model.seq} must be divisible by 2 x cp = {2 * c} "
                             "(two load-balanced chunks per rank)")
        if self.sequence_parallel and model.seq // c % self.tp:
            raise InputError(f"sequence parallelism needs each cp rank's seq / cp = "
                             f"{model.seq // c} tokens divisible by tp {self.tp}")
        if self.cp_algo == "ulysses":
            kv = max(1, model.kv_heads // self.tp)
            if (model.heads // self.tp) % c or kv % c:
                raise InputError(f"cp-algo ulysses: heads {model.heads} and kv_heads "
                                 f"{model.kv_heads} per tp rank (tp {self.tp}) must be divisible "
                                 f"by cp {c} (all-to-all over heads)")

    def check_placement(self, gpus_per_node: int) -> None:
        """Raise ValueError when the tensor-parallel group does not fit in one node of
        ``gpus_per_node`` GPUs (its collectives run on every layer; Megatron-LM keeps them on
        the node's NVLink/NVSwitch). Checked here, once, for every front-end."""
        check_tp_in_node(self.tp, gpus_per_node)


def check_split(model: Decoder, tp: int, pp: int) -> None:
    """The tensor x pipeline split rules every front-end shares (training and inference):
    tp divides the heads and the FFN, pp stages each get a layer."""
    if model.heads % tp:
        raise InputError(f"heads {model.heads} not divisible by tp {tp}")
    if model.ffn_size % tp:
        raise InputError(f"ffn {model.ffn_size} not divisible by tp {tp}")
    if model.layers < pp:
        raise InputError(f"{model.layers} layers cannot fill pp {pp} stages")


def check_tp_in_node(tp: int, gpus_per_node: int) -> None:
    """The placement rule: a tensor-parallel group stays inside one node (its collectives run
    on every layer; Megatron-LM keeps them on the node's NVLink/NVSwitch)."""
    if tp > gpus_per_node or gpus_per_node % tp:
        raise InputError(f"tp {tp} must divide the {gpus_per_node} GPUs of a node "
                         "(a tensor-parallel group stays inside one node)")


@dataclass(frozen=True)
class LlmParams:
    """The global parameters of one prediction: the fabric's and the software stack's.

    network_efficiency: None (the default): the system's (``[system] network_efficiency`` of
        the fabric preset: the fraction of a link's wire rate a collective reaches, fitted by
        scripts/llm_fit.py); a number overrides it for this prediction (a fit's grid).
    all_to_all_efficiency: fraction of a link's bandwidth an expert-parallel all-to-all
        (token dispatch and combine) reaches.
    nccl_latency: True (the default): collectives whose group spans nodes pay NCCL's own
        latency (its tuner's base and per-step constants, ring or tree as it picks:
        :data:`accelsim.netsim.nccl.NCCL_SIMPLE`) instead of the links' per-step latency;
        groups inside a node keep the links' (scripts/nccl_scale_validate.py, docs/netsim.md).
    stack: the software stack (:mod:`accelsim.engine.stack`; default ``megatron``, the stack
        the model was fitted on): fusion, per-kernel floors, attention kernel, autocast.
    memory_efficiency: fraction of HBM bandwidth that the non-GEMM (element-wise) kernels and
        the optimizer step reach; None: the stack's (``megatron`` 0.45, fitted by
        scripts/llm_fit.py; ``pytorch`` the copy-fitted stream bandwidth).
    memory_reserve_GiB: GPU memory per GPU outside the training tensors (CUDA context,
        communicator buffers, workspaces, allocator reserve); None: the stack's (``megatron``
        11.3, fitted on FP8-LM's 2023 Megatron-LM / MS-AMP runs on DGX H100: NCCL buffers are
        several GB per GPU with NVLink SHARP, NVIDIA/nccl#864,
        NVIDIA/NeMo-Framework-Launcher#127). One number for every system and model, not
        scaled by either: a property of the software stack (docs/llm.md); ``accelsim llm
        --memory-reserve`` sets it, 0 for a bare tensor count.
    Overrides (``--memory-reserve``, a fit's grid) are resolved here, once.
    """

    # the fabric preset's (arch_configs/*.toml [system] network_efficiency, fitted by
    # scripts/llm_fit.py); a number only to override it
    network_efficiency: float | None = None
    memory_efficiency: float | None = None
    memory_reserve_GiB: float | None = None
    stack: Stack = MEGATRON
    # the fabric's (accelsim.netsim.fabric.ALL_TO_ALL_EFFICIENCY, DeepEP's measured rates)
    all_to_all_efficiency: float = ALL_TO_ALL_EFFICIENCY
    nccl_latency: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.nccl_latency, bool):
            raise InputError(f"LlmParams.nccl_latency must be True or False, got "
                             f"{self.nccl_latency!r}")
        if not isinstance(self.stack, Stack):
            raise InputError(f"LlmParams.stack must be a Stack, got {self.stack!r}")
        if self.memory_efficiency is None:
            object.__setattr__(self, "memory_efficiency", self.stack.elementwise_efficiency)
        if self.memory_reserve_GiB is None:
            object.__setattr__(self, "memory_reserve_GiB", self.stack.memory_reserve_GiB)
        for f in ("network_efficiency", "memory_efficiency", "all_to_all_efficiency"):
            v = getattr(self, f)
            if f == "network_efficiency" and v is None:
                continue
            if isinstance(v, bool):
                raise InputError(f"LlmParams.{f} must be a number in (0, 1], got {v!r}")
            if not isinstance(v, (int, float)) or not 0 < v <= 1:
                raise InputError(f"LlmParams.{f} must be in (0, 1], got {v!r}")
        check_number("LlmParams.memory_reserve_GiB", self.memory_reserve_GiB,
                     *MEMORY_RESERVE_GiB)
