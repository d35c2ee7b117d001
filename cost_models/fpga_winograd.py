"""What the network kernel's Winograd engine costs beside its PE array: the transforms (``hls/winograd_code.py``
writes them as one binary operation a statement, each bound to a core, from the same matrices and the same rule
counted here), which layers it runs, and which tile sizes each data type offers.

The engine runs F(m×m, 3×3) (``hetero_dse/ops/winograd.py``): the read process turns each α×α input patch (α = m +
2) into Bᵀ d B, the PE array multiplies it element by element with the transformed weights (G g Gᵀ: float32 by the
host ahead, int8 by the engine, below) and sums over the input channels, and a process before the write turns each
sum into its m×m outputs (Aᵀ M A). A 1-D transform by a matrix costs, per output element, one add for each non-zero
term past the first and, in floating point, one multiply for each coefficient other than ±1 (the fabric's cores:
the DSPs are the PE array's); a 2-D transform is the 1-D one down every column, then along every row.

In int8 the engine also transforms its weights, G' g G'ᵀ with G' = ±L·G (``integer_weight_transform``),
as its PE array takes a weight row: the port then carries each lane's 9 taps in 8 bits where the transformed
weight is α² values of 16 (F(2×2): 3.6× fewer bytes). G' has coefficients ±1 and ±2 (a shift: wires, no
operator); each further term is an add. In float32 the host transforms the weights ahead: G's ½ and its F(4×4)
fractions would each be a fabric multiply.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache

from cost_models.fpga_costs import ARITHMETIC, DEEPER_CORES_ABOVE_MHZ

__all__ = ["FABRIC_FADD", "FABRIC_FMUL", "TILES", "TransformOps", "refusal", "transform_depth", "transform_ops",
           "integer_weight_transform", "weight_transform_adds", "weight_transform_depth", "winograd_record"]

#: output tiles the engine offers per data type. int8 F(4×4) is not offered: its channel sums need 40 bits and
#: its output an exact division by 576 (``ops.winograd.integer_bits``), which this engine does not build; F(2×2)
#: in int8 is exact with int16 transforms, int32 sums and a division by 4 (a shift)
TILES = {"float32": (2, 4), "int8": (2,)}
#: a float add or subtract on the fabric (BIND_OP impl=fabric): LUTs and FFs (*estimate*: no fabric fadd in the
#: reports of ``shared/notes/fpga.md``; Xilinx's floating-point operator datasheet puts a no-DSP single-precision
#: adder at some 400 LUTs; a 3–4-stage core registers some 300 bits, an FPGA reviewer's reading)
FABRIC_FADD = (430.0, 300.0)
#: a float multiply on the fabric (*estimate*, as above: some 650 LUTs without DSPs)
FABRIC_FMUL = (650.0, 600.0)


@dataclass(frozen=True)
class TransformOps:
    """Binary operations a lane of each transform takes: ``in_adds``/``in_muls`` (Bᵀ d B, per input lane),
    ``out_adds``/``out_muls`` (Aᵀ M A, per output lane)."""

    in_adds: int
    in_muls: int
    out_adds: int
    out_muls: int


def _ops_1d(rows: tuple[tuple[Fraction, ...], ...]) -> tuple[int, int]:
    adds = sum(max(0, sum(1 for v in row if v) - 1) for row in rows)
    muls = sum(1 for row in rows for v in row if v and abs(v) != 1)
    return adds, muls


@cache
def transform_ops(m: int) -> TransformOps:
    """A lane's operations of F(m×m, 3×3)'s two transforms, as ``hls/winograd_code.py`` writes them."""
    from hetero_dse.ops.winograd import transforms

    t = transforms(m, 3)
    a_in, m_in = _ops_1d(t.BT)
    a_out, m_out = _ops_1d(t.AT)
    # Bᵀ d: the α columns of d, each α outputs; then (Bᵀ d) B: the α rows, each α outputs
    # Aᵀ M: the α columns of M, each m outputs; then (Aᵀ M) A: the m rows, each m outputs
    return TransformOps(2 * t.alpha * a_in, 2 * t.alpha * m_in, (t.alpha + m) * a_out, (t.alpha + m) * m_out)


@cache
def integer_weight_transform(m: int) -> tuple[tuple[tuple[Fraction, ...], ...], tuple[int, ...]]:
    """The int8 engine's weight transform G' = S·L·G (integers, ``Transforms.weight_scale``) and the signs S
    (±1 a row): a row whose first coefficient is negative is negated, so that no transformed weight is a
    negation (an integer negation is an adder). S·U·S in place of U negates the sums' rows and columns alike,
    and the output transform takes it back with Aᵀ·S (its coefficients stay ±1: no cost)."""
    from hetero_dse.ops.winograd import transforms

    t = transforms(m, 3)
    signs = tuple(-1 if next(v for v in row if v) < 0 else 1 for row in t.G)
    return tuple(tuple(v * t.weight_scale * s for v in row) for row, s in zip(t.G, signs, strict=True)), signs


@cache
def weight_transform_adds(m: int) -> int:
    """Adds of one lane's integer weight transform G' g G'ᵀ (``hls/winograd_code.py`` writes it): G' g down the
    3 columns of g (α outputs each), then along its α rows (α outputs each); a power-of-two coefficient is a shift."""
    g, _ = integer_weight_transform(m)
    adds, _ = _ops_1d(g)
    return (3 + len(g)) * adds


def weight_transform_depth(m: int) -> int:
    """Pipeline stages the integer weight transform adds to the PE loop: two passes of its longest chain of adds
    (an integer add a stage, ``ARITHMETIC['int8']``)."""
    chain = max(sum(1 for v in row if v) - 1 for row in integer_weight_transform(m)[0])
    return 2 * chain * ARITHMETIC["int8"].add_latency


def transform_depth(m: int, dtype: str, clock_mhz: float) -> int:
    """Pipeline stages of a transform loop: the buffer read, then two passes each of the deepest chain of adds
    (a term a stage after the first), after a constant multiply where a coefficient needs one."""
    from hetero_dse.ops.winograd import transforms

    a = ARITHMETIC[dtype]
    deeper = 1 if a.floating and clock_mhz > DEEPER_CORES_ABOVE_MHZ else 0
    t = transforms(m, 3)
    depth = 1
    for rows in (t.BT, t.AT):
        chain = max(sum(1 for v in row if v) - 1 for row in rows)
        mul = any(v and abs(v) != 1 for row in rows for v in row) and a.floating
        depth = max(depth, 1 + 2 * (chain * (a.add_latency + deeper) + (a.mul_latency + deeper if mul else 0)))
    return depth


def winograd_record(m: int, dtype: str) -> dict[str, object]:
    """What a report says of a Winograd engine of tile ``m``: its tile, the multiplies it saves, and its error
    against direct convolution (float: measured, ``ops.winograd.measured_error``; int8: none, exact)."""
    from hetero_dse.ops.winograd import measured_error, transforms

    t = transforms(m, 3)
    error = 0.0 if dtype == "int8" else measured_error(m, 3, dtype)
    return {"tile": m, "multiply_saving": t.multiply_saving, "error": error,
            "error_basis": ("exact: integer transforms with the weights scaled to integers and the output divided "
                            "back exactly" if dtype == "int8" else
                            f"largest error against direct convolution in float64, relative to the output's largest "
                            f"magnitude, F({m}×{m}, 3×3) in {dtype} on 64 channels of normal data")}


def refusal(m: int, dtype: str, channels: int, R: int, S: int, stride: int) -> str | None:
    """Why the Winograd engine of tile ``m`` does not run a layer, or None where it does."""
    from hetero_dse.ops.winograd import integer_bits

    if (R, S, stride) != (3, 3, 1):
        return f"Winograd F({m}×{m}, 3×3) runs 3×3 stride-1 convolutions, not {R}×{S} stride {stride}"
    if m not in TILES.get(dtype, ()):
        return f"the Winograd engine offers F(2×2) and F(4×4) in float32 and F(2×2) in int8, not F({m}×{m}) in {dtype}"
    if dtype == "int8":
        bits = integer_bits(m, 3, channels)
        if bits.channel_sum > 32:
            return (f"F({m}×{m}, 3×3) in int8 over {channels} channels sums to {bits.channel_sum} bits, past the "
                    "engine's int32")
        return None
    return _float_refusal(m, dtype)


@cache
def _float_refusal(m: int, dtype: str) -> str | None:
    from hetero_dse.ops.winograd import refused

    return refused(m, 3, dtype)
