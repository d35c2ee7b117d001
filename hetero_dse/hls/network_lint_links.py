"""The lint's reading of a network project's v++ link configuration (``connectivity.cfg``) against the kernel, the
model and the host's test double.

v++ takes any bank for a port the file leaves out, and XRT refuses at run time a buffer passed to a port on
another bank; the model charges each memory channel's bandwidth to the ports it places there
(``fpga_network_ports.port_banks``, shared by the units as ``unit_share`` counts). So the file must name every m_axi
port of every compute unit once, on the bank the model places it, the three activation ports of an arena's part
together (the host passes them one buffer), each bank within the board's and holding what the host puts there;
each compute unit kept to the SLR the model places it in where it clocks the unit as crossing none; and the test
double of XRT (``sim/include/xrt/xrt_banks.h``) must check the host against these banks, not others.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from cost_models.fpga_network_memory import bank_bytes
from cost_models.fpga_network_ports import port_banks
from cost_models.fpga_slrs import slr_room
from hetero_dse.errors import HeteroDSEError
from hetero_dse.hardware.board import RESOURCE_KINDS, Board, Memory, load_board

__all__ = ["SP_LINE", "bank_load", "check_links", "port_bytes"]

SP_LINE = re.compile(r"(\w+)\.(\w+):(\w+)\[(\d+)(?::(\d+))?\]$")


def check_links(project: Path, record: dict[str, Any], arguments: list[str], m_axi: set[str], add: Any) -> None:
    """Findings (``add``) where ``connectivity.cfg`` and the kernel (its top function's ``arguments`` in order, those
    in ``m_axi`` its m_axi ports), the model's placement, the data the host allocates or the XRT test double's banks
    disagree."""
    design, where = record["design"], "connectivity.cfg"
    try:
        board = load_board(record["board"])
    except HeteroDSEError:
        add("links", where, f"the board {record['board']!r} of design.json is not one hetero_dse knows: its banks "
                            "cannot be checked")
        return
    cfg = project / where
    if not board.platform:
        if cfg.exists():
            add("links", where, f"{board.name} has no acceleration platform: nothing links an xclbin with this file")
        return
    if not cfg.is_file():
        add("links", where, "missing: v++ -l would put every port on a bank of its own choosing")
        return
    ports = [a for a in arguments if a in m_axi]
    lines = _read(cfg.read_text(), add)
    nks, sps, slrs = lines["nk"], lines["sp"], lines["slr"]
    units = design.get("compute_units", 1)
    names = _instances(nks, record["top"], units, add)
    memory = board.memory
    kind = memory.connectivity or "DDR"
    placed: dict[tuple[str, str], tuple[int, int]] = {}
    for sp in sps:
        m = SP_LINE.match(sp)
        if not m:
            add("links", where, f"sp={sp}: not INSTANCE.PORT:{kind}[BANK] or {kind}[FIRST:LAST]")
            continue
        unit, port, mem, first = m.group(1), m.group(2), m.group(3), int(m.group(4))
        last = int(m.group(5)) if m.group(5) is not None else first
        if unit not in names:
            add("links", where, f"sp={sp}: {unit} is not one of the compute units nk names ({', '.join(names)})")
        elif port not in m_axi:
            add("links", where, f"sp={sp}: {port} is not one of the kernel's m_axi ports ({', '.join(ports)})")
        elif mem != kind or not first <= last < memory.channels:
            add("links", where, f"sp={sp}: {board.name} has {memory.channels} {kind} banks, 0 to "
                                f"{memory.channels - 1}")
        elif (unit, port) in placed:
            add("links", where, f"sp={sp}: {unit}.{port} is connected twice")
        else:
            placed[unit, port] = (first, last)
    missing = [f"{u}.{p}" for u in names for p in ports if (u, p) not in placed]
    if missing:
        add("links", where, f"no sp line for {', '.join(missing)}: v++ would put them on a bank of its choosing, "
                            "not the one the model charges")
        return
    _check_slrs(slrs, names, board, design, add)
    _check_model(project, memory, names, ports, placed, add, design.get("first_unit", 0))
    _check_double(project, names, arguments, placed, add)


def _read(text: str, add: Any) -> dict[str, list[str]]:
    """The values of the file's nk, sp and slr lines: v++ reads a config file as sections of KEY=VALUE lines (space
    around the = allowed), these in [connectivity]."""
    lines: dict[str, list[str]] = {"nk": [], "sp": [], "slr": []}
    section = None
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if heading := re.fullmatch(r"\[(\w+)\]", line):
            section = heading.group(1)
            continue
        pair = re.fullmatch(r"([\w.]+)\s*=\s*(.*)", line)
        if pair is None:
            add("links", "connectivity.cfg", f"{line!r}: not a [section] or KEY=VALUE line")
        elif pair.group(1) in lines and section != "connectivity":
            add("links", "connectivity.cfg", f"{line}: outside the [connectivity] section, where v++ reads it")
        elif pair.group(1) in lines:
            lines[pair.group(1)].append(pair.group(2).strip())
    return lines


def _instances(nks: list[str], top: str, units: int, add: Any) -> list[str]:
    """The compute units' instance names of the one nk line, as many as the design's compute units."""
    if len(nks) != 1:
        add("links", "connectivity.cfg", f"{len(nks)} nk lines: one names the design's {units} compute unit(s)")
        return []
    kernel, _, rest = nks[0].partition(":")
    count, _, names = rest.partition(":")
    instances = names.split(".") if names else []
    if kernel != top or count != str(units) or len(instances) != units or len(set(instances)) != units:
        add("links", "connectivity.cfg", f"nk={nks[0]}: the design has {units} compute unit(s) of {top}, each named "
                                         "once")
    return instances


def _check_slrs(lines: list[str], names: list[str], board: Board, design: dict[str, Any], add: Any) -> None:
    """Each unit kept to the SLR the model placed it in (``unit_slrs``: where each fits one, the model clocks it as
    crossing none), and no SLR given more units than its room holds (``slr_room``; a unit's resources: the design's
    over its units)."""
    where, slr_of = "connectivity.cfg", {}
    for line in lines:
        unit, _, slr = line.partition(":")
        if unit not in names or not re.fullmatch(r"SLR\d+", slr) or int(slr[3:]) >= board.slrs:
            add("links", where, f"slr={line}: not one of the compute units ({', '.join(names)}) on SLR0 to "
                                f"SLR{board.slrs - 1}")
        elif unit in slr_of:
            add("links", where, f"slr={line}: {unit} is given an SLR twice")
        else:
            slr_of[unit] = int(slr[3:])
    want = design.get("unit_slrs")
    if want:
        for unit, slr in zip(names, want, strict=False):
            if slr_of.get(unit) != slr:
                got = f"on SLR{slr_of[unit]}" if unit in slr_of else "has no slr line"
                add("links", where, f"{unit} {got}: the model keeps it to SLR{slr} and clocks it as crossing none")
    units = design.get("compute_units", 1)
    unit = np.array([design["resources"][k] for k in RESOURCE_KINDS]) / units
    capacity = slr_room(board)
    for slr in sorted(set(slr_of.values())):
        count = sum(1 for v in slr_of.values() if v == slr)
        over = [k for k, u, c in zip(RESOURCE_KINDS, unit, capacity[slr], strict=True) if c > 0 and count * u > c]
        if over:
            add("links", where, f"SLR{slr} is given {count} compute unit(s): their {', '.join(over)} are past its "
                                "room (the board's usable share of what its shell leaves)")


def _check_model(project: Path, memory: Memory, names: list[str], ports: list[str],
                 placed: dict[tuple[str, str], tuple[int, int]], add: Any, first_unit: int = 0) -> None:
    """Each port on the bank ``port_banks`` places it (a weight port over the same span of banks as the others,
    from that bank on; a kernel of a set's, its units' banks those from its ``first_unit`` on); and the buffers the
    host allocates there (their sizes from data/) within the banks."""
    weights = [p for p in ports if p.startswith("wgt")]
    spans = {placed[u, p][1] - placed[u, p][0] + 1 for u in names for p in weights}
    span = spans.pop() if len(spans) == 1 else 0
    if span == 0:
        add("links", "connectivity.cfg", f"the weight ports span {sorted(spans)} banks: the model gives each the same")
        return
    for u, unit in enumerate(names):
        banks = port_banks(first_unit + u, memory.channels, len(weights), span)
        # the table and the arena's ports on the arena's bank (``port_banks``), wgt, wgt1, ... on the weights'
        want = ({p: banks["arena"] for p in ports} | {"params": banks["params"]}
                | dict(zip(weights, banks["weights"], strict=True)))
        for p in ports:
            first, last = placed[unit, p]
            if (first, last) != (want[p], want[p] + (span - 1 if p in weights else 0)):
                bank = f"[{want[p]}:{want[p] + span - 1}]" if p in weights and span > 1 else f"[{want[p]}]"
                add("links", "connectivity.cfg", f"{unit}.{p} on [{first}{f':{last}' if last != first else ''}]: "
                                                 f"the model places it on {bank}, and charges that bank's bandwidth")
    # what the host allocates on each bank: the table, the arena's parts, each weight port's part, the parameters
    sizes = port_bytes(project, ports)
    if sizes is None:
        return  # the data's own check (the C-simulation's) says what is missing
    load = bank_load(placed, dict.fromkeys(names, sizes), bank_bytes(memory))
    for b, used in sorted(load.items()):
        if used > bank_bytes(memory):
            add("links", "connectivity.cfg", f"bank {b} holds {used / 1e6:.1f} MB of the host's buffers; it has "
                                             f"{bank_bytes(memory) / 1e6:.1f} MB")


def port_bytes(project: Path, ports: list[str]) -> dict[str, int] | None:
    """What the host allocates for each of a network project's m_axi ``ports`` (its buffers' sizes from data/):
    the table, the parameters, each of the arena's parts (on its ``act_in`` ports: a part's other streams share
    that buffer) and each weight port's part of the weights; None where a file is missing."""
    data = project / "data"
    try:
        sizes = {"table": (data / "table.bin").stat().st_size, "params": (data / "params.bin").stat().st_size}
        arena, wgt = (data / "arena.bin").stat().st_size, (data / "weights.bin").stat().st_size
    except OSError:
        return None
    halves = [p for p in ports if p.startswith("act_in")]
    weights = [p for p in ports if p.startswith("wgt")]
    return sizes | {p: arena // len(halves) for p in halves} | {p: wgt // len(weights) for p in weights}


def bank_load(placed: dict[tuple[str, str], tuple[int, int]], sizes: dict[str, dict[str, int]], capacity: float
              ) -> dict[int, float]:
    """The bytes on each bank: each unit's buffers (``sizes[unit]``, ``port_bytes``) on the banks its ports are
    connected to (``placed``: (unit, port) -> its first and last bank), a range's buffer filled from its first bank
    on, ``capacity`` a bank at a time."""
    load: dict[int, float] = defaultdict(float)
    for unit, buffers in sizes.items():
        for p, size in buffers.items():
            first, last = placed[unit, p]
            for b in range(first, last + 1):
                load[b] += min(capacity, max(0, size - (b - first) * capacity))
    return load


def _check_double(project: Path, names: list[str], arguments: list[str],
                  placed: dict[tuple[str, str], tuple[int, int]], add: Any) -> None:
    """The XRT test double's banks (``xrt_banks.h``: a unit's row, the kernel's arguments in order, -1 for a scalar)
    those of connectivity.cfg, a range by its first."""
    path = project / "sim" / "include" / "xrt" / "xrt_banks.h"
    if not path.is_file():
        add("links", "xrt_banks.h", "missing: the host program's test run could not check its buffers' banks")
        return
    rows = [[int(v) for v in row.split(",")] for row in re.findall(r"^\s*\{([-\d, ]+)\},?\s*//", path.read_text(),
                                                                   re.M)]
    for u, unit in enumerate(names):
        want = [placed[unit, a][0] if (unit, a) in placed else -1 for a in arguments]
        got = rows[u] if u < len(rows) else None
        if got != want:
            add("links", "xrt_banks.h", f"{unit}'s banks {got}: connectivity.cfg's are {want}; the host program's "
                                        "test run would check its buffers against the wrong banks")
