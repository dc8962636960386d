"""Request-level serving simulation (``accelsim serve``): a request stream through replicas
that batch continuously, over a paged KV cache, each iteration timed by the engine; TTFT,
TPOT, latency percentiles, throughput and goodput read from the event log (docs/serve.md).

Rooms: :mod:`~accelsim.serve.arrivals` (the stream), :mod:`~accelsim.serve.policy` (KV
capacity and the closed-form batch rules), :mod:`~accelsim.serve.scheduler` (one replica's
iteration picks), :mod:`~accelsim.serve.costs` (an iteration's time), :mod:`~accelsim.serve.sim`
(the simpy clock), :mod:`~accelsim.serve.metrics` (the tables), :mod:`~accelsim.serve.run`
(the front door).
"""

import importlib

__all__ = ["Deployment", "ServeResult", "deployment", "run", "serve", "sweep"]


def __getattr__(name: str) -> object:
    """The front door's names, imported on first use (PEP 562): the CLI's flag table reads
    the rooms' limits without pulling in pandas and simpy."""
    if name not in __all__:
        raise AttributeError(f"module 'accelsim.serve' has no attribute {name!r}")
    return getattr(importlib.import_module("accelsim.serve.run"), name)
