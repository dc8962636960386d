"""The ``accelsim`` command line: one sub-command per module in :mod:`accelsim.commands`.

The pipeline, in the order a user meets it (every command; tests/test_cli_hostile.py checks
that this list names them all)::

    formats      number-format table and precision plot            (numerics -> report)
    swamping     accumulation-error study of dot-product engines    (arith -> report)
    train        train small networks through a quantized datapath  (arith -> train -> report)
    study / ptq  seeds x recipes with confidence intervals; post-training quantization (train)
    check-config / workload / chip (build an arch config from area)  (arch, workload)
    layers / systolic / gemm / op                                    (arch, workload -> perf -> engine)
    predict / explore                                                (perf + netsim -> engine -> dse)
    collective / comm                                                (netsim)
    llm          3-D parallel LLM training: one plan or a search     (engine -> llm)
    infer        LLM inference: prefill, decode, KV cache, --serve   (engine)
    serve        request-level serving: continuous batching, TTFT    (engine -> serve)
    figures / sweep / plot                                           (dse + netsim -> report)
    codesign     chip designs x recipes: time and energy to a target loss (train + engine -> dse)

An error the user's input causes (the :class:`~accelsim.errors.AccelsimError` family) ends here
as one line on stderr and exit status 2; anything else is a bug in accelsim, reported as one line
that says so (exit status 70; the traceback under ``ACCELSIM_DEBUG=1``).
"""

from __future__ import annotations

import argparse
import errno
import functools
import importlib
import os
import pkgutil
import sys
import traceback
import warnings

import accelsim
from accelsim import commands
from accelsim.errors import BUG_REPORT, AccelsimError, UserError  # noqa: F401 - UserError: old home

EXIT_USAGE = 2
#: an exception outside the AccelsimError family: a bug (sysexits.h EX_SOFTWARE)
EXIT_BUG = 70
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (the command, the flag, the problem, where to look)
    instead of the whole usage text."""

    def error(self, message: str):  # noqa: D102 - argparse API
        self.exit(EXIT_USAGE, f"{self.prog}: error: {_one_line(message)} "
                              f"(see {self.prog} --help)\n")


def _command_modules(only: str | None = None):
    """The command modules, imported; ``only``: just the one whose NAME that is (module name =
    NAME with "-" as "_"), so a run imports one command's dependencies, not every command's
    (``accelsim gemm`` starts in a fraction of the time). Unknown ``only``: all of them."""
    names = sorted(i.name for i in pkgutil.iter_modules(commands.__path__)
                   if not i.name.startswith("_"))
    if only is not None and only.replace("-", "_") in names:
        mod = importlib.import_module(f"{commands.__name__}.{only.replace('-', '_')}")
        if mod.NAME == only:
            yield mod
            return
    for name in names:
        yield importlib.import_module(f"{commands.__name__}.{name}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; ``command`` (the sub-command about to run) builds only that
    sub-command's parser, None all of them (``accelsim --help`` lists every command)."""
    parser = _Parser(
        prog="accelsim",
        description="Low-precision training accelerator simulator: number formats, "
        "arithmetic golden models, systolic timing, network simulation and throughput reports.",
    )
    parser.add_argument("--version", action="version", version=f"accelsim {accelsim.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _command_modules(command):
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


#: errno values of a write that ran out of room: disk full, over RLIMIT_FSIZE, over a quota
_NO_ROOM = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
#: where files that are not a command's output are written (the interpreter, its packages)
_NOT_OUTPUTS = tuple({sys.prefix, sys.base_prefix, os.path.dirname(accelsim.__file__)})
#: files this command opened for writing, in order (None outside a command); see _audit
_written: list[str] | None = None


def _audit(event: str, args) -> None:
    """Audit hook: remember every file the running command opens for writing, so that a full
    disk names the file being written and the ones saved before it (pandas, matplotlib and
    numpy raise ENOSPC/EFBIG without a file name)."""
    if _written is None:
        return
    if event == "os.rename":  # a temporary file renamed into place (an atomic save)
        src, dst = (os.fspath(a) if isinstance(a, str | os.PathLike) else a for a in args[:2])
        if src in _written:
            _written[_written.index(src)] = dst
        return
    if event != "open":
        return
    path, mode, flags = args
    writing = any(c in mode for c in "wax+") if isinstance(mode, str) \
        else isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR)
    if writing and isinstance(path, str | os.PathLike):
        name = os.fspath(path)
        if "__pycache__" in name or name.startswith(_NOT_OUTPUTS):
            return  # Python's bytecode cache, library caches: not the command's output
        if name in _written:
            _written.remove(name)
        _written.append(name)


_audit_installed = False


def _install_audit() -> None:
    """Add the audit hook once per process (hooks cannot be removed; outside main() it does
    nothing)."""
    global _audit_installed
    sys.addaudithook(_audit)
    _audit_installed = True


def _os_error(exc: OSError) -> str:
    if exc.errno in _NO_ROOM and _written:
        *saved, last = _written
        where = exc.filename or last
        saved = [s for s in saved if s != where]
        kept = (f"saved before it: {', '.join(saved[-5:])}"
                + (f" and {len(saved) - 5} more" if len(saved) > 5 else "")) if saved \
            else "nothing else was saved"
        return (f"cannot write {where}: {exc.strerror} (disk full or over a file-size limit); "
                f"{where} is incomplete, {kept}")
    if exc.filename is None or not exc.strerror:
        return str(exc)  # a message of our own (e.g. a workload name that is not shipped)
    return f"{exc.filename}: {exc.strerror}"


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush to a closed pipe is quiet."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    first = argv[0] if argv and not argv[0].startswith("-") else None
    parser = build_parser(first)
    try:
        args, extra = parser.parse_known_args(argv)
    except SystemExit as exc:  # a bad flag value: its one line is printed; return the status
        if exc.code in (0, None):  # --help, --version
            raise
        return int(exc.code)
    if extra:  # a misspelt flag after a command: report it as that command's error
        prog = f"accelsim {args.command}" if getattr(args, "command", None) else "accelsim"
        print(f"{prog}: error: unrecognized arguments: {' '.join(extra)} (see {prog} --help)",
              file=sys.stderr)
        return EXIT_USAGE
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USAGE
    prog = f"accelsim {args.command}"
    global _written
    if not _audit_installed:
        _install_audit()
    _written = []
    try:
        with warnings.catch_warnings():
            # a library's warning (matplotlib, pandas, numpy) is one line naming the command,
            # not a site-packages path and a source line
            warnings.showwarning = functools.partial(_one_line_warning, prog)
            return int(args._run(args) or 0)
    except AccelsimError as exc:  # what the user's input or request caused: one line
        msg = str(exc)
    except KeyboardInterrupt:  # a resumable command says more (commands._common.exit_interrupted)
        print(f"{prog}: interrupted; " + (f"written before it: {', '.join(_written)}"
                                          if _written else "nothing was written"),
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``accelsim ... | head``): stop quietly, as Unix tools do.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except MemoryError:
        msg = "out of memory: the requested size is too large for this machine"
    except OSError as exc:  # the user's files, folders and disk
        msg = _os_error(exc)
    except Exception as exc:  # anything else is a bug in accelsim, never "bad input"
        return _report_bug(prog, exc)
    finally:
        _written = None
    print(f"{prog}: error: {_one_line(msg)}", file=sys.stderr)
    return EXIT_USAGE


def _one_line_warning(prog, message, category, filename, lineno, file=None, line=None) -> None:
    print(f"{prog}: warning: {_one_line(message)}", file=sys.stderr)


def _report_bug(prog: str, exc: BaseException) -> int:
    """One line saying that ``exc`` is a bug and where to report it; the traceback too under
    ``ACCELSIM_DEBUG=1``."""
    if os.environ.get("ACCELSIM_DEBUG", "") not in ("", "0"):
        traceback.print_exception(exc, file=sys.stderr)
    print(f"{prog}: internal error: {type(exc).__name__}: {_one_line(exc)[:300]} - {BUG_REPORT}",
          file=sys.stderr)
    return EXIT_BUG


def entry() -> None:  # pragma: no cover - the console script
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
        _silence_stdout()
    except KeyboardInterrupt:
        print("accelsim: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
