"""``--retime``: a trace's GEMM nodes timed again by perf's kernel formula on ``--system``
(:func:`accelsim.engine.graph.gemm_s`) instead of at their recorded durations.

A node carries its GEMMs either as accelsim writes them (``accelsim.gemms``: ``[m, n, k,
count]`` per GEMM, flattened, and ``accelsim.precision``) or as Chakra's PyTorch converter
does: an ``aten::mm`` / ``addmm`` / ``bmm`` / ``matmul`` / ``linear`` node with its input shapes
(``inputs.shapes``, JSON) and element types (``inputs.types``). Other compute nodes keep their
durations. The formula runs at the system's preset clock (the ``--clock boost`` what-if): a
trace's nodes are timed one by one, with no step for the power limiter to average.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from accelsim.chakra.codec import Node
from accelsim.engine.graph import GemmOp
from accelsim.errors import InputError

#: PyTorch ops that are one GEMM (or a batch of them) of their first two matrix inputs
ATEN_GEMMS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear")
#: PyTorch element types (as the execution trace names them) -> accelsim precisions
TORCH_TYPES = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32",
               "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8"}


def _where(path: Path, n: Node) -> str:
    return f"{path}: node {n.id}" + (f" ({n.name!r})" if n.name else "")


def _dims(v, path: Path, n: Node) -> list[int]:
    if not isinstance(v, list) or not all(isinstance(d, int) and not isinstance(d, bool)
                                          and 0 < d < 2**53 for d in v):
        raise InputError(f"{_where(path, n)}: a GEMM input shape must be a list of positive "
                         f"integers, got {v!r}")
    return v


def _aten(n: Node, path: Path) -> tuple[int, int, int, int] | None:
    """(m, n, k, batch) of a PyTorch GEMM node from its input shapes."""
    op = n.name.split(" ")[0]
    if op not in ATEN_GEMMS or n.inputs is None or not n.inputs.shapes:
        return None
    try:
        shapes = json.loads(n.inputs.shapes)
    except (json.JSONDecodeError, RecursionError):
        raise InputError(f"{_where(path, n)}: inputs.shapes {n.inputs.shapes[:60]!r} is not "
                         "JSON") from None
    if not isinstance(shapes, list):
        raise InputError(f"{_where(path, n)}: inputs.shapes must be a list of shapes")
    mats = shapes[1:3] if op == "aten::addmm" else shapes[:2]
    if len(mats) < 2:
        raise InputError(f"{_where(path, n)}: {op} needs two matrix input shapes, got "
                         f"{shapes!r}")
    a, b = (_dims(x, path, n) for x in mats)
    if op == "aten::linear":  # x [..., k] @ W[n, k]^T
        if len(b) != 2 or len(a) < 1 or a[-1] != b[1]:
            raise InputError(f"{_where(path, n)}: linear shapes {a} and {b} do not match")
        return math.prod(a[:-1]), b[0], a[-1], 1
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        raise InputError(f"{_where(path, n)}: {op} shapes {a} and {b} do not multiply")
    return a[-2], b[-1], a[-1], math.prod(a[:-2])


def _precision(n: Node, path: Path, default: str) -> str:
    a = n.attr("accelsim.precision")
    if a is not None:
        return str(a.value)
    if n.inputs is not None and n.inputs.types:
        for name, prec in TORCH_TYPES.items():
            if name in n.inputs.types.split(",")[0]:
                return prec
    return default


def gemms(n: Node, path: Path, default_precision: str) -> list[GemmOp]:
    """The GEMMs a compute node runs (empty: none known; it keeps its duration)."""
    a = n.attr("accelsim.gemms")
    prec = _precision(n, path, default_precision)
    if a is not None:
        v = a.value if a.is_list else ()
        if not v or len(v) % 4 or not all(isinstance(x, int) and x > 0 for x in v):
            raise InputError(f"{_where(path, n)}: accelsim.gemms must list [m, n, k, count] "
                             f"per GEMM, positive integers, got {a.value!r}")
        return [GemmOp(n.name, v[i], v[i + 1], v[i + 2], prec, v[i + 3])
                for i in range(0, len(v), 4)]
    mnkb = _aten(n, path)
    if mnkb is None:
        return []
    return [GemmOp(n.name, mnkb[0], mnkb[1], mnkb[2], prec, mnkb[3])]


def retime_s(system, ops: list[GemmOp], path: Path, n: Node) -> float:
    """Seconds of ``ops`` one after another on one chip of ``system`` (perf's formula)."""
    from accelsim.engine.graph import gemm_s

    for g in ops:
        if not system.chip.core.supports(g.precision):
            raise InputError(f"{_where(path, n)}: --retime: system {system.name!r} has no "
                             f"{g.precision} GEMM rate")
    return sum(gemm_s(system, g) for g in ops)
