"""Swamping figure: relative error vs K per accumulator, and the HFP8 chunk-size sweep.

Takes the tables from accelsim.arith.swamping; computes nothing.
"""

from __future__ import annotations

from pathlib import Path


def plot_swamping(table, sweep, path: Path) -> Path:
    """Three panels: error vs K (positive data), error vs K (zero-mean), error vs chunk size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    markers = ["o", "s", "^", "v", "D", "x"]
    for ax, dist in zip(axes[:2], ("positive", "zero-mean")):
        d = table[table["distribution"] == dist]
        for i, (engine, g) in enumerate(d.groupby("engine", sort=False)):
            g = g.sort_values("K")
            ax.loglog(g["K"], g["rel_err_mean"].clip(lower=1e-10), marker=markers[i % 6], ms=4,
                      label=engine)
        reps = int(d["reps"].iloc[0])
        ax.set_title(f"{dist} data (mean of {reps} dots)")
        ax.set_xlabel("dot-product length K")
        ax.set_ylabel("|result - exact| / sum |a_k b_k|")
        ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    ax = axes[2]
    for i, (dist, g) in enumerate(sweep.groupby("distribution", sort=False)):
        g = g.sort_values("chunk")
        ax.loglog(g["chunk"], g["rel_err_mean"], marker=markers[i], label=f"{dist} data")
        best = g.loc[g["rel_err_mean"].idxmin()]
        ax.annotate(f"min @ {int(best['chunk'])}", (best["chunk"], best["rel_err_mean"]),
                    textcoords="offset points", xytext=(0, -14), ha="center", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_title(f"HFP8 dlfloat16 two-level, K={int(sweep['K'].iloc[0])}: chunk sweep")
    ax.set_xlabel("chunk size")
    ax.set_ylabel("|result - exact| / sum |a_k b_k|")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Swamping: operands e4m3fn x e5m2, accumulation as each engine does it")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
