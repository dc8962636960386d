"""Design-space exploration: per-layer mappings (data / model / hybrid parallelism, dataflow,
scratchpad tiles, communication overlap) evaluated into tidy tables, the best plan picked
(HFP8 paper, appendix D). ``explore`` is the entry point. Beside it: the study's training step
(``training``: the explorer's mapping timed by :mod:`accelsim.engine`), the HFP8 appendix-D study (``hfp8_study``, ``hfp8_published``), the sweep engine
(``sweep``) and the sweep-point -> scenario evaluator (``scenario``)."""

from accelsim.dse.explore import STRATEGIES, ExploreResult, explore, mapping_candidates

__all__ = ["STRATEGIES", "ExploreResult", "explore", "mapping_candidates"]
