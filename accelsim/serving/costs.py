"""What one iteration of a replica costs: the engine's time for its mix of prefill chunks and
decode tokens (:class:`accelsim.engine.iteration.IterationCost`), memoized by shape buckets, plus
a speculative draft and the host's per-iteration overhead.

Token counts round up to buckets: exact up to :data:`EXACT_UP_TO`, then 8 per octave (at most
12.5 % more tokens than the iteration has: a conservative time, and powers of two exact). The
decode attention needs no bucket: its time is linear in the keys attended.

Speculative decoding (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
Decoding", ICML): per iteration a draft proposes ``K`` tokens for every decoding sequence (``K``
draft decode steps), the target verifies ``K + 1`` positions per sequence in one pass, and each
draft token is accepted with probability ``P`` independently until the first rejection, so a
sequence emits ``1 + a`` tokens, ``a`` the accepted drafts: ``(1 - P^(K+1)) / (1 - P)`` expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from accelsim.engine.iteration import IterationCost
from accelsim.errors import InputError, check_int

#: token counts timed exactly up to this many, then in buckets of 8 per octave
EXACT_UP_TO = 32
#: most draft tokens per step
MAX_SPEC_TOKENS = 16


def bucket(n: int) -> int:
    """``n`` rounded up to its bucket (exact up to :data:`EXACT_UP_TO`)."""
    if n <= EXACT_UP_TO:
        return n
    step = 1 << (n.bit_length() - 4)
    return -(-n // step) * step


@dataclass(frozen=True)
class SpecDecode:
    """``k`` draft tokens per step, each accepted with probability ``accept_rate``."""

    k: int
    accept_rate: float

    def __post_init__(self) -> None:
        check_int("spec_decode (draft tokens per step)", self.k, 1, MAX_SPEC_TOKENS)
        p = self.accept_rate
        if not (isinstance(p, int | float) and math.isfinite(p) and 0 <= p < 1):
            raise InputError(f"accept_rate must be in [0, 1), got {p!r}")

    @property
    def expected_tokens(self) -> float:
        """Tokens a sequence emits per step on average."""
        p = self.accept_rate
        return (1 - p ** (self.k + 1)) / (1 - p)

    def draw_array(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Tokens each of ``n`` sequences emits this step: 1 + the drafts accepted before
        the first rejection."""
        ok = rng.random((n, self.k)) < self.accept_rate
        return np.cumprod(ok, axis=1).sum(axis=1) + 1


class StepTimer:
    """Seconds of one iteration on one replica, memoized by bucket."""

    def __init__(self, cost: IterationCost, host_overhead_s: float = 0.0,
                 spec: SpecDecode | None = None, draft: IterationCost | None = None) -> None:
        if (spec is None) != (draft is None):
            raise InputError("speculative decoding needs both its settings and a draft model")
        self.cost, self.host_s, self.spec, self.draft = cost, host_overhead_s, spec, draft
        self.q = 1 if spec is None else spec.k + 1
        self.linear = lru_cache(maxsize=None)(cost.linear_s)
        self.head = lru_cache(maxsize=None)(cost.head_s)
        self.chunk = lru_cache(maxsize=None)(cost.prefill_attention_s)
        if draft is not None:
            self.draft_linear = lru_cache(maxsize=None)(draft.linear_s)
            self.draft_head = lru_cache(maxsize=None)(draft.head_s)

    def iteration_s(self, chunks: list[tuple[int, int]], finishing: int, decodes: int,
                    keys: int) -> float:
        """Prefill ``chunks`` (tokens, cached tokens before them), ``finishing`` of which end
        their prompt (they emit a token), and ``decodes`` decoding sequences attending
        ``keys`` cached keys in all (their new tokens included)."""
        q = self.q
        tokens = sum(t for t, _ in chunks) + decodes * q
        s = self.linear(bucket(tokens)) + self.head(finishing + decodes * q) + self.host_s
        for t, past in chunks:
            s += self.chunk(bucket(t), bucket(past) if past else 0)
        if decodes:
            s += self.cost.decode_attention_s(decodes, keys, q)
            if self.draft is not None:  # K draft steps over the same caches
                d = self.draft_linear(bucket(decodes)) + self.draft_head(decodes)
                s += self.spec.k * (d + self.draft.decode_attention_s(decodes, keys))
        return s
