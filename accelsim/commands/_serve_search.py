"""``accelsim serve --search``: the flags of the configuration search and its output (the
search itself is :mod:`accelsim.serving.config_search`; docs/serve.md "Configuration search")."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from accelsim.commands._common import int_type, positive_int

#: the deployment flags a search explores, and the axis flag that replaces each
AXIS_OF = {"tp": "--search-tp", "pp": "--search-pp", "ep": "--search-ep",
           "replicas": "--search-replicas", "disagg": "--search-disagg",
           "prefill_tp": "--search-prefill-tp", "decode_tp": "--search-tp",
           "kv_cache": "--search-kv-cache", "max_batch": "--search-max-batch",
           "chunked_prefill": "--search-chunk"}
SEARCH_FLAGS = ("gpus", "search_tp", "search_pp", "search_ep", "search_replicas",
                "search_max_batch", "search_chunk", "search_kv_cache", "search_disagg",
                "search_prefill_tp", "executor", "workers", "dask_address", "top")


def _values(text: str, one) -> tuple:
    from accelsim.serving.config_search import MAX_AXIS_VALUES

    vals = tuple(one(v.strip()) for v in text.split(","))
    if len(vals) > MAX_AXIS_VALUES:
        raise argparse.ArgumentTypeError(f"{len(vals)} values, more than {MAX_AXIS_VALUES}")
    return vals


def _ints(hi: int):
    one = int_type(1, hi)
    return lambda text: _values(text, one)


def _chunks(text: str) -> tuple:
    one = int_type(1, 1 << 24)
    return _values(text, lambda v: None if v == "off" else one(v))


def _eps(text: str) -> tuple:
    def one(v: str) -> bool:
        if v not in ("1", "tp"):
            raise argparse.ArgumentTypeError(f"expected 1 (no expert parallelism) or tp "
                                             f"(ep = tp), got {v!r}")
        return v == "tp"

    return _values(text, one)


def _kvs(text: str) -> tuple:
    from accelsim.engine.inference import KV_BYTES

    def one(v: str) -> str:
        if v not in KV_BYTES:
            raise argparse.ArgumentTypeError(f"{v!r} is not a KV-cache dtype "
                                             f"({', '.join(KV_BYTES)})")
        return v

    return _values(text, one)


def disagg_type(text: str) -> tuple[int, int]:
    """argparse type of ``--disagg PxD``: prefill and decode replicas."""
    parts = text.lower().split("x")
    try:
        p, d = (int(v) for v in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PxD (e.g. 2x6), got {text!r}") from None
    if not (1 <= p <= 4096 and 1 <= d <= 4096):
        raise argparse.ArgumentTypeError(f"replicas in [1, 4,096] each, got {text!r}")
    return p, d


def _splits(text: str) -> tuple:
    return _values(text, lambda v: None if v == "off" else v if v == "all" else disagg_type(v))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accelsim.bounds import MAX_CHIPS
    from accelsim.serving.scheduler import MAX_BATCH

    g = parser.add_argument_group(
        "configuration search (--search: rank deployments by goodput per GPU, then per joule)")
    g.add_argument("--search", action="store_true",
                   help="run the stream on every configuration of at most --gpus GPUs over "
                        "the axes below; needs --slo-ttft-ms and/or --slo-tpot-ms")
    g.add_argument("--gpus", type=int_type(1, MAX_CHIPS), default=None, metavar="N",
                   help="--search: the GPUs a configuration may use")
    g.add_argument("--search-tp", type=_ints(MAX_CHIPS), default=None, metavar="T1,T2",
                   help="tensor-parallel GPUs per (decode) replica (default: powers of two up "
                        "to --gpus and the node)")
    g.add_argument("--search-pp", type=_ints(MAX_CHIPS), default=None, metavar="P1,P2",
                   help="pipeline stages (default 1)")
    g.add_argument("--search-ep", type=_eps, default=None, metavar="1,tp",
                   help="MoE: ep 1 and/or ep = tp (default both for a MoE model)")
    g.add_argument("--search-replicas", type=_ints(4096), default=None, metavar="R1,R2",
                   help="aggregated replicas (default: as many as fit, --gpus // (tp x pp))")
    g.add_argument("--search-max-batch", type=_ints(MAX_BATCH), default=None,
                   metavar="B1,B2", help="--max-batch values (default 64,256)")
    g.add_argument("--search-chunk", type=_chunks, default=None, metavar="off,T1",
                   help="off (no chunked prefill, --max-batched-tokens per iteration) or a "
                        "chunked prefill's token budget (default off,2048)")
    g.add_argument("--search-kv-cache", type=_kvs, default=None, metavar="bf16,fp8",
                   help="KV-cache dtypes (default bf16,fp8)")
    g.add_argument("--search-disagg", type=_splits, default=None, metavar="off,all,PxD",
                   help="off (aggregated), all (every prefill x decode split of --gpus) or "
                        "PxD replicas (default off)")
    g.add_argument("--search-prefill-tp", type=_ints(MAX_CHIPS), default=None,
                   metavar="T1,T2", help="disaggregated: prefill tp (default: the decode's)")
    g.add_argument("--executor", choices=("auto", "serial", "process", "dask"), default=None,
                   help="where configurations run (default auto), as accelsim sweep's")
    g.add_argument("--workers", type=positive_int, default=None,
                   help="worker processes (default: all cores)")
    g.add_argument("--dask-address", default=None, metavar="HOST:PORT",
                   help="--executor dask: a running scheduler (default: a local cluster)")
    g.add_argument("--top", type=positive_int, default=None, metavar="K",
                   help="configurations printed (default 5)")


def table_path(out: str | None) -> str | None:
    """``--out``: a .csv, or a folder for its serve_search.csv."""
    from accelsim.serving.config_search import TABLE_NAME

    if out is None or Path(out).suffix:
        return out
    return str(Path(out) / TABLE_NAME)


def check(args: argparse.Namespace) -> None:
    """The flags of a search, or no search flag without --search."""
    from accelsim.errors import UserError

    given = [f for f in SEARCH_FLAGS if getattr(args, f) is not None]
    if not args.search:
        if given:
            raise UserError(f"--{given[0].replace('_', '-')} is for --search")
        return
    if args.gpus is None:
        raise UserError("--search needs --gpus N (the GPUs a configuration may use)")
    if args.slo_ttft_ms is None and args.slo_tpot_ms is None:
        raise UserError("--search ranks by goodput: give --slo-ttft-ms and/or --slo-tpot-ms")
    from accelsim.serving.scheduler import DEFAULT_MAX_BATCH

    set_ = {"tp": args.tp != 1, "pp": args.pp != 1, "ep": args.ep != 1,
            "replicas": args.replicas != 1, "disagg": args.disagg is not None,
            "prefill_tp": args.prefill_tp is not None, "decode_tp": args.decode_tp is not None,
            "kv_cache": args.kv_cache != "bf16", "max_batch": args.max_batch != DEFAULT_MAX_BATCH,
            "chunked_prefill": args.chunked_prefill}
    for flag, on in set_.items():
        if on:
            raise UserError(f"--search explores --{flag.replace('_', '-')}: drop it (its axis "
                            f"is {AXIS_OF[flag]})")
    for flag in ("rates", "requests_out", "trace"):
        if getattr(args, flag) is not None:
            raise UserError(f"--{flag.replace('_', '-')} is for one run, not --search")


def run(args: argparse.Namespace, system) -> int:
    import pandas as pd

    from accelsim.errors import UserError
    from accelsim.serving.config_search import SearchSpace, search
    from accelsim.serving.policy import REQUEST_OVERHEAD_S

    space = SearchSpace(
        args.gpus, tp=args.search_tp, pp=args.search_pp or (1,),
        expert_parallel=args.search_ep, replicas=args.search_replicas,
        max_batch=args.search_max_batch or SearchSpace.max_batch,
        chunk=args.search_chunk or SearchSpace.chunk,
        kv_cache=args.search_kv_cache or SearchSpace.kv_cache,
        disagg=args.search_disagg or SearchSpace.disagg, prefill_tp=args.search_prefill_tp,
        max_batched_tokens=args.max_batched_tokens)
    out = table_path(args.out)

    def ms(v: float | None) -> float | None:
        return None if v is None else v / 1e3

    try:
        table = search(
            system, args.model, args.scheme, gpus=args.gpus, space=space, rate=args.rate,
            requests=args.requests, input_tokens=args.input_tokens,
            output_tokens=args.output_tokens, lengths=args.lengths, arrivals=args.arrivals,
            burstiness=args.burstiness, seed=args.seed, slo_ttft_s=ms(args.slo_ttft_ms),
            slo_tpot_s=ms(args.slo_tpot_ms), host_overhead_s=args.host_overhead_ms / 1e3,
            request_overhead_s=(REQUEST_OVERHEAD_S if args.request_overhead_ms is None
                                else args.request_overhead_ms / 1e3),
            spec_decode=args.spec_decode,
            accept_rate=args.accept_rate, draft=args.draft_model,
            expert_skew=args.expert_skew, memory_reserve_GiB=args.memory_reserve,
            prefix_cache=args.prefix_cache, prefix_hit_rate=args.prefix_hit_rate,
            preemption="swap" if args.kv_offload else args.preemption or "recompute",
            host_link_GBps=args.host_link_GBps, out=out,
            executor=args.executor or "auto", workers=args.workers,
            progress=sys.stderr.isatty(), dask_address=args.dask_address)
    except KeyboardInterrupt:
        if out is None:
            raise
        from accelsim.commands._common import exit_interrupted, journal_rows

        exit_interrupted("serve", f"{journal_rows(out)} configurations", out)
    ok = table[table["status"] == "ok"]
    bad = table[table["status"] != "ok"]["reason"]
    if out is not None:
        print(f"wrote {out}: {len(table)} configurations, best first (each row as it "
              "finished; a rerun resumes)", file=sys.stderr)
    why = ""
    if len(bad):  # the commonest reasons by shape (numbers aside), each with one example
        shape = bad.str.replace(r"[\d.]+", "#", regex=True)
        groups = bad.groupby(shape).agg(["size", "first"]).sort_values("size", ascending=False)
        why = "; ".join(f"{n} like '{r}'" for n, r in groups.head(3).itertuples(index=False))
    if ok.empty:
        raise UserError(f"none of the {len(table)} configurations on {args.gpus} GPUs can "
                        f"serve this stream: {why}")
    if args.json:
        best = ok.iloc[0].to_dict()
        print(json.dumps({k: (None if pd.isna(v) else v.item() if hasattr(v, "item") else v)
                          for k, v in best.items()}))
        return 0
    top = args.top or 5
    print(f"{args.model} on at most {args.gpus} GPUs of {system.name}: {len(table)} "
          f"configurations, {len(ok)} ran, {len(bad)} skipped; best {min(top, len(ok))} by "
          "goodput per GPU, then per joule:")
    view = ok.head(top).copy()
    view["chunk"] = view["max_batched_tokens"].where(view["chunked_prefill"], "off")
    view["disagg"] = view["disagg"].replace("", "-")
    cols = {"rank": "rank", "gpus": "gpus", "tp": "tp", "pp": "pp", "ep": "ep",
            "replicas": "replicas", "disagg": "disagg", "kv_cache": "kv", "max_batch": "batch",
            "chunk": "chunk", "goodput_requests_per_s_per_gpu": "goodput/s/GPU",
            "goodput_requests_per_J": "goodput/J", "slo_attainment": "SLO met",
            "time_to_first_token_s_p99": "TTFT p99 s", "time_per_output_token_s_p99":
            "TPOT p99 s"}
    with pd.option_context("display.width", 200, "display.float_format", "{:.4g}".format):
        print(view[list(cols)].rename(columns=cols).to_string(index=False))
    if why:
        print(f"skipped: {why}")
    return 0
