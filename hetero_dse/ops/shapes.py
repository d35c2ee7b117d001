"""Named shape sets: the YOLO-v1 conv layers of FlexTensor's Table 4 and small shapes for tests.

Small shapes keep prime extents (7, 13) and stride 2 on purpose: they are the cases where divisible
splits, padding and expansion go wrong first.
"""

from __future__ import annotations

from hetero_dse.operator_params import ShapeSet

# FlexTensor Table 4: (C, K, H=W, kernel, stride); padding keeps "same" size as in YOLO-v1 (kernel // 2).
_YOLO_TABLE = {
    "C1": (3, 64, 448, 7, 2),
    "C2": (64, 192, 112, 3, 1),
    "C3": (192, 128, 56, 1, 1),
    "C4": (128, 256, 56, 3, 1),
    "C5": (256, 256, 56, 1, 1),
    "C6": (256, 512, 56, 3, 1),
    "C7": (512, 256, 28, 1, 1),
    "C8": (256, 512, 28, 3, 1),
    "C9": (512, 512, 28, 1, 1),
    "C10": (512, 1024, 28, 3, 1),
    "C11": (1024, 512, 14, 1, 1),
    "C12": (512, 1024, 14, 3, 1),
    "C13": (1024, 1024, 14, 3, 1),
    "C14": (1024, 1024, 14, 3, 2),
    "C15": (1024, 1024, 7, 3, 1),
}

YOLO_V1 = ShapeSet(
    "yolo",
    {name: dict(batch=1, C=c, K=k, H=hw, W=hw, kernel=ks, stride=st, padding=ks // 2)
     for name, (c, k, hw, ks, st) in _YOLO_TABLE.items()},
    "the 15 distinct conv layers of YOLO-v1 (FlexTensor Table 4), batch 1",
)


def _small(**shapes: dict) -> ShapeSet:
    return ShapeSet("small", shapes, "small shapes for tests and quick runs")


GEMV_SMALL = _small(s1=dict(M=16, K=32), s2=dict(M=13, K=7))
GEMM_SMALL = _small(s1=dict(M=16, N=16, K=16), s2=dict(M=13, N=7, K=11))
BILINEAR_SMALL = _small(s1=dict(M=4, N=8, K=6, L=5), s2=dict(M=7, N=3, K=5, L=2))
BCM_SMALL = _small(s1=dict(batch=2, P=3, Q=2, block=4), s2=dict(batch=3, P=2, Q=3, block=7))
CONV1D_SMALL = _small(s1=dict(batch=1, C=4, L=16, K=8, kernel=3, stride=1, padding=1),
                      s2=dict(batch=2, C=3, L=13, K=5, kernel=3, stride=2, padding=1))
CONV2D_SMALL = _small(s1=dict(batch=1, C=4, H=8, W=8, K=8, kernel=3, stride=1, padding=1),
                      s2=dict(batch=1, C=3, H=13, W=13, K=7, kernel=3, stride=2, padding=1))
CONV3D_SMALL = _small(s1=dict(batch=1, C=2, D=4, H=6, W=6, K=4, kernel=3, stride=1, padding=1),
                      s2=dict(batch=1, C=3, D=5, H=7, W=7, K=2, kernel=3, stride=2, padding=1))
GROUP_SMALL = _small(s1=dict(batch=1, C=8, H=8, W=8, K=8, kernel=3, stride=1, padding=1, groups=4),
                     s2=dict(batch=1, C=6, H=7, W=7, K=9, kernel=3, stride=2, padding=1, groups=3))
DEPTHWISE_SMALL = _small(s1=dict(batch=1, C=4, H=8, W=8, kernel=3, stride=1, padding=1, multiplier=1),
                         s2=dict(batch=1, C=3, H=7, W=7, kernel=3, stride=2, padding=1, multiplier=2))
SHIFT_SMALL = _small(s1=dict(batch=1, C=9, H=8, W=8, K=4, kernel=3),
                     s2=dict(batch=2, C=18, H=7, W=7, K=5, kernel=3))
