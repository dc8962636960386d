"""block_quantize speed against quantize to the same element format, side by side (issue 25).

Run: python benchmarks/bench_block.py [--n 1048576] [--repeat 5]
Same array for both, best-of-N wall time and CPU time (time.process_time: what the process itself
used, less inflated than wall time when other jobs share the cores) measured alternately; the load
average is printed. Target: block_quantize within 2x of quantize (ratio = block / quantize <= 2,
judged on CPU time). The input is (n / 4096, 4096): N(0,1) x 2^U(-8, 8) per row.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from _machine import cpu_model  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

from accelsim.numerics import BLOCK_FORMAT_NAMES, block_quantize, get_block_format, quantize


def _best(fns, repeat: int, clock=time.perf_counter) -> list[float]:
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = clock()
            fn()
            best[i] = min(best[i], clock() - t0)
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
    print(f"{'block format':16} {'element':8} {'input':8} {'block ms':>9} {'quantize ms':>12} {'wall':>5} "
          f"{'cpu block':>9} {'cpu quant':>9} {'cpu':>5}  met")
    worst = 0.0
    for name in BLOCK_FORMAT_NAMES:
        elem = get_block_format(name).element
        for x in (x64.astype(np.float32), x64):
            fns = [lambda: block_quantize(x, name), lambda: quantize(x, elem, saturate=True)]
            tb, tq = _best(fns, args.repeat)
            cb, cq = _best(fns, args.repeat, time.process_time)
            r = cb / cq
            worst = max(worst, r)
            print(f"{name:16} {elem:8} {str(x.dtype):8} {tb * 1e3:9.1f} {tq * 1e3:12.1f} {tb / tq:5.2f} "
                  f"{cb * 1e3:9.1f} {cq * 1e3:9.1f} {r:5.2f}  {'yes' if r <= 2 else 'NO'}")
    print(f"worst CPU-time ratio {worst:.2f} (target <= 2); load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
