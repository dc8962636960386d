"""Area (um^2) and energy per operation (pJ) of one multiply-accumulate (MAC) unit by number
format, at a stated technology node, from cited published measurements.

The model (one owner: :func:`mac_cost`). A MAC is a multiplier of the operand format plus an
adder of the accumulator format (a non-fused multiply-add, as Horowitz's table prices them):

* **multiplier** of a float format with ``m`` stored mantissa bits and ``e`` exponent bits:
  ``k * (m + 1)**2`` (the significand array: ``(m+1) x (m+1)`` partial-product cells) plus an
  integer adder of ``e + 1`` bits (the exponent sum). ``k`` (area and energy separately) is
  fitted in log space to Horowitz's two FP multipliers (16 and 32 bit) after their exponent
  adders are taken out; it misses them by under 1 % (area) and 15-18 % (energy), which is the
  model's stated uncertainty. Integer multipliers: Horowitz's 8-bit multiplier as measured
  (other widths ``k_int * n**2``, ``k_int`` fitted to his 8- and 32-bit multipliers).
* **adder** of the accumulator: Horowitz's 16- and 32-bit FP adders (fp16 / fp32 accumulate)
  and 32-bit integer adder (int32 accumulate), as measured.
* **node scaling** from Horowitz's 45 nm / 0.9 V to another node: area x Stillmaker & Baas's
  45 nm -> node area factor; energy x the ratio of their energy polynomials
  ``a*Vdd**2 + b*Vdd + c`` at each node's supply voltage (:func:`node_scale`).

Every published number carries its source in :data:`PUBLISHED` (and below, where it is used).
The HFP8 paper's hardware claim (Sun et al., NeurIPS 2019, appendix D: twice the FP8 compute
elements in the area and power of the FP16 ones, 14 nm) is *derived* by :func:`fp8_packing`
from these sources, none of which is the HFP8 paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from accelsim.errors import InputError

HOROWITZ = ("M. Horowitz, \"Computing's energy problem (and what we can do about it)\", ISSCC "
            "2014, 45 nm 0.9 V energy and area table (reproduced in Gholami et al., \"A survey "
            "of quantization methods for efficient neural network inference\", 2021, Fig. 15)")
STILLMAKER = ("A. Stillmaker and B. Baas, \"Scaling equations for the accurate prediction of "
              "CMOS device performance from 180 nm to 7 nm\", Integration, the VLSI Journal 58 "
              "(2017) 74-81 (area-scaling table and per-node energy polynomials; values as "
              "tabulated in the Accelergy project's hwcomponents.scaling)")


class Op(StrEnum):
    """What a published entry measures."""

    INT_ADD = "int_add"
    INT_MUL = "int_mul"
    FP_ADD = "fp_add"
    FP_MUL = "fp_mul"


@dataclass(frozen=True)
class Published:
    """One published measurement of an arithmetic unit: ``bits`` wide, at ``node_nm`` and
    ``vdd_V``, with its ``source``."""

    op: Op
    bits: int
    area_um2: float
    energy_pJ: float
    node_nm: float
    vdd_V: float
    source: str


#: Horowitz ISSCC 2014, 45 nm, 0.9 V (the table's nine arithmetic rows).
PUBLISHED: tuple[Published, ...] = tuple(
    Published(op, bits, area, energy, 45.0, 0.9, HOROWITZ) for op, bits, area, energy in (
        (Op.INT_ADD, 8, 36.0, 0.03),
        (Op.INT_ADD, 16, 67.0, 0.05),
        (Op.INT_ADD, 32, 137.0, 0.1),
        (Op.FP_ADD, 16, 1360.0, 0.4),
        (Op.FP_ADD, 32, 4184.0, 0.9),
        (Op.INT_MUL, 8, 282.0, 0.2),
        (Op.INT_MUL, 32, 3495.0, 3.1),
        (Op.FP_MUL, 16, 1640.0, 1.1),
        (Op.FP_MUL, 32, 7700.0, 3.7),
    ))
REFERENCE_NODE_NM = 45.0
REFERENCE_VDD_V = 0.9


def published(op: Op, bits: int) -> Published:
    """The published entry for ``op`` at ``bits`` (KeyError if there is none)."""
    for p in PUBLISHED:
        if p.op == op and p.bits == bits:
            return p
    raise KeyError(f"no published {op} of {bits} bits")


# ----------------------------------------------------------------------------- formats
@dataclass(frozen=True)
class Operand:
    """A multiplier input format: ``mantissa_bits`` stored fraction bits and ``exponent_bits``
    (a float), or an integer of ``int_bits`` (``exponent_bits == 0``)."""

    name: str
    mantissa_bits: int
    exponent_bits: int
    int_bits: int = 0
    source: str = ""
    #: every exponent field encodes finite numbers (OCP E4M3 keeps one NaN, E2M1 none): the
    #: top exponent is usable, unlike IEEE-style formats (E5M2, fp16) that keep it for inf/NaN
    finite_only: bool = False

    @property
    def is_int(self) -> bool:
        return self.int_bits > 0

    def exponent_span(self) -> int:
        """Binades a nonzero value can take: the normal exponents plus the ``m`` subnormal
        binades below them (a float; 0 for an integer)."""
        if self.is_int:
            return 0
        normals = 2 ** self.exponent_bits - (1 if self.finite_only else 2)
        return normals + self.mantissa_bits


#: The operand formats of the table. Bit fields: IEEE 754 (fp32, fp16), bfloat16, OCP FP8 /
#: MX specs (E4M3, E5M2, E2M1), HFP8 (Sun et al. 2019: one unit takes 1-4-3 and 1-5-2, so it is
#: built for 3 mantissa and 5 exponent bits), HiF8 (Luo et al. 2024, arXiv 2409.16626: at most
#: 3 mantissa bits, exponents -22..15 = 6 bits once decoded; the prefix decoder is not priced).
OPERANDS: dict[str, Operand] = {o.name: o for o in (
    Operand("fp32", 23, 8, source="IEEE 754 binary32"),
    Operand("tf32", 10, 8, source="NVIDIA TF32: binary32 range, binary16 significand"),
    Operand("fp16", 10, 5, source="IEEE 754 binary16"),
    Operand("bf16", 7, 8, source="bfloat16"),
    Operand("fp8-e4m3", 3, 4, source="OCP FP8 E4M3", finite_only=True),
    Operand("fp8-e5m2", 2, 5, source="OCP FP8 E5M2"),
    Operand("hfp8", 3, 5, source="HFP8 unit (Sun et al. 2019): 1-4-3 forward and 1-5-2 "
                                 "backward on one multiplier -> 3 mantissa, 5 exponent bits"),
    Operand("hif8", 3, 6, source="HiF8 (Luo et al. 2024): <= 3 mantissa bits, exponent "
                                 "-22..15 (6 bits decoded)"),
    Operand("fp4-e2m1", 1, 2, source="OCP MX FP4 E2M1", finite_only=True),
    Operand("int8", 0, 0, int_bits=8, source="8-bit integer"),
    Operand("int4", 0, 0, int_bits=4, source="4-bit integer"),
)}


class Accumulator(StrEnum):
    """The adder a MAC accumulates in (each priced by a published adder of that width)."""

    FP32 = "fp32"
    FP16 = "fp16"
    INT32 = "int32"


_ACC_ENTRY = {Accumulator.FP32: (Op.FP_ADD, 32), Accumulator.FP16: (Op.FP_ADD, 16),
              Accumulator.INT32: (Op.INT_ADD, 32)}


# ------------------------------------------------------------------------ fitted constants
@dataclass(frozen=True)
class Fit:
    """A per-unit-size constant fitted to published points, and how far it misses them."""

    area_um2: float
    energy_pJ: float
    worst_area_miss: float  # max |model/published - 1| over the fitted points
    worst_energy_miss: float


def _geo(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _int_adder_fit() -> Fit:
    """Integer adder per bit (ripple/prefix adders grow linearly with width): least squares
    through the origin on Horowitz's 8/16/32-bit adders."""
    pts = [p for p in PUBLISHED if p.op == Op.INT_ADD]
    s2 = sum(p.bits ** 2 for p in pts)
    a = sum(p.bits * p.area_um2 for p in pts) / s2
    e = sum(p.bits * p.energy_pJ for p in pts) / s2
    return Fit(a, e, max(abs(a * p.bits / p.area_um2 - 1) for p in pts),
               max(abs(e * p.bits / p.energy_pJ - 1) for p in pts))


INT_ADDER_PER_BIT = _int_adder_fit()

_FP_MUL_FIELDS = {16: OPERANDS["fp16"], 32: OPERANDS["fp32"]}


def _fp_mul_fit() -> Fit:
    """Significand-array constant per (m+1)^2 cell: Horowitz's FP16 and FP32 multipliers less
    their exponent adders, geometric mean of the two (least squares in log space)."""
    ka, ke, pts = [], [], []
    for p in PUBLISHED:
        if p.op != Op.FP_MUL:
            continue
        f = _FP_MUL_FIELDS[p.bits]
        cells = (f.mantissa_bits + 1) ** 2
        ka.append((p.area_um2 - INT_ADDER_PER_BIT.area_um2 * (f.exponent_bits + 1)) / cells)
        ke.append((p.energy_pJ - INT_ADDER_PER_BIT.energy_pJ * (f.exponent_bits + 1)) / cells)
        pts.append((p, f, cells))
    a, e = _geo(ka), _geo(ke)

    def miss(k, kx, attr, f, cells, p):
        return abs((k * cells + kx * (f.exponent_bits + 1)) / getattr(p, attr) - 1)

    return Fit(a, e,
               max(miss(a, INT_ADDER_PER_BIT.area_um2, "area_um2", f, c, p) for p, f, c in pts),
               max(miss(e, INT_ADDER_PER_BIT.energy_pJ, "energy_pJ", f, c, p)
                   for p, f, c in pts))


FP_MUL_PER_CELL = _fp_mul_fit()


def _int_mul_fit() -> Fit:
    """Integer multiplier per n^2 cell: geometric mean over Horowitz's 8- and 32-bit ones."""
    pts = [p for p in PUBLISHED if p.op == Op.INT_MUL]
    a = _geo([p.area_um2 / p.bits ** 2 for p in pts])
    e = _geo([p.energy_pJ / p.bits ** 2 for p in pts])
    return Fit(a, e, max(abs(a * p.bits ** 2 / p.area_um2 - 1) for p in pts),
               max(abs(e * p.bits ** 2 / p.energy_pJ - 1) for p in pts))


INT_MUL_PER_CELL = _int_mul_fit()


# ------------------------------------------------------------------------- node scaling
#: Stillmaker & Baas 2017: area of a design at node Y relative to 45 nm (row "45 nm" of their
#: area-scaling table).
AREA_FROM_45NM: dict[float, float] = {
    130.0: 6.4, 90.0: 2.8, 65.0: 1.5, 45.0: 1.0, 32.0: 0.46, 20.0: 0.21, 16.0: 0.19,
    14.0: 0.17, 10.0: 0.1, 7.0: 0.059}
#: Stillmaker & Baas 2017: energy per operation at node N and supply V is proportional to
#: ``a*V**2 + b*V + c`` (their fitted per-node polynomials).
ENERGY_POLY: dict[float, tuple[float, float, float]] = {
    130.0: (7.171, -6.709, 2.904), 90.0: (4.762, -4.781, 2.092),
    65.0: (3.755, -4.398, 1.975), 45.0: (1.103, -0.362, 0.2767),
    32.0: (0.9559, -0.7823, 0.471), 20.0: (0.373, -0.1582, 0.04104),
    16.0: (0.2958, -0.1241, 0.03024), 14.0: (0.2363, -0.09675, 0.02239),
    10.0: (0.2068, -0.09311, 0.02375), 7.0: (0.1776, -0.09097, 0.02447)}
#: Nominal supply per node (assumption: the PTM/PTM-MG nominal voltages Stillmaker & Baas's
#: fits are built on; 14 nm at 0.8 V). A caller may give its own.
NOMINAL_VDD_V: dict[float, float] = {
    130.0: 1.3, 90.0: 1.2, 65.0: 1.1, 45.0: 1.0, 32.0: 0.9, 20.0: 0.9, 16.0: 0.85,
    14.0: 0.8, 10.0: 0.75, 7.0: 0.7}


@dataclass(frozen=True)
class NodeScale:
    """Factors that take a 45 nm / 0.9 V cost to ``node_nm`` at ``vdd_V``."""

    node_nm: float
    vdd_V: float
    area: float
    energy: float


def node_scale(node_nm: float, vdd_V: float | None = None) -> NodeScale:
    """Area and energy factors from Horowitz's 45 nm / 0.9 V to ``node_nm`` (one of the
    nodes Stillmaker & Baas tabulate) at ``vdd_V`` (default: the node's nominal supply)."""
    node = float(node_nm)
    if node not in AREA_FROM_45NM:
        raise InputError(f"technology node {node_nm!r} nm: expected one of "
                         f"{', '.join(f'{n:g}' for n in AREA_FROM_45NM)}")
    v = NOMINAL_VDD_V[node] if vdd_V is None else float(vdd_V)
    if not (0.3 <= v <= 2.0):
        raise InputError(f"supply voltage {vdd_V!r} V out of range [0.3, 2.0]")

    def poly(n, volts):
        a, b, c = ENERGY_POLY[n]
        return a * volts ** 2 + b * volts + c

    return NodeScale(node, v, AREA_FROM_45NM[node],
                     poly(node, v) / poly(REFERENCE_NODE_NM, REFERENCE_VDD_V))


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class UnitCost:
    """Area and energy per operation of one unit at a node, with the sources it rests on."""

    area_um2: float
    energy_pJ: float
    sources: tuple[str, ...]

    def __add__(self, other: UnitCost) -> UnitCost:
        return UnitCost(self.area_um2 + other.area_um2, self.energy_pJ + other.energy_pJ,
                        tuple(dict.fromkeys(self.sources + other.sources)))


def multiplier_cost(operand: Operand) -> UnitCost:
    """The multiplier of ``operand`` at 45 nm / 0.9 V."""
    if operand.is_int:
        if operand.int_bits == 8:
            p = published(Op.INT_MUL, 8)
            return UnitCost(p.area_um2, p.energy_pJ, (p.source,))
        c = operand.int_bits ** 2
        return UnitCost(INT_MUL_PER_CELL.area_um2 * c, INT_MUL_PER_CELL.energy_pJ * c,
                        (HOROWITZ + " (int multiplier ~ n^2, fitted to 8/32 bit)",))
    cells = (operand.mantissa_bits + 1) ** 2
    exp = operand.exponent_bits + 1
    return UnitCost(FP_MUL_PER_CELL.area_um2 * cells + INT_ADDER_PER_BIT.area_um2 * exp,
                    FP_MUL_PER_CELL.energy_pJ * cells + INT_ADDER_PER_BIT.energy_pJ * exp,
                    (HOROWITZ + " (FP multiplier ~ (m+1)^2 + exponent adder, fitted to "
                                "16/32 bit)", operand.source))


def adder_cost(acc: Accumulator) -> UnitCost:
    """The accumulator's adder at 45 nm / 0.9 V (a published entry, as measured)."""
    p = published(*_ACC_ENTRY[Accumulator(acc)])
    return UnitCost(p.area_um2, p.energy_pJ, (p.source,))


@dataclass(frozen=True)
class MacCost:
    """One MAC unit: ``operand`` x ``operand`` + ``accumulator``, at ``node_nm``."""

    operand: str
    accumulator: str
    node_nm: float
    vdd_V: float
    area_um2: float
    energy_pJ: float
    sources: tuple[str, ...]


def mac_cost(operand: str, accumulator: str | Accumulator, node_nm: float = 45.0,
             vdd_V: float | None = None) -> MacCost:
    """Area and energy per MAC of ``operand`` (a key of :data:`OPERANDS`) accumulating in
    ``accumulator``, scaled to ``node_nm`` (45 nm: Horowitz's node, unscaled)."""
    if operand not in OPERANDS:
        raise InputError(f"unknown MAC operand format {operand!r}; expected one of "
                         f"{', '.join(OPERANDS)}")
    try:
        acc = Accumulator(accumulator)
    except ValueError:
        raise InputError(f"unknown accumulator {accumulator!r}; expected one of "
                         f"{', '.join(a.value for a in Accumulator)}") from None
    unit = multiplier_cost(OPERANDS[operand]) + adder_cost(acc)
    if node_nm == REFERENCE_NODE_NM and vdd_V is None:
        s = NodeScale(REFERENCE_NODE_NM, REFERENCE_VDD_V, 1.0, 1.0)
    else:
        s = node_scale(node_nm, vdd_V)
    sources = unit.sources + ((STILLMAKER,) if s.node_nm != REFERENCE_NODE_NM
                              or s.vdd_V != REFERENCE_VDD_V else ())
    return MacCost(operand, acc.value, s.node_nm, s.vdd_V, unit.area_um2 * s.area,
                   unit.energy_pJ * s.energy, sources)


#: The table's rows: every operand format with the accumulators it is built with (floats
#: narrower than fp32 in fp16 and fp32; fp32/tf32 in fp32; integers in int32).
TABLE_ROWS: tuple[tuple[str, Accumulator], ...] = tuple(
    [("fp32", Accumulator.FP32), ("tf32", Accumulator.FP32)]
    + [(o, a) for o in ("fp16", "bf16", "fp8-e4m3", "fp8-e5m2", "hfp8", "hif8", "fp4-e2m1")
       for a in (Accumulator.FP32, Accumulator.FP16)]
    + [("int8", Accumulator.INT32), ("int4", Accumulator.INT32)])


def mac_table(node_nm: float = 14.0, vdd_V: float | None = None) -> tuple[MacCost, ...]:
    """Every row of :data:`TABLE_ROWS` at ``node_nm`` (default 14 nm, the HFP8 paper's node)."""
    return tuple(mac_cost(o, a, node_nm, vdd_V) for o, a in TABLE_ROWS)


# ------------------------------------------------------- accelsim precisions -> MAC units
#: The MAC unit an accelsim compute precision (:data:`accelsim.arch.model.PRECISIONS`) runs on:
#: (operand format, accumulator). fp16 and the HFP8 formats accumulate in fp16 as in the HFP8
#: paper's design (Sun et al. 2019 and Wang et al. 2018: FP8 products, FP16 chunk accumulation;
#: RaPiD's FP16 FMA); bf16/tf32/fp32 and the MX/NV block formats in fp32 (GPU tensor cores);
#: integers in int32. Block formats: the element multiplier and, per block, the fp32
#: accumulator (:data:`BLOCK_ACCUMULATION`).
PRECISION_MAC: dict[str, tuple[str, Accumulator]] = {
    "fp32": ("fp32", Accumulator.FP32), "tf32": ("tf32", Accumulator.FP32),
    "bf16": ("bf16", Accumulator.FP32), "fp16": ("fp16", Accumulator.FP16),
    "fp8": ("fp8-e4m3", Accumulator.FP16), "e4m3": ("fp8-e4m3", Accumulator.FP16),
    "e5m2": ("fp8-e5m2", Accumulator.FP16), "hfp8": ("hfp8", Accumulator.FP16),
    "hif8": ("hif8", Accumulator.FP16), "int8": ("int8", Accumulator.INT32),
    "int4": ("int4", Accumulator.INT32), "fp4": ("fp4-e2m1", Accumulator.FP32),
    "mxfp8": ("fp8-e4m3", Accumulator.FP32), "mxfp6": ("fp8-e5m2", Accumulator.FP32),
    "mxfp4": ("fp4-e2m1", Accumulator.FP32), "nvfp4": ("fp4-e2m1", Accumulator.FP32),
}


#: Block-scaled precisions: (elements per block, scale format). Their golden models
#: (:mod:`accelsim.arith.blockscaled`, Blackwell MMA semantics) sum a block's products exactly
#: and add the scaled block sum into fp32 once per block, so the hardware they describe is an
#: exact fixed-point block dot plus one fp32 add and one scale product per block. Block sizes
#: and scale formats: OCP MX v1.0 (32 elements, E8M0 scale: the two scales' exponents add);
#: NVIDIA, arXiv 2509.25149 (NVFP4: 16 elements, E4M3 scale: the two scales multiply).
BLOCK_ACCUMULATION: dict[str, tuple[int, str]] = {
    "mxfp8": (32, "e8m0"), "mxfp6": (32, "e8m0"), "mxfp4": (32, "e8m0"),
    "nvfp4": (16, "fp8-e4m3")}


#: A 2:1 multiplexer as a fraction of an adder bit (assumption, by transistor count: a static
#: CMOS mux2 with its select inverter is 12 transistors, a mirror full adder 28; Weste & Harris)
MUX_PER_ADDER_BIT = 12 / 28
WESTE_HARRIS = ("N. Weste and D. Harris, \"CMOS VLSI Design\", 4th ed., 2011: mirror adder "
                "(28 transistors) and static mux2 (12) transistor counts")


def block_dot_bits(operand: Operand, block: int) -> int:
    """Width of the fixed-point adder that sums ``block`` products of ``operand`` exactly:
    a product's bits run from the smallest subnormal's square (LSB ``2 * (emin - m)``) to
    below the largest normal's square (``2 * (emax + 1)``), ``2 * span`` bits, plus
    ``ceil(log2 block)`` carry bits; an integer's product is ``2 * bits`` wide."""
    carry = math.ceil(math.log2(block))
    if operand.is_int:
        return 2 * operand.int_bits + carry
    return 2 * operand.exponent_span() + carry


def _align_stages(operand: Operand) -> int:
    """Barrel-shifter stages that align a product to the block's fixed point: one per bit of
    the count of product exponents (``2 * span - 1``; an integer needs none)."""
    return 0 if operand.is_int else math.ceil(math.log2(2 * operand.exponent_span() - 1))


def block_mac_cost(precision: str, node_nm: float = 14.0,
                   vdd_V: float | None = None) -> MacCost:
    """Per-MAC area and energy of a block-scaled precision (:data:`BLOCK_ACCUMULATION`): the
    element multiplier, the exact block dot's fixed-point adder (Horowitz's integer adder per
    bit, :func:`block_dot_bits` wide) with the barrel shifter that aligns each product to it
    (an assumption priced by transistor count, :data:`MUX_PER_ADDER_BIT`), and per block an fp32 add and the scale product (E8M0:
    a 9-bit exponent add; E4M3: an E4M3 multiplier) shared by its ``block`` MACs."""
    operand_name, acc = PRECISION_MAC[precision]
    block, scale = BLOCK_ACCUMULATION[precision]
    operand = OPERANDS[operand_name]
    bits = block_dot_bits(operand, block)
    # the adder plus the barrel shifter that aligns each product: ceil(log2(shift range))
    # stages of ``bits`` 2:1 muxes, a mux priced as MUX_PER_ADDER_BIT of an adder bit
    cells = bits * (1 + MUX_PER_ADDER_BIT * _align_stages(operand))
    dot = UnitCost(INT_ADDER_PER_BIT.area_um2 * cells, INT_ADDER_PER_BIT.energy_pJ * cells,
                   (HOROWITZ + " (integer adder ~ width, fitted to 8/16/32 bit)", WESTE_HARRIS))
    per_block = adder_cost(acc) + (
        UnitCost(INT_ADDER_PER_BIT.area_um2 * 9, INT_ADDER_PER_BIT.energy_pJ * 9, ())
        if scale == "e8m0" else multiplier_cost(OPERANDS[scale]))
    unit = multiplier_cost(operand) + dot + UnitCost(per_block.area_um2 / block,
                                                     per_block.energy_pJ / block,
                                                     per_block.sources)
    s = node_scale(node_nm, vdd_V)
    sources = unit.sources + ((STILLMAKER,) if s.node_nm != REFERENCE_NODE_NM
                              or s.vdd_V != REFERENCE_VDD_V else ())
    return MacCost(operand_name, f"block dot + {acc.value} per {block}", s.node_nm, s.vdd_V,
                   unit.area_um2 * s.area, unit.energy_pJ * s.energy, sources)


def precision_mac(precision: str, node_nm: float = 14.0, vdd_V: float | None = None) -> MacCost:
    """The MAC unit of an accelsim compute precision (:data:`PRECISION_MAC`) at a node; block-
    scaled precisions as their exact block dot (:func:`block_mac_cost`)."""
    if precision not in PRECISION_MAC:
        raise InputError(f"no MAC unit for precision {precision!r}; priced: "
                         f"{', '.join(PRECISION_MAC)}")
    if precision in BLOCK_ACCUMULATION:
        return block_mac_cost(precision, node_nm, vdd_V)
    operand, acc = PRECISION_MAC[precision]
    return mac_cost(operand, acc, node_nm, vdd_V)


# --------------------------------------------------------------------- the HFP8 claim
@dataclass(frozen=True)
class Packing:
    """How many ``narrow`` MACs fit in the area and in the energy of one ``wide`` MAC."""

    wide: str
    narrow: str
    node_nm: float
    area_ratio: float
    energy_ratio: float

    @property
    def factor(self) -> float:
        """The binding one: narrow units that fit both the area and the power budget."""
        return min(self.area_ratio, self.energy_ratio)


def fp8_packing(node_nm: float = 14.0, vdd_V: float | None = None) -> Packing:
    """FP16-MAC area / HFP8-MAC area and FP16-MAC energy / HFP8-MAC energy at ``node_nm``:
    the HFP8 paper's "2x the FP8 compute elements in the area and power of the FP16 ones"
    (both accumulate in fp16, as in that design), computed from Horowitz's table and the
    Stillmaker-Baas scaling, not from the HFP8 paper."""
    wide = mac_cost("fp16", Accumulator.FP16, node_nm, vdd_V)
    narrow = mac_cost("hfp8", Accumulator.FP16, node_nm, vdd_V)
    return Packing("fp16", "hfp8", wide.node_nm, wide.area_um2 / narrow.area_um2,
                   wide.energy_pJ / narrow.energy_pJ)
