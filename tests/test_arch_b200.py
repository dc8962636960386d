"""The B200 preset and the block-scaled precisions: datasheet dense peaks (NVIDIA DGX/HGX B200
datasheets: BF16 2,250, FP8 4,500, FP4 9,000 TFLOPS), the `accelsim gemm` contract of issue 25,
scale bytes in the memory model, and the wider-datapath fallback on chips without MX/NVFP4."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelsim.arch import load_system
from accelsim.arch.model import OPERAND_BYTES, PRECISIONS
from accelsim.arch.schemes import get_scheme
from accelsim.perf.gemm import OPERAND_BYTES as PERF_BYTES
from accelsim.perf.gemm import gemm_time

REPO = Path(__file__).resolve().parents[1]
DATASHEET = {"bf16": 2250, "fp16": 2250, "fp8": 4500, "mxfp8": 4500, "mxfp6": 4500, "int8": 4500,
             "fp4": 9000, "mxfp4": 9000, "nvfp4": 9000}


def _load(name):
    return load_system(REPO / "arch_configs" / f"{name}.toml")


@pytest.mark.parametrize("precision,tflops", DATASHEET.items())
def test_b200_peaks_equal_datasheet(precision, tflops):
    assert _load("b200").chip.peak_flops(precision) / 1e12 == pytest.approx(tflops, rel=1e-3)


def test_b200_memory_and_links():
    s = _load("b200")
    assert s.chip.memory_bandwidth_Bps == pytest.approx(8e12)
    assert s.link.chip_bandwidth_Bps == pytest.approx(900e9)  # 1.8 TB/s bidirectional
    assert s.chip.cores == 148


@pytest.mark.parametrize("scheme,tflops", [("bf16", 2250), ("fp8", 4500), ("nvfp4", 9000)])
def test_gemm_command_reports_datasheet_peak(scheme, tflops):
    out = subprocess.run([sys.executable, "-m", "accelsim", "gemm", "--system", "b200", "--m", "16384",
                          "--n", "16384", "--k", "16384", "--scheme", scheme, "--json"],
                         capture_output=True, text=True, check=True, cwd=REPO)
    d = json.loads(out.stdout)
    assert abs(d["peak_tflops"] - tflops) <= 0.1 * tflops
    assert 0 < d["tflops"] < d["peak_tflops"]
    assert d["datapath"] == get_scheme(scheme).compute_precision


def test_scale_bytes_count_in_memory():
    assert OPERAND_BYTES is PERF_BYTES and set(OPERAND_BYTES) == set(PRECISIONS)
    assert OPERAND_BYTES["mxfp8"] == 1 + 1 / 32 and OPERAND_BYTES["nvfp4"] == 0.5 + 1 / 16
    s = _load("b200")
    g4, g8 = gemm_time(s, 4096, 4096, 4096, "nvfp4"), gemm_time(s, 4096, 4096, 4096, "mxfp8")
    assert g4.compulsory_bytes == pytest.approx(3 * 4096 * 4096 * (0.5 + 1 / 16))
    assert g8.compulsory_bytes == pytest.approx(3 * 4096 * 4096 * (1 + 1 / 32))


def test_chip_without_block_datapath_runs_the_next_wider():
    core = _load("h100-sxm").chip.core
    assert core.datapath("nvfp4") == "fp8" and core.datapath("mxfp6") == "fp8"
    assert core.peak_flops("nvfp4") == core.peak_flops("fp8")
    out = subprocess.run([sys.executable, "-m", "accelsim", "gemm", "--system", "h100-sxm", "--m", "1024",
                          "--n", "1024", "--k", "1024", "--scheme", "mxfp4"],
                         capture_output=True, text=True, check=True, cwd=REPO)
    assert "note: h100-sxm has no mxfp4 datapath; it runs at its fp8 rate" in out.stderr
    v100 = _load("v100-sxm2").chip.core  # every config has an fp8 rate (required): the last resort
    assert v100.datapath("nvfp4") == "fp8"
    assert _load("b200").chip.core.datapath("nvfp4") == "nvfp4"


@pytest.mark.parametrize("name", ["mxfp8", "mxfp4", "nvfp4"])
def test_block_schemes(name):
    sc = get_scheme(name)
    assert sc.compute_precision == name and sc.high_precision == "bf16"
    assert sc.compute_copy_bytes == OPERAND_BYTES[name]
