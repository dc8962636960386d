"""Closed vocabularies (dataflow, phase, engine, comm phase, placement) are str-valued enums,
resolved once where the user or a preset names them: inner code gets the member, and printed
values, JSON and CSV columns keep the plain strings they had."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from accelsim.arch.schemes import AllGatherPayload, CommPhase, Placement, get_scheme
from accelsim.errors import InputError, choose
from accelsim.netsim import Engine, Mode
from accelsim.perf.systolic import DATAFLOWS, Dataflow, gemm_cycles
from accelsim.workload import PHASES, Phase


@pytest.mark.parametrize("enum_cls,values", [
    (Dataflow, ("ws", "os", "is")), (Phase, ("fwd", "bwd_data", "wgrad")),
    (Engine, ("analytic", "des")), (Mode, ("symmetric", "explicit")), (Placement, ("replicated", "sharded")),
    (CommPhase, ("reduce_scatter", "all_gather", "weight_update")),
    (AllGatherPayload, ("gradients", "weights")),
])
def test_members_print_and_serialize_as_their_strings(enum_cls, values):
    assert tuple(m.value for m in enum_cls) == values
    for m, v in zip(enum_cls, values):
        assert m == v and str(m) == v and f"{m}" == v and json.dumps(m) == f'"{v}"'
        assert choose(enum_cls, v, "x") is m
    assert pd.DataFrame({"c": list(enum_cls)}).to_csv(index=False).split() == ["c", *values]


def test_an_unknown_name_is_an_input_error_listing_the_choices():
    with pytest.raises(InputError, match=r"unknown dataflow 'xs'; choose from ws, os, is"):
        gemm_cycles(8, 8, 8, 4, 4, "xs")
    with pytest.raises(InputError, match="unknown phase 'bwd'"):
        choose(Phase, "bwd", "phase")


def test_schemes_hold_members_resolved_at_construction():
    import dataclasses

    h = get_scheme("hfp8")
    assert h.update_placement is Placement.SHARDED and h.sharded_update
    assert h.all_gather_payload is AllGatherPayload.WEIGHTS
    assert all(isinstance(p, CommPhase) for p in h.phase_order + h.compressible_phases)
    assert "->".join(h.phase_order) == "reduce_scatter->weight_update->all_gather"
    with pytest.raises(InputError, match="update_placement 'shared'; choose from replicated"):
        dataclasses.replace(h, update_placement="shared")


def test_tuples_of_members_keep_their_order():
    assert DATAFLOWS == ("ws", "os", "is") and PHASES == ("fwd", "bwd_data", "wgrad")
    assert all(isinstance(d, Dataflow) for d in DATAFLOWS)
