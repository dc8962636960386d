"""Read a directory of Chakra execution traces (``--workload chakra:DIR``) and check it.

A directory holds one trace per rank named ``<prefix>.<rank>.et`` (ASTRA-sim's naming, with
its ``comm_group.json`` where collectives name groups), or the ``manifest.json`` that
``--chakra`` writes (every rank -> its file and peer offset, the process
groups). Each file is checked before anything is timed: the node types accelsim models (compute,
memory, collective, send, receive), unique ids, dependencies that exist, no cycle, sends and
receives of the rank the file is for; a bad trace is one :class:`~accelsim.errors.InputError`
naming the file and the node.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from accelsim.chakra.codec import Node, NodeType, read_trace
from accelsim.chakra.trace import MANIFEST
from accelsim.errors import TOO_DEEP, InputError

#: the node types a trace may hold (METADATA_NODE and INVALID_NODE are not ops)
KNOWN = {NodeType.COMP_NODE, NodeType.MEM_LOAD_NODE, NodeType.MEM_STORE_NODE,
         NodeType.COMM_COLL_NODE, NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE}
_RANK_FILE = re.compile(r"^.*\.(\d+)\.et$")


@dataclass(frozen=True)
class RankTrace:
    """One simulated rank: its file and its nodes in a topological order (file order where the
    file's own order already is one)."""

    rank: int
    file: Path
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Job:
    """A trace directory: its world size, the ranks simulated (one per distinct file: the
    others run the same graph), every rank's file and the process groups (name -> groups)."""

    path: Path
    world: int
    ranks: tuple[RankTrace, ...]
    files: dict[int, str]
    groups: dict[str, tuple[tuple[int, ...], ...]]


def node_label(path: Path, n: Node) -> str:
    return f"{path}: node {n.id}" + (f" ({n.name!r})" if n.name else "")


def attr_value(n: Node, name: str, path: Path, required: bool = False):
    """The value of attribute ``name`` (None when absent and not ``required``)."""
    a = n.attr(name)
    if a is None:
        if required:
            raise InputError(f"{node_label(path, n)}: no {name!r} attribute")
        return None
    return a.value


def _manifest(path: Path) -> tuple[int, dict[int, tuple[str, int]], dict]:
    try:
        m = json.loads(path.read_text())
    except RecursionError:
        raise InputError(f"{path}: {TOO_DEEP}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable JSON manifest ({exc})") from None
    if not isinstance(m, dict) or not isinstance(m.get("ranks"), dict):
        raise InputError(f"{path}: a manifest needs a 'ranks' object (rank -> file, offset)")
    unknown = set(m) - {"format", "schema_commit", "schema_version", "source", "world_size",
                        "ranks", "process_groups"}
    if unknown:
        raise InputError(f"{path}: unknown key {sorted(unknown)[0]!r}")
    ranks: dict[int, tuple[str, int]] = {}
    for key, v in m["ranks"].items():
        if not key.isdigit() or not isinstance(v, dict) or not isinstance(v.get("file"), str) \
                or set(v) - {"file", "offset"} \
                or not isinstance(v.get("offset", 0), int) or isinstance(v.get("offset"), bool):
            raise InputError(f"{path}: ranks.{key}: expected {{'file': NAME, 'offset': INT}}, "
                             f"got {v!r}")
        f = v["file"]
        if "/" in f or "\\" in f or f in ("", ".", ".."):
            raise InputError(f"{path}: ranks.{key}.file {f!r} must name a file in the directory")
        ranks[int(key)] = (f, v.get("offset", 0))
    world = m.get("world_size", len(ranks))
    if isinstance(world, bool) or not isinstance(world, int) or sorted(ranks) != list(
            range(world)):
        raise InputError(f"{path}: ranks {sorted(ranks)[:8]}... must be 0..world_size-1 "
                         f"(world_size {world!r})")
    return world, ranks, m.get("process_groups", {})


def _check_groups(path: Path, groups, world: int) -> None:
    if not isinstance(groups, dict) or not all(
            isinstance(gs, list) and all(isinstance(g, list) and g and all(
                isinstance(r, int) and not isinstance(r, bool) and 0 <= r < world for r in g)
                for g in gs) for gs in groups.values()):
        raise InputError(f"{path}: process_groups must map a name to lists of ranks "
                         f"0..{world - 1}")


def _scan(d: Path) -> tuple[int, dict[int, tuple[str, int]], dict]:
    ranks: dict[int, tuple[str, int]] = {}
    for f in sorted(d.glob("*.et")):
        hit = _RANK_FILE.match(f.name)
        if hit is None:
            raise InputError(f"{f}: a trace file without a manifest is named "
                             "<prefix>.<rank>.et")
        r = int(hit.group(1))
        if r in ranks:
            raise InputError(f"{f}: rank {r} has two files ({ranks[r][0]} too)")
        ranks[r] = (f.name, 0)
    if not ranks:
        raise InputError(f"{d}: no {MANIFEST} and no <prefix>.<rank>.et trace files")
    if sorted(ranks) != list(range(len(ranks))):
        missing = sorted(set(range(max(ranks) + 1)) - set(ranks))
        raise InputError(f"{d}: rank {missing[0]} has no trace file (ranks must be 0..N-1)")
    groups: dict = {}
    cg = d / "comm_group.json"  # ASTRA-sim's comm-group file: pg_name -> its ranks
    if cg.is_file():
        try:
            raw = json.loads(cg.read_text())
        except RecursionError:
            raise InputError(f"{cg}: {TOO_DEEP}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{cg}: not a readable JSON comm-group file ({exc})") from None
        if not isinstance(raw, dict):
            raise InputError(f"{cg}: expected an object mapping a group id to its ranks")
        groups = {str(k): [v] for k, v in raw.items()}
    return len(ranks), ranks, groups


def _ordered(path: Path, nodes: list[Node]) -> tuple[Node, ...]:
    """``nodes`` checked and in a topological order (stable: file order where it allows)."""
    by_id: dict[int, Node] = {}
    for n in nodes:
        if n.type not in {int(t) for t in KNOWN}:
            what = NodeType(n.type).name if n.type in {int(t) for t in NodeType} else "unknown"
            raise InputError(f"{node_label(path, n)}: node type {n.type} ({what}) is not an op "
                             "accelsim models (compute, memory, collective, send, receive)")
        if n.id in by_id:
            raise InputError(f"{node_label(path, n)}: duplicate node id {n.id}")
        by_id[n.id] = n
    for n in nodes:
        for d in (*n.data_deps, *n.ctrl_deps):
            if d not in by_id:
                raise InputError(f"{node_label(path, n)}: depends on node {d}, which is not in "
                                 "the trace")
            if d == n.id:
                raise InputError(f"{node_label(path, n)}: depends on itself (a cycle)")
    pos = {n.id: i for i, n in enumerate(nodes)}
    if all(pos[d] < pos[n.id] for n in nodes for d in (*n.data_deps, *n.ctrl_deps)):
        return tuple(nodes)
    import heapq

    waiting = {n.id: len(set(n.data_deps) | set(n.ctrl_deps)) for n in nodes}
    users: dict[int, list[int]] = {}
    for n in nodes:
        for d in set(n.data_deps) | set(n.ctrl_deps):
            users.setdefault(d, []).append(n.id)
    ready = [pos[i] for i, w in waiting.items() if w == 0]
    heapq.heapify(ready)
    out: list[Node] = []
    while ready:
        n = nodes[heapq.heappop(ready)]
        out.append(n)
        for u in users.get(n.id, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, pos[u])
    if len(out) < len(nodes):
        stuck = min((n for n in nodes if waiting[n.id] > 0), key=lambda n: pos[n.id])
        raise InputError(f"{node_label(path, stuck)}: its dependencies form a cycle")
    return tuple(out)


def load_job(spec: str | Path) -> Job:
    """Read and check ``chakra:DIR`` (or DIR)."""
    text = str(spec)
    text = text[len("chakra:"):] if text.startswith("chakra:") else text
    if not text.strip():
        raise InputError("chakra:DIR: no directory given")
    d = Path(text)
    if not d.is_dir():
        raise InputError(f"chakra:{d}: not a directory of Chakra traces")
    man = d / MANIFEST
    world, ranks, groups = _manifest(man) if man.is_file() else _scan(d)
    _check_groups(man if man.is_file() else d / "comm_group.json", groups, world)
    by_file: dict[str, list[tuple[int, int]]] = {}
    for r, (f, off) in sorted(ranks.items()):
        by_file.setdefault(f, []).append((r, off))
    out = []
    for f, members in by_file.items():
        own = [r for r, off in members if off == 0]
        if len(own) != 1:
            raise InputError(f"{d / f}: exactly one rank must map to it with offset 0 (the rank "
                             f"it was written for), got {own}")
        rank = own[0]
        for r, off in members:
            if r - off != rank:
                raise InputError(f"{d / f}: rank {r} with offset {off} does not land on the "
                                 f"file's rank {rank}")
        meta, nodes = read_trace(d / f)
        written = next((a.value for a in meta.attrs if a.name == "rank"), None)
        if written is not None and written != rank:
            raise InputError(f"{d / f}: rank mismatch: written for rank {written}, mapped to "
                             f"rank {rank}")
        out.append(RankTrace(rank, d / f, _ordered(d / f, nodes)))
    tidy = {k: tuple(tuple(g) for g in v) for k, v in groups.items()}
    return Job(d, world, tuple(sorted(out, key=lambda t: t.rank)),
               {r: f for r, (f, _) in ranks.items()}, tidy)
