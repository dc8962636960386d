"""The one recipe -> engine scheme table: every training recipe is mapped to a real scheme or
explicitly unmapped with a reason, and docs/codesign.md carries the table as the code has it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.arch.recipe_schemes import (RECIPE_SCHEMES, markdown_table, recipe_scheme,
                                          scheme_for_recipe)
from accelsim.arch.schemes import SCHEME_NAMES
from accelsim.errors import InputError
from accelsim.train import RECIPE_NAMES


def test_every_recipe_is_mapped_or_explicitly_unmapped():
    assert tuple(RECIPE_SCHEMES) == RECIPE_NAMES  # same names, same order as --help lists
    for m in RECIPE_SCHEMES.values():
        assert m.scheme is None or m.scheme in SCHEME_NAMES, m
        assert m.note.strip(), m  # a reason for every unmapped one, a note for the rest


@pytest.mark.parametrize("recipe,scheme", [("fp16-amp", "fp16"), ("bf16-amp", "bf16"),
                                           ("fp8-e5m2", "fp8"), ("hfp8", "hfp8"),
                                           ("hif8", "hif8"), ("mxfp8", "mxfp8"),
                                           ("mxfp4", "mxfp4"), ("nvfp4", "nvfp4"),
                                           ("fp8-lm", "fp8-lm"), ("fp32", "fp32")])
def test_the_issue_s_pairs(recipe, scheme):
    assert scheme_for_recipe(recipe) == scheme


def test_errors_name_the_recipe_and_the_reason():
    with pytest.raises(InputError, match="recipe 'fp9' is not in the recipe-to-scheme table"):
        recipe_scheme("fp9")
    with pytest.raises(InputError, match="recipe 's2fp8' has no engine scheme: S2FP8"):
        scheme_for_recipe("s2fp8")


def test_docs_carry_the_table():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "codesign.md").read_text()
    assert markdown_table() in doc, "docs/codesign.md: paste accelsim.arch.recipe_schemes.markdown_table()"
