"""The top function: its DATAFLOW region, its ports' interfaces, and the channels between the processes —
each channel's blocks, box, banks (ARRAY_PARTITION) and memory (BIND_STORAGE) against design.json."""

from __future__ import annotations

import re
from pathlib import Path

from hetero_dse.hls.cparse import CFile, CFunction, Pragma
from hetero_dse.hls.lint.record import DesignRecord, LintReport

__all__ = ["check_config", "check_top"]

#: The storage design.json names and the BIND_STORAGE impl that makes it (registers: none, fully partitioned).
_MEMORIES = ("bram", "uram", "lutram")


def check_top(k: CFile, r: DesignRecord, report: LintReport) -> None:
    top = k.functions.get(r.top)
    if top is None:
        report.add("interface", r.top, f"the kernel has no top function {r.top}")
        return
    where = f"{r.top}:{top.node.line}"
    dataflow = top.pragma("DATAFLOW")
    report.mark(dataflow)
    if dataflow is None:
        report.add("dataflow", where, "the top function has no DATAFLOW pragma: its read, compute and write "
                                      "processes run one after the other, not overlapped as the model charges")
    _check_interfaces(top, r, report)
    _check_channels(top, r, report)


def _check_interfaces(top: CFunction, r: DesignRecord, report: LintReport) -> None:
    bundles = r.expectations.get("port_bundles") or {}
    layout = r.expectations.get("layout") or {}
    interfaces: dict[tuple[str, str], list[Pragma]] = {}
    for p in top.all_pragmas:
        if p.name == "INTERFACE":
            interfaces.setdefault((p.get("mode", ""), p.get("port", "")), []).append(p)
    pointers = [name for name, node in top.params.items() if "*" in node.type]
    used: dict[str, str] = {}
    for name in pointers:
        where = f"{r.top}:{top.params[name].line}"
        m_axi = interfaces.pop(("m_axi", name), [])
        lite = interfaces.pop(("s_axilite", name), [])
        report.mark(*m_axi, *lite)
        if len(m_axi) != 1:
            report.add("interface", where, f"port {name} has {len(m_axi)} m_axi INTERFACE pragmas, not one")
        else:
            p = m_axi[0]
            depth = layout.get(name, {}).get("depth_words")
            want = {"offset": "slave", "bundle": bundles.get(name), "depth": None if depth is None else str(depth)}
            for key, value in want.items():
                if value is not None and p.get(key) != value:
                    report.add("interface", where, f"port {name}'s m_axi {key} is {p.get(key)}; the design's is "
                                                   f"{value}")
            bundle = p.get("bundle") or ""
            if bundle in used:
                report.add("interface", where, f"ports {used[bundle]} and {name} share bundle {bundle}: one AXI "
                                               "adapter then serves both in turn, where the model gives each its own")
            used[bundle] = name
        if len(lite) != 1:
            report.add("interface", where, f"port {name} has {len(lite)} s_axilite INTERFACE pragmas, not one")
    ret = interfaces.pop(("s_axilite", "return"), [])
    report.mark(*ret)
    if len(ret) != 1:
        report.add("interface", r.top, "the top function has no s_axilite INTERFACE for its return (ap_ctrl)")
    for (mode, port), ps in interfaces.items():
        report.mark(*ps)
        report.add("interface", f"{r.top}:{ps[0].line}", f"INTERFACE mode={mode} port={port} is not a port of "
                                                         "the design")


def _partition(p: Pragma) -> tuple[int, str, int | None]:
    kind = p.get("type", "complete")
    dim = p.int("dim", 1)
    factor = None if kind == "complete" else p.int("factor", 0)
    return dim, kind, factor


def _describe(parts: set[tuple[int, str, int | None]]) -> str:
    if not parts:
        return "none"
    return ", ".join(f"dim {d} {kind}" + (f" factor={f}" if f is not None else "") for d, kind, f in sorted(parts))


def _check_channels(top: CFunction, r: DesignRecord, report: LintReport) -> None:
    declared = {n.name: n for n in top.body.walk() if n.kind == "VAR_DECL" and "stream_of_blocks" in n.type}
    partitions = top.variable_pragmas("ARRAY_PARTITION")
    storages = top.variable_pragmas("BIND_STORAGE")
    for i, b in enumerate(r.buffers):
        var = r.stream(i)
        node = declared.pop(var, None)
        if node is None:
            report.add("channel", r.top, f"the top function declares no channel {var} for buffer {b['tensor']}")
            continue
        where = f"{r.top}:{node.line}"
        # the depth as written (clang's canonical type drops a template argument equal to its default, 2)
        depth = [c.value for c in node.children if c.kind == "INTEGER_LITERAL"]
        blocks = depth[0] if depth else 2
        dims = [int(x) for x in re.findall(r"\[(\d+)\]", node.type)]
        if blocks != b["blocks"]:
            report.add("channel", where, f"channel {var} holds {blocks} blocks; the model charges {b['blocks']}")
        if dims != list(b["shape"]):
            report.add("channel", where, f"channel {var}'s block is {' x '.join(map(str, dims))}; the model's box "
                                         f"is {' x '.join(map(str, b['shape']))}")
        found = partitions.pop(var, [])
        report.mark(*found)
        got = {_partition(p) for p in found}
        want = r.partitions(i)
        if got != want or len(found) != len(got):
            report.add("partition", where, f"channel {var} is partitioned {_describe(got)}; the model's banks "
                                           f"({b['banks']}) need {_describe(want)}")
        stores = storages.pop(var, [])
        report.mark(*stores)
        storage = b["storage"]
        if storage in _MEMORIES:
            if len(stores) != 1:
                report.add("storage", where, f"channel {var} has {len(stores)} BIND_STORAGE pragmas; the model's "
                                             f"blocks are {storage}")
            else:
                p = stores[0]
                if (p.get("impl"), p.get("type"), p.get("latency")) != (storage, "ram_2p", "1"):
                    report.add("storage", where, f"channel {var} is bound to type={p.get('type')} "
                                                 f"impl={p.get('impl')} latency={p.get('latency')}; the model "
                                                 f"charges {storage} as ram_2p with a read latency of 1")
        elif stores:
            report.add("storage", where, f"channel {var} is bound to {stores[0].get('impl')}; the model keeps it "
                                         "in registers")
    for var, node in declared.items():
        report.add("channel", f"{r.top}:{node.line}", f"channel {var} is not a buffer of the design")
    for var, ps in [*partitions.items(), *storages.items()]:
        if var not in top.arrays and not any(var == n.name for n in top.body.walk() if n.kind == "VAR_DECL"):
            report.mark(*ps)
            report.add("partition" if ps[0].name == "ARRAY_PARTITION" else "storage", f"{r.top}:{ps[0].line}",
                       f"{ps[0].name} on {var}, which the top function does not declare")


def check_config(project: Path, r: DesignRecord, report: LintReport) -> None:
    """``hls_config.tcl`` asks Vitis for the m_axi settings the model charges: whole aligned words of the
    board's width, bursts of the model's length, the transactions in flight its floors and buffers assume;
    nothing else."""
    path = project / "hls_config.tcl"
    axi = r.predicted.get("axi") or {}
    bits = int(r.predicted.get("port_bits", 0))
    if not path.is_file():
        report.add("config", "hls_config.tcl", "the project has no hls_config.tcl: Vitis then bursts 16 beats at "
                                               "most, shorter than the model's")
        return
    want = {"m_axi_alignment_byte_size": bits // 8, "m_axi_max_widen_bitwidth": bits,
            "m_axi_max_read_burst_length": axi.get("max_burst_beats"),
            "m_axi_max_write_burst_length": axi.get("max_burst_beats"),
            "m_axi_num_read_outstanding": axi.get("outstanding"), "m_axi_num_write_outstanding": axi.get("outstanding")}
    got: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] != "config_interface":
            report.add("config", f"hls_config.tcl:{number}", f"'{line.strip()}' is not a setting the design calls for")
            continue
        for option, value in zip(words[1::2], words[2::2], strict=False):
            got[option.lstrip("-")] = value
    for option, value in got.items():
        if option not in want:
            report.add("config", "hls_config.tcl", f"-{option} {value} is not a setting the model charges")
    for option, value in want.items():
        if value is not None and got.get(option) != str(value):
            report.add("config", "hls_config.tcl", f"-{option} is {got.get(option, 'not set')}; the model charges "
                                                   f"{value}")
