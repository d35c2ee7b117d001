"""What an engine of the network kernel takes of the device (``hls_templates/network/``): its PE array, its
buffers (the same decision binds them in the code: ``engine_storage``), the Winograd engine's transforms, the
registers and address arithmetic around them, the epilogue of its write; and what the kernel takes before its
engines (``kernel_base``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from cost_models.fpga_blocks import IMPL_NAMES, storage_cost
from cost_models.fpga_costs import (
    ARITHMETIC,
    CHAIN_DELAY_FF,
    FF_BASE,
    FF_PER_PORT,
    FUNNEL_INPUTS_PER_LUT,
    LUT_BASE,
    LUT_PER_PORT,
    NETWORK_OUTSTANDING,
    axi_buffer_bram18,
)
from cost_models.fpga_network import EngineShape
from cost_models.fpga_winograd import (
    FABRIC_FADD,
    FABRIC_FMUL,
    divide_adds,
    integer_types,
    transform_ops,
    weight_transform_ops,
)
from hetero_dse.hardware.board import RESOURCE_KINDS

__all__ = ["engine_onchip_values", "engine_resources", "engine_storage", "kernel_base", "mux_luts"]


#: 32-bit multiplies of run-time values an engine's processes make a cycle (addresses, buffer rows, the output
#: word's place): Vitis builds each from DSP48E2s, about three for 32 × 32 bits (*estimate*)
ADDRESS_MULTIPLIES, DSP_PER_ADDRESS_MULTIPLY = 14, 3
#: the Winograd engine's further run-time multiplies (*estimate*, counted in ``winograd.cpp.j2``)
WINOGRAD_ADDRESS_MULTIPLIES = 26


def mux_luts(inputs: int) -> float:
    """LUT6s a bit of a multiplexer of ``inputs`` (UG574): two 2:1 muxes share one (five inputs), a 4:1 takes one
    (six), wider ones ``ceil(inputs / 4)``; none for one input."""
    if inputs <= 1:
        return 0.0
    return 0.5 if inputs == 2 else float(math.ceil(inputs / FUNNEL_INPUTS_PER_LUT))


def _buffers(engine: EngineShape, dtype: str) -> list[tuple[str, float, float, float, float]]:
    """The engine's buffers: (name, rows, bits a row, copies, bits a value). A row is one wide word (its lanes side
    by side); the streams of blocks have two copies. The Winograd engine's: its transformed patches (``in``), their
    sums (``out``), the output tile a pixel a row, in as many banks as a word holds channel groups, each in m by
    pixel (``tile``), and the read process's box, each element in every patch that holds it, in α² banks, each as
    many as the channel groups a word brings (``box``)."""
    bits, acc_bits = 8.0 * np.dtype(dtype).itemsize, 32.0
    if engine.kind == "winograd":
        a2 = engine.alpha ** 2
        tr_bits, sum_bits = ((float(integer_types(engine.tile).tr), float(integer_types(engine.tile).sums))
                             if dtype == "int8" else (bits, acc_bits))
        return [("in", engine.in_rows, a2 * engine.in_lanes * tr_bits, 2.0, tr_bits),
                ("out", engine.out_rows, a2 * engine.out_lanes * sum_bits, 2.0, sum_bits),
                ("tile", -(-engine.tile_rows // (engine.out_banks * engine.out_cols)), engine.out_lanes * acc_bits,
                 2.0 * engine.out_banks * engine.out_cols, acc_bits),
                ("box", engine.in_rows / engine.in_banks, engine.in_lanes * bits, float(a2 * engine.in_banks), bits)]
    lanes_in = engine.in_lanes if engine.kind == "grid" else engine.out_lanes
    return [("in", engine.in_rows, lanes_in * bits, 2.0 * engine.box_banks, bits),
            ("out", engine.out_rows, engine.out_lanes * acc_bits, 2.0, acc_bits)]


def engine_onchip_values(engine: EngineShape, dtype: str) -> float:
    """The values the engine's buffers hold, every row of every copy: its on-chip memory in the words an I/O bound's
    pebble game counts (a value each, whatever its width)."""
    return float(sum(rows * width / value * copies for _, rows, width, copies, value in _buffers(engine, dtype)))


def engine_storage(engine: EngineShape, dtype: str, uram: bool) -> dict[str, str]:
    """Where each of the engine's buffers lives (``bram``, ``uram``, ``lutram``): what the model charges and
    the code binds (BIND_STORAGE), from one decision."""
    scratch = np.zeros(len(RESOURCE_KINDS))
    kinds = {}
    for name, rows, width, copies, _ in _buffers(engine, dtype):
        kind = storage_cost(float(rows), width, uram, scratch, copies)
        kinds[name] = IMPL_NAMES[kind] if IMPL_NAMES[kind] != "registers" else "lutram"
    return kinds


def engine_resources(engine: EngineShape, dtype: str, uram: bool) -> np.ndarray:
    """One engine in ``RESOURCE_KINDS`` order: its multipliers and adders (the grid's adder trees and
    accumulators), its two buffers (two blocks each, a row one wide word), the weight rows in registers (the row
    in use, the two the FIFO holds, the one being gathered), the shift registers that gather and scatter a
    row V lanes a cycle, the run-time address arithmetic, and the epilogue of its write process."""
    a = ARITHMETIC[dtype]
    res = np.zeros(len(RESOURCE_KINDS))
    lut, ff, dsp = (RESOURCE_KINDS.index(k) for k in ("lut", "ff", "dsp"))
    # a Winograd engine's PE array is α² grids: a product for each element of the patch
    macs = engine.out_lanes * engine.lane_sums * engine.alpha ** 2
    # the fabric's adds: a lane's tree of in_lanes / chain - 1 adders and its accumulation; a chain's adds are in
    # its DSPs' post-adders
    adds = macs // engine.chain
    # packed: two int8 products of neighbouring output lanes in one DSP48E2 (27 x 18), their chain's sums split
    # by fabric logic once a chain
    muls = macs / 2 if engine.packed else macs
    # an integer add's carry chain is as wide as its sums: an int8 Winograd engine's may pass the 32 bits of
    # ``ARITHMETIC`` (F(4×4): 38, ``integer_types``)
    wide = integer_types(engine.tile).sums / 32 if engine.kind == "winograd" and not a.floating else 1.0
    res[dsp] += muls * a.dsp_mul + adds * a.dsp_add
    res[lut] += muls * a.lut_mul + adds * a.lut_add * wide + (muls / engine.chain * 40 if engine.packed else 0)
    res[ff] += macs * a.ff_mul + adds * a.ff_add * wide
    if engine.chain > 1:  # a chain's later multiply-adds wait for the sum: their operands delayed in registers
        res[ff] += muls / engine.chain * CHAIN_DELAY_FF
    bits, acc_bits = 8.0 * np.dtype(dtype).itemsize, 32.0
    lanes_in = engine.in_lanes if engine.kind != "depthwise" else engine.out_lanes
    for _, rows, width, copies, _ in _buffers(engine, dtype):
        storage_cost(float(rows), width, uram, res, copies)
    # the weight row as the port brings it (gathered, and the FIFO's two rows) and as the PE array takes it: the
    # same but on a Winograd engine that transforms its weights (9 taps of 8 bits in, α² values of 16 or 18 used)
    w_bits = w_use = macs * bits
    # the depthwise engine's taps of a row, each from the one of its box's banks by column that holds its pixel: a
    # multiplexer of the banks on each lane's every tap
    res[lut] += macs * bits * mux_luts(engine.box_banks)
    if engine.box_banks > 1:  # and in registers: each bank's row read, and each tap's pick of them (a reviewer's count)
        res[ff] += 2 * macs * bits
    if engine.kind == "winograd":
        w_bits = engine.row_grids(3) * engine.out_lanes * engine.in_lanes * bits
        w_use = macs * (integer_types(engine.tile).u if engine.w_transform else bits)
        if engine.row_picks > 1:  # rows end to end: the register holds the next row's first weights too (an
            # iteration's but one place's); a row is picked out of it at one of row_picks places, a chain of
            # selects a bit (its places and the one-hot compares that pick one, all but the last: six inputs a
            # LUT6, two 2:1 selects sharing one); the count of the next row's weights, its add, compare and
            # subtract (32 bits)
            per, picks = engine.w_ports * engine.w_word * bits, engine.row_picks
            res[ff] += per - per / picks + 32
            res[lut] += w_bits * (0.5 if picks == 2 else math.ceil((2 * picks - 2) / 5)) + 3 * 32
        _transform_resources(engine, dtype, res)
        # a word of several channel groups: the transform takes a patch from one of its groups' banks, a
        # multiplexer of in_banks inputs on each of the patch's bits (2:1 muxes, two a LUT6)
        res[lut] += engine.alpha ** 2 * engine.in_lanes * bits * (engine.in_banks - 1) / 2
        # its run-time addresses besides the grid's: the banks' rows as the box arrives, the transform's rows, the
        # output tile's pixel (a reviewer's count from the code: some 40 32-bit multiplies in all, *estimate*)
        res[dsp] += WINOGRAD_ADDRESS_MULTIPLIES * DSP_PER_ADDRESS_MULTIPLY
    # the weight row in use and the one being gathered in registers; the FIFO's two rows in LUTs (SRLs); the input
    # row gathered and the output rows scattered, a word's lanes where a word holds more than a row (a row shifted
    # out through 2:1 muxes; a word's rows from the output tile's banks load their registers, through the select below)
    gather, scatter = max(lanes_in, engine.word) * bits, max(engine.out_lanes, engine.word) * acc_bits
    res[ff] += w_bits + w_use + gather + scatter
    res[lut] += 2 * w_bits + (w_bits + gather + scatter * (engine.out_banks == 1)) / 2
    # the Winograd engine's rows each picked from the one of its m banks by pixel that holds the pixel, in both of
    # the write's loops (with the residual and without)
    res[lut] += 2 * scatter * mux_luts(engine.out_cols)
    res[dsp] += ADDRESS_MULTIPLIES * DSP_PER_ADDRESS_MULTIPLY
    # the epilogue, built twice (the write loop with a residual and the one without), a lane of the word each (a
    # word a cycle)
    if a.floating:  # the bias add, the slope's multiply, the clamp's compares; the residual's add in one copy
        res[dsp] += engine.word * (2 * (a.dsp_add + a.dsp_mul) + a.dsp_add)
        res[lut] += engine.word * (2 * (a.lut_add + a.lut_mul + 2 * acc_bits) + a.lut_add)
    else:  # the requantising and the slope's 32 x 16 multiplies (2 DSPs each), the residual's 8 x 16 (1)
        res[dsp] += engine.word * (2 * 4 + 1)
        res[lut] += engine.word * 2 * (3 * acc_bits + 2 * acc_bits)
    return res


def _transform_resources(engine: EngineShape, dtype: str, res: np.ndarray) -> None:
    """The Winograd engine's transforms on the fabric, or a float engine's on DSPs (``transform_dsp``)
    (``fpga_winograd.transform_ops``: the input's on each input lane, the output's on each output lane;
    ``weight_transform_ops`` on each lane pair where it transforms its weights; ``divide_adds`` on each output lane
    of a patch row's m pixels where the output's division is not a shift alone), and the registers of the output
    transform's m×m results and the patch sum it reads."""
    lut, ff = RESOURCE_KINDS.index("lut"), RESOURCE_KINDS.index("ff")
    ops = transform_ops(engine.tile, dtype)
    a = ARITHMETIC[dtype]
    if a.floating:
        adds = ops.in_adds * engine.in_lanes + ops.out_adds * engine.out_lanes
        muls = ops.in_muls * engine.in_lanes + ops.out_muls * engine.out_lanes
        if engine.transform_dsp:  # the PE array's cores (``fulldsp``)
            res[RESOURCE_KINDS.index("dsp")] += adds * a.dsp_add + muls * a.dsp_mul
            res[lut] += adds * a.lut_add + muls * a.lut_mul
            res[ff] += adds * a.ff_add + muls * a.ff_mul
        else:
            res[lut] += adds * FABRIC_FADD[0] + muls * FABRIC_FMUL[0]
            res[ff] += adds * FABRIC_FADD[1] + muls * FABRIC_FMUL[1]
    else:  # carry chains a LUT a bit, as wide as the types (``integer_types``): the input's adds and constant
        # multiplies' adders, the output's, the exact division's 32-bit ones
        types = integer_types(engine.tile)
        bits = ((ops.in_adds + ops.in_mul_adds) * engine.in_lanes * types.tr
                + (ops.out_adds + ops.out_mul_adds) * engine.out_lanes * types.y
                + divide_adds(engine.tile) * engine.out_lanes * engine.out_cols * 32)
        if engine.w_transform:  # each registered (the PE loop's pipeline)
            w = weight_transform_ops(engine.tile)
            bits += (w.in_adds + w.in_mul_adds) * engine.out_lanes * engine.in_lanes * types.u
        res[lut] += bits
        res[ff] += bits
    # the output transform's m² pixels (the pointwise mode's α²), in registers: a patch row leaves a cycle, each of
    # its m pixels through a multiplexer of the m rows a bit, the pointwise mode's pixel through one of α² beside
    # them and a 2:1 select of it or the row's pixel into each of the m banks; the patch's sums it read beside them
    pixels = engine.alpha ** 2 if engine.pointwise else engine.tile ** 2
    sum_bits = integer_types(engine.tile).sums if dtype == "int8" else 32
    res[ff] += (pixels * 32 + engine.alpha ** 2 * sum_bits) * engine.out_lanes
    funnels = engine.tile * mux_luts(engine.tile)
    if engine.pointwise:
        funnels += mux_luts(pixels) + engine.tile * mux_luts(2)
    res[lut] += engine.out_lanes * 32 * funnels
    if engine.pointwise:  # 2:1 selects (two a LUT6): each product's weight, each transformed input or its bypass
        w_bits = integer_types(engine.tile).u if dtype == "int8" else 32
        res[lut] += engine.alpha ** 2 * (engine.out_lanes * engine.in_lanes * w_bits + engine.in_lanes * w_bits) / 2


def kernel_base(buffers: Sequence[tuple[int, ...]]) -> np.ndarray:
    """What a whole-network kernel takes before its engines, in ``RESOURCE_KINDS`` order: its control and
    AXI-Lite interface, and an m_axi adapter for each of its ports, one of ``buffers`` (bits, beats[, bursts in
    flight]) each: its logic, and its buffer of the bursts it keeps in flight (``NETWORK_OUTSTANDING`` unless
    given; ``axi_buffer_bram18``, as the one-operator model charges a port's)."""
    base = np.zeros(len(RESOURCE_KINDS))
    base[RESOURCE_KINDS.index("lut")] = LUT_BASE + len(buffers) * LUT_PER_PORT
    base[RESOURCE_KINDS.index("ff")] = FF_BASE + len(buffers) * FF_PER_PORT
    base[RESOURCE_KINDS.index("bram18k")] = sum(axi_buffer_bram18(beats, bits, *(rest or [NETWORK_OUTSTANDING]))
                                                for bits, beats, *rest in buffers)
    return base
