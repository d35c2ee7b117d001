"""How the FPGA Winograd engine computes a 1-D transform y = T·x: the sums its outputs share first, then each output
(``hls/winograd_code.py`` writes the plan, ``fpga_winograd`` counts it: one source for both).

A Winograd matrix evaluates a polynomial at points that come in pairs ±a, so its rows or columns come in pairs too
(Lavin and Gray's transforms are written this way by hand):

* two rows u + v and u − v (Bᵀ's and G's rows for the points ±a): u and v are computed once, then each row is one
  add (F(4×4)'s Bᵀ rows [0, 4, 4, −1, −1, 0] and [0, 4, −4, −1, 1, 0]: u = 4x₁ − x₃, v = 4x₂ − x₄; 4 adds, not 6);
* two columns k, l whose coefficients agree in size on every row (Aᵀ's columns for ±a): x_k + x_l and x_k − x_l
  once, then each row takes one of them, one term fewer (F(4×4)'s Aᵀ: 10 adds a column, not 14).

A pairing is kept only where it saves operations; F(2×2)'s Bᵀ and Aᵀ have none to save (their plan is the matrix as
it is), its integer weight transform G' = ±2G one add a column. A term is a coefficient and an operand: an input,
or a shared sum. A coefficient other than ±1 is a constant multiply, but in integers a power of two is a shift
(wires); an integer multiply by another constant is written as one, bound to the fabric, where Vivado builds it of
adders, one for each non-zero digit of the constant's canonical signed-digit form past the first (``csd_digits``:
5, 6, 24 one each). Written as shifted terms summed instead, LLVM folds them back into that multiply anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache

__all__ = ["Plan", "csd_digits", "is_multiply", "transform_plan"]

Matrix = tuple[tuple[Fraction, ...], ...]
#: a coefficient and its operand: an input index below ``Plan.inputs``, a shared sum's at and above it
Term = tuple[Fraction, int]


def csd_digits(n: int) -> int:
    """Non-zero digits of ``n``'s canonical signed-digit form (no two adjacent): the adders a constant multiplier on
    the fabric takes, one fewer (0x38E38E39, 9's inverse modulo 2^32: 11 digits). An upper bound: a factored form
    may take fewer (45 = 5·9, two adds where its digits take three); *estimate* until a csynth report has one."""
    n, digits = abs(n), 0
    while n:
        if n & 1:
            digits += 1
            n -= 2 - (n & 3)  # a digit of ±1: −1 where the next bit is set too (…11 → a carry)
        n >>= 1
    return digits


def is_multiply(c: Fraction, integer: bool) -> bool:
    """Whether a coefficient is a constant multiply: other than ±1, and in integers other than a power of two (a
    shift: wires). An integer engine's coefficient must be an integer."""
    if integer and c.denominator != 1:
        raise ValueError(f"the integer engine's transforms take integer coefficients, not {c}")
    n = abs(c.numerator)
    return abs(c) != 1 and not (integer and n & (n - 1) == 0)


@dataclass(frozen=True)
class Plan:
    """A 1-D transform's operations: ``shared`` sums of inputs, computed first, then ``rows``, one an output."""

    inputs: int
    shared: tuple[tuple[Term, ...], ...]
    rows: tuple[tuple[Term, ...], ...]
    integer: bool

    def _combinations(self) -> tuple[tuple[Term, ...], ...]:
        return self.shared + self.rows

    @property
    def adds(self) -> int:
        """Adds or subtracts: a term past each combination's first."""
        return sum(max(0, len(c) - 1) for c in self._combinations())

    def _scaled(self, c: Fraction) -> bool:
        return is_multiply(c, self.integer)

    def _products(self) -> set[tuple[Fraction, int]]:
        """The constant multiplies: (|coefficient|, operand) of each term whose coefficient is not ±1 (in integers,
        not a power of two), once each however many combinations take it (the code computes it once; a compiler
        would merge the copies anyway), its sign taken by the add or subtract that uses it."""
        return {(abs(c), k) for comb in self._combinations() for c, k in comb if self._scaled(c)}

    @property
    def muls(self) -> int:
        """Constant multiplies: a coefficient other than ±1 (in integers, other than a power of two) times an
        operand, once each."""
        return len(self._products())

    @property
    def mul_adds(self) -> int:
        """The fabric adders of the integer constant multiplies (``csd_digits`` less one each; 0 in floating
        point, whose multiplies are cores of their own)."""
        if not self.integer:
            return 0
        return sum(csd_digits(c.numerator) - 1 for c, _ in self._products())

    @property
    def mul_stages(self) -> int:
        """An integer constant multiply's adds one after another, at most (a tree of its digits)."""
        digits = [csd_digits(c.numerator) for c, _ in self._products()]
        return max(((d - 1).bit_length() for d in digits), default=0)

    def depth(self, add: int, mul: int) -> int:
        """Stages of the longest chain: an operand's own, then a multiply where a coefficient needs one, then an
        add a term past the first (the code chains a combination's terms one after another)."""
        ready = [0] * self.inputs
        deepest = 0
        for i, comb in enumerate(self._combinations()):
            scaled = any(self._scaled(c) for c, _ in comb)
            d = max(ready[k] for _, k in comb) + (mul if scaled else 0) + (len(comb) - 1) * add
            if i < len(self.shared):
                ready.append(d)
            deepest = max(deepest, d)
        return deepest


def _valid(plan: Plan) -> bool:
    """In integers no combination may be all negative: a negation is an adder the count does not hold."""
    return not plan.integer or all(any(c > 0 for c, _ in comb) for comb in plan._combinations())


def _cost(plan: Plan) -> int:
    """Operations to weigh plans by: adds, and each constant multiply (in integers, by its adders)."""
    return plan.adds + (plan.mul_adds if plan.integer else plan.muls)


def _plain(mat: Matrix, integer: bool) -> Plan:
    return Plan(len(mat[0]), (), tuple(tuple((c, k) for k, c in enumerate(row) if c) for row in mat), integer)


def _paired_rows(mat: Matrix, integer: bool) -> Plan:
    """Rows u + v and u − v (greedily, in order): u and v once, then an add each."""
    n = len(mat[0])
    shared: list[tuple[Term, ...]] = []
    rows: list[tuple[Term, ...] | None] = [None] * len(mat)
    for i, ri in enumerate(mat):
        for j in range(i + 1, len(mat)):
            rj = mat[j]
            if rows[i] is not None or rows[j] is not None or any(
                    bool(a) != bool(b) or abs(a) != abs(b) for a, b in zip(ri, rj, strict=True)):
                continue
            u = [(a, k) for k, (a, b) in enumerate(zip(ri, rj, strict=True)) if a and a == b]
            v = [(a, k) for k, (a, b) in enumerate(zip(ri, rj, strict=True)) if a and a == -b]
            if not u or not v:
                continue
            # a single term stays as it is; more are a shared sum
            local = [tuple(t) for t in (u, v) if len(t) > 1]
            index = iter(range(n + len(shared), n + len(shared) + len(local)))
            pu, pv = ((t[0] if len(t) == 1 else (Fraction(1), next(index))) for t in (u, v))
            pair = Plan(n, tuple(local), ((pu, pv), (pu, (-pv[0], pv[1]))), integer)
            if _valid(pair) and _cost(pair) < _cost(_plain((ri, rj), integer)):
                shared += local
                rows[i], rows[j] = pair.rows
        if rows[i] is None:
            rows[i] = tuple((c, k) for k, c in enumerate(ri) if c)
    return Plan(n, tuple(shared), tuple(rows), integer)  # type: ignore[arg-type]


def _paired_columns(mat: Matrix, integer: bool) -> Plan:
    """Columns k, l of one size on every row (greedily, in order): x_k + x_l and x_k − x_l once, then a row takes
    one of them where it took both."""
    n = len(mat[0])
    shared: list[tuple[Term, ...]] = []
    rows = [{k: c for k, c in enumerate(row) if c} for row in mat]
    taken: set[int] = set()
    for k in range(n):
        for line in range(k + 1, n):
            if k in taken or line in taken:
                continue
            col_k, col_l = [row[k] for row in mat], [row[line] for row in mat]
            if any(bool(a) != bool(b) or abs(a) != abs(b) for a, b in zip(col_k, col_l, strict=True)):
                continue
            users = [i for i, a in enumerate(col_k) if a]
            plus = [i for i in users if col_k[i] == col_l[i]]
            minus = [i for i in users if col_k[i] == -col_l[i]]
            if len(users) - bool(plus) - bool(minus) <= 0:
                continue
            trial = [dict(r) for r in rows]
            new_shared = list(shared)
            for group, sign in ((plus, 1), (minus, -1)):
                if not group:
                    continue
                new_shared.append(((Fraction(1), k), (Fraction(sign), line)))
                index = n + len(new_shared) - 1
                for i in group:
                    c = trial[i].pop(k)
                    trial[i].pop(line)
                    trial[i][index] = c
            plan = Plan(n, tuple(new_shared), tuple(tuple((c, o) for o, c in r.items()) for r in trial), integer)
            if _valid(plan):
                rows, shared = trial, new_shared
                taken |= {k, line}
    return Plan(n, tuple(shared), tuple(tuple((c, o) for o, c in r.items()) for r in rows), integer)


@cache
def transform_plan(mat: Matrix, integer: bool) -> Plan:
    """The plan of fewest operations among the matrix as it is, its rows paired and its columns paired (the
    matrix as it is where none saves)."""
    plans = [_plain(mat, integer), _paired_rows(mat, integer), _paired_columns(mat, integer)]
    return min((p for p in plans if _valid(p)), key=_cost)
