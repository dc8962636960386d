"""The throughput-latency curve of an inference sweep (``accelsim infer --serve``)."""

from __future__ import annotations


def plot_serve(df, path: str, title: str) -> None:
    """Decode throughput of the system against each user's tokens/s, one line per context
    (``accelsim infer --serve`` table: batch, context_tokens, decode_tokens_per_s,
    tokens_per_s_per_user, fits_memory); points that do not fit in memory left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for ctx, g in df.groupby("context_tokens"):
        ok = g[g["fits_memory"]]
        ax.plot(ok["tokens_per_s_per_user"], ok["decode_tokens_per_s"], "o-",
                label=f"context {ctx}")
        for _, row in ok.iterrows():
            ax.annotate(str(row["batch"]), (row["tokens_per_s_per_user"],
                                            row["decode_tokens_per_s"]),
                        fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("tokens/s per user (1 / decode step)")
    ax.set_ylabel("decode tokens/s (system)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.legend(title="points: batch; out-of-memory points left out", fontsize=8,
              title_fontsize=7)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_cdf(table, path: str, column: str, *, hue: str | None = None, logx: bool = False,
             title: str | None = None) -> str:
    """The empirical CDF of ``column`` (e.g. ``accelsim serve --requests-out``'s
    ``time_to_first_token_s``), one step line per ``hue`` value; rows where it is missing
    (a TPOT of one-token requests) left out. Returns the path written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from accelsim.errors import InputError

    if column not in table.columns:
        raise InputError(f"--cdf {column}: not a column (columns: "
                         f"{', '.join(map(str, table.columns))})")
    if hue is not None and hue not in table.columns:
        raise InputError(f"--hue {hue}: not a column")
    groups = [(None, table)] if hue is None else list(table.groupby(hue))
    if len(groups) > 20:
        raise InputError(f"--hue {hue}: {len(groups)} values, at most 20 lines")
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    drawn = 0
    for key, g in groups:
        v = np.sort(np.asarray(g[column], dtype=float))
        v = v[np.isfinite(v)]
        if not len(v):
            continue
        ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post",
                label=None if hue is None else f"{hue} {key}")
        drawn += 1
    if not drawn:
        raise InputError(f"--cdf {column}: no finite values")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(column)
    ax.set_ylabel("share of rows at or below")
    ax.set_ylim(0, 1.02)
    ax.set_title(title or f"CDF of {column}", fontsize=9)
    if hue is not None:
        ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)
