"""The one mapping from a training recipe (``accelsim train``/``study``:
:data:`accelsim.train.RECIPE_NAMES`) to the engine scheme (``predict``/``llm``/``sweep``:
:data:`accelsim.arch.schemes.SCHEME_NAMES`) that times its step, with the reason where a recipe has
none. Pure data and one lookup; docs/codesign.md prints the table and a test keeps it equal.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.errors import InputError


@dataclass(frozen=True)
class RecipeScheme:
    """A recipe's engine scheme (None: the engine does not model it) and why / what it leaves out."""

    recipe: str
    scheme: str | None
    note: str


#: Every training recipe, mapped or explicitly unmapped (tests/test_recipe_schemes.py checks
#: the keys against the recipe registry and the schemes against the scheme registry).
RECIPE_SCHEMES: dict[str, RecipeScheme] = {m.recipe: m for m in (
    RecipeScheme("fp32", "fp32", "FP32 everywhere"),
    RecipeScheme("fp32-adamw", "fp32", "FP32 everywhere; the optimizer is codesign's --optimizer"),
    RecipeScheme("fp16-amp", "fp16", "FP16 GEMMs with loss scaling (scaling is not priced)"),
    RecipeScheme("bf16-amp", "bf16", "BF16 GEMMs"),
    RecipeScheme("hfp8", "hfp8", "hybrid FP8: 1-4-3 forward, 1-5-2 backward"),
    RecipeScheme("s2fp8", None, "S2FP8's per-tensor shift-and-squeeze statistics are no engine "
                 "scheme"),
    RecipeScheme("fp8-e5m2", "fp8", "FP8 (E5M2 everywhere) GEMMs"),
    RecipeScheme("fp8-e5m2-ls", "fp8", "FP8 (E5M2 everywhere) GEMMs; the fixed loss scale costs "
                 "nothing"),
    RecipeScheme("hif8", "hif8", "HiF8 GEMMs"),
    RecipeScheme("hif8-als", "hif8", "HiF8 GEMMs; adaptive loss scaling is not priced"),
    RecipeScheme("hif8-pts", "hif8", "HiF8 GEMMs; per-tensor scale computation is not priced"),
    RecipeScheme("int4-fp4", None, "the 4-bit radix-4 FP4 / INT4 recipe has no engine scheme"),
    RecipeScheme("fp8-lm", "fp8-lm", "FP8-LM: FP8 GEMMs, FP8 gradients and optimizer states"),
    RecipeScheme("fp8-lm-v8", None, "an FP8-LM ablation of its optimizer-state formats; the "
                 "fp8-lm scheme models the paper's main recipe only"),
    RecipeScheme("fp8-lm-w8", None, "an FP8-LM ablation (FP8 master weights); the fp8-lm scheme "
                 "models the paper's main recipe only"),
    RecipeScheme("mxfp8", "mxfp8", "OCP MXFP8 GEMMs"),
    RecipeScheme("mxfp4", "mxfp4", "OCP MXFP4 GEMMs"),
    RecipeScheme("nvfp4", "nvfp4", "NVFP4 GEMMs"),
    RecipeScheme("deepseek-fp8", None, "DeepSeek-V3's tile-wise (1x128 / 128x128) FP8 scaling "
                 "has no engine scheme"),
)}


def recipe_scheme(recipe: str) -> RecipeScheme:
    """The mapping of ``recipe`` (InputError naming it when it is no known recipe)."""
    try:
        return RECIPE_SCHEMES[recipe]
    except KeyError:
        raise InputError(f"recipe {recipe!r} is not in the recipe-to-scheme table; known "
                         f"recipes: {', '.join(RECIPE_SCHEMES)}") from None


def scheme_for_recipe(recipe: str) -> str:
    """The engine scheme that times ``recipe``'s step; InputError (with the reason) where the
    engine has none."""
    m = recipe_scheme(recipe)
    if m.scheme is None:
        raise InputError(f"recipe {recipe!r} has no engine scheme: {m.note}")
    return m.scheme


def markdown_table() -> str:
    """The mapping as the Markdown table docs/codesign.md carries."""
    lines = ["| recipe (train, study) | engine scheme (predict, llm, sweep, codesign) | note |",
             "|---|---|---|"]
    lines += [f"| `{m.recipe}` | {f'`{m.scheme}`' if m.scheme else 'none'} | {m.note} |"
              for m in RECIPE_SCHEMES.values()]
    return "\n".join(lines) + "\n"
