"""The seed papers' claims the co-design report judges (reports/codesign.md), each with its
source and its text -- a quotation where the text was found (the papers' abstracts), marked as a
paraphrase where it was not -- and the rule that labels it holds / does not hold / not resolved
from the report's table (:func:`accelsim.dse.codesign_report.report_table`).

Rules (``test``):
* ``peak``: the format's design has 1.7 to 2.3x the FP16 design's dense peak at the same die
  area and power limit (the band issue 37 checks ``fp8_packing`` against);
* ``reach``: every run of the recipe reaches the target loss on every model (holds), some run
  on some model never does (does not hold);
* ``faster``: time to the target is shorter than FP16's with a 95 % CI excluding 0 on every
  model (holds), longer with such a CI or never reached on some model (does not hold), else not
  resolved;
* ``throughput``: the format's design trains at least 2x FP16's samples/s on every model.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """One claim: the format (a report format label), its source, its text, whether the text
    is a quotation (else a paraphrase), and the rule that judges it."""

    format: str
    source: str
    text: str
    quoted: bool
    test: str


CLAIMS = (
    Claim("HFP8", "Sun et al., NeurIPS 2019, appendix D", "HFP8 hardware fits twice the FP8 "
          "compute elements of an FP16 design into the same area and power", False, "peak"),
    Claim("HFP8", "Sun et al., \"Hybrid 8-bit Floating Point (HFP8) Training and Inference for "
          "Deep Neural Networks\", NeurIPS 2019, abstract", "We demonstrate, using HFP8, the "
          "successful training of deep learning models across a whole spectrum of applications "
          "including Image Classification, Object Detection, Language and Speech without "
          "accuracy degradation.", True, "reach"),
    Claim("HFP8", "issue 37's reading of Sun et al., NeurIPS 2019 (the co-design argument)",
          "the same silicon reaches FP16's model quality sooner (and with less energy) in HFP8",
          False, "faster"),
    Claim("FP8 (E5M2)", "Micikevicius et al., \"FP8 Formats for Deep Learning\", arXiv "
          "2209.05433, abstract", "We demonstrate the efficacy of the FP8 format on a variety "
          "of image and language tasks, effectively matching the result quality achieved by "
          "16-bit training sessions.", True, "reach"),
    Claim("FP8 (E5M2)", "Wang et al., \"Training Deep Neural Networks with 8-bit Floating Point "
          "Numbers\", NeurIPS 2018, abstract", "Here we demonstrate, for the first time, the "
          "successful training of deep neural networks using 8-bit floating point numbers "
          "while fully maintaining the accuracy on a spectrum of deep learning models and "
          "datasets.", True, "reach"),
    Claim("FP8 (E5M2)", "Wang et al., NeurIPS 2018, abstract", "The use of these novel "
          "techniques lays the foundation for a new generation of hardware training platforms "
          "with the potential for 2-4 times improved throughput over today's systems.", True,
          "throughput"),
    Claim("HiF8", "Luo et al., \"Ascend HiFloat8 Format for Deep Learning\", arXiv "
          "2409.16626, abstract", "Thanks to the better balance between precision and dynamic "
          "range, HiF8 can be simultaneously used in both forward and backward passes of AI "
          "training.", True, "reach"),
    Claim("MXFP8", "Rouhani et al., \"Microscaling Data Formats for Deep Learning\", arXiv "
          "2310.10537, abstract", "Empirical results on over two dozen benchmarks demonstrate "
          "practicality of MX data formats as a drop-in replacement for baseline FP32 for AI "
          "inference and training with low user friction.", True, "reach"),
    Claim("NVFP4", "NVIDIA, \"Pretraining Large Language Models with NVFP4\", arXiv 2509.25149, "
          "abstract", "Our results show that the model trained with our NVFP4-based pretraining "
          "technique achieves training loss and downstream task accuracies comparable to an "
          "FP8 baseline.", True, "reach"),
    Claim("NVFP4", "NVIDIA, arXiv 2509.25149, abstract", "While 8-bit floating point (FP8) "
          "training is now widely adopted, transitioning to even narrower precision, such as "
          "4-bit floating point (FP4), could unlock additional improvements in computational "
          "speed and resource utilization.", True, "faster"),
)

#: What each format's recipe here is, where it differs from the paper's (a reason's caveat).
RECIPE_CAVEATS = {
    "FP8 (E5M2)": "the recipe here is E5M2 for every GEMM operand with no loss scaling "
                  "(fp8-e5m2, Cambier et al.'s plain-FP8 baseline), not the paper's recipe",
    "MXFP8": "the baseline here is FP16 (the target comes from fp16-amp), not FP32",
    "NVFP4": "judged against the FP16-derived target, stricter than an FP8 baseline that "
             "reaches it",
}


def _per_model(table, fmt: str):
    return table[table["format"] == fmt]


def judge(claim: Claim, table) -> tuple[str, str]:
    """(label, reason) of ``claim`` from the report's table."""
    rows = _per_model(table, claim.format)
    base = table[table["format"] == "FP16"].set_index("model")
    caveat = RECIPE_CAVEATS.get(claim.format)
    if not len(rows):
        return "not resolved", f"no {claim.format} runs in the shipped studies"
    if claim.test == "peak":
        r = rows.iloc[0]
        ratio = r["peak_vs_fp16"]
        label = "holds" if 1.7 <= ratio <= 2.3 else "does not hold"
        return label, (f"the builder puts {int(r['cores'])} arrays of {claim.format} MACs "
                       f"where FP16 gets {int(base.iloc[0]['cores'])}: {ratio:.2f}x the dense "
                       f"peak in the same {r['area_mm2']:g} mm2 and {r['power_limit_W']:.3g} W "
                       "(MAC areas from the datapath table, not typed in)")
    if claim.test == "reach":
        bad = rows[~rows["feasible"].astype(bool)]
        parts = [f"{r.model}: {r.runs_reached} of {r.runs} runs reach {r.target_loss:.4g}"
                 for r in rows.itertuples()]
        label = "does not hold" if len(bad) else "holds"
        reason = "; ".join(parts)
        return label, reason + (f" ({caveat})" if caveat else "")
    if claim.test == "throughput":
        ratios = [(r.model, r.samples_per_s / base.loc[r.model, "samples_per_s"])
                  for r in rows.itertuples() if r.feasible]
        untimed = [r.model for r in rows.itertuples() if not r.feasible]
        peak = rows.iloc[0]["peak_vs_fp16"]
        if not ratios:
            return "not resolved", "the recipe reaches the target on no model"
        label = "holds" if all(x >= 2 for _, x in ratios) else "does not hold"
        return label, (f"at the same area the FP8 chip has {peak:.2f}x FP16's peak; a training "
                       "step runs " + ", ".join(f"{x:.2f}x FP16's samples/s on {m}"
                                                for m, x in ratios)
                       + "".join(f"; {m}: not timed (the recipe never reaches the target)"
                                 for m in untimed)
                       + " (small models: collectives and element-wise passes dominate a step)")
    if claim.test == "faster":
        v = dict(zip(rows["model"], rows["time_verdict"]))
        parts = [f"{m}: {s}" for m, s in v.items()]
        if any(s.startswith("longer") or s.startswith("no comparison") for s in v.values()):
            label = "does not hold"
        elif all(s.startswith("shorter") for s in v.values()):
            label = "holds"
        else:
            label = "not resolved"
        return label, "time to target vs FP16, " + "; ".join(parts)
    raise ValueError(f"unknown claim test {claim.test!r}")


def claims_table(table):
    """One row per claim: format, source, text, quoted, label, reason."""
    import pandas as pd

    rows = []
    for c in CLAIMS:
        label, reason = judge(c, table)
        rows.append({"format": c.format, "source": c.source, "text": c.text,
                     "quoted": c.quoted, "label": label, "reason": reason})
    return pd.DataFrame(rows)
