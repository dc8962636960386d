"""The one engine lookup by name: the scalar-datapath presets (:mod:`accelsim.arith.engine`) and
the block-scaled GEMM engines (:mod:`accelsim.arith.blockscaled`), so neither module imports the
other's registry."""

from __future__ import annotations

from typing import Any

from . import engine
from .blockscaled import BLOCK_PRESETS, BlockScaledEngine, get_block_engine


def get_engine(name: str, **overrides: Any) -> engine.EngineConfig | BlockScaledEngine:
    """A preset by name with fields replaced: an :class:`~accelsim.arith.EngineConfig` or, for a
    block-scaled engine (:data:`~accelsim.arith.blockscaled.BLOCK_PRESETS`), a block engine."""
    if name in BLOCK_PRESETS:
        return get_block_engine(name, **overrides)
    if name not in engine.PRESETS:
        raise ValueError(f"unknown engine preset {name!r}; choose from "
                         f"{', '.join(engine.PRESET_NAMES + tuple(BLOCK_PRESETS))}")
    return engine.get_engine(name, **overrides)
