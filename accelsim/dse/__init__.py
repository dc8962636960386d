"""Design-space exploration: per-layer mappings (data / model / hybrid parallelism, dataflow,
scratchpad tiles, communication overlap) evaluated into tidy tables, the best plan picked
(HFP8 paper, appendix D). ``explore`` is the entry point. Beside it: the study's training step
(``training``: the explorer's mapping timed by :mod:`accelsim.engine`), the HFP8 appendix-D study (``hfp8_study``, ``hfp8_published``), the sweep engine
(``sweep``) and the sweep-point -> scenario evaluator (``scenario``); a step's energy and the
design's area (``energy``: samples_per_J, samples_per_s_per_mm2) and the Pareto front of two
metrics (``pareto``)."""

from accelsim.dse.energy import EnergyParams
from accelsim.dse.explore import STRATEGIES, ExploreResult, explore, mapping_candidates
from accelsim.dse.pareto import pareto_front

__all__ = ["STRATEGIES", "EnergyParams", "ExploreResult", "explore", "mapping_candidates",
           "pareto_front"]
