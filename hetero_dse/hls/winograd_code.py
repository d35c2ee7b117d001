"""The Winograd engine's two transforms as C++ (``hls_templates/network/kernel.cpp.j2`` includes them): Bᵀ d B
of one input lane's α×α patch and Aᵀ M A of one output lane's sums, written from the exact matrices of
``hetero_dse/ops/winograd.py`` as one binary operation a statement, each bound to a fabric core, so that the
lint counts in the code what ``cost_models/fpga_winograd.transform_ops`` charges: a 1-D transform is, for each
output element, its first non-zero term, then an add or subtract a further term, a term whose coefficient is not
±1 first multiplied by it (floating point only: the integer engine's coefficients are ±1, and ±2 in its weight
transform G' = S·2G, written as a multiply by a power of two, which Vitis builds as wires: no operator). An
integer combination whose every coefficient is negative would be a negation, an adder: refused (the integer
matrices are signed so that none is, ``fpga_winograd.integer_weight_transform``).
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["transform_functions"]


class _Writer:
    def __init__(self, ctype: str, floating: bool) -> None:
        self.ctype, self.floating, self.lines, self.count = ctype, floating, [], 0

    def _bind(self, name: str, op: str) -> None:
        core = {"add": "fadd", "sub": "fsub", "mul": "fmul"}[op] if self.floating else op
        self.lines.append(f"  #pragma HLS BIND_OP variable={name} op={core} impl=fabric")

    def value(self, expr: str, op: str | None) -> str:
        self.count += 1
        name = f"s{self.count}"
        self.lines.append(f"  const {self.ctype} {name} = {expr};")
        if op is not None:
            self._bind(name, op)
        return name

    def combination(self, terms: list[tuple[Fraction, str]]) -> str:
        """Σ c·x as binary operations; returns the C expression of the result (a name, or a source unchanged)."""
        terms = sorted(terms, key=lambda t: t[0] < 0)  # a positive term first: no negation where one is
        scaled = []
        for c, x in terms:
            if abs(c) != 1 and not self.floating:
                shift = abs(c).numerator.bit_length() - 1
                if abs(c) != 2 ** shift:
                    raise ValueError(f"the integer engine's transforms take coefficients ±2^k, not {c}")
                # a power of two: a shift, wires (a multiply, not <<, whose negative operand C++14 leaves undefined)
                x = f"({x} * {2 ** shift})"
            elif abs(c) != 1:
                x = self.value(f"({self.ctype}){float(abs(c))!r}f * {x}", "mul")
            scaled.append((1 if c > 0 else -1, x))
        sign, acc = scaled[0]
        if sign < 0:  # every coefficient negative: a sign flip, free in floating point; an adder in integers
            if not self.floating:
                raise ValueError("an integer transform's combination of only negative terms would be a negation (an "
                                 "adder the model does not count): sign the matrix's rows first")
            acc = self.value(f"-{acc}", None)
        for sign, x in scaled[1:]:
            acc = self.value(f"{acc} {'+' if sign > 0 else '-'} {x}", "add" if sign > 0 else "sub")
        return acc


def _transform(name: str, mat: tuple[tuple[Fraction, ...], ...], n_in: int, ctype: str, floating: bool,
               what: str) -> str:
    """``out = mat · x · matᵀ`` for one lane: ``x`` n_in × n_in, ``out`` rows(mat) × rows(mat)."""
    rows = len(mat)
    w = _Writer(ctype, floating)
    # mat · x: down each column of x
    t = [[w.combination([(c, f"x[{k}][{j}]") for k, c in enumerate(mat[i]) if c]) for j in range(n_in)]
         for i in range(rows)]
    # (mat · x) · matᵀ: along each row
    outs = []
    for i in range(rows):
        for j in range(rows):
            res = w.combination([(c, t[i][k]) for k, c in enumerate(mat[j]) if c])
            outs.append(f"  y[{i}][{j}] = {res};")
    head = [f"// {what}: one lane, {sum('BIND_OP' in line and 'mul' not in line for line in w.lines)} adds and "
            f"{sum('BIND_OP' in line and 'mul' in line for line in w.lines)} multiplies, each on the fabric",
            f"static void {name}(const {ctype} x[{n_in}][{n_in}], {ctype} y[{rows}][{rows}]) {{",
            "  #pragma HLS INLINE"]
    return "\n".join([*head, *w.lines, *outs, "}"])


def transform_functions(m: int, dtype: str) -> str:
    """``wino_in_transform`` (Bᵀ d B) and ``wino_out_transform`` (Aᵀ M A) of F(m×m, 3×3) in ``dtype``'s types
    (float32: float; int8: the input's in int16, the output's in int64); in int8 also ``wino_w_transform``, a
    lane's weights G' g G'ᵀ in int16 (``fpga_winograd.integer_weight_transform``: G' = S·L·G, integers, and the
    output transform Aᵀ·S that takes S back)."""
    from cost_models.fpga_winograd import integer_weight_transform
    from hetero_dse.ops.winograd import transforms

    t = transforms(m, 3)
    floating = dtype != "int8"
    tr, y = ("float", "float") if floating else ("short", "long long")
    at = t.AT
    if not floating:
        g, signs = integer_weight_transform(m)
        at = tuple(tuple(v * s for v, s in zip(row, signs, strict=True)) for row in t.AT)
    parts = [_transform("wino_in_transform", t.BT, t.alpha, tr, floating, "Bᵀ d B of a patch"),
             _transform("wino_out_transform", at, t.alpha, y, floating,
                        "Aᵀ M A of a patch's sums" if floating else "Aᵀ S M S A of a patch's sums")]
    if not floating:
        parts.append(_transform("wino_w_transform", g, 3, "short", False,
                                f"G' g G'ᵀ of a lane's taps (G' = S·{t.weight_scale}G, S a sign a row)"))
    return "\n\n".join(parts)
