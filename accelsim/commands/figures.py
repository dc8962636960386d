"""``accelsim figures``: the main job. Regenerates the HFP8 paper's throughput study (appendix D,
Figs. 8-9), the compression sweep, the DGX-1 check and a Markdown summary into one folder."""

from __future__ import annotations

NAME = "figures"
HELP = ("regenerate the throughput study (paper Figs. 8-9, compression sweep, DGX-1 check) as "
        "CSV + PNG + summary.md + manifest.json")


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
    parser.add_argument("--minibatch", type=int, default=None, metavar="N",
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

    from accelsim.cli import UserError, check_output_path
    from accelsim.commands._common import check_scheme_optimizer
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
    check_scheme_optimizer(study.SCHEMES, args.optimizer)
    params = dataclasses.replace(study.PAPER_SETUP, engine=args.engine,
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
    files = report.write_study(result, args.out, formats_table=formats_table,
                              argv=["accelsim", "figures", *_argv(args)],
                              elapsed_s=time.perf_counter() - t0)
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
