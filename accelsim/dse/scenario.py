"""A sweep point -> one scenario (typed System + Workload + scheme + :class:`TrainingParams`)
-> one row. Keys are validated before any point runs (:func:`validate_spec`); every setting that
shaped a row is in the row (given keys as parameters, the rest as effective values).

Keys, one meaning each (docs/dse.md):

* scenario knobs: ``system``, ``workload`` (path or shipped name), ``scheme``, the
  :class:`TrainingParams` fields (``minibatch``, ``overlap``, ``per_tensor_overhead_s``,
  ``memory_efficiency``, ``optimizer``, ``compression``, ``engine``);
* bandwidth: ``chip_GBps`` (a chip's total off-chip bandwidth, one direction, split over its
  links), ``link_GBps`` (one link, one direction), ``inter_board_GBps`` (one board-to-board link);
* config overrides: short aliases (``chips``, ``cores``, ``rows``, ``cols``, ``array`` = RxC, ...)
  or any dotted key of the system TOML (``core.rows``, ``system.inter_board.bandwidth_GBps``).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from accelsim.arch import ConfigError, System, Unbuildable, build_system
from accelsim.arch import scenario as arch_scenario
from accelsim.arch.schemes import get_scheme
from accelsim.dse.hfp8_study import DEFAULT_SYSTEM, DEFAULT_WORKLOAD, PAPER_SETUP, PAPER_SETUP_SOURCE
from accelsim.dse.energy import ENERGY_COLUMNS, step_energy, step_work
from accelsim.dse.training import training_step
from accelsim.engine.schedule import STEP_COLUMNS, TrainingParams
from accelsim.dse.sweep import MAX_POINTS, Infeasible, SweepSpec
from accelsim.errors import MAX_COUNT, InputError
from accelsim.paths import resolve_input
from accelsim.workload import Workload

if TYPE_CHECKING:
    import pandas as pd

PARAM_KEYS = tuple(f.name for f in fields(TrainingParams))
BANDWIDTH_KEYS = ("chip_GBps", "link_GBps", "inter_board_GBps")
SCENARIO_KEYS = ("system", "workload", "scheme", *PARAM_KEYS, *BANDWIDTH_KEYS)
#: Short names for common config overrides (dotted TOML keys of the arch config).
OVERRIDE_ALIASES = {
    "chips": "system.chips",
    "cores": "chip.cores",
    "rows": "core.rows",
    "cols": "core.cols",
    "memory_bandwidth_GBps": "chip.memory_bandwidth_GBps",
    "frequency_GHz": "core.frequency_GHz",
    "scratchpad_MiB": "core.scratchpad_MiB",
}
#: Settings recorded in every row (the point's own value, or the effective one).
SETTING_COLUMNS = ("system", "system_name", "workload", "scheme", *PARAM_KEYS, "chips",
                   *BANDWIDTH_KEYS)
RESULT_COLUMNS = tuple(c for c in STEP_COLUMNS if c not in ("scheme", "minibatch")) \
    + ("peak_samples_per_s",)
#: Energy and area of the step (accelsim.dse.energy), after the timing results.
COLUMNS = SETTING_COLUMNS + RESULT_COLUMNS + ENERGY_COLUMNS


def defaults() -> dict[str, Any]:
    """Values a sweep starts from: the default system and workload, scheme hfp8 and the
    calibrated step parameters of the HFP8 study (:data:`PAPER_SETUP`); bandwidths come from the
    system config. Recorded in every row and in the sweep's manifest."""
    return {"system": DEFAULT_SYSTEM, "workload": DEFAULT_WORKLOAD, "scheme": "hfp8",
            **dataclasses.asdict(PAPER_SETUP)}


def defaults_source() -> str:
    return ("system and workload: the HFP8 study's inputs; scheme: hfp8; step parameters: "
            f"PAPER_SETUP ({PAPER_SETUP_SOURCE}); bandwidths: the system config")


def valid_keys_text() -> str:
    return (f"{', '.join(SCENARIO_KEYS)}; aliases {', '.join(OVERRIDE_ALIASES)}, array (RxC); or "
            "a dotted key of the system config such as core.rows or "
            "system.inter_board.bandwidth_GBps")


def _int_if_integral(v: Any) -> Any:
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def config_overrides(point: Mapping[str, Any]) -> dict[str, Any]:
    """The dotted config overrides of a point (aliases expanded, ``array`` split)."""
    ov: dict[str, Any] = {}
    for k, v in point.items():
        if k in SCENARIO_KEYS:
            continue
        v = _int_if_integral(v)
        if k == "array":
            r, _, c = str(v).lower().partition("x")
            try:
                ov["core.rows"], ov["core.cols"] = int(r), int(c)
            except ValueError:
                raise ValueError(f"array must be ROWSxCOLS, e.g. 32x32, got {v!r}") from None
        elif k in OVERRIDE_ALIASES:
            ov[OVERRIDE_ALIASES[k]] = v
        elif "." in k:
            ov[k] = v
        else:
            raise ValueError(f"unknown sweep key {k!r}; valid keys: {valid_keys_text()}")
    return ov


@functools.lru_cache(maxsize=64)
def _system(path: str, overrides: tuple[tuple[str, Any], ...],
            bandwidth: tuple[tuple[str, float], ...]) -> System:
    return build_system(resolve_input(path, "system"), dict(overrides), **dict(bandwidth))


@functools.lru_cache(maxsize=16)
def _workload(spec: str) -> Workload:
    from accelsim.workload import load_workload, read_scalesim_topology

    path = resolve_input(spec, "workload")
    return read_scalesim_topology(path) if path.suffix.lower() == ".csv" else load_workload(path)


@dataclass(frozen=True)
class Scenario:
    """Everything one training-step evaluation needs, built once at the top."""

    system: System
    workload: Workload
    scheme: str
    params: TrainingParams

    def settings(self) -> dict[str, Any]:
        """Every setting that shapes the result, with its effective value."""
        s = self.system
        return {"system_name": s.name, "workload": self.workload.name, "scheme": self.scheme,
                **dataclasses.asdict(self.params), "chips": s.chips,
                "chip_GBps": arch_scenario.chip_GBps(s),
                "link_GBps": arch_scenario.link_GBps(s),
                "inter_board_GBps": arch_scenario.inter_board_GBps(s)}


#: Largest minibatch a point may ask for (the CLI's --batch/--minibatch bound)
MAX_MINIBATCH = MAX_COUNT


def build_scenario(point: Mapping[str, Any]) -> Scenario:
    """The scenario of a sweep point (keys missing from the point take :func:`defaults`).
    ValueError/ConfigError for bad keys or values; :class:`Infeasible` for a chip count the
    system's boards cannot take."""
    p = {**defaults(), **point}
    ov = config_overrides(p)
    bandwidth = tuple((k, float(p[k])) for k in BANDWIDTH_KEYS if p.get(k) not in (None, ""))
    try:
        system = _system(str(p["system"]), tuple(sorted(ov.items())), bandwidth)
    except Unbuildable as exc:
        raise Infeasible(str(exc)) from None
    if "chip.fusion" not in ov:  # the default predict takes (on for a GPU: cuDNN/XLA fuse)
        system = system.with_fusion(system.chip.default_fusion)
    workload = _workload(str(p["workload"]))
    scheme = get_scheme(str(p["scheme"])).name
    kw = {k: _int_if_integral(p[k]) if k == "minibatch" else p[k] for k in PARAM_KEYS}
    mb = kw.get("minibatch")
    if isinstance(mb, int) and not isinstance(mb, bool) and mb > MAX_MINIBATCH:
        raise InputError(f"minibatch must be an integer in [1, {MAX_MINIBATCH:,}], got {mb!r}")
    return Scenario(system, workload, scheme, TrainingParams(**kw))


def _step_work(sc: Scenario):
    """MACs and bytes of a scenario's step (cached: communication-only sweeps share it)."""
    return _cached_step_work(sc.system, sc.workload, sc.scheme, sc.params.minibatch,
                             sc.params.compression)


@functools.lru_cache(maxsize=64)
def _cached_step_work(system, workload, scheme, minibatch, compression):
    return step_work(system, workload, scheme, minibatch, compression)


def evaluate_point(point: Mapping[str, Any], drop: Iterable[str] = ()) -> dict[str, Any]:
    """Sweep evaluator: one training step for a point; the row carries every effective setting
    (except the keys in ``drop``, which the sweep records as the point's own parameters)."""
    sc = build_scenario(point)
    st = training_step(sc.system, sc.workload, sc.scheme, sc.params)
    row = {**sc.settings(), "system": str({**defaults(), **point}["system"])}
    row.update({k: v for k, v in st.as_row().items() if k not in ("scheme", "minibatch")})
    row["peak_samples_per_s"] = st.peak_samples_per_s
    en = step_energy(sc.system, _step_work(sc), st.step_s, sc.params.minibatch).as_row()
    row.update({c: en[c] for c in ENERGY_COLUMNS})
    drop = set(drop)
    return {k: v for k, v in row.items() if k not in drop}


evaluate_point.columns = COLUMNS


def output_columns(spec: SweepSpec) -> tuple[str, ...]:
    """The evaluator columns of a sweep: every setting not already a parameter, then results."""
    return tuple(c for c in COLUMNS if c not in spec.param_names)


#: Keys that do not change a point's compute profile (only communication and the update): points
#: that differ only in these share one worker task in a parallel sweep, so its cache hits.
COMM_ONLY_KEYS = (*BANDWIDTH_KEYS, "compression", "engine", "overlap", "per_tensor_overhead_s",
                  "memory_efficiency", "optimizer", "system.link.bandwidth_GBps",
                  "system.link.latency_ns", "system.inter_board.bandwidth_GBps",
                  "system.inter_board.latency_ns")


def group_by():
    """The ``group_by`` of :func:`accelsim.dse.sweep.run_sweep` for training-step sweeps."""
    from accelsim.dse.sweep import GroupAllBut

    return GroupAllBut(*COMM_ONLY_KEYS)


def training_sweep(axes: Iterable[str], fixed: Iterable[str] = (),
                   out: str | os.PathLike[str] | None = None, *, executor: str = "auto",
                   workers: int | None = None, progress: bool = True,
                   max_points: int = MAX_POINTS) -> pd.DataFrame:
    """What ``accelsim sweep --axis ... --set ... --out OUT`` runs, as one call: training-step
    points from ``KEY=V1,V2`` axes (ranges ``START:STOP:STEP`` / ``START:STOP:xF``) and
    ``KEY=V`` fixed values over the study's defaults, keys checked before any point runs, rows
    journalled to ``out`` (.csv / .parquet; rerunning resumes) or kept in memory (None). Returns
    the table (pandas), one row per point."""
    from accelsim.dse import sweep as sw

    spec = sw.spec_from_assignments(axes=axes, base=fixed, defaults=defaults(),
                                    max_points=max_points)
    spec.check_size(max_points)
    validate_spec(spec)
    evaluate = functools.partial(evaluate_point, drop=tuple(spec.param_names))
    return sw.run_sweep(spec, evaluate, out, columns=output_columns(spec), executor=executor,
                        workers=workers, progress=progress, group_by=group_by(),
                        max_points=max_points)


def check_keys(keys: Iterable[str]) -> None:
    """ValueError naming any key that is not a scenario key, an alias, ``array`` or a dotted
    config key (whether a dotted key exists is checked against the system by
    :func:`validate_spec`)."""
    bad = [k for k in keys if k not in SCENARIO_KEYS and k not in OVERRIDE_ALIASES
           and k != "array" and "." not in k]
    if bad:
        raise ValueError(f"unknown sweep key(s) {', '.join(map(repr, bad))}; valid keys: "
                         f"{valid_keys_text()}")


def validate_spec(spec: SweepSpec) -> None:
    """The dry run: every key and every value of every axis is checked (the scenario is built
    with the base values) before any point runs. Raises ValueError naming the key and value."""
    check_keys(spec.param_names)
    base = dict(spec.base)
    trials: list[tuple[str | None, dict[str, Any]]] = [(None, base)]
    for k, values in spec.axes:
        trials += [(k, {**base, k: v}) for v in values]
    for k, point in trials:
        try:
            build_scenario(point)  # a dotted key the system TOML lacks is a ConfigError naming it
        except Infeasible:
            pass  # a design that does not fit is a result, not an input error
        except (ValueError, ConfigError, FileNotFoundError, TypeError) as exc:
            where = f"{k}={point[k]!r}: " if k is not None else ""
            raise InputError(f"{where}{exc}") from None


def sample_kind(workload: Workload) -> str:
    """What one sample of ``samples_per_s`` is: an image for CNNs, a sequence otherwise."""
    kinds = {layer.kind for layer in workload.layers}
    return "image" if "conv" in kinds else "sequence"


def manifest(spec: SweepSpec) -> dict[str, Any]:
    """What a sweep table needs beside it: the defaults and their source, the sample kinds."""
    kinds = {}
    for p in (dict(spec.base), *[{k: v} for k, vs in spec.axes if k == "workload" for v in vs]):
        if "workload" in p:
            try:
                w = _workload(str(p["workload"]))
                kinds[w.name] = sample_kind(w)
            except (ValueError, FileNotFoundError, ConfigError):
                pass
    return {"defaults": defaults(), "defaults_source": defaults_source(),
            "base": dict(spec.base), "axes": {k: list(v) for k, v in spec.axes},
            "n_points": spec.n_points, "sample_kind": kinds,
            "throughput_column": "samples_per_s (samples per second; see sample_kind)",
            "bandwidth_columns": {"chip_GBps": "a chip's total off-chip bandwidth, one direction",
                                  "link_GBps": "one board link, one direction",
                                  "inter_board_GBps": "one board-to-board link, one direction "
                                                      "(empty on a single board)"}}
