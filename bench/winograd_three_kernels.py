"""Winograd F(m×m, 3×3) on this CPU as three TVM kernels with fixed, hand-written schedules — the input
transform, the batched product over the α² points, the output transform — against torch: the measurement
taken before designing issue 40's CPU space (not the tool's path: nothing here is searched).

    .venv/bin/python bench/winograd_three_kernels.py C K HW M     (e.g. 256 512 28 4)

The weights are transformed once ahead (G g Gᵀ, laid out [α, α, C, K]); the output is checked against torch.
"""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build(C, K, H, W, m):
    import tvm
    from tvm import s_tir, te
    from tvm.topi.utils import const_matrix

    from hetero_dse.ops.winograd import transforms

    t = transforms(m, 3)
    a = t.alpha
    at_np, g_np, bt_np = (x.astype("float32") for x in t.arrays())
    th, tw = (H + m - 1) // m, (W + m - 1) // m  # output H = W (stride 1, padding 1)
    P = th * tw
    ph, pw = th * m + 2, tw * m + 2
    X = te.placeholder((C, H, W), name="X")
    pad = te.compute((C, ph, pw), lambda c, y, x: te.if_then_else(
        te.all(y >= 1, y < H + 1, x >= 1, x < W + 1), X[c, y - 1, x - 1], 0.0), name="pad")
    BT = const_matrix(bt_np, "BT")
    i = te.reduce_axis((0, a), "i")
    j = te.reduce_axis((0, a), "j")
    # V[e1, e2, p, c]: p tile index, c innermost for the product's reduction
    V = te.compute((a, a, P, C), lambda e1, e2, p, c: te.sum(
        BT[e1, i] * pad[c, (p // tw) * m + i, (p % tw) * m + j] * BT[e2, j], axis=[i, j]), name="V")
    U = te.placeholder((a, a, C, K), name="U")  # G g Gᵀ, transformed once ahead, k innermost
    rc = te.reduce_axis((0, C), "rc")
    M = te.compute((a, a, P, K), lambda e1, e2, p, k: te.sum(V[e1, e2, p, rc] * U[e1, e2, rc, k], axis=rc),
                   name="M")
    AT = const_matrix(at_np, "AT")
    r1 = te.reduce_axis((0, a), "r1")
    r2 = te.reduce_axis((0, a), "r2")
    Y = te.compute((K, th * m, tw * m), lambda k, y, x: te.sum(
        AT[y % m, r1] * M[r1, r2, (y // m) * tw + x // m, k] * AT[x % m, r2], axis=[r1, r2]), name="Y")
    func = te.create_prim_func([X, U, Y])
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    for name in ("BT", "AT", "pad"):
        sch.compute_inline(sch.get_sblock(name))
    # input transform: parallel over p, c vectorised innermost, e1 e2 i j unrolled (constants fold)
    v = sch.get_sblock("V")
    e1, e2, p, c, ii, jj = sch.get_loops(v)
    sch.reorder(c, p, e1, e2, ii, jj)  # one tile's α² values at a time, from α² loads of its channel
    sch.parallel(c)
    for lp in (e1, e2, ii, jj):
        sch.unroll(lp)
    # product: e1 e2 fused batch, tile p x k with k vectorised, accumulate in a local tile
    mb = sch.get_sblock("M")
    e1, e2, p, k, rc = sch.get_loops(mb)
    e = sch.fuse(e1, e2)
    pi_ = min(P, 7) if P % 7 == 0 else 1
    po, pi = sch.split(p, [None, pi_])
    ko, ki = sch.split(k, [None, 32])
    kio, kii = sch.split(ki, [None, 16])
    rco, rci = sch.split(rc, [None, 8])
    cache = sch.cache_write(mb, 0, "global")
    sch.reorder(e, ko, po, rco, rci, pi, kio, kii)
    par = sch.fuse(e, ko)
    sch.parallel(par)
    sch.reverse_compute_at(cache, po)
    sch.unroll(pi)
    sch.unroll(kio)
    sch.vectorize(kii)
    sch.decompose_reduction(mb, rco)
    # output transform: parallel over k, unrolled r1 r2
    yb = sch.get_sblock("Y")
    k, y, x, r1_, r2_ = sch.get_loops(yb)
    ty, yi = sch.split(y, [None, m])  # y % m becomes yi: the unrolled constants fold
    tx, xi = sch.split(x, [None, m])
    sch.reorder(k, ty, tx, yi, xi, r1_, r2_)
    sch.parallel(k)
    for lp in (yi, xi, r1_, r2_):
        sch.unroll(lp)
    from gpu_cpu.schedule import host_target

    ex = tvm.compile(sch.mod, target=host_target())
    return ex, t, (th, tw)


def main():
    import torch
    import tvm

    C, K, H = (int(v) for v in sys.argv[1:4])
    m = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    ex, t, (th, tw) = build(C, K, H, H, m)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((C, H, H)).astype("float32")
    w = (rng.standard_normal((K, C, 3, 3)) / np.sqrt(9 * C)).astype("float32")
    g = t.arrays()[1]
    u = np.einsum("ai,kcij,bj->abck", g, w.astype(np.float64), g).astype("float32")
    dev = tvm.cpu(0)
    out = tvm.runtime.tensor(np.zeros((K, th * m, tw * m), "float32"), dev)
    args = [tvm.runtime.tensor(x, dev), tvm.runtime.tensor(u, dev), out]
    ex.mod[ex.mod.entry_name](*args)
    want = torch.nn.functional.conv2d(torch.from_numpy(x[None]), torch.from_numpy(w), padding=1).numpy()[0]
    got = out.numpy()[:, :H, :H]
    print("max rel err", np.abs(got - want).max() / np.abs(want).max())
    timer = ex.mod.time_evaluator(ex.mod.entry_name, dev, number=5, repeat=7, min_repeat_ms=40)
    s = float(np.median(timer(*args).results))
    flops = 2 * C * K * 9 * H * H
    torch.set_num_threads(2)
    xt, wt = torch.from_numpy(x[None]), torch.from_numpy(w)
    for _ in range(5):
        torch.nn.functional.conv2d(xt, wt, padding=1)
    ts = []
    for _ in range(30):
        a = time.perf_counter()
        torch.nn.functional.conv2d(xt, wt, padding=1)
        ts.append(time.perf_counter() - a)
    tt = float(np.median(ts))
    print(f"F({m},3) C{C} K{K} {H}x{H}: winograd {s * 1e3:.3f} ms ({flops / s / 1e9:.0f} direct-equivalent GFLOPS), "
          f"torch {tt * 1e3:.3f} ms ({flops / tt / 1e9:.0f}): {tt / s:.2f}x torch")


if __name__ == "__main__":
    main()
