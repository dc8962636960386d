"""Design-space explorer: map every layer of a workload onto a system and pick the fastest plan.

Models the mapping search of the HFP8 paper's performance study (Sun et al., NeurIPS 2019,
appendix D: a design-space exploration tool maps each layer -- data vs model parallelism,
tiling, scratchpad use, communication/compute overlap -- with a bandwidth-centric model).

Two levels, each a tidy table:

* **points** -- every (layer, mapping, phase) evaluated by :func:`accelsim.perf.evaluate_layer`:
  chips split ``chip_dp x chip_mp`` and cores ``core_dp x core_mp`` (every factorization of the
  chip and core counts: pure data, pure model, hybrid), every dataflow; the best scratchpad tile
  is chosen inside each point. Infeasible points are rows with ``feasible=False`` and a reason.
* **plans** -- whole-network choices: ``strategy`` (``data``: data parallel everywhere, the
  paper's baseline; ``data-chips``: chips data parallel, cores free per layer; ``hybrid``: chips
  and cores free per layer) x dataflow x ``overlap`` (reduce-scatter of each layer's gradients
  overlapped with the rest of back-propagation, or all communication after it). Per layer a plan
  takes the feasible point minimizing compute + split collectives + its share of gradient
  communication. A plan is infeasible (row with a reason) if some layer has no feasible point or
  the model state and stashed activations exceed chip memory.

Gradient communication comes from the engine (:func:`accelsim.engine.run.comm_phases`: netsim's
gradient reduction and weight update) for the whole model, data parallel over all chips, and is
apportioned to layers by parameter count (:func:`accelsim.engine.schedule.layer_gradient_shares`);
a gradient-compression pass is local chip work on the critical path, never hidden. A layer
split ``m`` ways over chips reduces its gradients among ``p = chips / m`` replicas of ``1/m`` of
its weights: reduce-scatter and all-gather scale by ``((p-1)/p) / ((N-1)/N) / m`` (ring bandwidth
term), a replicated weight update by ``1/m`` (a sharded one is unchanged: ``1/N`` either way).

Step time (one iteration, minibatch ``batch`` over the whole system)::

    step_s = fwd_s + bwd_data_s + wgrad_s + compression_s + exposed_comm_s   (engine.schedule)
    exposed_comm_s = reduce_scatter_s + all_gather_s + weight_update_s        (overlap off)
                   = reduce-scatter tail after the last backward op + all_gather_s
                     + weight_update_s                                        (overlap on)

With overlap on, a layer's reduce-scatter starts when its weight gradient is ready and the
previous one has finished (one FIFO on the links; link sharing with model-parallel collectives is
not modelled). The all-gather and the weight update need fully reduced gradients and stay exposed.

Every evaluation is a pure function of its inputs; :func:`explore` farms the per-layer
evaluations out to ``concurrent.futures`` (processes by default) or Dask (optional extra).
"""

from __future__ import annotations

import dataclasses
import math
from collections import abc
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelsim.arch.schemes import get_scheme
from accelsim.dse.energy import (
    DEFAULT_ENERGY,
    RANK_METRICS,
    EnergyParams,
    add_energy_columns,
    rank,
)
from accelsim.engine.graph import Phase, Stream
from accelsim.engine.memory import layer_memory_bytes
from accelsim.engine.lower import lower_workload
from accelsim.engine.plan import LlmParams
from accelsim.engine.run import comm_phases, training_params
from accelsim.engine.stack_ops import Rules, stack_columns, stack_memory, step_scheme
from accelsim.engine.schedule import (
    CommPhases,
    ComputeProfile,
    layer_gradient_shares,
    step_time,
)
from accelsim.engine.scheduler import LayerPhases, Schedule, Task, data_parallel_graph, schedule
from accelsim.engine.trace import Row, Timeline
from accelsim.errors import InputError
from accelsim.perf.layer_model import (
    NORM_PARAM_BYTES,
    OPERAND_BYTES,
    Mapping,
    evaluate_layer,
)
from accelsim.perf.precision import layer_precisions
from accelsim.perf.systolic import DATAFLOWS

STRATEGIES = ("data", "data-chips", "hybrid")
EXECUTORS = ("process", "thread", "serial", "dask")


def _factor_pairs(n: int) -> list[tuple[int, int]]:
    """(dp, mp) with dp x mp = n, most data-parallel first (so ties resolve to data parallel)."""
    return [(n // d, d) for d in range(1, n + 1) if n % d == 0]


def mapping_candidates(system, dataflows: Sequence[str] = DATAFLOWS) -> list[Mapping]:
    """Every (chip dp x mp) x (core dp x mp) factorization of the system, for each dataflow."""
    return [Mapping(cd, cm, kd, km, df)
            for cd, cm in _factor_pairs(system.chips)
            for kd, km in _factor_pairs(system.chip.cores)
            for df in dataflows]


# ------------------------------------------------------------------------ pure evaluation task
def _evaluate_task(task):
    """One layer under a list of mappings (module-level so process pools can pickle it)."""
    system, layer, batch, precision, mappings, index = task
    cols = evaluate_layer(system, layer, batch, precision, mappings)
    cols["index"] = np.full(len(cols["layer"]), index)
    cols["mapping_id"] = np.tile(np.arange(len(mappings)), len(cols["layer"]) // len(mappings))
    return cols


def _evaluate_numbered(item):
    """``(position, task) -> (position, columns)``: results keep their place in any executor."""
    return item[0], _evaluate_task(item[1])


def _run_tasks(tasks, executor, max_workers, progress):
    """Per-layer evaluations in layer order. Process pools and Dask go through the sweeps'
    executor layer (:func:`accelsim.dse.sweep_executors.run_tasks`: workers that die with the
    caller, ignore Ctrl-C and stream results back); threads and a caller's own
    ``concurrent.futures.Executor`` map directly."""
    from tqdm import tqdm

    from accelsim.dse.sweep_executors import default_workers, make_tasks, run_tasks

    bar = dict(total=len(tasks), desc="explore: layers", unit="layer", disable=not progress,
               leave=False)
    if not isinstance(executor, str):  # a concurrent.futures.Executor supplied by the caller
        return list(tqdm(executor.map(_evaluate_task, tasks), **bar))
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; expected one of {EXECUTORS} or a "
                         "concurrent.futures.Executor")
    workers = max_workers or default_workers()
    if executor == "serial" or workers == 1:
        return [_evaluate_task(t) for t in tqdm(tasks, **bar)]
    if executor == "thread":
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=workers) as ex:
            return list(tqdm(ex.map(_evaluate_task, tasks), **bar))
    results: dict[int, dict] = {}
    with tqdm(**bar) as pbar:
        def record(numbered):
            results[numbered[0]] = numbered[1]
            pbar.update(1)

        run_tasks(_evaluate_numbered, make_tasks(list(enumerate(tasks)), workers), record,
                  executor=executor, workers=workers)
    return [results[i] for i in range(len(tasks))]  # task order, whatever order they finished in


# ------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class ExploreResult:
    """Best plan, its per-layer x phase breakdown, every plan and every point evaluated."""

    system: str
    workload: str
    batch: int
    scheme: str
    best: dict  # the best plan's row of ``plans`` ({"feasible": False, "reason": ...} if none)
    layers: object  # pandas DataFrame: best plan, one row per layer x phase
    plans: object  # pandas DataFrame: one row per plan (strategy x dataflow x overlap)
    points: object  # pandas DataFrame: one row per layer x mapping x phase
    comm: dict  # whole-model gradient reduction (netsim PhaseTimes as a dict)
    clock_MHz: float | None = None  # the power-limited clock every plan ran at (None: fixed)

    @property
    def fwd_s(self) -> float:
        return float(self.best.get("fwd_s", math.nan))

    @property
    def bwd_data_s(self) -> float:
        return float(self.best.get("bwd_data_s", math.nan))

    @property
    def wgrad_s(self) -> float:
        return float(self.best.get("wgrad_s", math.nan))

    @property
    def step_s(self) -> float:
        return float(self.best.get("step_s", math.nan))

    def schedule(self) -> Schedule:
        """The best plan's step as the one scheduler places it
        (:func:`accelsim.engine.scheduler.data_parallel_graph`): its layers' phases, each
        layer's gradient reduce-scatter share (with overlap: as soon as the layer's gradient
        is ready), the all-gather and the update."""
        b = self.best
        lay = self.layers
        order = list(dict.fromkeys(lay["index"]))
        groups = {i: [] for i in order}
        rs = dict.fromkeys(order, 0.0)
        rs_bytes = dict.fromkeys(order, 0.0)
        for r in lay.itertuples(index=False):
            groups[r.index].append((Phase(r.phase), float(r.time_s), float(r.flops),
                                    float("nan"), str(r.bound), str(r.layer), str(r.kind)))
            rs[r.index] += float(r.grad_reduce_scatter_s)
            rs_bytes[r.index] += float(r.grad_reduce_scatter_bytes)
        layers = [LayerPhases(g[0][5], g[0][6], tuple(x[:5] for x in g), rs[i], rs_bytes[i])
                  for i, g in groups.items()]
        return schedule(data_parallel_graph(
            layers, step=_step_tasks(self.scheme, b["all_gather_s"], b["weight_update_s"]),
            compression_s=b["compression_s"], buckets=bool(b["overlap"])))

    def rows(self) -> list[Row]:
        """The best plan as the engine's breakdown, read from :meth:`schedule`."""
        return self.schedule().rows()

    def timeline(self) -> Timeline:
        """The best plan's trace, read from :meth:`schedule`."""
        return self.schedule().timeline()


def explore(system, workload, batch: int, scheme, *, dataflows: Sequence[str] = DATAFLOWS,
            strategies: Sequence[str] = STRATEGIES, overlap: Sequence[bool] = (False, True),
            comm=None, compression: float = 1.0,
            engine: str = "analytic", executor="serial", max_workers: int | None = None,
            progress: bool = False, optimizer: str = "sgd-momentum",
            energy: EnergyParams = DEFAULT_ENERGY, rank_by: str = "step_s",
            stack: LlmParams | None = None) -> ExploreResult:
    """Explore mappings of ``workload`` (global minibatch ``batch``) on ``system`` under
    ``scheme`` and return the best plan with the full points and plans tables.

    ``optimizer``: its state formats price the default gradient reduction, update and memory.
    ``comm``: gradient-reduction times for the whole model (an object or dict with
    ``reduce_scatter_s``, ``all_gather_s``, ``weight_update_s``); by default computed with
    :func:`accelsim.engine.run.comm_phases` on ``system`` as built (its link
    bandwidths; ``compression`` and ``engine`` are passed on), the update at perf's fitted
    stream efficiency as ``predict`` prices it. ``executor``: "serial"
    (default), "process", "thread", "dask" or a ``concurrent.futures.Executor`` (reuse one pool across calls: starting worker
    processes costs about a second each time, more than one ResNet-50 exploration on 2 cores).
    ``energy``: per-unit costs of the plans' ``energy_J``, ``power_W``, ``samples_per_J`` and
    ``samples_per_s_per_mm2`` columns (:mod:`accelsim.dse.energy`). ``rank_by``: the metric the
    best plan maximizes or minimizes (:data:`accelsim.dse.energy.RANK_METRICS`; default the
    step time). ``stack``: the stack whose kernels and update efficiency run the kinds it
    rules, as in ``predict`` (:mod:`accelsim.engine.stack_ops`); None: perf's per-layer model.
    A chip with a ``[chip.power]`` table runs at the best plan's power-limited clock
    (:mod:`accelsim.dse.explore_power`; ``system.with_boost_clock()`` for the preset's).
    """
    import pandas as pd

    if system.chip.power_limited:
        from accelsim.dse.explore_power import explore_at_power_limit

        return explore_at_power_limit(
            explore, system, workload, batch, scheme, dataflows=dataflows,
            strategies=strategies, overlap=overlap, comm=comm, compression=compression,
            engine=engine, executor=executor, max_workers=max_workers, progress=progress,
            optimizer=optimizer, energy=energy, rank_by=rank_by, stack=stack)

    scheme = get_scheme(scheme)
    if getattr(workload, "transformer", None) is not None:
        raise InputError(f"workload {workload.name!r} is a generated transformer: it runs on the "
                         "engine's transformer path (predict or llm, any tensor/pipeline plan); "
                         "explore searches the layer mappings of layer lists")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    for df in dataflows:
        if df not in DATAFLOWS:
            raise ValueError(f"unknown dataflow {df!r}; expected one of {DATAFLOWS}")
    for st in strategies:
        if st not in STRATEGIES:
            raise ValueError(f"unknown strategy {st!r}; expected one of {STRATEGIES}")
    if rank_by not in RANK_METRICS:
        raise InputError(f"unknown rank metric {rank_by!r}; expected one of "
                         f"{', '.join(RANK_METRICS)}")
    if not dataflows or not strategies or not overlap:
        raise ValueError("dataflows, strategies and overlap must each name at least one option")

    if comm is None:
        comm = comm_phases(system, workload, step_scheme(scheme, optimizer, stack and stack.stack),
                           training_params(batch, compression=compression, engine=engine,
                                           optimizer=optimizer, system=system, stack=stack))
    # a mapping of the three phase times (and the compression pass), or a dataclass holding
    # them (the engine's CommPhases)
    comm_d = dict(comm) if isinstance(comm, abc.Mapping) else dataclasses.asdict(comm)
    for k in ("reduce_scatter_s", "all_gather_s", "weight_update_s"):
        v = comm_d.get(k)
        if v is None or not (math.isfinite(v) and v >= 0):
            raise ValueError(f"comm.{k} must be a finite time >= 0, got {v!r}")

    # ---- points: every layer under every candidate mapping (element-wise: data parallel)
    # only the splits some requested strategy may use (a pure saving: same plans either way)
    chip_mp_ok = "hybrid" in strategies
    core_mp_ok = chip_mp_ok or "data-chips" in strategies
    maps = [m for m in mapping_candidates(system, dataflows)
            if (chip_mp_ok or m.chip_mp == 1) and (core_mp_ok or m.core_mp == 1)]
    # element-wise layers only care how many ranks share them: chip splits, all cores
    ew_maps = [Mapping(cd, cm, system.chip.cores, 1, dataflows[0])
               for cd, cm in _factor_pairs(system.chips) if chip_mp_ok or cm == 1]
    tasks, ruled = [], []
    ops = lower_workload(workload, batch, scheme, stack and stack.stack)  # one op per layer
    rules = stack and Rules.of(system, workload, stack)
    for i, op in enumerate(ops):  # the stack's kernels (a GEMM's: beside perf's GEMMs)
        cols = stack_columns(system, op, rules, maps if op.layer.is_gemm else ew_maps, i)
        if cols is not None:
            ruled.append(cols)
        if cols is None or op.layer.is_gemm:
            tasks.append((system, op.layer, batch, op.precision,
                          maps if op.layer.is_gemm else ew_maps, i))
    results = sorted(_run_tasks(tasks, executor, max_workers, progress) + ruled,
                     key=lambda r: int(r["index"][0]))
    points = pd.DataFrame({k: np.concatenate([r[k] for r in results]) for k in results[0]})

    # ---- per layer x mapping: phase times side by side, gradient-communication share
    wide = points.pivot_table(index=["index", "mapping_id"], columns="phase", values="time_s",
                              aggfunc="sum", fill_value=0.0, sort=True)
    for ph in ("fwd", "bwd_data", "wgrad", "bwd"):
        if ph not in wide:
            wide[ph] = 0.0
    wide = wide.reset_index()
    first = points.drop_duplicates(["index", "mapping_id"]).set_index(["index", "mapping_id"])
    key = pd.MultiIndex.from_frame(wide[["index", "mapping_id"]])
    for c in ("layer", "kind", "chip_dp", "chip_mp", "core_dp", "core_mp", "dataflow"):
        wide[c] = first[c].reindex(key).to_numpy()
    feas = points.groupby(["index", "mapping_id"])["feasible"].all().reindex(key)
    reason = points[~points.feasible].groupby(["index", "mapping_id"])["reason"].first()
    wide["feasible"] = feas.to_numpy()
    wide["reason"] = reason.reindex(key).fillna("").to_numpy()
    params = np.array([workload.layers[i].n_params for i in wide["index"]], dtype=np.float64)
    whole = CommPhases(comm_d["reduce_scatter_s"], comm_d["all_gather_s"],
                       comm_d["weight_update_s"], comm_d.get("compression_s", 0.0))
    wide["rs_s"], wide["ag_s"], wide["wu_s"] = layer_gradient_shares(
        params, wide["chip_mp"].to_numpy(), system.chips, whole, workload.n_params,
        scheme.sharded_update)
    wide["compute_s"] = wide["fwd"] + wide["bwd_data"] + wide["wgrad"] + wide["bwd"]
    wide["score_s"] = np.where(wide["feasible"],
                               wide["compute_s"] + wide["rs_s"] + wide["ag_s"] + wide["wu_s"],
                               np.inf)

    # ---- plans
    info = _LayerInfo.of(workload, batch, scheme, ops, rules, optimizer)
    plan_rows, chosen_by_plan = [], {}
    elementwise = ~np.array([workload.layers[i].is_gemm for i in wide["index"]])
    for strategy in strategies:
        for df in dataflows:
            allowed = elementwise | (wide["dataflow"].to_numpy() == df)
            if strategy == "data":
                allowed &= (wide["chip_mp"].to_numpy() == 1) & (wide["core_mp"].to_numpy() == 1)
            elif strategy == "data-chips":
                allowed &= wide["chip_mp"].to_numpy() == 1
            cand = wide[allowed]
            # first feasible minimum per layer (score is inf where infeasible)
            pick = cand.loc[cand.groupby("index")["score_s"].idxmin()]
            bad = pick[~np.isfinite(pick["score_s"])]
            for ov in overlap:
                row = dict(strategy=strategy, dataflow=df, overlap=bool(ov))
                if len(bad):
                    r0 = bad.iloc[0]
                    row.update(feasible=False, reason=f"layer {r0['layer']}: {r0['reason']}")
                    plan_rows.append(row)
                    continue
                row.update(_plan_times(system, batch, scheme, info, pick, bool(ov),
                                       whole.compression_s, optimizer))
                plan_rows.append(row)
                chosen_by_plan[(strategy, df, bool(ov))] = pick
    plans = pd.DataFrame(plan_rows)
    for c in ("fwd_s", "bwd_data_s", "wgrad_s", "compute_s", "reduce_scatter_s", "all_gather_s",
              "weight_update_s", "exposed_comm_s", "step_s", "samples_per_s",
              "achieved_flops", "utilization", "memory_per_chip_bytes"):
        if c not in plans:
            plans[c] = np.nan
    plans["feasible"] = plans["feasible"].astype(bool)
    plans["reason"] = plans["reason"].fillna("")
    add_energy_columns(plans, system, workload, scheme, batch, compression, energy)
    ok = plans[plans["feasible"]]
    if ok.empty:
        raise_reason = plans["reason"].iloc[0]
        best = {"feasible": False, "reason": raise_reason}
        layers = points.iloc[0:0]
    else:
        bi = rank(ok, rank_by).index[0]
        best = plans.loc[bi].to_dict()
        pick = chosen_by_plan[(best["strategy"], best["dataflow"], best["overlap"])]
        sel = pd.MultiIndex.from_frame(pick[["index", "mapping_id"]])
        layers = points.set_index(["index", "mapping_id"]).loc[sel].reset_index()
        share = pick.set_index("index")[["rs_s", "ag_s", "wu_s"]]
        share = share.assign(rs_bytes=_reduce_scatter_bytes(
            workload, pick, scheme, optimizer, system.chips, compression))
        layers = layers.join(share, on="index")
        only_fwd = layers["phase"] != "fwd"  # charge each layer's gradient share once
        layers.loc[only_fwd, ["rs_s", "ag_s", "wu_s", "rs_bytes"]] = 0.0
        layers = layers.rename(columns={"rs_s": "grad_reduce_scatter_s",
                                        "rs_bytes": "grad_reduce_scatter_bytes",
                                        "ag_s": "grad_all_gather_s",
                                        "wu_s": "grad_weight_update_s"})
        layers["achieved_flops"] = layers["flops"] / layers["time_s"]
        front = ["layer", "index", "kind", "phase", "precision", "time_s", "bound", "chip_dp",
                 "chip_mp", "core_dp", "core_mp", "dataflow"]
        layers = layers[front + [c for c in layers.columns if c not in front]]
    return ExploreResult(system=system.name, workload=workload.name, batch=batch,
                         scheme=scheme.name, best=best, layers=layers, plans=plans,
                         points=points, comm=comm_d)


@dataclass(frozen=True)
class _LayerInfo:
    """Per-layer constants a plan needs (arrays indexed by layer index)."""

    params: np.ndarray
    act_bytes_per_sample: np.ndarray  # activations kept for backward, one sample (bytes)
    elementwise: np.ndarray  # bool: channel-split (mp) element-wise layers split their stash
    weight_bytes: np.ndarray  # compute-weight bytes per parameter (storage precision)
    gemm_flops: float  # all GEMM FLOPs of one step (whole minibatch)
    stack_memory: object = None  # under a stack: the engine's account, (dp, mp) -> bytes

    @classmethod
    def of(cls, workload, batch, scheme, ops=(), rules=None, optimizer="sgd-momentum"
           ) -> _LayerInfo:
        params, act, wb, flops = [], [], [], 0.0
        prec = layer_precisions(workload, scheme)  # storage precision: 8-bit under fp8
        for layer in workload.layers:
            ob = OPERAND_BYTES[prec[layer.name]]
            if layer.is_gemm:
                flops += sum(g.flops for g in layer.gemms(batch).values())
            params.append(layer.n_params)
            act.append(layer.saved_elements * ob)
            wb.append(ob if layer.is_gemm else NORM_PARAM_BYTES)
        mem = None if rules is None else stack_memory(ops, batch, scheme, optimizer, rules)
        return cls(np.array(params, dtype=np.float64), np.array(act, dtype=np.float64),
                   np.array([not la.is_gemm for la in workload.layers]),
                   np.array(wb, dtype=np.float64), flops, mem)


def _reduce_scatter_bytes(workload, pick, scheme, optimizer: str, chips: int,
                          compression: float) -> list[float]:
    """Bytes each chip sends in each chosen layer's gradient reduce-scatter: the data-parallel
    transformation's CommOp (:func:`accelsim.engine.lower.gradient_comm_ops`) over the layer's
    ``chips / m`` replicas for its ``1/m`` share of the weights (``m`` its chip split)."""
    from accelsim.engine.lower import gradient_comm_ops

    out = []
    for i, m in zip(pick["index"], pick["chip_mp"]):
        n, m = int(workload.layers[int(i)].n_params), int(m)
        reps = chips // m
        out.append(gradient_comm_ops(n, scheme, optimizer, reps, compression=compression)[0]
                   .bytes / m if n and reps > 1 else 0.0)
    return out


def _step_tasks(scheme, all_gather_s: float, weight_update_s: float) -> list[Task]:
    """The all-gather and the optimizer update after the gradient reduction, in the scheme's
    phase order (hfp8 updates its shard before it all-gathers)."""
    out = []
    for ph in get_scheme(scheme).phase_order:
        if ph == "all_gather" and all_gather_s > 0:
            out.append(Task("grads", "all_gather", Phase.STEP, all_gather_s, Stream.DP))
        elif ph == "weight_update" and weight_update_s > 0:
            out.append(Task("grads", "weight_update", Phase.STEP, weight_update_s))
    return out


def _plan_times(system, batch, scheme, info: _LayerInfo, pick, overlap: bool,
                compression_s: float, optimizer: str) -> dict:
    """Step time, exposed communication and memory footprint of one plan (pure; the engine's
    step rule and memory account)."""
    pick = pick.sort_values("index")
    fwd = float(pick["fwd"].sum())
    bwd_data = float(pick["bwd_data"].sum() + pick["bwd"].sum())
    wgrad = float(pick["wgrad"].sum())
    rs, ag, wu = (float(pick[c].sum()) for c in ("rs_s", "ag_s", "wu_s"))
    hidden = 0.0
    if overlap:  # each layer's gradient reduce-scatter as soon as it is ready: the schedule's
        layers = [LayerPhases(str(r.layer), str(r.kind), (
            (Phase.FWD, r.fwd, 0.0, 0.0, ""), (Phase.WGRAD, r.wgrad, 0.0, 0.0, ""),
            (Phase.BWD, r.bwd, 0.0, 0.0, ""), (Phase.BWD_DATA, r.bwd_data, 0.0, 0.0, "")),
            r.rs_s) for r in pick.itertuples(index=False)]
        span = schedule(data_parallel_graph(layers, step=_step_tasks(scheme, ag, wu),
                                            compression_s=compression_s,
                                            buckets=True)).makespan_s
        hidden = fwd + bwd_data + wgrad + compression_s + rs + ag + wu - span
    st = step_time(ComputeProfile(scheme=scheme.name, minibatch=batch, fwd_s=fwd,
                                  bwd_data_s=bwd_data, wgrad_s=wgrad, flops=info.gemm_flops,
                                  peak_flops=system.peak_flops(scheme.compute_precision)),
                   CommPhases(rs, ag, wu, compression_s), hidden_s=hidden)
    idx = pick["index"].to_numpy()
    dp, mp = pick["chip_dp"].to_numpy(dtype=np.float64), pick["chip_mp"].to_numpy(dtype=float)
    mem = info.stack_memory(dp, mp) if info.stack_memory else layer_memory_bytes(
        info.params[idx], info.weight_bytes[idx], info.act_bytes_per_sample[idx],
        info.elementwise[idx], batch, scheme, dp=dp, mp=mp, optimizer=optimizer)
    row = dict(fwd_s=fwd, bwd_data_s=bwd_data, wgrad_s=wgrad, compute_s=st.compute_s,
               reduce_scatter_s=rs, all_gather_s=ag, weight_update_s=wu,
               compression_s=compression_s,
               exposed_comm_s=st.exposed_comm_s, step_s=st.step_s,
               samples_per_s=st.samples_per_s, achieved_flops=st.achieved_flops_per_s,
               utilization=st.utilization, memory_per_chip_bytes=mem,
               model_parallel_layers=int(((pick["chip_mp"] > 1) | (pick["core_mp"] > 1)).sum()),
               feasible=True, reason="")
    cap = system.chip.memory_capacity_bytes
    if mem > cap:
        row.update(feasible=False, reason=f"needs {mem / 2**30:.2f} GiB per chip > memory "
                   f"{cap / 2**30:.2f} GiB (weights, optimizer state, stashed activations)")
    return row
