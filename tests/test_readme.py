"""The README's quick start is a contract: CI runs its test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _quick_start_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", text, re.S)
    assert block, "README.md must open with a fenced block holding the two quick-start commands"
    return [ln.strip() for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]


def test_readme_opens_with_two_commands():
    cmds = _quick_start_commands()
    assert len(cmds) == 2, cmds
    assert "accelsim figures" in cmds[0]
    assert "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert _quick_start_commands()[1] in ci
