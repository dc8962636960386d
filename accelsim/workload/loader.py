"""Strict loading of ``workloads/*.toml`` (explicit layer lists) into :class:`Workload`.

File shape::

    [workload]
    name = "resnet50"
    description = "..."          # optional
    source = "..."               # optional: where the shapes come from
    published_params = 25557032  # optional: the published parameter count (tests compare)

    [[layer]]
    name = "conv1"
    kind = "conv"                # one of accelsim.workload.model.KINDS
    ...kind-specific keys...

Kind-specific keys (optional ones with their default):
  conv:      in_channels, out_channels, in_hw = [H, W], kernel = [kh, kw], stride = [sh, sw],
             padding = [0, 0], groups = 1, bias = false, shape_mode = "torch"
  linear:    in_features, out_features, tokens = 1, bias = true
  matmul:    m, n, k, count = 1
  maxpool / avgpool: shape = [C, H, W], kernel, stride, padding = [0, 0], shape_mode = "torch"
  embedding: vocab, dim, tokens
  attention: heads, head_dim, tokens (the sequence), kv_heads = heads, causal = false,
             flash_attention = false (scaled dot-product attention as one op: an SDPA node)
  batchnorm / layernorm / relu / gelu / tanh / add / softmax: shape = [d0, d1, ...]
Unknown, missing or mistyped keys raise :class:`accelsim.arch.ConfigError` naming the file,
``layer[i](name).key`` and the value. The first layer gets ``input_grad = False``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from accelsim.arch.config import ABSENT as _ABSENT
from accelsim.arch.config import ConfigError, Table, read_toml
from accelsim.paths import locate
from accelsim.workload.model import KINDS, MAX_DIM, SHAPE_MODES, Layer, Workload, conv_out

_KEYS = {
    "conv": {"in_channels", "out_channels", "in_hw", "kernel", "stride", "padding", "groups",
             "bias", "shape_mode"},
    "linear": {"in_features", "out_features", "tokens", "bias"},
    "matmul": {"m", "n", "k", "count"},
    "maxpool": {"shape", "kernel", "stride", "padding", "shape_mode"},
    "avgpool": {"shape", "kernel", "stride", "padding", "shape_mode"},
    "embedding": {"vocab", "dim", "tokens"},
    "attention": {"heads", "kv_heads", "head_dim", "tokens", "causal", "flash_attention"},
}


class _LayerTable(Table):
    def integer(self, key: str, *, minimum: int = 1) -> int:
        v = super().integer(key, minimum=minimum)
        if v > MAX_DIM:
            raise ConfigError(self.file, self._key(key), v, f"must be <= {MAX_DIM:,}")
        return v

    def ints(self, key: str, length: int | None = None, *, minimum: int = 1,
             default: Any = _ABSENT) -> tuple[int, ...]:
        v = self.raw(key, optional=default is not _ABSENT)
        if v is _ABSENT:
            return tuple(default)
        ok = isinstance(v, list) and v and all(
            isinstance(x, int) and not isinstance(x, bool) and minimum <= x <= MAX_DIM for x in v)
        if not ok or (length is not None and len(v) != length):
            n = f"{length} " if length else ""
            raise ConfigError(self.file, self._key(key), v,
                              f"must be a list of {n}integers in [{minimum}, {MAX_DIM:,}]")
        return tuple(v)

    def int_opt(self, key: str, default: int, minimum: int = 1) -> int:
        if key not in self.data:
            return default
        return self.integer(key, minimum=minimum)


def _layer(file: str, index: int, data: Any) -> Layer:
    label = f"layer[{index}]"
    if isinstance(data, Mapping) and isinstance(data.get("name"), str):
        label = f"layer[{index}]({data['name']})"
    t = _LayerTable(file, label, data)
    name = t.string("name")
    kind = t.string("kind", choices=KINDS)
    allowed = {"name", "kind"} | _KEYS.get(kind, {"shape"})
    for key in data:
        if key not in allowed:
            raise ConfigError(file, t._key(key), data[key], f"unknown key for kind {kind!r}")
    f: dict[str, Any] = {"name": name, "kind": kind}
    if kind in ("conv", "maxpool", "avgpool"):
        if kind == "conv":
            f["in_channels"] = t.integer("in_channels")
            f["out_channels"] = t.integer("out_channels")
            f["in_h"], f["in_w"] = t.ints("in_hw", 2)
            f["groups"] = t.int_opt("groups", 1)
            f["bias"] = t.boolean("bias", default=False)
            for key in ("in_channels", "out_channels"):
                if f[key] % f["groups"]:
                    raise ConfigError(file, t._key(key), f[key],
                                      f"must be divisible by groups = {f['groups']}")
            h, w = f["in_h"], f["in_w"]
        else:
            f["shape"] = t.ints("shape", 3)
            h, w = f["shape"][1], f["shape"][2]
        f["kernel_h"], f["kernel_w"] = t.ints("kernel", 2)
        f["stride_h"], f["stride_w"] = t.ints("stride", 2)
        f["pad_h"], f["pad_w"] = t.ints("padding", 2, minimum=0, default=(0, 0))
        mode = t.string("shape_mode", optional=True, choices=SHAPE_MODES) or "torch"
        f["shape_mode"] = mode
        if mode == "scalesim" and (f["pad_h"] or f["pad_w"]):
            raise ConfigError(file, t._key("padding"), [f["pad_h"], f["pad_w"]],
                              "scalesim shape mode has no padding")
        for size, kk, s, p, key in ((h, f["kernel_h"], f["stride_h"], f["pad_h"], "kernel"),
                                    (w, f["kernel_w"], f["stride_w"], f["pad_w"], "kernel")):
            if size + 2 * p < kk or conv_out(size, kk, s, p, mode) < 1:
                raise ConfigError(file, t._key(key), [f["kernel_h"], f["kernel_w"]],
                                  f"kernel larger than the padded input ({size} + 2 x {p})")
    elif kind == "linear":
        f["in_features"] = t.integer("in_features")
        f["out_features"] = t.integer("out_features")
        f["tokens"] = t.int_opt("tokens", 1)
        f["bias"] = t.boolean("bias", default=True)
    elif kind == "matmul":
        f["m"], f["n"], f["k"] = t.integer("m"), t.integer("n"), t.integer("k")
        f["count"] = t.int_opt("count", 1)
    elif kind == "embedding":
        f["vocab"], f["dim"], f["tokens"] = t.integer("vocab"), t.integer("dim"), t.integer("tokens")
    elif kind == "attention":
        f["heads"], f["head_dim"] = t.integer("heads"), t.integer("head_dim")
        f["tokens"] = t.integer("tokens")
        f["kv_heads"] = t.int_opt("kv_heads", f["heads"])
        if f["heads"] % f["kv_heads"]:
            raise ConfigError(file, t._key("kv_heads"), f["kv_heads"],
                              f"must divide heads = {f['heads']}")
        f["causal"] = t.boolean("causal", default=False)
        f["flash_attention"] = t.boolean("flash_attention", default=False)
    else:
        f["shape"] = t.ints("shape")
    t.finish()
    return Layer(**f)


def workload_from_dict(data: Mapping[str, Any], source: str | Path = "<dict>") -> Workload:
    file = str(source)
    root = Table(file, "", data)
    meta = root.table("workload")
    name = meta.string("name")
    description = meta.string("description", optional=True) or ""
    src = meta.string("source", optional=True) or ""
    published = meta.raw("published_params", optional=True)
    if published is not _ABSENT:
        published = meta.integer("published_params")
    else:
        published = None
    transformer = None
    if meta.raw("transformer", optional=True) is not _ABSENT:
        transformer = _transformer(meta.table("transformer"), name)
    meta.finish()
    raw_layers = root.raw("layer")
    if not isinstance(raw_layers, list) or not raw_layers:
        raise ConfigError(file, "layer", raw_layers, "must be a non-empty array of [[layer]] tables")
    layers = [_layer(file, i, d) for i, d in enumerate(raw_layers)]
    root.finish()
    seen: set[str] = set()
    for i, layer in enumerate(layers):
        if layer.name in seen:
            raise ConfigError(file, f"layer[{i}].name", layer.name, "duplicate layer name")
        seen.add(layer.name)
    _check_shapes_fit(file, layers)
    layers[0] = replace(layers[0], input_grad=False)
    if transformer is not None and transformer.workload().layers != tuple(layers):
        raise ConfigError(file, "workload.transformer", "...",
                          "does not generate the file's [[layer]] list (edit one, regenerate "
                          "with `accelsim workload gpt`, or delete the table)")
    return Workload(name=name, layers=tuple(layers), description=description, source=src,
                    published_params=published, transformer=transformer)


def _transformer(t: Table, name: str):
    """The ``[workload.transformer]`` table of a generated GPT workload -> its GptConfig."""
    from accelsim.workload.gpt import GptConfig

    f = {k: t.integer(k) for k in ("layers", "hidden", "heads", "seq", "vocab")}
    f.update({k: t.integer(k, minimum=0) for k in ("ffn", "positions")})
    f.update({k: t.boolean(k, default=d) for k, d in (("tied_embeddings", True),
                                                       ("causal", True),
                                                       ("flash_attention", False))})
    t.finish()
    try:
        return GptConfig(name=name, **f)
    except ValueError as exc:
        raise ConfigError(t.file, t.path, "...", str(exc)) from None


#: layers whose input is a (C, H, W) feature map, and the kinds whose output is one
_MAP_IN = ("conv", "maxpool", "avgpool", "batchnorm", "relu", "add")
_MAP_OUT = ("conv", "maxpool", "avgpool", "batchnorm", "relu", "add")


def _map_in(layer) -> tuple[int, ...]:
    if layer.kind == "conv":
        return (layer.in_channels, layer.in_h, layer.in_w)
    return tuple(layer.shape)


def _map_out(layer) -> tuple[int, ...]:
    if layer.kind == "conv":
        return (layer.out_channels, layer.out_h, layer.out_w)
    if layer.kind in ("maxpool", "avgpool"):
        return (layer.shape[0], layer.out_h, layer.out_w)
    return tuple(layer.shape)


def _check_shapes_fit(file: str, layers) -> None:
    """Layers must fit together: a feature-map layer (conv, pool, batchnorm, relu, add) reads a
    (C, H, W) map that the network input or an earlier feature-map layer produced (residual
    branches may read any earlier one, so not only the previous). Catches a conv whose
    in_channels or input size matches nothing before it, or a mis-shaped BatchNorm."""
    produced: list[tuple[int, ...]] = []
    for i, layer in enumerate(layers):
        if layer.kind in _MAP_IN and len(_map_in(layer)) == 3:
            want = _map_in(layer)
            if produced and want not in produced:
                key = "in_channels/in_hw" if layer.kind == "conv" else "shape"
                near = ", ".join(str(list(p)) for p in produced[-3:])
                raise ConfigError(file, f"layer[{i}]({layer.name}).{key}", list(want),
                                  f"input [C, H, W] matches no earlier layer's output (the last "
                                  f"ones: {near})")
            if not produced:
                produced.append(want)  # the network input
        if layer.kind in _MAP_OUT and len(_map_in(layer)) == 3:
            produced.append(_map_out(layer))


def load_workload(path: str | Path) -> Workload:
    """Load ``workloads/*.toml`` strictly into a :class:`Workload`; ``path`` is a file or the
    name of a shipped workload (``"resnet50"``, see :mod:`accelsim.paths`)."""
    path = locate(path, "workload")
    return workload_from_dict(read_toml(path), source=path)
