"""Where input files are found: one helper for every command, sweep and library loader.

A path is used as given when it exists. A relative path is also looked up in the shipped data
and the source checkout, so ``arch_configs/hfp8-64chip.toml`` works from any folder. A bare name
such as ``resnet50`` or ``h100-sxm`` is a file in ``workloads/`` or ``arch_configs/``: first in
the current folder, then the shipped copy.

The shipped copies: a source checkout holds ``arch_configs/`` and ``workloads/`` next to the
package; an installed wheel holds the same files in ``accelsim/data/arch_configs/`` and
``accelsim/data/workloads/`` (copied there by ``setup.py``'s build step, see :data:`SHIPPED`).
"""

from __future__ import annotations

from pathlib import Path

#: The source checkout (holds ``arch_configs/`` and ``workloads/`` next to the package).
REPO_ROOT = Path(__file__).resolve().parents[1]

#: Where an installed package keeps its copies of :data:`SHIPPED` (``accelsim/data/<folder>``).
PACKAGE_DATA = Path(__file__).resolve().parent / "data"

#: folder of shipped files and the suffixes a bare name may take, per kind of input
_KINDS = {
    "workload": ("workloads", (".toml",)),
    "system": ("arch_configs", (".toml",)),
}

#: top-level folders of the checkout that the wheel ships in :data:`PACKAGE_DATA`
SHIPPED = tuple(folder for folder, _ in _KINDS.values())


def data_roots() -> tuple[Path, ...]:
    """Folders that hold shipped ``arch_configs/`` and ``workloads/``: the installed package's
    data folder and the source checkout (whichever exist)."""
    return tuple(r for r in (PACKAGE_DATA, REPO_ROOT) if any((r / f).is_dir() for f in SHIPPED))


def _candidates(spec: str, kind: str | None) -> list[Path]:
    p = Path(spec)
    out = [p]
    if not p.is_absolute():
        out += [Path.cwd() / p, *(root / p for root in data_roots())]
        if kind is not None and len(p.parts) == 1:
            folder, suffixes = _KINDS[kind]
            names = [p.name] if p.suffix else [p.name + s for s in suffixes]
            for root in (Path.cwd(), *data_roots()):
                out += [root / folder / n for n in names]
    return out


def _check_kind(kind: str | None) -> None:
    if kind is not None and kind not in _KINDS:
        raise ValueError(f"unknown input kind {kind!r}; expected one of {', '.join(_KINDS)}")


def find_input(spec: str | Path, kind: str | None = None) -> Path | None:
    """The file ``spec`` names (see :func:`resolve_input`), or None when nothing matches."""
    _check_kind(kind)
    for cand in _candidates(str(spec), kind):
        if cand.exists():
            return cand
    return None


def locate(spec: str | Path, kind: str) -> Path:
    """For library loaders: the file ``spec`` names, or ``Path(spec)`` unchanged when nothing
    matches (the loader then reports the missing file in its own error family)."""
    found = find_input(spec, kind)
    return found if found is not None else Path(spec)


def resolve_input(spec: str | Path, kind: str | None = None) -> Path:
    """The file ``spec`` names: a path (as given, or relative to the shipped data / the source
    checkout) or, for ``kind`` "workload" / "system", the name of a shipped file (``resnet50`` ->
    ``workloads/resnet50.toml``). FileNotFoundError lists the shipped names."""
    found = find_input(spec, kind)
    if found is not None:
        if not found.is_file():
            raise FileNotFoundError(f"{kind or 'input'} {str(spec)!r}: {found} is not a regular "
                                    "file")
        return found
    hint = ""
    if kind is not None:
        folder, _ = _KINDS[kind]
        names = shipped_names(kind)
        hint = f"; shipped {kind}s in {folder}/: {', '.join(names)}" if names else ""
    raise FileNotFoundError(f"{kind or 'file'} not found: {str(spec)!r} (not a file{hint})")


def shipped_names(kind: str) -> list[str]:
    """Names of the shipped files of one kind (``resnet50``, ``bert-base``, ...), with those in
    the current folder's ``workloads/`` or ``arch_configs/``."""
    _check_kind(kind)
    folder, suffixes = _KINDS[kind]
    names: set[str] = set()
    for root in (*data_roots(), Path.cwd()):
        d = root / folder
        if d.is_dir():
            names.update(f.stem for f in d.iterdir() if f.suffix in suffixes)
    return sorted(names)


def shipped_files() -> list[Path]:
    """Every shipped config and workload file, relative to its data root
    (``arch_configs/h100-sxm.toml``, ...): what the wheel must contain."""
    out: set[Path] = set()
    for root in data_roots():
        for folder in SHIPPED:
            d = root / folder
            if d.is_dir():
                out.update(f.relative_to(root) for f in d.iterdir()
                           if f.is_file() and not f.name.startswith("."))
    return sorted(out)


def display_path(path: str | Path) -> str:
    """``path`` as a report records it: a shipped file as ``arch_configs/<name>.toml`` (the same
    from any folder, checkout or installed package; the current folder's own ``arch_configs/``
    and ``workloads/`` too, where names resolve first), any other file as given."""
    p = Path(path)
    try:
        resolved = p.resolve()
    except OSError:
        return str(path)
    for root in (*data_roots(), Path.cwd()):
        try:
            rel = resolved.relative_to(root.resolve())
        except ValueError:
            continue
        if len(rel.parts) == 2 and rel.parts[0] in SHIPPED:
            return rel.as_posix()
    return str(path)
