"""``accelsim predict``: one training iteration of a workload on a system (samples/s, step
time, TFLOP/s, memory), from the compute model plus the gradient-reduction model."""

from __future__ import annotations

import argparse
import json
import sys

from accelsim.commands._common import positive_int, scheme_choices

NAME = "predict"
HELP = ("Predict one data-parallel training iteration (batch B per chip): samples/s, step time, "
        "achieved TFLOP/s and memory per chip, with or without kernel fusion.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--system", required=True, metavar="FILE",
                        help="arch_configs/*.toml file or shipped name (e.g. a100-sxm)")
    parser.add_argument("--workload", required=True, metavar="NAME_OR_FILE",
                        help="workload TOML file or shipped name (e.g. resnet50)")
    parser.add_argument("--batch", type=positive_int, required=True, metavar="B",
                        help="samples per chip per iteration")
    parser.add_argument("--scheme", choices=scheme_choices(), default="fp16",
                        help="training scheme")
    parser.add_argument("--fusion", choices=("on", "off"), default=None,
                        help="fuse element-wise layers into GEMMs (default: on for a chip with "
                             "a memory hierarchy, as cuDNN/XLA/torch.compile do; else the "
                             "config's chip.fusion)")
    parser.add_argument("--layout", choices=("nhwc", "nchw"), default=None,
                        help="activation layout the framework keeps (default: the config's "
                             "chip.layout, nhwc); nchw makes tensor-core convolutions transpose")
    parser.add_argument("--winograd", choices=("on", "off"), default=None,
                        help="let 3x3 stride-1 convolutions use Winograd where the model finds "
                             "it faster, as cuDNN's benchmark mode (default: the config's "
                             "chip.winograd; on in the GPU presets). FP32/TF32/FP16 "
                             "convolutions only; needs a chip with [[chip.level]]")
    parser.add_argument("--first-last-high", choices=("on", "off"), default=None,
                        help="first/last GEMM layer in high precision (default: the scheme's)")
    parser.add_argument("--policy", default=None, metavar="FILE",
                        help="precision policy TOML ([policy] first_last_high, high_precision, "
                             "[policy.layers] NAME = PRECISION); flags below override it")
    parser.add_argument("--precision-override", action="append", default=[],
                        metavar="LAYER=PREC", help="per-layer compute precision (repeatable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def predict_step(system, workload, batch: int, scheme, *, fusion: bool,
                 layout: str | None = None, efficiency=None,
                 winograd: bool | None = None) -> dict:
    """One training iteration of ``workload`` at ``batch`` per chip on ``system`` (kernel fusion
    on/off; activation ``layout`` and ``winograd`` None = the config's; ``winograd=True`` needs
    a chip with a memory hierarchy, else ValueError): the compute model
    (:func:`accelsim.perf.step.phase_sums`) plus the gradient reduction and weight update of
    :mod:`accelsim.dse.step`. Returns the JSON fields."""
    from accelsim.arch.schemes import get_scheme
    from accelsim.dse.step import CommPhases, ComputeProfile, TrainingParams, combine
    from accelsim.dse.step import comm_phases
    from accelsim.perf.gemm import FITTED
    from accelsim.perf.step import phase_sums

    eff = FITTED if efficiency is None else efficiency
    system = system.with_fusion(fusion)
    if layout is not None:
        system = system.with_layout(layout)
    if winograd is not None:
        system = system.with_winograd(winograd)
    scheme = get_scheme(scheme)
    ps = phase_sums(system, workload, batch, scheme, efficiency=eff)
    minibatch = batch * system.chips
    profile = ComputeProfile(scheme=scheme.name, minibatch=minibatch, fwd_s=ps.fwd_s,
                             bwd_data_s=ps.bwd_data_s, wgrad_s=ps.wgrad_s, flops=ps.flops,
                             peak_flops=system.peak_flops(scheme.compute_precision),
                             elementwise_s=ps.elementwise_s)
    params = TrainingParams(minibatch=minibatch, memory_efficiency=eff.memory_efficiency)
    if workload.n_params == 0:  # nothing to reduce or update (e.g. a workload of matmuls)
        comm = CommPhases(0.0, 0.0, 0.0, 0.0)
    else:
        comm = comm_phases(system, workload, scheme, params)
    st = combine(profile, comm, overlap=params.overlap)
    return {
        "system": system.name, "workload": workload.name, "scheme": scheme.name,
        "batch": batch, "chips": system.chips, "fusion": "on" if fusion else "off",
        "layout": system.chip.layout, "winograd": "on" if system.chip.winograd else "off",
        "samples_per_s": st.samples_per_s, "step_time_s": st.step_s,
        "tflops": st.achieved_flops_per_s / 1e12, "peak_tflops": st.peak_flops_per_s / 1e12,
        "memory_GiB": ps.memory_bytes / 2**30,
        "memory_capacity_GiB": system.chip.memory_capacity_bytes / 2**30,
        "fits_memory": bool(ps.memory_bytes <= system.chip.memory_capacity_bytes),
        "compute_s": st.compute_s, "fwd_s": st.fwd_s, "bwd_data_s": st.bwd_data_s,
        "wgrad_s": st.wgrad_s, "elementwise_s": st.elementwise_s, "launch_s": ps.launch_s,
        "comm_s": st.comm_s, "exposed_comm_s": st.exposed_comm_s,
        "weight_update_s": st.weight_update_s, "dataflow": ps.dataflow,
    }


def run(args: argparse.Namespace) -> int:
    from accelsim.arch.config import load_policy, load_system
    from accelsim.arch.model import PRECISIONS
    from accelsim.arch.schemes import get_scheme, with_policy
    from accelsim.errors import UserError
    from accelsim.commands._common import require_precisions
    from accelsim.paths import resolve_input
    from accelsim.workload import load_workload

    spath = resolve_input(args.system, "system")
    system = load_system(spath)
    wpath = resolve_input(args.workload, "workload")
    workload = load_workload(wpath)
    if args.winograd == "on" and not system.chip.has_hierarchy:
        raise UserError(f"--winograd on: system {spath} has no memory hierarchy "
                        "([[chip.level]]); Winograd convolutions are modelled only on "
                        "hierarchy (GPU) chips")
    fusion = args.fusion == "on" if args.fusion else (system.chip.fusion
                                                      or system.chip.has_hierarchy)
    overrides = {}
    for item in args.precision_override:
        name, sep, prec = item.partition("=")
        if not sep or not name or not prec:
            raise UserError(f"--precision-override {item!r}: expected LAYER=PRECISION")
        overrides[name] = prec
    first_last = None if args.first_last_high is None else args.first_last_high == "on"
    scheme = get_scheme(args.scheme) if args.policy is None else load_policy(args.policy, args.scheme)
    given = [x for x in (args.policy, "--precision-override" if overrides else None) if x]
    src = f"{' + '.join(given)} (workload {wpath})"
    scheme = with_policy(scheme, first_last_high=first_last,
                         overrides={**dict(scheme.layer_overrides), **overrides},
                         source=src)
    require_precisions(system, spath, [scheme.compute_precision, scheme.high_precision,
                                       *overrides.values()], f"--scheme {args.scheme}")
    core = system.chip.core
    cp = scheme.compute_precision
    # PRECISIONS runs from wide to narrow: the note is for a narrower scheme (fp8 beside fp16)
    # that the chip computes no faster, never for fp32/tf32/bf16 beside the fp16 default
    narrower = PRECISIONS.index(cp) > PRECISIONS.index(scheme.high_precision)
    if narrower and core.supports(scheme.high_precision) and \
            core.macs_per_cycle_per_pe(cp) <= core.macs_per_cycle_per_pe(scheme.high_precision):
        print(f"note: {system.name} computes {cp} no faster than {scheme.high_precision} (its "
              f"config has no faster {cp} datapath); any gain over {scheme.high_precision} comes "
              f"from {cp}'s smaller tensors in memory", file=sys.stderr)
    winograd = None if args.winograd is None else args.winograd == "on"
    out = predict_step(system, workload, args.batch, scheme, fusion=fusion, layout=args.layout,
                       winograd=winograd)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['system']} x {out['workload']} ({out['scheme']}, batch {args.batch}/chip, "
              f"fusion {out['fusion']}): {out['samples_per_s']:.0f} samples/s, step "
              f"{out['step_time_s'] * 1e3:.2f} ms, {out['tflops']:.1f} TFLOP/s, "
              f"{out['memory_GiB']:.1f} GiB per chip")
        if not out["fits_memory"]:
            print(f"warning: needs {out['memory_GiB']:.1f} GiB per chip > "
                  f"{out['memory_capacity_GiB']:g} GiB of memory (lower --batch)", file=sys.stderr)
    return 0
