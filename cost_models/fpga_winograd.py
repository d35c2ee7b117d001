"""What the network kernel's Winograd engine costs beside its PE array: the transforms (``hls/winograd_code.py``
writes them as one binary operation a statement, each bound to a core, from the same matrices and the same rule
counted here), which layers it runs, and which tile sizes each data type offers.

The engine runs F(m×m, 3×3) (``hetero_dse/ops/winograd.py``): the read process turns each α×α input patch (α = m +
2) into Bᵀ d B, the PE array multiplies it element by element with the transformed weights (G g Gᵀ: float32 by the
host ahead, int8 by the engine, below) and sums over the input channels, and a process before the write turns each
sum into its m×m outputs (Aᵀ M A). A 1-D transform by a matrix is computed by its plan (``winograd_plan``: the sums
its outputs share first, then each output), which costs one add for each term of a combination past the first and,
in floating point, one multiply for each coefficient other than ±1 (the fabric's cores, or a float engine's on
DSPs where its board is short of fabric: ``EngineShape.transform_dsp``); a 2-D transform is the 1-D one down
every column, then along every row.

In int8 the engine also transforms its weights, G' g G'ᵀ with G' = ±L·G (``integer_weight_transform``),
as its PE array takes a weight row: the port then carries each lane's 9 taps in 8 bits where the transformed
weight is α² values of 16 or 18 bits (F(2×2): 3.6× fewer bytes, F(4×4): 4×). An integer coefficient that is a
power of two is a shift (wires, no operator); any other (F(4×4)'s 5 of Bᵀ, 6 and 24 of G') a constant multiply on
the fabric, which Vivado builds of adders (``winograd_plan.csd_digits``: one each). In float32 the host transforms
the weights ahead: G's ½ and its F(4×4) fractions would each be a fabric multiply.

The int8 output is the convolution's sum times D = (L·L')² (``Transforms.weight_scale``): F(2×2)'s D = 4 is a
shift of sums held exactly (int32 sums, a 64-bit output transform). F(4×4)'s D = 576 = 2⁶·9 would need 40-bit sums
and a 49-bit output transform held exactly; the engine keeps them modulo 2^38 instead (``integer_types``: a chain
of DSP48E2 multiply-adds sums 38 bits in their 48-bit post-adders), as every step before the division is a ring
operation: the 38 low bits of D·y, shifted by 6, are the 32 low bits of 9·y, and times 9's inverse modulo 2^32 (a
constant multiply, ``exact_division``) they are y, which the convolution's int32 sum holds whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache

from cost_models.fpga_costs import ARITHMETIC, DEEPER_CORES_ABOVE_MHZ
from cost_models.winograd_plan import Plan, csd_digits, transform_plan

__all__ = ["FABRIC_FADD", "FABRIC_FMUL", "TILES", "IntegerTypes", "TransformOps", "divide_adds", "divide_stages",
           "exact_division", "integer_types", "integer_weight_transform", "output_matrix", "refusal",
           "transform_depth", "transform_impl", "transform_ops", "weight_transform_depth", "weight_transform_ops",
           "winograd_record"]

#: output tiles the engine offers per data type: F(2×2) and F(4×4) (F(6×6)'s output transform has halves and its
#: float32 error passes the tolerance, ``ops.winograd.refused``)
TILES = {"float32": (2, 4), "int8": (2, 4)}
#: the widest transformed weight a DSP48E2 multiplies by one of its ports (B: 18 bits signed; the transformed
#: input takes the 27-bit A)
DSP_B_BITS = 18
#: a float add or subtract on the fabric (BIND_OP impl=fabric): LUTs and FFs (*estimate*: no fabric fadd in the
#: reports of ``shared/notes/fpga.md``; Xilinx's floating-point operator datasheet puts a no-DSP single-precision
#: adder at some 400 LUTs; a 3–4-stage core registers some 300 bits, an FPGA reviewer's reading)
FABRIC_FADD = (430.0, 300.0)
#: a float multiply on the fabric (*estimate*, as above: some 650 LUTs without DSPs)
FABRIC_FMUL = (650.0, 600.0)


@dataclass(frozen=True)
class TransformOps:
    """Binary operations a lane of each transform takes: ``in_adds``/``in_muls`` (Bᵀ d B, per input lane),
    ``out_adds``/``out_muls`` (Aᵀ M A, per output lane); in integers ``in_mul_adds``/``out_mul_adds``, the adders
    its constant multiplies are built of (``winograd_plan.csd_digits``)."""

    in_adds: int
    in_muls: int
    out_adds: int
    out_muls: int
    in_mul_adds: int = 0
    out_mul_adds: int = 0


def output_matrix(m: int, dtype: str) -> tuple[tuple[Fraction, ...], ...]:
    """The output transform's matrix as the engine applies it: Aᵀ, and in int8 Aᵀ·S, which takes back the signs
    S of the weight transform (``integer_weight_transform``)."""
    from hetero_dse.ops.winograd import transforms

    at = transforms(m, 3).AT
    if ARITHMETIC[dtype].floating:
        return at
    signs = integer_weight_transform(m)[1]
    return tuple(tuple(v * s for v, s in zip(row, signs, strict=True)) for row in at)


@cache
def transform_impl(dsp: bool, dtype: str) -> str:
    """The cores (BIND_OP impl) of the input and output transforms' operations: the fabric's, or where a float
    engine has them on DSPs (``EngineShape.transform_dsp``) its PE array's (``ARITHMETIC``)."""
    a = ARITHMETIC[dtype]
    return a.add_core[1] if dsp and a.floating else "fabric"


@cache  # the explorer prices thousands of engines of a few tiles
def transform_ops(m: int, dtype: str = "float32") -> TransformOps:
    """A lane's operations of F(m×m, 3×3)'s two transforms in ``dtype``, as ``hls/winograd_code.py`` writes them:
    each 1-D pass by its plan (``winograd_plan.transform_plan``: shared sums, then the outputs)."""
    from hetero_dse.ops.winograd import transforms

    t = transforms(m, 3)
    integer = not ARITHMETIC[dtype].floating
    bt, at = transform_plan(t.BT, integer), transform_plan(output_matrix(m, dtype), integer)
    # Bᵀ d: the α columns of d, each α outputs; then (Bᵀ d) B: the α rows, each α outputs
    # Aᵀ M: the α columns of M, each m outputs; then (Aᵀ M) A: the m rows, each m outputs
    return TransformOps(2 * t.alpha * bt.adds, 2 * t.alpha * bt.muls, (t.alpha + m) * at.adds,
                        (t.alpha + m) * at.muls, 2 * t.alpha * bt.mul_adds, (t.alpha + m) * at.mul_adds)


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
def weight_transform_ops(m: int) -> TransformOps:
    """One lane pair's integer weight transform G' g G'ᵀ (``hls/winograd_code.py`` writes it by its plan,
    ``winograd_plan``): G' g down the 3 columns of g (α outputs each), then along its α rows (α outputs each); its
    adds, constant multiplies (F(4×4)'s 6 and 24) and their adders in the ``in_*`` fields."""
    g, _ = integer_weight_transform(m)
    plan, passes = transform_plan(g, True), 3 + len(g)
    return TransformOps(passes * plan.adds, passes * plan.muls, 0, 0, passes * plan.mul_adds)


def weight_transform_depth(m: int) -> int:
    """Pipeline stages the integer weight transform adds to the PE loop: two passes of its plan's longest chain
    of adds (an integer add a stage, ``ARITHMETIC['int8']``; a constant multiply its adders')."""
    plan, add = transform_plan(integer_weight_transform(m)[0], True), ARITHMETIC["int8"].add_latency
    return 2 * plan.depth(add, add * plan.mul_stages)


@dataclass(frozen=True)
class IntegerTypes:
    """The int8 engine's widths in bits (``hls/network_project.winograd_context`` types its code by them, the
    resources charge them): a transformed input (``wino_tr_t``), a transformed weight (``wino_u_t``), a product
    and a channel sum (``wino_m_t``), an output transform's value (``wino_y_t``). ``modular``: the sums and the
    output transform are held modulo 2^sums (the module doc), not exactly."""

    tr: int
    u: int
    sums: int
    y: int
    modular: bool


@cache
def exact_division(m: int) -> tuple[int, int | None]:
    """How an int8 engine divides its output by D = 2^s·d exactly: (s, inverse), a shift by s, then where d > 1
    a multiply by d's inverse modulo 2^32 (a constant multiply on the fabric: ``divide_adds``), else None."""
    from hetero_dse.ops.winograd import transforms

    t = transforms(m, 3)
    divisor = (t.weight_scale * t.output_scale) ** 2
    shift = (divisor & -divisor).bit_length() - 1
    odd = divisor >> shift
    return shift, pow(odd, -1, 1 << 32) if odd > 1 else None


def divide_adds(m: int) -> int:
    """The adders of one output lane's exact division: the constant multiply by the inverse, one fewer than its
    canonical signed digits (``winograd_plan.csd_digits``; a shift is wires)."""
    inverse = exact_division(m)[1]
    return csd_digits(inverse) - 1 if inverse else 0


def divide_stages(m: int) -> int:
    """The division's adds one after another: a tree of the inverse's digits."""
    return (divide_adds(m)).bit_length()


@cache
def integer_types(m: int) -> IntegerTypes:
    """The int8 engine's widths for F(m×m, 3×3) (``ops.winograd.integer_bits`` for the transforms): where its
    output divides by a power of two (F(2×2)) the int32 sums and a 64-bit output transform hold every value
    exactly (a layer whose sums pass 32 bits refused, ``refusal``); where it divides by more (F(4×4)), the sums and
    output transform are held modulo 2^(32 + s), the 32 bits of the result above the shift by s."""
    from hetero_dse.ops.winograd import integer_bits

    bits = integer_bits(m, 3, 1)
    tr = 16 if bits.input_transform <= 16 else 32
    u = 16 if bits.weight_transform <= 16 else bits.weight_transform
    shift, inverse = exact_division(m)
    if inverse:
        return IntegerTypes(tr, u, 32 + shift, 32 + shift, True)
    return IntegerTypes(tr, u, 32, 64, False)


def transform_depth(m: int, dtype: str, clock_mhz: float) -> int:
    """Pipeline stages of a transform loop: the buffer read, then two passes each of the deepest chain of adds
    (a term a stage after the first), after a constant multiply where a coefficient needs one; the output's, then
    its exact division's adders (int8 F(4×4), ``divide_stages``)."""
    from hetero_dse.ops.winograd import transforms

    a = ARITHMETIC[dtype]
    deeper = 1 if a.floating and clock_mhz > DEEPER_CORES_ABOVE_MHZ else 0
    t = transforms(m, 3)
    add = a.add_latency + deeper
    after = 0 if a.floating else divide_stages(m) * a.add_latency
    bt, at = transform_plan(t.BT, not a.floating), transform_plan(output_matrix(m, dtype), not a.floating)

    def mul(plan: Plan) -> int:  # a float core's stages; an integer constant multiply its adders'
        return a.mul_latency + deeper if a.floating else add * plan.mul_stages

    return max(1 + 2 * bt.depth(add, mul(bt)), 1 + 2 * at.depth(add, mul(at)) + after)


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
        return f"the Winograd engine offers F(2×2) and F(4×4) in float32 and int8, not F({m}×{m}) in {dtype}"
    if dtype == "int8":
        types, bits = integer_types(m), integer_bits(m, 3, channels)
        if types.u > DSP_B_BITS:
            return (f"F({m}×{m}, 3×3) in int8 transforms its weights to {types.u} bits, past a DSP48E2's "
                    f"{DSP_B_BITS}-bit port")
        if not types.modular and bits.channel_sum > types.sums:
            return (f"F({m}×{m}, 3×3) in int8 over {channels} channels sums to {bits.channel_sum} bits, past the "
                    "engine's int32")
        direct = (9 * channels * 128 * 128).bit_length() + 1  # the convolution's own sum: what the engine returns
        if types.modular and direct > 32:
            return (f"a 3×3 int8 convolution over {channels} channels sums to {direct} bits: F({m}×{m}, 3×3) "
                    "recovers a sum of 32")
        return None
    return _float_refusal(m, dtype)


@cache
def _float_refusal(m: int, dtype: str) -> str | None:
    from hetero_dse.ops.winograd import refused

    return refused(m, 3, dtype)
