"""The hand-written Chakra wire codec against Google's protobuf runtime (an independent
implementation of the same wire format), built from et_def.proto's field numbers at test time:
our bytes parse there, its bytes decode here."""

from __future__ import annotations

import pytest

from accelsim.chakra.codec import (Attr, GlobalMetadata, IOInfo, Node, NodeType, decode_node,
                                   encode_node, read_trace, write_trace)
from accelsim.errors import InputError

NODE = Node(7, "layer0 qkv", int(NodeType.COMM_COLL_NODE), ctrl_deps=(1, 300),
            data_deps=(2, 2**40), start_time_micros=5, duration_micros=123456,
            inputs=IOInfo("[1]", "[[2,3]]", "[float]"), outputs=IOInfo(shapes="[[4]]"),
            attrs=(Attr("comm_type", "int64", 7), Attr("neg", "int64", -3),
                   Attr("src", "int32", -1), Attr("size", "uint64", 2**63 + 5),
                   Attr("d", "double", 1.25e-7), Attr("f", "float", 0.5),
                   Attr("flag", "bool", True), Attr("pg_name", "string", "tp é"),
                   Attr("z", "sint64", -9), Attr("fx", "fixed64", 2**50),
                   Attr("dims", "int64", (1, -2, 3), is_list=True),
                   Attr("involved_dim", "bool", (True, False), is_list=True),
                   Attr("names", "string", ("a", "b"), is_list=True)))


def test_round_trip_every_field_kind(tmp_path):
    assert decode_node(encode_node(NODE), "x") == NODE
    path = tmp_path / "t.0.et"
    meta = GlobalMetadata("1.0.0", (Attr("rank", "int64", 3),))
    write_trace(path, meta, [NODE, Node(8, "b", 4)])
    got_meta, nodes = read_trace(path)
    assert got_meta == meta and nodes == [NODE, Node(8, "b", 4)]


def test_truncated_and_malformed_streams_are_input_errors(tmp_path):
    path = tmp_path / "t.0.et"
    write_trace(path, GlobalMetadata("1.0.0"), [NODE])
    data = path.read_bytes()
    path.write_bytes(data[:-3])
    with pytest.raises(InputError, match="t.0.et.*runs past the end"):
        read_trace(path)
    path.write_bytes(b"\xff" * 11)
    with pytest.raises(InputError, match="malformed varint"):
        read_trace(path)
    path.write_bytes(b"")
    with pytest.raises(InputError, match="empty Chakra trace"):
        read_trace(path)


def _pool():
    """et_def.proto's Node, IOInfo, AttributeProto (a subset of its oneof) and lists, as a
    protobuf descriptor built from the schema's field numbers."""
    descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    from google.protobuf import descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="et_def_test.proto", package="ChakraProtoMsg",
                                             syntax="proto3")

    def msg(name, fields, oneof=None):
        m = fdp.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for fname, num, typ, label, tname, in_oneof in fields:
            f = m.field.add(name=fname, number=num, type=typ, label=label)
            if tname:
                f.type_name = f".ChakraProtoMsg.{tname}"
            if in_oneof:
                f.oneof_index = 0

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    msg("Int64List", [("values", 1, F.TYPE_INT64, rep, None, False)])
    msg("BoolList", [("values", 1, F.TYPE_BOOL, rep, None, False)])
    msg("StringList", [("values", 1, F.TYPE_STRING, rep, None, False)])
    msg("AttributeProto", [
        ("name", 1, F.TYPE_STRING, opt, None, False),
        ("double_val", 3, F.TYPE_DOUBLE, opt, None, True),
        ("float_val", 5, F.TYPE_FLOAT, opt, None, True),
        ("int32_val", 7, F.TYPE_INT32, opt, None, True),
        ("int64_val", 9, F.TYPE_INT64, opt, None, True),
        ("int64_list", 10, F.TYPE_MESSAGE, opt, "Int64List", True),
        ("uint64_val", 13, F.TYPE_UINT64, opt, None, True),
        ("sint64_val", 17, F.TYPE_SINT64, opt, None, True),
        ("fixed64_val", 21, F.TYPE_FIXED64, opt, None, True),
        ("bool_val", 27, F.TYPE_BOOL, opt, None, True),
        ("bool_list", 28, F.TYPE_MESSAGE, opt, "BoolList", True),
        ("string_val", 29, F.TYPE_STRING, opt, None, True),
        ("string_list", 30, F.TYPE_MESSAGE, opt, "StringList", True)], oneof="value")
    msg("IOInfo", [("values", 1, F.TYPE_STRING, opt, None, False),
                   ("shapes", 2, F.TYPE_STRING, opt, None, False),
                   ("types", 3, F.TYPE_STRING, opt, None, False)])
    msg("Node", [("id", 1, F.TYPE_UINT64, opt, None, False),
                 ("name", 2, F.TYPE_STRING, opt, None, False),
                 ("type", 3, F.TYPE_INT32, opt, None, False),
                 ("ctrl_deps", 4, F.TYPE_UINT64, rep, None, False),
                 ("data_deps", 5, F.TYPE_UINT64, rep, None, False),
                 ("start_time_micros", 6, F.TYPE_UINT64, opt, None, False),
                 ("duration_micros", 7, F.TYPE_UINT64, opt, None, False),
                 ("inputs", 8, F.TYPE_MESSAGE, opt, "IOInfo", False),
                 ("outputs", 9, F.TYPE_MESSAGE, opt, "IOInfo", False),
                 ("attr", 10, F.TYPE_MESSAGE, rep, "AttributeProto", False)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("ChakraProtoMsg.Node"))


_PB_FIELD = {("int64", False): "int64_val", ("int32", False): "int32_val",
             ("uint64", False): "uint64_val", ("double", False): "double_val",
             ("float", False): "float_val", ("bool", False): "bool_val",
             ("string", False): "string_val", ("sint64", False): "sint64_val",
             ("fixed64", False): "fixed64_val", ("int64", True): "int64_list",
             ("bool", True): "bool_list", ("string", True): "string_list"}


def test_our_bytes_parse_in_protobuf():
    NodeMsg = _pool()
    m = NodeMsg.FromString(encode_node(NODE))
    assert (m.id, m.name, m.type) == (7, "layer0 qkv", 7)
    assert list(m.ctrl_deps) == [1, 300] and list(m.data_deps) == [2, 2**40]
    assert (m.start_time_micros, m.duration_micros) == (5, 123456)
    assert (m.inputs.shapes, m.outputs.shapes) == ("[[2,3]]", "[[4]]")
    got = {a.name: a for a in m.attr}
    for a in NODE.attrs:
        field = _PB_FIELD[(a.kind, a.is_list)]
        assert got[a.name].WhichOneof("value") == field
        v = getattr(got[a.name], field)
        v = tuple(v.values) if a.is_list else v
        assert v == a.value, a.name


def test_protobuf_bytes_decode_here():
    NodeMsg = _pool()
    m = NodeMsg(id=3, name="n", type=5, ctrl_deps=[1], data_deps=[1, 2],
                duration_micros=9)
    m.attr.add(name="comm_src", int32_val=-2)
    m.attr.add(name="comm_size", int64_val=1 << 33)
    m.attr.add(name="d", double_val=3.5)
    m.attr.add(name="l", int64_list={"values": [4, -5]})
    n = decode_node(m.SerializeToString(), "pb")
    assert (n.id, n.name, n.type, n.ctrl_deps, n.data_deps, n.duration_micros) == \
        (3, "n", 5, (1,), (1, 2), 9)
    assert [(a.name, a.value) for a in n.attrs] == [
        ("comm_src", -2), ("comm_size", 1 << 33), ("d", 3.5), ("l", (4, -5))]
