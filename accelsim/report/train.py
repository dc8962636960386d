"""Convergence figure of ``accelsim train --compare``: training loss and test accuracy vs step,
one line per recipe (like the HFP8 / S2FP8 / HiF8 papers' convergence plots).

Takes the tidy history table (recipe, model, dataset, step, train_loss, test_accuracy, ...);
computes nothing.
"""

from __future__ import annotations

from pathlib import Path


def plot_convergence(history, path: Path) -> Path:
    """Two panels: minibatch training loss (log scale) and test accuracy vs step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_l, ax_a) = plt.subplots(1, 2, figsize=(11, 4.2))
    markers = ["o", "s", "^", "v", "D", "x", "P", "*"]
    for i, (recipe, g) in enumerate(history.groupby("recipe", sort=False)):
        g = g.sort_values("step")
        m = markers[i % len(markers)]
        ax_l.plot(g["step"], g["train_loss"], marker=m, ms=3, label=recipe)
        ax_a.plot(g["step"], 100 * g["test_accuracy"], marker=m, ms=3, label=recipe)
    model, dataset = history["model"].iloc[0], history["dataset"].iloc[0]
    ax_l.set_yscale("log")
    ax_l.set_xlabel("step")
    ax_l.set_ylabel("training loss (mean over the last interval)")
    ax_a.set_xlabel("step")
    ax_a.set_ylabel("test accuracy (%)")
    for ax in (ax_l, ax_a):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{model} on {dataset}: training through each recipe's datapath")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
