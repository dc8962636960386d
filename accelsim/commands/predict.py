"""``accelsim predict``: one training iteration of a workload on a system (samples/s, step
time, TFLOP/s, memory) through the engine (:mod:`accelsim.engine`): a layer workload data
parallel over the system's chips, or a generated transformer workload under any plan -- the same
code ``accelsim llm`` runs."""

from __future__ import annotations

import argparse
import json
import sys
from accelsim.commands import _chakra, _plan, _report
from accelsim.commands._common import positive_int, scheme_choices

NAME = "predict"
HELP = ("Predict one data-parallel training iteration (batch B per chip): samples/s, step time, "
        "achieved TFLOP/s and memory per chip, with or without kernel fusion.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--system", required=True, metavar="FILE",
                        help="arch_configs/*.toml file or shipped name (e.g. a100-sxm)")
    parser.add_argument("--workload", required=True, metavar="NAME_OR_FILE",
                        help="workload TOML file or shipped name (e.g. resnet50), a SCALE-Sim "
                             "topology .csv, an ONNX graph .onnx (its batch dimension set "
                             "to --batch; needs the onnx extra), or chakra:DIR, a directory of "
                             "Chakra execution traces (docs/chakra.md)")
    parser.add_argument("--batch", type=positive_int, required=True, metavar="B",
                        help="samples per chip per iteration (a transformer plan: the "
                             "micro-batch, with --global-batch B x dp unless given)")
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
    _plan.add_arguments(
        parser, global_batch_required=False, optimizer_default="sgd-momentum",
        reserve_help="GiB per chip on top of the training tensors (CUDA context, communicator "
        "buffers, allocator slack; default 0: a bare tensor count, predict's stated stack; "
        "with --stack, the stack's: megatron 11.3, pytorch 0.4)",
        stack_default=None,
        stack_help="Default: none given, predict's stated stack -- megatron's kernels and "
        "no reserve, for a transformer workload and a layer list alike (a layer list's "
        "attention, LM head, fused element-wise layers and update run on the stack; its "
        "--fusion default stays the chip's). A transformer workload's fusion is its stack's "
        "(megatron fused, pytorch eager); a layer workload's --fusion default becomes the "
        "stack's")
    from accelsim.commands._common import add_power_arguments

    add_power_arguments(parser)
    from accelsim.commands._hardware import add_hardware_arguments

    add_hardware_arguments(parser)
    _report.add_arguments(parser)
    _chakra.add_arguments(parser, reads=True)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from accelsim.arch.config import load_policy, load_system
    from accelsim.arch.schemes import get_scheme, with_policy
    from accelsim.errors import UserError
    from accelsim.commands._common import require_precisions
    from accelsim.paths import resolve_input
    from accelsim.commands._common import (check_scheme_optimizer, datapath_note,
                                           load_workload_arg)
    from accelsim.engine import Options, Plan, simulate

    if _chakra.is_trace(args.workload):
        return _chakra.predict(args)
    from accelsim.commands._hardware import hardware_overrides, hardware_system

    spath = resolve_input(args.system, "system")
    system = hardware_system(load_system(spath), args)
    wpath = resolve_input(args.workload, "workload")
    if wpath.suffix.lower() == ".onnx":  # an ONNX graph takes the batch its inputs get
        from accelsim.workload.onnx_import import load_onnx

        workload = load_onnx(wpath, args.batch)
    else:
        workload = load_workload_arg(str(wpath))  # a TOML file or a SCALE-Sim topology CSV
    if args.winograd == "on" and not system.chip.has_hierarchy:
        raise UserError(f"--winograd on: system {spath} has no memory hierarchy "
                        "([[chip.level]]); Winograd convolutions are modelled only on "
                        "hierarchy (GPU) chips")
    from accelsim.engine.stack import get_stack

    fusion = args.fusion == "on" if args.fusion else (
        get_stack(args.stack).fused if args.stack else system.chip.default_fusion)
    if args.fusion is None and args.stack is None and fusion and workload.transformer is None:
        print(f"note: fusion on (the default on {system.name}: element-wise layers fused into "
              "GEMMs, as cuDNN/XLA/torch.compile do); the validated GPU ResNet-50 numbers run "
              "unfused as NVIDIA's DeepLearningExamples did (--fusion off; docs/perf.md)",
              file=sys.stderr)
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
    datapath = datapath_note(system, scheme)
    check_scheme_optimizer([scheme.name], args.optimizer)
    _report.check(args, inputs=[("--system", spath), ("--workload", wpath),
                                ("--policy", args.policy)])
    _chakra.check(args)
    if args.chakra is not None:
        _plan.refuse_overlap_with(args, "--chakra", "the export runs each collective whole, "
                                  "in line")
    from accelsim.commands._common import clock_text, power_system

    system, _ = power_system(system, spath, args, scheme.compute_precision)
    if workload.transformer is not None:
        r = _transformer(args, system, workload, scheme, fusion)
        out = _transformer_fields(r, system, workload, fused=get_stack(args.stack).fused if args.stack else True)
        out["model_flops_per_iteration"] = r.model_flops
        timeline = r.timeline
    else:
        unused = _plan.transformer_only_flags(args)
        if unused or args.micro_batch is not None or args.global_batch is not None \
                or (args.dp is not None and args.dp != system.chips):
            given = unused + [f for f, v in (("--micro-batch", args.micro_batch),
                                             ("--global-batch", args.global_batch),
                                             ("--dp", args.dp)) if v is not None]
            raise UserError(f"{', '.join(given)}: workload {wpath} is a layer list, trained "
                            f"data parallel over the system's {system.chips} chips at --batch "
                            "per chip; tensor/pipeline plans need a transformer workload "
                            "(accelsim workload gpt)")
        winograd = None if args.winograd is None else args.winograd == "on"
        r = simulate(system, workload,
                     Plan(tp=1, pp=1, dp=system.chips, micro_batch=args.batch,
                          global_batch=args.batch * system.chips, optimizer=args.optimizer),
                     scheme, Options(fusion=fusion, layout=args.layout, winograd=winograd,
                                     stack=_plan.params(args, reserve_default=0.0)))
        out = {**r.as_dict(), **_layer_energy(r, args.optimizer)}
        out["model_flops_per_iteration"] = r.model_flops
        timeline = r.timeline
    _report.write(args, r.rows(), timeline,
                  f"accelsim predict: {workload.name} on {system.name}, {scheme.name}")
    _chakra.export(args, r)
    from accelsim.engine.uncertainty import training_band

    band = (training_band(system, gpus=out["chips"], precision=scheme.compute_precision,
                          stack=args.stack or "megatron", seq=out["seq"], params=out["params"])
            if "tp" in out else
            training_band(system, gpus=system.chips, precision=scheme.compute_precision,
                          stack="layers"))
    out.update(band.as_dict())
    out["datapath"] = datapath  # the rate key its GEMMs ran at (the note says when not its own)
    if args.json:
        print(json.dumps(out))
    else:
        if not out["fits_memory"]:
            from accelsim.commands._common import not_fit_line

            print(not_fit_line(out["memory_GiB"], out["memory_capacity_GiB"], "chip",
                               "more --tp / --pp, --zero, --recompute or a smaller --batch"
                               if "tp" in out else "a smaller --batch"))
        how = (f"micro-batch {args.batch} per replica, tp {out['tp']} x pp {out['pp']} x dp "
               f"{out['dp']}, {out['optimizer']}" if "tp" in out else
               f"batch {args.batch}/chip, fusion {out['fusion']}, {out['optimizer']}")
        print(f"{out['system']} x {out['workload']} ({out['scheme']}, {how}): "
              f"{out['samples_per_s']:.0f} samples/s, step "
              f"{out['step_time_s'] * 1e3:.2f} ms, {out['tflops']:.1f} TFLOP/s, "
              f"{out['memory_GiB']:.1f} GiB per chip"
              + (f", at {out['clock_MHz']:.0f} MHz ({out['power_W']:.0f} W)"
                 if out.get("clock_MHz") else ""))
        if "tp" not in out:  # a layer list: its settings, defaults included
            print(f"  settings: optimizer {out['optimizer']}, stack {args.stack or 'megatron'}, "
                  f"fusion {out['fusion']}, layout "
                  f"{out['layout']}, winograd {out['winograd']}, memory reserve "
                  f"{out['memory_reserve_GiB']:g} GiB, network efficiency "
                  f"{system.network_efficiency:g}, power {out['power_W']:.0f} W "
                  f"({out['energy_J']:.3g} J per step), {clock_text(system)}"
                  + (f"; overridden: {hardware_overrides(args)}" if hardware_overrides(args)
                     else ""))
        else:
            print(f"  settings: optimizer {out['optimizer']}, stack "
                  f"{args.stack or 'megatron'}, fusion {out['fusion']}, memory reserve "
                  f"{out['memory_reserve_GiB']:g} GiB, network efficiency "
                  f"{system.network_efficiency:g}, {clock_text(system)}"
                  + (f"; overridden: {hardware_overrides(args)}" if hardware_overrides(args)
                     else ""))
        print(band.line())
    return 0


def _transformer(args, system, workload, scheme, fusion: bool):
    """A generated transformer workload through the engine's transformer path (what ``llm``
    runs): ``--batch`` is the micro-batch, dp defaults to the system's chips over tp x pp."""
    from accelsim.engine import Options, simulate
    from accelsim.errors import UserError

    for flag, v in (("--layout", args.layout), ("--winograd", args.winograd),
                    ("--first-last-high", args.first_last_high), ("--policy", args.policy)):
        if v is not None:
            raise UserError(f"{flag}: not used by a transformer workload (its GEMMs run at the "
                            "scheme's precision, attention in bf16)")
    if args.precision_override:
        raise UserError("--precision-override: not used by a transformer workload")
    params = _plan.params(args, reserve_default=0.0)
    if args.fusion is not None and fusion != params.stack.fused:
        raise UserError(f"--fusion {args.fusion}: a transformer workload's fusion is its "
                        f"stack's (--stack {params.stack.name}: "
                        f"{'fused' if params.stack.fused else 'eager, unfused'}; --stack "
                        f"{'pytorch' if params.stack.fused else 'megatron'} for the other)")
    if args.micro_batch is not None and args.micro_batch != args.batch:
        raise UserError(f"--micro-batch {args.micro_batch} != --batch {args.batch}: for a "
                        "transformer workload --batch is the micro-batch per replica (give one)")
    tp, pp = args.tp or 1, args.pp or 1
    split = tp * pp * args.cp  # the GPUs of one data-parallel replica
    if args.dp is None and system.chips % split:
        raise UserError(f"--tp {tp} x --pp {pp}" + (f" x --cp {args.cp}" if args.cp > 1 else "")
                        + f" does not divide the system's {system.chips} chips: give --dp")
    dp = args.dp or max(1, system.chips // split)
    micro = args.batch
    plan = _plan.build_plan(args, tp=tp, pp=pp, dp=dp, micro_batch=micro,
                            global_batch=args.global_batch or micro * dp)
    try:
        return simulate(system, workload, plan, scheme, Options(stack=params))
    except ValueError as exc:  # what the stack does not run (eager: no tp/pp; no FP8)
        raise UserError(f"--stack {params.stack.name}: {exc}") from None


def _transformer_fields(r, system, workload, *, fused: bool = True) -> dict:
    """predict's JSON fields for a transformer prediction (the plan and memory parts as llm
    names them)."""
    d = r.as_dict()
    gpus = r.plan.gpus
    from accelsim.commands._common import memory_fit

    out = {"system": system.name, "workload": workload.name, "scheme": d["scheme"],
           "optimizer": r.plan.optimizer, "batch": r.plan.micro_batch, "chips": gpus,
           "fusion": "on" if fused else "off", "samples_per_s": d["samples_per_s"],
           "step_time_s": d["iteration_time_s"],
           "tflops": d["tflops_per_gpu"] * gpus, "peak_tflops": r.peak_flops_per_gpu * gpus / 1e12,
           "memory_GiB": d["memory_GiB_per_gpu"], **memory_fit(system, d["memory_GiB_per_gpu"])}
    skip = {"iteration_time_s", "samples_per_s", "tflops_per_gpu", "memory_GiB_per_gpu",
            "scheme", "gpus"}
    out.update({k: v for k, v in d.items() if k not in skip})
    return out


def _layer_energy(r, optimizer: str) -> dict:
    """A layer workload's step energy and power, and the per-chip keys llm and infer print. A
    chip with a [chip.power] table: the engine's account over the step's rows
    (:func:`accelsim.engine.run.layer_step_energy`, the one the power limiter holds to the
    limit, as llm's and infer's); otherwise the account ``sweep`` and ``explore`` price the
    step with (:mod:`accelsim.dse.energy`, the 14 nm datapath table)."""
    from accelsim.dse.energy import step_energy, step_work
    from accelsim.engine.run import layer_step_energy

    st, system = r.step, r.system
    e = r.energy or layer_step_energy(r) if system.chip.power is not None else None
    if e is not None:
        energy_J, power_W = e.energy_J, e.power_W * system.chips
    else:
        d = step_energy(system, step_work(system, r.workload, r.scheme, st.minibatch),
                        st.step_s, st.minibatch)
        energy_J, power_W = d.energy_J, d.power_W
    return {"energy_J": energy_J, "power_W": power_W,
            "power_W_per_gpu": power_W / system.chips,
            "tflops_per_gpu": st.achieved_flops_per_s / system.chips / 1e12,
            "memory_GiB_per_gpu": r.memory_bytes / 2**30}
