"""Co-design's designs: an arch config, or a chip built from the chip builder's parameters
(:mod:`accelsim.arch.builder`) -- alone, or placed in an existing system's topology (its chips,
boards and links, every chip replaced by the built one).

A design's ``key`` is what the co-design sweep journals as its ``chip`` parameter: a config's
path, or for a built design the canonical JSON of its builder keys and base system, so a changed
key is a new point (a rerun never resumes a stale one) and :func:`design_system` rebuilds the
same System from the key alone (the process and Dask executors get the key, not the object).
A built design's die area is its spec's ``area_mm2``: it is carried beside the config, not in it
(arch configs have no area key).
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelsim.arch.builder import ChipSpec, build_chip, place, system_of
from accelsim.arch.model import System
from accelsim.errors import InputError

#: Chip-builder keys a ``[[design]]`` may give instead of ``config`` (``accelsim chip``'s flags,
#: in ChipSpec's field names); ``system`` places the built chip in that system's topology.
BUILDER_KEYS = ("area_mm2", "node_nm", "formats", "frequency_GHz", "power_limit_W", "array",
                "sram_MiB", "memory_bandwidth_GBps", "memory_capacity_GiB")
#: Every key of one ``[[design]]`` (``config`` designs: name, config, area_mm2).
DESIGN_KEYS = ("name", "config", "system", *BUILDER_KEYS)
_BUILT_PREFIX = "{"  # a key that is JSON, not a path


@dataclass(frozen=True)
class Design:
    """One chip design: a name, an arch config (a built design: its base system's config, ""
    for one chip alone), its die area (None: not given) and, for a built design, its spec."""

    name: str
    config: str
    area_mm2: float | None = None
    spec: ChipSpec | None = None

    @property
    def key(self) -> str:
        """The sweep's ``chip`` value: the config path, or the built design's canonical JSON."""
        if self.spec is None:
            return self.config
        return json.dumps({"build": asdict(self.spec), "system": self.config}, sort_keys=True)

    @property
    def label(self) -> str:
        """What the co-design table's ``chip`` column says: the config, or the builder flags."""
        if self.spec is None:
            return self.config
        s = self.spec
        flags = (f"accelsim chip --area-mm2 {s.area_mm2:g} --node {s.node_nm:g} --format "
                 f"{','.join(s.formats)} --frequency-GHz {s.frequency_GHz:g} --array "
                 f"{s.array[0]}x{s.array[1]}"
                 + ("" if s.sram_MiB is None else f" --sram-MiB {s.sram_MiB:g}")
                 + ("" if s.power_limit_W is None else f" --power-limit-W {s.power_limit_W:g}")
                 + f" --memory-bandwidth-GBps {s.memory_bandwidth_GBps:g}"
                 f" --memory-capacity-GiB {s.memory_capacity_GiB:g}")
        return flags + (f" in {self.config}" if self.config else "")

    def system(self) -> System:
        """The System this design times (a built one: :func:`build_system`)."""
        return design_system(self.key)


def build_system(spec: ChipSpec, base: System | None = None) -> System:
    """``spec``'s built chip alone (``base`` None) or in ``base``'s topology."""
    chip = build_chip(spec)
    return system_of(chip) if base is None else place(chip, base)


def design_system(key: str) -> System:
    """The System of a design ``key`` (:attr:`Design.key`): a config loaded strictly, or the
    built chip (in its base system when it names one)."""
    from accelsim.arch.config import load_system

    if not key.startswith(_BUILT_PREFIX):
        return load_system(Path(key))
    d = json.loads(key)
    b = d["build"]
    spec = ChipSpec(**{**b, "formats": tuple(b["formats"]), "array": tuple(b["array"])})
    return build_system(spec, load_system(Path(d["system"])) if d["system"] else None)


def _area(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not (math.isfinite(value) and value > 0):
        raise InputError(f"{where}: area_mm2 must be a number > 0, got {value!r}")
    return float(value)


def designs_from_chips(specs: list[str] | tuple[str, ...]) -> tuple[Design, ...]:
    """Designs from arch configs (paths or shipped names), named by their file stems; no area
    (a config carries none: give a designs file's area_mm2)."""
    from accelsim.paths import resolve_input

    paths = [resolve_input(s, "system") for s in specs]
    out = [Design(p.stem, str(p)) for p in paths]
    return _unique(out, "--chips")


def _spec(d: dict[str, Any], name: str, where: str) -> ChipSpec:
    """The ChipSpec of a builder ``[[design]]`` (its errors prefixed with ``where``)."""
    missing = [k for k in ("area_mm2", "node_nm", "formats", "frequency_GHz") if k not in d]
    if missing:
        raise InputError(f"{where}: a built design needs {', '.join(missing)} (builder keys: "
                         f"{', '.join(BUILDER_KEYS)})")
    kw = {k: d[k] for k in BUILDER_KEYS if k in d}
    f = kw["formats"]
    if not isinstance(f, list) or not all(isinstance(x, str) for x in f):
        raise InputError(f"{where}: formats must be a list of format names, got {f!r}")
    kw["formats"] = tuple(f)
    if "array" in kw:
        a = kw["array"]
        if not isinstance(a, list) or len(a) != 2:
            raise InputError(f"{where}: array must be [rows, cols], got {a!r}")
        kw["array"] = tuple(a)
    try:
        spec = ChipSpec(name=name, **kw)
        build_chip(spec)  # a die that cannot hold its SRAM or one array: an error now
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    return spec


def load_designs(path: str | Path) -> tuple[Design, ...]:
    """A designs TOML: ``[[design]]`` tables, each with a ``name`` and either ``config`` (an
    arch config, relative to the designs file, or a shipped name; optional ``area_mm2``) or the
    chip builder's keys (:data:`BUILDER_KEYS`; area_mm2, node_nm, formats and frequency_GHz
    required) with an optional ``system`` whose topology the built chip is placed in."""
    from accelsim.paths import resolve_input

    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{path}: cannot read the designs file ({exc})") from None
    extra = sorted(set(data) - {"design"})
    if extra or not isinstance(data.get("design"), list) or not data["design"]:
        raise InputError(f"{path}: expected [[design]] tables only (name, and config or chip "
                         "builder keys)" + (f"; unknown key(s) {', '.join(extra)}" if extra
                                            else ""))

    def config_path(value: Any, key: str, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise InputError(f"{where}: {key} must be a non-empty string, got {value!r}")
        p = path.parent / value
        return str(p if p.is_file() else resolve_input(value, "system"))

    out = []
    for i, d in enumerate(data["design"]):
        where = f"{path} design[{i}]"
        unknown = sorted(set(d) - set(DESIGN_KEYS))
        if unknown:
            raise InputError(f"{where}: unknown key(s) {', '.join(unknown)} (expected "
                             f"{', '.join(DESIGN_KEYS)})")
        if not isinstance(d.get("name"), str) or not d["name"]:
            raise InputError(f"{where}: name must be a non-empty string, got {d.get('name')!r}")
        builder = sorted(set(d) & (set(BUILDER_KEYS) - {"area_mm2"}))
        if "config" in d:
            if builder or "system" in d:
                raise InputError(f"{where}: config and chip-builder keys "
                                 f"({', '.join(builder + ['system'] * ('system' in d))}) "
                                 "exclude each other: a design is a config or a built chip")
            out.append(Design(d["name"], config_path(d["config"], "config", where),
                              _area(d.get("area_mm2"), where)))
        else:
            spec = _spec(d, d["name"], where)
            base = config_path(d["system"], "system", where) if "system" in d else ""
            out.append(Design(d["name"], base, float(spec.area_mm2), spec))
    return _unique(out, str(path))


def _unique(designs: list[Design], where: str) -> tuple[Design, ...]:
    names = [d.name for d in designs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"{where}: design name(s) {', '.join(dup)} given more than once")
    return tuple(designs)
