"""The one table of bounds: every limit a value must keep, whether it comes from a CLI flag, a
config file (TOML, a Hugging Face config.json, a sweep key) or a Python API call.

The library's constructors and entry points check these (an :class:`~accelsim.errors.InputError`
naming the field and the value); the CLI's argparse types are built from the same numbers, so a
flag refuses at parse time exactly what the library would refuse. A shared module: every room
may import it; of accelsim it imports only :mod:`accelsim.errors`. The config ranges are documented in
docs/configs.md ("Plausible ranges").
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from accelsim.errors import MAX_COUNT, InputError

__all__ = ["MAX_CHIPS", "MAX_COUNT", "MAX_DIM", "MAX_MODEL_LAYERS", "MAX_SEED",
           "MAX_SERVE_SEARCH_CONFIGS", "MAX_TRAIN_STEPS", "MAX_STUDY_SEEDS",
           "MEMORY_RESERVE_GiB", "PER_TENSOR_OVERHEAD_S", "PLAUSIBLE", "PLAUSIBLE_FLOP_PJ",
           "PLAUSIBLE_MAC_RATE", "SI_RANGES", "check_bool", "check_number", "check_si"]

#: Largest tensor dimension (a GEMM's m/n/k, a layer's channels, a model's hidden size, tokens
#: in one pass): int32, as BLAS/cuBLAS take them; beyond it a value is a typo, and the products
#: it feeds would overflow 64-bit arithmetic.
MAX_DIM = 2**31 - 1
#: Most transformer layers a model may have (the largest published models have ~10^2; a
#: generated workload holds ~12 rows per layer, and 10^4 layers still build in about a second).
MAX_MODEL_LAYERS = 10_000
#: Most chips (GPUs) a system, plan or topology may span: a config's ``chips`` range.
MAX_CHIPS = 10_000_000
#: Most configurations one ``accelsim serve --search`` runs (each a whole request-level
#: simulation, ~0.1-1 s with a thousand requests on one core: 10^4 is an hour or more); a
#: larger product of axes is refused, counted before anything runs.
MAX_SERVE_SEARCH_CONFIGS = 10_000
#: Seeds of numpy's Generator: any integer in [0, 2^64 - 1] (numpy refuses negative ones).
MAX_SEED = 2**64 - 1
#: Most training steps one run of ``accelsim train`` / ``ptq`` / ``study`` takes: a million
#: steps of the cheapest run (mlp on digits, fp32 --gemm blas, ~1.5 ms a step on one core) are
#: about 25 minutes, the engine-emulated recipes several hours; the studies of docs/train.md
#: use 10^3 - 10^4. More is a typo, refused instead of running for days.
MAX_TRAIN_STEPS = 1_000_000
#: Most seeds of one ``accelsim study`` (each seed is one training run per recipe).
MAX_STUDY_SEEDS = 1_000
#: GPU memory per GPU outside the tensors (CUDA context, communicator buffers, workspaces), GiB:
#: a stack's, ``LlmParams.memory_reserve_GiB``, ``--memory-reserve`` (the largest GPUs hold
#: a few hundred GiB; a negative reserve would make memory that does not exist "fit").
MEMORY_RESERVE_GiB = (0.0, 1024.0)
#: Fixed weight-update cost per parameter tensor (kernel launch, sync), seconds: 0 to 1 s, the
#: range of a config's ``kernel_launch_us``.
PER_TENSOR_OVERHEAD_S = (0.0, 1.0)

#: Plausible ranges of config values, in the file's units, by key name (the last part of the
#: dotted key): a value outside is a typo or a unit slip (1e300 GHz, 10^12 cores), refused with
#: the key and the range before it can overflow or stall a model. The CLI flags that set a config
#: quantity (``--link-GBps``, ``--rows``, ``--power-limit-W``) and the dataclasses of
#: :mod:`accelsim.arch.model` (in SI units: :data:`SI_RANGES`) keep the same ranges.
PLAUSIBLE = {
    "frequency_GHz": (1e-3, 100.0),                 # 1 MHz .. 100 GHz
    "bandwidth_GBps": (1e-6, 1e7),                  # a link or a memory level
    "memory_bandwidth_GBps": (1e-3, 1e7),
    "host_link_GBps": (1e-3, 1e7),                  # [chip]: GPU-host link, per direction
    "ring_bandwidth_GBps": (1e-3, 1e7),
    "scratchpad_bandwidth_GBps": (1e-3, 1e7),
    "latency_ns": (1e-3, 1e9),                      # 1 ps .. 1 s
    "kernel_launch_us": (0.0, 1e6),
    "unaligned_gemm_rate": (1e-3, 1.0),
    "network_efficiency": (1e-3, 1.0),                # [system]: of the wire rate
    "memory_capacity_GiB": (1e-6, 1e6),
    "memory_capacity_MiB": (1e-3, 1e9),
    "scratchpad_MiB": (1e-6, 1e6),
    "scratchpad_KiB": (1e-3, 1e9),
    "capacity_MiB": (1e-6, 1e9),
    "capacity_KiB": (1e-3, 1e12),
    "sfu_ops_per_cycle": (1e-6, 1e7),
    "chips": (1, MAX_CHIPS),
    "boards": (1, MAX_CHIPS),
    "chips_per_board": (1, 1_000_000),
    "links_per_chip": (1, 1024),
    "cores": (1, 1_000_000),
    "rows": (1, 65_536),
    "cols": (1, 65_536),
    "shared_by": (1, 1_000_000),
    "power_limit_W": (1.0, 1e5),                    # [chip.power]
    "static_W": (1e-3, 1e5),
    "max_clock_MHz": (1.0, 1e5),
    "memory_pJ_per_byte": (1e-3, 1e5),
}
#: energies per FLOP (``chip.power.flop_pJ.*``), pJ
PLAUSIBLE_FLOP_PJ = (1e-4, 1e4)
#: per-PE MAC rates of any precision (``core.macs_per_pe_per_cycle.*``)
PLAUSIBLE_MAC_RATE = (1e-6, 1e4)


def _si(*keys: tuple[str, float]) -> tuple[float, float]:
    """The SI range of a quantity a config gives under one of ``keys`` (key, unit in SI): the
    file ranges converted as the loader converts a value (value x unit), joined."""
    return (min(PLAUSIBLE[k][0] * u for k, u in keys), max(PLAUSIBLE[k][1] * u for k, u in keys))


_KiB, _MiB, _GiB = 1024, 1024**2, 1024**3
#: :data:`PLAUSIBLE` in SI units, by dataclass field (:mod:`accelsim.arch.model`): what a System
#: built in Python (or changed with ``dataclasses.replace``) must keep, as a file must.
SI_RANGES = {
    "frequency_Hz": _si(("frequency_GHz", 1e9)),
    "bandwidth_Bps": _si(("bandwidth_GBps", 1e9)),
    "memory_bandwidth_Bps": _si(("memory_bandwidth_GBps", 1e9)),
    "host_link_Bps": _si(("host_link_GBps", 1e9)),
    "ring_bandwidth_Bps": _si(("ring_bandwidth_GBps", 1e9)),
    "scratchpad_bandwidth_Bps": _si(("scratchpad_bandwidth_GBps", 1e9)),
    "latency_s": _si(("latency_ns", 1e-9)),
    "kernel_launch_s": _si(("kernel_launch_us", 1e-6)),
    "unaligned_gemm_rate": PLAUSIBLE["unaligned_gemm_rate"],
    "network_efficiency": PLAUSIBLE["network_efficiency"],
    "memory_capacity_bytes": _si(("memory_capacity_GiB", _GiB), ("memory_capacity_MiB", _MiB)),
    "scratchpad_bytes": _si(("scratchpad_MiB", _MiB), ("scratchpad_KiB", _KiB)),
    "capacity_bytes": _si(("capacity_MiB", _MiB), ("capacity_KiB", _KiB)),
    "sfu_ops_per_cycle": PLAUSIBLE["sfu_ops_per_cycle"],
    "power_limit_W": PLAUSIBLE["power_limit_W"],
    "static_W": PLAUSIBLE["static_W"],
    "max_clock_Hz": _si(("max_clock_MHz", 1e6)),
    "memory_J_per_byte": _si(("memory_pJ_per_byte", 1e-12)),
    "flop_J": (PLAUSIBLE_FLOP_PJ[0] * 1e-12, PLAUSIBLE_FLOP_PJ[1] * 1e-12),
    "mac_rate": PLAUSIBLE_MAC_RATE,
    **{k: PLAUSIBLE[k] for k in ("chips", "boards", "chips_per_board", "links_per_chip",
                                  "cores", "rows", "cols", "shared_by")},
}


def check_number(name: str, value: Any, lo: float, hi: float | None = None, *,
                 lo_open: bool = False) -> float:
    """``value`` as a float when it is a finite real number (not a bool) in ``[lo, hi]``
    (``(lo, hi]`` when ``lo_open``; no upper bound when ``hi`` is None); else an InputError
    naming ``name``, the value and the range."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) \
        and math.isfinite(value) and (value > lo if lo_open else value >= lo) \
        and (hi is None or value <= hi)
    if not ok:
        if hi is None:
            want = f"{'>' if lo_open else '>='} {lo:g}"
        else:
            want = f"in {'(' if lo_open else '['}{lo:g}, {hi:g}]"
        raise InputError(f"{name} must be a finite number {want}, got {value!r}")
    return float(value)


def check_si(owner: str, field: str, value: Any, key: str | None = None) -> float:
    """``value`` of dataclass field ``owner.field`` inside its :data:`SI_RANGES` entry (``key``,
    default ``field``); an InputError naming both and the range otherwise."""
    lo, hi = SI_RANGES[key or field]
    return check_number(f"{owner}.{field}", value, lo, hi)


def check_bool(name: str, value: Any) -> bool:
    """``value`` when it is a real bool (True/False, numpy's bool too): a string such as
    ``"off"`` or a number is an InputError, never read as truthy."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise InputError(f"{name} must be True or False, got {value!r}")
