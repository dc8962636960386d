"""Scenario overrides, applied once at the top: functions that return a new :class:`System`.

Two bandwidth knobs with one meaning each, everywhere (CLI flags, sweep keys, CSV columns):

* ``chip_GBps``: a chip's total off-chip bandwidth in one direction, the HFP8 paper's "off-chip
  bandwidth" (appendix D: 32/64/128 GB/s), split evenly over all of the chip's links
  (board links plus board-to-board links);
* ``link_GBps``: one link in one direction (every off-chip link of a chip);
* ``inter_board_GBps``: one board-to-board link in one direction, its own knob, applied last.

Board resizing (a chip-count sweep keeps the board structure) lives here too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from accelsim.arch.config import PLAUSIBLE, apply_overrides, read_toml, system_from_dict
from accelsim.arch.model import System
from accelsim.errors import InputError, check_int
from accelsim.paths import locate

_GB = 1e9

#: Topologies built from 8-chip hybrid cube-mesh boards: a chip-count change keeps the boards.
BOARD_TOPOLOGIES = ("dgx1", "hybrid-cube-mesh-64", "multi-board")

#: the dotted config key of the board-to-board link bandwidth
INTER_BOARD_KEY = "system.inter_board.bandwidth_GBps"


class Unbuildable(InputError):
    """The requested scenario cannot be built from this system (e.g. a chip count that does not
    fill its boards). A sweep records such a point as infeasible, with this reason."""


def _positive(name: str, value: Any) -> float:
    """A bandwidth override in GB/s, inside the plausible range a config file must keep (one
    bound for configs, flags and sweep axes: 1e-300 GB/s printed a 300-digit time)."""
    lo, hi = PLAUSIBLE["bandwidth_GBps"]
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        raise InputError(f"{name} must be a positive finite number of GB/s, got {value!r}")
    if not lo <= value <= hi:
        raise InputError(f"{name} must be a number of GB/s in [{lo:g}, {hi:g}] (the plausible "
                         f"range of a config's bandwidth_GBps), got {value!r}")
    return float(value)


def has_inter_board(system: System) -> bool:
    """Whether the chips have board-to-board links (more than one board)."""
    return system.boards > 1


def off_chip_links(system: System) -> int:
    """Physical off-chip links of one chip: board links plus board-to-board links."""
    n = system.link.links_per_chip
    if has_inter_board(system):
        n += system.inter_board_link.links_per_chip
    return n


def chip_GBps(system: System) -> float:
    """A chip's total off-chip bandwidth in one direction (GB/s), as the system is configured."""
    bw = system.link.chip_bandwidth_Bps
    if has_inter_board(system):
        bw += system.inter_board_link.chip_bandwidth_Bps
    return bw / _GB


def link_GBps(system: System) -> float:
    """One board link's bandwidth in one direction (GB/s)."""
    return system.link.bandwidth_Bps / _GB


def inter_board_GBps(system: System) -> float | None:
    """One board-to-board link's bandwidth in one direction (GB/s); None on a single board."""
    return system.inter_board_link.bandwidth_Bps / _GB if has_inter_board(system) else None


def with_link_bandwidth(system: System, link_GBps: float, *, inter_board: bool = True) -> System:
    """Every off-chip link at ``link_GBps`` (one link, one direction); board-to-board links too
    unless ``inter_board`` is False."""
    bw = _positive("link_GBps", link_GBps) * _GB
    out = replace(system, link=replace(system.link, bandwidth_Bps=bw))
    if inter_board:
        out = replace(out, inter_board_link=replace(out.inter_board_link, bandwidth_Bps=bw))
    return out


def with_chip_bandwidth(system: System, chip_GBps: float) -> System:
    """The chip's total off-chip bandwidth ``chip_GBps`` (one direction) split evenly over all its
    links (HFP8 appendix D's "off-chip bandwidth")."""
    return with_link_bandwidth(system, _positive("chip_GBps", chip_GBps) / off_chip_links(system))


def with_inter_board_bandwidth(system: System, inter_board_GBps: float) -> System:
    """Board-to-board links at ``inter_board_GBps`` (one link, one direction)."""
    bw = _positive("inter_board_GBps", inter_board_GBps) * _GB
    return replace(system, inter_board_link=replace(system.inter_board_link, bandwidth_Bps=bw))


def single_chip_overrides() -> dict[str, Any]:
    """Config overrides that cut a multi-chip system down to one of its chips."""
    return {"system.chips": 1, "system.boards": 1, "system.chips_per_board": 1,
            "system.topology": "single"}


def resized_overrides(system_table: Mapping[str, Any], chips: int,
                      topology_given: bool = False) -> dict[str, Any]:
    """Config overrides that resize a system to ``chips`` keeping its board structure.

    Systems of 8-chip hybrid cube-mesh boards (dgx1, hybrid-cube-mesh-64, multi-board) become one
    chip (``single``), one board (``dgx1``) or ``chips / 8`` boards (``multi-board``; 64 stays
    ``hybrid-cube-mesh-64``); any other count is :class:`Unbuildable`. Other topologies keep their
    name, with as many boards as the chips fill (or one board of all chips). ``topology_given``:
    the caller sets the topology itself, so only the boards are adjusted."""
    chips = check_int("system.chips", chips)
    per_board = int(system_table["chips_per_board"])
    topo = str(system_table.get("topology", ""))
    if not topology_given and topo in BOARD_TOPOLOGIES and per_board == 8:
        if chips == 1:
            return single_chip_overrides()
        if chips == 8:
            return {"system.topology": "dgx1", "system.boards": 1, "system.chips_per_board": 8}
        if chips % 8 == 0 and chips >= 16:
            return {"system.topology": "hybrid-cube-mesh-64" if chips == 64 else "multi-board",
                    "system.boards": chips // 8}
        raise Unbuildable(f"{chips} chips do not fill 8-chip hybrid cube-mesh boards ({topo}): "
                          "use 1, 8 or a multiple of 8 >= 16, or also set system.topology")
    if chips % per_board:
        return {"system.boards": 1, "system.chips_per_board": chips}
    return {"system.boards": chips // per_board}


def build_system(path: str | Path, overrides: Mapping[str, Any] | None = None, *,
                 chip_GBps: float | None = None, link_GBps: float | None = None,
                 inter_board_GBps: float | None = None) -> System:
    """The one place a scenario's :class:`System` is built.

    ``path``: an ``arch_configs/*.toml`` file or a shipped name (``"h100-sxm"``).

    ``overrides``: dotted config keys in the file's units (``chip.cores``, ...). Setting
    ``system.chips`` alone resizes the boards (:func:`resized_overrides`). Then the bandwidth
    knobs: ``chip_GBps`` or ``link_GBps`` set every off-chip link; an explicit board-to-board
    bandwidth (``inter_board_GBps`` or the config key ``system.inter_board.bandwidth_GBps``) keeps
    or sets the board-to-board links on its own."""
    path = locate(path, "system")
    ov = dict(overrides or {})
    if chip_GBps is not None and link_GBps is not None:
        raise ValueError("give chip_GBps (a chip's total) or link_GBps (one link), not both")
    explicit_inter = inter_board_GBps is not None or INTER_BOARD_KEY in ov
    if chip_GBps is not None and explicit_inter:
        raise ValueError("chip_GBps splits a chip's bandwidth over all its links, board-to-board "
                         "links included; to set those apart use link_GBps with "
                         "inter_board_GBps")
    data = read_toml(path)
    if "system.chips" in ov and not {"system.boards", "system.chips_per_board"} & set(ov):
        table = data.get("system", {}) if isinstance(data, Mapping) else {}
        if isinstance(table, Mapping) and "chips_per_board" in table:
            ov.update({k: v for k, v in resized_overrides(
                table, ov["system.chips"], "system.topology" in ov).items() if k not in ov})
    if ov:
        data = apply_overrides(data, ov, source=path)
    system = system_from_dict(data, source=path)
    # a knob that cannot change this system's answer is refused, not silently ignored
    if (chip_GBps is not None or link_GBps is not None) and system.chips == 1:
        knob = "chip_GBps" if chip_GBps is not None else "link_GBps"
        raise Unbuildable(f"{knob}: {system.name} is one chip: no off-chip link to set")
    if inter_board_GBps is not None and not has_inter_board(system):
        raise Unbuildable(f"inter_board_GBps: {system.name} is one board of {system.chips} "
                          "chip(s): no board-to-board link to set")
    if chip_GBps is not None:
        system = with_chip_bandwidth(system, chip_GBps)
    if link_GBps is not None:
        system = with_link_bandwidth(system, link_GBps, inter_board=not explicit_inter)
    if inter_board_GBps is not None:
        system = with_inter_board_bandwidth(system, inter_board_GBps)
    return system
