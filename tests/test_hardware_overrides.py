"""Hardware as users describe it (issue 34 item 7): ``--memory-capacity-GiB``,
``--memory-bandwidth-GBps`` and ``--frequency-GHz`` override a preset through the typed
``System.with_*`` methods, so a variant needs no new file; each override moves the answer the
way the physics says."""

from __future__ import annotations

import json

import pytest

from accelsim.arch import load_system
from accelsim.cli import main
from accelsim.errors import InputError
from accelsim.paths import resolve_input


def _json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_96_GB_500_W_h100_is_the_preset_file_edited(tmp_path):
    """The overrides give exactly the System a user gets by editing a copy of the file (the
    reference): a 96 GB, 500 W H100 SXM."""
    text = resolve_input("h100-sxm", "system").read_text()
    edited = text.replace("memory_capacity_GiB = 80 ", "memory_capacity_GiB = 89.4069671630859375 ")
    edited = edited.replace("power_limit_W = 700 ", "power_limit_W = 500 ")
    assert edited.count("89.40") == 1 and edited.count("= 500 ") == 1
    f = tmp_path / "h100-96gb.toml"
    f.write_text(edited)
    base = load_system(resolve_input("h100-sxm", "system"))
    variant = base.with_memory_capacity(96e9).with_power_limit(500.0)
    assert variant == load_system(f)
    assert variant.chip.memory_capacity_bytes == 96_000_000_000


def test_capacity_is_any_decimal_rounded_to_bytes():
    chip = load_system(resolve_input("h100-sxm", "system")).chip
    assert chip.with_memory_capacity(93.7 * 2**30).memory_capacity_bytes == round(93.7 * 2**30)
    assert isinstance(chip.with_memory_capacity(1e9 + 0.4).memory_capacity_bytes, int)


def test_library_refuses_out_of_range_values():
    s = load_system(resolve_input("h100-sxm", "system"))
    for call in (lambda: s.with_memory_capacity(-1.0), lambda: s.with_memory_bandwidth(0.0),
                 lambda: s.with_frequency(float("nan")), lambda: s.with_frequency(2.5e9)):
        with pytest.raises(InputError):
            call()


def test_more_bandwidth_makes_a_memory_bound_decode_faster(capsys):
    """One decode step at batch 1 streams the weights from HBM: 1.5x the bandwidth is faster,
    by at most 1.5x (launches and the rest do not scale)."""
    argv = ["infer", "--system", "h100-sxm", "--model", "llama3-8b", "--scheme", "bf16",
            "--batch", "1", "--context", "2048"]
    base = _json(capsys, argv)["decode_step_s"]
    fast = _json(capsys, argv + ["--memory-bandwidth-GBps", str(3350 * 1.5)])["decode_step_s"]
    assert base / 1.5 <= fast < base * 0.8


def test_infer_fits_the_model_in_the_new_capacity(capsys):
    """Llama-3-70B in bf16 (~131 GiB of weights) does not fit an 80 GiB H100; it fits the same
    chip given 141 GiB, and the JSON reports the capacity used."""
    argv = ["infer", "--system", "h100-sxm", "--model", "llama3-70b", "--scheme", "bf16",
            "--batch", "1", "--context", "1024"]
    d80 = _json(capsys, argv)
    d141 = _json(capsys, argv + ["--memory-capacity-GiB", "141"])
    assert not d80["fits_memory"] and d141["fits_memory"]
    assert d141["memory_capacity_GiB"] == pytest.approx(141)
    assert d141["memory_GiB_per_gpu"] == pytest.approx(d80["memory_GiB_per_gpu"])


def test_a_lower_clock_slows_a_compute_bound_gemm_not_more_than_the_clock(capsys):
    argv = ["gemm", "--system", "h100-sxm", "--m", "8192", "--n", "8192", "--k", "8192"]
    base = _json(capsys, argv)
    slow = _json(capsys, argv + ["--frequency-GHz", "1.22"])  # 2/3 of 1.83
    assert slow["clock_MHz"] == pytest.approx(1220)
    assert base["time_s"] < slow["time_s"] <= base["time_s"] * 1.5 * (1 + 1e-9)
    assert slow["peak_tflops"] == pytest.approx(base["peak_tflops"] * 2 / 3)


def test_settings_lines_say_what_was_overridden(capsys):
    assert main(["llm", "--system", "dgx-h100", "--model", "gpt2-small", "--scheme", "bf16",
                 "--gpus", "8", "--global-batch", "8", "--memory-capacity-GiB", "96",
                 "--memory-bandwidth-GBps", "4000"]) == 0
    out = capsys.readouterr().out
    settings = next(ln for ln in out.splitlines() if "settings:" in ln)
    assert ("overridden: memory capacity 96 GiB (--memory-capacity-GiB), memory bandwidth "
            "4000 GB/s (--memory-bandwidth-GBps)") in settings
    assert main(["gemm", "--system", "h100-sxm", "--m", "64", "--n", "64", "--k", "64",
                 "--frequency-GHz", "1.5"]) == 0
    assert "h100-sxm with clock 1.5 GHz (--frequency-GHz)" in capsys.readouterr().err
