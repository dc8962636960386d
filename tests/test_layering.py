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
    "report": {"cli", "commands"},
    "train": {"arch", "workload", "perf", "netsim", "dse", "report", "cli", "commands"},
}
THIRD_PARTY_HOME = {"simpy": {"netsim"}, "matplotlib": {"report"}, "networkx": {"netsim"}}


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
