"""Hardware descriptions: strict TOML configs (``arch_configs/*.toml``) loaded into frozen
dataclasses Core -> Chip -> System (+ Link), SI units inside; precision schemes in
:mod:`accelsim.arch.schemes`. Models the HFP8 paper's 64-chip system (NeurIPS 2019, appendix D)."""

from accelsim.arch.config import (
    ABSENT,
    TOPOLOGIES,
    Table,
    ConfigError,
    apply_overrides,
    load_policy,
    load_system,
    read_toml,
    system_from_dict,
)
from accelsim.arch.model import (PRECISIONS, REQUIRED_PRECISIONS, Chip, ChipPower, Core, Link,
                                 MemoryLevel, System)
from accelsim.arch.scenario import (
    Unbuildable,
    build_system,
    chip_GBps,
    off_chip_links,
    with_chip_bandwidth,
    with_inter_board_bandwidth,
    with_link_bandwidth,
)

__all__ = [
    "ABSENT",
    "MemoryLevel",
    "PRECISIONS",
    "REQUIRED_PRECISIONS",
    "Table",
    "TOPOLOGIES",
    "Chip",
    "ChipPower",
    "ConfigError",
    "Core",
    "Link",
    "System",
    "Unbuildable",
    "build_system",
    "chip_GBps",
    "off_chip_links",
    "with_chip_bandwidth",
    "with_inter_board_bandwidth",
    "with_link_bandwidth",
    "apply_overrides",
    "load_policy",
    "load_system",
    "read_toml",
    "system_from_dict",
]
