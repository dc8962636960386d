"""The iteration scheduler of one replica, as continuous-batching engines run it (vLLM's
scheduler; Orca's iteration-level batching; Sarathi-Serve's chunked prefill): which sequences
run in the next forward pass, how many new tokens each brings, and who is preempted when the
paged KV cache is full.

* Every running sequence that has finished its prefill decodes one token per iteration
  (``1 + K`` verified tokens under speculative decoding).
* Without chunked prefill (vLLM's V0 default), waiting prompts are admitted first-come
  first-served into a prefill-only iteration while the batch (``max_batch`` sequences), the
  token budget (``max_batched_tokens``) and the free KV blocks allow; the decodes wait one
  iteration. With chunked prefill, the decodes go first and prompts fill the rest of the token
  budget, the last one cut to fit (mixed batches).
* With a prefix cache (vLLM's automatic prefix caching), a prompt starts from the whole
  blocks of its prefix already cached on the lane (a ``prefix`` id prefilled there before, or
  the ``hit_rate`` share of every prompt): only the rest is computed, attending the cached
  part. The cached blocks are counted for each sequence that uses them (not shared: the
  capacity is a lower bound) and never evicted.
* KV blocks are allocated as tokens are computed; when a decode finds no free block, the
  sequence admitted last is preempted: its blocks freed, it goes back to the head of the queue,
  and by recompute (vLLM's default) prefills its prompt and the tokens it had generated again,
  or with a :class:`HostOffload` (vLLM's swap preemption, ``serve --kv-offload``) its KV cache
  is copied to host memory and back before it runs again, while host memory holds it (else it
  recomputes). A copy stalls the iteration that makes it: vLLM V0's worker issues the step's
  swap-ins, then its swap-outs, then runs the model (``Worker.execute_worker``), so nothing
  overlaps them.

The running batch lives in numpy arrays, one slot per sequence, so a decode iteration of a few
hundred sequences is a handful of array operations (10,000 requests simulate in seconds).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum

import numpy as np

from accelsim.errors import InputError, check_int
from accelsim.serving.arrivals import Request
from accelsim.serving.policy import BLOCK_TOKENS

#: vLLM's defaults: --max-num-seqs 256, --max-num-batched-tokens 8192 (V1's online default)
DEFAULT_MAX_BATCH = 256
DEFAULT_MAX_BATCHED_TOKENS = 8192
#: most sequences in one batch (the slot arrays' size)
MAX_BATCH = 65536


class Preemption(str, Enum):
    """What a preempted sequence's KV cache becomes (vLLM's ``preemption_mode``)."""

    RECOMPUTE = "recompute"
    SWAP = "swap"


@dataclass(frozen=True)
class PrefixCache:
    """A prefix cache: by the requests' ``prefix`` ids, or (``hit_rate``) that share of every
    prompt's tokens found cached."""

    hit_rate: float | None = None

    def __post_init__(self) -> None:
        h = self.hit_rate
        if h is not None and not (isinstance(h, int | float) and not isinstance(h, bool)
                                  and 0 <= h <= 1):
            raise InputError(f"prefix hit rate must be in [0, 1], got {h!r}")


@dataclass(frozen=True)
class HostOffload:
    """KV offload to host memory: ``s_per_token`` seconds to copy one cached token's KV one
    way (every GPU its shard over its own host link, in parallel), ``bytes_per_token`` those
    shards together, and room for ``capacity_tokens`` tokens in host memory (None: no limit)."""

    s_per_token: float
    bytes_per_token: float
    capacity_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("s_per_token", "bytes_per_token"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1e300):
                raise InputError(f"HostOffload.{name} must be a positive number, got {v!r}")
        if self.capacity_tokens is not None:
            check_int("host KV capacity (tokens)", self.capacity_tokens, 0, 1 << 62)


@dataclass(frozen=True)
class BatchLimits:
    """The engine's batch limits: sequences per iteration, new tokens per iteration, chunked
    prefill on or off."""

    max_batch: int = DEFAULT_MAX_BATCH
    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
    chunked_prefill: bool = False

    def __post_init__(self) -> None:
        check_int("max_batch", self.max_batch, 1, MAX_BATCH)
        check_int("max_batched_tokens", self.max_batched_tokens, 1, 1 << 24)


class Seq:
    """A request's state while it is not in a slot (waiting, preempted or finished)."""

    __slots__ = ("req", "computed", "generated", "first_s", "last_s", "max_gap_s", "done_s",
                 "preempted", "target", "hit", "swapped")

    def __init__(self, req: Request) -> None:
        self.req = req
        self.computed = 0  # tokens whose KV is in the cache
        self.generated = 0  # output tokens emitted
        self.first_s = -1.0  # first token
        self.last_s = -1.0
        self.max_gap_s = 0.0
        self.done_s = -1.0
        self.preempted = 0
        self.target = req.input_tokens  # tokens its (re)prefill computes
        self.hit = 0  # prompt tokens found in the prefix cache (every admission's)
        self.swapped = False  # its KV cache is in host memory


@dataclass
class Iteration:
    """One scheduled forward pass: prefill chunks ``(slot, tokens, past)``, the slots that
    decode, the chunks that end a prompt, and the cached keys the decodes attend."""

    chunks: list
    decodes: np.ndarray
    finishing: int = 0
    keys: int = 0
    swap_s: float = 0.0  # KV copies to and from host memory (KV offload)


class Scheduler:
    """One replica's queue, running batch and KV blocks; :meth:`next` picks an iteration,
    :meth:`finish` applies it."""

    def __init__(self, limits: BatchLimits, kv_tokens: int, verify_tokens: int = 1,
                 window: int | None = None, prefill_only: bool = False,
                 prefix_cache: PrefixCache | None = None,
                 offload: HostOffload | None = None) -> None:
        self.limits = limits
        self.window = window  # a sliding window: the most keys a token attends
        # a disaggregated prefill lane: a sequence leaves when its prompt is done (handed)
        self.prefill_only = prefill_only
        self.handed: list[Seq] = []
        self.total_blocks = kv_tokens // BLOCK_TOKENS
        self.free_blocks = self.total_blocks
        self.q = verify_tokens  # new tokens a decoding sequence brings (1 + K speculative)
        self.waiting: deque[Seq] = deque()
        self.preemptions = 0
        self._admitted = 0
        n = min(limits.max_batch, 64)
        self.seq: list[Seq | None] = [None] * n
        self.comp = np.zeros(n, np.int64)
        self.tgt = np.zeros(n, np.int64)
        self.gen = np.zeros(n, np.int64)
        self.outl = np.zeros(n, np.int64)
        self.prefix_cache = prefix_cache
        self.offload = offload  # None: preemption by recompute
        self._swap_s = 0.0  # copies made since the last iteration that runs
        self.host_tokens = 0  # tokens whose KV is in host memory now
        self.offloads = 0  # sequences whose KV went to host memory
        self.offload_s = 0.0  # the copies' time, both ways
        self.offload_bytes = 0.0  # and their bytes (every GPU's shard)
        self.recomputed_tokens = 0  # cached tokens a preemption dropped, to compute again
        self.cached: set[str] = set()  # prefix ids prefilled on this lane
        self.blk = np.zeros(n, np.int64)
        self.order = np.full(n, -1, np.int64)  # admission counter; -1: a free slot
        self.last = np.zeros(n)
        self.gap = np.zeros(n)
        self.running = 0

    def check(self, req: Request) -> None:
        """A request the replica can never serve is an input error, not a hang."""
        need = -(-(req.input_tokens + req.output_tokens + self.q) // BLOCK_TOKENS)
        if need > self.total_blocks:
            raise InputError(f"request {req.id}: {req.input_tokens} + {req.output_tokens} "
                             f"tokens need {need * BLOCK_TOKENS:,} tokens of KV cache, more "
                             f"than the {self.total_blocks * BLOCK_TOKENS:,} one replica holds")
        if not self.limits.chunked_prefill and req.input_tokens > self.limits.max_batched_tokens:
            raise InputError(f"request {req.id}: prompt of {req.input_tokens} tokens is over "
                             f"max_batched_tokens {self.limits.max_batched_tokens}: raise it or "
                             "use chunked prefill")

    def add(self, seq: Seq) -> None:
        self.waiting.append(seq)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    # -- slots ------------------------------------------------------------------------------
    def _slot(self, s: Seq) -> int:
        free = np.flatnonzero(self.order < 0)
        if not len(free):
            n = len(self.order)
            for name in ("comp", "tgt", "gen", "outl", "blk", "last", "gap"):
                a = getattr(self, name)
                setattr(self, name, np.concatenate([a, np.zeros_like(a)]))
            self.order = np.concatenate([self.order, np.full(n, -1, np.int64)])
            self.seq += [None] * n
            free = np.arange(n, 2 * n)
        k = int(free[0])
        self.seq[k] = s
        self.comp[k], self.tgt[k], self.gen[k] = s.computed, s.target, s.generated
        self.outl[k], self.blk[k] = s.req.output_tokens, 0
        self.last[k], self.gap[k] = s.last_s, s.max_gap_s
        self.order[k] = self._admitted
        self._admitted += 1
        self.running += 1
        return k

    def _release(self, k: int) -> Seq:
        """Slot ``k``'s state back into its :class:`Seq`; its blocks freed."""
        s = self.seq[k]
        s.computed, s.generated = int(self.comp[k]), int(self.gen[k])
        s.last_s, s.max_gap_s = float(self.last[k]), float(self.gap[k])
        self.free_blocks += int(self.blk[k])
        self.blk[k] = 0
        self.order[k] = -1
        self.seq[k] = None
        self.running -= 1
        return s

    def _grow(self, k: int, tokens: int) -> bool:
        """Blocks for slot ``k`` to hold ``tokens`` tokens; False when the cache is short."""
        need = -(-tokens // BLOCK_TOKENS) - int(self.blk[k])
        if need <= 0:
            return True
        if need > self.free_blocks:
            return False
        self.free_blocks -= need
        self.blk[k] += need
        return True

    def _preempt(self, k: int) -> None:
        s = self._release(k)
        off = self.offload
        if s.computed and off is not None and (off.capacity_tokens is None or self.host_tokens
                                               + s.computed <= off.capacity_tokens):
            self._copy(s.computed)  # its cache to host memory, kept
            self.host_tokens += s.computed
            self.offloads += 1
            s.swapped = True
        else:  # recompute: the prompt and every generated token (the re-prefill emits the next)
            self.recomputed_tokens += s.computed
            s.computed = 0
            s.target = s.req.input_tokens + s.generated
        s.preempted += 1
        self.preemptions += 1
        self.waiting.appendleft(s)

    def _last_admitted(self) -> int:
        return int(np.argmax(self.order))

    # -- picking ----------------------------------------------------------------------------
    def next(self) -> Iteration | None:
        """The next iteration, or None when nothing is queued or running. Sequences whose
        prompts wait on KV blocks that no decode will free are preempted (last admitted
        first) until something runs."""
        for _ in range(2 * (self.running + len(self.waiting)) + 2):
            it = self._pick()
            if it.chunks or len(it.decodes):
                return it
            if not self.running:
                return None
            self._preempt(self._last_admitted())
        # every sequence preempted once and still nothing runs: a bug, not an input
        raise RuntimeError(f"serving scheduler made no progress ({self.running} running, "
                           f"{len(self.waiting)} waiting, {self.free_blocks} free blocks)")

    def _resume(self) -> None:
        """Waiting sequences past their prefill (their cache from a prefill lane or host
        memory) back into the batch, first come first served, while their cache and one
        step's new tokens fit: they decode in this iteration."""
        while self.waiting and self.running < self.limits.max_batch:
            s = self.waiting[0]
            if s.computed < s.target or \
                    -(-(s.computed + self.q) // BLOCK_TOKENS) > self.free_blocks:
                return
            self.waiting.popleft()
            self._swap_in(s)
            self._grow(self._slot(s), s.computed)

    def _pick(self) -> Iteration:
        lim = self.limits
        self._resume()
        if not lim.chunked_prefill and self.waiting:
            it = self._admit(Iteration([], np.empty(0, np.int64)), lim.max_batched_tokens,
                             whole=True)
            if it.chunks:
                return self._close(it)
        dec = self._decodes()
        it = Iteration([], dec)
        if lim.chunked_prefill:
            budget = lim.max_batched_tokens - len(dec) * self.q
            live = np.flatnonzero((self.order >= 0) & (self.comp < self.tgt))
            for k in live[np.argsort(self.order[live])].tolist():  # prompts cut last time
                if budget <= 0:
                    break
                t = min(int(self.tgt[k] - self.comp[k]), budget)
                if not self._grow(k, int(self.comp[k]) + t):
                    break
                it.chunks.append((k, t, int(self.comp[k])))
                budget -= t
            if budget > 0:
                self._admit(it, budget, whole=False)
        return self._close(it)

    def _decodes(self) -> np.ndarray:
        """The decoding slots, each with blocks for its new tokens (preempting the last
        admitted while the cache is short)."""
        while True:
            idx = ((self.order >= 0) & (self.comp >= self.tgt)).nonzero()[0]
            if not len(idx):
                return idx
            ends = self.comp[idx] + self.q
            if (ends <= self.blk[idx] * BLOCK_TOKENS).all():  # the common case: room left
                return idx
            need = -(-ends // BLOCK_TOKENS) - self.blk[idx]
            np.maximum(need, 0, out=need)
            total = int(need.sum())
            if total <= self.free_blocks:
                self.blk[idx] += need
                self.free_blocks -= total
                return idx
            self._preempt(self._last_admitted())

    def _admit(self, it: Iteration, budget: int, whole: bool) -> Iteration:
        """Waiting prompts, first come first served, into ``it`` within ``budget`` tokens."""
        lim = self.limits
        while self.waiting and budget > 0 and self.running < lim.max_batch:
            s = self.waiting[0]
            left = s.target - s.computed
            if left <= 0:  # a decoding sequence: resumed at the start of an iteration
                break
            hit = self._hit(s) if s.computed == 0 else 0
            left -= hit
            t = left if whole else min(left, budget)
            if t > budget and it.chunks:
                break
            blocks = -(-(hit + t) // BLOCK_TOKENS)
            if blocks > self.free_blocks:
                break
            self.waiting.popleft()
            self._swap_in(s)
            if hit:
                s.computed = hit
                s.hit += hit
            k = self._slot(s)
            self._grow(k, s.computed + t)
            it.chunks.append((k, t, s.computed))
            budget -= t
        return it

    def _swap_in(self, s: Seq) -> None:
        """A swapped-out sequence's cache copied back from host memory."""
        if s.swapped:
            self._copy(s.computed)
            self.host_tokens -= s.computed
            s.swapped = False

    def _copy(self, tokens: int) -> None:
        """``tokens`` tokens' KV over the host links (either way), charged to the next
        iteration that runs."""
        dt = tokens * self.offload.s_per_token
        self._swap_s += dt
        self.offload_s += dt
        self.offload_bytes += tokens * self.offload.bytes_per_token

    def _hit(self, s: Seq) -> int:
        """Prompt tokens found in the prefix cache: whole blocks, at least one token left to
        compute (the last one's logits give the first output token)."""
        pc = self.prefix_cache
        if pc is None:
            return 0
        r = s.req
        if pc.hit_rate is not None:
            tokens = int(pc.hit_rate * r.input_tokens)
        elif r.prefix and r.prefix in self.cached:
            tokens = r.prefix_tokens
        else:
            return 0
        return min(tokens, s.target - 1) // BLOCK_TOKENS * BLOCK_TOKENS

    def _close(self, it: Iteration) -> Iteration:
        if it.chunks or len(it.decodes):  # an empty pick is dropped: its copies wait
            it.swap_s, self._swap_s = self._swap_s, 0.0
        it.finishing = sum(1 for k, t, past in it.chunks if past + t >= self.tgt[k])
        if len(it.decodes):
            ctx = self.comp[it.decodes] + self.q
            it.keys = int((ctx if self.window is None else np.minimum(ctx, self.window)).sum())
        return it

    # -- applying ---------------------------------------------------------------------------
    def finish(self, it: Iteration, now: float, counts: np.ndarray | None) -> list[Seq]:
        """Apply ``it`` ending at ``now``: chunks computed, tokens emitted (``counts``: the
        tokens each decoding sequence emits; None: one each); the finished sequences, their
        slots and blocks freed."""
        for k, t, _ in it.chunks:
            self.comp[k] += t
            if self.comp[k] >= self.tgt[k]:  # the prompt's last chunk emits a token
                s = self.seq[k]
                if s.req.prefix and self.prefix_cache is not None:
                    self.cached.add(s.req.prefix)
                if s.first_s < 0:
                    s.first_s = now
                elif self.last[k] >= 0:
                    self.gap[k] = max(self.gap[k], now - self.last[k])
                self.last[k] = now
                self.gen[k] += 1
        d = it.decodes
        if len(d):
            n = 1 if counts is None else counts
            self.comp[d] += n
            self.gen[d] += n
            self.gap[d] = np.maximum(self.gap[d], now - self.last[d])
            self.last[d] = now
        # only this iteration's sequences can have finished
        live = d[self.gen[d] >= self.outl[d]].tolist() if len(d) else []
        live += [k for k, _, _ in it.chunks if self.gen[k] >= self.outl[k]]
        done = []
        for k in live:
            if self.comp[k] < self.tgt[k]:
                continue
            self.gen[k] = self.outl[k]
            s = self._release(k)
            s.done_s = now
            done.append(s)
        if self.prefill_only:
            for k, _, _ in it.chunks:
                if self.order[k] >= 0 and self.comp[k] >= self.tgt[k]:
                    self.handed.append(self._release(k))
        return done
