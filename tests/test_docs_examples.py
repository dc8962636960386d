"""Every ```python block of README.md and docs/*.md runs as written (issue 21, item 13), in an
empty folder, each block on its own; and the API reference is current with the docstrings."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks():
    for path in DOCS:
        text = path.read_text()
        for i, m in enumerate(FENCE.finditer(text)):
            line = text[:m.start()].count("\n") + 1
            yield pytest.param(path, m.group(1), id=f"{path.name}:{line}")


BLOCKS = list(_blocks())


def test_the_docs_have_python_examples():
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("path,code", BLOCKS)
def test_python_block_runs(path, code, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # shipped names must resolve from any folder
    exec(compile(code, f"{path.name} block", "exec"), {"__name__": "__docs__"})


_API_NAME = re.compile(r"^### (?:class )?`([\w.]+)", re.M)


def test_api_reference_lists_todays_public_names():
    """docs/api.md (scripts/build_api_docs.py, pdoc) documents exactly today's public names; a
    new, renamed or removed name means: rerun the script. (``--check`` also compares the text.)"""
    pytest.importorskip("pdoc")
    sys.path.insert(0, str(REPO / "scripts"))
    import build_api_docs

    fresh = set(_API_NAME.findall(build_api_docs.render()))
    committed = set(_API_NAME.findall((REPO / "docs" / "api.md").read_text()))
    assert "accelsim.quantize" in fresh
    assert fresh == committed, ("rerun python scripts/build_api_docs.py: "
                                f"new {sorted(fresh - committed)}, gone {sorted(committed - fresh)}")
