"""The operator frontend: ``@operator`` marks a TVM tensor-expression builder with its shape parameters.

An :class:`OperatorDef` is the marked builder (parameters, defaults, named shape sets, an optional
numerical reference); :meth:`OperatorDef.instantiate` runs it for concrete parameter values and returns
an :class:`Operator`: the input placeholders, the one output tensor and a stable signature that keys the
history database. The parameters themselves (:class:`Param`, :class:`ShapeSet`) are declared in
``hetero_dse.operator_params``.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from hetero_dse.errors import HeteroDSEError, OperatorError, ShapeError
from hetero_dse.guard import time_limit
from hetero_dse.operator_params import Param, ParamValue, ShapeSet, as_param


def numpy_dtype(name: str) -> np.dtype:
    """The numpy type of a TVM type name: bfloat16 is ml_dtypes' (numpy has none; TVM converts that one)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def nbytes(tensor: Any) -> int:
    """Bytes of a TE tensor's whole array."""
    return math.prod(int(d) for d in tensor.shape) * numpy_dtype(str(tensor.dtype)).itemsize


#: seconds an operator's builder may take (a TE builder takes milliseconds; more is a loop that never ends)
BUILD_TIMEOUT_S = 60

#: what an operator or shape name may hold: it names directories and appears in generated C++ comments, so
#: it is data, never a path (``..``) or code (a newline)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.+-]*")


def check_name(name: str, what: str) -> str:
    """``name`` if it is a name (:data:`NAME`), else one sentence saying what a name may hold."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise OperatorError(f"{what} must start with a letter or _ and hold only letters, digits and _ . + -; "
                            f"got {name!r}")
    return name


class OperatorDef:
    """A marked builder of a tensor-expression operator. Made by :func:`operator`."""

    def __init__(
        self,
        builder: Callable[..., Any],
        name: str,
        params: Mapping[str, Param],
        description: str = "",
        shape_sets: Iterable[ShapeSet] = (),
        reference: Callable[..., np.ndarray] | None = None,
        origin: str = "built-in",
        weights: Iterable[str] = (),
    ) -> None:
        self.builder = builder
        self.name = check_name(name, "an operator name")
        self.params = MappingProxyType(dict(params))
        self.description = description
        self.shape_sets = MappingProxyType({check_name(s.name, f"operator {name}'s shape set name"): s
                                            for s in shape_sets})
        for s in self.shape_sets.values():
            for shape in s.shapes:
                check_name(shape, f"a shape name of {name}'s set {s.name}")
        self.reference = reference
        self.origin = origin
        self.weights = tuple(weights)

    def __repr__(self) -> str:
        return f"OperatorDef({self.name!r}, params={list(self.params)})"

    def defaults(self) -> dict[str, ParamValue]:
        return {name: p.default for name, p in self.params.items()}

    def resolve_params(self, overrides: Mapping[str, Any] | None = None,
                       base: Mapping[str, Any] | None = None) -> dict[str, ParamValue]:
        """Merge defaults, a named shape (``base``) and user overrides, checking every value.

        Raises:
            ShapeError: an unknown parameter name, or a value of the wrong type or range.
        """
        values: dict[str, ParamValue] = self.defaults()
        for source in (base or {}, overrides or {}):
            for key, raw in source.items():
                if key not in self.params:
                    known = ", ".join(self.params) or "none"
                    raise ShapeError(f"operator {self.name} has no parameter {key!r}; its parameters are: {known}")
                values[key] = self.params[key].parse(key, raw, f"operator {self.name}")
        return values

    def shapes(self, spec: str) -> list[tuple[str, dict[str, ParamValue]]]:
        """Resolve ``SET`` (every shape of the set) or ``SET:NAME`` (one shape) to named parameter dicts."""
        set_name, _, shape_name = spec.partition(":")
        if set_name not in self.shape_sets:
            known = ", ".join(self.shape_sets) or "none"
            raise ShapeError(f"operator {self.name} has no shape set {set_name!r}; its shape sets are: {known}")
        shape_set = self.shape_sets[set_name]
        if not shape_name:
            return [(f"{set_name}:{n}", dict(p)) for n, p in shape_set.shapes.items()]
        if shape_name not in shape_set.shapes:
            known = ", ".join(shape_set.shapes)
            raise ShapeError(f"shape set {set_name} of operator {self.name} has no shape {shape_name!r}; "
                             f"it has: {known}")
        return [(f"{set_name}:{shape_name}", dict(shape_set.shapes[shape_name]))]

    def instantiate(self, overrides: Mapping[str, Any] | None = None, *, shape: str | None = None) -> Operator:
        """Build the operator for concrete parameters.

        Args:
            overrides: parameter values given by the user (strings are parsed).
            shape: a ``SET:NAME`` shape whose parameters are applied before the overrides.

        Raises:
            ShapeError: bad parameters or shape name.
            OperatorError: the builder raised, or returned something other than tensors.
        """
        base: Mapping[str, Any] = {}
        if shape is not None:
            matches = self.shapes(shape)
            if len(matches) != 1:
                raise ShapeError(f"shape {shape!r} names a whole set; pick one shape, e.g. {matches[0][0]}")
            shape, base = matches[0]
        params = self.resolve_params(overrides, base)
        if shape is not None:  # the shape a user changed is no longer that shape: its name says how
            shape_params = self.resolve_params(None, base)
            changed = [f"{k}={params[k]}" for k in params if params[k] != shape_params[k]]
            if changed:
                shape = f"{shape}[{','.join(changed)}]"
        try:
            with time_limit(BUILD_TIMEOUT_S, f"operator {self.name} ({self.origin}) did not finish building with "
                                             f"{_fmt_params(params)} in {BUILD_TIMEOUT_S} s"):
                result = self.builder(**params)
        except ShapeError as exc:  # a builder's own shape check: say which operator and shape it was
            raise ShapeError(f"operator {self.name} with {_fmt_params(params)}: {exc}") from exc
        except OperatorError:
            raise
        except SystemExit as exc:
            raise OperatorError(f"operator {self.name} ({self.origin}) called sys.exit({exc.code!r}) while building "
                                f"with {_fmt_params(params)}; raise an exception to refuse a shape") from None
        except Exception as exc:  # the user's code: any failure is reported as a message
            raise OperatorError(f"operator {self.name} ({self.origin}) failed to build with {_fmt_params(params)}: "
                                f"{type(exc).__name__}: {_first_line(exc)}") from exc
        inputs, output = _split_tensors(self.name, result)
        unknown = [w for w in self.weights if w not in [t.op.name for t in inputs]]
        if unknown:
            raise OperatorError(f"operator {self.name} declares weights={list(self.weights)}, but it has no input "
                                f"named {unknown[0]!r} (its inputs: {', '.join(t.op.name for t in inputs)})")
        return Operator(name=self.name, params=MappingProxyType(params), inputs=inputs, output=output,
                        definition=self, shape_name=shape)


@dataclass(frozen=True, eq=False)
class Operator:
    """An operator built for concrete parameters: input placeholders and one output tensor."""

    name: str
    params: Mapping[str, ParamValue]
    inputs: tuple[Any, ...]
    output: Any
    definition: OperatorDef = field(repr=False)
    shape_name: str | None = None
    #: element-wise steps fused after the reduction (``hetero_dse.epilogue``), their inputs last in ``inputs``
    epilogue: tuple[str, ...] = ()
    epilogue_axes: tuple[int, ...] = ()  # the output dimensions a bias step is indexed by
    epilogue_inputs: int = 0
    epilogue_reference: Callable[[np.ndarray, list[np.ndarray]], np.ndarray] | None = field(default=None, repr=False)
    #: the same steps fused after another instance of the operator (``with_dtype``), set by the epilogue: the
    #: operator never imports the module that builds on it
    epilogue_rebuild: Callable[[Operator], Operator] | None = field(default=None, repr=False, compare=False)

    @property
    def tensors(self) -> list[Any]:
        """Inputs then the output, the argument order of the built function."""
        return [*self.inputs, self.output]

    @property
    def tensor_bytes(self) -> int:
        """Bytes of the inputs and the output: what a run of the operator holds in memory."""
        return sum(nbytes(t) for t in self.tensors)

    @property
    def title(self) -> str:
        """The operator as the user named it: ``conv2d yolo:C8[C=179,K=359]``, or its name alone."""
        return f"{self.name} {self.shape_name}" if self.shape_name else self.name

    @property
    def weights(self) -> tuple[str, ...]:
        """The inputs constant at inference (a layer's weights), by name: a CPU kernel may take them in a
        layout of its own, packed once where it is loaded (``gpu_cpu.schedule.weight_layouts``)."""
        return self.definition.weights

    @property
    def slug(self) -> str:
        """A directory name for this operator: its title in characters every file system takes."""
        return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", self.title).strip("_")

    @property
    def dtype(self) -> str:
        """Data type of the inputs (the operands of the arithmetic); the output may be wider."""
        return str(self.inputs[0].dtype)

    def signature(self) -> str:
        """Stable text key: name, every tensor's shape and dtype, and the parameters, e.g. for the history DB."""
        tensors = ",".join(f"{t.op.name}:{'x'.join(str(int(d)) for d in t.shape)}:{t.dtype}" for t in self.tensors)
        fused = f"+{'+'.join(self.epilogue)}" if self.epilogue else ""
        return f"{self.name}[{tensors}]{{{_fmt_params(self.params)}}}{fused}"

    def prim_func(self) -> Any:
        """The TIR PrimFunc of the whole operator with TVM's default (naive) schedule."""
        from tvm import te

        return te.create_prim_func(self.tensors)

    def with_dtype(self, dtype: str) -> Operator:
        """The operator rebuilt for another data type (a fused layer stays fused), or a clear error if it has
        no ``dtype`` parameter allowing it."""
        if dtype == self.dtype:
            return self
        param = self.definition.params.get("dtype")
        if param is None:
            raise HeteroDSEError(f"operator {self.name} cannot use data type {dtype}: it has no 'dtype' parameter "
                                 f"(its inputs are {self.dtype})")
        if param.choices and dtype not in param.choices:
            raise HeteroDSEError(f"operator {self.name} cannot use data type {dtype}: its dtype is one of "
                                 f"{', '.join(map(str, param.choices))}")
        rebuilt = self.definition.instantiate({**dict(self.params), "dtype": dtype})
        if self.epilogue_rebuild is not None:
            rebuilt = self.epilogue_rebuild(rebuilt)
        return dataclasses.replace(rebuilt, shape_name=self.shape_name)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Random inputs with values that keep integer accumulation exact and float error small."""
        rng = np.random.default_rng(seed)
        arrays = []
        for t in self.inputs:
            shape = tuple(int(d) for d in t.shape)
            dtype = str(t.dtype)
            if dtype.startswith("int"):
                bound = {"int8": 8, "int16": 64}.get(dtype, 128)
                arrays.append(rng.integers(-bound, bound, size=shape).astype(dtype))
            else:
                arrays.append(rng.uniform(-1.0, 1.0, size=shape).astype(numpy_dtype(dtype)))
        return arrays

    def reference(self, inputs: list[np.ndarray]) -> np.ndarray | None:
        """The operator's result computed by its library reference (torch or numpy), or None if it has none."""
        if self.definition.reference is None:
            return None
        main = len(inputs) - self.epilogue_inputs
        out = np.asarray(self.definition.reference(dict(self.params), *inputs[:main]))
        if self.epilogue_reference is not None:
            out = np.asarray(self.epilogue_reference(out, list(inputs[main:])))
        return out


def operator(_builder: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None,
             shape_sets: Iterable[ShapeSet] = (), reference: Callable[..., np.ndarray] | None = None,
             weights: Iterable[str] = (), **params: ParamValue | Param) -> Any:
    """Mark a function that builds a tensor-expression operator.

    The function takes the shape parameters as keyword arguments and returns a list of ``tvm.te.Tensor``:
    the input placeholders and one output (TVM's ``create_prim_func`` order). Defaults come from the
    decorator's keyword arguments or from the function's own defaults; integers are shape parameters and
    must be positive unless given as ``Param(default, minimum=0)``.

    Args:
        name: operator name (defaults to the function's name).
        description: one line for ``hetero_dse ops`` (defaults to the docstring's first line).
        shape_sets: named parameter sets.
        reference: ``f(params, *inputs) -> output`` computing the result with numpy or torch.
        weights: the names of the inputs that are constant at inference, a layer's weights (e.g. ``("W",)``):
            the CPU kernel may take them in the layout its loops read, packed once where it is loaded.
        **params: parameter defaults (int, str, or :class:`Param`).
    """

    def mark(builder: Callable[..., Any]) -> OperatorDef:
        op_name = name or builder.__name__
        signature = inspect.signature(builder)
        specs: dict[str, Param] = {}
        for pname, p in signature.parameters.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            given = params.get(pname, p.default)
            if given is inspect.Parameter.empty:
                raise OperatorError(f"operator {op_name}: parameter {pname} has no default; "
                                    f"give one, e.g. @operator({pname}=64)")
            specs[pname] = as_param(pname, given)
        extra = set(params) - set(specs)
        if extra:
            raise OperatorError(f"operator {op_name}: @operator names {', '.join(sorted(extra))}, "
                                f"which the function {builder.__name__} does not take")
        doc = description if description is not None else (inspect.getdoc(builder) or "").split("\n", 1)[0]
        origin = inspect.getsourcefile(builder) or "built-in"
        if isinstance(weights, str):  # weights="W" would be read as its letters
            raise OperatorError(f"operator {op_name}: weights= takes a tuple of input names, e.g. "
                                f"weights=({weights!r},)")
        return OperatorDef(builder, op_name, specs, doc, shape_sets, reference, origin, tuple(weights))

    if _builder is not None:
        return mark(_builder)
    return mark


def _split_tensors(op_name: str, result: Any) -> tuple[tuple[Any, ...], Any]:
    from tvm import te

    what = f"operator {op_name} must return a list of tvm.te.Tensor (its input placeholders and one output)"
    if not isinstance(result, (list, tuple)) or not result:
        raise OperatorError(f"{what}; it returned {type(result).__name__}")
    for item in result:
        if not isinstance(item, te.Tensor):
            raise OperatorError(f"{what}; it returned a {type(item).__name__} among them")
    inputs = tuple(t for t in result if isinstance(t.op, te.PlaceholderOp))
    outputs = [t for t in result if not isinstance(t.op, te.PlaceholderOp)]
    if len(outputs) != 1:
        names = ", ".join(t.op.name for t in outputs) or "none"
        raise OperatorError(f"{what}; it returned {len(outputs)} computed tensors ({names})")
    output = outputs[0]
    needed = _placeholders_of(output)
    missing = [t.op.name for t in needed if not any(t.same_as(i) for i in inputs)]
    if missing:
        raise OperatorError(f"operator {op_name} reads {', '.join(missing)} but does not return "
                            f"{'it' if len(missing) == 1 else 'them'} in its list of tensors")
    return inputs, output


def _placeholders_of(tensor: Any) -> list[Any]:
    from tvm import te

    seen: list[Any] = []
    stack = [tensor]
    while stack:
        t = stack.pop()
        if isinstance(t.op, te.PlaceholderOp):
            if not any(t.same_as(s) for s in seen):
                seen.append(t)
            continue
        stack.extend(t.op.input_tensors)
    return seen


def _fmt_params(params: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(params.items()))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"
