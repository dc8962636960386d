"""``serve`` reports error bars as ``infer`` does (issue 34 item 8): the whole-request band for
throughput and latency, the prefill band for TTFT and the decode band for TPOT, each the
inference regime of the validated tables for the stream's lengths."""

from __future__ import annotations

import json

from accelsim.arch import build_system
from accelsim.cli import main
from accelsim.engine.decoder import Decoder
from accelsim.engine.uncertainty import Phase, inference_band
from accelsim.workload.hf_config import resolve_model

ARGS = ["serve", "--system", "h100-sxm", "--model", "llama3-8b", "--scheme", "bf16",
        "--rate", "2", "--requests", "20", "--input-tokens", "467", "--output-tokens", "256"]


def test_serve_json_carries_the_inference_bands_of_its_stream(capsys):
    assert main([*ARGS, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    system = build_system("h100-sxm")
    kw = dict(gpus=1, precision="bf16", params=Decoder(resolve_model("llama3-8b"), 2048).n_params)
    request = inference_band(system, phase=Phase.REQUEST, seq=467 + 256, **kw)
    prefill = inference_band(system, phase=Phase.PREFILL, seq=467, **kw)
    decode = inference_band(system, phase=Phase.DECODE, seq=467 + 128, **kw)
    assert (d["error_low_pct"], d["error_high_pct"]) == (request.low_pct, request.high_pct)
    assert d["in_domain"] is request.in_domain is True
    assert (d["time_to_first_token_error_low_pct"], d["time_to_first_token_error_high_pct"]) \
        == (prefill.low_pct, prefill.high_pct)
    assert (d["time_per_output_token_error_low_pct"],
            d["time_per_output_token_error_high_pct"]) == (decode.low_pct, decode.high_pct)
    assert "prefill" in d["time_to_first_token_error_regime"]
    assert "decode" in d["time_per_output_token_error_regime"]


def test_serve_text_prints_the_three_bands_and_a_model_outside_the_domain_says_so(capsys):
    assert main(ARGS) == 0
    out = capsys.readouterr().out
    lines = [ln.strip() for ln in out.splitlines()]
    for w in ("requests", "TTFT", "TPOT"):
        assert any(ln.startswith(f"{w}:") and "error band" in ln for ln in lines), w
    assert main([*ARGS[:4], "gpt2-small", *ARGS[5:], "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["in_domain"] is False and "parameters" in d["domain_note"]
