"""scripts/mutation_test.py stays usable: every mutant still applies to today's code (each
original text found exactly once), and its exit status says when a run is not clean."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import mutation_test as mt  # noqa: E402


@pytest.mark.parametrize("m", mt.MUTANTS, ids=lambda m: f"{m.group}:{m.why}")
def test_every_mutant_applies_once(m):
    text = (REPO / m.path).read_text(encoding="utf-8")
    assert text.count(m.old) == 1, f"stale mutant: update it to today's {m.path}"
    assert m.old != m.new and all((REPO / t).is_file() for t in m.tests)


def _run(monkeypatch, outcomes):
    """main() over fake mutants whose runs give ``outcomes`` (status, equivalent) in order."""
    mutants = tuple(mt.Mutant("g", "x.py", f"old{i}", "new", ("t.py",), "why", equivalent=eq)
                    for i, (_, eq) in enumerate(outcomes))
    status = {m: s for m, (s, _) in zip(mutants, outcomes)}
    monkeypatch.setattr(mt, "MUTANTS", mutants)
    monkeypatch.setattr(mt, "_copy_repo", lambda dst: None)
    monkeypatch.setattr(mt, "run_mutant", lambda m, work, timeout_s: (status[m], 0.0, ""))
    return mt.main([])


@pytest.mark.parametrize("outcomes,code", [
    ([("killed", ""), ("survived", "computes the same")], 0),
    ([("killed", ""), ("survived", "")], 1),
    ([("killed", ""), ("error", "")], 1),  # stale: the original text is not found
    ([("timeout", "")], 1),
])
def test_exit_status_fails_on_survivors_and_stale_mutants(monkeypatch, capsys, outcomes, code):
    assert _run(monkeypatch, outcomes) == code


def test_a_stale_mutant_is_an_error(tmp_path):
    m = mt.Mutant("g", "a.py", "not there", "x", ("t.py",), "why")
    (tmp_path / "a.py").write_text("y = 1\n")
    assert mt.run_mutant(m, tmp_path, 10.0)[0] == "error"
    assert (tmp_path / "a.py").read_text() == "y = 1\n"
