"""The Winograd engine's two transforms as C++ (``hls_templates/network/kernel.cpp.j2`` includes them): Bᵀ d B
of one input lane's α×α patch and Aᵀ M A of one output lane's sums, written from the exact matrices of
``hetero_dse/ops/winograd.py`` as one binary operation a statement, each bound to a fabric core, so that the
lint counts in the code what ``cost_models/fpga_winograd.transform_ops`` charges: a 1-D transform is its plan
(``cost_models/winograd_plan.py``: the sums its outputs share, then each output), each combination its first
term, then an add or subtract a further term, a term whose coefficient is not ±1 first multiplied by it in
floating point; in integers a coefficient is its powers of two, a term each, each
written as a multiply by a power of two, which Vitis builds as wires: no operator (F(4×4)'s 5x is x·4 + x). An
integer combination whose every coefficient is negative would be a negation, an adder: refused (the integer
matrices are signed so that none is, ``fpga_winograd.integer_weight_transform``). The int8 F(4×4) engine's exact
division by 9 is a constant multiply bound to the fabric the same way: ``wino_divide``.
"""

from __future__ import annotations

from fractions import Fraction

from cost_models.winograd_plan import Plan, is_multiply, transform_plan

__all__ = ["transform_functions"]


class _Writer:
    def __init__(self, ctype: str, floating: bool, impl: str = "fabric") -> None:
        self.ctype, self.floating, self.impl, self.lines, self.count = ctype, floating, impl, [], 0
        self.products: dict[tuple[Fraction, str], str] = {}  # each constant multiply once: (|c|, operand) -> name

    def _bind(self, name: str, op: str) -> None:
        core = {"add": "fadd", "sub": "fsub", "mul": "fmul"}[op] if self.floating else op
        self.lines.append(f"  #pragma HLS BIND_OP variable={name} op={core} impl={self.impl}")

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
            sign = 1 if c > 0 else -1
            n = abs(c)
            if is_multiply(c, not self.floating):  # a constant multiply on the fabric (integers: Vivado's adders),
                # once for every combination that takes it (as the model counts it)
                if (n, x) not in self.products:
                    self.products[n, x] = self.value(
                        f"({self.ctype}){float(n)!r}f * {x}" if self.floating else f"{x} * {n.numerator}", "mul")
                x = self.products[n, x]
            elif n != 1:  # an integer power of two: a shift, wires (a multiply, not <<, whose negative operand
                # C++14 leaves undefined)
                x = f"({x} * {n.numerator})"
            scaled.append((sign, x))
        sign, acc = scaled[0]
        if sign < 0:  # every coefficient negative: a sign flip, free in floating point; an adder in integers
            if not self.floating:
                raise ValueError("an integer transform's combination of only negative terms would be a negation (an "
                                 "adder the model does not count): sign the matrix's rows first")
            acc = self.value(f"-{acc}", None)
        for sign, x in scaled[1:]:
            acc = self.value(f"{acc} {'+' if sign > 0 else '-'} {x}", "add" if sign > 0 else "sub")
        return acc


def _apply(w: _Writer, plan: Plan, inputs: list[str]) -> list[str]:
    """One 1-D pass by ``plan``: its shared sums, then its outputs; returns each output's C expression."""
    operands = list(inputs)
    for comb in plan.shared:
        operands.append(w.combination([(c, operands[k]) for c, k in comb]))
    return [w.combination([(c, operands[k]) for c, k in comb]) for comb in plan.rows]


def _transform(name: str, mat: tuple[tuple[Fraction, ...], ...], n_in: int, ctype: str, floating: bool,
               what: str, impl: str = "fabric") -> str:
    """``out = mat · x · matᵀ`` for one lane: ``x`` n_in × n_in, ``out`` rows(mat) × rows(mat); each 1-D pass by
    the matrix's plan (``winograd_plan.transform_plan``), the one the model counts; each operation bound to
    ``impl`` (a float transform's cores may be DSPs: ``EngineShape.transform_dsp``)."""
    rows = len(mat)
    plan = transform_plan(mat, not floating)
    w = _Writer(ctype, floating, impl)
    # mat · x: down each column of x
    cols = [_apply(w, plan, [f"x[{k}][{j}]" for k in range(n_in)]) for j in range(n_in)]
    t = [[cols[j][i] for j in range(n_in)] for i in range(rows)]
    # (mat · x) · matᵀ: along each row
    outs = []
    for i in range(rows):
        for j, res in enumerate(_apply(w, plan, t[i])):
            outs.append(f"  y[{i}][{j}] = {res};")
    head = [f"// {what}: one lane, {sum('BIND_OP' in line and 'mul' not in line for line in w.lines)} adds and "
            f"{sum('BIND_OP' in line and 'mul' in line for line in w.lines)} multiplies, each on "
            + ("the fabric" if impl == "fabric" else "DSPs"),
            f"static void {name}(const {ctype} x[{n_in}][{n_in}], {ctype} y[{rows}][{rows}]) {{",
            "  #pragma HLS INLINE"]
    return "\n".join([*head, *w.lines, *outs, "}"])


def _divide(m: int) -> str | None:
    """``wino_divide``: an output lane's x = d·y (modulo 2^32) to y, times d's inverse modulo 2^32, one constant
    multiply on the fabric (``fpga_winograd.exact_division``); None where the division is a shift alone."""
    from cost_models.fpga_winograd import divide_adds, exact_division

    inverse = exact_division(m)[1]
    if inverse is None:
        return None
    odd = pow(inverse, -1, 1 << 32)
    return "\n".join([
        f"// y = x / {odd}, exact (x is {odd}·y modulo 2^32): x times {odd}'s inverse modulo 2^32, a constant "
        f"multiply on the fabric ({divide_adds(m)} adders)",
        "static acc_t wino_divide(const acc_t x) {", "  #pragma HLS INLINE",
        f"  const unsigned s1 = (unsigned)x * {inverse}u;  // modulo 2^32: unsigned arithmetic wraps",
        "  #pragma HLS BIND_OP variable=s1 op=mul impl=fabric",
        "  return (acc_t)s1;", "}"])


def transform_functions(m: int, dtype: str, dsp: bool = False) -> str:
    """``wino_in_transform`` (Bᵀ d B) and ``wino_out_transform`` (Aᵀ M A) of F(m×m, 3×3) in the engine's types
    (``wino_tr_t``, ``wino_y_t``: float32 float; int8 ``fpga_winograd.integer_types``); in int8 also
    ``wino_w_transform``, a lane's weights G' g G'ᵀ in ``wino_u_t`` (``fpga_winograd.integer_weight_transform``:
    G' = S·L·G, integers, and the output transform Aᵀ·S that takes S back), and where the output's divisor is
    not a power of two, ``wino_divide``; ``dsp``: a float engine's two transforms on DSP cores (``fulldsp``) where
    else on the fabric."""
    from cost_models.fpga_winograd import integer_weight_transform, output_matrix, transform_impl
    from hetero_dse.ops.winograd import transforms

    t = transforms(m, 3)
    floating = dtype != "int8"
    at = output_matrix(m, dtype)
    if not floating:
        g, _ = integer_weight_transform(m)
    impl = transform_impl(dsp, dtype)
    parts = [_transform("wino_in_transform", t.BT, t.alpha, "wino_tr_t", floating, "Bᵀ d B of a patch", impl),
             _transform("wino_out_transform", at, t.alpha, "wino_y_t", floating,
                        "Aᵀ M A of a patch's sums" if floating else "Aᵀ S M S A of a patch's sums", impl)]
    if not floating:
        parts.append(_transform("wino_w_transform", g, 3, "wino_u_t", False,
                                f"G' g G'ᵀ of a lane's taps (G' = S·{t.weight_scale}G, S a sign a row)"))
        divide = _divide(m)
        if divide:
            parts.append(divide)
    return "\n\n".join(parts)
