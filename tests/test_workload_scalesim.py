"""SCALE-Sim topology CSV reader: SCALE-Sim's shapes, its tolerance of trailing commas, errors."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from accelsim.arch import ConfigError
from accelsim.workload import read_scalesim_topology

DATA = Path(__file__).resolve().parent / "data" / "scalesim"
CSV = DATA / "resnet50_scalesim_topology.csv"
HEADER = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
          "Num Filter, Strides,\n")


#: sha256 of SCALE-Sim v3's topologies/conv_nets/Resnet50.csv as cleaned in ../shared/data/scalesim
#: (tests/data/scalesim/README.md): the copy here is pinned, so no test needs ../shared
CSV_SHA256 = "b2f90d32854ff7aeee441b188074cd9253bd61f3f1cc1f039080dd5730a0ac79"


def test_copy_is_the_pinned_shared_data():
    assert hashlib.sha256(CSV.read_bytes()).hexdigest() == CSV_SHA256


def test_resnet50_topology():
    w = read_scalesim_topology(CSV)
    assert len(w.layers) == 54 and w.name == "resnet50_scalesim_topology"
    assert all(layer.kind == "conv" and layer.shape_mode == "scalesim" for layer in w.layers)
    conv1 = w.layers[0]
    # SCALE-Sim: no padding, ofmap = ceil((224 - 7 + 2) / 2) = 110
    assert (conv1.out_h, conv1.out_w) == (110, 110)
    assert conv1.gemms(1)["fwd"].M == 110 * 110 and conv1.gemms(1)["fwd"].K == 7 * 7 * 3
    cb3s = w.layer("CB3s")  # 1x1 stride 2 on 56x56: SCALE-Sim rounds up to 29
    assert cb3s.out_h == 29
    fc = w.layers[-1]
    assert fc.name == "FC6" and fc.gemms(1)["fwd"].M == 1 and fc.gemms(1)["fwd"].K == 2048
    # MAC count is SCALE-Sim's num_mac = ofmap_h*ofmap_w*filt_h*filt_w*ch*num_filt
    for layer in w.layers:
        oh = math.ceil((layer.in_h - layer.kernel_h + layer.stride_h) / layer.stride_h)
        assert layer.gemms(1)["fwd"].macs == (oh * oh * layer.kernel_h * layer.kernel_w
                                             * layer.in_channels * layer.out_channels)


def test_tolerates_spaces_blank_lines_and_no_trailing_comma(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(HEADER + "\n  L1 , 8, 8 ,3,3, 4, 16, 1 ,\n\nL2,8,8,1,1,16,8,2\nL3,4,4,1,1,8,8,1,2:4,\n")
    w = read_scalesim_topology(p)
    assert [layer.name for layer in w.layers] == ["L1", "L2", "L3"]
    assert w.layers[0].out_h == 6 and w.layers[1].out_h == 5  # ceil((8 - 1 + 2) / 2)
    assert not w.layers[0].input_grad and w.layers[1].input_grad


def test_depthwise_layers_split_per_channel_like_scalesim(tmp_path):
    p = tmp_path / "dw.csv"
    p.write_text(HEADER + "DP1,8,8,3,3,3,1,1,\n")
    w = read_scalesim_topology(p)
    assert [layer.name for layer in w.layers] == ["DP1Channel_0", "DP1Channel_1", "DP1Channel_2"]
    assert all(layer.in_channels == 1 for layer in w.layers)


@pytest.mark.parametrize("body, where", [
    ("L1,8,8,3,3,4,sixteen,1,\n", "row 2, column 'Num Filter'"),
    ("L1,8,8,3,3,4,16,0,\n", "row 2, column 'Strides'"),
    ("L1,8,8,3,3,4,16,\n", "row 2"),
    ("L1,8,8,3,3,4,16,1,\nL2,2,8,3,3,4,16,1,\n", "row 3, column 'Filter Height'"),
    ("L1,8,8,3,3,4,16,1,\n,8,8,3,3,4,16,1,\n", "row 3, column 'Layer name'"),
    ("", "row 2"),
])
def test_errors_name_file_row_and_column(tmp_path, body, where):
    p = tmp_path / "bad.csv"
    p.write_text(HEADER + body)
    with pytest.raises(ConfigError) as exc:
        read_scalesim_topology(p)
    assert exc.value.key == where, str(exc.value)
    assert str(exc.value).startswith(str(p))


def test_bad_header_and_missing_file(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("name,h,w\nL1,1,1\n")
    with pytest.raises(ConfigError, match="row 1"):
        read_scalesim_topology(p)
    with pytest.raises(ConfigError, match="file not found"):
        read_scalesim_topology(tmp_path / "nope.csv")
