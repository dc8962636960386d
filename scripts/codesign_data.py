"""Ship the learning curves of the co-design report's two studies as one compact data file,
``accelsim/data/codesign/curves.csv`` (model, dataset, recipe, seed, step, val_loss: every
evaluation of every finished run), read from the studies' run journals (``runs.csv``, what
``accelsim study --out DIR`` writes as each run finishes). ``accelsim figures`` regenerates
reports/codesign.md and .csv from that file (accelsim.dse.codesign_report); the commands that
made the studies are in accelsim/data/codesign/README.md.

    python scripts/codesign_data.py --study /work/cs/cnn --study /work/cs/gpt

Rerun it after adding seeds to a study (``accelsim study ... --seeds 8`` resumes the journal),
then ``accelsim figures``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: the study settings every shipped run must have (the README's commands)
EXPECTED = {"steps": 300, "batch_size": 32, "gemm": "blas"}


def study_curves(folder: Path):
    """The tidy validation curves of one study's finished runs, checked against EXPECTED."""
    import pandas as pd

    runs = pd.read_csv(folder / "runs.csv")
    ok = runs[runs["status"] == "ok"]
    if len(ok) != len(runs):
        raise SystemExit(f"{folder}: {len(runs) - len(ok)} run(s) did not finish ok")
    for k, v in EXPECTED.items():
        bad = ok[ok[k].astype(str) != str(v)]
        if len(bad):
            raise SystemExit(f"{folder}: {k} = {bad[k].iloc[0]!r}, the report's studies use {v}")
    if ok["lr"].notna().any():
        raise SystemExit(f"{folder}: a run sets --lr; the report's studies use the default")
    parts = []
    for r in ok.sort_values(["recipe", "seed"], kind="stable").itertuples():
        c = json.loads(r.curve)
        parts.append(pd.DataFrame({"model": r.model, "dataset": r.dataset, "recipe": r.recipe,
                                   "seed": int(r.seed), "step": c["step"],
                                   "val_loss": c["val_loss"]}))
    return pd.concat(parts, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    from accelsim.dse.codesign_report import CURVES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", type=Path, action="append", required=True,
                    help="a study results folder (accelsim study --out DIR); give one per model")
    ap.add_argument("--out", type=Path, default=CURVES)
    args = ap.parse_args(argv)
    table = pd.concat([study_curves(f) for f in args.study], ignore_index=True)
    if table.duplicated(["model", "recipe", "seed", "step"]).any():
        raise SystemExit("two studies give the same model, recipe, seed and step")
    table.to_csv(args.out, index=False)
    n = table.groupby("model")[["recipe", "seed"]].apply(lambda g: len(g.drop_duplicates()))
    print(f"wrote {args.out}: " + ", ".join(f"{m} {k} runs" for m, k in n.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
