"""How a training plan's decoder layers fall on its pipeline stages and model chunks: the even
split, and Megatron-core's two uneven ones (megatron/core/transformer/transformer_block.py
``get_num_layers_to_build`` and transformer_config.py ``__post_init__``, NVIDIA/Megatron-LM
commit d98e8a64):

* ``num_layers_in_first_pipeline_stage`` / ``..._last_...`` (``--decoder-first-pipeline-num-
  layers``, ``--decoder-last-pipeline-num-layers``): the first (last) stage holds the given
  count, the other stages split the rest evenly; with ``v`` chunks per stage each chunk of
  the first (last) stage holds ``first / v`` (``last / v``), every middle chunk
  ``middle / v``; every count divisible, as Megatron requires;
* ``account_for_embedding_in_pipeline_split`` / ``..._loss_...``: the embedding (the output
  layer and loss) counts as one layer, so ``L + e + l`` slots split evenly, ``(L + e + l) /
  (p v)`` per chunk, and the first chunk of the first stage (the last chunk of the last)
  builds one layer fewer.

The two kinds are exclusive (Megatron refuses both at once). Here a first (last) count of 0
is a stage holding only the embedding (the output layer and loss), as Megatron's
``pipeline_model_parallel_layout`` writes ``E|...`` (``...|L``); Megatron's two flags above
need at least one layer there. Layers are numbered chunk-major, as Megatron numbers them:
chunk 0 of every stage, then chunk 1, ...
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.errors import InputError


@dataclass(frozen=True)
class StageSplit:
    """An uneven pipeline split (all defaults: the even split). ``first`` / ``last``: the
    decoder layers of the first / last stage (None: not set); ``embedding`` / ``loss``: the
    embedding / the output layer counted as one layer of the split."""

    first: int | None = None
    last: int | None = None
    embedding: bool = False
    loss: bool = False

    @property
    def even(self) -> bool:
        """No uneven rule given: layers split evenly (the default)."""
        return self == StageSplit()

    def describe(self) -> str:
        """The split as the ``llm`` flags that give it."""
        parts = [f"--first-stage-layers {self.first}" if self.first is not None else "",
                 f"--last-stage-layers {self.last}" if self.last is not None else "",
                 "--account-for-embedding" if self.embedding else "",
                 "--account-for-loss" if self.loss else ""]
        return " ".join(p for p in parts if p) or "even"

    def chunk_sizes(self, layers: int, pp: int, v: int) -> tuple[tuple[int, ...], ...]:
        """``[stage][chunk]`` -> decoder layers, after :meth:`check`."""
        self.check(layers, pp, v)
        if self.first is not None or self.last is not None:
            first, per, last = self._rows(layers, pp)
            return tuple((n // v,) * v for n in [first] + [per] * (pp - 2) + [last])
        if self.embedding or self.loss:
            per = (layers + self.embedding + self.loss) // (pp * v)
            out = [[per] * v for _ in range(pp)]
            out[0][0] -= self.embedding
            out[-1][-1] -= self.loss
            return tuple(tuple(r) for r in out)
        if v > 1:
            return ((layers // (pp * v),) * v,) * pp
        # accelsim's even split of a remainder: the first stages one layer more
        return tuple((layers // pp + (1 if s < layers % pp else 0),) for s in range(pp))

    def _rows(self, layers: int, pp: int) -> tuple[int, int, int]:
        """(first stage's, each middle stage's, last stage's) layers of a first/last split."""
        middle = _middle(self, pp)
        rest = layers - _given(self.first) - _given(self.last)
        per = rest // middle if middle else 0
        return (per if self.first is None else self.first, per,
                per if self.last is None else self.last)

    def check(self, layers: int, pp: int, v: int) -> None:
        """Raise InputError when ``layers`` cannot be split this way over ``pp`` stages of
        ``v`` chunks (a stage or chunk with no work, counts that do not add up)."""
        if self.first is not None or self.last is not None:
            self._check_first_last(layers, pp, v)
        elif self.embedding or self.loss:
            slots = layers + self.embedding + self.loss
            what = " + ".join(["layers"] + ["embedding"] * self.embedding
                              + ["loss"] * self.loss)
            if slots % (pp * v):
                raise InputError(f"{what} = {slots} not divisible by pp x interleave = {pp} x "
                                 f"{v} (--account-for-embedding / --account-for-loss split "
                                 "them evenly)")
        elif v > 1 and layers % (pp * v):
            raise InputError(f"layers {layers} not divisible by pp x interleave = {pp} x {v}")

    def _check_first_last(self, layers: int, pp: int, v: int) -> None:
        middle = _middle(self, pp)
        rest = layers - _given(self.first) - _given(self.last)
        given = (f"--first-stage-layers {self.first}" if self.first is not None else "",
                 f"--last-stage-layers {self.last}" if self.last is not None else "")
        given_s = " and ".join(g for g in given if g)
        if rest < 0:
            raise InputError(f"{given_s}: more than the model's {layers} layers")
        if (middle == 0 and rest) or (middle and rest % middle):
            raise InputError(f"{given_s}: the other {rest} of {layers} layers do not split "
                             f"evenly over the {middle} other stages of pp {pp}")
        if middle and rest == 0:
            raise InputError(f"{given_s} leave no layers for the {middle} other stages "
                             f"(a stage with no work)")
        for name, n in (("first", self.first), ("last", self.last)):
            if n is not None and n % v:
                raise InputError(f"--{name}-stage-layers {n} not divisible by interleave {v} "
                                 "(each chunk of the stage holds an equal share)")
            if n == 0 and v > 1:
                raise InputError(f"--{name}-stage-layers 0 with interleave {v}: its other "
                                 "chunks would hold no work")
        if middle and (rest // middle) % v:
            raise InputError(f"{rest // middle} layers per middle stage not divisible by "
                             f"interleave {v}")


def _given(n: int | None) -> int:
    return 0 if n is None else n


def _middle(split: StageSplit, pp: int) -> int:
    """Stages the first/last split leaves to share the rest evenly."""
    return pp - (split.first is not None) - (split.last is not None)
