"""Where input files are found: one helper for every command and sweep.

A path is used as given when it exists; a relative path is also looked up in the source checkout
(an editable install run from another directory); a bare name such as ``resnet50`` or
``hfp8-64chip`` is a shipped file in ``workloads/`` or ``arch_configs/``.
"""

from __future__ import annotations

from pathlib import Path

#: The source checkout (holds ``arch_configs/`` and ``workloads/`` next to the package).
REPO_ROOT = Path(__file__).resolve().parents[1]

#: folder of shipped files and the suffixes a bare name may take, per kind of input
_KINDS = {
    "workload": ("workloads", (".toml",)),
    "system": ("arch_configs", (".toml",)),
}


def _candidates(spec: str, kind: str | None) -> list[Path]:
    p = Path(spec)
    out = [p]
    if not p.is_absolute():
        out += [Path.cwd() / p, REPO_ROOT / p]
        if kind is not None and len(p.parts) == 1:
            folder, suffixes = _KINDS[kind]
            names = [p.name] if p.suffix else [p.name + s for s in suffixes]
            for root in (Path.cwd(), REPO_ROOT):
                out += [root / folder / n for n in names]
    return out


def resolve_input(spec: str | Path, kind: str | None = None) -> Path:
    """The file ``spec`` names: a path (as given, or relative to the source checkout) or, for
    ``kind`` "workload" / "system", the name of a shipped file (``resnet50`` ->
    ``workloads/resnet50.toml``). FileNotFoundError lists the shipped names."""
    if kind is not None and kind not in _KINDS:
        raise ValueError(f"unknown input kind {kind!r}; expected one of {', '.join(_KINDS)}")
    spec = str(spec)
    seen: list[Path] = []
    for cand in _candidates(spec, kind):
        if cand.is_file():
            return cand
        if cand.exists():
            raise FileNotFoundError(f"{kind or 'input'} {spec!r}: {cand} is not a regular file")
        seen.append(cand)
    hint = ""
    if kind is not None:
        folder, _ = _KINDS[kind]
        names = shipped_names(kind)
        hint = f"; shipped {kind}s in {folder}/: {', '.join(names)}" if names else ""
    raise FileNotFoundError(f"{kind or 'file'} not found: {spec!r} (not a file{hint})")


def shipped_names(kind: str) -> list[str]:
    """Names of the shipped files of one kind (``resnet50``, ``bert-base``, ...)."""
    folder, suffixes = _KINDS[kind]
    names: set[str] = set()
    for root in (REPO_ROOT, Path.cwd()):
        d = root / folder
        if d.is_dir():
            names.update(f.stem for f in d.iterdir() if f.suffix in suffixes)
    return sorted(names)
