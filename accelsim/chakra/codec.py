"""A small protobuf wire codec for MLCommons Chakra execution traces (no protobuf dependency).

The messages and field numbers are those of ``schema/protobuf/et_def.proto`` in
mlcommons/chakra at commit 21585d8f2d65603d791d2121e3d4632351120262 (2026-05-20;
``package ChakraProtoMsg``, proto3): :class:`GlobalMetadata`, :class:`Node`, ``IOInfo`` and
``AttributeProto``. A trace file is the stream Chakra's feeder and ``protolib.encodeMessage``
use: every message prefixed by its length as a varint, the global metadata first, then one
:class:`Node` per op. Unknown fields are skipped on decoding, as protobuf does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

from accelsim.errors import InputError

#: the schema this codec follows (docs/chakra.md)
SCHEMA_COMMIT = "21585d8f2d65603d791d2121e3d4632351120262"
SCHEMA_VERSION = "1.0.0"  # chakra pyproject version; GlobalMetadata.version as its generator writes


class NodeType(IntEnum):
    """``enum NodeType`` of et_def.proto."""

    INVALID_NODE = 0
    METADATA_NODE = 1
    MEM_LOAD_NODE = 2
    MEM_STORE_NODE = 3
    COMP_NODE = 4
    COMM_SEND_NODE = 5
    COMM_RECV_NODE = 6
    COMM_COLL_NODE = 7


class CollectiveCommType(IntEnum):
    """``enum CollectiveCommType`` of et_def.proto."""

    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9


# AttributeProto's oneof ``value``: field number -> (kind, wire type of one element, list?)
_ATTR_FIELDS: dict[int, tuple[str, str, bool]] = {
    3: ("double", "f64", False), 4: ("double", "f64", True),
    5: ("float", "f32", False), 6: ("float", "f32", True),
    7: ("int32", "int", False), 8: ("int32", "int", True),
    9: ("int64", "int", False), 10: ("int64", "int", True),
    11: ("uint32", "uint", False), 12: ("uint32", "uint", True),
    13: ("uint64", "uint", False), 14: ("uint64", "uint", True),
    15: ("sint32", "sint", False), 16: ("sint32", "sint", True),
    17: ("sint64", "sint", False), 18: ("sint64", "sint", True),
    19: ("fixed32", "u32", False), 20: ("fixed32", "u32", True),
    21: ("fixed64", "u64", False), 22: ("fixed64", "u64", True),
    23: ("sfixed32", "s32", False), 24: ("sfixed32", "s32", True),
    25: ("sfixed64", "s64", False), 26: ("sfixed64", "s64", True),
    27: ("bool", "bool", False), 28: ("bool", "bool", True),
    29: ("string", "str", False), 30: ("string", "str", True),
    31: ("bytes", "bytes", False), 32: ("bytes", "bytes", True),
}
_ATTR_NUMBER = {(kind, is_list): num for num, (kind, _, is_list) in _ATTR_FIELDS.items()}


@dataclass(frozen=True)
class Attr:
    """One ``AttributeProto``: ``kind`` names its oneof member (``int64``, ``double``,
    ``string``, ``bool``, ...), ``value`` a scalar or, with ``is_list``, a tuple."""

    name: str
    kind: str
    value: object
    is_list: bool = False

    def __post_init__(self) -> None:
        if (self.kind, self.is_list) not in _ATTR_NUMBER:
            raise InputError(f"attribute {self.name!r}: unknown kind {self.kind!r}")


@dataclass(frozen=True)
class IOInfo:
    values: str = ""
    shapes: str = ""
    types: str = ""


@dataclass(frozen=True)
class GlobalMetadata:
    version: str = ""
    attrs: tuple[Attr, ...] = ()


@dataclass(frozen=True)
class Node:
    """One ``Node`` of et_def.proto (``type`` is kept as the raw number, so that a decoder can
    name an unknown one)."""

    id: int
    name: str
    type: int
    ctrl_deps: tuple[int, ...] = ()
    data_deps: tuple[int, ...] = ()
    start_time_micros: int = 0
    duration_micros: int = 0
    inputs: IOInfo | None = None
    outputs: IOInfo | None = None
    attrs: tuple[Attr, ...] = field(default=())

    def attr(self, name: str) -> Attr | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None


# --- wire primitives ------------------------------------------------------------------------

def _varint(v: int) -> bytes:
    if v < 0:  # int32/int64: two's complement over 64 bits (ten bytes)
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(num: int, wire: int) -> bytes:
    return _varint(num << 3 | wire)


def _len_field(num: int, payload: bytes) -> bytes:
    return _key(num, 2) + _varint(len(payload)) + payload


def _elem(wire: str, v) -> bytes:
    """One element's bytes (without key) in its wire encoding."""
    if wire in ("int", "uint"):
        return _varint(int(v))
    if wire == "bool":
        return _varint(1 if v else 0)
    if wire == "sint":
        v = int(v)
        return _varint((v << 1) ^ (v >> 63))
    fmt = {"f64": "<d", "f32": "<f", "u32": "<I", "u64": "<Q", "s32": "<i", "s64": "<q"}[wire]
    return struct.pack(fmt, v)


_WIRE_TYPE = {"int": 0, "uint": 0, "bool": 0, "sint": 0, "f64": 1, "u64": 1, "s64": 1,
              "f32": 5, "u32": 5, "s32": 5, "str": 2, "bytes": 2}


def _encode_attr(a: Attr) -> bytes:
    num = _ATTR_NUMBER[(a.kind, a.is_list)]
    wire = _ATTR_FIELDS[num][1]
    out = _len_field(1, a.name.encode())
    if a.is_list:  # a XxxList message: repeated field 1 (packed for scalars)
        vals = tuple(a.value)  # type: ignore[arg-type]
        if wire in ("str", "bytes"):
            inner = b"".join(_len_field(1, v.encode() if wire == "str" else v) for v in vals)
        else:
            inner = _len_field(1, b"".join(_elem(wire, v) for v in vals)) if vals else b""
        return out + _len_field(num, inner)
    if wire in ("str", "bytes"):
        v = a.value.encode() if wire == "str" else a.value  # type: ignore[union-attr]
        return out + _len_field(num, v)  # type: ignore[arg-type]
    return out + _key(num, _WIRE_TYPE[wire]) + _elem(wire, a.value)


def _encode_io(num: int, io: IOInfo | None) -> bytes:
    if io is None:
        return b""
    inner = b"".join(_len_field(i, s.encode()) for i, s in
                     ((1, io.values), (2, io.shapes), (3, io.types)) if s)
    return _len_field(num, inner)


def encode_metadata(m: GlobalMetadata) -> bytes:
    out = _len_field(1, m.version.encode()) if m.version else b""
    return out + b"".join(_len_field(2, _encode_attr(a)) for a in m.attrs)


def encode_node(n: Node) -> bytes:
    out = bytearray()
    if n.id:
        out += _key(1, 0) + _varint(n.id)
    if n.name:
        out += _len_field(2, n.name.encode())
    if n.type:
        out += _key(3, 0) + _varint(n.type)
    for num, deps in ((4, n.ctrl_deps), (5, n.data_deps)):
        if deps:
            out += _len_field(num, b"".join(_varint(d) for d in deps))
    for num, v in ((6, n.start_time_micros), (7, n.duration_micros)):
        if v:
            out += _key(num, 0) + _varint(v)
    out += _encode_io(8, n.inputs) + _encode_io(9, n.outputs)
    for a in n.attrs:
        out += _len_field(10, _encode_attr(a))
    return bytes(out)


def write_trace(path: Path | str, metadata: GlobalMetadata, nodes) -> None:
    """Write ``metadata`` then ``nodes``, each length-prefixed (``protolib.encodeMessage``)."""
    with open(path, "wb") as f:
        for msg in (encode_metadata(metadata), *(encode_node(n) for n in nodes)):
            f.write(_varint(len(msg)) + msg)


# --- decoding --------------------------------------------------------------------------------

class _Reader:
    def __init__(self, buf: bytes, where: str) -> None:
        self.buf, self.pos, self.where = buf, 0, where

    def done(self) -> bool:
        return self.pos >= len(self.buf)

    def varint(self) -> int:
        pos = self.pos
        if pos < len(self.buf) and self.buf[pos] < 0x80:  # one byte: most keys and small ints
            self.pos = pos + 1
            return self.buf[pos]
        v = shift = 0
        while True:
            if self.pos >= len(self.buf) or shift > 63:
                raise InputError(f"{self.where}: truncated or malformed varint at byte "
                                 f"{self.pos}")
            b = self.buf[self.pos]
            self.pos += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise InputError(f"{self.where}: a field of {n} bytes runs past the end at byte "
                             f"{self.pos}")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def fields(self):
        """(field number, wire type, value): an int for varints, bytes otherwise."""
        while not self.done():
            key = self.varint()
            num, wire = key >> 3, key & 7
            if wire == 0:
                yield num, wire, self.varint()
            elif wire == 1:
                yield num, wire, self.take(8)
            elif wire == 2:
                yield num, wire, self.take(self.varint())
            elif wire == 5:
                yield num, wire, self.take(4)
            else:
                raise InputError(f"{self.where}: unsupported wire type {wire} (field {num}) "
                                 f"at byte {self.pos}")


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _scalar(wire: str, raw) -> object:
    if wire == "int":
        return _signed64(raw)
    if wire == "uint":
        return raw
    if wire == "bool":
        return bool(raw)
    if wire == "sint":
        return (raw >> 1) ^ -(raw & 1)
    if wire == "str":
        return raw.decode("utf-8", errors="replace")
    if wire == "bytes":
        return bytes(raw)
    fmt = {"f64": "<d", "f32": "<f", "u32": "<I", "u64": "<Q", "s32": "<i", "s64": "<q"}[wire]
    return struct.unpack(fmt, raw)[0]


def _decode_list(wire: str, payload: bytes, where: str) -> tuple:
    out: list = []
    for num, w, raw in _Reader(payload, where).fields():
        if num != 1:
            continue
        if w == 2 and wire not in ("str", "bytes"):  # packed scalars
            r = _Reader(raw, where)
            size = {"f64": 8, "u64": 8, "s64": 8, "f32": 4, "u32": 4, "s32": 4}.get(wire)
            while not r.done():
                out.append(_scalar(wire, r.take(size) if size else r.varint()))
        else:
            out.append(_scalar(wire, raw))
    return tuple(out)


def _decode_attr(payload: bytes, where: str) -> Attr:
    name, kind, value, is_list = "", "", None, False
    for num, _, raw in _Reader(payload, where).fields():
        if num == 1:
            name = raw.decode("utf-8", errors="replace")
        elif num in _ATTR_FIELDS:
            kind, wire, is_list = _ATTR_FIELDS[num]
            value = _decode_list(wire, raw, where) if is_list else _scalar(wire, raw)
    if not kind:  # an attribute with no value set: an empty string, as proto3 reads it
        return Attr(name, "string", "")
    return Attr(name, kind, value, is_list)


def _decode_io(payload: bytes, where: str) -> IOInfo:
    vals = {1: "", 2: "", 3: ""}
    for num, _, raw in _Reader(payload, where).fields():
        if num in vals:
            vals[num] = raw.decode("utf-8", errors="replace")
    return IOInfo(vals[1], vals[2], vals[3])


def decode_metadata(payload: bytes, where: str) -> GlobalMetadata:
    version, attrs = "", []
    for num, _, raw in _Reader(payload, where).fields():
        if num == 1:
            version = raw.decode("utf-8", errors="replace")
        elif num == 2:
            attrs.append(_decode_attr(raw, where))
    return GlobalMetadata(version, tuple(attrs))


def _deps(w: int, raw, where: str) -> list[int]:
    if w == 0:
        return [raw]
    r = _Reader(raw, where)
    out = []
    while not r.done():
        out.append(r.varint())
    return out


def decode_node(payload: bytes, where: str) -> Node:
    f: dict = {"id": 0, "name": "", "type": 0, "start": 0, "dur": 0, "in": None, "out": None}
    ctrl: list[int] = []
    data: list[int] = []
    attrs = []
    for num, w, raw in _Reader(payload, where).fields():
        if num == 1:
            f["id"] = raw
        elif num == 2:
            f["name"] = raw.decode("utf-8", errors="replace")
        elif num == 3:
            f["type"] = _signed64(raw)
        elif num == 4:
            ctrl += _deps(w, raw, where)
        elif num == 5:
            data += _deps(w, raw, where)
        elif num == 6:
            f["start"] = raw
        elif num == 7:
            f["dur"] = raw
        elif num == 8:
            f["in"] = _decode_io(raw, where)
        elif num == 9:
            f["out"] = _decode_io(raw, where)
        elif num == 10:
            attrs.append(_decode_attr(raw, where))
    return Node(f["id"], f["name"], f["type"], tuple(ctrl), tuple(data), f["start"], f["dur"],
                f["in"], f["out"], tuple(attrs))


def read_messages(path: Path | str) -> list[bytes]:
    """The length-delimited messages of a trace file (``protolib.decodeMessage``)."""
    try:
        buf = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    r = _Reader(buf, str(path))
    out = []
    while not r.done():
        out.append(r.take(r.varint()))
    return out


def read_trace(path: Path | str) -> tuple[GlobalMetadata, list[Node]]:
    """A trace file's global metadata (its first message) and nodes."""
    msgs = read_messages(path)
    if not msgs:
        raise InputError(f"{path}: empty Chakra trace (no global metadata message)")
    meta = decode_metadata(msgs[0], f"{path}: global metadata")
    return meta, [decode_node(m, f"{path}: message {i + 1}") for i, m in enumerate(msgs[1:])]
