"""Imports flow one way (STYLE.md): numerics <- arith; arch/workload <- perf/netsim <- dse <- cli;
report takes tables only. simpy only in netsim, matplotlib only in report, networkx only in netsim."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "accelsim"

# room -> rooms (and third-party libraries) it must not import
FORBIDDEN = {
    "numerics": {"arith", "arch", "workload", "perf", "netsim", "dse", "report", "cli", "commands"},
    "arith": {"arch", "workload", "perf", "netsim", "dse", "cli", "commands"},
    "arch": {"perf", "netsim", "dse", "report", "cli", "commands", "arith"},
    "workload": {"perf", "netsim", "dse", "report", "cli", "commands", "arith"},
    "perf": {"netsim", "dse", "report", "cli", "commands"},
    "netsim": {"perf", "dse", "report", "cli", "commands"},
    "dse": {"report", "cli", "commands"},
    "llm": {"report", "cli", "commands"},
    "report": {"cli", "commands"},
    "train": {"arch", "workload", "perf", "netsim", "dse", "report", "cli", "commands"},
}
#: top-level single-job modules every room may use (no accelsim imports of their own)
SHARED_MODULES = {"ring", "paths"}
THIRD_PARTY_HOME = {"simpy": {"netsim"}, "matplotlib": {"report"}, "networkx": {"netsim"},
                    # numba: the compiled casts (numerics) and the FMA-engine K loop (arith)
                    "numba": {"numerics", "arith"}, "ml_dtypes": {"numerics"}}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _room(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


FILES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_flow_one_way(path):
    room = _room(path)
    for name in _imports(path):
        parts = name.split(".")
        if parts[0] == "accelsim" and len(parts) > 1:
            assert parts[1] not in FORBIDDEN.get(room, set()), f"{path.name}: {room} imports {name}"
        home = THIRD_PARTY_HOME.get(parts[0])
        if home is not None:
            assert room in home, f"{path.name}: {parts[0]} imported outside {sorted(home)} ({room})"


def _private_imports(path: Path) -> list[str]:
    """``from accelsim.<room>... import _name`` where <room> is not the file's own room."""
    tree = ast.parse(path.read_text(), filename=str(path))
    room = _room(path)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "accelsim" and len(parts) > 1 and parts[1] != room:
                bad += [f"from {node.module} import {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return bad


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_private_name_crosses_a_room(path):
    """Another room's private name is not API: make it public where it is defined."""
    assert _private_imports(path) == []


@pytest.mark.parametrize("name", sorted(SHARED_MODULES))
def test_shared_modules_import_no_room(name):
    assert not any(n.startswith("accelsim.") for n in _imports(PKG / f"{name}.py"))
