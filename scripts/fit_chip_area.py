"""Fit the chip builder's one global area parameter -- the non-MAC share of a die's logic area
(the die less its SRAM) -- on the published chip labelled ``fit`` in
accelsim/data/chips/chips.csv, and check it on the one labelled ``checked``: dense MACs per
mm^2 from the datasheet peak and die size, predicted within 30 %.

    python scripts/fit_chip_area.py

prints both rows and the constant to put in accelsim.arch.builder.NON_MAC_SHARE
(tests/test_chip_builder.py re-derives it)."""

from __future__ import annotations

import sys

from accelsim.arch import builder as b

TOLERANCE = 0.30


def main() -> int:
    fit, checked = b.chip_labelled("fit"), b.chip_labelled("checked")
    share = fit.fitted_share()
    print(f"{'chip':22} {'label':8} {'node':>5} {'die mm2':>8} {'SRAM mm2':>9} "
          f"{'MAC um2':>8} {'MACs':>9} {'MACs/mm2':>9} {'predicted':>9} {'error':>7}")
    ok = True
    for c in (fit, checked):
        sram = c.sram_MiB * b.sram_mm2_per_MiB(c.node_nm)
        pred = c.predicted_macs(share)
        err = pred / c.dense_macs - 1
        ok &= c is fit or abs(err) <= TOLERANCE
        print(f"{c.name[:22]:22} {c.label:8} {c.node_nm:5g} {c.die_mm2:8g} {sram:9.1f} "
              f"{c.mac.area_um2:8.1f} {c.dense_macs:9.0f} {c.dense_macs / c.die_mm2:9.1f} "
              f"{pred / c.die_mm2:9.1f} {err:+7.1%}")
    print(f"non-MAC share of the logic area, fitted on {fit.name}: {share:.6f} "
          f"(accelsim.arch.builder.NON_MAC_SHARE = {b.NON_MAC_SHARE})")
    print(f"check on {checked.name}: {'within' if ok else 'OUTSIDE'} {TOLERANCE:.0%}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
