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


def plot_block_swamping(table, deepseek, path: Path) -> Path:
    """Block-scaled engines: error vs K (total against the unquantized data, solid; accumulation
    alone, dashed) for positive and zero-mean data, and the DeepSeek-V3 K = 4096 bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    markers = ["o", "s", "^", "v", "D", "x"]
    for ax, dist in zip(axes[:2], ("positive", "zero-mean")):
        d = table[table["distribution"] == dist]
        for i, (engine, g) in enumerate(d.groupby("engine", sort=False)):
            g = g.sort_values("K")
            line, = ax.loglog(g["K"], g["quant_err_mean"].clip(lower=1e-10), marker=markers[i % 6], ms=4,
                              label=f"{engine}")
            ax.loglog(g["K"], g["rel_err_mean"].clip(lower=1e-10), ls="--", color=line.get_color(), lw=1)
        ax.set_title(f"{dist} data (solid: vs float64 data; dashed: accumulation)", fontsize=9)
        ax.set_xlabel("dot-product length K")
        ax.set_ylabel("|result - exact| / sum |a_k b_k| (mean)")
        ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    ax = axes[2]
    kinds = list(dict.fromkeys(deepseek["data"]))
    engines = list(dict.fromkeys(deepseek["engine"]))
    width = 0.8 / len(engines)
    for i, eng in enumerate(engines):
        g = deepseek[deepseek["engine"] == eng].set_index("data").loc[kinds]
        ax.bar([j + i * width for j in range(len(kinds))], g["rel_err_max"], width, label=eng)
    ax.axhline(0.02, color="k", ls=":", lw=1, label="DeepSeek-V3: 'nearly 2%'")
    ax.set_yscale("log")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(kinds))], kinds)
    ax.set_title(f"DeepSeek-V3 check, K = {int(deepseek['K'].iloc[0])}: max relative error")
    ax.set_ylabel("max |result - exact| / |exact|")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
