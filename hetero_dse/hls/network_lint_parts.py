"""What the lint of a network project reads of the generated code, for every engine alike: a constant, a buffer's
declared rows, a vector's lanes, a read process's pipelined loop, a layer's DATAFLOW region and its streams of
blocks, and the PE array's pipelined loop."""

from __future__ import annotations

import re
from typing import Any

from hetero_dse.hls.cparse import CFile, CFunction
from hetero_dse.hls.lint.record import LintReport

__all__ = ["PACKED_SPLIT", "check_pe_loop", "check_pipelined", "check_streams", "constant", "function_text",
           "packed_chains", "packed_split_ok", "typedef_rows", "vector_lanes"]


def constant(text: str, name: str) -> int | None:
    m = re.search(rf"static const int {name} = (\d+);", text)
    return int(m.group(1)) if m else None


def typedef_rows(text: str, name: str) -> list[int] | None:
    m = re.search(rf"typedef \w+ {name}((?:\[\d+\])+);", text)
    return [int(d) for d in re.findall(r"\d+", m.group(1))] if m else None


def vector_lanes(text: str, name: str) -> int | None:
    m = re.search(rf"typedef hls::vector<\w+, (\d+)> {name};", text)
    return int(m.group(1)) if m else None


def check_pipelined(k: CFile, fn_name: str, label: str, lanes_label: str, word: int | None, add: Any,
                    report: LintReport, name: str = "V") -> None:
    """A read process's loop pipelined at II 1, every loop inside it unrolled, and its word's lanes V (WV)."""
    fn = k.functions.get(fn_name)
    loop = fn.loop(label) if fn else None
    if loop is None:
        add("process", fn_name, f"no {label} loop")
        return
    ii = loop.pragma("PIPELINE")
    if ii is None or ii.int("ii") != 1:
        add("ii", fn_name, f"{label} is not pipelined at II 1 as the model charges")
    inner = [lp for lp in fn.loops if loop in lp.parents]
    lanes = fn.loop(lanes_label)
    got = lanes.trip_count({name: word or 0}) if lanes is not None else None
    if got != word or not all(lp.has("UNROLL") for lp in inner):
        add("unroll", fn_name, f"{label} moves {got} lanes a word, unrolled; a word is {word}")
    report.pragmas_checked += 1 + len(inner)


#: the streams of blocks of the grid's and the depthwise engine's layer, by the storage key the model gives each
TWO_STREAMS = {"in_s": "in", "out_s": "out"}


def check_streams(k: CFile, fn_name: str, storage: dict[str, str], add: Any,
                  streams: dict[str, str] = TWO_STREAMS, latency: dict[str, int] | None = None) -> int:
    """The layer's DATAFLOW region: each of its ``streams`` (variable -> storage key) bound to the memory the model
    charges at the read latency it charges (``latency``, by storage key: 1 where not given), and none partitioned
    (Vitis does not partition a stream of blocks: a row is a wide word). Returns the pragmas checked."""
    fn = k.functions.get(fn_name)
    if fn is None:
        add("process", fn_name, "missing")
        return 0
    if not any(p.name == "DATAFLOW" for p in fn.pragmas):
        add("dataflow", fn_name, "no DATAFLOW: its processes would run one after the other")
    for p in fn.pragmas:
        if p.name == "ARRAY_PARTITION":
            add("partition", fn_name, f"{p}: a stream of blocks is not partitioned by Vitis (UG1399); a row is one "
                                      "wide word instead")
    for var, key in streams.items():
        binds = [p for p in fn.pragmas if p.name == "BIND_STORAGE" and p.get("variable") == var]
        want, cycles = storage.get(key), (latency or {}).get(key, 1)
        if (len(binds) != 1 or binds[0].get("impl") != want or binds[0].get("latency") != str(cycles)
                or binds[0].get("type") != "ram_2p"):
            why = "the accumulation's distance assumes it" if key == "out" else "the PE loop's depth counts it"
            add("storage", fn_name, f"{var} is bound {[str(b) for b in binds]}; the model charges ram_2p {want} "
                                    f"read at latency {cycles} ({why})")
    return 1 + len(streams)


def function_text(source: str, name: str) -> str:
    """The text of the generated function ``name`` (``static void name(``, to its closing brace at column 0)."""
    start = source.find(f"static void {name}(")
    return source[start:source.find("\n}\n", start)] if start >= 0 else ""


def check_weight_ports(source: str, fn_name: str, ports: int, add: Any) -> None:
    """The weight process ``fn_name`` reads as many weight ports at once as the model's rows come over
    (``wgt``, ``wgt1``…: each a port it reads counts once)."""
    reads = len(set(re.findall(r"\b(wgt\d*)\[", function_text(source, fn_name))))
    if reads != ports:
        add("ports", fn_name, f"reads {reads} weight port(s) at once; the model's weight rows come over {ports}")


def packed_chains(text: str) -> re.Match | None:
    """The first packed chain in ``text`` as ``hls_templates/packed.j2`` writes it, its sum started afresh in the
    unrolled chain loop with its expression balancing off (else the sum runs on past the model's chain, or Vitis
    rebuilds it as a tree of fabric adds): groups ``chains`` (the chain loop's trips, where a constant), ``chain``
    (the products a chain sums) and ``body`` (its multiply-adds, to ``int low``). None where there is none."""
    return re.search(r"chain: for \(int c = 0; c < (?P<chains>\w+); \+\+c\) \{\n\s*#pragma HLS UNROLL\n"
                     r"\s*#pragma HLS EXPRESSION_BALANCE off\n\s*long long sum = 0;\n"
                     r"\s*mul: for \(int k = 0; k < (?P<chain>\d+); \+\+k\) \{(?P<body>.*?)\n\s*int low", text, re.S)


#: a packed chain's split (``packed.j2`` and the two kernels after it): the low lane's 18-bit field
#: sign-extended, and the high lane's the rest with the borrow a negative low field took
PACKED_SPLIT = ("int low = (int)(sum & 0x3FFFF);", "if (low & 0x20000) low -= 0x40000;",
                "(int)(sum >> 18) + (low < 0 ? 1 : 0)")


def packed_split_ok(text: str) -> bool:
    """Whether every packed chain in ``text`` splits its sum as ``PACKED_SPLIT`` (each statement as many times
    as a chain's ``int low`` is declared): a sum off in the correction (a borrow taken at -1 for 0) is off only
    where a field sums to exactly -1, which random images rarely make."""
    lows = len(re.findall(r"\bint low\b", text))
    return lows > 0 and all(text.count(part) == lows for part in PACKED_SPLIT)


def check_pe_loop(fn: CFunction | None, fn_name: str, distance: int, cores: dict[str, tuple[str, str]],
                  bound: int, add: Any, report: LintReport) -> bool:
    """The PE array's ``pe`` loop pipelined at II 1; its accumulation's DEPENDENCE on ``obuf`` inter-iteration,
    dependent (``dependent=false`` would let Vitis drop the read-modify-write hazard: stale sums no C-simulation
    sees) at the model's ``distance``; every multiply and add bound to the core the model charges, at least
    ``bound`` of them. False where there is no ``pe`` loop (said)."""
    pe = fn.loop("pe") if fn else None
    if pe is None:
        add("process", fn_name, "no pe loop")
        return False
    pipe = pe.pragma("PIPELINE")
    if pipe is None or pipe.int("ii") != 1:
        add("ii", fn_name, "the PE loop is not pipelined at II 1 as the model charges")
    dep = pe.pragma("DEPENDENCE")
    if (dep is None or dep.int("distance") != distance or dep.get("variable") != "obuf"
            or dep.get("dependent") != "true" or dep.get("type") != "inter"):
        add("dependence", fn_name, f"the accumulation's DEPENDENCE is {dep}; the model's is inter, dependent, "
                                   f"distance {distance}")
    binds = [p for lp in fn.loops for p in lp.pragmas if p.name == "BIND_OP"]
    for p in binds:
        unit = "mul" if p.get("op", "").endswith("mul") else "add"
        if (p.get("op"), p.get("impl")) != cores[unit]:
            add("bind_op", fn_name, f"{p} binds {p.get('op')}/{p.get('impl')}; the model charges {cores[unit]}")
    if len({p.get("variable") for p in binds}) < bound:
        add("bind_op", fn_name, "a multiply or add of the PE is bound to no core")
    report.pragmas_checked += 3 + len(binds)
    return True


def check_box_banks(source: str, name: str, banks: int, add: Any) -> None:
    """The depthwise engine's box in ``banks`` banks by column (``EngineShape.box_banks``): its read process
    stores a row into one of them an iteration, each at one place, and its PE loop reads each bank once (a
    second read of a bank in an iteration would share its RAM's one read port: no II 1; the model's taps a cycle
    need every bank's), and neither touches the box but through them; the taps a lane takes from them and their
    products in registers (partitioned completely: a memory of them would be read once a cycle, not a tap's each),
    the products summed in a tree."""
    for fn, var in ((f"{name}_read_in", "buf"), (f"{name}_compute", "in")):
        got = sorted(re.findall(rf"\b({var}\d*)\[", function_text(source, fn)))
        want = sorted(f"{var}{b}" for b in range(banks))
        if got != want:
            add("banks", fn, f"accesses the box as {got}; the model's {banks} banks by column are {want}, each "
                             "once an iteration")
    text = function_text(source, f"{name}_compute")
    # the taps' products summed in a tree, ceil(log2 taps) adds deep, as the model's pipeline depth counts them (a
    # chain of adds sums the same, deeper)
    if (f"tree_level: for (int h = 1; h < {banks}; h *= 2) {{" not in text
            or f"tree_add: for (int q = 0; q + h < {banks}; q += 2 * h) {{" not in text):
        add("lanes", f"{name}_compute", f"its {banks} taps' products are not summed in a tree of levels h = 1, 2, 4 "
                                        "…: the model's pipeline depth counts one")
    for array in ("a", "prod"):
        if f"#pragma HLS ARRAY_PARTITION variable={array} type=complete\n" not in text:
            add("partition", f"{name}_compute", f"its {array} is not partitioned completely: the {banks} taps of a "
                                                "lane a cycle would share one memory's ports")
