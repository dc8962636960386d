"""accelsim: bit-exact number formats, arithmetic golden models and a performance model
for low-precision deep-learning training on multi-chip accelerators (IBM HFP8, NeurIPS 2019)."""

__version__ = "0.1.0"
