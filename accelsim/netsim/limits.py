"""Size guards of the netsim room: refuse work that would not fit before allocating it.

Each limit is a default that a caller may raise (``max_transfers=``, ``max_packets=``,
``max_links=``; the CLI's ``--max-...`` flags).  A refusal is a :class:`SizeLimitError`
(a ``ValueError``) that says what was asked, how many it would take and the limit.
"""

from __future__ import annotations

from accelsim.errors import InputError

# An explicit schedule costs ~100-200 bytes per transfer at its peak (columns, routes,
# dependencies and the analytic engine's per-hop arrays): 4 M transfers is well under 1 GB.
MAX_TRANSFERS = 4_000_000
# The simpy DES runs ~0.3-0.5 M events/s on one core and a packet is 2 events per hop:
# 1 M packets is a few seconds.
MAX_PACKETS = 1_000_000
# A networkx graph costs ~1 KB per link with its attribute dict; 2 M links is ~2 GB.
MAX_GRAPH_LINKS = 2_000_000


class SizeLimitError(InputError):
    """A request larger than a size guard allows (``count`` > ``limit``)."""

    def __init__(self, what: str, count: int, limit: int, unit: str, knob: str, hint: str = ""):
        self.what, self.count, self.limit, self.unit = what, int(count), int(limit), unit
        self.knob, self.hint = knob, hint
        super().__init__(self.message(knob))

    def message(self, knob: str) -> str:
        """The refusal, naming ``knob`` (a keyword argument or a CLI flag) as the escape."""
        return (f"{self.what} would take {self.count:,} {self.unit} (limit {self.limit:,}); "
                f"raise {knob} to run it anyway{'; ' + self.hint if self.hint else ''}")


def check_limit(what: str, count: int, limit: int | None, unit: str, knob: str,
                hint: str = "") -> None:
    """Raise :class:`SizeLimitError` when ``count`` exceeds ``limit`` (None: no limit)."""
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"{knob} must be a positive integer (or None), got {limit!r}")
        if count > limit:
            raise SizeLimitError(what, count, limit, unit, knob, hint)
