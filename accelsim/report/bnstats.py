"""Figure for HFP8 appendix C: expected BatchNorm-output error with preserved vs re-tuned
statistics as Var[Q] grows, closed forms (lines) against Monte-Carlo (markers, +-2 s.e.).

Takes the tidy table of :func:`accelsim.train.bnstats.bn_error_table`; draws only.
"""

from __future__ import annotations

from pathlib import Path

COLUMNS = ("var_ratio", "preserved_closed", "preserved_mc", "preserved_se",
           "retuned_closed", "retuned_mc", "retuned_se")


def plot_bn_error(table, path: str | Path, *, title: str | None = None) -> Path:
    """Write the figure to ``path`` (PNG) and return the path."""
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"plot_bn_error: table lacks column(s) {missing}; has {list(table.columns)}")
    if table.empty:
        raise ValueError("plot_bn_error: empty table")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = table.sort_values("var_ratio")
    r = t["var_ratio"].to_numpy()
    fig, ax = plt.subplots(figsize=(6.0, 4.0), dpi=120)
    for key, label, color in (("preserved", "preserved statistics (eq. 2)", "#C44E52"),
                              ("retuned", "re-tuned statistics (eq. 10)", "#4C72B0")):
        ax.plot(r, t[f"{key}_closed"], "-", color=color, label=f"{label}, closed form")
        ax.errorbar(r, t[f"{key}_mc"], yerr=2 * t[f"{key}_se"], fmt="o", ms=3.5, color=color,
                    mfc="none", label=f"{label}, Monte-Carlo")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Var[Q] / Var[X]  (quantization noise relative to the BN input)")
    ax.set_ylabel("E[(y_8bit - y_fp32)^2]  (BN output, gamma = 1)")
    n = int(t["n"].iloc[0]) if "n" in t.columns else None
    ax.set_title(title or f"HFP8 App. C: BN output error{'' if n is None else f' (MC n = {n:,})'}",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
