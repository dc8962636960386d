"""The serving run on a timeline, as Chrome trace events (Perfetto and chrome://tracing read
them): one track of iterations per replica, and each request as an async span from arrival to
finish with an instant at its first token."""

from __future__ import annotations

import pandas as pd

from accelsim.serving.sim import EventLog


def trace_events(log: EventLog, table: pd.DataFrame) -> dict:
    """``{"traceEvents": [...]}`` in microseconds."""
    ev: list[dict] = []
    replicas = int(table["replica"].max()) + 1 if len(table) else 0
    for k in range(replicas):
        ev.append({"name": "process_name", "ph": "M", "pid": k, "tid": 0,
                   "args": {"name": f"replica {k}"}})
        ev.append({"name": "thread_name", "ph": "M", "pid": k, "tid": 0,
                   "args": {"name": "iterations"}})
        ev.append({"name": "thread_name", "ph": "M", "pid": k, "tid": 1,
                   "args": {"name": "requests"}})
    for rep, start, end, pre, dec, used in log.iterations.tolist():
        ev.append({"name": f"prefill {int(pre)} + decode {int(dec)}", "ph": "X",
                   "pid": int(rep), "tid": 0, "ts": start * 1e6, "dur": (end - start) * 1e6,
                   "args": {"prefill_tokens": int(pre), "decode_sequences": int(dec),
                            "kv_blocks_used": int(used)}})
    for r in table.itertuples(index=False):
        common = {"cat": "request", "id": int(r.request), "pid": int(r.replica), "tid": 1}
        ev.append({"name": f"request {r.request}", "ph": "b", "ts": r.arrival_s * 1e6,
                   "args": {"input_tokens": int(r.input_tokens),
                            "output_tokens": int(r.output_tokens)}, **common})
        ev.append({"name": "first token", "ph": "n",
                   "ts": (r.arrival_s + r.time_to_first_token_s) * 1e6, **common})
        ev.append({"name": f"request {r.request}", "ph": "e", "ts": r.finish_s * 1e6,
                   **common})
    return {"traceEvents": ev, "displayTimeUnit": "ms"}
