"""The hardware as frozen dataclasses, SI units inside: Core -> Chip -> System, plus Link.

Models the multi-chip training system of the IBM HFP8 paper (Sun et al., NeurIPS 2019,
appendix D) built from RaPiD-like cores (Fleischer et al., VLSI 2018; Venkataramani et al.,
ISCA 2021), and GPU systems described the same way (a V100 SM is one "core").
Derived quantities (peak FLOP/s per precision, aggregate bandwidths) are properties.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelsim.bounds import SI_RANGES, check_bool, check_number, check_si
from accelsim.errors import InputError, check_int

#: Every compute precision a core may be given a rate for (``core.macs_per_pe_per_cycle``), wide
#: to narrow: ``fp8`` is the generic 8-bit datapath, ``e4m3`` / ``e5m2`` the OCP FP8 formats
#: when a chip rates them apart, ``hfp8`` the HFP8 unit (1-4-3 forward, 1-5-2 backward) and
#: ``hif8`` the HiFloat8 one.
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "e4m3", "e5m2", "hfp8", "hif8", "int8",
              "int4", "fp4", "mxfp8", "mxfp6", "mxfp4", "nvfp4")
#: Bytes of block scales per element of the block-scaled formats (OCP MX: one E8M0 byte per 32
#: elements; NVFP4: one E4M3 byte per 16; the per-tensor FP32 scale of NVFP4 is negligible).
BLOCK_SCALE_BYTES: dict[str, float] = {"mxfp8": 1 / 32, "mxfp6": 1 / 32, "mxfp4": 1 / 32,
                                       "nvfp4": 1 / 16}
#: Bytes per element of a tensor stored in each precision: the element plus its share of the
#: block scales (:data:`BLOCK_SCALE_BYTES`). The one place these are defined.
OPERAND_BYTES: dict[str, float] = {
    "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "e4m3": 1, "e5m2": 1, "hfp8": 1,
    "hif8": 1, "int8": 1, "int4": 0.5, "fp4": 0.5,
    "mxfp8": 1 + 1 / 32, "mxfp6": 0.75 + 1 / 32, "mxfp4": 0.5 + 1 / 32, "nvfp4": 0.5 + 1 / 16,
}
#: Every format is a datapath: a precision runs at its own rate where the config gives one, else
#: at the first of these it gives -- the nearest wider datapath, narrowest first (the caller says
#: which in one note: :func:`accelsim.commands._common.datapath_note`). The 8-bit floating-point
#: formats fall back to the generic ``fp8`` rate (every config has one), int4 to int8, the 4-bit
#: and block-scaled formats through the wider block formats to fp8. The 16- and 32-bit
#: precisions have no fallback: a chip without their rate refuses them.
WIDER_DATAPATH: dict[str, tuple[str, ...]] = {
    "e4m3": ("fp8",),
    "e5m2": ("fp8",),
    "hfp8": ("fp8",),
    "hif8": ("fp8",),
    "int4": ("int8",),
    "fp4": ("mxfp4", "mxfp6", "mxfp8", "fp8"),
    "nvfp4": ("mxfp4", "fp4", "mxfp6", "mxfp8", "fp8"),
    "mxfp4": ("fp4", "mxfp6", "mxfp8", "fp8"),
    "mxfp6": ("mxfp8", "fp8"),
    "mxfp8": ("fp8",),
}
#: Activation tensor layouts: the array's convolutions work on NHWC (channels last).
LAYOUTS = ("nhwc", "nchw")
#: The rates every config must give (the HFP8 study's three); the others are optional.
REQUIRED_PRECISIONS = ("fp16", "fp8", "hfp8")


def _check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")
    return precision


def _check_counts(owner: object, *fields: str) -> None:
    """Each integer field of ``owner`` inside its range of :data:`accelsim.bounds.SI_RANGES`."""
    for f in fields:
        lo, hi = SI_RANGES[f]
        check_int(f"{type(owner).__name__}.{f}", getattr(owner, f), int(lo), int(hi))


def _check_quantities(owner: object, *fields: str) -> None:
    """Each SI field of ``owner`` a finite number inside its range (the config's, converted)."""
    for f in fields:
        check_si(type(owner).__name__, f, getattr(owner, f))


@dataclass(frozen=True)
class MemoryLevel:
    """One on-chip memory level between chip memory and the arrays (e.g. a GPU's L2 or an SM's
    shared memory): ``capacity_bytes`` and ``bandwidth_Bps`` per instance, each instance shared
    by ``shared_by`` cores (1 = private to a core; the chip's core count = one shared level).
    Levels are listed from the array outward."""

    name: str
    capacity_bytes: int
    bandwidth_Bps: float
    shared_by: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"MemoryLevel.name must be a non-empty string, got {self.name!r}")
        _check_counts(self, "shared_by")
        _check_quantities(self, "capacity_bytes", "bandwidth_Bps")


@dataclass(frozen=True)
class Link:
    """One kind of off-chip link. ``bandwidth_Bps`` is per link per direction (bytes/s)."""

    bandwidth_Bps: float
    latency_s: float
    links_per_chip: int

    def __post_init__(self) -> None:
        _check_counts(self, "links_per_chip")
        _check_quantities(self, "bandwidth_Bps", "latency_s")

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
    #: precisions a GPU runs on its vector (SIMT) units rather than the array (e.g. FP32 CUDA
    #: cores): they take any tensor layout natively (see Chip.layout)
    simt_precisions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_counts(self, "rows", "cols")
        _check_quantities(self, "frequency_Hz", "scratchpad_bytes", "scratchpad_bandwidth_Bps",
                          "sfu_ops_per_cycle")
        for p, rate in self.mac_rates:
            _check_precision(p)
            check_si("Core", f"mac_rates[{p!r}]", rate, "mac_rate")
        for p in self.simt_precisions:
            if p not in dict(self.mac_rates):
                raise InputError(f"Core.simt_precisions: {p!r} has no MAC rate in mac_rates")

    @property
    def pes(self) -> int:
        return self.rows * self.cols

    def datapath(self, precision: str) -> str:
        """The precision whose rate ``precision`` runs at: itself where the config gives a rate,
        else the first of ``WIDER_DATAPATH`` it gives (the nearest wider datapath)."""
        _check_precision(precision)
        rates = dict(self.mac_rates)
        if precision in rates:
            return precision
        return next((p for p in WIDER_DATAPATH.get(precision, ()) if p in rates), precision)

    def macs_per_cycle_per_pe(self, precision: str) -> float:
        _check_precision(precision)
        rates = dict(self.mac_rates)
        precision = self.datapath(precision)
        if precision not in rates:
            raise InputError(f"this core has no {precision} rate (core.macs_per_pe_per_cycle."
                             f"{precision} is not in its config); configured: "
                             f"{', '.join(rates)}")
        return rates[precision]

    def supports(self, precision: str) -> bool:
        """Whether the config gives a rate for ``precision`` (or a wider datapath runs it)."""
        return self.datapath(precision) in dict(self.mac_rates)

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
class ChipPower:
    """A chip's power and clock parameters (``[chip.power]``; SI units): the board power limit,
    the static (idle) power, the maximum SM clock, the voltage-frequency relation and the dynamic
    energies. ``voltage_floor`` is V(0)/V(f_max) of the linear relation
    ``V(f)/V(f_max) = voltage_floor + (1 - voltage_floor) f / f_max``; ``flop_J`` are
    ``(precision, J per FLOP at V(f_max))`` pairs of the tensor-core datapaths, ``memory_J_per_byte``
    the energy of a byte of chip-memory traffic at V(f_max). The formulas live in
    :mod:`accelsim.perf.power`."""

    power_limit_W: float
    static_W: float
    max_clock_Hz: float
    voltage_floor: float
    memory_J_per_byte: float
    flop_J: tuple[tuple[str, float], ...]
    #: sustained work runs at the clock its average power allows under ``power_limit_W`` (the
    #: default); False is the ``--clock boost`` what-if: the preset's fixed clock, as a burst
    #: shorter than the limiter's ~1 s window runs (:meth:`Chip.with_boost_clock`)
    enforced: bool = True

    def __post_init__(self) -> None:
        _check_quantities(self, "power_limit_W", "static_W", "max_clock_Hz", "memory_J_per_byte")
        if not self.static_W < self.power_limit_W:
            raise InputError(f"ChipPower: static_W {self.static_W!r} must be below the power "
                             f"limit {self.power_limit_W!r} W")
        if check_number("ChipPower.voltage_floor", self.voltage_floor, 0.0, 1.0) == 1:
            raise InputError("ChipPower.voltage_floor must be below 1 (V(0) < V(f_max)), got 1")
        for p, e in self.flop_J:
            _check_precision(p)
            check_si("ChipPower", f"flop_J[{p!r}]", e, "flop_J")
        check_bool("ChipPower.enforced", self.enforced)

    def has_energy(self, precision: str) -> bool:
        """Whether ``flop_pJ`` prices ``precision``'s datapath (fp32 on the SIMT cores is not
        fitted: the fit data are tensor-core GEMMs)."""
        return precision in dict(self.flop_J)

    def energy_per_flop_J(self, precision: str) -> float:
        """J per FLOP of ``precision``'s datapath at V(f_max) (resolve block-scaled formats with
        :meth:`Core.datapath` first)."""
        table = dict(self.flop_J)
        if precision not in table:
            raise InputError(f"[chip.power] gives no energy per FLOP for {precision!r} "
                             f"(flop_pJ has {', '.join(table) or 'none'})")
        return table[precision]


@dataclass(frozen=True)
class Chip:
    """``cores`` identical cores on an on-chip ring, sharing an off-chip memory (DRAM/HBM).

    Optional (defaults reproduce the plain per-core model): ``levels``, the memory hierarchy
    between chip memory and the arrays (innermost first; empty = every core streams from chip
    memory at 1/cores of its bandwidth); ``kernel_launch_s``, the fixed cost of every kernel
    (GEMM or element-wise pass); ``fusion``, whether element-wise layers fuse into the
    neighbouring GEMMs; ``layout``, the activation layout the framework keeps: ``"nchw"`` makes
    every array (tensor-core) convolution transpose its input and output to the array's
    ``"nhwc"`` and back (see :mod:`accelsim.perf.layer_model`); ``winograd``, whether 3x3
    stride-1 convolutions may use Winograd algorithms where the model finds them faster, as
    cuDNN's benchmark mode does (:mod:`accelsim.perf.winograd`); ``power``, the chip's power
    and clock parameters (None: no power model; :mod:`accelsim.perf.power`);
    ``unaligned_gemm_rate``, the share of the aligned tensor-core rate a GEMM reaches when a
    row stride (its N or K) is not a multiple of 16 bytes, so the GPU's library falls back to
    kernels without 16-byte vector or TMA loads (1: no penalty; :mod:`accelsim.perf.gemm`);
    ``split_k``, whether a GEMM whose output tiles leave cores idle may split its K over them
    (fp32 partial sums reduced by a second kernel), as GPU GEMM libraries do
    (:mod:`accelsim.perf.gemm`); ``host_link_Bps``, the chip's link to host memory, bytes/s
    per direction (PCIe or NVLink-C2C; None: not given), which serving's KV offload copies over
    (:mod:`accelsim.serving.scheduler`)."""

    cores: int
    core: Core
    ring_bandwidth_Bps: float
    memory_capacity_bytes: int
    memory_bandwidth_Bps: float
    levels: tuple[MemoryLevel, ...] = ()
    kernel_launch_s: float = 0.0
    fusion: bool = False
    layout: str = "nhwc"
    winograd: bool = False
    power: ChipPower | None = None
    unaligned_gemm_rate: float = 1.0
    split_k: bool = False
    host_link_Bps: float | None = None

    def __post_init__(self) -> None:
        _check_counts(self, "cores")
        _check_quantities(self, "ring_bandwidth_Bps", "memory_capacity_bytes",
                          "memory_bandwidth_Bps", "kernel_launch_s", "unaligned_gemm_rate")
        if self.host_link_Bps is not None:
            check_si("Chip", "host_link_Bps", self.host_link_Bps)
        for f in ("fusion", "winograd", "split_k"):  # "off" is not False: refused, not truthy
            check_bool(f"Chip.{f}", getattr(self, f))
        if self.layout not in LAYOUTS:
            raise InputError(f"Chip.layout must be one of {', '.join(LAYOUTS)}, got "
                             f"{self.layout!r}")
        for lv in self.levels:
            if self.cores % lv.shared_by:
                raise InputError(f"memory level {lv.name!r}: shared_by {lv.shared_by} does not "
                                 f"divide the {self.cores} cores")

    @property
    def has_hierarchy(self) -> bool:
        return bool(self.levels)

    @property
    def default_fusion(self) -> bool:
        """Whether a front-end fuses element-wise layers into GEMMs unless told otherwise: the
        config's ``fusion``, or on for a chip with a memory hierarchy (a GPU: cuDNN, XLA and
        torch.compile fuse them). ``predict``, ``sweep`` and :func:`accelsim.engine.simulate`
        share this one default."""
        return self.fusion or self.has_hierarchy

    def with_fusion(self, fusion: bool) -> Chip:
        return replace(self, fusion=check_bool("fusion", fusion))

    def with_layout(self, layout: str) -> Chip:
        return replace(self, layout=layout)

    def with_winograd(self, winograd: bool) -> Chip:
        return replace(self, winograd=check_bool("winograd", winograd))

    def with_power_limit(self, watts: float) -> Chip:
        """The same chip under another board power limit (needs ``power``)."""
        if self.power is None:
            raise InputError("this chip has no [chip.power] table: no power limit to change")
        lo, hi = SI_RANGES["power_limit_W"]
        watts = check_number("power limit (W)", watts, lo, hi)
        if watts <= self.power.static_W:
            raise InputError(f"power limit {watts:g} W must be above the chip's static power, "
                             f"{self.power.static_W:g} W")
        return replace(self, power=replace(self.power, power_limit_W=watts))

    def with_power_model(self) -> Chip:
        """The same chip with its GEMMs timed at their power-limited clock (needs ``power``).
        Kept for scripts: that is the default of every chip with a ``[chip.power]`` table."""
        if self.power is None:
            raise InputError("this chip has no [chip.power] table: no power model")
        return replace(self, power=replace(self.power, enforced=True))

    def with_boost_clock(self) -> Chip:
        """The ``--clock boost`` what-if: the preset's fixed clock whatever the power (a burst
        shorter than the limiter's window). A chip without a power table has no other clock."""
        if self.power is None:
            return self
        return replace(self, power=replace(self.power, enforced=False))

    @property
    def power_limited(self) -> bool:
        """Whether sustained work runs at its power-limited clock (a power table, enforced)."""
        return self.power is not None and self.power.enforced

    def with_memory_capacity(self, capacity_bytes: float) -> Chip:
        """The same chip with another chip-memory capacity (any number of bytes, rounded to a
        whole byte: ``96 * 2**30`` for a 96 GiB variant)."""
        b = check_si("Chip", "memory_capacity_bytes", capacity_bytes)
        return replace(self, memory_capacity_bytes=round(b))

    def with_memory_bandwidth(self, bandwidth_Bps: float) -> Chip:
        """The same chip with another chip-memory (HBM/DRAM) bandwidth, bytes/s."""
        return replace(self, memory_bandwidth_Bps=check_si("Chip", "memory_bandwidth_Bps",
                                                           bandwidth_Bps))

    def with_host_link_bandwidth(self, bandwidth_Bps: float) -> Chip:
        """The same chip with another link to host memory, bytes/s per direction."""
        return replace(self, host_link_Bps=check_si("Chip", "host_link_Bps", bandwidth_Bps))

    def with_frequency(self, frequency_Hz: float) -> Chip:
        """The same chip at another fixed SM clock (:meth:`at_clock`); with a power table, not
        above its ``max_clock_Hz`` (its voltage-frequency relation ends there)."""
        f = check_si("Core", "frequency_Hz", frequency_Hz)
        if self.power is not None and f > self.power.max_clock_Hz * (1 + 1e-12):
            raise InputError(f"clock {f / 1e9:g} GHz is above the chip's maximum clock, "
                             f"{self.power.max_clock_Hz / 1e9:g} GHz ([chip.power] "
                             "max_clock_MHz, where its voltage-frequency relation ends)")
        return self.at_clock(f)

    def at_clock(self, clock_Hz: float) -> Chip:
        """The same chip with its SM clock at ``clock_Hz``: the core clock and the bandwidth of
        each core's private levels (shared memory, given per clock in the presets) scale with
        ``clock_Hz / core.frequency_Hz``; shared levels (L2), chip memory and the launch time do
        not (the measurement behind it: :func:`accelsim.perf.power.system_at_clock`). The one
        owner of that rule: the power limiter's trial clocks and ``--frequency-GHz`` use it."""
        scale = clock_Hz / self.core.frequency_Hz
        levels = tuple(replace(lv, bandwidth_Bps=lv.bandwidth_Bps * scale) if lv.shared_by == 1
                       else lv for lv in self.levels)
        return replace(self, core=replace(self.core, frequency_Hz=float(clock_Hz)),
                       levels=levels)

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
    network_efficiency: float = 1.0

    def __post_init__(self) -> None:
        _check_counts(self, "chips", "boards", "chips_per_board")
        check_si(f"System {self.name!r}", "network_efficiency", self.network_efficiency)
        if self.boards * self.chips_per_board != self.chips:
            raise InputError(f"System {self.name!r}: boards x chips_per_board must equal chips "
                             f"({self.boards} x {self.chips_per_board} != {self.chips})")

    def peak_flops(self, precision: str) -> float:
        return self.chips * self.chip.peak_flops(precision)

    @property
    def memory_capacity_bytes(self) -> int:
        return self.chips * self.chip.memory_capacity_bytes

    @property
    def cores(self) -> int:
        """Total cores in the system."""
        return self.chips * self.chip.cores

    def with_fusion(self, fusion: bool) -> System:
        """The same system with kernel fusion of element-wise layers switched on or off."""
        return replace(self, chip=self.chip.with_fusion(fusion))

    def with_layout(self, layout: str) -> System:
        """The same system with the framework's activation layout ("nhwc" or "nchw")."""
        return replace(self, chip=self.chip.with_layout(layout))

    def with_winograd(self, winograd: bool) -> System:
        """The same system with Winograd convolution algorithms allowed (True) or not."""
        return replace(self, chip=self.chip.with_winograd(winograd))

    def with_power_limit(self, watts: float) -> System:
        """The same system with every chip under another board power limit (W)."""
        return replace(self, chip=self.chip.with_power_limit(watts))

    def with_power_model(self) -> System:
        """The same system with every GEMM timed at its power-limited clock (the default of
        every chip with a power table; kept for scripts)."""
        return replace(self, chip=self.chip.with_power_model())

    def with_boost_clock(self) -> System:
        """The same system at the preset's fixed clock (``--clock boost``)."""
        return replace(self, chip=self.chip.with_boost_clock())

    def with_clock(self, clock: str) -> System:
        """``clock`` ``"power"`` (the power-limited default) or ``"boost"``."""
        if clock == "boost":
            return self.with_boost_clock()
        if clock != "power":
            raise InputError(f"clock {clock!r}: expected 'power' or 'boost'")
        return self if self.chip.power is None else self.with_power_model()

    def with_memory_capacity(self, capacity_bytes: float) -> System:
        """The same system with every chip's memory capacity changed (bytes, rounded)."""
        return replace(self, chip=self.chip.with_memory_capacity(capacity_bytes))

    def with_memory_bandwidth(self, bandwidth_Bps: float) -> System:
        """The same system with every chip's memory bandwidth changed (bytes/s)."""
        return replace(self, chip=self.chip.with_memory_bandwidth(bandwidth_Bps))

    def with_host_link_bandwidth(self, bandwidth_Bps: float) -> System:
        """The same system with every chip's host link changed (bytes/s per direction)."""
        return replace(self, chip=self.chip.with_host_link_bandwidth(bandwidth_Bps))

    def with_frequency(self, frequency_Hz: float) -> System:
        """The same system with every chip at another fixed SM clock (Hz)."""
        return replace(self, chip=self.chip.with_frequency(frequency_Hz))

    def with_network_efficiency(self, efficiency: float) -> System:
        """The same system with another achievable fraction of its links' wire rate."""
        return replace(self, network_efficiency=efficiency)

    def with_link_bandwidth(self, bandwidth_Bps: float) -> System:
        """The same system with a different intra-board link bandwidth (per link per direction)."""
        bw = check_si("Link", "bandwidth_Bps", bandwidth_Bps)
        return replace(self, link=replace(self.link, bandwidth_Bps=bw))
