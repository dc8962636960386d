"""HFP8 appendix C: expected BN-output error with preserved vs re-tuned statistics as Var[Q]
grows, Monte-Carlo against the closed forms (eqs. 2 and 10, accelsim.train.bnstats).

Run: ``python scripts/bn_stats.py`` (a few seconds). Prints the table, writes
reports/bn_stats.csv and reports/bn_stats.png.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from accelsim.report.bnstats import plot_bn_error
from accelsim.train.bnstats import bn_error_table

REPORTS = Path(__file__).resolve().parents[1] / "reports"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=200_000, help="Monte-Carlo samples per point")
    ap.add_argument("--out", type=Path, default=REPORTS)
    args = ap.parse_args(argv)
    t = bn_error_table(np.random.default_rng(args.seed), n=args.n)
    t["preserved_z"] = (t["preserved_mc"] - t["preserved_closed"]) / t["preserved_se"]
    t["retuned_z"] = (t["retuned_mc"] - t["retuned_closed"]) / t["retuned_se"]
    cols = ["var_ratio", "preserved_closed", "preserved_mc", "preserved_z",
            "retuned_closed", "retuned_mc", "retuned_z"]
    print(t[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"max |z| (MC - closed form, in standard errors): preserved "
          f"{t['preserved_z'].abs().max():.2f}, re-tuned {t['retuned_z'].abs().max():.2f}")
    args.out.mkdir(parents=True, exist_ok=True)
    t.to_csv(args.out / "bn_stats.csv", index=False, float_format="%.6g")
    png = plot_bn_error(t, args.out / "bn_stats.png")
    print(f"wrote {args.out / 'bn_stats.csv'} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
