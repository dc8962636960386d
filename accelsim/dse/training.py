"""Training-step model: one iteration of data-parallel training = per-layer compute (forward,
backward-data, weight-gradient; from :mod:`accelsim.perf` / :mod:`accelsim.dse`) followed by
gradient reduction (reduce-scatter, weight update, all-gather; from :mod:`accelsim.netsim`).

Models the throughput study of the HFP8 paper (Sun et al., NeurIPS 2019, appendix D, Figs. 8-9)::

    step_s      = compute_s + compression_s + exposed_comm_s
    compute_s   = fwd_s + bwd_data_s + wgrad_s            (best mapping found by the explorer)
    comm_s      = reduce_scatter_s + all_gather_s + weight_update_s
    compression_s = the local gradient-compression pass (chip memory/vector work, not network)
    exposed     = comm_s - min(overlap * (bwd_data_s + wgrad_s), reduce_scatter_s)
    images_per_s = minibatch / step_s

``overlap`` is the fraction of the backward pass during which the gradient reduce-scatter may run
(layer-wise gradients are ready early); the all-gather and weight update need the fully reduced
gradients and are never hidden. The paper's published ratios are consistent with ``overlap = 0``
(communication after back-propagation; see ``scripts/calibrate.py``), which is the default.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from accelsim.dse.sweep import Infeasible

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SYSTEM = "arch_configs/hfp8-64chip.toml"
DEFAULT_WORKLOAD = "workloads/resnet50.toml"
SCHEMES = ("fp16", "fp8", "hfp8")
LINKS_GBPS = (32.0, 64.0, 128.0)
COMPRESSIONS = (1.0, 32.0, 64.0, 128.0, 256.0, 512.0)


#: How the compute of one iteration is mapped (see :mod:`accelsim.dse.explore`): chips are data
#: parallel, as in the paper, so the gradient reduction is the whole model over all chips; the
#: cores of a chip are free per layer (minibatch or output-channel split), as the paper's
#: design-space exploration tool "maps each layer". A pure data split of 20 cores over a few
#: images per chip makes every core write a full FP16 weight-gradient partial for each layer,
#: which no mapper would choose for the deep layers.
COMPUTE_STRATEGY = "data-chips"


# --------------------------------------------------------------------------- data
@dataclass(frozen=True)
class ComputeProfile:
    """Per-iteration compute time of one data-parallel replica (seconds) for one scheme."""

    scheme: str
    minibatch: int  # global minibatch (images per iteration, all chips)
    fwd_s: float
    bwd_data_s: float
    wgrad_s: float
    flops: float  # useful FLOPs per iteration (all chips): 2 * MACs of fwd + bwd_data + wgrad
    peak_flops: float  # system peak FLOP/s at the scheme's compute precision
    elementwise_s: float = 0.0  # part of fwd_s + bwd_data_s spent in non-GEMM layers (diagnostic)

    def __post_init__(self) -> None:
        for f in ("fwd_s", "bwd_data_s", "wgrad_s", "flops", "peak_flops", "elementwise_s"):
            v = getattr(self, f)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"ComputeProfile.{f} must be finite and >= 0, got {v!r}")
        if self.minibatch < 1:
            raise ValueError(f"ComputeProfile.minibatch must be >= 1, got {self.minibatch}")

    @property
    def compute_s(self) -> float:
        return self.fwd_s + self.bwd_data_s + self.wgrad_s

    @property
    def backward_s(self) -> float:
        return self.bwd_data_s + self.wgrad_s


@dataclass(frozen=True)
class CommPhases:
    """Gradient-reduction phase times per iteration (seconds)."""

    reduce_scatter_s: float  # network part only
    all_gather_s: float
    weight_update_s: float
    compression_s: float = 0.0  # local compress/decompress pass (chip memory/vector work)

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"CommPhases.{f.name} must be finite and >= 0, got {v!r}")

    @property
    def comm_s(self) -> float:
        return self.reduce_scatter_s + self.all_gather_s + self.weight_update_s


@dataclass(frozen=True)
class StepTime:
    """One training iteration: where the time goes and the resulting throughput."""

    scheme: str
    minibatch: int
    fwd_s: float
    bwd_data_s: float
    wgrad_s: float
    compute_s: float
    elementwise_s: float  # non-GEMM part of compute_s
    reduce_scatter_s: float
    all_gather_s: float
    weight_update_s: float
    comm_s: float
    compression_s: float
    hidden_comm_s: float
    exposed_comm_s: float
    step_s: float
    images_per_s: float
    comm_fraction: float  # exposed communication / step time
    achieved_flops_per_s: float  # useful FLOP/s
    peak_flops_per_s: float  # system peak at the scheme's compute precision
    utilization: float  # achieved / peak

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


def combine(profile: ComputeProfile, comm: CommPhases, *, overlap: float = 0.0) -> StepTime:
    """Per-iteration time and throughput from compute and communication (pure arithmetic)."""
    if not (0.0 <= overlap <= 1.0):
        raise ValueError(f"overlap must be in [0, 1], got {overlap!r}")
    hidden = min(overlap * profile.backward_s, comm.reduce_scatter_s)
    exposed = comm.comm_s - hidden
    step = profile.compute_s + comm.compression_s + exposed
    if step <= 0:
        raise ValueError("training step time is zero: compute and communication are both empty")
    achieved = profile.flops / step
    return StepTime(
        scheme=profile.scheme,
        minibatch=profile.minibatch,
        fwd_s=profile.fwd_s,
        bwd_data_s=profile.bwd_data_s,
        wgrad_s=profile.wgrad_s,
        compute_s=profile.compute_s,
        elementwise_s=profile.elementwise_s,
        reduce_scatter_s=comm.reduce_scatter_s,
        all_gather_s=comm.all_gather_s,
        weight_update_s=comm.weight_update_s,
        comm_s=comm.comm_s,
        compression_s=comm.compression_s,
        hidden_comm_s=hidden,
        exposed_comm_s=exposed,
        step_s=step,
        images_per_s=profile.minibatch / step,
        comm_fraction=exposed / step,
        achieved_flops_per_s=achieved,
        peak_flops_per_s=profile.peak_flops,
        utilization=achieved / profile.peak_flops if profile.peak_flops > 0 else float("nan"),
    )


STEP_COLUMNS = tuple(f.name for f in fields(StepTime))


# --------------------------------------------------------------------------- published numbers
PAPER = ("Sun et al., 'Hybrid 8-bit Floating Point (HFP8) Training and Inference for Deep Neural "
         "Networks', NeurIPS 2019, appendix D")


@dataclass(frozen=True)
class Published:
    """One number the paper reports, with the tolerance accelsim is held to."""

    key: str
    description: str
    value: float
    unit: str
    tolerance: float  # absolute, in ``unit``
    source: str


PUBLISHED: tuple[Published, ...] = (
    Published("fp8_over_fp16_gain_pct", "FP8 over FP16 throughput, 32 GB/s, no compression",
              31.0, "%", 3.0, PAPER + ", Fig. 8 / text"),
    Published("hfp8_over_fp8_gain_pct", "HFP8 over FP8 throughput, 32 GB/s, no compression",
              28.0, "%", 3.0, PAPER + ", Fig. 8 / text"),
    Published("hfp8_comm_cut_32GBps_pct", "HFP8 cut of RS+AG+WU time vs FP8, 32 GB/s",
              32.0, "%", 3.0, PAPER + ", Fig. 9"),
    Published("hfp8_comm_cut_64GBps_pct", "HFP8 cut of RS+AG+WU time vs FP8, 64 GB/s",
              36.0, "%", 3.0, PAPER + ", Fig. 9"),
    Published("hfp8_comm_cut_128GBps_pct", "HFP8 cut of RS+AG+WU time vs FP8, 128 GB/s",
              38.0, "%", 3.0, PAPER + ", Fig. 9"),
    Published("hfp8_comm_cut_32GBps_256x_pct",
              "HFP8 cut of RS+AG+WU time vs FP8, 32 GB/s, 256x compression",
              54.0, "%", 3.0, PAPER + ", Fig. 9"),
    Published("fp16_comm_share_32GBps_pct",
              "gradient-reduction share of FP16 runtime, 32 GB/s (paper: ~40-60%)",
              50.0, "%", 10.0, PAPER + ", text"),
)

#: NVIDIA's published ResNet-50 v1.5 mixed-precision (FP16 AMP) training throughput on DGX-1 with
#: 16 GB V100s, the machine ``arch_configs/dgx1-v100.toml`` describes (at NVIDIA's 256 images per
#: GPU the explorer's memory model needs ~11 GiB per GPU). The same README's 32 GB DGX-1 rows
#: (1156 / 8056 img/s, 6.96x scaling) differ by 3 %.
DGX1_SOURCE = ("NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "
               "'Training performance: NVIDIA DGX-1 16GB (8x V100 16GB)', mixed precision, "
               "batch 256 per GPU, pytorch-21.03 NGC container")
DGX1_PUBLISHED: tuple[tuple[int, float], ...] = ((1, 1200.0), (8, 8322.0))  # (GPUs, images/s)
DGX1_MINIBATCH_PER_GPU = 256


def _index(table) -> dict:
    """{(scheme, link_GBps, compression): row} from a DataFrame or a list of row dicts."""
    rows = table.to_dict("records") if hasattr(table, "to_dict") else table
    out: dict = {}
    for r in rows:
        key = (r["scheme"], float(r["link_GBps"]), float(r["compression"]))
        if key in out:
            raise ValueError(f"throughput table has two rows for scheme={key[0]}, "
                             f"link_GBps={key[1]:g}, compression={key[2]:g}")
        out[key] = r
    return out


def paper_metrics(table) -> dict[str, float]:
    """accelsim's value of every :data:`PUBLISHED` metric, from a throughput table (DataFrame
    or list of row dicts with scheme, link_GBps, compression, images_per_s, the three phase
    times and comm_fraction)."""
    idx = _index(table)

    def pick(scheme, link, comp):
        try:
            return idx[scheme, float(link), float(comp)]
        except KeyError:
            raise ValueError(f"throughput table needs a row for scheme={scheme}, "
                             f"link_GBps={link:g}, compression={comp:g}") from None

    def gain(a: str, b: str) -> float:
        return 100.0 * (pick(a, 32, 1)["images_per_s"] / pick(b, 32, 1)["images_per_s"] - 1.0)

    def cut(link: float, comp: float) -> float:
        f8, h8 = pick("fp8", link, comp), pick("hfp8", link, comp)
        c8 = f8["reduce_scatter_s"] + f8["all_gather_s"] + f8["weight_update_s"]
        ch = h8["reduce_scatter_s"] + h8["all_gather_s"] + h8["weight_update_s"]
        return 100.0 * (1.0 - ch / c8)

    return {
        "fp8_over_fp16_gain_pct": gain("fp8", "fp16"),
        "hfp8_over_fp8_gain_pct": gain("hfp8", "fp8"),
        "hfp8_comm_cut_32GBps_pct": cut(32, 1),
        "hfp8_comm_cut_64GBps_pct": cut(64, 1),
        "hfp8_comm_cut_128GBps_pct": cut(128, 1),
        "hfp8_comm_cut_32GBps_256x_pct": cut(32, 256),
        "fp16_comm_share_32GBps_pct": 100.0 * pick("fp16", 32, 1)["comm_fraction"],
    }


def paper_comparison(table):
    """One row per published number: published, accelsim, difference and whether it is within
    the stated tolerance."""
    import pandas as pd

    ours = paper_metrics(table)
    rows = []
    for p in PUBLISHED:
        v = ours[p.key]
        rows.append({"metric": p.key, "description": p.description, "published": p.value,
                     "accelsim": v, "difference": v - p.value, "unit": p.unit,
                     "tolerance": p.tolerance, "within_tolerance": abs(v - p.value) <= p.tolerance,
                     "source": p.source})
    return pd.DataFrame(rows)


def qualitative_claims(table) -> "Any":
    """The paper's qualitative statements, checked on a throughput table (claim, holds, evidence)."""
    import pandas as pd

    rows = []
    # Weight-update time does not depend on off-chip bandwidth.
    spread = []
    for (s, c), g in table.groupby(["scheme", "compression"]):
        wu = g["weight_update_s"]
        spread.append(float((wu.max() - wu.min()) / wu.max()) if wu.max() > 0 else 0.0)
    rows.append({"claim": "weight-update time is independent of off-chip bandwidth",
                 "holds": max(spread) < 1e-9,
                 "evidence": f"largest relative spread of WU over link_GBps: {max(spread):.2e}"})
    # Its share of communication grows with bandwidth.
    ok = True
    shares = []
    for (s, c), g in table[table["compression"] == 1].groupby(["scheme", "compression"]):
        g = g.sort_values("link_GBps")
        share = (g["weight_update_s"] / (g["reduce_scatter_s"] + g["all_gather_s"]
                                         + g["weight_update_s"])).to_numpy()
        ok &= bool((share[1:] >= share[:-1]).all())
        shares.append(f"{s}: " + "/".join(f"{100 * x:.0f}" for x in share) + "%")
    rows.append({"claim": "the weight-update share of communication grows with bandwidth",
                 "holds": ok, "evidence": "WU share at " + "/".join(
                     f"{b:g}" for b in sorted(table["link_GBps"].unique())) + " GB/s: "
                 + "; ".join(shares)})
    # Compression 32x-512x widens FP8-over-FP16 and HFP8-over-FP8.
    for a, b in (("fp8", "fp16"), ("hfp8", "fp8")):
        ok = True
        ev = []
        for link, g in table.groupby("link_GBps"):
            ga = g[g.scheme == a].set_index("compression")["images_per_s"]
            gb = g[g.scheme == b].set_index("compression")["images_per_s"]
            r = (100 * (ga / gb - 1)).sort_index()
            ok &= bool((r.diff().dropna() >= -1e-9).all())
            ev.append(f"{link:g} GB/s: " + ", ".join(
                f"{'none' if c == 1 else f'{c:g}x'} {v:+.0f}%" for c, v in r.items()))
        rows.append({"claim": f"gradient compression widens the {a.upper()}-over-{b.upper()} gain",
                     "holds": ok, "evidence": "; ".join(ev)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- global knobs
@dataclass(frozen=True)
class TrainingParams:
    """The few global, physically meaningful knobs of the step model (not per point).

    minibatch: global minibatch, images per iteration over all chips (data parallel).
    overlap: fraction of the backward pass during which the reduce-scatter can run (0: the
        gradient reduction starts after back-propagation, as the paper's numbers imply).
    per_tensor_overhead_s: fixed cost per parameter tensor per optimizer step on a chip
        (descriptor setup, synchronisation, scale bookkeeping); a sharded (HFP8) update still
        visits every tensor's slice, so this cost does not shrink with the shard.
    memory_efficiency: fraction of peak chip memory bandwidth a streaming update kernel reaches.
    """

    minibatch: int
    overlap: float = 0.0
    per_tensor_overhead_s: float = 0.0
    memory_efficiency: float = 1.0
    optimizer: str = "sgd-momentum"

    def __post_init__(self) -> None:
        if isinstance(self.minibatch, bool) or not isinstance(self.minibatch, int) \
                or self.minibatch < 1:
            raise ValueError(f"minibatch must be a positive integer, got {self.minibatch!r}")
        if not 0.0 <= self.overlap <= 1.0:
            raise ValueError(f"overlap must be in [0, 1], got {self.overlap!r}")
        if not (math.isfinite(self.per_tensor_overhead_s) and self.per_tensor_overhead_s >= 0):
            raise ValueError(f"per_tensor_overhead_s must be >= 0, got {self.per_tensor_overhead_s!r}")
        if not 0.0 < self.memory_efficiency <= 1.0:
            raise ValueError(f"memory_efficiency must be in (0, 1], got {self.memory_efficiency!r}")


#: The one parameter set behind every figure: the output of ``scripts/calibrate.py`` (run it to
#: reproduce; the two update knobs are fitted to the paper's four communication cuts, the
#: minibatch to all seven published numbers; compute mapped by :data:`COMPUTE_STRATEGY`).
#: Physically: 2.2 us per parameter tensor per update step, an update kernel at 53 % of the
#: 900 GB/s chip memory bandwidth, 6 images/chip.
PAPER_SETUP = TrainingParams(minibatch=384, overlap=0.0, per_tensor_overhead_s=2.2e-06,
                             memory_efficiency=0.53)
PAPER_SETUP_SOURCE = ("scripts/calibrate.py (2026-11-23, analytic engine, hfp8-64chip + "
                      "resnet50): per_tensor_overhead_s and memory_efficiency fitted to the four "
                      "published HFP8-vs-FP8 communication cuts, minibatch chosen among "
                      "1..32 images per chip against all seven published numbers; overlap 0 "
                      "(not fitted)")


# --------------------------------------------------------------------------- inputs
def resolve_path(path: str | Path) -> Path:
    """``path`` as given if it exists, else relative to the repository (editable installs), else
    FileNotFoundError naming both places."""
    p = Path(path)
    if p.exists():
        return p
    alt = REPO_ROOT / p
    if not p.is_absolute() and alt.exists():
        return alt
    raise FileNotFoundError(f"file not found: {p}" + ("" if p.is_absolute() else f" (nor {alt})"))


def off_chip_links(system) -> int:
    """Physical off-chip links of one chip (board links plus board-to-board links)."""
    n = system.link.links_per_chip
    if system.boards > 1:
        n += system.inter_board_link.links_per_chip
    return n


def per_link_GBps(system, link_GBps: float | None) -> float | None:
    """The paper's 'off-chip bandwidth' is the chip's (all links, one direction); netsim wants
    one physical link's. The chip's bandwidth is split evenly over its links."""
    if link_GBps is None:
        return None
    if not (isinstance(link_GBps, int | float) and math.isfinite(link_GBps) and link_GBps > 0):
        raise ValueError(f"link_GBps must be a positive number, got {link_GBps!r}")
    return float(link_GBps) / off_chip_links(system)


def chip_link_GBps(system) -> float:
    """The configured off-chip bandwidth of one chip (GB/s, one direction)."""
    bw = system.link.bandwidth_Bps * system.link.links_per_chip
    if system.boards > 1:
        bw += system.inter_board_link.bandwidth_Bps * system.inter_board_link.links_per_chip
    return bw / 1e9


def comm_phases(system, workload, scheme: str, params: TrainingParams, *,
                link_GBps: float | None = None, compression: float = 1.0,
                engine: str = "analytic") -> CommPhases:
    """Gradient-reduction phases from :func:`accelsim.netsim.gradient_reduction_times`.

    ``link_GBps`` is the chip's off-chip bandwidth (None: as configured). On one chip there is
    nothing to reduce: only the weight update remains."""
    from accelsim.netsim import UpdateParams, gradient_reduction_times, weight_update_cost
    from accelsim.netsim.system import chip_rates

    upd = UpdateParams(memory_efficiency=params.memory_efficiency,
                       per_tensor_overhead_s=params.per_tensor_overhead_s)
    n_params = int(workload.n_params)
    n_tensors = n_param_tensors(workload)
    if system.chips == 1:
        mem, vec = chip_rates(system)
        wu = weight_update_cost(n_params, scheme, 1, memory_Bps=mem, vector_ops_per_s=vec,
                                optimizer=params.optimizer, n_tensors=n_tensors, params=upd)
        return CommPhases(0.0, 0.0, wu.time_s, 0.0)
    p = gradient_reduction_times(system, n_params, scheme, link_GBps=per_link_GBps(system, link_GBps),
                                 compression=compression, engine=engine,
                                 optimizer=params.optimizer, n_tensors=n_tensors, update=upd)
    return CommPhases(reduce_scatter_s=p.reduce_scatter_s - p.compression_s,
                      all_gather_s=p.all_gather_s, weight_update_s=p.weight_update_s,
                      compression_s=p.compression_s)


def n_param_tensors(workload) -> int:
    """Number of parameter tensors (weights, biases, normalisation scale and shift): what a
    per-tensor optimizer step visits. ResNet-50: 53 conv + 53 x 2 BatchNorm + fc weight and bias
    = 161."""
    n = getattr(workload, "n_param_tensors", None)
    if n is not None:
        return int(n() if callable(n) else n)
    count = 0
    for layer in workload.layers:
        if layer.n_params == 0:
            continue
        if layer.kind in ("batchnorm", "layernorm"):
            count += 2
        elif layer.kind in ("conv", "linear"):
            count += 1 + int(bool(getattr(layer, "bias", False)))
        else:
            count += 1
    return count


# --------------------------------------------------------------------------- compute
@functools.lru_cache(maxsize=64)
def _cached_profile(system, workload, scheme: str, minibatch: int) -> ComputeProfile:
    return _compute_profile(system, workload, scheme, minibatch)


def compute_profile(system, workload, scheme: str, minibatch: int) -> ComputeProfile:
    """Per-iteration compute of the best mapping the explorer finds (cached per argument set;
    System and Workload are frozen, hence hashable)."""
    return _cached_profile(system, workload, scheme, int(minibatch))


# --------------------------------------------------------------------------- one training step
def training_step(system, workload, scheme: str, params: TrainingParams, *,
                  link_GBps: float | None = None, compression: float = 1.0,
                  engine: str = "analytic") -> StepTime:
    """Per-iteration time and images/s of ``workload`` on ``system`` under ``scheme``."""
    profile = compute_profile(system, workload, scheme, params.minibatch)
    comm = comm_phases(system, workload, scheme, params, link_GBps=link_GBps,
                       compression=compression, engine=engine)
    return combine(profile, comm, overlap=params.overlap)


def throughput_grid(system, workload, params: TrainingParams, *, schemes=SCHEMES,
                    links=LINKS_GBPS, compressions=COMPRESSIONS, engine: str = "analytic",
                    progress: bool = False):
    """Tidy table, one row per scheme x link_GBps x compression, all StepTime columns."""
    import pandas as pd
    from tqdm.auto import tqdm

    combos = [(s, b, c) for s in schemes for b in links for c in compressions]
    rows = []
    for s, b, c in tqdm(combos, desc=f"throughput ({engine})", disable=not progress, leave=False):
        st = training_step(system, workload, s, params, link_GBps=b, compression=c, engine=engine)
        rows.append({"scheme": s, "link_GBps": float(b), "compression": float(c),
                     "images_per_s": st.images_per_s, "kimages_per_s": st.images_per_s / 1e3,
                     **{k: v for k, v in st.as_row().items() if k not in ("scheme", "images_per_s")},
                     "engine": engine})
    return pd.DataFrame(rows)


BREAKDOWN_COLUMNS = ("scheme", "link_GBps", "compression", "reduce_scatter_s", "all_gather_s",
                     "weight_update_s", "comm_s", "compression_s", "engine")


def breakdown_table(throughput):
    """Figure 9's table: the three phase times per scheme x bandwidth x compression."""
    return throughput[list(BREAKDOWN_COLUMNS)].reset_index(drop=True)


# --------------------------------------------------------------------------- DGX-1 check
DEFAULT_DGX1 = "arch_configs/dgx1-v100.toml"


def single_chip_overrides() -> dict[str, Any]:
    """Config overrides that cut a multi-chip system down to one of its chips."""
    return {"system.chips": 1, "system.boards": 1, "system.chips_per_board": 1,
            "system.topology": "single"}


def dgx1_table(dgx1_path: str | Path, workload, params: TrainingParams, *,
               engine: str = "analytic"):
    """Predicted vs NVIDIA-published ResNet-50 FP16 (AMP) training throughput on 1 and 8 V100s
    (16 GB parts, see :data:`DGX1_SOURCE`).

    Same model and global knobs as the main study; the minibatch is NVIDIA's (256 per GPU)."""
    import dataclasses

    import pandas as pd

    from accelsim.arch import load_system

    rows = []
    for gpus, published in DGX1_PUBLISHED:
        ov = single_chip_overrides() if gpus == 1 else {}
        system = load_system(dgx1_path, ov)
        if system.chips != gpus:
            raise ValueError(f"{dgx1_path}: expected {gpus} GPUs, config has {system.chips}")
        p = dataclasses.replace(params, minibatch=DGX1_MINIBATCH_PER_GPU * gpus)
        st = training_step(system, workload, "fp16", p, link_GBps=None, compression=1.0,
                           engine=engine)
        rows.append({"case": f"{gpus} x V100", "gpus": gpus, "minibatch": p.minibatch,
                     "published": published, "predicted": st.images_per_s,
                     "error_pct": 100.0 * (st.images_per_s / published - 1.0),
                     "compute_s": st.compute_s, "comm_s": st.comm_s, "step_s": st.step_s,
                     "utilization": st.utilization, "source": DGX1_SOURCE})
    df = pd.DataFrame(rows)
    # scaling efficiency from 1 GPU: images/s of N GPUs over N x images/s of one
    one = df[df["gpus"] == 1].iloc[0]
    df["published_scaling_pct"] = 100.0 * df["published"] / (df["gpus"] * one["published"])
    df["predicted_scaling_pct"] = 100.0 * df["predicted"] / (df["gpus"] * one["predicted"])
    return df


# --------------------------------------------------------------------------- the whole study
@dataclass(frozen=True)
class StudyResult:
    """Everything the main job reports: tidy tables plus where they came from."""

    tables: dict  # name -> DataFrame (throughput, comm_breakdown, paper_comparison, ...)
    meta: dict  # engine per figure, parameters, input files and hashes, system summary


def sha256_file(path: str | Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def ceiling_check(throughput, peak_by_scheme: Mapping[str, float], flops_per_image: float):
    """Rows whose throughput would need more than the system's peak FLOP/s (should be none)."""
    ceiling = throughput["scheme"].map(peak_by_scheme) / flops_per_image
    return throughput[throughput["images_per_s"] > ceiling * (1 + 1e-12)]


def run_study(system_path: str | Path, workload_path: str | Path, *, engine: str = "analytic",
              dgx1_path: str | Path | None = None, params: TrainingParams | None = None,
              progress: bool = False) -> StudyResult:
    """The HFP8 appendix-D study on ``system_path`` (Figs. 8-9 grid, compression sweep,
    published-number comparison) plus the DGX-1 check when ``dgx1_path`` is given."""
    from accelsim.arch import load_system
    from accelsim.workload import load_workload

    params = params or PAPER_SETUP
    system = load_system(system_path)
    workload = load_workload(workload_path)
    thr = throughput_grid(system, workload, params, engine=engine, progress=progress)
    flops_per_image = compute_profile(system, workload, "fp16", params.minibatch).flops \
        / params.minibatch
    peaks = {s: compute_profile(system, workload, s, params.minibatch).peak_flops
             for s in SCHEMES}
    over = ceiling_check(thr, peaks, flops_per_image)
    if len(over):
        raise RuntimeError(f"model error: {len(over)} points exceed the peak-FLOPS ceiling")
    tables = {"throughput": thr, "comm_breakdown": breakdown_table(thr),
              "paper_comparison": paper_comparison(thr), "claims": qualitative_claims(thr),
              "implied": implied_by_paper(thr)}
    inputs = [{"role": "system", "path": str(system_path), "sha256": sha256_file(system_path)},
              {"role": "workload", "path": str(workload_path), "sha256": sha256_file(workload_path)}]
    if dgx1_path is not None:
        tables["dgx1"] = dgx1_table(dgx1_path, workload, params, engine=engine)
        inputs.append({"role": "dgx1", "path": str(dgx1_path), "sha256": sha256_file(dgx1_path)})
    meta = {
        "engine": engine,
        "figure_engines": {"fig8_throughput": engine, "compression_sweep": engine,
                           "fig9_comm_breakdown": engine, "dgx1": engine},
        "params": asdict(params),
        "params_source": PAPER_SETUP_SOURCE,
        "inputs": inputs,
        "system": {"name": system.name, "chips": system.chips,
                   "peak_fp16_PFLOPS": system.peak_flops("fp16") / 1e15,
                   "peak_fp8_PFLOPS": system.peak_flops("fp8") / 1e15,
                   "configured_off_chip_GBps": chip_link_GBps(system),
                   "off_chip_links_per_chip": off_chip_links(system)},
        "workload": {"name": workload.name, "n_params": int(workload.n_params),
                     "n_param_tensors": n_param_tensors(workload),
                     "train_flops_per_image": flops_per_image},
    }
    return StudyResult(tables=tables, meta=meta)


# --------------------------------------------------------------------------- sweep evaluator
#: Sweep keys that are arguments of the step model (everything else is a config override).
STEP_KEYS = ("system", "workload", "scheme", "minibatch", "link_GBps", "compression", "engine",
             "overlap", "per_tensor_overhead_s", "memory_efficiency", "optimizer")
#: Short names for common config overrides (dotted TOML keys of the arch config).
OVERRIDE_ALIASES = {
    "chips": "system.chips",
    "cores": "chip.cores",
    "rows": "core.rows",
    "cols": "core.cols",
    "memory_bandwidth_GBps": "chip.memory_bandwidth_GBps",
    "frequency_GHz": "core.frequency_GHz",
    "scratchpad_MiB": "core.scratchpad_MiB",
}


def sweep_defaults() -> dict[str, Any]:
    """Fixed values a sweep starts from (the main job's setup at the paper's lowest bandwidth)."""
    return {"system": DEFAULT_SYSTEM, "workload": DEFAULT_WORKLOAD, "scheme": "hfp8",
            "minibatch": PAPER_SETUP.minibatch, "link_GBps": 32.0, "compression": 1.0,
            "engine": "analytic"}


def check_sweep_keys(keys: Iterable[str]) -> None:
    """ValueError naming any key that is neither a step-model argument, an alias, an ``array``
    (RxC) nor a dotted config key."""
    bad = [k for k in keys
           if k not in STEP_KEYS and k not in OVERRIDE_ALIASES and k != "array" and "." not in k]
    if bad:
        raise ValueError(
            f"unknown sweep key(s) {bad}; use {', '.join(STEP_KEYS)}, "
            f"{', '.join(OVERRIDE_ALIASES)}, array (RxC) or a dotted config key such as "
            "chip.core.rows")


def _overrides(params: Mapping[str, Any]) -> dict[str, Any]:
    ov: dict[str, Any] = {}
    for k, v in params.items():
        if k in STEP_KEYS:
            continue
        if k == "array":
            r, _, c = str(v).lower().partition("x")
            try:
                ov["core.rows"], ov["core.cols"] = int(r), int(c)
            except ValueError:
                raise ValueError(f"array must be ROWSxCOLS, e.g. 32x32, got {v!r}") from None
        elif k in OVERRIDE_ALIASES:
            ov[OVERRIDE_ALIASES[k]] = v
        else:
            ov[k] = v
    if "system.chips" in ov:
        # keep the board structure consistent: as many boards as the chips need
        ov.setdefault("system.boards", None)
    return ov


@functools.lru_cache(maxsize=32)
def _load_system_cached(path: str, overrides: tuple[tuple[str, Any], ...]):
    from accelsim.arch import load_system, read_toml

    ov = dict(overrides)
    if ov.get("system.boards", 0) is None:
        ov.update(scaled_board_overrides(read_toml(resolve_path(path))["system"],
                                         ov["system.chips"], "system.topology" in ov))
    return load_system(resolve_path(path), ov)


#: Topologies built from 8-chip hybrid cube-mesh boards: a chip-count sweep changes the board
#: count and keeps the boards.
_BOARD_TOPOLOGIES = ("dgx1", "hybrid-cube-mesh-64", "multi-board")


def scaled_board_overrides(system_table: Mapping[str, Any], chips: int,
                           topology_given: bool = False) -> dict[str, Any]:
    """Config overrides that resize a system to ``chips`` keeping its board structure.

    Systems of hybrid cube-mesh boards (dgx1, hybrid-cube-mesh-64, multi-board) become one chip
    (``single``), one board (``dgx1``) or ``chips / 8`` boards (``multi-board``; 64 stays
    ``hybrid-cube-mesh-64``); any other count is :class:`Infeasible`, with the reason. Other
    topologies keep their name, with as many boards as the chips fill (or one board of all
    chips). ``topology_given``: the sweep sets the topology itself, so only the boards are
    adjusted."""
    per_board = int(system_table["chips_per_board"])
    topo = str(system_table.get("topology", ""))
    if not topology_given and topo in _BOARD_TOPOLOGIES and per_board == 8:
        if chips == 1:
            return {"system.topology": "single", "system.boards": 1,
                    "system.chips_per_board": 1}
        if chips == 8:
            return {"system.topology": "dgx1", "system.boards": 1, "system.chips_per_board": 8}
        if chips % 8 == 0 and chips >= 16:
            return {"system.topology": "hybrid-cube-mesh-64" if chips == 64 else "multi-board",
                    "system.boards": chips // 8}
        raise Infeasible(f"{chips} chips do not fill 8-chip hybrid cube-mesh boards ({topo}): "
                         "use 1, 8 or a multiple of 8 >= 16, or also set system.topology")
    if chips % per_board:
        return {"system.boards": 1, "system.chips_per_board": chips}
    return {"system.boards": chips // per_board}


@functools.lru_cache(maxsize=8)
def _load_workload_cached(path: str):
    from accelsim.workload import load_workload

    return load_workload(resolve_path(path))


def evaluate_point(point: Mapping[str, Any]) -> dict[str, Any]:
    """Sweep evaluator: one training step for a point (see :data:`STEP_KEYS`; other keys are
    config overrides). A config the system cannot take (e.g. a chip count its topology does not
    support) or a mapping that does not fit is :class:`Infeasible`, with the reason."""
    import dataclasses

    from accelsim.arch import ConfigError

    p = {**sweep_defaults(), **point}
    params = dataclasses.replace(
        PAPER_SETUP,
        minibatch=int(p["minibatch"]),
        **{k: type(getattr(PAPER_SETUP, k))(p[k])
           for k in ("overlap", "per_tensor_overhead_s", "memory_efficiency", "optimizer")
           if k in p})
    ov = _overrides(p)
    try:
        system = _load_system_cached(str(p["system"]), tuple(sorted(ov.items())))
    except ConfigError as exc:
        if ov:
            raise Infeasible(f"config override not possible: {exc}") from None
        raise
    workload = _load_workload_cached(str(p["workload"]))
    link = p.get("link_GBps")
    try:
        st = training_step(system, workload, str(p["scheme"]), params,
                           link_GBps=None if link in (None, "") else float(link),
                           compression=float(p["compression"]), engine=str(p["engine"]))
    except Infeasible:
        raise
    row = {k: v for k, v in st.as_row().items() if k not in ("scheme", "minibatch")}
    row["peak_images_per_s"] = st.peak_flops_per_s / (st.achieved_flops_per_s / st.images_per_s)
    return row


evaluate_point.columns = tuple(c for c in STEP_COLUMNS if c not in ("scheme", "minibatch")) \
    + ("peak_images_per_s",)


def _compute_profile(system, workload, scheme: str, minibatch: int) -> ComputeProfile:
    """Forward / backward-data / weight-gradient time of the best plan the explorer finds
    under :data:`COMPUTE_STRATEGY` (:func:`accelsim.dse.explore`: every chip takes a slice of
    the minibatch, as in the paper; inside a chip each layer picks how its cores split the work,
    best dataflow and scratchpad tiles). Element-wise layers' backward time counts as
    backward-data (it sits on the error path)."""
    from accelsim.arch.schemes import get_scheme
    from accelsim.dse.explore import explore

    if minibatch < system.chips:
        raise Infeasible(f"minibatch {minibatch} < {system.chips} chips: a chip would be idle "
                         "(data parallelism needs at least one image per chip)")
    sc = get_scheme(scheme)
    # Gradient communication is charged by the step model, not inside the plan choice: with a
    # data-parallel mapping and no overlap every dataflow pays the same communication.
    zero = {"reduce_scatter_s": 0.0, "all_gather_s": 0.0, "weight_update_s": 0.0}
    res = explore(system, workload, int(minibatch), sc, strategies=(COMPUTE_STRATEGY,),
                  overlap=(False,), comm=zero, executor="serial")
    if not res.best.get("feasible", True):
        raise Infeasible(f"no feasible plan: {res.best.get('reason', '')}")
    fwd, bwd, wg = res.fwd_s, res.bwd_data_s, res.wgrad_s
    lay = res.layers
    gemm = lay["layer"].map({ly.name: ly.is_gemm for ly in workload.layers}).astype(bool)
    return ComputeProfile(scheme=sc.name, minibatch=int(minibatch), fwd_s=fwd, bwd_data_s=bwd,
                          wgrad_s=wg, flops=float(lay["flops"].sum()),
                          peak_flops=float(system.peak_flops(sc.compute_precision)),
                          elementwise_s=float(lay.loc[~gemm, "time_s"].sum()))


def implied_by_paper(table) -> "Any":
    """What the paper's own numbers imply for compute, next to accelsim's values.

    With no overlap, T = compute + comm. The published HFP8-over-FP8 gain g2 and the 32 GB/s
    communication cut c give FP8 compute = X8 (1 - g2 (1 - c)) / (g2 - 1) (X8: FP8 comm time);
    the FP8-over-FP16 gain g1 then gives FP16 compute = g1 (FP8 compute + X8) - X16 (X16/X8 from
    accelsim's communication model)."""
    import pandas as pd

    idx = _index(table)
    pub = {p.key: p.value / 100.0 for p in PUBLISHED}
    g1, g2 = 1 + pub["fp8_over_fp16_gain_pct"], 1 + pub["hfp8_over_fp8_gain_pct"]
    c = pub["hfp8_comm_cut_32GBps_pct"]
    r16, r8 = idx["fp16", 32.0, 1.0], idx["fp8", 32.0, 1.0]
    x8, x16 = r8["comm_s"], r16["comm_s"]
    c8 = x8 * (1 - g2 * (1 - c)) / (g2 - 1)
    c16 = g1 * (c8 + x8) - x16
    rows = [
        {"quantity": "FP8 compute / FP16 compute", "implied_by_paper": c8 / c16,
         "accelsim": r8["compute_s"] / r16["compute_s"]},
        {"quantity": "FP16 compute / FP8 gradient-reduction time (32 GB/s)",
         "implied_by_paper": c16 / x8, "accelsim": r16["compute_s"] / x8},
        {"quantity": "FP8 / FP16 compute of the GEMM layers only (accelsim)",
         "implied_by_paper": float("nan"),
         "accelsim": (r8["compute_s"] - r8["elementwise_s"])
         / (r16["compute_s"] - r16["elementwise_s"])},
        {"quantity": "element-wise layers' share of FP16 compute (accelsim)",
         "implied_by_paper": float("nan"), "accelsim": r16["elementwise_s"] / r16["compute_s"]},
        {"quantity": "FP8 / FP16 time of the element-wise layers (accelsim; 8-bit tensors)",
         "implied_by_paper": float("nan"),
         "accelsim": r8["elementwise_s"] / r16["elementwise_s"]},
    ]
    return pd.DataFrame(rows)
