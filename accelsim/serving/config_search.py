"""The configuration search of request-level serving (``accelsim serve --search``,
``accelsim.serving.search``): every deployment of a model on at most ``gpus`` GPUs over the
axes of a :class:`SearchSpace` (TP, PP, EP, replicas, batch limits, chunked-prefill budget,
aggregated or disaggregated prefill/decode, KV-cache dtype) runs the same seeded request
stream, and the configurations are ranked by goodput per GPU under the SLOs, then goodput per
joule (Vidur's configuration search; NVIDIA AIConfigurator's aggregated vs disaggregated).

Each configuration is one :func:`accelsim.serving.run.run` of its :class:`Deployment`: the
numbers of its row are those of a plain ``serve`` run of the same settings. A configuration
that cannot run (heads not divisible, the weights not fitting, more GPUs than given) is a row
with ``status`` ``infeasible`` and its ``reason``, counted, not an error. Rows are journalled
as they finish (:mod:`accelsim.dse.sweep_journal`, with a ``settings`` hash of the stream, the
SLOs and the fixed settings: a journal of other settings is refused), run where
:mod:`accelsim.dse.sweep_executors` puts them, and ranked once all are in.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from accelsim.arch import System
from accelsim.bounds import MAX_CHIPS, MAX_SEED, MAX_SERVE_SEARCH_CONFIGS, check_number
from accelsim.dse.sweep_executors import (check_executor, choose_executor, default_workers,
                                           make_tasks, run_tasks)
from accelsim.dse.sweep_journal import CRC_COLUMN, Journal, encode_line, write_atomic
from accelsim.dse.sweep_spec import point_id
from accelsim.engine.decoder import Decoder
from accelsim.engine.inference import KV_BYTES
from accelsim.errors import Infeasible, InputError, check_int
from accelsim.serving import arrivals as arr
from accelsim.serving.policy import REQUEST_OVERHEAD_S
from accelsim.serving.run import Deployment, deployment, request_stream, run
from accelsim.serving.scheduler import DEFAULT_MAX_BATCHED_TOKENS, MAX_BATCH

#: most values one axis may list
MAX_AXIS_VALUES = 64
#: the table's name when ``out`` is a folder
TABLE_NAME = "serve_search.csv"
#: a configuration's settings, the table's first columns after ``rank``, ``point_id``, ``settings``
CONFIG_COLUMNS = ("gpus", "tp", "pp", "ep", "replicas", "disagg", "prefill_tp", "kv_cache",
                  "max_batch", "max_batched_tokens", "chunked_prefill")
#: the metrics of a row (``serve --json``'s keys, and goodput per GPU and per joule)
METRIC_COLUMNS = (
    "goodput_requests_per_s_per_gpu", "goodput_requests_per_J", "goodput_requests_per_s",
    "slo_attainment", "requests_per_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
    "time_to_first_token_s_p50", "time_to_first_token_s_p90", "time_to_first_token_s_p99",
    "time_per_output_token_s_p50", "time_per_output_token_s_p90",
    "time_per_output_token_s_p99", "request_latency_s_p50", "request_latency_s_p99",
    "kv_transfer_s_p50", "preemptions", "kv_cache_utilization", "kv_cache_tokens_per_replica",
    "energy_J_per_output_token", "power_W_per_gpu")
COLUMNS = ("rank", "point_id", "settings", *CONFIG_COLUMNS, "status", "reason",
           *METRIC_COLUMNS)


def _axis(name: str, values: Sequence, check) -> tuple:
    """``values`` checked one by one (``check(name, v)``), duplicates dropped, order kept."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
        raise InputError(f"search axis {name} must be a non-empty list of values, got "
                         f"{values!r}")
    if len(values) > MAX_AXIS_VALUES:
        raise InputError(f"search axis {name}: {len(values):,} values, more than "
                         f"{MAX_AXIS_VALUES}")
    for v in values:
        check(name, v)
    return tuple(dict.fromkeys(values))


def _ints(lo: int, hi: int):
    return lambda name, v: check_int(f"search axis {name}", v, lo, hi)


def _chunk(name: str, v: Any) -> None:
    if v is not None:
        check_int(f"search axis {name} (None: no chunked prefill)", v, 1, 1 << 24)


def _kv(name: str, v: Any) -> None:
    if v not in KV_BYTES:
        raise InputError(f"search axis {name}: {v!r} is not a KV-cache dtype "
                         f"({', '.join(KV_BYTES)})")


def _flag(name: str, v: Any) -> None:
    if not isinstance(v, bool):
        raise InputError(f"search axis {name} takes True/False, got {v!r}")


def _split(name: str, v: Any) -> None:
    if v is None or v == "all":
        return
    if not (isinstance(v, tuple) and len(v) == 2):
        raise InputError(f"search axis {name}: {v!r} is not None (aggregated), 'all' or "
                         "(prefill replicas, decode replicas)")
    for n in v:
        check_int(f"search axis {name} replicas", n, 1, 4096)


@dataclass(frozen=True)
class SearchSpace:
    """The axes of a search on at most ``gpus`` GPUs. ``tp`` None: the powers of two up to
    ``gpus`` and the node; ``replicas`` None: as many as fit (``gpus // (tp * pp)``);
    ``expert_parallel``: ep = 1 (False) and/or ep = tp (True), None: both for a MoE model;
    ``chunk``: None (no chunked prefill, ``max_batched_tokens`` per iteration) or a chunked
    prefill's token budget; ``disagg``: None (aggregated), (P, D) replicas, or ``"all"``: every
    P x D split that fits, on ``prefill_tp`` GPUs per prefill replica (None: as the decode)."""

    gpus: int
    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] = (1,)
    expert_parallel: tuple[bool, ...] | None = None
    replicas: tuple[int, ...] | None = None
    max_batch: tuple[int, ...] = (64, 256)
    chunk: tuple[int | None, ...] = (None, 2048)
    kv_cache: tuple[str, ...] = ("bf16", "fp8")
    disagg: tuple[tuple[int, int] | str | None, ...] = (None,)
    prefill_tp: tuple[int, ...] | None = None
    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS

    def __post_init__(self) -> None:
        check_int("gpus", self.gpus, 1, MAX_CHIPS)
        check_int("max_batched_tokens", self.max_batched_tokens, 1, 1 << 24)
        chips = _ints(1, MAX_CHIPS)
        for name, check in (("tp", chips), ("pp", chips), ("expert_parallel", _flag),
                            ("replicas", _ints(1, 4096)), ("max_batch", _ints(1, MAX_BATCH)),
                            ("chunk", _chunk), ("kv_cache", _kv), ("disagg", _split),
                            ("prefill_tp", chips)):
            values = getattr(self, name)
            if values is not None:
                object.__setattr__(self, name, _axis(name, values, check))

    def configs(self, system: System, model: Decoder) -> list[dict[str, Any]]:
        """Every configuration (a row's settings), in a fixed order; refused past
        :data:`~accelsim.bounds.MAX_SERVE_SEARCH_CONFIGS` before any runs."""
        if model.config.moe is None and True in (self.expert_parallel or ()):
            raise InputError(f"expert parallelism (ep = tp) is for MoE models; {model.name} "
                             "is dense")
        out: dict[str, dict[str, Any]] = {}
        for c in self._iter(system, model):
            out.setdefault(point_id(c), c)  # ep = tp at tp 1 is ep 1: one row
            if len(out) > MAX_SERVE_SEARCH_CONFIGS:
                raise InputError(
                    f"serve search: more than {MAX_SERVE_SEARCH_CONFIGS:,} configurations on "
                    f"{self.gpus} GPUs; narrow the axes (tp, pp, replicas, max batch, chunk, "
                    "KV dtype, disagg)")
        return list(out.values())

    def _iter(self, system: System, model: Decoder) -> Iterator[dict[str, Any]]:
        tps = self.tp or tuple(t for t in (1, 2, 4, 8, 16, 32, 64)
                               if t <= min(self.gpus, system.chips))
        eps = self.expert_parallel or ((False, True) if model.config.moe else (False,))
        for kv in self.kv_cache:
            for tp in tps:
                for pp in self.pp:
                    for ep in eps:
                        for layout in self._layouts(tp, pp):
                            for mb in self.max_batch:
                                for ch in self.chunk:
                                    yield {**layout, "tp": tp, "pp": pp,
                                           "ep": tp if ep else 1, "kv_cache": kv,
                                           "max_batch": mb,
                                           "max_batched_tokens": ch or self.max_batched_tokens,
                                           "chunked_prefill": ch is not None}

    def _layouts(self, tp: int, pp: int) -> Iterator[dict[str, Any]]:
        """Replicas and prefill/decode splits of ``tp`` x ``pp`` GPUs per (decode) replica."""
        for split in self.disagg:
            if split is None:
                for r in self.replicas or (max(1, self.gpus // (tp * pp)),):
                    yield {"replicas": r, "disagg": "", "prefill_tp": None,
                           "gpus": r * tp * pp}
                continue
            for ptp in self.prefill_tp or (tp,):
                if split != "all":
                    p, d = split
                    yield _disagg(p, d, ptp, tp, pp)
                    continue
                p = 1
                while (self.gpus - p * ptp * pp) // (tp * pp) >= 1:
                    yield _disagg(p, (self.gpus - p * ptp * pp) // (tp * pp), ptp, tp, pp)
                    p += 1


def _disagg(p: int, d: int, ptp: int, tp: int, pp: int) -> dict[str, Any]:
    return {"replicas": d, "disagg": f"{p}x{d}", "prefill_tp": ptp,
            "gpus": (p * ptp + d * tp) * pp}


@dataclass(frozen=True)
class _Evaluate:
    """One configuration's row: its deployment run on the stream (picklable for workers)."""

    system: System
    model: Decoder
    scheme: str
    fixed: Mapping[str, Any]  # the deployment's settings outside the axes
    requests: tuple[arr.Request, ...]
    seed: int
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    gpus: int
    settings: str

    def deployment(self, c: Mapping[str, Any]) -> Deployment:
        split = None if not c["disagg"] else tuple(int(n) for n in c["disagg"].split("x"))
        return deployment(
            self.system, self.model, self.scheme, tp=c["tp"], pp=c["pp"], ep=c["ep"],
            replicas=1 if split else c["replicas"], kv_cache=c["kv_cache"],
            max_batch=c["max_batch"], max_batched_tokens=c["max_batched_tokens"],
            chunked_prefill=c["chunked_prefill"], disagg=split, prefill_tp=c["prefill_tp"],
            **self.fixed)

    def __call__(self, c: Mapping[str, Any]) -> dict[str, Any]:
        row = {"point_id": point_id(c), "settings": self.settings, **c}
        try:
            if c["gpus"] > self.gpus:
                raise Infeasible(f"uses {c['gpus']} GPUs, more than {self.gpus}")
            dep = self.deployment(c)
            d = run(dep, self.requests, self.seed, self.slo_ttft_s, self.slo_tpot_s).as_dict()
        except (InputError, Infeasible) as exc:
            return {**row, "status": "infeasible", "reason": str(exc)}
        good = d["goodput_requests_per_s"]
        power = None if d["power_W_per_gpu"] is None else d["power_W_per_gpu"] * dep.gpus
        d["goodput_requests_per_s_per_gpu"] = None if good is None else good / dep.gpus
        d["goodput_requests_per_J"] = None if good is None or not power else good / power
        return {**row, "status": "ok", "reason": "",
                **{k: d.get(k) for k in METRIC_COLUMNS}}


def rank(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` best first, ``rank`` 1, 2, ...: goodput per GPU, then goodput per joule, then
    fewer GPUs (the first enumerated on a tie); infeasible rows last, unranked."""
    t = table.reset_index(drop=True)
    ok = t["status"] == "ok"
    keys = pd.DataFrame({
        "g": -pd.to_numeric(t["goodput_requests_per_s_per_gpu"]).fillna(0.0),
        "j": -pd.to_numeric(t["goodput_requests_per_J"]).fillna(0.0),
        "n": pd.to_numeric(t["gpus"]), "i": range(len(t))})
    order = keys[ok].sort_values(["g", "j", "n", "i"]).index.tolist()
    t["rank"] = pd.array([None] * len(t), dtype="Int64")
    t.loc[order, "rank"] = range(1, len(order) + 1)
    return t.loc[order + t.index[~ok].tolist()].reset_index(drop=True)


_INTS = ("gpus", "tp", "pp", "ep", "replicas", "max_batch", "max_batched_tokens")
_NULLABLE_INTS = ("rank", "prefill_tp", "preemptions", "kv_cache_tokens_per_replica")


def _typed(t: pd.DataFrame) -> pd.DataFrame:
    """One set of column types, whether the rows come from memory or the journal."""
    t = t.astype({**{c: "int64" for c in _INTS}, **{c: "Int64" for c in _NULLABLE_INTS},
                  "chunked_prefill": bool,
                  **{c: "float64" for c in METRIC_COLUMNS if c not in _NULLABLE_INTS}})
    for c in ("disagg", "reason"):
        t[c] = t[c].fillna("").astype(str)
    return t


def settings_key(*parts: Any) -> str:
    """The settings hash a search's rows carry: what every configuration shares."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def search(system: System, model: str | Path | Decoder, scheme: str, *, gpus: int,
           space: SearchSpace | None = None, rate: float | None = None, requests: int = 1000,
           input_tokens: int | None = None, output_tokens: int | None = None,
           lengths: str | Path | None = None, arrivals: str | Path | None = None,
           burstiness: float = 1.0, seed: int = 0, slo_ttft_s: float | None = None,
           slo_tpot_s: float | None = None, host_overhead_s: float = 0.0,
           request_overhead_s: float = REQUEST_OVERHEAD_S, spec_decode: int = 0,
           accept_rate: float | None = None, draft: str = "mtp", expert_skew: float = 1.0,
           memory_reserve_GiB: float = 0.0, prefix_cache: bool = False,
           prefix_hit_rate: float | None = None, preemption: str = "recompute",
           host_link_GBps: float | None = None, out: str | Path | None = None,
           executor: str = "auto", workers: int | None = None, progress: bool = False,
           dask_address: str | None = None) -> pd.DataFrame:
    """Serve the same request stream (as :func:`accelsim.serving.serve` takes it) on every
    configuration of ``space`` (default ``SearchSpace(gpus)``) and rank them (:func:`rank`);
    the settings outside the axes as ``serve`` takes them. ``out``: a CSV (or a folder: its
    ``serve_search.csv``) journal, each row appended as it finishes, a rerun resuming it;
    ``executor``/``workers``/``dask_address`` as :func:`accelsim.dse.sweep.run_sweep`'s.
    Returns one row per configuration, best first."""
    from tqdm.auto import tqdm

    space = SearchSpace(gpus) if space is None else space
    if not isinstance(space, SearchSpace) or space.gpus != gpus:
        raise InputError(f"space must be a SearchSpace of gpus={gpus}, got {space!r}")
    if slo_ttft_s is None and slo_tpot_s is None:
        raise InputError("a search ranks by goodput: give slo_ttft_s and/or slo_tpot_s")
    check_executor(executor)
    if workers is not None:
        check_int("workers", workers, 1, 4096)
    fixed = dict(host_overhead_s=host_overhead_s, request_overhead_s=request_overhead_s,
                 spec_decode=spec_decode, accept_rate=accept_rate, draft=draft,
                 expert_skew=expert_skew, memory_reserve_GiB=memory_reserve_GiB,
                 prefix_cache=prefix_cache, prefix_hit_rate=prefix_hit_rate,
                 preemption=preemption, host_link_GBps=host_link_GBps)
    base = deployment(system, model, scheme, **fixed)  # the fixed settings, checked once
    reqs = request_stream(rate=rate, requests=requests, input_tokens=input_tokens,
                          output_tokens=output_tokens, lengths=lengths, arrivals=arrivals,
                          burstiness=burstiness, seed=seed)
    check_int("seed", seed, 0, MAX_SEED)
    for name, v in (("slo_ttft_s", slo_ttft_s), ("slo_tpot_s", slo_tpot_s)):
        if v is not None:
            check_number(name, v, 0.0, None, lo_open=True)
    key = settings_key(system, base.model, scheme, sorted(fixed.items()), reqs, seed,
                       slo_ttft_s, slo_tpot_s, gpus)
    ev = _Evaluate(system, base.model, scheme, fixed, reqs, seed, slo_ttft_s, slo_tpot_s,
                   gpus, key)
    configs = space.configs(system, base.model)
    ids = [point_id(c) for c in configs]
    path = _table_path(out)
    journal = None if path is None else Journal(path, COLUMNS, id_column="point_id",
                                                check_row=_check_row)
    rows: dict[str, dict[str, Any]] = {}
    if journal is not None:
        journal.open()
    try:
        if journal is not None:
            _refuse_other_settings(journal, key)
        done = journal.done if journal is not None else rows.keys()
        todo = [c for i, c in zip(ids, configs) if i not in done]
        n = workers or default_workers()
        if executor == "auto":
            executor = choose_executor(todo, n, _group)
        tasks = ([todo] if todo else []) if executor == "serial" else make_tasks(todo, n, _group)
        bar = tqdm(total=len(configs), initial=len(configs) - len(todo), disable=not progress,
                   desc="serve search", unit="config", leave=False)

        def record(row: Mapping[str, Any]) -> None:
            if row["point_id"] in done:
                return
            if journal is not None:
                journal.append([row.get(c) for c in COLUMNS])
            else:
                rows[row["point_id"]] = dict(row)
            bar.update(1)

        try:
            run_tasks(ev, tasks, record, executor=executor, workers=n,
                      close_fds=journal.fds() if journal is not None else (),
                      dask_address=dask_address)
        finally:
            bar.close()
        if journal is None:
            return rank(_typed(pd.DataFrame([rows[i] for i in ids], columns=list(COLUMNS))))
        return _finish(journal, ids)
    finally:
        if journal is not None:
            journal.close()


def _group(c: Mapping[str, Any]) -> tuple:
    """Configurations of one plan share perf's GEMM cache: one worker's task."""
    return (c["kv_cache"], c["tp"], c["pp"], c["ep"], c["prefill_tp"])


def _table_path(out: str | Path | None) -> Path | None:
    if out is None:
        return None
    out = Path(out)
    if out.is_dir() or not out.suffix:
        return out / TABLE_NAME
    if out.suffix != ".csv":
        raise InputError(f"{out}: a search table is a .csv file (or a folder)")
    return out


def _check_row(row: Mapping[str, str]) -> str | None:
    if row["status"] not in ("ok", "infeasible"):
        return f"status {row['status']!r} is neither 'ok' nor 'infeasible'"
    return None


def _cells(line: bytes) -> list[str]:
    """A journal line's cells, its checksum left off."""
    return next(csv.reader([line.decode().rstrip("\r\n")]))[:-1]


def _refuse_other_settings(journal: Journal, key: str) -> None:
    at = COLUMNS.index("settings")
    if any(_cells(line)[at] != key for line in journal.lines.values()):
        raise InputError(f"{journal.path} holds a search of other settings (request stream, "
                         "SLOs, model or engine settings): delete it or choose another --out")


def _finish(journal: Journal, ids: Sequence[str]) -> pd.DataFrame:
    """The search's rows ranked, the journal rewritten best first with its ranks (rows of
    configurations outside this search, same settings, after them unranked)."""
    path = journal.path
    table = pd.read_csv(path, keep_default_na=False, na_values=[""],
                        dtype={c: str for c in ("point_id", "settings", "disagg", "reason",
                                                "kv_cache")}).drop(columns=CRC_COLUMN)
    table = table.set_index("point_id").loc[list(ids)].reset_index()[list(COLUMNS)]
    table = rank(_typed(table))
    ranks = dict(zip(table["point_id"], table["rank"]))
    first = [*table["point_id"], *(p for p in journal.lines if p not in ranks)]
    lines = {}
    for pid in first:
        cells = _cells(journal.lines[pid])
        r = ranks.get(pid)
        cells[0] = "" if r is None or pd.isna(r) else str(int(r))
        lines[pid] = encode_line(cells)
    if list(lines.values()) != list(journal.lines.values()):
        write_atomic(path, [(",".join((*COLUMNS, CRC_COLUMN)) + "\n").encode(),
                            *lines.values()])
        journal.lines = lines
    return table
