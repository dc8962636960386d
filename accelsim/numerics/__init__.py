"""Number-format golden models: format presets, bit-exact quantize/encode/decode, S2FP8.

from accelsim.numerics import get_format, quantize, encode, decode, FORMAT_NAMES
"""

from .codec import decode, decode_table, encode, quantize
from .formats import FORMAT_NAMES, FORMATS, FloatFormat, get_format
from .rounding import ROUNDING_MODES

__all__ = [
    "FORMAT_NAMES",
    "FORMATS",
    "FloatFormat",
    "ROUNDING_MODES",
    "decode",
    "decode_table",
    "encode",
    "get_format",
    "quantize",
]
