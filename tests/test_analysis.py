"""Static analysis: FlexTensor's Table 3 figures, affine accesses, exact footprints, FLOPs and traffic."""

from __future__ import annotations

import pytest

import hetero_dse as hd
from hetero_dse.analysis import AffineExpr, analyze
from hetero_dse.analysis.footprint import footprint
from hetero_dse.errors import AnalysisError
from hetero_dse.ops import get_builtin

# FlexTensor Table 3 "#sl/rl" and "#node". Our #sl and #rl sum over every node of the mini-graph, as the
# paper does for C1D (pad 3 + conv 3 = 6) and T1D (expand 3 + pad 3 + conv 3 = 9); T1D/T2D/T3D have the
# expansion node only when stride > 1, so they are checked at stride 2.
TABLE3 = {
    "gemv": ("1/1", 1), "gemm": ("2/1", 1), "bilinear": ("2/2", 1),
    "conv1d": ("6/2", 2), "conv_transpose1d": ("9/2", 3),
    "conv2d": ("8/3", 2), "conv_transpose2d": ("12/3", 3),
    "conv3d": ("10/4", 2), "conv_transpose3d": ("15/4", 3),
}


@pytest.mark.parametrize("name,expected", TABLE3.items())
def test_sl_rl_and_nodes_match_flextensor_table3(name, expected):
    op = get_builtin(name).instantiate({"stride": 2, "padding": 1} if "conv" in name else {}, shape="small:s2")
    a = analyze(op)
    assert (f"{a.num_spatial_loops}/{a.num_reduce_loops}", len(a.nodes)) == expected


def test_where_our_definitions_differ_from_table3():
    # Table 3 lists GRP, DEP and DIL as 4/3 with 2 nodes: it counts only the main node's four NCHW spatial
    # loops (the padding node's four are left out, unlike C2D's 8/3) and three reduce loops for each.
    # Ours: GRP keeps the group as a loop of its own (b, g, k, i, j) so that channel indices stay affine;
    # DEP reduces over the kernel window only (rx, ry), there is no channel reduction in a depthwise conv;
    # DIL is C2D with dilation and matches C2D's 8/3.
    grp = analyze(get_builtin("group_conv2d").instantiate(shape="small:s1"))
    dep = analyze(get_builtin("depthwise_conv2d").instantiate(shape="small:s1"))
    dil = analyze(get_builtin("dilated_conv2d").instantiate(shape="small:s1"))
    assert (len(grp.main.spatial), len(grp.main.reduce), len(grp.nodes)) == (5, 3, 2)
    assert (len(dep.main.spatial), len(dep.main.reduce), len(dep.nodes)) == (4, 2, 2)
    assert (dil.num_spatial_loops, dil.num_reduce_loops, len(dil.nodes)) == (8, 3, 2)


def test_gemm_by_hand():
    a = analyze(get_builtin("gemm").instantiate({"M": 64, "N": 32, "K": 16}))
    assert [(lp.name, lp.extent, lp.kind) for lp in a.main.loops] == [
        ("i", 64, "spatial"), ("j", 32, "spatial"), ("k", 16, "reduce")]
    assert [str(r) for r in a.reads] == ["A[i, k]", "B[k, j]"]
    assert a.flops == 2 * 64 * 32 * 16
    assert a.compulsory_bytes == 4 * (64 * 16 + 16 * 32 + 64 * 32)
    A, B = a.reads
    tile = {"i": 8, "j": 4, "k": 2}
    assert (A.footprint(tile), B.footprint(tile), a.write.footprint(tile)) == (16, 8, 32)
    assert A.footprint_bytes(tile) == 64


def test_conv2d_stride2_footprint_by_hand():
    # YOLO C1: 7x7 kernel, stride 2, padding 3. An input tile for 4x4 outputs over the full 7x7 window
    # spans 2*(4-1) + (7-1) + 1 = 13 rows and columns of the padded input per channel.
    a = analyze(get_builtin("conv2d").instantiate(shape="yolo:C1"))
    pad, weight = a.reads
    assert str(pad) == "pad[b, rc, 2*i + rx, 2*j + ry]"
    assert pad.footprint({"b": 1, "rc": 3, "i": 4, "j": 4, "rx": 7, "ry": 7}) == 3 * 13 * 13
    # With a 1-wide kernel tile only every other row is touched: 4 rows, not the 7-row bounding box.
    assert pad.footprint({"rc": 3, "i": 4, "j": 4, "rx": 1, "ry": 1}) == 3 * 4 * 4
    assert pad.bounding_box({"rc": 3, "i": 4, "j": 4}) == (1, 3, 7, 7)
    assert weight.footprint({"k": 16, "rc": 3, "rx": 7, "ry": 7}) == 16 * 3 * 49
    assert a.flops == 2 * 64 * 224 * 224 * 3 * 7 * 7


def test_dilated_footprint_counts_distinct_rows():
    # rows 2*i + 2*rx, i < 6, rx < 3: even numbers 0..14 -> 8 distinct, bounding box 15.
    ix = AffineExpr((("i", 2), ("rx", 2)))
    assert footprint([ix], {"i": 6, "rx": 3}) == 8


def test_footprint_of_dimensions_linked_by_a_shared_loop():
    # T[i + k, k]: the diagonal band; dims share k, so the count is joint (not 4 * 3 = 12).
    band = [AffineExpr((("i", 1), ("k", 1))), AffineExpr((("k", 1),))]
    assert footprint(band, {"i": 2, "k": 3}) == 6
    # Shift conv: channel 6*gh + 2*gw + rc and rows i + gh share gh.
    a = analyze(get_builtin("shift_conv2d").instantiate(shape="small:s2"))
    pad = a.reads[0]
    assert str(pad) == "pad[b, 6*gh + 2*gw + rc, i + gh, j + gw]"
    tile = {"b": 1, "i": 1, "j": 1, "gh": 3, "gw": 3, "rc": 2}
    assert pad.footprint(tile) == 18  # one pixel of each of the 18 channels


def test_negative_coefficients_of_a_flipped_kernel():
    a = analyze(get_builtin("conv_transpose2d").instantiate(shape="small:s1"))
    weight = a.reads[1]
    assert str(weight) == "W[rc, k, -rx + 2, -ry + 2]"
    assert weight.footprint({"rc": 4, "k": 8, "rx": 3, "ry": 3}) == 4 * 8 * 9


def test_bilinear_and_bcm_flops():
    bil = analyze(get_builtin("bilinear").instantiate({"M": 4, "N": 5, "K": 6, "L": 7}))
    assert bil.flops == 3 * 4 * 5 * 6 * 7  # two multiplies and the accumulation per iteration
    bcm = analyze(get_builtin("bcm").instantiate({"batch": 2, "P": 3, "Q": 4, "block": 5}))
    assert bcm.flops == 2 * 2 * 3 * 5 * 4 * 5
    assert [n.name for n in bcm.nodes] == ["circulant", "O"]
    assert bcm.nodes[0].consumers == ("O",)


def test_int8_traffic_counts_one_byte_in_four_out():
    a = analyze(get_builtin("gemm").instantiate({"M": 8, "N": 8, "K": 8, "dtype": "int8"}))
    assert a.compulsory_bytes == 64 + 64 + 64 * 4


@hd.operator(N=16)
def _halving(N):
    from tvm import te

    A = te.placeholder((N,), name="A")
    k = te.reduce_axis((0, N), name="k")
    return [A, te.compute((N,), lambda i: te.sum(A[(i + k) // 2], axis=k), name="O")]


@hd.operator(N=16)
def _gather(N):
    from tvm import te

    A = te.placeholder((N,), name="A")
    idx = te.placeholder((N,), name="idx", dtype="int32")
    return [A, idx, te.compute((N,), lambda i: A[idx[i]], name="O")]


def test_non_affine_access_names_tensor_and_expression():
    with pytest.raises(AnalysisError, match=r"reads tensor A at index '\(i \+ k\) // 2', which is not an affine"):
        analyze(_halving.instantiate())


def test_data_dependent_access_is_named():
    message = r"reads tensor A at index 'idx\[i\]', which depends on the data of tensor idx"
    with pytest.raises(AnalysisError, match=message):
        analyze(_gather.instantiate())


def test_every_builtin_analyses_with_full_footprints_within_tensors():
    from hetero_dse.ops import BUILTIN

    for d in BUILTIN.values():
        a = analyze(d.instantiate(shape="small:s2"))
        tile = a.full_tile()
        for access in a.reads:
            size = 1
            for dim in access.shape:
                size *= dim
            assert 0 < access.footprint(tile) <= size, (d.name, str(access))
        assert a.flops > 0


@hd.operator(N=4)
def _same_names(N):
    from tvm import te

    A = te.placeholder((N, N), name="A")
    k1, k2 = te.reduce_axis((0, N), name="k"), te.reduce_axis((0, N), name="k")
    P = te.compute((N, N), lambda i, j: A[i, j] * 2, name="O")
    return [A, te.compute((N,), lambda i: te.sum(P[i, k1] * A[k2, i], axis=[k1, k2]), name="O")]


def test_repeated_node_and_loop_names_are_made_unique():
    a = analyze(_same_names.instantiate())
    assert [n.name for n in a.nodes] == ["O", "O_2"]
    assert [lp.name for lp in a.main.loops] == ["i", "k", "k_2"]
    assert [str(r) for r in a.reads] == ["O[i, k]", "A[k_2, i]"]
    assert a.reads[1].footprint({"i": 2, "k_2": 3}) == 6
