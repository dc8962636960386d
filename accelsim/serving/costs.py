"""What one iteration of a replica costs: the engine's time for its mix of prefill chunks and
decode tokens (:class:`accelsim.engine.iteration.IterationCost`) and the FLOPs and bytes of the
same parts (its dynamic energy's, :class:`accelsim.engine.energy.Work`), memoized together by
shape buckets, plus a speculative draft and the host's per-iteration overhead (time only).

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

from accelsim.engine.energy import Work
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


def _both(seconds, work):
    """``(seconds(*n), work(*n))``, memoized: a part's time and its work, one bucket lookup."""
    return lru_cache(maxsize=None)(lambda *n: (seconds(*n), work(*n)))


class StepTimer:
    """Seconds and work of one iteration on one replica, memoized by bucket."""

    def __init__(self, cost: IterationCost, host_overhead_s: float = 0.0,
                 spec: SpecDecode | None = None, draft: IterationCost | None = None) -> None:
        if (spec is None) != (draft is None):
            raise InputError("speculative decoding needs both its settings and a draft model")
        self.cost, self.host_s, self.spec, self.draft = cost, host_overhead_s, spec, draft
        self.q = 1 if spec is None else spec.k + 1
        self.linear = _both(cost.linear_s, cost.linear_work)
        self.head = _both(cost.head_s, cost.head_work)
        self.chunk = _both(cost.prefill_attention_s, cost.prefill_attention_work)
        if draft is not None:
            self.draft_linear = _both(draft.linear_s, draft.linear_work)
            self.draft_head = _both(draft.head_s, draft.head_work)

    def iteration_s(self, chunks: list[tuple[int, int]], finishing: int, decodes: int,
                    keys: int) -> float:
        """Seconds of :meth:`iteration`."""
        return self.iteration(chunks, finishing, decodes, keys)[0]

    def iteration(self, chunks: list[tuple[int, int]], finishing: int, decodes: int,
                  keys: int) -> tuple[float, Work]:
        """Seconds and work (every GPU of the replica) of an iteration: prefill ``chunks``
        (tokens, cached tokens before them), ``finishing`` of which end their prompt (they
        emit a token), and ``decodes`` decoding sequences attending ``keys`` cached keys in
        all (their new tokens included)."""
        q = self.q
        tokens = sum(t for t, _ in chunks) + decodes * q
        (ls, lw), (hs, hw) = self.linear(bucket(tokens)), self.head(finishing + decodes * q)
        s = ls + hs + self.host_s
        f, a, b = lw.flops + hw.flops, 0.0, lw.bytes + hw.bytes
        for t, past in chunks:
            cs, cw = self.chunk(bucket(t), bucket(past) if past else 0)
            s, a, b = s + cs, a + cw.attention_flops, b + cw.bytes
        if decodes:
            dw = self.cost.decode_attention_work(decodes, keys, q)
            s += self.cost.decode_attention_s(decodes, keys, q)
            a, b = a + dw.attention_flops, b + dw.bytes
            if self.draft is not None:  # K draft steps over the same caches
                (ls, lw), (hs, hw) = self.draft_linear(bucket(decodes)), self.draft_head(decodes)
                dw = self.draft.decode_attention_work(decodes, keys)
                k = self.spec.k
                s += k * (ls + hs + self.draft.decode_attention_s(decodes, keys))
                f += k * (lw.flops + hw.flops)
                a += k * dw.attention_flops
                b += k * (lw.bytes + hw.bytes + dw.bytes)
        return s, Work(f, a, b)
