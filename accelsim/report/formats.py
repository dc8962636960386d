"""Format table as Markdown and the precision-vs-exponent plot (HiF8 paper Fig. 1 with the other
8-bit formats beside it). Takes tables, computes nothing."""

from __future__ import annotations

import math
from pathlib import Path


def _fmt(v, pow2: bool) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if pow2 and v > 0 and math.log2(v).is_integer():
            return f"2^{int(math.log2(v))}"
        return f"{v:.6g}"
    return str(v)


def table_to_markdown(df, columns=None, pow2_columns=()) -> str:
    """A Markdown pipe table; floats in ``pow2_columns`` that are powers of two print as 2^k."""
    cols = list(columns or df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df[cols].itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v, c in pow2_columns) for c, v in zip(cols, row)) + " |")
    return "\n".join(lines) + "\n"


def plot_precision(prec, path: Path) -> Path:
    """Step plot of significant bits over binade exponent, one line per format."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    styles = ["-", "--", "-.", ":", (0, (5, 1))]
    names = list(dict.fromkeys(prec["format"]))
    for i, name in enumerate(names):
        d = prec[prec["format"] == name].sort_values("exponent")
        # small vertical offsets keep identical layouts (e5m2 / hfp8-152) visible
        y = d["significant_bits"].to_numpy() + 0.04 * (i - (len(names) - 1) / 2)
        e = d["exponent"].to_numpy()
        edges = list(e) + [e[-1] + 1]  # binades are contiguous for every format here
        ax.stairs(y, edges, baseline=None, linestyle=styles[i % len(styles)], linewidth=1.8,
                  label=f"{name} (2^{e.min()} .. 2^{e.max()})")
    ax.set_xlabel("log2 |x|  (each step spans one binade [2^e, 2^(e+1)); lines offset +-0.1 to stay visible)")
    ax.set_ylabel("significant bits (incl. hidden bit)")
    ax.set_title("Precision vs exponent of 8-bit formats (cf. HiF8 paper Fig. 1)")
    ax.set_yticks(range(0, 6))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
