"""Fit the eager software stack's stream bandwidth and per-call floors and print the fit.

    python scripts/fit_stream.py [--data FILE]

Data: ``accelsim/data/h100_power/h100_gemm_power.json`` (one real H100 SXM, PyTorch 2.11,
README beside it; fit data, not the held-out checks of docs/engine.md). Three global numbers,
each fitted where it dominates:

* ``STREAM_EFFICIENCY`` (:mod:`accelsim.perf.gemm`: the eager stack's plain stream and every
  GEMM's operand streams): the fraction of the datasheet HBM bandwidth a streaming kernel
  reaches.
  Device-to-device copies whose working set (read + written) is at least ten times the 50 MB L2
  (so HBM, not L2, serves them): time = bytes / (f x 3350 GB/s) + the chip's kernel time
  (``kernel_launch_us`` 6 us of the h100-sxm preset, fixed); f minimizes the RMS log error.
* ``EAGER_GEMM_FLOOR_US`` (:mod:`accelsim.engine.stack`, as the next): the per-call floor of an eager cuBLAS matmul: the mean time of the
  16-bit 768^3 and 1000^3 GEMMs, whose tensor-core work (under 2.3 us at the datasheet peak) is
  a tenth of their time: what remains is the issue cost of one eager call.
* ``EAGER_ELEMENTWISE_FLOOR_US``: of an eager element-wise op: the smallest copy (4 MiB each
  way, served by L2 at well over HBM speed).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "accelsim" / "data" / "h100_power" / "h100_gemm_power.json"
L2_BYTES = 50e6  # H100 SXM5 L2, NVIDIA H100 whitepaper (arch_configs/h100-sxm.toml)
MIB = 2 ** 20


def stream_rows(data: dict) -> list[dict]:
    """The copy rows HBM serves: working set (read + written) >= 10 x L2."""
    return [r for r in data["copy"] if 2 * r["MiB_each"] * MIB >= 10 * L2_BYTES]


def fit_stream(data: dict, peak_Bps: float, launch_s: float) -> tuple[float, float]:
    """(fraction, RMS log error) minimizing the RMS log error of
    ``2 x MiB / (f x peak) + launch`` over :func:`stream_rows` (grid of 0.001)."""
    rows = stream_rows(data)

    def rms(f: float) -> float:
        e = [math.log((2 * r["MiB_each"] * MIB / (f * peak_Bps) + launch_s)
                      / (r["time_us"] * 1e-6)) for r in rows]
        return math.sqrt(sum(x * x for x in e) / len(e))

    return min(((f / 1000, rms(f / 1000)) for f in range(500, 1001)), key=lambda t: t[1])


def gemm_floor_us(data: dict) -> float:
    """Mean time of the 16-bit 768^3 and 1000^3 GEMMs (us)."""
    t = [r["time_us"] for r in data["gemm"] if r["dtype"] in ("bf16", "fp16")
         and r["M"] == r["N"] == r["K"] and r["M"] in (768, 1000)]
    return sum(t) / len(t)


def elementwise_floor_us(data: dict) -> float:
    """Time of the smallest copy (us)."""
    return min(data["copy"], key=lambda r: r["MiB_each"])["time_us"]


def main(argv: list[str] | None = None) -> int:
    from accelsim.arch import build_system
    from accelsim.engine import stack

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    args = ap.parse_args(argv)
    data = json.loads(Path(args.data).read_text())
    chip = build_system(ROOT / "arch_configs" / "h100-sxm.toml").with_boost_clock().chip
    f, e = fit_stream(data, chip.memory_bandwidth_Bps, chip.kernel_launch_s)
    print(f"data: {args.data} ({data['source']})")
    print(f"stream rows (working set >= 10 x L2): "
          f"{', '.join(str(r['MiB_each']) + ' MiB' for r in stream_rows(data))}")
    print(f"  STREAM_EFFICIENCY = {f:.3f} ({f * chip.memory_bandwidth_Bps / 1e12:.2f} TB/s of "
          f"{chip.memory_bandwidth_Bps / 1e12:.2f}), RMS log error {e:.2%}; committed "
          f"{stack.STREAM_EFFICIENCY}")
    for r in stream_rows(data):
        pred = 2 * r["MiB_each"] * MIB / (f * chip.memory_bandwidth_Bps) + chip.kernel_launch_s
        print(f"    copy {r['MiB_each']:>5} MiB: measured {r['time_us']:8.1f} us, fit "
              f"{pred * 1e6:8.1f} us ({pred / (r['time_us'] * 1e-6) - 1:+.1%})")
    g, w = gemm_floor_us(data), elementwise_floor_us(data)
    print(f"  EAGER_GEMM_FLOOR_US = {g:.1f} (committed {stack.EAGER_GEMM_FLOOR_US})")
    print(f"  EAGER_ELEMENTWISE_FLOOR_US = {w:.1f} (committed "
          f"{stack.EAGER_ELEMENTWISE_FLOOR_US})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
