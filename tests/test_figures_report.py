"""Report layer: figures and Markdown are drawn from finished tables (no model runs here).

The synthetic table is built from the training-step arithmetic with round numbers, so these tests
need neither the configs nor the explorer."""

from __future__ import annotations

import pandas as pd
import pytest

from accelsim.engine.schedule import CommPhases, ComputeProfile, combine
from accelsim.report import figures as F

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def table():
    rows = []
    for s in ("fp16", "fp8", "hfp8"):
        c = 2e-3 if s == "fp16" else 1e-3
        prof = ComputeProfile(s, 512, c / 3, c / 3, c / 3, 512 * 24.6e9, 4e15)
        for link in (32.0, 64.0, 128.0):
            for comp in (1.0, 32.0, 256.0):
                a = 1e-3 * 32 / link
                st = combine(prof, CommPhases(a / comp, a / (2 if s == "hfp8" else 1),
                                              2e-4 if s == "hfp8" else 4e-4))
                rows.append({"chip_GBps": link, "compression": comp, **st.as_row()})
    return pd.DataFrame(rows)


def test_each_figure_is_a_png(tmp_path, table):
    paths = [
        F.plot_throughput(table, tmp_path / "a.png", engine="analytic"),
        F.plot_compression_sweep(table, tmp_path / "b.png"),
        F.plot_comm_breakdown(table, tmp_path / "c.png", compressions=(1.0, 256.0)),
        F.plot_measured_vs_predicted(
            pd.DataFrame({"case": ["1 GPU", "8 GPUs"], "published": [1200.0, 8322.0],
                          "predicted": [1100.0, 8000.0]}), tmp_path / "d.png", title="t"),
    ]
    for p in paths:
        data = p.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_missing_columns_and_rows_are_clear_errors(tmp_path, table):
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['samples_per_s'\]"):
        F.plot_throughput(table.drop(columns="samples_per_s"), tmp_path / "x.png")
    with pytest.raises(ValueError, match="no rows with compression == 64"):
        F.plot_comm_breakdown(table, tmp_path / "x.png", compressions=(64.0,))


def test_markdown_table_shape_and_formatting():
    df = pd.DataFrame({"name": ["a", "b"], "value": [1.23456, float("nan")], "n": [1, 2]})
    md = F.markdown_table(df, floatfmt=".2f").splitlines()
    assert md[0] == "| name | value | n |"
    assert md[1] == "|---|---|---|"
    assert md[2] == "| a | 1.23 | 1 |"
    assert md[3] == "| b |  | 2 |"
