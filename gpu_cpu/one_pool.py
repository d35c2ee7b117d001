"""One thread pool for torch's ops and our TVM kernels in one process: TVM's parallel loops run on torch's
OpenMP team.

A network executed with its plan calls torch's ops and our kernels in turn. Each brings its pool: torch's
OpenMP threads spin for a while after every op, TVM's pool threads spin after every kernel, and on a machine
with as many threads as cores each side waits for the scheduler to take a core back from the other's spinning
threads. Measured here (2 cores): a 196×128×256 product took 0.21 ms alone and 2.5 ms between torch
convolutions; the convolutions slowed by up to 2× too (BENCHMARKS.md, issue 39). Shortening either side's spin
did not help.

Every compiled TVM CPU module calls its parallel loops through two context functions,
``__TVMBackendParallelLaunch`` and ``__TVMBackendParallelBarrier``, which the runtime fills in when it loads
the module from a registry of context symbols (tvm-ffi's ``TVMFFIEnvModRegisterContextSymbol``; the last
registration of a name wins). ``use_pool("torch")`` registers ``native/omp_pool.cc``, compiled against the
libgomp torch loaded: modules loaded afterwards fork their loops on torch's team. ``use_pool("tvm")`` registers
TVM's own functions again (for a comparison in one process); ``thread_pool`` does either for a block. A module
keeps the pool it was loaded with (a JIT-compiled one: the pool when it first runs).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["Pool", "pool_launches", "thread_pool", "use_pool"]

_SOURCE = Path(__file__).with_name("native") / "omp_pool.cc"
_SYMBOLS = ("Launch", "Barrier")  # __TVMBackendParallel{Launch,Barrier}
_bridge: ctypes.CDLL | None = None
_runtime: str | None = None  # the OpenMP runtime the bridge is bound to (torch's)
_current = "tvm"  # what modules loaded from now on get


@dataclass(frozen=True)
class Pool:
    """The pool TVM modules loaded from now on run their parallel loops on: ``kind`` "torch" (torch's OpenMP
    team) or "tvm" (TVM's own), and in words why (the OpenMP library shared, or what kept TVM's pool)."""

    kind: str
    why: str


def use_pool(kind: str) -> Pool:
    """Make TVM modules loaded from now on run their parallel loops on ``kind``'s pool ("torch" or "tvm").
    "torch" falls back to TVM's pool, saying why, where the bridge cannot share torch's OpenMP runtime (no C++
    compiler, torch built against another OpenMP, the bridge bound to another runtime than torch's)."""
    global _current
    if kind not in ("torch", "tvm"):
        raise ValueError(f"no thread pool named {kind!r}: 'torch' or 'tvm'")
    import torch
    import tvm  # noqa: F401  (TVM registers its own pool when it loads: after that, so that ours is the last)

    if kind == "torch":
        try:
            bridge = _load_bridge()
        except _NoBridge as exc:
            _register(_tvm_functions())
            _current = "tvm"
            return Pool("tvm", f"TVM's own pool: {exc}")
        bridge.hdse_parallel_configure(torch.get_num_threads(), *_error_functions())
        _register({name: getattr(bridge, f"hdse_parallel_{name.lower()}") for name in _SYMBOLS})
        _current = "torch"
        return Pool("torch", f"torch's OpenMP team ({Path(_runtime or '').name})")
    _register(_tvm_functions())
    _current = "tvm"
    return Pool("tvm", "TVM's own pool")


@contextmanager
def thread_pool(kind: str) -> Iterator[Pool]:
    """``use_pool(kind)`` for the block, the pool before it registered again after (modules loaded, or first
    run, in the block keep ``kind``'s)."""
    before = _current
    try:
        yield use_pool(kind)
    finally:
        use_pool(before)


def pool_launches() -> int:
    """Parallel loops launched through the bridge so far in this process (0 where it was never loaded)."""
    return 0 if _bridge is None else int(_bridge.hdse_parallel_launches())


class _NoBridge(Exception):
    pass


def _load_bridge() -> ctypes.CDLL:
    """The bridge, compiled if need be and loaded; refused where it is not bound to torch's OpenMP runtime."""
    global _bridge, _runtime
    if _bridge is not None:
        return _bridge
    runtime = _torch_runtime()
    if runtime is None:
        raise _NoBridge("torch's OpenMP runtime was not found in the process")
    if "gomp" not in Path(runtime).name:
        raise _NoBridge(f"torch runs on {Path(runtime).name}, not libgomp")
    try:
        bridge = _open(_compiled())
    except OSError:  # a cached library that does not load (another C++ runtime, a damaged file): once more
        try:
            bridge = _open(_compiled(fresh=True))
        except OSError as exc:
            raise _NoBridge(f"the OpenMP bridge does not load ({exc})") from None
    bound = _library_of(bridge.hdse_openmp_symbol())
    if bound is None or os.path.realpath(bound) != runtime:
        raise _NoBridge(f"the OpenMP bridge bound to {bound or 'an unknown library'}, not torch's {runtime}")
    _bridge, _runtime = bridge, runtime
    return bridge


def _open(library: Path) -> ctypes.CDLL:
    bridge = ctypes.CDLL(str(library))
    bridge.hdse_parallel_launches.restype = ctypes.c_long
    bridge.hdse_openmp_symbol.restype = ctypes.c_void_p
    bridge.hdse_parallel_configure.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return bridge


def _compiled(fresh: bool = False) -> Path:
    """The bridge's shared library, compiled once per source text, compiler and machine into the user's cache
    (a temporary directory where the cache cannot be written)."""
    compiler = shlex.split(os.environ.get("CXX") or "g++")
    if not compiler or shutil.which(compiler[0]) is None:
        raise _NoBridge(f"no C++ compiler ({' '.join(compiler) or 'CXX is empty'}) to build the OpenMP bridge")
    key = hashlib.sha256(_SOURCE.read_bytes() + " ".join([*compiler, platform.machine()]).encode()).hexdigest()
    for directory in (_cache_directory(), Path(tempfile.gettempdir()) / f"hetero_dse-{os.getuid()}"):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            library = directory / f"omp_pool-{key[:12]}.so"
            if fresh:
                library.unlink(missing_ok=True)
            if library.is_file():
                return library
            return _compile(compiler, library)
        except PermissionError:
            continue
    raise _NoBridge("no writable directory to build the OpenMP bridge in")


def _cache_directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home directory
            base = tempfile.gettempdir()
    return Path(base) / "hetero_dse"


def _compile(compiler: list[str], library: Path) -> Path:
    partial = library.with_suffix(f".{os.getpid()}.tmp")
    try:
        run = subprocess.run([*compiler, "-O2", "-fPIC", "-fopenmp", "-fno-exceptions", "-shared", str(_SOURCE),
                              "-o", str(partial)], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        partial.unlink(missing_ok=True)
        raise _NoBridge(f"the OpenMP bridge did not compile ({exc})") from None
    if run.returncode != 0:
        partial.unlink(missing_ok=True)
        last = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit {run.returncode}"
        raise _NoBridge(f"the OpenMP bridge did not compile ({last})")
    os.replace(partial, library)  # whole or absent: another process may be compiling the same file
    return library


def _library_of(address: int | None) -> str | None:
    """The file of the shared library that holds ``address`` (glibc's dladdr)."""

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    info = DlInfo()
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except AttributeError:
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    if not address or dladdr(ctypes.c_void_p(address), ctypes.byref(info)) == 0 or not info.dli_fname:
        return None
    return info.dli_fname.decode()


def _torch_runtime() -> str | None:
    """The OpenMP runtime torch's own library calls (resolved from its handle, which searches its dependencies
    first): other libraries may load a copy of their own (xgboost's wheel brings a libgomp of another name)."""
    (path,) = {p for p in _mapped() if Path(p).name.startswith("libtorch_cpu")} or {None}
    if path is None:
        return None
    try:
        address = ctypes.cast(ctypes.CDLL(path).omp_get_max_threads, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    found = _library_of(address)
    return os.path.realpath(found) if found else None


@cache
def _tvm_functions() -> dict[str, ctypes._CFuncPtr]:
    (path,) = {p for p in _mapped() if Path(p).name in ("libtvm.so", "libtvm_runtime.so")} or {None}
    if path is None:
        raise RuntimeError("TVM's runtime library is not loaded in this process")
    library = ctypes.CDLL(path)
    return {name: getattr(library, f"TVMBackendParallel{name}") for name in _SYMBOLS}


@cache
def _ffi() -> ctypes.CDLL:
    (path,) = {p for p in _mapped() if Path(p).name == "libtvm_ffi.so"} or {None}
    if path is None:
        raise RuntimeError("tvm-ffi's library is not loaded in this process")
    return ctypes.CDLL(path)


def _error_functions() -> tuple[int, int]:
    ffi = _ffi()
    return tuple(ctypes.cast(getattr(ffi, name), ctypes.c_void_p).value
                 for name in ("TVMFFIErrorMoveFromRaised", "TVMFFIErrorSetRaised"))


def _register(functions: dict[str, ctypes._CFuncPtr]) -> None:
    """Both of a pool's functions: a launch of one pool with the other's barrier would not synchronise (or read
    a null sync handle), so a refusal of either is an error, never a half-registered pool."""
    ffi = _ffi()
    for name in ("Barrier", "Launch"):
        address = ctypes.cast(functions[name], ctypes.c_void_p)
        if ffi.TVMFFIEnvModRegisterContextSymbol(f"__TVMBackendParallel{name}".encode(), address) != 0:
            raise RuntimeError(f"tvm-ffi refused the context symbol __TVMBackendParallel{name}")


def _mapped() -> set[str]:
    """The files mapped into this process (/proc/self/maps), a deleted file's suffix dropped."""
    with open("/proc/self/maps") as maps:
        return {line.split(maxsplit=5)[5].strip().removesuffix(" (deleted)") for line in maps
                if len(line.split(maxsplit=5)) == 6}
