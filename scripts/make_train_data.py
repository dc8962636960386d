"""Write the training data files shipped in accelsim/data/train/ (run once; the files are
committed and pinned by sha256 in accelsim/train/data.py, so no install needs this script):

* ``digits.u8.xz``: scikit-learn's bundled 8x8 digits (UCI optdigits test set, 1,797 images),
  one record of 65 bytes per image (64 pixels in 0..16, then the label), xz-compressed;
* ``pydoc_topics.txt.xz``: the text of Python's ``pydoc_data.topics`` (the topic help of the
  Python this runs on; the shipped snapshot is Python 3.11.7's: 465,126 characters, 103 symbols),
  topics in sorted order joined by a blank line, UTF-8, xz-compressed.

Usage: python scripts/make_train_data.py [--out accelsim/data/train]   (needs scikit-learn)
Prints each file's sha256 to paste into accelsim/train/data.py.
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import sys
from pathlib import Path

import numpy as np


def digits_bytes() -> bytes:
    from sklearn.datasets import load_digits

    d = load_digits()
    pix = d.data.astype(np.uint8)
    if not np.array_equal(pix, d.data):
        raise SystemExit("digits pixels are not integers 0..16: scikit-learn changed the data")
    return np.concatenate([pix, d.target.astype(np.uint8)[:, None]], axis=1).tobytes()


def pydoc_text() -> str:
    import pydoc_data.topics as t

    return "\n\n".join(t.topics[k] for k in sorted(t.topics))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "accelsim/data/train")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    files = {"digits.u8.xz": digits_bytes(), "pydoc_topics.txt.xz": pydoc_text().encode("utf-8")}
    for name, raw in files.items():
        blob = lzma.compress(raw, preset=9)
        (args.out / name).write_bytes(blob)
        print(f"{name}: {len(raw):,} bytes raw, {len(blob):,} compressed, sha256 {hashlib.sha256(blob).hexdigest()}")
    print(f"(Python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
