"""Hugging Face ``config.json`` files -> :class:`~accelsim.workload.transformer.TransformerConfig`,
and :func:`resolve_model` (a preset name or a config path).

Families (``model_type``): llama, mistral, mixtral, qwen2, gpt2, gpt_neox, deepseek_v2,
deepseek_v3, read as ``transformers`` builds the model (its ``configuration_*`` defaults for
absent optional keys). Loading is strict: every key is either one the family maps to the
model's shape (:data:`SHAPE_KEYS`), or one listed as not changing any shape or FLOP
(:data:`IGNORED_KEYS`, each with its reason); any other key is a :class:`ConfigError` naming
the file and the key, since it may change the math. Duplicate keys, non-JSON, wrong types and
unsupported values (an activation we do not model, sliding windows per layer) are errors too.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from accelsim.arch.config import ABSENT, ConfigError
from accelsim.bounds import MAX_DIM, MAX_MODEL_LAYERS
from accelsim.errors import TOO_DEEP, InputError
from accelsim.workload.transformer import (PRESETS, Mla, MlpKind, Moe, NormKind, PositionKind,
                                           TransformerConfig)

#: Layer counts (at most :data:`accelsim.bounds.MAX_MODEL_LAYERS`; other integers are sizes, at
#: most a tensor dimension)
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_nextn_predict_layers")
#: Keys ignored in every family: they change values, training or bookkeeping, not a tensor shape
#: or a FLOP count.
IGNORED_KEYS: dict[str, str] = {
    "architectures": "class names (model_type selects the family)",
    "auto_map": "remote-code class names",
    "_name_or_path": "where the file came from",
    "transformers_version": "library version",
    "torch_dtype": "storage precision: the scheme chooses precisions",
    "dtype": "storage precision: the scheme chooses precisions",
    "quantization_config": "checkpoint quantization: the scheme chooses precisions",
    "bos_token_id": "token id", "eos_token_id": "token id", "pad_token_id": "token id",
    "use_cache": "inference flag", "return_dict": "API flag",
    "output_attentions": "API flag", "output_hidden_states": "API flag",
    "initializer_range": "initialisation", "pretraining_tp": "numerics of the TP split",
    "classifier_dropout": "dropout of a classification head (not trained here)",
    "rms_norm_eps": "numerics", "layer_norm_eps": "numerics", "layer_norm_epsilon": "numerics",
    "rope_theta": "RoPE base: values, not shapes", "rotary_emb_base": "RoPE base",
    "rope_scaling": "RoPE frequency scaling: values, not shapes",
    "rope_interleave": "RoPE element order",
    "rope_parameters": "RoPE base and scaling (transformers v5): values, not shapes",
}
#: Further ignored keys per family.
_FAMILY_IGNORED: dict[str, dict[str, str]] = {
    "mixtral": {"router_aux_loss_coef": "training loss", "output_router_logits": "API flag",
                "router_jitter_noise": "training noise on router logits"},
    "gpt2": {"n_ctx": "legacy alias of n_positions", "scale_attn_weights": "a scalar factor",
             "scale_attn_by_inverse_layer_idx": "a scalar factor",
             "reorder_and_upcast_attn": "numerics", "summary_type": "sequence-summary head",
             "summary_use_proj": "sequence-summary head (double-heads model only)",
             "summary_activation": "sequence-summary head",
             "summary_proj_to_labels": "sequence-summary head",
             "summary_first_dropout": "dropout", "task_specific_params": "generation defaults",
             "embd_pdrop": "embedding dropout: its mask is counted at resid_pdrop (Megatron-LM "
                           "drops the embedding at --hidden-dropout)"},
    "deepseek": {"ep_size": "deployment hint", "routed_scaling_factor": "routing weight scale",
                 "scoring_func": "routing score function", "norm_topk_prob": "routing weights",
                 "aux_loss_alpha": "training loss", "seq_aux": "training loss",
                 "head_dim": "derived (MLA uses its own head dims)",
                 "qk_head_dim": "derived: qk_nope_head_dim + qk_rope_head_dim"},
}
_FAMILY_IGNORED["deepseek_v2"] = _FAMILY_IGNORED["deepseek_v3"] = _FAMILY_IGNORED.pop("deepseek")

_LLAMA = {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "intermediate_size", "vocab_size", "max_position_embeddings", "head_dim", "hidden_act",
          "tie_word_embeddings", "layer_types", "attention_dropout"}
#: Keys each family maps to the model's shape (the rest of the math).
SHAPE_KEYS: dict[str, frozenset[str]] = {
    "llama": frozenset(_LLAMA | {"attention_bias", "mlp_bias"}),
    "mistral": frozenset(_LLAMA | {"sliding_window"}),
    "mixtral": frozenset(_LLAMA | {"sliding_window", "num_local_experts",
                                   "num_experts_per_tok"}),
    "qwen2": frozenset(_LLAMA | {"sliding_window", "use_sliding_window", "max_window_layers"}),
    "gpt2": frozenset({"n_embd", "n_layer", "n_head", "n_positions", "n_inner", "vocab_size",
                       "activation_function", "tie_word_embeddings", "add_cross_attention",
                       "resid_pdrop", "attn_pdrop"}),
    "gpt_neox": frozenset({"hidden_size", "num_hidden_layers", "num_attention_heads",
                           "intermediate_size", "vocab_size", "max_position_embeddings",
                           "hidden_act", "rotary_pct", "partial_rotary_factor",
                           "use_parallel_residual", "attention_bias", "tie_word_embeddings",
                           "hidden_dropout", "attention_dropout"}),
    "deepseek_v2": frozenset(_LLAMA - {"head_dim"} | {
        "attention_bias", "moe_intermediate_size", "n_routed_experts", "n_shared_experts",
        "num_experts_per_tok", "first_k_dense_replace", "moe_layer_freq", "topk_method",
        "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
        "n_group", "topk_group"}),
}
SHAPE_KEYS["deepseek_v3"] = SHAPE_KEYS["deepseek_v2"] | {"num_nextn_predict_layers"}
FAMILIES = tuple(SHAPE_KEYS)

_SILU = {"silu", "swish"}
_GELU = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "gelu_accurate"}
_REQUIRED = object()


class _Reader:
    """One config dict: typed reads that remember which keys were used."""

    def __init__(self, file: str, data: dict, family: str):
        self.file, self.data, self.family, self.used = file, data, family, set()

    def _get(self, key: str, default: Any) -> Any:
        self.used.add(key)
        if key in self.data:
            return self.data[key]
        if default is _REQUIRED:
            raise ConfigError(self.file, key, ABSENT,
                              f"missing (model_type {self.family!r} needs it)")
        return default

    def integer(self, key: str, default: Any = _REQUIRED, *, minimum: int = 1,
                nullable: bool = False) -> int | None:
        """An integer >= ``minimum`` and at most a layer dimension's MAX_DIM (a layer count: at
        most MAX_MODEL_LAYERS)."""
        v = self._get(key, default)
        if v is None and nullable:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            null = " or null" if nullable else ""
            raise ConfigError(self.file, key, v, f"must be an integer >= {minimum}{null}")
        # the bounds a flag (--hidden, --layers) and the Python API keep too
        maximum = MAX_MODEL_LAYERS if key in _LAYER_KEYS else MAX_DIM
        if v > maximum:
            raise ConfigError(self.file, key, v, f"must be at most {maximum:,}")
        return v

    def flag(self, key: str, default: Any = _REQUIRED) -> bool:
        v = self._get(key, default)
        if not isinstance(v, bool):
            raise ConfigError(self.file, key, v, "must be true or false")
        return v

    def number(self, key: str, default: Any) -> float:
        v = self._get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
            raise ConfigError(self.file, key, v, "must be a number in (0, 1]")
        return float(v)

    def dropout(self, key: str, default: float) -> float:
        """A dropout probability in [0, 1) (absent: ``default``, the family's
        ``transformers`` default)."""
        v = self._get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
            raise ConfigError(self.file, key, v, "must be a dropout probability in [0, 1)")
        return float(v)

    def choice(self, key: str, default: Any, mapping: dict[str, Any]) -> Any:
        v = self._get(key, default)
        if not isinstance(v, str) or v not in mapping:
            raise ConfigError(self.file, key, v,
                              f"must be one of {', '.join(sorted(mapping))} for model_type "
                              f"{self.family!r}")
        return mapping[v]

    def leftovers(self) -> None:
        ignored = IGNORED_KEYS.keys() | _FAMILY_IGNORED.get(self.family, {}).keys()
        for key in self.data:
            if key == "model_type" or key in self.used or key in ignored:
                continue
            if key in SHAPE_KEYS[self.family]:   # a shape key this family's reader skipped
                continue
            raise ConfigError(self.file, key, self.data[key],
                              f"unknown key for model_type {self.family!r}: it may change the "
                              f"model's shape, so it is refused (known keys: docs/workloads.md)")


def _act(r: _Reader, key: str, default: str) -> MlpKind:
    return r.choice(key, default, {**{a: MlpKind.SWIGLU for a in _SILU},
                                   **{a: MlpKind.GEGLU for a in _GELU}})


def _llama_family(r: _Reader, name: str) -> TransformerConfig:
    f = r.family
    heads = r.integer("num_attention_heads")
    kw: dict[str, Any] = dict(
        name=name, layers=r.integer("num_hidden_layers"),
        hidden=r.integer("hidden_size"), heads=heads,
        kv_heads=r.integer("num_key_value_heads", heads, nullable=True) or heads,
        head_dim=r.integer("head_dim", None, nullable=True), ffn_size=r.integer("intermediate_size"),
        vocab=r.integer("vocab_size"), seq=r.integer("max_position_embeddings"),
        mlp=_act(r, "hidden_act", "silu"), norm=NormKind.RMSNORM,
        positions=PositionKind.ROTARY, tied_embeddings=r.flag("tie_word_embeddings", False),
        # the attention probabilities' dropout (LlamaConfig & co.: default 0.0); the
        # residual branches have none in these families
        attention_dropout=r.dropout("attention_dropout", 0.0))
    types = r._get("layer_types", None)
    if types is not None and (not isinstance(types, list) or len(types) != kw["layers"]
                              or any(t != "full_attention" for t in types)):
        raise ConfigError(r.file, "layer_types", types,
                          f"must list \"full_attention\" for each of the {kw['layers']} layers "
                          f"(per-layer attention types are not modelled)")
    if f == "llama":
        kw["qkv_bias"] = kw["out_bias"] = r.flag("attention_bias", False)
        kw["mlp_bias"] = r.flag("mlp_bias", False)
    if f in ("mistral", "mixtral"):
        kw["sliding_window"] = r.integer("sliding_window", None, nullable=True)
    if f == "qwen2":
        kw["qkv_bias"] = True   # Qwen2Attention: q/k/v with bias, o without
        if r.flag("use_sliding_window", False):
            raise ConfigError(r.file, "use_sliding_window", True,
                              "per-layer sliding windows (max_window_layers) are not modelled")
        r.used |= {"sliding_window", "max_window_layers"}   # inert without use_sliding_window
    if f == "mixtral":
        ffn = kw["ffn_size"]
        kw["moe"] = Moe(n_experts=r.integer("num_local_experts"),
                        top_k=r.integer("num_experts_per_tok"), expert_ffn_size=ffn)
    return TransformerConfig(**kw)


def _gpt2(r: _Reader, name: str) -> TransformerConfig:
    if r.flag("add_cross_attention", False):
        raise ConfigError(r.file, "add_cross_attention", True,
                          "cross-attention (encoder-decoder GPT-2) is not modelled")
    h = r.integer("n_embd")
    return TransformerConfig(
        name=name, layers=r.integer("n_layer"), hidden=h,
        heads=r.integer("n_head"),
        vocab=r.integer("vocab_size"), seq=r.integer("n_positions"),
        ffn_size=r.integer("n_inner", None, nullable=True) or 4 * h,
        mlp=r.choice("activation_function", "gelu_new", {a: MlpKind.GELU for a in _GELU}),
        tied_embeddings=r.flag("tie_word_embeddings", True),
        qkv_bias=True, out_bias=True, mlp_bias=True,
        # GPT2Config's defaults: 0.1 each
        hidden_dropout=r.dropout("resid_pdrop", 0.1), attention_dropout=r.dropout("attn_pdrop", 0.1))


def _gpt_neox(r: _Reader, name: str) -> TransformerConfig:
    bias = r.flag("attention_bias", True)
    key = "partial_rotary_factor" if "partial_rotary_factor" in r.data else "rotary_pct"
    return TransformerConfig(
        name=name, layers=r.integer("num_hidden_layers"),
        hidden=r.integer("hidden_size"),
        heads=r.integer("num_attention_heads"), vocab=r.integer("vocab_size"),
        seq=r.integer("max_position_embeddings"), ffn_size=r.integer("intermediate_size"),
        mlp=r.choice("hidden_act", "gelu", {a: MlpKind.GELU for a in _GELU}),
        positions=PositionKind.ROTARY, rotary_fraction=r.number(key, 0.25),
        parallel_residual=r.flag("use_parallel_residual", True),
        tied_embeddings=r.flag("tie_word_embeddings", False),
        qkv_bias=bias, out_bias=bias, mlp_bias=True,
        # GPTNeoXConfig's defaults: 0.0 each
        hidden_dropout=r.dropout("hidden_dropout", 0.0),
        attention_dropout=r.dropout("attention_dropout", 0.0))


def _deepseek(r: _Reader, name: str) -> TransformerConfig:
    heads = r.integer("num_attention_heads")
    kv = r.integer("num_key_value_heads", heads, nullable=True)
    if kv not in (None, heads):
        raise ConfigError(r.file, "num_key_value_heads", kv,
                          f"must equal num_attention_heads ({heads}): MLA has no KV groups")
    bias = r.flag("attention_bias", False)
    mla = Mla(q_lora_rank=r.integer("q_lora_rank", _REQUIRED, nullable=True) or 0,
              kv_lora_rank=r.integer("kv_lora_rank"), qk_nope_head_dim=r.integer("qk_nope_head_dim"),
              qk_rope_head_dim=r.integer("qk_rope_head_dim"), v_head_dim=r.integer("v_head_dim"))
    experts = r.integer("n_routed_experts", None, nullable=True)
    moe = None
    if experts is not None:
        moe = Moe(n_experts=experts, top_k=r.integer("num_experts_per_tok"),
                  expert_ffn_size=r.integer("moe_intermediate_size"),
                  n_shared_experts=r.integer("n_shared_experts", 0, minimum=0, nullable=True) or 0,
                  first_dense_layers=r.integer("first_k_dense_replace", 0, minimum=0),
                  layer_freq=r.integer("moe_layer_freq", 1),
                  router_bias=r.choice("topk_method", "greedy" if r.family == "deepseek_v2"
                                       else "noaux_tc", {"greedy": False,
                                                         "group_limited_greedy": False,
                                                         "noaux_tc": True}),
                  expert_groups=r.integer("n_group", 1, nullable=True) or 1,
                  groups_per_token=r.integer("topk_group", 0, minimum=0, nullable=True) or 0)
    mtp = r.integer("num_nextn_predict_layers", 0, minimum=0) if r.family == "deepseek_v3" else 0
    return TransformerConfig(
        name=name, layers=r.integer("num_hidden_layers"),
        hidden=r.integer("hidden_size"), heads=heads,
        ffn_size=r.integer("intermediate_size"), vocab=r.integer("vocab_size"),
        seq=r.integer("max_position_embeddings"), mlp=_act(r, "hidden_act", "silu"),
        norm=NormKind.RMSNORM, positions=PositionKind.ROTARY,
        tied_embeddings=r.flag("tie_word_embeddings", False), qkv_bias=bias, out_bias=bias,
        moe=moe, mla=mla, mtp_layers=mtp if moe is not None else 0,
        attention_dropout=r.dropout("attention_dropout", 0.0))


_BUILDERS = {"llama": _llama_family, "mistral": _llama_family, "mixtral": _llama_family,
             "qwen2": _llama_family, "gpt2": _gpt2, "gpt_neox": _gpt_neox,
             "deepseek_v2": _deepseek, "deepseek_v3": _deepseek}


def _no_duplicates(file: str):
    def hook(pairs):
        out: dict = {}
        for k, v in pairs:
            if k in out:
                raise ConfigError(file, k, v, "duplicate key")
            out[k] = v
        return out
    return hook


def load_hf_config(path: str | Path) -> TransformerConfig:
    """Read a Hugging Face ``config.json`` (or a folder holding one). The model is named after
    the file (``llama3-8b.json`` -> ``llama3-8b``; ``.../Meta-Llama-3-8B/config.json`` ->
    ``Meta-Llama-3-8B``)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    file = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(file, "<file>", ABSENT, f"cannot read: {exc}") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates(file))
    except json.JSONDecodeError as exc:
        raise ConfigError(file, "<json>", ABSENT,
                          f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                          ) from None
    except RecursionError:  # json decodes nested arrays and objects recursively
        raise ConfigError(file, "<json>", ABSENT, TOO_DEEP) from None
    if not isinstance(data, dict):
        raise ConfigError(file, "<root>", type(data).__name__, "must be a JSON object")
    family = data.get("model_type", ABSENT)
    if not isinstance(family, str) or family not in _BUILDERS:
        raise ConfigError(file, "model_type", family,
                          f"must be one of {', '.join(FAMILIES)}")
    name = p.parent.name if p.stem == "config" and p.parent.name else p.stem
    r = _Reader(file, data, family)
    try:
        cfg = _BUILDERS[family](r, name)
    except ConfigError:
        raise
    except ValueError as exc:   # the dataclass refused a combination (heads vs kv_heads, ...)
        raise ConfigError(file, "<model>", ABSENT, str(exc)) from None
    r.leftovers()
    return replace(cfg, source=file)


def resolve_model(spec: str | Path) -> TransformerConfig:
    """A shipped preset (:data:`accelsim.workload.transformer.PRESETS`) by name, or a Hugging
    Face ``config.json`` (file or folder) by path."""
    s = str(spec)
    if s in PRESETS:
        return PRESETS[s]
    p = Path(s)
    if p.is_file() or (p.is_dir() and (p / "config.json").is_file()):
        return load_hf_config(p)
    if p.exists():
        raise InputError(f"model {s!r}: a folder without a config.json")
    raise InputError(f"unknown model {s!r}: not a preset ({', '.join(PRESETS)}) nor an "
                     f"existing config.json file or folder")
