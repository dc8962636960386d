"""The precision policy of a scheme on a workload: which precision every layer computes and
stores in (first/last GEMM layer in high precision or not, per-layer overrides named in a policy
file; element-wise layers move tensors in their consumer GEMM's precision)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelsim.errors import InputError


if TYPE_CHECKING:
    from accelsim.arch.schemes import Scheme
    from accelsim.workload import Layer, Workload


def layer_precision(workload: Workload, layer: Layer, scheme: Scheme) -> str:
    """Precision of one layer under a scheme (see :func:`layer_precisions`)."""
    return layer_precisions(workload, scheme)[layer.name]


def layer_precisions(workload: Workload, scheme: Scheme) -> dict[str, str]:
    """Precision of every layer under a scheme, by layer name (one pass over the workload).

    GEMM layers: their compute precision (first/last GEMM layer FP16 if the scheme asks).
    Element-wise layers: the storage precision of the tensors they move, that of the next GEMM
    layer in forward order, which consumes their output (FP16 if none follows); their SFU
    arithmetic is FP16 either way."""
    scheme = as_scheme(scheme)
    first_last = _first_last(workload)
    overrides = dict(scheme.layer_overrides)
    names = {layer.name for layer in workload.layers}
    for name in overrides:
        if name not in names:
            where = scheme.policy_source or "precision policy"
            raise InputError(f"{where}: layer {name!r} is not in workload {workload.name!r}")
    out: dict[str, str] = {}
    consumer = scheme.high_precision  # walking backwards: precision of the next GEMM layer
    for layer in reversed(workload.layers):
        if layer.is_gemm:
            high = scheme.first_last_fp16 and layer.name in first_last
            prec = scheme.high_precision if high else scheme.compute_precision
            consumer = out[layer.name] = overrides.get(layer.name, prec)
        else:
            out[layer.name] = overrides.get(layer.name, consumer)
    return out


def _first_last(workload) -> tuple[str, str]:
    gemm = [layer.name for layer in workload.layers if layer.is_gemm]
    return (gemm[0], gemm[-1]) if gemm else ("", "")


def as_scheme(scheme):
    if isinstance(scheme, str):
        from accelsim.arch.schemes import get_scheme

        return get_scheme(scheme)
    return scheme
