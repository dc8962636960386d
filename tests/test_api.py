"""The top-level library API (issue 21, item 13): every name resolves lazily, ``dir()`` shows
them, ``import accelsim`` imports no numerical library, every function has complete type hints
and a docstring, and py.typed ships."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import accelsim

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from check_type_hints import missing, public_functions  # noqa: E402


def test_every_exported_name_resolves_and_is_documented():
    assert accelsim.__all__ == sorted(accelsim.__all__)
    for name in accelsim.__all__:
        obj = getattr(accelsim, name)
        assert name in dir(accelsim)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert obj.__doc__ and obj.__doc__.strip(), name


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'quantise'"):
        accelsim.quantise  # noqa: B018


def test_import_accelsim_is_light():
    code = ("import sys, accelsim; heavy = [m for m in ('numpy', 'pandas', 'networkx', "
            "'matplotlib', 'simpy') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True).stdout.strip()
    assert out == "[]"


def test_top_level_functions_have_complete_type_hints():
    bad = {name: missing(fn) for name, fn in public_functions(("accelsim",)) if missing(fn)}
    assert bad == {}


def test_the_api_works_with_shipped_names_and_GBps():
    h100 = accelsim.build_system("h100-sxm")
    g = accelsim.gemm_time(h100, 4096, 4096, 4096, "bf16")
    assert 0 < g.tflops <= h100.peak_flops("bf16") / 1e12
    ring = accelsim.build_topology("ring", 8, link_GBps=50)
    t = accelsim.collective_time(ring, "all-gather", 8 * 10**6, 1.0)
    # (p-1)/p of the payload over the two directions of the ring
    assert t.time_s == pytest.approx(7 / 8 * 8e6 / (2 * 50e9), rel=1e-12)


def test_py_typed_is_in_the_package_data():
    import tomllib

    assert (REPO / "accelsim" / "py.typed").is_file()
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "py.typed" in cfg["tool"]["setuptools"]["package-data"]["accelsim"]
