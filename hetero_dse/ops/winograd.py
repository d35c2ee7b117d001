"""Winograd's minimal filtering F(m×m, r×r) for stride-1 convolutions (Lavin & Gray; seed 001 §2.3).

An output tile of m×m is computed from an α×α input tile (α = m + r − 1) as

    Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A,

summed over the input channels before the output transform: α² multiplies per tile and channel where direct
convolution takes m²·r². The transforms come from the Cook–Toom construction, exact in rationals (sympy):
for evaluation points a₀ … a_{α−2} and ∞, with E_k the α×k matrix evaluating a polynomial of degree k − 1 at
them, a linear convolution is s = E_α⁻¹ [(E_r g) ⊙ (E_m h)], and its transpose — the correlation a
convolution layer computes — gives Aᵀ = E_mᵀ, G = E_r, Bᵀ = E_α⁻ᵀ. Each row of Bᵀ is then scaled to the
smallest integers and G's row divided by the same factor, so the input transform is additions and small
integer multiples, as in the transforms people use (F(2×2, 3×3)'s Bᵀ is ±1 and 0).

The points are the usual ones (0, ±1, ±2, ±½, ±3, ...): the larger the tile, the larger the transforms'
entries and the rounding error in floating point, and the wider the integers of an int8 pipeline
(``measured_error`` and ``integer_bits`` say how much, per tile size).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from math import ceil, gcd, lcm, log2

import numpy as np

from hetero_dse.operator import operator
from hetero_dse.operator_params import Param

#: the evaluation points, in the order they are taken (∞ is always the last point)
POINTS = (Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2), Fraction(1, 2), Fraction(-1, 2),
          Fraction(3), Fraction(-3), Fraction(1, 3), Fraction(-1, 3))

#: output tile sizes offered for a 3×3 kernel: F(2×2,3×3), F(4×4,3×3), F(6×6,3×3)
TILES_3X3 = (2, 4, 6)

#: the knob a convolution's CPU point carries where it runs by Winograd: the output tile m of F(m×m, 3×3); its
#: other knobs are the batched product's (``gpu_cpu/winograd.py``)
TILE_KNOB = "winograd"


@dataclass(frozen=True)
class Transforms:
    """Aᵀ (m×α), G (α×r) and Bᵀ (α×α) of F(m×m, r×r), exact."""

    m: int
    r: int
    AT: tuple[tuple[Fraction, ...], ...]
    G: tuple[tuple[Fraction, ...], ...]
    BT: tuple[tuple[Fraction, ...], ...]

    @property
    def alpha(self) -> int:
        """The input tile's side, m + r − 1."""
        return self.m + self.r - 1

    def arrays(self, dtype: str = "float64") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Aᵀ, G, Bᵀ as numpy arrays."""
        return tuple(np.array([[float(v) for v in row] for row in mat], dtype=dtype)  # type: ignore[return-value]
                     for mat in (self.AT, self.G, self.BT))

    @property
    def multiply_saving(self) -> float:
        """Direct convolution's multiplies over Winograd's, per output tile and channel: m²r² / α²."""
        return (self.m * self.r) ** 2 / self.alpha ** 2

    @property
    def weight_scale(self) -> int:
        """The least L making L·G integer: an integer pipeline transforms weights with L·G and divides the
        output by L² (exactly: the result is L² times an integer sum)."""
        return lcm(*(v.denominator for row in self.G for v in row))

    @property
    def output_scale(self) -> int:
        """The least L' making L'·Aᵀ integer (1 up to F(4×4, 3×3); the points ±½ of larger tiles bring halves):
        the output is then divided by L'² too."""
        return lcm(*(v.denominator for row in self.AT for v in row))


@cache
def transforms(m: int, r: int) -> Transforms:
    """F(m×m, r×r)'s transforms from the Cook–Toom construction (see the module's docstring)."""
    import sympy

    alpha = m + r - 1
    if m < 1 or r < 1:
        raise ValueError(f"F({m}, {r}): the output tile and the kernel have at least one element")
    if alpha - 1 > len(POINTS):
        raise ValueError(f"F({m}, {r}) needs {alpha - 1} finite evaluation points; {len(POINTS)} are known")
    points = [sympy.Rational(p.numerator, p.denominator) for p in POINTS[: alpha - 1]]

    def evaluation(k: int) -> sympy.Matrix:  # α×k: a polynomial of degree k − 1 at the points, then ∞
        rows = [[p ** i for i in range(k)] for p in points]
        return sympy.Matrix([*rows, [0] * (k - 1) + [1]])

    at = evaluation(m).T
    g = evaluation(r)
    bt = evaluation(alpha).inv().T
    for j in range(alpha):  # row j of Bᵀ to its smallest integers, G's row j divided by the same factor
        row = [Fraction(int(v.p), int(v.q)) for v in bt.row(j)]
        denominators = lcm(*(v.denominator for v in row))
        numerators = gcd(*(int(v * denominators) for v in row))
        scale = Fraction(denominators, numerators or 1)
        first = next(v for v in row if v)
        if first < 0:
            scale = -scale
        bt[j, :] = bt.row(j) * sympy.Rational(scale.numerator, scale.denominator)
        g[j, :] = g.row(j) / sympy.Rational(scale.numerator, scale.denominator)

    def exact(mat: sympy.Matrix) -> tuple[tuple[Fraction, ...], ...]:
        return tuple(tuple(Fraction(int(v.p), int(v.q)) for v in mat.row(i)) for i in range(mat.rows))

    return Transforms(m, r, exact(at), exact(g), exact(bt))


def winograd_conv2d(x: np.ndarray, w: np.ndarray, m: int, dtype: str = "float32", groups: int = 1) -> np.ndarray:
    """A stride-1 convolution without padding (``x``: C×H×W, ``w``: K×(C/groups)×r×r) by F(m×m, r×r), every
    stage in ``dtype`` (float32, float16): the numbers a kernel in that type computes. The output is
    K×(H−r+1)×(W−r+1); the input is padded at the bottom right to whole tiles and the extra outputs dropped. A
    grouped convolution (a depthwise one: ``groups`` = C) is one Winograd convolution a group."""
    at, g, bt = (a.astype(dtype) for a in transforms(m, w.shape[-1]).arrays())
    return _grouped(x, w, groups, lambda xg, wg: _tiled(xg, wg, m, at, g, bt, dtype))


def winograd_conv2d_int8(x: np.ndarray, w: np.ndarray, m: int, groups: int = 1) -> np.ndarray:
    """The same convolution of int8 ``x`` and ``w`` in integers, exactly: weights transformed with L·G
    (``Transforms.weight_scale``) and the output with L'·Aᵀ (``output_scale``), every stage in int64, the
    output divided by (L·L')² at the end (exact).
    ``integer_bits`` gives the width each stage actually needs."""
    t = transforms(m, w.shape[-1])
    scale = t.weight_scale * t.output_scale
    at, g, bt = (np.array([[int(v * f) for v in row] for row in mat], dtype=np.int64)
                 for mat, f in ((t.AT, t.output_scale), (t.G, t.weight_scale), (t.BT, 1)))
    y = _grouped(x, w, groups, lambda xg, wg: _tiled(xg, wg, m, at, g, bt, "int64"))
    assert not (y % (scale * scale)).any()  # L² divides every output: the integer pipeline is exact
    return y // (scale * scale)


def _grouped(x: np.ndarray, w: np.ndarray, groups: int, conv) -> np.ndarray:
    """``conv`` on each group's input channels and filters, the outputs side by side."""
    if groups == 1:
        return conv(x, w)
    per_in, per_out = x.shape[0] // groups, w.shape[0] // groups
    return np.concatenate([conv(x[i * per_in:(i + 1) * per_in], w[i * per_out:(i + 1) * per_out])
                           for i in range(groups)])


def _tiled(x: np.ndarray, w: np.ndarray, m: int, at: np.ndarray, g: np.ndarray, bt: np.ndarray,
           dtype: str) -> np.ndarray:
    """Aᵀ [Σ_c (G g Gᵀ) ⊙ (Bᵀ d B)] A over the input's m-strided α×α tiles, each stage rounded to ``dtype``;
    the output cropped to the convolution's."""
    K, C, r, _ = w.shape
    alpha = m + r - 1
    out_h, out_w = x.shape[1] - r + 1, x.shape[2] - r + 1
    tiles_h, tiles_w = ceil(out_h / m), ceil(out_w / m)
    padded = np.zeros((C, tiles_h * m + r - 1, tiles_w * m + r - 1), dtype=dtype)
    padded[:, : x.shape[1], : x.shape[2]] = x
    # the input's tiles, overlapping by r − 1: C × tiles_h × tiles_w × α × α
    d = np.lib.stride_tricks.sliding_window_view(padded, (alpha, alpha), axis=(1, 2))[:, ::m, ::m]
    u = np.einsum("ai,kcij,bj->kcab", g, w.astype(dtype), g).astype(dtype)  # G g Gᵀ: K × C × α × α
    v = np.einsum("ai,cxyij,bj->cxyab", bt, d, bt).astype(dtype)  # Bᵀ d B
    mm = np.einsum("kcab,cxyab->kxyab", u, v).astype(dtype)  # the channel sum, element by element
    y = np.einsum("ia,kxyab,jb->kxiyj", at, mm, at).astype(dtype)  # Aᵀ M A, tiles laid side by side
    return y.reshape(K, tiles_h * m, tiles_w * m)[:, :out_h, :out_w]


@dataclass(frozen=True)
class IntegerBits:
    """Signed bits each stage of an int8 F(m×m, r×r) needs at most, for ``channels`` input channels."""

    input_transform: int  # Bᵀ d B
    weight_transform: int  # (L·G) g (L·G)ᵀ
    channel_sum: int  # Σ_c U ⊙ V
    output_transform: int  # (L'·Aᵀ) M (L'·A), before the division by (L·L')²

    def types(self) -> dict[str, str]:
        """The narrowest C integer type holding each stage."""
        def kind(bits: int) -> str:
            return next(f"int{w}" for w in (8, 16, 32, 64) if bits <= w) if bits <= 64 else f"{bits} bits"

        return {stage: kind(bits) for stage, bits in vars(self).items()}


def integer_bits(m: int, r: int, channels: int, input_bits: int = 8, weight_bits: int = 8) -> IntegerBits:
    """The worst-case widths of an int8 pipeline: each transform grows a value by the largest absolute row
    sum of its matrix, once per side; the channel sum by the number of channels."""
    t = transforms(m, r)
    scale = t.weight_scale

    def growth(mat: tuple[tuple[Fraction, ...], ...], factor: int = 1) -> int:
        return max(sum(abs(v * factor) for v in row) for row in mat)

    def bits(magnitude: float) -> int:  # signed bits holding every integer of |value| <= magnitude
        return ceil(log2(magnitude + 1)) + 1

    largest_input, largest_weight = 2 ** (input_bits - 1), 2 ** (weight_bits - 1)
    v = largest_input * growth(t.BT) ** 2
    u = largest_weight * growth(t.G, scale) ** 2
    total = channels * u * v
    y = total * growth(t.AT, t.output_scale) ** 2
    return IntegerBits(bits(v), bits(u), bits(total), bits(y))


#: the largest error relative to the output's magnitude a Winograd kernel may add, per data type: what the
#: tool's checks accept of a direct kernel (float32: 1e-3 against the reference; float16: its 10 mantissa
#: bits over a channel sum, 1e-2)
TOLERANCE = {"float32": 1e-3, "float16": 1e-2}


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """The largest error of ``got`` against ``want``, relative to the output's largest magnitude."""
    want = np.asarray(want, dtype=np.float64)
    if not want.size:
        return 0.0
    scale = float(np.abs(want).max())
    error = float(np.abs(np.asarray(got, dtype=np.float64) - want).max())
    return error / scale if scale else error


def result_problem(got: np.ndarray, want: np.ndarray, dtype: str, winograd: bool = False) -> str | None:
    """What is wrong with a kernel's output ``got`` against the reference ``want`` (None: nothing): every check of
    a built kernel asks this. A direct kernel (and an int8 Winograd, exact) agrees element by element within 1e-3,
    relative or absolute. A floating-point Winograd kernel's error is judged as ``refused`` judged its tile: relative
    to the output's largest magnitude, within ``TOLERANCE``. Element by element it would fail where the tile was
    offered: F(4×4, 3×3) over YOLO-v1 C13's 1,024 channels errs by 2.7e-3 at outputs near zero, 1.9e-5 of the
    largest (an H200 refused every such kernel, bench/data/gpu_winograd_h200.log)."""
    if winograd and dtype in TOLERANCE:
        error = relative_error(got, want)
        if error > TOLERANCE[dtype]:
            return (f"errs by {error:.1e} of the output's largest magnitude, beyond the {TOLERANCE[dtype]:.0e} "
                    f"a Winograd tile is offered within")
        return None
    if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
        return "differs from the reference"
    return None


def measured_error(m: int, r: int = 3, dtype: str = "float32", channels: int = 64, size: int = 14,
                   seed: int = 0) -> float:
    """The largest error of F(m×m, r×r) in ``dtype`` against direct convolution in float64, relative to the
    output's largest magnitude, on normal random data (inputs and weights as a trained layer's: unit scale
    inputs, weights of variance 1/(C·r²))."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((channels, size, size))
    w = rng.standard_normal((8, channels, r, r)) / np.sqrt(channels * r * r)
    want = direct_conv2d(x, w)
    return relative_error(winograd_conv2d(x.astype(dtype), w.astype(dtype), m, dtype), want)


def direct_conv2d(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The reference: a stride-1 correlation without padding, in float64."""
    r = w.shape[-1]
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (r, r), axis=(1, 2))
    return np.einsum("cxyij,kcij->kxy", windows, w.astype(np.float64))


def refused(m: int, r: int, dtype: str, channels: int = 64) -> str | None:
    """Why F(m×m, r×r) is not offered in ``dtype`` (its error beyond ``TOLERANCE``), or None where it is.
    int8 is exact in integers as wide as ``integer_bits`` says: refused where that is wider than int64."""
    if dtype == "int8":
        bits = integer_bits(m, r, channels)
        if bits.output_transform > 64:
            return (f"F({m}×{m}, {r}×{r}) in int8 needs {bits.output_transform}-bit integers in its output "
                    f"transform over {channels} channels, beyond int64")
        return None
    if dtype not in TOLERANCE:
        return f"Winograd is offered in {', '.join(TOLERANCE)} and int8, not {dtype}"
    error = measured_error(m, r, dtype, channels)
    if error > TOLERANCE[dtype]:
        return (f"F({m}×{m}, {r}×{r}) in {dtype} errs by {error:.1e} of the output's magnitude over {channels} "
                f"channels, beyond the {TOLERANCE[dtype]:.0e} a kernel may")
    return None


@operator(E=Param(36, help="α², the points of a tile"), P=Param(49, help="tiles"), C=Param(256, help="input channels"),
          K=Param(512, help="output channels"), weights=("U",),
          reference=lambda p, v, u: np.matmul(v.astype(np.float64), u.astype(np.float64)))
def winograd_product(E, P, C, K):
    """Winograd's batched product M[e,p,k] = V[e,p,c] * U[e,c,k]: each of the α² points a matrix product over
    the input channels (``gpu_cpu/winograd.py`` runs the transforms around it)."""
    from tvm import te

    V = te.placeholder((E, P, C), name="V")
    U = te.placeholder((E, C, K), name="U")
    return [V, U, batched_product(V, U)]


@operator(E=Param(16, help="α², the points of a tile"), P=Param(196, help="tiles"), G=Param(32, help="groups"),
          C=Param(4, help="input channels a group"), K=Param(4, help="output channels a group"), weights=("U",),
          reference=lambda p, v, u: np.einsum("epgc,egck->epgk", v.astype(np.float64), u.astype(np.float64)))
def winograd_group_product(E, P, G, C, K):
    """A grouped convolution's batched product M[e,p,g,k] = V[e,p,g,c] * U[e,g,c,k]: at each of the α² points a
    matrix product a group; a depthwise convolution's (C = K = 1) is a product a channel, no sum."""
    from tvm import te

    V = te.placeholder((E, P, G, C), name="V")
    U = te.placeholder((E, G, C, K), name="U")
    return [V, U, batched_product(V, U)]


def batched_product(V, U):
    """M = V · U at each point (and group): loops e, p[, g], k, c, the product alone (``winograd_product``,
    ``winograd_group_product``) or inside the convolution's function, where the product's CPU point names
    these loops."""
    from tvm import te

    C = int(V.shape[-1])
    c = te.reduce_axis((0, C), name="c")
    if len(V.shape) == 4:
        E, P, G, _ = (int(d) for d in V.shape)
        return te.compute((E, P, G, int(U.shape[3])), lambda e, p, g, k: te.sum(V[e, p, g, c] * U[e, g, c, k], axis=c),
                          name="M")
    E, P, _ = (int(d) for d in V.shape)
    return te.compute((E, P, int(U.shape[2])), lambda e, p, k: te.sum(V[e, p, c] * U[e, c, k], axis=c), name="M")
