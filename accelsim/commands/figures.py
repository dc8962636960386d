"""``accelsim figures``: the main job. Regenerates the HFP8 paper's throughput study (appendix D,
Figs. 8-9), the compression sweep, the DGX-1 check, the co-design report (codesign.md/.csv:
time and energy to a target loss per number format, accelsim.dse.codesign_report) and a
Markdown summary into one folder."""

from __future__ import annotations

from pathlib import Path

from accelsim.commands._common import positive_int

NAME = "figures"
HELP = ("regenerate the throughput study (paper Figs. 8-9, compression sweep, DGX-1 check) and "
        "the co-design report (codesign.md/.csv, from the shipped study curves) as CSV + PNG + "
        "summary.md + manifest.json")


def add_arguments(parser) -> None:
    from accelsim.commands._common import optimizer_choices

    parser.add_argument("--out", default="reports", metavar="DIR",
                        help="output folder (default: reports/)")
    parser.add_argument("--engine", choices=("analytic", "des"), default="analytic",
                        help="network engine for the gradient-reduction phases: alpha-beta "
                             "analytic model (default) or simpy discrete-event simulation")
    parser.add_argument("--system", default=None, metavar="TOML",
                        help="architecture config (default: arch_configs/hfp8-64chip.toml)")
    parser.add_argument("--workload", default=None, metavar="TOML",
                        help="workload (default: workloads/resnet50.toml)")
    parser.add_argument("--dgx1", default=None, metavar="TOML",
                        help="DGX-1 config for the real-world check (default: "
                             "arch_configs/dgx1-v100.toml; 'none' skips the check)")
    parser.add_argument("--minibatch", type=positive_int, default=None, metavar="N",
                        help="global minibatch (default: the calibrated PAPER_SETUP value, 384); "
                             "the DGX-1 check always uses NVIDIA's 256 per GPU")
    parser.add_argument("--optimizer", choices=optimizer_choices(),
                        default="sgd-momentum",
                        help="optimizer and its state formats (default sgd-momentum, the "
                             "calibrated setup; hfp8 defines no adamw recipe)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def run(args) -> int:
    import time

    import dataclasses

    from accelsim.commands._common import check_output_path, check_scheme_optimizer
    from accelsim.errors import UserError
    from accelsim.dse import hfp8_study as study
    from accelsim.dse.sweep import Infeasible
    from accelsim.paths import resolve_input
    from accelsim.report import figures as report

    t0 = time.perf_counter()
    try:
        system_path = resolve_input(args.system or study.DEFAULT_SYSTEM, "system")
        workload_path = resolve_input(args.workload or study.DEFAULT_WORKLOAD, "workload")
        dgx1_path = None
        if (args.dgx1 or "").lower() != "none":
            dgx1_path = resolve_input(args.dgx1 or study.DEFAULT_DGX1, "system")
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    check_output_path(args.out, "--out", directory=True)
    from accelsim.errors import choose
    from accelsim.netsim import Engine

    check_scheme_optimizer(study.SCHEMES, args.optimizer)
    params = dataclasses.replace(study.PAPER_SETUP, engine=choose(Engine, args.engine, "--engine"),
                                 optimizer=args.optimizer)
    if args.minibatch is not None:
        try:
            params = dataclasses.replace(params, minibatch=args.minibatch)
        except ValueError as exc:
            raise UserError(f"--minibatch: {exc}") from None
    try:
        result = study.run_study(system_path, workload_path, dgx1_path=dgx1_path, params=params,
                                 progress=not args.no_progress)
    except Infeasible as exc:
        raise UserError(f"{system_path} with minibatch {params.minibatch}: {exc} "
                        "(try a smaller --minibatch)") from None
    formats_table = _formats_table()
    codesign, codesign_inputs = _codesign_report()
    files = report.write_study(result, args.out, formats_table=formats_table,
                              calibration=_read_calibration(Path(args.out)),
                              argv=["accelsim", "figures", *_argv(args)],
                              elapsed_s=time.perf_counter() - t0,
                              extra_outputs=codesign, extra_inputs=codesign_inputs)
    for f in files:
        print(f)
    cmp_ = result.tables["paper_comparison"]
    for r in cmp_.itertuples(index=False):
        print(f"  {r.description}: paper {r.published:g}{r.unit}, accelsim {r.accelsim:.1f}{r.unit}"
              f" ({'within' if r.within_tolerance else 'OUTSIDE'} +-{r.tolerance:g})")
    if "dgx1" in result.tables:
        for r in result.tables["dgx1"].itertuples(index=False):
            print(f"  DGX-1 {r.case}: NVIDIA {r.published:.0f} img/s, accelsim "
                  f"{r.predicted:.0f} img/s ({r.error_pct:+.1f} %)")
    print(f"done in {time.perf_counter() - t0:.1f} s ({args.engine} engine)")
    return 0


def _codesign_report():
    """The co-design report's files (codesign.md, codesign.csv) from the shipped study curves,
    and its inputs for the manifest (accelsim.dse.codesign_report; docs/codesign.md)."""
    from accelsim.dse import codesign_report as cr
    from accelsim.dse.hfp8_study import sha256_file
    from accelsim.paths import display_path, resolve_input
    from accelsim.report.codesign import codesign_csv, codesign_markdown

    table, claims, meta = cr.build_report(cr.read_curves(cr.CURVES))
    files = {"codesign.md": codesign_markdown(table, claims, meta),
             "codesign.csv": codesign_csv(table)}
    paths = [("codesign curves", cr.CURVES),
             ("codesign system", resolve_input(cr.SYSTEM, "system"))]
    paths += [("codesign workload", resolve_input(m.workload, "workload")) for m in cr.MODELS]
    pkg_root = Path(cr.__file__).resolve().parents[2]  # the curves as accelsim/data/...
    return files, [{"role": r, "path": (p.relative_to(pkg_root).as_posix()
                                        if p == cr.CURVES else display_path(p)),
                    "sha256": sha256_file(p)} for r, p in paths]


#: tables that ``scripts/calibrate.py --out DIR`` leaves in DIR; the summary shows them
CALIBRATION_FILES = ("calibration.csv", "calibration_ranges.csv")


def _read_calibration(out: Path):
    """(residuals, ranges) tables of ``scripts/calibrate.py`` in ``out``, or None when it has not
    been run there (read here: the report room takes tables, not files)."""
    import pandas as pd

    paths = [out / f for f in CALIBRATION_FILES]
    if not all(p.is_file() for p in paths):
        return None
    try:
        return tuple(pd.read_csv(p) for p in paths)
    except (OSError, ValueError) as exc:  # damaged tables: say so rather than fail the run
        from accelsim.errors import UserError

        raise UserError(f"{out}: cannot read the calibration tables {', '.join(CALIBRATION_FILES)}"
                        f": {' '.join(str(exc).split())}") from None


def _argv(args) -> list[str]:
    out = ["--out", str(args.out), "--engine", args.engine]
    for k in ("system", "workload", "dgx1", "minibatch"):
        v = getattr(args, k)
        if v is not None:
            out += [f"--{k}", str(v)]
    return out


def _formats_table():
    """The number-format table (Markdown) from engineer A's machinery when it exists:
    :func:`accelsim.numerics.table.format_table` rendered by
    :func:`accelsim.report.formats.table_to_markdown`, the columns ``accelsim formats`` prints."""
    try:
        from accelsim.numerics.table import format_table
        from accelsim.report.formats import table_to_markdown
    except ImportError:
        return None
    shown = ["format", "bits", "sign_exp_mant", "bias", "min_subnormal", "min_normal", "max",
             "eps", "binades", "finite_codes", "specials"]
    table = format_table()
    shown = [c for c in shown if c in table.columns]
    return table_to_markdown(table, shown,
                             pow2_columns=("min_subnormal", "min_normal", "max", "eps"))
