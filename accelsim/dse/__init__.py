"""Design-space exploration: per-layer mappings (data / model / hybrid parallelism, dataflow,
scratchpad tiles, communication overlap) evaluated into tidy tables, the best plan picked
(HFP8 paper, appendix D). ``explore`` is the entry point; sweeps and the training-step model
live beside it in ``accelsim.dse.sweep`` and ``accelsim.dse.training``."""

from accelsim.dse.explore import STRATEGIES, ExploreResult, explore, mapping_candidates

__all__ = ["STRATEGIES", "ExploreResult", "explore", "mapping_candidates"]
