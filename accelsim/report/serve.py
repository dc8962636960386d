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
