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
    t = accelsim.collective_time(ring, "all-gather", 8 * 10**6, bytes_per_elem=1.0)
    # (p-1)/p of the payload over the two directions of the ring
    assert t.time_s == pytest.approx(7 / 8 * 8e6 / (2 * 50e9), rel=1e-12)


def test_py_typed_is_in_the_package_data():
    import tomllib

    assert (REPO / "accelsim" / "py.typed").is_file()
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "py.typed" in cfg["tool"]["setuptools"]["package-data"]["accelsim"]


INFER_CASES = [  # (CLI flags, library call): the same question asked both ways
    (["--system", "h100-sxm", "--model", "llama3-8b", "--scheme", "bf16", "--batch", "4",
      "--prompt", "256", "--output-tokens", "8", "--context", "1024"],
     lambda: accelsim.infer(accelsim.build_system("h100-sxm"), "llama3-8b", "bf16", 4,
                            prompt=256, output_tokens=8, context=1024)),
    (["--system", "dgx-h100", "--model", "mixtral-8x7b", "--scheme", "fp8", "--batch", "8",
      "--context", "2048", "--tp", "8", "--ep", "8", "--kv-cache", "fp8",
      "--memory-reserve", "3.5"],
     lambda: accelsim.infer(accelsim.build_system("dgx-h100"), "mixtral-8x7b", "fp8", 8,
                            context=2048, tp=8, ep=8, kv_cache="fp8", memory_reserve_GiB=3.5)),
    (["--system", "h100-sxm", "--model", "llama3-8b", "--scheme", "bf16", "--batch", "8",
      "--prompt", "2048", "--context", "2048", "--power-limit-W", "350"],
     lambda: accelsim.infer(accelsim.build_system("h100-sxm").with_power_limit(350)
                            .with_power_model(), "llama3-8b", "bf16", 8, prompt=2048,
                            context=2048)),
]


@pytest.mark.parametrize("argv,call", INFER_CASES, ids=["request", "moe-tp8", "power-limit"])
def test_infer_gives_the_numbers_of_accelsim_infer(argv, call, capsys):
    """``accelsim.infer`` and ``accelsim infer --json`` are one computation: every key the CLI
    prints, bit for bit (JSON round-trips a float exactly)."""
    import json

    from accelsim.cli import main

    assert main(["infer", *argv, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    # the error bar the CLI adds (accelsim.engine.uncertainty; tests/test_error_bands.py)
    band = {k: cli.pop(k) for k in ("error_low_pct", "error_high_pct", "error_regime",
                                    "in_domain", "domain_note")}
    assert band["error_low_pct"] <= band["error_high_pct"]
    d = call().as_dict()
    assert cli == json.loads(json.dumps(d))
    assert cli["fits_memory"] is True and cli["memory_capacity_GiB"] == 80
    assert cli["decode_step_s"] > 0


@pytest.mark.parametrize("kw,msg", [
    (dict(model="llama9"), "unknown model 'llama9'"),
    (dict(scheme="fp7"), "unknown scheme 'fp7'"),
    (dict(batch=0), r"batch must be an integer in \[1, 2,147,483,647\], got 0"),
    (dict(batch=2.5), r"batch must be an integer in \[1, 2,147,483,647\], got 2.5"),
    (dict(context=None), "give a prompt length"),
    (dict(output_tokens=8), "output tokens need a prompt"),
    (dict(tp=3), "heads 32 not divisible by tp 3"),
    (dict(tp=2), "tp 2 must divide the 1 GPUs of a node"),
    (dict(pp=2), "h100-sxm: one GPU; tp x pp = 2 needs a node file"),
    (dict(ep=2), "ep 2 must be 1 or tp"),
    (dict(kv_cache="int4"), "kv dtype must be one of"),
    (dict(memory_reserve_GiB=-1.0), r"memory_reserve_GiB must be a finite number in \[0, 1024\]"),
    (dict(system="h100-sxm"), "system must be a System"),
])
def test_infer_refuses_bad_arguments_by_name(kw, msg):
    from accelsim.errors import InputError

    args = dict(system=accelsim.build_system("h100-sxm"), model="llama3-8b", scheme="bf16",
                batch=1, context=64) | kw
    with pytest.raises(InputError, match=msg):
        accelsim.infer(args.pop("system"), args.pop("model"), args.pop("scheme"),
                       args.pop("batch"), **args)
