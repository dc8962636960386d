"""Imports flow one way (the room picture in the README): numerics <- arith; arch/workload <-
perf/netsim <- engine <- dse <- llm <- cli; report takes tables only; no import cycle, at module
or function level. simpy only in netsim and serving, matplotlib only in report, networkx only
in netsim."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "accelsim"

# room -> rooms (and third-party libraries) it must not import
FORBIDDEN = {
    "numerics": {"arith", "arch", "workload", "perf", "netsim", "engine", "dse", "llm", "report",
                 "cli", "commands"},
    "arith": {"arch", "workload", "perf", "netsim", "engine", "dse", "llm", "cli", "commands"},
    "arch": {"perf", "netsim", "engine", "dse", "llm", "report", "cli", "commands", "arith"},
    "workload": {"perf", "netsim", "engine", "dse", "llm", "report", "cli", "commands", "arith"},
    "perf": {"netsim", "engine", "dse", "llm", "report", "cli", "commands"},
    "netsim": {"perf", "engine", "dse", "llm", "report", "cli", "commands"},
    "engine": {"dse", "llm", "report", "cli", "commands"},
    "dse": {"llm", "report", "cli", "commands"},
    "llm": {"report", "cli", "commands"},
    "chakra": {"dse", "llm", "report", "cli", "commands"},
    "serving": {"report", "cli", "commands"},
    "report": {"cli", "commands"},
    "train": {"arch", "workload", "perf", "netsim", "engine", "dse", "llm", "report", "cli",
              "commands"},
}
#: top-level single-job modules every room may use (they import no room, only each other)
SHARED_MODULES = {"ring", "paths", "errors", "bounds"}
# simpy: the fabric's flows (netsim) and the request-level serving simulation (serving)
THIRD_PARTY_HOME = {"simpy": {"netsim", "serving"}, "matplotlib": {"report"},
                    "networkx": {"netsim"},
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
    shared = {f"accelsim.{m}" for m in SHARED_MODULES}
    assert not any(n.startswith("accelsim.") and n not in shared
                   for n in _imports(PKG / f"{name}.py"))


def test_report_takes_tables_not_files():
    """Report makes figures and Markdown from tables; reading files (CSV, Parquet, a calibration
    left in a folder) happens at the edge, in the commands."""
    readers = ("read_csv", "read_parquet", "read_text", "read_bytes", "open")
    for path in sorted((PKG / "report").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                assert name not in readers, f"{path.name}:{node.lineno} reads a file ({name})"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def _import_graph() -> dict[str, set[str]]:
    """accelsim module -> the accelsim modules it imports, at module level or inside a function
    (``from pkg import sub`` counts as importing ``pkg.sub``; relative imports resolved). An
    import of a module's own ancestor package is not an edge (the package is initialized by
    then)."""
    graph: dict[str, set[str]] = {}
    for path in FILES:
        mod = _module_name(path)
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package[:len(package) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base.split(".")[0] == "accelsim":
                    deps.add(base)
                    deps.update(f"{base}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.split(".")[0] == "accelsim")
        graph[mod] = deps
    return {m: {d for d in ds if d in graph and d != m and not m.startswith(d + ".")}
            for m, ds in graph.items()}


#: Import cycles still being removed, each by exactly one pair of modules (none left: the
#: one-engine rewrite removed the explorer <-> training-step circle).
KNOWN_CYCLE_EDGES: set[tuple[str, str]] = set()


def test_no_import_cycles():
    """A cycle (module or function level) is two rooms that should be one, or a seam in the
    wrong place: strongly connected components of the import graph must be single modules."""
    graph = _import_graph()
    for a, b in KNOWN_CYCLE_EDGES:
        graph[a].discard(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_import_graph_sees_function_level_imports(tmp_path, monkeypatch):
    """The check above can fail: a function-level import that closes a loop is found."""
    pkg = tmp_path / "accelsim"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from accelsim.b import g\n")
    (pkg / "b.py").write_text("def g():\n    from accelsim import a\n    return a\n")
    monkeypatch.setitem(globals(), "PKG", pkg)
    monkeypatch.setitem(globals(), "FILES", sorted(pkg.rglob("*.py")))
    graph = _import_graph()
    assert graph["accelsim.a"] == {"accelsim.b"} and graph["accelsim.b"] == {"accelsim.a"}


def test_front_ends_hold_no_time_arithmetic():
    """The one-graph issue's rule: in commands/, dse/ and llm/ no count of bytes, FLOPs or MACs
    is divided by a bandwidth or a peak -- that arithmetic is the engine's (a second copy of a
    time formula in a front-end drifts from the engine's)."""
    import ast
    import re

    from accelsim.paths import REPO_ROOT

    left = re.compile(r"bytes|flops|macs")
    right = re.compile(r"bps|bandwidth|peak|flops_per|tflops|gbps")
    hits = []
    for room in ("commands", "dse", "llm"):
        for f in sorted((REPO_ROOT / "accelsim" / room).rglob("*.py")):
            for n in ast.walk(ast.parse(f.read_text())):
                if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) \
                        and left.search(ast.unparse(n.left).lower()) \
                        and right.search(ast.unparse(n.right).lower()):
                    hits.append(f"{f.relative_to(REPO_ROOT)}:{n.lineno}: {ast.unparse(n)}")
    assert not hits, "\n".join(hits)


def test_fitted_numbers_live_in_one_place():
    """The one-graph issue's calibration rule: every fitted efficiency, floor and reserve is
    written once, in its owner (perf.gemm's FITTED and stream efficiency, the stacks, the HFP8
    study's calibrated setup, the presets' network efficiency); the same number typed as a
    code constant in another module would be a second model. Figures (report/) hold no physics
    and are left out (a 0.15 axis padding is not the HFP8 overlap). Every GPU preset that
    states a network efficiency states the one llm_fit.py fitted (dgx-a100's)."""
    import dataclasses

    from accelsim.arch import build_system
    from accelsim.dse.hfp8_study import PAPER_SETUP
    from accelsim.engine.stack import (EAGER_ELEMENTWISE_FLOOR_US, EAGER_GEMM_FLOOR_US,
                                       MEGATRON)
    from accelsim.paths import REPO_ROOT
    from accelsim.perf.gemm import FITTED, STREAM_EFFICIENCY

    fitted = {getattr(FITTED, f.name): f"FITTED.{f.name}" for f in dataclasses.fields(FITTED)
              if isinstance(getattr(FITTED, f.name), float)
              and getattr(FITTED, f.name) not in (0.0, 1.0)}
    net = build_system(REPO_ROOT / "arch_configs" / "dgx-a100.toml").network_efficiency
    fitted.update({STREAM_EFFICIENCY: "STREAM_EFFICIENCY",
                   MEGATRON.elementwise_efficiency: "MEGATRON.elementwise_efficiency",
                   MEGATRON.memory_reserve_GiB: "MEGATRON.memory_reserve_GiB",
                   EAGER_GEMM_FLOOR_US: "EAGER_GEMM_FLOOR_US",
                   EAGER_ELEMENTWISE_FLOOR_US: "EAGER_ELEMENTWISE_FLOOR_US",
                   PAPER_SETUP.overlap: "PAPER_SETUP.overlap",
                   PAPER_SETUP.per_tensor_overhead_s: "PAPER_SETUP.per_tensor_overhead_s",
                   PAPER_SETUP.memory_efficiency: "PAPER_SETUP.memory_efficiency",
                   net: "the presets' network_efficiency"})
    assert len(fitted) >= 10
    owners = {"perf/gemm.py", "engine/stack.py", "dse/hfp8_study.py"}
    root = REPO_ROOT / "accelsim"
    hits = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).as_posix()
        if rel in owners or rel.startswith("report/"):
            continue
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.Constant) and isinstance(n.value, float) and n.value in fitted:
                hits.append(f"accelsim/{rel}:{n.lineno}: {n.value} is {fitted[n.value]}")
    assert not hits, "\n".join(hits)
    for toml in sorted((REPO_ROOT / "arch_configs").glob("*.toml")):
        s = build_system(toml)
        assert s.network_efficiency in (1.0, net), (toml.name, s.network_efficiency)
