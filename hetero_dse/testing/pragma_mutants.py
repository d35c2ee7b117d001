"""Mutants that remove or weaken the directives of a generated project, one site at a time: its ``#pragma
HLS`` lines and the interface settings of ``hls_config.tcl``.

A partial UNROLL; a partition removed, of fewer banks or of another type; a PIPELINE removed, switched off,
flushed, at a higher II or moved one loop further out, or the nest around it made imperfect or left
unflattened; a DEPENDENCE removed or of another distance; an operator bound to another core, or left
unbound where Vitis's default differs; a memory of another kind or latency, or left unbound; the PE
inlined; an m_axi port on another bundle, shallower, or with bursts shorter than the model charges; DATAFLOW
removed; a channel of another number of blocks; and a tile, PE or lane loop that runs half its trips.
Mutants that would be equivalent (an UNROLL removed inside a pipeline, which Vitis unrolls anyway; a
BIND_OP removed where Vitis's default is the same core; a DEPENDENCE distance shortened where the II does
not change) are not generated.
"""

from __future__ import annotations

import re
from math import ceil

from hetero_dse.testing.mutant_source import (CONFIG, FOR_LOOP, Kind, SourceFile, kind_registry, pragma_args,
                                              pragma_lines)

__all__ = ["PRAGMA_KINDS"]

PRAGMA_KINDS: dict[str, Kind] = {}
_kind = kind_registry(PRAGMA_KINDS)


@_kind("unroll_partial")
def _unroll_partial(src: SourceFile):
    for i, line, _ in pragma_lines(src, "UNROLL"):
        loop = src.loop_of(i)
        if loop and loop[2] >= 4:
            factor = loop[2] // 2
            yield i, f"UNROLL factor={factor} on a loop of {loop[2]}", src.with_lines(
                {i: line.replace("UNROLL", f"UNROLL factor={factor}")})


@_kind("partition_removed")
def _partition_removed(src: SourceFile):
    for i, _line, m in pragma_lines(src, "ARRAY_PARTITION"):
        yield i, f"ARRAY_PARTITION removed ({m.group(2).strip()})", src.with_lines({i: None})


@_kind("partition_weakened")
def _partition_weakened(src: SourceFile):
    for i, line, m in pragma_lines(src, "ARRAY_PARTITION"):
        args = pragma_args(m.group(2))
        if args.get("type") == "cyclic" and int(args.get("factor", 1)) >= 4:
            f = int(args["factor"])
            yield i, f"cyclic factor {f} -> {f // 2}", src.with_lines(
                {i: line.replace(f"factor={f}", f"factor={f // 2}")})
        elif args.get("type") == "complete" and "variable=" in line and args.get("variable", "").endswith("_s"):
            # a channel's dimension partitioned completely: half its banks instead
            size = _channel_dim(src, args["variable"], int(args.get("dim", 1)))
            if size and size >= 4:
                yield i, f"complete -> cyclic factor={size // 2}", src.with_lines(
                    {i: line.replace("type=complete", f"type=cyclic factor={size // 2}")})
        if args.get("type") == "cyclic":
            yield i, "cyclic -> block", src.with_lines({i: line.replace("type=cyclic", "type=block")})


def _channel_dim(src: SourceFile, variable: str, dim: int) -> int | None:
    block = None
    for line in src.lines:
        m = re.search(rf"stream_of_blocks<(\w+)(?:, \d+)?> {variable};", line)
        if m:
            block = m.group(1)
    for line in src.lines:
        m = re.match(rf"typedef \w+ {block}((?:\[\d+\])+);", line) if block else None
        if m:
            dims = [int(x) for x in re.findall(r"\d+", m.group(1))]
            return dims[dim - 1] if dim <= len(dims) else None
    return None


@_kind("pipeline_removed")
def _pipeline_removed(src: SourceFile):
    for i, _line, _ in pragma_lines(src, "PIPELINE"):
        yield i, f"PIPELINE removed in {src.function_of(i)}", src.with_lines({i: None})


@_kind("pipeline_ii")
def _pipeline_ii(src: SourceFile):
    for i, line, m in pragma_lines(src, "PIPELINE"):
        ii = int(pragma_args(m.group(2)).get("II", 1))
        yield i, f"II={ii} -> {ii + 1} in {src.function_of(i)}", src.with_lines(
            {i: re.sub(r"II=\d+", f"II={ii + 1}", line)})


@_kind("pipeline_style")
def _pipeline_style(src: SourceFile):
    """A pipeline switched off, or flushed/free-running instead of the stalling pipeline the model schedules."""
    for i, line, _ in pragma_lines(src, "PIPELINE"):
        yield i, f"PIPELINE off in {src.function_of(i)}", src.with_lines(
            {i: re.sub(r"PIPELINE.*$", "PIPELINE off", line)})
        yield i, f"PIPELINE style=flp in {src.function_of(i)}", src.with_lines({i: line + " style=flp"})


@_kind("nest_broken")
def _nest_broken(src: SourceFile):
    """The loop nest around a pipelined loop made imperfect (a statement of its own in an outer loop) or its
    flattening switched off: the pipeline then drains and refills every outer iteration."""
    for i, _line, _ in pragma_lines(src, "PIPELINE"):
        loop = src.loop_of(i)
        parent = src.loop_of(loop[0]) if loop else None
        if parent is None or src.function_of(parent[0]) != src.function_of(i) or "tile_" in src.lines[parent[0]]:
            continue
        indent = src.lines[parent[0]][: len(src.lines[parent[0]]) - len(src.lines[parent[0]].lstrip())] + "  "
        yield parent[0], f"LOOP_FLATTEN off on the loop over {parent[1]}", src.with_lines(
            {}, {parent[0]: [f"{indent}#pragma HLS LOOP_FLATTEN off"]})
        yield parent[0], f"a statement in the loop over {parent[1]}", src.with_lines(
            {}, {parent[0]: [f"{indent}{{ static int hdse_trace = 0; hdse_trace += 1; }}"]})


@_kind("pipeline_moved_out")
def _pipeline_moved_out(src: SourceFile):
    """The PIPELINE pragma one loop further out: the loop it was on is then unrolled inside it."""
    for i, line, _ in pragma_lines(src, "PIPELINE"):
        loop = src.loop_of(i)
        if loop is None or loop[2] < 2:
            continue
        parent = src.loop_of(loop[0])
        if parent is None or parent[2] < 2 or src.function_of(parent[0]) != src.function_of(i):
            continue
        yield i, f"PIPELINE moved out to the loop over {parent[1]}", src.with_lines(
            {i: None}, {parent[0]: [line]})


@_kind("trip_halved")
def _trip_halved(src: SourceFile):
    for i, line in enumerate(src.lines):
        m = FOR_LOOP.search(line)
        label = line.strip().split(":")[0]
        if m and m.group("bound").isdigit() and int(m.group("bound")) >= 2 and label.startswith(
                ("pe_", "tile_", "box_", "lane_")) and label not in ("pe_mul",):
            n = int(m.group("bound"))
            yield i, f"{label} {n} -> {n // 2} iterations", src.with_lines(
                {i: line.replace(f"< {n};", f"< {n // 2};")})


@_kind("dependence_removed")
def _dependence_removed(src: SourceFile):
    for i, _line, _ in pragma_lines(src, "DEPENDENCE"):
        yield i, "DEPENDENCE removed", src.with_lines({i: None})


@_kind("dependence_distance")
def _dependence_distance(src: SourceFile):
    predicted = src.record["predicted"]
    for i, line, m in pragma_lines(src, "DEPENDENCE"):
        d = int(pragma_args(m.group(2))["distance"])
        for new in sorted({d + 1, 2 * d, 4 * d, d // 2}):
            if new < 1 or new == d:
                continue
            if new < d and ceil(predicted["recurrence"] / new) <= predicted["ii"]:
                continue  # a shorter distance Vitis would schedule at the same II: equivalent
            yield i, f"distance {d} -> {new}", src.with_lines({i: line.replace(f"distance={d}", f"distance={new}")})
        yield i, "dependent=true -> false", src.with_lines({i: line.replace("dependent=true", "dependent=false")})


_IMPLS = {"fmul": ("fabric", "meddsp", "maxdsp"), "fadd": ("fabric",), "fsub": ("fabric",), "mul": ("fabric",),
          "add": ("dsp",), "sub": ("dsp",)}
_DEFAULT = {"fadd": "fulldsp", "fsub": "fulldsp", "add": "fabric", "sub": "fabric"}  # what Vitis picks unbound


@_kind("bind_op_impl")
def _bind_op_impl(src: SourceFile):
    for i, line, m in pragma_lines(src, "BIND_OP"):
        args = pragma_args(m.group(2))
        for impl in _IMPLS.get(args.get("op", ""), ()):
            if impl != args.get("impl"):
                yield i, f"{args['variable']} op={args['op']} impl={args['impl']} -> {impl}", src.with_lines(
                    {i: line.replace(f"impl={args['impl']}", f"impl={impl}")})


@_kind("bind_op_removed")
def _bind_op_removed(src: SourceFile):
    for i, _line, m in pragma_lines(src, "BIND_OP"):
        args = pragma_args(m.group(2))
        if _DEFAULT.get(args.get("op")) == args.get("impl"):
            continue  # Vitis binds the same core unasked
        yield i, f"BIND_OP of {args['variable']} removed", src.with_lines({i: None})


@_kind("bind_storage")
def _bind_storage(src: SourceFile):
    for i, line, m in pragma_lines(src, "BIND_STORAGE"):
        args = pragma_args(m.group(2))
        for impl in ("bram", "uram", "lutram"):
            if impl != args.get("impl"):
                yield i, f"{args['variable']} impl={args['impl']} -> {impl}", src.with_lines(
                    {i: line.replace(f"impl={args['impl']}", f"impl={impl}")})
        yield i, f"{args['variable']} latency 1 -> 2", src.with_lines({i: line.replace("latency=1", "latency=2")})
        yield i, f"BIND_STORAGE of {args['variable']} removed", src.with_lines({i: None})


@_kind("inline")
def _inline(src: SourceFile):
    for i, line, _ in pragma_lines(src, "INLINE"):
        yield i, "INLINE off removed", src.with_lines({i: None})
        yield i, "INLINE off -> INLINE", src.with_lines({i: line.replace(" off", "")})


@_kind("interface")
def _interface(src: SourceFile):
    for i, line, m in pragma_lines(src, "INTERFACE"):
        args = pragma_args(m.group(2))
        if args.get("mode") != "m_axi":
            continue
        if args.get("bundle") != "gmem0":
            yield i, f"port {args['port']} on bundle gmem0", src.with_lines(
                {i: line.replace(f"bundle={args['bundle']}", "bundle=gmem0")})
        depth = int(args["depth"])
        if depth >= 2:
            yield i, f"port {args['port']} depth {depth} -> {depth // 2}", src.with_lines(
                {i: line.replace(f"depth={depth}", f"depth={depth // 2}")})


@_kind("interface_options")
def _interface_options(src: SourceFile):
    """A port's own m_axi settings overriding hls_config.tcl's: short bursts, one transaction in flight."""
    for i, line, m in pragma_lines(src, "INTERFACE"):
        args = pragma_args(m.group(2))
        if args.get("mode") == "m_axi":
            yield i, f"port {args['port']} bursts of 2 beats", src.with_lines({i: line + " max_read_burst_length=2"})
            yield i, f"port {args['port']} one transaction in flight", src.with_lines(
                {i: line + " num_read_outstanding=1"})


@_kind("config_interface")
def _config_interface(src: SourceFile):
    """hls_config.tcl asking for shorter bursts or fewer transactions in flight than the model charges."""
    if src.file != CONFIG:
        return
    for i, line in enumerate(src.lines):
        for option in ("max_read_burst_length", "max_write_burst_length", "num_read_outstanding"):
            m = re.search(rf"-m_axi_{option} (\d+)", line)
            if m:
                yield i, f"-m_axi_{option} {m.group(1)} -> 16" if m.group(1) != "16" else f"-m_axi_{option} -> 4", \
                    src.with_lines({i: line.replace(m.group(0), f"-m_axi_{option} {16 if m.group(1) != '16' else 4}")})
        if line.startswith("config_interface") and "burst_length" in line:
            yield i, "the burst settings removed", src.with_lines({i: None})


@_kind("dataflow_removed")
def _dataflow_removed(src: SourceFile):
    for i, _line, _ in pragma_lines(src, "DATAFLOW"):
        yield i, "DATAFLOW removed", src.with_lines({i: None})


@_kind("blocks")
def _blocks(src: SourceFile):
    """A channel one block shallower (no overlap of a load with the compute) or deeper (more memory)."""
    types = sorted({m.group(1, 2) for line in src.lines for m in re.finditer(r"stream_of_blocks<(\w+), (\d+)>", line)})
    text = "\n".join(src.lines) + "\n"
    for block, n in types:
        for new in {1, 3} - {int(n)}:
            at = next(i for i, line in enumerate(src.lines) if f"stream_of_blocks<{block}, {n}>" in line)
            yield at, f"{block} channel {n} -> {new} blocks", text.replace(
                f"stream_of_blocks<{block}, {n}>", f"stream_of_blocks<{block}, {new}>")
