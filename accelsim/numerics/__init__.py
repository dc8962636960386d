"""Number-format golden models: format presets, bit-exact quantize/encode/decode, S2FP8.

from accelsim.numerics import get_format, quantize, encode, decode, FORMAT_NAMES
"""

from .block import BLOCK_FORMAT_NAMES, BlockFormat, BlockQuantized, block_quantize, get_block_format  # noqa: F401
from .codec import decode, decode_table, encode, quantize
from .formats import FORMAT_NAMES, FORMATS, FloatFormat, get_format
from .rounding import ROUNDING_MODES
from .s2fp8 import S2FP8Result, s2fp8_quantize, s2fp8_stats

__all__ = [
    "FORMAT_NAMES",
    "FORMATS",
    "FloatFormat",
    "ROUNDING_MODES",
    "S2FP8Result",
    "decode",
    "decode_table",
    "encode",
    "get_format",
    "quantize",
    "s2fp8_quantize",
    "s2fp8_stats",
]
