"""block_quantize speed against quantize to the same element format, side by side (issue 25).

Run: python benchmarks/bench_block.py [--n 1048576] [--repeat 5]
Same array for both, best-of-N wall time measured alternately (fair under load; the load average
is printed). Target: block_quantize within 2x of quantize (ratio = block time / quantize time
<= 2). The input is (n / 4096, 4096): N(0,1) x 2^U(-8, 8) per row.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from _machine import cpu_model  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

from accelsim.numerics import BLOCK_FORMAT_NAMES, block_quantize, get_block_format, quantize


def _best(fns, repeat: int) -> list[float]:
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = max(args.n // 4096, 1)
    x64 = rng.standard_normal((rows, 4096)) * np.ldexp(1.0, rng.integers(-8, 8, (rows, 1)))
    print(f"machine: {os.cpu_count()} cpus, {cpu_model()}; python {platform.python_version()}, numpy {np.__version__}; "
          f"load average {os.getloadavg()[0]:.2f}; n = {x64.size:,}; best of {args.repeat}")
    print(f"{'block format':16} {'element':8} {'input':8} {'block ms':>9} {'quantize ms':>12} {'ratio':>6}  met")
    worst = 0.0
    for name in BLOCK_FORMAT_NAMES:
        elem = get_block_format(name).element
        for x in (x64.astype(np.float32), x64):
            tb, tq = _best([lambda: block_quantize(x, name), lambda: quantize(x, elem, saturate=True)], args.repeat)
            r = tb / tq
            worst = max(worst, r)
            print(f"{name:16} {elem:8} {str(x.dtype):8} {tb * 1e3:9.1f} {tq * 1e3:12.1f} {r:6.2f}  {'yes' if r <= 2 else 'NO'}")
    print(f"worst ratio {worst:.2f} (target <= 2); load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
