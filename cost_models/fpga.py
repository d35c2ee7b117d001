"""The analytical model of the three-stage read/compute/write accelerator (FlexTensor §5.2, Figure 4c).

Vectorised: ``FpgaModel(space).evaluate(rows)`` scores any number of encoded points at once.

Architecture being modelled (it is what ``hls_templates/kernel.cpp`` generates):

* one **read** process per buffer: DDR → a block of a ``stream_of_blocks`` channel (two blocks deep, so
  reading the next tile overlaps computing this one). A buffer holds the bounding box of its tile's
  footprint and is loaded again only when a tile loop it depends on advances (input reuse: the order
  of the tile loops decides how often). A port moves at most ``PORT_BITS`` per cycle and shares its DDR
  channel's bandwidth with the other ports on that channel.
* one **compute** process: per tile, the loops of the tile with the unrolled ones as the PE array and
  the others pipelined, reduce loops outside spatial loops so that consecutive iterations accumulate
  into different output elements. A floating-point accumulation carried over ``D`` spatial iterations
  reaches ``II = ceil(add_latency / D)``; integer accumulation reaches II = 1.
* one **write** process: the output tile (double-buffered) back to DDR once its reduction is complete.

Per tile R, C and W are the stage times; the processes run concurrently, so the whole run takes the
largest of their totals plus the fill and drain of the first and last tile:
``latency = max(Σ R_x, Σ C, Σ W, DDR channels) + (R₁ + C₁ + W₁ − max(R₁, C₁, W₁))``. With no reuse this
is FlexTensor's ``n_tiles × max(R, C, W)`` plus fill and drain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cost_models.fpga_costs import (
    ARITHMETIC,
    BUFFER_DEPTH,
    COMPUTE_OVERHEAD_CYCLES,
    DEEPER_CORES_ABOVE_MHZ,
    FF_BASE,
    FF_PER_PORT,
    IMPL_NAMES,
    LUT_BASE,
    LUT_PER_PORT,
    PORT_BITS,
    storage,
)
from cost_models.io_bounds import IOBound, compulsory_bytes, io_lower_bound
from hetero_dse.analysis import dtype_bytes
from hetero_dse.board import RESOURCE_KINDS
from hetero_dse.errors import HeteroDSEError
from hetero_dse.space.fpga import AccessGeometry, FpgaSpace

__all__ = ["FpgaModel", "accumulator_dtype"]


def _kernel_available() -> bool:
    """Whether numba imports (it is a dependency; a broken install falls back to the numpy model)."""
    try:
        import numba  # noqa: F401
    except ImportError:  # pragma: no cover - depends on the installation
        return False
    return True


def _product(factors: list[np.ndarray], n: int) -> np.ndarray:
    out = np.ones(n)
    for f in factors:
        out = out * f
    return out


def accumulator_dtype(dtype: str) -> str:
    """Integers accumulate (and are written) in int32; floats in their own type."""
    return "int32" if dtype.startswith("int") else dtype


@dataclass(frozen=True)
class _DtypeConstants:
    in_bytes: int
    acc_bytes: int
    cost: Any


class FpgaModel:
    """Scores points of one :class:`FpgaSpace` (see the module docstring for the architecture)."""

    def __init__(self, space: FpgaSpace, traffic_weight: float = 0.01, fast: bool = True) -> None:
        self.space = space
        self.traffic_weight = traffic_weight
        self._table_cache: dict[int, Any] = {}
        self.single_dtype = len(space.dtypes) == 1
        self.fast = fast and _kernel_available()
        board = space.board
        for dtype in space.dtypes:
            if dtype not in ARITHMETIC:
                raise HeteroDSEError(f"the FPGA model has no costs for data type {dtype}; "
                                     f"use one of {', '.join(ARITHMETIC)}")
        self.consts = [_DtypeConstants(dtype_bytes(d), dtype_bytes(accumulator_dtype(d)), ARITHMETIC[d])
                       for d in space.dtypes]
        memory = board.memory
        self.channels = memory.channels
        self.channel_bw = memory.bandwidth_gbps_per_channel * 1e9
        self.caps = np.array([board.cap(r) for r in RESOURCE_KINDS], dtype=np.float64)
        self.uram_available = board.cap("uram") > 0
        main = space.analysis.main
        self.muls = main.multiplies_per_iteration
        self.adds = main.additions_per_iteration
        self.ops_per_iteration = main.arithmetic_per_iteration
        self.total_ops = space.analysis.flops
        self.ports = [*space.reads, space.write]
        self.compulsory = np.array([compulsory_bytes(space.analysis, c.in_bytes, c.acc_bytes) for c in self.consts],
                                   dtype=np.float64)
        lanes = [self._lane_cost(i) for i in range(len(self.consts))]
        self.lane_dsp = np.array([x["dsp"] for x in lanes])
        self.lane_lut = np.array([x["lut"] for x in lanes])
        self.lane_ff = np.array([x["ff"] for x in lanes])
        self.in_bytes = np.array([c.in_bytes for c in self.consts], dtype=np.float64)
        self.acc_bytes = np.array([c.acc_bytes for c in self.consts], dtype=np.float64)
        self.carried = np.array([c.cost.carried_add for c in self.consts])
        self.add_lat = np.array([c.cost.add_latency for c in self.consts], dtype=np.float64)
        self.mul_lat = np.array([c.cost.mul_latency for c in self.consts], dtype=np.float64)
        self.peak_table = np.array([[self.peak_ops(i, c) for c in space.clocks_mhz] for i in range(len(self.consts))])
        self.stage_names = ([f"read {g.name}" for g in space.reads] + [f"write {space.write.name}", "compute"]
                            + [f"ddr channel {c}" for c in range(min(self.channels, len(self.ports)))])
        self._kernel_args = self._pack()

    def _pack(self) -> tuple:
        """The space and model as plain arrays for the compiled kernel (cost_models/fpga_kernel.py)."""
        sp = self.space
        nl = len(sp.loops)
        tile_tab = np.ones((nl, max(len(v) for v in sp.tile_f)))
        unroll_tab = np.ones((nl, max(len(v) for v in sp.unroll_f)))
        for i in range(nl):
            tile_tab[i, : len(sp.tile_f[i])] = sp.tile_f[i]
            unroll_tab[i, : len(sp.unroll_f[i])] = sp.unroll_f[i]
        max_dims = max(g.coef.shape[0] for g in self.ports)
        shape = np.ones((len(self.ports), max_dims))
        # the loops of each buffer dimension, as a sparse list: entries start[p, d] .. start[p, d + 1]
        start = np.zeros((len(self.ports), max_dims + 1), dtype=np.int64)
        loops, coefs = [], []
        for p, g in enumerate(self.ports):
            shape[p, : len(g.shape)] = g.shape
            for d in range(max_dims):
                start[p, d] = len(loops)
                if d < g.coef.shape[0]:
                    for lp in np.flatnonzero(g.coef[d]):
                        loops.append(int(lp))
                        coefs.append(float(abs(g.coef[d, lp])))
            start[p, max_dims] = len(loops)
        ndims = np.array([g.coef.shape[0] for g in self.ports], dtype=np.int64)
        used = np.array([g.loops_used for g in self.ports])
        clocks = np.asarray(sp.clocks_mhz, dtype=np.float64) * 1e6
        return (nl, sp.num_spatial, sp.col_order, sp.col_dtype, sp.col_clock, sp.extents.astype(np.float64),
                tile_tab, unroll_tab, sp.order_positions, start, np.array(loops, dtype=np.int64),
                np.array(coefs, dtype=np.float64), shape, ndims, used, self.in_bytes, self.acc_bytes,
                self.carried, self.add_lat, self.mul_lat, self.lane_dsp.astype(np.float64),
                self.lane_lut.astype(np.float64), self.lane_ff.astype(np.float64), self.compulsory, clocks,
                self.peak_table, self.caps, float(self.channel_bw), len(self.stage_names) - len(self.ports) - 1,
                bool(self.uram_available), float(self.traffic_weight), float(self.total_ops))

    def fast_evaluate(self, rows: np.ndarray) -> dict[str, Any]:
        """``evaluate`` through the compiled kernel: the same figures, no per-buffer detail."""
        from cost_models.fpga_kernel import evaluate_kernel

        rows = np.ascontiguousarray(np.atleast_2d(np.asarray(rows, dtype=np.int64)))
        n = len(rows)
        out = {k: np.empty(n) for k in ("latency_s", "objective", "gops", "roofline", "traffic_bytes", "pe", "ii")}
        bound = np.empty(n, dtype=np.int64)
        resources = np.empty((n, len(RESOURCE_KINDS)))
        usage = np.empty((n, len(RESOURCE_KINDS)))
        evaluate_kernel(rows, *self._kernel_args, out["latency_s"], out["objective"], out["gops"], out["roofline"],
                        bound, out["traffic_bytes"], out["pe"], out["ii"], resources, usage)
        return {**out, "bound": bound, "feasible": np.isfinite(out["latency_s"]), "usage": usage,
                **{k: resources[:, i] for i, k in enumerate(RESOURCE_KINDS)}}

    # ---------------------------------------------------------------------------------------- helpers
    def dsp_per_lane(self, dtype_index: int) -> float:
        cost = self.consts[dtype_index].cost
        return self.muls * cost.dsp_mul + self.adds * cost.dsp_add

    def peak_ops(self, dtype_index: int, clock_mhz: float) -> float:
        """Ops/s of the largest PE array the usable DSPs allow (the DSP roofline)."""
        per_lane = self.dsp_per_lane(dtype_index)
        lanes = self.caps[0] // per_lane if per_lane > 0 else np.inf
        return float(lanes * self.ops_per_iteration * clock_mhz * 1e6)

    def io_bound(self, dtype_index: int) -> IOBound:
        """The I/O lower bound at the board's whole usable on-chip memory, in bytes."""
        c = self.consts[dtype_index]
        bits = 8 * c.in_bytes
        onchip_bits = self.space.board.cap("bram18k") * 18 * 1024 + self.space.board.cap("uram") * 288 * 1024
        return io_lower_bound(self.space.analysis, onchip_bits / bits, c.in_bytes,
                              compulsory_bytes(self.space.analysis, c.in_bytes, c.acc_bytes))

    def _tables(self, g: AccessGeometry) -> list[list[tuple[int, np.ndarray, int, np.ndarray]]]:
        """Per dimension and loop in it: (loop, c·(tile − 1) per tile index, loop, partition factor per unroll index).

        Cyclic partition: an unrolled loop with coefficient c and unroll u touches offsets 0, c, ...,
        c(u-1); distinct banks need a factor of c·u (the space allows one unrolled loop per dimension).
        """
        key = id(g)
        if key not in self._table_cache:
            sp = self.space
            tables = []
            for d in range(g.coef.shape[0]):
                entries = []
                for loop in np.flatnonzero(g.coef[d]):
                    c = abs(int(g.coef[d, loop]))
                    u = sp.unroll_f[loop]
                    entries.append((int(loop), c * (sp.tile_f[loop] - 1), len(sp.loops) + int(loop),
                                    np.where(u > 1, c * u, 1.0)))
                tables.append(entries)
            self._table_cache[key] = tables
        return self._table_cache[key]

    def _buffer(self, g: AccessGeometry, rows: np.ndarray, elem_bytes: np.ndarray) -> dict[str, Any]:
        """Box widths, partition factors, banks and per-bank depth of one buffer (per dimension, over points)."""
        n = len(elem_bytes)
        widths, clipped, factors = [], [], []
        for d, entries in enumerate(self._tables(g)):
            width = np.ones(n)
            factor = np.ones(n)
            for tile_col, spread, unroll_col, part in entries:
                width += spread[rows[:, tile_col]]
                factor *= part[rows[:, unroll_col]]
            widths.append(width)
            clipped.append(np.minimum(width, g.shape[d]))
            factors.append(factor)
        # The read/write process moves one port word per cycle (cost_models/transfer.py): the innermost
        # dimensions that fit in the word and lie contiguously in DDR fully unrolled (complete partition),
        # the next one unrolled by what is left of the word (its partition a multiple of that), the rest
        # a loop nest. Vectorised twin of transfer_plan().
        word = (PORT_BITS // 8) // elem_bytes[0] if self.single_dtype and n else (PORT_BITS // 8) // elem_bytes
        dims = len(widths)
        packed = np.ones(n)
        active = np.ones(n, dtype=bool)
        fitted = np.zeros(n, dtype=np.int64)
        contiguous = [np.ones(n, dtype=bool)] * dims
        for d in range(dims - 1, -1, -1):
            if d < dims - 1:
                contiguous[d] = widths[d + 1] == g.shape[d + 1]
                active = active & contiguous[d]
            active = active & (packed * widths[d] <= word)
            packed = np.where(active, packed * widths[d], packed)
            fitted += active
        split = dims - 1 - fitted  # -1: the whole box fits one word
        pick = split + 1
        at_width = np.choose(pick, [np.ones(n), *widths])
        at_contiguous = np.choose(pick, [np.ones(n, dtype=bool), *contiguous])
        lanes = np.where(at_contiguous, np.minimum(at_width, np.floor(word / packed)), 1.0)
        cycles = np.ceil(at_width / lanes)
        for d in range(dims):
            below = d < split
            cycles = np.where(below, cycles * widths[d], cycles)
            factors[d] = np.where(d > split, widths[d], factors[d])
            # the split dimension's partition must also be a multiple of the lanes written per cycle
            at = np.flatnonzero(split == d)
            if len(at):
                f, q = factors[d][at], lanes[at]
                clash = np.fmod(f, q) != 0
                if clash.any():
                    factors[d][at[clash]] = np.lcm(f[clash].astype(np.int64), q[clash].astype(np.int64))
        banks = np.ones(n)
        words_per_bank = np.ones(n)
        elements = np.ones(n)
        for d in range(len(widths)):
            factors[d] = np.minimum(factors[d], widths[d])
            banks *= factors[d]
            words_per_bank *= np.ceil(widths[d] / factors[d])
            elements *= clipped[d]
        return {"width": widths, "clipped": clipped, "factor": factors, "banks": banks,
                "words_per_bank": words_per_bank, "elements": elements, "lanes": lanes, "split": split,
                "cycles": cycles}

    # -------------------------------------------------------------------------------------- the model
    def evaluate(self, rows: np.ndarray, detail: bool = False) -> dict[str, Any]:
        """Score encoded points. Returns arrays keyed by figure; ``latency_s`` is inf where infeasible.

        Without ``detail`` the compiled kernel does the work (``fast_evaluate``); ``detail`` (per-buffer
        figures, for ``describe``) takes the numpy model below, which is also the kernel's reference.
        """
        if not detail and self.fast:
            return self.fast_evaluate(rows)
        return self.evaluate_numpy(rows, detail)

    def evaluate_numpy(self, rows: np.ndarray, detail: bool = False) -> dict[str, Any]:
        """The numpy model: every figure, and per-buffer detail on request.

        Internally every per-loop quantity is a list of 1-D arrays over the points (loops are few, points
        many), which keeps numpy on contiguous memory.
        """
        sp = self.space
        rows = np.asfortranarray(np.atleast_2d(np.asarray(rows, dtype=np.int64)))  # knob columns contiguous
        n = len(rows)
        nl = len(sp.loops)
        t = [sp.tile_f[i][rows[:, i]] for i in range(nl)]
        u = [sp.unroll_f[i][rows[:, nl + i]] for i in range(nl)]
        dt = rows[:, sp.col_dtype]
        clock = np.asarray(sp.clocks_mhz, dtype=np.float64)[rows[:, sp.col_clock]] * 1e6
        in_bytes = self.in_bytes[dt]
        acc_bytes = self.acc_bytes[dt]
        deeper = (clock > DEEPER_CORES_ABOVE_MHZ * 1e6) & self.carried[dt]
        add_lat = self.add_lat[dt] + deeper
        mul_lat = self.mul_lat[dt] + deeper

        trips = [np.ceil(sp.extents[i] / t[i]) for i in range(nl)]
        n_tiles = _product(trips, n)
        out_tiles = _product(trips[: sp.num_spatial], n)
        order = rows[:, sp.col_order]
        pos = [sp.order_positions[:, i][order] for i in range(nl)]  # tile-loop level of each loop

        # ------------------------------------------------------------------ read, write and DDR
        stage_totals, first_tile = [], []
        resources = np.zeros((len(RESOURCE_KINDS), n))
        n_channels = len(self.stage_names) - len(self.ports) - 1
        channel_bytes = np.zeros((n_channels, n))
        traffic = np.zeros(n)
        buffers = []
        for p, g in enumerate(self.ports):
            is_write = p == len(self.ports) - 1
            elem = acc_bytes if is_write else in_bytes
            buf = self._buffer(g, rows, elem)
            if is_write:
                loads = out_tiles
            else:
                # loaded again whenever a tile loop at or above the innermost one it depends on advances
                level = np.full(n, -1)
                for i in np.flatnonzero(g.loops_used):
                    level = np.maximum(level, np.where(trips[i] > 1, pos[i], -1))
                loads = np.ones(n)
                for i in range(nl):
                    loads *= np.where(pos[i] <= level, trips[i], 1)
            tile_bytes = buf["elements"] * elem
            one = np.maximum(buf["cycles"] / clock, tile_bytes / self.channel_bw)
            stage_totals.append(loads * one)
            first_tile.append(one)
            traffic += loads * tile_bytes
            channel_bytes[p % n_channels] += loads * tile_bytes
            cost = self._mixed_storage(buf["words_per_bank"], elem)
            copies = BUFFER_DEPTH * buf["banks"]
            for r, kind in enumerate(RESOURCE_KINDS):
                if kind in cost:
                    resources[r] += copies * cost[kind]
            buf.update(loads=loads, impl=cost["impl"], tile_bytes=tile_bytes, one_s=one)
            buffers.append(buf)

        # ------------------------------------------------------------------ compute
        ratio = [t[i] / u[i] for i in range(nl)]
        per_tile = _product(ratio, n)
        spatial_iters = _product(ratio[: sp.num_spatial], n)
        reduce_outer = _product(ratio[sp.num_spatial:], n)
        carried_reduction = self.carried[dt] & (reduce_outer > 1)
        ii = np.where(carried_reduction, np.ceil(add_lat / np.maximum(spatial_iters, 1)), 1.0)
        reduce_lanes = _product(u[sp.num_spatial:], n)
        tree = np.ceil(np.log2(np.maximum(reduce_lanes, 1)))
        depth = mul_lat + add_lat * (1 + tree) + COMPUTE_OVERHEAD_CYCLES
        compute_cycles = per_tile * ii + depth
        compute_one = compute_cycles / clock
        compute_total = n_tiles * compute_one

        stages = np.stack([*stage_totals, compute_total, *(channel_bytes / self.channel_bw)])
        reads_one = np.max(np.stack(first_tile[:-1]), axis=0) if len(first_tile) > 1 else np.zeros(n)
        fill_drain = reads_one + compute_one + first_tile[-1] - np.maximum(np.maximum(reads_one, compute_one),
                                                                            first_tile[-1])
        latency = stages.max(axis=0) + fill_drain
        bound = stages.argmax(axis=0)

        # ------------------------------------------------------------------ resources
        pe = _product(u, n)
        resources[0] += np.ceil(pe * self.lane_dsp[dt])
        resources[3] += pe * self.lane_lut[dt] + LUT_BASE + LUT_PER_PORT * len(self.ports)
        resources[4] += pe * self.lane_ff[dt] + FF_BASE + FF_PER_PORT * len(self.ports)
        # A resource the board lacks (URAM on a Zynq-7000) has cap 0: any use of it is infinitely over.
        caps = self.caps[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            usage = np.where(caps > 0, resources / np.maximum(caps, 1), np.where(resources > 0, np.inf, 0.0))
        worst = usage.max(axis=0)
        feasible = worst <= 1.0
        # What a search minimises: the latency, inflated by how far a design is over its worst cap so
        # that a walk can climb back into the feasible region, and by its DDR traffic: each compulsory
        # traffic's worth of extra bytes costs ``traffic_weight`` of latency (1 %: a design 0.3 % slower
        # that moves 3x fewer bytes wins, as an engineer sharing DDR with other kernels would choose).
        objective = latency * (1.0 + 10.0 * np.maximum(worst - 1.0, 0.0)
                               + self.traffic_weight * traffic / self.compulsory[dt] + 1e-6 * np.minimum(worst, 1.0))
        latency = np.where(feasible, latency, np.inf)
        peak_ops = self.peak_table[dt, rows[:, sp.col_clock]]
        gops = self.total_ops / latency / 1e9
        with np.errstate(divide="ignore", invalid="ignore"):
            roofline = np.where(peak_ops > 0, gops * 1e9 / np.maximum(peak_ops, 1e-300), 0.0)
        result: dict[str, Any] = {
            "latency_s": latency, "objective": objective, "gops": gops, "roofline": roofline,
            "bound": bound, "traffic_bytes": traffic, "pe": pe, "ii": ii, "feasible": feasible,
            "usage": usage.T, **{k: resources[i] for i, k in enumerate(RESOURCE_KINDS)},
        }
        if detail:
            for buf in buffers:
                for key in ("width", "clipped", "factor"):
                    buf[key] = np.stack(buf[key], axis=1)
            result.update(buffers=buffers, stages=stages.T, compute_cycles=compute_cycles, depth=depth,
                          spatial_iters=spatial_iters, reduce_outer=reduce_outer, add_latency=add_lat,
                          fill_drain=fill_drain, n_tiles=n_tiles, trips=np.stack(trips, axis=1),
                          compute_one=compute_one)
        return result

    def _mixed_storage(self, words: np.ndarray, elem: np.ndarray) -> dict[str, np.ndarray]:
        if len(self.consts) == 1:  # one data type: one element width for every point
            return storage(words, 8 * int(elem[0]) if len(elem) else 32, self.uram_available)
        out: dict[str, np.ndarray] = {}
        for b in np.unique(elem):
            part = storage(words, 8 * int(b), self.uram_available)
            for k, v in part.items():
                out[k] = np.where(elem == b, v, out.get(k, 0))
        return out

    def _lane_cost(self, dtype_index: int) -> dict[str, float]:
        c = self.consts[dtype_index].cost
        return {"dsp": self.muls * c.dsp_mul + self.adds * c.dsp_add,
                "lut": self.muls * c.lut_mul + self.adds * c.lut_add,
                "ff": self.muls * c.ff_mul + self.adds * c.ff_add}

    # ---------------------------------------------------------------------------------------- report
    def describe(self, row: np.ndarray) -> dict[str, Any]:
        """Every predicted figure of one point, JSON-ready (what design.json and the report hold)."""
        sp = self.space
        row = np.asarray(row, dtype=np.int64)[None, :]
        r = self.evaluate(row, detail=True)
        dt = int(row[0, sp.col_dtype])
        clock = sp.clocks_mhz[int(row[0, sp.col_clock])]
        bound = self.io_bound(dt)
        usage = {k: float(r["usage"][0, i]) for i, k in enumerate(RESOURCE_KINDS)}
        over = {k: v for k, v in usage.items() if v > 1.0}
        buffers = []
        for g, b in zip(self.ports, r["buffers"], strict=True):
            buffers.append({
                "tensor": g.name, "role": "write" if g is sp.write else "read",
                "shape": [int(x) for x in b["width"][0]], "partition": [int(x) for x in b["factor"][0]],
                "banks": int(b["banks"][0]), "words_per_bank": int(b["words_per_bank"][0]),
                "storage": IMPL_NAMES[int(np.asarray(b["impl"])[0])], "loads": int(b["loads"][0]),
                "tile_bytes": int(b["tile_bytes"][0]), "lanes": int(b["lanes"][0]), "split": int(b["split"][0]),
                "cycles_per_load": int(b["cycles"][0]),
                "seconds_per_load": float(b["one_s"][0]),
            })
        stages = {name: float(r["stages"][0, i]) for i, name in enumerate(self.stage_names)}
        latency = float(r["latency_s"][0])
        return {
            "latency_s": latency if np.isfinite(latency) else None,
            "gops": float(r["gops"][0]) if np.isfinite(latency) else 0.0,
            "ops": int(self.total_ops),
            "roofline": float(r["roofline"][0]) if np.isfinite(latency) else 0.0,
            "peak_gops": self.peak_ops(dt, clock) / 1e9,
            "bound": self.stage_names[int(r["bound"][0])],
            "stages_s": stages,
            "fill_drain_s": float(r["fill_drain"][0]),
            "tiles": int(r["n_tiles"][0]), "trips": [int(x) for x in r["trips"][0]],
            "pe": int(r["pe"][0]), "ii": int(r["ii"][0]), "pipeline_depth": int(r["depth"][0]),
            "compute_cycles_per_tile": int(r["compute_cycles"][0]),
            "accumulation_distance": int(r["spatial_iters"][0]), "add_latency": int(r["add_latency"][0]),
            "resources": {k: float(r[k][0]) for k in RESOURCE_KINDS},
            "caps": {k: float(self.caps[i]) for i, k in enumerate(RESOURCE_KINDS)},
            "utilisation": usage, "feasible": bool(r["feasible"][0]),
            "over_cap": over,
            "traffic_bytes": float(r["traffic_bytes"][0]),
            "io_lower_bound_bytes": bound.bytes, "io_bound_kind": bound.kind,
            "traffic_over_bound": float(r["traffic_bytes"][0]) / bound.bytes,
            "buffers": buffers,
        }
