"""`accelsim formats` writes the format table and the precision plot; numerics stays light."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd

from accelsim.cli import main


def test_formats_command_writes_table_and_plot(tmp_path, capsys):
    assert main(["formats", "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "| hif8 | 8 |" in out and "2^-22" in out
    df = pd.read_csv(tmp_path / "r" / "formats.csv")
    row = df.set_index("format").loc
    assert row["e4m3fn", "max"] == 448 and row["hfp8-143", "max"] == 30
    assert row["hif8", "finite_codes"] == 253 and row["hif8", "binades"] == 38
    assert row["dlfloat16", "max"] == 2.0**32 * (1 + 510 / 512)
    md = (tmp_path / "r" / "formats.md").read_text()
    assert "Precision per binade" in md
    png = (tmp_path / "r" / "formats_precision.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_formats_out_must_be_a_directory(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["formats", "--out", str(f)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_numerics_import_is_light():
    code = ("import sys, accelsim.numerics; "
            "bad = [m for m in ('matplotlib', 'pandas', 'simpy', 'networkx') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
