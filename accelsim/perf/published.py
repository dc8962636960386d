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

#: OUT-OF-SAMPLE sweeps: GPUs no fitted parameter has seen (scripts/fit_compute.py reads only
#: GEMM_CASES, GEMM_SWEEPS and RESNET50_CASES above; nothing here is refitted). Crowd-sourced runs
#: of the same torch.mm script as the V100 sweep, on other GPUs; each issue title names the GPU
#: as torch.cuda.get_device_name() reports it. Each issue lists FP32, TF32, FP16 and BF16 at
#: n = 1024, 2048, 4096, 8192, 10240 (the version of test.py stored here times FP32, FP16, BF16
#: in that order, FP32 1024 first, right after start-up). FP32 is taken as true FP32 (PyTorch's
#: default, TF32 off): every FP32 result is below the FP32 CUDA-core peak and far below TF32.
@dataclass(frozen=True)
class OutOfSample(Measured):
    """A measurement on a GPU the fit never saw (``chip_in_fit`` False) or a control series: a
    new data set on a GPU the fit did see (``chip_in_fit`` True)."""

    chip_in_fit: bool = False


TORCH_PERF = ("zzc0721/torch-performance-test-data issue #{issue} '{gpu}' ({torch}; test.py: "
              "torch.mm of n x n matrices, 6 warm-up and 30 timed back-to-back calls, wall "
              "clock around a synchronize)")


def _torch_perf(issue: int, gpu: str, torch: str) -> str:
    return TORCH_PERF.format(issue=issue, gpu=gpu, torch=torch)


TORCH_PERF_H100_PCIE = _torch_perf(95, "NVIDIA H100 PCIe", "torch 2.9.0+cu128, physical machine")
TORCH_PERF_H800_PCIE = _torch_perf(112, "NVIDIA H800 PCIe", "torch 2.8.0+cu128, AutoDL cloud")
TORCH_PERF_A100_PCIE = _torch_perf(108, "NVIDIA A100-PCIE-40GB", "torch 2.8.0+cu128, AutoDL cloud")
TORCH_PERF_A40 = _torch_perf(185, "NVIDIA A40", "torch 2.11.0+cu128")
TORCH_PERF_H100_SXM = _torch_perf(79, "NVIDIA H100 80GB HBM3", "torch 2.7.0+cu128, docker")

_SIZES = (1024, 2048, 4096, 8192, 10240)


def _torch_runs(gpu, system, source, runs, *, chip_in_fit=False):
    """One series per precision of one torch.mm run: ``runs`` maps scheme -> 5 TFLOP/s values
    (n = 1024 .. 10240). ``chip_in_fit`` marks a control: new measurements of a GPU whose other
    measurements the fit used."""
    out = []
    for scheme, values in runs.items():
        label = f"{gpu} {scheme.upper()} torch.mm"
        out += [OutOfSample(f"{label} {n}^3", "gemm", system, scheme, v, "TFLOPS", source,
                            m=n, n=n, k=n, chip_in_fit=chip_in_fit)
                for n, v in zip(_SIZES, values, strict=True)]
    return tuple(out)


OOS_GEMM_SWEEPS = (
    *_torch_runs("H100 PCIe", "h100-pcie", TORCH_PERF_H100_PCIE, {
        "fp32": (27.44, 33.31, 36.51, 36.95, 35.80),
        "tf32": (91.00, 176.95, 234.80, 240.43, 225.65),
        "fp16": (201.71, 458.03, 457.32, 437.07, 449.65),
        "bf16": (217.70, 449.09, 495.93, 492.84, 471.79)}),
    # H800 PCIe: assumed to be the export variant of H100 PCIe with the same compute and memory
    # (narrower NVLink only); no stored H800 PCIe datasheet confirms it. Modelled with the
    # h100-pcie preset; a second, independent run (within 8 % of the H100 PCIe run at n >= 2048).
    *_torch_runs("H800 PCIe", "h100-pcie", TORCH_PERF_H800_PCIE, {
        "fp32": (27.62, 33.41, 37.22, 37.77, 36.60),
        "tf32": (99.71, 180.40, 237.09, 242.83, 229.82),
        "fp16": (159.05, 465.20, 478.23, 470.26, 462.26),
        "bf16": (170.73, 483.89, 503.83, 499.46, 487.22)}),
    *_torch_runs("A100 PCIe 40GB", "a100-pcie-40gb", TORCH_PERF_A100_PCIE, {
        "fp32": (8.99, 9.69, 15.52, 17.56, 16.67),
        "tf32": (61.02, 90.82, 108.32, 97.32, 102.05),
        "fp16": (83.66, 214.73, 241.49, 197.51, 205.66),
        "bf16": (94.89, 138.46, 234.14, 215.26, 211.72)}),
    *_torch_runs("A40", "a40", TORCH_PERF_A40, {
        "fp32": (17.05, 21.44, 23.01, 23.73, 22.82),
        "tf32": (38.65, 43.80, 54.88, 59.52, 59.39),
        "fp16": (85.02, 94.31, 113.51, 108.47, 119.18),
        "bf16": (82.35, 95.47, 115.16, 110.64, 122.29)}),
    # Control: the same script on an H100 SXM (a GPU the fit saw through other measurements).
    *_torch_runs("H100 SXM", "h100-sxm", TORCH_PERF_H100_SXM, {
        "fp32": (37.39, 49.58, 51.88, 51.81, 49.61),
        "tf32": (119.60, 334.99, 402.15, 372.05, 376.66),
        "fp16": (179.13, 645.12, 760.04, 736.19, 668.42),
        "bf16": (176.62, 676.59, 788.72, 797.51, 719.72)}, chip_in_fit=True),
)

#: OUT-OF-SAMPLE single shapes: the best shape of a MAMF scan (mean of 100 iterations after 50
#: warm-up ones per shape, a long sustained run) on GPUs the fit never saw, and controls (the
#: same table's later rows for GPUs the fit saw). The later revision of the MAMF table adds a
#: torch-version column; the fit used the older revision's A100/H100 SXM rows.
MAMF_LATER = ("stas00/ml-engineering, compute/accelerator/README.md, 'Maximum Achievable Matmul "
              "FLOPS comparison table', revision with a torch-version column (mean of 100 "
              "iterations after 50 warm-up ones per shape)")
OOS_GEMM_CASES = (
    OutOfSample("A100 PCIe BF16 MAMF 2304x5120x1536", "gemm", "a100-pcie-40gb", "bf16", 256.4,
                "TFLOPS", MAMF + "; 'NVIDIA A100 PCIe' row (40 or 80 GB not stated)",
                m=2304, n=5120, k=1536),
    OutOfSample("A100 PCIe BF16 MAMF 2048x5120x6144", "gemm", "a100-pcie-40gb", "bf16", 252.9,
                "TFLOPS", MAMF_LATER + "; BF16 'NVIDIA A100 PCIe' row, torch 2.5.1+cu124 (40 or "
                "80 GB not stated)", m=2048, n=5120, k=6144),
    OutOfSample("H200 FP8 MAMF 1280x4096x12032", "gemm", "h200-sxm", "fp8", 1453.4, "TFLOPS",
                MAMF_LATER + "; FP8 (float8_e4m3fn) 'NVIDIA H200 SXM' row, torch 2.7.1+cu128",
                m=1280, n=4096, k=12032),
    OutOfSample("A100 SXM BF16 MAMF 1024x10240x5120", "gemm", "a100-sxm", "bf16", 271.2,
                "TFLOPS", MAMF_LATER + "; BF16 'NVIDIA A100 SXM' row, torch 2.6.0+cu126",
                m=1024, n=10240, k=5120, chip_in_fit=True),
    OutOfSample("H100 SXM BF16 MAMF 2048x2048x13312", "gemm", "h100-sxm", "bf16", 794.5,
                "TFLOPS", MAMF_LATER + "; BF16 'NVIDIA H100 SXM' row, torch 2.7.0+cu126",
                m=2048, n=2048, k=13312, chip_in_fit=True),
    OutOfSample("H100 SXM FP8 MAMF 1024x9216x14336", "gemm", "h100-sxm", "fp8", 1402.6,
                "TFLOPS", MAMF_LATER + "; FP8 (float8_e4m3fn) 'NVIDIA H100 SXM' row, torch "
                "2.7.0+cu126", m=1024, n=9216, k=14336, chip_in_fit=True),
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

# --------------------------------------------------------------------------- fit rows and labels
#: Labels every validation row carries (docs/validation.md): ``fit`` (a fit script consumed it),
#: ``checked`` (held out from every fit), ``reference`` (reproduced by construction).
FIT, CHECKED, REFERENCE = "fit", "checked", "reference"

#: What ``scripts/fit_compute.py`` fits each global parameter on, stage by stage (the script
#: reads these tuples; tests/test_validation_labels.py re-derives them from its calls):
#: ``array_efficiency`` on the large GEMMs, ``kernel_launch_us`` on every GEMM case and sweep
#: point, ``memory_efficiency`` on the single-GPU ResNet-50 runs.
FIT_ARRAY_CASES: tuple[Measured, ...] = GEMM_CASES
FIT_LAUNCH_CASES: tuple[Measured, ...] = (*GEMM_CASES, *GEMM_SWEEPS)
FIT_MEMORY_CASES: tuple[Measured, ...] = tuple(c for c in RESNET50_CASES if c.single_chip)
#: Case names of every row some stage of the fit consumes.
FIT_CASES: frozenset[str] = frozenset(c.case for c in (*FIT_LAUNCH_CASES, *FIT_MEMORY_CASES))


def label(case: str) -> str:
    """``fit`` when ``scripts/fit_compute.py`` consumes the case (by name), else ``checked``."""
    return FIT if case in FIT_CASES else CHECKED


#: Datasheet peaks the presets must derive: precision -> (figure as printed, divisor), TFLOP/s or
#: TOP/s; divisor 2 where the datasheet prints the with-sparsity figure (dense = half of it).
DATASHEET_PEAKS = {
    "v100-sxm2": {"fp16": ("125", 1), "fp32": ("15.7", 1)},
    "a100-sxm": {"fp16": ("312", 1), "bf16": ("312", 1), "tf32": ("156", 1), "fp32": ("19.5", 1),
                 "int8": ("624", 1), "int4": ("1248", 1)},
    "h100-sxm": {"fp16": ("1979", 2), "bf16": ("1979", 2), "tf32": ("989", 2),
                 "fp8": ("3958", 2), "int8": ("3958", 2)},
    "dgx-a100": {"fp16": ("312", 1), "bf16": ("312", 1), "tf32": ("156", 1)},
    "h100-pcie": {"fp16": ("1513", 2), "bf16": ("1513", 2), "tf32": ("756", 2),
                  "fp8": ("3026", 2), "int8": ("3026", 2)},
    "a100-pcie-40gb": {"fp16": ("312", 1), "bf16": ("312", 1), "tf32": ("156", 1),
                       "fp32": ("19.5", 1), "int8": ("624", 1), "int4": ("1248", 1)},
    "h200-sxm": {"fp16": ("1979", 2), "bf16": ("1979", 2), "tf32": ("989", 2),
                 "fp8": ("3958", 2), "int8": ("3958", 2)},
    "a40": {"fp16": ("149.7", 1), "bf16": ("149.7", 1), "tf32": ("74.8", 1), "fp32": ("37.4", 1),
            "int8": ("299.3", 1), "int4": ("598.7", 1)},
    "dgx-h100": {"fp16": ("1979", 2), "bf16": ("1979", 2), "fp8": ("3958", 2)},
}
DATASHEETS = {
    "v100-sxm2": "NVIDIA Tesla V100 datasheet (SXM2): 125 TFLOPS tensor, 15.7 TFLOPS FP32",
    "a100-sxm": "NVIDIA A100 datasheet: FP32 19.5, TF32 156, BF16/FP16 312, INT8 624, INT4 1248",
    "h100-sxm": "NVIDIA H100 datasheet (SXM): TF32 989*, BF16/FP16 1,979*, FP8/INT8 3,958* "
                "(* with sparsity; dense is half)",
    "dgx-a100": "per GPU, as a100-sxm", "dgx-h100": "per GPU, as h100-sxm",
    "h100-pcie": "NVIDIA H100 datasheet (PCIe): TF32 756*, BF16/FP16 1,513*, FP8/INT8 3,026* "
                 "(* with sparsity; dense is half)",
    "a100-pcie-40gb": "NVIDIA A100 datasheet (40GB PCIe): FP32 19.5, TF32 156, BF16/FP16 312, "
                      "INT8 624, INT4 1248",
    "h200-sxm": "NVIDIA H200 datasheet (SXM): TF32 989*, BF16/FP16 1,979*, FP8/INT8 3,958* "
                "(* with sparsity; dense is half)",
    "a40": "NVIDIA A40 datasheet: FP32 37.4, TF32 74.8, BF16/FP16 149.7, INT8 299.3, "
           "INT4 598.7 (dense)",
}


def datasheet_tolerance(printed: str, divisor: int) -> float:
    """Half a unit of the printed figure's last digit (after the sparsity halving), or 0.05 %
    (NVIDIA prints 1247.5 as 1248), whichever is larger."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    value = float(printed) / divisor
    return max(0.5 * 10.0 ** -decimals / divisor, 5e-4 * value)
