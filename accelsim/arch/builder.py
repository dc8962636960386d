"""The chip builder: an architecture config (``arch_configs/*.toml`` format) from a die area, a
technology node and a list of MAC formats, every number with its source or the rule that
derived it (``accelsim chip``; docs/configs.md, "Building a chip").

A pure function for a co-design sweep::

    from accelsim.arch.builder import ChipSpec, build_chip, system_of, toml_text
    chip = build_chip(ChipSpec(area_mm2=400, node_nm=14, formats=("fp16", "hfp8"),
                               frequency_GHz=1.5))
    system = system_of(chip)       # a System, read back strictly from toml_text(chip)
    cluster = place(chip, load_system("hfp8-64chip"))   # that chip in a system's topology

The model lives in :mod:`accelsim.arch.chip_model`, the config text in
:mod:`accelsim.arch.chip_toml`.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from accelsim.arch.chip_model import (DEFAULT_ARRAY, DEFAULT_MEMORY_GBps, DEFAULT_MEMORY_GiB,
                                      NON_MAC_SHARE, BuiltChip, ChipSpec, PublishedChip, Rate,
                                      build_chip, chip_labelled, datapath_rates, mac_area_mm2,
                                      published_chips, sram_mm2_per_MiB)
from accelsim.arch.chip_toml import chip_toml as toml_text
from accelsim.arch.config import system_from_dict
from accelsim.arch.model import System


def system_of(chip: BuiltChip) -> System:
    """``chip``'s config read back strictly (what ``check-config`` reads from the file)."""
    return system_from_dict(tomllib.loads(toml_text(chip)),
                            source=f"<built chip {chip.spec.name}>")


def place(chip: BuiltChip, system: System) -> System:
    """``system`` with every chip replaced by ``chip`` (as :func:`system_of` reads it): the same
    chips, boards, topology, links and network efficiency; its name says what it holds."""
    built = system_of(chip)
    return dataclasses.replace(
        system, chip=built.chip, name=f"{system.name}/{chip.spec.name}",
        description=f"{system.name}'s topology and links, every chip built: {built.description}")


def write(chip: BuiltChip, path: str | Path) -> Path:
    """Write ``chip``'s arch config to ``path`` (checked to load first)."""
    system_of(chip)
    path = Path(path)
    path.write_text(toml_text(chip), encoding="utf-8")
    return path


__all__ = ["DEFAULT_ARRAY", "DEFAULT_MEMORY_GBps", "DEFAULT_MEMORY_GiB", "NON_MAC_SHARE",
           "BuiltChip", "ChipSpec", "PublishedChip", "Rate", "build_chip", "chip_labelled",
           "datapath_rates", "mac_area_mm2", "place", "published_chips", "sram_mm2_per_MiB",
           "system_of", "toml_text", "write"]
