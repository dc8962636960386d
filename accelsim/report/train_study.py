"""Figures of ``accelsim study``: learning curves with 95 % confidence bands over seeds, and the
final metric per recipe with 95 % confidence error bars.

Takes the tables accelsim.train.study makes (curve bands, the per-recipe summary); computes
nothing.
"""

from __future__ import annotations

from pathlib import Path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(bands: dict, path: Path, title: str) -> Path:
    """One panel per curve table in ``bands`` ({panel label: DataFrame of recipe, step, mean,
    lo, hi}): the mean over seeds as a line, the 95 % interval as a band."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(bands), figsize=(5.5 * len(bands), 4.2), squeeze=False)
    for ax, (label, b) in zip(axes[0], bands.items()):
        for recipe, g in b.groupby("recipe", sort=False):
            g = g.sort_values("step")
            line, = ax.plot(g["step"], g["mean"], marker="o", ms=3, label=recipe)
            ax.fill_between(g["step"], g["lo"], g["hi"], color=line.get_color(), alpha=0.2, lw=0)
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title + " (mean over seeds, band: 95 % CI)")
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_final(summary, path: Path, ylabel: str, title: str, scale: float = 1.0) -> Path:
    """Bars of the per-recipe mean of the final metric with 95 % CI error bars, seeds as dots
    (``summary``: recipe, mean, ci95_half; ``seeds``: optional per-run values)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(summary) + 2), 4.2))
    x = range(len(summary))
    err = summary["ci95_half"].fillna(0.0) * scale
    ax.bar(x, summary["mean"] * scale, yerr=err, capsize=5, color="tab:blue", alpha=0.7)
    ax.set_xticks(list(x), summary["recipe"], rotation=20)
    ax.set_ylabel(ylabel)
    lo = float(((summary["mean"] - summary["ci95_half"].fillna(0.0)) * scale).min())
    hi = float(((summary["mean"] + summary["ci95_half"].fillna(0.0)) * scale).max())
    pad = 0.15 * (hi - lo) if hi > lo else 1.0
    ax.set_ylim(lo - pad, hi + pad)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(title + " (error bars: 95 % CI)")
    fig.tight_layout()
    return _save(fig, plt, path)


def _save(fig, plt, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
