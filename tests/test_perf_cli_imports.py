"""`accelsim gemm` loads only what the GEMM model needs (deliverable 7: under 0.2 s with Python
start-up; the time itself is measured by benchmarks/bench_perf.py, not asserted here)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import io, json, sys, contextlib
from accelsim.cli import main
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    code = main(["gemm", "--system", "arch_configs/h100-sxm.toml", "--m", "4096", "--n", "4096",
                 "--k", "4096", "--scheme", "bf16", "--json"])
print(json.dumps({"code": code, "out": json.loads(buf.getvalue()),
                  "modules": sorted(m for m in sys.modules)}))
"""


def test_gemm_command_imports_no_other_command_and_no_heavy_library():
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                       text=True, check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    d = json.loads(r.stdout)
    assert d["code"] == 0 and d["out"]["bound"] in ("compute", "memory", "latency", "L2", "smem")
    mods = set(d["modules"])
    for heavy in ("pandas", "matplotlib", "networkx", "simpy", "tqdm", "scipy", "dask",
                  "accelsim.llm", "accelsim.train", "accelsim.netsim", "accelsim.dse",
                  "accelsim.numerics", "accelsim.perf.layer_model", "accelsim.commands.predict"):
        assert heavy not in mods, heavy


def test_help_still_lists_every_command():
    from accelsim import commands
    from accelsim.cli import build_parser
    import pkgutil

    names = {i.name.replace("_", "-") for i in pkgutil.iter_modules(commands.__path__)
             if not i.name.startswith("_")}
    text = build_parser().format_help()
    for name in names:
        assert name in text
    only = build_parser("gemm").format_help()
    assert "gemm" in only and "predict" not in only


def test_perf_package_exports_resolve_lazily():
    import accelsim.perf as perf

    for name in perf.__all__:
        assert getattr(perf, name) is not None
    try:
        perf.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("missing attribute did not raise")
