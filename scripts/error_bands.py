"""The error bands every prediction reports (issue 34 item 8), derived from the validation
tables: per regime, the 10th and 90th percentile of the held-out errors and the leave-one-out
errors of the fit rows, capped at 3x the regime's mean absolute error (:func:`_band`).

    python scripts/error_bands.py [--reports DIR] [--out FILE] [--check]

Reads ``reports/validation_all.csv`` (every compared number, its label and leave-one-out error)
and, for the attributes of each row, the per-family tables it was built from:
``compute_validation.csv``, ``compute_gemm_published_sweep.csv``, ``compute_validation_oos.csv``,
``compute_validation_oos_cases.csv``, ``llm_published_validation.csv`` (with
``accelsim/data/llm_published.toml`` for GPU counts, sequence lengths and schemes) and the case
texts of the Megatron-LM, FP8-LM and device rows. Each error is the predicted rate over the
measured one, minus 1 (a time's error turned the same way); a ``fit`` row counts with its
leave-one-out error only, and rows timed with ``--power-model`` are left out (the default clock
is what the band describes). Regimes and their fallbacks are :mod:`accelsim.engine.uncertainty`'s.

Writes ``accelsim/data/error_bands.csv`` and prints two checks: the share of held-out errors
inside the band their own question gets (at least 80 %), and each band's width against 3x its
regime's mean absolute error (none wider). ``--check`` compares the table with the written file
instead (exit 1 when it differs or a check fails). Deterministic; about a second.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from accelsim.arch.schemes import get_scheme  # noqa: E402
from accelsim.engine import uncertainty as u  # noqa: E402

#: the tables read, in ``--reports``
REPORT_TABLES = ("validation_all.csv", "compute_validation.csv",
                 "compute_gemm_published_sweep.csv", "compute_validation_oos.csv",
                 "compute_validation_oos_cases.csv", "llm_published_validation.csv")
#: validations whose rows are used (matched by prefix; the device ones by DEVICE_GROUPS)
USED = ("GPU compute: ", "DGX-1 ResNet-50", "Megatron-LM SC'21", "FP8-LM Tables 5 and 7",
        "LLM inference / MoE training, published",
        # fit rows: each A100 row's leave-one-out refit (scripts/fit_fsdp.py); the others never
        # informed the fit, so their own error is their leave-one-out one
        "MPT FSDP training")
#: validations left out: no front-end's default prediction of time or throughput
LEFT_OUT = ("HFP8 appendix D",            # relative gains in points, the paper's 64-chip study
            "GPU datasheet peaks",        # reference rows, by construction
            "H100 FP8 GEMM output bits",  # numerics, not timing
            "SCALE-Sim v3 cycles", "netsim: ")  # engine cross-checks, not measurements
#: groups of our own H100 / H200 measurements used, by the family they time
#: (the default clock is the power-limited one: its rows are the "power model" groups)
DEVICE_GROUPS = {"gemm: power model": u.Family.GEMM,
                 "gemm held 2 s: power model": u.Family.GEMM,
                 "lm head": u.Family.GEMM, "gpt step: power model": u.Family.TRAINING,
                 "inference: power model": u.Family.INFERENCE}
#: and those left out: the --clock boost what-if (the bands describe the default clock), power,
#: memory, and attention kernels alone (no front-end here reports one)
DEVICE_LEFT_OUT = {"gemm: fixed clock (--clock boost)", "gemm burst: fixed clock (--clock boost)",
                   "gpt step", "inference", "step power: power model", "hbm copy power",
                   "gpt memory", "attention", "attention kernels",
                   # the names before the power-limited default (a report not yet regenerated)
                   "gemm: fixed clock (default)", "gemm burst: fixed clock (default)"}
#: published metrics used, and whether each is a time (its error turned into a rate's)
PUBLISHED_METRICS = {"output_tokens_per_s": (u.Phase.REQUEST, False),
                     "output_tokens_per_s_per_gpu": (u.Phase.REQUEST, False),
                     "time_to_first_token": (u.Phase.PREFILL, True),
                     "inter_token_latency": (u.Phase.DECODE, True),
                     "request_latency": (u.Phase.REQUEST, True),
                     "train_tokens_per_s_per_gpu": (u.Phase.TRAIN, False),
                     "gpu_hours_per_trillion_tokens": (u.Phase.TRAIN, True)}
TIME_UNITS = ("(us)", "(ms)", "(s)")
#: GPUs per node of every multi-GPU row (DGX / HGX nodes)
GPUS_PER_NODE = 8
#: FP8-LM (Peng et al. 2023) and Megatron-LM SC'21 Table 1 train at 2048 tokens
SEQ_2K = 2048
#: no band wider than this many times its regime's mean absolute error (issue 34's check)
MAX_WIDTH_MAE = 3.0


def _rate(error_pct: float, is_time: bool) -> float:
    """A time's error (predicted / measured - 1, %) as the rate's: measured / predicted - 1."""
    return 100.0 * (1.0 / (1.0 + error_pct / 100.0) - 1.0) if is_time else error_pct


def _params_B(text: str) -> float | None:
    """Billions of parameters a model name states ("LLaMA v3.1 70B", "Mixtral 8x7B": 56)."""
    m = re.search(r"(\d+)x(\d+(?:\.\d+)?)B", text)
    if m:
        return float(m.group(1)) * float(m.group(2))
    sizes = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)\s*B\b", text)]
    return max(sizes) if sizes else None


def _case_params_B(case: dict) -> float | None:
    """A published case's model size: its preset's parameter count where it names one
    (``arch``), else the size its name states."""
    if case.get("arch"):
        from accelsim.workload.hf_config import resolve_model

        return resolve_model(case["arch"]).n_params / 1e9
    return _params_B(case["model"])


#: llm-foundry's precisions as scripts/mpt_validate.py asks them (bf16 rows on the pytorch
#: stack, the FP8 rows on Transformer Engine's, the megatron stack)
MPT_SCHEME = {"amp_bf16": "bf16", "bf16": "bf16", "amp_fp8": "te-fp8"}


def _gpt_params_B(layers: int, hidden: int, vocab: int) -> float:
    return (12 * layers * hidden**2 + vocab * hidden) / 1e9


def _row(family, phase, error, source, chip, gpus, precision, stack=u.ANY, seq=None,
         params_B=None, validation="", case=""):
    return {"family": family.value, "phase": phase.value,
            "nodes": u.nodes_class(gpus, GPUS_PER_NODE), "stack": stack,
            "precision": u.precision_class(precision), "seq_range": u.seq_range(seq),
            "error": float(error), "source": source, "chip": u.chip_name(chip), "gpus": gpus,
            "seq": seq, "params_B": params_B, "validation": validation, "case": case}


def _usable(r) -> tuple[float, str] | None:
    """(error %, 'held-out' / 'leave-one-out') of a validation row, None when it has neither."""
    if r.label == "checked" and not math.isnan(r.error):
        return r.error, "held-out"
    if r.label == "fit" and not math.isnan(r.loo_error):
        return r.loo_error, "leave-one-out"
    return None


def collect(reports: Path) -> pd.DataFrame:
    """One row per usable error, with its regime keys and domain attributes."""
    va = pd.read_csv(reports / "validation_all.csv")
    for v in va.validation.unique():  # a new or renamed validation must be placed, not dropped
        group = v.split(": ", 1)[-1] if "measured here" in v else None
        if not (v.startswith(USED) or v.startswith(LEFT_OUT) or group in DEVICE_GROUPS
                or group in DEVICE_LEFT_OUT):
            raise SystemExit(f"error_bands.py: validation {v!r} of {reports}/validation_all.csv "
                             "is new: add it to USED / DEVICE_GROUPS (with its regime) or to "
                             "LEFT_OUT / DEVICE_LEFT_OUT (with the reason)")
    va = va[va.validation.str.startswith(USED)
            | va.validation.str.split(": ", n=1).str[-1].isin(DEVICE_GROUPS)]
    by_case = {}
    for name in REPORT_TABLES[1:5]:
        by_case.update({c: (s, p) for c, s, p in pd.read_csv(reports / name)[
            ["case", "system", "scheme"]].itertuples(index=False)})
    pub = pd.read_csv(reports / "llm_published_validation.csv").set_index("id")
    with open(ROOT / "accelsim" / "data" / "llm_published.toml", "rb") as f:
        cases = {c["id"]: c for c in tomllib.load(f)["case"]}
    mpt = pd.read_csv(ROOT / "accelsim" / "data" / "mpt" / "mpt_training_throughput.csv"
                      ).set_index("id")
    rows = []
    for r in va.itertuples(index=False):
        got = _usable(r)
        if got is None:
            continue
        err, source = got
        v, case = r.validation, r.case
        kw = dict(source=source, validation=v, case=case)
        if v.startswith("GPU compute"):
            key = re.sub(r" \((TFLOPS|img/s)\)$| \(control: GPU in the fit\)$", "", case)
            system, scheme = by_case[key]
            prec = get_scheme(scheme).compute_precision
            if "ResNet" in case:
                gpus = 8 if case.startswith("DGX") else 1
                rows.append(_row(u.Family.TRAINING, u.Phase.TRAIN, err, chip=system, gpus=gpus,
                                 precision=prec, stack="layers", **kw))
            else:
                rows.append(_row(u.Family.GEMM, u.Phase.GEMM, err, chip=system, gpus=1,
                                 precision=prec, **kw))
        elif v.startswith("DGX-1 ResNet-50"):
            gpus = int(case.split(" x ")[0])
            rows.append(_row(u.Family.TRAINING, u.Phase.TRAIN, err, chip="v100", gpus=gpus,
                             precision="fp16", stack="layers", **kw))
        elif v.startswith("Megatron-LM"):
            m = re.match(r"gpt-([\d.]+)b (\d+)xA100", case)
            rows.append(_row(u.Family.TRAINING, u.Phase.TRAIN, err, chip="a100",
                             gpus=int(m.group(2)), precision="fp16", stack="megatron",
                             seq=SEQ_2K, params_B=float(m.group(1)), **kw))
        elif v.startswith("FP8-LM") and " tflops_per_gpu " in case:
            m = re.match(r"gpt-([\d.]+)b (\d+)xH100 .* (\S+) tflops_per_gpu", case)
            rows.append(_row(u.Family.TRAINING, u.Phase.TRAIN, err, chip="h100",
                             gpus=int(m.group(2)),
                             precision=get_scheme(m.group(3)).compute_precision,
                             stack="megatron", seq=SEQ_2K, params_B=float(m.group(1)), **kw))
        elif v.startswith("LLM inference / MoE training"):
            cid = case.rsplit(" (", 1)[0]
            metric = pub.loc[cid, "metric"]
            if metric not in PUBLISHED_METRICS:
                continue
            phase, is_time = PUBLISHED_METRICS[metric]
            c = cases[cid]
            seq = c.get("seq") or (c["input_tokens"] + c["output_tokens"])
            if phase is u.Phase.PREFILL:
                seq = c["input_tokens"]
            family = u.Family.TRAINING if phase is u.Phase.TRAIN else u.Family.INFERENCE
            rows.append(_row(family, phase, _rate(err, is_time), chip=c["system"],
                             gpus=c["gpus"], precision=get_scheme(c["scheme"]).compute_precision,
                             stack="megatron" if phase is u.Phase.TRAIN else u.ANY, seq=seq,
                             params_B=_case_params_B(c), **kw))
        elif v.startswith("MPT FSDP training"):
            m = mpt.loc[case.rsplit(" (", 1)[0]]
            scheme = MPT_SCHEME[m["precision"]]
            rows.append(_row(u.Family.TRAINING, u.Phase.TRAIN, err,
                             chip=m["system"].removeprefix("dgx-"), gpus=int(m["gpus"]),
                             precision=get_scheme(scheme).compute_precision,
                             stack="pytorch" if scheme == "bf16" else "megatron",
                             seq=int(m["seq"]), params_B=_gpt_params_B(
                                 int(m["layers"]), int(m["hidden"]), int(m["vocab"])), **kw))
        elif "measured here" in v:
            chip = "h200" if v.startswith("H200") else "h100"
            group = v.split(": ", 1)[1]
            is_time = case.endswith(TIME_UNITS)
            if DEVICE_GROUPS[group] is u.Family.GEMM:
                rows.append(_row(u.Family.GEMM, u.Phase.GEMM, _rate(err, is_time), chip=chip,
                                 gpus=1, precision=case.split()[0], **kw))
            elif group == "gpt step":
                m = re.search(r": (\d+) x (\d+), s (\d+), batch \d+, vocab (\d+)", case)
                layers, hidden, seq, vocab = map(int, m.groups())
                rows.append(_row(u.Family.TRAINING, u.Phase.TRAIN, _rate(err, is_time),
                                 chip=chip, gpus=1, precision="bf16", stack="pytorch", seq=seq,
                                 params_B=_gpt_params_B(layers, hidden, vocab), **kw))
            elif group == "inference":
                m = re.search(r"(prefill, prompt|context) (\d+)", case)
                phase = u.Phase.PREFILL if m.group(1).startswith("prefill") else u.Phase.DECODE
                rows.append(_row(u.Family.INFERENCE, phase, _rate(err, is_time), chip=chip,
                                 gpus=1, precision="bf16", seq=int(m.group(2)), params_B=8.03,
                                 **kw))
    return pd.DataFrame(rows)


def _band(errors: np.ndarray, mae: float) -> tuple[float, float, bool]:
    """The 10th and 90th percentile, taken at sample values outward (numpy's ``lower`` /
    ``higher``: at least 80 % of the regime's own errors lie inside) and rounded outward to
    0.1 %, capped at :data:`MAX_WIDTH_MAE` times the regime's mean absolute error ``mae``: a
    wider band becomes the window of that width holding the most errors (of equals, the one
    centred nearest the median). Where errors scatter evenly about zero, P10-P90 is about 3.2x
    their mean absolute error, so the cap binds there."""
    e = np.sort(errors)
    lo = math.floor(10 * float(np.percentile(e, 10, method="lower"))) / 10
    hi = math.ceil(10 * float(np.percentile(e, 90, method="higher"))) / 10
    width = round(MAX_WIDTH_MAE * mae, 1)
    if hi - lo <= width + 1e-9:
        return lo, hi, False
    counts = np.searchsorted(e, e + width, side="right") - np.arange(len(e))
    best = np.flatnonzero(counts == counts.max())
    start = round(float(e[best[np.argmin(np.abs(e[best] + width / 2 - np.median(e)))]]), 1)
    return start, round(start + width, 1), True


def bands(df: pd.DataFrame) -> pd.DataFrame:
    """One row per regime with at least :data:`~accelsim.engine.uncertainty.MIN_ROWS` errors:
    every level of every row's fallback chain."""
    keys = {k for r in df[list(u.KEYS)].itertuples(index=False) for k in u.regime_chain(tuple(r))}
    out = []
    for key in sorted(keys):
        mask = np.ones(len(df), bool)
        for name, v in zip(u.KEYS, key):
            if v != u.ANY:
                mask &= (df[name] == v).to_numpy()
        g = df[mask]
        if len(g) < u.MIN_ROWS:
            continue
        mae = round(float(g.error.abs().mean()), 1)
        lo, hi, capped = _band(g.error.to_numpy(), mae)
        p, s = g.params_B.dropna(), g.seq.dropna()
        out.append(dict(zip(u.KEYS, key), rows=len(g), error_low_pct=lo, error_high_pct=hi,
                        mae_pct=mae,
                        gpus_min=int(g.gpus.min()), gpus_max=int(g.gpus.max()),
                        params_B_min=round(float(p.min()), 3) if len(p) else "",
                        params_B_max=round(float(p.max()), 3) if len(p) else "",
                        seq_min=int(s.min()) if len(s) else "",
                        seq_max=int(s.max()) if len(s) else "",
                        chips=";".join(sorted(g.chip.unique())), capped=capped))
    return pd.DataFrame(out, columns=list(u.COLUMNS))


def checks(df: pd.DataFrame, table: pd.DataFrame) -> tuple[float, list[str], dict[str, float]]:
    """(share of held-out errors inside the band of their own regime chain, the bands wider than
    3x their regime's mean absolute error, the share per family)."""
    by_key = {tuple(r[k] for k in u.KEYS): r for r in table.to_dict("records")}
    held = df[df.source == "held-out"]
    inside = []
    for r in held.itertuples(index=False):
        rec = next(by_key[k] for k in u.regime_chain(tuple(getattr(r, k) for k in u.KEYS))
                   if k in by_key)
        inside.append(rec["error_low_pct"] <= r.error <= rec["error_high_pct"])
    inside = np.array(inside)
    per_family = {f: float(inside[(held.family == f).to_numpy()].mean())
                  for f in sorted(held.family.unique())}
    wide = [f"{u.regime_text(k)}: width {r['error_high_pct'] - r['error_low_pct']:.1f} > 3 x "
            f"{r['mae_pct']:.1f}" for k, r in by_key.items()
            if r["error_high_pct"] - r["error_low_pct"] > MAX_WIDTH_MAE * r["mae_pct"] + 1e-6]
    return float(inside.mean()), wide, per_family


def render(table: pd.DataFrame, df: pd.DataFrame) -> str:
    srcs = sorted(df.validation.unique())
    head = ["# Error bands of accelsim's predictions (accelsim/engine/uncertainty.py reads them).",
            "# Written by scripts/error_bands.py from reports/validation_all.csv and the tables",
            "# it points at (compute_validation*.csv, compute_gemm_published_sweep.csv,",
            "# llm_published_validation.csv with accelsim/data/llm_published.toml, the",
            "# Megatron-LM, FP8-LM and device case texts). error = predicted rate / measured - 1",
            "# (%); band = 10th / 90th percentile (at sample values, outward) of the held-out",
            "# errors and the leave-one-out errors of fit rows, capped at 3x the regime's mean",
            "# absolute error (capped = True); --power-model rows left out. Sources "
            f"({len(df)} errors):"]
    head += [f"#   {s} ({int((df.validation == s).sum())})" for s in srcs]
    return "\n".join(head) + "\n" + table.to_csv(index=False, lineterminator="\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=Path, default=ROOT / "reports", metavar="DIR")
    ap.add_argument("--out", type=Path, default=u.BANDS_FILE, metavar="FILE")
    ap.add_argument("--check", action="store_true",
                    help="compare with --out instead of writing it (exit 1 when it differs)")
    args = ap.parse_args(argv)
    df = collect(args.reports)
    table = bands(df)
    text = render(table, df)
    share, wide, per_family = checks(df, table)
    held = int((df.source == "held-out").sum())
    print(f"{len(df)} errors ({held} held-out, {len(df) - held} leave-one-out), "
          f"{len(table)} regimes")
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(table[list(u.KEYS) + ["rows", "error_low_pct", "error_high_pct", "mae_pct",
                     "capped"]]
              .to_string(index=False))
    print(f"check 1: {100 * share:.1f} % of {held} held-out errors inside their band "
          f"(needs >= 80 %): {'ok' if share >= 0.8 else 'FAILS'} ("
          + ", ".join(f"{f} {100 * v:.0f} %" for f, v in per_family.items()) + ")")
    print(f"check 2: bands wider than 3x their regime's mean absolute error: "
          f"{'none (ok)' if not wide else 'FAILS: ' + '; '.join(wide)}")
    ok = share >= 0.8 and not wide
    if args.check:
        same = args.out.is_file() and args.out.read_text() == text
        print(f"{args.out}: {'up to date' if same else 'DIFFERS: rerun without --check'}")
        return 0 if same and ok else 1
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
