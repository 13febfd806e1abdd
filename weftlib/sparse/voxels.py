"""Occupied voxel sets of thin surfaces, at any grid resolution, without ever allocating a dense grid.

A voxel (integer cell `[i, i+1) x [j, j+1) x [k, k+1)` of a `res^3` grid over the unit cube) is occupied when
the surface passes through its closed box. Shapes live in the unit cube; meshes are scaled so their longest
side is just under 1 and centred, the way TRELLIS.2 normalises a mesh before voxelizing it.

Analytic shells (sphere, torus) are refined coarse-to-fine: a cell is kept when the surface meets it, exactly
(the distance to the shell's core over a box has a closed-form minimum and maximum), then split in eight.
Meshes use an exact triangle/box separating-axis test over candidate voxels taken column by column under each
triangle. Either way the work and memory grow with the occupied count (about res^2), not with res^3.

Every set comes back as `int64 [N, 3]` coordinates, unique and sorted by linear key, so results are
deterministic and `kernel_map` can search them directly.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    import pandas as pd

SHAPES = ("sphere", "torus", "bunny")
BUNNY_PATH = Path(__file__).resolve().parent / "data" / "bunny.npz"  # package data (pyproject: data/*)
_BOX_CHUNK = 1 << 21  # boxes tested per batch: bounds temporaries to ~100 MB at any resolution
_PAIR_CHUNK = 1 << 21  # (triangle, voxel) pairs tested per batch


# ----------------------------------------------------------------------------------------------- checks
def _check_res(res: int) -> None:
    if not isinstance(res, int) or isinstance(res, bool) or res < 2:
        raise ValueError(f"res must be an int >= 2 (voxels per side), got {res!r}")


def _check_shape(shape: str) -> None:
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")


# ----------------------------------------------------------------------------------------------- keys
def linear_keys(coords: torch.Tensor, res: int) -> torch.Tensor:
    """int64 key x*res^2 + y*res + z: the order of a C-contiguous [res, res, res] grid."""
    c = coords.to(torch.int64)
    return (c[:, 0] * res + c[:, 1]) * res + c[:, 2]


def _from_keys(keys: torch.Tensor, res: int) -> torch.Tensor:
    z = keys % res
    y = (keys // res) % res
    x = keys // (res * res)
    return torch.stack([x, y, z], dim=1)


def unique_sorted(coords: torch.Tensor, res: int) -> torch.Tensor:
    """Deduplicate voxel coordinates and sort them by linear key."""
    keys = torch.unique(linear_keys(coords, res))  # torch.unique sorts
    return _from_keys(keys, res)


# ----------------------------------------------------------------------------------------------- analytic shells
def _box_point_range(lo: torch.Tensor, hi: torch.Tensor, point: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Min and max Euclidean distance from `point` to each box [lo, hi] (last dim = coordinates)."""
    nearest = torch.clamp(point, lo, hi)
    dmin = torch.linalg.vector_norm(nearest - point, dim=-1)
    far = torch.maximum((lo - point).abs(), (hi - point).abs())
    dmax = torch.linalg.vector_norm(far, dim=-1)
    return dmin, dmax


def _sphere_test(center: float, radius: float) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    c = torch.full((3,), center, dtype=torch.float64)

    def hits(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
        dmin, dmax = _box_point_range(lo, hi, c)
        return (dmin <= radius) & (dmax >= radius)

    return hits


def _torus_test(center: float, major: float, minor: float) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Torus around the z axis through (center, center, center): points at distance `minor` from the core circle.

    The distance to the core circle depends on (rho, z) only, and a box maps onto the rectangle
    [rho_min, rho_max] x [z_lo, z_hi] of that plane, so its range over the box is the range of the distance
    from (major, 0) to that rectangle.
    """
    c2 = torch.full((2,), center, dtype=torch.float64)
    core = torch.tensor([major, 0.0], dtype=torch.float64)

    def hits(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
        rho_min, rho_max = _box_point_range(lo[:, :2], hi[:, :2], c2)
        rect_lo = torch.stack([rho_min, lo[:, 2] - center], dim=1)
        rect_hi = torch.stack([rho_max, hi[:, 2] - center], dim=1)
        dmin, dmax = _box_point_range(rect_lo, rect_hi, core)
        return (dmin <= minor) & (dmax >= minor)

    return hits


def _refine(hits: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], res: int) -> torch.Tensor:
    """Coarse-to-fine search: keep cells the surface meets, split them in eight, down to single voxels.

    Cells are integer boxes of side `size` voxels (a power of two) clipped to the grid; boxes are tested in
    unit-cube coordinates.
    """
    size = 1 << max(int(math.log2(res)) - 3, 0)
    n0 = -(-res // size)
    axis = torch.arange(n0, dtype=torch.int64) * size
    cells = torch.cartesian_prod(axis, axis, axis).reshape(-1, 3)
    children = torch.cartesian_prod(*([torch.tensor([0, 1], dtype=torch.int64)] * 3))
    while True:
        kept = []
        for start in range(0, len(cells), _BOX_CHUNK):
            part = cells[start : start + _BOX_CHUNK]
            lo = part.to(torch.float64) / res
            hi = torch.clamp(part + size, max=res).to(torch.float64) / res
            kept.append(part[hits(lo, hi)])
        cells = torch.cat(kept) if kept else cells[:0]
        if size == 1:
            return unique_sorted(cells, res)
        size //= 2
        cells = (cells[:, None, :] + children[None] * size).reshape(-1, 3)
        cells = cells[(cells < res).all(dim=1)]


SPHERE_RADIUS = 0.49999  # just under 1/2: the sphere fits the unit cube


def sphere_shell(res: int, radius: float = SPHERE_RADIUS, center: float = 0.5) -> torch.Tensor:
    """Voxels a sphere of `radius` (unit-cube units) passes through; the default just fits the unit cube."""
    _check_res(res)
    if not 0 < radius <= 0.5:
        raise ValueError(f"radius must be in (0, 0.5] to fit the unit cube, got {radius}")
    return _refine(_sphere_test(center, radius), res)


def torus_shell(res: int, major: float = 0.35, minor: float = 0.14, center: float = 0.5) -> torch.Tensor:
    """Voxels a torus (core circle `major`, tube `minor`, axis z) passes through."""
    _check_res(res)
    if not (0 < minor < major and major + minor <= 0.5):
        raise ValueError(f"need 0 < minor < major and major + minor <= 0.5, got major={major}, minor={minor}")
    return _refine(_torus_test(center, major, minor), res)


# ----------------------------------------------------------------------------------------------- meshes
def load_bunny() -> tuple[np.ndarray, np.ndarray]:
    """The Stanford bunny shipped with weftlib (npm bunny@1.0.1; see weftlib/data/README.md): vertices, faces."""
    with np.load(BUNNY_PATH) as data:
        return data["vertices"].astype(np.float64), data["faces"].astype(np.int64)


def normalize_mesh(vertices: np.ndarray, fill: float = 0.99999) -> np.ndarray:
    """Centre the mesh in the unit cube and scale its longest side to `fill` (just under 1)."""
    if vertices.ndim != 2 or vertices.shape[1] != 3:
        raise ValueError(f"vertices must be [V, 3], got {vertices.shape}")
    if not 0 < fill < 1:
        raise ValueError(f"fill must be in (0, 1) so the mesh stays inside the grid, got {fill}")
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    extent = float((hi - lo).max())
    if extent <= 0:
        raise ValueError("vertices span no volume")
    return (vertices - (lo + hi) / 2) * (fill / extent) + 0.5


def _expand(counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For ragged groups of sizes `counts`: the group of each item and its rank inside the group."""
    owner = torch.repeat_interleave(torch.arange(len(counts)), counts)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(int(counts.sum())) - starts[owner]
    return owner, rank


def _cell_range(lo: torch.Tensor, hi: torch.Tensor, res: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices k of the closed unit cells [k, k+1] that meet the interval [lo, hi], clipped to the grid."""
    first = torch.clamp(torch.ceil(lo) - 1, 0, res - 1).to(torch.int64)
    last = torch.clamp(torch.floor(hi), 0, res - 1).to(torch.int64)
    return first, last


def _projection(tri: torch.Tensor, res: int) -> dict[str, torch.Tensor]:
    """Per triangle: dominant normal axis w, the two other axes u, v, and its column range in (u, v)."""
    normal = torch.linalg.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    axis = normal.abs().argmax(dim=1)
    u_ax, v_ax = (axis + 1) % 3, (axis + 2) % 3
    rows = torch.arange(len(tri))
    lo, hi = _cell_range(tri.min(dim=1).values, tri.max(dim=1).values, res)
    return {
        "normal": normal,
        "w": axis,
        "u": u_ax,
        "v": v_ax,
        "u0": lo[rows, u_ax],
        "v0": lo[rows, v_ax],
        "nu": hi[rows, u_ax] - lo[rows, u_ax] + 1,
        "nv": hi[rows, v_ax] - lo[rows, v_ax] + 1,
    }


def _candidates(tri: torch.Tensor, res: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(triangle index, voxel) pairs that may intersect: under each triangle, per column along its dominant
    normal axis, the cells its plane crosses over that column square. A superset of the true pairs."""
    pr = _projection(tri, res)
    owner, rank = _expand(pr["nu"] * pr["nv"])
    nv = pr["nv"][owner]
    cu = pr["u0"][owner] + rank // nv
    cv = pr["v0"][owner] + rank % nv

    def pick(t: torch.Tensor, ax: str) -> torch.Tensor:
        return t.gather(1, pr[ax][owner, None]).squeeze(1)

    n = pr["normal"][owner]
    d = (n * tri[owner, 0]).sum(dim=1)
    nu_, nv_, nw = pick(n, "u"), pick(n, "v"), pick(n, "w")
    ws = torch.stack([(d - nu_ * (cu + a) - nv_ * (cv + b)) / nw for a in (0, 1) for b in (0, 1)], dim=1)
    wlo = torch.maximum(ws.min(dim=1).values, pick(tri[owner].min(dim=1).values, "w"))
    whi = torch.minimum(ws.max(dim=1).values, pick(tri[owner].max(dim=1).values, "w"))
    klo, khi = _cell_range(wlo, whi, res)
    col, krank = _expand(torch.clamp(khi - klo + 1, min=0))
    tri_of = owner[col]
    vox = torch.empty((len(col), 3), dtype=torch.int64)
    vox.scatter_(1, pr["w"][tri_of, None], (klo[col] + krank)[:, None])
    vox.scatter_(1, pr["u"][tri_of, None], cu[col, None])
    vox.scatter_(1, pr["v"][tri_of, None], cv[col, None])
    return tri_of, vox


def _tri_box_overlap(tri: torch.Tensor, center: torch.Tensor, half: float) -> torch.Tensor:
    """Exact separating-axis test (Akenine-Moller) of triangles [M, 3, 3] against boxes centre +- half.

    Thirteen candidate axes: the three box normals, the triangle normal, and the nine cross products of box
    axes with triangle edges (written out per component, which is several times faster than generic cross).
    """
    v = tri - center[:, None, :]
    x, y, z = v[..., 0], v[..., 1], v[..., 2]  # [M, 3] each: the three vertices' coordinates
    ok = (
        (x.amin(1) <= half)
        & (x.amax(1) >= -half)
        & (y.amin(1) <= half)
        & (y.amax(1) >= -half)
        & (z.amin(1) <= half)
        & (z.amax(1) >= -half)
    )
    e = v[:, [1, 2, 0]] - v  # edges e0 = v1-v0, e1 = v2-v1, e2 = v0-v2
    ex, ey, ez = e[..., 0], e[..., 1], e[..., 2]
    n = torch.linalg.cross(e[:, 0], e[:, 1])
    ok &= (n * v[:, 0]).sum(dim=1).abs() <= half * n.abs().sum(dim=1)
    for j in range(3):
        # axis x cross e_j = (0, -ez, ey); y cross e_j = (ez, 0, -ex); z cross e_j = (-ey, ex, 0)
        for pa, pb, ca, cb in ((z, y, ey[:, j], ez[:, j]), (x, z, ez[:, j], ex[:, j]), (y, x, ex[:, j], ey[:, j])):
            p = pa * ca[:, None] - pb * cb[:, None]
            r = half * (ca.abs() + cb.abs())
            ok &= (p.amin(1) <= r) & (p.amax(1) >= -r)
    return ok


def voxelize_mesh(vertices: np.ndarray, faces: np.ndarray, res: int) -> torch.Tensor:
    """Voxels whose closed box a triangle of the (already unit-cube) mesh intersects."""
    _check_res(res)
    if faces.ndim != 2 or faces.shape[1] != 3:
        raise ValueError(f"faces must be [F, 3], got {faces.shape}")
    verts = torch.as_tensor(vertices, dtype=torch.float64)
    if verts.min() < 0 or verts.max() > 1:
        raise ValueError("vertices must lie in the unit cube; call normalize_mesh first")
    tris = verts[torch.as_tensor(faces, dtype=torch.int64)] * res
    area2 = torch.linalg.vector_norm(torch.linalg.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]), dim=1)
    tris = tris[area2 > 0]  # a zero-area face lies on its neighbours' edges; it adds no voxel of its own
    pr = _projection(tris, res)
    columns = torch.cumsum(pr["nu"] * pr["nv"], 0)
    # triangles in batches of about _PAIR_CHUNK / 4 columns (a column holds a few candidate cells)
    bounds = torch.searchsorted(columns, torch.arange(0, int(columns[-1]) + 1, _PAIR_CHUNK // 4), right=True)
    edges = sorted(set(bounds.tolist()) | {0, len(tris)})
    keys = []
    for start, stop in itertools.pairwise(edges):
        tri = tris[start:stop]
        owner, vox = _candidates(tri, res)
        for s in range(0, len(owner), _PAIR_CHUNK):
            o, c = owner[s : s + _PAIR_CHUNK], vox[s : s + _PAIR_CHUNK]
            hit = _tri_box_overlap(tri[o], c.to(torch.float64) + 0.5, 0.5)
            keys.append(torch.unique(linear_keys(c[hit], res)))
    return _from_keys(torch.unique(torch.cat(keys)), res)


# ----------------------------------------------------------------------------------------------- one entry
def voxel_set(shape: str, res: int) -> torch.Tensor:
    """Occupied voxels of a named shape ('sphere', 'torus', 'bunny') at `res`: int64 [N, 3], sorted.

    Each set is built once per process and kept (the bunny at 1024 takes tens of seconds to voxelise and
    24 bytes a voxel to keep); every call returns its own copy."""
    _check_shape(shape)
    _check_res(res)
    return _built(shape, res).clone()


@functools.cache
def _built(shape: str, res: int) -> torch.Tensor:
    if shape == "sphere":
        return sphere_shell(res)
    if shape == "torus":
        return torus_shell(res)
    vertices, faces = load_bunny()
    return voxelize_mesh(normalize_mesh(vertices), faces, res)


def fit_exponent(res: list[int] | np.ndarray, counts: list[int] | np.ndarray) -> tuple[float, float]:
    """Least-squares slope and intercept of log N against log res (a thin shell gives a slope near 2)."""
    r, n = np.asarray(res, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    if r.shape != n.shape or len(r) < 2:
        raise ValueError(f"need two or more (res, count) pairs of equal length, got {r.shape} and {n.shape}")
    if (r <= 0).any() or (n <= 0).any():
        raise ValueError("res and counts must be positive to take logs")
    slope, intercept = np.polyfit(np.log(r), np.log(n), 1)
    return float(slope), float(intercept)


def count_table(shapes: list[str], resolutions: list[int], progress: bool = True) -> pd.DataFrame:
    """N(res) per shape with the occupied fraction of the grid (the sets stay built for later cells, `voxel_set`)."""
    import pandas as pd

    from weftlib.console import progress as tqdm

    for shape in shapes:
        _check_shape(shape)
    for res in resolutions:
        _check_res(res)
    cases = [(s, r) for s in shapes for r in resolutions]
    rows = [
        {"shape": s, "res": r, "N": len(voxel_set(s, r))}
        for s, r in tqdm(cases, desc="voxel sets", disable=not progress)
    ]
    df = pd.DataFrame(rows)
    df["grid_fraction"] = df["N"] / df["res"].astype("float64") ** 3
    return df


def sphere_expected_count(res: int | float, radius: float = SPHERE_RADIUS) -> float:
    """The sphere's voxel count in closed form, N ≈ 1.5 · 4π(R·res)²: a surface element with unit normal n
    crosses |n_x| + |n_y| + |n_z| voxel layers per unit area, 1.5 on average over a sphere."""
    return 6 * math.pi * (radius * res) ** 2


def sphere_count_error(counts: pd.DataFrame) -> float:
    """Largest relative deviation of the sphere's counts in a `count_table` from `sphere_expected_count`."""
    rows = counts[counts["shape"] == "sphere"]
    if rows.empty:
        raise ValueError("counts has no sphere rows")
    expected = rows["res"].astype(float).map(sphere_expected_count)
    return float((rows["N"] / expected - 1).abs().max())


def exponents(counts: pd.DataFrame) -> dict[str, float]:
    """Fitted exponent of N ~ res^p per shape in a `count_table`."""
    return {s: fit_exponent(g["res"].tolist(), g["N"].tolist())[0] for s, g in counts.groupby("shape", sort=False)}
