"""The hardware as frozen dataclasses, SI units inside: Core -> Chip -> System, plus Link.

Models the multi-chip training system of the IBM HFP8 paper (Sun et al., NeurIPS 2019,
appendix D) built from RaPiD-like cores (Fleischer et al., VLSI 2018; Venkataramani et al.,
ISCA 2021), and GPU systems described the same way (a V100 SM is one "core").
Derived quantities (peak FLOP/s per precision, aggregate bandwidths) are properties.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

PRECISIONS = ("fp16", "fp8", "hfp8")


def _check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")
    return precision


@dataclass(frozen=True)
class Link:
    """One kind of off-chip link. ``bandwidth_Bps`` is per link per direction (bytes/s)."""

    bandwidth_Bps: float
    latency_s: float
    links_per_chip: int

    @property
    def chip_bandwidth_Bps(self) -> float:
        """Injection bandwidth of one chip in one direction over all its links of this kind."""
        return self.bandwidth_Bps * self.links_per_chip


@dataclass(frozen=True)
class Core:
    """One compute core: a ``rows`` x ``cols`` systolic array of processing elements (PEs),
    each doing ``macs_per_cycle_per_pe(precision)`` multiply-accumulates per cycle, a private
    scratchpad and special-function units (SFUs, element-wise ops).

    ``mac_rates`` is a tuple of ``(precision, MACs per PE per cycle)`` pairs (a tuple keeps the
    dataclass hashable); use :meth:`macs_per_cycle_per_pe`.
    """

    rows: int
    cols: int
    frequency_Hz: float
    mac_rates: tuple[tuple[str, float], ...]
    scratchpad_bytes: int
    scratchpad_bandwidth_Bps: float
    sfu_ops_per_cycle: float

    @property
    def pes(self) -> int:
        return self.rows * self.cols

    def macs_per_cycle_per_pe(self, precision: str) -> float:
        _check_precision(precision)
        return dict(self.mac_rates)[precision]

    def macs_per_cycle(self, precision: str) -> float:
        """MACs per cycle of the whole array."""
        return self.pes * self.macs_per_cycle_per_pe(precision)

    def peak_flops(self, precision: str) -> float:
        """Peak FLOP/s (1 MAC = 2 FLOP)."""
        return 2.0 * self.macs_per_cycle(precision) * self.frequency_Hz

    @property
    def sfu_ops_per_s(self) -> float:
        return self.sfu_ops_per_cycle * self.frequency_Hz

    @property
    def cycle_s(self) -> float:
        return 1.0 / self.frequency_Hz


@dataclass(frozen=True)
class Chip:
    """``cores`` identical cores on an on-chip ring, sharing an off-chip memory (DRAM/HBM)."""

    cores: int
    core: Core
    ring_bandwidth_Bps: float
    memory_capacity_bytes: int
    memory_bandwidth_Bps: float

    def peak_flops(self, precision: str) -> float:
        return self.cores * self.core.peak_flops(precision)

    def macs_per_cycle(self, precision: str) -> float:
        return self.cores * self.core.macs_per_cycle(precision)

    @property
    def sfu_ops_per_s(self) -> float:
        return self.cores * self.core.sfu_ops_per_s

    @property
    def scratchpad_bytes(self) -> int:
        """Total scratchpad capacity of all cores."""
        return self.cores * self.core.scratchpad_bytes

    @property
    def scratchpad_bandwidth_Bps(self) -> float:
        """Aggregate scratchpad bandwidth of all cores."""
        return self.cores * self.core.scratchpad_bandwidth_Bps


@dataclass(frozen=True)
class System:
    """``chips`` identical chips on ``boards`` boards of ``chips_per_board``, joined by a named
    ``topology`` (built as a graph by :mod:`accelsim.netsim`). ``link`` is the intra-board
    chip-to-chip link, ``inter_board_link`` the board-to-board link (per chip)."""

    name: str
    description: str
    chips: int
    topology: str
    boards: int
    chips_per_board: int
    link: Link
    inter_board_link: Link
    chip: Chip

    def peak_flops(self, precision: str) -> float:
        return self.chips * self.chip.peak_flops(precision)

    @property
    def memory_capacity_bytes(self) -> int:
        return self.chips * self.chip.memory_capacity_bytes

    @property
    def cores(self) -> int:
        """Total cores in the system."""
        return self.chips * self.chip.cores

    def with_link_bandwidth(self, bandwidth_Bps: float) -> System:
        """The same system with a different intra-board link bandwidth (per link per direction)."""
        if not bandwidth_Bps > 0:
            raise ValueError(f"link bandwidth must be positive, got {bandwidth_Bps!r}")
        return replace(self, link=replace(self.link, bandwidth_Bps=float(bandwidth_Bps)))
