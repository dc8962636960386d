"""Write ``accelsim/data/serve/conversation.csv``: 1,000 (input, output) token counts shaped like
ShareGPT conversations, for ``accelsim serve --lengths conversation``.

The published statistics: Kwon et al., "Efficient Memory Management for Large Language Model
Serving with PagedAttention" (vLLM), SOSP 2023, Fig. 11: ShareGPT mean input 161.31 and mean
output 337.99 tokens (the text: "8.4x longer input prompts and 5.8x longer outputs on average
than the Alpaca dataset", whose means are 19.31 and 58.45: 161.31 / 19.31 = 8.35, 337.99 /
58.45 = 5.78). The shape is an assumption: log-normal lengths (sigma 1.0 for inputs, 0.8 for
outputs; the figure shows long right tails), cut at 1,024 input and 2,048 total tokens as vLLM's
``benchmark_serving.py`` filters ShareGPT, then scaled so the sample means are the published
ones (to the token).

    python scripts/make_conversation_lengths.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "accelsim" / "data" / "serve" / "conversation.csv"
MEAN_IN, MEAN_OUT = 161.31, 337.99
SIGMA_IN, SIGMA_OUT = 1.0, 0.8
ROWS, SEED = 1000, 0


def lengths(mean: float, sigma: float, cap, rng: np.random.Generator) -> np.ndarray:
    """Log-normal lengths cut to [1, cap], scaled (bisection) so their mean is ``mean``."""
    x = rng.lognormal(0.0, sigma, ROWS)

    def cut(scale: float) -> np.ndarray:
        return np.clip(np.rint(x * scale), 1, cap).astype(int)

    lo, hi = 0.0, 100.0 * mean  # cap: a number or one per row
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cut(mid).mean() < mean else (lo, mid)
    return cut(hi)


def main() -> int:
    rng = np.random.default_rng(SEED)
    ins = lengths(MEAN_IN, SIGMA_IN, 1024, rng)
    outs = lengths(MEAN_OUT, SIGMA_OUT, 2048 - ins, rng)
    lines = [f"# {l}" for l in (
        "ShareGPT-like (input, output) token counts: scripts/make_conversation_lengths.py",
        "means from Kwon et al. (vLLM), SOSP 2023, Fig. 11: input 161.31, output 337.99 tokens",
        f"this sample: input mean {ins.mean():.2f}, output mean {outs.mean():.2f}; "
        "log-normal shape assumed")]
    lines.append("input_tokens,output_tokens")
    lines += [f"{a},{b}" for a, b in zip(ins.tolist(), outs.tolist())]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT}: input mean {ins.mean():.2f}, output mean {outs.mean():.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
