"""Built-in networks, defined from ``torch.nn`` in the project (shapes only: no weights are downloaded, this
machine reaches no model hub): YOLO-v1 as FlexTensor runs it (§6.6), ResNet-18, MobileNet-V2 and VGG-16 (the
network HybridDNN's FPGA figures are for), each with its example input. ``torchvision:NAME`` gives
torchvision's architecture with ``weights=None`` where torchvision is installed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hetero_dse.errors import HeteroDSEError

__all__ = ["MODELS", "build", "calibrated"]


def _yolo_v1() -> Any:
    """YOLO-v1's 24 convolutions (Redmon et al. 2016, Table 1 of FlexTensor's layers C1-C15 among them) and
    its two fully connected layers, leaky ReLU after each convolution, 448x448 input."""
    from torch import nn

    layers: list[nn.Module] = []
    channels = 3

    def conv(k: int, size: int, stride: int = 1) -> None:
        nonlocal channels
        layers.extend([nn.Conv2d(channels, k, size, stride, size // 2), nn.LeakyReLU(0.1)])
        channels = k

    conv(64, 7, 2)
    layers.append(nn.MaxPool2d(2))
    conv(192, 3)
    layers.append(nn.MaxPool2d(2))
    conv(128, 1), conv(256, 3), conv(256, 1), conv(512, 3)
    layers.append(nn.MaxPool2d(2))
    for _ in range(4):
        conv(256, 1), conv(512, 3)
    conv(512, 1), conv(1024, 3)
    layers.append(nn.MaxPool2d(2))
    for _ in range(2):
        conv(512, 1), conv(1024, 3)
    conv(1024, 3), conv(1024, 3, 2), conv(1024, 3), conv(1024, 3)
    head = [nn.Flatten(), nn.Linear(1024 * 7 * 7, 4096), nn.LeakyReLU(0.1), nn.Linear(4096, 7 * 7 * 30)]
    return nn.Sequential(*layers, *head)


def _resnet18() -> Any:
    """ResNet-18 (He et al. 2016): basic blocks with batch norm, 224x224 input."""
    from torch import nn

    class Basic(nn.Module):
        def __init__(self, c: int, k: int, stride: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(c, k, 3, stride, 1, bias=False), nn.BatchNorm2d(k)
            self.conv2, self.bn2 = nn.Conv2d(k, k, 3, 1, 1, bias=False), nn.BatchNorm2d(k)
            self.down = None if stride == 1 and c == k else nn.Sequential(nn.Conv2d(c, k, 1, stride, bias=False),
                                                                         nn.BatchNorm2d(k))

        def forward(self, x: Any) -> Any:
            out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
            return (out + (x if self.down is None else self.down(x))).relu()

    blocks: list[nn.Module] = []
    c = 64
    for k, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        blocks += [Basic(c, k, stride), Basic(k, k, 1)]
        c = k
    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                         *blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000))


def _mobilenet_v2() -> Any:
    """MobileNet-V2 (Sandler et al. 2018): inverted residuals with depthwise 3x3 convolutions and ReLU6,
    224x224 input."""
    from torch import nn

    def cbr(c: int, k: int, size: int = 1, stride: int = 1, groups: int = 1, act: bool = True) -> list[nn.Module]:
        return [nn.Conv2d(c, k, size, stride, size // 2, groups=groups, bias=False), nn.BatchNorm2d(k),
                *([nn.ReLU6()] if act else [])]

    class Inverted(nn.Module):
        def __init__(self, c: int, k: int, stride: int, expand: int) -> None:
            super().__init__()
            hidden = c * expand
            self.residual = stride == 1 and c == k
            self.body = nn.Sequential(*(cbr(c, hidden) if expand != 1 else []),
                                      *cbr(hidden, hidden, 3, stride, groups=hidden), *cbr(hidden, k, act=False))

        def forward(self, x: Any) -> Any:
            return x + self.body(x) if self.residual else self.body(x)

    layers: list[nn.Module] = [*cbr(3, 32, 3, 2)]
    c = 32
    for expand, k, repeats, stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                                       (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(repeats):
            layers.append(Inverted(c, k, stride if i == 0 else 1, expand))
            c = k
    layers += [*cbr(c, 1280), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000)]
    return nn.Sequential(*layers)


def _vgg16() -> Any:
    """VGG-16 (Simonyan and Zisserman 2015, configuration D): thirteen 3x3 convolutions in five stages, each stage
    ending in a 2x2 max pool, then three fully connected layers; 224x224 input. The pool before the classifier is
    torchvision's adaptive one (the identity at 224x224), so a smaller input still runs."""
    from torch import nn

    layers: list[nn.Module] = []
    c = 3
    for k, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(convs):
            layers += [nn.Conv2d(c, k, 3, 1, 1), nn.ReLU()]
            c = k
        layers.append(nn.MaxPool2d(2))
    head = [nn.AdaptiveAvgPool2d(7), nn.Flatten(), nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Linear(4096, 4096),
            nn.ReLU(), nn.Linear(4096, 1000)]
    return nn.Sequential(*layers, *head)


#: name -> (factory, example input shape, description)
MODELS: dict[str, tuple[Callable[[], Any], tuple[int, ...], str]] = {
    "yolo_v1": (_yolo_v1, (1, 3, 448, 448), "YOLO-v1, FlexTensor's end-to-end network (24 conv + 2 fc)"),
    "resnet18": (_resnet18, (1, 3, 224, 224), "ResNet-18 (basic blocks, batch norm)"),
    "mobilenet_v2": (_mobilenet_v2, (1, 3, 224, 224), "MobileNet-V2 (inverted residuals, depthwise 3x3)"),
    "vgg16": (_vgg16, (1, 3, 224, 224), "VGG-16 (13 conv 3x3 + 3 fc), HybridDNN's network"),
}


def build(name: str, input_shape: tuple[int, ...] | None = None) -> tuple[Any, Any]:
    """The network called ``name`` (a built-in, or ``torchvision:NAME``) in eval mode, and a random example
    input of ``input_shape`` (its default where None)."""
    import torch

    if name.startswith("torchvision:"):
        try:
            import torchvision.models as tv
        except ImportError:
            raise HeteroDSEError(f"{name} needs torchvision, which is not installed here; use a built-in model "
                                 f"({', '.join(MODELS)}) or a model.py") from None
        arch = name.split(":", 1)[1]
        if not hasattr(tv, arch):
            raise HeteroDSEError(f"torchvision has no model {arch!r}")
        model, shape = getattr(tv, arch)(weights=None), input_shape or (1, 3, 224, 224)
    elif name in MODELS:
        factory, default_shape, _ = MODELS[name]
        model, shape = factory(), input_shape or default_shape
    elif name.endswith(".py"):
        model, example = _from_file(name)
        return model.eval(), example if input_shape is None else torch.randn(*input_shape)
    else:
        raise HeteroDSEError(f"unknown model {name!r}; built-in models: {', '.join(MODELS)}, or "
                             "torchvision:NAME, or the path of a model.py")
    torch.manual_seed(0)
    return model.eval(), torch.randn(*shape)


def calibrated(model: Any, example: Any) -> Any:
    """``model`` (a built-in network: random weights) with each batch norm's statistics those of its input on
    ``example`` (one forward in training mode), in eval mode. Untrained, MobileNet-V2's activations shrink to
    1e-7 by its classifier, where an int8 bias no longer fits int32 at its scale; a trained network's stay in
    range, and so do these."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # the average of the batches seen: here, the one
    model.train()
    with torch.no_grad():
        model(example)
    return model.eval()


def _from_file(path: str) -> tuple[Any, Any]:
    """A model.py: it defines ``model()`` returning a ``torch.nn.Module`` and ``example_input()`` returning a
    tensor (run with the same guards as an op.py: a time limit, sys.exit caught)."""
    import runpy

    import torch

    from hetero_dse.guard import time_limit

    if not Path(path).is_file():
        raise HeteroDSEError(f"model file {path} does not exist")
    _probe(path)
    try:
        with time_limit(LOAD_LIMIT_S, f"model file {path} did not finish loading in {LOAD_LIMIT_S} s"):
            scope = runpy.run_path(path)
            factory, example = scope.get("model"), scope.get("example_input")
            if not callable(factory) or not callable(example):
                raise HeteroDSEError(f"model file {path} must define model() returning a torch.nn.Module and "
                                     "example_input() returning its input tensor")
            module, tensor = factory(), example()
    except HeteroDSEError:
        raise
    except SystemExit as exc:
        raise HeteroDSEError(f"model file {path} called sys.exit({exc.code!r})") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - user code may raise anything, a BaseException subclass too
        raise HeteroDSEError(f"model file {path} failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(module, torch.nn.Module) or not isinstance(tensor, torch.Tensor):
        raise HeteroDSEError(f"model file {path}: model() must return a torch.nn.Module and example_input() a "
                             f"tensor, got {type(module).__name__} and {type(tensor).__name__}")
    return module, tensor


#: how long a model.py may take to load and run its example once, in a child process and then here
LOAD_LIMIT_S = 120

#: the child's script: load the file, build the model and its input, run it once; exit 0 only when all of it
#: returned (a model.py that calls os._exit, is killed by a signal, or hangs never reaches the end)
_PROBE = """
import runpy, sys
try:
    scope = runpy.run_path(sys.argv[1])
    factory, example = scope.get("model"), scope.get("example_input")
    if callable(factory) and callable(example):
        import torch
        module, tensor = factory(), example()
        if isinstance(module, torch.nn.Module) and isinstance(tensor, torch.Tensor):
            with torch.no_grad():
                module.eval()(tensor)
except BaseException:
    pass  # an exception, sys.exit too: the load in the tool's own process says it, with its type
sys.stdout.write("HETERO_DSE_PROBE_DONE\\n")
sys.stdout.flush()
"""


def _probe(path: str) -> None:
    """Run the model.py once in a child process that can be killed: a file that hangs (a forward() that
    sleeps, a handler that ignores SIGALRM), exits the interpreter (``os._exit``) or is killed is one
    sentence here, before this process runs any of it. What it raises is left to the load here, which says
    it with its type."""
    import subprocess
    import sys

    import os
    import signal

    probe = subprocess.Popen([sys.executable, "-c", _PROBE, path], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, _ = probe.communicate(timeout=LOAD_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(probe.pid, signal.SIGKILL)  # the probe and whatever the file started, its whole session
        probe.communicate()
        raise HeteroDSEError(f"model file {path} did not finish loading and running its example in "
                             f"{LOAD_LIMIT_S} s (it was stopped)") from None
    finally:
        try:
            os.killpg(probe.pid, signal.SIGKILL)  # a process the file left behind, even when it returned
        except (ProcessLookupError, PermissionError):
            pass
    if "HETERO_DSE_PROBE_DONE" in out:
        return
    if probe.returncode < 0:
        raise HeteroDSEError(f"model file {path} was killed by signal {-probe.returncode} while loading")
    raise HeteroDSEError(f"model file {path} ended the interpreter (exit code {probe.returncode}) while loading "
                         "or running its example, without an error: it must return model() and example_input()")
