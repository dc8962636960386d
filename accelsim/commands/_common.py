"""Shared command-line pieces: the bandwidth flags (one meaning each, as in sweeps and tables),
workload/system arguments that take shipped names, and positive-number checks."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

# one set of bounds for flags, files and API calls (re-exported: commands import them from here)
from accelsim.bounds import (MAX_CHIPS, MAX_COUNT, MAX_DIM, MAX_MODEL_LAYERS,  # noqa: F401
                             MAX_SEED, MAX_STUDY_SEEDS, MAX_TRAIN_STEPS, MEMORY_RESERVE_GiB,
                             PER_TENSOR_OVERHEAD_S, PLAUSIBLE)
from accelsim.errors import UserError


#: figure formats matplotlib's Agg backend writes (by file suffix)
FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff")


def check_figure_path(path: str | Path, flag: str) -> Path:
    """:func:`check_output_path` for a figure: the suffix must name a format matplotlib writes."""
    p = check_output_path(path, flag)
    if p.suffix.lower() not in FIGURE_SUFFIXES:
        raise UserError(f"{flag} {path}: a figure needs one of the suffixes "
                        f"{', '.join(FIGURE_SUFFIXES)}")
    return p


def output_path(text: str) -> Path:
    """argparse type of an output file or folder: a non-empty path (``Path("")`` is ".", so
    ``--out ""`` wrote into the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an empty path {text!r}; give a file or folder name")
    return Path(text)


#: what a table that a sweep journal backs (sweep --out, llm --search --out) may be written as
TABLE_SUFFIXES = (".csv", ".parquet")


def check_output_name(path: str | Path, flag: str, *, directory: bool = False,
                      suffixes: tuple[str, ...] = ()) -> Path:
    """The name part of :func:`check_output_path` (nothing on disk is made): refuse an empty
    path, a folder where a file is meant, or a file name without one of ``suffixes`` (the
    formats the flag writes)."""
    if not str(path).strip():
        raise UserError(f"{flag}: an empty path {str(path)!r}; give a "
                        f"{'folder' if directory else 'file'} name")
    p = Path(path)
    if not directory and p.is_dir():
        raise UserError(f"{flag} {p}: is a directory; give a file name")
    if suffixes and p.suffix not in suffixes:
        raise UserError(f"{flag} {p}: must end in {' or '.join(suffixes)} (the format "
                        f"{flag} writes)")
    return p


def check_output_path(path: str | Path, flag: str, *, directory: bool = False,
                      suffixes: tuple[str, ...] = ()) -> Path:
    """Refuse, before any computing, an output path that cannot be written: empty, without one
    of ``suffixes`` (the formats the flag writes, e.g. ``(".csv",)``), its parent is not a
    directory or not writable, or the target is a directory (a file was meant) / a file (a
    folder was meant). Missing parent folders are created."""
    p = check_output_name(path, flag, directory=directory, suffixes=suffixes)
    if directory:
        if p.exists() and not p.is_dir():
            raise UserError(f"{flag} {p}: exists and is not a directory")
        target_dir = p
    else:
        target_dir = p.parent if str(p.parent) else Path(".")
    for anc in [target_dir, *target_dir.parents]:
        if anc.exists():
            if not anc.is_dir():
                raise UserError(f"{flag} {p}: {anc} is not a directory")
            break
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{flag} {p}: cannot create {target_dir}: {exc.strerror or exc}") from None
    if not os.access(target_dir, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {p}: {target_dir} is not writable")
    if not directory and p.exists() and not os.access(p, os.W_OK):
        raise UserError(f"{flag} {p}: file is not writable")
    return p


def check_outputs(outputs, inputs=()) -> None:
    """The one check behind a command's output flags, before any computing: ``outputs`` are
    (flag, path, suffixes) triples (a None path: not asked for), ``inputs`` (flag, path) pairs
    of the files it reads. Refuses an empty path or a wrong suffix, two outputs on one file or
    an output on an input (:func:`check_distinct_paths`), then an unwritable path
    (:func:`check_output_path`, which makes missing folders)."""
    given = [(flag, path, suffixes) for flag, path, suffixes in outputs if path is not None]
    for flag, path, suffixes in given:
        check_output_name(path, flag, suffixes=suffixes)
    check_distinct_paths([(flag, path) for flag, path, _ in given], inputs)
    for flag, path, suffixes in given:
        check_output_path(path, flag, suffixes=suffixes)


def check_distinct_paths(outputs, inputs=()) -> None:
    """Refuse two outputs of one command on the same file (the second silently overwrote the
    first: ``--breakdown x --trace x``), or an output on one of its inputs. ``outputs`` and
    ``inputs``: (what, path) pairs, ``what`` a flag or "--out's <stem>_plans.csv"; a None path
    is skipped. Paths are compared resolved (``./a.csv`` is ``a.csv``; a symlink is its
    target)."""

    def key(path):
        return Path(os.path.abspath(os.path.expanduser(path))).resolve()

    read = {key(path): what for what, path in reversed(inputs) if path is not None}
    written: dict[Path, str] = {}
    for what, path in outputs:
        if path is None:
            continue
        k = key(path)
        if k in read:
            raise UserError(f"{what} {path}: the same file as the input {read[k]}, which it "
                            "would overwrite; write elsewhere")
        if k in written:
            raise UserError(f"{what} {path}: the same file as {written[k]}; give each output "
                            "its own file")
        written[k] = what


def _range_text(lo, hi, lo_open: bool = False) -> str:
    def num(x):
        return f"{x:,}" if isinstance(x, int) else f"{x:g}"

    if hi is None:
        return f"{'>' if lo_open else '>='} {num(lo)}"
    return f"{'(' if lo_open else '['}{num(lo)}, {num(hi)}]"


def int_type(lo: int, hi: int | None = MAX_COUNT, what: str = "an integer"):
    """argparse type: an integer in ``[lo, hi]``; argparse prefixes the flag, the message says
    the value and the range ("argument --m: must be an integer in [1, 2,147,483,647], got
    '99999999999999999999'")."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(
                f"must be {what} in {_range_text(lo, hi)}, got {text!r}"
                if hi is not None else f"must be {what} {_range_text(lo, hi)}, got {text!r}")
        return v

    parse.__name__ = f"integer in {_range_text(lo, hi)}"  # argparse's "invalid <name> value"
    return parse


def float_type(lo: float, hi: float | None = None, *, lo_open: bool = False):
    """argparse type: a finite number in ``[lo, hi]`` (``(lo, hi]`` when ``lo_open``)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        ok = math.isfinite(v) and (v > lo if lo_open else v >= lo) and (hi is None or v <= hi)
        if not ok:
            raise argparse.ArgumentTypeError(
                f"must be a finite number {'in ' if hi is not None else ''}"
                f"{_range_text(lo, hi, lo_open)}, got {text!r}")
        return v

    parse.__name__ = f"number in {_range_text(lo, hi, lo_open)}"
    return parse


#: argparse types: a finite number > 0 / >= 0; an integer in [1, MAX_COUNT] / [0, MAX_COUNT];
#: a tensor dimension in [1, MAX_DIM]; a seed in [0, MAX_SEED]; the other bounds of
#: :mod:`accelsim.bounds` (the library checks the same numbers)
positive_float = float_type(0.0, lo_open=True)
nonnegative_float = float_type(0.0)
positive_int = int_type(1)
nonnegative_int = int_type(0)
dimension = int_type(1, MAX_DIM)
model_layers = int_type(1, MAX_MODEL_LAYERS)
chip_count = int_type(1, MAX_CHIPS)
seed = int_type(0, MAX_SEED, "a seed (an integer)")
train_steps = int_type(1, MAX_TRAIN_STEPS)
memory_reserve_GiB = float_type(*MEMORY_RESERVE_GiB)
per_tensor_overhead_us = float_type(PER_TENSOR_OVERHEAD_S[0] * 1e6, PER_TENSOR_OVERHEAD_S[1] * 1e6)


def vocabulary(enum_cls, what: str):
    """argparse type: the member of a closed vocabulary (a str-valued Enum) a flag names,
    resolved once here; an unknown name lists the choices."""

    def parse(text: str):
        try:
            return enum_cls(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {text!r}; choose from "
                f"{', '.join(m.value for m in enum_cls)}") from None

    parse.__name__ = what
    return parse


def choice_list(choices, what: str):
    """argparse type: a comma-separated, non-empty list of names from ``choices`` (a str-valued
    Enum class, or a callable returning a tuple of names, called when the flag is parsed), as a
    tuple; an unknown or missing name lists the choices."""

    def parse(text: str) -> tuple:
        known = tuple(choices) if isinstance(choices, type) else tuple(choices())
        names = [x.strip() for x in text.split(",") if x.strip()]
        if not names:
            raise argparse.ArgumentTypeError(f"names no {what}; choose from "
                                             f"{', '.join(map(str, known))}")
        bad = [x for x in names if x not in known]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {what} {bad[0]!r}; choose from "
                                             f"{', '.join(map(str, known))}")
        return tuple(known[known.index(x)] for x in dict.fromkeys(names))

    parse.__name__ = f"{what} list"
    return parse


def config_range_float(key: str):
    """argparse type for a flag that sets config key ``key`` (e.g. ``bandwidth_GBps``): the same
    plausible range a config file must keep (:data:`accelsim.bounds.PLAUSIBLE`)."""
    lo, hi = PLAUSIBLE[key]
    return float_type(lo, hi)


def config_range_int(key: str):
    """argparse type for an integer flag that sets config key ``key`` (``rows``, ``chips``)."""
    lo, hi = PLAUSIBLE[key]
    return int_type(int(lo), int(hi))


def add_bandwidth_arguments(parser: argparse.ArgumentParser, *, many: bool = False) -> None:
    """--chip-GBps / --link-GBps (mutually exclusive) and --inter-board-GBps."""
    nargs = "+" if many else None
    g = parser.add_mutually_exclusive_group()
    bandwidth = config_range_float("bandwidth_GBps")
    g.add_argument("--chip-GBps", type=bandwidth, nargs=nargs, default=None, metavar="GBPS",
                   help="a chip's total off-chip bandwidth in one direction, split evenly over "
                        "its links (the HFP8 paper's 'off-chip bandwidth'; default: as configured)"
                        + ("; several values make a sweep" if many else ""))
    g.add_argument("--link-GBps", type=bandwidth, nargs=nargs, default=None, metavar="GBPS",
                   help="one off-chip link in one direction (every link of a chip; default: as "
                        "configured)" + ("; several values make a sweep" if many else ""))
    parser.add_argument("--inter-board-GBps", type=bandwidth, default=None, metavar="GBPS",
                        help="one board-to-board link in one direction, applied after "
                             "--link-GBps (default: as configured)")


def optimizer_choices() -> tuple[str, ...]:
    """The optimizers a plan can name (:data:`accelsim.arch.schemes.OPTIMIZERS`)."""
    from accelsim.arch.schemes import OPTIMIZERS

    return tuple(OPTIMIZERS)


def check_scheme_optimizer(schemes, optimizer: str) -> None:
    """Refuse (one line, naming both flags) a scheme that defines no recipe for the optimizer."""
    from accelsim.arch.schemes import check_optimizer, get_scheme
    from accelsim.errors import UserError

    for name in schemes:
        try:
            check_optimizer(get_scheme(name), optimizer)
        except ValueError as exc:
            raise UserError(f"--scheme {name} --optimizer {optimizer}: {exc}") from None


def scheme_choices() -> tuple[str, ...]:
    """The preset training schemes (:mod:`accelsim.arch.schemes`), for ``--scheme`` flags."""
    from accelsim.arch.schemes import SCHEME_NAMES

    return SCHEME_NAMES


def require_precisions(system, path, precisions, flag: str) -> None:
    """UserError unless the system's cores have a MAC rate for every one of ``precisions``."""
    for prec in dict.fromkeys(precisions):
        if not system.chip.core.supports(prec):
            raise UserError(f"{path}: core.macs_per_pe_per_cycle has no {prec} rate "
                            f"(needed by {flag})")


def system_path(spec: str | Path) -> Path:
    from accelsim.paths import resolve_input

    return resolve_input(spec, "system")


def load_workload_arg(spec: str):
    """A workload TOML, a SCALE-Sim topology CSV or a shipped name (resnet50, bert-base, ...)."""
    from accelsim.paths import resolve_input
    from accelsim.workload import load_workload, read_scalesim_topology

    path = resolve_input(spec, "workload")
    return read_scalesim_topology(path) if path.suffix.lower() == ".csv" else load_workload(path)


def journal_rows(out) -> int:
    """Finished points in the sweep journal of ``out`` (a .csv, or a .parquet's journal; 0 if
    none)."""
    out = Path(out)
    journal = out if out.suffix == ".csv" else out.with_name(out.name + ".journal.csv")
    try:
        with journal.open("rb") as f:
            return max(0, sum(1 for line in f if line.endswith(b"\n")) - 1)
    except OSError:
        return 0


def exit_interrupted(command: str, saved: str, out) -> None:
    """Ctrl-C in a resumable run: say what is saved where, then exit 130 (one line on stderr).

    ``saved``: what is on disk, e.g. "12 of 108 points"."""
    print(f"accelsim {command}: interrupted; {saved} are saved in {out}; rerun the same command "
          f"to resume", file=sys.stderr, flush=True)
    raise SystemExit(130) from None



def datapath_note(system, scheme) -> str:
    """Tell the user (stderr) when the chip has no datapath of its own for the scheme's
    precision (it runs at the nearest wider one the config has:
    :data:`accelsim.arch.model.WIDER_DATAPATH`, e.g. hif8 on a chip with only an fp8 rate,
    block-scaled formats on Hopper), or computes it no faster than the scheme's high precision;
    either way any gain comes from the smaller tensors in memory. PRECISIONS runs from wide to
    narrow: the second note is for a narrower scheme (fp8 beside fp16), never for
    fp32/tf32/bf16 beside the fp16 default. Returns the datapath the GEMMs run on (``--json``'s
    ``datapath``)."""
    import sys

    from accelsim.arch.model import PRECISIONS

    core, cp, hp = system.chip.core, scheme.compute_precision, scheme.high_precision
    datapath = core.datapath(cp)
    if datapath != cp:
        print(f"note: {system.name} has no {cp} datapath; it runs at its {datapath} rate, the "
              f"nearest wider datapath it has ({cp}'s tensors, scales included, still count in "
              "memory)", file=sys.stderr)
        return datapath
    narrower = PRECISIONS.index(cp) > PRECISIONS.index(hp)
    if narrower and core.supports(hp) and \
            core.macs_per_cycle_per_pe(cp) <= core.macs_per_cycle_per_pe(hp):
        print(f"note: {system.name} computes {cp} no faster than {hp} (its config has no "
              f"faster {cp} datapath); any gain over {hp} comes from {cp}'s smaller tensors "
              "in memory", file=sys.stderr)
    return datapath


def add_power_arguments(parser: argparse.ArgumentParser) -> None:
    """``--clock``, ``--power-limit-W`` (and the kept ``--power-model``): every front-end that
    times kernels (each also adds the hardware what-ifs,
    :func:`accelsim.commands._hardware.add_hardware_arguments`, whose ``--frequency-GHz`` pins
    the clock: :func:`power_system` refuses the power flags beside it)."""
    parser.add_argument("--clock", choices=("power", "boost"), default="power",
                        help="power (default): sustained work runs at the highest SM clock "
                             "its average power allows under the chip's limit (a GEMM at its "
                             "own, a training iteration, prefill or decode step at its "
                             "average; the limiter averages ~1 s), on every chip with a "
                             "[chip.power] table; chips without one run their fixed clock. "
                             "boost: the what-if of a burst shorter than the limiter's window, "
                             "the preset's fixed clock whatever the power")
    parser.add_argument("--power-model", action="store_true",
                        help="kept for scripts: the power-limited clock is the default "
                             "(--clock power)")
    parser.add_argument("--power-limit-W", type=config_range_float("power_limit_W"),
                        default=None, metavar="W",
                        help="what-if board power limit in watts (needs --clock power)")


def power_system(system, spath, args: argparse.Namespace, precision: str):
    """(system, power-limited?): the clock the front-end's sustained work runs at. ``--clock
    power`` (the default) on a chip with a [chip.power] table pricing ``precision``'s datapath:
    the power-limited clock (under ``--power-limit-W`` if given, which must lie above the
    chip's static power); ``--clock boost``, or a chip without such a table: the preset's
    fixed clock (asking for a power limit or the power model there is an error)."""
    explicit = args.power_model or args.power_limit_W is not None
    flag = ("--power-limit-W" if args.power_limit_W is not None else "--power-model")
    if args.frequency_GHz is not None:  # a pinned clock: the fixed-clock what-if at it
        if explicit:
            raise UserError(f"--frequency-GHz fixes the SM clock; {flag} lets the power limit "
                            "set it: give one of them")
        return system.with_boost_clock(), False
    if args.clock == "boost":
        if explicit:
            raise UserError(f"{flag} with --clock boost: the boost what-if runs the preset's "
                            "fixed clock whatever the power (drop one)")
        return system.with_boost_clock(), False
    power = system.chip.power
    if power is None:
        if explicit:
            raise UserError(f"{flag}: {spath} has no [chip.power] table (docs/configs.md); "
                            "the presets with one: h100-sxm, h100-pcie, h200-sxm, a100-sxm, "
                            "a100-pcie-40gb, dgx-h100, dgx-h800, dgx-a100")
        return system, False
    datapath = system.chip.core.datapath(precision)
    if not power.has_energy(datapath):
        if explicit:
            raise UserError(f"{flag}: {spath} chip.power.flop_pJ has no energy for {datapath} "
                            f"(it prices {', '.join(p for p, _ in power.flop_J)})")
        return system.with_boost_clock(), False
    if args.power_limit_W is not None:
        if args.power_limit_W <= power.static_W:
            raise UserError(f"--power-limit-W {args.power_limit_W:g}: must be above the chip's "
                            f"static power, {power.static_W:g} W ({spath} chip.power.static_W)")
        system = system.with_power_limit(args.power_limit_W)
    return system.with_power_model(), True


def clock_text(system) -> str:
    """The settings line's clock: which one the numbers ran at, and why."""
    f = system.chip.core.frequency_Hz / 1e6
    if system.chip.power_limited:
        return f"clock power-limited ({system.chip.power.power_limit_W:g} W limit)"
    if system.chip.power is None:
        return f"clock {f:.0f} MHz fixed (no [chip.power] table)"
    return (f"clock {f:.0f} MHz fixed (--clock boost or --frequency-GHz, or a datapath the "
            "power fit does not price)")


def add_flash_argument(parser) -> None:
    """``--flash-attention`` / ``--no-flash-attention``: every front-end that builds a decoder
    from flags (llm, workload gpt). On by default, as every current training stack runs it
    (PyTorch SDPA, Megatron-LM's --use-flash-attn, Transformer Engine's fused attention)."""
    parser.add_argument("--flash-attention", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="attention kernel that keeps no score matrix and skips the causal "
                             "half (default: on; --no-flash-attention for the unfused kernel "
                             "that writes the s x s scores)")


def memory_fit(system, need_GiB: float) -> dict:
    """The JSON fields every front-end reports beside its memory per chip
    (:func:`accelsim.engine.memory.memory_fit`, one chip of ``system``)."""
    from accelsim.engine.memory import memory_fit as fit

    return fit(need_GiB * 2**30, float(system.chip.memory_capacity_bytes))


def not_fit_line(need_GiB: float, cap_GiB: float, per: str, hint: str) -> str:
    """The first line of a text report whose plan does not fit one chip's memory."""
    return f"DOES NOT FIT: {need_GiB:.1f} GiB per {per} > {cap_GiB:.4g} GiB ({hint})"


def add_attention_variant_arguments(parser) -> None:
    """``--alibi`` and ``--window``: a decoder's attention variants (llm, infer), applied to the
    model by :func:`attention_variant`."""
    parser.add_argument("--alibi", action="store_true",
                        help="ALiBi positions (MPT, BLOOM): no position table; the bias is "
                             "added inside the attention kernel at no cost (FlashAttention-3 "
                             "has none)")
    parser.add_argument("--window", type=dimension, default=None, metavar="W",
                        help="sliding-window attention: each token attends at most W keys, "
                             "itself included (Mistral); a flash kernel computes only the band")


def attention_variant(config, args: argparse.Namespace):
    """``config`` (a TransformerConfig) with ``--alibi`` / ``--window`` applied; itself when
    neither is given."""
    from dataclasses import replace

    from accelsim.workload.transformer import PositionKind

    over: dict = {}
    if args.alibi:
        over["positions"] = PositionKind.ALIBI
    if args.window is not None:
        over["sliding_window"] = args.window
    return replace(config, **over) if over else config
