"""Number-format golden models: format presets, bit-exact quantize/encode/decode, block-scaled
formats (OCP MX, NVFP4, DeepSeek-V3 FP8 tiles), S2FP8.

from accelsim.numerics import get_format, quantize, encode, decode, FORMAT_NAMES
from accelsim.numerics import block_quantize, BLOCK_FORMAT_NAMES
"""

from .block import BLOCK_FORMAT_NAMES, BlockFormat, BlockQuantized, block_quantize, get_block_format
from .codec import decode, decode_table, encode, quantize
from .formats import FORMAT_NAMES, FORMATS, FloatFormat, get_format
from .rounding import ROUNDING_MODES
from .s2fp8 import S2FP8Result, s2fp8_quantize, s2fp8_stats

__all__ = [
    "BLOCK_FORMAT_NAMES",
    "BlockFormat",
    "BlockQuantized",
    "FORMAT_NAMES",
    "FORMATS",
    "FloatFormat",
    "ROUNDING_MODES",
    "S2FP8Result",
    "block_quantize",
    "decode",
    "decode_table",
    "encode",
    "get_block_format",
    "get_format",
    "quantize",
    "s2fp8_quantize",
    "s2fp8_stats",
]
