"""The published online-serving rows asked through ``accelsim serve`` (issue 35), printed beside
the closed form the published validation uses (``scripts/llm_published_validate.py``: a
Little's-law batch). Nothing is fitted and nothing is written: the validated numbers stay the
validation script's; this shows what the request-level simulation says of the same rows.

Every ``[[case]]`` of ``accelsim/data/llm_published.toml`` with a ``qps`` (TensorRT-LLM 0.14's
online serving table: 500 requests, Poisson at the stated rate, fixed lengths) is run with the
same stream (500 requests, seed 0) on the case's system and tensor-parallel plan, every engine
setting at its default (no host overhead); mean TTFT and mean ITL (the mean time per output
token) are compared with the printed means.

    python scripts/serve_published_check.py
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from accelsim.arch import build_system  # noqa: E402
from accelsim.serving import serve  # noqa: E402

DATA = ROOT / "accelsim" / "data" / "llm_published.toml"
REQUESTS, SEED = 500, 0
METRIC = {"time_to_first_token": "time_to_first_token_s_mean",
          "inter_token_latency": "time_per_output_token_s_mean"}


def main() -> int:
    cases = [c for c in tomllib.loads(DATA.read_text())["case"]
             if c.get("qps") and c.get("metric") in METRIC and c.get("arch")]
    runs: dict[tuple, dict] = {}
    print(f"{'case':<52} {'published':>10} {'serve':>10} {'error %':>8}")
    for c in cases:
        key = (c["system"], c["arch"], c.get("tp") or 1, c["qps"], c["input_tokens"],
               c["output_tokens"], c["scheme"])
        if key not in runs:
            runs[key] = serve(build_system(c["system"]), c["arch"], c["scheme"],
                              rate=float(c["qps"]), requests=REQUESTS,
                              input_tokens=c["input_tokens"], output_tokens=c["output_tokens"],
                              tp=c.get("tp") or 1, seed=SEED).as_dict()
        got = runs[key][METRIC[c["metric"]]]
        print(f"{c['id']:<52} {c['value']:>10.4g} {got:>10.4g} "
              f"{100 * (got / c['value'] - 1):>+8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
