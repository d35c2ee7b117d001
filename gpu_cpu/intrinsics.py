"""The wmma tensor intrinsics the tensor-core schedules tensorize with: TVM's own definitions, kept on disk.

TVM defines them in ``tvm.s_tir.tensor_intrin.cuda``, and importing that package registers every intrinsic of every
target TVM knows (CUDA's mma, ldmatrix and wmma tables, ROCm's, Arm's, x86's) by parsing TVMScript: 21-25 s of one
core here (about 10 s with the shallow stack below), paid by a search and again by each of its builder processes
before their first candidate (BENCHMARKS.md, "Tensor intrinsics"). The few a tensor-core point uses, every
arithmetic on every fragment shape, are generated once by TVM's generators, saved in TVM's JSON under the TVM
version that made them, and loaded in milliseconds by every later process. A cache that is missing, unreadable or
incomplete is made again.

Most of the import's time was ``inspect.stack()``: TVM's script parser calls it for each function it parses, to
look at its caller's few frames, and it reads the source and looks up the module of every frame on the stack, the
import machinery's own (frozen, so each is a scan of ``sys.modules``) and a test runner's dozens included. The
import runs with a stack of the top frames only (``_shallow_stack``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hetero_dse.atomic import atomic_write_text
from hetero_dse.space.tensorcore import ARITHMETIC, SHAPES, Arithmetic

__all__ = ["CACHE_ENV", "SHARED", "cache_file", "cached", "generate", "intrinsic_names", "prepare", "wmma_intrinsics"]

#: the directory the definitions are kept in (default: the user's cache directory)
CACHE_ENV = "HETERO_DSE_CACHE"
#: static shared memory: the dynamic kind is merged into one buffer by TVM, whose pointer casts then fail for
#: a float16 stage reused as the float32 write-back (and the space keeps within the static 48 KB anyway)
SHARED = "shared"
#: bumped when what the file holds changes meaning
FORMAT = 1
#: the frames TVM's parser is given of its stack: it reads its caller's and the next (a class body's decorator;
#: the scopes enclosing a function, for annotations under PEP 563), none further
STACK_FRAMES = 8
_STACK_LOCK = threading.RLock()


def intrinsic_names(arithmetic: Arithmetic, frag_m: int = 16, frag_n: int = 16) -> dict[str, str]:
    """The registered names of one arithmetic's intrinsics on ``frag_m`` × ``frag_n`` fragments, by role. The
    accumulator's fill and store name the fragment's shape too: TVM checks that the fragments of one MMA agree."""
    shape = f"{frag_m}x{frag_n}x{arithmetic.k}"
    acc = arithmetic.accumulator
    return {"load_a": f"hetero_dse_wmma_load_{shape}_{arithmetic.name}_a_shared",
            "load_b": f"hetero_dse_wmma_load_{shape}_{arithmetic.name}_b_trans_shared",
            "compute": f"hetero_dse_wmma_sync_{shape}_{arithmetic.name}_{acc}_trans",
            "init": f"hetero_dse_wmma_fill_{shape}_{acc}", "store": f"hetero_dse_wmma_store_{shape}_{acc}_shared"}


@contextlib.contextmanager
def _shallow_stack() -> Iterator[None]:
    """``inspect.stack()`` as its caller's top ``STACK_FRAMES`` frames while inside (see the module doc); one
    thread inside at a time, so that each restores the function it found."""

    def stack(context: int = 1) -> list[inspect.FrameInfo]:
        frames, frame = [], sys._getframe(1)
        while frame is not None and len(frames) < STACK_FRAMES:
            info = inspect.getframeinfo(frame, context)
            where = {"positions": info.positions} if hasattr(info, "positions") else {}  # Python 3.11 on
            frames.append(inspect.FrameInfo(frame, *info, **where))
            frame = frame.f_back
        return frames

    with _STACK_LOCK:
        full = inspect.stack
        inspect.stack = stack
        try:
            yield
        finally:
            inspect.stack = full


def generate() -> dict[str, tuple[Any, Any]]:
    """Every intrinsic a tensor-core point can use, ``name -> (description, implementation)``, from TVM's
    generators (B is read transposed: the normalised GEMM holds it as ``B[s, j, k]``). Slow: imports TVM's
    tables."""
    with _shallow_stack():  # the import and each generator parse TVMScript
        from tvm.s_tir.tensor_intrin.cuda import (get_wmma_fill_intrin, get_wmma_load_intrin,
                                                  get_wmma_store_intrin, get_wmma_sync_intrin)

        out = {}
        for arithmetic in ARITHMETIC.values():
            k, dtype, acc = arithmetic.k, arithmetic.inputs, arithmetic.accumulator
            for m, n in SHAPES:
                names = intrinsic_names(arithmetic, m, n)
                out[names["load_a"]] = get_wmma_load_intrin(m, n, k, dtype, SHARED, False, False)
                out[names["load_b"]] = get_wmma_load_intrin(m, n, k, dtype, SHARED, True, True)
                out[names["compute"]] = get_wmma_sync_intrin(m, n, k, dtype, acc, True)
                out[names["init"]] = get_wmma_fill_intrin(m, n, k, acc)
                out[names["store"]] = get_wmma_store_intrin(m, n, k, acc, SHARED)
    return out


def cache_file() -> Path:
    """Where the definitions are kept: one file per TVM and tvm-ffi version (the JSON is theirs)."""
    import platformdirs
    import tvm
    import tvm_ffi

    root = os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir("hetero_dse")
    return Path(root) / f"wmma-intrinsics-tvm{tvm.__version__}-ffi{tvm_ffi.__version__}-v{FORMAT}.json"


def _kept() -> dict[str, tuple[Any, Any]] | None:
    """The definitions in the cache file, or None where it does not hold them all."""
    import tvm

    wanted = {name for arithmetic in ARITHMETIC.values() for m, n in SHAPES
              for name in intrinsic_names(arithmetic, m, n).values()}
    try:
        kept = tvm.ir.load_json(cache_file().read_text())
        if wanted <= set(kept.keys()):
            return {name: (kept[name][0], kept[name][1]) for name in wanted}
    except Exception:  # noqa: BLE001 - missing, cut short, another version's: None, made again by the caller
        pass
    return None


def _keep(definitions: dict[str, tuple[Any, Any]]) -> None:
    import tvm

    path = cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, tvm.ir.save_json({name: list(pair) for name, pair in definitions.items()}))
    except OSError:  # an unwritable cache costs time in the next process, not this one's answer
        pass


@functools.cache
def _definitions() -> dict[str, tuple[Any, Any]]:
    """The definitions, from the cache file when it holds them all, else generated and the file written."""
    kept = _kept()
    if kept is not None:
        return kept
    made = generate()
    _keep(made)
    return made


def cached() -> bool:
    """Whether this TVM's definitions are on disk whole: a process then registers them in milliseconds, where
    making them costs it about 10 s (25 s before the parser was given a shallow stack)."""
    return _kept() is not None


def prepare() -> None:
    """The definitions made and kept on disk, once for this TVM version, so that no later process (a search's
    builders, each measured trial's) pays for them."""
    definitions = _definitions()
    if not cached():  # this process had them already, from a cache directory since changed
        _keep(definitions)


def wmma_intrinsics(arithmetic: Arithmetic, frag_m: int = 16, frag_n: int = 16) -> dict[str, str]:
    """The names of one arithmetic's intrinsics on ``frag_m`` × ``frag_n`` fragments, registered with TVM in this
    process (once). TF32 has none: TVM's CUDA code generator refuses float operand fragments, so float32 runs
    on the SIMT cores."""
    from tvm.s_tir import TensorIntrin

    names = intrinsic_names(arithmetic, frag_m, frag_n)
    if any(TensorIntrin.get(name, allow_missing=True) is None for name in names.values()):
        definitions = _definitions()
        for name in names.values():
            if TensorIntrin.get(name, allow_missing=True) is None:
                TensorIntrin.register(name, *definitions[name])
    return names
