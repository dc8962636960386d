"""An error bar on every prediction: the band of errors the validations measured in the
prediction's regime, and whether the question lies inside what was validated at all.

``accelsim/data/error_bands.csv`` (written by ``scripts/error_bands.py`` from the validation
tables in ``reports/``) holds, per regime, the 10th and 90th percentile of the held-out and
leave-one-out errors, each error the predicted rate over the measured one, minus 1 (a throughput's
error; a time's error t_measured / t_predicted - 1 turned the same way), so a positive band means
"predicted too fast". A regime is (family, phase, nodes, stack, precision, sequence range); a
question takes the most specific regime with enough rows, dropping the sequence range, then the
precision, the stack, the node count and the phase (:func:`regime_chain`). Each family's row
(every other key ``*``) also carries its validated domain: GPU count, model size, sequence length
and chips.

The one owner of the regime bins: the script builds the table with these functions, the
front-ends (``llm``, ``predict``, ``infer``, ``gemm``) ask :func:`error_band`.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from accelsim.errors import ABSENT, ConfigError, InputError
from accelsim.paths import PACKAGE_DATA

if TYPE_CHECKING:
    from accelsim.arch import System

#: the table the package reads (``scripts/error_bands.py`` writes it)
BANDS_FILE = PACKAGE_DATA / "error_bands.csv"

#: any value of a regime key
ANY = "*"
#: the regime keys, most general first: a question falls back by making the last ones ``*``
KEYS = ("family", "phase", "nodes", "stack", "precision", "seq_range")
#: a band comes from at least this many errors (fewer: the next more general regime's)
MIN_ROWS = 6
#: upper ends of the sequence ranges (tokens per sample; inference: prompt + output, or the
#: context of a decode step): <= 2K, <= 8K, longer
SEQ_EDGES = (2048, 8192)
#: the columns of :data:`BANDS_FILE`
COLUMNS = (*KEYS, "rows", "error_low_pct", "error_high_pct", "mae_pct", "gpus_min", "gpus_max",
           "params_B_min", "params_B_max", "seq_min", "seq_max", "chips", "capped")


class Family(str, Enum):
    """Which front-ends a regime's errors describe."""

    TRAINING = "training"    # llm, predict (a training iteration)
    INFERENCE = "inference"  # infer
    GEMM = "gemm"            # gemm, op gemm


class Phase(str, Enum):
    TRAIN = "train"
    PREFILL = "prefill"
    DECODE = "decode"
    REQUEST = "request"      # a whole request, prompt then output tokens
    GEMM = "gemm"


def seq_range(seq: int | None) -> str:
    """The sequence-range key of ``seq`` tokens (``*`` when the question has none)."""
    if seq is None:
        return ANY
    lo = 0
    for hi in SEQ_EDGES:
        if seq <= hi:
            return f"{lo + 1}-{hi}" if lo else f"<={hi}"
        lo = hi
    return f">{SEQ_EDGES[-1]}"


def nodes_class(gpus: int, gpus_per_node: int) -> str:
    """``one`` when the GPUs fit one node (``gpus_per_node`` of the system file), else ``many``."""
    return "one" if gpus <= max(1, gpus_per_node) else "many"


def precision_class(precision: str) -> str:
    """The precision key of a compute precision: ``32-bit`` (fp32, tf32), ``16-bit`` (bf16,
    fp16) or ``8-bit`` (fp8 and every narrower or block-scaled format)."""
    if precision in ("fp32", "tf32"):
        return "32-bit"
    if precision in ("bf16", "fp16"):
        return "16-bit"
    return "8-bit"


def chip_name(system_name: str) -> str:
    """The chip a system file names: ``dgx-h100`` and ``h100-sxm`` are ``h100``; ``dgx1-v100``
    and ``v100-sxm2`` are ``v100``; ``h100-pcie`` stays itself."""
    name = re.sub(r"^dgx1?-", "", system_name.lower())
    return re.sub(r"-sxm\d*$", "", name)


@dataclass(frozen=True)
class Question:
    """What a prediction answered, in the terms of the regimes and the validated domain.
    ``chip``: the system's name (:func:`chip_name` reads it); ``gpus_per_node``: the system
    file's chips (the GPUs one node holds); ``params``: the model's parameters (None for a GEMM
    or a layer workload); ``seq``: tokens per sample, or the prompt + output / context of an
    inference question (None: no sequence)."""

    family: Family
    phase: Phase
    chip: str
    gpus: int
    gpus_per_node: int
    precision: str
    stack: str = ANY
    seq: int | None = None
    params: float | None = None

    def key(self) -> tuple[str, ...]:
        return (self.family.value, self.phase.value, nodes_class(self.gpus, self.gpus_per_node),
                self.stack, precision_class(self.precision), seq_range(self.seq))


def regime_chain(key: tuple[str, ...]) -> list[tuple[str, ...]]:
    """``key`` and its fallbacks, most specific first: the last keys made ``*`` one by one
    (the family is never dropped)."""
    chain = [tuple(key)]
    for i in range(len(KEYS) - 1, 0, -1):
        chain.append(chain[-1][:i] + (ANY,) * (len(KEYS) - i))
    return list(dict.fromkeys(chain))


def regime_text(key: tuple[str, ...]) -> str:
    """``training / many nodes / megatron / 16-bit / seq <=2048`` (``*`` keys left out)."""
    parts = []
    for name, v in zip(KEYS, key):
        if v == ANY or (name == "phase" and v in (Phase.TRAIN.value, Phase.GEMM.value)):
            continue
        parts.append({"nodes": f"{v} node{'s' if v == 'many' else ''}",
                      "seq_range": f"seq {v}"}.get(name, v))
    return " / ".join(parts)


@dataclass(frozen=True)
class ErrorBand:
    """The error bar of one prediction: ``low_pct`` .. ``high_pct`` (predicted rate / measured
    - 1, in %; the measured value is about prediction / (1 + error)), the regime it comes from
    and its row count; ``in_domain`` False with ``domain_note`` when the question lies outside
    its family's validated range."""

    low_pct: float
    high_pct: float
    regime: str
    rows: int
    in_domain: bool
    domain_note: str | None

    def as_dict(self) -> dict:
        """The JSON keys every front-end adds."""
        return {"error_low_pct": self.low_pct, "error_high_pct": self.high_pct,
                "error_regime": self.regime, "in_domain": self.in_domain,
                "domain_note": self.domain_note}

    def line(self) -> str:
        """The one line of a text report."""
        where = "in the validated domain" if self.in_domain else self.domain_note
        return (f"  error band {self.low_pct:+.0f} % to {self.high_pct:+.0f} % (predicted / "
                f"measured - 1, P10-P90 of {self.rows} held-out errors, {self.regime}); {where}")


@functools.lru_cache(maxsize=4)
def load_bands(path: Path = BANDS_FILE) -> dict[tuple[str, ...], dict]:
    """The band table by regime key (comment lines ``#`` skipped)."""
    try:
        with open(path, newline="") as f:
            lines = [ln for ln in f if not ln.startswith("#")]
    except OSError as exc:
        raise ConfigError(path, "error bands", ABSENT, f"cannot read the table "
                          f"({exc.strerror}); rerun scripts/error_bands.py") from None
    table: dict[tuple[str, ...], dict] = {}
    for rec in csv.DictReader(lines):
        if tuple(rec) != COLUMNS:
            raise ConfigError(path, "columns", list(rec), f"expected {', '.join(COLUMNS)}; "
                              "rerun scripts/error_bands.py")
        table[tuple(rec[k] for k in KEYS)] = rec
    return table


def _num(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def domain_note(q: Question, family_row: dict) -> str | None:
    """Why ``q`` lies outside its family's validated domain (None when inside)."""
    out = []
    lo, hi = _num(family_row["gpus_min"]), _num(family_row["gpus_max"])
    if lo is not None and not lo <= q.gpus <= hi:
        out.append(f"{q.gpus} GPUs (validated {lo:.0f}-{hi:.0f})")
    lo, hi = _num(family_row["params_B_min"]), _num(family_row["params_B_max"])
    if q.params is not None and lo is not None and not lo <= q.params / 1e9 <= hi:
        out.append(f"{q.params / 1e9:.3g} B parameters (validated {lo:g}-{hi:g} B)")
    lo, hi = _num(family_row["seq_min"]), _num(family_row["seq_max"])
    if q.seq is not None and lo is not None and not lo <= q.seq <= hi:
        out.append(f"sequence {q.seq} (validated {lo:.0f}-{hi:.0f})")
    chips = family_row["chips"].split(";")
    if chip_name(q.chip) not in chips:
        out.append(f"chip {chip_name(q.chip)} (validated {', '.join(chips)})")
    if not out:
        return None
    return f"outside the validated {q.family.value} domain: {'; '.join(out)}"


def error_band(q: Question, path: Path = BANDS_FILE) -> ErrorBand:
    """The error bar of the prediction ``q`` describes (:class:`ErrorBand`)."""
    table = load_bands(path)
    for key in regime_chain(q.key()):
        rec = table.get(key)
        if rec is not None:
            break
    else:
        raise InputError(f"{path}: no band for the {q.family.value} family; rerun "
                         "scripts/error_bands.py")
    family = table[regime_chain(q.key())[-1]]
    note = domain_note(q, family)
    return ErrorBand(low_pct=float(rec["error_low_pct"]), high_pct=float(rec["error_high_pct"]),
                     regime=regime_text(key), rows=int(rec["rows"]), in_domain=note is None,
                     domain_note=note)


def training_band(system: System, *, gpus: int, precision: str, stack: str,
                  seq: int | None = None, params: float | None = None) -> ErrorBand:
    """The band of a training iteration (``llm``, ``predict``): ``stack`` megatron / pytorch,
    or ``layers`` for a layer-list workload; ``system.chips`` GPUs make one node."""
    return error_band(Question(Family.TRAINING, Phase.TRAIN, system.name, gpus, system.chips,
                               precision, stack, seq, params))


def inference_band(system: System, *, phase: Phase, gpus: int, precision: str, seq: int,
                   params: float) -> ErrorBand:
    """The band of an inference prediction (``infer``): ``seq`` the prompt (prefill), the
    context (a decode step) or prompt + output tokens (a request)."""
    return error_band(Question(Family.INFERENCE, phase, system.name, gpus, system.chips,
                               precision, ANY, seq, params))


def gemm_band(system: System, precision: str) -> ErrorBand:
    """The band of one GEMM on one chip (``gemm``, ``op gemm``)."""
    return error_band(Question(Family.GEMM, Phase.GEMM, system.name, 1, 1, precision))
