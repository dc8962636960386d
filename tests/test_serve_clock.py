"""``serve`` runs the stream at the clock its average power allows (issue 34 item 1): the
measured window's average power per GPU never exceeds the chip's limit by default; a light
stream runs at the chip's top clock; ``--clock boost`` (a system whose power table is not
enforced) times every iteration at the preset's fixed clock whatever the power."""

from __future__ import annotations

import pytest

from accelsim.arch import build_system
from accelsim.serving import serve

KW = dict(rate=20.0, requests=120, input_tokens=2000, output_tokens=100, seed=0)


@pytest.fixture(scope="module")
def runs():
    h100 = build_system("h100-sxm")
    return (serve(h100, "llama3-8b", "bf16", **KW).as_dict(),
            serve(h100.with_boost_clock(), "llama3-8b", "bf16", **KW).as_dict(),
            serve(h100, "llama3-8b", "bf16", **{**KW, "rate": 1.0, "requests": 30}).as_dict())


def test_a_heavy_stream_is_held_at_the_limit_and_the_boost_what_if_is_not(runs):
    power, boost, _ = runs
    limit = build_system("h100-sxm").chip.power.power_limit_W
    assert boost["power_W_per_gpu"] > limit  # prefill-heavy at 1830 MHz: over 700 W
    assert boost["clock_MHz"] == pytest.approx(1830)
    assert power["power_W_per_gpu"] <= limit
    # the limiter's granularity (1 MHz) leaves it just under the limit, not far below
    assert power["power_W_per_gpu"] > 0.97 * limit
    assert power["clock_MHz"] < boost["clock_MHz"]
    # a lower clock: the prefills take longer
    assert power["time_to_first_token_s_p50"] > boost["time_to_first_token_s_p50"]


def test_a_light_stream_runs_at_the_top_clock(runs):
    light = runs[2]
    p = build_system("h100-sxm").chip.power
    assert light["power_W_per_gpu"] < p.power_limit_W
    assert light["clock_MHz"] == pytest.approx(p.max_clock_Hz / 1e6)
