"""Count public functions with incomplete type hints (a parameter or the return unannotated).

Public: the names in ``__all__`` of ``accelsim`` and of every room package (``accelsim.numerics``,
``accelsim.arith``, ...), plus the public methods of the public classes. Run from anywhere:

    python scripts/check_type_hints.py            # a summary and the incomplete ones
    python scripts/check_type_hints.py --top      # only accelsim's top-level API

Exit status 1 when any is incomplete (``--top``: in the top-level API).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator

ROOMS = ("accelsim", "accelsim.numerics", "accelsim.arith", "accelsim.arch", "accelsim.workload",
         "accelsim.perf", "accelsim.netsim", "accelsim.dse", "accelsim.llm", "accelsim.train",
         "accelsim.report")


def missing(fn: Callable) -> list[str]:
    """Names of the unannotated parameters of ``fn`` (``return`` for the result)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    out = [p.name for p in sig.parameters.values()
           if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty and fn.__name__ != "__init__":
        out.append("return")
    return out


def public_functions(modules: tuple[str, ...]) -> Iterator[tuple[str, Callable]]:
    seen: set[int] = set()
    for modname in modules:
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isfunction(obj):
                yield f"{obj.__module__}.{obj.__qualname__}", obj
            elif inspect.isclass(obj) and obj.__module__.startswith("accelsim"):
                for mname, m in vars(obj).items():
                    if inspect.isfunction(m) and not mname.startswith("_") and id(m) not in seen:
                        seen.add(id(m))
                        yield f"{obj.__module__}.{m.__qualname__}", m


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", action="store_true", help="only the top-level accelsim API")
    args = ap.parse_args(argv)
    rooms = ROOMS[:1] if args.top else ROOMS
    funcs = list(public_functions(rooms))
    bad = [(name, missing(fn)) for name, fn in funcs if missing(fn)]
    for name, what in bad:
        print(f"{name}: no hint for {', '.join(what)}")
    print(f"{len(bad)} of {len(funcs)} public functions have incomplete type hints")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
