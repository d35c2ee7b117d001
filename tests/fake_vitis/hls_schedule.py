"""TEST DOUBLE's scheduler: what a Vitis-like tool would build from a hetero_dse kernel.cpp, read from the
code alone (never from design.json's predictions), so that a defect in the code or in the model shows as a
mismatch when the reports this double writes are validated against design.json.

It parses the kernel with libclang through ``hetero_dse.hls.cparse`` (a parser only: every interpretation
below is this module's own) and, as a high-level-synthesis scheduler would:

* binds every arithmetic operation to a core (its BIND_OP pragma, else the tool's default for the type)
  with that core's latency and DSPs (its own table, from public csynth reports);
* schedules each pipelined loop: the depth of an iteration is the longest chain of memory reads, operators,
  calls and the store; the II achieved is the largest of the II asked for, the memory ports (a bank of an
  array takes one read and one write a cycle; an access whose bank depends on what the pipeline walks takes
  a port of every bank), the AXI port (one word a cycle a bundle) and each carried dependence (its path over
  the distance a DEPENDENCE pragma declares, over 1 where none does); a declared distance longer than the
  code's own makes the co-simulation fail, as the hardware would compute a wrong sum;
* turns each DDR access of a pipelined loop into bursts when it is unconditional and sequential (else one
  transaction a word), a burst paying the AXI latency over the transactions in flight;
* flattens the perfect loop nest around a pipelined loop, and moves a pipelined loop that is not the whole
  body of its function into a module ``<function>_Pipeline_<labels>`` (Vitis 2022 and later);
* sizes each channel's memory from its block, partition, blocks and BIND_STORAGE, and runs the DATAFLOW
  processes against each other block by block (a producer waits for a free block, a consumer for a full one).

Not Vitis: its tables are defaults, and code outside what hetero_dse generates is not understood.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from math import ceil, prod
from pathlib import Path
from typing import Any

from hetero_dse.hls.cparse import CFile, CFunction, CLoop, parse_kernel
from hetero_dse.hls.ctree import Node
from hetero_dse.hls.cvalues import NotAffine, array_access, c_affine, c_eval, strip

# ------------------------------------------------------------------------------- the tool's tables
#: (op, impl) -> (DSP, LUT, FF, latency in cycles at <= 200 MHz; floating point one more above)
CORES = {
    ("fmul", "maxdsp"): (3, 78, 143, 3), ("fmul", "fulldsp"): (2, 115, 128, 3), ("fmul", "meddsp"): (1, 300, 200, 4),
    ("fmul", "fabric"): (0, 650, 400, 4), ("fadd", "fulldsp"): (2, 219, 205, 4), ("fadd", "fabric"): (0, 434, 168, 4),
    ("fsub", "fulldsp"): (2, 219, 205, 4), ("fsub", "fabric"): (0, 434, 168, 4),
    ("mul", "dsp"): (1, 0, 40, 3), ("mul", "fabric"): (0, 80, 40, 2), ("mul", "auto8"): (0, 70, 40, 1),
    ("mul", "auto"): (1, 0, 40, 3), ("add", "fabric"): (0, 32, 32, 1), ("sub", "fabric"): (0, 32, 32, 1),
    ("add", "dsp"): (1, 0, 32, 1), ("sub", "dsp"): (1, 0, 32, 1),
}
#: What the tool binds where the code does not say (fmul maxdsp, fadd fulldsp; an 8-bit multiply in LUTs).
DEFAULT_IMPL = {"fmul": "maxdsp", "fadd": "fulldsp", "fsub": "fulldsp", "add": "fabric", "sub": "fabric",
                "mul": "auto"}
#: AXI: cycles from a request to its data (the m_axi latency Vitis schedules with), and Vitis's defaults for the
#: transactions a port keeps in flight and the beats of a burst where hls_config.tcl does not set them
AXI_LATENCY, AXI_OUTSTANDING, AXI_MAX_BEATS = 64, 16, 16
BRAM18K = ((1, 16384), (2, 8192), (4, 4096), (9, 2048), (18, 1024), (36, 512))
URAM_WORDS, URAM_BITS = 4096, 72
_BITS = {"float": 32, "double": 64, "signed char": 8, "char": 8, "unsigned char": 8, "short": 16, "int": 32,
         "long": 64, "bool": 1}


@dataclass
class Core:
    op: str
    impl: str
    bits: int
    floating: bool
    bound: bool  # by a BIND_OP pragma
    variable: str

    def figures(self, clock_mhz: float) -> tuple[int, int, int, int]:
        impl = "auto8" if self.op == "mul" and self.impl == "auto" and self.bits <= 8 else self.impl
        dsp, lut, ff, lat = CORES.get((self.op, impl), (0, 50, 50, 1))
        return dsp, lut, ff, lat + (1 if self.floating and clock_mhz > 200 else 0)

    def rtl_name(self, clock_mhz: float) -> str | None:
        """The core module's name in the RTL (None: fabric logic, as an integer add is)."""
        _, _, _, lat = self.figures(clock_mhz)
        if self.floating:
            suffix = {"maxdsp": "max_dsp", "fulldsp": "full_dsp", "meddsp": "med_dsp", "fabric": "no_dsp"}[self.impl]
            return f"{self.op}_32ns_32ns_32_{lat + 1}_{suffix}_1"
        if self.op == "mul":
            return f"mul_{self.bits}s_{self.bits}s_{2 * self.bits}_{lat + 1}_1"
        return None


@dataclass
class LoopSchedule:
    name: str  # the flattened loop's name: its labels joined
    trip_count: int
    target_ii: int
    ii: int
    depth: int
    latency: int
    violations: list[str] = field(default_factory=list)
    bursts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Module:
    name: str
    function: str
    loops: list[LoopSchedule] = field(default_factory=list)
    latency: int = 0
    cores: list[Core] = field(default_factory=list)  # one a core instance
    children: dict[str, int] = field(default_factory=dict)  # module -> instances
    lut: int = 100
    ff: int = 100


@dataclass
class Design:
    top: str
    part: str
    clock_ns: float
    modules: dict[str, Module]
    memories: list[dict[str, Any]]
    ports: dict[str, dict[str, Any]]  # top parameter -> bundle, bits, depth, burst (max beats), outstanding
    latency: int
    unsafe: list[str]  # declared dependences the code breaks: the co-simulation fails
    log: list[str]

    @property
    def clock_mhz(self) -> float:
        return 1000.0 / self.clock_ns

    def instances(self) -> dict[str, int]:
        """Every module's instances in the whole design."""
        out: dict[str, int] = {}

        def add(name: str, n: int) -> None:
            out[name] = out.get(name, 0) + n
            for child, k in self.modules[name].children.items():
                add(child, n * k)

        add(self.top, 1)
        return out

    def totals(self) -> dict[str, int]:
        # the control (s_axilite, handshakes) and one m_axi adapter a port, with its burst buffer (the
        # transactions in flight times the beats of a burst, a word each, in BRAM18K of 512 x 36)
        out = {"dsp": 0, "lut": 2500 + 1500 * len(self.ports), "ff": 3500 + 2000 * len(self.ports), "bram18k": 0,
               "uram": 0}
        for port in self.ports.values():
            out["bram18k"] += ceil(port["outstanding"] * port["burst"] / 512) * ceil(port["bits"] / 36)
        for name, n in self.instances().items():
            m = self.modules[name]
            for core in m.cores:
                dsp, lut, ff, _ = core.figures(self.clock_mhz)
                out["dsp"] += n * dsp
                out["lut"] += n * lut
                out["ff"] += n * ff
            out["lut"] += n * m.lut
            out["ff"] += n * m.ff
        for mem in self.memories:
            for k in ("bram18k", "uram", "lut", "ff"):
                out[k] += mem[k]
        return out


def read_project(project: Path) -> tuple[str, str, float]:
    """(top, part, clock period in ns) from project.tcl, what run_hls.tcl sources."""
    values = dict(re.findall(r"^set (\w+) (\S+)", (project / "project.tcl").read_text(), re.M))
    return values["top"], values["part"], float(values["clock_period_ns"])


# -------------------------------------------------------------------------------------- scheduler
class Scheduler:
    def __init__(self, project: Path) -> None:
        self.top, self.part, self.clock_ns = read_project(project)
        self.clock_mhz = 1000.0 / self.clock_ns
        config = project / "hls_config.tcl"
        # config_interface -m_axi_<option> <value>: the m_axi settings every port takes unless its pragma says
        self.config = dict(re.findall(r"-m_axi_(\w+)\s+(\d+)", config.read_text())) if config.is_file() else {}
        self.k: CFile = parse_kernel(project / "src" / "kernel.cpp", project / "sim" / "include")
        self.log: list[str] = []
        self.unsafe: list[str] = []
        self.modules: dict[str, Module] = {}
        top = self.k.functions[self.top]
        self.channels = self._channels(top)
        self.aliases = self._aliases()
        self.ports = self._ports(top)
        self.loops = {id(lp.node): lp for f in self.k.functions.values() for lp in f.loops}
        self.function_depth: dict[str, int] = {}

    # ------------------------------------------------------------------------------ what is where
    def _channels(self, top: CFunction) -> dict[str, dict[str, Any]]:
        out = {}
        parts = top.variable_pragmas("ARRAY_PARTITION")
        stores = top.variable_pragmas("BIND_STORAGE")
        for n in top.body.walk():
            if n.kind == "VAR_DECL" and "stream_of_blocks" in n.type:
                depth = [c.value for c in n.children if c.kind == "INTEGER_LITERAL"]
                elem = re.match(r"hls::stream_of_blocks<(.+?)\s*\[", n.type).group(1).replace("const ", "")
                store = stores.get(n.name, [None])[0]
                out[n.name] = {"dims": [int(x) for x in re.findall(r"\[(\d+)\]", n.type)],
                               "blocks": depth[0] if depth else 2, "bits": _BITS.get(elem, 32),
                               "partition": [_partition(p) for p in parts.get(n.name, [])],
                               "impl": store.get("impl") if store else None,
                               "latency": store.int("latency", 1) if store else 1}
        return out

    def _aliases(self) -> dict[tuple[str, str], str]:
        """(function, local name) -> the channel whose block it is, followed through locks and calls."""
        aliases = {(self.top, name): name for name in self.channels}
        changed = True
        while changed:
            changed = False
            for fn in self.k.functions.values():
                for n in fn.body.walk():
                    if n.kind == "VAR_DECL" and (fn.name, n.name) not in aliases and (
                            "_lock<" in n.type or "&" in n.type):
                        ref = next((x.name for x in n.walk() if x.kind == "DECL_REF_EXPR"
                                    and (fn.name, x.name) in aliases), None)
                        if ref is not None:
                            aliases[(fn.name, n.name)] = aliases[(fn.name, ref)]
                            changed = True
                    elif n.kind == "CALL_EXPR" and n.name in self.k.functions:
                        for param, arg in zip(self.k.functions[n.name].params, n.children[1:], strict=False):
                            ref = next((x.name for x in arg.walk() if x.kind == "DECL_REF_EXPR"), None)
                            if ref and (fn.name, ref) in aliases and (n.name, param) not in aliases:
                                aliases[(n.name, param)] = aliases[(fn.name, ref)]
                                changed = True
        return aliases

    def _ports(self, top: CFunction) -> dict[str, dict[str, Any]]:
        interfaces = {p.get("port"): p for p in top.all_pragmas if p.name == "INTERFACE" and p.get("mode") == "m_axi"}
        config = self.config
        out = {}
        for name, node in top.params.items():
            m = re.match(r"^(?:const )?hls::vector<(.+), (\d+)(?:UL|U|L)?>\s*\*$", node.type)
            bits = _BITS.get(m.group(1), 32) * int(m.group(2)) if m else _BITS.get(
                node.type.replace("const ", "").rstrip(" *"), 32)
            p = interfaces.get(name)
            burst = min(int(p.get("max_read_burst_length") or config.get("max_read_burst_length", AXI_MAX_BEATS))
                        if p else AXI_MAX_BEATS, max(1, 4096 // max(1, bits // 8)))
            outstanding = int(p.get("num_read_outstanding") or config.get("num_read_outstanding", AXI_OUTSTANDING)) \
                if p else AXI_OUTSTANDING
            out[name] = {"bundle": p.get("bundle") if p else f"gmem_{name}", "bits": bits,
                         "depth": p.int("depth") if p else None, "burst": burst, "outstanding": outstanding}
        return out

    def _array(self, fn: CFunction, name: str) -> dict[str, Any] | None:
        """An array's memory as the tool makes it: dims, banks along each dim, registers or a RAM, latency."""
        channel = self.aliases.get((fn.name, name))
        if channel is not None:
            ch = self.channels[channel]
            return {"dims": ch["dims"], "partition": ch["partition"], "latency": ch["latency"], "name": channel,
                    "registers": _registers(ch["dims"], ch["partition"])}
        dims = fn.arrays.get(name)
        if dims is None:
            return None
        parts = [_partition(p) for p in fn.variable_pragmas("ARRAY_PARTITION").get(name, [])]
        if name in fn.params:  # an operand array of the PE: partitioned where its caller declares it
            at = list(fn.params).index(name)
            for caller in self.k.functions.values():
                for n in caller.body.walk():
                    if n.kind == "CALL_EXPR" and n.name == fn.name and len(n.children) > at + 1:
                        arg = next((x.name for x in n.children[at + 1].walk() if x.kind == "DECL_REF_EXPR"), None)
                        parts = [_partition(p) for p in caller.variable_pragmas("ARRAY_PARTITION").get(arg, [])]
        return {"dims": dims, "partition": parts, "latency": 1, "name": f"{fn.name}.{name}",
                "registers": prod(dims) <= 1 or _registers(dims, parts)}

    # ------------------------------------------------------------------------------------ memories
    def memories(self) -> list[dict[str, Any]]:
        out = []
        for name, ch in self.channels.items():
            banks, words = 1, 1
            for d, n in enumerate(ch["dims"]):
                b = _banks_along(ch["partition"], d + 1, n)
                banks *= b
                words *= ceil(n / b)
            bits = ch["bits"]
            impl = ch["impl"] or ("registers" if words == 1 else "bram" if words * bits > 1024 else "lutram")
            if words == 1:
                impl = "registers"
            copies = banks * ch["blocks"]
            mem = {"variable": name, "banks": banks, "words": words, "bits": bits, "impl": impl,
                   "blocks": ch["blocks"], "bram18k": 0, "uram": 0, "lut": 0, "ff": 0}
            if impl == "registers":
                mem["ff"] = copies * bits
            elif impl == "lutram":
                mem["lut"] = copies * 2 * bits * ceil(words / 64)
            elif impl == "uram":
                mem["uram"] = copies * ceil(words / URAM_WORDS) * ceil(bits / URAM_BITS)
            else:
                per = next((ceil(words / depth) for width, depth in BRAM18K if bits <= width),
                           ceil(words / 512) * ceil(bits / 36))
                mem["bram18k"] = copies * per
            out.append(mem)
        return out

    # --------------------------------------------------------------------------------------- cores
    def core(self, fn: CFunction, n: Node, variable: str, types: dict[str, str]) -> Core:
        """The core a data operation becomes: the BIND_OP of the variable it initialises, else the default."""
        operand = " ".join(types.get(x.name, "") for x in n.walk() if x.kind == "DECL_REF_EXPR")
        floating = bool(re.search(r"\b(float|double)\b", operand)) or any(
            x.kind == "FLOATING_LITERAL" for x in n.walk())
        sym = {"+": "add", "-": "sub", "*": "mul", "+=": "add", "-=": "sub", "*=": "mul"}[n.op]
        op = ("f" + sym) if floating else sym
        bits = 8 if "signed char" in operand else 16 if "short" in operand else 32
        bind = fn.variable_pragmas("BIND_OP").get(variable, []) if variable else []
        if bind and bind[0].get("op") == op:
            return Core(op, bind[0].get("impl") or DEFAULT_IMPL[op], bits, floating, True, variable)
        return Core(op, DEFAULT_IMPL[op], bits, floating, False, variable)

    # ---------------------------------------------------------------------------- one iteration
    def iteration(self, fn: CFunction, region: Node, walked: set[str]) -> dict[str, Any]:
        """One iteration of ``region`` (every loop inside it unrolled): its operator instances, calls, array
        and DDR accesses, and its depth."""
        types = {n.name: n.type for n in fn.node.walk() if n.kind in ("VAR_DECL", "PARM_DECL")}
        data = _data_names(fn)
        cores: list[tuple[Core, int]] = []
        calls: dict[str, int] = {}
        accesses: list[dict[str, Any]] = []
        ddr: list[dict[str, Any]] = []

        def visit(n: Node, env: dict[str, int], times: int, lanes: list[CLoop], conds: int, var: str) -> None:
            if n.kind == "FOR_STMT" and id(n) in self.loops:
                lp = self.loops[id(n)]
                values = lp.values(env, fn.defs)
                inner = [x for x in fn.loops if lp in x.parents]
                if any(x.depends_on({lp.var}, fn.defs) for x in inner):
                    for v in values:
                        visit(lp.body, {**env, lp.var: v}, times, lanes, conds, var)
                elif values:
                    visit(lp.body, {**env, lp.var: values[0]}, times * len(values), [*lanes, lp], conds, var)
                return
            if n.kind == "VAR_DECL":
                # the operator that makes the variable is the one its BIND_OP binds; those inside it are not
                for c in n.children:
                    visit(c, env, times, lanes, conds, n.name if strip(c).kind in (
                        "BINARY_OPERATOR", "CONDITIONAL_OPERATOR") else "")
                return
            if n.kind in ("IF_STMT", "CONDITIONAL_OPERATOR"):
                test, *branches = n.children
                visit(test, env, times, lanes, conds, var)
                for b in branches:
                    visit(b, env, times, lanes, conds + 1, var)
                return
            if n.kind == "CALL_EXPR" and n.name in self.k.functions and n.name != fn.name:
                calls[n.name] = calls.get(n.name, 0) + times
            if n.kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and n.op in ("+", "-", "*", "+=", "-=",
                                                                                         "*="):
                if any(_reads(c, data) for c in n.children):
                    cores.append((self.core(fn, n, var if n.kind == "BINARY_OPERATOR" else "", types), times))
                for c in n.children:
                    visit(c, env, times, lanes, conds, "")
                return
            if n.kind == "ARRAY_SUBSCRIPT_EXPR":
                access = array_access(n)
                if access is not None:
                    name, index = access
                    write = _is_store(n, region)
                    if name in fn.params and "*" in fn.params[name].type:
                        ddr.append({"port": name, "index": index, "conditional": conds > 0, "times": times,
                                    "node": n, "lanes": list(lanes)})
                    else:
                        accesses.append({"array": name, "index": index, "env": dict(env), "times": times,
                                         "lanes": list(lanes), "write": write})
                    for ix in index:
                        visit(ix, env, times, lanes, conds, var)
                    return
            for c in n.children:
                visit(c, env, times, lanes, conds, var)

        visit(region, {}, 1, [], 0, "")
        return {"cores": cores, "calls": calls, "accesses": accesses, "ddr": ddr,
                "depth": self.depth(fn, region, types)}

    def depth(self, fn: CFunction, region: Node, types: dict[str, str]) -> int:
        """The longest chain of one iteration: reads of a RAM (its latency), operators (their core's),
        non-inlined calls (the callee's depth), the store (1). Each element's value is tracked where its index
        is known (the adder tree's levels); the lanes of a loop whose iterations do not read each other's
        results are timed by one of them, for all."""
        ready: dict[tuple[str, Any], int] = {}
        data = _data_names(fn)
        deepest = [0]

        def key(index: list[Node], env: dict[str, int]) -> Any:
            """The element, as its index with the known variables' values put in (symbolic in the others)."""
            try:
                out = []
                for ix in index:
                    form = c_affine(ix, fn.defs)
                    const = form.get("", 0) + sum(c * env[v] for v, c in form.items() if v in env)
                    out.append((const, tuple(sorted((v, c) for v, c in form.items() if v and v not in env))))
                return tuple(out)
            except NotAffine:
                return None

        def when(name: str, k: Any) -> int:
            return max(ready.get((name, None), 0), ready.get((name, k), 0) if k is not None else max(
                [v for (n, _), v in ready.items() if n == name] or [0]))

        def expr(n: Node, var: str, env: dict[str, int]) -> int:
            n = strip(n)
            if n.kind == "DECL_REF_EXPR":
                return when(n.name, None) if (n.name, None) in ready else 0
            if n.kind == "ARRAY_SUBSCRIPT_EXPR":
                access = array_access(n)
                if access is None:
                    return 0
                name, index = access
                if name in fn.params and "*" in fn.params[name].type:
                    return AXI_LATENCY + 2  # the request's round trip is in the pipeline's depth
                mem = self._array(fn, name)
                return when(name, key(index, env)) + (0 if mem is None or mem["registers"] else mem["latency"])
            parts = [expr(c, "", env) for c in n.children] or [0]
            t = max(parts)
            if n.kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and n.op in ("+", "-", "*", "+=", "-=",
                                                                                         "*="):
                if any(_reads(c, data) for c in n.children):
                    t += self.core(fn, n, var, types).figures(self.clock_mhz)[3]
            elif n.kind == "CALL_EXPR" and n.name in self.k.functions:
                t += self.function_latency(n.name)
            return t

        def stmt(n: Node, env: dict[str, int], collapse: bool) -> None:
            if n.kind == "FOR_STMT" and id(n) in self.loops:
                lp = self.loops[id(n)]
                values = lp.values(env, fn.defs)
                written = {a[0] for x in lp.body.walk() if x.kind == "ARRAY_SUBSCRIPT_EXPR" and _is_store(x, lp.body)
                           and (a := array_access(x))}
                read = {a[0] for x in lp.body.walk() if x.kind == "ARRAY_SUBSCRIPT_EXPR"
                        and not _is_store(x, lp.body) and (a := array_access(x))}
                alike = not (written & read) and not any(x.depends_on({lp.var}, fn.defs) for x in fn.loops
                                                         if lp in x.parents)
                for v in (values[:1] if alike else values):
                    stmt(lp.body, {**env, lp.var: v}, collapse or alike)
                return
            if n.kind == "VAR_DECL":
                kids = [c for c in n.children if c.kind != "TYPE_REF"]
                if kids:
                    ready[(n.name, None)] = expr(kids[-1], n.name, env)
                return
            if n.kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and n.op in ("=", "+=", "-=", "*="):
                target = strip(n.children[0])
                t = expr(n, "", env) if n.kind == "COMPOUND_ASSIGNMENT_OPERATOR" else expr(n.children[-1], "", env)
                k = None
                if target.kind == "ARRAY_SUBSCRIPT_EXPR" and (access := array_access(target)):
                    name = access[0]
                    k = None if collapse else key(access[1], env)
                elif target.kind == "DECL_REF_EXPR":
                    name = target.name
                else:  # a lane of a word (operator[])
                    name = next((x.name for x in target.walk() if x.kind == "DECL_REF_EXPR"), "")
                ready[(name, k)] = max(ready.get((name, k), 0), t + 1)
                deepest[0] = max(deepest[0], t + 1)
                return
            if n.kind == "RETURN_STMT":
                deepest[0] = max(deepest[0], max([expr(c, "", env) for c in n.children] or [0]))
                return
            for c in n.children:
                stmt(c, env, collapse)

        stmt(region, {}, False)
        return max([deepest[0], *ready.values()] or [1]) + 1

    def function_latency(self, name: str) -> int:
        """A non-inlined function's latency where it is called (a pipelined PE: its depth)."""
        if name not in self.function_depth:
            fn = self.k.functions[name]
            types = {n.name: n.type for n in fn.node.walk() if n.kind in ("VAR_DECL", "PARM_DECL")}
            inline = fn.pragma("INLINE") is None or "off" not in fn.pragma("INLINE").args
            # inlined, its operators join the caller's chain; kept, the call adds its handshake
            self.function_depth[name] = self.depth(fn, fn.body, types) + (-1 if inline else 1)
        return self.function_depth[name]

    # ------------------------------------------------------------------------------ a pipelined loop
    def pipeline(self, fn: CFunction, lp: CLoop) -> tuple[LoopSchedule, dict[str, Any], list[CLoop]]:
        """Schedule the pipelined loop ``lp`` with the perfect nest around it flattened."""
        nest = [lp]
        while nest[0].parents and _only_child(nest[0].parents[-1], nest[0]):
            nest.insert(0, nest[0].parents[-1])
        trips = [x.trip_count({}, fn.defs) for x in nest]
        name = "_".join(x.label or x.var for x in nest)
        walked = {x.var for x in nest}
        it = self.iteration(fn, lp.body, walked)
        target = lp.pragma("PIPELINE").int("ii", 1)
        violations = []
        ii_mem, array = self._memory_ii(fn, it["accesses"], walked)
        if ii_mem > target:
            violations.append(f"WARNING: [HLS 200-885] The II Violation in module '{fn.name}' (loop '{name}'): "
                              f"Unable to schedule 'load' operation on array '{array}' due to limited memory ports "
                              f"(II = {ii_mem}). Please consider using a memory core with more ports or "
                              f"partitioning the array '{array}'.")
        per_bundle: dict[str, int] = {}
        for a in it["ddr"]:
            bundle = self.ports.get(self.aliases.get((fn.name, a["port"]), a["port"]), {}).get("bundle", a["port"])
            per_bundle[bundle] = per_bundle.get(bundle, 0) + a["times"]
        ii_axi = max(per_bundle.values(), default=1)
        ii_rec = self._recurrence_ii(fn, lp, nest, trips, it, name, violations)
        ii = max(target, ii_mem, ii_axi, ii_rec)
        for array, true, declared in it.get("hazards", []):
            # a write the schedule may leave to the end of the iteration, read again `true` iterations later
            if ii * true < it["depth"]:
                self.unsafe.append(f"{fn.name}: {array} is read {true} iterations after its write at II {ii} and a "
                                   f"depth of {it['depth']}; the DEPENDENCE pragma says "
                                   f"{declared if declared else 'never'}")
        total = prod(trips)
        latency = (total - 1) * ii + it["depth"]
        bursts = self._bursts(fn, lp, nest, trips, it, name)
        transfer = sum(b["transactions"] * max(b["beats"], ceil(AXI_LATENCY / b["outstanding"])) for b in bursts)
        latency = max(latency, transfer + it["depth"])
        sched = LoopSchedule(name, total, target, ii, it["depth"], latency, violations, bursts)
        return sched, it, nest

    def _memory_ii(self, fn: CFunction, accesses: list[dict[str, Any]], walked: set[str]) -> tuple[int, str]:
        """The II the arrays' ports allow: per bank, the distinct elements one iteration reads (and writes).
        A dimension the pipeline walks picks its bank at run time: accesses that agree on the other banks may
        meet there, so they are counted together."""
        elements: dict[tuple[str, bool, tuple], set] = {}
        for a in accesses:
            mem = self._array(fn, a["array"])
            if mem is None or mem["registers"]:
                continue
            used = set()
            for ix in a["index"]:
                used |= {x.name for x in ix.walk() if x.kind == "DECL_REF_EXPR"}
            lanes = [x for x in a["lanes"] if x.var in used or any(
                x.var in _names(fn.defs[u], fn.defs) for u in used if u in fn.defs)]
            for values in itertools.product(*(x.values({}, fn.defs) for x in lanes)) if lanes else [()]:
                env = {**a["env"], **{x.var: v for x, v in zip(lanes, values, strict=True)}}
                bank, address = [], []
                for d, ix in enumerate(a["index"]):
                    n = mem["dims"][d] if d < len(mem["dims"]) else 1
                    banks = _banks_along(mem["partition"], d + 1, n)
                    try:
                        form = c_affine(ix, fn.defs)
                    except NotAffine:
                        address.append(("?", d))
                        continue
                    known = {v: c for v, c in form.items() if v == "" or v in env}
                    moving = tuple(sorted((v, c) for v, c in form.items() if v and v not in env))
                    value = known.get("", 0) + sum(c * env[v] for v, c in known.items() if v)
                    address.append((value, moving))
                    if banks == 1:
                        continue
                    kind = next((k for dim, k, _ in mem["partition"] if dim in (d + 1, 0)), "complete")
                    if any(c % banks for _, c in moving) or kind == "block" and moving:
                        continue  # picked at run time
                    size = ceil(n / banks)
                    bank.append((d, value // size if kind == "block" else value % banks))
                elements.setdefault((mem["name"], a["write"], tuple(bank)), set()).add(tuple(address))
        worst, where = 1, ""
        for (name, _write, _bank), found in elements.items():
            if len(found) > worst:
                worst, where = len(found), name
        return worst, where

    def _recurrence_ii(self, fn: CFunction, lp: CLoop, nest: list[CLoop], trips: list[int], it: dict[str, Any],
                       name: str, violations: list[str]) -> int:
        """Each array read and written in the loop (the accumulation): its carried path over the distance
        the tool may assume."""
        writes = {a["array"] for a in it["accesses"] if a["write"]}
        reads = {a["array"] for a in it["accesses"] if not a["write"]}
        worst = 1
        hazards = it.setdefault("hazards", [])
        for array in sorted(writes & reads):
            path = self._carried_path(fn, lp.body, array)
            if path is None:
                continue
            write = next(a for a in it["accesses"] if a["write"] and a["array"] == array)
            true = _distance(nest, trips, write["index"], fn)
            if true is None:
                continue  # every iteration writes an element of its own
            pragmas = [p for p in fn.all_pragmas if p.name == "DEPENDENCE" and p.get("variable") == array]
            declared = pragmas[0] if pragmas else None
            if declared is not None and declared.get("dependent") == "false":
                distance = None
            else:
                distance = declared.int("distance", 1) if declared is not None else 1
            ii = ceil(path / distance) if distance else 1
            if distance is None or distance > true:
                # the tool trusts the pragma: it may place the write anywhere in the iteration the false distance
                # allows (judged once the II and depth are known)
                hazards.append((array, true, distance))
            if ii > 1:
                violations.append(f"WARNING: [HLS 200-880] The II Violation in module '{fn.name}' (loop '{name}'): "
                                  f"Unable to enforce a carried dependence constraint (II = {ii - 1}, distance = "
                                  f"{distance}, offset = 1) between 'store' operation and 'load' operation on "
                                  f"array '{array}'.")
            worst = max(worst, ii)
        return worst

    def _carried_path(self, fn: CFunction, body: Node, array: str) -> int | None:
        """Cycles from the read of ``array`` to its write in one iteration (the RAM's read and the store
        included)."""
        mem = self._array(fn, array)
        types = {n.name: n.type for n in fn.node.walk() if n.kind in ("VAR_DECL", "PARM_DECL")}
        data = _data_names(fn)
        read_latency = 0 if mem is None or mem["registers"] else mem["latency"]
        locals_ = {n.name: [c for c in n.children if c.kind != "TYPE_REF"][-1] for n in body.walk()
                   if n.kind == "VAR_DECL" and [c for c in n.children if c.kind != "TYPE_REF"]}
        memo: dict[str, int | None] = {}

        def path(n: Node, var: str) -> int | None:
            n = strip(n)
            if n.kind == "ARRAY_SUBSCRIPT_EXPR":
                access = array_access(n)
                return read_latency if access and access[0] == array else None
            if n.kind == "DECL_REF_EXPR":
                if n.name in locals_ and n.name not in memo:
                    memo[n.name] = None
                    memo[n.name] = path(locals_[n.name], n.name)
                return memo.get(n.name)
            parts = [p for p in (path(c, var) for c in n.children) if p is not None]
            if not parts:
                return None
            t = max(parts)
            if n.kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and n.op in ("+", "-", "*", "+=", "-=",
                                                                                         "*="):
                if any(_reads(c, data) for c in n.children):
                    t += self.core(fn, n, var, types).figures(self.clock_mhz)[3]
            elif n.kind == "CALL_EXPR" and n.name in self.k.functions:
                t += self.function_latency(n.name)
            return t

        longest = None
        for n in body.walk():
            if n.kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and n.op in ("=", "+=", "-=", "*="):
                target = strip(n.children[0])
                access = array_access(target) if target.kind == "ARRAY_SUBSCRIPT_EXPR" else None
                if access and access[0] == array:
                    p = path(n if n.kind == "COMPOUND_ASSIGNMENT_OPERATOR" else n.children[-1], "")
                    if n.kind == "COMPOUND_ASSIGNMENT_OPERATOR":
                        p = (p or read_latency)
                    if p is not None:
                        longest = max(longest or 0, p + 1)
        return longest

    def _bursts(self, fn: CFunction, lp: CLoop, nest: list[CLoop], trips: list[int], it: dict[str, Any],
                name: str) -> list[dict[str, Any]]:
        """The transactions each DDR access of the loop becomes: bursts of consecutive words where the access
        is unconditional and steps one word an iteration, else one transaction a word."""
        out = []
        total = prod(trips)
        for a in it["ddr"]:
            port = self.ports.get(self.aliases.get((fn.name, a["port"]), a["port"]), {})
            bundle = port.get("bundle", a["port"])
            reason = None
            if a["conditional"]:
                reason = (f"INFO: [HLS 214-232] Access on '{a['port']}' is in the conditional branch: could not "
                          f"burst in loop '{name}'")
            words = a["times"]  # words the access moves an iteration (inside an unrolled loop: several)
            word_loop = lp.label.endswith("_word")
            try:
                # a word loop's run steps its words an iteration; a row loop's iteration is a run
                step = _linear(a["index"][0], lp.var, fn.defs) if word_loop else words
                inner = [_linear(a["index"][0], x.var, fn.defs) for x in a["lanes"] if x.var in _names(
                    a["index"][0], fn.defs)]
            except NotAffine:
                step, inner = None, []
                reason = reason or f"INFO: [HLS 214-230] Stride is incompatible for '{a['port']}' in loop '{name}'"
            if reason is None and (step != words or any(c != 1 for c in inner)):
                reason = f"INFO: [HLS 214-230] Stride is incompatible for '{a['port']}' in loop '{name}'"
            if reason is not None:
                self.log.append(reason)
                out.append({"port": a["port"], "bundle": bundle, "beats": 1, "transactions": total * words,
                            "loop": name, "outstanding": port.get("outstanding", AXI_OUTSTANDING)})
                continue
            run = (lp.trip_count({}, fn.defs) if word_loop else 1) * words
            beats = min(run, port.get("burst", AXI_MAX_BEATS))
            transactions = total * words // max(beats, 1)
            kind = "write" if _is_store(a["node"], fn.body) else "read"
            self.log.append(f"INFO: [HLS 214-115] Multiple burst {kind}s of length {beats} and bit width "
                            f"{self.ports.get(a['port'], {}).get('bits', 512)} in loop '{name}' has been inferred "
                            f"on bundle '{bundle}'.")
            out.append({"port": a["port"], "bundle": bundle, "beats": beats, "transactions": transactions,
                        "loop": name, "outstanding": port.get("outstanding", AXI_OUTSTANDING)})
        return out


# ------------------------------------------------------------------------------------------ helpers
def _partition(p: Any) -> tuple[int, str, int]:
    return p.int("dim", 1) or 1, p.get("type", "complete"), p.int("factor", 0) or 0


def _banks_along(partition: list[tuple[int, str, int]], dim: int, n: int) -> int:
    for d, kind, factor in partition:
        if d in (dim, 0):
            return n if kind == "complete" else max(1, min(factor, n))
    return 1


def _registers(dims: list[int], partition: list[tuple[int, str, int]]) -> bool:
    return all(_banks_along(partition, d + 1, n) >= n for d, n in enumerate(dims))


def _reads(n: Node, names: set[str]) -> bool:
    n = strip(n)
    if n.kind == "ARRAY_SUBSCRIPT_EXPR" or (n.kind == "CALL_EXPR" and n.name == "operator[]"):
        return True
    if n.kind == "DECL_REF_EXPR":
        return n.name in names
    return any(_reads(c, names) for c in n.children)


def _data_names(fn: CFunction) -> set[str]:
    names = {p for p, node in fn.params.items() if node.type not in ("int", "bool", "const int", "const bool")}
    for n in fn.body.walk():
        if n.kind == "VAR_DECL":
            kids = [k for k in n.children if k.kind != "TYPE_REF"]
            if kids and _reads(kids[-1], names):
                names.add(n.name)
    return names


def _is_store(n: Node, scope: Node) -> bool:
    """Whether the subscript ``n`` is the target of an assignment in ``scope``."""
    for x in scope.walk():
        if x.kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and x.op in ("=", "+=", "-=", "*=") \
                and x.children and strip(x.children[0]) is n:
            return True
    return False


def _only_child(parent: CLoop, child: CLoop) -> bool:
    """Whether ``child`` is all of ``parent``'s body (declarations of constants aside): a perfect nest."""
    body = parent.body
    stmts = body.children if body.kind == "COMPOUND_STMT" else [body]
    rest = [s for s in stmts if s is not child.node and not (s.kind == "LABEL_STMT" and child.node in s.children)
            and not _constants(s)]
    return not rest


def _constants(stmt: Node) -> bool:
    """A declaration of integer constants only (what a perfect nest may hold besides its loop)."""
    return stmt.kind == "DECL_STMT" and all(d.type in ("const int", "const bool") for d in stmt.children
                                            if d.kind == "VAR_DECL")


def _linear(n: Node, var: str, defs: dict[str, Node]) -> int:
    n = strip(n)
    if not any(x.kind == "DECL_REF_EXPR" and (x.name == var or (x.name in defs and _mentions(defs[x.name], var, defs)))
               for x in n.walk()):
        return 0
    if n.kind == "DECL_REF_EXPR":
        return 1 if n.name == var else _linear(defs[n.name], var, defs)
    if n.kind == "BINARY_OPERATOR" and n.op in ("+", "-"):
        a, b = (_linear(c, var, defs) for c in n.children)
        return a + b if n.op == "+" else a - b
    if n.kind == "BINARY_OPERATOR" and n.op == "*":
        a, b = n.children
        try:
            return c_eval(a, {}, defs) * _linear(b, var, defs)
        except NotAffine:
            return c_eval(b, {}, defs) * _linear(a, var, defs)
    raise NotAffine(var)


def _names(n: Node, defs: dict[str, Node]) -> set[str]:
    out = set()
    for x in n.walk():
        if x.kind == "DECL_REF_EXPR":
            out.add(x.name)
            if x.name in defs:
                out |= _names(defs[x.name], defs)
    return out


def _mentions(n: Node, var: str, defs: dict[str, Node]) -> bool:
    return any(x.kind == "DECL_REF_EXPR" and (x.name == var or (x.name in defs and _mentions(defs[x.name], var, defs)))
               for x in n.walk())


def _distance(nest: list[CLoop], trips: list[int], index: list[Node], fn: CFunction) -> int | None:
    """Iterations between two writes of one element: those of the loops inside the innermost loop of the
    nest that does not pick the element (None: no element is written twice)."""
    names: set[str] = set()
    for ix in index:
        try:
            names |= {v for v, c in c_affine(ix, fn.defs).items() if v and c}
        except NotAffine:
            return 1
    for at in range(len(nest) - 1, -1, -1):
        if nest[at].var not in names and trips[at] > 1:
            return prod(trips[at + 1:])
    return None
