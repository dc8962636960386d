"""Strict TOML loading of architecture configs (``arch_configs/*.toml``) into frozen dataclasses.

Units live in the key names at the boundary (``_GBps``, ``_GHz``, ``_KiB``/``_MiB``/``_GiB``,
``_ns``) and are converted once, here, to SI (bytes, bytes/s, Hz, s). Unknown, missing or
duplicate keys, wrong types and non-positive sizes raise :class:`ConfigError` naming the file,
the dotted key path and the bad value.

Schema (every key required unless marked optional)::

    [system]  name (str), description (str, optional), chips, topology (str), boards,
              chips_per_board, network_efficiency (optional, in (0, 1], default 1: the
              fraction of the wire rate every collective reaches, applied by netsim)
    [system.link]         bandwidth_GBps (per link per direction), latency_ns, links_per_chip
    [system.inter_board]  bandwidth_GBps (per link per direction), latency_ns, links_per_chip
    [chip]    cores, ring_bandwidth_GBps, memory_capacity_GiB | memory_capacity_MiB,
              memory_bandwidth_GBps, kernel_launch_us (optional, default 0),
              fusion (optional bool, default false: element-wise layers fused into GEMMs),
              layout (optional, "nhwc" default | "nchw": activation layout of the framework),
              winograd (optional bool, default false: 3x3 stride-1 convolutions may use
              Winograd where faster, as cuDNN's benchmark mode; true needs [[chip.level]]),
              split_k (optional bool, default false: a GEMM whose output tiles leave cores
              idle may split K over them and reduce the fp32 partial sums in a second kernel,
              as GPU GEMM libraries do; accelsim.perf.gemm),
              host_link_GBps (optional: the chip's link to host memory, GB/s per direction,
              PCIe or NVLink-C2C; what serving's KV offload copies over)
    [chip.power]  (optional; absent = no power model) power_limit_W (board limit, the TDP),
              static_W, max_clock_MHz, voltage_floor (V(0)/V(f_max) of a linear V(f), in
              [0, 1)), memory_pJ_per_byte; [chip.power.flop_pJ] precision = pJ per FLOP at
              V(f_max) (any of the core's precisions; accelsim.perf.power)
    [[chip.level]]  (optional, any number, innermost first) name, capacity_KiB | capacity_MiB,
              bandwidth_GBps (per instance), shared_by (cores per instance; must divide cores)
    [core]    rows, cols, frequency_GHz, scratchpad_KiB | scratchpad_MiB,
              scratchpad_bandwidth_GBps, sfu_ops_per_cycle, simt_precisions (optional list:
              precisions run on vector units, not the array; they need no NHWC transposes)
    [core.macs_per_pe_per_cycle]  fp16, fp8, hfp8 (required); fp32, tf32, bf16, e4m3, e5m2,
              hif8, int8, int4, fp4, mxfp8, mxfp6, mxfp4, nvfp4 (optional; a rate below 1
              means one MAC every 1/rate cycles; a format without one runs on the nearest
              wider datapath, accelsim.arch.model.WIDER_DATAPATH)

A config without ``[[chip.level]]``, ``kernel_launch_us`` and ``fusion`` behaves exactly as
before they existed. :class:`Table` is the strict reader other rooms (workloads) use.
"""

from __future__ import annotations

import math
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelsim.arch.model import (LAYOUTS, PRECISIONS, REQUIRED_PRECISIONS, Chip, ChipPower,
                                 Core, Link, MemoryLevel, System)
# the config ranges live with every other bound (re-exported: their old home)
from accelsim.bounds import PLAUSIBLE, PLAUSIBLE_FLOP_PJ, PLAUSIBLE_MAC_RATE  # noqa: F401
from accelsim.errors import ABSENT, TOO_DEEP, ConfigError
from accelsim.paths import locate

if TYPE_CHECKING:
    from accelsim.arch.schemes import Scheme

#: Topology names a config may use; graphs are built by accelsim.netsim.topology ("single" =
#: one chip, no network; "multi-board" = N boards of 8 hybrid cube-mesh chips, rail-aligned).
TOPOLOGIES = ("single", "ring", "torus-2d", "fully-connected", "switch", "dgx1",
              "hybrid-cube-mesh-64", "multi-board")

_GB = 1e9
_UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


#: Marker returned by :meth:`Table.raw` for an absent optional key (public alias).
_ABSENT = ABSENT


def _check_plausible(file, dotted: str, value, bounds=None) -> None:
    lo, hi = bounds if bounds is not None else PLAUSIBLE.get(dotted.rsplit(".", 1)[-1],
                                                             (None, None))
    if lo is not None and not lo <= value <= hi:
        raise ConfigError(file, dotted, value,
                          f"outside the plausible range [{lo:g}, {hi:g}] (docs/configs.md)")


class Table:
    """Reads keys from one TOML table, remembering which were used, so leftovers are errors."""

    def __init__(self, file: str, path: str, data: Any):
        if not isinstance(data, Mapping):
            raise ConfigError(file, path or "<root>", data, "must be a table")
        self.file, self.path, self.data, self.used = file, path, data, set()

    def _key(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def raw(self, key: str, *, optional: bool = False) -> Any:
        if key not in self.data:
            if optional:
                return _ABSENT
            raise ConfigError(self.file, self._key(key), _ABSENT, "missing required key")
        self.used.add(key)
        return self.data[key]

    def table(self, key: str) -> Table:
        return Table(self.file, self._key(key), self.raw(key))

    def string(self, key: str, *, optional: bool = False, choices: tuple[str, ...] = ()) -> Any:
        v = self.raw(key, optional=optional)
        if v is _ABSENT:
            return None
        if not isinstance(v, str) or not v.strip():
            raise ConfigError(self.file, self._key(key), v, "must be a non-empty string")
        if any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in v):
            # printed to terminals later: control characters (escape sequences) are refused
            raise ConfigError(self.file, self._key(key), v.encode("unicode_escape").decode(),
                              "must not contain control characters")
        if choices and v not in choices:
            raise ConfigError(self.file, self._key(key), v, f"must be one of {', '.join(choices)}")
        return v

    def integer(self, key: str, *, minimum: int = 1) -> int:
        v = self.raw(key)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(self.file, self._key(key), v, "must be an integer")
        if v < minimum:
            raise ConfigError(self.file, self._key(key), v, f"must be >= {minimum}")
        _check_plausible(self.file, self._key(key), v)
        return v

    def positive(self, key: str, *, optional: bool = False) -> Any:
        v = self.raw(key, optional=optional)
        if v is _ABSENT:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(self.file, self._key(key), v, "must be a number")
        if not math.isfinite(v) or v <= 0:
            raise ConfigError(self.file, self._key(key), v, "must be a positive finite number")
        bounds = (PLAUSIBLE_MAC_RATE if ".macs_per_pe_per_cycle" in f".{self.path}" else
                  PLAUSIBLE_FLOP_PJ if f".{self.path}".endswith(".power.flop_pJ") else None)
        _check_plausible(self.file, self._key(key), v, bounds)
        return float(v)

    def capacity(self, stem: str, units: tuple[str, ...]) -> int:
        """Exactly one of ``stem_<unit>`` for the given units; returns bytes (integer)."""
        present = [u for u in units if f"{stem}_{u}" in self.data]
        if len(present) != 1:
            names = " or ".join(f"{stem}_{u}" for u in units)
            got = [f"{stem}_{u}" for u in present]
            raise ConfigError(self.file, self._key(f"{stem}_{units[0]}"),
                              got if got else _ABSENT, f"exactly one of {names} is required")
        key = f"{stem}_{present[0]}"
        nbytes = self.positive(key) * _UNITS[present[0]]
        if nbytes != int(nbytes):
            raise ConfigError(self.file, self._key(key), self.data[key],
                              "must be a whole number of bytes")
        return int(nbytes)

    def boolean(self, key: str, *, default: bool) -> bool:
        v = self.raw(key, optional=True)
        if v is _ABSENT:
            return default
        if not isinstance(v, bool):
            raise ConfigError(self.file, self._key(key), v, "must be true or false")
        return v

    def tables(self, key: str) -> list[Table]:
        """An optional array of tables (``[[key]]``); absent = empty list."""
        v = self.raw(key, optional=True)
        if v is _ABSENT:
            return []
        if not isinstance(v, list):
            raise ConfigError(self.file, self._key(key), v, "must be an array of tables [[...]]")
        return [Table(self.file, f"{self._key(key)}[{i}]", x) for i, x in enumerate(v)]

    def finish(self) -> None:
        for key in self.data:
            if key not in self.used:
                raise ConfigError(self.file, self._key(key), self.data[key], "unknown key")


def _link(t: Table) -> Link:
    link = Link(bandwidth_Bps=t.positive("bandwidth_GBps") * _GB,
                latency_s=t.positive("latency_ns") * 1e-9,
                links_per_chip=t.integer("links_per_chip"))
    t.finish()
    return link


def _core(t: Table) -> Core:
    rates_t = t.table("macs_per_pe_per_cycle")
    rates = tuple((p, rates_t.positive(p)) for p in REQUIRED_PRECISIONS) + tuple(
        (p, rates_t.positive(p, optional=True)) for p in PRECISIONS
        if p not in REQUIRED_PRECISIONS and p in rates_t.data)
    rates_t.finish()
    simt = t.raw("simt_precisions", optional=True)
    simt = () if simt is _ABSENT else simt
    if not isinstance(simt, list | tuple) or any(
            not isinstance(p, str) or p not in dict(rates) for p in simt):
        raise ConfigError(t.file, t._key("simt_precisions"), simt,
                          "must be a list of precisions that have a macs_per_pe_per_cycle rate")
    core = Core(
        rows=t.integer("rows"),
        cols=t.integer("cols"),
        frequency_Hz=t.positive("frequency_GHz") * 1e9,
        mac_rates=rates,
        scratchpad_bytes=t.capacity("scratchpad", ("KiB", "MiB")),
        scratchpad_bandwidth_Bps=t.positive("scratchpad_bandwidth_GBps") * _GB,
        sfu_ops_per_cycle=t.positive("sfu_ops_per_cycle"),
        simt_precisions=tuple(simt),
    )
    t.finish()
    return core


def _level(t: Table, cores: int) -> MemoryLevel:
    shared = t.integer("shared_by")
    if cores % shared:
        raise ConfigError(t.file, t._key("shared_by"), shared,
                          f"must divide the chip's {cores} cores")
    lv = MemoryLevel(name=t.string("name"),
                     capacity_bytes=t.capacity("capacity", ("KiB", "MiB")),
                     bandwidth_Bps=t.positive("bandwidth_GBps") * _GB, shared_by=shared)
    t.finish()
    return lv


def _power(t: Table, core: Core) -> ChipPower:
    flop_t = t.table("flop_pJ")
    flops = []
    for p in list(flop_t.data):
        if p not in PRECISIONS or p not in dict(core.mac_rates):  # its own datapath's
            raise ConfigError(t.file, flop_t._key(p), flop_t.data[p],
                              "must name a precision with a core.macs_per_pe_per_cycle rate")
        flops.append((p, flop_t.positive(p) * 1e-12))
    flop_t.finish()
    floor = t.raw("voltage_floor")
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 <= floor < 1:
        raise ConfigError(t.file, t._key("voltage_floor"), floor, "must be a number in [0, 1)")
    limit, static = t.positive("power_limit_W"), t.positive("static_W")
    if static >= limit:
        raise ConfigError(t.file, t._key("static_W"), static,
                          f"must be below power_limit_W ({limit:g})")
    power = ChipPower(power_limit_W=limit, static_W=static,
                      max_clock_Hz=t.positive("max_clock_MHz") * 1e6,
                      voltage_floor=float(floor),
                      memory_J_per_byte=t.positive("memory_pJ_per_byte") * 1e-12,
                      flop_J=tuple(flops))
    t.finish()
    return power


def _unaligned_rate(t: Table) -> float:
    v = t.positive("unaligned_gemm_rate", optional=True)
    if v is None:
        return 1.0
    if v > 1:
        raise ConfigError(t.file, t._key("unaligned_gemm_rate"), v, "must be in (0, 1]")
    return v


def _host_link(t: Table) -> float | None:
    v = t.positive("host_link_GBps", optional=True)
    return None if v is None else v * _GB


def _chip(t: Table, core: Core) -> Chip:
    cores = t.integer("cores")
    launch = t.raw("kernel_launch_us", optional=True)
    if launch is not _ABSENT and (isinstance(launch, bool) or not isinstance(launch, int | float)
                                  or not math.isfinite(launch) or launch < 0):
        raise ConfigError(t.file, t._key("kernel_launch_us"), launch,
                          "must be a finite number >= 0")
    if launch is not _ABSENT:
        _check_plausible(t.file, t._key("kernel_launch_us"), launch)
    levels = tuple(_level(lt, cores) for lt in t.tables("level"))
    names = [lv.name for lv in levels]
    if len(set(names)) != len(names):
        raise ConfigError(t.file, t._key("level"), names, "level names must be unique")
    for inner, outer in zip(levels, levels[1:]):
        if outer.shared_by < inner.shared_by:
            raise ConfigError(t.file, t._key("level"), names,
                              "levels go from the array outward: shared_by must not shrink")
    chip = Chip(
        cores=cores,
        core=core,
        ring_bandwidth_Bps=t.positive("ring_bandwidth_GBps") * _GB,
        memory_capacity_bytes=t.capacity("memory_capacity", ("GiB", "MiB")),
        memory_bandwidth_Bps=t.positive("memory_bandwidth_GBps") * _GB,
        levels=levels,
        kernel_launch_s=0.0 if launch is _ABSENT else float(launch) * 1e-6,
        fusion=t.boolean("fusion", default=False),
        layout=t.string("layout", optional=True, choices=LAYOUTS) or "nhwc",
        winograd=t.boolean("winograd", default=False),
        split_k=t.boolean("split_k", default=False),
        power=_power(t.table("power"), core) if "power" in t.data else None,
        unaligned_gemm_rate=_unaligned_rate(t),
        host_link_Bps=_host_link(t),
    )
    if chip.winograd and not levels:
        # only the hierarchy (GPU) model times Winograd; the per-core model would ignore it
        raise ConfigError(t.file, t._key("winograd"), True,
                          "needs a memory hierarchy ([[chip.level]]): Winograd convolutions "
                          "are modelled only on hierarchy chips")
    t.finish()
    return chip


def system_from_dict(data: Mapping[str, Any], source: str | Path = "<dict>") -> System:
    """Build a :class:`System` from a parsed TOML document (TOML units), strictly."""
    file = str(source)
    root = Table(file, "", data)
    sys_t = root.table("system")
    core = _core(root.table("core"))
    chip = _chip(root.table("chip"), core)
    name = sys_t.string("name")
    description = sys_t.string("description", optional=True) or ""
    chips = sys_t.integer("chips")
    topology = sys_t.string("topology", choices=TOPOLOGIES)
    boards = sys_t.integer("boards")
    per_board = sys_t.integer("chips_per_board")
    if boards * per_board != chips:
        raise ConfigError(file, "system.chips_per_board", per_board,
                          f"boards x chips_per_board must equal chips ({boards} x {per_board} "
                          f"!= {chips})")
    if topology == "single" and chips != 1:
        raise ConfigError(file, "system.topology", topology, f"needs chips = 1, not {chips}")
    if topology == "dgx1" and chips != 8:
        raise ConfigError(file, "system.topology", topology, f"needs chips = 8, not {chips}")
    if topology == "hybrid-cube-mesh-64" and (chips != 64 or per_board != 8):
        raise ConfigError(file, "system.topology", topology,
                          f"needs chips = 64 on 8 boards of 8, not {boards} x {per_board}")
    if topology == "multi-board" and per_board != 8:
        raise ConfigError(file, "system.chips_per_board", per_board,
                          "multi-board topology needs 8 chips per board (hybrid cube-mesh boards)")
    link = _link(sys_t.table("link"))
    inter = _link(sys_t.table("inter_board"))
    net_eff = sys_t.positive("network_efficiency", optional=True)
    sys_t.finish()
    root.finish()
    return System(name=name, description=description, chips=chips, topology=topology,
                  boards=boards, chips_per_board=per_board, link=link,
                  inter_board_link=inter, chip=chip,
                  network_efficiency=1.0 if net_eff is None else net_eff)


#: optional keys of the schema (module docstring): an override may set one a file leaves out
OPTIONAL_KEYS = ("system.network_efficiency", "chip.kernel_launch_us", "chip.fusion",
                 "chip.layout", "chip.winograd", "chip.split_k", "chip.unaligned_gemm_rate",
                 "chip.host_link_GBps")


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any],
                    source: str | Path = "<overrides>") -> dict[str, Any]:
    """A deep copy of ``data`` with dotted TOML keys replaced, e.g.
    ``{"system.link.bandwidth_GBps": 64, "chip.cores": 16}``. Only existing keys may be
    overridden, or an optional key of the schema set (:data:`OPTIONAL_KEYS`); a misspelt key is
    a :class:`ConfigError`, never a silent no-op."""
    out = _deepcopy(data)
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        node = out
        for i, part in enumerate(parts):
            if dotted in OPTIONAL_KEYS and i == len(parts) - 1 and isinstance(node, dict) \
                    and part not in node:  # a key the schema allows a file to leave out
                node[part] = value
                break
            if not isinstance(node, dict) or part not in node:
                raise ConfigError(source, dotted, value,
                                  f"override names no existing key ({'.'.join(parts[:i + 1])})")
            if i == len(parts) - 1:
                if isinstance(node[part], dict):
                    raise ConfigError(source, dotted, value, "override names a table, not a key")
                node[part] = value
            else:
                node = node[part]
    return out


def _deepcopy(d: Any) -> Any:
    if isinstance(d, Mapping):
        return {k: _deepcopy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_deepcopy(v) for v in d]
    return d


#: largest config/workload file read (a generated 1T-parameter GPT layer list is ~1 MB)
MAX_CONFIG_BYTES = 64 * 2**20


def read_text(path: str | Path) -> str:
    """The text of a config-like file (UTF-8, with or without a byte-order mark); a missing or
    unreadable file is a :class:`ConfigError`."""
    path = Path(path)
    try:
        st = path.stat()  # follows symlinks; a loop is an OSError below
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(path, "<file>", str(path), "not a regular file (a directory, FIFO "
                              "or device is refused: reading it could block or never end)")
        if st.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(path, "<file>", str(path), f"{st.st_size:,} bytes is more than "
                              f"the {MAX_CONFIG_BYTES:,} a config or workload may have")
        # utf-8-sig: a byte-order mark (Windows editors save one) is dropped, not a TOML error
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(path, "<file>", str(path), "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, "<file>", str(path), f"cannot read: {exc}") from None
    return text


def read_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file with :mod:`tomllib`; syntax errors and duplicate keys become
    :class:`ConfigError` with the file, the line/column and (where recoverable) the key."""
    path = Path(path)
    text = read_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, _key_near_error(text, str(exc)), _ABSENT,
                          f"TOML error: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise ConfigError(path, "<toml>", _ABSENT, TOO_DEEP) from None


def _key_near_error(text: str, msg: str) -> str:
    """Best-effort dotted key for a TOML error: the key on the reported line prefixed by the
    enclosing ``[table]`` (tomllib reports a duplicate as 'Cannot overwrite a value (at line L,
    column C)')."""
    import re

    lines = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    m = re.search(r"at line (\d+)", msg)
    if m:
        idx = int(m.group(1)) - 1
    elif "end of document" in msg:
        idx = max((i for i, ln in enumerate(lines) if ln), default=-1)
    else:
        return "<toml>"
    if not 0 <= idx < len(lines):
        return "<toml>"
    line = lines[idx]
    if line.startswith("["):
        return line.strip("[] ")
    if "=" not in line:
        return "<toml>"
    key = line.split("=", 1)[0].strip()
    for prev in reversed(lines[:idx]):
        if prev.startswith("["):
            return f"{prev.strip('[] ')}.{key}"
    return key


def load_policy(path: str | Path, scheme: str | Scheme) -> Any:
    """``scheme`` (a name or :class:`~accelsim.arch.schemes.Scheme`) with the precision policy
    of a TOML file, read strictly::

        [policy]
        first_last_high = false       # optional: first/last GEMM layer in high precision
        high_precision = "bf16"       # optional: the precision of those layers
        [policy.layers]               # optional: per-layer compute precision
        conv1 = "fp16"

    Layer names are checked against the workload by :func:`accelsim.perf.layer_precisions`
    (the error names this file and the layer)."""
    from accelsim.arch.schemes import with_policy

    file = str(path)
    root = Table(file, "", read_toml(path))
    pol = root.table("policy")
    first_last = pol.raw("first_last_high", optional=True)
    if first_last is not _ABSENT and not isinstance(first_last, bool):
        raise ConfigError(file, "policy.first_last_high", first_last, "must be true or false")
    high = pol.string("high_precision", optional=True, choices=PRECISIONS)
    layers: dict[str, str] = {}
    if "layers" in pol.data:
        lt = pol.table("layers")
        for name in list(lt.data):
            layers[name] = lt.string(name, choices=PRECISIONS)
        lt.finish()
    pol.finish()
    root.finish()
    return with_policy(scheme, first_last_high=None if first_last is _ABSENT else first_last,
                       high_precision=high, overrides=layers, source=file)


def load_system(path: str | Path, overrides: Mapping[str, Any] | None = None) -> System:
    """Load ``arch_configs/*.toml`` strictly into a :class:`System` (SI units inside).

    ``path`` is a file or the name of a shipped config (``"h100-sxm"``, see
    :mod:`accelsim.paths`). ``overrides`` maps dotted TOML keys (in the file's units) to new
    values, for sweeps."""
    path = locate(path, "system")
    data = read_toml(path)
    if overrides:
        data = apply_overrides(data, overrides, source=path)
    return system_from_dict(data, source=path)
