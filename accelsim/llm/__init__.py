"""Large-model training at scale: the plan search over 3-D parallel GPT training and the
published tables it is validated against (Narayanan et al. SC'21; Korthikanti et al. 2022;
Peng et al. 2023, FP8-LM). Timing, memory and communication live in :mod:`accelsim.engine`."""
