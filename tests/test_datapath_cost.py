"""The MAC area/energy table (accelsim.arch.datapath_cost): sources, the fits against their own
published points, monotonicity in the format width, node scaling, and the HFP8 paper's 2x
packing claim derived from sources other than the HFP8 paper."""

from __future__ import annotations

import pytest

from accelsim.arch import datapath_cost as dc
from accelsim.errors import InputError


def test_every_table_entry_names_its_sources():
    for row in dc.mac_table(14) + dc.mac_table(45):
        assert row.sources, row
        assert any("Horowitz" in s for s in row.sources), row
        assert not any("HFP8" in s and "NeurIPS" in s and "appendix" in s
                       for s in row.sources)  # the claim is derived, never a source
        if row.node_nm != 45:
            assert any("Stillmaker" in s for s in row.sources)
        assert row.area_um2 > 0 and row.energy_pJ > 0
    for p in dc.PUBLISHED:
        assert "Horowitz" in p.source and p.node_nm == 45 and p.vdd_V == 0.9


def test_unscaled_entries_are_the_published_numbers():
    # int8 x int8 + int32: Horowitz's 8b multiplier + 32b adder, exactly as published
    r = dc.mac_cost("int8", "int32", 45)
    assert r.area_um2 == 282 + 137 and r.energy_pJ == pytest.approx(0.2 + 0.1)
    # the fp16 / fp32 accumulators are his FP adders as published: swapping the accumulator
    # changes a MAC by exactly their difference
    a16, a32 = dc.mac_cost("fp8-e4m3", "fp16", 45), dc.mac_cost("fp8-e4m3", "fp32", 45)
    assert a32.area_um2 - a16.area_um2 == pytest.approx(4184 - 1360)
    assert a32.energy_pJ - a16.energy_pJ == pytest.approx(0.9 - 0.4)


def test_multiplier_law_reproduces_its_source_points():
    """The (m+1)^2 multiplier law against Horowitz's FP16 and FP32 multipliers it was fitted
    to: area within 1 %, energy within 20 % (the model's stated uncertainty)."""
    for bits, fmt in ((16, "fp16"), (32, "fp32")):
        p = dc.published(dc.Op.FP_MUL, bits)
        m = dc.multiplier_cost(dc.OPERANDS[fmt])
        assert m.area_um2 == pytest.approx(p.area_um2, rel=0.01)
        assert m.energy_pJ == pytest.approx(p.energy_pJ, rel=0.20)
    assert dc.FP_MUL_PER_CELL.worst_area_miss < 0.01
    assert dc.FP_MUL_PER_CELL.worst_energy_miss < 0.20


@pytest.mark.parametrize("acc", ["fp32", "fp16"])
@pytest.mark.parametrize("node", [45, 14, 7])
def test_narrower_formats_cost_less(acc, node):
    """Fewer significand bits -> smaller and cheaper MAC, same accumulator."""
    order = ["fp16", "bf16", "fp8-e4m3", "fp8-e5m2", "fp4-e2m1"]
    rows = [dc.mac_cost(o, acc, node) for o in order]
    for wide, narrow in zip(rows, rows[1:]):
        assert narrow.area_um2 < wide.area_um2 and narrow.energy_pJ < wide.energy_pJ
    top = dc.mac_cost("fp32", "fp32", node)
    assert top.area_um2 > dc.mac_cost("fp16", "fp32", node).area_um2
    assert dc.mac_cost("int4", "int32", node).energy_pJ < dc.mac_cost("int8", "int32",
                                                                        node).energy_pJ
    # accumulating in fp16 is cheaper than in fp32
    assert dc.mac_cost("fp16", "fp16", node).area_um2 < dc.mac_cost("fp16", "fp32",
                                                                      node).area_um2


def test_node_scaling_follows_stillmaker_baas():
    s = dc.node_scale(14)
    assert s.area == 0.17 and s.vdd_V == 0.8
    # energy polynomial ratio, computed by hand from the published coefficients
    e14 = 0.2363 * 0.8 ** 2 - 0.09675 * 0.8 + 0.02239
    e45 = 1.103 * 0.9 ** 2 - 0.362 * 0.9 + 0.2767
    assert s.energy == pytest.approx(e14 / e45)
    r45, r14 = dc.mac_cost("fp16", "fp16", 45), dc.mac_cost("fp16", "fp16", 14)
    assert r14.area_um2 == pytest.approx(r45.area_um2 * 0.17)
    assert r14.energy_pJ == pytest.approx(r45.energy_pJ * e14 / e45)
    # smaller nodes: smaller and cheaper
    nodes = sorted(dc.AREA_FROM_45NM, reverse=True)
    areas = [dc.node_scale(n).area for n in nodes]
    assert areas == sorted(areas, reverse=True)


def test_hfp8_packing_claim_comes_out_of_the_model():
    """HFP8 paper (Sun et al. 2019, appendix D): twice the FP8 compute elements in the area and
    power of the FP16 ones, at 14 nm. Derived from Horowitz's 45 nm table and Stillmaker-Baas
    scaling only. Tolerance: the claim is an integer packing factor (2x), so each ratio must
    round to 2, i.e. lie in [1.5, 2.5); a tighter band would claim more than the model knows
    (its multiplier law misses its own FP16/FP32 energy points by up to 18 %)."""
    p = dc.fp8_packing(14)
    assert 1.5 <= p.area_ratio < 2.5
    assert 1.5 <= p.energy_ratio < 2.5
    assert round(p.factor) == 2
    # what the model says beyond the claim: area binds (about 1.9x), energy has slack
    assert p.factor == p.area_ratio < p.energy_ratio
    # uniform node scaling: the ratio is the same at 45 nm (a design fact, not a 14 nm one)
    assert dc.fp8_packing(45).area_ratio == pytest.approx(p.area_ratio)
    # not a constant: with fp32 accumulation in both units the packing is far from 2
    wide, narrow = dc.mac_cost("fp16", "fp32", 14), dc.mac_cost("hfp8", "fp32", 14)
    assert wide.area_um2 / narrow.area_um2 < 1.5


def test_precisions_map_to_priced_units():
    from accelsim.arch.model import PRECISIONS

    for p in PRECISIONS:
        assert dc.precision_mac(p, 14).energy_pJ > 0
    assert dc.precision_mac("fp8", 14).energy_pJ < dc.precision_mac("fp16", 14).energy_pJ


def test_bad_inputs_name_the_value():
    with pytest.raises(InputError, match="fp7"):
        dc.mac_cost("fp7", "fp32")
    with pytest.raises(InputError, match="fp64"):
        dc.mac_cost("fp16", "fp64")
    with pytest.raises(InputError, match="12"):
        dc.node_scale(12)
    with pytest.raises(InputError, match="bogus"):
        dc.precision_mac("bogus")
