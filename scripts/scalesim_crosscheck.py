"""Regenerate the SCALE-Sim v3 golden cycle counts, and cross-check accelsim against them.

Two jobs, one script (it never imports both SCALE-Sim and accelsim in one process):

1. ``--run-scalesim`` (run it with SCALE-Sim's own interpreter; SCALE-Sim 3.0.0 needs
   numpy < 2.3, so it lives in its own venv)::

       python3 -m venv .scalesim-venv
       .scalesim-venv/bin/pip install scalesim "numpy<2.3"
       .scalesim-venv/bin/python scripts/scalesim_crosscheck.py --run-scalesim --dataflow ws
       .scalesim-venv/bin/python scripts/scalesim_crosscheck.py --run-scalesim --dataflow os

   Each run simulates SCALE-Sim's ResNet-50 topology on a 128x128 array (about 5 minutes and
   7-8 GB here; run them one after the other) through SCALE-Sim's Python API with
   ``save_disk_space=True`` and writes
   ``tests/data/scalesim/scalesim_v3_resnet50_128x128_<df>_cycles.csv`` with a provenance header.

2. Without ``--run-scalesim`` (run it with accelsim's venv): compare accelsim's
   ``--scalesim-compat`` systolic model against every golden file and print the per-layer
   differences; exit status 1 if any layer differs by more than one cycle.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import hashlib
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN_DIR = REPO / "tests" / "data" / "scalesim"
DEFAULT_TOPOLOGY = REPO.parent / "shared" / "data" / "scalesim" / "resnet50_scalesim_topology.csv"
TOLERANCE_CYCLES = 1

# SCALE-Sim config. InterfaceBandwidth=CALC (SCALE-Sim's "estimate bandwidth" mode) lets the
# memory never stall the array, so its "Total Cycles" column is the pure array compute time.
_CFG_TEMPLATE = """\
[general]
run_name = {run_name}

[architecture_presets]
ArrayHeight : {rows}
ArrayWidth : {cols}
IfmapSramSzkB : 6144
FilterSramSzkB : 6144
OfmapSramSzkB : 2048
IfmapOffset : 0
FilterOffset : 10000000
OfmapOffset : 20000000
Bandwidth : 10
Dataflow : {dataflow}
ReadRequestBuffer : 32
WriteRequestBuffer : 32

[layout]
IfmapCustomLayout : False
IfmapSRAMBankBandwidth : 10
IfmapSRAMBankNum : 10
IfmapSRAMBankPort : 2
FilterCustomLayout : False
FilterSRAMBankBandwidth : 10
FilterSRAMBankNum : 10
FilterSRAMBankPort : 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth : CALC
UseRamulatorTrace : False
"""


def golden_path(rows: int, cols: int, dataflow: str) -> Path:
    return GOLDEN_DIR / f"scalesim_v3_resnet50_{rows}x{cols}_{dataflow}_cycles.csv"


SHAPE_COLUMNS = ("ifmap_h", "ifmap_w", "filter_h", "filter_w", "channels", "filters", "stride")


def _layer_shapes(topology: Path) -> list[tuple[str, list[int]]]:
    """(name, [ifmap_h, ifmap_w, filter_h, filter_w, channels, filters, stride]) per layer."""
    with topology.open(newline="") as fh:
        rows = [r for r in csv.reader(fh) if r and r[0].strip()]
    return [(r[0].strip(), [int(x) for x in r[1:8]]) for r in rows[1:]]


def run_scalesim(topology: Path, rows: int, cols: int, dataflow: str, out: Path) -> None:
    """Run SCALE-Sim once and write its per-layer compute cycles as a golden CSV."""
    from importlib.metadata import version

    import numpy
    from scalesim.scale_sim import scalesim  # only in SCALE-Sim's own venv

    shapes = _layer_shapes(topology)
    names = [n for n, _ in shapes]
    with tempfile.TemporaryDirectory(prefix="scalesim_") as tmp:
        tmpdir = Path(tmp)
        run_name = f"resnet50_{rows}x{cols}_{dataflow}"
        cfg = tmpdir / "scale.cfg"
        cfg.write_text(_CFG_TEMPLATE.format(run_name=run_name, rows=rows, cols=cols,
                                            dataflow=dataflow))
        # SCALE-Sim insists on a layout file even when custom layouts are off; its content is
        # unused then (only parsed as integers).
        layout = tmpdir / "layout.csv"
        layout.write_text("Layer name," + ",".join(f"f{i}" for i in range(20)) + ",\n"
                          + "".join(f"{n}," + ",".join(["1"] * 20) + ",\n" for n in names))
        t0 = time.perf_counter()
        sim = scalesim(save_disk_space=True, verbose=False, config=str(cfg),
                       topology=str(topology), layout=str(layout))
        sim.run_scale(top_path=str(tmpdir / "results"))
        elapsed = time.perf_counter() - t0
        report = tmpdir / "results" / run_name / "COMPUTE_REPORT.csv"
        with report.open(newline="") as fh:
            rep = [[c.strip() for c in r] for r in csv.reader(fh) if r]
    header, body = rep[0], rep[1:]
    col = {name: i for i, name in enumerate(header)}
    if len(body) != len(names):
        raise SystemExit(f"SCALE-Sim reported {len(body)} layers, topology has {len(names)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    command = (f".scalesim-venv/bin/python scripts/scalesim_crosscheck.py --run-scalesim "
               f"--dataflow {dataflow} --rows {rows} --cols {cols}")
    if topology.resolve() != DEFAULT_TOPOLOGY.resolve():
        command += (f" --topology {os.path.relpath(topology, REPO)}"
                    f" --out {os.path.relpath(out, REPO)}")
    with out.open("w", newline="") as fh:
        fh.write(f"# SCALE-Sim v{version('scalesim')} (PyPI scalesim, numpy {numpy.__version__}, "
                 f"Python {platform.python_version()}) per-layer cycles\n")
        digest = hashlib.sha256(topology.read_bytes()).hexdigest()[:16]
        fh.write(f"# topology: {topology.name} (sha256 {digest}...); "
                 "../shared/data/scalesim/resnet50_scalesim_topology.csv is SCALE-Sim v3's "
                 "topologies/conv_nets/Resnet50.csv, 8 standard columns\n")
        fh.write(f"# array {rows}x{cols}, dataflow {dataflow}, InterfaceBandwidth=CALC, "
                 "save_disk_space=True, verbose=False (Python API)\n")
        fh.write(f"# command: {command}\n")
        fh.write(f"# generated {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC}, "
                 f"SCALE-Sim wall time {elapsed:.0f} s\n")
        fh.write("# compute_cycles = SCALE-Sim COMPUTE_REPORT 'Total Cycles'; "
                 f"accelsim --scalesim-compat must match within +-{TOLERANCE_CYCLES} cycle\n")
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["layer", *SHAPE_COLUMNS, "compute_cycles", "stall_cycles",
                    "mapping_efficiency_pct", "compute_util_pct"])
        for (name, shape), r in zip(shapes, body):
            w.writerow([name, *shape, r[col["Total Cycles"]], r[col["Stall Cycles"]],
                        r[col["Mapping Efficiency %"]], r[col["Compute Util %"]]])
    print(f"wrote {out} ({elapsed:.0f} s)")


def read_golden(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        lines = [ln for ln in fh if not ln.startswith("#")]
    return list(csv.DictReader(lines))


def layer_comparisons() -> dict[str, list[tuple[str, int, int]]]:
    """{golden file name: [(layer, SCALE-Sim cycles, accelsim cycles)]} for every golden file."""
    from accelsim.perf.systolic import conv_gemm_dims, gemm_cycles

    out = {}
    for path in sorted(GOLDEN_DIR.glob("scalesim_v3_*_cycles.csv")):
        parts = path.stem.split("_")  # scalesim v3 <net> <R>x<C> <df> cycles
        rows, cols = (int(x) for x in parts[-3].split("x"))
        dataflow = parts[-2]
        layers = []
        for g in read_golden(path):
            M, N, K = conv_gemm_dims(*(int(g[c]) for c in SHAPE_COLUMNS), scalesim_compat=True)
            ours = gemm_cycles(M, N, K, rows, cols, dataflow, scalesim_compat=True)
            layers.append((g["layer"], int(g["compute_cycles"]), int(ours)))
        out[path.name] = layers
    return out


def compare() -> int:
    """Compare accelsim's SCALE-Sim-compatible model against every golden file present."""
    files = layer_comparisons()
    if not files:
        print(f"no golden files in {GOLDEN_DIR}", file=sys.stderr)
        return 1
    worst_all = 0
    for name, layers in files.items():
        worst = 0
        print(f"\n{name}")
        print(f"{'layer':<10} {'scalesim':>10} {'accelsim':>10} {'diff':>6}")
        for layer, gold, ours in layers:
            diff = ours - gold
            worst = max(worst, abs(diff))
            print(f"{layer:<10} {gold:>10} {ours:>10} {diff:>6}")
        print(f"max |diff| = {worst} cycles over {len(layers)} layers")
        worst_all = max(worst_all, worst)
    return 0 if worst_all <= TOLERANCE_CYCLES else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run-scalesim", action="store_true",
                   help="run SCALE-Sim (its own venv) and write the golden CSV")
    p.add_argument("--topology", type=Path, default=DEFAULT_TOPOLOGY,
                   help="SCALE-Sim topology CSV (default: ../shared/data/scalesim/...)")
    p.add_argument("--rows", type=int, default=128, help="array rows (default 128)")
    p.add_argument("--cols", type=int, default=128, help="array columns (default 128)")
    p.add_argument("--dataflow", choices=["ws", "os", "is"], default="ws",
                   help="dataflow for --run-scalesim (default ws)")
    p.add_argument("--out", type=Path, default=None,
                   help="golden CSV to write with --run-scalesim (default: "
                   "tests/data/scalesim/scalesim_v3_resnet50_<R>x<C>_<df>_cycles.csv)")
    args = p.parse_args(argv)
    if args.run_scalesim:
        if not args.topology.is_file():
            print(f"topology not found: {args.topology}", file=sys.stderr)
            return 2
        run_scalesim(args.topology, args.rows, args.cols, args.dataflow,
                     args.out or golden_path(args.rows, args.cols, args.dataflow))
        return 0
    return compare()


if __name__ == "__main__":
    sys.exit(main())
