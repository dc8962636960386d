"""Binary floating-point format descriptions: one frozen dataclass and a table of named presets.

Adding a format means adding one row to ``_PRESETS``; every operation (quantize, encode, decode,
report) derives what it needs from the fields and properties below.
Sources: IEEE 754-2019; OCP 8-bit FP spec v1.0 (E4M3/E5M2); Sun et al., NeurIPS 2019 (HFP8);
Agrawal et al., ARITH 2019 (DLFloat); Luo et al., arXiv 2409.16626 (HiFloat8); OCP Microscaling
Formats (MX) v1.0, Sept. 2023, sec. 5.3-5.4 (E2M1/E2M3/E3M2 elements, INT8 element, E8M0 scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# How the special values are laid out in the code space.
#   ieee    : exponent field all ones holds +-inf (fraction 0) and NaN (fraction != 0); -0 exists.
#   fn      : no infinity; only exponent+fraction all ones is NaN (per sign), e.g. OCP E4M3.
#   fnuz    : no infinity, no -0; the single NaN is the code with only the sign bit set (0x80).
#   dlfloat : no subnormals (exponent field 0 is a normal binade); exponent+fraction all ones is a
#             single combined NaN/Inf code (decodes to NaN); underflow flushes to zero.
#   hif8    : HiFloat8 tapered code (prefix dot field); 0x00 zero, 0x80 NaN, 0x6F/0xEF +-inf.
#   finite  : every code is a number, no inf, no NaN, -0 exists (OCP MX FP6/FP4 elements, sec.
#             5.3.2-5.3.3); overflow and inf inputs saturate to +-max (as ml_dtypes' float4/6
#             casts); a NaN input quantizes to NaN and has no code (encode raises).
#   e8m0    : unsigned exponent-only (OCP MX scale, sec. 5.4.1): code c is 2^(c - bias), 0xFF NaN,
#             no zero, no sign, no inf. Zero, negative and NaN inputs give NaN; positive values
#             below 2^-127 give 2^-127 (ml_dtypes' rule); ties round up (the significand 1 is odd).
#   int     : two's-complement fixed point: a sign, one integer and ``mbits`` fraction bits (the
#             MXINT8 element, sec. 5.3.4: implicit scale 2^-6). Rounding saturates symmetrically
#             to +-max = +-(2 - 2^-mbits) (microxcaling's choice); code 0x80 decodes to -2.
LAYOUTS = ("ieee", "fn", "fnuz", "dlfloat", "hif8", "finite", "e8m0", "int")


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format.

    ``ebits``/``mbits`` are the exponent and fraction field widths (for the tapered ``hif8``
    layout: the widest exponent field, 4, and the most fraction bits, 3). ``bias`` is the exponent
    bias of the stored exponent field (a parameter: ``hfp8-143`` uses 11).
    """

    name: str
    bits: int
    ebits: int
    mbits: int
    bias: int
    has_subnormals: bool
    layout: str = "ieee"
    default_rounding: str = "rne"
    description: str = ""

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"format {self.name!r}: unknown layout {self.layout!r}; valid: {LAYOUTS}")
        fields = {"hif8": None, "e8m0": self.ebits + self.mbits, "int": 2 + self.mbits}.get(
            self.layout, 1 + self.ebits + self.mbits)
        if fields is not None and fields != self.bits:
            raise ValueError(f"format {self.name!r}: the fields take {fields} bits != bits {self.bits}")

    # ---- derived properties -------------------------------------------------------------
    @property
    def code_dtype(self):
        import numpy as np

        return np.uint8 if self.bits <= 8 else {16: np.uint16, 32: np.uint32}[self.bits]

    @property
    def has_inf(self) -> bool:
        return self.layout in ("ieee", "hif8")

    @property
    def has_nan(self) -> bool:
        return self.layout not in ("finite", "int")

    @property
    def has_negative_zero(self) -> bool:
        return self.layout in ("ieee", "fn", "dlfloat", "finite")

    @property
    def signed(self) -> bool:
        """False only for the unsigned ``e8m0`` layout (no sign bit, no zero)."""
        return self.layout != "e8m0"

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal binade."""
        if self.layout == "hif8":
            return -15
        if self.layout == "int":
            return 0
        return (0 if self.layout in ("dlfloat", "e8m0") else 1) - self.bias

    @property
    def emax(self) -> int:
        """Exponent of the largest finite binade."""
        if self.layout == "hif8":
            return 15
        if self.layout == "int":
            return 0
        top = (1 << self.ebits) - 1
        return (top - 1 if self.layout in ("ieee", "e8m0") else top) - self.bias

    @property
    def max(self) -> float:
        """Largest finite value."""
        if self.layout == "hif8":
            return 2.0**15
        m = self.mbits
        frac_max = {"ieee": (1 << m) - 1, "fnuz": (1 << m) - 1, "fn": (1 << m) - 2, "dlfloat": (1 << m) - 2,
                    "finite": (1 << m) - 1, "e8m0": 0, "int": (1 << m) - 1}
        return math.ldexp(1.0 + frac_max[self.layout] / (1 << m), self.emax)

    @property
    def min_normal(self) -> float:
        """Smallest positive normal value (for ``dlfloat``, 2^-31 x (1 + 2^-9): code 0 is zero)."""
        if self.layout == "dlfloat":
            return math.ldexp(1.0 + 2.0**-self.mbits, self.emin)
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive value (equals ``min_normal`` without subnormals)."""
        if self.layout == "hif8":
            return 2.0**-22
        if not self.has_subnormals:
            return self.min_normal
        return math.ldexp(1.0, self.emin - self.mbits)

    @property
    def min_positive(self) -> float:
        return self.min_subnormal

    @property
    def eps(self) -> float:
        """Machine epsilon: distance from 1.0 to the next larger value."""
        return 2.0 ** -self.mbits

    @property
    def precision_bits(self) -> int:
        """Significand bits at 1.0 (hidden bit included)."""
        return self.mbits + 1

    @property
    def binades(self) -> int:
        """Binades covered: number of exponents e with a finite value in [2^e, 2^(e+1))
        (the HiF8 paper's count: 38 for HiF8, 40 for FP16)."""
        return math.floor(math.log2(self.max)) - math.floor(math.log2(self.min_positive)) + 1

    @property
    def dynamic_range_log2(self) -> float:
        """log2(max / min_positive)."""
        return math.log2(self.max / self.min_positive)

    @property
    def nan_code(self) -> int | None:
        """Canonical positive quiet-NaN code (the code ml_dtypes produces for a float32 NaN);
        None where the format has no NaN."""
        if not self.has_nan:
            return None
        if self.layout == "e8m0":
            return (1 << self.bits) - 1
        if self.layout in ("fnuz", "hif8"):
            return 1 << (self.bits - 1)
        if self.layout in ("fn", "dlfloat"):
            return (1 << (self.bits - 1)) - 1
        return ((1 << self.ebits) - 1) << self.mbits | 1 << (self.mbits - 1)

    @property
    def inf_code(self) -> int | None:
        if self.layout == "hif8":
            return 0x6F
        if self.layout == "ieee":
            return ((1 << self.ebits) - 1) << self.mbits
        return None

    def special_values(self) -> str:
        """One-line description of zeros, infinities and NaNs (for the format table)."""
        return {
            "ieee": "+-0, +-inf, NaN (exp all ones)",
            "fn": "+-0, no inf, NaN = S.1..1",
            "fnuz": "0 only, no inf, single NaN 0x80",
            "dlfloat": "+-0, single NaN/inf code (all ones), no subnormals",
            "hif8": "0 only (0x00), +-inf 0x6F/0xEF, single NaN 0x80",
            "finite": "+-0, no inf, no NaN (overflow saturates)",
            "e8m0": "powers of two only: no sign, no zero, no inf, NaN 0xFF",
            "int": "two's complement, 0 only, no inf, no NaN (saturates)",
        }[self.layout]


_PRESETS: tuple[FloatFormat, ...] = (
    FloatFormat("fp32", 32, 8, 23, 127, True, "ieee", "rne", "IEEE 754 binary32"),
    FloatFormat("fp16", 16, 5, 10, 15, True, "ieee", "rne", "IEEE 754 binary16"),
    FloatFormat("bf16", 16, 8, 7, 127, True, "ieee", "rne", "bfloat16 (truncated binary32)"),
    FloatFormat("e4m3fn", 8, 4, 3, 7, True, "fn", "rne", "OCP FP8 E4M3 (no inf)"),
    FloatFormat("e5m2", 8, 5, 2, 15, True, "ieee", "rne", "OCP FP8 E5M2"),
    FloatFormat(
        "hfp8-143", 8, 4, 3, 11, True, "fnuz", "rne",
        "IBM HFP8 forward 1-4-3 (= ml_dtypes float8_e4m3b11fnuz)",
    ),
    FloatFormat("hfp8-152", 8, 5, 2, 15, True, "ieee", "rne", "IBM HFP8 backward 1-5-2 (E5M2 layout)"),
    FloatFormat(
        "dlfloat16", 16, 6, 9, 31, False, "dlfloat", "rna", "IBM DLFloat 1-6-9 accumulation format"
    ),
    FloatFormat("hif8", 8, 4, 3, 0, True, "hif8", "rna", "Huawei HiFloat8 (tapered precision)"),
)

# OCP MX v1.0 element and scale formats (sec. 5.3, 5.4; = ml_dtypes float4_e2m1fn, float6_e2m3fn,
# float6_e3m2fn, float8_e8m0fnu). Kept apart from FORMAT_NAMES: their special-value rules differ
# (no NaN, or no sign and no zero), so the general-format test matrix does not apply to them;
# tests/test_numerics_mx_formats.py checks them. get_format knows both.
_MX_PRESETS: tuple[FloatFormat, ...] = (
    FloatFormat("e2m1", 4, 2, 1, 1, True, "finite", "rne", "OCP MX FP4 E2M1 element (max 6)"),
    FloatFormat("e2m3", 6, 2, 3, 1, True, "finite", "rne", "OCP MX FP6 E2M3 element (max 7.5)"),
    FloatFormat("e3m2", 6, 3, 2, 3, True, "finite", "rne", "OCP MX FP6 E3M2 element (max 28)"),
    FloatFormat("e8m0", 8, 8, 0, 127, False, "e8m0", "rne", "OCP MX E8M0 scale (2^-127..2^127)"),
    FloatFormat("int8-mx", 8, 0, 6, 0, True, "int", "rne", "OCP MXINT8 element (two's complement x 2^-6)"),
)

FORMAT_NAMES: tuple[str, ...] = tuple(f.name for f in _PRESETS)
MX_FORMAT_NAMES: tuple[str, ...] = tuple(f.name for f in _MX_PRESETS)
FORMATS: dict[str, FloatFormat] = {f.name: f for f in _PRESETS + _MX_PRESETS}


#: numpy / ml_dtypes / en-dtypes dtype names -> the accelsim format with the same values and codes
DTYPE_FORMATS: dict[str, str] = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "e4m3fn",
    "float8_e5m2": "e5m2",
    "float8_e4m3b11fnuz": "hfp8-143",
    "hifloat8": "hif8",
}


def _dtype_name(fmt: object) -> str | None:
    """The dtype name of a numpy dtype or scalar type (``ml_dtypes.float8_e4m3fn``,
    ``np.dtype("float16")``, ``np.float32``), else None."""
    import numpy as np

    if isinstance(fmt, np.dtype):
        return fmt.name
    if isinstance(fmt, type) and issubclass(fmt, np.generic):
        try:
            return np.dtype(fmt).name
        except TypeError:
            return None
    return None


def get_format(fmt: str | FloatFormat | object) -> FloatFormat:
    """The format ``fmt`` names: a preset name (``"e4m3fn"``), a :class:`FloatFormat` (passed
    through), or a numpy / ml_dtypes / en-dtypes dtype or scalar type with the same values
    (``ml_dtypes.float8_e4m3fn`` -> ``e4m3fn``, ``ml_dtypes.bfloat16`` -> ``bf16``,
    ``numpy.float16`` -> ``fp16``; :data:`DTYPE_FORMATS` lists them)."""
    if isinstance(fmt, FloatFormat):
        return fmt
    if not isinstance(fmt, str):
        dname = _dtype_name(fmt)
        if dname is None:
            raise TypeError(f"format must be a name, a FloatFormat or a numpy/ml_dtypes dtype, "
                            f"got {type(fmt).__name__}")
        if dname not in DTYPE_FORMATS:
            raise ValueError(f"dtype {dname!r} has no accelsim format; dtypes with one: "
                             f"{', '.join(DTYPE_FORMATS)} (or a format name: "
                             f"{', '.join(FORMAT_NAMES)})")
        return FORMATS[DTYPE_FORMATS[dname]]
    try:
        return FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; valid formats: {', '.join(FORMATS)}") from None
