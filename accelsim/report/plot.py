"""A generic figure for any tidy table (a sweep's output): y against x, one line (or bar group)
per ``hue`` value, one panel per ``facet`` value. Titles and labels come from the data."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from accelsim.errors import InputError

KINDS = ("line", "bar")
#: Most panels (--facet values), lines or bar groups per panel (--hue values) and bars in one
#: figure: more cannot be read and takes matplotlib minutes to hours (tens of thousands of
#: facets never finished); a table that large wants another --facet/--hue column or a filter.
MAX_FACETS = 48
MAX_HUES = 40
MAX_BARS = 4000


def _check_columns(table, columns: Sequence[str | None]) -> None:
    missing = [c for c in columns if c is not None and c not in table.columns]
    if missing:
        raise InputError(f"column(s) {', '.join(map(repr, missing))} not in the table; columns: "
                         f"{', '.join(map(str, table.columns))}")


def _label(col: str) -> str:
    """Axis label from a column name: units suffixed as _s, _GBps, _per_s become readable."""
    for suffix, unit in (("_per_s", " per s"), ("_GBps", " (GB/s)"), ("_GiB", " (GiB)"),
                         ("_s", " (s)"), ("_pct", " (%)")):
        if col.endswith(suffix) and len(col) > len(suffix):
            return col[: -len(suffix)].replace("_", " ") + unit
    return col.replace("_", " ")


def _check_plottable(t, *, x, y, hue, facet, kind, logx, logy) -> None:
    """InputError for a figure that would be blank (no finite y; no positive y on a log axis) or
    too large to draw (counts over MAX_FACETS / MAX_HUES / MAX_BARS), naming the flag and count."""
    import numpy as np

    yv = t[y].astype("float64").to_numpy()
    finite = np.isfinite(yv)
    if not finite.any():
        raise InputError(f"--y {y}: no finite value in the {len(t):,} rows to plot (all NaN, "
                         "empty or infinite): the figure would be blank")
    if logy and not (yv[finite] > 0).any():
        raise InputError(f"--y {y}: no positive value to draw on --logy's logarithmic axis")
    if t[x].isna().all():
        raise InputError(f"--x {x}: every value is empty (NaN) in the {len(t):,} rows to plot")
    if logx and kind == "line" and _numeric(t[x]) and not (t[x].astype("float64") > 0).any():
        raise InputError(f"--x {x}: no positive value to draw on --logx's logarithmic axis")
    n_facets = t[facet].nunique(dropna=False) if facet else 1
    if n_facets > MAX_FACETS:
        raise InputError(f"--facet {facet}: {n_facets:,} values make {n_facets:,} panels, more "
                         f"than the {MAX_FACETS} a figure can show (facet by a column with fewer "
                         "values, or filter the table)")
    n_hues = t[hue].nunique(dropna=False) if hue else 1
    if n_hues > MAX_HUES:
        raise InputError(f"--hue {hue}: {n_hues:,} values make {n_hues:,} lines per panel, "
                         f"more than the {MAX_HUES} a figure can show (use a column with fewer "
                         "values, or --facet)")
    if kind == "bar":
        n_bars = t[x].nunique(dropna=False) * n_hues * n_facets
        if n_bars > MAX_BARS:
            raise InputError(f"--kind bar: {t[x].nunique(dropna=False):,} --x values x {n_hues:,} "
                             f"--hue values x {n_facets:,} --facet values = {n_bars:,} bars, "
                             f"more than the {MAX_BARS:,} a figure can show (use --kind line)")


def _numeric(column) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(column)


def plot_table(table, path: str | Path, *, x: str, y: str, hue: str | None = None,
               facet: str | None = None, kind: str = "line", logx: bool = False,
               logy: bool = False, title: str | None = None) -> Path:
    """Draw ``y`` against ``x`` from ``table`` into a PNG at ``path``. Rows whose ``status`` is
    not "ok" (an infeasible sweep point) are left out; the title says how many."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if kind not in KINDS:
        raise InputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    _check_columns(table, (x, y, hue, facet))
    if table.empty:
        raise InputError("nothing to plot: the table has a header but no rows")
    import pandas as pd

    if not pd.api.types.is_numeric_dtype(table[y]):
        raise InputError(f"--y {y}: not a numeric column (numeric columns: "
                         f"{', '.join(c for c in table.columns if pd.api.types.is_numeric_dtype(table[c]))})")
    t = table
    dropped = 0
    if "status" in t.columns:
        ok = t["status"] == "ok"
        dropped = int((~ok).sum())
        t = t[ok]
    if t.empty:
        raise InputError("nothing to plot: the table has no rows with status ok")
    _check_plottable(t, x=x, y=y, hue=hue, facet=facet, kind=kind, logx=logx, logy=logy)
    facets = list(dict.fromkeys(t[facet])) if facet else [None]
    n = len(facets)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), dpi=120,
                             squeeze=False, sharey=True)
    for i, fv in enumerate(facets):
        ax = axes[i // cols][i % cols]
        tf = t if fv is None else t[t[facet] == fv]
        hues = list(dict.fromkeys(tf[hue])) if hue else [None]
        xs_all = list(dict.fromkeys(tf.sort_values(x)[x]))
        width = 0.8 / len(hues)
        for k, hv in enumerate(hues):
            th = tf if hv is None else tf[tf[hue] == hv]
            g = th.groupby(x, sort=True)[y].mean()
            label = None if hv is None else f"{hue}={hv}"
            if kind == "line":
                ax.plot(g.index, g.to_numpy(), marker="o", label=label)
            else:
                pos = [xs_all.index(v) + (k - (len(hues) - 1) / 2) * width for v in g.index]
                ax.bar(pos, g.to_numpy(), width, label=label)
        if kind == "bar":
            ax.set_xticks(range(len(xs_all)), [f"{v:g}" if isinstance(v, float) else str(v)
                                               for v in xs_all])
        if logx and kind == "line":
            ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(_label(x))
        if i % cols == 0:
            ax.set_ylabel(_label(y))
        if fv is not None:
            ax.set_title(f"{facet} = {fv}", fontsize=9)
        if hue:
            ax.legend(frameon=False, fontsize=8)
        ax.grid(alpha=0.3)
    for j in range(n, rows * cols):
        axes[j // cols][j % cols].axis("off")
    if title is None:
        context = []
        for col in ("workload", "system_name", "scheme"):
            if col in t.columns and col not in (x, hue, facet) and t[col].nunique() == 1:
                context.append(str(t[col].iloc[0]))
        title = f"{_label(y)} vs {_label(x)}" + (f" ({', '.join(context)})" if context else "")
    if dropped:
        title += f"; {dropped} infeasible point(s) not shown"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_pareto(table, path: str | Path, *, x: str, y: str, front: str = "on_front",
                hue: str | None = None, logx: bool = False, logy: bool = False,
                title: str | None = None) -> Path:
    """Every point of ``table`` (y against x; one colour per ``hue`` value) with the Pareto
    front (rows where column ``front`` is true, computed by :func:`accelsim.dse.pareto`) drawn
    as a line through its points, into a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _check_columns(table, (x, y, front, hue))
    if table.empty:
        raise InputError("nothing to plot: the table has no rows")
    n_hues = table[hue].nunique(dropna=False) if hue else 1
    if n_hues > MAX_HUES:
        raise InputError(f"--hue {hue}: {n_hues:,} values, more than the {MAX_HUES} a figure "
                         "can show")
    fig, ax = plt.subplots(figsize=(6.4, 4.6), dpi=120)
    groups = [(None, table)] if not hue else list(table.groupby(hue, sort=False, dropna=False))
    for hv, g in groups:
        ax.scatter(g[x], g[y], s=18, alpha=0.6, label=None if hv is None else f"{hue}={hv}")
    fr = table[table[front].astype(bool)].sort_values([x, y])
    ax.plot(fr[x], fr[y], color="black", marker="o", markerfacecolor="none", markersize=8,
            linewidth=1.2, label=f"Pareto front ({len(fr)} of {len(table)})")
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y))
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=8)
    ax.set_title(title or f"{_label(y)} vs {_label(x)}: Pareto front", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
