"""The serving simulation's clock: a simpy environment with one process feeding the request
stream and one process per replica running iterations back to back (each its scheduler's pick,
timed by :class:`~accelsim.serve.costs.StepTimer`), idle until a request arrives.

Requests go to the replica with the fewest requests in it (join-shortest-queue); a request
enters its replica's queue ``request_overhead_s`` after it arrives (the server's per-request
work: parsing, tokenization). The event log is what the metrics read: one row per request
(arrival, first token, finish) and one per iteration (start, end, batch, KV blocks used).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from accelsim.serve.arrivals import Request
from accelsim.serve.costs import StepTimer
from accelsim.serve.scheduler import BatchLimits, Scheduler, Seq


@dataclass(frozen=True)
class EventLog:
    """What happened: per request (arrays in request order) and per iteration."""

    requests: tuple[Request, ...]
    first_token_s: np.ndarray
    finish_s: np.ndarray
    max_gap_s: np.ndarray
    preempted: np.ndarray
    replica: np.ndarray
    iterations: np.ndarray  # rows: replica, start_s, end_s, prefill_tokens, decodes, kv_used
    kv_blocks: int  # one replica's
    preemptions: int


def simulate(requests: tuple[Request, ...], timer: StepTimer, limits: BatchLimits,
             kv_tokens: int, replicas: int, rng: np.random.Generator,
             request_overhead_s: float = 0.0) -> EventLog:
    """Run ``requests`` through ``replicas`` replicas until every request has finished."""
    env = simpy.Environment()
    window = timer.cost.model.config.sliding_window
    scheds = [Scheduler(limits, kv_tokens, timer.q, window) for _ in range(replicas)]
    for r in requests:
        scheds[0].check(r)
    wake = [env.event() for _ in range(replicas)]
    load = [0] * replicas
    seqs = [Seq(r) for r in requests]
    where = np.zeros(len(requests), dtype=np.int64)
    its: list[tuple] = []
    spec = timer.spec

    def enqueue(k: int, s: Seq):
        if request_overhead_s:
            yield env.timeout(request_overhead_s)
        scheds[k].add(s)
        if not wake[k].triggered:
            wake[k].succeed()

    def feed():
        for i, s in enumerate(seqs):
            delay = s.req.arrival_s - env.now
            if delay > 0:
                yield env.timeout(delay)
            k = min(range(replicas), key=load.__getitem__)
            load[k] += 1
            where[i] = k
            env.process(enqueue(k, s))

    def replica(k: int):
        sched = scheds[k]
        while True:
            it = sched.next()
            if it is None:
                wake[k] = env.event()
                yield wake[k]
                continue
            chunks = [(t, past) for _, t, past in it.chunks]
            n = len(it.decodes)
            dt = timer.iteration_s(chunks, it.finishing, n, it.keys)
            start = env.now
            used = sched.total_blocks - sched.free_blocks
            yield env.timeout(dt)
            counts = None if spec is None or not n else spec.draw_array(n, rng)
            done = sched.finish(it, env.now, counts)
            load[k] -= len(done)
            its.append((k, start, env.now, sum(chunks_t for chunks_t, _ in chunks), n, used))

    env.process(feed())
    for k in range(replicas):
        env.process(replica(k))
    env.run()  # ends when nothing is scheduled: every replica idle, the stream fed
    return EventLog(
        requests=requests,
        first_token_s=np.array([s.first_s for s in seqs]),
        finish_s=np.array([s.done_s for s in seqs]),
        max_gap_s=np.array([s.max_gap_s for s in seqs]),
        preempted=np.array([s.preempted for s in seqs], dtype=np.int64),
        replica=where,
        iterations=np.array(its, dtype=float).reshape(-1, 6),
        kv_blocks=scheds[0].total_blocks,
        preemptions=sum(sc.preemptions for sc in scheds))
