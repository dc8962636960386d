"""Tidy tables describing the formats: the format table (cf. S2FP8 paper Table A1, HiF8 paper
Table 4) and precision per binade (the data of HiF8 paper Fig. 1)."""

from __future__ import annotations

import math

import numpy as np

from .codec import decode_table
from .formats import FORMAT_NAMES, get_format


def format_table(names=FORMAT_NAMES):
    """One row per format: layout, bias, extremes, epsilon, binades, special values."""
    import pandas as pd

    rows = []
    for name in names:
        f = get_format(name)
        if f.bits <= 16:
            t = decode_table(f)
            finite_codes = int(np.isfinite(t).sum())
        else:
            finite_codes = (1 << 32) - 2 * (1 << 23)  # all but exponent field all ones
        rows.append(
            {
                "format": f.name,
                "bits": f.bits,
                "sign_exp_mant": f"1-{f.ebits}-{f.mbits}" if f.layout != "hif8" else "1-dot-tapered",
                "bias": f.bias if f.layout != "hif8" else None,
                "min_subnormal": f.min_subnormal,
                "min_normal": f.min_normal,
                "max": f.max,
                "eps": f.eps,
                "binades": f.binades,
                "range_log2": round(f.dynamic_range_log2, 3),
                "finite_codes": finite_codes,
                "subnormals": "yes" if f.has_subnormals else "no (flush to zero)",
                "specials": f.special_values(),
                "default_rounding": f.default_rounding,
                "description": f.description,
            }
        )
    return pd.DataFrame(rows)


def precision_table(names=None):
    """Significant bits per binade [2^e, 2^(e+1)) for each format with a code table:
    1 + log2(number of finite values in the binade) (hidden bit included)."""
    import pandas as pd

    if names is None:
        names = [n for n in FORMAT_NAMES if get_format(n).bits == 8]
    rows = []
    for name in names:
        t = decode_table(name)
        v = np.unique(t[np.isfinite(t) & (t > 0)])
        e, counts = np.unique(np.floor(np.log2(v)).astype(int), return_counts=True)
        for ei, c in zip(e.tolist(), counts.tolist()):
            rows.append({"format": name, "exponent": ei, "significant_bits": 1 + math.log2(c)})
    return pd.DataFrame(rows)
