"""Read SCALE-Sim (v2/v3) convolution topology CSV files into a :class:`Workload`.

Columns: ``Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels,
Num Filter, Strides`` and optionally a 9th ``N:M`` sparsity column (ignored here: accelsim
models dense layers). Like SCALE-Sim we tolerate trailing commas, spaces and blank lines.

Every layer comes back as ``kind = "conv"`` in ``shape_mode = "scalesim"``: no padding and
SCALE-Sim's output size ``ceil((ifmap - filter + stride) / stride)`` (from SCALE-Sim v3
``scalesim/topology_utils.py``, ``topo_calc_hyperparams``), the same stride in both
directions. Layer names containing ``DP`` are depth-wise convolutions which SCALE-Sim splits
into one single-channel layer per channel, named ``<name>Channel_<i>``; we do the same so that
layer lists line up one-to-one with SCALE-Sim's reports.

For the cycle cross-check (accelsim.perf.systolic) the fwd GEMM of each layer is exactly
SCALE-Sim's operand-matrix view: ``M`` = ofmap pixels (S_r for OS), ``N`` = filters,
``K`` = filter_h * filter_w * channels (the convolution window), with batch = 1.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

from accelsim.arch.config import ConfigError, read_text
from accelsim.workload.loader import MAX_DIM
from accelsim.workload.model import Layer, Workload

COLUMNS = ("Layer name", "IFMAP Height", "IFMAP Width", "Filter Height", "Filter Width",
           "Channels", "Num Filter", "Strides")


#: most layers a topology may expand to (depthwise rows become one layer per channel)
MAX_LAYERS = 1_000_000


def read_scalesim_topology(path: str | Path) -> Workload:
    """Parse a SCALE-Sim conv topology CSV; errors name the file, row (1-based line) and column."""
    path = Path(path)
    text = read_text(path)
    rows = [(i + 1, [c.strip() for c in r]) for i, r in enumerate(csv.reader(text.splitlines()))]
    rows = [(n, r) for n, r in rows if any(r)]
    if not rows:
        raise ConfigError(path, "row 1", "", "empty topology file (expected a header row)")
    header_line, header = rows[0]
    while header and header[-1] == "":
        header.pop()
    if [h.lower() for h in header[:8]] != [c.lower() for c in COLUMNS]:
        raise ConfigError(path, f"row {header_line}", ", ".join(header),
                          f"header must start with: {', '.join(COLUMNS)}")
    layers: list[Layer] = []
    for line, r in rows[1:]:
        while r and r[-1] == "":
            r.pop()
        if len(r) not in (8, 9):
            raise ConfigError(path, f"row {line}", ",".join(r),
                              f"expected 8 columns ({', '.join(COLUMNS)}) and an optional "
                              f"sparsity column, got {len(r)}")
        name = r[0]
        if not name:
            raise ConfigError(path, f"row {line}, column '{COLUMNS[0]}'", name, "empty layer name")
        vals = []
        for col, cell in zip(COLUMNS[1:], r[1:8], strict=True):
            try:
                v = int(cell)
            except ValueError:
                raise ConfigError(path, f"row {line}, column '{col}'", cell,
                                  "must be an integer") from None
            if v < 1:
                raise ConfigError(path, f"row {line}, column '{col}'", cell, "must be >= 1")
            if v > MAX_DIM:
                raise ConfigError(path, f"row {line}, column '{col}'", cell,
                                  f"must be <= {MAX_DIM:,}")
            vals.append(v)
        ih, iw, fh, fw, ch, nf, st = vals
        if fh > ih:
            raise ConfigError(path, f"row {line}, column 'Filter Height'", fh,
                              f"filter taller than the IFMAP ({ih})")
        if fw > iw:
            raise ConfigError(path, f"row {line}, column 'Filter Width'", fw,
                              f"filter wider than the IFMAP ({iw})")
        common = dict(kind="conv", in_h=ih, in_w=iw, kernel_h=fh, kernel_w=fw, stride_h=st,
                      stride_w=st, out_channels=nf, shape_mode="scalesim")
        if "DP" in name:
            # SCALE-Sim runs a depthwise row as one layer per channel: refuse before building
            # more layers than any network has
            if len(layers) + ch > MAX_LAYERS:
                raise ConfigError(path, f"row {line}, column 'Channels'", ch,
                                  f"a depthwise row becomes one layer per channel: "
                                  f"{len(layers) + ch:,} layers is over the {MAX_LAYERS:,} limit")
            layers.extend(Layer(name=f"{name}Channel_{c}", in_channels=1, **common)
                          for c in range(ch))
        else:
            layers.append(Layer(name=name, in_channels=ch, **common))
    if not layers:
        raise ConfigError(path, f"row {header_line + 1}", "", "no layers after the header")
    # As in workloads/*.toml: nobody needs the gradient of the network input.
    layers[0] = replace(layers[0], input_grad=False)
    return Workload(name=path.stem, layers=tuple(layers), source=f"SCALE-Sim topology {path.name}",
                    description="SCALE-Sim conv topology (scalesim shape mode, batch 1)")
