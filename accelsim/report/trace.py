"""A trace as a picture: one horizontal track per stream (compute, tensor-parallel comm,
data-parallel comm, pipeline send/recv), each event a bar from its start for its duration."""

from __future__ import annotations

from pathlib import Path

#: events drawn with their name inside when they cover at least this share of the time axis
LABEL_SHARE = 0.06
#: most tracks (threads) a timeline draws: 0.7 inch each; 2,000 took 40 s and 2 GB of memory
MAX_TRACKS = 64
#: most events a timeline draws (10^5 take about 8 s; far more bars than the figure has pixels)
MAX_EVENTS = 100_000
#: op kinds the legend names (by total time); the rest share one grey
LEGEND_KINDS = 16


def plot_trace(events, out: str | Path, *, title: str = "") -> Path:
    """Draw ``events`` (a table with ``name``, ``track``, ``start_s``, ``dur_s``) as a
    timeline PNG at ``out``; tracks keep their first-appearance order, top to bottom. More
    than :data:`MAX_TRACKS` tracks or :data:`MAX_EVENTS` events is an InputError."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from accelsim.errors import InputError

    if events.empty:
        raise InputError("the trace has no complete (ph X) events to draw")
    if len(events) > MAX_EVENTS:
        raise InputError(f"{len(events):,} complete events, more than the {MAX_EVENTS:,} a "
                         "timeline draws (open it in Perfetto or chrome://tracing)")
    tracks = list(dict.fromkeys(events["track"]))
    if len(tracks) > MAX_TRACKS:
        raise InputError(f"{len(tracks):,} tracks (threads), more than the {MAX_TRACKS} a "
                         "timeline draws (open it in Perfetto or chrome://tracing)")
    end = float((events["start_s"] + events["dur_s"]).max())
    scale, unit = (1e3, "ms") if end < 10 else (1.0, "s")
    fig, ax = plt.subplots(figsize=(11, 0.7 * len(tracks) + 1.6))
    colors = plt.get_cmap("tab20")
    if "kind" not in events:  # a table without kinds: the names without their (phase)
        events = events.assign(kind=events["name"].str.replace(r" \(.*\)$", "", regex=True))
    # one colour per op kind, by total time: the LEGEND_KINDS largest named, the rest "other"
    by_time = events.groupby("kind", sort=False)["dur_s"].sum().sort_values(ascending=False)
    shown = list(by_time.index[:LEGEND_KINDS])
    color_of = {n: colors(i % 20) for i, n in enumerate(shown)}
    other = (0.75, 0.75, 0.75, 1.0)
    for row, track in enumerate(tracks):
        ev = events[events["track"] == track]
        base = ev["name"].str.replace(r" \(.*\)$", "", regex=True)
        ax.broken_barh(list(zip(ev["start_s"] * scale, ev["dur_s"] * scale)), (row - 0.4, 0.8),
                       facecolors=[color_of.get(k, other) for k in ev["kind"]],
                       edgecolor="white", linewidth=0.3)
        for (_, e), n in zip(ev.iterrows(), base):
            if e["dur_s"] >= LABEL_SHARE * end:
                ax.text((e["start_s"] + e["dur_s"] / 2) * scale, row, n, ha="center",
                        va="center", fontsize=7, clip_on=True)
    ax.set_yticks(range(len(tracks)), tracks)
    ax.invert_yaxis()
    ax.set_xlim(0, end * scale)
    ax.set_xlabel(f"time ({unit}); the iteration ends at {end * scale:.4g} {unit}")
    ax.set_title(title or "iteration timeline")
    from matplotlib.patches import Patch

    handles = [Patch(color=color_of[k], label=str(k)) for k in shown]
    if len(by_time) > len(shown):
        handles.append(Patch(color=other, label=f"{len(by_time) - len(shown)} other kinds"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7,
              frameon=False, title="op", title_fontsize=8)
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out
