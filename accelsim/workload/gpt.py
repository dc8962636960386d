"""GPT-style decoder-only Transformers generated from a few numbers (layers, hidden, FFN, heads,
sequence, vocabulary), with exact parameter counts and the per-layer GEMMs of Megatron-LM's
tensor-parallel split (Shoeybi et al. 2019; Narayanan et al. SC'21, eq. 3 for the FLOPs).

Architecture (GPT-2 / GPT-3 / Megatron GPT): learned position embeddings, pre-LayerNorm blocks
with biased QKV, projection, FC1 (GeLU) and FC2 linears, a final LayerNorm, and an LM head that
is the word-embedding matrix itself when ``tied_embeddings`` (no parameters of its own).

``causal`` masks the future; a kernel that keeps the score matrix (``flash_attention=False``)
still computes all ``s x s`` scores, a flash-style kernel (``flash_attention=True``) keeps no
score matrix and, when causal, skips the masked half of the score and P.V work.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.bounds import MAX_DIM, MAX_MODEL_LAYERS
from accelsim.errors import InputError, check_int
from accelsim.workload.model import Layer, Workload


def check_dropout(what: str, p: object) -> None:
    """A dropout probability: a number in [0, 1); an InputError naming ``what`` otherwise."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise InputError(f"{what} must be a dropout probability in [0, 1), got {p!r}")


@dataclass(frozen=True)
class GptConfig:
    """A GPT model. ``ffn`` 0 means 4 x hidden; ``positions`` 0 means ``seq``.
    ``hidden_dropout`` / ``attention_dropout``: the training dropout probabilities on the
    embedding and residual branches / on the attention probabilities (0: no dropout, so no
    mask is kept); default 0.1, Megatron-LM's ``--hidden-dropout`` / ``--attention-dropout``
    defaults and GPT-2's ``resid_pdrop`` / ``attn_pdrop``."""

    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    ffn: int = 0
    positions: int = 0
    tied_embeddings: bool = True
    causal: bool = True
    flash_attention: bool = False
    name: str = "gpt"
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1

    def __post_init__(self) -> None:
        check_int("GptConfig.layers", self.layers, 1, MAX_MODEL_LAYERS)
        for f in ("hidden", "heads", "seq", "vocab"):
            check_int(f"GptConfig.{f}", getattr(self, f), 1, MAX_DIM)
        for f in ("ffn", "positions"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InputError(f"GptConfig.{f} must be an integer >= 0 (0: default), got {v!r}")
        for f in ("hidden_dropout", "attention_dropout"):
            check_dropout(f"GptConfig.{f}", getattr(self, f))
        if self.hidden % self.heads:
            raise InputError(f"GptConfig: hidden {self.hidden} is not a multiple of heads "
                             f"{self.heads}")
        if self.positions and self.positions < self.seq:
            raise InputError(f"GptConfig: positions {self.positions} < seq {self.seq}")
        # every dimension of the generated layers must load back (a workload's limit)
        for what, v in (("3 x hidden (the fused QKV projection)", 3 * self.hidden),
                        ("ffn", self.ffn_size), ("seq", self.seq), ("vocab", self.vocab),
                        ("positions", self.n_positions)):
            if v > MAX_DIM:
                raise InputError(f"GptConfig: {what} = {v:,} is over the {MAX_DIM:,} a layer "
                                 "dimension may have")

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def ffn_size(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def n_positions(self) -> int:
        return self.positions or self.seq

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def params_per_layer(self) -> int:
        """QKV (3h^2 + 3h), projection (h^2 + h), FC1 (hF + F), FC2 (Fh + h), two LayerNorms (4h)."""
        h, f = self.hidden, self.ffn_size
        return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h

    @property
    def embedding_params(self) -> int:
        return (self.vocab + self.n_positions) * self.hidden

    @property
    def head_params(self) -> int:
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    @property
    def n_params(self) -> int:
        """Exact trainable parameters (PyTorch ``numel``), final LayerNorm included."""
        return (self.embedding_params + self.layers * self.params_per_layer
                + 2 * self.hidden + self.head_params)

    @property
    def attention_fraction(self) -> float:
        """Fraction of the s x s score and P.V work a kernel performs: 1/2 + 1/(2s) for a causal
        flash kernel (the lower triangle with its diagonal), 1 otherwise."""
        if self.causal and self.flash_attention:
            return (self.seq + 1) / (2 * self.seq)
        return 1.0

    def model_flops(self, batch: int) -> float:
        """Forward + backward model FLOPs of ``batch`` sequences, counted from the GEMMs
        (no recomputation): 3 x forward, forward = 2 x MACs of every GEMM below."""
        h, f, s, a = self.hidden, self.ffn_size, self.seq, self.heads
        t = batch * s
        lin = t * (3 * h * h + h * h + 2 * h * f)  # QKV, projection, FC1, FC2 MACs
        att = batch * a * 2 * s * s * self.head_dim * self.attention_fraction
        head = t * h * self.vocab
        return 3 * 2 * (self.layers * (lin + att) + head)

    # ---- the explicit layer list ---------------------------------------------------------
    def workload(self) -> Workload:
        """The model as an explicit :class:`~accelsim.workload.Workload` for the per-layer
        pipeline. The tied LM head is a parameter-free ``matmul`` with the embedding matrix
        (its "wgrad" is the embedding's gradient, counted once, in the embedding)."""
        h, f, s, a, d = self.hidden, self.ffn_size, self.seq, self.heads, self.head_dim
        L: list[Layer] = [
            Layer(name="wte", kind="embedding", vocab=self.vocab, dim=h, tokens=s,
                  input_grad=False),
            Layer(name="wpe", kind="embedding", vocab=self.n_positions, dim=h, tokens=s),
            Layer(name="embed.add", kind="add", shape=(s, h)),
        ]
        for i in range(self.layers):
            p = f"h.{i}"
            L += [
                Layer(name=f"{p}.ln_1", kind="layernorm", shape=(s, h)),
                Layer(name=f"{p}.attn.qkv", kind="linear", in_features=h, out_features=3 * h,
                      tokens=s, bias=True),
                # scaled dot-product attention as one op (what an ONNX import of SDPA gives):
                # the stack's attention kernel times it, causal mask and flash choice included
                Layer(name=f"{p}.attn.sdpa", kind="attention", heads=a, kv_heads=a,
                      head_dim=d, tokens=s, causal=self.causal,
                      flash_attention=self.flash_attention),
                Layer(name=f"{p}.attn.proj", kind="linear", in_features=h, out_features=h,
                      tokens=s, bias=True),
                Layer(name=f"{p}.add_1", kind="add", shape=(s, h)),
                Layer(name=f"{p}.ln_2", kind="layernorm", shape=(s, h)),
                Layer(name=f"{p}.mlp.fc1", kind="linear", in_features=h, out_features=f,
                      tokens=s, bias=True),
                Layer(name=f"{p}.mlp.gelu", kind="gelu", shape=(s, f)),
                Layer(name=f"{p}.mlp.fc2", kind="linear", in_features=f, out_features=h,
                      tokens=s, bias=True),
                Layer(name=f"{p}.add_2", kind="add", shape=(s, h)),
            ]
        L.append(Layer(name="ln_f", kind="layernorm", shape=(s, h)))
        if self.tied_embeddings:
            L.append(Layer(name="lm_head", kind="matmul", m=s, n=self.vocab, k=h, count=1))
        else:
            L.append(Layer(name="lm_head", kind="linear", in_features=h, out_features=self.vocab,
                           tokens=s, bias=False))
        L.append(Layer(name="loss.softmax", kind="softmax", shape=(s, self.vocab)))
        flags = ", ".join(x for x, on in (("tied embeddings", self.tied_embeddings),
                                         ("causal", self.causal),
                                         ("flash attention", self.flash_attention)) if on)
        return Workload(
            name=self.name,
            layers=tuple(L),
            description=(f"GPT L={self.layers} h={self.hidden} A={self.heads} F={f} s={s} "
                         f"V={self.vocab} ({flags or 'no flags'})"),
            source="accelsim.workload.gpt (generated)",
            published_params=self.n_params,
            transformer=self,
        )


#: Presets. GPT-2 small: Radford et al. 2019 / HuggingFace ``gpt2`` (124,439,808 parameters,
#: tied). GPT-3 175B: Brown et al. 2020, Table 2.1 (96 layers, d_model 12288, 96 heads, d_head
#: 128, context 2048; BPE vocabulary 50257 as GPT-2).
PRESETS = {
    "gpt2-small": GptConfig(layers=12, hidden=768, heads=12, seq=1024, vocab=50257,
                            name="gpt2-small"),
    "gpt3-175b": GptConfig(layers=96, hidden=12288, heads=96, seq=2048, vocab=50257,
                           name="gpt3-175b"),
}


def narayanan_params(layers: int, hidden: int, seq: int, vocab: int) -> float:
    """Parameter count of Narayanan et al. SC'21, section 5.1 (an independent closed form):
    P = 12 l h^2 (1 + 13/(12 h) + (V + s)/(12 l h))."""
    l, h = layers, hidden
    return 12 * l * h * h * (1 + 13 / (12 * h) + (vocab + seq) / (12 * l * h))


def narayanan_flops(batch: int, layers: int, hidden: int, seq: int, vocab: int) -> float:
    """FLOPs per iteration with full activation recomputation, Narayanan et al. SC'21 eq. (3):
    F = 96 B s l h^2 (1 + s/(6 h) + V/(16 l h))."""
    B, s, l, h, V = batch, seq, layers, hidden, vocab
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def narayanan_model_flops(batch: int, layers: int, hidden: int, seq: int, vocab: int) -> float:
    """The same count without recomputation (three passes of the layers, the head's 6 B s h V
    unchanged): F = 72 B s l h^2 (1 + s/(6 h) + V/(12 l h)), full (non-causal) attention --
    the FLOPs behind FP8-LM Table 5's TFLOPS and MFU (its BF16 rows imply 8.94e13, 1.69e14 and
    2.206e15 FLOPs per sample for GPT-7B/13B/175B; this gives 8.83e13, 1.68e14, 2.204e15)."""
    B, s, l, h, V = batch, seq, layers, hidden, vocab
    return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


#: the fields of :class:`GptConfig` a generated workload file records (``[workload.transformer]``)
TRANSFORMER_KEYS = ("layers", "hidden", "heads", "seq", "vocab", "ffn", "positions",
                    "tied_embeddings", "causal", "flash_attention")


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def _layer_keys(layer: Layer) -> dict:
    k = layer.kind
    if k == "linear":
        return dict(in_features=layer.in_features, out_features=layer.out_features,
                    tokens=layer.tokens, bias=layer.bias)
    if k == "matmul":
        return dict(m=layer.m, n=layer.n, k=layer.k, count=layer.count)
    if k == "embedding":
        return dict(vocab=layer.vocab, dim=layer.dim, tokens=layer.tokens)
    if k == "attention":
        return dict(heads=layer.heads, kv_heads=layer.kv_heads, head_dim=layer.head_dim,
                    tokens=layer.tokens, causal=layer.causal,
                    flash_attention=layer.flash_attention)
    return dict(shape=list(layer.shape))


def workload_toml(cfg: GptConfig) -> str:
    """The generated model as a ``workloads/*.toml`` text that :func:`load_workload` reads back
    to the same layers (one explicit ``[[layer]]`` table per layer)."""
    wl = cfg.workload()
    out = [f"# GENERATED by accelsim.workload.gpt ({wl.description}); "
           f"parameters {cfg.n_params:,}", "", "[workload]"]
    meta = dict(name=wl.name, description=wl.description, source=wl.source,
                published_params=cfg.n_params)
    out += [f"{k} = {_fmt(v)}" for k, v in meta.items()]
    out += ["", "[workload.transformer]"]
    out += [f"{k} = {_fmt(getattr(cfg, k))}" for k in TRANSFORMER_KEYS]
    for layer in wl.layers:
        out += ["", "[[layer]]", f"name = {_fmt(layer.name)}", f"kind = {_fmt(layer.kind)}"]
        out += [f"{k} = {_fmt(v)}" for k, v in _layer_keys(layer).items()]
    return "\n".join(out) + "\n"
