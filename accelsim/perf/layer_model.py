"""Per-layer, per-phase execution time on the cores and chips of a system (roofline style).

Models the bandwidth-centric, throughput-oriented per-layer analysis of the HFP8 paper
(Sun et al., NeurIPS 2019, appendix D). For each layer and training phase (``fwd``,
``bwd_data``, ``wgrad`` for GEMM layers; ``fwd``, ``bwd`` for element-wise layers) the work is
split over ``chip_dp x chip_mp`` chips and ``core_dp x core_mp`` cores per chip (data
parallelism splits the minibatch, model parallelism the output channels) and one core's share
takes

    time = max(compute, scratchpad, memory) + collective time of the split      (GEMM layers)
    time = max(sfu, memory) + chip.kernel_launch_s (0 unless set)              (element-wise)

* compute: systolic-array cycles (:mod:`accelsim.perf.systolic`) at the precision's MAC rate
  per PE (an FP8 PE reduces ``macs_per_pe`` K-elements per cycle), summed over the scratchpad
  tiles (each tile pays its own fill/drain), divided by the clock;
* scratchpad: operand and partial-sum traffic between scratchpad and array (the operand that
  lacks a spatially folded dimension is re-read once per fold), over the scratchpad bandwidth;
* memory: tile loads from chip memory (A re-read per N-tile, B per M-tile, C written once),
  over the core's share of the chip memory bandwidth (all cores stream at once);
* the tile ``(tm, tn, tk)`` is searched over a ladder of array-sized multiples and must fit the
  scratchpad double-buffered: ``2 (tm tk + tk tn) b_in + tm tn b_out <= scratchpad``;
* collectives: model parallelism all-gathers the forward outputs and all-reduces the
  backward-data partial sums among the ``mp`` ranks; data parallelism across cores
  reduce-scatters the weight gradient over the on-chip ring (across chips that is the
  gradient reduction of :mod:`accelsim.netsim`, not counted here).

With a memory hierarchy in the config (``[[chip.level]]``: GPUs), each GEMM phase is instead
timed on the whole chip by :func:`accelsim.perf.gemm.chip_gemm_time` (tiles over all cores,
operands shared under shared levels, waves, launch cost); the mapping's core split and its
on-chip collectives do not apply. Element-wise layers pay ``chip.kernel_launch_s`` per kernel
(:func:`accelsim.perf.kernel.kernel_time`) and, with ``chip.fusion``, keep only the traffic of
:data:`FUSED`. With ``chip.winograd`` (hierarchy chips only) a 3x3 stride-1 convolution in a
Winograd precision takes, per phase, the faster of implicit GEMM and the Winograd algorithms of
:mod:`accelsim.perf.winograd` (column ``algorithm``). A config without these keys gives the
per-core numbers above unchanged.

Precision: GEMM operands take 2 bytes (fp16) or 1 byte (fp8/hfp8) (all precisions:
:data:`accelsim.perf.gemm.OPERAND_BYTES`); partial sums in the
scratchpad 2 bytes (FP16 accumulation, HFP8 paper Sec. 3 / Wang et al. 2018); outputs written
to memory in the operand precision (quantized on the way out), weight gradients in FP16.
Under schemes with ``first_last_fp16`` the first and last GEMM layers run at the FP16 rate, as
in the paper. Element-wise layers (normalisation, activation, pooling, residual adds) compute in
FP16 on the SFUs at one rate whatever the scheme, but the tensors they read and write live in
memory in the precision of the GEMM that consumes them: under fp8/hfp8 the activations and
errors between layers are 8-bit (HFP8 paper: weights, activations and errors in 8 bits; they
arrive quantized from the previous GEMM), and FP16 only ahead of an FP16 layer (the last one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.perf.core_gemm import ACCUMULATOR_BYTES, ceil_div, core_gemm_time, hierarchy_gemms
from accelsim.perf.gemm import FITTED, OPERAND_BYTES, Efficiency
from accelsim.perf.kernel import kernel_time
from accelsim.perf.precision import as_scheme, layer_precisions
from accelsim.errors import InputError, check_int, choose
from accelsim.perf.systolic import DATAFLOWS, Dataflow
from accelsim.perf.winograd import applies as winograd_applies
from accelsim.perf.winograd import winograd_time
from accelsim.ring import ring_collective_time

GEMM_PHASES = ("fwd", "bwd_data", "wgrad")
ELEMENTWISE_PHASES = ("fwd", "bwd")
NORM_PARAM_BYTES = 2  # FP16 scale / shift of normalisation layers (kept at full precision)


def _output_bytes(phase: str, precision: str) -> float:
    """Bytes per element a GEMM writes to memory: activations and errors leave the SFU already
    quantized to the next GEMM's operand precision; weight gradients stay at least FP16 for
    reduction (FP32 under fp32/tf32)."""
    if phase == "wgrad":
        return max(ACCUMULATOR_BYTES, OPERAND_BYTES[precision])
    return OPERAND_BYTES[precision]


#: "cache": a level of chip.levels; "latency": the per-kernel launch cost (hierarchy model).
BOUNDS = ("compute", "scratchpad", "memory", "sfu", "comm", "cache", "latency")

#: Kernel fusion (chip.fusion): an element-wise layer folded into its neighbouring GEMMs or into
#: the one element-wise pass of its chain (cuDNN's fused conv/BN/ReLU/add, XLA, torch.compile)
#: keeps only this traffic, as (reads, writes) in units of its output tensor, and only the
#: kinds marked True launch a kernel of their own. Forward: BatchNorm statistics are summed in
#: the producing GEMM's epilogue and one pass normalizes, adds the residual (one extra read)
#: and applies the activation; backward: one fused BN-backward pass (unchanged traffic) absorbs
#: the activation's and the residual fork's gradients. Other kinds (pooling, softmax,
#: layernorm, embedding) are never fused.
FUSED = {
    "batchnorm": {"fwd": (1, 1, True), "bwd": (4, 1, True)},
    "relu": {"fwd": (0, 0, False), "bwd": (0, 0, False)},
    "gelu": {"fwd": (0, 0, False), "bwd": (0, 0, False)},
    "tanh": {"fwd": (0, 0, False), "bwd": (0, 0, False)},
    "add": {"fwd": (1, 0, False), "bwd": (1, 0, False)},
}

# Which GEMM dimension carries the minibatch (split by data parallelism) and which the output
# channels (split by model parallelism), per phase, in accelsim.workload's lowering.
_DP_DIM = {"fwd": "M", "bwd_data": "M", "wgrad": "K"}
_MP_DIM = {"fwd": "N", "bwd_data": "K", "wgrad": "N"}


@dataclass(frozen=True)
class Mapping:
    """How one layer is spread: chips and cores, each split into data x model parallel ranks."""

    chip_dp: int
    chip_mp: int
    core_dp: int
    core_mp: int
    dataflow: Dataflow = Dataflow.WS

    def __post_init__(self) -> None:
        for f in ("chip_dp", "chip_mp", "core_dp", "core_mp"):
            check_int(f"Mapping.{f}", getattr(self, f))
        object.__setattr__(self, "dataflow", choose(Dataflow, self.dataflow, "Mapping.dataflow"))

    @property
    def label(self) -> str:
        return (f"chips {self.chip_dp}dp x {self.chip_mp}mp, cores {self.core_dp}dp x "
                f"{self.core_mp}mp, {self.dataflow}")


def data_parallel(system, dataflow: str = "ws") -> Mapping:
    """The paper's mapping: every chip and every core takes a slice of the minibatch."""
    return Mapping(system.chips, 1, system.chip.cores, 1, dataflow)


def _layout_transpose_s(system, layer, b_local, chip_mp, precision: str,
                        efficiency: Efficiency):
    """Per phase, the NCHW <-> NHWC transposes of an array convolution when the framework keeps
    NCHW tensors (``chip.layout == "nchw"``): the phase's input and output tensors are each read
    and written once more, in two extra kernels. Zero for NHWC, for non-conv layers and for
    precisions the core runs on its vector units (``core.simt_precisions``)."""
    chip = system.chip
    if (chip.layout != "nchw" or layer.kind != "conv"
            or precision in chip.core.simt_precisions):
        return 0.0
    elems = (layer.input_elements + layer.output_elements) * b_local / np.asarray(chip_mp)
    mem_eff = efficiency.memory_efficiency if chip.has_hierarchy else 1.0
    return (2 * elems * OPERAND_BYTES[precision] / (chip.memory_bandwidth_Bps * mem_eff)
            + 2 * chip.kernel_launch_s)


def _ring_collective_s(kind: str, ranks, size_bytes, bandwidth_Bps):
    """Bandwidth term of a ring collective among ``ranks`` over ``bandwidth_Bps`` per rank
    (accelsim's one ring formula, no latency term); always an array."""
    return np.asarray(ring_collective_time(kind, ranks, size_bytes, bandwidth_Bps),
                      dtype=np.float64)


def _chip_link_Bps(system, chip_mp):
    """Per-direction bandwidth of a ring of ``chip_mp`` chips (one link each way; rings larger
    than a board cross the inter-board links, whichever is slower limits)."""
    on_board = system.link.bandwidth_Bps
    off_board = min(on_board, system.inter_board_link.bandwidth_Bps)
    return np.where(np.asarray(chip_mp) <= system.chips_per_board, on_board, off_board)


def evaluate_layer(system, layer, batch: int, precision: str, mappings, *,
                   efficiency: Efficiency = FITTED) -> dict[str, np.ndarray]:
    """Time of every phase of one layer under each mapping (pure; columns of equal length).

    ``efficiency``: the hierarchy model's global parameters (used only when the chip has
    memory levels; :data:`accelsim.perf.gemm.FITTED` by default).

    One row per mapping x phase. Infeasible rows (a split finer than the work, no tile fits
    the scratchpad) have ``feasible=False``, ``time_s=inf`` and a ``reason``. An
    ``attention`` layer is an InputError: a software stack's attention kernel times it
    (:mod:`accelsim.engine.stack_ops`), not this per-layer model.
    """
    batch = check_int("batch", batch)
    if layer.kind == "attention":
        raise InputError(f"layer {layer.name!r}: an attention layer is timed by a software "
                         "stack's attention kernel (accelsim.engine), not perf's layer model")
    core, chip = system.chip.core, system.chip
    maps = list(mappings)
    n = len(maps)
    chip_dp = np.array([m.chip_dp for m in maps])
    chip_mp = np.array([m.chip_mp for m in maps])
    core_dp = np.array([m.core_dp for m in maps])
    core_mp = np.array([m.core_mp for m in maps])
    dataflow = np.array([m.dataflow for m in maps])
    cores_used = core_dp * core_mp
    mem_bw = chip.memory_bandwidth_Bps / cores_used
    reason0 = np.full(n, "", dtype=object)
    reason0[chip_dp * chip_mp > system.chips] = f"uses more than the {system.chips} chips"
    reason0[cores_used > chip.cores] = f"uses more than the {chip.cores} cores per chip"
    reason0[(reason0 == "") & (chip_dp > batch)] = (
        f"minibatch {batch} < data-parallel chips")
    cols: dict[str, list] = {}

    def emit(phase, **kw):
        for k, v in kw.items():
            cols.setdefault(k, []).append(np.broadcast_to(np.asarray(v), (n,)) if
                                          np.ndim(v) == 0 else np.asarray(v))
        cols.setdefault("phase", []).append(np.full(n, phase, dtype=object))

    common = dict(layer=np.full(n, layer.name, dtype=object),
                  kind=np.full(n, layer.kind, dtype=object),
                  precision=np.full(n, precision, dtype=object),
                  chip_dp=chip_dp, chip_mp=chip_mp, core_dp=core_dp, core_mp=core_mp,
                  # the array dataflow means nothing for SFU work
                  dataflow=dataflow.astype(object) if layer.is_gemm
                  else np.full(n, "", dtype=object))
    hier = chip.has_hierarchy
    if chip.winograd and not hier:
        raise ValueError(f"system {system.name!r}: chip.winograd needs a memory hierarchy "
                         "([[chip.level]]); the per-core model has no Winograd convolutions")
    # with a memory hierarchy the cores of a chip share every GEMM through it (tiles over cores,
    # accelsim.perf.gemm): the core split of a mapping does not apply, nor its collectives
    cdp = np.ones(n, dtype=np.int64) if hier else core_dp
    cmp_ = np.ones(n, dtype=np.int64) if hier else core_mp
    if layer.is_gemm:
        b_local = ceil_div(batch, chip_dp)
        gemms = layer.gemms(batch)
        shares = {}  # phase -> (dims, count, a_u, c_u): one core's share under each mapping
        for phase, g in gemms.items():
            dims = {"M": np.full(n, g.M), "N": np.full(n, g.N), "K": np.full(n, g.K)}
            count = np.full(n, g.count)
            if layer.kind == "matmul":  # activation x activation: split the (batch x heads)
                count = ceil_div(count, chip_dp * chip_mp * (1 if hier else cores_used))
            else:
                # the minibatch part of the dp dimension shrinks to the chip's local batch;
                # finer splits than the work leave ranks idle (ceil), they are not infeasible
                dd, md = _DP_DIM[phase], _MP_DIM[phase]
                dims[dd] = ceil_div(dims[dd] // batch * b_local, cdp)
                dims[md] = ceil_div(dims[md], chip_mp * cmp_)
            # implicit GEMM: the k x k-expanded operand is built on chip from the input tensor
            a_u = c_u = 1.0
            if layer.kind == "conv":
                ratio = min(1.0, layer.in_h * layer.in_w /
                            (layer.out_h * layer.out_w * layer.kernel_h * layer.kernel_w))
                if phase == "bwd_data":
                    c_u = ratio
                else:
                    a_u = ratio
            shares[phase] = (dims, count, a_u, c_u)
        # one vectorized call for all phases and mappings; many mappings give a core the same
        # share, so time each distinct (shape, bandwidth, dataflow, bytes) once
        df_code = np.array([DATAFLOWS.index(d) for d in dataflow])
        key = np.concatenate([np.stack([
            dims["M"], dims["N"], dims["K"], count, mem_bw, df_code,
            np.full(n, _output_bytes(ph, precision), dtype=np.float64),
            np.full(n, a_u), np.full(n, c_u)]).astype(np.float64)
            for ph, (dims, count, a_u, c_u) in shares.items()], axis=1)
        if hier:
            key[4] = 0.0  # the chip's memory bandwidth is not split per core
        uniq, inv = np.unique(key, axis=1, return_inverse=True)
        if hier:
            res = hierarchy_gemms(chip, uniq, precision, efficiency)
        else:
            res = core_gemm_time(core, uniq[0].astype(np.int64), uniq[1].astype(np.int64),
                                 uniq[2].astype(np.int64), uniq[3].astype(np.int64), precision,
                                 np.array(DATAFLOWS)[uniq[5].astype(int)], uniq[4],
                                 out_bytes=uniq[6], a_unique=uniq[7], c_unique=uniq[8])
            res["bound"] = np.array(BOUNDS[:3], dtype=object)[res["bound"]]
            res["cache_s"] = res["latency_s"] = np.zeros(len(uniq[0]))
        res = {k: v[inv.ravel()] for k, v in res.items()}
        transpose_s = _layout_transpose_s(system, layer, b_local, chip_mp, precision,
                                          efficiency)
        for j, (phase, g) in enumerate(gemms.items()):
            dims, count, a_u, c_u = shares[phase]
            reason = reason0.copy()
            res_all = {k: v[j * n:(j + 1) * n] for k, v in res.items()}
            no_fit = (reason == "") & ~res_all["feasible"]
            reason[no_fit] = [f"smallest tile needs {int(b)} B > scratchpad "
                              f"{core.scratchpad_bytes} B" for b in res_all["min_tile_bytes"][no_fit]]
            out = res_all
            # collectives of the split (see module docstring); activations travel in the
            # operand precision, partial sums and weight gradients in FP16
            chip_out = g.count * g.M // batch * b_local  # chip's share, before the mp split
            if phase == "fwd":
                b_act = _output_bytes(phase, precision)
                y = chip_out * ceil_div(g.N, chip_mp) * b_act  # outputs a chip computes
                comm = (_ring_collective_s("all_gather", cmp_, y, chip.ring_bandwidth_Bps)
                        + _ring_collective_s("all_gather", chip_mp, chip_out * g.N * b_act,
                                             _chip_link_Bps(system, chip_mp)))
            elif phase == "bwd_data":
                dx = chip_out * g.N * c_u * ACCUMULATOR_BYTES  # after col2im: the input size
                comm = (_ring_collective_s("all_reduce", cmp_, dx, chip.ring_bandwidth_Bps)
                        + _ring_collective_s("all_reduce", chip_mp, dx,
                                             _chip_link_Bps(system, chip_mp)))
            else:  # wgrad: cores of a chip reduce-scatter their partial weight gradients
                dw = g.count * g.M * ceil_div(g.N, chip_mp) * ACCUMULATOR_BYTES
                comm = _ring_collective_s("reduce_scatter", cdp, dw, chip.ring_bandwidth_Bps)
            if layer.kind == "matmul":
                comm = np.zeros(n)
            roof = out["time_s"] + transpose_s
            algo = np.full(n, "implicit_gemm", dtype=object)
            comp_s, mem_s, cache_s, lat_s = (out["compute_s"], out["memory_s"], out["cache_s"],
                                             out["latency_s"])
            gbound = out["bound"]
            sfu_s = np.zeros(n)  # Winograd's transform kernels run on the vector units
            if chip.winograd and winograd_applies(layer, precision):
                # cuDNN benchmark mode: per layer and phase, the faster algorithm
                roof = np.array(roof, dtype=float)
                comp_s, mem_s, cache_s, lat_s = (np.array(x, dtype=float)
                                                 for x in (comp_s, mem_s, cache_s, lat_s))
                gbound = np.array(gbound, dtype=object)
                seen = {}
                for i in range(n):
                    if chip_mp[i] != 1 or reason[i]:
                        continue
                    key_i = (int(b_local[i]), dataflow[i])
                    if key_i not in seen:
                        seen[key_i] = winograd_time(
                            chip, layer, int(b_local[i]), phase, precision, dataflow[i],
                            _output_bytes(phase, precision), efficiency)
                    t_w, name, terms = seen[key_i]
                    if t_w < roof[i]:
                        roof[i], algo[i] = t_w, name
                        comp_s[i], mem_s[i] = terms["compute_s"], terms["memory_s"]
                        cache_s[i], lat_s[i] = terms["cache_s"], terms["latency_s"]
                        sfu_s[i], gbound[i] = terms["sfu_s"], terms["bound"]
            bound = np.where(comm > roof, "comm", gbound)
            time_s = np.where(reason == "", roof + comm, np.inf)
            emit(phase, **common, M=dims["M"], N=dims["N"], K=dims["K"], count=count,
                 flops=np.full(n, float(g.flops)), compute_s=comp_s,
                 scratchpad_s=out["scratchpad_s"], memory_s=mem_s,
                 sfu_s=sfu_s, comm_s=comm, cache_s=cache_s,
                 latency_s=lat_s, layout_s=np.where(algo == "implicit_gemm", transpose_s, 0.0),
                 algorithm=algo, time_s=time_s,
                 bound=bound.astype(object),
                 tile_m=out["tile_m"], tile_n=out["tile_n"], tile_k=out["tile_k"],
                 feasible=reason == "", reason=reason)
    else:
        ranks = chip_dp * chip_mp * (chip.cores if hier else cores_used)
        mem_Bps = chip.memory_bandwidth_Bps * (efficiency.memory_efficiency if hier else 1.0)
        b_el = OPERAND_BYTES[precision]
        for phase, e in layer.elementwise(batch).items():
            reason = reason0.copy()
            sfu_s = e.ops / ranks / core.sfu_ops_per_s
            own_kernel = True
            moved = e.bytes_moved(b_el)
            if chip.fusion and layer.kind in FUSED:
                r, w, own_kernel = FUSED[layer.kind][phase]
                moved = (r + w) * e.elements_written * b_el
            mem_s = moved / (chip_dp * chip_mp) / mem_Bps
            launch = chip.kernel_launch_s if own_kernel else 0.0
            t_kernel, bound = kernel_time({"sfu": sfu_s, "memory": mem_s}, launch)
            zero = np.zeros(n)
            emit(phase, **common, M=zero.astype(int), N=zero.astype(int), K=zero.astype(int),
                 count=zero.astype(int), flops=zero, compute_s=zero, scratchpad_s=zero,
                 memory_s=mem_s, sfu_s=sfu_s, comm_s=zero, cache_s=zero,
                 latency_s=np.full(n, launch), layout_s=zero,
                 algorithm=np.full(n, "", dtype=object),
                 time_s=np.where(reason == "", t_kernel, np.inf), bound=bound,
                 tile_m=zero.astype(int), tile_n=zero.astype(int), tile_k=zero.astype(int),
                 feasible=reason == "", reason=reason)
    return {k: np.concatenate(v) for k, v in cols.items()}


def layer_table(system, workload, batch: int, scheme, *, mapping: Mapping | None = None,
                dataflow: str = "ws"):
    """Tidy per-layer x phase times (pandas DataFrame) for one mapping of every layer.

    ``mapping`` defaults to :func:`data_parallel` (all chips and cores split the minibatch).
    ``scheme`` is an :class:`accelsim.arch.schemes.Scheme` or its name. Columns: layer, index,
    kind, phase, precision, the mapping (chip_dp, chip_mp, core_dp, core_mp, dataflow),
    per-core GEMM shape M/N/K/count, flops (whole layer, whole minibatch), compute_s,
    scratchpad_s, memory_s, sfu_s, comm_s, cache_s, latency_s (per-kernel launch cost),
    layout_s (NCHW transposes), algorithm (GEMM layers: ``implicit_gemm`` or
    ``winograd_f{2,4}_{fused,nonfused}``; empty for element-wise layers), time_s, bound (one of
    :data:`BOUNDS`: the largest term; for ``winograd_*_nonfused``, a sequence of transform
    kernels and a GEMM, the bound of the slower of the two, and its terms are their sums),
    tile_m/n/k, feasible, reason, and achieved_flops (flops / time_s).
    """
    import pandas as pd

    scheme = as_scheme(scheme)
    m = mapping or data_parallel(system, dataflow)
    prec = layer_precisions(workload, scheme)
    parts = []
    for i, layer in enumerate(workload.layers):
        cols = evaluate_layer(system, layer, batch, prec[layer.name],
                              [m])
        cols["index"] = np.full(len(cols["layer"]), i)
        parts.append(cols)
    df = pd.DataFrame({k: np.concatenate([p[k] for p in parts]) for k in parts[0]})
    df["achieved_flops"] = df["flops"] / df["time_s"]
    front = ["layer", "index", "kind", "phase", "precision", "time_s", "bound"]
    return df[front + [c for c in df.columns if c not in front]]
