"""What the RTL Vitis wrote says, read with pyverilog (``solution/syn/verilog/*.v``).

The report can be wrong or silent about three things the model depends on; the Verilog cannot:

* the data width of every m_axi port (``m_axi_<bundle>_RDATA``/``WDATA`` of the top module): the
  definitive check that a port moves the words the model charges (512 bits on Alveo, not 32);
* how many floating-point and multiplier cores the design instantiates, by core module name
  (``<top>_fmul_32ns_32ns_32_4_max_dsp_1``…), counted through the hierarchy (a PE module instantiated 896
  times with one fmul in it is 896 fmuls);
* the memory instances (``*_RAM_*``/``*_ram``/``*_memcore`` modules), by the variable they hold.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hetero_dse.errors import HeteroDSEError

__all__ = ["RtlError", "RtlSummary", "read_rtl"]

#: Core kinds by the operator name Vitis puts in a core module's name.
_CORE = re.compile(r"(?:^|_)(fmul|fadd|fsub|faddfsub|fmac|dmul|dadd|dsub|hmul|hadd|mul|mac_muladd|mul_mul|"
                   r"am_addmul|ama_addmuladd)_\d")
_MEMORY = re.compile(r"(_RAM_|_ram\b|_ram_|_ROM_|_rom\b|_memcore)", re.IGNORECASE)
_M_AXI_DATA = re.compile(r"^m_axi_(\w+)_(RDATA|WDATA)$")


class RtlError(HeteroDSEError):
    """Verilog that cannot be read."""


@dataclass
class RtlSummary:
    top: str
    #: m_axi data width per bundle, in bits (the widest of read and write data)
    port_bits: dict[str, int]
    #: core instances of the whole design by operator (fmul, fadd, mul…), through the hierarchy
    cores: dict[str, int]
    #: memory instances of the whole design by memory module name
    memories: dict[str, int]
    modules: list[str] = field(default_factory=list)


def _width(node) -> int:
    width = getattr(node, "width", None)
    if width is None:
        return 1
    try:
        return abs(int(width.msb.value) - int(width.lsb.value)) + 1
    except (AttributeError, ValueError):
        raise RtlError(f"a port width is not a constant ({width})") from None


#: the most Verilog read (a large design's syn/verilog is some tens of MB)
MAX_RTL_BYTES = 512 * 2**20
_INCLUDE = re.compile(r'`include\s+"([^"]*)"')
_DEFINE = re.compile(r"`define\s+(\w+)(.*)")
_MACRO_USE = re.compile(r"`(\w+)")
_DIRECTIVES = {"include", "define", "undef", "ifdef", "ifndef", "else", "elsif", "endif", "timescale",
               "default_nettype", "resetall", "celldefine", "endcelldefine", "line", "pragma"}


def _check_directives(directory: Path, files: list[Path]) -> None:
    """What the preprocessor would do with the files, bounded before it runs: every `` `include `` names a
    file of ``directory`` itself (never an absolute path or one outside it: the RTL is data, and a path such
    as ``/etc/shadow`` would be read into the results), no macro is defined in terms of another (a chain of
    doubling macros expands beyond any memory), and the files are a Verilog design's size."""
    for f in files:
        if not f.is_file():  # a named pipe would block the reader forever
            raise RtlError(f"{f} is not a regular file (a pipe, a device or a folder): not read")
    if sum(f.stat().st_size for f in files) > MAX_RTL_BYTES:
        raise RtlError(f"the Verilog in {directory} is more than {MAX_RTL_BYTES // 2**20} MB: not read")
    root = directory.resolve()
    for f in files:
        with open(f, errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                if "`" not in line:
                    continue
                for name in _INCLUDE.findall(line):
                    target = (root / name).resolve()
                    if Path(name).is_absolute() or root not in target.parents or not target.is_file():
                        raise RtlError(f"{f.name}:{number} includes {name!r}, which is not a file of {directory}: "
                                       "not read")
                m = _DEFINE.search(line)
                if m and any(use not in _DIRECTIVES for use in _MACRO_USE.findall(m.group(2))):
                    raise RtlError(f"{f.name}:{number} defines the macro {m.group(1)} in terms of another, which "
                                   "tool-written RTL does not: not read")


def read_rtl(directory: str | Path, top: str | None = None) -> RtlSummary:
    """Read every ``*.v`` of ``directory`` (a ``syn/verilog`` folder); ``top``: the top module (the one
    no other module instantiates, by default)."""
    from pyverilog.vparser import ast as vast
    from pyverilog.vparser.parser import ParseError, parse

    directory = Path(directory)
    files = sorted(str(p) for p in directory.glob("*.v"))
    if not files:
        raise RtlError(f"{directory} has no Verilog (*.v): was the design synthesized?")
    _check_directives(directory, [Path(f) for f in files])
    with tempfile.TemporaryDirectory() as scratch:
        try:
            tree, _ = parse(files, preprocess_include=[str(directory)], outputdir=scratch, debug=False)
        except ParseError as exc:
            raise RtlError(f"the Verilog in {directory} does not parse: {exc}") from None
        except RecursionError:
            raise RtlError(f"the Verilog in {directory} nests deeper than the parser can follow: not read") from None
        except OSError as exc:  # iverilog (pyverilog's preprocessor) missing
            raise RtlError(f"pyverilog could not run its preprocessor (iverilog): {exc}") from None
    definitions = {d.name: d for d in tree.description.definitions if isinstance(d, vast.ModuleDef)}
    children: dict[str, Counter] = {}
    for name, module in definitions.items():
        counts: Counter = Counter()
        for item in module.items:
            if isinstance(item, vast.InstanceList):
                counts[item.module] += len(item.instances)
        children[name] = counts
    instantiated = {m for counts in children.values() for m in counts}
    if top is None:
        roots = [m for m in definitions if m not in instantiated]
        if len(roots) != 1:
            named = ", ".join(sorted(roots)[:5]) + (f" and {len(roots) - 5:,} more" if len(roots) > 5 else "")
            raise RtlError(f"{directory} has {len(roots):,} top modules ({named or 'none'}); name the top")
        top = roots[0]
    if top not in definitions:
        raise RtlError(f"{directory} has no module {top}")

    # m_axi data widths of the top's ports (ANSI or non-ANSI declarations)
    port_bits: dict[str, int] = {}
    module = definitions[top]
    declared = []
    for port in module.portlist.ports:
        first = getattr(port, "first", None)
        if first is not None and not isinstance(first, str):
            declared.append(first)
    for item in module.items:
        if isinstance(item, vast.Decl):
            declared += [d for d in item.list if isinstance(d, (vast.Input, vast.Output))]
    for decl in declared:
        m = _M_AXI_DATA.match(decl.name)
        if m:
            port_bits[m.group(1)] = max(port_bits.get(m.group(1), 0), _width(decl))

    # instances through the hierarchy: leaves are cores, memories, or modules without a definition
    memo: dict[str, tuple[Counter, Counter]] = {}

    def count(name: str, stack: tuple[str, ...] = ()) -> tuple[Counter, Counter]:
        if name in memo:
            return memo[name]
        if name in stack:
            raise RtlError(f"module {name} instantiates itself")
        cores: Counter = Counter()
        memories: Counter = Counter()
        for child, n in children.get(name, Counter()).items():
            core = _CORE.search(child)
            if core:
                cores[core.group(1)] += n
            elif _MEMORY.search(child):
                memories[child] += n
            else:
                c, mem = count(child, (*stack, name))
                for k, v in c.items():
                    cores[k] += v * n
                for k, v in mem.items():
                    memories[k] += v * n
        memo[name] = (cores, memories)
        return memo[name]

    try:
        cores, memories = count(top)
    except RecursionError:
        raise RtlError(f"the module hierarchy in {directory} is deeper than any design's: not read") from None
    return RtlSummary(top, port_bits, dict(cores), dict(memories), sorted(definitions))
