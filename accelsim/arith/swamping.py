"""Swamping study: relative error of long dot products vs K for narrow and chunked accumulators.

Reproduces the effect behind IBM's chunk-based accumulation (Sun et al., NeurIPS 2019, sec. 4
and Fig. 3; Wang et al., NeurIPS 2018): with a 10-bit accumulator, once the running sum is
2^11 times larger than a product the product is lost ("swamped"), so error grows with K;
adding chunks of 64 into a second accumulator keeps both sums short. Every engine here sees
the same operands (A in e4m3fn, B in e5m2, i.e. the 1-4-3 x 1-5-2 pairing), so the curves
differ only in the accumulation. Tables only; plots live in accelsim.report.swamping.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from accelsim.numerics import quantize

from .datapath import choose_path
from .engine import EngineConfig, get_engine
from .gemm import dot, exact_sums
from .kloop import k_loop

A_FORMAT, B_FORMAT = "e4m3fn", "e5m2"
DISTRIBUTIONS = ("positive", "zero-mean")
K_VALUES = tuple(2**i for i in range(6, 17))  # 64 .. 65536
CHUNKS = tuple(2**i for i in range(3, 11))  # 8 .. 1024


def study_engines() -> dict[str, EngineConfig]:
    """The accumulators compared (label -> engine), all on the same operand formats."""
    common = dict(a_format=A_FORMAT, b_format=B_FORMAT, out_format="fp32")
    return {
        "dlfloat16 sequential": get_engine("hfp8", chunk=None, **common),
        "HFP8 chunked (64)": get_engine("hfp8", **common),
        "fp32 sequential": get_engine("fp32-fma", **common),
        "H100 fast_accum (no promotion)": get_engine("h100-fp8", fast_accum=True, **common),
        "H100 promotion every 128": get_engine("h100-fp8", **common),
    }


def sample_operands(rng: np.random.Generator, rows: int, K: int, distribution: str):
    """rows x K operand pairs: |N(0,1)| ("positive") or N(0,1) ("zero-mean"), quantized (RNE)."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution={distribution!r} is not one of {', '.join(DISTRIBUTIONS)}")
    a = rng.standard_normal((rows, K))
    b = rng.standard_normal((rows, K))
    if distribution == "positive":
        a, b = np.abs(a), np.abs(b)
    return quantize(a, A_FORMAT, saturate=True), quantize(b, B_FORMAT, saturate=True)


def prefix_results(a, b, engine: EngineConfig, checkpoints) -> dict[int, np.ndarray]:
    """Row-wise engine dots of every prefix a[:, :K], b[:, :K] for K in ``checkpoints``, in one
    pass over K (a prefix's result is the state the engine would finish with after K products:
    the inner sum, promoted once more when the engine promotes and a tail is pending)."""
    cps = sorted(set(int(k) for k in checkpoints))
    if engine.block_width is None or engine.split_k != 1:
        raise ValueError("prefix_results needs a stepped engine with split_k=1")
    W = engine.block_width
    if any(k % W for k in cps):
        raise ValueError(f"checkpoints must be multiples of block_width={W}")
    A = np.asarray(a, float)[:, :cps[-1]]
    B = np.asarray(b, float)[:, :cps[-1]]
    path = choose_path(engine, A, B, paired=True)
    out: dict[int, np.ndarray] = {}
    wanted = set(cps)

    def record(k_end, inner, outer, promoted):
        if k_end not in wanted:
            return
        if engine.chunk is None:
            r = inner
        elif promoted:
            r = outer
        else:  # the tail promotion the engine would do if K ended here
            r = path.promote(outer.copy(), inner)
        out[k_end] = r[:, 0].astype(np.float64)

    with np.errstate(invalid="ignore", over="ignore"):
        k_loop(path, (slice(0, A.shape[0]), slice(0, 1)), cps[-1], engine.chunk, on_step=record)
    return out


def _exact_prefixes(a, b, checkpoints) -> dict[int, np.ndarray]:
    """float64 round-to-odd value of each exact prefix sum (the exact engine before output)."""
    exact = get_engine("exact", a_format=A_FORMAT, b_format=B_FORMAT, out_format="fp32")
    return {K: exact_sums(a[:, :K], b[:, :K], exact, paired=True)[:, 0] for K in checkpoints}


def _abs_prefixes(a, b, checkpoints) -> dict[int, np.ndarray]:
    """sum_k |a_k b_k| of each prefix (the error normalizer; float64 is plenty for a scale)."""
    c = np.cumsum(np.abs(a * b), axis=1)
    return {K: c[:, K - 1] for K in checkpoints}


def _rel_err(got, exact, scale):
    """|result - exact| / sum|a_k b_k|: the relative error for positive data, and for zero-mean
    data an error that a near-zero exact sum cannot blow up (Higham, Accuracy and Stability of
    Numerical Algorithms, sec. 3.1: the componentwise condition of a dot product)."""
    return np.abs(got.astype(np.float64) - exact) / scale


def _operands_all(rng, reps, K):
    """Both distributions stacked: rows [0, reps) positive, [reps, 2 reps) zero-mean."""
    pairs = [sample_operands(rng, reps, K, d) for d in DISTRIBUTIONS]
    return np.vstack([p[0] for p in pairs]), np.vstack([p[1] for p in pairs])


def swamping_table(rng: np.random.Generator, *, k_values=K_VALUES, reps: int = 32,
                   progress=None):
    """Tidy DataFrame: K, distribution, engine, mean/max error over ``reps`` dots, where the
    error is |result - exact| / sum|a_k b_k| (= relative error for positive data).

    One pass over max(K) per engine gives every prefix length. ``progress`` (optional) is
    called with no arguments after each engine.
    """
    import pandas as pd

    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    a, b = _operands_all(rng, reps, max(k_values))
    exact = _exact_prefixes(a, b, k_values)
    scale = _abs_prefixes(a, b, k_values)
    rows = []
    for label, eng in study_engines().items():
        res = prefix_results(a, b, eng, k_values)
        for K in k_values:
            e = _rel_err(res[K], exact[K], scale[K])
            for i, dist in enumerate(DISTRIBUTIONS):
                part = e[i * reps:(i + 1) * reps]
                rows.append({"K": K, "distribution": dist, "engine": label,
                             "rel_err_mean": float(part.mean()), "rel_err_max": float(part.max()),
                             "reps": reps})
        if progress is not None:
            progress()
    return pd.DataFrame(rows)


def chunk_sweep_table(rng: np.random.Generator, *, K: int = 16384, chunks=CHUNKS, reps: int = 32,
                      progress=None):
    """Tidy DataFrame: chunk, distribution, mean/max relative error of the HFP8 two-level
    dlfloat16 accumulator at fixed K (the IBM design point is chunk 64).

    Each chunk size is the HFP8 engine with that promotion interval (``dot``); the dlfloat16
    values it returns are exact in its fp32 output. ``progress`` is called after each chunk size.
    """
    import pandas as pd

    chunks = [int(c) for c in chunks]
    if any(c < 1 for c in chunks) or K % max(chunks):
        raise ValueError(f"chunks must be positive and divide K={K}, got {chunks}")
    base = study_engines()["HFP8 chunked (64)"]
    a, b = _operands_all(rng, reps, K)
    exact = _exact_prefixes(a, b, [K])[K]
    scale = _abs_prefixes(a, b, [K])[K]
    rows = []
    for c in chunks:
        got = dot(a, b, dataclasses.replace(base, chunk=c))
        e = _rel_err(got, exact, scale)
        for i, dist in enumerate(DISTRIBUTIONS):
            part = e[i * reps:(i + 1) * reps]
            rows.append({"chunk": c, "K": K, "distribution": dist, "rel_err_mean": float(part.mean()),
                         "rel_err_max": float(part.max()), "reps": reps})
        if progress is not None:
            progress()
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- block-scaled engines (issue 25)
BLOCK_STUDY = {  # label -> preset of accelsim.arith.blockscaled
    "MXFP8 E4M3 (B200 MMA)": "b200-mxfp8",
    "MXFP6 E2M3 (B200 MMA)": "b200-mxfp6",
    "MXFP4 (B200 MMA)": "b200-mxfp4",
    "NVFP4 (B200 MMA)": "b200-nvfp4",
    "DeepSeek-V3 FP8 tiles, promotion 128 (H100)": "dsv3-fp8",
}
DEEPSEEK_K = 4096
DEEPSEEK_MEANS = (0.0, 0.5, 1.0)  # operand mean / std of N(mu, 1) data, plus |N(0,1)|


def _prefix(q, K: int, axis: int):
    """The first K elements along ``axis`` of a block-quantized operand (whole blocks)."""
    B = q.format.block[1] if q.format.block[0] == 1 else q.format.block[0]
    nb = -(-K // B)
    el = q.elements[:, :K] if axis == 1 else q.elements[:K]
    sc = q.scales[:, :nb] if axis == 1 else q.scales[:nb]
    codes = None if q.scale_codes is None else (q.scale_codes[:, :nb] if axis == 1 else q.scale_codes[:nb])
    return dataclasses.replace(q, elements=el, scales=sc, scale_codes=codes)


def block_swamping_table(rng: np.random.Generator, *, k_values=K_VALUES, reps: int = 32, progress=None):
    """Tidy DataFrame: K, distribution, engine, rel_err_mean/max (|result - exact| / sum|a_k b_k|
    of the engine's own dequantized operands: the accumulation error) and quant_err_mean/max (the
    same against the unquantized float64 data: quantization plus accumulation), per block-scaled
    engine. ``reps`` rows of A share one column of B (quantized once at max(K); prefixes reuse
    those blocks, NVFP4's tensor scale included). ``progress`` is called after each engine."""
    import pandas as pd

    from .blockscaled import block_scaled_matmul_q, get_block_engine, quantize_operands

    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    Kmax = max(k_values)
    data = {}
    for dist in DISTRIBUTIONS:
        a, b = rng.standard_normal((reps, Kmax)), rng.standard_normal((Kmax, 1))
        data[dist] = (np.abs(a), np.abs(b)) if dist == "positive" else (a, b)
    rows = []
    for label, preset in BLOCK_STUDY.items():
        eng = get_block_engine(preset)
        for dist, (a, b) in data.items():
            qa, qb = quantize_operands(a, b, eng)
            da, db = qa.dequantize(), qb.dequantize()
            for K in k_values:
                got = block_scaled_matmul_q(_prefix(qa, K, 1), _prefix(qb, K, 0), eng)[:, 0].astype(np.float64)
                exact_q = exact_sums(da[:, :K], db[:K], get_engine("exact", a_format="fp32", b_format="fp32"))[:, 0]
                e = _rel_err(got, exact_q, np.abs(da[:, :K]) @ np.abs(db[:K, 0]))
                q = _rel_err(got, a[:, :K] @ b[:K, 0], np.abs(a[:, :K]) @ np.abs(b[:K, 0]))
                rows.append({"K": K, "distribution": dist, "engine": label, "rel_err_mean": float(e.mean()),
                             "rel_err_max": float(e.max()), "quant_err_mean": float(q.mean()),
                             "quant_err_max": float(q.max()), "reps": reps})
        if progress is not None:
            progress()
    return pd.DataFrame(rows)


def deepseek_table(rng: np.random.Generator, *, K: int = DEEPSEEK_K, reps: int = 32, means=DEEPSEEK_MEANS,
                   progress=None):
    """DeepSeek-V3 sec. 3.3.2 ("limited accumulation precision in Tensor Cores results in a
    maximum relative error of nearly 2% in a GEMM with K = 4096"; promotion every 128 fixes it):
    ``reps`` dot products of length K on N(mu, 1) data for each mu in ``means`` (and |N(0,1)|),
    per-tensor-scaled E4M3 on the H100 engine without / with promotion, and DeepSeek's tiles.
    Tidy DataFrame: data, engine, max/mean relative error |result - exact| / |exact| and the
    error / sum|a_k b_k|. ``progress`` is called after each data kind."""
    import pandas as pd

    from .blockscaled import block_scaled_matmul_q, get_block_engine, quantize_operands

    kinds = [(f"N({m:g}, 1)", m) for m in means] + [("|N(0, 1)|", None)]
    fmt = "e4m3fn"
    rows = []
    for label, mu in kinds:
        a, b = rng.standard_normal((reps, K)), rng.standard_normal((reps, K))
        if mu is None:
            a, b = np.abs(a), np.abs(b)
        else:
            a, b = a + mu, b + mu
        # per-tensor scaling to the E4M3 range (the scale cancels in a relative error)
        qa = quantize(a * (448 / np.abs(a).max()), fmt, saturate=True)
        qb = quantize(b * (448 / np.abs(b).max()), fmt, saturate=True)
        exact = np.sum(qa * qb, axis=1)  # exact: e4m3 products fit float64 with K <= 2^12
        results = {
            "H100 FP8, no promotion (fast_accum)": (dot(qa, qb, get_engine("h100-fp8", fast_accum=True)), exact, qa, qb),
            "H100 FP8, promotion every 128": (dot(qa, qb, get_engine("h100-fp8")), exact, qa, qb),
        }
        eng = get_block_engine("dsv3-fp8")
        ta, tb = quantize_operands(a, b.T, eng)
        d = np.diagonal(block_scaled_matmul_q(ta, tb, eng)).astype(np.float64)
        da, db = ta.dequantize(), tb.dequantize()
        results["DeepSeek-V3 tiles (1x128 / 128x128), promotion 128"] = (d, np.sum(da * db.T, axis=1), da, db.T)
        for eng_label, (got, ex, xa, xb) in results.items():
            rel = np.abs(np.asarray(got, np.float64) - ex) / np.abs(ex)
            nrm = _rel_err(np.asarray(got), ex, np.sum(np.abs(xa * xb), axis=1))
            rows.append({"K": K, "data": label, "engine": eng_label, "rel_err_max": float(rel.max()),
                         "rel_err_mean": float(rel.mean()), "err_over_abs_sum_max": float(nrm.max()), "reps": reps})
        if progress is not None:
            progress()
    return pd.DataFrame(rows)
