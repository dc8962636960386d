"""Published GPU measurements the compute model is validated against (each with its source).

Used by ``scripts/fit_compute.py`` (fits the two global :class:`accelsim.perf.gemm.Efficiency`
parameters), ``scripts/validate_compute.py`` (writes ``reports/compute_validation.*``) and the
tests. Nothing here is an input to the model: these are the answers it is checked against.
"""

from __future__ import annotations

from dataclasses import dataclass

DLE_RN50 = ("NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "
            "'Training performance results' (pytorch-21.03 NGC container); batch sizes from "
            "PyTorch/Classification/ConvNets/configs.yml (DGX1V FP32 112, AMP 256; DGXA100 TF32 "
            "and AMP 256; memory_format nhwc for AMP only, so the FP32/TF32 runs keep PyTorch's "
            "default NCHW)")
MAMF = ("stas00/ml-engineering, compute/accelerator/README.md, 'Maximum Achievable Matmul FLOPS "
        "comparison table' (BF16 torch.matmul, best shape of a scan, CUDA 12.1)")
V100_SGEMM = ("yhgon/benchmark, tensorcore/readme.md: cuBLAS SGEMM 8192^3 on Tesla V100 SXM2 at "
              "1530 MHz application clock, CUDA 9.2: 13.70 TFLOPS")
H800_FP8 = ("deepseek-ai/DeepGEMM pull request #81 (H800 SXM, CUDA 12.8.1; H800 = H100 SXM "
            "compute, 132 SMs): FP8 block-scaled GEMM 4096x7168x16384, base 128x160 tiles: "
            "1451 TFLOPS")


@dataclass(frozen=True)
class Measured:
    """One published measurement: a GEMM (TFLOP/s) or a ResNet-50 training run (images/s)."""

    case: str
    kind: str  # "gemm" | "resnet50"
    system: str  # arch_configs/<system>.toml
    scheme: str
    value: float
    unit: str  # "TFLOPS" | "img/s"
    source: str
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 0  # per GPU
    fusion: str = "off"  # what the measured framework did (PyTorch eager: no BN/ReLU/add fusion)
    layout: str = "nhwc"  # activation layout of the run (configs.yml memory_format; default NCHW)
    single_chip: bool = True


GEMM_CASES = (
    Measured("V100 SGEMM 8192^3", "gemm", "v100-sxm2", "fp32", 13.70, "TFLOPS", V100_SGEMM,
             m=8192, n=8192, k=8192),
    Measured("A100 BF16 MAMF 6912x16384x2048", "gemm", "a100-sxm", "bf16", 267.9, "TFLOPS", MAMF,
             m=6912, n=16384, k=2048),
    Measured("H100 BF16 MAMF 6144x17920x2816", "gemm", "h100-sxm", "bf16", 792.1, "TFLOPS", MAMF,
             m=6144, n=17920, k=2816),
    Measured("H100 FP8 4096x7168x16384", "gemm", "h100-sxm", "fp8", 1451.0, "TFLOPS", H800_FP8,
             m=4096, n=7168, k=16384),
)

#: Published GEMM sweeps, small to large squares (M = N = K = n), for the size trend. Reported
#: per point by ``scripts/validate_compute.py``; not used by the fit (the fit takes the large,
#: compute-bound GEMMs above).
TORCH_PERF_V100 = ("zzc0721/torch-performance-test-data issue #140 'Tesla V100-SXM2-16GB' "
                   "(torch 2.7.0+cu128; test.py: torch.mm of n x n matrices, 6 warm-up and 30 "
                   "timed back-to-back calls, wall clock around a synchronize)")
XLA_H100 = ("openxla (tensorflow/tensorflow third_party/xla) xla/service/gpu/model/"
            "matmul_interpolator_data.h @372d578, kDefaultMatmulPTable key sm_90 (H100), "
            "entry b=1 m=n=k, 'bf16xbf16->bf16' flops")


def _sweep(label, system, scheme, source, points, unit="TFLOPS"):
    return tuple(Measured(f"{label} {n}^3", "gemm", system, scheme, v, unit, source,
                          m=n, n=n, k=n) for n, v in points)


GEMM_SWEEPS = (
    *_sweep("V100 FP32 torch.mm", "v100-sxm2", "fp32", TORCH_PERF_V100,
            ((1024, 10.56), (2048, 12.71), (4096, 13.85), (8192, 14.38), (10240, 14.51))),
    *_sweep("V100 FP16 torch.mm", "v100-sxm2", "fp16", TORCH_PERF_V100,
            ((1024, 57.30), (2048, 78.23), (4096, 95.73), (8192, 97.36), (10240, 89.37))),
    *_sweep("H100 BF16 XLA", "h100-sxm", "bf16", XLA_H100,
            ((512, 40.721398058252), (2048, 631.984593290170), (4096, 783.328793548203))),
)

RESNET50_CASES = (
    Measured("V100 ResNet-50 FP32 b112", "resnet50", "v100-sxm2", "fp32", 367.0, "img/s",
             DLE_RN50 + "; DGX-1 16GB table, 1 GPU, FP32", batch=112, layout="nchw"),
    Measured("V100 ResNet-50 AMP b256", "resnet50", "v100-sxm2", "fp16", 1200.0, "img/s",
             DLE_RN50 + "; DGX-1 16GB table, 1 GPU, mixed precision", batch=256),
    Measured("A100 ResNet-50 TF32 b256", "resnet50", "a100-sxm", "tf32", 938.0, "img/s",
             DLE_RN50 + "; DGX A100 80GB table, 1 GPU, TF32", batch=256, layout="nchw"),
    Measured("A100 ResNet-50 AMP b256", "resnet50", "a100-sxm", "fp16", 2470.0, "img/s",
             DLE_RN50 + "; DGX A100 80GB table, 1 GPU, mixed precision", batch=256),
    Measured("DGX A100 ResNet-50 TF32 8x256", "resnet50", "dgx-a100", "tf32", 7248.0, "img/s",
             DLE_RN50 + "; DGX A100 80GB table, 8 GPUs, TF32", batch=256, layout="nchw",
             single_chip=False),
    Measured("DGX A100 ResNet-50 AMP 8x256", "resnet50", "dgx-a100", "fp16", 16621.0, "img/s",
             DLE_RN50 + "; DGX A100 80GB table, 8 GPUs, mixed precision", batch=256,
             single_chip=False),
)

#: Datasheet peaks the presets must derive: precision -> (figure as printed, divisor), TFLOP/s or
#: TOP/s; divisor 2 where the datasheet prints the with-sparsity figure (dense = half of it).
DATASHEET_PEAKS = {
    "v100-sxm2": {"fp16": ("125", 1), "fp32": ("15.7", 1)},
    "a100-sxm": {"fp16": ("312", 1), "bf16": ("312", 1), "tf32": ("156", 1), "fp32": ("19.5", 1),
                 "int8": ("624", 1), "int4": ("1248", 1)},
    "h100-sxm": {"fp16": ("1979", 2), "bf16": ("1979", 2), "tf32": ("989", 2),
                 "fp8": ("3958", 2), "int8": ("3958", 2)},
    "dgx-a100": {"fp16": ("312", 1), "bf16": ("312", 1), "tf32": ("156", 1)},
    "dgx-h100": {"fp16": ("1979", 2), "bf16": ("1979", 2), "fp8": ("3958", 2)},
}
DATASHEETS = {
    "v100-sxm2": "NVIDIA Tesla V100 datasheet (SXM2): 125 TFLOPS tensor, 15.7 TFLOPS FP32",
    "a100-sxm": "NVIDIA A100 datasheet: FP32 19.5, TF32 156, BF16/FP16 312, INT8 624, INT4 1248",
    "h100-sxm": "NVIDIA H100 datasheet (SXM): TF32 989*, BF16/FP16 1,979*, FP8/INT8 3,958* "
                "(* with sparsity; dense is half)",
    "dgx-a100": "per GPU, as a100-sxm", "dgx-h100": "per GPU, as h100-sxm",
}


def datasheet_tolerance(printed: str, divisor: int) -> float:
    """Half a unit of the printed figure's last digit (after the sparsity halving), or 0.05 %
    (NVIDIA prints 1247.5 as 1248), whichever is larger."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    value = float(printed) / divisor
    return max(0.5 * 10.0 ** -decimals / divisor, 5e-4 * value)
