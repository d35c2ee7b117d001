"""Per-operation and per-memory costs of the FPGA model, each with where it comes from.

Numbers marked *estimate* are this project's defaults where no public figure was found; they are meant
to be calibrated against csynth reports (``<top>_csynth.xml``) and are the first thing to correct.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ArithmeticCost:
    """Cost of one multiply and one add of a data type, as the PE array instantiates them: the operator cores
    the generated code binds (``#pragma HLS BIND_OP variable=... op=<op> impl=<impl>``, also recorded in
    design.json and checked by the HLS lint) and what one instance of each costs."""

    dsp_mul: float
    dsp_add: float
    lut_mul: int
    lut_add: int
    ff_mul: int
    ff_add: int
    mul_latency: int  # cycles at <= 200 MHz
    add_latency: int
    floating: bool  # floating-point cores, which Vitis makes one stage deeper above DEEPER_CORES_ABOVE_MHZ
    mul_core: tuple[str, str] = ("fmul", "fulldsp")  # BIND_OP op and impl of a multiply
    add_core: tuple[str, str] = ("fadd", "fulldsp")  # ... of an add (a subtract takes the same impl)

    def cores(self) -> dict[str, dict[str, str]]:
        """The cores as design.json records them."""
        sub = "fsub" if self.floating else "sub"
        return {"mul": {"op": self.mul_core[0], "impl": self.mul_core[1]},
                "add": {"op": self.add_core[0], "impl": self.add_core[1]},
                "sub": {"op": sub, "impl": self.add_core[1]}}


ARITHMETIC: dict[str, ArithmeticCost] = {
    # fp32 on UltraScale+ DSP48E2 slices, as Vitis instantiates the cores the code binds (csynth.rpt instance
    # tables of public projects): fmul impl=fulldsp (fmul_32ns_32ns_32_3_full_dsp_1) 2 DSP, 115 LUT, 128 FF
    # (Vitis HLS 2022.2, xck26); fadd impl=fulldsp (fadd_32ns_32ns_32_5_full_dsp_1) 2 DSP, 219 LUT, 205 FF
    # (Vitis HLS 2023.2, xcvu35p). Vitis's own default for fmul is maxdsp (3 DSP): the binding saves a DSP
    # a multiply. Latencies: fadd ~4 and fmul ~3 cycles at 100-200 MHz (the same reports; shared/notes/fpga.md).
    "float32": ArithmeticCost(2, 2, 115, 219, 128, 205, 3, 4, floating=True,
                              mul_core=("fmul", "fulldsp"), add_core=("fadd", "fulldsp")),
    # int16: one DSP48E2 per multiply (BIND_OP impl=dsp); the int32 adds are fabric (shared/notes/fpga.md).
    "int16": ArithmeticCost(1, 0, 20, 32, 40, 32, 3, 1, floating=False, mul_core=("mul", "dsp"),
                            add_core=("add", "fabric")),
    # int8: one DSP48E2 per multiply. Vitis does not pack two 8-bit products into one DSP on its own
    # (review-hls.md §3.2): the single-layer kernels do not pack, so none is assumed there; the network kernel and
    # the pipeline pack two products sharing an activation by hand and charge half a DSP each where they do
    # (fpga_network_design.engine_resources, fpga_pipeline.stage_resources). Without the binding Vitis often puts
    # an 8x8 multiply in LUTs (impl auto), which the model does not charge.
    "int8": ArithmeticCost(1, 0, 30, 32, 40, 32, 3, 1, floating=False, mul_core=("mul", "dsp"),
                           add_core=("add", "fabric")),
}

#: Input lanes whose packed int8 products (two output lanes a DSP48E2, ``EngineShape.packed``) a chain of DSPs sums
#: in their post-adders, a multiply-add each, before the fabric splits the two lanes' sums apart. The low lane's sum
#: must stay inside its 18-bit field: |a * w| <= 2^14, so at most 7 products (Xilinx WP486 packs the same way); 4
#: divides every lane count of the network kernel. The fabric then adds a tree over in_lanes / 4 such sums where it
#: added one over every product, and splits a quarter as many. The code binds no core to the chain (a BIND_OP stops
#: Vitis matching a multiply and its add into one DSP, UG1399 "DSP Multi-Operation Matching"): that each add lands
#: in its multiply's DSP is an *estimate* until a csynth report shows the mac_muladd instances.
PACKED_CHAIN = 4
#: registers delaying the operands of a chain's later multiply-adds until the sum reaches them, a chain (a
#: reviewer's count, *estimate*)
CHAIN_DELAY_FF = 200


def dsp_roofline_ops(dsps: float, dtype: str, clock_mhz: float) -> float:
    """Operations a second of ``dsps`` DSPs each in a multiply-add of ``dtype`` every cycle at ``clock_mhz``, as
    many DSPs a multiply-add as its cores take (two operations a multiply-add): the DSP roofline the network
    kernel's figures are set against."""
    a = ARITHMETIC[dtype]
    return 2 * dsps / (a.dsp_mul + a.dsp_add) * clock_mhz * 1e6


def packed_chain(in_lanes: int) -> int:
    """The chain a packed grid of ``in_lanes`` input lanes sums in its DSPs: the longest up to ``PACKED_CHAIN``
    that divides the lanes."""
    return max(c for c in range(1, PACKED_CHAIN + 1) if in_lanes % c == 0)


#: Above this clock the floating-point cores need one more pipeline stage each (*estimate*; Vitis picks
#: deeper cores as the target period shrinks).
DEEPER_CORES_ABOVE_MHZ = 200.0

#: Pipeline stages of the compute loop besides the arithmetic: two buffer reads and the write back
#: (BRAM read latency is 1-2 cycles; *estimate* of 4 in total).
COMPUTE_OVERHEAD_CYCLES = 4

#: Cycles a read-modify-write of the output buffer adds to the accumulation's loop-carried path when the
#: buffer is a RAM (LUTRAM, BRAM, URAM): its read (the generated BIND_STORAGE asks for latency 1) and its
#: write. Registers add none.
RMW_EXTRA_CYCLES = 2

#: A read process whose rows start at a word offset known only at run time realigns each word through a
#: funnel: every lane of every bit is a multiplexer over the word's lanes, and a LUT6 is a 4:1 multiplexer
#: (UG574), so a lane of N inputs takes ceil(N / 4) LUTs per bit.
FUNNEL_INPUTS_PER_LUT = 4
#: LUTs per bit of a comparison that picks a value (an epilogue's max, min or select): the comparator's carry
#: chain (a LUT per 4 bits) and the multiplexer (a LUT a bit); an estimate until a calibration has one
CMP_LUTS_PER_BIT = 1.25

#: One m_axi adapter with 512-bit data and burst buffers (*estimate*), and the kernel's control logic
#: (s_axilite registers, ap_ctrl, dataflow handshakes; *estimate*).
LUT_PER_PORT, FF_PER_PORT = 1600, 2400
LUT_BASE, FF_BASE = 3000, 4000

#: Arrays of at most this many bits go to LUTRAM, as Vitis does for small memories (*estimate* of its
#: threshold); a RAM64X1D (64 words × 1 bit, one write and one read port) takes 2 LUTs (UG574).
LUTRAM_MAX_BITS = 1024
LUTRAM_WORDS_PER_LUT_PAIR = 64

#: BRAM18K aspect ratios in simple dual-port mode (width, depth), UG573 Table 1-3.
BRAM18K_CONFIGS = ((1, 16384), (2, 8192), (4, 4096), (9, 2048), (18, 1024), (36, 512))
#: URAM288: 4096 × 72 bits (UG573); used for banks at least as deep as one URAM.
URAM_DEPTH, URAM_WIDTH = 4096, 72

#: The AXI limits of one m_axi burst (AXI4: 256 beats and 4 KB; the generated hls_config.tcl sets Vitis's
#: maximum burst lengths to them, where Vitis's default is 16 beats).
AXI_MAX_BURST_BEATS, AXI_MAX_BURST_BYTES = 256, 4096
#: The transactions an m_axi port keeps in flight (Vitis's default, set explicitly in hls_config.tcl): the round
#: trip over them is a short burst's floor, and the port's burst buffer holds them (UG1399).
AXI_OUTSTANDING = 16
#: The transactions a whole-network kernel's ports keep in flight (the network and pipeline projects'
#: hls_config.tcl): four bursts of 4 KB are 256 to 1,024 beats, many times a DDR round trip of some 100 cycles, so
#: a port streams a word a cycle; each port's buffer is a quarter of sixteen's (on ZCU104's 624 BRAM18K, nine ports
#: of sixteen would take 288)
NETWORK_OUTSTANDING = 4
#: The runs of a box, a residual or an output tile a whole-network kernel's arena port keeps in flight (each requested
#: ``RUNS_AHEAD - 1`` runs before it starts, each write answered ``RUNS_AHEAD - 1`` runs after), and the transactions
#: its adapter allows: twice as many, so that the next iteration's request (issued before the last's data is taken,
#: the pipeline's stages overlapping) and a run split at a 4 KB boundary still find a slot instead of stalling the
#: one loop that would free it (AMD's data mover keeps half its outstanding transactions as such a margin)
RUNS_AHEAD = 4
ARENA_OUTSTANDING = 2 * RUNS_AHEAD
#: A box's or a tile's loop beyond its words and round trip (*estimate*): its first requests issued one a cycle
#: and its pipeline filled (the run addresses' multiplies) and drained
ARENA_LOOP_CYCLES = 12


def axi_max_beats(word_bytes: int) -> int:
    """The longest burst the generated hls_config.tcl allows a port of words of ``word_bytes``: 4 KB, at most 256
    beats."""
    return min(AXI_MAX_BURST_BEATS, AXI_MAX_BURST_BYTES // word_bytes)


def axi_buffer_bram18(beats: int, width_bits: int, outstanding: int = AXI_OUTSTANDING) -> int:
    """BRAM18K of one m_axi port's burst buffer: ``outstanding`` bursts of ``beats`` words of ``width_bits``
    (UG1399, m_axi: the FIFO is the outstanding transactions times the burst length), as 512 × 36."""
    return math.ceil(outstanding * beats / 512) * math.ceil(width_bits / 36)

#: Clock derating where no calibration has measured the design's Fmax (estimates, sourced; `hetero_dse
#: calibrate` replaces them with the clock synthesis achieved):
#: - fan-out: one register broadcast to f PEs adds wire delay, ~0.28 ns a doubling past 16 sinks. Calibrated so
#:   that f ~ 1000 loses a third of a 300 MHz clock, the average that Guo et al., "Analysis and Optimization of the
#:   Implicit Broadcasts in FPGA HLS to Improve Maximum Frequency" (DAC 2020) recover (53 % higher Fmax).
#: - SLRs: a design over several dies whose crossings the code does not register closes far below its target:
#:   AutoBridge (Guo et al., FPGA 2021) reports 147 MHz before and 297 MHz after floorplanning over 43 multi-die
#:   designs, AutoSA's U250 arrays 136-201 MHz of 300; taken as 0.75 over two SLRs and 0.5 over three or more.
FANOUT_NS_PER_DOUBLING, FANOUT_FREE = 0.28, 16.0
SLR_DERATE = {2: 0.75, 3: 0.5}
