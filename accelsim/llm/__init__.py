"""Large models: the plan search over 3-D parallel GPT training and the published tables it is
validated against (Narayanan et al. SC'21; Korthikanti et al. 2022; Peng et al. 2023, FP8-LM),
and inference's front door (:mod:`accelsim.llm.inference`, ``accelsim.infer``). Timing, memory
and communication live in :mod:`accelsim.engine`."""
