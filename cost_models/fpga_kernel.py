"""The FPGA model: the one implementation of the per-design arithmetic, compiled with numba.

Everything a figure of a design depends on is computed here, once: the batch search scores millions of
designs through :func:`evaluate_kernel`; ``fpga_describe.describe`` runs the same kernel on one row with the
detail arrays switched on; the code generator asks ``fpga_blocks.plan_transfer`` how a read or write process
walks its box. A formula changed here, or in the functions the kernel inlines, changes the search, the report
and the generated code together.

What is modelled is what ``hls_templates/kernel.cpp.j2`` emits (see ``cost_models/fpga.py`` for the prose). The
kernel assembles each design here from parts modelled in modules of their own, which it inlines:

* **Transfer** (read and write processes; the DDR layouts in ``fpga_layout.py``, the walk in words and the
  storage in ``fpga_blocks.py``, the choice of layout here): a box moves in whole port words (``hls::vector``
  over the m_axi port), one word a pipeline iteration, as runs contiguous in DDR (see
  ``cost_models/transfer.py``): the lanes of a word land in banks fixed at compile time, at an II of the most
  lanes one bank takes; a run that does not start on a word boundary at compile time is realigned through a
  funnel (one more word a run); a partition factor that is a multiple ``g`` of the lanes puts each word's lanes
  in one of ``g`` sets of banks, picked by the word at run time (a multiplexer charged in LUTs), still one word
  a cycle; a run is bursts of up to 4 KB, each at least the port's floor, and a read waits a round trip a
  block; DDR traffic is the words moved, not the elements used.
* **Compute** (``fpga_pe_array.py``): the PE array is the unrolled loops: how its lanes read each buffer (the
  partition factors, the register windows), its pipeline's II and depth, and its arithmetic units.
* **Latency** (``fpga_clock.py``, ``fpga_schedule.py``): the clock the design closes at, and when each of the
  concurrent processes ends; the run ends when the last one does.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from cost_models.fpga_blocks import (
    IMPL_REGISTERS,
    plan_transfer,
    run_cycles,
    storage_cost,
)
from cost_models.fpga_costs import (
    DEEPER_CORES_ABOVE_MHZ,
    FUNNEL_INPUTS_PER_LUT,
)
from cost_models.fpga_clock import achieved_clock
from cost_models.fpga_layout import box_in_layout, box_moves, pad_output_layout
from cost_models.fpga_pe_array import arithmetic_units, partition_box, pipeline
from cost_models.fpga_schedule import process_ends

# Per-buffer detail (``buf_detail[i, port, field]``); widths and partition factors follow at WIDTH0 and
# WIDTH0 + max_dims.
(B_BANKS, B_WORDS, B_ELEMENTS, B_LANES, B_SPLIT, B_CYCLES, B_LOADS, B_IMPL, B_BYTES, B_ONE, B_BLOCKS, B_PACKED,
 B_WORD_II, B_ITERATIONS, B_ROWS, B_FUNNEL, B_OK, B_PITCH, B_OFFSET, B_STATIC, B_LAYOUT, B_WINDOW, B_SETS,
 B_BURSTS, B_CHOICES) = range(25)
B_WIDTH0 = 25
# Per-design detail (``design_detail[i, field]``).
(D_COMPUTE_CYCLES, D_DEPTH, D_SPATIAL_ITERS, D_REDUCE_OUTER, D_ADD_LAT, D_RECURRENCE, D_TILES, D_COMPUTE_ONE,
 D_COMPUTE_START, D_ACCUMULATE, D_MUL_UNITS, D_ADD_UNITS, D_SPATIAL_LANES, D_REDUCE_LANES, D_MUL_LAT,
 D_WRITE_START, D_EPI_UNITS, D_CLOCK, D_FANOUT, D_SLRS, D_MUX_LUTS) = range(21)
DESIGN_FIELDS = 21
# The design-wide constants the kernel takes as an argument (``fixed``), so that a calibration can set them.
F_LUT_BASE, F_LUT_PORT, F_FF_BASE, F_FF_PORT, F_OVERHEAD = range(5)
# The epilogue (``epilogue``): its operand ports (a bias or a residual, each read in the output's layout beside
# the write), and per element its adders, multipliers and comparisons, and a comparison's LUTs per bit.
E_PORTS, E_ADDS, E_MULS, E_CMPS, E_CMP_LUTS_PER_BIT = range(5)
# The AXI ports and the clock (``timing``): the beats of the longest burst; the least a read and a write burst
# takes (ns); a read's round trip (ns), paid once a block a read process loads; the clock's derating by
# fan-out (ns a doubling past a free fan-out) and by the SLRs a design spans (two, three or more); whether to
# estimate Fmax at all (not where a calibration measured it); the BRAM18K of one m_axi port's burst buffer.
(T_MAX_BEATS, T_READ_FLOOR_NS, T_WRITE_FLOOR_NS, T_READ_LATENCY_NS, T_FANOUT_NS, T_FANOUT_FREE, T_SLR2, T_SLR3,
 T_ESTIMATE, T_PORT_BRAM) = range(10)


@njit(cache=True, error_model="numpy")
def evaluate_kernel(rows, nl, ns, col_order, col_dtype, col_clock, extents, tile_tab, unroll_tab, order_pos,
                    entry_start, entry_loop, entry_coef, shape, n_layouts, layout_perm, ddr_shape, ddr_strides,
                    const_flat, negative,
                    ndims, used, in_bytes, acc_bytes, carried_fp,
                    add_lat, mul_lat, dsp_mul, dsp_add, lut_mul, lut_add, ff_mul, ff_add, body_muls, body_adds,
                    reduction, compulsory, clocks, peak, caps, channel_bw, n_channels, uram_available,
                    traffic_weight, total_ops, port_bytes, fixed, epilogue, timing, slr_runs, out_latency,
                    out_objective, out_gops,
                    out_roofline,
                    out_bound, out_traffic, out_pe, out_ii, out_resources, out_usage, buf_detail, design_detail,
                    stage_detail):
    """Score ``rows`` into the ``out_*`` arrays; the arguments are ``FpgaModel._pack()`` (see there).

    ``buf_detail``, ``design_detail`` and ``stage_detail`` are filled when they have a row per design
    (``describe``) and skipped when empty (the search).
    """
    n = rows.shape[0]
    n_ports = shape.shape[0]
    max_dims = shape.shape[1]
    n_stages = n_ports + 1 + n_channels
    detail = buf_detail.shape[0] > 0
    # scratch space, reused for every design (allocating per design would cost more than the model)
    t = np.empty(nl)
    u = np.empty(nl)
    trips = np.empty(nl)
    pos = np.empty(nl, dtype=np.int64)
    width = np.empty(max_dims)
    clipped = np.empty(max_dims)
    fac = np.empty(max_dims)
    dshape = np.empty(max_dims)
    strides = np.empty(max_dims)
    wd = np.empty(max_dims)
    fd = np.empty(max_dims)
    inv = np.empty(max_dims, dtype=np.int64)
    move_step = np.empty(entry_loop.shape[0] + 1)
    move_dim = np.empty(entry_loop.shape[0] + 1, dtype=np.int64)
    stages = np.empty(n_stages)
    ends = np.empty(n_stages)
    res = np.empty(5)
    chbytes = np.empty(n_channels)
    port_loads = np.empty(n_ports)
    port_plan = np.empty((n_ports, 3))  # runs, iterations, word II: the transfer, timed at the clock achieved
    port_tile_bytes = np.empty(n_ports)
    max_beats = timing[T_MAX_BEATS]
    for i in range(n):
        stages[:] = 0.0
        res[:] = 0.0
        chbytes[:] = 0.0
        dt = rows[i, col_dtype]
        clock = clocks[rows[i, col_clock]]
        deeper = 1.0 if (clock > DEEPER_CORES_ABOVE_MHZ * 1e6 and carried_fp[dt]) else 0.0
        # the AXI floors in cycles of the target clock (what the tool schedules against)
        read_floor = max(1.0, timing[T_READ_FLOOR_NS] * 1e-9 * clock)
        write_floor = max(1.0, timing[T_WRITE_FLOOR_NS] * 1e-9 * clock)
        read_fill = math.ceil(timing[T_READ_LATENCY_NS] * 1e-9 * clock)
        fanout = 1.0
        addl = add_lat[dt] + deeper
        mull = mul_lat[dt] + deeper
        n_tiles = 1.0
        out_tiles = 1.0
        reduce_tiles = 1.0
        all_lanes = 1.0
        for lp in range(nl):
            t[lp] = tile_tab[lp, rows[i, lp]]
            u[lp] = unroll_tab[lp, rows[i, nl + lp]]
            all_lanes *= u[lp]
            trips[lp] = math.ceil(extents[lp] / t[lp])
            n_tiles *= trips[lp]
            if lp < ns:
                out_tiles *= trips[lp]
            else:
                reduce_tiles *= trips[lp]
            pos[lp] = order_pos[rows[i, col_order], lp]
        traffic = 0.0
        compute_start = 0.0
        first_write = 0.0
        out_impl = IMPL_REGISTERS
        bad_transfer = False
        window_stage = 0.0
        epi_units = 0.0
        mux_luts = 0.0
        for p in range(n_ports):
            is_write = p == n_ports - 1
            elem = acc_bytes[dt] if is_write else in_bytes[dt]
            word = float(port_bytes // int(elem))
            dims = ndims[p]
            windows, distinct = partition_box(p, dims, is_write, t, u, shape, entry_start, entry_loop,
                                              entry_coef, in_bytes, dt, width, clipped, fac, res)
            if windows != 0:
                window_stage = 1.0
            if not is_write:
                # one register read fans out to every PE that shares the element: the broadcast a clock closes over
                fanout = max(fanout, all_lanes / distinct)
            floor = write_floor if is_write else read_floor
            if is_write:
                loads = out_tiles
                level = nl
            else:
                # loaded again whenever a tile loop at or above the innermost one it depends on advances
                level = -1
                for lp in range(nl):
                    if used[p, lp] and trips[lp] > 1 and pos[lp] > level:
                        level = pos[lp]
                loads = 1.0
                for lp in range(nl):
                    if pos[lp] <= level:
                        loads *= trips[lp]
            port_loads[p] = loads
            registers = True
            for d in range(dims):
                if fac[d] < width[d]:
                    registers = False
            # the DDR layout of the tensor: as the operator has it, or (an input the host transposes) one
            # dimension moved innermost; the one whose transfer takes fewest cycles is the design's
            chosen = -1
            chosen_cycles = 0.0
            pitch = 0.0
            q, lanes, packed, wii, iterations, runs, funnel, ok, static, offset, sets = (
                -1, 1.0, 1.0, 1.0, 1.0, 1.0, False, False, False, 0.0, 1.0)
            n_moves = box_moves(p, dims, level, entry_start, entry_loop, entry_coef, t, trips, pos, move_step,
                                move_dim)
            # no layout moves the box in fewer cycles than its elements fill words, nor, where its
            # innermost dimension is not a whole row in DDR (nothing packs), than its runs take words
            box = 1.0
            for d in range(dims):
                box *= width[d]
            fewest = math.ceil(box / word)
            for lay in range(n_layouts[p]):
                if lay > 0:
                    inner = width[layout_perm[p, lay, dims - 1]]
                    if inner == 1:
                        continue  # runs of one element
                    if ok:
                        # where its innermost dimension is not a whole row, the layout's runs are the box's rows
                        # along it, each at least its words and, if short, a burst's floor
                        run_words = math.ceil(inner / word)
                        least = max(run_words, floor) if run_words <= max_beats else run_words
                        if chosen_cycles <= fewest or (ddr_shape[p, lay, dims - 1] != inner
                                                       and box / inner * least >= chosen_cycles):
                            continue
                box_in_layout(p, lay, dims, layout_perm, width, fac, ddr_shape, ddr_strides, wd, fd, dshape, strides,
                              inv)
                if is_write:
                    l_pitch = pad_output_layout(p, lay, dims, layout_perm, shape, width, word, dshape, strides)
                # a run starts at the same offset within a word for every tile when each tile loop that
                # moves the box moves it by whole words
                l_static = not negative[p]
                for m in range(n_moves):
                    if (move_step[m] * strides[inv[move_dim[m]]]) % word != 0:
                        l_static = False
                        break
                l_offset = const_flat[p, lay] % word
                l_q, l_lanes, l_packed, l_wii, l_it, l_runs, l_funnel, l_ok, l_static, l_sets = plan_transfer(
                    wd, dshape, fd, dims, word, strides, l_static, l_offset, registers)
                if is_write and l_funnel:
                    # a write must not touch a word another tile owns: runs that start inside a word
                    l_ok = False
                l_cycles = l_runs * run_cycles(l_it, l_wii, floor, max_beats)
                if chosen < 0 or (l_ok and (not ok or l_cycles < chosen_cycles)):
                    chosen_cycles = l_cycles
                    if is_write:
                        pitch = l_pitch
                    chosen = lay
                    q, lanes, packed, wii, iterations, runs, funnel, ok, static, sets = (
                        l_q, l_lanes, l_packed, l_wii, l_it, l_runs, l_funnel, l_ok, l_static, l_sets)
                    offset = l_offset
            if not ok:
                bad_transfer = True
            # a read process's pipeline waits a round trip for each block's first word
            cycles = chosen_cycles + (0.0 if is_write else read_fill)
            beats = runs * iterations
            bursts = runs * math.ceil(iterations / max_beats)
            # a dimension the rows walk, and the set of banks a word's index picks, choose a lane's bank at run
            # time, the same for every lane of a word: a read process's lane enables one of those banks (a LUT a
            # bank), the write process's lane selects among them (a LUT6 is a 4:1 multiplexer a bit)
            choices = sets
            for at in range(max(q, 0)):
                choices *= fac[layout_perm[p, chosen, at]]
            if choices > 1:
                per_word = packed * (min(width[layout_perm[p, chosen, q]], lanes) if q >= 0 else 1.0)
                if is_write:
                    mux_luts += per_word * 8.0 * elem * math.ceil(choices / FUNNEL_INPUTS_PER_LUT)
                else:
                    mux_luts += per_word * choices
            banks = 1.0
            wpb = 1.0
            elements = 1.0
            for d in range(dims):
                banks *= fac[d]
                wpb *= math.ceil(width[d] / fac[d])
                elements *= clipped[d]
            tile_bytes = beats * port_bytes
            port_plan[p, 0], port_plan[p, 1], port_plan[p, 2] = runs, iterations, wii
            port_tile_bytes[p] = tile_bytes
            traffic += loads * tile_bytes
            chbytes[p % n_channels] += loads * tile_bytes
            if is_write:
                # the epilogue's operands are read word for word beside the write, each on a port of its own;
                # every element a word iteration writes goes through the epilogue's arithmetic once
                for e in range(int(epilogue[E_PORTS])):
                    traffic += loads * tile_bytes
                    chbytes[(p + 1 + e) % n_channels] += loads * tile_bytes
                epi_units = packed * (min(width[layout_perm[p, chosen, q]], lanes) if q >= 0 else 1.0)
            if funnel and not static:
                # realigning a word by a shift known only at run time: a word-wide multiplexer per lane
                res[3] += word * 8.0 * elem * math.ceil(word / FUNNEL_INPUTS_PER_LUT)
            # a buffer loaded once needs one block; the others two, so the next load overlaps this compute
            blocks = 1.0 if loads <= 1 else 2.0
            impl = storage_cost(wpb, 8.0 * elem, uram_available, res, blocks * banks)
            if is_write:
                out_impl = impl
            if detail:
                bd = buf_detail[i, p]
                bd[B_BANKS], bd[B_WORDS], bd[B_ELEMENTS], bd[B_LANES] = banks, wpb, elements, lanes
                bd[B_SPLIT], bd[B_CYCLES], bd[B_LOADS], bd[B_IMPL] = q, cycles, loads, impl
                bd[B_BYTES], bd[B_BLOCKS] = tile_bytes, blocks
                bd[B_BURSTS], bd[B_CHOICES] = bursts, choices
                bd[B_PACKED], bd[B_WORD_II], bd[B_ITERATIONS], bd[B_ROWS] = packed, wii, iterations, runs
                bd[B_FUNNEL], bd[B_OK], bd[B_PITCH], bd[B_OFFSET] = funnel, ok, pitch, offset
                bd[B_STATIC] = static
                bd[B_LAYOUT] = chosen
                bd[B_WINDOW] = windows
                bd[B_SETS] = sets
                for d in range(dims):
                    bd[B_WIDTH0 + d] = width[d]
                    bd[B_WIDTH0 + max_dims + d] = fac[d]
        # compute
        (spatial_iters, reduce_outer, spatial_lanes, reduce_lanes, pe, accumulate, recurrence, ii, depth,
         c_cycles) = pipeline(t, u, nl, ns, reduction, reduce_tiles, addl, mull, out_impl, fixed[F_OVERHEAD],
                              window_stage)
        # each m_axi port's burst buffer (the transactions in flight times the beats of a burst, a word each)
        res[1] += (n_ports + epilogue[E_PORTS]) * timing[T_PORT_BRAM]
        mul_units, add_units = arithmetic_units(reduction, pe, spatial_lanes, reduce_lanes, body_muls, body_adds,
                                                accumulate)
        res[0] += mul_units * dsp_mul[dt] + add_units * dsp_add[dt]
        res[3] += mul_units * lut_mul[dt] + add_units * lut_add[dt] + fixed[F_LUT_BASE] + fixed[F_LUT_PORT] * n_ports
        res[4] += mul_units * ff_mul[dt] + add_units * ff_add[dt] + fixed[F_FF_BASE] + fixed[F_FF_PORT] * n_ports
        if epilogue[E_PORTS] > 0 or epilogue[E_ADDS] + epilogue[E_MULS] + epilogue[E_CMPS] > 0:
            e_add, e_mul = epi_units * epilogue[E_ADDS], epi_units * epilogue[E_MULS]
            res[0] += e_mul * dsp_mul[dt] + e_add * dsp_add[dt]
            res[3] += (e_mul * lut_mul[dt] + e_add * lut_add[dt] + fixed[F_LUT_PORT] * epilogue[E_PORTS]
                       + epi_units * epilogue[E_CMPS] * epilogue[E_CMP_LUTS_PER_BIT] * 8.0 * acc_bytes[dt])
            res[4] += e_mul * ff_mul[dt] + e_add * ff_add[dt] + fixed[F_FF_PORT] * epilogue[E_PORTS]
        res[3] += mux_luts
        # the SLRs the design spans follow from its resources, so the clock is estimated once they are all counted
        eff, slrs = achieved_clock(clock, res, slr_runs, fanout, timing[T_ESTIMATE], timing[T_FANOUT_NS],
                                   timing[T_FANOUT_FREE], timing[T_SLR2], timing[T_SLR3])
        compute_start = 0.0
        first_write = 0.0
        for p in range(n_ports):
            # the pipeline's cycles are at the clock achieved; the AXI floors and a read's round trip are times
            is_read = p < n_ports - 1
            floor_eff = max(1.0, (timing[T_READ_FLOOR_NS] if is_read else timing[T_WRITE_FLOOR_NS]) * 1e-9 * eff)
            cycles_eff = port_plan[p, 0] * run_cycles(port_plan[p, 1], port_plan[p, 2], floor_eff, max_beats)
            if is_read:
                cycles_eff += math.ceil(timing[T_READ_LATENCY_NS] * 1e-9 * eff)
            one = max(cycles_eff / eff, port_tile_bytes[p] / channel_bw)
            stages[p] = port_loads[p] * one
            if p == n_ports - 1:
                first_write = one
            elif one > compute_start:
                # the compute's first tile needs every buffer's first block whole
                compute_start = one
            if detail:
                buf_detail[i, p, B_ONE] = one
        c_one, write_start, best, latency = process_ends(stages, ends, chbytes, port_loads, n_ports, n_stages,
                                                         n_channels, channel_bw, n_tiles, c_cycles, eff,
                                                         compute_start, first_write)
        worst = 0.0
        for k in range(5):
            if caps[k] > 0:
                use = res[k] / caps[k]
            elif res[k] > 0:
                use = np.inf
            else:
                use = 0.0
            out_usage[i, k] = use
            out_resources[i, k] = res[k]
            worst = max(worst, use)
        out_objective[i] = latency * (1.0 + 10.0 * max(worst - 1.0, 0.0) + traffic_weight * traffic / compulsory[dt]
                                      + 1e-6 * min(worst, 1.0))
        if detail:
            dd = design_detail[i]
            dd[D_COMPUTE_CYCLES], dd[D_DEPTH], dd[D_SPATIAL_ITERS], dd[D_REDUCE_OUTER] = (c_cycles, depth,
                                                                                          spatial_iters, reduce_outer)
            dd[D_ADD_LAT], dd[D_RECURRENCE], dd[D_TILES], dd[D_COMPUTE_ONE] = addl, recurrence, n_tiles, c_one
            dd[D_COMPUTE_START], dd[D_ACCUMULATE], dd[D_MUL_UNITS], dd[D_ADD_UNITS] = (compute_start, accumulate,
                                                                                       mul_units, add_units)
            dd[D_SPATIAL_LANES], dd[D_REDUCE_LANES], dd[D_MUL_LAT], dd[D_WRITE_START] = (spatial_lanes, reduce_lanes,
                                                                                         mull, write_start)
            dd[D_EPI_UNITS] = epi_units
            dd[D_CLOCK], dd[D_FANOUT], dd[D_SLRS], dd[D_MUX_LUTS] = eff, fanout, slrs, mux_luts
            for s in range(n_stages):
                stage_detail[i, s] = stages[s]
        if bad_transfer:
            # a bank chosen at run time, or a write into another tile's word: not a design the generator
            # emits
            out_objective[i] *= 1e3
            latency = np.inf
        if worst > 1.0:
            latency = np.inf
        out_latency[i] = latency
        gops = total_ops / latency / 1e9
        out_gops[i] = gops
        pk = peak[dt, rows[i, col_clock]]
        out_roofline[i] = gops * 1e9 / pk if pk > 0 else 0.0
        out_bound[i] = best
        out_traffic[i] = traffic
        out_pe[i] = pe
        out_ii[i] = ii
