"""Figures and Markdown for the training-throughput study (HFP8 paper, appendix D, Figs. 8-9).

Everything here takes finished tidy tables (pandas) and only draws or formats them; no model is
evaluated in this module. matplotlib is imported inside each plotting function with the Agg
backend, so importing this module is cheap and never needs a display.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from accelsim.paths import display_path

SCHEME_COLORS = {"fp16": "#4C72B0", "fp8": "#DD8452", "hfp8": "#55A868"}
PHASE_COLORS = {"reduce_scatter_s": "#4C72B0", "all_gather_s": "#DD8452",
                "weight_update_s": "#C44E52"}
PHASE_LABELS = {"reduce_scatter_s": "reduce-scatter", "all_gather_s": "all-gather",
                "weight_update_s": "weight update"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _schemes(table) -> list[str]:
    order = list(SCHEME_COLORS)
    present = list(dict.fromkeys(table["scheme"]))
    return [s for s in order if s in present] + [s for s in present if s not in order]


def _need(table, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{what}: table lacks column(s) {missing}; has {list(table.columns)}")


def plot_throughput(table, path: str | Path, *, compression: float = 1.0,
                    engine: str | None = None, workload: str = "") -> Path:
    """Figure 8: training throughput (thousand images/s) per scheme at each off-chip bandwidth."""
    _need(table, ("scheme", "chip_GBps", "compression", "samples_per_s"), "plot_throughput")
    plt = _pyplot()
    t = table[table["compression"] == compression]
    if t.empty:
        raise ValueError(f"plot_throughput: no rows with compression == {compression}")
    links = sorted(t["chip_GBps"].unique())
    schemes = _schemes(t)
    width = 0.8 / len(schemes)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for k, s in enumerate(schemes):
        ts = t[t["scheme"] == s].set_index("chip_GBps").reindex(links)
        xs = [i + (k - (len(schemes) - 1) / 2) * width for i in range(len(links))]
        ys = ts["samples_per_s"].to_numpy() / 1e3
        bars = ax.bar(xs, ys, width, label=s.upper(), color=SCHEME_COLORS.get(s))
        ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    ax.set_xticks(range(len(links)), [f"{b:g} GB/s" for b in links])
    ax.set_xlabel("off-chip bandwidth per chip (one direction)")
    ax.set_ylabel("training throughput (thousand images/s)")
    comp = "no gradient compression" if compression == 1 else f"{compression:g}x gradient compression"
    ax.set_title(f"{workload + ' ' if workload else ''}training throughput, {comp}" + (f" [{engine}]" if engine else ""),
                 fontsize=10)
    ax.legend(frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_compression_sweep(table, path: str | Path, *, engine: str | None = None) -> Path:
    """Throughput (thousand images/s) against gradient compression, one panel per bandwidth."""
    _need(table, ("scheme", "chip_GBps", "compression", "samples_per_s"), "plot_compression_sweep")
    plt = _pyplot()
    links = sorted(table["chip_GBps"].unique())
    comps = sorted(table["compression"].unique())
    fig, axes = plt.subplots(1, len(links), figsize=(3.4 * len(links), 3.6), dpi=120,
                             sharey=True, squeeze=False)
    for ax, b in zip(axes[0], links):
        tb = table[table["chip_GBps"] == b]
        for s in _schemes(tb):
            ts = tb[tb["scheme"] == s].set_index("compression").reindex(comps)
            ax.plot(range(len(comps)), ts["samples_per_s"].to_numpy() / 1e3, marker="o",
                    label=s.upper(), color=SCHEME_COLORS.get(s))
        ax.set_xticks(range(len(comps)), ["none" if c == 1 else f"{c:g}x" for c in comps],
                      fontsize=8)
        ax.set_title(f"{b:g} GB/s", fontsize=10)
        ax.set_xlabel("gradient compression")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("training throughput (thousand images/s)")
    axes[0][0].legend(frameon=False, fontsize=8)
    fig.suptitle("Gradient compression sweep" + (f" [{engine}]" if engine else ""), fontsize=10)
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_comm_breakdown(table, path: str | Path, *, schemes: Sequence[str] = ("fp8", "hfp8"),
                        compressions: Sequence[float] = (1.0, 256.0),
                        engine: str | None = None) -> Path:
    """Figure 9: reduce-scatter / all-gather / weight-update time (ms), stacked, per scheme,
    at each bandwidth, without and with gradient compression."""
    phases = tuple(PHASE_COLORS)
    _need(table, ("scheme", "chip_GBps", "compression", *phases), "plot_comm_breakdown")
    plt = _pyplot()
    links = sorted(table["chip_GBps"].unique())
    fig, axes = plt.subplots(1, len(compressions), figsize=(4.6 * len(compressions), 4.0),
                             dpi=120, sharey=True, squeeze=False)
    width = 0.8 / len(schemes)
    hatches = {s: h for s, h in zip(schemes, ("", "//", "..", "xx"))}
    for ax, c in zip(axes[0], compressions):
        tc = table[table["compression"] == c]
        if tc.empty:
            raise ValueError(f"plot_comm_breakdown: no rows with compression == {c}")
        for k, s in enumerate(schemes):
            ts = tc[tc["scheme"] == s].set_index("chip_GBps").reindex(links)
            xs = [i + (k - (len(schemes) - 1) / 2) * width for i in range(len(links))]
            bottom = [0.0] * len(links)
            for ph in phases:
                ys = (ts[ph].to_numpy() * 1e3).tolist()
                ax.bar(xs, ys, width, bottom=bottom, color=PHASE_COLORS[ph], hatch=hatches[s],
                       edgecolor="white", linewidth=0.5,
                       label=PHASE_LABELS[ph] if k == 0 else None)
                bottom = [b + y for b, y in zip(bottom, ys)]
            if k == 0:
                base_tot = list(bottom)
            for x, tot, ref in zip(xs, bottom, base_tot):
                label = s.upper() if k == 0 else f"{s.upper()}\n{100 * (tot / ref - 1):+.0f}%"
                ax.text(x, tot, label, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(links)), [f"{b:g} GB/s" for b in links])
        ax.set_title("no compression" if c == 1 else f"{c:g}x gradient compression", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("gradient-reduction time per iteration (ms)")
    axes[0][0].legend(frameon=False, fontsize=8)
    fig.suptitle("Communication breakdown, " + " vs ".join(s.upper() for s in schemes)
                 + (f" [{engine}]" if engine else ""), fontsize=10)
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_measured_vs_predicted(table, path: str | Path, *, title: str) -> Path:
    """Bars of published measurements next to predictions (columns: case, published, predicted)."""
    _need(table, ("case", "published", "predicted"), "plot_measured_vs_predicted")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.6), dpi=120)
    xs = range(len(table))
    ax.bar([x - 0.2 for x in xs], table["published"], 0.4, label="published", color="#8172B2")
    ax.bar([x + 0.2 for x in xs], table["predicted"], 0.4, label="accelsim", color="#64B5CD")
    for x, pub, pred in zip(xs, table["published"], table["predicted"]):
        ax.annotate(f"{100 * (pred / pub - 1):+.1f} %", (x + 0.2, pred), ha="center",
                    va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    ax.margins(y=0.12)
    ax.set_xticks(list(xs), list(table["case"]), fontsize=8)
    ax.set_ylabel("images/s")
    ax.set_title(title, fontsize=10)
    ax.legend(frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(fig, plt, path)


def _save(fig, plt, path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, metadata={"Software": "accelsim"})
    plt.close(fig)
    return p


# --------------------------------------------------------------------------- Markdown
def _fmt(v, floatfmt: str) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return format(v, floatfmt)
    return str(v)


def markdown_table(table, *, floatfmt: str | dict = ".4g",
                   columns: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured Markdown table of a DataFrame (no index). ``floatfmt`` is one format
    for every float column or a {column: format} dict (others: ``.4g``)."""
    cols = list(columns) if columns is not None else list(table.columns)
    fmts = [floatfmt.get(c, ".4g") if isinstance(floatfmt, dict) else floatfmt for c in cols]
    head = "| " + " | ".join(str(c) for c in cols) + " |"
    sep = "|" + "|".join("---" for _ in cols) + "|"
    body = ["| " + " | ".join(_fmt(v, f) for v, f in zip(row, fmts)) + " |"
            for row in table[cols].itertuples(index=False, name=None)]
    return "\n".join([head, sep, *body])


# --------------------------------------------------------------------------- the main job's folder
FIGURE_FILES = {
    "fig8_throughput": "fig8_throughput.png",
    "compression_sweep": "compression_sweep.png",
    "fig9_comm_breakdown": "fig9_comm_breakdown.png",
    "dgx1": "dgx1_resnet50.png",
}


#: the untracked record of one run (date, machine, run time) beside the deterministic manifest
RUN_RECORD = "run.json"


def write_study(result, out_dir: str | Path, *, formats_table=None, calibration=None,
                argv: Sequence[str] = (), elapsed_s: float | None = None,
                extra_outputs: Mapping[str, str] | None = None,
                extra_inputs: Sequence[Mapping[str, str]] = ()) -> list[Path]:
    """Write a finished study (``tables`` + ``meta``) as CSVs, PNGs, summary.md and
    manifest.json into ``out_dir``, all deterministic (the same inputs give the same bytes), and
    the run's date, machine and time into run.json; returns the files written.
    ``formats_table``: Markdown of the number-format table to include in the summary (None:
    omitted); ``calibration``: the (residuals, ranges) tables of ``scripts/calibrate.py`` (None:
    that section is omitted); ``extra_outputs``: more text files (name -> text, e.g. the
    co-design report) written beside them and listed in the manifest with ``extra_inputs``."""
    import datetime
    import json
    import platform

    import accelsim
    from accelsim.dse.hfp8_study import sha256_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t = result.tables
    meta = result.meta
    eng = meta["figure_engines"]
    written: list[Path] = []
    for name in ("throughput", "comm_breakdown", "paper_comparison", "claims", "implied", "dgx1"):
        if name in t:
            p = out / f"{name}.csv"
            t[name].to_csv(p, index=False, float_format="%.9g")
            written.append(p)
    wl_name = result.meta.get("workload", {}).get("name", "")
    written.append(plot_throughput(t["throughput"], out / FIGURE_FILES["fig8_throughput"],
                                   engine=eng["fig8_throughput"], workload=wl_name))
    written.append(plot_compression_sweep(t["throughput"], out / FIGURE_FILES["compression_sweep"],
                                          engine=eng["compression_sweep"]))
    written.append(plot_comm_breakdown(t["comm_breakdown"], out / FIGURE_FILES["fig9_comm_breakdown"],
                                       engine=eng["fig9_comm_breakdown"]))
    if "dgx1" in t:
        written.append(plot_measured_vs_predicted(
            t["dgx1"], out / FIGURE_FILES["dgx1"],
            title=f"{wl_name} FP16 training, DGX-1 (V100) [{eng['dgx1']}]"))
    for name, text in (extra_outputs or {}).items():
        p = out / name
        p.write_text(text)
        written.append(p)
    # Tracked outputs are deterministic (rerunning leaves a clean `git status`): the date, the
    # machine and the run time go to run.json, which reports/ ignores.
    summary = out / "summary.md"
    summary.write_text(summary_markdown(result, formats_table=formats_table,
                                        calibration=calibration))
    written.append(summary)
    manifest = {
        "accelsim_version": accelsim.__version__,
        "command": list(argv),
        "engine": meta["engine"],
        "figure_engines": eng,
        "inputs": [{**i, "path": display_path(i["path"])}
                   for i in [*meta["inputs"], *extra_inputs]],
        "params": meta["params"],
        "params_source": meta["params_source"],
        "run_record": RUN_RECORD,
        "outputs": [{"path": p.name, "sha256": sha256_file(p)} for p in written],
    }
    mp = out / "manifest.json"
    mp.write_text(json.dumps(manifest, indent=2) + "\n")
    written.append(mp)
    run = {
        "date_utc": datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
        "elapsed_s": elapsed_s,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "command": list(argv),
    }
    rp = out / RUN_RECORD
    rp.write_text(json.dumps(run, indent=2) + "\n")
    written.append(rp)
    return written


def _calibration_lines(calibration, prm) -> list[str]:
    """summary.md section: the fit's residuals (with the no-overlap compromise) and how well the
    ten numbers pin each knob and every figure (scripts/calibrate.py's tables)."""
    res, rng = calibration
    fit = (f"PAPER_SETUP minibatch={prm['minibatch']} overlap={prm['overlap']:g} "
           f"per_tensor_overhead_s={prm['per_tensor_overhead_s']:g} "
           f"memory_efficiency={prm['memory_efficiency']:g}")
    lines = ["## Calibration: how well the published numbers pin the parameters", ""]
    if str(res["fit_params"].iloc[0]) != fit:
        return lines + [f"The calibration tables in this folder are for "
                        f"`{res['fit_params'].iloc[0]}`, not this run's parameters; re-run "
                        "`python scripts/calibrate.py --out DIR`.", ""]
    n = int(rng["n_points"].iloc[0]) if len(rng) else 0
    worst = float((res["residual"].abs() / res["tolerance"]).max())
    worst0 = float((res["no_overlap_residual"].abs() / res["tolerance"]).max())
    bind0 = "; ".join(res.loc[res["no_overlap_binding"].astype(bool), "metric"])
    lines += [f"`scripts/calibrate.py` fits the four global parameters to all {len(res)} "
              f"published numbers by minimax (worst |accelsim - published| / tolerance: "
              f"{worst:.2f}), inside physical bounds with sources (docs/calibration.md). With "
              f"the gradient reduction fully exposed (overlap 0) the best compromise reaches "
              f"{worst0:.2f}" + (f", bound by {bind0}" if worst0 > 1 else "") + ".", "",
              f"Range of each parameter over the {n} grid points that keep every published "
              "number within its tolerance, and the largest spread that range causes in each "
              "figure (full per-point table: `calibration_spread.csv`):", ""]
    if n:
        lines.append(markdown_table(rng, columns=["group", "quantity", "unit", "fit", "low",
                                                  "high", "spread_pct", "note"],
                                    floatfmt=".4g"))
    return lines + [""]


def summary_markdown(result, *, formats_table=None, calibration=None) -> str:
    """summary.md: published numbers next to accelsim's, engines, parameters and the DGX-1 check.
    ``calibration``: (residuals, ranges) tables of scripts/calibrate.py, shown when given."""
    t, meta = result.tables, result.meta
    eng = meta["figure_engines"]
    sysm, wl, prm = meta["system"], meta["workload"], meta["params"]
    cmp_ = t["paper_comparison"]
    n_ok = int(cmp_["within_tolerance"].sum())
    lines = [
        "# accelsim throughput study (HFP8 paper, appendix D)",
        "",
        f"Generated by `accelsim figures` ({meta['engine']} network engine; date, machine and "
        f"run time in {RUN_RECORD}).",
        f"System `{sysm['name']}`: {sysm['chips']} chips, {sysm['peak_fp16_PFLOPS']:.2f} PFLOPS FP16 / "
        f"{sysm['peak_fp8_PFLOPS']:.2f} PFLOPS FP8 peak; workload `{wl['name']}` "
        f"({wl['n_params']:,} parameters in {wl['n_param_tensors']} tensors, "
        f"{wl['train_flops_per_sample'] / 1e9:.1f} GFLOP per training {meta.get('sample_kind', 'sample')}).",
        "",
        "## Published numbers vs accelsim",
        "",
        f"{n_ok} of {len(cmp_)} published numbers are reproduced within the stated tolerance "
        "with one parameter set (below).",
        "",
        markdown_table(cmp_.assign(within_tolerance=cmp_["within_tolerance"].map(
            {True: "yes", False: "NO"})),
            columns=["description", "published", "accelsim", "difference", "unit", "tolerance",
                     "within_tolerance", "label"], floatfmt=".1f"),
        "",
        "`label`: `fit` = `scripts/calibrate.py` fits its four global parameters to this number "
        "(all ten are fit rows: agreement here is a fit, not a prediction; the leave-one-out "
        "errors are in docs/validation.md), `checked` = held out from every fit.",
        "",
        f"Source of the published numbers: {cmp_['source'].iloc[0].split(', Fig')[0]}.",
        "",
        ("Outside tolerance: " + "; ".join(cmp_.loc[~cmp_["within_tolerance"], "description"])
         + ". ") if n_ok < len(cmp_) else "",
        "What the published gains imply (if the reduction were fully exposed; solved from the "
        "+31 %, +28 % and 32 % "
        "figures, communication times from accelsim) next to accelsim's compute model; both "
        "throughput gains hinge on the FP8/FP16 compute ratio (an FP8 compute far above 0.5x "
        "FP16 caps them whatever the communication):",
        "",
        markdown_table(t["implied"], floatfmt=".2f") if "implied" in t else "",
        "",
        "## The paper's qualitative claims",
        "",
        markdown_table(t["claims"].assign(holds=t["claims"]["holds"].map({True: "yes", False: "NO"})),
                       columns=["claim", "holds", "evidence"]),
        "",
        "## Figures and the engine that produced each",
        "",
        "| figure | file | engine |",
        "|---|---|---|",
        f"| Fig. 8: throughput (thousand images/s) | `{FIGURE_FILES['fig8_throughput']}` | {eng['fig8_throughput']} |",
        f"| compression sweep 32x-512x | `{FIGURE_FILES['compression_sweep']}` | {eng['compression_sweep']} |",
        f"| Fig. 9: RS / AG / WU breakdown, FP8 vs HFP8 | `{FIGURE_FILES['fig9_comm_breakdown']}` | {eng['fig9_comm_breakdown']} |",
    ]
    if "dgx1" in t:
        lines.append(f"| DGX-1 check | `{FIGURE_FILES['dgx1']}` | {eng['dgx1']} |")
    thr = t["throughput"]
    base = thr[thr["compression"] == 1]
    lines += ["", "## Throughput without compression (thousand images/s)", "",
              markdown_table(base.pivot(index="chip_GBps", columns="scheme",
                                        values="ksamples_per_s").reset_index(), floatfmt=".1f")]
    if "dgx1" in t:
        d = t["dgx1"]
        lines += ["", f"## Real-world check: {meta['workload']['name']} FP16 training on NVIDIA "
                  "DGX-1 (V100)", "",
                  "Same model and global parameters, on `arch_configs/dgx1-v100.toml` (16 GB "
                  "V100s), minibatch 256 per GPU as in NVIDIA's benchmark.", "",
                  markdown_table(d, columns=["case", "minibatch", "published", "predicted",
                                             "error_pct", "published_scaling_pct",
                                             "predicted_scaling_pct", "utilization", "label"],
                                 floatfmt={"published": ".0f", "predicted": ".0f",
                                           "error_pct": "+.1f", "published_scaling_pct": ".1f",
                                           "predicted_scaling_pct": ".1f",
                                           "utilization": ".2f"}),
                  "", "The model has no input pipeline (JPEG decode and augmentation), "
                  "stragglers or framework synchronisation, so for several GPUs it is an upper "
                  "bound: the scaling columns (N-GPU images/s over N x one GPU's) show that the "
                  "multi-GPU error is the measured scaling loss the model does not contain, on "
                  "top of the one-GPU (compute model) error. One GPU's 1200 img/s is a fit row "
                  "(scripts/fit_compute.py fits the GPU memory efficiency on it); eight GPUs are "
                  "held out.",
                  "", f"Published measurements: {d['source'].iloc[0]}."]
    lines += ["", "## Parameter set (global, one for every figure)", "",
              "| parameter | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in prm.items()]
    lines += ["", f"Source: {meta['params_source']}", "",
              f"Off-chip bandwidth (`chip_GBps`) is the chip's total in one direction "
              f"({sysm['off_chip_links_per_chip']} links per chip share it evenly); the config's "
              f"own value is {sysm['configured_chip_GBps']:g} GB/s.", ""]
    if calibration is not None:
        lines += _calibration_lines(calibration, prm)
    else:
        lines += ["## Calibration", "", "The identifiability tables are not in this folder: run "
                  "`python scripts/calibrate.py --out DIR` (from a source checkout) and then "
                  "`accelsim figures --out DIR` to include them (reports/ in the repository has "
                  "them).", ""]
    if formats_table is not None:  # Markdown from accelsim.report.formats (`accelsim formats`)
        lines += ["## Number formats", "", "As printed by `accelsim formats`:", "",
                  formats_table.rstrip(), ""]
    lines += ["## Inputs", "", "| role | file | sha256 |", "|---|---|---|"]
    lines += [f"| {i['role']} | `{i['path']}` | `{i['sha256'][:16]}...` |" for i in meta["inputs"]]
    return "\n".join(lines) + "\n"
