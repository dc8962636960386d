"""ONNX graphs -> :class:`~accelsim.workload.Workload` (explicit per-layer shapes), through the same
strict builder as ``workloads/*.toml`` (:func:`accelsim.workload.workload_from_dict`).

Needs the optional ``onnx`` package (``pip install 'accelsim[onnx]'``; without it an
:class:`~accelsim.errors.InputError` says so). Shapes come from ONNX shape
inference with the batch dimension (dimension 0 of every graph input) set to ``batch``; layers
are per sample, as in a TOML workload. Mapped ops: Gemm and MatMul with a constant weight ->
``linear`` (a following Add of a constant vector becomes its bias), MatMul of two activations
-> ``matmul`` (attention's Q.K^T and P.V), Conv (2-D, no dilation, symmetric padding) ->
``conv``, Gather from a constant table -> ``embedding``, MaxPool / AveragePool /
GlobalAveragePool, BatchNormalization, LayerNormalization, Relu, Gelu, Tanh, Softmax, Add; a
Mul / Div of a GEMM's output by a constant scalar (attention's 1/sqrt(d)) is folded into that
GEMM's epilogue, as fused attention kernels apply it. Reshaping ops (Flatten, Reshape, Transpose, ...) move no arithmetic and are skipped. Any other
op is a :class:`ConfigError` naming the node and the op. A graph is first checked as
``onnx.checker.check_model`` does (a node's inputs produced before it, one producer per tensor,
input counts and attributes per op schema); external weight data is never loaded.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from accelsim.arch.config import ABSENT, ConfigError
from accelsim.errors import InputError
from accelsim.workload.loader import workload_from_dict
from accelsim.workload.model import Workload

#: ops that only reshape, cast or route data (no arithmetic in the layer model)
SKIPPED_OPS = frozenset({"Flatten", "Reshape", "Transpose", "Identity", "Dropout", "Squeeze",
                         "Unsqueeze", "Constant", "Shape", "Cast"})
_ELEMENTWISE = {"Relu": "relu", "Gelu": "gelu", "Tanh": "tanh", "Softmax": "softmax",
                "LayerNormalization": "layernorm", "BatchNormalization": "batchnorm"}
#: GEMM ops whose output a constant scalar scale can be folded into (the epilogue)
_GEMM_OPS = frozenset({"Gemm", "MatMul", "Conv"})
SUPPORTED_OPS = frozenset({"Gemm", "MatMul", "Conv", "Gather", "Add", "Mul", "Div", "MaxPool",
                           "AveragePool", "GlobalAveragePool"} | _ELEMENTWISE.keys() | SKIPPED_OPS)


#: the one message for an ONNX import without the onnx extra
ONNX_MISSING = ("ONNX import needs the optional 'onnx' package, which is not installed: "
                "pip install 'accelsim[onnx]'")


def _onnx():
    try:
        import onnx
    except ImportError:
        # the user's environment, not a bug: the CLI prints the family as one line (exit 2)
        raise InputError(ONNX_MISSING) from None
    return onnx


class _Graph:
    def __init__(self, file: str, model, batch: int):
        onnx = _onnx()
        self.file = file
        g = model.graph
        self.init = {t.name: tuple(t.dims) for t in g.initializer}
        for n in g.node:  # Constant nodes are initializers written as ops
            if n.op_type == "Constant" and n.output:
                v = {a.name: a for a in n.attribute}
                if "value" in v:
                    self.init[n.output[0]] = tuple(v["value"].t.dims)
                elif "value_float" in v or "value_int" in v:
                    self.init[n.output[0]] = ()
        for inp in g.input:
            if inp.name in self.init:
                continue
            dims = inp.type.tensor_type.shape.dim
            if not dims:
                raise ConfigError(file, f"input({inp.name})", ABSENT, "has no shape")
            d0 = dims[0]
            if d0.HasField("dim_value") and d0.dim_value != batch:
                raise ConfigError(file, f"input({inp.name})", d0.dim_value,
                                  f"the graph fixes the batch dimension; batch {batch} differs")
            d0.ClearField("dim_param")
            d0.dim_value = batch
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        except Exception as exc:  # onnx raises its own InferenceError family
            raise ConfigError(file, "<graph>", ABSENT,
                              f"ONNX shape inference failed: {str(exc).splitlines()[0]}") from None
        self.shapes: dict[str, tuple] = dict(self.init)
        for v in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output):
            dims = v.type.tensor_type.shape.dim
            self.shapes[v.name] = tuple(d.dim_value if d.HasField("dim_value") else None
                                        for d in dims)
        self.nodes = list(inferred.graph.node)
        self.consumers: dict[str, list[int]] = {}
        self.producer: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            self.producer.update((y, i) for y in n.output)
            for x in n.input:
                self.consumers.setdefault(x, []).append(i)
        self.batch = batch

    def shape(self, name: str, where: str) -> tuple[int, ...]:
        s = self.shapes.get(name)
        if s is None or any(d is None or d < 1 for d in s):
            raise ConfigError(self.file, where, list(s) if s else ABSENT,
                              f"tensor {name!r} has no static shape after shape inference")
        return s

    def per_sample(self, rows: int, where: str) -> int:
        if rows % self.batch:
            raise ConfigError(self.file, where, rows,
                              f"leading dimensions are not a multiple of batch {self.batch}")
        return rows // self.batch


def _attrs(node) -> dict[str, Any]:
    onnx = _onnx()
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _window(g: _Graph, node, where: str, attrs: dict, kernel: tuple[int, int]) -> dict:
    """Strides and symmetric padding of a 2-D conv / pool node."""
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", b"VALID", "NOTSET", "VALID"):
        raise ConfigError(g.file, f"{where}.auto_pad", attrs["auto_pad"],
                          "only explicit pads are supported")
    if any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise ConfigError(g.file, f"{where}.dilations", list(attrs["dilations"]),
                          "dilated windows are not supported")
    if attrs.get("ceil_mode", 0):
        raise ConfigError(g.file, f"{where}.ceil_mode", 1, "ceil_mode is not supported")
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    if len(pads) != 4 or pads[0] != pads[2] or pads[1] != pads[3]:
        raise ConfigError(g.file, f"{where}.pads", pads,
                          "only 2-D symmetric padding [t, l, t, l] is supported")
    return dict(kernel=list(kernel), stride=list(attrs.get("strides", [1, 1])),
                padding=[pads[0], pads[1]])


def _feature_map(g: _Graph, node, where: str) -> tuple[int, ...]:
    """The (N, C, H, W) input of a 2-D pooling node (a 1-D or 3-D one is refused)."""
    x = g.shape(node.input[0], where)
    if len(x) != 4:
        raise ConfigError(g.file, where, list(x), f"only 2-D {node.op_type} (an N, C, H, W "
                                                  "input) is supported")
    return x


def _bias_add(g: _Graph, out: str, n_out: int) -> int | None:
    """The index of an Add that only adds a constant length-``n_out`` vector to ``out``."""
    users = g.consumers.get(out, [])
    if len(users) != 1 or g.nodes[users[0]].op_type != "Add":
        return None
    add = g.nodes[users[0]]
    other = [x for x in add.input if x != out]
    if len(other) == 1 and other[0] in g.init and math.prod(g.init[other[0]]) == n_out:
        return users[0]
    return None


def _folded_scale(g: _Graph, node) -> bool:
    """A Mul / Div of a GEMM's output by a constant scalar: the score scaling of attention,
    which fused kernels apply in the GEMM epilogue (no pass over memory of its own)."""
    if len(node.input) != 2:
        return False
    x, c = node.input
    if node.op_type == "Mul" and x in g.init:
        x, c = c, x
    if c not in g.init or math.prod(g.init[c]) != 1:
        return False
    src = g.producer.get(x)
    return src is not None and g.nodes[src].op_type in _GEMM_OPS


def _layers(g: _Graph) -> list[dict]:
    out: list[dict] = []
    names: set[str] = set()
    folded: set[int] = set()
    for i, node in enumerate(g.nodes):
        op = node.op_type
        name = node.name if node.name and node.name not in names else f"{op.lower()}_{i}"
        names.add(name)
        where = f"node[{i}]({name})"
        if i in folded or op in SKIPPED_OPS:
            continue
        if op not in SUPPORTED_OPS or node.domain not in ("", "ai.onnx"):
            raise ConfigError(g.file, where, op,
                              f"unsupported ONNX op {op!r}; supported: "
                              f"{', '.join(sorted(SUPPORTED_OPS))}")
        a = _attrs(node)
        y = g.shape(node.output[0], where)
        layer: dict[str, Any] = {"name": name}
        if op in ("Gemm", "MatMul") and node.input[1] in g.init:
            if op == "Gemm" and (a.get("transA", 0) or a.get("alpha", 1.0) != 1.0):
                raise ConfigError(g.file, where, op, "Gemm with transA or alpha != 1 is not "
                                                     "supported")
            w = g.init[node.input[1]]
            if len(w) != 2:
                raise ConfigError(g.file, where, list(w), "weight must be a matrix")
            k, n = (w[1], w[0]) if a.get("transB", 0) else w
            x = g.shape(node.input[0], where)
            bias = op == "Gemm" and len(node.input) > 2 and node.input[2] != ""
            if bias and math.prod(g.init.get(node.input[2], (n,))) not in (1, n):
                raise ConfigError(g.file, f"{where}.C", list(g.init[node.input[2]]),
                                  f"a Gemm's C must be a bias of out_features = {n} values")
            if op == "MatMul":
                j = _bias_add(g, node.output[0], n)
                if j is not None:
                    folded.add(j)
                    bias = True
            layer.update(kind="linear", in_features=k, out_features=n,
                         tokens=g.per_sample(math.prod(x[:-1]), where), bias=bias)
        elif op == "MatMul":
            if node.input[0] in g.init:
                raise ConfigError(g.file, where, op, "a constant left operand is not supported")
            ranks = [len(g.shape(x, where)) for x in (node.input[0], node.input[1])]
            if min(ranks) < 2:
                raise ConfigError(g.file, where, ranks, "a MatMul of vectors (an operand of "
                                                        "rank < 2) is not supported")
            k = g.shape(node.input[0], where)[-1]
            layer.update(kind="matmul", m=y[-2], n=y[-1], k=k,
                         count=g.per_sample(math.prod(y[:-2]), where))
        elif op == "Conv":
            x = g.shape(node.input[0], where)
            w = g.init.get(node.input[1])
            if w is None or len(x) != 4 or len(w) != 4:
                raise ConfigError(g.file, where, op, "only 2-D convolutions with constant "
                                                     "weights are supported")
            layer.update(kind="conv", in_channels=x[1], out_channels=w[0], in_hw=[x[2], x[3]],
                         groups=a.get("group", 1),
                         bias=len(node.input) > 2 and node.input[2] != "",
                         **_window(g, node, where, a, (w[2], w[3])))
        elif op in ("MaxPool", "AveragePool"):
            x = _feature_map(g, node, where)
            if a.get("count_include_pad", 0) and any(a.get("pads", [])):
                raise ConfigError(g.file, f"{where}.count_include_pad", 1, "not supported")
            layer.update(kind="maxpool" if op == "MaxPool" else "avgpool", shape=list(x[1:]),
                         **_window(g, node, where, a, tuple(a.get("kernel_shape", (0, 0)))))
        elif op == "GlobalAveragePool":
            x = _feature_map(g, node, where)
            layer.update(kind="avgpool", shape=list(x[1:]), kernel=[x[2], x[3]], stride=[1, 1])
        elif op == "Gather":
            table = g.init.get(node.input[0])
            if table is None or len(table) != 2 or a.get("axis", 0) != 0:
                raise ConfigError(g.file, where, op, "only a row lookup in a constant table "
                                                     "(an embedding) is supported")
            idx = g.shape(node.input[1], where)
            layer.update(kind="embedding", vocab=table[0], dim=table[1],
                         tokens=g.per_sample(math.prod(idx), where))
        elif op in ("Mul", "Div"):
            if not _folded_scale(g, node):
                raise ConfigError(g.file, where, op,
                                  f"{op} is supported only as a scale by a constant scalar of a "
                                  "MatMul/Gemm/Conv output (attention's 1/sqrt(d)), folded "
                                  "into that GEMM")
            continue
        elif op == "Add":
            layer.update(kind="add", shape=list(y[1:]))
        else:
            layer.update(kind=_ELEMENTWISE[op], shape=list(y[1:]))
        out.append(layer)
    return out


def _check_model(model_or_path, source: str) -> None:
    """``onnx.checker``'s structural check (every node's inputs produced before it, one
    producer per tensor, input/output counts and attributes as each op's schema says, opsets
    declared, initializers well formed): what the importer relies on before reading a node."""
    onnx = _onnx()
    try:
        onnx.checker.check_model(model_or_path)
    except (onnx.checker.ValidationError, ValueError) as exc:  # ValueError: over 2 GB in memory
        raise ConfigError(source, "<graph>", ABSENT, "not a valid ONNX model (onnx.checker): "
                          f"{' '.join(str(exc).split())}") from None


def load_onnx(path: str | Path, batch: int, name: str | None = None) -> Workload:
    """Read an ONNX model file into a :class:`Workload` for minibatches of ``batch``. Weights
    stored as external data are not read (only their shapes matter)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    onnx = _onnx()
    file = str(path)
    try:
        model = onnx.load(file, load_external_data=False)
    except Exception as exc:  # protobuf DecodeError, OSError
        raise ConfigError(file, "<onnx>", ABSENT,
                          f"cannot read an ONNX model: {str(exc).splitlines()[0]}") from None
    _check_model(file, file)  # by path: external data is checked beside the file, not in cwd
    return _workload(model, batch, name or Path(file).stem, file)


def workload_from_onnx(model, batch: int, *, name: str, source: str = "<onnx>") -> Workload:
    """An in-memory ``onnx.ModelProto`` as a :class:`Workload` (see :func:`load_onnx`)."""
    _check_model(model, source)
    return _workload(model, batch, name, source)


def _workload(model, batch: int, name: str, source: str) -> Workload:
    model_copy = type(model)()
    model_copy.CopyFrom(model)   # the batch is written into the graph inputs: keep theirs
    g = _Graph(source, model_copy, batch)
    layers = _layers(g)
    if not layers:
        raise ConfigError(source, "<graph>", ABSENT, "no op with arithmetic")
    return workload_from_dict({"workload": {"name": name, "source": source},
                               "layer": layers}, source)
