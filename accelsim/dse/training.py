"""Training-step model: one iteration of data-parallel training = per-layer compute (forward,
backward-data, weight-gradient; from :mod:`accelsim.perf` / :mod:`accelsim.dse`) followed by
gradient reduction (reduce-scatter, weight update, all-gather; from :mod:`accelsim.netsim`).

Models the throughput study of the HFP8 paper (Sun et al., NeurIPS 2019, appendix D, Figs. 8-9)::

    step_s      = compute_s + exposed_comm_s
    compute_s   = fwd_s + bwd_data_s + wgrad_s            (best mapping found by the explorer)
    comm_s      = reduce_scatter_s + all_gather_s + weight_update_s
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

    def __post_init__(self) -> None:
        for f in ("fwd_s", "bwd_data_s", "wgrad_s", "flops", "peak_flops"):
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

    reduce_scatter_s: float
    all_gather_s: float
    weight_update_s: float

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
    reduce_scatter_s: float
    all_gather_s: float
    weight_update_s: float
    comm_s: float
    hidden_comm_s: float
    exposed_comm_s: float
    step_s: float
    images_per_s: float
    comm_fraction: float  # exposed communication / step time
    achieved_flops: float  # useful FLOP/s
    peak_flops: float
    utilization: float  # achieved / peak

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


def combine(profile: ComputeProfile, comm: CommPhases, *, overlap: float = 0.0) -> StepTime:
    """Per-iteration time and throughput from compute and communication (pure arithmetic)."""
    if not (0.0 <= overlap <= 1.0):
        raise ValueError(f"overlap must be in [0, 1], got {overlap!r}")
    hidden = min(overlap * profile.backward_s, comm.reduce_scatter_s)
    exposed = comm.comm_s - hidden
    step = profile.compute_s + exposed
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
        reduce_scatter_s=comm.reduce_scatter_s,
        all_gather_s=comm.all_gather_s,
        weight_update_s=comm.weight_update_s,
        comm_s=comm.comm_s,
        hidden_comm_s=hidden,
        exposed_comm_s=exposed,
        step_s=step,
        images_per_s=profile.minibatch / step,
        comm_fraction=exposed / step,
        achieved_flops=achieved,
        peak_flops=profile.peak_flops,
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

#: NVIDIA's published ResNet-50 v1.5 mixed-precision (FP16 AMP) training throughput on DGX-1.
DGX1_SOURCE = ("NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "
               "'Training performance: NVIDIA DGX-1 16GB (8x V100 16GB)', mixed precision, "
               "batch 256 per GPU, pytorch-21.03 NGC container")
DGX1_PUBLISHED: tuple[tuple[int, float], ...] = ((1, 1200.0), (8, 8322.0))  # (GPUs, images/s)
DGX1_MINIBATCH_PER_GPU = 256


def _pick(table, scheme: str, link_GBps: float, compression: float):
    t = table[(table["scheme"] == scheme) & (table["link_GBps"] == link_GBps)
              & (table["compression"] == compression)]
    if len(t) != 1:
        raise ValueError(f"throughput table needs exactly one row for scheme={scheme}, "
                         f"link_GBps={link_GBps:g}, compression={compression:g}; found {len(t)}")
    return t.iloc[0]


def paper_metrics(table) -> dict[str, float]:
    """accelsim's value of every :data:`PUBLISHED` metric, from a throughput table
    (columns scheme, link_GBps, compression, images_per_s, the three phase times, comm_fraction)."""
    def gain(a: str, b: str) -> float:
        return 100.0 * (_pick(table, a, 32, 1)["images_per_s"]
                        / _pick(table, b, 32, 1)["images_per_s"] - 1.0)

    def cut(link: float, comp: float) -> float:
        f8 = _pick(table, "fp8", link, comp)
        h8 = _pick(table, "hfp8", link, comp)
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
        "fp16_comm_share_32GBps_pct": 100.0 * _pick(table, "fp16", 32, 1)["comm_fraction"],
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
