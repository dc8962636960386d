"""One rank's op graph as Chakra nodes, and the directory of rank files plus its manifest.

An :class:`EtOp` is one node of one rank: a compute op at its seconds, a collective (its
:class:`~accelsim.engine.graph.CommKind`, buffer bytes and process group), or one end of a
point-to-point transfer (peer, bytes, tag); ``deps`` index earlier ops of the same rank and
``stream`` the queue it runs on in order (the scheduler's CUDA-stream semantics). Export builds
these from an engine prediction (:mod:`accelsim.chakra.export`), import from a decoded trace
(:mod:`accelsim.chakra.load`); :func:`write_dir` encodes them with :mod:`accelsim.chakra.codec`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from accelsim.chakra.codec import (SCHEMA_COMMIT, SCHEMA_VERSION, Attr, CollectiveCommType,
                                   GlobalMetadata, Node, NodeType, write_trace)
from accelsim.engine.graph import CommKind, Phase
from accelsim.errors import UserError

MANIFEST = "manifest.json"

#: accelsim's collective kinds and Chakra's ``CollectiveCommType`` (the ones netsim times)
COMM_TYPE = {CommKind.ALL_REDUCE: CollectiveCommType.ALL_REDUCE,
             CommKind.ALL_GATHER: CollectiveCommType.ALL_GATHER,
             CommKind.REDUCE_SCATTER: CollectiveCommType.REDUCE_SCATTER,
             CommKind.ALL_TO_ALL: CollectiveCommType.ALL_TO_ALL}
COMM_KIND = {v: k for k, v in COMM_TYPE.items()}


@dataclass(frozen=True)
class EtOp:
    """One node of one rank's graph (see the module docstring); ``size_bytes`` is a
    collective's buffer (Chakra's ``comm_size``, nccl-tests' size) or a transfer's message;
    ``bytes`` a compute op's tensor bytes."""

    name: str
    type: NodeType
    time_s: float
    stream: str
    phase: Phase = Phase.FWD
    deps: tuple[int, ...] = ()
    flops: float = 0.0
    bytes: float = 0.0
    comm: CommKind | None = None
    size_bytes: float = 0.0
    pg: str = ""
    peer: int = -1
    tag: int = 0
    layer: str = ""
    #: the GEMMs a compute op runs, (m, n, k, count) each, at ``precision`` (``--retime``)
    gemms: tuple[tuple[int, int, int, int], ...] = ()
    precision: str = ""


@dataclass(frozen=True)
class Group:
    """A process group kind: ``size`` ranks ``stride`` apart (the engine's CommOp group)."""

    size: int
    stride: int

    def groups(self, world: int) -> list[list[int]]:
        """Every group of this kind over ``world`` ranks (the engine's rank layout)."""
        n, k = self.size, self.stride
        return [[b + i * k for i in range(n)] for b in range(world) if (b // k) % n == 0]


@dataclass(frozen=True)
class RankGraph:
    """One distinct rank's graph: its ``ops`` and the ranks that run it (``ranks``: rank ->
    offset added to every peer in the file; 0 for the rank the file was written for)."""

    rank: int
    ops: tuple[EtOp, ...]
    ranks: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Export:
    """A whole job's ranks: the distinct graphs, the world size and its process groups."""

    graphs: tuple[RankGraph, ...]
    world: int
    groups: tuple[tuple[str, Group], ...]
    source: str
    #: group instances by id (:func:`every_rank`): id -> its ranks
    instances: tuple[tuple[str, list[int]], ...] = ()


def _i64(name: str, v: float) -> Attr:
    return Attr(name, "int64", int(round(v)))


def to_nodes(g: RankGraph) -> list[Node]:
    """The Chakra nodes of one rank's graph: ids 1.. in order, each op's dependencies and the op
    before it on its stream as data dependencies -- Chakra has no streams, and its feeder
    issues a node once its data dependencies are done (it ignores ``ctrl_deps``; Chakra's
    PyTorch converter encodes a thread's order the same way); ``accelsim.stream`` names the
    stream for a reader that has them."""
    nodes: list[Node] = []
    last_on: dict[str, int] = {}
    for i, op in enumerate(g.ops):
        prev = last_on.get(op.stream)
        data = tuple(sorted({d + 1 for d in op.deps} | ({prev} if prev is not None else set())))
        last_on[op.stream] = i + 1
        attrs = [Attr("accelsim.duration_s", "double", float(op.time_s)),
                 Attr("accelsim.stream", "string", op.stream),
                 Attr("accelsim.phase", "string", str(op.phase)),
                 Attr("accelsim.layer", "string", op.layer)]
        if op.type == NodeType.COMP_NODE:
            attrs += [Attr("is_cpu_op", "bool", False), _i64("num_ops", op.flops),
                      Attr("tensor_size", "uint64", int(round(op.bytes)))]
            if op.gemms:
                attrs += [Attr("accelsim.gemms", "int64", tuple(x for g in op.gemms for x in g),
                               is_list=True), Attr("accelsim.precision", "string", op.precision)]
        elif op.type == NodeType.COMM_COLL_NODE:
            if op.comm not in COMM_TYPE:
                raise ValueError(f"op {op.name}: no Chakra collective type for {op.comm}")
            attrs += [_i64("comm_type", COMM_TYPE[op.comm]), _i64("comm_size", op.size_bytes),
                      Attr("pg_name", "string", op.pg)]
        else:
            src, dst = (g.rank, op.peer) if op.type == NodeType.COMM_SEND_NODE else (op.peer,
                                                                                 g.rank)
            attrs += [Attr("comm_src", "int32", src), Attr("comm_dst", "int32", dst),
                      _i64("comm_size", op.size_bytes), Attr("comm_tag", "int32", op.tag)]
        nodes.append(Node(i + 1, op.name, int(op.type), (), data, 0,
                          int(round(op.time_s * 1e6)), attrs=tuple(attrs)))
    return nodes


def file_name(rank: int) -> str:
    """``accelsim.<rank>.et``: ASTRA-sim's ``<prefix>.<rank>.et`` naming."""
    return f"accelsim.{rank}.et"


def every_rank(ex: Export) -> Export:
    """``ex`` with one graph per rank (ASTRA-sim reads one file per rank): each rank's peers
    shifted by its offset, and each collective's ``pg_name`` the id of its own group instance
    (``process_groups`` then maps each id to its one group: ASTRA-sim's comm-group file)."""
    ids: dict[tuple[str, int], str] = {}
    members: dict[str, list[int]] = {}
    for name, grp in ex.groups:
        for g in grp.groups(ex.world):
            key = str(len(members) + 1)
            members[key] = g
            for r in g:
                ids[(name, r)] = key
    graphs = []
    for g in ex.graphs:
        for r, off in g.ranks:
            ops = tuple(replace(op, peer=op.peer + off if op.peer >= 0 else op.peer,
                                pg=ids[(op.pg, r)] if op.pg else op.pg) for op in g.ops)
            graphs.append(RankGraph(r, ops, ((r, 0),)))
    return Export(tuple(graphs), ex.world, (), ex.source, tuple(members.items()))


def write_dir(out_dir: Path | str, ex: Export) -> Path:
    """Write one trace file per distinct rank and ``manifest.json`` (every rank -> its file and
    peer offset, the process groups; with group instances, ``comm_group.json`` too, ASTRA-sim's
    ``--comm-group-configuration``); returns the manifest's path."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"--chakra {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise UserError(f"--chakra {out}: directory is not empty (give a new or empty one)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--chakra {out}: cannot create ({exc.strerror})") from None
    ranks: dict[str, dict] = {}
    for g in ex.graphs:
        meta = GlobalMetadata(SCHEMA_VERSION, (
            Attr("schema", "string", f"mlcommons/chakra et_def.proto @ {SCHEMA_COMMIT}"),
            Attr("rank", "int64", g.rank), Attr("world_size", "int64", ex.world),
            Attr("source", "string", ex.source)))
        write_trace(out / file_name(g.rank), meta, to_nodes(g))
        for r, off in g.ranks:
            ranks[str(r)] = {"file": file_name(g.rank), "offset": off}
    if sorted(int(r) for r in ranks) != list(range(ex.world)):
        raise ValueError(f"export maps ranks {sorted(ranks)} but the world is {ex.world}")
    groups = {name: grp.groups(ex.world) for name, grp in ex.groups}
    groups.update({key: [list(g)] for key, g in ex.instances})
    manifest = {"format": "chakra-et", "schema_commit": SCHEMA_COMMIT,
                "schema_version": SCHEMA_VERSION, "source": ex.source, "world_size": ex.world,
                "ranks": dict(sorted(ranks.items(), key=lambda kv: int(kv[0]))),
                "process_groups": groups}
    if ex.instances:
        (out / "comm_group.json").write_text(json.dumps(
            {key: list(g) for key, g in ex.instances}) + "\n")
    path = out / MANIFEST
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return path

