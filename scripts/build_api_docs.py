"""Write the API reference from the docstrings: docs/api.md (Markdown, committed; a test checks
it is current) and, with ``--html DIR``, pdoc's HTML site of the same modules.

pdoc (https://pdoc.dev, the ``docs`` extra) finds the public members (``__all__``) and their
docstrings; the Markdown takes each signature as written in the source (``npt.ArrayLike``, not
its expansion). Run from anywhere:

    python scripts/build_api_docs.py               # rewrites docs/api.md
    python scripts/build_api_docs.py --check       # exit 1 if docs/api.md is out of date
    python scripts/build_api_docs.py --html /tmp/api   # + HTML (open /tmp/api/index.html)
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

OUT = REPO / "docs" / "api.md"
#: documented modules, in reading order: the top-level API, then the rooms' public names
MODULES = ("accelsim", "accelsim.numerics", "accelsim.arith", "accelsim.arch",
           "accelsim.workload", "accelsim.perf", "accelsim.netsim", "accelsim.netsim.topology",
           "accelsim.dse", "accelsim.dse.sweep", "accelsim.dse.scenario", "accelsim.paths")
_ROLES = re.compile(r":(?:func|class|mod|data|attr|meth|exc):`~?([^`]+)`")


def _md(text: str) -> str:
    """reST inline markup as Markdown: ``x`` and :func:`x` -> `x`."""
    return _ROLES.sub(r"`\1`", text.replace("``", "`"))


def _signature(obj: object) -> str:
    try:
        sig = inspect.signature(obj)  # annotations as written (from __future__ import annotations)
    except (TypeError, ValueError):
        return "(...)"
    text = re.sub(r" at 0x[0-9a-f]+", "", str(sig))
    text = re.sub(r"(\w+): '([^']*)'", r"\1: \2", text)  # annotations as written, unquoted
    return re.sub(r"-> '([^']*)'$", r"-> \1", text)


def _first_paragraph(text: str) -> str:
    return text.strip().split("\n\n")[0].replace("\n", " ")


def render() -> str:
    import importlib

    import pdoc.doc

    for modname in MODULES:  # resolve lazy (PEP 562) names, so pdoc sees them as members
        module = importlib.import_module(modname)
        for name in getattr(module, "__all__", ()):
            getattr(module, name)
    lines = ["# accelsim API reference", "",
             "Generated from the docstrings by `python scripts/build_api_docs.py` (pdoc finds "
             "the public names, `__all__`); do not edit by hand. The top-level names are the "
             "library's front door; each room's module lists the rest. Units as in configs and "
             "the CLI: `*_GBps` in GB/s (1e9 bytes/s), `*_s` in seconds; the netsim graph "
             "internals use bytes/s (`*_Bps`).", ""]
    lines += ["| module | what it is for |", "|---|---|"]
    mods = [pdoc.doc.Module(importlib.import_module(m)) for m in MODULES]
    for mod in mods:
        lines.append(f"| [`{mod.fullname}`](#{mod.fullname.replace('.', '')}) | "
                     f"{_md(_first_paragraph(mod.docstring))} |")
    lines.append("")
    for mod in mods:
        lines += [f"## {mod.fullname}", "", _md(mod.docstring.strip()), ""]
        for name, mem in mod.members.items():
            if name.startswith("_") or (mod.obj.__dict__.get("__all__") is not None
                                        and name not in mod.obj.__all__):
                continue
            obj = getattr(mod.obj, name)
            if isinstance(mem, pdoc.doc.Function):
                lines += [f"### `{mod.fullname}.{name}{_signature(obj)}`", ""]
            elif isinstance(mem, pdoc.doc.Class):
                lines += [f"### class `{mod.fullname}.{name}`", ""]
                if callable(obj):
                    lines += [f"`{name}{_signature(obj)}`", ""]
            else:
                lines += [f"### `{mod.fullname}.{name}`", ""]
                if isinstance(obj, (tuple, frozenset, str, int, float)) and len(repr(obj)) < 200:
                    lines += [f"`{obj!r}`", ""]
            doc = mem.docstring.strip()
            if doc:
                lines += [_md(doc), ""]
            if isinstance(mem, pdoc.doc.Class):
                for mname, m in mem.members.items():
                    if mname.startswith("_") or not isinstance(m, pdoc.doc.Function) \
                            or m.taken_from[0] != mem.taken_from[0] or not m.docstring:
                        continue
                    kind = "property " if isinstance(inspect.getattr_static(obj, mname, None),
                                                     property) else ""
                    sig = "" if kind else _signature(m.obj)
                    lines += [f"- {kind}`{mname}{sig}`: {_md(_first_paragraph(m.docstring))}"]
                lines.append("")
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/api.md is stale")
    ap.add_argument("--html", metavar="DIR", type=Path, help="also write pdoc's HTML site here")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date: run python scripts/build_api_docs.py", file=sys.stderr)
            return 1
        print(f"{OUT} is current")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text.splitlines())} lines)")
    if args.html is not None:
        import pdoc

        pdoc.pdoc(*MODULES, output_directory=args.html)
        print(f"wrote {args.html}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
