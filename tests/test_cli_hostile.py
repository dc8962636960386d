"""Hostile command lines: each gives one line on stderr naming the flag/path/value, a non-zero
exit and no traceback, before any long computation. One parametrized table (the README counts
its cases)."""

from __future__ import annotations

import pytest

from accelsim.cli import main


@pytest.fixture()
def afile(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    return f


# (argv with {afile} / {tmp} placeholders, exit code, fragment of the one-line error)
CASES = [
    ("systolic --workload tiny-cnn --rows 8 --cols 8 --out {afile}/x.csv", 2, "is not a directory"),
    ("systolic --workload tiny-cnn --rows 8 --cols 8 --out {tmp}", 2, "is a directory"),
    ("layers tiny-cnn --csv {afile}/x.csv", 2, "--csv"),
    ("layers tiny-cnn --csv {tmp}", 2, "is a directory"),
    ("figures --out {afile}", 2, "exists and is not a directory"),
    ("sweep --out {afile}/x.csv --set workload=tiny-cnn --executor serial", 2, "--out"),
    ("sweep --out {tmp} --set workload=tiny-cnn --executor serial", 2, "is a directory"),
    ("formats --out {afile}/d", 2, "is not a directory"),
    ("swamping --out {tmp} --max-k 1099511627776", 2, "--max-k 1099511627776 needs about"),
    ("swamping --out {tmp} --reps 100000000", 2, "--reps 100000000"),
    ("explore --system hfp8-64chip --workload tiny-cnn --batch 64 --top -1", 2, "--top"),
    ("comm --per-tensor-overhead-us nan", 2, "--per-tensor-overhead-us"),
    ("comm --chip-GBps inf", 2, "--chip-GBps"),
    ("comm --link-GBps 0", 2, "--link-GBps"),
    ("comm --chip-GBps 32 --link-GBps 4", 2, "not allowed with"),
    ("comm --workload nosuch", 2, "workload not found: 'nosuch'"),
    ("comm --config nosuch", 2, "system not found: 'nosuch'"),
    ("layers nosuch", 2, "shipped workloads in workloads/"),
    ("sweep --out {tmp}/x.csv --set chip.core.rows=16", 2, "chip.core.rows"),
    ("sweep --out {tmp}/x.csv --axis scheme=fp9", 2, "scheme='fp9'"),
    ("sweep --out {tmp}/x.csv --set workload=nosuch", 2, "workload not found"),
    ("sweep --out {tmp}/x.csv --set chip_GBps=32 --set inter_board_GBps=4", 2, "chip_GBps splits"),
    ("plot {tmp}/none.csv --x a --y b --out {tmp}/p.png", 2, "no such file"),
    ("plot {tmp} --x a --y b --out {tmp}/p.png", 2, "not a regular file (a table was expected)"),
    ("systolic --workload tiny-cnn --rows 1000000000000 --cols 1000000000000", 2,
     "argument --rows: must be an integer in [1, 65,536], got '1000000000000'"),
    ("collective --topology dgx1 --op all-reduce --bytes 100000000 --engine des --packet-bytes 1",
     2, "29,166,676 packets (limit 1,000,000)"),
    ("collective --topology ring --chips 8 --op all-reduce --bytes 1000 --alpha-us inf", 2,
     "--alpha-us"),
    ("sweep --axis link_GBps=1:1000000000:1 --out {tmp}/x.csv --dry-run", 2,
     "1,000,000,000 values, over the limit of 100,000"),
    ("sweep --file {tmp} --out {tmp}/x.csv", 2, "is a directory, not a sweep file"),
    ("comm --chip-GBps -1", 2, "accelsim comm: error: argument --chip-GBps"),
    ("sweep --axsi chip_GBps=32 --out {tmp}/e.csv", 2, "accelsim sweep: error: unrecognized"),
    ("train --recipe fp32 --model mlp --dataset digits --steps 2 --batch-size 100000", 2,
     "larger than the 1438 training samples"),
    ("llm --system dgx-h100 --layers 2 --hidden 64 --heads 2 --seq 16 --vocab 128 --search "
     "--gpus 7 --global-batch 16 --scheme bf16", 2, "none of"),
    # issue 21 item 8/9: every flag names itself, the value and the allowed range
    ("gemm --system h100-sxm --m 99999999999999999999 --n 8 --k 8", 2,
     "argument --m: must be an integer in [1, 2,147,483,647], got '99999999999999999999'"),
    ("gemm --system h100-sxm --m 8 --n 8 --k nan", 2, "argument --k: not an integer: 'nan'"),
    ("train --recipe fp32 --steps 2 --seed -1", 2,
     "argument --seed: must be a seed (an integer) in [0, 18,446,744,073,709,551,615], got '-1'"),
    ("swamping --out {tmp} --seed -1", 2, "argument --seed: must be a seed"),
    ("comm --link-GBps 1e-300", 2,
     "argument --link-GBps: must be a finite number in [1e-06, 1e+07], got '1e-300'"),
    ("explore --system hfp8-64chip --workload tiny-cnn --batch 64 --chip-GBps 1e300", 2,
     "argument --chip-GBps: must be a finite number in [1e-06, 1e+07]"),
    ("collective --topology ring --chips 8 --op all-reduce --bytes 1000 --link-GBps 1e-300", 2,
     "argument --link-GBps: must be a finite number in [1e-06, 1e+07]"),
    ("collective --topology ring --chips 99999999999999999999 --op all-reduce --bytes 1000 "
     "--link-GBps 10", 2, "argument --chips: must be an integer in [1, 9,007,199,254,740,992]"),
    ("collective --topology ring --chips 8 --op all-reduce --bytes 1000 --link-GBps 10 "
     "--packet-bytes nan", 2, "argument --packet-bytes: must be a finite number"),
    ("collective --topology ring --chips 8 --op all-reduce --bytes 99999999999999999999 "
     "--link-GBps 10", 2, "argument --bytes: must be an integer in [1, 9,007,199,254,740,992]"),
    ("comm --compression 0.5", 2, "argument --compression: must be a finite number >= 1"),
    ("comm --memory-efficiency 1.5", 2, "argument --memory-efficiency: must be a finite number "
     "in (0, 1]"),
    ("comm --params 99999999999999999999", 2, "argument --params: must be an integer in [1, "),
    ("comm --tensors -1", 2, "argument --tensors: must be an integer in [0, "),
    ("layers tiny-cnn --batch 0", 2, "argument --batch: must be an integer in [1, "),
    ("systolic --workload tiny-cnn --rows 8 --cols 8 --macs-per-pe 0", 2,
     "argument --macs-per-pe: must be an integer in [1, 10,000]"),
    ("sweep --out {tmp}/x.csv --workers 0", 2, "argument --workers: must be an integer in [1, "),
    ("sweep --out {tmp}/x.csv --max-points -5", 2, "argument --max-points: must be an integer"),
    ("train --recipe fp32 --steps 2 --lr inf", 2, "argument --lr: must be a finite number > 0"),
    ("train --recipe fp32 --steps 2 --eval-every -1", 2, "argument --eval-every: must be an "
     "integer in [0, "),
    ("figures --out {tmp} --minibatch 0", 2, "argument --minibatch: must be an integer in [1, "),
    ("explore --system hfp8-64chip --workload tiny-cnn --batch 64 --compression 0", 2,
     "argument --compression: must be a finite number >= 1"),
    ("llm --system dgx-h100 --layers 2 --hidden 64 --heads 3 --seq 16 --vocab 128 --tp 1 --pp 1 "
     "--dp 1 --micro-batch 1 --global-batch 1 --scheme bf16", 2,
     "GptConfig: hidden 64 is not a multiple of heads 3"),
    ("workload gpt --layers 2 --hidden 65 --heads 4 --seq 16 --vocab 128 --out {tmp}/g.toml", 2,
     "GptConfig: hidden 65 is not a multiple of heads 4"),
    # found by hostile inputs across commands (each was a bug report, a hang or nonsense)
    ("explore --system hfp8-64chip --workload tiny-cnn --batch 64 --dataflows xx", 2,
     "argument --dataflows: unknown dataflow 'xx'; choose from ws, os, is"),
    ("explore --system hfp8-64chip --workload tiny-cnn --batch 64 --strategies xx", 2,
     "argument --strategies: unknown strategy 'xx'; choose from data, data-chips, hybrid"),
    ("explore --system hfp8-64chip --workload tiny-cnn --batch 64 --dataflows ,", 2,
     "argument --dataflows: names no dataflow"),
    ("systolic --workload tiny-cnn --rows 8 --cols 8 --dataflow xs", 2,
     "argument --dataflow: unknown dataflow 'xs'; choose from ws, os, is"),
    ("systolic --workload tiny-cnn --rows 8 --cols 8 --batch 9007199254740992", 2,
     "cycles in all (layer 'conv2': 2.59e+18) do not fit 64-bit integers: lower the batch"),
    ("workload gpt --layers 9007199254740992 --hidden 64 --heads 1 --seq 16 --vocab 128 "
     "--out {tmp}/g.toml", 2, "argument --layers: must be an integer in [1, 10,000]"),
    ("workload gpt --layers 2 --hidden 2147483647 --heads 1 --seq 16 --vocab 128 "
     "--out {tmp}/g.toml", 2, "GptConfig: 3 x hidden (the fused QKV projection) = "
     "6,442,450,941 is over the 2,147,483,647"),
    ("llm --system hfp8-64chip --layers 2 --hidden 64 --heads 2 --seq 16 --vocab 128 --tp 1 "
     "--pp 1 --dp 1 --micro-batch 1 --global-batch 1 --scheme bf16", 2,
     "core.macs_per_pe_per_cycle has no bf16 rate (needed by --scheme bf16)"),
    ("llm --system dgx-h100 --layers 2 --hidden 64 --heads 2 --seq 16 --vocab 128 --tp "
     "99999999999 --pp 1 --dp 1 --micro-batch 1 --global-batch 1 --scheme bf16", 2,
     "argument --tp: must be an integer in [1, 10,000,000]"),
    ("collective --topology switch --chips 8 --op all-reduce --bytes 1000 --link-GBps 10 "
     "--engine des --packet-bytes 1e-300", 2, "argument --packet-bytes: must be a finite number "
     "in [1, 9,007,199,254,740,992], got '1e-300'"),
    ("sweep --out {tmp}/x.csv --axis chip_GBps=1e-300 --dry-run", 2,
     "chip_GBps=1e-300: chip_GBps must be a number of GB/s in [1e-06, 1e+07]"),
    ("sweep --out {tmp}/x.csv --axis minibatch=99999999999999999999 --dry-run", 2,
     "minibatch must be an integer in [1, 9,007,199,254,740,992]"),
    # issue 33 item 7: a clear error, never a silent answer or a run with no end
    ("gemm --system h100-sxm --m 16777216 --n 16777216 --k 16777216", 2,
     "a 16777216x16777216x16777216 fp16 GEMM needs 1,688,849,860,263,936 bytes for its operands "
     "and result, more than the 85,899,345,920 bytes (80 GiB) of one chip of h100-sxm"),
    ("op gemm --system h100-sxm --m 16777216 --n 16777216 --k 16777216 --power-model", 2,
     "more than the 85,899,345,920 bytes (80 GiB) of one chip of h100-sxm"),
    ("comm --tensors 1000000000000 --params 1000", 2, "--tensors 1,000,000,000,000 is more than "
     "the 1,000 parameters (--params): every parameter tensor holds at least one parameter"),
    ("train --recipe fp32 --steps 1000000000000", 2,
     "argument --steps: must be an integer in [1, 1,000,000], got '1000000000000'"),
    ("study --recipes fp32 --out {tmp}/s --steps 1000001", 2,
     "argument --steps: must be an integer in [1, 1,000,000]"),
    ("study --recipes fp32 --out {tmp}/s --seeds 1000000", 2,
     "argument --seeds: must be an integer in [1, 1,000]"),
    ("ptq --seed 99999999999999999999999", 2, "argument --seed: must be a seed"),
    # issue 33 item 10: one set of bounds; bad input is exit 2 naming the value, not exit 70
    ("predict --system h100-sxm --workload tiny-cnn --batch 8 --precision-override conv1=fp9", 2,
     "layer override 'conv1' 'fp9' not in"),
    ("explore --system hfp8-64chip --workload tiny-cnn --batch 64 --scheme bf16", 2,
     "core.macs_per_pe_per_cycle has no bf16 rate (needed by --scheme bf16)"),
    ("infer --system h100-sxm --model gpt2-small --scheme bf16 --batch 1 --prompt 16 "
     "--memory-reserve 1e30", 2, "argument --memory-reserve: must be a finite number in [0, 1024]"),
    ("infer --system h100-sxm --model gpt2-small --scheme bf16 --batch 1 --context "
     "9007199254740992", 2, "argument --context: must be an integer in [1, 2,147,483,647]"),
    ("comm --per-tensor-overhead-us 1e30", 2,
     "argument --per-tensor-overhead-us: must be a finite number in [0, 1e+06]"),
    # knobs that cannot change the answer are refused, not ignored
    ("comm --config h100-sxm --compression 4", 2,
     "compression 4.0: h100-sxm is one chip: no gradient reduction to compress"),
    ("comm --config h100-sxm --chip-GBps 100", 2, "chip_GBps: h100-sxm is one chip"),
    ("comm --config dgx-h100 --inter-board-GBps 10", 2,
     "inter_board_GBps: dgx-h100 is one board of 8 chip(s): no board-to-board link to set"),
    ("collective --topology ring --chips 8 --op all-reduce --bytes 1000 --link-GBps 10 "
     "--inter-board-GBps 1", 2, "topology 'ring' has no board-to-board links"),
    # issue 34 item 7: the hardware what-ifs keep a config file's ranges and the chip's clock
    ("gemm --system h100-sxm --m 64 --n 64 --k 64 --memory-capacity-GiB 0", 2,
     "argument --memory-capacity-GiB: must be a finite number in [1e-06, 1e+06], got '0'"),
    ("infer --system h100-sxm --model gpt2-small --scheme bf16 --batch 1 --context 64 "
     "--memory-bandwidth-GBps nan", 2, "argument --memory-bandwidth-GBps: must be a finite"),
    ("llm --system dgx-h100 --model gpt2-small --scheme bf16 --gpus 8 --global-batch 8 "
     "--frequency-GHz 1e9", 2, "argument --frequency-GHz: must be a finite number in"),
    ("gemm --system h100-sxm --m 64 --n 64 --k 64 --frequency-GHz 2.5", 2,
     "--frequency-GHz 2.5: clock 2.5 GHz is above the chip's maximum clock, 1.98 GHz"),
    ("gemm --system h100-sxm --m 64 --n 64 --k 64 --frequency-GHz 1.5 --power-model", 2,
     "--frequency-GHz fixes the SM clock; --power-model lets the power limit set it"),
    ("op attention --system h100-sxm --batch 1 --heads 2 --seq 64 --head-dim 64 "
     "--memory-capacity-GiB inf", 2, "argument --memory-capacity-GiB"),
    ("llm --system dgx-h100 --model gpt2-small --scheme bf16 --search --gpus 8 --global-batch 8 "
     "--memory-capacity-GiB 96", 2, "drop --memory-capacity-GiB"),
]


@pytest.mark.parametrize("argv,code,fragment", CASES, ids=[c[0].split(" --")[0] + f" #{i}"
                                                            for i, c in enumerate(CASES)])
def test_hostile_command_line(argv, code, fragment, afile, tmp_path, capsys):
    args = argv.format(afile=afile, tmp=tmp_path).split()
    try:
        rc = main(args)
    except SystemExit as exc:  # argparse rejects a bad flag value with exit 2
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == code, err
    assert fragment in err, err
    assert "Traceback" not in err
    assert len([ln for ln in err.splitlines() if "error" in ln]) == 1, err


def test_collective_help_states_the_netsim_limits(capsys):
    from accelsim.netsim import limits

    with pytest.raises(SystemExit):
        main(["collective", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for n in (limits.MAX_TRANSFERS, limits.MAX_PACKETS, limits.MAX_GRAPH_LINKS):
        assert f"{n:,}" in text


def test_light_commands_build_without_heavy_imports():
    """Building the parser (every command's flags) imports no pandas, networkx, simpy or
    matplotlib: light commands start fast."""
    import subprocess
    import sys

    code = ("import sys, accelsim.cli as c; c.build_parser(); "
            "print(sorted(m for m in ('pandas', 'networkx', 'simpy', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_check_config_refuses_devices_and_fifos_at_once(tmp_path, capsys):
    import os

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # reading it would block forever
    for path in ("/dev/zero", str(fifo), str(tmp_path)):
        assert main(["check-config", path]) == 2
        err = capsys.readouterr().err
        assert "not a regular file" in err and "Traceback" not in err


def test_workload_dimension_beyond_int32_is_refused(tmp_path, capsys):
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "workloads" / "tiny-cnn.toml"
    big = tmp_path / "big.toml"
    big.write_text(src.read_text().replace("in_channels = 3\n",
                                           "in_channels = 9223372036854775807\n", 1))
    assert main(["layers", str(big)]) == 2
    err = capsys.readouterr().err
    assert "layer[0](conv1).in_channels: must be <= 2,147,483,647" in err


def test_plot_refuses_a_non_numeric_y(tmp_path, capsys):
    t = tmp_path / "t.csv"
    t.write_text("x,y,s\n1,2,a\n2,3,b\n")
    assert main(["plot", str(t), "--x", "x", "--y", "s", "--out", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert "--y s: not a numeric column" in err and "Traceback" not in err


@pytest.mark.parametrize("old,new,fragment", [
    ("in_channels = 8\n", "in_channels = 5\n", "layer[4](conv2).in_channels/in_hw: input"),
    ("shape = [8, 8, 8]\n", "shape = [9, 8, 8]\n", "layer[1](bn1).shape: input"),
    ('name = "tiny-cnn"\n', 'name = "tiny\\u001b[31mcnn"\n', "must not contain control"),
])
def test_workload_layers_must_fit_together(tmp_path, capsys, old, new, fragment):
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "workloads" / "tiny-cnn.toml"
    text = src.read_text()
    assert old in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    assert main(["layers", str(bad)]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err and "\x1b" not in err


def test_scalesim_depthwise_row_cannot_explode(tmp_path, capsys):
    csv = tmp_path / "dp.csv"
    csv.write_text("Layer name,IFMAP Height,IFMAP Width,Filter Height,Filter Width,Channels,"
                   "Num Filter,Strides,\nConv1DP,8,8,3,3,100000000,1,1,\n")
    assert main(["systolic", "--topology-csv", str(csv), "--rows", "8", "--cols", "8"]) == 2
    assert "100,000,000 layers is over the 1,000,000 limit" in capsys.readouterr().err


def test_cycle_counts_never_wrap(tmp_path, capsys):
    """A GEMM whose cycle count does not fit int64 is refused, not wrapped to nonsense."""
    csv = tmp_path / "big.csv"
    csv.write_text("Layer name,IFMAP Height,IFMAP Width,Filter Height,Filter Width,Channels,"
                   "Num Filter,Strides,\nBig,1000000000,1000000000,3,3,1000000000,1000000000,1,\n")
    assert main(["systolic", "--topology-csv", str(csv), "--rows", "8", "--cols", "8"]) == 2
    assert "does not fit 64-bit integers" in capsys.readouterr().err
    # a huge batch that does fit stays exact: the int64 total equals SCALE-Sim's weight-
    # stationary formula evaluated here in Python's unbounded integers
    from accelsim.workload import load_workload
    from pathlib import Path

    batch, R, C = 10**12, 8, 8
    assert main(["systolic", "--workload", "tiny-cnn", "--rows", str(R), "--cols", str(C),
                 "--batch", str(batch)]) == 0
    out = capsys.readouterr().out
    wl = load_workload(Path(__file__).resolve().parents[1] / "workloads" / "tiny-cnn.toml")
    total = macs = 0
    for layer in wl.layers:
        g = layer.gemms(batch).get("fwd")
        if g is None or not layer.is_gemm:
            continue
        # ws: K along the rows, N along the columns, M streamed; the stationary tile is preloaded
        folds = -(-g.K // R) * -(-g.N // C)
        total += g.count * folds * (R + g.M + R + C - 2)
        macs += g.count * g.M * g.N * g.K
    assert f"{total:,} cycles" in out
    assert f"utilization {macs / (R * C * total):.3f}" in out


def _run_raising(monkeypatch, exc, capsys):
    """``accelsim formats`` with its run() replaced by one that raises ``exc``."""
    import accelsim.commands.formats as formats

    def boom(args):
        raise exc

    monkeypatch.setattr(formats, "run", boom)
    rc = main(["formats"])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("exc", [ValueError("bad internal value"), KeyError("k"),
                                 ZeroDivisionError("division by zero"), TypeError("oops")])
def test_an_exception_outside_the_family_is_reported_as_a_bug(monkeypatch, capsys, exc):
    """A library ValueError/KeyError is not dressed up as bad input: one line that says it is a
    bug in accelsim and where to report it; no traceback unless ACCELSIM_DEBUG=1."""
    from accelsim.cli import EXIT_BUG

    monkeypatch.delenv("ACCELSIM_DEBUG", raising=False)
    rc, err = _run_raising(monkeypatch, exc, capsys)
    assert rc == EXIT_BUG and rc != 2
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"internal error: {type(exc).__name__}" in err and "bug in accelsim" in err
    assert "report it" in err and "ACCELSIM_DEBUG=1" in err
    monkeypatch.setenv("ACCELSIM_DEBUG", "1")
    rc, err = _run_raising(monkeypatch, exc, capsys)
    assert rc == EXIT_BUG and "Traceback" in err and "bug in accelsim" in err


@pytest.mark.parametrize("name", ["AccelsimError", "InputError", "UserError", "ConfigError",
                                  "Infeasible", "SizeError"])
def test_the_error_family_is_one_line_exit_2(monkeypatch, capsys, name):
    import accelsim.errors as errors

    cls = getattr(errors, name)
    exc = cls("f.toml", "a.b", 3, "must be even") if cls is errors.ConfigError \
        else cls("--flag 3: must be even")
    rc, err = _run_raising(monkeypatch, exc, capsys)
    assert rc == 2 and err.count("\n") == 1 and "must be even" in err and "bug" not in err


def test_old_homes_of_the_error_classes_still_import():
    """Code that imported the classes from their old modules keeps working (one class each)."""
    from accelsim import errors
    from accelsim.arch.config import ConfigError
    from accelsim.cli import UserError
    from accelsim.dse.sweep import Infeasible
    from accelsim.dse.sweep_journal import JournalError, JournalIOError
    from accelsim.netsim.limits import SizeLimitError

    assert ConfigError is errors.ConfigError and UserError is errors.UserError
    assert Infeasible is errors.Infeasible
    for cls in (SizeLimitError, JournalError):
        assert issubclass(cls, errors.InputError) and issubclass(cls, ValueError)
    assert issubclass(JournalIOError, errors.AccelsimError) and issubclass(JournalIOError, OSError)


def test_commands_do_not_import_the_cli():
    """The cli <-> commands back-edge stays cut: commands take UserError and check_output_path
    from accelsim.errors / commands._common, never from accelsim.cli."""
    import ast
    from pathlib import Path

    pkg = Path(__file__).resolve().parents[1] / "accelsim" / "commands"
    for path in sorted(pkg.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "accelsim.cli", f"{path.name} imports accelsim.cli"
            elif isinstance(node, ast.Import):
                assert all(a.name != "accelsim.cli" for a in node.names), path.name


_FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from accelsim.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("limit,argv,failed,saved", [
    (3000, "explore --system hfp8-64chip --workload tiny-cnn --batch 64 --out {tmp}/e.csv",
     "e.csv", None),
    (30000, "train --compare fp32,bf16-amp --steps 3 --no-progress --out {tmp}/t",
     "train_mlp_digits.png", "train_mlp_digits.csv"),
])
def test_a_full_disk_names_the_file_and_what_was_saved(tmp_path, limit, argv, failed, saved):
    """ENOSPC/EFBIG (here: a file-size limit) names the file being written and the files saved
    before it, in one line (was "[Errno 27] File too large")."""
    import subprocess
    import sys

    import os

    args = argv.format(tmp=tmp_path).split()
    # numpy paths (same bits): a first numba compile in a fresh clone would write its cache
    # files under the same file-size limit and fail first, which is not what this tests
    r = subprocess.run([sys.executable, "-c", _FULL_DISK, str(limit), *args],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "ACCELSIM_JIT": "0"})
    err = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"cannot write {tmp_path}" in err and f"{failed}: File too large" in err, err
    assert f"{failed} is incomplete" in err
    if saved is None:
        assert "nothing else was saved" in err
    else:
        assert "saved before it:" in err and saved in err and ".tmp" not in err


def _plot(tmp_path, capsys, csv_text, *flags):
    t = tmp_path / "t.csv"
    t.write_text(csv_text)
    png = tmp_path / "p.png"
    rc = main(["plot", str(t), "--out", str(png), *flags])
    return rc, capsys.readouterr(), png


def test_plot_of_an_all_nan_column_is_refused_not_blank(tmp_path, capsys):
    """An all-NaN --y wrote a blank PNG and exited 0."""
    rc, out, png = _plot(tmp_path, capsys, "x,y\n1,\n2,nan\n3,\n", "--x", "x", "--y", "y")
    assert rc == 2 and "--y y: no finite value in the 3 rows to plot" in out.err
    assert not png.exists()
    rc, out, _ = _plot(tmp_path, capsys, "x,y\n1,0\n2,-1\n", "--x", "x", "--y", "y", "--logy")
    assert rc == 2 and "--y y: no positive value to draw on --logy" in out.err


@pytest.mark.parametrize("flags,fragment", [
    (["--facet", "f"], "--facet f: 5,000 values make 5,000 panels, more than the 48"),
    (["--hue", "f"], "--hue f: 5,000 values make 5,000 lines per panel, more than the 40"),
    (["--kind", "bar"], "--kind bar: 5,000 --x values x 1 --hue values x 1 --facet values = "
                        "5,000 bars, more than the 4,000"),
])
def test_plot_refuses_figures_too_large_to_draw(tmp_path, capsys, flags, fragment):
    """Tens of thousands of facets or bars never finished: refused at once, with the count."""
    rows = "\n".join(f"{i},{i % 7},{i}" for i in range(5000))
    rc, out, png = _plot(tmp_path, capsys, "x,y,f\n" + rows + "\n", "--x", "x", "--y", "y",
                         *flags)
    assert rc == 2 and fragment in out.err and out.err.count("\n") == 1, out.err
    assert not png.exists()


def test_plot_turns_library_warnings_into_one_line_and_says_what_it_wrote(tmp_path, capsys,
                                                                          monkeypatch):
    """matplotlib's UserWarnings leaked with their site-packages path and source line; each is
    now one 'warning:' line. The output line says what was written."""
    import warnings

    import accelsim.report.plot as rp

    real = rp.plot_table

    def warning_plot(*a, **k):  # what matplotlib does, e.g. for labels tight_layout cannot fit
        for _ in range(2):  # the same warning twice is shown once
            warnings.warn_explicit("Tight layout not applied. tight_layout cannot make axes\n"
                                   "height small enough", UserWarning,
                                   "/venv/lib/site-packages/matplotlib/figure.py", 3540)
        return real(*a, **k)

    monkeypatch.setattr(rp, "plot_table", warning_plot)
    rc, out, png = _plot(tmp_path, capsys, "x,y\n1,2\n2,3\n", "--x", "x", "--y", "y")
    assert rc == 0 and png.read_bytes()[:4] == b"\x89PNG"
    assert f"wrote {png} (y vs x, 2 rows of" in out.out
    assert out.err == ("accelsim plot: warning: Tight layout not applied. tight_layout cannot "
                       "make axes height small enough\n")


def test_the_cli_docstring_lists_every_command():
    """The module docstring is the pipeline map: it names every sub-command (it listed 11 of
    16)."""
    import re

    import accelsim.cli as cli

    names = {m.NAME for m in cli._command_modules()}
    listed = set(re.findall(r"[a-z][a-z-]*[a-z]", cli.__doc__.split("::", 1)[1].split("\n\n")[1]))
    assert names <= listed, sorted(names - listed)


def test_plot_of_a_header_only_table(tmp_path, capsys):
    rc, out, _ = _plot(tmp_path, capsys, "x,y\n", "--x", "x", "--y", "y")
    assert rc == 2 and "the table has a header but no rows" in out.err


def test_huge_batches_keep_exact_totals_and_a_sane_utilization(capsys):
    """A 2^53 batch on a 65,536^2 array fits int64 cycles, but its MACs did not: the total
    utilization printed -0.000. Totals are exact Python integers now."""
    from pathlib import Path

    from accelsim.workload import load_workload

    batch, R, C = 2**53, 65536, 65536
    assert main(["systolic", "--workload", "tiny-cnn", "--rows", str(R), "--cols", str(C),
                 "--batch", str(batch)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    wl = load_workload(Path(__file__).resolve().parents[1] / "workloads" / "tiny-cnn.toml")
    macs = sum(g.count * g.M * g.N * g.K for layer in wl.layers if layer.is_gemm
               for p, g in layer.gemms(batch).items() if p == "fwd")
    import re

    total = int(re.search(r" ws: ([\d,]+) cycles", last).group(1).replace(",", ""))
    assert f"utilization {macs / (R * C * total):.3f}" in last and macs > 2**63


def test_collective_prints_significant_digits_at_any_scale(capsys):
    """A slow link printed "0.000 GB/s" and a 19-digit time: %g keeps the digits."""
    assert main(["collective", "--topology", "ring", "--chips", "8", "--op", "all-reduce",
                 "--bytes", str(2**53), "--link-GBps", "1e-6"]) == 0
    out = capsys.readouterr().out
    assert "bus bandwidth        2e-06 GB/s" in out and "0.000" not in out


def test_a_library_warning_is_one_line_naming_the_command(monkeypatch, capsys):
    """Warnings from libraries (matplotlib, pandas, numpy) printed their site-packages path and
    source line; every command now shows one line per warning."""
    import warnings

    import accelsim.commands.formats as formats

    def warn(args):
        warnings.warn_explicit("Glyph 128512 missing from\n font(s) DejaVu Sans.", UserWarning,
                               "/venv/lib/site-packages/matplotlib/backends/agg.py", 240)
        return 0

    monkeypatch.setattr(formats, "run", warn)
    assert main(["formats"]) == 0
    err = capsys.readouterr().err
    assert err == "accelsim formats: warning: Glyph 128512 missing from font(s) DejaVu Sans.\n"
