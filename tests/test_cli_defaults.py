"""What the decoder front-ends assume when a flag is not given (issue 33, item 1): a model's
sequence length (4096, or its positions when fewer, with a note naming --seq), flash attention
(on; --no-flash-attention off), and the memory verdict (``fits_memory`` in every JSON, a
DOES NOT FIT first line in the text). Each default is checked against the run that states it
explicitly, or against the library with the value given."""

from __future__ import annotations

import json

import pytest

from accelsim.arch import build_system
from accelsim.cli import main
from accelsim.commands.llm import DEFAULT_SEQ
from accelsim.engine import Plan, predict
from accelsim.paths import REPO_ROOT
from accelsim.workload import load_workload
from accelsim.workload.gpt import GptConfig

HF = REPO_ROOT / "tests" / "data" / "hf_configs"
H100 = build_system("h100-sxm")
CAP_GiB = H100.chip.memory_capacity_bytes / 2**30
ONE_GPU = ["--system", "h100-sxm", "--scheme", "bf16", "--dp", "1", "--global-batch", "1"]
DIMS = ["--layers", "4", "--hidden", "256", "--heads", "4", "--seq", "512", "--vocab", "1000"]


def _llm(capsys, *argv) -> tuple[dict, str]:
    assert main(["llm", *ONE_GPU, "--json", *argv]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_config_without_seq_runs_at_4096_and_says_so(capsys):
    positions = json.loads((HF / "qwen2-7b.json").read_text())["max_position_embeddings"]
    assert positions > DEFAULT_SEQ == 4096
    d, err = _llm(capsys, "--model", str(HF / "qwen2-7b.json"))
    assert d["seq"] == 4096
    note = [line for line in err.splitlines() if "sequence length" in line]
    assert len(note) == 1 and "4096" in note[0] and str(positions) in note[0] \
        and "--seq" in note[0]
    explicit, err = _llm(capsys, "--model", str(HF / "qwen2-7b.json"), "--seq", "4096")
    assert explicit == d and "sequence length" not in err


def test_config_with_fewer_positions_runs_at_all_of_them(capsys):
    positions = json.loads((HF / "gpt2.json").read_text())["n_positions"]
    assert positions < DEFAULT_SEQ
    d, err = _llm(capsys, "--model", str(HF / "gpt2.json"))
    assert d["seq"] == positions
    assert f"sequence length {positions}" in err and "fewer than" in err and "--seq" in err


def test_flash_attention_is_the_default_and_can_be_turned_off(capsys):
    default, _ = _llm(capsys, *DIMS)
    on, _ = _llm(capsys, *DIMS, "--flash-attention")
    off, _ = _llm(capsys, *DIMS, "--no-flash-attention")
    assert default == on
    # the library with the value given is what the command ran
    plan = Plan(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1)
    for d, flash in ((on, True), (off, False)):
        gpt = GptConfig(layers=4, hidden=256, heads=4, seq=512, vocab=1000,
                        flash_attention=flash)
        assert d["iteration_time_s"] == predict(gpt, plan, "bf16", H100).iteration_time_s
    # the unfused kernel keeps Korthikanti's 5as/h x sbh bytes of scores per layer (4 layers
    # in flight, b = 1); flash keeps none
    a, s, layers = 4, 512, 4
    assert (off["activations_GiB"] - on["activations_GiB"]) * 2**30 == \
        pytest.approx(layers * 5 * a * s * s, rel=1e-12)
    assert off["iteration_time_s"] > on["iteration_time_s"]


def test_workload_gpt_writes_flash_by_default(tmp_path, capsys):
    flags = ["--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32", "--vocab", "100"]
    for extra, flash in (([], True), (["--no-flash-attention"], False),
                         (["--flash-attention"], True)):
        out = tmp_path / f"g{len(extra)}{flash}.toml"
        assert main(["workload", "gpt", *flags, *extra, "--out", str(out)]) == 0
        assert load_workload(out).transformer.flash_attention is flash
    capsys.readouterr()


def test_llm_json_fits_memory_and_the_first_text_line(capsys):
    small, _ = _llm(capsys, *DIMS)
    assert small["fits_memory"] is True and small["memory_capacity_GiB"] == CAP_GiB
    assert small["memory_GiB_per_gpu"] <= CAP_GiB
    # Qwen2-7B with AdamW on one 80 GiB GPU: 16 B per parameter of states alone (7.6 B)
    big, _ = _llm(capsys, "--model", str(HF / "qwen2-7b.json"), "--seq", "4096")
    assert big["params"] * 16 / 2**30 > CAP_GiB
    assert big["fits_memory"] is False and big["memory_GiB_per_gpu"] > CAP_GiB
    assert main(["llm", *ONE_GPU, "--model", str(HF / "qwen2-7b.json"), "--seq", "4096"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"DOES NOT FIT: {big['memory_GiB_per_gpu']:.1f} GiB per GPU > "
                            f"{CAP_GiB:.4g} GiB")
    assert main(["llm", *ONE_GPU, *DIMS]) == 0
    assert "DOES NOT FIT" not in capsys.readouterr().out


def test_infer_json_fits_memory_and_the_first_text_line(capsys):
    base = ["infer", "--system", "h100-sxm", "--scheme", "bf16", "--batch", "1", "--context",
            "1024"]
    for model, fits in (("llama3-8b", True), ("llama3-70b", False)):
        assert main([*base, "--model", model, "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        # bf16 weights alone: 2 B per parameter (70.6 B do not fit 80 GiB; 8.0 B do)
        assert (d["params"] * 2 / 2**30 < CAP_GiB) is fits
        assert d["fits_memory"] is fits and d["memory_capacity_GiB"] == CAP_GiB
        assert (d["memory_GiB_per_gpu"] <= CAP_GiB) is fits
        assert main([*base, "--model", model]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith("DOES NOT FIT: ") is not fits
        assert any("DOES NOT FIT" in line for line in lines) is not fits


def test_predict_says_does_not_fit_first(capsys):
    argv = ["predict", "--system", "h100-sxm", "--workload", "gpt2-small", "--scheme", "bf16"]
    for batch in ("1", "512"):
        assert main([*argv, "--batch", batch, "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["fits_memory"] is (d["memory_GiB"] <= CAP_GiB)
        assert main([*argv, "--batch", batch]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert first.startswith("DOES NOT FIT: ") is not d["fits_memory"]
    assert d["fits_memory"] is False  # 512 sequences of 1024 tokens: the activations alone
