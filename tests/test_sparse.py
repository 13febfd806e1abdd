"""Voxel sets, the kernel map and every submanifold-convolution method against brute force and dense conv3d."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from weftlib import sparse
from weftlib.sparse import voxels


def random_coords(res: int, n: int, seed: int) -> torch.Tensor:
    """n distinct voxels of a res^3 grid, deliberately not sorted."""
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randperm(res**3, generator=gen)[:n]
    return torch.stack([keys // (res * res), (keys // res) % res, keys % res], dim=1)


def brute_map(coords: torch.Tensor, k: int) -> torch.Tensor:
    """The kernel map by dictionary lookup, offsets in the documented order (last axis fastest)."""
    where = {tuple(c): i for i, c in enumerate(coords.tolist())}
    offsets = list(itertools.product(range(-(k // 2), k // 2 + 1), repeat=3))
    return torch.tensor(
        [[where.get(tuple(c + o), -1) for o in np.asarray(offsets)] for c in np.asarray(coords.tolist())]
    )


def layer(n: int, cin: int, cout: int, k: int, seed: int, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    feats = torch.randn((n, cin), generator=gen)
    weight = torch.randn((cout, cin, k, k, k), generator=gen) / math.sqrt(cin * k**3)
    bias = torch.randn(cout, generator=gen)
    return feats.to(dtype), weight.to(dtype), bias.to(dtype)


# ----------------------------------------------------------------------------------------------- voxel sets
def brute_shell(test, res: int) -> torch.Tensor:
    grid = torch.cartesian_prod(*[torch.arange(res)] * 3)
    return voxels.unique_sorted(grid[test(grid.double() / res, (grid + 1).double() / res)], res)


@pytest.mark.parametrize("res", [7, 16, 21])
def test_analytic_shells_equal_brute_force_box_tests(res):
    assert torch.equal(voxels.sphere_shell(res), brute_shell(voxels._sphere_test(0.5, 0.49999), res))
    assert torch.equal(voxels.torus_shell(res), brute_shell(voxels._torus_test(0.5, 0.35, 0.14), res))


def test_sphere_box_test_is_exact_on_hand_cases():
    hits = voxels._sphere_test(0.5, 0.25)
    lo = torch.tensor([[0.7, 0.45, 0.45], [0.45, 0.45, 0.45], [0.0, 0.0, 0.0]], dtype=torch.float64)
    # box 1 straddles the sphere at x=0.75; box 2 sits inside it; box 3 is in a corner outside it
    assert hits(lo, lo + 0.1).tolist() == [True, False, False]


def test_mesh_voxelization_equals_brute_force_sat_over_all_voxels():
    vertices, faces = voxels.load_bunny()
    unit = voxels.normalize_mesh(vertices)
    res = 7
    grid = torch.cartesian_prod(*[torch.arange(res)] * 3)
    tris = torch.as_tensor(unit)[torch.as_tensor(faces)] * res
    centre = grid.double() + 0.5
    # every (triangle, voxel) pair meets the SAT's three box axes first (its bounding boxes overlap, computed as
    # the SAT computes them: rounding keeps min(v - c) = min(v) - c), and only those pairs go on to all 13 axes
    lo, hi = tris.amin(dim=1), tris.amax(dim=1)
    boxes = ((lo[:, None] - centre[None] <= 0.5) & (hi[:, None] - centre[None] >= -0.5)).all(dim=2)
    tri_at, voxel_at = boxes.nonzero(as_tuple=True)
    hit = torch.zeros(len(grid), dtype=torch.bool)
    hit[voxel_at[voxels._tri_box_overlap(tris[tri_at], centre[voxel_at], 0.5)]] = True
    assert torch.equal(voxels.voxelize_mesh(unit, faces, res), voxels.unique_sorted(grid[hit], res))


def test_triangle_box_test_rejects_a_triangle_only_an_edge_axis_separates():
    # its bounding box and its plane both meet the box [0, 1]^3, yet the triangle misses it
    tri = torch.tensor([[[0.5, 1.3, 2.2], [2.5, 2.1, 2.0], [1.9, -0.9, -0.8]]], dtype=torch.float64)
    centre = torch.tensor([[0.5, 0.5, 0.5]], dtype=torch.float64)
    assert not voxels._tri_box_overlap(tri, centre, 0.5).item()
    assert voxels._tri_box_overlap(tri, centre + torch.tensor([[1.0, 0.0, 0.0]]), 0.5).item()


def test_triangle_box_test_agrees_with_points_sampled_on_the_triangle():
    gen = torch.Generator().manual_seed(3)
    tris = torch.rand((400, 3, 3), generator=gen, dtype=torch.float64) * 3
    centers = torch.rand((400, 3), generator=gen, dtype=torch.float64) * 3
    w = torch.rand((400, 2000, 3), generator=gen, dtype=torch.float64)
    w = w / w.sum(dim=2, keepdim=True)
    points = torch.einsum("tpk,tkd->tpd", w, tris)
    inside = ((points - centers[:, None]).abs() <= 0.5).all(dim=2).any(dim=1)
    overlap = voxels._tri_box_overlap(tris, centers, 0.5)
    assert bool((overlap | ~inside).all()), "a sampled point inside the box but the test says no overlap"
    assert 20 < int(overlap.sum()) < 400


def test_normalize_mesh_fits_the_unit_cube_with_longest_side_just_under_one():
    vertices, _ = voxels.load_bunny()
    unit = voxels.normalize_mesh(vertices * 7 + 3)
    extent = unit.max(axis=0) - unit.min(axis=0)
    assert extent.max() == pytest.approx(0.99999)
    assert unit.min() > 0 and unit.max() < 1
    assert np.allclose((unit.max(axis=0) + unit.min(axis=0)) / 2, 0.5)


def test_bunny_data_is_the_npm_mesh():
    vertices, faces = voxels.load_bunny()
    assert vertices.shape == (1839, 3) and faces.shape == (3674, 3)
    assert faces.min() == 0 and faces.max() == 1838


def test_voxel_sets_are_unique_sorted_and_grow_as_res_squared():
    counts = voxels.count_table(["sphere", "torus", "bunny"], [32, 64], progress=False)
    for shape in ["sphere", "torus", "bunny"]:
        coords = voxels.voxel_set(shape, 48)
        keys = voxels.linear_keys(coords, 48)
        assert bool((keys[1:] > keys[:-1]).all()) and coords.min() >= 0 and coords.max() < 48
    assert all(1.8 < p < 2.2 for p in voxels.exponents(counts).values())


def test_sphere_count_matches_the_mean_projected_area_formula():
    n = len(voxels.sphere_shell(256))
    assert n == pytest.approx(6 * math.pi * (0.49999 * 256) ** 2, rel=0.01)
    assert voxels.sphere_expected_count(256) == 6 * math.pi * (0.49999 * 256) ** 2


def test_sphere_count_error_is_the_worst_relative_deviation_of_the_sphere_rows():
    import pandas as pd

    exact = [voxels.sphere_expected_count(r) for r in (16, 32)]
    counts = pd.DataFrame(
        {"shape": ["sphere", "sphere", "torus"], "res": [16, 32, 16], "N": [exact[0] * 1.02, exact[1] * 0.97, 1.0]}
    )
    assert voxels.sphere_count_error(counts) == pytest.approx(0.03)
    with pytest.raises(ValueError, match="no sphere"):
        voxels.sphere_count_error(counts[counts["shape"] == "torus"])


def test_fit_exponent_recovers_a_power_law():
    res = np.array([16, 32, 64, 128])
    slope, _ = voxels.fit_exponent(res, 5 * res**2.3)
    assert slope == pytest.approx(2.3)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: voxels.voxel_set("cube", 8), "shape must be one of"),
        (lambda: voxels.voxel_set("sphere", 1), "res must be an int >= 2"),
        (lambda: voxels.sphere_shell(8, radius=0.6), "radius"),
        (lambda: voxels.normalize_mesh(np.zeros((3, 3)) + 1), "span no volume"),
        (lambda: voxels.voxelize_mesh(np.ones((3, 3)) * 2, np.array([[0, 1, 2]]), 8), "unit cube"),
        (lambda: voxels.fit_exponent([8], [3]), "two or more"),
    ],
)
def test_voxel_argument_errors_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------------------------- kernel map
@pytest.mark.parametrize("k", [1, 3, 5])
def test_kernel_map_equals_brute_force_on_unsorted_random_sets(k):
    coords = random_coords(9, 250, seed=k)
    assert torch.equal(sparse.kernel_map(coords, k), brute_map(coords, k))


def test_kernel_map_on_a_sorted_shell_and_its_offset_order():
    coords = voxels.voxel_set("torus", 24)
    table = sparse.kernel_map(coords)
    assert torch.equal(table, brute_map(coords, 3))  # brute_map's offsets: last axis fastest
    assert torch.equal(table[:, 13], torch.arange(len(coords)))  # the centre offset is the voxel itself


@pytest.mark.parametrize(
    "coords, k, match",
    [
        (torch.zeros((4, 2), dtype=torch.int64), 3, r"coords must be \[N, 3\]"),
        (torch.zeros((4, 3)), 3, "integer"),
        (-torch.ones((4, 3), dtype=torch.int64), 3, "non-negative"),
        (torch.zeros((2, 3), dtype=torch.int64), 3, "unique"),
        (torch.zeros((1, 3), dtype=torch.int64), 2, "odd"),
    ],
)
def test_kernel_map_argument_errors(coords, k, match):
    if match == "unique":
        coords = torch.tensor([[1, 2, 3], [0, 0, 0], [1, 2, 3]])
    with pytest.raises(ValueError, match=match):
        sparse.kernel_map(coords, k)


# ----------------------------------------------------------------------------------------------- convolution
@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("method", sparse.METHODS)
def test_every_method_equals_dense_conv3d_fp32(method, k):
    res = 11
    coords = random_coords(res, 300, seed=10 + k)
    feats, weight, bias = layer(len(coords), 6, 5, k, seed=k)
    out = sparse.submanifold_conv3d(
        feats, sparse.kernel_map(coords, k), weight, bias, method=method, coords=coords, res=res, chunk_rows=41
    )
    ref = sparse.reference_conv3d(feats, coords, weight, res, bias)
    assert out.dtype == torch.float32 and out.shape == (300, 5)
    assert (out.double() - ref).abs().max().item() <= 1e-4


def test_equality_errors_give_each_method_s_worst_difference_from_conv3d():
    res = 11
    coords = random_coords(res, 200, seed=3)
    feats, weight, bias = layer(len(coords), 4, 4, 3, seed=3)
    nbr = sparse.kernel_map(coords)
    errors = sparse.equality_errors(feats, nbr, weight, bias, coords, res)
    assert list(errors) == list(sparse.METHODS) and max(errors.values()) <= 1e-4
    centre_dropped = nbr.clone()
    centre_dropped[:, 13] = -1  # the table-reading methods then miss every voxel's own tap
    wrong = sparse.equality_errors(feats, centre_dropped, weight, bias, coords, res, ("im2col",))
    assert list(wrong) == ["im2col"] and wrong["im2col"] > 1e-2


@pytest.mark.parametrize("method", sparse.METHODS)
def test_every_method_in_fp16_is_within_half_precision_of_the_reference(method):
    res = 12
    coords = voxels.voxel_set("bunny", res)
    feats, weight, bias = layer(len(coords), 8, 8, 3, seed=5, dtype=torch.float16)
    out = sparse.submanifold_conv3d(
        feats, sparse.kernel_map(coords), weight, bias, method=method, coords=coords, res=res
    )
    ref = sparse.reference_conv3d(feats.float(), coords, weight.float(), res, bias.float())
    assert out.dtype == torch.float16
    # outputs are O(1); fp16 keeps ~3 significant digits through a 216-term sum
    assert (out.double() - ref).abs().max().item() <= 1e-2


@pytest.mark.parametrize("method", sparse.METHODS)
def test_methods_are_deterministic_and_correct_on_two_threads(method):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        coords = voxels.voxel_set("sphere", 20)
        nbr = sparse.kernel_map(coords)
        feats, weight, _ = layer(len(coords), 16, 16, 3, seed=7)
        runs = [
            sparse.submanifold_conv3d(feats, nbr, weight, method=method, coords=coords, res=20, chunk_rows=500)
            for _ in range(2)
        ]
    finally:
        torch.set_num_threads(before)
    assert torch.equal(runs[0], runs[1])
    assert (runs[0].double() - sparse.reference_conv3d(feats, coords, weight, 20)).abs().max().item() <= 1e-4


def test_im2col_chunking_does_not_change_the_result():
    coords = voxels.voxel_set("bunny", 16)
    nbr = sparse.kernel_map(coords)
    feats, weight, _ = layer(len(coords), 4, 3, 3, seed=2)
    whole = sparse.submanifold_conv3d(feats, nbr, weight, method="im2col")
    assert all(
        torch.allclose(whole, sparse.submanifold_conv3d(feats, nbr, weight, method="im2col", chunk_rows=c), atol=1e-6)
        for c in (1, 7, len(coords) - 1, len(coords) + 5)
    )


def test_dense_refuses_above_its_budget_and_names_the_bytes():
    coords = voxels.voxel_set("sphere", 16)
    feats, weight, _ = layer(len(coords), 4, 4, 3, seed=0)
    need = sparse.dense_bytes(1024, 64, 64, torch.float16)
    assert need == 2**30 * 128 * 2  # two 64-channel fp16 grids of 2^30 cells
    grids = 2 * sparse.densify(feats, coords, 16).nbytes  # the real input grid, and an output grid as large
    with pytest.raises(sparse.DenseBudgetError, match=f"needs {grids} bytes"):
        sparse.submanifold_conv3d(
            feats, sparse.kernel_map(coords), weight, method="dense", coords=coords, res=16, budget_bytes=1000
        )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"method": "hash"}, "method must be one of"),
        ({"weight": torch.zeros((4, 3, 3, 3, 3))}, "Cin=3"),
        ({"weight": torch.zeros((4, 4, 3, 3, 2))}, "Conv3d layout"),
        ({"nbr": torch.zeros((5, 27), dtype=torch.int64)}, r"nbr must be \[N, k\^3\]"),
        ({"nbr": torch.zeros((10, 27), dtype=torch.int32)}, "int64"),
        ({"bias": torch.zeros(3)}, r"bias must be \[Cout\]"),
        ({"method": "dense"}, "needs coords= and res="),
        ({"chunk_rows": 0}, "chunk_rows"),
        ({"method": "dense", "coords": torch.full((10, 3), 8), "res": 8}, "outside a grid of res=8"),
    ],
)
def test_conv_argument_errors_name_the_argument(kwargs, match):
    args = {
        "feats": torch.zeros((10, 4)),
        "nbr": torch.zeros((10, 27), dtype=torch.int64),
        "weight": torch.zeros((4, 4, 3, 3, 3)),
        **kwargs,
    }
    with pytest.raises(ValueError, match=match):
        sparse.submanifold_conv3d(**args)


def test_accumulate_export_has_no_scatter_and_matches_torch(tmp_path):
    from weftlib.onnx_core import inventory

    coords = voxels.voxel_set("sphere", 8)
    feats, weight, bias = layer(len(coords), 4, 4, 3, seed=9)
    reports = sparse.export_methods(weight, bias, feats, sparse.kernel_map(coords), tmp_path, ("accumulate",))
    report = reports["accumulate"]
    assert report.parity_ok and "ScatterND" not in report.ops
    assert report.ops.get("Gemm", 0) + report.ops.get("MatMul", 0) == 27  # one product per offset
    assert inventory.inventory(report.path) == report.ops


# ----------------------------------------------------------------------------------------------- auto / grouped
@pytest.mark.parametrize("chunk_rows", [1, 3, 64, 1000, None])
def test_compact_equals_dense_conv3d_across_chunk_boundaries(chunk_rows):
    coords = voxels.voxel_set("sphere", 32)
    nbr = sparse.kernel_map(coords)
    feats, weight, bias = layer(len(coords), 5, 7, 3, seed=11)
    out = sparse.submanifold_conv3d(feats, nbr, weight, bias, method="compact", chunk_rows=chunk_rows)
    ref = sparse.reference_conv3d(feats, coords, weight, 32, bias)
    assert (out.double() - ref).abs().max().item() <= 1e-4


def test_compact_handles_voxels_that_are_not_their_own_neighbour_and_empty_taps():
    coords = random_coords(9, 200, seed=4)
    nbr = sparse.kernel_map(coords, 5)
    nbr[::7] = -1  # rows that see nothing, not even themselves (a caller-made table)
    nbr[:, 3] = -1  # a tap no row has
    feats, weight, _ = layer(len(coords), 3, 4, 5, seed=4)
    ref = sparse.submanifold_conv3d(feats, nbr, weight, method="accumulate")
    for chunk in (2, 17, None):
        out = sparse.submanifold_conv3d(feats, nbr, weight, method="compact", chunk_rows=chunk)
        assert torch.allclose(out, ref, atol=1e-5)
    assert (out[::7] == 0).all()


@pytest.mark.parametrize("chunk_rows", [1, 5, 64, 4096])
def test_rulebook_pairs_are_exactly_the_tables_neighbours(chunk_rows):
    coords = random_coords(12, 300, seed=2)
    nbr = sparse.kernel_map(coords)
    book = sparse.rulebook(nbr, chunk_rows)
    assert book.pairs == int((nbr >= 0).sum()) and book.table is nbr and book.chunk_rows == chunk_rows
    seen = set()
    for c, start in enumerate(range(0, len(nbr), chunk_rows)):
        p0, p1 = book.chunk_starts[c], book.chunk_starts[c + 1]
        tap_of = torch.repeat_interleave(torch.arange(27), book.tap_ends[c].diff(prepend=torch.zeros(1)).long())
        stop = min(len(nbr), start + chunk_rows)
        bounds = torch.cat([book.bag_starts[start:stop].long(), torch.tensor([p1 - p0])])
        for i in range(start, stop):
            for p in book.bags[p0:p1][bounds[i - start] : bounds[i - start + 1]].tolist():
                o = int(tap_of[p])
                assert nbr[i, o] == book.sources[p0 + p], (i, o)
                seen.add((i, o))
    assert seen == {(i, o) for i, o in (nbr >= 0).nonzero().tolist()}


@pytest.mark.parametrize("chunk_rows", [1, 3, 64, 1000, None])
def test_auto_with_a_rulebook_equals_dense_conv3d_across_chunk_boundaries(chunk_rows):
    coords = voxels.voxel_set("sphere", 32)
    feats, weight, bias = layer(len(coords), 5, 7, 3, seed=12)
    book = sparse.rulebook(sparse.kernel_map(coords), chunk_rows)
    out = sparse.submanifold_conv3d(feats, book, weight, bias)  # auto: compact, given a rulebook
    ref = sparse.reference_conv3d(feats, coords, weight, 32, bias)
    assert (out.double() - ref).abs().max().item() <= 1e-4
    for method in ("im2col", "accumulate"):  # the named methods read the table the rulebook carries
        other = sparse.submanifold_conv3d(feats, book, weight, bias, method=method)
        assert (other.double() - ref).abs().max().item() <= 1e-4


def test_rulebook_refuses_bad_input_and_mismatched_chunks():
    nbr = sparse.kernel_map(voxels.voxel_set("sphere", 8))
    feats, weight, _ = layer(len(nbr), 2, 2, 3, seed=1)
    with pytest.raises(ValueError, match="int64"):
        sparse.rulebook(nbr.int())
    with pytest.raises(ValueError, match="chunk_rows"):
        sparse.rulebook(nbr, 0)
    with pytest.raises(ValueError, match="differs from the rulebook"):
        sparse.submanifold_conv3d(feats, sparse.rulebook(nbr, 16), weight, chunk_rows=32)
    with pytest.raises(ValueError, match="nbr must be"):
        sparse.submanifold_conv3d(feats[:-1], sparse.rulebook(nbr), weight)


def test_auto_picks_compact_given_a_rulebook_or_a_table_and_im2col_under_an_exporter():
    # issue 33: a bare table runs compact too, on the rulebook conv.rulebook_of keeps for it
    assert sparse.choose_method(10**6, 27) == "compact" and sparse.choose_method(10**6, 27, tracing=True) == "im2col"
    assert sparse.choose_method(10**6, 27, has_rulebook=True) == "compact"
    assert sparse.choose_method(10**6, 27, tracing=True, has_rulebook=True) == "im2col"
    assert sparse.auto_chunk_rows("im2col", 27, 64, 4, sparse.SMALL_ROWS - 1) is None
    rows = sparse.auto_chunk_rows("im2col", 27, 64, 4, 10**6)
    assert 256 <= rows <= 65536 and sparse.auto_chunk_rows("compact", 27, 64, 4, 10**6) == rows
    assert sparse.l2_cache_bytes() >= 1 << 16


@pytest.mark.parametrize("shape, res", [("sphere", 8), ("sphere", 32)])  # about 300 and 4,800 voxels
def test_auto_default_equals_dense_conv3d_on_both_sides_of_the_small_set_limit(shape, res):
    coords = voxels.voxel_set(shape, res)
    feats, weight, bias = layer(len(coords), 6, 6, 3, seed=res)
    out = sparse.submanifold_conv3d(feats, sparse.kernel_map(coords), weight, bias)  # method="auto"
    assert (out.double() - sparse.reference_conv3d(feats, coords, weight, res, bias)).abs().max().item() <= 1e-4


class _AutoConv(torch.nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)

    def forward(self, feats: torch.Tensor, nbr: torch.Tensor) -> torch.Tensor:
        return sparse.submanifold_conv3d(feats, nbr, self.weight)  # method="auto"


def test_auto_under_the_exporter_exports_the_static_im2col_form(tmp_path):
    from weftlib.onnx_core import export as onnx_export

    coords = voxels.voxel_set("sphere", 32)
    assert len(coords) >= sparse.SMALL_ROWS  # eager auto would chunk here
    feats, weight, _ = layer(len(coords), 4, 4, 3, seed=1)
    report = onnx_export.export(
        _AutoConv(weight),
        (feats, sparse.kernel_map(coords)),
        tmp_path / "auto.onnx",
        input_names=["feats", "nbr"],
        output_names=["out"],
    )
    assert report.parity_ok and report.ops.get("Gather", 0) == 1 and report.ops.get("MatMul", 0) == 1
    assert not {"TopK", "Loop", "ScatterND", "Unique"} & set(report.ops), report.ops


@pytest.mark.parametrize("dtype, tol", [(torch.float16, 2e-3), (torch.bfloat16, 2e-2), (torch.float64, 1e-12)])
def test_compact_keeps_the_feature_dtype(dtype, tol):
    coords = voxels.voxel_set("sphere", 16)
    feats, weight, _ = layer(len(coords), 8, 8, 3, seed=3)
    out = sparse.submanifold_conv3d(feats.to(dtype), sparse.rulebook(sparse.kernel_map(coords)), weight.to(dtype))
    ref = sparse.reference_conv3d(feats.to(dtype).double(), coords, weight.to(dtype).double(), 16)
    assert out.dtype == dtype and (out.double() - ref).abs().max().item() <= tol
