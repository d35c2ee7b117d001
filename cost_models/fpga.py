"""The analytical model of the three-stage read/compute/write accelerator (FlexTensor §5.2, Figure 4c).

``FpgaModel(space.tables).evaluate(rows)`` scores any number of encoded points at once (it reads the space's
value tables, ``hetero_dse/space/fpga_tables.py``, never the space); ``fpga_describe.describe(model, row)``
gives every figure of one. Both run the one compiled implementation in ``cost_models/fpga_kernel.py``.

Architecture being modelled (it is what ``hls_templates/kernel.cpp.j2`` generates, and what
``hetero_dse.hls.lint`` checks the generated code against):

* one **read** process per buffer: DDR → a block of a ``stream_of_blocks`` channel (two blocks deep, so
  reading the next tile overlaps computing this one; one block for a buffer loaded once). A buffer holds
  the bounding box of its tile's footprint and is loaded again only when a tile loop it depends on
  advances (input reuse: the order of the tile loops decides how often). It reads whole port words (the
  board's ``port_bits``) one a pipeline iteration, runs that start inside a word realigned through a
  funnel, every lane into a bank fixed at compile time (``cost_models/transfer.py``); it shares its DDR
  channel's bandwidth with the other ports on it.
* one **compute** process: per tile, the loops of the tile with the unrolled ones as the PE array and
  the others pipelined, reduce loops outside spatial loops so that consecutive iterations accumulate
  into different output elements. Each spatial lane sums its reduce lanes' products with a balanced
  adder tree and adds the result to its output element only where the reduction goes on; that
  read-modify-write recurs every ``D`` iterations, so ``II = ceil(recurrence / D)`` where the recurrence
  is the add latency plus the buffer's read and write.
* one **write** process: the output tile back to DDR once its reduction is complete, in whole words into
  rows padded to a whole number of words (each tile starts on a word, so no word is written twice).

The processes run concurrently: a read process runs ahead of the compute, the compute starts once the
first block of every buffer is whole (all of a buffer loaded once), the write after the first tile's
compute. The latency is when the last of them ends. With no reuse this is FlexTensor's
``n_tiles × max(R, C, W)`` plus fill and drain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cost_models.calibration import DEFAULT_FIXED, Calibration
from cost_models.fpga_costs import (
    ARITHMETIC,
    CMP_LUTS_PER_BIT,
    FANOUT_FREE,
    FANOUT_NS_PER_DOUBLING,
    SLR_DERATE,
    axi_buffer_bram18,
    axi_max_beats,
)
from cost_models.fpga_kernel import (
    T_ESTIMATE,
    T_FANOUT_FREE,
    T_FANOUT_NS,
    T_MAX_BEATS,
    T_PORT_BRAM,
    T_READ_FLOOR_NS,
    T_READ_LATENCY_NS,
    T_SLR2,
    T_SLR3,
    T_WRITE_FLOOR_NS,
    B_BANKS,
    B_BLOCKS,
    B_BYTES,
    B_CYCLES,
    B_FUNNEL,
    B_ITERATIONS,
    B_LAYOUT,
    B_OFFSET,
    B_OK,
    B_PACKED,
    B_PITCH,
    B_ROWS,
    B_STATIC,
    B_WORD_II,
    B_ELEMENTS,
    B_IMPL,
    B_LANES,
    B_LOADS,
    B_ONE,
    B_SPLIT,
    B_WIDTH0,
    B_WINDOW,
    B_SETS,
    B_WORDS,
    B_BURSTS,
    B_CHOICES,
    D_ACCUMULATE,
    D_ADD_LAT,
    D_ADD_UNITS,
    D_COMPUTE_CYCLES,
    D_COMPUTE_ONE,
    D_COMPUTE_START,
    D_DEPTH,
    D_MUL_LAT,
    D_MUL_UNITS,
    D_RECURRENCE,
    D_REDUCE_LANES,
    D_REDUCE_OUTER,
    D_SPATIAL_ITERS,
    D_SPATIAL_LANES,
    D_TILES,
    D_WRITE_START,
    D_EPI_UNITS,
    D_CLOCK,
    D_FANOUT,
    D_SLRS,
    D_MUX_LUTS,
    E_PORTS,
    DESIGN_FIELDS,
    evaluate_kernel,
)
from cost_models.fpga_slrs import slr_windows
from cost_models.io_bounds import IOBound, compulsory_bytes, io_lower_bound
from hetero_dse.analysis import dtype_bytes
from hetero_dse.hardware.board import RESOURCE_KINDS
from hetero_dse.errors import HeteroDSEError
from hetero_dse.space.fpga_tables import FpgaTables

__all__ = ["FpgaModel", "accumulator_dtype"]


def ddr_strides_of(shape: tuple[int, ...] | list[int]) -> list[int]:
    """Row-major strides, in elements."""
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * int(shape[d + 1])
    return strides


def layouts(g: Any) -> list[tuple[int, ...]]:
    """The DDR layouts a read or the write may have, as the buffer dimension at each DDR position, outermost
    first: the tensor as the operator has it, and, for an operator input (read as it is, or padded on chip) or
    the output, each dimension moved innermost, which the host does before the run (after it, for the
    output): channels innermost for convolution weights, so that a run holds a tile of channels spread over
    the PE array's banks; rows innermost for an image whose window slides down its rows; channels innermost
    for the output of a layer whose PEs are its channels (a depthwise convolution), so that a word's lanes
    come from as many banks. A tensor the host computes (a producer) keeps its order."""
    dims = g.coef.shape[0]
    natural = tuple(range(dims))
    source = g.access.ddr
    if source.host:
        return [natural]
    return [natural] + [tuple([d for d in natural if d != m] + [m]) for m in range(dims - 1)
                        if source.shape[m] > 1]


def epilogue_counts(analysis: Any) -> np.ndarray:
    """The epilogue as the kernel takes it (``E_*`` of ``cost_models.fpga_kernel``)."""
    ops = [dict(n.operations) for n in analysis.epilogue]
    return np.array([len(analysis.epilogue_reads), sum(o["add"] for o in ops), sum(o["mul"] for o in ops),
                     sum(o["compare"] for o in ops), CMP_LUTS_PER_BIT], dtype=np.float64)


def accumulator_dtype(dtype: str) -> str:
    """Integers accumulate (and are written) in int32; floats in their own type."""
    return "int32" if dtype.startswith("int") else dtype


@dataclass(frozen=True)
class _DtypeConstants:
    in_bytes: int
    acc_bytes: int
    cost: Any


class FpgaModel:
    """Scores the encoded points of one FPGA space from its value tables (see the module docstring for the
    architecture)."""

    def __init__(self, tables: FpgaTables, traffic_weight: float = 0.01,
                 calibration: Calibration | None = None) -> None:
        self.tables = tables
        self.traffic_weight = traffic_weight
        board = tables.board
        for dtype in tables.dtypes:
            if dtype not in ARITHMETIC:
                raise HeteroDSEError(f"the FPGA model has no costs for data type {dtype}; "
                                     f"use one of {', '.join(ARITHMETIC)}")
        if calibration is not None:
            calibration.check_part(board.part)
        self.calibration = calibration
        self.consts = [_DtypeConstants(dtype_bytes(d), dtype_bytes(accumulator_dtype(d)),
                                       calibration.cost(d) if calibration else ARITHMETIC[d])
                       for d in tables.dtypes]
        self.fixed = np.array(calibration.fixed_values() if calibration else list(DEFAULT_FIXED.values()))
        # the clock a design runs at: its target, derated by what synthesis achieves where calibrated
        self.derate = calibration.fmax_derate if calibration else 1.0
        memory = board.memory
        self.channels = memory.channels
        # what one port streams with long bursts, not the channel's peak
        self.channel_bw = memory.sustained_gbps_per_channel * 1e9
        self.port_bits = memory.port_bits
        self.caps = np.array([board.cap(r) for r in RESOURCE_KINDS], dtype=np.float64)
        self.uram_available = board.cap("uram") > 0
        main = tables.analysis.main
        self.muls = main.multiplies_per_iteration
        self.adds = main.additions_per_iteration
        self.reduction = bool(main.reduce)
        self.ops_per_iteration = main.arithmetic_per_iteration
        self.total_ops = tables.analysis.flops
        self.ports = [*tables.reads, tables.write]
        self.epilogue = epilogue_counts(tables.analysis)
        self.max_dims = max(g.coef.shape[0] for g in self.ports)
        self.compulsory = np.array([compulsory_bytes(tables.analysis, c.in_bytes, c.acc_bytes) for c in self.consts],
                                   dtype=np.float64)
        self.peak_table = np.array([[self.peak_ops(i, c) for c in tables.clocks_mhz] for i in range(len(self.consts))])
        self.stage_names = ([f"read {g.name}" for g in tables.reads] + [f"write {tables.write.name}", "compute"]
                            + [f"ddr channel {c}" for c in
                               range(min(self.channels, len(self.ports) + int(self.epilogue[E_PORTS])))])
        #: the AXI and clock constants of the kernel (``fpga_kernel.T_*``)
        self.timing = self._timing()
        self._kernel_args = self._pack()

    def _pack(self) -> tuple:
        """The space and model as plain arrays for the compiled kernel (cost_models/fpga_kernel.py)."""
        sp = self.tables
        nl = sp.loops
        # float copies (exact for these small integers, and faster in the kernel)
        tile_tab, unroll_tab = sp.tile_table.astype(np.float64), sp.unroll_table.astype(np.float64)
        max_dims = self.max_dims
        shape = np.ones((len(self.ports), max_dims))
        # The DDR tensor behind each buffer, in each layout it may have (see ``layouts``): its extents in DDR
        # order where a box dimension can cover a whole row of it (−1 where the buffer is shifted against it,
        # as a padded input is), its strides, and the flat offset of the access's constant part, which says
        # where in a port word a row starts.
        self.layouts = [layouts(g) for g in self.ports]
        n_lay = max(len(ls) for ls in self.layouts)
        n_layouts = np.array([len(ls) for ls in self.layouts], dtype=np.int64)
        layout_perm = np.zeros((len(self.ports), n_lay, max_dims), dtype=np.int64)
        ddr_shape = np.ones((len(self.ports), n_lay, max_dims))
        ddr_strides = np.ones((len(self.ports), n_lay, max_dims))
        const_flat = np.zeros((len(self.ports), n_lay))
        negative = np.zeros(len(self.ports), dtype=np.bool_)
        # the loops of each buffer dimension, as a sparse list: entries start[p, d] .. start[p, d + 1]
        start = np.zeros((len(self.ports), max_dims + 1), dtype=np.int64)
        loops, coefs = [], []
        for p, g in enumerate(self.ports):
            shape[p, : len(g.shape)] = g.shape
            source = g.access.ddr
            for lay, perm in enumerate(self.layouts[p]):
                shape_l = [source.shape[d] for d in perm]
                strides = ddr_strides_of(shape_l)
                for i, d in enumerate(perm):
                    layout_perm[p, lay, i] = d
                    ddr_shape[p, lay, i] = source.shape[d] if source.lead[d] == 0 else -1
                    ddr_strides[p, lay, i] = strides[i]
                const_flat[p, lay] = sum((g.access.indices[d].constant - source.lead[d]) * strides[i]
                                         for i, d in enumerate(perm))
            negative[p] = bool((g.coef < 0).any())
            for d in range(max_dims):
                start[p, d] = len(loops)
                if d < g.coef.shape[0]:
                    for lp in np.flatnonzero(g.coef[d]):
                        loops.append(int(lp))
                        coefs.append(float(abs(g.coef[d, lp])))
            start[p, max_dims] = len(loops)
        ndims = np.array([g.coef.shape[0] for g in self.ports], dtype=np.int64)
        used = np.array([g.loops_used for g in self.ports])
        clocks = np.asarray(sp.clocks_mhz, dtype=np.float64) * 1e6 * self.derate

        def per_dtype(field: str) -> np.ndarray:
            return np.array([float(getattr(c.cost, field)) for c in self.consts])

        in_bytes = np.array([c.in_bytes for c in self.consts], dtype=np.float64)
        acc_bytes = np.array([c.acc_bytes for c in self.consts], dtype=np.float64)
        floating = np.array([c.cost.floating for c in self.consts])
        # the body's arithmetic besides the reduction's own add (that one is the adder tree's)
        body_adds = self.adds - 1 if self.reduction else self.adds
        return (nl, sp.num_spatial, sp.col_order, sp.col_dtype, sp.col_clock, sp.extents.astype(np.float64),
                tile_tab, unroll_tab, sp.order_positions, start, np.array(loops, dtype=np.int64),
                np.array(coefs, dtype=np.float64), shape, n_layouts, layout_perm, ddr_shape, ddr_strides,
                const_flat, negative, ndims,
                used, in_bytes, acc_bytes, floating,
                per_dtype("add_latency"), per_dtype("mul_latency"), per_dtype("dsp_mul"), per_dtype("dsp_add"),
                per_dtype("lut_mul"), per_dtype("lut_add"), per_dtype("ff_mul"), per_dtype("ff_add"),
                float(self.muls), float(body_adds), self.reduction, self.compulsory, clocks, self.peak_table,
                self.caps, float(self.channel_bw), len(self.stage_names) - len(self.ports) - 1,
                bool(self.uram_available), float(self.traffic_weight), float(self.total_ops), self.port_bits // 8,
                self.fixed, self.epilogue, self.timing, slr_windows(self.tables.board))

    def _timing(self) -> np.ndarray:
        """The AXI and clock constants of the kernel (``fpga_kernel.T_*``)."""
        memory = self.tables.board.memory
        timing = np.zeros(10)
        beats = axi_max_beats(self.port_bits // 8)
        timing[T_MAX_BEATS] = beats
        timing[T_PORT_BRAM] = axi_buffer_bram18(beats, self.port_bits)  # the port's buffer of its bursts
        timing[T_READ_FLOOR_NS], timing[T_WRITE_FLOOR_NS] = memory.read_burst_ns, memory.write_burst_ns
        timing[T_READ_LATENCY_NS] = memory.latency_ns
        timing[T_FANOUT_NS], timing[T_FANOUT_FREE] = FANOUT_NS_PER_DOUBLING, FANOUT_FREE
        timing[T_SLR2], timing[T_SLR3] = SLR_DERATE[2], SLR_DERATE[3]
        # a calibration measured the clock the designs close at: its derating replaces the estimate
        timing[T_ESTIMATE] = 0.0 if self.calibration is not None else 1.0
        return timing

    def evaluate(self, rows: np.ndarray, detail: bool = False) -> dict[str, Any]:
        """Score encoded points. Returns arrays keyed by figure; ``latency_s`` is inf where infeasible.

        ``detail`` adds per-buffer (``buffers``), per-stage (``stages``) and per-design figures, for
        ``describe`` and the tests; the search leaves it off.
        """
        rows = np.ascontiguousarray(np.atleast_2d(np.asarray(rows, dtype=np.int64)))
        n = len(rows)
        out = {k: np.empty(n) for k in ("latency_s", "objective", "gops", "roofline", "traffic_bytes", "pe", "ii")}
        bound = np.empty(n, dtype=np.int64)
        resources = np.empty((n, len(RESOURCE_KINDS)))
        usage = np.empty((n, len(RESOURCE_KINDS)))
        max_dims = self.max_dims
        m = n if detail else 0
        buf_detail = np.zeros((m, len(self.ports), B_WIDTH0 + 2 * max_dims))
        design_detail = np.zeros((m, DESIGN_FIELDS))
        stage_detail = np.zeros((m, len(self.stage_names)))
        evaluate_kernel(rows, *self._kernel_args, out["latency_s"], out["objective"], out["gops"], out["roofline"],
                        bound, out["traffic_bytes"], out["pe"], out["ii"], resources, usage, buf_detail,
                        design_detail, stage_detail)
        result = {**out, "bound": bound, "feasible": np.isfinite(out["latency_s"]), "usage": usage,
                  **{k: resources[:, i] for i, k in enumerate(RESOURCE_KINDS)}}
        if detail:
            result["buffers"] = []
            for p, g in enumerate(self.ports):
                dims = g.coef.shape[0]
                bd = buf_detail[:, p]
                result["buffers"].append({
                    "width": bd[:, B_WIDTH0:B_WIDTH0 + dims],
                    "factor": bd[:, B_WIDTH0 + max_dims:B_WIDTH0 + max_dims + dims],
                    "banks": bd[:, B_BANKS], "words_per_bank": bd[:, B_WORDS], "elements": bd[:, B_ELEMENTS],
                    "lanes": bd[:, B_LANES], "split": bd[:, B_SPLIT].astype(np.int64),
                    "cycles": bd[:, B_CYCLES],
                    "loads": bd[:, B_LOADS], "impl": bd[:, B_IMPL].astype(np.int64), "tile_bytes": bd[:, B_BYTES],
                    "one_s": bd[:, B_ONE], "blocks": bd[:, B_BLOCKS], "packed": bd[:, B_PACKED],
                    "word_ii": bd[:, B_WORD_II], "iterations": bd[:, B_ITERATIONS], "rows": bd[:, B_ROWS],
                    "funnel": bd[:, B_FUNNEL] > 0, "ok": bd[:, B_OK] > 0, "pitch": bd[:, B_PITCH],
                    "layout": bd[:, B_LAYOUT].astype(np.int64), "window": bd[:, B_WINDOW].astype(np.int64),
                    "sets": bd[:, B_SETS], "bursts": bd[:, B_BURSTS], "choices": bd[:, B_CHOICES],
                    "offset": bd[:, B_OFFSET], "static": bd[:, B_STATIC] > 0})
            dd = design_detail
            result.update(
                stages=stage_detail, compute_cycles=dd[:, D_COMPUTE_CYCLES], depth=dd[:, D_DEPTH],
                spatial_iters=dd[:, D_SPATIAL_ITERS], reduce_outer=dd[:, D_REDUCE_OUTER], add_latency=dd[:, D_ADD_LAT],
                mul_latency=dd[:, D_MUL_LAT], recurrence=dd[:, D_RECURRENCE], n_tiles=dd[:, D_TILES],
                compute_one=dd[:, D_COMPUTE_ONE], compute_start=dd[:, D_COMPUTE_START],
                write_start=dd[:, D_WRITE_START], epilogue_units=dd[:, D_EPI_UNITS], clock=dd[:, D_CLOCK],
                fanout=dd[:, D_FANOUT], slrs=dd[:, D_SLRS], mux_luts=dd[:, D_MUX_LUTS],
                accumulate=dd[:, D_ACCUMULATE] > 0, mul_units=dd[:, D_MUL_UNITS],
                add_units=dd[:, D_ADD_UNITS], spatial_lanes=dd[:, D_SPATIAL_LANES],
                reduce_lanes=dd[:, D_REDUCE_LANES],
                trips=-(-self.tables.extents // self.tables.tiles(rows)))
        return result

    # ---------------------------------------------------------------------------------------- helpers
    def dsp_per_lane(self, dtype_index: int) -> float:
        """DSPs of one PE lane of an unbounded array (every add of the body and the reduction on a DSP)."""
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
        onchip_bits = self.tables.board.cap("bram18k") * 18 * 1024 + self.tables.board.cap("uram") * 288 * 1024
        return io_lower_bound(self.tables.analysis, onchip_bits / bits, c.in_bytes,
                              compulsory_bytes(self.tables.analysis, c.in_bytes, c.acc_bytes))
