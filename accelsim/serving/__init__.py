"""Request-level serving simulation (``accelsim serve``): a request stream through replicas
that batch continuously, over a paged KV cache, each iteration timed by the engine; TTFT,
TPOT, latency percentiles, throughput and goodput read from the event log (docs/serve.md).

Modules: :mod:`~accelsim.serving.arrivals` (the stream), :mod:`~accelsim.serving.policy` (KV
capacity and the closed-form batch rules), :mod:`~accelsim.serving.scheduler` (one lane's
iteration picks), :mod:`~accelsim.serving.costs` (an iteration's time),
:mod:`~accelsim.serving.sim` (the simpy clock), :mod:`~accelsim.serving.metrics` (the tables),
:mod:`~accelsim.serving.trace` (the timeline), :mod:`~accelsim.serving.run` (the front door),
:mod:`~accelsim.serving.config_search` (the configuration search).
The room is ``serving`` so that ``accelsim.serve`` stays the function (a subpackage of that
name would shadow it once imported).
"""

import importlib

__all__ = ["Deployment", "SearchSpace", "ServeResult", "deployment", "run", "search", "serve",
           "sweep"]
_SEARCH = {"SearchSpace", "search"}


def __getattr__(name: str) -> object:
    """The front door's names, imported on first use (PEP 562): the CLI's flag table reads
    the rooms' limits without pulling in pandas and simpy."""
    if name not in __all__:
        raise AttributeError(f"module 'accelsim.serving' has no attribute {name!r}")
    home = "accelsim.serving.config_search" if name in _SEARCH else "accelsim.serving.run"
    return getattr(importlib.import_module(home), name)
