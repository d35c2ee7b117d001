"""Every kind of device by name, declared once: how the targets of a run are made from what the user asked
(:class:`TargetRequest`). A new kind of device is one module (a :class:`~hetero_dse.targets.base.Target`) and one
:func:`register_target`; its name then works in ``explore --target``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hetero_dse.errors import HeteroDSEError
from hetero_dse.targets.base import Target

__all__ = ["TargetEntry", "TargetRequest", "build_targets", "register_target", "target_kinds"]


@dataclass(frozen=True)
class TargetRequest:
    """What the user asked of the devices, whatever they are; each kind reads what concerns it."""

    boards: tuple[str, ...] = ()  # FPGA boards (names or board files)
    dtypes: tuple[str, ...] = ()
    clocks: tuple[float, ...] = ()
    trials: int = 32  # CPU/GPU schedules measured
    gpu: str = "h100"  # the GPU whose roofline estimates where none is present
    source: str = "builtin"  # the op.py the operators come from
    remote: Any = None  # a device reached over TVM's RPC
    calibration: Any = None  # the FPGA model's fitted constants
    csim: bool = False
    io_optimal: bool = False
    traffic_weight: float = 0.01
    extra: dict[str, Any] = field(default_factory=dict)  # a plugin's own settings
    #: a 3×3 convolution's on the CPU and GPU, and the FPGA network kernel's: auto, direct, winograd
    algorithm: str = "auto"
    #: images a run of the FPGA network kernel's compute units takes (its linear layers read their weights once)
    batch: int = 1


@dataclass(frozen=True)
class TargetEntry:
    kind: str
    build: Callable[[TargetRequest], list[Target]]
    summary: str


_REGISTRY: dict[str, TargetEntry] = {}


def register_target(kind: str, build: Callable[[TargetRequest], list[Target]], summary: str) -> None:
    """Declare a kind of device: ``build(request)`` makes its targets for a run (a kind registered again is
    replaced)."""
    if not kind.isidentifier():
        raise ValueError(f"a target's kind is a word, got {kind!r}")
    _REGISTRY[kind] = TargetEntry(kind, build, summary)


def target_kinds() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def build_targets(kinds: list[str], request: TargetRequest) -> list[Target]:
    """The targets of every kind asked, in the order of the registry (FPGA boards first)."""
    unknown = [k for k in kinds if k not in _REGISTRY]
    if unknown:
        raise HeteroDSEError(f"unknown target {unknown[0]!r}; choose one of {', '.join(_REGISTRY)}")
    return [target for kind in _REGISTRY if kind in kinds for target in _REGISTRY[kind].build(request)]


# ------------------------------------------------------------------------------------------ built-ins
def _fpga(request: TargetRequest) -> list[Target]:
    from hetero_dse.hardware.board import load_board
    from hetero_dse.space.fpga import SpaceOptions
    from hetero_dse.targets.fpga import FpgaTarget

    targets: list[Target] = []
    for name in request.boards:
        board = load_board(name)
        if request.calibration is not None:
            request.calibration.check_part(board.part, _vitis_version())
        targets.append(FpgaTarget(board, dtypes=list(request.dtypes), clocks=list(request.clocks),
                                  options=SpaceOptions(io_optimal=request.io_optimal),
                                  traffic_weight=request.traffic_weight, calibration=request.calibration,
                                  csim=request.csim, algorithm=request.algorithm, batch=request.batch))
    return targets


def _vitis_version() -> str | None:
    """The version of the Vitis HLS found here, to hold a calibration to (None where there is none)."""
    from hetero_dse.hls.vitis import SynthError, find_tool

    try:
        return find_tool().version
    except SynthError:
        return None


def _cpu(request: TargetRequest) -> list[Target]:
    from hetero_dse.targets.cpu import CpuTarget

    return [CpuTarget(trials=request.trials, source=request.source, remote=request.remote,
                      algorithm=request.algorithm)]


def _gpu(request: TargetRequest) -> list[Target]:
    from hetero_dse.targets.gpu import GpuTarget

    if len(request.dtypes) > 1:
        raise HeteroDSEError(f"the GPU computes in one data type a run, and --dtype gives {len(request.dtypes)} "
                             f"({', '.join(request.dtypes)}); several are for the FPGA's space")
    return [GpuTarget(request.gpu, trials=request.trials, source=request.source,
                      dtype=request.dtypes[0] if request.dtypes else None, remote=request.remote,
                      algorithm=request.algorithm)]


register_target("fpga", _fpga, "an FPGA board: the analytical model scores designs; an HLS project is written")
register_target("cpu", _cpu, "this CPU (or one over RPC): TVM schedules measured against torch")
register_target("gpu", _gpu, "a GPU: TVM schedules measured where one is present, a roofline estimate elsewhere")
