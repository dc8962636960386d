"""Analytic alpha-beta-gamma timing of an explicit collective schedule.

The schedule's logical steps run one after another (step-synchronous, like the textbook ring
model).  Step ``s`` takes

    alpha_s  = the largest route latency of a transfer in the step (+ ``alpha_s`` overhead)
    beta_s   = the largest, over directional link lanes, of (bytes crossing it in step s) / bw
    gamma_s  = the largest reduced payload in the step / ``reduce_Bps`` (0 if not reducing)

and the collective takes the sum over steps.  Contention shows as several transfers loading
one link in a step.  For the p-chip ring reduce-scatter of N bytes over k directional rings of
bandwidth B this is (p-1) (alpha + N/(k p B) + gamma N/(k p)), whose bandwidth term tends to the
lower bound (p-1)/p x N/(kB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accelsim.errors import InputError
from accelsim.netsim.schedule import Schedule
# The ring term has one owner, shared with the per-layer compute model (accelsim.perf).
from accelsim.ring import RING_KINDS, bus_factor, ring_collective_time  # noqa: F401


@dataclass(frozen=True)
class CollectiveTime:
    """Time of one collective and its bandwidths (nccl-tests conventions)."""

    op: str
    engine: str
    time_s: float
    payload_bytes: float
    padded_bytes: float
    chips: int
    algorithm: str
    steps: int
    transfers: int
    events: int = 0  # DES only: simulated events
    wall_s: float = 0.0  # DES only: host seconds
    mode: str = "explicit"  # "explicit" schedule or "symmetric" (closed form / one rank)

    @property
    def algbw_GBps(self) -> float:
        return self.payload_bytes / self.time_s / 1e9 if self.time_s > 0 else math.inf

    @property
    def bus_factor(self) -> float:
        """nccl-tests' factor from algorithm to bus bandwidth (:func:`accelsim.ring.bus_factor`)."""
        return bus_factor(self.op, self.chips)

    @property
    def bus_bandwidth_GBps(self) -> float:
        return self.algbw_GBps * self.bus_factor

    def as_dict(self) -> dict:
        return {
            "op": self.op, "engine": self.engine, "time_s": self.time_s,
            "bus_bandwidth_GBps": self.bus_bandwidth_GBps, "algbw_GBps": self.algbw_GBps,
            "payload_bytes": self.payload_bytes, "padded_bytes": self.padded_bytes,
            "chips": self.chips, "algorithm": self.algorithm, "steps": self.steps,
            "transfers": self.transfers, "events": self.events, "wall_s": self.wall_s,
            "mode": self.mode,
        }


def check_rate(name: str, x: float | None) -> None:
    """``x`` must be None (unlimited) or a positive finite number."""
    if x is not None and not (isinstance(x, (int, float)) and not isinstance(x, bool)
                              and math.isfinite(x) and x > 0):
        raise InputError(f"{name} must be a positive finite number (or None for unlimited), "
                         f"got {x!r}")


def check_overhead(name: str, x: float) -> None:
    """``x`` must be a finite number of seconds >= 0."""
    if not (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            and x >= 0):
        raise InputError(f"{name} must be a finite number of seconds >= 0, got {x!r}")


def route_latency(s: Schedule) -> np.ndarray:
    """Per-transfer sum of link latencies along its route."""
    lat = s.link_latency_s[s.route]
    return np.add.reduceat(lat, s.route_ptr[:-1]) if len(lat) else np.zeros(s.n_transfers)


def analytic_time(s: Schedule, *, alpha_s: float = 0.0, reduce_Bps: float | None = None
                  ) -> CollectiveTime:
    """Step-synchronous alpha-beta-gamma time of ``s`` (see module docstring)."""
    check_overhead("alpha_s", alpha_s)
    check_rate("reduce_Bps", reduce_Bps)
    n_steps, n_links = s.n_steps, len(s.links)
    hops = np.diff(s.route_ptr)
    t_of_hop = np.repeat(np.arange(s.n_transfers), hops)
    key = s.step[t_of_hop].astype(np.int64) * n_links + s.route
    load = np.bincount(key, weights=s.nbytes[t_of_hop], minlength=n_steps * n_links)
    load = load.reshape(n_steps, n_links) / s.link_bandwidth_Bps[None, :]
    beta = load.max(axis=1)
    alpha = np.full(n_steps, -np.inf)
    np.maximum.at(alpha, s.step, route_latency(s))
    alpha = np.maximum(alpha, 0.0) + alpha_s
    gamma = np.zeros(n_steps)
    if reduce_Bps is not None and s.reduce.any():
        np.maximum.at(gamma, s.step[s.reduce], s.nbytes[s.reduce] / reduce_Bps)
    total = float((alpha + beta + gamma).sum())
    return CollectiveTime(op=s.op, engine="analytic", time_s=total, payload_bytes=s.payload_bytes,
                          padded_bytes=s.padded_bytes, chips=s.p, algorithm=s.algorithm,
                          steps=n_steps, transfers=s.n_transfers)




def ring_time_closed_form(p: int, n_bytes: float, k: int, bandwidth_Bps: float,
                          latency_s: float = 0.0, op: str = "reduce-scatter") -> float:
    """Textbook ring time over ``k`` directional rings of ``bandwidth_Bps`` links:
    (p-1) steps of (latency + N/(k p B)); all-reduce is twice that."""
    return ring_collective_time(op, p, n_bytes, k * bandwidth_Bps, latency_s)
