"""FPGA boards: one YAML file each, validated against ``boards/board.schema.json``.

``load_board("vu9p")`` finds a packaged board by name; ``load_board("path/to/my_board.yaml")`` loads a
user's file. Either way a file that does not match the schema is rejected with a message naming the
file and the field.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hetero_dse.errors import BoardError
from hetero_dse.resources import data_dir
from hetero_dse.yamlfile import YamlFileError, load_yaml

RESOURCE_KINDS = ("dsp", "bram18k", "uram", "lut", "ff")


#: How one m_axi port sees each kind of memory, where the board file does not say (measured on Alveo boards;
#: shared/notes and the issue-35 research notes): the share of the peak a long sequential stream gets, a
#: read's round trip, and the least a read and a write burst take (a short burst costs that, whatever its
#: beats: the round trip over the 16 transactions an m_axi port keeps in flight, or the memory's own floor).
#: DDR4: 16.8 of 19.25 GB/s reading one U200 port with long bursts (Vitis_Accel_Examples axi_burst_performance),
#: 245-260 ns round trip (the same log's fixed cost of a transfer), 28.6 ns a write burst (4-beat writes at
#: 8.9 GB/s). HBM2: 13.1 of 14.375 GB/s per pseudo-channel, ~210 ns, 13.4 ns a random 64 B read (the Vitis HBM
#: bandwidth tutorial on the U280). Zynq PS DDR and DDR3: estimates, to be calibrated.
MEMORY_DEFAULTS = {
    "ddr4": {"efficiency": 0.87, "latency_ns": 250.0, "read_burst_ns": 15.6, "write_burst_ns": 28.6},
    "hbm2": {"efficiency": 0.91, "latency_ns": 210.0, "read_burst_ns": 13.4, "write_burst_ns": 13.4},
    "ddr3": {"efficiency": 0.85, "latency_ns": 250.0, "read_burst_ns": 15.6, "write_burst_ns": 28.6},
    "ps_ddr4": {"efficiency": 0.85, "latency_ns": 300.0, "read_burst_ns": 18.8, "write_burst_ns": 28.6},
    "ps_ddr3": {"efficiency": 0.85, "latency_ns": 300.0, "read_burst_ns": 18.8, "write_burst_ns": 28.6},
    "lpddr4": {"efficiency": 0.85, "latency_ns": 300.0, "read_burst_ns": 18.8, "write_burst_ns": 28.6},
}


@dataclass(frozen=True)
class Memory:
    """One kind of off-chip memory: ``channels`` independent ports of ``bandwidth_gbps_per_channel`` GB/s."""

    kind: str
    channels: int
    bandwidth_gbps_per_channel: float
    # the whole memory's, all its channels together (a bank holds this over ``channels``); on a Zynq the PS DDR
    # is also Linux's
    capacity_gib: float | None = None
    connectivity: str | None = None
    # AXI data width of one port, what one beat of an m_axi interface moves: 512 bits where the board file
    # does not say, the width of the Alveo/F1 memory controllers' AXI ports (UG1393)
    port_bits: int = 512
    # the PL's AXI ports into the memory (a Zynq's HP and HPC ports), each a read and a write channel of a port's
    # word a cycle: kernel ports past them share one; None where a platform's banks take any number of ports
    axi_ports: int | None = None
    # what one port gets of it (MEMORY_DEFAULTS by kind where the file does not say)
    efficiency: float | None = None
    latency_ns: float | None = None
    read_burst_ns: float | None = None
    write_burst_ns: float | None = None

    def __post_init__(self) -> None:
        for key, value in MEMORY_DEFAULTS.get(self.kind, MEMORY_DEFAULTS["ddr4"]).items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, value)

    @property
    def bandwidth_gbps(self) -> float:
        return self.channels * self.bandwidth_gbps_per_channel

    @property
    def sustained_gbps_per_channel(self) -> float:
        """What one port streams with long bursts."""
        return self.bandwidth_gbps_per_channel * self.efficiency


@dataclass(frozen=True)
class Board:
    """What the FPGA cost model and the HLS project generator need to know about a board."""

    name: str
    description: str
    part: str
    platform: str | None
    default_clock_mhz: float
    max_clock_mhz: float
    resources: Mapping[str, int]
    usable: Mapping[str, float]
    memories: tuple[Memory, ...]
    sources: Mapping[str, str]
    path: Path
    slrs: int = 1
    #: each SLR's resources the platform's shell leaves to kernels (SLR0 first); None: an even share of the part's
    slr_resources: tuple[Mapping[str, int], ...] | None = None

    @property
    def memory(self) -> Memory:
        """The memory the accelerator's ports use by default (the first listed)."""
        return self.memories[0]

    def kernel_resources(self, resource: str) -> int:
        """What the platform's shell leaves kernels of a resource: the sum over its SLRs (``slr_resources``) where
        the board file gives them, else the whole part's (a Vivado flow, or a shell not counted)."""
        return slr_sums(self.slr_resources).get(resource, self.resources[resource])

    def cap(self, resource: str) -> int:
        """Usable amount of a resource: the usable fraction of what the shell leaves kernels
        (``kernel_resources``), rounded down. Each SLR's room (``fpga_slrs.slr_room``) is the same fraction of
        the same counts (where it is at most 90 %, as on every packaged board; above, the room keeps 10 % for the
        infrastructure), so the budget of one kernel is the sum of its SLRs' rooms."""
        return int(self.kernel_resources(resource) * self.usable[resource])

    @property
    def caps(self) -> dict[str, int]:
        return {r: self.cap(r) for r in RESOURCE_KINDS}


def slr_sums(slr_resources: Any) -> dict[str, int]:
    """What a board file's SLRs leave kernels in all, a resource each (none without SLR figures)."""
    return {k: sum(r[k] for r in slr_resources) for k in RESOURCE_KINDS} if slr_resources else {}


def list_boards() -> list[Board]:
    """Every packaged board, by name."""
    return [load_board(p) for p in sorted(data_dir("boards").glob("*.yaml"))]


def board_names() -> list[str]:
    return sorted(p.stem for p in data_dir("boards").glob("*.yaml"))


def load_board(name_or_path: str | Path) -> Board:
    """Load a packaged board by name, or a board file by path.

    Raises:
        BoardError: unknown name, unreadable file, YAML syntax error, or a field that breaks the schema.
    """
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith((".yaml", ".yml")) or path.is_file()):
        path = data_dir("boards") / f"{text.lower()}.yaml"
        if not path.is_file():
            close = difflib.get_close_matches(text.lower(), board_names(), n=2)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise BoardError(f"unknown board {text!r}{hint}; known boards: {', '.join(board_names())}, "
                             "or give the path of a board YAML file")
    try:
        raw = load_yaml(path)
    except YamlFileError as exc:
        if exc.problem is None:
            raise BoardError(f"board file {path} {exc.reason}") from None
        where = f" at line {exc.line}" if exc.line is not None else ""
        raise BoardError(f"board file {path} is not valid YAML{where}: {exc.problem}") from None
    return _from_dict(raw, path)


def _from_dict(raw: Any, path: Path) -> Board:
    if not isinstance(raw, dict):
        raise BoardError(f"board file {path} must hold a mapping of fields, not {type(raw).__name__}")
    # Report the shallowest problem first: a missing section before a bad value inside another.
    errors = sorted(_validator().iter_errors(raw),
                    key=lambda e: (len(e.absolute_path), [str(p) for p in e.absolute_path]))
    if errors:
        raise BoardError(f"board file {path}: {_describe(errors[0])}")
    for field in ("name", "description", "part", "platform"):
        # these reach Tcl, the Makefile and comments of the C++: a line break would start a command of its own
        # (the schema's patterns cannot see a trailing one: Python's $ matches before it)
        value = raw.get(field)
        if isinstance(value, str) and any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise BoardError(f"board file {path}: field {field} holds a line break or another control character "
                             f"({value!r}); it must be one line of text")
    clock = raw["clock"]
    resources, slr_resources = raw["resources"], raw.get("slr_resources")
    if slr_resources is not None and len(slr_resources) != raw.get("slrs", 1):
        raise BoardError(f"board file {path}: slr_resources lists {len(slr_resources)} SLRs; the part has "
                         f"{raw.get('slrs', 1)} (field slrs)")
    _holds_a_pe_array(path, resources, "")
    left = slr_sums(slr_resources)
    if left:  # what the shell leaves kernels is the budget (Board.cap): it too must hold one, within the part
        _holds_a_pe_array(path, left, " left by the shell over slr_resources")
        over = next((k for k in RESOURCE_KINDS if left[k] > resources[k]), None)
        if over:
            raise BoardError(f"board file {path}: slr_resources leave kernels {left[over]:,} {over.upper()} over "
                             f"the SLRs, more than the part's {resources[over]:,} (field resources.{over})")
    if clock["default_mhz"] > clock["max_mhz"]:
        raise BoardError(f"board file {path}: field clock.default_mhz ({clock['default_mhz']}) is above "
                         f"clock.max_mhz ({clock['max_mhz']})")
    return Board(
        name=raw["name"], description=raw["description"], part=raw["part"], platform=raw.get("platform"),
        default_clock_mhz=float(clock["default_mhz"]), max_clock_mhz=float(clock["max_mhz"]),
        resources=MappingProxyType(dict(raw["resources"])), usable=MappingProxyType(dict(raw["usable"])),
        memories=tuple(Memory(**m) for m in raw["memory"]), sources=MappingProxyType(dict(raw["sources"])),
        path=path.resolve(), slrs=int(raw.get("slrs", 1)),
        slr_resources=tuple(MappingProxyType(dict(r)) for r in slr_resources) if slr_resources else None)


def _holds_a_pe_array(path: Path, counts: Mapping[str, int], whose: str) -> None:
    """Refuse resources (the part's, or what its shell leaves, ``whose``) that hold no PE array or no buffer."""
    if counts["dsp"] <= 0 or counts["lut"] <= 0:
        raise BoardError(f"board file {path}: resources.dsp and resources.lut must be above 0 (the PE array "
                         f"is built from them), got {counts['dsp']} and {counts['lut']}{whose}")
    if counts["bram18k"] <= 0 and counts.get("uram", 0) <= 0:
        raise BoardError(f"board file {path}: the board has no on-chip memory (resources.bram18k and "
                         f"resources.uram are 0{whose}); the accelerator's tile buffers need one of them")


@cache
def _validator() -> Any:
    import jsonschema

    schema = json.loads((data_dir("boards") / "board.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def _describe(error: Any) -> str:
    """Turn a jsonschema error into one sentence that names the field."""
    field = ".".join(str(p) for p in error.absolute_path)
    value = error.instance
    if error.validator == "required":
        missing = error.message.split("'")[1]
        return f"missing field {'.'.join(filter(None, [field, missing]))}"
    if error.validator == "additionalProperties":
        extra = sorted(set(value) - set(error.schema.get("properties", {})))
        return f"unknown field {'.'.join(filter(None, [field, extra[0]]))}"
    if error.validator in ("minimum", "exclusiveMinimum"):
        return f"field {field} must be {'at least' if error.validator == 'minimum' else 'above'} " \
               f"{error.validator_value}, got {value}"
    if error.validator == "maximum":
        return f"field {field} must be at most {error.validator_value}, got {value}"
    if error.validator == "type":
        expected = error.validator_value
        if not isinstance(expected, str):
            expected = " or ".join(expected)
        return f"field {field} must be of type {expected}, got {value!r}"
    if error.validator == "pattern":
        what = error.schema.get("description", f"a value matching {error.validator_value}")
        return f"field {field} cannot be {value!r}: {what}"
    if error.validator == "enum":
        return f"field {field} must be one of {', '.join(map(str, error.validator_value))}, got {value!r}"
    return f"field {field or '(top level)'}: {error.message}"
