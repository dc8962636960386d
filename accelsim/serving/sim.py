"""The serving simulation's clock: a simpy environment with one process feeding the request
stream and one process per lane running iterations back to back (each its scheduler's pick,
timed by :class:`~accelsim.serving.costs.StepTimer`), idle until a request arrives.

A lane is one scheduler with its share of the KV cache: a replica of ``pp`` pipeline stages has
``pp`` lanes whose micro-batches fill the pipeline (vLLM's virtual engines: one scheduler per
stage's worth of in-flight batch; each lane's iteration takes the whole pass, ``pp`` of them in
flight). Requests go to the lane with the fewest requests in it (join-shortest-queue); a
request enters its lane's queue ``request_overhead_s`` after it arrives (the server's
per-request work: parsing, tokenization). Disaggregated serving has two pools: a prefill pool
whose lanes only prefill, and a decode pool the KV cache moves to (``transfer_s`` of the prompt
length) before the request decodes. The event log is what the metrics read: one row per
request (arrival, first token, finish, KV transfer) and one per iteration (start, end, batch,
KV blocks used).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy

from accelsim.serving.arrivals import Request
from accelsim.serving.costs import StepTimer
from accelsim.serving.scheduler import BatchLimits, HostOffload, PrefixCache, Scheduler, Seq


@dataclass(frozen=True)
class Pool:
    """``replicas`` replicas of ``lanes_per_replica`` lanes, each lane ``kv_tokens`` of KV
    cache, iterations timed by ``timer``; ``prefill_only``: the prefill pool of a
    disaggregated deployment."""

    timer: StepTimer
    limits: BatchLimits
    kv_tokens: int
    replicas: int
    lanes_per_replica: int = 1
    prefill_only: bool = False
    prefix_cache: PrefixCache | None = None
    offload: HostOffload | None = None  # KV offload to host memory (None: recompute)

    @property
    def lanes(self) -> int:
        return self.replicas * self.lanes_per_replica


@dataclass(frozen=True)
class EventLog:
    """What happened: per request (arrays in request order) and per iteration."""

    requests: tuple[Request, ...]
    first_token_s: np.ndarray
    finish_s: np.ndarray
    max_gap_s: np.ndarray
    preempted: np.ndarray
    replica: np.ndarray  # the (decode) replica that finished it
    kv_transfer_s: np.ndarray  # disaggregated: the KV cache's move (0: none)
    prefix_hit_tokens: np.ndarray  # prompt tokens found in a prefix cache
    iterations: np.ndarray  # rows: lane, start_s, end_s, prefill_tokens, decodes, kv_used
    work: np.ndarray  # per iteration: FLOPs, attention FLOPs, bytes (its replica's GPUs)
    kv_blocks: int  # every lane's together
    preemptions: int
    recomputed_tokens: int = 0  # cached tokens preemptions dropped, computed again
    kv_offloads: int = 0  # preemptions that moved the KV cache to host memory
    kv_offloaded_bytes: float = 0.0  # over the host links, both ways, every GPU's shard
    kv_offload_s: float = 0.0  # the copies' time (each stalls its lane's iteration)


def simulate(requests: tuple[Request, ...], pools: tuple[Pool, ...],
             rng: np.random.Generator, request_overhead_s: float = 0.0,
             transfer_s: Callable[[int], float] | None = None) -> EventLog:
    """Run ``requests`` through ``pools`` (one, or a prefill pool and a decode pool) until
    every request has finished."""
    env = simpy.Environment()
    lanes: list[tuple[Pool, Scheduler, int]] = []  # pool, scheduler, replica number
    first_replica = 0
    for pool in pools:
        window = pool.timer.cost.model.config.sliding_window
        for k in range(pool.lanes):
            lanes.append((pool, Scheduler(pool.limits, pool.kv_tokens, pool.timer.q, window,
                                          pool.prefill_only, pool.prefix_cache,
                                          pool.offload),
                          first_replica + k // pool.lanes_per_replica))
        first_replica += pool.replicas
    for r in requests:
        for pool, sched, _ in lanes:
            sched.check(r)
    entry = [i for i, (p, _, _) in enumerate(lanes) if p is pools[0]]
    second = [i for i, (p, _, _) in enumerate(lanes) if p is pools[-1]]
    wake = [env.event() for _ in lanes]
    load = [0] * len(lanes)
    seqs = [Seq(r) for r in requests]
    index = {id(s): i for i, s in enumerate(seqs)}
    where = np.zeros(len(requests), dtype=np.int64)
    moved = np.zeros(len(requests))
    its: list[tuple] = []
    work: list[tuple] = []

    def put(k: int, s: Seq) -> None:
        load[k] += 1
        where[index[id(s)]] = lanes[k][2]
        lanes[k][1].add(s)
        if not wake[k].triggered:
            wake[k].succeed()

    def enqueue(s: Seq):
        if request_overhead_s:
            yield env.timeout(request_overhead_s)
        put(min(entry, key=load.__getitem__), s)

    def hand_over(s: Seq):
        dt = transfer_s(s.computed)
        moved[index[id(s)]] = dt
        yield env.timeout(dt)
        put(min(second, key=load.__getitem__), s)

    def feed():
        for s in seqs:
            delay = s.req.arrival_s - env.now
            if delay > 0:
                yield env.timeout(delay)
            env.process(enqueue(s))

    def lane(k: int):
        pool, sched, _ = lanes[k]
        timer, spec = pool.timer, pool.timer.spec
        while True:
            it = sched.next()
            if it is None:
                wake[k] = env.event()
                yield wake[k]
                continue
            chunks = [(t, past) for _, t, past in it.chunks]
            n = len(it.decodes)
            dt, w = timer.iteration(chunks, it.finishing, n, it.keys)
            dt += it.swap_s
            start = env.now
            used = sched.total_blocks - sched.free_blocks
            yield env.timeout(dt)
            counts = None if spec is None or not n else spec.draw_array(n, rng)
            done = sched.finish(it, env.now, counts)
            load[k] -= len(done) + len(sched.handed)
            for s in sched.handed:
                env.process(hand_over(s))
            sched.handed.clear()
            its.append((k, start, env.now, sum(t for t, _ in chunks), n, used))
            work.append((w.flops, w.attention_flops, w.bytes))

    env.process(feed())
    for k in range(len(lanes)):
        env.process(lane(k))
    env.run()  # ends when nothing is scheduled: every lane idle, the stream fed
    return EventLog(
        requests=requests,
        first_token_s=np.array([s.first_s for s in seqs]),
        finish_s=np.array([s.done_s for s in seqs]),
        max_gap_s=np.array([s.max_gap_s for s in seqs]),
        preempted=np.array([s.preempted for s in seqs], dtype=np.int64),
        replica=where, kv_transfer_s=moved,
        prefix_hit_tokens=np.array([s.hit for s in seqs], dtype=np.int64),
        iterations=np.array(its, dtype=float).reshape(-1, 6),
        work=np.array(work, dtype=float).reshape(-1, 3),
        kv_blocks=sum(sched.total_blocks for _, sched, _ in lanes),
        preemptions=sum(sched.preemptions for _, sched, _ in lanes),
        recomputed_tokens=sum(sched.recomputed_tokens for _, sched, _ in lanes),
        kv_offloads=sum(sched.offloads for _, sched, _ in lanes),
        kv_offloaded_bytes=sum(sched.offload_bytes for _, sched, _ in lanes),
        kv_offload_s=sum(sched.offload_s for _, sched, _ in lanes))
